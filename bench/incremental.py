"""Incremental snapshot rate vs a raw pymysql SSCursor scan of the same table, in one run.

Creates a table of ``--rows`` rows (default 100,000), measures a plain ``SELECT *`` with pymysql's
unbuffered SSCursor, then an incremental snapshot of the same table driven through the binlog
sensor (execute-snapshot signal, chunk size ``--chunk``, all chunks of a run read in one window):
rows/s from the signal to the last chunk committed in the lake, and the ratio.

    python -m bench.incremental --rows 100000 --chunk 5000
"""

import argparse
import tempfile
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


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--rows", type=int, default=100_000)
    ap.add_argument("--chunk", type=int, default=5000)
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

        mysql = MySqlCdcResource(
            host=MYSQL_HOST,
            port=MYSQL_PORT,
            user=CDC_USER,
            password=CDC_PASSWORD,
            server_name=db,
            database_include_list=[db],
            snapshot_mode="no_data",
            server_id=5811,
            incremental_snapshot_chunk_size=args.chunk,
            incremental_snapshot_max_chunks_per_run=1000,
            pk_range_rows=0,
        )
        mysql.create_signal_table()

        @mysql_cdc_assets(tables=mysql.discover_tables(tables=[f"{db}.t"]), server_name=db, checks=False)
        def cdc(context: dg.AssetExecutionContext, mysql: MySqlCdcResource, lake: CdcLakeResource):
            yield from mysql.sync(context=context, lake=lake)

        resources = {"mysql": mysql, "lake": CdcLakeResource(base_uri=tempfile.mkdtemp(prefix="bench-inc-"))}
        sensor = build_mysql_cdc_sensor(cdc)
        instance = dg.DagsterInstance.ephemeral()
        ticks = run_sensor_ticks(sensor, cdc, resources, instance)  # no_data snapshot; JVM started
        with root.cursor() as cur:
            cur.execute(
                f"INSERT INTO {db}.debezium_signal VALUES ('b1','execute-snapshot','{{\"data-collections\":[\"{db}.t\"]}}')"
            )
        t0 = time.monotonic()
        for _ in range(20):
            ticks = run_sensor_ticks(sensor, cdc, resources, instance, cursor=ticks.cursor)
            if '"incremental": null' in (ticks.cursor or "") and "caught up" in (
                ticks.skip_reasons[-1] if ticks.skip_reasons else ""
            ):
                break
        inc_s = time.monotonic() - t0
        raw_rate, inc_rate = n / raw_s, args.rows / inc_s
        print(f"table of {args.rows:,} rows, chunk {args.chunk}")
        print(f"  raw pymysql SSCursor scan      {raw_rate:>12,.0f} rows/s ({raw_s:.1f}s)")
        print(
            f"  incremental snapshot into lake {inc_rate:>12,.0f} rows/s ({inc_s:.1f}s, sensor-driven, JVM already up)"
        )
        print(
            f"  ratio incremental / raw scan: {inc_rate / raw_rate:.2f}  (issue target for snapshots: >= 0.8)"
        )
    finally:
        with root.cursor() as cur:
            cur.execute(f"DROP DATABASE IF EXISTS {db}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
