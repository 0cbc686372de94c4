"""SQL views of the exact current state (python -m dagster_mysql_cdc sql-views): on DuckDB
(delta_scan) and Spark SQL (the project's data source) they equal read_current on every kind of
table, stay exact as windows and compactions commit without being made again, and the Trino text
has the same query (run on DuckDB through sqlglot)."""

from __future__ import annotations

import subprocess
import sys

import pyarrow as pa
import pytest
import sqlglot
from conftest import ROOT
from downstream_lake import DB, SERVER, TABLES, schema
from lake_utils import assert_sql_views_equal_current, canonical_rows

import dagster_mysql_cdc as cdc
from dagster_mysql_cdc.downstream.views import current_sql, table_shape, view_statements

pytestmark = [pytest.mark.integration, pytest.mark.spark]


def test_duckdb_and_spark_views_equal_read_current_on_every_kind_of_table(downstream_lake, spark):
    lake = downstream_lake
    assert_sql_views_equal_current(lake.storage, SERVER, [f"{DB}.{t}" for t in TABLES], spark=None)
    assert_sql_views_equal_current(lake.storage, SERVER, ["db.keyless"], spark=spark)
    # the views with tombstones are the stored layout
    con = cdc.create_duckdb_views(lake.storage, tombstones=True)
    for t in TABLES:
        want = cdc.read_current(f"db.{t}", lake.storage, tombstones=True)
        got = con.sql(f'SELECT * FROM "db"."{t}"').to_arrow_table()
        assert canonical_rows(got) == canonical_rows(want), t


def test_views_stay_exact_as_windows_and_compactions_commit(downstream_lake):
    """Made once, the views see later windows, a first change of a table that had no tail yet (an
    empty tail was made for it), a compaction and a TRUNCATE."""
    lake = downstream_lake
    kv = schema(("id", pa.int32()), ("v", pa.string()))
    lake.window(
        "later", [("r", None, (i, f"l{i}")) for i in range(1, 6)], values=kv, key=("id",), snapshot=True
    )
    ab = schema(("a", pa.string()))
    lake.window("later_keyless", [("c", None, ("q",)), ("c", None, ("q",))], values=ab)
    con = cdc.create_duckdb_views(lake.storage, tables=["db.later", "db.later_keyless"])

    def check() -> None:
        for t in ("later", "later_keyless"):
            got = con.sql(f'SELECT * FROM "db"."{t}"').to_arrow_table()
            want = cdc.read_current(f"db.{t}", lake.storage)
            assert canonical_rows(got) == canonical_rows(want), t
            names = lake.models[t].values.names
            assert sorted(tuple(r[n] for n in names) for r in got.to_pylist()) == lake.models[t].live()

    check()
    lake.window("later", [("u", (1, "l1"), (1, "changed")), ("c", None, (9, "n"))])
    lake.window("later_keyless", [("d", ("q",), None), ("c", None, ("r",))])
    check()
    lake.compact("later")
    lake.compact("later_keyless")
    lake.window("later", [("d", (2, "l2"), None)])
    check()
    lake.window("later", [("t", None, None), ("c", None, (3, "again"))])
    check()


def test_the_trino_query_is_the_same_query(downstream_lake):
    """Trino cannot run here: its text is checked for the connector's statements, and its query,
    transpiled to DuckDB by sqlglot, gives read_current's rows."""
    lake = downstream_lake
    views = {v.table.table: v for v in view_statements("trino", lake.storage, catalog="lakehouse")}
    assert set(views) >= set(TABLES)
    keyed = views["keyed"].statements
    assert keyed[0] == 'CREATE SCHEMA IF NOT EXISTS "lakehouse"."db"'
    assert "lakehouse\".system.register_table(schema_name => 'db', table_name => 'keyed__state'" in keyed[1]
    assert keyed[2].endswith(f"table_location => '{lake.writer.paths('db', 'keyed').tail}')")
    assert keyed[3].startswith('CREATE OR REPLACE VIEW "lakehouse"."db"."keyed" AS')
    con = cdc.duckdb_connection(lake.storage)
    for t in TABLES:
        ref = cdc.captured_tables(lake.storage)[0].__class__(lake.storage, SERVER, DB, t)
        shape = table_shape(ref)
        sql = current_sql(shape, "__state", "__tail", "trino")
        duck = sqlglot.transpile(sql, read="trino", write="duckdb")[0]
        duck = duck.replace("__state", f"delta_scan('{ref.paths.state}')").replace(
            "__tail", f"delta_scan('{ref.paths.tail}')"
        )
        got = con.sql(duck).to_arrow_table()
        want = cdc.read_current(f"db.{t}", lake.storage)
        assert canonical_rows(got) == canonical_rows(want), t


def test_sql_views_command_prints_and_creates(downstream_lake, tmp_path):
    lake = downstream_lake
    for engine in ("duckdb", "spark", "trino"):
        out = subprocess.run(
            [
                sys.executable,
                "-m",
                "dagster_mysql_cdc",
                "sql-views",
                "--engine",
                engine,
                "--lake",
                lake.storage.root,
            ],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        assert out.count("CREATE OR REPLACE") >= len(TABLES), engine
        if engine == "spark":
            assert "delta.`file://" in out and "`db__keyless`" in out
    db_file = tmp_path / "views.duckdb"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "dagster_mysql_cdc",
            "sql-views",
            "--engine",
            "duckdb",
            "--lake",
            lake.storage.root,
            "--create",
            str(db_file),
        ],
        cwd=ROOT,
        check=True,
        capture_output=True,
    )
    con = cdc.duckdb_connection(lake.storage, str(db_file))
    got = con.sql('SELECT * FROM "db"."keyed"').to_arrow_table()
    assert canonical_rows(got) == canonical_rows(cdc.read_current("db.keyed", lake.storage))
    bad = subprocess.run(
        [
            sys.executable,
            "-m",
            "dagster_mysql_cdc",
            "sql-views",
            "--engine",
            "oracle",
            "--lake",
            lake.storage.root,
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert bad.returncode == 2 and "oracle" in bad.stderr


def test_an_s3_lake_reads_the_same_through_views_read_current_and_the_feed(spark, s3_storage):
    """The same on S3 (SeaweedFS): DuckDB's delta_scan with the secret made from the lake's
    settings, read_current, and the change feed."""
    from downstream_lake import DownstreamLake

    lake = DownstreamLake(spark, s3_storage)
    kv = schema(("id", pa.int32()), ("v", pa.string()))
    lake.window(
        "s3t", [("r", None, (i, f"s{i}")) for i in range(1, 6)], values=kv, key=("id",), snapshot=True
    )
    first = cdc.read_changes("db.s3t", s3_storage)
    first.read_current()
    lake.window("s3t", [("u", (1, "s1"), (1, "x")), ("d", (2, "s2"), None)])
    lake.window("s3k", [("c", None, ("a",)), ("c", None, ("a",))], values=schema(("a", pa.string())))
    assert_sql_views_equal_current(s3_storage, SERVER, ["db.s3t", "db.s3k"])
    assert sorted(cdc.read_current("db.s3t", s3_storage).column("id").to_pylist()) == [1, 3, 4, 5]
    batch = cdc.read_changes("db.s3t", s3_storage, since=first.end)
    assert batch.events.column("op").to_pylist() == ["u", "d"]
