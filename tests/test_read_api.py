"""The public read API (dagster_mysql_cdc.read_current and friends) against a lake written through
the sink: every kind of table equals the model its events replay to, by any name, with columns and
filters pushed down, in Arrow, Polars, DuckDB and Spark (Spark Connect and a classic session)."""

from __future__ import annotations

import dagster as dg
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from downstream_lake import DB, SERVER, TABLES

import dagster_mysql_cdc as cdc
from dagster_mysql_cdc.errors import ConfigurationError, UnknownTableError
from dagster_mysql_cdc.events import STATE_META_NAMES
from dagster_mysql_cdc.sink import read as sink_read

pytestmark = [pytest.mark.integration, pytest.mark.spark]


def rows(t: pa.Table, names: list[str]) -> list[tuple]:
    return sorted(tuple(r[n] for n in names) for r in t.select(names).to_pylist())


def test_every_kind_of_table_reads_as_its_events_replay(downstream_lake):
    lake = downstream_lake
    for table in TABLES:
        m = lake.models[table]
        got = cdc.read_current(f"{DB}.{table}", lake.storage, metadata=False)
        assert got.column_names == [n for n in got.column_names if n not in STATE_META_NAMES]
        assert rows(got, m.values.names) == m.live(), table
        with_meta = cdc.read_current((DB, table), lake.storage.root)
        assert not pc.any(with_meta.column("__deleted")).as_py()
        assert "__count" not in with_meta.column_names  # keyless: one row per copy
        # the asset key names it too; tombstones=True is the stored layout (sink.read)
        by_key = cdc.read_current(dg.AssetKey([SERVER, DB, table]), lake.storage, tombstones=True)
        stored = sink_read.read_current(lake.storage, lake.writer.paths(DB, table))
        assert by_key.num_rows == stored.num_rows
    keyless = cdc.read_current("db.keyless", lake.storage, tombstones=True)
    assert "__count" in keyless.column_names


def test_columns_and_filters_are_the_full_read_restricted(downstream_lake):
    """A filter on a keyed table is pushed into the compacted state's read (plus the keys the tail
    touched), so a row whose newer tail row no longer matches, or whose older tail row (a window
    behind a re-snapshot) would match, is still resolved right."""
    lake = downstream_lake
    for table in TABLES:
        full = cdc.read_current(f"db.{table}", lake.storage)
        names = lake.models[table].values.names
        col = names[-1] if table != "keyless" else "b"
        num = [n for n in names if pa.types.is_integer(full.schema.field(n).type)][-1]
        for f in (
            [(num, ">", 3)],
            [[(num, "<", 3)], [(col, "=", None if table == "keyless" else 5)]],
            pc.field(num) >= 5,
        ):
            if isinstance(f, list) and f and isinstance(f[0], list) and f[1][0][2] is None:
                continue
            got = cdc.read_current(f"db.{table}", lake.storage, filter=f)
            want = full.filter(
                f
                if isinstance(f, pc.Expression)
                else __import__("pyarrow.parquet").parquet.filters_to_expression(f)
            )
            assert rows(got, names) == rows(want, names), (table, f)
        sub = cdc.read_current(f"db.{table}", lake.storage, columns=[names[0]], metadata=False)
        assert sub.column_names == [names[0]] and sub.num_rows == full.num_rows
    # the state row of key 5 (re-snapshot 's5') beats the older tail row 'stale' of a window behind
    # it; a filter matching only the stale value finds nothing
    assert cdc.read_current("db.resnap", lake.storage, filter=[("v", "=", "stale")]).num_rows == 0
    # key 1 of `keyed` is 'x' now (tail) while the compacted row says 'w0'
    assert cdc.read_current("db.keyed", lake.storage, filter=[("v", "=", "w0")]).num_rows == 0
    assert cdc.read_current("db.keyed", lake.storage, filter=[("v", "=", "x")]).column("id").to_pylist() == [
        1
    ]


def test_polars_and_duckdb_and_the_resource_give_the_same_rows(downstream_lake):
    lake = downstream_lake
    resource = cdc.CdcLakeResource(base_uri=lake.storage.base_uri)
    for table in ("keyed", "keyless", "evolved"):
        arrow = cdc.read_current(f"db.{table}", lake.storage)
        pl_df = cdc.read_current_polars(f"db.{table}", lake.storage)
        assert pl_df.height == arrow.num_rows and pl_df.columns == arrow.column_names
        rel = cdc.read_current_duckdb(
            f"db.{table}", lake.storage, columns=["id"] if table != "keyless" else ["a"]
        )
        assert len(rel.fetchall()) == arrow.num_rows
        names = lake.models[table].values.names
        assert rows(resource.read_current(f"db.{table}"), names) == rows(arrow, names)
        assert resource.read_current_polars(f"db.{table}").height == arrow.num_rows


def test_unknown_tables_and_bad_arguments_fail_clearly(downstream_lake):
    lake = downstream_lake
    with pytest.raises(UnknownTableError, match="keyed.*keyless"):
        cdc.read_current("db.nope", lake.storage)
    with pytest.raises(ConfigurationError, match="database.table"):
        cdc.read_current("nodot", lake.storage)
    with pytest.raises(ConfigurationError, match="DNF"):
        cdc.read_current("db.keyed", lake.storage, filter="id > 3")
    with pytest.raises(ConfigurationError, match="not in the table"):
        cdc.read_current("db.keyed", lake.storage, columns=["nope"])
    with pytest.raises(ConfigurationError, match="lake="):
        cdc.read_current("db.keyed", 42)
    assert {t.table for t in cdc.captured_tables(lake.storage)} >= set(TABLES)


def test_spark_reads_the_same_current_state_classic(downstream_lake, spark):
    lake = downstream_lake
    for table in ("keyed", "keyless"):
        names = lake.models[table].values.names
        df = cdc.read_current_spark(spark, f"db.{table}", lake.storage)
        got = pa.Table.from_pylist([r.asDict() for r in df.collect()])
        assert rows(got, names) == lake.models[table].live(), table
    df = cdc.read_current_spark(
        spark, "db.keyed", lake.storage, columns=["id", "v"], metadata=False, filter=[("n", ">", 50)]
    )
    assert df.columns == ["id", "v"]
    want = sorted(k[0] for k, r in lake.models["keyed"].rows.items() if r["n"] > 50)
    assert want and sorted(r["id"] for r in df.collect()) == want


def spark_connect_reads(lake, tables) -> dict:
    """read_current_spark and the create_spark_views views of ``tables`` on the Spark Connect
    server, in a child process (tests/downstream_spark_child.py)."""
    import json
    import subprocess
    import sys
    from pathlib import Path

    from conftest import SPARK_REMOTE

    if not SPARK_REMOTE:
        pytest.fail("no Spark Connect server (CDC_SPARK_CONNECT_PORT): start it with `make infra`")
    child = Path(__file__).with_name("downstream_spark_child.py")
    out = subprocess.run(
        [sys.executable, str(child), SPARK_REMOTE, lake.storage.root, ",".join(tables)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_spark_connect_reads_and_views_give_the_current_state(downstream_lake):
    lake = downstream_lake
    tables = ("keyed", "keyless", "resnap", "evolved")
    got = spark_connect_reads(lake, tables)
    for table in tables:
        names = lake.models[table].values.names
        for kind in got[table]:
            t = pa.Table.from_pylist(got[table][kind])
            want = lake.models[table].live()
            assert sorted(
                tuple(str(x) if x is not None else None for x in r) for r in rows(t, names)
            ) == sorted(tuple(str(x) if x is not None else None for x in r) for r in want), (kind, table)
