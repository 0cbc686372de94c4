"""Read-only incremental snapshot: binlog positions around each chunk SELECT are the watermarks;
nothing is written to the source, and the lake still converges under concurrent writes."""

import random
import threading
import time

import pymysql
import pytest
from conftest import root_settings
from sensor_harness import SensorDriven, capture_resource, scratch_database

from dagster_mysql_cdc.sink.read import read_current

pytestmark = [pytest.mark.integration, pytest.mark.spark]


def test_read_only_incremental_snapshot_converges_without_writing_watermarks(local_storage):
    with scratch_database("ro") as (db, conn):
        with conn.cursor() as cur:
            cur.execute(f"USE {db}")
            cur.execute("CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(20), n INT)")
            cur.execute("INSERT INTO t SELECT seq, CONCAT('v', seq), seq FROM seq_1_to_20000")
        mysql = capture_resource(
            db,
            snapshot_mode="no_data",
            incremental_snapshot_chunk_size=1000,
            incremental_snapshot_max_chunks_per_run=4,
            incremental_snapshot_read_only=True,
        )
        mysql.create_signal_table()
        cdc = SensorDriven(mysql, local_storage.base_uri)
        cdc.ticks()
        with conn.cursor() as cur:
            cur.execute(
                f"INSERT INTO {db}.debezium_signal VALUES ('ro-1', 'execute-snapshot', '{{\"data-collections\": [\"{db}.t\"]}}')"
            )
        stop = threading.Event()

        def writer():
            w = pymysql.connect(**root_settings().pymysql_kwargs())
            rnd = random.Random(3)
            with w.cursor() as cur:
                while not stop.is_set():
                    k = rnd.randint(1, 22000)
                    r = rnd.random()
                    if r < 0.4:
                        cur.execute(f"REPLACE INTO {db}.t VALUES (%s, 'w', %s)", (k, k))
                    elif r < 0.75:
                        cur.execute(f"UPDATE {db}.t SET n = n + 1 WHERE id = %s", (k,))
                    else:
                        cur.execute(f"DELETE FROM {db}.t WHERE id = %s", (k,))
                    time.sleep(0.002)
            w.close()

        th = threading.Thread(target=writer)
        th.start()
        try:
            cdc.ticks(until_caught_up=False, max_ticks=6)
        finally:
            stop.set()
            th.join()
        for _ in range(10):
            cdc.ticks()
            if '"incremental": null' in cdc.cursor:
                break
        assert '"incremental": null' in cdc.cursor
        st = read_current(local_storage, local_storage.uri(db, db, "t", "state")).to_pylist()
        lake = sorted((r["id"], r["v"], r["n"]) for r in st if not r["__deleted"])
        with conn.cursor() as cur:
            cur.execute(f"SELECT id, v, n FROM {db}.t ORDER BY id")
            src = [tuple(r) for r in cur.fetchall()]
            cur.execute(f"SELECT id, type FROM {db}.debezium_signal")
            signal_rows = list(cur.fetchall())
        assert lake == src
        assert signal_rows == [("ro-1", "execute-snapshot")], "read-only mode writes no watermark rows"
