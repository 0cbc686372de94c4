"""Hundreds of tables under a real Dagster daemon (issue 28, the path a deployment runs).

``bench/many_tables.py`` drives the sensor in this process with an in-memory Dagster instance.
This benchmark runs what a user runs instead: ``dagster dev`` (the daemon and a webserver on
``127.0.0.1:--ui-port``, a free port by default, sharing one code server; ``--no-ui``:
``dagster-daemon run`` alone) on a fresh ``DAGSTER_HOME`` (SQLite storage, the default run
launcher: each run is a new process that loads the code location, imports the library and
connects to Spark), the code location of ``bench/daemon_location.py`` capturing ``--tables``
tables, with the resources as the README's example writes them (following runs, ``spark_remote``
auto: the Spark Connect server of ``infra/spark_connect.sh``; the sensor at ``--interval``, 5 s).
Printed, in one run:

- the initial snapshot: daemon start -> the snapshot run's success;
- windows whose one transaction updates a row of 3 tables, of ``--touch`` tables (default: all),
  the same again, and 3 tables again:

  - COMMIT -> every touched row visible in the lake's current state: the Delta commit that made it
    visible, timed by its log entry (bench/lake_watch.py: the logs are scanned every 0.5 s to find
    the versions to read, the rows read once after the window);
  - COMMIT -> every touched table's materialization visible in the UI (and the first one): the
    webserver's GraphQL API polled every ``--ui-poll`` s until each table's latest
    materialization covers the COMMIT's binlog position (its ``window_end_file`` /
    ``window_end_pos`` metadata at or after the position the server reported right after the
    COMMIT: bench/dagster_ui.py), with when the last of them was logged by its run;
  - COMMIT -> the success of every run that was going or started since (the sensor can then move
    its cursor), with each run's launch (created -> RUN_START: the planned events, process start,
    code location load) and run (RUN_START -> RUN_SUCCESS); a run still going ``--run-wait``
    seconds after the lake and the UI showed the window (a following or resident run) is printed
    as "run still going (following)";
  - the Dagster events the window stored, by event type and per touched table: the events of its
    runs (those going at the COMMIT, from there on, and those started since) and the sensor's
    runless ones, stored from the COMMIT until the next window;
- the sensor's tick durations from the daemon's tick records (idle ticks: no run requested).

    python -m bench.daemon_many_tables --tables 300
    python -m bench.daemon_many_tables --tables 1000 --touch 100
    python -m bench.daemon_many_tables --tables 300 --postgres   # Dagster storage on PostgreSQL

``--postgres``: the Dagster instance's storage (runs, event log, schedules) on a PostgreSQL server
this benchmark starts for itself (Debian's ``postgresql`` package, ``initdb`` into a temporary
directory, loopback only, default durability settings), as a production deployment configures it
(``dagster-postgres``), instead of SQLite files under ``DAGSTER_HOME``.

Prints the machine load (1-minute average) beside the figures: the machine is shared. Timings are
printed, never asserted; every wait is bounded (``--timeout``, ``--run-wait``).
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
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import dagster as dg

from dagster_mysql_cdc.dagster_integration.protocol import MODE_TAG

from .daemon_latency import Daemon, load, percentile, run_timing, wait_for
from .dagster_ui import UiWatch, wait_location
from .lake_watch import LakeWatch
from .many_tables import _create, _drop, _touch, window_rounds


def _row_visible_at(lake: str, db: str, table: str, versions: tuple[int | None, ...], value: str) -> bool:
    """Whether row ``id = 1`` of ``table`` has ``v == value`` in the lake's current state as of
    its ``state`` and ``state_tail`` Delta ``versions`` (``None``: no such table yet)."""
    from deltalake import DeltaTable

    from dagster_mysql_cdc.sink.layout import TablePaths
    from dagster_mysql_cdc.sink.read import live_only, load_parts
    from dagster_mysql_cdc.sink.storage import StorageSettings

    paths = TablePaths(changelog="", state=f"{lake}/{db}/{db}/{table}/state")
    state, tail = (
        DeltaTable(uri, version=v) if v is not None else None
        for uri, v in zip((paths.state, paths.tail), versions, strict=True)
    )
    parts = load_parts(
        StorageSettings(base_uri=lake), paths, columns=None, keys=None, with_tail=True, opened=(state, tail)
    )
    t = parts.resolved() if parts is not None else None
    if t is None:
        return False
    t = live_only(t)
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


def _last_storage_id(instance: dg.DagsterInstance, run_id: str) -> int | None:
    """The storage id of run ``run_id``'s newest event (``None``: no event yet)."""
    recs = instance.get_records_for_run(run_id, limit=1, ascending=False).records
    return recs[0].storage_id if recs else None


def event_counts(instance: dg.DagsterInstance, since: dict[str, int | None], run_ids: list[str]) -> Counter:
    """Events stored for runs ``run_ids`` (and runless ones, run id ``""``: the sensor's
    heartbeats) after the storage ids of ``since`` (run id -> its newest event's storage id
    before; a run absent from it counts all its events), by Dagster event type (``log message``:
    a plain ``context.log`` line)."""
    from dagster._core.event_api import EventLogCursor

    counts: Counter = Counter()
    for run_id in [*run_ids, ""]:
        after = since.get(run_id)
        cursor = EventLogCursor.from_storage_id(after).to_string() if after is not None else None
        for rec in instance.get_records_for_run(run_id, cursor=cursor).records:
            ev = rec.event_log_entry.dagster_event
            kind = ev.event_type.name if ev is not None else "log message"
            counts[("runless " if run_id == "" else "") + kind] += 1
    return counts


def _change_after(
    args: argparse.Namespace,
    lake: str,
    db: str,
    names: list[str],
    which: list[int],
    round_: int,
    committed: float,
) -> float:
    """``--after``: a transaction updating 3 tables the large window did not touch (or its first
    3), committed ``args.after`` seconds after that window's COMMIT (``committed``, monotonic);
    returns its COMMIT -> its rows visible in the lake (s)."""
    rest = [i for i in range(len(names)) if i not in set(which)]
    three = (rest or list(which))[:3]
    value = f"round {round_ + 1000}"
    watch = LakeWatch(
        {i: (f"{lake}/{db}/{db}/{names[i]}/state", f"{lake}/{db}/{db}/{names[i]}/state_tail") for i in three},
        lambda i, versions, value=value: _row_visible_at(lake, db, names[i], versions, value),
    )
    time.sleep(max(0.0, committed + args.after - time.monotonic()))
    _touch(db, three, round_ + 1000)
    at = time.monotonic()
    seen = watch.wait(args.timeout)
    if len(seen) < len(three):
        raise SystemExit(f"the change {args.after:g} s after round {round_} did not reach the lake")
    return max(seen.values()) - at


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tables", type=int, default=300)
    ap.add_argument("--rows", type=int, default=10)
    ap.add_argument("--touch", type=int, default=None, help="tables of the large window (default: all)")
    ap.add_argument("--interval", type=int, default=5, help="sensor minimum_interval_seconds")
    ap.add_argument("--timeout", type=float, default=900, help="seconds to wait for each step")
    ap.add_argument(
        "--run-wait",
        type=float,
        default=60,
        help="longest wait, once every touched table is in the lake and the UI, for the window's "
        "runs to succeed (a following or resident run may stay going)",
    )
    ap.add_argument(
        "--no-ui",
        action="store_true",
        help="dagster-daemon run alone (no webserver: no COMMIT -> visible in the UI figures)",
    )
    # (1 s: a query of 300 assets' materializations costs the webserver CPU the run needs)
    ap.add_argument("--ui-poll", type=float, default=1.0, help="seconds between GraphQL polls")
    ap.add_argument("--ui-port", type=int, default=0, help="webserver port on 127.0.0.1 (0: a free one)")
    ap.add_argument(
        "--after",
        type=float,
        default=0.0,
        help="also time a change of 3 other tables committed this many seconds after each large "
        "window's COMMIT (while its run logs its checks: read by the same run, or after it ends?); "
        "the large window's run success then includes that change",
    )
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
    ui = not args.no_ui
    print(f"creating {args.tables} tables of {args.rows} rows in {db} ...", flush=True)
    _create(db, args.tables, args.rows)
    lake = tempfile.mkdtemp(prefix="bench-dmt-lake-")
    log_path = Path(args.log) if args.log else Path(tempfile.mkstemp(prefix="bench-dmt-", suffix=".log")[1])
    print(
        f"{'dagster dev (daemon + webserver)' if ui else 'dagster-daemon run'}, log {log_path}, "
        f"CDC_SPARK_REMOTE={os.environ.get('CDC_SPARK_REMOTE', '')!r}, sensor every {args.interval}s ({load()})",
        flush=True,
    )
    figures: dict[str, float | str] = {}
    events: dict[str, tuple[int, Counter]] = {}
    daemon = None
    watch: UiWatch | None = None
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
            ui=ui,
            ui_port=args.ui_port,
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
        if ui:
            location = wait_location(daemon.url, args.timeout)
            print(f"webserver {daemon.url}: code location {location} loaded", flush=True)
            watch = UiWatch(daemon.url, args.ui_poll)
            watch.start()
        time.sleep(2 * args.interval)  # the sensor's first window after the snapshot (nothing to read)

        for round_, (label, which) in enumerate(window_rounds(args.touch or args.tables), 1):
            finished_before = {
                r.dagster_run.run_id for r in instance.get_run_records() if r.dagster_run.is_finished
            }
            # the runs going now (a following or resident run): their events from here on count
            since = {
                r.dagster_run.run_id: _last_storage_id(instance, r.dagster_run.run_id)
                for r in instance.get_run_records()
                if r.dagster_run.run_id not in finished_before
            }
            since[""] = _last_storage_id(instance, "")
            value = f"round {round_}"
            # every touched row, timed from the poll of its Delta logs that first showed it and
            # read after the window (bench/lake_watch.py); the logs' versions now are the baseline
            lake_watch = LakeWatch(
                {
                    i: (f"{lake}/{db}/{db}/{names[i]}/state", f"{lake}/{db}/{db}/{names[i]}/state_tail")
                    for i in which
                },
                lambda i, versions, value=value: _row_visible_at(lake, db, names[i], versions, value),
            )
            file, pos = _touch(db, which, round_)
            committed, committed_at = time.monotonic(), time.time()
            if watch is not None:
                for i in which:
                    watch.expect((round_, i), (db, db, names[i]), file, pos)
            visible_at = lake_watch.wait(args.timeout)
            if len(visible_at) < len(which):
                raise SystemExit(
                    f"{len(which) - len(visible_at)} tables did not show round {round_} within {args.timeout:.0f} s"
                )
            secs = max(visible_at.values()) - committed
            figures[f"window touching {label}: COMMIT -> visible in the lake (s)"] = secs
            ui_line = ""
            if watch is not None:
                idents = [(round_, i) for i in which]
                left = max(0.0, args.timeout - (time.monotonic() - committed))
                if not watch.wait(idents, left):
                    missing = len([x for x in idents if x not in watch.seen])
                    raise SystemExit(
                        f"{missing} of the {len(which)} tables of round {round_} did not show their "
                        f"materialization in the UI within {args.timeout:.0f} s"
                        + (f" (GraphQL errors: {watch.errors[-1]})" if watch.errors else "")
                    )
                seen = [watch.seen[x] for x in idents]
                first_ui = min(x.at for x in seen) - committed_at
                every_ui = max(x.at for x in seen) - committed_at
                logged = max(x.mat.timestamp for x in seen) - committed_at
                kinds = Counter(x.mat.kind for x in seen)
                nruns = len({x.mat.run_id for x in seen})
                figures[
                    f"window touching {label}: COMMIT -> every touched table's materialization in the UI (s)"
                ] = every_ui
                figures[f"window touching {label}: COMMIT -> the first one in the UI (s)"] = first_ui
                ui_line = (
                    f", -> in the UI: first table {first_ui:.1f} s, every table {every_ui:.1f} s (the last "
                    f"one logged by its run {logged:.1f} s after the COMMIT; {dict(kinds)}, {nruns} run(s))"
                )

            def others(finished_before=finished_before):
                return [r for r in instance.get_run_records() if r.dagster_run.run_id not in finished_before]

            if args.after > 0 and len(which) > 3:
                after = _change_after(args, lake, db, names, which, round_, committed)
                figures[
                    f"window touching {label}: a 3-table change {args.after:g} s after -> the lake (s)"
                ] = after
                ui_line += f"; a 3-table change {args.after:g} s after its COMMIT: in the lake {after:.1f} s after its own"

            # the runs that were going or started since: finished = materialized in Dagster and
            # the sensor free to move its cursor; a following (or resident) run may stay going
            if wait_for(lambda: all(r.dagster_run.is_finished for r in others()), args.run_wait, 0.25):
                timed = [t for t in (run_timing(instance, r) for r in others()) if t]
                done = max((t["end"] for t in timed), default=time.time()) - committed_at
                figures[f"window touching {label}: COMMIT -> run success (s)"] = done
                runs = ", ".join(f"launch {t['launch']:.1f} s + run {t['run']:.1f} s" for t in timed)
                run_line = f"-> run success {done:.1f} s (runs: {runs})"
            else:
                going = [r for r in others() if not r.dagster_run.is_finished]
                figures[f"window touching {label}: COMMIT -> run success (s)"] = "run still going (following)"
                run_line = (
                    f"-> run still going (following): {len(going)} run(s) not finished "
                    f"{time.monotonic() - committed:.0f} s after the COMMIT"
                )
            print(
                f"window touching {label}: COMMIT -> visible in the lake {secs:.1f} s (the bench read {lake_watch.reads} "
                f"tables in {lake_watch.read_seconds:.1f} s){ui_line}, {run_line} "
                f"({load()})",
                flush=True,
            )
            time.sleep(2 * args.interval)
            # the window's events: those its runs (and the sensor, runless) stored since the COMMIT
            run_ids = [r.dagster_run.run_id for r in others()]
            events[label] = (len(which), event_counts(instance, since, run_ids))

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
        if watch is not None:
            watch.stop_event.set()
        if daemon is not None:
            daemon.stop()
            shutil.rmtree(daemon.home, ignore_errors=True)
        _drop(db)
        shutil.rmtree(lake, ignore_errors=True)
    print()
    kind = "PostgreSQL" if storage_yaml else "SQLite"
    print(
        f"| figure ({args.tables} tables, {'dagster dev' if ui else 'dagster-daemon'}, {kind} instance, "
        f"local lake, sensor {args.interval} s) | value |"
    )
    print("|---|---|")
    for k, v in figures.items():
        print(f"| {k} | {v:.2f} |" if isinstance(v, float) else f"| {k} | {v} |")
    if events:
        print()
        print(
            "Dagster events stored per window (its runs' events since the COMMIT, until the next "
            "window; runless: the sensor's), per touched table"
            + ("; in SQLite asset and check events are also copied to index.db" if not storage_yaml else "")
        )
        labels = list(events)
        types = sorted(
            {t for _, c in events.values() for t in c}, key=lambda t: -max(c[t] for _, c in events.values())
        )
        print("| event type | " + " | ".join(f"{lb} ({events[lb][0]} tables)" for lb in labels) + " |")
        print("|---|" + "---|" * len(labels))
        for t in ["total", *types]:
            cells = []
            for lb in labels:
                n, c = events[lb]
                v = sum(c.values()) if t == "total" else c.get(t, 0)
                cells.append(f"{v} ({v / n:.2f}/table)")
            print(f"| {t} | " + " | ".join(cells) + " |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
