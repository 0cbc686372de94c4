"""Memory: peak RSS of a window run that processes one large transaction.

Commits ONE transaction of ``--rows`` row inserts (default 1,000,000) into a ~10-column table, then
runs the binlog window containing it (``run_window``: read, decode, Arrow batches, Spark, Delta) in
a child process and reports the child's peak RSS (``ru_maxrss``) and the Spark JVM's peak
(``VmHWM``), against the target of 1 GB.

    python -m bench.memory --rows 1000000
"""

import argparse
import json
import os
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
from dagster_mysql_cdc.engine.stream import StreamOptions, run_window
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


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--rows", type=int, default=1_000_000)
    args = ap.parse_args(argv)
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
