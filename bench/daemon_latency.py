"""Latency and fixed cost of window runs under a real Dagster daemon (what a deployment runs).

Starts ``dagster-daemon run -f bench/daemon_location.py`` on a fresh temporary ``DAGSTER_HOME``
(default run launcher: every run is a new ``dagster api execute_run`` process launched by the code
server; queued run coordinator with ``run_queue.dequeue_interval_seconds: 1``), with the binlog
sensor on at ``--interval`` seconds, and the lake written through ``CDC_SPARK_REMOTE`` (the Spark
Connect server of infra/spark_connect.sh) unless ``--local-spark``. Then, in one run:

1. **empty windows**: a change in a database that is not captured makes the sensor request a
   window with nothing to write; RUN_START -> RUN_SUCCESS of such runs (target <= 8 s), and
   the launch time (run created -> RUN_START: queue, process start, imports, code location load);
2. **latency**: a writer applies ``--rate`` row changes/s (every 10 ms) and commits a marker row
   every second; the lake's current state (state + tail, ``read_current``) is polled every 0.25 s (and the compacted state table alone, printed apart); COMMIT -> visible p50/p95/max
   (target p95 <= 15 s);
3. **sustained throughput** (``--sustain-seconds`` > 0): a writer at ``--sustain-rate`` changes/s;
   the time from its last write until that write is visible (target <= 60 s);
4. the **in-process** figure of ``bench/latency.py`` (sensor driven in this process with a warm
   local Spark session) beside it (``--inprocess``, after the daemon is stopped).

    python -m bench.daemon_latency --seconds 90 --rate 1000 --interval 5 --inprocess

Prints the machine load (1-minute average) beside every figure: the machine is shared.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

import dagster as dg
import pymysql
from deltalake import DeltaTable

from dagster_mysql_cdc.dagster_integration.protocol import MODE_TAG

from ._common import MYSQL_HOST, MYSQL_PORT, ROOT_PASSWORD

ROOT = Path(__file__).resolve().parents[1]


def percentile(values: list[float], p: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, int(round(p / 100 * (len(s) - 1))))] if s else float("nan")


def load() -> str:
    return f"load {os.getloadavg()[0]:.1f}"


def root_conn(autocommit: bool = True) -> pymysql.connections.Connection:
    return pymysql.connect(
        host=MYSQL_HOST, port=MYSQL_PORT, user="root", password=ROOT_PASSWORD, autocommit=autocommit
    )


class Daemon:
    """``dagster-daemon run`` on a temporary DAGSTER_HOME (its own process group)."""

    def __init__(
        self,
        db: str,
        lake: str,
        interval: int,
        remote: str,
        log_path: Path,
        follow: float,
        readme: bool = False,
        tables: str = "t",
        storage_yaml: str = "",
        extra_env: dict[str, str] | None = None,
    ):
        """``storage_yaml``: extra ``dagster.yaml`` lines (e.g. a PostgreSQL ``storage:``); default
        SQLite under the temporary ``DAGSTER_HOME``. ``extra_env``: more environment of the
        daemon (e.g. ``BENCH_DAEMON_LAKE_OPTS``, see bench/daemon_location.py)."""
        self.home = tempfile.mkdtemp(prefix="bench-dagster-home-")
        Path(self.home, "dagster.yaml").write_text(
            "telemetry:\n  enabled: false\nrun_queue:\n  dequeue_interval_seconds: 1\n" + storage_yaml
        )
        env = {
            **os.environ,
            "DAGSTER_HOME": self.home,
            "BENCH_DAEMON_DB": db,
            "BENCH_DAEMON_LAKE": lake,
            "BENCH_DAEMON_INTERVAL": str(interval),
            "BENCH_DAEMON_FOLLOW": str(follow),
            "BENCH_DAEMON_README": "1" if readme else "0",
            "BENCH_DAEMON_TABLES": tables,
            "CDC_SPARK_REMOTE": remote,
            "CDC_MYSQL_PASSWORD": os.environ.get("CDC_MYSQL_PASSWORD", "cdc-secret"),
            "PYTHONPATH": str(ROOT),
            **(extra_env or {}),
        }
        # the instance's storage first (the daemon would race us creating its SQLite tables)
        self.instance = dg.DagsterInstance.from_config(self.home)
        self.env, self.log_path = env, log_path
        self.log = open(log_path, "w")
        self.start()

    def start(self) -> None:
        """Starts ``dagster-daemon run`` (again, after :meth:`kill`) on the same ``DAGSTER_HOME``."""
        exe = Path(sys.executable).with_name("dagster-daemon")
        self.proc = subprocess.Popen(
            [str(exe), "run", "-f", str(ROOT / "bench" / "daemon_location.py")],
            cwd=ROOT,
            env=self.env,
            stdout=self.log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )

    def kill(self) -> None:
        """SIGKILLs the daemon's process group (the daemon, its code server, and the run workers
        started in that group), as an OOM kill or a lost machine would."""
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()

    def stream_runs(self) -> list:
        return self.instance.get_run_records(filters=dg.RunsFilter(tags={MODE_TAG: "stream"}))

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        self.log.close()


def run_timing(instance, record) -> dict[str, float] | None:
    """Launch (created -> RUN_START) and run (RUN_START -> RUN_SUCCESS) seconds of a finished run."""
    stats = instance.get_run_stats(record.dagster_run.run_id)
    if stats.start_time is None or stats.end_time is None:
        return None
    return {
        "launch": stats.start_time - record.create_timestamp.timestamp(),
        "run": stats.end_time - stats.start_time,
        "end": stats.end_time,
    }


class MarkerWriter(threading.Thread):
    """Applies ``rate`` row changes/s to ``db.t`` (batches every 10 ms) and a marker row every
    ``marker_every`` s, recording each marker's COMMIT time."""

    def __init__(self, db: str, rate: int, marker_every: float, first_id: int):
        super().__init__(daemon=True)
        self.db, self.rate, self.marker_every = db, rate, marker_every
        self.next_id = first_id
        self.markers: dict[int, float] = {}
        self.stop_event = threading.Event()
        self.changes = 0
        self.last_commit = 0.0

    def run(self) -> None:
        w = root_conn(autocommit=False)
        # paced by what is owed since the start (not a fixed batch per 10 ms tick): a tick that
        # takes longer than 10 ms (commit latency, a busy machine) is made up by the next batch,
        # so the writer holds its rate on average as long as the server keeps up
        most = max(1, self.rate // 10)
        started = next_marker = time.monotonic()
        with w.cursor() as cur:
            while not self.stop_event.is_set():
                t0 = time.monotonic()
                n = min(most, int(self.rate * (t0 - started)) - self.changes)
                if n <= 0:
                    time.sleep(0.002)
                    continue
                rows = [(self.next_id + i, "x", i, None) for i in range(n)]
                cur.executemany(f"INSERT INTO {self.db}.t VALUES (%s,%s,%s,%s)", rows)
                w.commit()
                self.next_id += n
                self.changes += n
                if t0 >= next_marker:
                    cur.execute(f"INSERT INTO {self.db}.t VALUES (%s,'marker',0,NULL)", (self.next_id,))
                    w.commit()
                    self.markers[self.next_id] = time.time()
                    self.next_id += 1
                    next_marker = t0 + self.marker_every
                self.last_commit = time.time()
                time.sleep(max(0.0, 0.01 - (time.monotonic() - t0)))
        w.close()


def visible_markers(state_uri: str, current: bool = True) -> set[int]:
    """Markers visible in the lake: in the table's current state (the compacted ``state`` with the
    tail applied, ``read_current``: what the library documents as the exact current read) or, with
    ``current=False``, in the compacted ``state`` table alone (a plain Delta reader's view, as of
    the last compaction)."""
    try:
        if current:
            from dagster_mysql_cdc.sink.read import read_current
            from dagster_mysql_cdc.sink.storage import StorageSettings

            base = state_uri.split("/")
            t = read_current(
                StorageSettings(base_uri="/".join(base[:-4])), state_uri, live=True, columns=["id", "v"]
            )
            if t is None:
                return set()
        else:
            t = DeltaTable(state_uri).to_pyarrow_table(columns=["id", "v"])
    except Exception:  # not created yet
        return set()
    return {i for i, v in zip(t.column("id").to_pylist(), t.column("v").to_pylist()) if v == "marker"}


def wait_for(pred, timeout: float, poll: float = 0.5) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return True
        time.sleep(poll)
    return False


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=float, default=90, help="length of the latency phase")
    ap.add_argument("--rate", type=int, default=1000, help="row changes per second (latency phase)")
    ap.add_argument("--interval", type=int, default=5, help="sensor minimum_interval_seconds")
    ap.add_argument("--empty-runs", type=int, default=4, help="empty windows to time")
    ap.add_argument("--sustain-seconds", type=float, default=0, help="sustained phase length (0: skip)")
    ap.add_argument("--sustain-rate", type=int, default=5000)
    ap.add_argument(
        "--follow",
        type=float,
        default=300,
        help="stream_follow_seconds of the capture (0: one window per run)",
    )
    ap.add_argument("--local-spark", action="store_true", help="runs start their own local Spark")
    ap.add_argument(
        "--readme",
        action="store_true",
        help="the README example's resources: neither stream_follow_seconds nor spark_remote set (defaults)",
    )
    ap.add_argument("--inprocess", action="store_true", help="also run bench/latency.py (in process)")
    ap.add_argument("--log", default=None, help="daemon log file (default: a temporary file)")
    ap.add_argument("--json", default=None, help="write every marker's commit time and latency here")
    args = ap.parse_args(argv)

    remote = "" if args.local_spark else os.environ.get("CDC_SPARK_REMOTE", "")
    db = f"bench_dl_{uuid.uuid4().hex[:6]}"
    other = f"{db}_x"
    root = root_conn()
    with root.cursor() as cur:
        cur.execute(f"CREATE DATABASE {db}")
        cur.execute(
            f"CREATE TABLE {db}.t (id BIGINT PRIMARY KEY, v VARCHAR(32), n INT, marker_ns BIGINT NULL)"
        )
        cur.execute(f"CREATE DATABASE {other}")
        cur.execute(f"CREATE TABLE {other}.u (id BIGINT AUTO_INCREMENT PRIMARY KEY, v INT)")
        cur.execute(f"INSERT INTO {db}.t VALUES (0, 'seed', 0, NULL)")
    lake = tempfile.mkdtemp(prefix="bench-dl-lake-")
    state_uri = f"{lake}/{db}/{db}/t/state"
    log_path = (
        Path(args.log) if args.log else Path(tempfile.mkstemp(prefix="bench-daemon-", suffix=".log")[1])
    )
    print(
        f"daemon benchmark: db {db}, "
        + (
            "the README example's resources (defaults: spark_remote auto -> "
            f"{remote or 'sc://127.0.0.1:15002'}, following runs)"
            if args.readme
            else f"Spark {'Connect ' + remote if remote else 'local (per run)'}, stream_follow_seconds {args.follow:.0f}"
        )
        + f", sensor every {args.interval}s, daemon log {log_path}, {load()}",
        flush=True,
    )
    daemon = Daemon(db, lake, args.interval, remote, log_path, args.follow, readme=args.readme)
    results: dict[str, object] = {}
    try:
        t0 = time.monotonic()
        if not wait_for(lambda: DeltaTable.is_deltatable(state_uri), 300):
            raise SystemExit(f"the initial snapshot did not land within 300 s; see {log_path}")
        print(f"initial snapshot visible {time.monotonic() - t0:.1f}s after the daemon started ({load()})")

        # 1. empty windows (a change outside the captured database)
        timings = []
        for _ in range(args.empty_runs):
            done = {r.dagster_run.run_id for r in daemon.stream_runs()}
            with root.cursor() as cur:
                cur.execute(f"INSERT INTO {other}.u (v) VALUES (1)")

            def new_finished(done=done):
                for r in daemon.stream_runs():
                    if r.dagster_run.run_id not in done and r.dagster_run.is_finished:
                        return r
                return None

            if not wait_for(lambda: new_finished() is not None, 120, 0.25):
                print("  an empty window run did not finish within 120 s")
                break
            rec = new_finished()
            tm = run_timing(daemon.instance, rec)
            if tm is not None:
                timings.append(tm)
                print(
                    f"  empty window run {rec.dagster_run.run_id[:8]} {rec.dagster_run.status.value}: "
                    f"launch {tm['launch']:.1f}s, RUN_START->RUN_SUCCESS {tm['run']:.1f}s ({load()})",
                    flush=True,
                )
        if timings:
            results["empty_run"] = sorted(t["run"] for t in timings)[len(timings) // 2]
            results["empty_launch"] = sorted(t["launch"] for t in timings)[len(timings) // 2]

        # 2. latency at --rate
        before = {r.dagster_run.run_id for r in daemon.stream_runs()}
        writer = MarkerWriter(db, args.rate, 1.0, 1)
        writer.start()
        latencies: dict[int, float] = {}
        plain: dict[int, float] = {}  # the compacted state table alone
        start = time.monotonic()
        loads = []
        while time.monotonic() - start < args.seconds or (
            writer.is_alive() and time.monotonic() - start < args.seconds + 1
        ):
            if time.monotonic() - start >= args.seconds:
                writer.stop_event.set()
            seen = visible_markers(state_uri)
            seen_plain = visible_markers(state_uri, current=False)
            now = time.time()
            for mid, tc in list(writer.markers.items()):
                if mid in seen and mid not in latencies:
                    latencies[mid] = now - tc
                if mid in seen_plain and mid not in plain:
                    plain[mid] = now - tc
            loads.append(os.getloadavg()[0])
            time.sleep(0.25)
        writer.stop_event.set()
        writer.join()
        # markers still in flight: wait for them (up to 120 s) so the tail is measured, not dropped
        deadline = time.monotonic() + 120
        while len(latencies) < len(writer.markers) and time.monotonic() < deadline:
            seen = visible_markers(state_uri)
            now = time.time()
            for mid, tc in writer.markers.items():
                if mid in seen and mid not in latencies:
                    latencies[mid] = now - tc
            time.sleep(0.25)
        runs = [r for r in daemon.stream_runs() if r.dagster_run.run_id not in before]
        tms = [t for t in (run_timing(daemon.instance, r) for r in runs) if t]
        lat = list(latencies.values())
        results["latency"] = (percentile(lat, 50), percentile(lat, 95), max(lat) if lat else float("nan"))
        # steady state: markers committed once the first marker was visible (a run is reading and
        # warm); the others waited for a run to be launched (the cost every run boundary pays)
        if latencies:
            first_seen = min(writer.markers[m] + latencies[m] for m in latencies)
            steady = [v for m, v in latencies.items() if writer.markers[m] >= first_seen]
            results["latency_steady"] = (percentile(steady, 50), percentile(steady, 95), len(steady))
        if args.json:
            Path(args.json).write_text(
                json.dumps({str(m): [writer.markers[m], latencies.get(m)] for m in writer.markers})
            )
        results["latency_markers"] = (len(lat), len(writer.markers))
        if plain:
            pl = list(plain.values())
            results["latency_plain"] = (percentile(pl, 50), percentile(pl, 95), len(pl))
        results["latency_load"] = sum(loads) / max(1, len(loads))
        results["latency_runs"] = (
            len(tms),
            percentile([t["launch"] for t in tms], 50),
            percentile([t["run"] for t in tms], 50),
        )
        print(
            f"  latency phase: {writer.changes} changes in {args.seconds:.0f}s, {len(tms)} window runs "
            f"(median launch {results['latency_runs'][1]:.1f}s, median run {results['latency_runs'][2]:.1f}s), "
            f"markers visible {len(lat)}/{len(writer.markers)}, mean load {results['latency_load']:.1f}",
            flush=True,
        )

        # 3. sustained throughput
        if args.sustain_seconds > 0:
            sw = MarkerWriter(db, args.sustain_rate, 1.0, writer.next_id + 1)
            sw.start()
            time.sleep(args.sustain_seconds)
            sw.stop_event.set()
            sw.join()
            last_id, last_commit = max(sw.markers), sw.last_commit
            # the last write is followed by one more marker: its visibility = all writes are in
            with root.cursor() as cur:
                cur.execute(f"INSERT INTO {db}.t VALUES (%s,'marker',0,NULL)", (sw.next_id + 1,))
            last_id, last_commit = sw.next_id + 1, time.time()
            ok = wait_for(lambda: last_id in visible_markers(state_uri), 600, 0.5)
            results["sustain"] = (
                sw.changes,
                sw.changes / args.sustain_seconds,
                (time.time() - last_commit) if ok else float("inf"),
            )
            print(
                f"  sustained: {sw.changes} changes at {sw.changes / args.sustain_seconds:.0f}/s for "
                f"{args.sustain_seconds:.0f}s; caught up {results['sustain'][2]:.1f}s after the last write ({load()})",
                flush=True,
            )
    finally:
        daemon.stop()

    if args.inprocess:
        from . import latency

        results["inprocess"] = latency.measure(seconds=args.seconds, interval=args.interval, rate=args.rate)

    print()
    print(
        f"== daemon benchmark ({'Spark Connect' if remote else 'local Spark per run'}; machine: 2 cores shared) =="
    )
    if "empty_run" in results:
        er = float(results["empty_run"])  # type: ignore[arg-type]
        print(
            f"empty window run, RUN_START->RUN_SUCCESS (median): {er:.1f}s   target <= 8 s: "
            f"{'MET' if er <= 8 else 'NOT MET'} (moonshot <= 5 s: {'MET' if er <= 5 else 'not met'}); "
            f"launch (created->RUN_START) {float(results['empty_launch']):.1f}s"  # type: ignore[arg-type]
        )
    if "latency" in results:
        p50, p95, mx = results["latency"]  # type: ignore[misc]
        n, total = results["latency_markers"]  # type: ignore[misc]
        print(
            f"COMMIT->visible under the daemon, {args.rate} changes/s, sensor {args.interval}s: p50 {p50:.1f}s "
            f"p95 {p95:.1f}s max {mx:.1f}s ({n}/{total} markers, mean load {float(results['latency_load']):.1f})"  # type: ignore[arg-type]
            f"   target p95 <= 15 s: {'MET' if p95 <= 15 else 'NOT MET'} (moonshot <= 10 s: {'MET' if p95 <= 10 else 'not met'})"
        )
    if "latency_steady" in results:
        sp50, sp95, sn = results["latency_steady"]  # type: ignore[misc]
        print(
            f"  of which steady state (markers committed after the first one was visible: a warm run "
            f"reading): p50 {sp50:.1f}s p95 {sp95:.1f}s ({sn} markers)"
        )
    if "latency_plain" in results:
        pp50, pp95, pn = results["latency_plain"]  # type: ignore[misc]
        print(
            f"  the compacted state table alone (a plain Delta reader, as of the last compaction): "
            f"p50 {pp50:.1f}s p95 {pp95:.1f}s ({pn} markers seen during the phase)"
        )
    if "inprocess" in results:
        ip = results["inprocess"]
        print(
            f"COMMIT->visible in process (bench/latency.py, warm local Spark): p50 {ip['p50']:.1f}s "  # type: ignore[index]
            f"p95 {ip['p95']:.1f}s max {ip['max']:.1f}s ({ip['markers']} markers, mean load {ip['load']:.1f})"  # type: ignore[index]
        )
    if "sustain" in results:
        ch, rate, lag = results["sustain"]  # type: ignore[misc]
        print(
            f"sustained {rate:.0f} changes/s for {args.sustain_seconds:.0f}s ({ch} changes): caught up "
            f"{lag:.1f}s after the last write   target <= 60 s: {'MET' if lag <= 60 else 'NOT MET'}"
        )
    with root.cursor() as cur:
        cur.execute(f"DROP DATABASE IF EXISTS {db}")
        cur.execute(f"DROP DATABASE IF EXISTS {other}")
    root.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
