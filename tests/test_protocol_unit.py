"""The sensor <-> run protocol (dagster_integration/protocol.py): positions round-trip through
run tags and materialization metadata exactly as both sides read them. No services."""

import dagster as dg
import pytest

from dagster_mysql_cdc.dagster_integration.protocol import (
    BINLOG_METADATA_KEY,
    WINDOW_END_TAG,
    binlog_asset_key,
    position_from_metadata,
    position_from_tag,
    position_metadata,
    position_tag,
)
from dagster_mysql_cdc.events import BinlogPosition


def _as_recorded(md: dict) -> dict:
    """Metadata as the event log returns it: every value a MetadataValue."""
    return {k: v if isinstance(v, dg.MetadataValue) else dg.MetadataValue.text(v) for k, v in md.items()}


@pytest.mark.parametrize("gtid", ["0-1-42", "3E11FA47-71CA-11E1-9E33-C80AA9429562:1-5", None])
def test_positions_round_trip_through_tags_and_metadata(gtid):
    pos = BinlogPosition("mysql-bin.000003", 1234, gtid)
    assert position_from_tag({WINDOW_END_TAG: position_tag(pos)}, WINDOW_END_TAG) == pos
    md = _as_recorded(position_metadata("window_end", pos))
    assert position_from_metadata(md, "window_end") == pos


def test_metadata_prefixes_are_tried_in_order():
    snap, end = BinlogPosition("mysql-bin.000001", 4), BinlogPosition("mysql-bin.000002", 99)
    md = _as_recorded({**position_metadata("snapshot", snap), **position_metadata("window_end", end)})
    assert position_from_metadata(md, "window_end", "snapshot") == end
    assert position_from_metadata(md, "snapshot", "window_end") == snap
    assert position_from_metadata(md, "low_watermark") is None


def test_a_missing_or_broken_tag_raises():
    with pytest.raises(KeyError):
        position_from_tag({}, WINDOW_END_TAG)
    with pytest.raises(ValueError):
        position_from_tag({WINDOW_END_TAG: "not json"}, WINDOW_END_TAG)


def test_binlog_asset_key_finds_the_marked_spec():
    specs = [
        dg.AssetSpec(["s", "db", "t"]),
        dg.AssetSpec(["s", "binlog"], metadata={BINLOG_METADATA_KEY: "s"}),
    ]
    assert binlog_asset_key(specs) == dg.AssetKey(["s", "binlog"])
    assert binlog_asset_key(specs[:1]) is None
