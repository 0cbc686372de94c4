"""State cost (issue 27): a window costs what it changes, not what the table holds.

    python -m bench.state_cost                                   # 20,000 vs 20,000,000 rows
    python -m bench.state_cost --large-rows 2000000 --windows 10  # quicker
    python -m bench.state_cost --phase retention                 # only the storage phase

Phases (one run, side by side on the same machine):

``windows``
    A 20,000-row and a ``--large-rows`` table of the 10-column mixed-type bench table
    (``_common.TABLE_DDL``), snapshotted into a local lake with the library's defaults. Then
    ``--windows`` times, alternating the two tables: one transaction of ``--changes`` row changes
    (50 % inserts, 30 % updates, 20 % deletes of random live keys), ``run_window`` over it with a
    ``LakeWriter`` at the library's defaults (merge-on-read, compaction when due). Printed per
    table: the mean window, the bytes the window wrote to the table's folder (new files, the
    compaction's included) and their ratio to the bytes of the changed rows (changed rows x the
    state's average row size). Targets: large/small mean window <= 1.5; bytes written per window
    <= 20 x the changed rows.
``compaction``
    One compaction of the large table (by Spark tasks: above ``in_process_rows``): seconds and
    bytes; and per hour at 1,000 changes/s with the default ``tail_fraction``.
``read``
    A tail of ``--tail-rows`` changes on the large table (one window of random updates), then the
    current read (``read_current``: compacted state + tail) against a plain read of the compacted
    state, interleaved, best of ``--repeat``, in a child process. Target: <= 2x.
``retention``
    ``--retention-windows`` windows of ``--retention-changes`` changes on a 20,000-row table with a
    retention of 0 hours and a vacuum at most every minute (the library's settings with the clock
    shortened), then files on disk against the live files' bytes. Target: <= 2x.

The peak RSS of the process (``ru_maxrss``: the snapshot, the windows and the in-process
compactions of the small table run here, as in a run process) is printed at the end. Target:
<= 1.5 GB. Results: docs/benchmarks.md, "State cost".
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import subprocess
import sys
import time

from . import _common as C

SERVER = "bench"
SERVER_ID = 5731


def _dir_bytes(path: str) -> int:
    total = 0
    for root, _dirs, files in os.walk(path):
        for f in files:
            try:
                total += os.path.getsize(os.path.join(root, f))
            except OSError:
                pass
    return total


def _files(path: str) -> dict[str, int]:
    out = {}
    for root, _dirs, files in os.walk(path):
        for f in files:
            if f.endswith(".parquet"):
                p = os.path.join(root, f)
                try:
                    out[p] = os.path.getsize(p)
                except OSError:
                    pass
    return out


def _live_bytes(uri: str) -> int:
    from deltalake import DeltaTable

    if not os.path.exists(os.path.join(uri, "_delta_log")):
        return 0
    dt = DeltaTable(uri)
    return sum(int(x) for x in dt.get_add_actions(flatten=True).column("size_bytes").to_pylist())


class Workload:
    """Random transactions on one bench table (50 % inserts, 30 % updates, 20 % deletes)."""

    def __init__(self, conn, db: str, table: str, rows: int, seed: int):
        self.conn, self.db, self.table = conn, db, table
        self.rng = random.Random(seed)
        self.rows = rows
        self.next_id = rows + 1
        self.deleted: set[int] = set()

    def fill(self, chunk: int = 200_000) -> None:
        with self.conn.cursor() as cur:
            cur.execute(C.TABLE_DDL.format(db=self.db, table=self.table))
            for a in range(1, self.rows + 1, chunk):
                cur.execute(C.insert_select(self.db, self.table, a, min(a + chunk - 1, self.rows)))

    def _random_live(self, n: int) -> list[int]:
        out: set[int] = set()
        while len(out) < n:
            k = self.rng.randint(1, self.next_id - 1)
            if k not in self.deleted:
                out.add(k)
        return sorted(out)

    def transaction(self, changes: int) -> int:
        ins, upd = changes // 2, changes * 3 // 10
        dele = changes - ins - upd
        db, t = self.db, self.table
        with self.conn.cursor() as cur:
            cur.execute("BEGIN")
            cur.execute(C.insert_select(db, t, self.next_id, self.next_id + ins - 1))
            self.next_id += ins
            keys = self._random_live(upd + dele)
            u, d = keys[:upd], keys[upd:]
            cur.execute(
                f"UPDATE {db}.{t} SET qty = qty + 1, name = CONCAT(COALESCE(name, ''), 'u') WHERE id IN ({','.join(map(str, u))})"
            )
            cur.execute(f"DELETE FROM {db}.{t} WHERE id IN ({','.join(map(str, d))})")
            self.deleted.update(d)
            cur.execute("COMMIT")
        return changes

    def updates(self, n: int, chunk: int = 50_000) -> None:
        """``n`` random updates in one transaction (a tail of ``n`` changes)."""
        keys = self._random_live(n)
        with self.conn.cursor() as cur:
            cur.execute("BEGIN")
            for i in range(0, len(keys), chunk):
                part = keys[i : i + chunk]
                cur.execute(
                    f"UPDATE {self.db}.{self.table} SET qty = qty + 7 WHERE id IN ({','.join(map(str, part))})"
                )
            cur.execute("COMMIT")


def _window(settings, info, writer, history, db: str, start):
    from dagster_mysql_cdc.engine.stream import StreamOptions
    from dagster_mysql_cdc.engine.window_run import run_window
    from dagster_mysql_cdc.source.connection import connect, current_position
    from dagster_mysql_cdc.source.filters import TableFilter
    from dagster_mysql_cdc.source.types import TypeOptions

    conn = connect(settings)
    try:
        end = current_position(conn, info)
    finally:
        conn.close()
    t0 = time.perf_counter()
    res = run_window(
        settings,
        info,
        replica_server_id=SERVER_ID,
        start=start,
        end=end,
        writer=writer,
        history=history,
        table_filter=TableFilter(database_include_list=(db,)),
        type_options=TypeOptions(),
        options=StreamOptions(),
        server_name=SERVER,
    )
    s = time.perf_counter() - t0
    nxt = end if (res.end.file, res.end.pos) == (end.file, end.pos) else res.end
    return s, res, nxt


def run_windows(args: argparse.Namespace, report: dict) -> None:
    from dagster_mysql_cdc.engine.initial_snapshot import run_snapshot
    from dagster_mysql_cdc.sink.lake import LakeWriter
    from dagster_mysql_cdc.sink.schema_history import SchemaHistory
    from dagster_mysql_cdc.sink.storage import StorageSettings
    from dagster_mysql_cdc.source.connection import connect, current_position, server_info
    from dagster_mysql_cdc.source.snapshot import SnapshotOptions
    from dagster_mysql_cdc.source.types import TypeOptions

    spark = C.get_spark()
    settings = C.cdc_settings()
    with C.scratch_database("state") as (root, db), C.scratch_dir("bench-state-", args.keep) as tmp:
        lake = os.path.join(tmp, "lake")
        storage = StorageSettings(base_uri=lake)
        tables = {
            "small": Workload(root, db, "small", args.small_rows, 1),
            "large": Workload(root, db, "large", args.large_rows, 2),
        }
        t0 = time.perf_counter()
        for w in tables.values():
            w.fill()
        print(
            f"[data] {args.small_rows:,} + {args.large_rows:,} rows inserted in {time.perf_counter() - t0:.0f}s",
            flush=True,
        )
        writer = LakeWriter(spark, storage, SERVER)  # the library's defaults
        history = SchemaHistory(storage, SERVER)
        t0 = time.perf_counter()
        list(
            run_snapshot(
                settings,
                [(db, "small"), (db, "large")],
                writer,
                type_options=TypeOptions(),
                options=SnapshotOptions(locking_mode="none"),
                server_name=SERVER,
                history=history,
            )
        )
        print(f"[snapshot] both tables in {time.perf_counter() - t0:.0f}s", flush=True)
        conn = connect(settings)
        info = server_info(conn)
        start = current_position(conn, info)
        conn.close()
        paths = {k: writer.paths(db, k) for k in tables}
        row_bytes = {}
        for k, p in paths.items():
            st = _live_bytes(p.state)
            rows = tables[k].rows
            row_bytes[k] = st / max(1, rows)
        print("[state] bytes per row: " + ", ".join(f"{k} {v:.1f}" for k, v in row_bytes.items()), flush=True)
        per: dict[str, dict[str, list]] = {k: {"seconds": [], "bytes": [], "compactions": []} for k in tables}
        for i in range(args.windows):
            for k in ("small", "large") if i % 2 == 0 else ("large", "small"):
                before = _files(os.path.dirname(paths[k].state))
                tables[k].transaction(args.changes)
                s, res, start = _window(settings, info, writer, history, db, start)
                after = _files(os.path.dirname(paths[k].state))
                written = sum(v for f, v in after.items() if f not in before)
                tw = res.tables.get((db, k))
                comp = (tw.extra.get("compaction") or {}) if tw is not None else {}
                per[k]["seconds"].append(s)
                per[k]["bytes"].append(written)
                per[k]["compactions"].append(bool(comp.get("mode")))
            print(
                f"  window {i + 1:>3}: small {per['small']['seconds'][-1]:.2f}s {per['small']['bytes'][-1] / 1e6:.2f} MB | "
                f"large {per['large']['seconds'][-1]:.2f}s {per['large']['bytes'][-1] / 1e6:.2f} MB",
                flush=True,
            )
        out = {}
        for k in tables:
            n = len(per[k]["seconds"])
            changed = args.changes * row_bytes[k]
            mean_s = sum(per[k]["seconds"]) / n
            mean_b = sum(per[k]["bytes"]) / n
            out[k] = {
                "rows": tables[k].rows,
                "mean_window_s": round(mean_s, 3),
                "mean_bytes_written": int(mean_b),
                "bytes_ratio_to_changed_rows": round(mean_b / changed, 2),
                "compactions": sum(per[k]["compactions"]),
            }
        out["large_over_small_window"] = round(
            out["large"]["mean_window_s"] / out["small"]["mean_window_s"], 2
        )
        report["windows"] = out
        print(json.dumps(out, indent=1), flush=True)

        # -- compaction of the large table (Spark tasks above in_process_rows) --------------------
        before = _files(os.path.dirname(paths["large"].state))
        t0 = time.perf_counter()
        m = writer.compact_if_due(paths["large"], ("id",), force=True)
        comp_s = time.perf_counter() - t0
        after = _files(os.path.dirname(paths["large"].state))
        comp_bytes = sum(v for f, v in after.items() if f not in before)
        per_hour = 3600 * 1000 / (writer.compaction.tail_fraction * args.large_rows)
        report["compaction"] = {
            "mode": m.get("mode"),
            "seconds": round(comp_s, 1),
            "bytes_written": comp_bytes,
            "compactions_per_hour_at_1000_changes_per_s": round(per_hour, 2),
            "seconds_per_hour": round(per_hour * comp_s, 1),
            "bytes_per_hour": int(per_hour * comp_bytes),
        }
        print("[compaction]", json.dumps(report["compaction"]), flush=True)
        # the lake's live rows are compared with the source in the read child (a read of the whole
        # state: not what a run holds, so not in this process's peak RSS)
        report["peak_rss_mb_windows"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024

        # -- a tail of --tail-rows changes, then the current read vs a plain read ------------------
        tables["large"].updates(args.tail_rows)
        s, res, start = _window(settings, info, writer, history, db, start)
        print(f"[tail] {args.tail_rows:,} updates in one window: {s:.1f}s", flush=True)
        report["peak_rss_mb_tail_window"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024
        with root.cursor() as c:
            c.execute(f"SELECT COUNT(*) FROM {db}.large")
            src = c.fetchone()[0]
        child = subprocess.run(
            [
                sys.executable,
                "-m",
                "bench.state_cost",
                "--phase",
                "read-child",
                "--lake",
                lake,
                "--db",
                db,
                "--repeat",
                str(args.repeat),
                "--source-rows",
                str(src),
            ],
            capture_output=True,
            text=True,
        )
        print(child.stdout[-3000:], child.stderr[-2000:] if child.returncode else "", flush=True)
        for line in child.stdout.splitlines():
            if line.startswith("READ "):
                report["read"] = json.loads(line[5:])
                report["correct_large"] = report["read"].get("live_rows") == src


def read_child(args: argparse.Namespace) -> None:
    """Current read vs plain read of the compacted state (in its own process: memory)."""
    import pyarrow as pa

    from dagster_mysql_cdc.sink.data_files import read_files
    from dagster_mysql_cdc.sink.delta import open_table
    from dagster_mysql_cdc.sink.layout import LakeLayout
    from dagster_mysql_cdc.sink.read import read_current
    from dagster_mysql_cdc.sink.storage import StorageSettings

    storage = StorageSettings(base_uri=args.lake)
    paths = LakeLayout(storage, SERVER).table(args.db, "large")
    dt = open_table(storage, paths.state)
    files = pa.table(dt.get_add_actions(flatten=True)).column("path").to_pylist()
    schema = pa.schema(dt.schema().to_arrow())
    tail_dt = open_table(storage, paths.tail)
    tail_sum = (
        pa.compute.sum(pa.table(tail_dt.get_add_actions(flatten=True)).column("num_records")).as_py()
        if tail_dt
        else 0
    )
    tail_rows = int(tail_sum or 0)

    def plain():
        return read_files(storage, paths.state, files, schema).num_rows

    live_rows = []

    def current():
        t = read_current(storage, paths)
        live_rows.append(
            t.num_rows - int(pa.compute.sum(t.column("__deleted").cast(pa.int64())).as_py() or 0)
        )
        return t.num_rows

    times = {"plain": [], "current": []}
    for rep in range(args.repeat + 1):
        for name, fn in (
            (("plain", plain), ("current", current))
            if rep % 2 == 0
            else (("current", current), ("plain", plain))
        ):
            t0 = time.perf_counter()
            n = fn()
            dt_s = time.perf_counter() - t0
            if rep:
                times[name].append(dt_s)
            print(f"  {name}: {n:,} rows in {dt_s:.2f}s", flush=True)
    best = {k: min(v) for k, v in times.items()}
    out = {
        "state_rows": n,
        "tail_rows": tail_rows,
        "plain_read_s": round(best["plain"], 2),
        "current_read_s": round(best["current"], 2),
        "ratio": round(best["current"] / best["plain"], 2),
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024,
        "live_rows": live_rows[-1],
    }
    print(f"[check] large: lake live rows {live_rows[-1]:,} == source {args.source_rows:,}", flush=True)
    print("READ " + json.dumps(out), flush=True)


def run_retention(args: argparse.Namespace, report: dict) -> None:
    from dagster_mysql_cdc.engine.initial_snapshot import run_snapshot
    from dagster_mysql_cdc.sink.lake import LakeWriter
    from dagster_mysql_cdc.sink.retention import RetentionPolicy, vacuum_if_due
    from dagster_mysql_cdc.sink.schema_history import SchemaHistory
    from dagster_mysql_cdc.sink.storage import StorageSettings
    from dagster_mysql_cdc.source.connection import connect, current_position, server_info
    from dagster_mysql_cdc.source.snapshot import SnapshotOptions
    from dagster_mysql_cdc.source.types import TypeOptions

    spark = C.get_spark()
    settings = C.cdc_settings()
    with C.scratch_database("retention") as (root, db), C.scratch_dir("bench-retention-", args.keep) as tmp:
        storage = StorageSettings(base_uri=os.path.join(tmp, "lake"))
        wl = Workload(root, db, "small", args.small_rows, 3)
        wl.fill()
        # the library's policies with the clock shortened: retention 0 h, a vacuum at most every minute
        retention = RetentionPolicy(retention_hours=0, interval_hours=1 / 60)
        writer = LakeWriter(spark, storage, SERVER, retention=retention)
        history = SchemaHistory(storage, SERVER)
        list(
            run_snapshot(
                settings,
                [(db, "small")],
                writer,
                type_options=TypeOptions(),
                options=SnapshotOptions(locking_mode="none"),
                server_name=SERVER,
                history=history,
            )
        )
        conn = connect(settings)
        info = server_info(conn)
        start = current_position(conn, info)
        conn.close()
        paths = writer.paths(db, "small")
        t0 = time.perf_counter()
        for i in range(args.retention_windows):
            wl.transaction(args.retention_changes)
            _s, _res, start = _window(settings, info, writer, history, db, start)
            if (i + 1) % 100 == 0:
                d = os.path.dirname(paths.state)
                print(
                    f"  [{i + 1:>5}] {_dir_bytes(d) / 1e6:.2f} MB on disk, {time.perf_counter() - t0:.0f}s",
                    flush=True,
                )
        for uri in (paths.changelog, paths.state, paths.tail):  # the last vacuum, as the next window would
            vacuum_if_due(storage, uri, RetentionPolicy(retention_hours=0, interval_hours=1e-9))
        d = os.path.dirname(paths.state)
        disk = _dir_bytes(d)
        live = sum(_live_bytes(u) for u in (paths.changelog, paths.state, paths.tail))
        report["retention"] = {
            "windows": args.retention_windows,
            "changes_per_window": args.retention_changes,
            "disk_bytes": disk,
            "live_bytes": live,
            "ratio": round(disk / max(1, live), 2),
        }
        print("[retention]", json.dumps(report["retention"]), flush=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--phase", choices=["all", "windows", "retention", "read-child"], default="all")
    ap.add_argument("--small-rows", type=int, default=20_000)
    ap.add_argument("--large-rows", type=int, default=20_000_000)
    ap.add_argument("--windows", type=int, default=20)
    ap.add_argument("--changes", type=int, default=1000)
    ap.add_argument("--tail-rows", type=int, default=1_000_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--source-rows", type=int, default=-1, help=argparse.SUPPRESS)
    ap.add_argument("--retention-windows", type=int, default=1000)
    ap.add_argument("--retention-changes", type=int, default=10)
    ap.add_argument("--keep", action="store_true")
    ap.add_argument("--lake")
    ap.add_argument("--db")
    args = ap.parse_args(argv)
    if args.phase == "read-child":
        read_child(args)
        return 0
    report: dict = {"args": vars(args)}
    if args.phase in ("all", "windows"):
        run_windows(args, report)
    if args.phase in ("all", "retention"):
        run_retention(args, report)
    report["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024
    print("\n### state cost\n" + json.dumps(report, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
