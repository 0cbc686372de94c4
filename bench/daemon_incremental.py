"""Incremental snapshot throughput under a real Dagster daemon (the path a deployment runs).

A table of ``--rows`` rows (the benchmark table of bench/_common.py: ten columns, JSON, decimals,
timestamps) is captured with ``snapshot_mode="no_data"`` (schema only, as Debezium users pair
``no_data`` with incremental snapshots) by the code location of ``bench/daemon_location.py``
under ``dagster-daemon run`` (a fresh ``DAGSTER_HOME``, SQLite, the default run launcher: each run
is a new process), the sensor every ``--interval`` s (30: the README's). Then an
``execute-snapshot`` signal is inserted, and the benchmark times it until the lake's current state
holds every row (``read_current``'s live count, polled every second). Two variants, one after the
other, each on its own database, lake and Dagster instance:

- ``following``: the README example's resources (``stream_follow_seconds`` 300, ``spark_remote``
  auto, the default ``incremental_snapshot_chunk_size`` 1,024 and
  ``incremental_snapshot_max_chunks_per_run`` 64): a following run reads chunk after chunk,
  window after window, for its whole budget;
- ``one window per run`` (``stream_follow_seconds=0``, the same Spark Connect server): each
  sensor tick's run reads one window's chunks, which is what every run with an incremental
  snapshot did before following runs read chunks.

Printed per variant: seconds from the signal to every row in the lake, rows/s, the stream runs
it took, and the ratio of the two; with ``--rows`` a list (``100000,400000``) each size is run,
so the growth shows. Timings are printed, never asserted; every wait is bounded (``--timeout``).

    python -m bench.daemon_incremental --rows 100000,400000
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time
import uuid
from pathlib import Path

from ._common import TABLE_DDL, insert_select
from .daemon_latency import Daemon, load, root_conn, wait_for

VARIANTS = (("following", True, 300.0), ("one window per run", False, 0.0))


def _live_rows(lake: str, db: str) -> int:
    """Live rows of ``db.t`` in the lake's current state (0 before its first commit)."""
    from dagster_mysql_cdc.dagster_integration.verify import live_row_count
    from dagster_mysql_cdc.sink.storage import StorageSettings

    try:
        return live_row_count(StorageSettings(base_uri=lake), f"{lake}/{db}/{db}/t/state") or 0
    except Exception:  # noqa: BLE001 - not created yet, or a commit in progress: ask again
        return 0


def _one(rows: int, label: str, readme: bool, follow: float, args, remote: str) -> dict:
    """One variant at one size: the seconds from the signal to every row in the lake, the
    stream runs created meanwhile, the load."""
    db = f"bench_di_{uuid.uuid4().hex[:6]}"
    root = root_conn()
    with root.cursor() as cur:
        cur.execute(f"CREATE DATABASE {db}")
        cur.execute(TABLE_DDL.format(db=db, table="t"))
        cur.execute(insert_select(db, "t", 1, rows))
        cur.execute(
            f"CREATE TABLE {db}.debezium_signal (id VARCHAR(42) PRIMARY KEY, type VARCHAR(32) NOT NULL, "
            "data VARCHAR(2048) NULL)"
        )
    lake = tempfile.mkdtemp(prefix="bench-di-lake-")
    log_path = Path(tempfile.mkstemp(prefix="bench-di-", suffix=".log")[1])
    daemon = Daemon(
        db,
        lake,
        args.interval,
        remote,
        log_path,
        follow,
        readme=readme,
        extra_env={"BENCH_DAEMON_SNAPSHOT_MODE": "no_data"},
    )
    try:
        state = f"{lake}/{db}/{db}/t/state"
        if not wait_for(lambda: Path(state, "_delta_log").is_dir(), 300):
            raise SystemExit(f"the no_data snapshot did not land within 300 s; see {log_path}")
        before = {r.dagster_run.run_id for r in daemon.stream_runs()}
        with root.cursor() as cur:
            cur.execute(
                f"INSERT INTO {db}.debezium_signal VALUES ('b1', 'execute-snapshot', "
                f'\'{{"data-collections": ["{db}.t"]}}\')'
            )
        t0 = time.monotonic()
        done = wait_for(lambda: _live_rows(lake, db) >= rows, args.timeout, 1.0)
        seconds = time.monotonic() - t0
        runs = [r for r in daemon.stream_runs() if r.dagster_run.run_id not in before]
        return {
            "variant": label,
            "rows": rows,
            "seconds": seconds if done else None,
            "runs": len(runs),
            "load": load(),
            "log": str(log_path),
        }
    finally:
        daemon.stop()
        with root.cursor() as cur:
            cur.execute(f"DROP DATABASE IF EXISTS {db}")
        root.close()
        shutil.rmtree(lake, ignore_errors=True)
        shutil.rmtree(daemon.home, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", default="100000", help="table sizes, comma-separated")
    ap.add_argument("--interval", type=int, default=30, help="sensor minimum_interval_seconds (README: 30)")
    ap.add_argument("--timeout", type=float, default=1800, help="longest wait for one snapshot (s)")
    ap.add_argument(
        "--variants",
        default="following,one window per run",
        help="comma-separated subset of: following, one window per run",
    )
    args = ap.parse_args(argv)
    remote = os.environ.get("CDC_SPARK_REMOTE", "sc://127.0.0.1:15002")
    wanted = [v.strip() for v in args.variants.split(",")]
    print(
        f"incremental snapshot under dagster-daemon (SQLite), sensor every {args.interval}s, "
        f"Spark Connect {remote}, chunk 1024 x 64 per window (defaults), {load()}",
        flush=True,
    )
    results: list[dict] = []
    for rows in [int(r) for r in args.rows.split(",")]:
        for label, readme, follow in VARIANTS:
            if label not in wanted:
                continue
            r = _one(rows, label, readme, follow, args, remote)
            results.append(r)
            rate = f"{rows / r['seconds']:>9,.0f} rows/s" if r["seconds"] else "timed out"
            took = f"{r['seconds']:.1f}s" if r["seconds"] else f">{args.timeout:.0f}s"
            print(
                f"  {rows:>10,} rows  {label:<20} {took:>8}  {rate}  {r['runs']} stream run(s)  ({r['load']})",
                flush=True,
            )
        pair = {r["variant"]: r for r in results if r["rows"] == rows}
        a, b = pair.get("following"), pair.get("one window per run")
        if a and b and a["seconds"] and b["seconds"]:
            print(f"  {rows:>10,} rows  following is {b['seconds'] / a['seconds']:.1f}x faster", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
