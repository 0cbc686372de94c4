"""Incremental snapshot rate vs a raw pymysql SSCursor scan of the same table, in one run.

Creates a table of ``--rows`` rows (default 100,000), measures a plain ``SELECT *`` with pymysql's
unbuffered SSCursor, then an incremental snapshot of the same table driven through the binlog
sensor (execute-snapshot signal, chunk size ``--chunk``, all chunks of a run read in one window):
rows/s from the signal to the last chunk committed in the lake, and the ratio. Two variants side
by side: chunk by chunk on the run's process, and ``snapshot_split_reads`` (the run's chunks read
as splits by the Spark executors inside one watermark window). ``--writes-per-second N`` adds a
second series of both with a writer updating random rows meanwhile.

    python -m bench.incremental --rows 100000 --chunk 5000 --writes-per-second 500
"""

import argparse
import random
import tempfile
import threading
import time
import uuid

import dagster as dg
import pymysql
import pymysql.cursors

from dagster_mysql_cdc import (
    CdcLakeResource,
    MySqlCdcResource,
    build_mysql_cdc_sensor,
    mysql_cdc_assets,
    run_sensor_ticks,
)

from ._common import CDC_PASSWORD, CDC_USER, MYSQL_HOST, MYSQL_PORT, ROOT_PASSWORD


def _writer(db: str, rate: int, stop: threading.Event, count: list[int]) -> None:
    """Updates of random rows of ``db.t`` at about ``rate`` per second until ``stop``."""
    conn = pymysql.connect(
        host=MYSQL_HOST, port=MYSQL_PORT, user="root", password=ROOT_PASSWORD, autocommit=True
    )
    t0 = time.monotonic()
    with conn.cursor() as cur:
        while not stop.is_set():
            k = random.randint(1, 1_000_000_000) % 100_000 + 1
            cur.execute(f"UPDATE {db}.t SET qty = qty + 1 WHERE id = %s", (k,))
            count[0] += 1
            ahead = count[0] / rate - (time.monotonic() - t0)
            if ahead > 0:
                time.sleep(ahead)
    conn.close()


def _incremental(root, db: str, args, server: str, split: bool, rate: int) -> tuple[float, int]:
    """Seconds from the execute-snapshot signal until the snapshot is done and the sensor caught up
    (one series: its own server name, lake and Dagster instance); and the writes made meanwhile."""
    mysql = MySqlCdcResource(
        host=MYSQL_HOST,
        port=MYSQL_PORT,
        user=CDC_USER,
        password=CDC_PASSWORD,
        server_name=server,
        database_include_list=[db],
        snapshot_mode="no_data",
        server_id=5811,
        incremental_snapshot_chunk_size=args.chunk,
        incremental_snapshot_max_chunks_per_run=1000,
        pk_range_rows=0,
        snapshot_split_reads=split,
    )
    mysql.create_signal_table()

    @mysql_cdc_assets(tables=mysql.discover_tables(tables=[f"{db}.t"]), server_name=server, checks=False)
    def cdc(context: dg.AssetExecutionContext, mysql: MySqlCdcResource, lake: CdcLakeResource):
        yield from mysql.sync(context=context, lake=lake)

    resources = {"mysql": mysql, "lake": CdcLakeResource(base_uri=tempfile.mkdtemp(prefix="bench-inc-"))}
    sensor = build_mysql_cdc_sensor(cdc)
    instance = dg.DagsterInstance.ephemeral()
    ticks = run_sensor_ticks(
        sensor, cdc, resources, instance, run_log_level="ERROR"
    )  # no_data snapshot; JVM started
    stop, count = threading.Event(), [0]
    th = threading.Thread(target=_writer, args=(db, rate, stop, count), daemon=True)
    if rate:
        th.start()
    sid = f"b-{server}"[-30:]
    with root.cursor() as cur:
        cur.execute(
            f"INSERT INTO {db}.debezium_signal VALUES ('{sid}','execute-snapshot','{{\"data-collections\":[\"{db}.t\"]}}')"
        )
    t0 = time.monotonic()
    try:
        for _ in range(40):
            ticks = run_sensor_ticks(
                sensor, cdc, resources, instance, cursor=ticks.cursor, max_ticks=5, run_log_level="ERROR"
            )
            if '"incremental": null' in (ticks.cursor or "") and (
                rate or "caught up" in (ticks.skip_reasons[-1] if ticks.skip_reasons else "")
            ):
                break
    finally:
        stop.set()
        if rate:
            th.join()
    return time.monotonic() - t0, count[0]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--rows", type=int, default=100_000)
    ap.add_argument("--chunk", type=int, default=5000)
    ap.add_argument(
        "--writes-per-second",
        type=int,
        default=0,
        help="also run both variants with a writer updating random rows at this rate (second series)",
    )
    args = ap.parse_args(argv)
    db = f"bench_inc_{uuid.uuid4().hex[:6]}"
    root = pymysql.connect(
        host=MYSQL_HOST, port=MYSQL_PORT, user="root", password=ROOT_PASSWORD, autocommit=True
    )
    with root.cursor() as cur:
        cur.execute(f"CREATE DATABASE {db}")
        cur.execute(f"USE {db}")
        cur.execute(
            "CREATE TABLE t (id BIGINT PRIMARY KEY, qty INT, name VARCHAR(64), price DECIMAL(12,2), "
            "created DATETIME(6), flag TINYINT, score DOUBLE, doc JSON, day DATE)"
        )
        cur.execute(
            f"INSERT INTO t SELECT seq, seq % 1000, CONCAT('name-', seq), seq / 100, NOW(6), seq % 2, "
            f"seq * 1.5, JSON_OBJECT('k', seq), CURDATE() FROM seq_1_to_{int(args.rows)}"
        )
    try:
        conn = pymysql.connect(host=MYSQL_HOST, port=MYSQL_PORT, user=CDC_USER, password=CDC_PASSWORD)
        t0 = time.monotonic()
        n = 0
        with conn.cursor(pymysql.cursors.SSCursor) as cur:
            cur.execute(f"SELECT * FROM {db}.t")
            while rows := cur.fetchmany(10_000):
                n += len(rows)
        raw_s = time.monotonic() - t0
        conn.close()

        print(f"table of {args.rows:,} rows, chunk {args.chunk}")
        print(f"  raw pymysql SSCursor scan        {n / raw_s:>12,.0f} rows/s ({raw_s:.1f}s)")
        # round 1 pays the start of Spark's Python workers (first job of each data source); round 2
        # is what a warm deployment (a long-lived Spark Connect server, or later runs) sees
        series = [
            ("chunk by chunk, round 1", False, 0),
            ("split reads, round 1", True, 0),
            ("chunk by chunk, round 2", False, 0),
            ("split reads, round 2", True, 0),
        ]
        if args.writes_per_second:
            series += [
                ("chunk by chunk + writes", False, args.writes_per_second),
                ("split reads + writes", True, args.writes_per_second),
            ]
        for i, (label, split, rate) in enumerate(series):
            inc_s, writes = _incremental(root, db, args, f"{db}_{i}", split, rate)
            inc_rate = args.rows / inc_s
            print(
                f"  incremental, {label:<25} {inc_rate:>12,.0f} rows/s ({inc_s:.1f}s, {inc_rate / (n / raw_s):.2f}x raw"
                + (f", {writes:,} concurrent writes" if rate else "")
                + ")"
            )
        print("  (sensor-driven, in process, JVM already up; issue 15 target: split reads >= 0.8x raw)")
    finally:
        with root.cursor() as cur:
            cur.execute(f"DROP DATABASE IF EXISTS {db}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
