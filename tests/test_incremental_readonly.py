"""Read-only incremental snapshot: binlog positions around each chunk SELECT are the watermarks;
nothing is written to the source, and the lake still converges under concurrent writes."""

import random
import threading
import time

import pymysql
import pytest
from conftest import root_settings
from lake_utils import live_state_rows, read_delta, source_rows
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


def _signalled_read_only_capture(
    conn, db: str, rows: int, lake_base_uri: str, sid: str, **options
) -> SensorDriven:
    """``db.t`` (``rows`` rows) captured ``no_data`` with read-only incremental snapshots of
    20-row chunks (``options``: more resource fields), then an ``execute-snapshot`` of it
    (signal id ``sid``) inserted on an otherwise idle binlog."""
    with conn.cursor() as cur:
        cur.execute(f"USE {db}")
        cur.execute("CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(20))")
        cur.execute(f"INSERT INTO t SELECT seq, CONCAT('v', seq) FROM seq_1_to_{rows}")
    mysql = capture_resource(
        db,
        snapshot_mode="no_data",
        incremental_snapshot_chunk_size=20,
        incremental_snapshot_read_only=True,
        **options,
    )
    mysql.create_signal_table()
    cdc = SensorDriven(mysql, lake_base_uri)
    cdc.ticks()
    with conn.cursor() as cur:
        cur.execute(
            f"INSERT INTO {db}.debezium_signal VALUES ('{sid}', 'execute-snapshot', '{{\"data-collections\": [\"{db}.t\"]}}')"
        )
    return cdc


@pytest.mark.parametrize("follow_seconds", [0.0, 60.0], ids=["one_window_per_run", "following"])
def test_read_only_incremental_snapshot_finishes_on_an_idle_source(local_storage, follow_seconds):
    """On an idle source a read-only snapshot's watermarks are all the same binlog position, so
    every window starts there. Its chunk plans (and a following run's chunk-only windows) are
    named by the snapshot state too: each window reads the next chunks. Named by the position
    alone, every window after the binlog went idle found the last plan again and re-read its
    chunks forever (the snapshot never finished, a run per tick). Its commits take the chunks'
    identity, not the position's: with the position's, every later window from there (the next
    chunks, and the binlog's next changes) was skipped as already committed, and lost."""
    with scratch_database("roidle") as (db, conn):
        cdc = _signalled_read_only_capture(
            conn,
            db,
            300,
            local_storage.base_uri,
            "idle-1",
            incremental_snapshot_max_chunks_per_run=2,
            stream_follow_seconds=follow_seconds,
            stream_follow_idle_seconds=1.0,
        )
        runs, started = 0, False
        for _ in range(14):  # 15 chunks, 2 per window: 8 windows
            ticks = cdc.ticks(until_caught_up=False, max_ticks=1)
            runs += len(ticks.runs)
            assert all(r.success for r in ticks.runs)
            started = started or '"snapshot_id": "idle-1"' in cdc.cursor
            if started and '"incremental": null' in cdc.cursor:
                break
        assert '"incremental": null' in cdc.cursor, f"the snapshot did not finish: {cdc.cursor}"
        assert runs <= (3 if follow_seconds else 10), f"{runs} runs"
        log = read_delta(local_storage, local_storage.uri(db, db, "t", "changelog")).to_pylist()
        keys = [e["after"]["id"] for e in log if e["source"]["snapshot"] == "incremental"]
        assert sorted(keys) == list(range(1, 301)), "every row read once, none twice"
        st = read_current(local_storage, local_storage.uri(db, db, "t", "state")).to_pylist()
        assert sorted(r["id"] for r in st if not r["__deleted"]) == list(range(1, 301))
        with conn.cursor() as cur:  # the binlog moves on from the chunks' position
            cur.execute(f"UPDATE {db}.t SET v = 'changed' WHERE id IN (1, 300)")
            cur.execute(f"INSERT INTO {db}.t VALUES (301, 'new')")
            cur.execute(f"DELETE FROM {db}.t WHERE id = 150")
        cdc.ticks()
        src, key = source_rows(db, "t")
        assert live_state_rows(local_storage, local_storage.uri(db, db, "t", "state"), key) == src


def test_the_binlog_after_a_chunk_only_window_is_not_taken_for_it(local_storage):
    """A read-only snapshot read whole in one window on an idle binlog (its watermarks and the
    window's ends all one position), then changes: the next window starts at that position too,
    and its commits are not skipped as the chunk window's (they were, before chunk-only windows
    got an identity of their own: the update and the insert never reached the lake)."""
    with scratch_database("rochunk") as (db, conn):
        cdc = _signalled_read_only_capture(conn, db, 30, local_storage.base_uri, "one")
        for _ in range(4):  # the signal's window, then the chunk-only window
            cdc.ticks(until_caught_up=False, max_ticks=1)
        assert '"incremental": null' in cdc.cursor and '"snapshot_id"' not in cdc.cursor
        src, key = source_rows(db, "t")
        assert live_state_rows(local_storage, local_storage.uri(db, db, "t", "state"), key) == src
        with conn.cursor() as cur:
            cur.execute(f"UPDATE {db}.t SET v = 'changed' WHERE id = 1")
            cur.execute(f"INSERT INTO {db}.t VALUES (31, 'new')")
        cdc.ticks()
        src, key = source_rows(db, "t")
        assert live_state_rows(local_storage, local_storage.uri(db, db, "t", "state"), key) == src
