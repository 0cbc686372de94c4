"""Hundreds of tables under a real Dagster daemon (issue 28, the path a deployment runs).

``bench/many_tables.py`` drives the sensor in this process with an in-memory Dagster instance.
This benchmark runs what a user runs instead: ``dagster-daemon run`` on a fresh ``DAGSTER_HOME``
(SQLite storage, the default run launcher: each run is a new process that loads the code location,
imports the library and connects to Spark), the code location of ``bench/daemon_location.py``
capturing ``--tables`` tables, with the resources as the README's example writes them (following
runs, ``spark_remote`` auto: the Spark Connect server of ``infra/spark_connect.sh``). Printed, in
one run:

- the initial snapshot: daemon start -> the snapshot run's success;
- windows whose one transaction updates a row of 3 tables, of ``--touch`` tables (default: all),
  the same again, and 3 tables again: COMMIT -> every touched row visible in the lake's current
  state (``read_current``, polled), and COMMIT -> the success of every run that was going or
  started since (the tables are then materialized in Dagster and the sensor can move its cursor),
  with each run's launch (created -> RUN_START: the planned events, process start, code location
  load) and run (RUN_START -> RUN_SUCCESS);
- the sensor's tick durations from the daemon's tick records (idle ticks: no run requested).

    python -m bench.daemon_many_tables --tables 300
    python -m bench.daemon_many_tables --tables 1000 --touch 100
    python -m bench.daemon_many_tables --tables 300 --postgres   # Dagster storage on PostgreSQL

``--postgres``: the Dagster instance's storage (runs, event log, schedules) on a PostgreSQL server
this benchmark starts for itself (Debian's ``postgresql`` package, ``initdb`` into a temporary
directory, loopback only, default durability settings), as a production deployment configures it
(``dagster-postgres``), instead of SQLite files under ``DAGSTER_HOME``.

Prints the machine load (1-minute average) beside the figures: the machine is shared.
"""

from __future__ import annotations

import argparse
import glob
import os
import shutil
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import dagster as dg

from dagster_mysql_cdc.dagster_integration.protocol import MODE_TAG

from .daemon_latency import Daemon, load, percentile, run_timing, wait_for
from .many_tables import _create, _drop, _touch, window_rounds


def _row_visible(lake: str, db: str, table: str, value: str) -> bool:
    """Whether row ``id = 1`` of ``table`` has ``v == value`` in the lake's current state."""
    from dagster_mysql_cdc.sink.read import read_current
    from dagster_mysql_cdc.sink.storage import StorageSettings

    try:
        t = read_current(StorageSettings(base_uri=lake), f"{lake}/{db}/{db}/{table}/state", live=True)
    except Exception:  # noqa: BLE001 - not created yet
        return False
    if t is None:
        return False
    rows = dict(zip(t.column("id").to_pylist(), t.column("v").to_pylist(), strict=True))
    return rows.get(1) == value


@contextmanager
def postgres_storage(port: int, tcp: bool = True) -> Iterator[str]:
    """A throwaway PostgreSQL server on ``127.0.0.1:port`` (Debian's ``postgresql`` binaries, run
    as the ``postgres`` user, trust authentication on loopback); yields the ``dagster.yaml``
    ``storage:`` section of a database ``dagster`` on it. Stopped and removed on exit.
    ``tcp=False``: on its Unix socket only (in its data directory; ``port`` names the socket).

    Raises:
        SystemExit: the PostgreSQL binaries are missing (``apt-get install postgresql``).
    """
    bins = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    if not bins:
        raise SystemExit("--postgres needs Debian's postgresql package: apt-get install postgresql")
    bindir = os.path.dirname(bins[-1])
    data = tempfile.mkdtemp(prefix="bench-pg-")
    shutil.chown(data, "postgres")

    def as_postgres(*cmd: str) -> None:
        subprocess.run(["runuser", "-u", "postgres", "--", *cmd], check=True, capture_output=True)

    as_postgres(f"{bindir}/initdb", "-D", data, "-A", "trust", "-U", "postgres")
    host = "127.0.0.1" if tcp else data
    opts = f"-p {port} -k {data} -c listen_addresses=" + ("127.0.0.1" if tcp else "''")
    as_postgres(f"{bindir}/pg_ctl", "-D", data, "-l", f"{data}/server.log", "-o", opts, "-w", "start")
    try:
        as_postgres(f"{bindir}/createdb", "-h", host, "-p", str(port), "dagster")
        if not tcp:
            yield (
                "storage:\n  postgres:\n    postgres_url: "
                f"postgresql+psycopg2://postgres@/dagster?host={data}&port={port}\n"
            )
            return
        yield (
            "storage:\n  postgres:\n    postgres_db:\n      username: postgres\n      password: unused\n"
            f"      hostname: 127.0.0.1\n      db_name: dagster\n      port: {port}\n"
            # SQLAlchemy 2.1 maps postgresql:// to psycopg 3; dagster-postgres ships psycopg2
            "      scheme: postgresql+psycopg2\n"
        )
    finally:
        as_postgres(f"{bindir}/pg_ctl", "-D", data, "-m", "fast", "-w", "stop")
        shutil.rmtree(data, ignore_errors=True)


def _ticks(instance: dg.DagsterInstance) -> list:
    """The sensor's finished ticks (the code location has one sensor)."""
    states = [s for s in instance.all_instigator_state() if s.instigator_type.value == "SENSOR"]
    out = []
    for s in states:
        out.extend(
            t
            for t in instance.get_ticks(s.instigator_origin_id, s.selector_id, limit=10_000)
            if t.tick_data.end_timestamp is not None
        )
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tables", type=int, default=300)
    ap.add_argument("--rows", type=int, default=10)
    ap.add_argument("--touch", type=int, default=None, help="tables of the large window (default: all)")
    ap.add_argument("--interval", type=int, default=5, help="sensor minimum_interval_seconds")
    ap.add_argument("--timeout", type=float, default=900, help="seconds to wait for each step")
    ap.add_argument("--log", default=None, help="daemon log file (default: a temporary file)")
    ap.add_argument("--postgres", action="store_true", help="the Dagster storage on PostgreSQL (see above)")
    ap.add_argument("--postgres-port", type=int, default=5439)
    args = ap.parse_args(argv)
    if args.postgres:
        with postgres_storage(args.postgres_port) as storage_yaml:
            return _run(args, storage_yaml)
    return _run(args, "")


def _run(args: argparse.Namespace, storage_yaml: str) -> int:
    """The benchmark with ``storage_yaml`` in the daemon's ``dagster.yaml`` (empty: SQLite)."""

    db = f"bench_dmt_{uuid.uuid4().hex[:6]}"
    names = [f"t{i:04d}" for i in range(args.tables)]
    print(f"creating {args.tables} tables of {args.rows} rows in {db} ...", flush=True)
    _create(db, args.tables, args.rows)
    lake = tempfile.mkdtemp(prefix="bench-dmt-lake-")
    log_path = Path(args.log) if args.log else Path(tempfile.mkstemp(prefix="bench-dmt-", suffix=".log")[1])
    print(
        f"daemon log {log_path}, CDC_SPARK_REMOTE={os.environ.get('CDC_SPARK_REMOTE', '')!r} ({load()})",
        flush=True,
    )
    figures: dict[str, float] = {}
    daemon = None
    try:
        t0 = time.monotonic()
        remote = os.environ.get("CDC_SPARK_REMOTE", "")  # as the README's example reads it
        daemon = Daemon(
            db,
            lake,
            args.interval,
            remote,
            log_path,
            300,
            readme=True,
            tables=",".join(names),
            storage_yaml=storage_yaml,
        )
        instance = daemon.instance

        def snapshot_done() -> bool:
            runs = instance.get_run_records(filters=dg.RunsFilter(tags={MODE_TAG: "snapshot"}))
            if any(r.dagster_run.status == dg.DagsterRunStatus.FAILURE for r in runs):
                raise SystemExit(f"the snapshot run failed; see {log_path}")
            return any(r.dagster_run.status == dg.DagsterRunStatus.SUCCESS for r in runs)

        if not wait_for(snapshot_done, args.timeout, 1.0):
            raise SystemExit(
                f"the initial snapshot did not finish within {args.timeout:.0f} s; see {log_path}"
            )
        figures["initial snapshot, daemon start -> run success (s)"] = time.monotonic() - t0
        print(
            f"initial snapshot: {figures['initial snapshot, daemon start -> run success (s)']:.1f} s ({load()})"
        )
        time.sleep(2 * args.interval)  # the sensor's first window after the snapshot (nothing to read)

        for round_, (label, which) in enumerate(window_rounds(args.touch or args.tables), 1):
            finished_before = {
                r.dagster_run.run_id for r in instance.get_run_records() if r.dagster_run.is_finished
            }
            _touch(db, which, round_)
            committed, committed_at = time.monotonic(), time.time()
            value = f"round {round_}"
            for i in which:  # every touched row, one table after another
                if not wait_for(
                    lambda i=i, value=value: _row_visible(lake, db, names[i], value), args.timeout, 0.25
                ):
                    raise SystemExit(f"{names[i]} did not show round {round_} within {args.timeout:.0f} s")
            secs = time.monotonic() - committed
            figures[f"window touching {label}: COMMIT -> visible in the lake (s)"] = secs

            def others(finished_before=finished_before):
                return [r for r in instance.get_run_records() if r.dagster_run.run_id not in finished_before]

            # the runs that were going or started since: finished = materialized in Dagster and
            # the sensor free to move its cursor
            if not wait_for(lambda: all(r.dagster_run.is_finished for r in others()), args.timeout, 0.25):
                raise SystemExit(f"a run of round {round_} did not finish within {args.timeout:.0f} s")
            timed = [t for t in (run_timing(instance, r) for r in others()) if t]
            done = max((t["end"] for t in timed), default=time.time()) - committed_at
            figures[f"window touching {label}: COMMIT -> run success (s)"] = done
            runs = ", ".join(f"launch {t['launch']:.1f} s + run {t['run']:.1f} s" for t in timed)
            print(
                f"window touching {label}: COMMIT -> visible {secs:.1f} s, -> run success {done:.1f} s "
                f"(runs: {runs}) ({load()})",
                flush=True,
            )
            time.sleep(2 * args.interval)

        ticks = _ticks(instance)
        # idle: caught up, nothing to settle (a tick settling a window or waiting for a run is not)
        idle = [
            t.tick_data.end_timestamp - t.tick_data.timestamp
            for t in ticks
            if not t.tick_data.run_ids and (t.tick_data.skip_reason or "").startswith("caught up")
        ]
        busy = [t.tick_data.end_timestamp - t.tick_data.timestamp for t in ticks if t.tick_data.run_ids]
        if idle:
            figures["idle sensor tick p50 (s)"] = percentile(idle, 50)
            figures["idle sensor tick max (s)"] = max(idle)
        if busy:
            figures["tick requesting a run p50 (s)"] = percentile(busy, 50)
        print(f"sensor ticks: {len(ticks)}, of which {len(idle)} idle and {len(busy)} requesting runs")
    finally:
        if daemon is not None:
            daemon.stop()
            shutil.rmtree(daemon.home, ignore_errors=True)
        _drop(db)
        shutil.rmtree(lake, ignore_errors=True)
    print()
    kind = "PostgreSQL" if storage_yaml else "SQLite"
    print(f"| figure ({args.tables} tables, dagster-daemon, {kind} instance, local lake) | value |")
    print("|---|---|")
    for k, v in figures.items():
        print(f"| {k} | {v:.2f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
