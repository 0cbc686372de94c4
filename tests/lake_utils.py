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


def source_table(db: str, table: str) -> tuple[pa.Table, list[str]]:
    """A source table converted with the Debezium mapping the lake uses (Arrow, sorted by primary
    key); returns (table, key columns)."""
    conn = root_connect()
    try:
        schema = read_table_schemas(conn, [(db, table)])[(db, table)]
        conv = TableConverter(schema, TypeOptions(), "pymysql")
        with conn.cursor() as cur:
            cur.execute(f"SELECT * FROM `{db}`.`{table}`")
            batch = conv.to_record_batch(list(cur.fetchall()))
    finally:
        conn.close()
    key = list(schema.primary_key)
    t = pa.Table.from_batches([batch])
    return (t.sort_by([(k, "ascending") for k in key]) if key else t), key


def source_rows(db: str, table: str) -> tuple[list[dict], list[str]]:
    """:func:`source_table` as a list of row dicts; returns (rows, key columns)."""
    t, key = source_table(db, table)
    return t.to_pylist(), key
