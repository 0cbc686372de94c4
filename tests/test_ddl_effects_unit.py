"""What DDL does to rows (engine/ddl_effects.py) and the stopped-table bookkeeping
(engine/isolation.py): pure functions, no services."""

from __future__ import annotations

import pytest

from dagster_mysql_cdc.engine.ddl_effects import ddl_effects, value_preserving
from dagster_mysql_cdc.engine.isolation import (
    StoppedTable,
    catch_up,
    retry_delay,
    stopped_after_run,
)
from dagster_mysql_cdc.events import BinlogPosition
from dagster_mysql_cdc.source.ddl import SchemaCatalog
from dagster_mysql_cdc.source.schema import ColumnSchema


def c(data_type: str, **kw) -> ColumnSchema:
    return ColumnSchema(name="c", position=1, data_type=data_type, **kw)


@pytest.mark.parametrize(
    ("old", "new", "kept"),
    [
        (c("int"), c("bigint"), True),
        (c("bigint"), c("int"), False),
        (c("tinyint"), c("tinyint", unsigned=True), False),
        (c("int", unsigned=True), c("bigint"), True),
        (c("decimal", precision=8, scale=2), c("decimal", precision=12, scale=4), True),
        (c("decimal", precision=10, scale=4), c("decimal", precision=10, scale=2), False),
        (c("float"), c("double"), True),
        (c("double"), c("float"), False),
        (c("varchar", length=10, charset="utf8mb4"), c("varchar", length=200, charset="utf8mb4"), True),
        (c("varchar", length=200, charset="utf8mb4"), c("varchar", length=10, charset="utf8mb4"), False),
        (c("varchar", length=10, charset="utf8mb4"), c("text", charset="utf8mb4"), True),
        (c("varchar", length=10, charset="utf8mb4"), c("varchar", length=10, charset="latin1"), False),
        (c("varchar", length=10, charset="utf8mb4"), c("char", length=10, charset="utf8mb4"), False),
        (c("datetime", precision=0), c("datetime", precision=6), True),
        (c("datetime", precision=6), c("datetime", precision=0), False),
        (c("enum", enum_values=("a", "b")), c("enum", enum_values=("b", "c", "a")), True),
        (c("enum", enum_values=("a", "b")), c("enum", enum_values=("a",)), False),
        (c("set", enum_values=("a", "b")), c("set", enum_values=("a", "b", "c")), True),
        (c("set", enum_values=("a", "b")), c("set", enum_values=("b", "a")), False),
        (c("int"), c("varchar", length=20, charset="utf8mb4"), False),
        (c("int", nullable=True), c("int", nullable=False), False),
        (c("int", nullable=False), c("int", nullable=True), True),
        (c("bit", length=3), c("bit", length=8), True),
        (c("bit", length=8), c("bit", length=16), False),
    ],
)
def test_value_preserving(old, new, kept):
    assert value_preserving(old, new) is kept


def effects(*ddl: str):
    """The effects of the last statement after the others, as (kind, table, reason) tuples."""
    cat = SchemaCatalog({})
    for sql in ddl[:-1]:
        cat.apply(sql, "d")
    before = cat.tables()
    out = []
    for o in cat.apply(ddl[-1], "d"):
        for ch in o.table_changes:
            out += [(e.kind, e.table, e.reason) for e in ddl_effects(ch, before)]
        before = cat.tables()
    return out


T = "CREATE TABLE d.t (id INT PRIMARY KEY, v INT)"


def test_ddl_effects_policy():
    assert effects(T, "ALTER TABLE d.t ADD w INT") == []  # nullable, no default: NULL is right
    assert effects(T, "ALTER TABLE d.t MODIFY v BIGINT") == []
    [(kind, _, why)] = effects(T, "ALTER TABLE d.t DROP COLUMN v")  # the state would keep v's values
    assert kind == "repair" and "v (dropped)" in why
    [(kind, table, why)] = effects(T, "ALTER TABLE d.t ADD w INT NOT NULL DEFAULT 3")
    assert (kind, table) == ("repair", ("d", "t")) and "w (added with values)" in why
    assert effects(T, "ALTER TABLE d.t MODIFY v VARCHAR(5)")[0][0] == "repair"
    assert effects(T, "ALTER TABLE d.t DROP PRIMARY KEY")[0][:2] == ("resnapshot", ("d", "t"))
    assert effects(T, "ALTER TABLE d.t CHANGE id ident INT")[0][0] == "resnapshot"  # key column renamed
    assert effects(T, "DROP TABLE d.t") == [("cut", ("d", "t"), "table dropped")]
    assert effects(T, "CREATE OR REPLACE TABLE d.t (k VARCHAR(5) PRIMARY KEY)")[0][0] == "cut"
    assert [e[:2] for e in effects(T, "RENAME TABLE d.t TO d.u")] == [
        ("cut", ("d", "t")),
        ("resnapshot", ("d", "u")),
    ]
    keyless = "CREATE TABLE d.k (a INT, b INT)"
    assert effects(keyless, "ALTER TABLE d.k ADD c INT") == []  # appended NULLs match the old rows
    assert effects(keyless, "ALTER TABLE d.k DROP COLUMN b")[0][0] == "resnapshot"
    assert effects(keyless, "ALTER TABLE d.k ADD id INT AUTO_INCREMENT PRIMARY KEY")[0][0] == "resnapshot"


W = "CREATE TABLE d.w (id INT PRIMARY KEY, v INT, descr VARCHAR(20), dt DATETIME, ts TIMESTAMP NULL, tm TIME)"


@pytest.mark.parametrize(
    ("ddl", "why"),
    [
        ("ALTER TABLE d.w RENAME COLUMN descr TO description", "description (renamed from descr)"),
        ("ALTER TABLE d.w CHANGE descr description VARCHAR(20)", "description (renamed from descr)"),
        ("ALTER TABLE d.w CHANGE COLUMN descr d2 TEXT AFTER id", "d2 (renamed from descr)"),
        ("ALTER TABLE d.w DROP COLUMN v, ADD COLUMN v INT", "v (dropped)"),  # the server's v is NULL
        ("ALTER TABLE d.w DROP COLUMN v", "v (dropped)"),
        # ZonedTimestamp text carries the column's digits: ...05Z -> ...05.000000Z
        ("ALTER TABLE d.w MODIFY ts TIMESTAMP(6) NULL", "ts (timestamp -> timestamp(6))"),
        (
            "ALTER TABLE d.w MODIFY dt DATETIME(6), MODIFY ts TIMESTAMP(3) NULL",
            "ts (timestamp -> timestamp(3))",
        ),
    ],
)
def test_renames_drops_and_timestamp_digits_are_repaired(ddl, why):
    """Values that move, go or read differently without row events: the rows are re-read, so
    the current state equals the source (issue "Nothing lost")."""
    [(kind, table, reason)] = effects(W, ddl)
    assert (kind, table) == ("repair", ("d", "w")) and why in reason, reason


@pytest.mark.parametrize(
    "ddl",
    [
        "ALTER TABLE d.w MODIFY dt DATETIME(6)",  # ms -> us: the lake's rewrite converts them
        "ALTER TABLE d.w MODIFY dt DATETIME(3)",  # the same unit (ms), every value kept
        "ALTER TABLE d.w MODIFY tm TIME(6)",  # MicroTime whatever the digits
        "ALTER TABLE d.w MODIFY v INT AFTER descr",  # a reorder: columns are matched by name
        "ALTER TABLE d.w ADD COLUMN extra INT",
    ],
)
def test_ddl_the_lake_follows_without_a_reread(ddl):
    assert effects(W, ddl) == []


def test_alter_reports_renamed_and_dropped_columns():
    cat = SchemaCatalog({})
    cat.apply(W, "d")
    [o] = cat.apply(
        "ALTER TABLE d.w RENAME COLUMN descr TO d1, CHANGE d1 d2 VARCHAR(30), DROP COLUMN v, ADD v INT, "
        "DROP COLUMN tm",
        "d",
    )
    [ch] = o.table_changes
    assert ch.renamed_columns == (("descr", "d2"),)
    assert sorted(ch.dropped_columns) == ["tm", "v"]
    [o] = cat.apply("ALTER TABLE d.w MODIFY dt DATETIME(6) FIRST", "d")
    assert o.table_changes[0].renamed_columns == () and o.table_changes[0].dropped_columns == ()


def test_swap_in_one_statement_cuts_and_resnapshots_both():
    kinds = effects(
        T, "CREATE TABLE d.u (id INT PRIMARY KEY)", "RENAME TABLE d.t TO d.tmp, d.u TO d.t, d.tmp TO d.u"
    )
    assert ("cut", ("d", "t")) in [k[:2] for k in kinds] and ("cut", ("d", "u")) in [k[:2] for k in kinds]
    assert {k[1] for k in kinds if k[0] == "resnapshot"} == {("d", "tmp"), ("d", "t"), ("d", "u")}


def test_retry_backoff_and_bookkeeping():
    assert [retry_delay(n, 60, 3600) for n in (0, 1, 2, 3, 10)] == [0, 60, 120, 240, 3600]
    p = BinlogPosition("mysql-bin.000002", 100)
    first = stopped_after_run({}, {"d.t": {"since": p.to_dict(), "error": "boom"}}, now=1000.0)
    assert first["d.t"] == StoppedTable(p, "boom", 1, 1060.0, 1000.0)
    assert not first["d.t"].due(1059.0) and first["d.t"].due(1060.0)
    kept = stopped_after_run(first, {"d.t": {"since": p.to_dict(), "error": "boom"}}, now=1010.0)
    assert kept == first  # not tried this run: unchanged
    again = stopped_after_run(
        first, {"d.t": {"since": p.to_dict(), "error": "x", "attempted": True}}, now=2000
    )
    assert again["d.t"].attempts == 2 and again["d.t"].retry_at == 2120.0 and again["d.t"].error == "x"
    assert stopped_after_run(again, {}, now=3000) == {}  # caught up
    assert StoppedTable.from_dict(again["d.t"].to_dict()) == again["d.t"]


def test_catch_up_reads_window_by_window_across_files():
    files = [("mysql-bin.000001", 500), ("mysql-bin.000002", 800), ("mysql-bin.000003", 300)]
    reads = []
    n = catch_up(
        lambda a, b: reads.append((a.file, a.pos, b.file, b.pos)),
        BinlogPosition("mysql-bin.000001", 120),
        BinlogPosition("mysql-bin.000003", 200),
        files,
    )
    assert n == 3
    assert reads == [
        ("mysql-bin.000001", 120, "mysql-bin.000001", 500),
        ("mysql-bin.000002", 4, "mysql-bin.000002", 800),
        ("mysql-bin.000003", 4, "mysql-bin.000003", 200),
    ]
    assert (
        catch_up(
            lambda a, b: reads.append(a), BinlogPosition("f.000003", 9), BinlogPosition("f.000003", 9), files
        )
        == 0
    )
