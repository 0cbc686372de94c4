"""Pure parts of failover-safe offsets (no services): identities in the cursor, position checks."""

from __future__ import annotations

import pytest

from dagster_mysql_cdc.dagster_integration.cursor import CorruptCursorError, StreamCursor
from dagster_mysql_cdc.events import BinlogPosition
from dagster_mysql_cdc.source.failover import (
    OffsetError,
    ServerIdentity,
    locate_first_missing,
    position_problem,
)
from dagster_mysql_cdc.source.gtid import MariaDbGtidSet, MySqlGtidSet

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


# -- locate_first_missing on synthetic binlog listings (SHOW BINLOG EVENTS rows) ------------------

U1 = "3e11fa47-71ca-11e1-9e33-c80aa9429562"
U2 = "4f22fb58-82db-22f2-af44-d91bb953a673"


def listing(file: str, gtids: list[str], *, mariadb: bool, start_gtids: str = "") -> list[tuple]:
    """The rows of one binlog file: header, start GTIDs event, then one transaction per GTID
    (a GTID event of 42 bytes and a 100-byte body)."""
    rows: list[tuple] = [(file, 4, "Format_desc", 1, 256, "Server ver")]
    if mariadb:
        rows.append((file, 256, "Gtid_list", 1, 285, f"[{start_gtids}]"))
    else:
        rows.append((file, 256, "Previous_gtids", 1, 285, start_gtids))
    pos = 285
    for g in gtids:
        info = f"BEGIN GTID {g}" if mariadb else f"SET @@SESSION.GTID_NEXT= '{g}'"
        rows.append((file, pos, "Gtid", 1, pos + 42, info))
        rows.append((file, pos + 42, "Xid" if mariadb else "Query", 1, pos + 142, "COMMIT"))
        pos += 142
    return rows


def locate(want, have, files: dict[str, tuple[str, list[str]]], mariadb=True):
    parse = MariaDbGtidSet.parse if mariadb else MySqlGtidSet.parse
    names = list(files)
    rows = {f: listing(f, g, mariadb=mariadb, start_gtids=s) for f, (s, g) in files.items()}
    last = names[-1]
    current = BinlogPosition(last, rows[last][-1][4])
    return locate_first_missing(
        parse(want), parse(have), names, [parse(s) for s, _ in files.values()], rows.__getitem__, current
    )


def test_mariadb_first_missing_in_the_right_file():
    files = {
        "mysql-bin.001001": ("", ["0-1-17", "0-1-18", "0-1-19"]),
        "mysql-bin.001002": ("0-1-19", ["0-1-20", "0-1-21", "2-2-1"]),
    }
    pos, first = locate("0-1-20", "0-1-21,2-2-1", files)
    assert (first, pos.file, pos.pos, pos.gtid_set) == ("0-1-21", "mysql-bin.001002", 427, "0-1-20")
    # nothing missing: the end of the binlog, with the committed set
    pos, first = locate("0-1-21,2-2-1", "0-1-21,2-2-1", files)
    assert first is None and (pos.file, pos.pos) == ("mysql-bin.001002", 711)


def test_mariadb_errant_purged_unlogged_interleaved():
    files = {"mysql-bin.000003": ("0-1-10", ["0-1-11", "0-11-12"])}
    with pytest.raises(OffsetError, match=r"never executed: 0-1-12 \(the server has 0-1-11, 0-11-12"):
        locate("0-1-12", "0-1-11,0-11-12", files)
    with pytest.raises(OffsetError, match="oldest binlog file mysql-bin.000003 starts after"):
        locate("0-1-5", "0-1-11,0-11-12", files)
    # a replica seeded at 0-1-16 (gtid_slave_pos) whose binlog starts at 0-1-17: 0-1-11..16 are not in it
    seeded = {"mysql-bin.001001": ("", ["0-1-17"])}
    with pytest.raises(OffsetError, match=r"starts GTID domain 0 at sequence number 17.*0-\*-10"):
        locate("0-1-10", "0-1-17", seeded)
    assert locate("0-1-16", "0-1-17", seeded)[1] == "0-1-17"
    with pytest.raises(OffsetError, match=r"holds no transaction of GTID domain 0, executed up to 0-\*-16"):
        locate("0-1-10", "0-1-16,2-2-1", {"mysql-bin.001001": ("", ["2-2-1"])})
    # domains interleave around the cut: 1-5-3 is committed but follows the first missing 0-1-2
    mixed = {"mysql-bin.000001": ("", ["0-1-1", "0-1-2", "1-5-3"])}
    with pytest.raises(OffsetError, match="without reading a transaction twice: 1-5-3"):
        locate("0-1-1,1-5-3", "0-1-2,1-5-3", mixed)


def test_mysql_first_missing_and_errors():
    files = {
        "binlog.000001": ("", [f"{U1}:1", f"{U1}:2"]),
        "binlog.000002": (f"{U1}:1-2", [f"{U1}:3", f"{U2}:1", f"{U1}:4"]),
    }
    pos, first = locate(f"{U1}:1-3", f"{U1}:1-4,{U2}:1", files, mariadb=False)
    assert (first, pos.file, pos.pos, pos.gtid_set) == (f"{U2}:1", "binlog.000002", 427, f"{U1}:1-3")
    with pytest.raises(OffsetError, match=rf"never executed: {U2}:2"):
        locate(f"{U1}:1-3,{U2}:1-2", f"{U1}:1-4,{U2}:1", files, mariadb=False)
    # U1:4 is committed but follows the first missing U2:1
    with pytest.raises(OffsetError, match="reading a transaction twice"):
        locate(f"{U1}:1-4", f"{U1}:1-4,{U2}:1", files, mariadb=False)
    # executed but not in the binlog (log_replica_updates=OFF)
    with pytest.raises(OffsetError, match="log_slave_updates=ON"):
        locate(f"{U1}:1-4,{U2}:1", f"{U1}:1-9,{U2}:1", files, mariadb=False)
