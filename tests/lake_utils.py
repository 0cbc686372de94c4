"""Reading the lake back in tests (deltalake, the Delta format's standard Python reader)."""

from __future__ import annotations

import pyarrow as pa
from conftest import root_connect
from deltalake import DeltaTable

from dagster_mysql_cdc.events import STATE_META_NAMES
from dagster_mysql_cdc.sink.read import read_current
from dagster_mysql_cdc.sink.state_rows import live_multiset
from dagster_mysql_cdc.sink.storage import StorageSettings
from dagster_mysql_cdc.source.catalog import read_table_schemas
from dagster_mysql_cdc.source.types import TableConverter, TypeOptions


def read_delta(storage: StorageSettings, uri: str) -> pa.Table:
    """The rows of the Delta table ``uri``; of a ``state`` table, the current state (its tail
    applied, tombstones included: ``sink/read.py``), as readers of the lake should see it."""
    if uri.rstrip("/").endswith("/state"):
        current = read_current(storage, uri)
        assert current is not None, f"no state at {uri}"
        return current
    return DeltaTable(uri, storage_options=storage.delta_storage_options()).to_pyarrow_table()


def delta_log_versions(storage, uri: str) -> tuple[list[int], list[int]]:
    """The versions of the JSON commits and of the checkpoints in ``uri``'s ``_delta_log``, sorted."""
    from pyarrow import fs as pafs

    sel = pafs.FileSelector(storage.fs_path(uri) + "/_delta_log")
    names = [i.base_name for i in storage.pyarrow_filesystem().get_file_info(sel)]
    jsons = sorted(int(n.split(".")[0]) for n in names if n.endswith(".json"))
    return jsons, sorted(int(n.split(".")[0]) for n in names if n.endswith(".checkpoint.parquet"))


def live_state_rows(storage: StorageSettings, uri: str, key: list[str]) -> list[dict]:
    """Rows of a table's current state (its state table ``uri`` with its tail applied:
    ``sink/read.py``) that are not tombstones, without metadata columns, sorted by key; a keyless
    table's row once per copy (``__count``), i.e. the source as a multiset."""
    current = read_current(storage, uri)
    assert current is not None, f"no state at {uri}"
    rows = live_multiset(current).to_pylist()
    for r in rows:
        for m in STATE_META_NAMES:
            r.pop(m, None)
    return sorted(rows, key=lambda r: tuple(r[k] for k in key))


def source_table(db: str, table: str, options: TypeOptions | None = None) -> tuple[pa.Table, list[str]]:
    """A source table converted with the Debezium mapping the lake uses (``options``: the
    capture's type options, default the resource's defaults; Arrow, sorted by primary key);
    returns (table, key columns)."""
    conn = root_connect()
    try:
        schema = read_table_schemas(conn, [(db, table)])[(db, table)]
        conv = TableConverter(schema, options or TypeOptions(), "pymysql")
        with conn.cursor() as cur:
            cur.execute(f"SELECT * FROM `{db}`.`{table}`")
            batch = conv.to_record_batch(list(cur.fetchall()))
    finally:
        conn.close()
    key = list(schema.primary_key)
    t = pa.Table.from_batches([batch])
    return (t.sort_by([(k, "ascending") for k in key]) if key else t), key


def source_rows(db: str, table: str, options: TypeOptions | None = None) -> tuple[list[dict], list[str]]:
    """:func:`source_table` as a list of row dicts; returns (rows, key columns)."""
    t, key = source_table(db, table, options)
    return t.to_pylist(), key


def canonical_rows(t: pa.Table) -> list[tuple]:
    """The rows of ``t`` as sorted tuples of text (columns by name): comparable across engines."""
    names = sorted(t.column_names)
    return sorted(tuple(repr(r[n]) for n in names) for r in t.select(names).to_pylist())


def assert_sql_views_equal_current(storage: StorageSettings, server: str, tables, spark=None) -> None:
    """The SQL views of ``tables`` (``db.table`` names; dagster_mysql_cdc/downstream/views.py)
    equal ``read_current`` on the same lake: DuckDB (``delta_scan``) always, Spark SQL (the
    project's data source) when a session is given. Creates a missing state/tail empty."""
    from dagster_mysql_cdc import create_duckdb_views, create_spark_views
    from dagster_mysql_cdc import read_current as public_read_current
    from dagster_mysql_cdc.sink.layout import LakeLayout

    con = create_duckdb_views(storage, server=server, tables=tables)
    for name in tables:
        db, table = name.split(".", 1) if isinstance(name, str) else name
        if read_current(storage, LakeLayout(storage, server).table(db, table)) is None:
            continue
        want = public_read_current((db, table), storage, server=server)
        got = con.sql(f'SELECT * FROM "{db}"."{table}"').to_arrow_table()
        assert got.column_names == want.column_names, (name, got.column_names, want.column_names)
        assert canonical_rows(got) == canonical_rows(want), (
            f"{name}: the DuckDB view differs from read_current"
        )
        if spark is not None:
            (view,) = create_spark_views(spark, storage, server=server, tables=[(db, table)])
            rows = [r.asDict(recursive=True) for r in spark.sql(f"SELECT * FROM `{view}`").collect()]
            got = pa.Table.from_pylist(rows, schema=want.schema) if rows else want.schema.empty_table()
            assert canonical_rows(got) == canonical_rows(want), (
                f"{name}: the Spark SQL view differs from read_current"
            )


def active_spark():
    """The test process's classic Spark session, or ``None`` (no session is started for it)."""
    from pyspark.sql import SparkSession

    return SparkSession.getActiveSession()
