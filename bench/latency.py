"""Latency: time from COMMIT in MariaDB to the row being visible in the lake's state table.

A writer applies ~``--rate`` row changes per second (batched every 10 ms) and, every 0.5 s, commits
a *marker* row whose commit time it records. The binlog sensor is driven in-process every
``--interval`` seconds (what the Dagster daemon does for ``minimum_interval_seconds``); after each
run the state table is read and the markers that became visible get their latency. Prints p50/p95/
max against the target ``p95 <= interval + 5 s``.

    python -m bench.latency --seconds 60 --interval 5 --rate 1000
"""

import argparse
import os
import tempfile
import threading
import time
import uuid

import dagster as dg
import pymysql
from deltalake import DeltaTable

from dagster_mysql_cdc import CdcLakeResource, MySqlCdcResource, build_mysql_cdc_sensor, mysql_cdc_assets

from ._common import CDC_PASSWORD, CDC_USER, MYSQL_HOST, MYSQL_PORT, ROOT_PASSWORD


def percentile(values: list[float], p: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, int(round(p / 100 * (len(s) - 1))))] if s else float("nan")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--seconds", type=float, default=60)
    ap.add_argument("--interval", type=float, default=5)
    ap.add_argument("--rate", type=int, default=1000, help="row changes per second")
    args = ap.parse_args(argv)
    measure(seconds=args.seconds, interval=args.interval, rate=args.rate)
    return 0


def measure(*, seconds: float, interval: float, rate: int) -> dict:
    """Run the benchmark; print and return ``{p50, p95, max, markers, runs, load}`` (seconds; mean
    1-minute load average). ``bench/daemon_latency.py`` prints it beside the daemon's figure."""
    args = argparse.Namespace(seconds=seconds, interval=interval, rate=rate)
    db = f"bench_lat_{uuid.uuid4().hex[:6]}"
    root = pymysql.connect(
        host=MYSQL_HOST, port=MYSQL_PORT, user="root", password=ROOT_PASSWORD, autocommit=True
    )
    with root.cursor() as cur:
        cur.execute(f"CREATE DATABASE {db}")
        cur.execute(
            f"CREATE TABLE {db}.t (id BIGINT PRIMARY KEY, v VARCHAR(32), n INT, marker_ns BIGINT NULL)"
        )
    mysql = MySqlCdcResource(
        host=MYSQL_HOST,
        port=MYSQL_PORT,
        user=CDC_USER,
        password=CDC_PASSWORD,
        server_name=db,
        database_include_list=[db],
        server_id=5801,
    )
    lake_dir = tempfile.mkdtemp(prefix="bench-lat-")

    @mysql_cdc_assets(tables=mysql.discover_tables(), server_name=db, checks=False)
    def cdc(context: dg.AssetExecutionContext, mysql: MySqlCdcResource, lake: CdcLakeResource):
        yield from mysql.sync(context=context, lake=lake)

    resources = {"mysql": mysql, "lake": CdcLakeResource(base_uri=lake_dir)}
    sensor = build_mysql_cdc_sensor(cdc)
    instance = dg.DagsterInstance.ephemeral()
    cursor = None

    def tick() -> int:
        nonlocal cursor
        runs = 0
        with dg.build_sensor_context(instance=instance, cursor=cursor, resources=resources) as ctx:
            result = sensor.evaluate_tick(ctx)
        cursor = result.cursor or cursor
        for req in result.run_requests or []:
            dg.materialize(
                [cdc],
                resources=resources,
                instance=instance,
                selection=req.asset_selection,
                tags=dict(req.tags),
            )
            runs += 1
        return runs

    tick()  # initial snapshot (JVM start) before measuring
    tick()
    markers: dict[int, int] = {}  # id -> commit time (ns)
    stop = threading.Event()

    def writer() -> None:
        w = pymysql.connect(
            host=MYSQL_HOST, port=MYSQL_PORT, user="root", password=ROOT_PASSWORD, autocommit=False
        )
        per_batch = max(1, args.rate // 100)
        next_id, next_marker = 1, time.monotonic()
        with w.cursor() as cur:
            while not stop.is_set():
                t0 = time.monotonic()
                rows = [(next_id + i, "x", i, None) for i in range(per_batch)]
                cur.executemany(f"INSERT INTO {db}.t VALUES (%s,%s,%s,%s)", rows)
                w.commit()
                next_id += per_batch
                if t0 >= next_marker:
                    cur.execute(f"INSERT INTO {db}.t VALUES (%s,'marker',0,%s)", (next_id, 0))
                    w.commit()
                    markers[next_id] = time.time_ns()
                    next_id += 1
                    next_marker = t0 + 0.5
                time.sleep(max(0.0, 0.01 - (time.monotonic() - t0)))
        w.close()

    th = threading.Thread(target=writer)
    th.start()
    latencies: dict[int, float] = {}
    start = time.monotonic()
    n_runs = 0
    loads: list[float] = []
    try:
        while time.monotonic() - start < args.seconds:
            loads.append(os.getloadavg()[0])
            t_tick = time.monotonic()
            n_runs += tick()
            seen_ns = time.time_ns()
            state = DeltaTable(f"{lake_dir}/{db}/{db}/t/state").to_pyarrow_table(columns=["id", "v"])
            visible = {
                i
                for i, v in zip(state.column("id").to_pylist(), state.column("v").to_pylist())
                if v == "marker"
            }
            for mid, t_commit in list(markers.items()):
                if mid in visible and mid not in latencies:
                    latencies[mid] = (seen_ns - t_commit) / 1e9
            time.sleep(max(0.0, args.interval - (time.monotonic() - t_tick)))
    finally:
        stop.set()
        th.join()
    lat = list(latencies.values())
    p50, p95 = percentile(lat, 50), percentile(lat, 95)
    target = args.interval + 5
    print(
        f"latency COMMIT -> visible in lake state, writer ~{args.rate} changes/s, sensor every {args.interval:.0f}s, "
        f"{args.seconds:.0f}s, {n_runs} window runs, {len(lat)} markers"
    )
    print(
        f"  p50 {p50:.2f}s  p95 {p95:.2f}s  max {max(lat) if lat else float('nan'):.2f}s   target p95 <= {target:.0f}s: "
        f"{'MET' if p95 <= target else 'NOT MET'} (ratio p95/target {p95 / target:.2f})"
    )
    with root.cursor() as cur:
        cur.execute(f"DROP DATABASE IF EXISTS {db}")
    return {
        "p50": p50,
        "p95": p95,
        "max": max(lat) if lat else float("nan"),
        "markers": len(lat),
        "runs": n_runs,
        "load": sum(loads) / max(1, len(loads)),
    }


if __name__ == "__main__":
    raise SystemExit(main())
