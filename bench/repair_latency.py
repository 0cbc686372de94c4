"""Time from a change the binlog does not carry to a repaired lake, under a real Dagster daemon.

Starts ``dagster-daemon run -f bench/daemon_location.py`` (as :mod:`bench.daemon_latency` does:
fresh ``DAGSTER_HOME``, default run launcher, the README example's resources unless
``--follow``/``--local-spark`` are given) capturing a parent table ``p`` and a child ``c`` with
``FOREIGN KEY (p_id) REFERENCES p ON DELETE CASCADE``, the sensor at ``--interval`` seconds and
the default ``binlog_gap_handling="repair"`` (the signal table exists). Then, ``--rounds`` times:

1. **statement DML**: ``UPDATE c`` of 50 rows in a session with ``binlog_format=STATEMENT``
   (no row images): seconds from its COMMIT until the lake's state of ``c`` has every new value;
2. **cascade**: ``DELETE FROM p`` of two parents (their children are deleted by InnoDB without a
   binlog event): seconds from its COMMIT until the lake has none of those children live.

    python -m bench.repair_latency --rounds 3 --interval 5

Target (issue 25): under 30 s at a 5 s sensor (50-121 s before, measured by the issue).
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
import uuid
from pathlib import Path

import pyarrow.dataset as pads
import pyarrow.fs as pafs
from deltalake import DeltaTable

from .daemon_latency import Daemon, load, root_conn, wait_for


def live(state_uri: str, columns: list[str]) -> list[dict]:
    """Live rows of a local state table (``[]`` while it does not exist)."""
    if not DeltaTable.is_deltatable(state_uri):
        return []
    files = pafs.SubTreeFileSystem(os.path.abspath(state_uri), pafs.LocalFileSystem())  # pyarrow's own
    ds = DeltaTable(state_uri).to_pyarrow_dataset(filesystem=files)
    return ds.to_table(columns=columns, filter=pads.field("__deleted") == False).to_pylist()  # noqa: E712


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--interval", type=int, default=5, help="sensor minimum_interval_seconds")
    ap.add_argument(
        "--follow", type=float, default=None, help="stream_follow_seconds (default: the resource's)"
    )
    ap.add_argument("--local-spark", action="store_true", help="runs start their own local Spark")
    args = ap.parse_args(argv)

    remote = "" if args.local_spark else os.environ.get("CDC_SPARK_REMOTE", "")
    db = f"bench_rep_{uuid.uuid4().hex[:6]}"
    root = root_conn()
    with root.cursor() as cur:
        cur.execute(f"CREATE DATABASE {db}")
        cur.execute(f"USE {db}")
        cur.execute("CREATE TABLE p (id INT PRIMARY KEY)")
        cur.execute(
            "CREATE TABLE c (id INT PRIMARY KEY, p_id INT, v INT, "
            "FOREIGN KEY (p_id) REFERENCES p (id) ON DELETE CASCADE)"
        )
        cur.execute("INSERT INTO p SELECT seq FROM seq_1_to_200")
        cur.execute("INSERT INTO c SELECT seq, 1 + seq % 200, 0 FROM seq_1_to_20000")
        cur.execute(
            "CREATE TABLE debezium_signal (id VARCHAR(42) PRIMARY KEY, type VARCHAR(32) NOT NULL, data VARCHAR(2048) NULL)"
        )
    lake = tempfile.mkdtemp(prefix="bench-rep-lake-")
    state = f"{lake}/{db}/{db}/c/state"
    log_path = Path(tempfile.mkstemp(prefix="bench-repair-daemon-", suffix=".log")[1])
    readme = args.follow is None and not args.local_spark
    print(
        f"repair benchmark: db {db}, "
        + ("the README example's resources" if readme else f"follow {args.follow}, Spark {remote or 'local'}")
        + f", sensor every {args.interval}s, daemon log {log_path}, {load()}",
        flush=True,
    )
    daemon = Daemon(
        db, lake, args.interval, remote, log_path, args.follow or 0.0, readme=readme, tables="p,c"
    )
    results: dict[str, list[float]] = {"statement_dml": [], "fk_cascade": []}
    try:
        if not wait_for(lambda: len(live(state, ["id"])) == 20000, 300):
            raise SystemExit(f"the initial snapshot did not land within 300 s; see {log_path}")
        time.sleep(args.interval)
        for n in range(1, args.rounds + 1):
            # 50 rows whose parents (1 + id % 200 in 2..51) no cascade round deletes (102 and up)
            lo = 200 * (n + 5) + 1
            hi = lo + 49
            with root.cursor() as cur:
                cur.execute("SET SESSION binlog_format = 'STATEMENT'")
                cur.execute(f"UPDATE {db}.c SET v = {n} WHERE id BETWEEN {lo} AND {hi}")
                cur.execute("SET SESSION binlog_format = 'ROW'")
            t0 = time.time()

            def updated(lo=lo, hi=hi, n=n):
                rows = {r["id"]: r["v"] for r in live(state, ["id", "v"]) if lo <= r["id"] <= hi}
                return len(rows) == 50 and set(rows.values()) == {n}

            ok = wait_for(updated, 300, 0.5)
            results["statement_dml"].append(time.time() - t0 if ok else float("inf"))
            print(
                f"  round {n}: statement DML repaired after {results['statement_dml'][-1]:.1f}s ({load()})",
                flush=True,
            )
            parents = (2 * n + 100, 2 * n + 101)
            with root.cursor() as cur:
                cur.execute(f"DELETE FROM {db}.p WHERE id IN {parents}")
            t0 = time.time()
            ok = wait_for(
                lambda parents=parents: not any(r["p_id"] in parents for r in live(state, ["p_id"])), 300, 0.5
            )
            results["fk_cascade"].append(time.time() - t0 if ok else float("inf"))
            print(
                f"  round {n}: cascade repaired after {results['fk_cascade'][-1]:.1f}s ({load()})", flush=True
            )
    finally:
        daemon.stop()
        with root.cursor() as cur:
            cur.execute(f"DROP DATABASE IF EXISTS {db}")
    print("\n== repair benchmark (seconds from the COMMIT to a repaired lake; target < 30 s) ==")
    for kind, values in results.items():
        if values:
            print(
                f"{kind}: median {statistics.median(values):.1f}s, max {max(values):.1f}s over {len(values)} rounds"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
