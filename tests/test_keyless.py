"""A table without a primary key: every column is the key (Debezium message.key.columns over all
columns); inserts, updates and deletes still converge in the current state."""

import pytest
from deltalake import DeltaTable
from sensor_harness import SensorDriven, capture_resource, scratch_database

pytestmark = [pytest.mark.integration, pytest.mark.spark]


def test_keyless_table_streams_and_converges(local_storage):
    with scratch_database("nokey") as (db, conn):
        with conn.cursor() as cur:
            cur.execute(f"CREATE TABLE {db}.log (a INT, b VARCHAR(10), c DECIMAL(5,2) NULL)")
            cur.execute(f"INSERT INTO {db}.log VALUES (1,'x',1.5),(2,'y',NULL),(3,'z',3.0)")
        mysql = capture_resource(db)
        tables = mysql.discover_tables()
        assert tables[0].primary_key == ()
        cdc = SensorDriven(mysql, local_storage.base_uri, tables)
        cdc.ticks()
        with conn.cursor() as cur:
            cur.execute(f"UPDATE {db}.log SET b='yy' WHERE a=2")  # NULL in c: null-safe key match
            cur.execute(f"DELETE FROM {db}.log WHERE a=3")
            cur.execute(f"INSERT INTO {db}.log VALUES (4,'w',4.25)")
        cdc.ticks()
        state = DeltaTable(local_storage.uri(db, db, "log", "state")).to_pyarrow_table().to_pylist()
        live = sorted(
            (r["a"], r["b"], None if r["c"] is None else str(r["c"])) for r in state if not r["__deleted"]
        )
        with conn.cursor() as cur:
            cur.execute(f"SELECT a, b, c FROM {db}.log")
            src = sorted((a, b, None if c is None else str(c)) for a, b, c in cur.fetchall())
        assert live == src
        log = (
            DeltaTable(local_storage.uri(db, db, "log", "changelog"))
            .to_pyarrow_table(columns=["op"])
            .column("op")
            .to_pylist()
        )
        assert sorted(log) == ["c", "d", "r", "r", "r", "u"]
