"""Primary-key change headers and transaction metadata (Debezium provide.transaction.metadata)."""

import uuid

import dagster as dg
import pytest
from deltalake import DeltaTable

from conftest import CDC_PASSWORD, CDC_USER, MYSQL_HOST, MYSQL_PORT, root_connect
from dagster_mysql_cdc import CdcLakeResource, MySqlCdcResource, build_mysql_cdc_sensor, mysql_cdc_assets, run_sensor_ticks

pytestmark = [pytest.mark.integration, pytest.mark.spark]


def test_pk_change_headers_and_transaction_events(local_storage):
    db = f"tx_{uuid.uuid4().hex[:8]}"
    conn = root_connect()
    with conn.cursor() as cur:
        cur.execute(f"CREATE DATABASE {db}")
        cur.execute(f"CREATE TABLE {db}.a (id INT PRIMARY KEY, v VARCHAR(20))")
        cur.execute(f"CREATE TABLE {db}.b (id INT PRIMARY KEY)")
        cur.execute(f"INSERT INTO {db}.a VALUES (1,'x')")
    try:
        mysql = MySqlCdcResource(host=MYSQL_HOST, port=MYSQL_PORT, user=CDC_USER, password=CDC_PASSWORD,
                                 server_name=db, database_include_list=[db], provide_transaction_metadata=True)

        @mysql_cdc_assets(tables=mysql.discover_tables(), server_name=db)
        def cdc(context: dg.AssetExecutionContext, mysql: MySqlCdcResource, lake: CdcLakeResource):
            yield from mysql.sync(context=context, lake=lake)

        sensor = build_mysql_cdc_sensor(cdc)
        instance = dg.DagsterInstance.ephemeral()
        resources = {"mysql": mysql, "lake": CdcLakeResource(base_uri=local_storage.base_uri)}
        ticks = run_sensor_ticks(sensor, cdc, resources, instance)
        with conn.cursor() as cur:
            cur.execute("BEGIN")
            cur.execute(f"INSERT INTO {db}.a VALUES (2,'y')")
            cur.execute(f"INSERT INTO {db}.b VALUES (5),(6)")
            cur.execute(f"UPDATE {db}.a SET id=3 WHERE id=1")
            cur.execute("COMMIT")
        run_sensor_ticks(sensor, cdc, resources, instance, cursor=ticks.cursor)
        events = [e for e in DeltaTable(local_storage.uri(db, db, "a", "changelog")).to_pyarrow_table().to_pylist() if e["op"] != "r"]
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
        assert sorted((d["data_collection"], d["event_count"]) for d in end["data_collections"]) == [(f"{db}.a", 3), (f"{db}.b", 2)]
    finally:
        with conn.cursor() as cur:
            cur.execute(f"DROP DATABASE IF EXISTS {db}")
        conn.close()
