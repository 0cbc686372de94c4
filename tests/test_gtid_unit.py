"""GTID sets of both flavours (dagster_mysql_cdc.source.gtid): pure logic, no services."""

from __future__ import annotations

import pytest

from dagster_mysql_cdc.source.gtid import (
    GtidSetError,
    MariaDbGtid,
    MariaDbGtidSet,
    MySqlGtidSet,
    parse_gtid_set,
)

U1 = "3e11fa47-71ca-11e1-9e33-c80aa9429562"
U2 = "4f22fb58-82db-22f2-af44-d91bb953a673"


# -- MariaDB ------------------------------------------------------------------------------------
def test_mariadb_parse_and_format():
    s = MariaDbGtidSet.parse("1-2-7, 0-1-42")
    assert str(s) == "0-1-42,1-2-7"
    assert MariaDbGtidSet.parse("[0-1-5,0-11-6]").domains() == {0: 6}
    assert str(MariaDbGtidSet.parse("")) == ""
    assert MariaDbGtidSet.parse(None).entries == ()
    assert MariaDbGtid.parse("0-11-6") == MariaDbGtid(0, 11, 6)


@pytest.mark.parametrize("bad", ["0-1", "a-b-c", "0-1-2-3", "uuid:1-5"])
def test_mariadb_parse_errors(bad):
    with pytest.raises(GtidSetError, match="domain-server-seq"):
        MariaDbGtidSet.parse(bad)


def test_mariadb_contains_by_domain_position():
    pos = MariaDbGtidSet.parse("0-11-6,1-2-3")
    assert pos.contains_gtid("0-11-6")
    assert pos.contains_gtid("0-1-4")  # seq grows per domain, whichever server wrote it
    assert not pos.contains_gtid("0-11-7")
    assert not pos.contains_gtid("2-1-1")  # a domain the position has never seen
    assert MariaDbGtidSet.parse("0-1-5").issubset(pos)
    assert not MariaDbGtidSet.parse("0-1-5,2-1-1").issubset(pos)


def test_mariadb_position_and_advance():
    state = MariaDbGtidSet.parse("0-1-500,0-11-501,1-2-3")
    assert str(state.position()) == "0-11-501,1-2-3"
    assert str(MariaDbGtidSet.parse("0-1-5").advance("0-11-6")) == "0-11-6"
    assert str(MariaDbGtidSet.parse("0-1-5").advance("2-12-1")) == "0-1-5,2-12-1"


def test_mariadb_missing_from_detects_divergence():
    # the old primary wrote 0-1-501, the promoted replica wrote its own 0-11-501
    committed = MariaDbGtidSet.parse("0-1-501")
    state = MariaDbGtidSet.parse("0-1-500,0-11-501")
    missing = committed.missing_from(state)
    assert len(missing) == 1 and missing[0].startswith("0-1-501") and "0-11-501" in missing[0]
    assert MariaDbGtidSet.parse("0-1-500").missing_from(state) == []
    assert MariaDbGtidSet.parse("3-1-1").missing_from(state)[0].startswith("3-1-1 (the server has nothing")


# -- MySQL --------------------------------------------------------------------------------------
def test_mysql_parse_merge_format():
    s = MySqlGtidSet.parse(f"{U1}:1-3:5,\n{U1.upper()}:4,{U2}:7")
    assert str(s) == f"{U1}:1-5,{U2}:7"
    assert MySqlGtidSet.parse("").intervals == {}


@pytest.mark.parametrize("bad", ["0-1-2", f"{U1}", f"{U1}:5-3", "nope:1-2"])
def test_mysql_parse_errors(bad):
    with pytest.raises(GtidSetError):
        MySqlGtidSet.parse(bad)


def test_mysql_contains_subset_subtract():
    s = MySqlGtidSet.parse(f"{U1}:1-10:20-30,{U2}:1-5")
    assert s.contains_gtid(f"{U1}:25") and not s.contains_gtid(f"{U1}:15")
    assert not s.contains_gtid(f"{U2}:6")
    assert MySqlGtidSet.parse(f"{U1}:2-9").issubset(s)
    assert not MySqlGtidSet.parse(f"{U1}:9-11").issubset(s)
    diff = MySqlGtidSet.parse(f"{U1}:1-40,{U2}:3-8").subtract(s)
    assert str(diff) == f"{U1}:11-19:31-40,{U2}:6-8"
    assert MySqlGtidSet.parse(f"{U2}:6-8").missing_from(s) == [f"{U2}:6-8"]
    with pytest.raises(GtidSetError, match="uuid:n"):
        s.contains_gtid("0-1-2")


def test_mysql_advance_fills_gaps():
    s = MySqlGtidSet.parse(f"{U1}:1-3:5")
    assert str(s.advance(f"{U1}:4")) == f"{U1}:1-5"
    assert str(s.advance(f"{U2}:1")) == f"{U1}:1-3:5,{U2}:1"


def test_parse_gtid_set_guesses_flavour():
    assert isinstance(parse_gtid_set("0-1-2"), MariaDbGtidSet)
    assert isinstance(parse_gtid_set(f"{U1}:1-2"), MySqlGtidSet)
    assert isinstance(parse_gtid_set("", is_mariadb=False), MySqlGtidSet)
