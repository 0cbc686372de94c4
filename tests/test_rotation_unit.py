"""Pure logic of the rotating verification: its cursor, key ranges, the status line, file pruning."""

import datetime as dt
from decimal import Decimal

import pyarrow as pa
from deltalake import DeltaTable, write_deltalake

from dagster_mysql_cdc.dagster_integration.rotation import (
    RotationState,
    TableRotation,
    _decode_key,
    _encode_key,
    _key_where,
    status_line,
)
from dagster_mysql_cdc.dagster_integration.status import CaptureStatus
from dagster_mysql_cdc.sink.read import _files_in_range, read_current
from dagster_mysql_cdc.sink.storage import StorageSettings


def test_cursor_round_trips_keys_of_every_type():
    key = (7, "a", dt.datetime(2024, 1, 2, 3, 4, 5, 6), dt.date(2024, 1, 2), Decimal("1.50"), b"\x00\xff")
    state = RotationState(tables={"db.t": TableRotation(after=_encode_key(key), rows_done=5)}, current="db.t")
    again = RotationState.parse(state.to_json())
    assert _decode_key(again.tables["db.t"].after) == key
    assert again.current == "db.t" and again.tables["db.t"].rows_done == 5
    assert RotationState.parse(None).tables == {}


def test_key_where_is_an_exclusive_start_and_inclusive_end():
    where, params = _key_where(["a", "b"], (1, "x"), (5, "y"))
    assert where == (
        "((`a` > %s) OR (`a` = %s AND `b` > %s)) AND "
        "((`a` < %s) OR (`a` = %s AND `b` < %s) OR (`a` = %s AND `b` = %s))"
    )
    assert params == [1, 1, "x", 5, 5, "y", 5, "y"]
    assert _key_where(["id"], None, None) == ("1=1", [])


def test_status_line_shows_age_progress_and_a_differing_range():
    now = 10_000.0
    state = RotationState(
        tables={
            "db.a": TableRotation(
                last_full_pass=now - 240, rows_total=100, rows_done=40, pass_started=now - 10, passes=1
            ),
            "db.b": TableRotation(rows_done=150),
            "db.k": TableRotation(skipped="no primary key"),
        },
        suspect={"table": "db.b", "differing": 2},
    )
    line = status_line(state.to_json(), now=now)
    assert line == (
        "verification: db.a verified 4 min ago, 40 % of next pass; db.b first pass 150 rows; "
        "db.k skipped (no primary key) | differing: db.b 2 key(s)"
    )
    assert status_line(None) == "verification: not started"
    lines = CaptureStatus(sensor="s", committed=None, server=None, verification=line).lines()
    assert lines[-1] == line


def test_key_range_reads_only_the_state_files_that_may_hold_it(tmp_path):
    uri = str(tmp_path / "state")
    for lo in (0, 100, 200):  # three files of disjoint key ranges
        ids = list(range(lo, lo + 100))
        write_deltalake(
            uri,
            pa.table({"id": ids, "v": ids, "__deleted": [False] * 100}),
            mode="append",
            configuration={"delta.dataSkippingNumIndexedCols": "32"},
        )
    storage = StorageSettings(base_uri=str(tmp_path))
    whole = read_current(storage, uri, live=True, with_tail=False)
    assert whole is not None and whole.num_rows == 300
    part = read_current(storage, uri, live=True, with_tail=False, key_range=("id", 150, 160))
    assert part is not None and sorted(part.column("id").to_pylist()) == list(range(150, 161))
    dtable = DeltaTable(uri)
    files = pa.table(dtable.get_add_actions(flatten=True)).column("path").to_pylist()
    assert len(_files_in_range(dtable, files, ("id", 150, 160))) == 1
    assert len(_files_in_range(dtable, files, ("id", 99, 100))) == 2
    assert len(_files_in_range(dtable, files, ("id", None, None))) == 3
    open_end = read_current(storage, uri, live=True, with_tail=False, key_range=("id", 290, None))
    assert open_end is not None and sorted(open_end.column("id").to_pylist()) == list(range(290, 300))
