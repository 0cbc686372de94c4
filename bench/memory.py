"""Memory: peak RSS of a window run that processes one large transaction.

Commits ONE transaction of ``--rows`` row inserts (default 1,000,000) into a ~10-column table, then
runs the binlog window containing it (``run_window``: read, decode, Arrow batches, Spark, Delta) in
a child process and reports the child's peak RSS (``ru_maxrss``) and the Spark JVM's peak
(``VmHWM``), against the target of 1 GB.

    python -m bench.memory --rows 1000000

``--split`` measures the split snapshot instead (issue 15, ``run_split_snapshot``: the Spark
executors read the source and write Parquet): a table of ``--small-rows`` rows (default 250,000),
then the same table grown to ``--rows``, each snapshotted in a fresh child process with Spark
``--master`` (default ``local[2]``). Before the snapshot (Spark started and warmed up) the child
resets the peak RSS (``VmHWM``, ``/proc/PID/clear_refs``) of itself, of the Spark JVM and of the
JVM's Python workers, samples them every 0.1 s while the snapshot runs, and reports the peaks
during the snapshot: driver (the run process), JVM, the largest Python worker, and the largest
sum over the workers alive at one sample (an upper bound: forked workers share pages).

    python -m bench.memory --split --rows 1000000 --small-rows 250000
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import uuid

import pymysql

from ._common import CDC_PASSWORD, CDC_USER, MYSQL_HOST, MYSQL_PORT, ROOT_PASSWORD

CHILD = r"""
import json, os, resource, sys, threading, time
from dagster_pyspark import LazyPySparkResource
from dagster_mysql_cdc import DEFAULT_SPARK_CONFIG
from dagster_mysql_cdc.events import BinlogPosition
from dagster_mysql_cdc.sink.lake import LakeWriter
from dagster_mysql_cdc.sink.storage import StorageSettings
from dagster_mysql_cdc.source.connection import ConnectionSettings, connect, server_info
from dagster_mysql_cdc.source.filters import TableFilter
from dagster_mysql_cdc.sink.schema_history import SchemaHistory
from dagster_mysql_cdc.source.types import TypeOptions
from dagster_mysql_cdc.engine.stream import StreamOptions
from dagster_mysql_cdc.engine.window_run import run_window
a = json.loads(sys.argv[1])
settings = ConnectionSettings(host=a["host"], port=a["port"], user=a["user"], password=a["password"])
spark = LazyPySparkResource(spark_config=DEFAULT_SPARK_CONFIG).spark_session
jvm_pid = int(spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid())
peak_jvm = [0]
def watch():
    while True:
        try:
            for line in open(f"/proc/{jvm_pid}/status"):
                if line.startswith("VmHWM"):
                    peak_jvm[0] = max(peak_jvm[0], int(line.split()[1]))
        except OSError:
            return
        time.sleep(0.5)
threading.Thread(target=watch, daemon=True).start()
storage = StorageSettings(base_uri=a["lake"])
conn = connect(settings); info = server_info(conn); conn.close()
rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
t0 = time.monotonic()
res = run_window(settings, info, replica_server_id=5802, start=BinlogPosition.from_dict(a["start"]),
                 end=BinlogPosition.from_dict(a["end"]), writer=LakeWriter(spark, storage, "mem"),
                 history=SchemaHistory(storage, "mem"), table_filter=TableFilter(database_include_list=(a["db"],)),
                 type_options=TypeOptions(), options=StreamOptions(), server_name="mem")
secs = time.monotonic() - t0
time.sleep(1)
print("RESULT " + json.dumps({"rows": res.rows, "seconds": secs, "py_peak_kb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
                              "py_before_kb": rss_before, "jvm_peak_kb": peak_jvm[0]}))
"""


def _proc_tree() -> dict[int, int]:
    """pid -> ppid of every process."""
    out = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/stat") as fh:
                    data = fh.read()
                out[int(d)] = int(data[data.rindex(")") + 2 :].split()[1])
            except (OSError, ValueError):
                pass
    return out


def _descendants(root: int, tree: dict[int, int]) -> list[int]:
    kids: dict[int, list[int]] = {}
    for pid, ppid in tree.items():
        kids.setdefault(ppid, []).append(pid)
    out, stack = [], list(kids.get(root, []))
    while stack:
        p = stack.pop()
        out.append(p)
        stack += kids.get(p, [])
    return out


def _status_kb(pid: int) -> dict[str, int]:
    """``VmHWM`` / ``VmRSS`` (kB) of ``pid`` ({} when it is gone)."""
    out = {}
    try:
        with open(f"/proc/{pid}/status") as fh:
            for line in fh:
                if line.startswith(("VmHWM", "VmRSS")):
                    out[line.split(":")[0]] = int(line.split()[1])
    except OSError:
        pass
    return out


def _reset_peak(pid: int) -> None:
    """Reset ``pid``'s peak RSS (``VmHWM``) to its current RSS (Linux >= 4.0, own processes)."""
    try:
        with open(f"/proc/{pid}/clear_refs", "w") as fh:
            fh.write("5")
    except OSError:
        pass


def _split_child(arg: str) -> int:
    """Child of ``--split``: Spark + warm-up, reset the peaks, the split snapshot, print the peaks."""
    import resource
    import threading
    import time

    from dagster_mysql_cdc.engine.split_snapshot import SplitOptions
    from dagster_mysql_cdc.sink.lake import LakeWriter
    from dagster_mysql_cdc.sink.storage import StorageSettings

    from . import _common as C
    from .snapshot import split_end_to_end

    a = json.loads(arg)
    spark = C.get_spark(a["master"])
    jvm = int(spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid())
    me = os.getpid()
    peaks = {"workers_max_kb": 0, "workers_sum_kb": 0, "workers_seen": set()}
    done = threading.Event()

    def workers() -> list[int]:
        return _descendants(jvm, _proc_tree())

    def sample() -> None:
        total = 0
        for pid in workers():
            st = _status_kb(pid)
            if st:
                peaks["workers_seen"].add(pid)
                peaks["workers_max_kb"] = max(peaks["workers_max_kb"], st.get("VmHWM", 0))
                total += st.get("VmRSS", 0)
        peaks["workers_sum_kb"] = max(peaks["workers_sum_kb"], total)

    def watch() -> None:
        while not done.is_set():
            sample()
            time.sleep(0.1)

    for pid in [me, jvm, *workers()]:
        _reset_peak(pid)
    before = {"driver_kb": _status_kb(me).get("VmRSS", 0), "jvm_kb": _status_kb(jvm).get("VmRSS", 0)}
    th = threading.Thread(target=watch, daemon=True)
    th.start()
    t0 = time.monotonic()
    writer = LakeWriter(spark, StorageSettings(base_uri=a["lake"]), "bench")
    split = SplitOptions(split_rows=a["split_rows"], max_connections=a["max_connections"])
    rows, notes = split_end_to_end(C.cdc_settings(), a["db"], writer, a["lake"], split, table=a["table"])
    secs = time.monotonic() - t0
    sample()
    done.set()
    th.join()
    rt = spark.sparkContext._jvm.java.lang.Runtime.getRuntime()
    res = {
        "jvm_heap_committed_kb": int(rt.totalMemory()) // 1024,
        "jvm_heap_max_kb": int(rt.maxMemory()) // 1024,
        "rows": rows,
        "seconds": secs,
        "splits": notes.get("splits"),
        "tasks": notes.get("tasks"),
        "driver_peak_kb": _status_kb(me).get("VmHWM", 0),
        "driver_before_kb": before["driver_kb"],
        "driver_maxrss_kb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
        "jvm_peak_kb": _status_kb(jvm).get("VmHWM", 0),
        "jvm_before_kb": before["jvm_kb"],
        "worker_peak_kb": peaks["workers_max_kb"],
        "workers_sum_peak_kb": peaks["workers_sum_kb"],
        "workers_seen": len(peaks["workers_seen"]),
    }
    C.stop_spark()
    print("RESULT " + json.dumps(res))
    return 0


def split_main(args) -> int:
    """``--split``: peak RSS of split snapshots of ``--small-rows`` and ``--rows`` rows."""
    from . import _common as C

    sizes = sorted({args.small_rows, args.rows})
    print(
        f"split snapshot peak RSS, Spark {args.master}, split_rows {args.split_rows:,}, "
        f"max_connections {args.split_max_connections} (load {os.getloadavg()[0]:.2f})",
        flush=True,
    )
    out = []
    with C.scratch_database("mem") as (root, db):
        have = 0
        for n in sizes:
            with root.cursor() as cur:
                if have == 0:
                    cur.execute(C.TABLE_DDL.format(db=db, table="t"))
                for lo in range(have + 1, n + 1, 50_000):
                    cur.execute(C.insert_select(db, "t", lo, min(lo + 49_999, n)))
                cur.execute(f"ANALYZE TABLE {db}.t")
                cur.fetchall()
            have = n
            lake = tempfile.mkdtemp(prefix="bench-mem-split-")
            payload = {
                "db": db,
                "table": "t",
                "lake": lake,
                "master": args.master,
                "split_rows": args.split_rows,
                "max_connections": args.split_max_connections,
            }
            load = os.getloadavg()[0]
            proc = subprocess.run(
                [sys.executable, "-m", "bench.memory", "--split-child", json.dumps(payload)],
                capture_output=True,
                text=True,
            )
            shutil.rmtree(lake, ignore_errors=True)
            line = next((ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")), None)
            if line is None:
                print(proc.stdout[-3000:], proc.stderr[-3000:])
                return 1
            r = json.loads(line[len("RESULT ") :])
            r["load"] = load
            out.append(r)
            mb = lambda k, r=r: r[k] / 1024  # noqa: E731
            print(
                f"{r['rows']:>9,} rows in {r['seconds']:.1f}s ({r['rows'] / r['seconds']:,.0f} rows/s), "
                f"{r['splits']} splits / {r['tasks']} tasks, load {load:.2f}: peak RSS during the snapshot: "
                f"driver {mb('driver_peak_kb'):,.0f} MB (before {mb('driver_before_kb'):,.0f} MB; "
                f"ru_maxrss incl. Spark start {mb('driver_maxrss_kb'):,.0f} MB), JVM {mb('jvm_peak_kb'):,.0f} MB "
                f"(before {mb('jvm_before_kb'):,.0f} MB; heap committed {mb('jvm_heap_committed_kb'):,.0f} MB of max "
                f"{mb('jvm_heap_max_kb'):,.0f} MB), largest Python worker {mb('worker_peak_kb'):,.0f} MB, "
                f"workers alive together {mb('workers_sum_peak_kb'):,.0f} MB ({r['workers_seen']} worker pids)",
                flush=True,
            )
    if len(out) == 2:
        s, b = out
        print(f"\n{'':28} {s['rows']:>12,} {b['rows']:>12,}  big/small (rows x{b['rows'] / s['rows']:.1f})")
        for k, label in (
            ("driver_peak_kb", "driver (run process)"),
            ("jvm_peak_kb", "Spark JVM"),
            ("worker_peak_kb", "largest Python worker"),
            ("workers_sum_peak_kb", "Python workers together"),
        ):
            print(f"{label:<28} {s[k] / 1024:>9,.0f} MB {b[k] / 1024:>9,.0f} MB  x{b[k] / max(s[k], 1):.2f}")
    return 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--split", action="store_true", help="peak RSS of split snapshots (issue 15)")
    ap.add_argument("--small-rows", type=int, default=250_000, help="--split: the smaller table")
    ap.add_argument("--master", default="local[2]", help="--split: Spark master of the child")
    ap.add_argument("--split-rows", type=int, default=100_000, help="--split: SplitOptions.split_rows")
    ap.add_argument(
        "--split-max-connections", type=int, default=0, help="--split: SplitOptions.max_connections"
    )
    ap.add_argument("--split-child", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.split_child:
        return _split_child(args.split_child)
    if args.split:
        return split_main(args)
    db = f"bench_mem_{uuid.uuid4().hex[:6]}"
    root = pymysql.connect(
        host=MYSQL_HOST, port=MYSQL_PORT, user="root", password=ROOT_PASSWORD, autocommit=True
    )
    with root.cursor() as cur:
        cur.execute(f"CREATE DATABASE {db}")
        cur.execute(f"USE {db}")
        cur.execute(
            "CREATE TABLE t (id BIGINT PRIMARY KEY, qty INT, name VARCHAR(64), price DECIMAL(12,2), created DATETIME(6), "
            "updated TIMESTAMP(3) NULL, flag TINYINT, score DOUBLE, doc JSON, day DATE)"
        )
        cur.execute("SHOW MASTER STATUS")
        f, p = cur.fetchone()[:2]
        start = {"file": f, "pos": int(p), "gtid_set": None}
        cur.execute(
            f"INSERT INTO t SELECT seq, seq % 1000, CONCAT('name-', seq), seq / 100, NOW(6), NOW(3), seq % 2, seq * 1.5, "
            f"JSON_OBJECT('k', seq, 'tag', 'abc'), CURDATE() FROM seq_1_to_{int(args.rows)}"
        )  # one statement, one transaction
        cur.execute("SHOW MASTER STATUS")
        f, p = cur.fetchone()[:2]
        end = {"file": f, "pos": int(p), "gtid_set": None}
    lake = tempfile.mkdtemp(prefix="bench-mem-")
    payload = json.dumps(
        {
            "host": MYSQL_HOST,
            "port": MYSQL_PORT,
            "user": CDC_USER,
            "password": CDC_PASSWORD,
            "db": db,
            "lake": lake,
            "start": start,
            "end": end,
        }
    )
    out = subprocess.run(
        [sys.executable, "-c", CHILD, payload], capture_output=True, text=True, cwd=os.getcwd()
    )
    line = next((ln for ln in out.stdout.splitlines() if ln.startswith("RESULT ")), None)
    with root.cursor() as cur:
        cur.execute(f"DROP DATABASE IF EXISTS {db}")
    if line is None:
        print(out.stdout[-3000:], out.stderr[-3000:])
        return 1
    r = json.loads(line[len("RESULT ") :])
    py_mb, jvm_mb = r["py_peak_kb"] / 1024, r["jvm_peak_kb"] / 1024
    print(
        f"one transaction of {r['rows']:,} row changes, window run {r['seconds']:.1f}s ({r['rows'] / r['seconds']:,.0f} rows/s)"
    )
    print(
        f"  peak RSS: python run process {py_mb:,.0f} MB (before the window {r['py_before_kb'] / 1024:,.0f} MB), "
        f"Spark JVM {jvm_mb:,.0f} MB, sum {py_mb + jvm_mb:,.0f} MB"
    )
    print(
        f"  target <= 1024 MB for the run process: {'MET' if py_mb <= 1024 else 'NOT MET'} (ratio {py_mb / 1024:.2f}); "
        f"JVM heap is capped by spark.driver.memory (2g default)"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
