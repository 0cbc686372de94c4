"""Small files: 1,000 small stream windows through ``run_window``; file counts stay bounded and a
full read of the state table is not slower than 2x a freshly written copy (issue 5, benchmark 5).

    python -m bench.small_files                  # 1,000 windows of 10 row changes each
    python -m bench.small_files --quick          # 150 windows (compaction runs twice)
    python -m bench.small_files --batches 500 --rows-per-batch 20 --keep
    python -m bench.small_files --reads-from /tmp/bench-small-XXXX/lake --repeat 25   # reads only

Set-up (not timed): a scratch database with the 10-column mixed-type table of the other
benchmarks (``_common.TABLE_DDL``), ``--initial-rows`` rows, and an initial snapshot of it into a
local lake (``run_snapshot``), as after a real first run.

Then, ``--batches`` times, as the binlog sensor drives it: one transaction of ``--rows-per-batch``
row changes (50 % inserts, some of them re-inserting deleted keys, 30 % updates, 20 % deletes of
random live keys) is committed, the binlog position is read, and ``run_window`` is run over
``[previous end, this end)`` with a ``LakeWriter`` at the library's defaults (compaction included:
``compact_min_files=64``). Every ``--sample-every`` windows the state table's and the change log's
live files (``DeltaTable.file_uris()``), Parquet files on disk (live + removed, not vacuumed),
Delta log commits and checkpoints are recorded, and the state is read once (trend).

At the end:

* correctness: the state's live rows equal the source table's rows (``SELECT *`` converted with
  the library's own Debezium mapping), row for row, and every deleted key is a tombstone;
* a freshly written copy of each table (its current rows, one ``write_deltalake``) is read side by
  side with the table, interleaved, best of ``--repeat``, with: delta-rs
  ``DeltaTable(uri).to_pyarrow_table()`` (open = log replay + read), delta-rs open alone, a
  pyarrow dataset over the live file list, duckdb ``read_parquet`` over the live file list, and
  Spark ``read.format("delta")`` when the Delta Spark jars are on the classpath (they are not by
  default). The issue's target: state-table read time <= 2x the fresh copy's;
* the state as a reader saw it just before its last checkpoint (a copy with the log cut there and
  that moment's ``_last_checkpoint`` hint: the longest JSON tail to replay) vs a fresh copy of
  the same rows;
* diagnosis on copies of the state table: checkpoint + 9 commits (the worst case with
  ``delta.checkpointInterval=10``), ``create_checkpoint()``, ``optimize.compact()``, a checkpoint
  without remove tombstones, and ``cleanup_metadata()``: log replay vs small-file costs.

Results and analysis: docs/benchmarks.md, "Small files".
"""

from __future__ import annotations

import argparse
import glob
import json
import logging
import os
import random
import shutil
import sys
import time

from . import _common as C

SERVER = "bench"
TABLE = "small"
SERVER_ID = C.SERVER_IDS.get("small_files", 5708)
QUICK_BATCHES = 150
TARGET_RATIO = 2.0


# -- the source workload ---------------------------------------------------------------------------
class Workload:
    """Small transactions on the bench table; remembers live and deleted keys (deterministic)."""

    def __init__(self, conn, db: str, initial_rows: int, rows_per_batch: int, seed: int = 5):
        self.conn, self.db = conn, db
        self.rng = random.Random(seed)
        self.live: set[int] = set(range(1, initial_rows + 1))
        self.live_list: list[int] = list(self.live)  # sampled; rebuilt lazily
        self.deleted: set[int] = set()
        self.next_id = initial_rows + 1
        self.k = rows_per_batch
        self.done = {"c": 0, "u": 0, "d": 0}

    def fill(self, n: int, chunk: int = 50_000) -> None:
        with self.conn.cursor() as cur:
            cur.execute(C.TABLE_DDL.format(db=self.db, table=TABLE))
            for a in range(1, n + 1, chunk):
                cur.execute(C.insert_select(self.db, TABLE, a, min(a + chunk - 1, n)))

    def _pick(self, n: int) -> list[int]:
        if len(self.live_list) != len(self.live):
            self.live_list = sorted(self.live)
        return self.rng.sample(self.live_list, min(n, len(self.live_list)))

    def one_transaction(self) -> dict[str, int]:
        """One committed transaction of ~``rows_per_batch`` changes."""
        n_ins = max(1, round(self.k * 0.5))
        n_upd = round(self.k * 0.3)
        n_del = max(0, self.k - n_ins - n_upd)
        db, t = self.db, TABLE
        ops = {"c": 0, "u": 0, "d": 0}
        with self.conn.cursor() as cur:
            cur.execute("BEGIN")
            # re-insert one deleted key now and then (a tombstone comes back to life)
            if self.deleted and self.rng.random() < 0.2:
                rid = self.rng.choice(sorted(self.deleted))
                cur.execute(C.insert_select(db, t, rid, rid))
                ops["c"] += cur.rowcount
                self.deleted.discard(rid)
                self.live.add(rid)
                n_ins -= 1
            if n_ins > 0:
                a, b = self.next_id, self.next_id + n_ins - 1
                cur.execute(C.insert_select(db, t, a, b))
                ops["c"] += cur.rowcount
                self.live.update(range(a, b + 1))
                self.next_id = b + 1
            upd = self._pick(n_upd)
            if upd:
                cur.execute(
                    f"UPDATE {db}.{t} SET qty = qty + 1, price = price + 1.00, "
                    f"name = IF(id % 5 = 0, NULL, CONCAT(COALESCE(name, ''), 'u')), "
                    f"updated = updated + INTERVAL 1 SECOND, score = IF(score IS NULL, 0.5, score * 1.5), "
                    f"doc = JSON_SET(COALESCE(doc, '{{}}'), '$.u', id), flag = (flag + 1) % 3 "
                    f"WHERE id IN ({','.join(map(str, upd))})"
                )
                ops["u"] += cur.rowcount
            dele = self._pick(n_del)
            if dele:
                cur.execute(f"DELETE FROM {db}.{t} WHERE id IN ({','.join(map(str, dele))})")
                ops["d"] += cur.rowcount
                self.live.difference_update(dele)
                self.deleted.update(dele)
            cur.execute("COMMIT")
        for k, v in ops.items():
            self.done[k] += v
        return ops


# -- lake inspection -------------------------------------------------------------------------------
def table_stats(uri: str) -> dict:
    """Live files, files on disk, Delta log commits/checkpoints of a local Delta table."""
    from deltalake import DeltaTable

    dt = DeltaTable(uri)
    live = dt.file_uris()
    logdir = os.path.join(uri, "_delta_log")
    commits = glob.glob(os.path.join(logdir, "*.json"))
    checkpoints = sorted(glob.glob(os.path.join(logdir, "*.checkpoint*.parquet")))
    last_cp = None
    if checkpoints:
        last_cp = max(int(os.path.basename(p).split(".")[0]) for p in checkpoints)
    on_disk = [
        p for p in glob.glob(os.path.join(uri, "**", "*.parquet"), recursive=True) if "/_delta_log/" not in p
    ]
    version = dt.version()
    return {
        "version": version,
        "live_files": len(live),
        "live_bytes": sum(os.path.getsize(_local(p)) for p in live),
        "disk_files": len(on_disk),
        "log_commits": len(commits),
        "checkpoints": len(checkpoints),
        "last_checkpoint": last_cp,
        "commits_to_replay": version - (last_cp if last_cp is not None else -1),
    }


def table_stats_prev_checkpoint(uri: str, version: int) -> int:
    """Version of the newest checkpoint at or below ``version`` (-1: none)."""
    cps = [
        int(os.path.basename(p).split(".")[0])
        for p in glob.glob(os.path.join(uri, "_delta_log", "*.checkpoint*.parquet"))
    ]
    return max([c for c in cps if c <= version], default=-1)


def _local(uri: str) -> str:
    return uri[len("file://") :] if uri.startswith("file://") else uri


# -- readers -------------------------------------------------------------------------------------
def readers(spark) -> dict:
    """name -> fn(uri, version, files) returning rows read; every one reads all rows and columns."""
    import duckdb
    import pyarrow.dataset as ds
    from deltalake import DeltaTable

    con = duckdb.connect()

    def delta_rs(uri, version, files):
        return DeltaTable(uri, version=version).to_pyarrow_table().num_rows

    def delta_open(uri, version, files):
        DeltaTable(uri, version=version).file_uris()
        return 0

    def pa_dataset(uri, version, files):
        return ds.dataset(files, format="parquet").to_table().num_rows

    def duck(uri, version, files):
        return con.read_parquet(files, union_by_name=True).to_arrow_table().num_rows

    out = {
        "delta-rs DeltaTable(uri).to_pyarrow_table() (open + read)": delta_rs,
        "delta-rs DeltaTable(uri) open alone (log replay)": delta_open,
        "pyarrow dataset over the live files (read only)": pa_dataset,
        "duckdb read_parquet over the live files (read only)": duck,
    }
    if spark is not None:
        try:
            spark.read.format("delta").load(os.path.dirname(os.path.abspath(__file__))).limit(0).collect()
            ok = True
        except Exception as e:
            ok = "DATA_SOURCE_NOT_FOUND" not in str(e) and "Failed to find data source" not in str(e)
        if ok:

            def spark_delta(uri, version, files):
                r = spark.read.format("delta")
                if version is not None:
                    r = r.option("versionAsOf", version)
                return r.load(uri).count()

            out["spark read.format('delta') (count)"] = spark_delta
        else:
            print(
                "[read] Spark has no Delta data source (delta-spark jars not on the classpath): Spark reader skipped"
            )
    return out


def _uv(t) -> tuple[str, int | None]:
    return t if isinstance(t, tuple) else (t, None)


def compare_reads(pairs: dict, fns: dict, repeat: int) -> dict:
    """Interleaved timing: for every repetition, every reader, every table (order alternated).
    ``pairs``: name -> uri or (uri, version). Returns {reader: {name: [seconds...]}}; checks that
    the tables of one reader return the same rows (except the ``@`` time-travel pair)."""
    from deltalake import DeltaTable

    files = {name: [_local(p) for p in DeltaTable(*_uv(t)).file_uris()] for name, t in pairs.items()}
    times: dict[str, dict[str, list[float]]] = {r: {n: [] for n in pairs} for r in fns}
    rows: dict[str, dict[str, int]] = {r: {} for r in fns}
    names = list(pairs)
    for rep in range(repeat + 1):  # repetition 0 warms caches and is not counted
        for rname, fn in fns.items():
            order = names if rep % 2 == 0 else names[::-1]
            for name in order:
                t0 = time.perf_counter()
                n = fn(*_uv(pairs[name]), files[name])
                dt = time.perf_counter() - t0
                rows[rname][name] = n
                if rep:
                    times[rname][name].append(dt)
    for rname, by in rows.items():
        if len({v for k, v in by.items() if "@" not in k}) != 1:
            raise AssertionError(f"{rname}: tables returned different row counts {by}")
    return {"times": times, "rows": rows, "files": {n: len(f) for n, f in files.items()}}


# -- correctness -------------------------------------------------------------------------------------
def check_state(state_uri: str, root, db: str, deleted: set[int]) -> str:
    """The state's live rows equal the source table's rows (library's Debezium mapping)."""
    from deltalake import DeltaTable

    from dagster_mysql_cdc.events import STATE_META_NAMES
    from dagster_mysql_cdc.source.catalog import read_table_schemas
    from dagster_mysql_cdc.source.types import TableConverter, TypeOptions

    schema = read_table_schemas(root, [(db, TABLE)])[(db, TABLE)]
    conv = TableConverter(schema, TypeOptions(), "pymysql")
    with root.cursor() as cur:
        cur.execute(f"SELECT * FROM {db}.{TABLE} ORDER BY id")
        src = conv.to_record_batch(list(cur.fetchall())).to_pylist()
    st = DeltaTable(state_uri).to_pyarrow_table().to_pylist()
    live = sorted((r for r in st if not r["__deleted"]), key=lambda r: r["id"])
    tomb = {r["id"] for r in st if r["__deleted"]}
    for r in live:
        for m in STATE_META_NAMES:
            r.pop(m, None)
    ids = [r["id"] for r in st]
    problems = []
    if len(ids) != len(set(ids)):
        problems.append(f"{len(ids) - len(set(ids))} duplicate keys in the state")
    if live != src:
        bad = [(a, b) for a, b in zip(live, src) if a != b][:2]
        problems.append(
            f"live rows differ from the source ({len(live)} vs {len(src)} rows; first diffs {bad})"
        )
    if tomb != deleted:
        problems.append(f"tombstones {len(tomb)} != deleted keys {len(deleted)}")
    verdict = "OK" if not problems else "MISMATCH: " + "; ".join(problems)
    return f"state: {len(live):,} live rows == source {len(src):,} rows, {len(tomb):,} tombstones == deleted keys -> {verdict}"


# -- driver --------------------------------------------------------------------------------------
def run(args: argparse.Namespace) -> dict:
    from deltalake import DeltaTable

    from dagster_mysql_cdc.engine.initial_snapshot import run_snapshot
    from dagster_mysql_cdc.engine.stream import StreamOptions
    from dagster_mysql_cdc.engine.window_run import run_window
    from dagster_mysql_cdc.sink.lake import LakeWriter
    from dagster_mysql_cdc.sink.schema_history import SchemaHistory
    from dagster_mysql_cdc.sink.storage import StorageSettings
    from dagster_mysql_cdc.source.connection import connect, current_position, server_info
    from dagster_mysql_cdc.source.filters import TableFilter
    from dagster_mysql_cdc.source.snapshot import SnapshotOptions
    from dagster_mysql_cdc.source.types import TypeOptions

    n_batches = args.batches if args.batches is not None else (QUICK_BATCHES if args.quick else 1000)
    every = args.sample_every or (max(1, n_batches // 10) if args.quick else 100)
    settings = C.cdc_settings()
    spark = C.get_spark()
    print(
        f"\n### small-files benchmark: {n_batches:,} stream windows of ~{args.rows_per_batch} row changes "
        f"on a {args.initial_rows:,}-row table"
    )
    report: dict = {
        "batches": n_batches,
        "rows_per_batch": args.rows_per_batch,
        "initial_rows": args.initial_rows,
    }

    class CountingWriter(LakeWriter):
        """The library's LakeWriter, defaults unchanged; counts the compactions it runs."""

        compactions: dict[str, int] = {}

        def maybe_compact(self, table_uri, *a, **kw):
            m = super().maybe_compact(table_uri, *a, **kw)
            if m:
                key = table_uri.rsplit("/", 1)[-1]
                self.compactions[key] = self.compactions.get(key, 0) + 1
            return m

    with C.scratch_database("small") as (root, db), C.scratch_dir("bench-small-", args.keep) as tmp:
        if args.keep:
            print(f"[lake] kept in {tmp}")
        lake = os.path.join(tmp, "lake")
        storage = StorageSettings(base_uri=lake)
        wl = Workload(root, db, args.initial_rows, args.rows_per_batch)
        t0 = time.perf_counter()
        wl.fill(args.initial_rows)
        writer = CountingWriter(spark, storage, SERVER)  # library defaults (compact_min_files=64)
        print(
            f"[writer] LakeWriter defaults: compact_min_files={writer.compact_min_files}, "
            f"rows_per_file={writer.rows_per_file:,}, pipeline_depth={getattr(writer, 'pipeline_depth', 'n/a')}"
        )
        history = SchemaHistory(storage, SERVER)
        list(
            run_snapshot(
                settings,
                [(db, TABLE)],
                writer,
                type_options=TypeOptions(),
                options=SnapshotOptions(locking_mode="none"),
                server_name=SERVER,
                history=history,
            )
        )
        paths = writer.paths(db, TABLE)
        conn = connect(settings)
        info = server_info(conn)
        start = current_position(conn, info)
        print(
            f"[data] {args.initial_rows:,} rows inserted and snapshotted in {time.perf_counter() - t0:.1f}s; "
            f"streaming from {start.file}:{start.pos}",
            flush=True,
        )

        samples: list[dict] = []

        def sample(i: int, window_s: list[float]) -> None:
            st, lg = table_stats(paths.state), table_stats(paths.changelog)
            best_read = min(_timed(lambda: DeltaTable(paths.state).to_pyarrow_table()) for _ in range(3))
            recent = window_s[-every:] if window_s else [float("nan")]
            s = {
                "batch": i,
                "state": st,
                "changelog": lg,
                "state_read_s": best_read,
                "window_s_mean": sum(recent) / len(recent),
                "compactions": dict(writer.compactions),
                "elapsed_s": time.perf_counter() - t_stream,
                "load": os.getloadavg()[0],
            }
            samples.append(s)
            print(
                f"  [{i:>5}] state: {st['live_files']:>3} live files ({st['live_files'] / max(1, i):.3f}/batch), "
                f"{st['disk_files']:>5} on disk, v{st['version']:<5} checkpoints {st['checkpoints']:>2} "
                f"(replay {st['commits_to_replay']:>3} commits), read {best_read * 1e3:6.1f} ms | changelog: "
                f"{lg['live_files']:>3} live, {lg['disk_files']:>5} on disk, v{lg['version']:<5} "
                f"checkpoints {lg['checkpoints']:>2} | compactions {dict(writer.compactions)} | "
                f"window mean {s['window_s_mean']:.2f}s | load {s['load']:.1f}",
                flush=True,
            )

        window_s: list[float] = []
        t_stream = time.perf_counter()
        sample(0, window_s)
        try:
            for i in range(1, n_batches + 1):
                wl.one_transaction()
                end = current_position(conn, info)
                w0 = time.perf_counter()
                res = run_window(
                    settings,
                    info,
                    replica_server_id=args.server_id,
                    start=start,
                    end=end,
                    writer=writer,
                    history=history,
                    table_filter=TableFilter(database_include_list=(db,)),
                    type_options=TypeOptions(),
                    options=StreamOptions(),
                    server_name=SERVER,
                )
                window_s.append(time.perf_counter() - w0)
                # what the sensor commits as the next start (see MySqlCdcResource.sync)
                start = end if (res.end.file, res.end.pos) == (end.file, end.pos) else res.end
                if i % every == 0 or i == n_batches:
                    sample(i, window_s)
        finally:
            conn.close()
        stream_s = time.perf_counter() - t_stream
        report.update(
            samples=samples,
            stream_s=stream_s,
            changes=dict(wl.done),
            window_s={"mean": sum(window_s) / len(window_s), "min": min(window_s), "max": max(window_s)},
        )
        print(
            f"[stream] {n_batches:,} windows in {stream_s:.0f}s (window: mean {report['window_s']['mean']:.2f}s, "
            f"min {report['window_s']['min']:.2f}s, max {report['window_s']['max']:.2f}s); changes {wl.done}"
        )

        # -- correctness
        check = check_state(paths.state, root, db, wl.deleted)
        log_rows = DeltaTable(paths.changelog).to_pyarrow_table(columns=["op"]).num_rows
        want_log = args.initial_rows + sum(wl.done.values())
        log_check = f"changelog: {log_rows:,} rows (want {want_log:,} = snapshot + changes) -> {'OK' if log_rows == want_log else 'MISMATCH'}"
        print(f"[check] {check}\n[check] {log_check}", flush=True)
        report["check"] = [check, log_check]

        read_phase(paths.state, paths.changelog, os.path.join(tmp, "copies"), spark, args.repeat, report)
        print_report(report)
        if args.json:
            with open(args.json, "w") as fh:
                json.dump(report, fh, indent=1, default=str)
            print(f"[json] {args.json}")
    return report


def copy_as_of(uri: str, dest: str, version: int | None = None) -> str:
    """Copy of a Delta table as a reader saw it at ``version`` (default: now): its log up to that
    version, the ``_last_checkpoint`` hint of that moment (newest checkpoint at or below it) and
    its live data files only (removed files are not needed and would make the copy large)."""
    from deltalake import DeltaTable

    dt = DeltaTable(uri, version=version)
    v = dt.version()
    os.makedirs(os.path.join(dest, "_delta_log"))
    for p in glob.glob(os.path.join(uri, "_delta_log", "*")):
        b = os.path.basename(p)
        if b[:20].isdigit() and int(b[:20]) <= v and os.path.isfile(p):
            shutil.copy2(p, os.path.join(dest, "_delta_log", b))
    cp = table_stats_prev_checkpoint(uri, v)
    if cp >= 0:  # the hint a reader had at that version (without it delta-rs lists the whole log)
        import pyarrow.parquet as pq

        path = os.path.join(uri, "_delta_log", f"{cp:020d}.checkpoint.parquet")
        t = pq.read_table(path, columns=["add"])
        hint = {
            "version": cp,
            "size": t.num_rows,
            "sizeInBytes": os.path.getsize(path),
            "numOfAddFiles": t.num_rows - t.column("add").null_count,
        }
        with open(os.path.join(dest, "_delta_log", "_last_checkpoint"), "w") as fh:
            json.dump(hint, fh, separators=(",", ":"))
    for f in dt.file_uris():
        rel = os.path.relpath(_local(f), uri)
        os.makedirs(os.path.dirname(os.path.join(dest, rel)), exist_ok=True)
        shutil.copy2(_local(f), os.path.join(dest, rel))
    assert DeltaTable(dest).version() == v
    return dest


def read_phase(state_uri: str, log_uri: str, copies: str, spark, repeat: int, report: dict) -> None:
    """Fresh copies, worst-checkpoint-phase copy, diagnosis copies; interleaved timed reads."""
    from deltalake import DeltaTable, write_deltalake

    pairs = {}
    for name, uri in (("state", state_uri), ("changelog", log_uri)):
        fresh = os.path.join(copies, f"{name}-fresh")
        write_deltalake(fresh, DeltaTable(uri).to_pyarrow_table())  # one write of the current rows
        pairs[name] = {"lake": uri, "fresh": fresh}
    # the state just before its last checkpoint: the longest JSON log tail a reader replays
    st_now = table_stats(state_uri)
    worst = {}
    if st_now["last_checkpoint"]:
        v = st_now["last_checkpoint"] - 1
        cut = copy_as_of(state_uri, os.path.join(copies, "state-at-worst"), v)
        fresh_v = os.path.join(copies, "state-fresh-at-worst")
        write_deltalake(fresh_v, DeltaTable(cut).to_pyarrow_table())
        worst = {f"lake @ v{v}": cut, f"fresh @ v{v}": fresh_v}
        report["worst_version"] = v
        report["worst_replay"] = v - table_stats_prev_checkpoint(state_uri, v)
    diag = {}
    cp_copy = copy_as_of(state_uri, os.path.join(copies, "state-checkpointed"))
    DeltaTable(cp_copy).create_checkpoint()
    diag["state + create_checkpoint()"] = cp_copy
    opt_copy = copy_as_of(state_uri, os.path.join(copies, "state-optimized"))
    DeltaTable(opt_copy).optimize.compact()
    DeltaTable(opt_copy).create_checkpoint()
    diag["state + optimize.compact() + create_checkpoint()"] = opt_copy
    if st_now["last_checkpoint"] and st_now["last_checkpoint"] >= 10:
        # what a checkpoint every 10 commits (delta.checkpointInterval=10) would leave at worst
        v10 = table_stats_prev_checkpoint(state_uri, st_now["last_checkpoint"] - 1) + 9
        diag[f"state @ v{v10} (checkpoint + 9 commits)"] = copy_as_of(
            state_uri, os.path.join(copies, "state-cp9"), v10
        )
        report["cp9_version"] = v10
    exp_copy = copy_as_of(state_uri, os.path.join(copies, "state-no-tombstones"))
    DeltaTable(exp_copy).alter.set_table_properties(
        {"delta.deletedFileRetentionDuration": "interval 0 seconds"}
    )
    DeltaTable(exp_copy).create_checkpoint()
    diag["state + create_checkpoint(), tombstones expired"] = exp_copy
    cl_copy = copy_as_of(state_uri, os.path.join(copies, "state-cleaned"))
    DeltaTable(cl_copy).alter.set_table_properties(
        {
            "delta.deletedFileRetentionDuration": "interval 0 seconds",
            "delta.logRetentionDuration": "interval 0 seconds",
        }
    )
    DeltaTable(cl_copy).create_checkpoint()
    DeltaTable(cl_copy).cleanup_metadata()
    diag["... + cleanup_metadata() (old log entries deleted)"] = cl_copy

    fns = readers(spark)
    final = {
        name: {"lake": table_stats(p["lake"]), "fresh": table_stats(p["fresh"])} for name, p in pairs.items()
    }
    for k, uri in {**worst, **diag}.items():
        final.setdefault("diag", {})[k] = table_stats(uri)
    report["final"] = final
    results = {}
    for name, p in pairs.items():
        tables = {"lake": p["lake"], "fresh": p["fresh"]}
        if name == "state":
            tables.update(worst)
            tables.update(diag)
        print(
            f"[read] {name}: timing {len(fns)} readers x {len(tables)} tables, interleaved, best of {repeat} ...",
            flush=True,
        )
        results[name] = compare_reads(tables, fns, repeat)
    report["reads"] = results


def _timed(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def print_report(r: dict) -> None:
    n = r.get("batches")
    print()
    if not r.get("samples"):
        return _print_reads(r)
    print(
        f"== small files: {n:,} stream windows of ~{r['rows_per_batch']} row changes (run_window, library defaults)"
    )
    print(
        f"{'batch':>6} {'state live':>10} {'per batch':>9} {'on disk':>8} {'version':>8} {'ckpts':>5} {'replay':>6} "
        f"{'read ms':>8} | {'log live':>8} {'on disk':>8} {'version':>8} {'ckpts':>5} | {'window s':>8}"
    )
    for s in r["samples"]:
        st, lg = s["state"], s["changelog"]
        print(
            f"{s['batch']:>6} {st['live_files']:>10} {st['live_files'] / max(1, s['batch']):>9.3f} {st['disk_files']:>8} "
            f"{st['version']:>8} {st['checkpoints']:>5} {st['commits_to_replay']:>6} {s['state_read_s'] * 1e3:>8.1f} | "
            f"{lg['live_files']:>8} {lg['disk_files']:>8} {lg['version']:>8} {lg['checkpoints']:>5} | "
            f"{s['window_s_mean']:>8.2f}"
        )
    last = r["samples"][-1]
    peak = max(s["state"]["live_files"] for s in r["samples"])
    peak_log = max(s["changelog"]["live_files"] for s in r["samples"])
    print(
        f"state live files: {last['state']['live_files']} at the end, peak {peak} over {n:,} batches "
        f"(ratio live files / batches {last['state']['live_files'] / n:.3f}, peak {peak / n:.3f}); "
        f"change log: {last['changelog']['live_files']} at the end, peak {peak_log}; "
        f"compactions {last['compactions']}"
    )
    _print_reads(r)


def _print_reads(r: dict) -> None:
    for name, res in r["reads"].items():
        times = res["times"]
        tables = list(next(iter(times.values())))
        nrows = next(iter(res["rows"].values()))["lake"]
        print(
            f"\n-- full read of the {name} ({nrows:,} rows); "
            f"files: " + ", ".join(f"{t} {res['files'][t]}" for t in tables)
        )
        for i, t in enumerate(tables):
            print(f"   [{i}] {t}")
        print(f"   {'reader':<58} " + " ".join(f"{f'[{i}]':>20}" for i in range(len(tables))))
        for rname, by in times.items():
            fresh = min(by["fresh"])
            cells = []
            for t in tables:
                b = min(by[t])
                cells.append(f"{b * 1e3:7.1f} ms {b / fresh:5.2f}x" if fresh > 0 else f"{b * 1e3:7.1f} ms")
            print(f"   {rname[:58]:<58} " + " ".join(f"{c:>20}" for c in cells))
        if name == "state":
            main_r = next(iter(times))
            ratio = min(times[main_r]["lake"]) / min(times[main_r]["fresh"])
            print(
                f"   ratio lake / fresh copy ({main_r}): {ratio:.2f}x  target <= {TARGET_RATIO:.1f}x "
                f"{'MET' if ratio <= TARGET_RATIO else 'MISSED'}"
            )
            at = [t for t in tables if t.startswith("lake @")]
            if at:
                fr = [t for t in tables if t.startswith("fresh @")][0]
                for rname, by in times.items():
                    w = min(by[at[0]]) / min(by[fr])
                    print(
                        f"   worst checkpoint phase ({at[0]} vs {fr}, {r.get('worst_replay')} JSON commits replayed), "
                        f"{rname}: {w:.2f}x  target <= {TARGET_RATIO:.1f}x {'MET' if w <= TARGET_RATIO else 'MISSED'}"
                    )
    print()


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m bench.small_files", description=__doc__.split("\n")[0])
    p.add_argument(
        "--batches", type=int, default=None, help=f"stream windows (default 1000; --quick: {QUICK_BATCHES})"
    )
    p.add_argument("--rows-per-batch", type=int, default=10, help="row changes per window (one transaction)")
    p.add_argument(
        "--initial-rows", type=int, default=10_000, help="rows of the table before streaming (snapshotted)"
    )
    p.add_argument("--quick", action="store_true", help=f"sanity run: {QUICK_BATCHES} windows")
    p.add_argument(
        "--sample-every", type=int, default=None, help="record file counts every N windows (default 100)"
    )
    p.add_argument("--repeat", type=int, default=7, help="repetitions of every timed read (best is reported)")
    p.add_argument("--keep", action="store_true", help="keep the scratch lake directory")
    p.add_argument(
        "--server-id", type=int, default=SERVER_ID, help=f"replication client id (default {SERVER_ID})"
    )
    p.add_argument(
        "--reads-from",
        default=None,
        metavar="LAKE",
        help="only the read comparison, on the lake kept (--keep) by an earlier run",
    )
    p.add_argument("--json", default=None, help="also write the figures to this JSON file")
    return p


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    args = build_parser().parse_args(argv)
    C.print_machine()
    import dagster_mysql_cdc

    print(f"[machine] library imported from {os.path.dirname(dagster_mysql_cdc.__file__)}", flush=True)
    try:
        if args.reads_from:
            reads_only(args)
        else:
            run(args)
    finally:
        C.stop_spark()
    return 0


def reads_only(args: argparse.Namespace) -> dict:
    """The read comparison of a kept lake (``--reads-from``), e.g. again on a quieter machine."""
    found = glob.glob(os.path.join(args.reads_from, SERVER, "*", TABLE, "state"))
    if len(found) != 1:
        raise SystemExit(f"no single {SERVER}/<db>/{TABLE}/state table under {args.reads_from}: {found}")
    state = found[0]
    report: dict = {"reads_from": args.reads_from}
    with C.scratch_dir("bench-small-reads-", args.keep) as tmp:
        read_phase(
            state,
            os.path.join(os.path.dirname(state), "changelog"),
            os.path.join(tmp, "copies"),
            None,
            args.repeat,
            report,
        )
        print_report(report)
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(report, fh, indent=1, default=str)
    return report


if __name__ == "__main__":
    sys.exit(main())
