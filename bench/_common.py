"""Shared pieces of the benchmarks: settings, the scratch table, Spark, timing, CPU accounting, output.

Everything reads the same environment as ``infra/env.sh`` (``CDC_MYSQL_*``), so
``source infra/env.sh`` (or nothing, for the defaults) is all the set-up needed.
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import pymysql

from dagster_mysql_cdc.source.connection import ConnectionSettings

MYSQL_HOST = os.environ.get("CDC_MYSQL_HOST", "127.0.0.1")
MYSQL_PORT = int(os.environ.get("CDC_MYSQL_PORT", "3307"))
CDC_USER = os.environ.get("CDC_MYSQL_USER", "cdc")
CDC_PASSWORD = os.environ.get("CDC_MYSQL_PASSWORD", "cdc-secret")
ROOT_PASSWORD = os.environ.get("CDC_MYSQL_ROOT_PASSWORD", "root-secret")

#: Replication client ids, one per binlog client of the benchmarks (never shared).
SERVER_IDS = {
    "raw": 5701,
    "reader": 5702,
    "null_sink": 5703,
    "end_to_end": 5704,
    "profile": 5705,
    "end_to_end_fresh": 5706,
    "sample": 5707,
}

QUICK_ROWS = 50_000
FULL_ROWS = 500_000

#: The ~10-column mixed-type table used by both benchmarks.
TABLE_DDL = """
CREATE TABLE {db}.{table} (
  id       BIGINT NOT NULL PRIMARY KEY,
  qty      INT NOT NULL,
  name     VARCHAR(64) NULL,
  price    DECIMAL(12,2) NOT NULL,
  created  DATETIME(6) NOT NULL,
  updated  TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3),
  flag     TINYINT NOT NULL,
  score    DOUBLE NULL,
  doc      JSON NULL,
  day      DATE NULL
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4
"""
COLUMNS = "id, qty, name, price, created, updated, flag, score, doc, day"


def insert_select(db: str, table: str, first: int, last: int) -> str:
    """``INSERT ... SELECT`` of ids ``first..last`` from MariaDB's SEQUENCE engine (one statement)."""
    return f"""
INSERT INTO {db}.{table} ({COLUMNS})
SELECT seq,
       seq % 1000,
       IF(seq % 17 = 0, NULL, CONCAT('name-', seq, '-', REPEAT('x', seq % 23))),
       (seq % 1000000) / 100 + 0.01,
       TIMESTAMP'2024-01-01 00:00:00' + INTERVAL seq SECOND + INTERVAL (seq % 999983) MICROSECOND,
       TIMESTAMP'2024-06-01 00:00:00' + INTERVAL seq SECOND + INTERVAL (seq % 997) * 1000 MICROSECOND,
       seq % 3,
       IF(seq % 11 = 0, NULL, seq * 1.000123e0),
       IF(seq % 13 = 0, NULL, JSON_OBJECT('k', seq, 's', CONCAT('v', seq), 'tags', JSON_ARRAY('a', 'b', seq % 7))),
       IF(seq % 19 = 0, NULL, DATE'2020-01-01' + INTERVAL (seq % 3000) DAY)
FROM {db}.seq_{first}_to_{last}
"""


def cdc_settings() -> ConnectionSettings:
    """The capture user (what the library uses in production)."""
    return ConnectionSettings(host=MYSQL_HOST, port=MYSQL_PORT, user=CDC_USER, password=CDC_PASSWORD)


def root_connect() -> pymysql.connections.Connection:
    """Root connection for set-up (DDL, data generation), autocommit, UTC."""
    kw = ConnectionSettings(
        host=MYSQL_HOST, port=MYSQL_PORT, user="root", password=ROOT_PASSWORD
    ).pymysql_kwargs()
    return pymysql.connect(**kw)


def scratch_name(kind: str) -> str:
    return f"bench_{kind}_{os.getpid()}"


@contextmanager
def scratch_database(kind: str) -> Iterator[tuple[pymysql.connections.Connection, str]]:
    """A fresh database dropped on exit (even on failure)."""
    db = scratch_name(kind)
    conn = root_connect()
    try:
        with conn.cursor() as cur:
            cur.execute(f"DROP DATABASE IF EXISTS {db}")
            cur.execute(f"CREATE DATABASE {db}")
        yield conn, db
    finally:
        try:
            with conn.cursor() as cur:
                cur.execute(f"DROP DATABASE IF EXISTS {db}")
        finally:
            conn.close()


@contextmanager
def scratch_dir(prefix: str, keep: bool = False) -> Iterator[str]:
    d = tempfile.mkdtemp(prefix=prefix)
    try:
        yield d
    finally:
        if not keep:
            shutil.rmtree(d, ignore_errors=True)


# -- a shared server: others' tests purge binlogs and restart the server --------------------------
MAX_ATTEMPTS = 3


class RangeLost(RuntimeError):
    """The benchmark's binlog range or connection was destroyed by another user of the server."""


def server_started_at() -> float:
    """Epoch seconds at which the server started (changes when someone restarts it)."""
    conn = wait_server()
    try:
        with conn.cursor() as cur:
            cur.execute(
                "SELECT UNIX_TIMESTAMP() - VARIABLE_VALUE FROM information_schema.GLOBAL_STATUS "
                "WHERE VARIABLE_NAME = 'UPTIME'"
            )
            return float(cur.fetchone()[0])
    finally:
        conn.close()


def wait_server(timeout: float = 120.0) -> pymysql.connections.Connection:
    """A root connection, waiting (bounded) while the server is down (e.g. being restarted)."""
    t0 = time.monotonic()
    while True:
        try:
            return root_connect()
        except pymysql.err.OperationalError:
            if time.monotonic() - t0 > timeout:
                raise
            time.sleep(2)


def is_range_lost(e: BaseException) -> bool:
    """Errors caused by a PURGE BINARY LOGS / server restart from someone else, not by us."""
    from dagster_mysql_cdc.errors import SourceConnectionError
    from dagster_mysql_cdc.source.binlog import BinlogReadError

    if isinstance(e, (RangeLost, BinlogReadError, SourceConnectionError)):
        return True
    if isinstance(e, pymysql.err.OperationalError) and e.args and e.args[0] in (1236, 2006, 2013, 2003):
        return True
    cause = e.__cause__ or e.__context__
    return cause is not None and cause is not e and is_range_lost(cause)


def run_repetitions(
    repeat: int, repetition, results: dict, *, on_range_lost=None, retry_note: str = "repeating"
) -> None:
    """Run ``repetition(rep, attempt) -> {variant: Measurement}`` ``repeat`` times and append each
    measurement to ``results[variant]``. A repetition that another user of the server spoiled (a
    purge, a lost connection, a restart during it: :func:`is_range_lost`) is run again, up to
    :data:`MAX_ATTEMPTS` times, after ``on_range_lost()`` (e.g. regenerating the binlog range)."""
    for rep in range(repeat):
        if repeat > 1:
            print(f"-- repetition {rep + 1}/{repeat}")
        for attempt in range(MAX_ATTEMPTS):
            started = server_started_at()
            try:
                out = repetition(rep, attempt)
                if abs(server_started_at() - started) > 2:
                    raise RangeLost("the server restarted during the repetition")
                break
            except Exception as e:
                if not is_range_lost(e) or attempt == MAX_ATTEMPTS - 1:
                    raise
                print(
                    f"       !! measurement invalidated by another user of the server ({type(e).__name__}: "
                    f"{e}); {retry_note}",
                    flush=True,
                )
                wait_server().close()
                if on_range_lost is not None:
                    on_range_lost()
        for k, m in out.items():
            results[k].append(m)


# -- Spark ---------------------------------------------------------------------------------------
_SPARK = None


def get_spark(master: str | None = None):
    """The library's default local Spark session, started once (JVM start is never timed).

    ``master`` overrides the default's ``spark.master`` (e.g. ``local[1]``; one session per
    process, so it only counts on the first call). One trivial job runs after start-up so the
    first timed job does not pay the scheduler's first-job initialisation; Python workers and the
    data source are still cold.
    """
    global _SPARK
    if _SPARK is None:
        from dagster_pyspark import LazyPySparkResource

        from dagster_mysql_cdc import DEFAULT_SPARK_CONFIG
        from dagster_mysql_cdc.sink.spark_session import use_this_python_for_local_spark

        t0 = time.perf_counter()
        # the library's defaults; only the console progress bar is turned off (output hygiene)
        conf = {**DEFAULT_SPARK_CONFIG, "spark.ui.showConsoleProgress": "false"}
        if master:
            conf["spark.master"] = master
        use_this_python_for_local_spark(conf)  # as the resource does: workers run this interpreter
        _SPARK = LazyPySparkResource(spark_config=conf).spark_session
        _SPARK.sparkContext.setLogLevel("ERROR")
        _SPARK.range(1).count()
        print(
            f"[spark] session started in {time.perf_counter() - t0:.1f}s (not timed): {conf['spark.master']}"
        )
        warm_up_sink(_SPARK)
    return _SPARK


_WARMED = False


def warm_up_sink(spark) -> None:
    """One tiny end-to-end LakeWriter batch (not timed) so the timed runs do not include the
    one-off start of Spark's Python workers and of the data source (printed: it is a real cost of
    the first batch of every Dagster run that starts its own Spark session)."""
    global _WARMED
    if _WARMED:
        return
    import pyarrow as pa

    from dagster_mysql_cdc.events import BinlogPosition, snapshot_events
    from dagster_mysql_cdc.sink.lake import LakeWriter
    from dagster_mysql_cdc.sink.storage import StorageSettings

    with scratch_dir("bench-warm-") as d:
        value = pa.record_batch([pa.array([1], pa.int64())], names=["id"])
        pos = BinlogPosition("mysql-bin.000001", 4)
        ev = snapshot_events(
            value,
            primary_key=("id",),
            server_name="warm",
            server_id=1,
            database="w",
            table="t",
            position=pos,
            snapshot_flags=pa.array(["last"]),
        )
        w = LakeWriter(spark, StorageSettings(base_uri=d), "warm")
        t0 = time.perf_counter()
        w.write_table_batch(
            "w",
            "t",
            [ev],
            value_schema=value.schema,
            primary_key=("id",),
            app_id="warm",
            version=1,
            position=pos,
            snapshot_position=pos,
        )
        t1 = time.perf_counter()
        w.write_table_batch(
            "w",
            "t",
            [ev],
            value_schema=value.schema,
            primary_key=("id",),
            app_id="warm",
            version=2,
            position=pos,
            snapshot_position=pos,
        )
        t2 = time.perf_counter()
    _WARMED = True
    print(
        f"[spark] warm-up (not timed): first 1-row LakeWriter batch {t1 - t0:.1f}s (cold Python "
        f"workers + data source), second 1-row batch {t2 - t1:.1f}s (fixed per-batch cost, with merge)",
        flush=True,
    )


def stop_spark() -> None:
    global _SPARK
    if _SPARK is not None:
        _SPARK.stop()
        _SPARK = None


class TimedLakeWriter:
    """Factory of a ``LakeWriter`` subclass that times its phases (no behaviour change).

    The sink writes record batches on its own thread while the caller reads the next ones, so the
    phases are busy times of that thread (they overlap the source's work), plus the commit step
    that waits for the thread and publishes. Seams: ``spark.createDataFrame``, ``write_files``
    (one Spark write job: the change log's files, and a first snapshot's state files), ``TableBatch._write``
    (everything the sink thread does for one record batch), ``write_frame`` (one Spark job whose
    executors produce the events, e.g. the split snapshot's), ``TableBatch.commit``, the state
    compaction after it (``compact_if_due``), ``maybe_compact``.
    """

    @staticmethod
    def create(spark, storage, server_name, **kw):
        from dagster_mysql_cdc.sink import lake as L

        class _Timed(L.LakeWriter):
            def __init__(self, *a, **kw):
                super().__init__(*a, **kw)
                self.phases: dict[str, float] = {}
                self._lock = threading.Lock()
                self.spark = _TimedSpark(self.spark, self)

            def _add(self, k, t0):
                dt = time.perf_counter() - t0
                with self._lock:
                    self.phases[k] = self.phases.get(k, 0.0) + dt

            def _timed(self, name, fn):
                def timed(*a, **kw):
                    t0 = time.perf_counter()
                    try:
                        return fn(*a, **kw)
                    finally:
                        self._add(name, t0)

                return timed

            def write_files(self, *a, **kw):
                return self._timed("spark_jobs", super().write_files)(*a, **kw)

            def write_frame(self, *a, **kw):  # a job whose executors produce the events
                return self._timed("frame_jobs", super().write_frame)(*a, **kw)

            def evolve_schema(self, *a, **kw):
                return self._timed("evolve", super().evolve_schema)(*a, **kw)

            def maybe_compact(self, *a, **kw):
                return self._timed("compact", super().maybe_compact)(*a, **kw)

            def open_table_batch(self, *a, **kw):
                tb = super().open_table_batch(*a, **kw)
                tb._write = self._timed("sink_thread", tb._write)
                tb.commit = self._timed("commit_total", tb.commit)
                return tb

            def compact_if_due(self, *a, **kw):
                return self._timed("state_compaction", super().compact_if_due)(*a, **kw)

            def write_table_batch(self, *a, **kw):
                return self._timed("sink_total", super().write_table_batch)(*a, **kw)

        return _Timed(spark, storage, server_name, **kw)


class _TimedSpark:
    """SparkSession proxy timing ``createDataFrame`` (everything else is forwarded)."""

    def __init__(self, spark, owner):
        self._spark = spark
        self._owner = owner

    def createDataFrame(self, *a, **kw):  # noqa: N802 - Spark's name
        t0 = time.perf_counter()
        try:
            return self._spark.createDataFrame(*a, **kw)
        finally:
            self._owner._add("create_df", t0)

    def __getattr__(self, name):
        return getattr(self._spark, name)


def phase_summary(phases: dict[str, float]) -> str:
    """The sink's phases (see TimedLakeWriter): sink-thread busy time, then the commit step."""
    if not phases:
        return ""
    g = lambda k: phases.get(k, 0.0)  # noqa: E731
    busy = g("sink_thread")
    other = busy - g("create_df") - g("spark_jobs")
    return (
        f"sink thread busy {busy:.2f}s (overlaps the source) = createDataFrame of the payload "
        f"{g('create_df'):.2f}s + Spark write jobs (change log + state tail) {g('spark_jobs'):.2f}s + "
        f"other {other:.2f}s; commit step {g('commit_total'):.2f}s (waiting for the sink thread, Delta "
        f"commits, evolve {g('evolve'):.2f}s, state compaction {g('state_compaction'):.2f}s); "
        f"optimize {g('compact'):.2f}s"
    )


# -- CPU accounting ------------------------------------------------------------------------------
_CLK = os.sysconf("SC_CLK_TCK")


def _proc_stat(pid: int) -> tuple[int, float] | None:
    """(ppid, utime+stime seconds incl. waited-for children) of a process, or None if gone."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            data = fh.read()
    except OSError:
        return None
    rest = data[data.rindex(")") + 2 :].split()
    ppid = int(rest[1])
    utime, stime, cutime, cstime = (int(x) for x in rest[11:15])
    return ppid, (utime + stime + cutime + cstime) / _CLK


def _all_procs() -> dict[int, tuple[int, float]]:
    out = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            st = _proc_stat(int(name))
            if st is not None:
                out[int(name)] = st
    return out


def _find_server_pid() -> int | None:
    """pid of the local mariadbd/mysqld serving MYSQL_PORT (read-only use: /proc/<pid>/stat)."""
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/cmdline", "rb") as fh:
                cmd = fh.read().split(b"\0")
        except OSError:
            continue
        if cmd and os.path.basename(cmd[0]) in (b"mariadbd", b"mysqld"):
            found.append((int(name), cmd))
    for pid, cmd in found:
        if any(f"--port={MYSQL_PORT}".encode() == c for c in cmd) or _port_in_cnf(cmd):
            return pid
    return found[0][0] if len(found) == 1 else None


def _port_in_cnf(cmd: list[bytes]) -> bool:
    for c in cmd:
        if c.startswith(b"--defaults-file="):
            try:
                with open(c.split(b"=", 1)[1]) as fh:
                    return f"port={MYSQL_PORT}" in fh.read().replace(" ", "")
            except OSError:
                return False
    return False


_SERVER_PID: int | None | bool = False


@dataclass
class CpuSnapshot:
    """CPU seconds of this process, of its descendants (Spark JVM + Python workers), of mariadbd."""

    self_s: float
    children_s: float
    server_s: float
    t: float


def cpu_snapshot() -> CpuSnapshot:
    global _SERVER_PID
    procs = _all_procs()
    if _SERVER_PID is False or _SERVER_PID not in procs:
        _SERVER_PID = _find_server_pid()
    me = os.getpid()
    kids: dict[int, list[int]] = {}
    for pid, (ppid, _) in procs.items():
        kids.setdefault(ppid, []).append(pid)
    total = 0.0
    stack = list(kids.get(me, []))
    while stack:
        p = stack.pop()
        total += procs[p][1]
        stack += kids.get(p, [])
    t = os.times()
    server = procs[_SERVER_PID][1] if isinstance(_SERVER_PID, int) and _SERVER_PID in procs else float("nan")
    return CpuSnapshot(self_s=t.user + t.system, children_s=total, server_s=server, t=time.perf_counter())


# -- measurements --------------------------------------------------------------------------------
@dataclass
class Measurement:
    """One timed variant."""

    key: str
    label: str
    rows: int
    seconds: float
    cpu_self: float = float("nan")
    cpu_children: float = float("nan")
    cpu_server: float = float("nan")
    notes: dict = field(default_factory=dict)
    load: float = float("nan")

    @property
    def rate(self) -> float:
        return self.rows / self.seconds if self.seconds > 0 else float("nan")

    @property
    def cpu_us_per_row(self) -> float:
        """Client CPU (our process + Spark JVM/workers) per row: insensitive to other load.
        (Spark CPU that could not be measured, see ``measure``, counts as 0.)"""
        kids = 0.0 if self.cpu_children != self.cpu_children else self.cpu_children
        return 1e6 * (self.cpu_self + kids) / self.rows if self.rows else float("nan")


#: ``--max-load`` / ``--max-wait``: wait for a quiet machine before each timed variant.
QUIET = {"max_load": 1.5, "max_wait": 300.0}


def wait_quiet() -> float:
    """Sleep until the 1-minute load average is below ``QUIET['max_load']`` (at most ``max_wait``
    seconds). Returns the load average when the measurement starts."""
    limit, budget = QUIET["max_load"], QUIET["max_wait"]
    t0 = time.monotonic()
    load = os.getloadavg()[0]
    if limit > 0 and load > limit:
        print(
            f"       (load {load:.2f} > {limit}: waiting up to {budget:.0f}s for a quieter machine)",
            flush=True,
        )
        while load > limit and time.monotonic() - t0 < budget:
            time.sleep(5)
            load = os.getloadavg()[0]
    return load


def measure(key: str, label: str, fn: Callable[[], tuple[int, dict]]) -> Measurement:
    """Time ``fn`` (returns ``(rows, notes)``), with CPU of us / our children / the server."""
    load = wait_quiet()
    before = cpu_snapshot()
    rows, notes = fn()
    after = cpu_snapshot()
    m = Measurement(
        key,
        label,
        rows,
        after.t - before.t,
        cpu_self=after.self_s - before.self_s,
        # a Spark Python worker that exits between the samples takes its CPU with it: n/a then
        cpu_children=(after.children_s - before.children_s)
        if after.children_s >= before.children_s
        else float("nan"),
        cpu_server=after.server_s - before.server_s,
        notes=notes,
    )
    m.load = load
    print(
        f"  {key:<4} {label:<58} {m.rows:>9,} rows {m.seconds:8.2f}s {m.rate:>10,.0f} rows/s"
        f"  (cpu py {m.cpu_self:.1f}s, spark {m.cpu_children:.1f}s, db {m.cpu_server:.1f}s; load {load:.2f})",
        flush=True,
    )
    return m


def best(ms: list[Measurement]) -> Measurement:
    """The fastest repetition (the least disturbed by other load on a shared, noisy machine)."""
    return max(ms, key=lambda m: m.rate)


def print_table(
    title: str, results: dict[str, list[Measurement]], baseline: str, targets: dict[str, float]
) -> None:
    """Results table (best of the repetitions) with each variant's ratio to ``baseline``."""
    base = best(results[baseline])
    print()
    print(f"== {title}")
    print(
        f"{'':4} {'variant':<58} {'rows':>9} {'seconds':>8} {'rows/s':>10} {'us/row':>7} {'ratio':>6}  "
        f"{'target':<14} {'cpu us/row':>10} {'cpu ratio':>9}"
    )
    for key, ms in results.items():
        m = best(ms)
        ratio = m.rate / base.rate
        tgt = targets.get(key)
        verdict = "" if tgt is None else f">= {tgt:.2f} {'MET' if ratio >= tgt else 'MISSED'}"
        reps = (
            "" if len(ms) == 1 else f"  (best of {len(ms)}: " + ", ".join(f"{x.rate:,.0f}" for x in ms) + ")"
        )
        print(
            f"{key:<4} {m.label:<58} {m.rows:>9,} {m.seconds:>8.2f} {m.rate:>10,.0f} "
            f"{1e6 / m.rate if m.rate else float('inf'):>7.1f} "  # a variant that read nothing: inf
            f"{ratio:>5.2f}x  {verdict:<14} {m.cpu_us_per_row:>10.1f} "
            + (
                f"{base.cpu_us_per_row / m.cpu_us_per_row:>8.2f}x"
                if m.cpu_us_per_row
                else f"{'n/a':>9}"  # a cold child's CPU is not sampled
            )
            + reps
        )
    print(
        "ratio = rows/s over (a)'s (wall clock, the issue's measure); cpu us/row = CPU of this process + "
        "its Spark JVM/workers per row, cpu ratio = (a)'s cpu us/row over the variant's (robust to other load)."
    )
    print()


def print_machine() -> None:
    import deltalake
    import pyarrow
    import pyspark

    try:
        from importlib.metadata import version

        repl = version("mysql-replication")
        pm_version = version("PyMySQL")  # pymysql.__version__ is its MySQLdb-compat version
    except Exception:  # pragma: no cover
        repl = pm_version = "?"
    model = "?"
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    mem = "?"
    try:
        with open("/proc/meminfo") as fh:
            kb = int(fh.readline().split()[1])
            mem = f"{kb / 1024 / 1024:.1f} GiB"
    except OSError:
        pass
    conn = root_connect()
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT VERSION()")
            server = cur.fetchone()[0]
    finally:
        conn.close()
    rev = "?"
    try:
        import subprocess

        root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        rev = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=root, capture_output=True, text=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--", "dagster_mysql_cdc"],
            cwd=root,
            capture_output=True,
            text=True,
        ).stdout.strip()
        rev += " (library files modified in the working tree)" if dirty else ""
    except Exception:
        pass
    print(f"[machine] dagster-mysql-cdc at git {rev}")
    print(
        f"[machine] nproc={os.cpu_count()} RAM={mem} CPU={model!r} load={os.getloadavg()[0]:.2f}\n"
        f"[machine] Python {platform.python_version()} pyspark {pyspark.__version__} deltalake "
        f"{deltalake.__version__} mysql-replication {repl} PyMySQL {pm_version} pyarrow "
        f"{pyarrow.__version__}; server {server} at {MYSQL_HOST}:{MYSQL_PORT}",
        flush=True,
    )


def add_common_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--rows", type=int, default=None, help=f"row changes / rows (default {FULL_ROWS:,})")
    p.add_argument("--quick", action="store_true", help=f"sanity run with {QUICK_ROWS:,} rows")
    p.add_argument("--repeat", type=int, default=1, help="repetitions of every variant (best is reported)")
    p.add_argument("--profile", action="store_true", help="profile the end-to-end variant with pyinstrument")
    p.add_argument("--keep", action="store_true", help="keep the scratch lake directories")
    p.add_argument(
        "--max-load",
        type=float,
        default=QUIET["max_load"],
        help="wait before each variant until the 1-min load average is below this (0: never wait)",
    )
    p.add_argument(
        "--max-wait", type=float, default=QUIET["max_wait"], help="longest wait for --max-load, seconds"
    )


def rows_of(args: argparse.Namespace) -> int:
    QUIET["max_load"], QUIET["max_wait"] = args.max_load, args.max_wait
    if args.rows is not None:
        return args.rows
    return QUICK_ROWS if args.quick else FULL_ROWS


# -- profiling -----------------------------------------------------------------------------------
def run_profiled(fn: Callable[[], object], top: int = 25) -> None:
    """Run ``fn`` under pyinstrument and print self-time and cumulative-time hotspots."""
    try:
        from pyinstrument import Profiler
    except ImportError:
        print("[profile] pyinstrument is not installed: pip install pyinstrument", file=sys.stderr)
        return
    prof = Profiler(interval=0.001)
    prof.start()
    try:
        fn()
    finally:
        session = prof.stop()
    root = session.root_frame()
    total = root.time if root is not None else 0.0
    if root is None or total <= 0:
        print("[profile] no samples")
        return
    selft: dict[tuple[str, str], float] = {}
    cum: dict[tuple[str, str], float] = {}

    def walk(fr, active: frozenset):
        if fr.is_synthetic:  # "[self]"/"[await]" leaves: already in the parent's total_self_time
            return
        k = (fr.function or "?", _short(fr.file_path_short or fr.file_path or "?", fr.line_no))
        selft[k] = selft.get(k, 0.0) + fr.total_self_time
        if k not in active:  # count recursion once
            cum[k] = cum.get(k, 0.0) + fr.time
        for ch in fr.children:
            walk(ch, active | {k})

    walk(root, frozenset())
    print(f"\n[profile] pyinstrument, wall {total:.1f}s (sampling adds overhead to per-row Python code)")
    print(f"[profile] top {top} by SELF time:")
    for (fn_name, where), s in sorted(selft.items(), key=lambda kv: -kv[1])[:top]:
        print(f"  {s:7.2f}s {100 * s / total:5.1f}%  {fn_name:<38} {where}")
    print(
        f"[profile] top {top} by CUMULATIVE time (dagster_mysql_cdc, pymysqlreplication, pyspark, deltalake, pyarrow):"
    )
    keep = ("dagster_mysql_cdc", "pymysqlreplication", "pyspark", "deltalake", "pyarrow", "pymysql", "py4j")
    rows = [(k, v) for k, v in cum.items() if any(x in k[1] for x in keep)]
    for (fn_name, where), s in sorted(rows, key=lambda kv: -kv[1])[:top]:
        print(f"  {s:7.2f}s {100 * s / total:5.1f}%  {fn_name:<38} {where}")
    print("[profile] call tree (frames >= 2% shown):")
    try:
        text = session_text(session)
        print(text)
    except Exception as e:  # pragma: no cover - depends on pyinstrument version
        print(f"  (tree unavailable: {e})")


def session_text(session) -> str:
    from pyinstrument.renderers import ConsoleRenderer

    r = ConsoleRenderer(
        unicode=False,
        color=False,
        show_all=False,
        short_mode=False,
        processor_options={"filter_threshold": 0.02},
    )
    return r.render(session)


def _short(path: str, line: int | None) -> str:
    for marker in ("site-packages/", str(Path(__file__).resolve().parent.parent) + "/"):
        i = path.find(marker)
        if i >= 0:
            path = path[i + len(marker) :]
    return f"{path}:{line}" if line else path


# -- cold processes (--cold): a fresh Python process per variant, as a daemon-launched run -------
def add_cold_args(p: argparse.ArgumentParser, what: str) -> None:
    """``--cold`` (run ``what`` also in fresh processes: c_cl local Spark, c_cc Spark Connect) and
    the hidden ``--cold-child`` the parent passes to those processes."""
    p.add_argument(
        "--cold",
        action="store_true",
        help=f"also run (c_cl, c_cc): {what} in a fresh process (imports, Spark start or a Spark "
        "Connect session on CDC_SPARK_REMOTE included)",
    )
    p.add_argument("--cold-child", default=None, help=argparse.SUPPRESS)


def cold_variants() -> list[tuple[str, str, str]]:
    """``(key, label, spark_remote)`` of the cold variants: a local Spark, and the Spark Connect
    server of ``CDC_SPARK_REMOTE`` when one is configured."""
    remote = os.environ.get("CDC_SPARK_REMOTE", "")
    variants = [("c_cl", "cold process, local Spark (JVM start included)", "")]
    if remote:
        variants.append(("c_cc", "cold process, Spark Connect server", remote))
    return variants


def run_cold_child(module: str, payload: dict, remote: str) -> tuple[int, dict]:
    """Run ``python -m <module> --cold-child <payload as JSON>`` with ``CDC_SPARK_REMOTE=remote``;
    the child prints ``{"rows", "notes"}`` as its last line (see :func:`cold_child_result`)."""
    import json
    import subprocess

    env = {**os.environ, "CDC_SPARK_REMOTE": remote}
    out = subprocess.run(
        [sys.executable, "-m", module, "--cold-child", json.dumps(payload)],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    if out.returncode != 0:
        raise RuntimeError(f"cold child failed:\n{out.stderr[-3000:]}")
    res = json.loads(out.stdout.strip().splitlines()[-1])
    return res["rows"], res["notes"]


def cold_child_result(rows: int, notes: dict, started: float, imports_done: float) -> int:
    """Print a cold child's result line (rows, notes + ``imports_s`` and ``process_s``)."""
    import json

    notes["imports_s"] = round(imports_done - started, 2)
    notes["process_s"] = round(time.monotonic() - started, 2)
    print(json.dumps({"rows": rows, "notes": notes}))
    return 0


def print_cold_ratios(
    results: dict[str, list[Measurement]], a: Measurement, c: Measurement, target: float
) -> None:
    """The cold variants' ratios over (a), beside the warm (c)/(a)."""
    for key, what in (("c_cl", "cold, local Spark"), ("c_cc", "cold, Spark Connect")):
        if results.get(key):
            ck = best(results[key])
            print(
                f"ratio ({key})/(a) = {ck.rate / a.rate:.2f} ({what}: a fresh process paying every "
                f"start-up cost; warm (c)/(a) = {c.rate / a.rate:.2f}; target cold >= {target:.2f})"
            )


def bench_main(argv: list[str] | None, parser: argparse.ArgumentParser, run, cold_child) -> int:
    """Entry point shared by the throughput benchmarks: a cold child, or the benchmark itself."""
    import logging

    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    args = parser.parse_args(argv)
    if args.cold_child:
        return cold_child(args.cold_child)
    print_machine()
    try:
        run(args)
    finally:
        stop_spark()
    return 0
