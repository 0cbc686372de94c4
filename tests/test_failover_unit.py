"""Pure parts of failover-safe offsets (no services): identities in the cursor, position checks."""

from __future__ import annotations

import pytest

from dagster_mysql_cdc.dagster_integration.cursor import CorruptCursorError, StreamCursor
from dagster_mysql_cdc.events import BinlogPosition
from dagster_mysql_cdc.source.failover import ServerIdentity, position_problem

FILES = [("mysql-bin.000001", 995), ("mysql-bin.000002", 2374)]
CURRENT = BinlogPosition("mysql-bin.000002", 2374, "0-11-9")


def test_identity_round_trips_through_the_cursor():
    ident = ServerIdentity(2, None, 2, "mysql-bin.001001", "0-1-20", "127.0.0.1:3316")
    c = StreamCursor(committed=BinlogPosition("mysql-bin.001001", 1111, "0-1-20"), server=ident.to_dict())
    back = StreamCursor.parse(c.to_json())
    assert back.identity() == ident
    assert StreamCursor.parse('{"v": 1, "committed": null}').identity() is None
    assert "server_id=2" in ident.describe() and "mysql-bin.001001 starts at [0-1-20]" in ident.describe()


def test_malformed_identity_is_a_corrupt_cursor():
    with pytest.raises(CorruptCursorError, match="Not a server identity"):
        StreamCursor.parse('{"v": 1, "server": {"server_uuid": "x"}}', "s")


@pytest.mark.parametrize(
    ("pos", "problem"),
    [
        (BinlogPosition("mysql-bin.000001", 1687), "mysql-bin.000001 is only 995 bytes long here"),
        (BinlogPosition("mysql-bin.000002", 5000), "ahead of the server's end mysql-bin.000002:2374"),
        (BinlogPosition("mysql-bin.000007", 4), "ahead of the server's end"),
        (BinlogPosition("mysql-bin.000002", 2374), None),
        (BinlogPosition("mysql-bin.000001", 400), None),
    ],
)
def test_position_problem(pos, problem):
    got = position_problem(pos, FILES, CURRENT)
    assert (got is None) if problem is None else (problem in (got or ""))


def test_purged_file_is_left_to_the_planner():
    files = [("mysql-bin.000005", 100), ("mysql-bin.000006", 200)]
    assert (
        position_problem(
            BinlogPosition("mysql-bin.000002", 4), files, BinlogPosition("mysql-bin.000006", 200)
        )
        is None
    )
    gap = position_problem(
        BinlogPosition("mysql-bin.000005", 4), [("mysql-bin.000004", 9), ("mysql-bin.000006", 9)], CURRENT
    )
    assert gap is not None and "does not exist here" in gap
