"""The crash campaign under a real Dagster daemon: faults while a writer changes the source.

What a deployment lives through, with the README example's resources (following runs,
``spark_remote="auto"`` -> the Spark Connect server of ``make infra``) and compaction thresholds
lowered so tables compact during the campaign:

1. a captured database of three tables (``orders`` and ``items`` keyed, ``tags`` keyless) with
   seed rows, captured by ``dagster-daemon run -f bench/daemon_location.py`` (sensor on, SQLite
   instance, run monitoring as ``--run-monitoring`` says; off is Dagster's default);
2. a seeded writer: inserts, updates (each stamps a new ``op`` id), deletes and key changes on the
   keyed tables, inserts and deletes of duplicate values on the keyless one, ``--tps``
   transactions per second;
3. faults at seeded random times over ``--fault-seconds``: ``--kills`` SIGKILLs of run workers
   (``dagster api execute_run`` processes of this instance; a following run lives for minutes,
   so most kills land in one), ``--daemon-kills`` SIGKILLs of the daemon's process group (the
   daemon, its code server and what it started; restarted 5 s later), and ``--mariadb-restarts``
   restarts of MariaDB (``infra/mariadb.sh restart``) while a run reads;
4. after the last fault the writer stops; then the time until the lake's current state equals the
   source (every table, every column; polled every 2 s, up to ``--converge-timeout``) is the
   campaign's figure (target <= 60 s);
5. exactly once, proven independently of the capture: the source binlog from the position before
   the writer started is decoded with python-mysql-replication (no schema history, the server's
   column names: ``binlog_row_metadata=FULL``) into ``(table, op, key, op id)`` events; every such
   event must be in the tables' change logs exactly once (lost = binlog - lake, duplicated = lake
   events beyond the binlog's); the compactions that committed and failed, and every table the
   sensor's cursor lists as stopped, are printed.

    python -m bench.crash_campaign                       # README defaults, 10 + 3 + 1 faults
    python -m bench.crash_campaign --spark-compaction    # compactions by Spark tasks (state_compact_in_process_rows=0)
    python -m bench.crash_campaign --s3                  # the lake on SeaweedFS

Exits non-zero when a target is missed (not equal, lost or duplicated events, a stopped table,
a failed compaction, convergence slower than 60 s).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import subprocess
import tempfile
import threading
import time
import uuid
from collections import Counter
from pathlib import Path

import pymysql
from deltalake import DeltaTable
from pymysqlreplication import BinLogStreamReader
from pymysqlreplication.row_event import DeleteRowsEvent, UpdateRowsEvent, WriteRowsEvent

from dagster_mysql_cdc.dagster_integration.cursor import StreamCursor
from dagster_mysql_cdc.dagster_integration.status import find_sensor_cursor
from dagster_mysql_cdc.sink.read import read_current
from dagster_mysql_cdc.sink.state_rows import live_multiset
from dagster_mysql_cdc.sink.storage import StorageSettings

from ._common import MYSQL_HOST, MYSQL_PORT, ROOT_PASSWORD
from .daemon_latency import Daemon, load, root_conn, wait_for

ROOT = Path(__file__).resolve().parents[1]
TABLES = ("orders", "items", "tags")
KEYS = {"orders": ("id",), "items": ("order_id", "line"), "tags": None}
COLUMNS = {
    "orders": ("id", "op", "status", "amount"),
    "items": ("order_id", "line", "op", "qty"),
    "tags": ("tag", "n"),
}


def create_source(db: str, seed_rows: int) -> None:
    with root_conn() as conn, conn.cursor() as cur:
        cur.execute(f"CREATE DATABASE {db}")
        cur.execute(
            f"CREATE TABLE {db}.orders (id BIGINT PRIMARY KEY, op BIGINT NOT NULL, status VARCHAR(16), "
            "amount DECIMAL(12,2))"
        )
        cur.execute(
            f"CREATE TABLE {db}.items (order_id BIGINT, line INT, op BIGINT NOT NULL, qty INT, "
            "PRIMARY KEY (order_id, line))"
        )
        cur.execute(f"CREATE TABLE {db}.tags (tag VARCHAR(16), n INT)")
        rows = [(i, 0, "new", f"{i % 1000}.25") for i in range(1, seed_rows + 1)]
        cur.executemany(f"INSERT INTO {db}.orders VALUES (%s,%s,%s,%s)", rows)
        cur.executemany(
            f"INSERT INTO {db}.items VALUES (%s,%s,0,%s)", [(i, 1, i % 7) for i in range(1, seed_rows + 1)]
        )
        cur.executemany(
            f"INSERT INTO {db}.tags VALUES (%s,%s)", [(f"t{i % 50}", i % 3) for i in range(seed_rows // 4)]
        )


class Writer(threading.Thread):
    """Seeded random transactions on the three tables at ``tps`` per second."""

    def __init__(self, db: str, seed: int, tps: float, first_id: int):
        super().__init__(daemon=True)
        self.db, self.rng, self.tps = db, random.Random(seed), tps
        self.next_id, self.op = first_id, 0
        self.stop_event = threading.Event()
        self.transactions = 0
        self.errors = 0

    def _tx(self, cur) -> None:
        r, db = self.rng, self.db
        for _ in range(r.randint(1, 4)):
            self.op += 1
            k = r.random()
            if k < 0.3:
                self.next_id += 1
                cur.execute(
                    f"INSERT INTO {db}.orders VALUES (%s,%s,'new',%s)",
                    (self.next_id, self.op, r.randint(1, 10**6) / 100),
                )
                cur.execute(
                    f"INSERT INTO {db}.items VALUES (%s,1,%s,%s)", (self.next_id, self.op, r.randint(1, 9))
                )
            elif k < 0.6:
                cur.execute(
                    f"UPDATE {db}.orders SET op=%s, status=%s, amount=amount+1 WHERE id=%s",
                    (self.op, r.choice(["paid", "sent", "done"]), r.randint(1, self.next_id)),
                )
            elif k < 0.7:
                cur.execute(
                    f"UPDATE {db}.items SET op=%s, qty=qty+1 WHERE order_id=%s",
                    (self.op, r.randint(1, self.next_id)),
                )
            elif k < 0.77:
                cur.execute(f"DELETE FROM {db}.orders WHERE id=%s", (r.randint(1, self.next_id),))
            elif k < 0.82:
                self.next_id += 1  # a key change (delete + create at one position in the lake)
                cur.execute(
                    f"UPDATE {db}.orders SET id=%s, op=%s WHERE id=%s",
                    (self.next_id, self.op, r.randint(1, self.next_id - 1)),
                )
            elif k < 0.94:
                cur.execute(
                    f"INSERT INTO {db}.tags VALUES (%s,%s)", (f"t{r.randint(0, 60)}", r.randint(0, 2))
                )
            else:
                cur.execute(f"DELETE FROM {db}.tags WHERE tag=%s LIMIT 1", (f"t{r.randint(0, 60)}",))

    def run(self) -> None:
        conn = None
        started = time.monotonic()
        while not self.stop_event.is_set():
            if self.transactions >= self.tps * (time.monotonic() - started):
                time.sleep(0.005)
                continue
            try:
                if conn is None:
                    conn = root_conn(autocommit=False)
                state = (self.rng.getstate(), self.next_id, self.op)
                with conn.cursor() as cur:
                    self._tx(cur)
                conn.commit()
                self.transactions += 1
            except pymysql.err.MySQLError:  # MariaDB restarting: the transaction is redone
                self.errors += 1
                self.rng.setstate(state[0])
                self.next_id, self.op = state[1], state[2]
                try:
                    if conn is not None:
                        conn.close()
                except Exception:
                    pass
                conn = None
                time.sleep(0.5)
        if conn is not None:
            conn.close()


def run_workers(home: str) -> list[int]:
    """Pids of the run worker processes of the instance at ``home``: the code server starts each run
    in a ``multiprocessing`` child (``spawn_main``; ``dagster api execute_run`` with other launchers)."""
    pids = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            cmd = (d / "cmdline").read_bytes()
            if b"execute_run" not in cmd and b"spawn_main" not in cmd:
                continue
            if f"DAGSTER_HOME={home}".encode() in (d / "environ").read_bytes().split(b"\0"):
                pids.append(int(d.name))
        except OSError:
            continue
    return pids


def source_rows(db: str, table: str) -> Counter:
    cols = ", ".join(COLUMNS[table])
    with root_conn() as conn, conn.cursor() as cur:
        cur.execute(f"SELECT {cols} FROM {db}.{table}")
        return Counter(tuple(str(v) for v in row) for row in cur.fetchall())


def lake_rows(storage: StorageSettings, uri: str, table: str) -> Counter | None:
    try:
        current = read_current(storage, uri)
    except Exception:
        return None
    if current is None:
        return None
    live = live_multiset(current).select(list(COLUMNS[table])).to_pylist()
    return Counter(tuple(str(r[c]) for c in COLUMNS[table]) for r in live)


def binlog_events(db: str, start: tuple[str, int], end: tuple[str, int]) -> Counter:
    """The row events of ``db`` between ``start`` and ``end``, decoded straight from the server:
    ``(table, op, key, op id)`` (an update's key change: a ``d`` of the old key and a ``c`` of the new)."""
    out: Counter = Counter()
    stream = BinLogStreamReader(
        connection_settings={"host": MYSQL_HOST, "port": MYSQL_PORT, "user": "root", "passwd": ROOT_PASSWORD},
        server_id=5899,
        log_file=start[0],
        log_pos=start[1],
        resume_stream=True,
        blocking=False,
        only_schemas=[db],
        only_events=[WriteRowsEvent, UpdateRowsEvent, DeleteRowsEvent],
    )
    try:
        for ev in stream:
            if (stream.log_file, stream.log_pos) > end and stream.log_file >= end[0]:
                break
            for row in ev.rows:
                for op, image in event_images(ev, row):
                    out[(ev.table, op) + identity(ev.table, image)] += 1
    finally:
        stream.close()
    return out


def event_images(ev, row) -> list[tuple[str, dict]]:
    if isinstance(ev, WriteRowsEvent):
        return [("c", row["values"])]
    if isinstance(ev, DeleteRowsEvent):
        return [("d", row["values"])]
    before, after = row["before_values"], row["after_values"]
    key = KEYS[ev.table]
    if key and any(before[k] != after[k] for k in key):
        return [("d", before), ("c", after)]
    if key is None:  # a keyless update is the old value's -1 and the new value's +1
        return [("u", after)]
    return [("u", after)]


def identity(table: str, image: dict) -> tuple:
    if KEYS[table] is None:
        return (str(image["tag"]), str(image["n"]))
    return tuple(str(image[k]) for k in KEYS[table]) + (str(image.get("op")),)


def lake_events(storage: StorageSettings, uri: str, table: str, since: tuple[str, int]) -> Counter:
    out: Counter = Counter()
    t = DeltaTable(uri, storage_options=storage.delta_storage_options()).to_pyarrow_table(
        columns=["op", "before", "after", "source"]
    )
    for op, before, after, source in zip(
        *(t.column(c).to_pylist() for c in ("op", "before", "after", "source"))
    ):
        if op not in ("c", "u", "d") or (source["file"], source["pos"]) < since:
            continue
        image = before if op == "d" else after
        out[(table, op) + identity(table, image)] += 1
    return out


def compaction_failures(home: str, log_path: Path) -> list[str]:
    """The lines of the runs' compute logs (under ``home``) and the daemon's log that report a
    failed compaction (``compaction of ... failed``)."""
    out = []
    files = [p for p in Path(home).rglob("*") if p.is_file() and p.suffix in (".err", ".out", ".log")]
    for f in files + [log_path]:
        for line in f.read_text(errors="replace").splitlines():
            if "compaction of" in line and "failed" in line:
                out.append(line.strip())
    return out


def master_status() -> tuple[str, int]:
    with root_conn() as conn, conn.cursor() as cur:
        cur.execute("SHOW MASTER STATUS")
        f, p = cur.fetchone()[:2]
        return f, int(p)


def restart_mariadb() -> None:
    subprocess.run(["bash", "infra/mariadb.sh", "restart"], cwd=ROOT, check=True, capture_output=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seed", type=int, default=38)
    ap.add_argument("--seed-rows", type=int, default=5000)
    ap.add_argument("--tps", type=float, default=20, help="writer transactions per second")
    ap.add_argument("--fault-seconds", type=float, default=300, help="the span the faults are spread over")
    ap.add_argument("--kills", type=int, default=10, help="SIGKILLs of run workers")
    ap.add_argument("--daemon-kills", type=int, default=3)
    ap.add_argument("--mariadb-restarts", type=int, default=1)
    ap.add_argument("--interval", type=int, default=30, help="sensor minimum_interval_seconds (README: 30)")
    ap.add_argument(
        "--run-monitoring", action="store_true", help="enable Dagster's run monitoring (poll 5 s)"
    )
    ap.add_argument("--spark-compaction", action="store_true", help="state_compact_in_process_rows=0")
    ap.add_argument("--s3", action="store_true", help="the lake on the S3 endpoint of infra/env.sh")
    ap.add_argument("--converge-timeout", type=float, default=900)
    ap.add_argument("--log", default=None, help="daemon log file (default: a temporary file)")
    args = ap.parse_args(argv)

    rng = random.Random(args.seed)
    db = f"bench_cc_{uuid.uuid4().hex[:6]}"
    create_source(db, args.seed_rows)
    opts: dict = {
        "state_compact_min_tail_rows": 50,
        "state_compact_tail_fraction": 0.01,
        "state_compact_max_age_seconds": 60,
    }
    if args.spark_compaction:
        opts["state_compact_in_process_rows"] = 0
    if args.s3:
        lake = f"s3://{os.environ.get('CDC_S3_BUCKET', 'lake')}/{db}"
        opts.update(
            s3_endpoint_url=os.environ.get("CDC_S3_ENDPOINT", "http://127.0.0.1:8333"),
            s3_access_key_id=os.environ.get("AWS_ACCESS_KEY_ID", "cdc"),
            s3_secret_access_key=os.environ.get("AWS_SECRET_ACCESS_KEY", "cdc-secret"),
        )
        storage = StorageSettings(
            base_uri=lake,
            s3_endpoint_url=opts["s3_endpoint_url"],
            s3_access_key_id=opts["s3_access_key_id"],
            s3_secret_access_key=opts["s3_secret_access_key"],
        )
    else:
        lake = tempfile.mkdtemp(prefix="bench-cc-lake-")
        storage = StorageSettings(base_uri=lake)
    log_path = Path(args.log) if args.log else Path(tempfile.mkstemp(prefix="bench-cc-", suffix=".log")[1])
    monitoring = (
        "run_monitoring:\n  enabled: true\n  poll_interval_seconds: 5\n" if args.run_monitoring else ""
    )
    print(
        f"crash campaign: db {db}, lake {lake}, README resources (spark_remote auto -> "
        f"{os.environ.get('CDC_SPARK_REMOTE') or 'sc://127.0.0.1:15002'}, following runs), sensor every "
        f"{args.interval}s, run monitoring {'on' if args.run_monitoring else 'off (default)'}, lake options {opts}, "
        f"daemon log {log_path}, {load()}",
        flush=True,
    )
    daemon = Daemon(
        db,
        lake,
        args.interval,
        os.environ.get("CDC_SPARK_REMOTE", ""),
        log_path,
        300,
        readme=True,
        tables=",".join(TABLES),
        storage_yaml=monitoring,
        extra_env={"BENCH_DAEMON_LAKE_OPTS": json.dumps(opts)},
    )
    uri = {t: f"{lake}/{db}/{db}/{t}" for t in TABLES}
    failed = []
    try:
        t0 = time.monotonic()
        if not wait_for(
            lambda: all(lake_rows(storage, uri[t] + "/state", t) is not None for t in TABLES), 600, 2
        ):
            raise SystemExit(f"the initial snapshot did not land within 600 s; see {log_path}")
        print(f"initial snapshot visible after {time.monotonic() - t0:.1f}s ({load()})", flush=True)
        since = master_status()
        writer = Writer(db, rng.randrange(2**31), args.tps, args.seed_rows)
        writer.start()
        faults = sorted(
            [(rng.uniform(10, args.fault_seconds), "kill") for _ in range(args.kills)]
            + [(rng.uniform(10, args.fault_seconds), "daemon") for _ in range(args.daemon_kills)]
            + [(rng.uniform(10, args.fault_seconds), "mariadb") for _ in range(args.mariadb_restarts)]
        )
        start = time.monotonic()
        done = Counter()
        for at, kind in faults:
            while time.monotonic() - start < at:
                time.sleep(0.2)
            when = f"{time.monotonic() - start:6.1f}s"
            if kind == "kill":
                pids = []
                # wait (up to 60 s) for a run worker to kill
                wait_for(lambda: bool(run_workers(daemon.home)), 60, 0.5)
                pids = run_workers(daemon.home)
                for pid in pids:
                    try:
                        os.kill(pid, signal.SIGKILL)
                    except ProcessLookupError:
                        pass
                print(f"  {when} SIGKILL run worker(s) {pids or 'none running'} ({load()})", flush=True)
                done["kill" if pids else "kill (none running)"] += 1
            elif kind == "daemon":
                daemon.kill()
                print(f"  {when} SIGKILL daemon process group; restart in 5 s", flush=True)
                time.sleep(5)
                daemon.start()
                done["daemon"] += 1
            else:
                wait_for(lambda: bool(run_workers(daemon.home)), 60, 0.5)
                print(f"  {when} MariaDB restart (run workers {run_workers(daemon.home)})", flush=True)
                restart_mariadb()
                done["mariadb"] += 1
        last_fault = time.monotonic()
        writer.stop_event.set()
        writer.join()
        until = master_status()
        print(
            f"last fault at {last_fault - start:.0f}s; writer stopped: {writer.transactions} transactions "
            f"({writer.errors} redone after a connection error); faults {dict(done)}",
            flush=True,
        )
        src = {t: source_rows(db, t) for t in TABLES}
        equal_after = None
        while time.monotonic() - last_fault < args.converge_timeout:
            if all(lake_rows(storage, uri[t] + "/state", t) == src[t] for t in TABLES):
                equal_after = time.monotonic() - last_fault
                break
            time.sleep(2)
        print(
            f"lake == source {f'{equal_after:.1f}s' if equal_after is not None else 'NEVER (timeout)'} after the last fault ({load()})",
            flush=True,
        )
        if equal_after is None:
            failed.append("not equal")
            for t in TABLES:
                lk = lake_rows(storage, uri[t] + "/state", t) or Counter()
                print(f"  {t}: lake - source {len(lk - src[t])} rows, source - lake {len(src[t] - lk)} rows")
        elif equal_after > 60:
            failed.append("convergence > 60 s")
        # exactly once
        expected = binlog_events(db, since, until)
        got: Counter = Counter()
        for t in TABLES:
            got += lake_events(storage, uri[t] + "/changelog", t, since)
        lost, dup = expected - got, got - expected
        print(
            f"binlog events {sum(expected.values())}, in the change logs {sum(got.values())}: "
            f"lost {sum(lost.values())}, duplicated {sum(dup.values())}"
        )
        if lost or dup:
            failed.append("lost/duplicated events")
            print(f"  lost e.g. {list(lost)[:5]}\n  duplicated e.g. {list(dup)[:5]}")
        # compactions and stopped tables
        for t in TABLES:
            hist = DeltaTable(uri[t] + "/state", storage_options=storage.delta_storage_options()).history()
            ops = Counter(h.get("operation", "?") for h in hist)
            print(f"  {t}: state table commits by operation {dict(ops)}")
        failures = compaction_failures(daemon.home, log_path)
        print(f"failed compactions in the runs' logs: {len(failures)}")
        for m in failures[:5]:
            print(f"  {m[:300]}")
        cursor = StreamCursor.parse(find_sensor_cursor(daemon.instance, f"{db}_cdc_binlog_sensor"))
        stopped = cursor.stopped_tables()
        print(f"stopped tables: {sorted(stopped) or 'none'}")
        if failures:
            failed.append("compaction failures")
        if stopped:
            failed.append("stopped tables")
    finally:
        daemon.stop()
    print(f"== crash campaign: {'PASSED' if not failed else 'FAILED: ' + ', '.join(failed)} ==")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
