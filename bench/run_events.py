"""The Dagster events of a many-table window's run, and the time Dagster spends storing them
(issue 42).

One database of ``--tables`` keyed tables is captured through the public API (``mysql_cdc_assets``,
``build_mysql_cdc_sensor``, ``run_sensor_ticks``: each run is executed in this process, as
``bench/many_tables.py`` does) into a local lake, with a real Dagster instance: a fresh
``DAGSTER_HOME`` with SQLite storage, or (``--postgres``) the storage of a PostgreSQL server this
benchmark starts for itself (Debian's ``postgresql`` package, ``dagster-postgres``, as
``bench/daemon_many_tables.py --postgres``; its socket only, no TCP port). After the initial
snapshot, two windows each update one row of every table (or of the first ``--touch``) in one
transaction (the first one after the snapshot creates each table's state tail); the second one is
measured:

- the run's stored events by type (``instance.all_logs``), those naming one table (its asset, its
  check, its output or one log line about it) per table, and the rest (the binlog asset's, the
  run's own, summary log lines);
- the seconds the instance spent handling each type (``DagsterInstance.handle_new_event``: writing
  the event and its asset or check index rows), the run's total handling time, and the run's wall
  time (``materialize``: run creation with its planned events, execution, checks).

    python -m bench.run_events --tables 30
    python -m bench.run_events --tables 300 --postgres
    python -m bench.run_events --tables 30 --touch 3               # a small window
    python -m bench.run_events --tables 300 --planned-max 1000   # every check planned

Prints one markdown table per run.
"""

import argparse
import collections
import os
import re
import shutil
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager

import dagster as dg

from dagster_mysql_cdc import (
    CdcLakeResource,
    MySqlCdcResource,
    build_mysql_cdc_sensor,
    mysql_cdc_assets,
    run_sensor_ticks,
)

from .daemon_latency import load
from .daemon_many_tables import postgres_storage
from .many_tables import _create, _drop, _touch

# no `from __future__ import annotations`: Dagster reads the asset function's annotations

_TABLE = re.compile(r"(?<![0-9A-Za-z])t\d{4}(?!\d)")


def event_label(entry) -> str:
    """The event's type (``LOG <LEVEL>`` for a log message)."""
    if entry.dagster_event is None:
        import logging

        return f"LOG {logging.getLevelName(entry.level)}"
    return entry.dagster_event.event_type_value


def tables_named(entry) -> set[str]:
    """The bench tables (``t0000`` ...) an event names: in its asset or check key, its output name
    or its message."""
    text = entry.user_message or ""
    ev = entry.dagster_event
    if ev is not None:
        text += f" {ev.message or ''} {ev.step_key or ''}"
        data = ev.event_specific_data
        for attr in ("asset_key", "asset_check_key"):
            key = getattr(data, attr, None)
            if key is not None:
                text += f" {key.to_user_string()}"
        if ev.asset_key is not None:
            text += f" {ev.asset_key.to_user_string()}"
        handle = getattr(data, "step_output_handle", None)
        if handle is not None:
            text += f" {handle.output_name}"
    return set(_TABLE.findall(text))


class EventTimer:
    """Seconds the instance spends in ``handle_new_event`` per event type (the instance's own
    method, wrapped on this instance only)."""

    def __init__(self, instance: dg.DagsterInstance) -> None:
        self.seconds: collections.Counter[str] = collections.Counter()
        self.count: collections.Counter[str] = collections.Counter()
        inner = instance.handle_new_event

        def timed(event, *args, **kwargs):
            t0 = time.perf_counter()
            try:
                return inner(event, *args, **kwargs)
            finally:
                label = event_label(event)
                self.seconds[label] += time.perf_counter() - t0
                self.count[label] += 1

        instance.handle_new_event = timed  # type: ignore[method-assign]

    def reset(self) -> None:
        self.seconds.clear()
        self.count.clear()


@contextmanager
def dagster_home(storage_yaml: str) -> Iterator[dg.DagsterInstance]:
    """A Dagster instance on a fresh ``DAGSTER_HOME`` (``storage_yaml``: its ``dagster.yaml``
    storage section; empty: SQLite files in it). Removed on exit."""
    home = tempfile.mkdtemp(prefix="bench-events-home-")
    with open(os.path.join(home, "dagster.yaml"), "w") as f:
        f.write("telemetry:\n  enabled: false\n" + storage_yaml)
    try:
        with dg.DagsterInstance.from_config(home) as instance:
            yield instance
    finally:
        shutil.rmtree(home, ignore_errors=True)


def report(
    title: str, run: dg.ExecuteInProcessResult, instance, timer: EventTimer, n: int, wall: float
) -> None:
    """Print the run's events by type: total, per table, the rest; seconds handling each."""
    total: collections.Counter[str] = collections.Counter()
    per_table: collections.Counter[str] = collections.Counter()
    for entry in instance.all_logs(run.run_id):
        label = event_label(entry)
        total[label] += 1
        if len(tables_named(entry)) == 1:
            per_table[label] += 1
    print(f"\n{title}: run {wall:.2f} s, handling its events {sum(timer.seconds.values()):.2f} s ({load()})")
    print("| event | stored | per table | other | handling (s) |")
    print("|---|---|---|---|---|")
    for label in sorted(total, key=lambda k: -total[k]):
        print(
            f"| {label} | {total[label]} | {per_table[label] / n:.2f} | {total[label] - per_table[label]} "
            f"| {timer.seconds.get(label, 0.0):.2f} |"
        )
    print(
        f"| **all** | **{sum(total.values())}** | **{sum(per_table.values()) / n:.2f}** | "
        f"{sum(total.values()) - sum(per_table.values())} | **{sum(timer.seconds.values()):.2f}** |",
        flush=True,
    )
    logs = collections.Counter(
        f"{event_label(e)}: {_TABLE.sub('tNNNN', e.user_message)[:150]}"
        for e in instance.all_logs(run.run_id)
        if e.dagster_event is None
    )
    for line, k in sorted(logs.items()):
        print(f"  log lines: {k} x {line}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tables", type=int, default=300)
    ap.add_argument("--rows", type=int, default=10)
    ap.add_argument("--postgres", action="store_true", help="the instance's storage on PostgreSQL")
    ap.add_argument(
        "--planned-max", type=int, default=None, help="planned_checks_max_tables (default: its default)"
    )
    ap.add_argument(
        "--windows", type=int, default=2, help="all-table windows after the snapshot (the last measured)"
    )
    ap.add_argument("--touch", type=int, default=None, help="tables each window updates (default: all)")
    ap.add_argument("--snapshot", action="store_true", help="report the initial snapshot's run too")
    args = ap.parse_args(argv)
    if args.postgres:
        with postgres_storage(5400 + os.getpid() % 500, tcp=False) as storage_yaml:
            return _run(args, storage_yaml)
    return _run(args, "")


def _run(args: argparse.Namespace, storage_yaml: str) -> int:
    db = f"bench_ev_{uuid.uuid4().hex[:6]}"
    print(f"creating {args.tables} tables of {args.rows} rows in {db} ...", flush=True)
    _create(db, args.tables, args.rows)
    lake_dir = tempfile.mkdtemp(prefix="bench-events-lake-")
    try:
        extra = {} if args.planned_max is None else {"planned_checks_max_tables": args.planned_max}
        mysql = MySqlCdcResource(
            host=os.environ.get("CDC_MYSQL_HOST", "127.0.0.1"),
            port=int(os.environ.get("CDC_MYSQL_PORT", "3307")),
            user=os.environ.get("CDC_MYSQL_USER", "cdc"),
            password=os.environ.get("CDC_MYSQL_PASSWORD", "cdc-secret"),
            server_name=db,
            database_include_list=[db],
            stream_follow_seconds=0.0,
            **extra,
        )
        lake = CdcLakeResource(base_uri=lake_dir)

        @mysql_cdc_assets(tables=[f"{db}.t{i:04d}" for i in range(args.tables)], server_name=db)
        def cdc(context: dg.AssetExecutionContext, mysql: MySqlCdcResource, lake: CdcLakeResource):
            yield from mysql.sync(context=context, lake=lake)

        sensor = build_mysql_cdc_sensor(cdc)
        resources = {"mysql": mysql, "lake": lake}
        with dagster_home(storage_yaml) as instance:
            timer = EventTimer(instance)
            t0 = time.monotonic()
            ticks = run_sensor_ticks(sensor, cdc, resources, instance, run_log_level="WARNING")
            assert ticks.runs and all(r.success for r in ticks.runs), "the snapshot failed"
            print(f"initial snapshot: {time.monotonic() - t0:.1f} s", flush=True)
            if args.snapshot:
                (snap,) = ticks.runs
                rec = instance.get_run_record_by_id(snap.run_id)
                assert rec is not None and rec.end_time
                wall = rec.end_time - rec.create_timestamp.timestamp()
                report(f"snapshot of {args.tables} tables", snap, instance, timer, args.tables, wall)
            cursor = ticks.cursor
            touched = args.touch or args.tables
            for round_ in range(1, args.windows + 1):
                _touch(db, list(range(touched)), round_)
                timer.reset()
                ticks = run_sensor_ticks(
                    sensor, cdc, resources, instance, cursor=cursor, run_log_level="WARNING"
                )
                cursor = ticks.cursor
                assert len(ticks.runs) == 1 and ticks.runs[0].success, "the window failed"
                run = ticks.runs[0]
                rec = instance.get_run_record_by_id(run.run_id)
                assert rec is not None and rec.start_time and rec.end_time
                wall = rec.end_time - rec.create_timestamp.timestamp()
                if round_ == args.windows:
                    kind = "PostgreSQL" if storage_yaml else "SQLite"
                    title = f"window of {touched} of {args.tables} tables ({kind})"
                    report(title, run, instance, timer, touched, wall)
                else:
                    print(f"window {round_}: run {wall:.2f} s", flush=True)
    finally:
        _drop(db)
        shutil.rmtree(lake_dir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
