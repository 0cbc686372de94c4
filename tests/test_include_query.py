"""Debezium include.query against MariaDB: with include_query the binlog client asks for MariaDB's
Annotate_rows events (binlog_annotate_row_events=ON) and every row change carries its statement in
source.query. Off by default, as in Debezium. source.thread comes from the thread id of the
transaction's BEGIN QUERY event (MySQL); MariaDB writes a GTID event instead, which has none."""

import pytest
from deltalake import DeltaTable
from sensor_harness import SensorDriven, capture_resource, scratch_database

pytestmark = [pytest.mark.integration, pytest.mark.spark]


@pytest.mark.parametrize("include_query", [True, False])
def test_source_query_and_thread(local_storage, include_query):
    with scratch_database("inq") as (db, conn):
        with conn.cursor() as cur:
            cur.execute(f"CREATE TABLE {db}.t (id INT PRIMARY KEY, v VARCHAR(10))")
            cur.execute("SELECT @@GLOBAL.binlog_annotate_row_events")
            assert cur.fetchone()[0] == 1
        cdc = SensorDriven(capture_resource(db, include_query=include_query), local_storage.base_uri)
        cdc.ticks()
        insert = f"INSERT INTO {db}.t VALUES (1, 'a'), (2, 'b')"
        update = f"UPDATE {db}.t SET v = 'c' WHERE id = 2"
        with conn.cursor() as cur:
            cur.execute(insert)
            cur.execute(update)
        cdc.ticks()
        events = DeltaTable(local_storage.uri(db, db, "t", "changelog")).to_pyarrow_table().to_pylist()
        streamed = sorted(
            (e for e in events if e["source"]["snapshot"] == "false"),
            key=lambda e: (e["source"]["pos"], e["source"]["row"]),
        )
        assert [e["op"] for e in streamed] == ["c", "c", "u"]
        assert {e["source"]["thread"] for e in streamed} == {None}  # MariaDB: no BEGIN QUERY event
        queries = [e["source"]["query"] for e in streamed]
        assert queries == ([insert, insert, update] if include_query else [None, None, None])
