"""Primary-key change headers and transaction metadata (Debezium provide.transaction.metadata)."""

import pytest
from deltalake import DeltaTable
from sensor_harness import SensorDriven, capture_resource, scratch_database

pytestmark = [pytest.mark.integration, pytest.mark.spark]


def test_pk_change_headers_and_transaction_events(local_storage):
    with scratch_database("tx") as (db, conn):
        with conn.cursor() as cur:
            cur.execute(f"CREATE TABLE {db}.a (id INT PRIMARY KEY, v VARCHAR(20))")
            cur.execute(f"CREATE TABLE {db}.b (id INT PRIMARY KEY)")
            cur.execute(f"INSERT INTO {db}.a VALUES (1,'x')")
        cdc = SensorDriven(capture_resource(db, provide_transaction_metadata=True), local_storage.base_uri)
        cdc.ticks()
        with conn.cursor() as cur:
            cur.execute("BEGIN")
            cur.execute(f"INSERT INTO {db}.a VALUES (2,'y')")
            cur.execute(f"INSERT INTO {db}.b VALUES (5),(6)")
            cur.execute(f"UPDATE {db}.a SET id=3 WHERE id=1")
            cur.execute("COMMIT")
        cdc.ticks()
        events = [
            e
            for e in DeltaTable(local_storage.uri(db, db, "a", "changelog")).to_pyarrow_table().to_pylist()
            if e["op"] != "r"
        ]
        events.sort(key=lambda e: (e["source"]["pos"], e["source"]["row"], e["op"] == "c"))
        assert [(e["op"], dict(e["headers"] or [])) for e in events] == [
            ("c", {}),
            ("d", {"__debezium.newkey": '{"id":3}'}),
            ("c", {"__debezium.oldkey": '{"id":1}'}),
        ]
        tx_ids = {e["transaction"]["id"] for e in events}
        assert len(tx_ids) == 1 and None not in tx_ids
        assert [e["transaction"]["data_collection_order"] for e in events] == [1, 2, 3]
        assert sorted(e["transaction"]["total_order"] for e in events) == [1, 4, 5]
        txs = DeltaTable(local_storage.uri(db, "_transactions")).to_pyarrow_table().to_pylist()
        assert [t["status"] for t in txs] == ["BEGIN", "END"]
        end = txs[1]
        assert end["id"] == tx_ids.pop() and end["event_count"] == 5
        assert sorted((d["data_collection"], d["event_count"]) for d in end["data_collections"]) == [
            (f"{db}.a", 3),
            (f"{db}.b", 2),
        ]
