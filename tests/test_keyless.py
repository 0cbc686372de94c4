"""A table without a primary key: every column is the key (Debezium message.key.columns over all
columns); inserts, updates and deletes still converge in the current state."""

import uuid

import dagster as dg
import pytest
from deltalake import DeltaTable

from conftest import CDC_PASSWORD, CDC_USER, MYSQL_HOST, MYSQL_PORT, root_connect
from dagster_mysql_cdc import CdcLakeResource, MySqlCdcResource, build_mysql_cdc_sensor, mysql_cdc_assets, run_sensor_ticks

pytestmark = [pytest.mark.integration, pytest.mark.spark]


def test_keyless_table_streams_and_converges(local_storage):
    db = f"nokey_{uuid.uuid4().hex[:8]}"
    conn = root_connect()
    with conn.cursor() as cur:
        cur.execute(f"CREATE DATABASE {db}")
        cur.execute(f"CREATE TABLE {db}.log (a INT, b VARCHAR(10), c DECIMAL(5,2) NULL)")
        cur.execute(f"INSERT INTO {db}.log VALUES (1,'x',1.5),(2,'y',NULL),(3,'z',3.0)")
    try:
        mysql = MySqlCdcResource(host=MYSQL_HOST, port=MYSQL_PORT, user=CDC_USER, password=CDC_PASSWORD,
                                 server_name=db, database_include_list=[db])
        tables = mysql.discover_tables()
        assert tables[0].primary_key == ()

        @mysql_cdc_assets(tables=tables, server_name=db)
        def cdc(context: dg.AssetExecutionContext, mysql: MySqlCdcResource, lake: CdcLakeResource):
            yield from mysql.sync(context=context, lake=lake)

        sensor = build_mysql_cdc_sensor(cdc)
        instance = dg.DagsterInstance.ephemeral()
        resources = {"mysql": mysql, "lake": CdcLakeResource(base_uri=local_storage.base_uri)}
        ticks = run_sensor_ticks(sensor, cdc, resources, instance)
        with conn.cursor() as cur:
            cur.execute(f"UPDATE {db}.log SET b='yy' WHERE a=2")  # NULL in c: null-safe key match
            cur.execute(f"DELETE FROM {db}.log WHERE a=3")
            cur.execute(f"INSERT INTO {db}.log VALUES (4,'w',4.25)")
        run_sensor_ticks(sensor, cdc, resources, instance, cursor=ticks.cursor)
        state = DeltaTable(local_storage.uri(db, db, "log", "state")).to_pyarrow_table().to_pylist()
        live = sorted((r["a"], r["b"], None if r["c"] is None else str(r["c"])) for r in state if not r["__deleted"])
        with conn.cursor() as cur:
            cur.execute(f"SELECT a, b, c FROM {db}.log")
            src = sorted((a, b, None if c is None else str(c)) for a, b, c in cur.fetchall())
        assert live == src
        log = DeltaTable(local_storage.uri(db, db, "log", "changelog")).to_pyarrow_table(columns=["op"]).column("op").to_pylist()
        assert sorted(log) == ["c", "d", "r", "r", "r", "u"]
    finally:
        with conn.cursor() as cur:
            cur.execute(f"DROP DATABASE IF EXISTS {db}")
        conn.close()
