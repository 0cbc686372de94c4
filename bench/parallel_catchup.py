"""Parallel catch-up benchmark (issue 29): a binlog backlog decoded by parallel Spark tasks vs one reader.

    python -m bench.parallel_catchup              # 1,000,000 row changes over several binlog files
    python -m bench.parallel_catchup --quick      # 100,000
    python -m bench.parallel_catchup --rows 2000000 --file-mb 32

Set-up (not timed): the 10-column mixed-type table of bench.streaming, snapshotted (empty) into a
template lake; ``max_binlog_size`` is lowered while the changes are generated (60 % multi-row
INSERTs, 30 % UPDATEs, 10 % DELETEs, 1000 rows per statement) so the backlog spans several binlog
files, then restored. Every variant reads exactly that binlog range:

  a    raw python-mysql-replication: one BinLogStreamReader over the range, every value touched
       (the ceiling of any single reader, Debezium's included).
  s2   ``run_window`` end to end into a copy of the template lake, the single reader
       (``stream_parallel_min_bytes=None``), Spark ``local[2]``.
  p1   ``run_window`` with the parallel catch-up (the resource's defaults, threshold 1 byte so this
       window qualifies), Spark ``local[1]``.
  p2   the same, Spark ``local[2]`` (the library's default local Spark).

Each Spark variant runs in a fresh process that starts its Spark session and warms it up before
the clock starts (one session per process; the daemon path's start-up costs are measured by
bench.daemon_latency). Each variant's lake is checked afterwards: its change log holds one event
per row change of the range. Printed: rows/s, ratio over (a) (target p2/a >= 1.3, moonshot 1.8),
and p2/p1 (the scaling with cores, target >= 1.6).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import time

from . import _common as C
from .streaming import TABLE, generate_changes, raw_library

SERVER = "bench"
SEGMENT_SERVER_IDS = tuple(range(5720, 5736))
DEFAULT_ROWS = 1_000_000
QUICK = 100_000


def _set_max_binlog_size(root, size: int) -> int:
    with root.cursor() as cur:
        cur.execute("SELECT @@GLOBAL.max_binlog_size")
        (old,) = cur.fetchone()
        cur.execute(f"SET GLOBAL max_binlog_size = {int(size)}")
    return int(old)


def prepare(root, db: str, n: int, tmp: str, file_mb: int) -> dict:
    """The table, an empty-snapshot template lake, and the binlog range of ``n`` row changes."""
    from dagster_mysql_cdc.engine.initial_snapshot import run_snapshot
    from dagster_mysql_cdc.sink.lake import LakeWriter
    from dagster_mysql_cdc.sink.schema_history import SchemaHistory
    from dagster_mysql_cdc.sink.storage import StorageSettings
    from dagster_mysql_cdc.source.connection import connect, current_position, server_info
    from dagster_mysql_cdc.source.snapshot import SnapshotOptions
    from dagster_mysql_cdc.source.types import TypeOptions

    settings = C.cdc_settings()
    with root.cursor() as cur:
        cur.execute(C.TABLE_DDL.format(db=db, table=TABLE))
    template = os.path.join(tmp, "template")
    storage = StorageSettings(base_uri=template)
    spark = C.get_spark()
    list(
        run_snapshot(
            settings,
            [(db, TABLE)],
            LakeWriter(spark, storage, SERVER),
            type_options=TypeOptions(),
            options=SnapshotOptions(locking_mode="none"),
            server_name=SERVER,
            history=SchemaHistory(storage, SERVER),
        )
    )
    C.stop_spark()  # the variants start their own
    conn = connect(settings)
    old = _set_max_binlog_size(root, file_mb * 1024 * 1024)
    try:
        info = server_info(conn)
        start = current_position(conn, info)
        t0 = time.perf_counter()
        expect = generate_changes(root, db, n)
        gen_s = time.perf_counter() - t0
        end = current_position(conn, info)
        with root.cursor() as cur:  # an event after the range: (a) knows it has read all of it
            cur.execute(f"CREATE TABLE {db}.after_the_range (x INT)")
    finally:
        _set_max_binlog_size(root, old)
        conn.close()
    files = end.file_seq - start.file_seq + 1
    print(
        f"[data] {sum(expect.values()):,} changes {expect} generated in {gen_s:.1f}s; binlog "
        f"{start.file}:{start.pos} -> {end.file}:{end.pos} ({files} files of <= {file_mb} MB)",
        flush=True,
    )
    return {"start": start, "end": end, "expect": expect, "template": template}


def child_variant(key: str, master: str, parallel: bool, rng: dict, db: str, lake: str) -> tuple[int, dict]:
    """Run one Spark variant in a fresh process (``--child``); returns its ``(rows, notes)``."""
    import subprocess

    shutil.copytree(rng["template"], lake)
    payload = {
        "key": key,
        "master": master,
        "parallel": parallel,
        "start": rng["start"].to_dict(),
        "end": rng["end"].to_dict(),
        "db": db,
        "lake": lake,
    }
    out = subprocess.run(
        [sys.executable, "-m", "bench.parallel_catchup", "--child", json.dumps(payload)],
        capture_output=True,
        text=True,
        check=False,
    )
    if out.returncode != 0:
        raise RuntimeError(f"variant {key} failed:\n{out.stderr[-4000:]}")
    res = json.loads(out.stdout.strip().splitlines()[-1])
    return res["rows"], res["notes"]


def _child(arg: str) -> int:
    """Body of a variant's process: Spark started and warmed (not timed), then the window, timed."""
    from dagster_mysql_cdc.engine.segments import ParallelOptions
    from dagster_mysql_cdc.engine.stream import StreamOptions
    from dagster_mysql_cdc.engine.window_run import run_window
    from dagster_mysql_cdc.events import BinlogPosition
    from dagster_mysql_cdc.sink.lake import LakeWriter
    from dagster_mysql_cdc.sink.schema_history import SchemaHistory
    from dagster_mysql_cdc.sink.storage import StorageSettings
    from dagster_mysql_cdc.source.connection import connect, server_info
    from dagster_mysql_cdc.source.filters import TableFilter
    from dagster_mysql_cdc.source.types import TypeOptions

    a = json.loads(arg)
    spark = C.get_spark(a["master"])
    settings = C.cdc_settings()
    conn = connect(settings)
    try:
        info = server_info(conn)
    finally:
        conn.close()
    storage = StorageSettings(base_uri=a["lake"])
    opts = StreamOptions(
        parallel=ParallelOptions(min_bytes=1, server_ids=SEGMENT_SERVER_IDS) if a["parallel"] else None
    )
    before = C.cpu_snapshot()
    t0 = time.perf_counter()
    res = run_window(
        settings,
        info,
        replica_server_id=C.SERVER_IDS["end_to_end"],
        start=BinlogPosition.from_dict(a["start"]),
        end=BinlogPosition.from_dict(a["end"]),
        writer=LakeWriter(spark, storage, SERVER),
        history=SchemaHistory(storage, SERVER),
        table_filter=TableFilter(database_include_list=(a["db"],)),
        type_options=TypeOptions(),
        options=opts,
        server_name=SERVER,
    )
    seconds = time.perf_counter() - t0
    after = C.cpu_snapshot()
    tw = res.tables.get((a["db"], TABLE))
    changes = _change_count(storage, a["db"])
    notes = {
        "seconds": round(seconds, 2),
        "cpu_py_s": round(after.self_s - before.self_s, 1),
        "cpu_spark_s": round(after.children_s - before.children_s, 1),
        "decode": [
            {
                k: d.get(k)
                for k in ("mode", "reason", "plan_seconds", "decode_seconds", "commit_seconds", "segments")
                if k in d
            }
            for d in res.decode
        ],
        "changelog_changes": changes,
        "compaction": {
            k: v
            for k, v in ((tw.extra or {}).get("compaction") or {}).items()
            if k in ("mode", "reason", "seconds")
        }
        if tw
        else {},
        "spark_jobs": tw.spark_jobs if tw else 0,
    }
    print(json.dumps({"rows": tw.rows if tw else 0, "notes": notes}))
    return 0


def _change_count(storage, db: str) -> int:
    """Row changes in the change log (a key update's d + c pair, same file/pos/row, counted once)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    from dagster_mysql_cdc.sink.delta import read_table

    t = read_table(storage, storage.uri(SERVER, db, TABLE, "changelog")).to_pyarrow_table(
        columns=["op", "source"]
    )
    t = t.filter(pc.is_in(t.column("op"), pa.array(["c", "u", "d"], t.column("op").type)))
    src = t.column("source").combine_chunks()
    keys = set(zip(*(src.field(f).to_pylist() for f in ("file", "pos", "row"))))
    return len(keys)


def run(args: argparse.Namespace) -> dict[str, list[C.Measurement]]:
    n = args.rows or (QUICK if args.quick else DEFAULT_ROWS)
    settings = C.cdc_settings()
    print(f"\n### parallel catch-up benchmark: {n:,} row changes")
    results: dict[str, list[C.Measurement]] = {"a": [], "s2": [], "p1": [], "p2": []}
    with (
        C.scratch_database("parcu") as (root, db),
        C.scratch_dir("bench-parcu-", args.keep) as tmp,
    ):
        rng = prepare(root, db, n, tmp, args.file_mb)
        expect = sum(rng["expect"].values())
        for rep in range(args.repeat):
            results["a"].append(
                C.measure(
                    "a",
                    "raw python-mysql-replication iteration",
                    lambda: raw_library(settings, rng["start"], rng["end"], db, C.SERVER_IDS["raw"]),
                )
            )
            for key, label, master, par in (
                ("s2", "run_window, single reader, local[2]", "local[2]", False),
                ("p1", "run_window, parallel catch-up, local[1]", "local[1]", True),
                ("p2", "run_window, parallel catch-up, local[2]", "local[2]", True),
            ):
                if key not in args.variants.split(","):
                    continue
                lake = os.path.join(tmp, f"{key}-{rep}")
                m = C.measure(
                    key, label, lambda k=key, ms=master, p=par, lk=lake: child_variant(k, ms, p, rng, db, lk)
                )
                # the child's own clock (its Spark start-up is outside the timed window)
                m.seconds = m.notes["seconds"]
                m.cpu_children = m.notes["cpu_spark_s"]
                m.cpu_self = m.notes["cpu_py_s"]
                got = m.notes["changelog_changes"]
                if got != expect:
                    raise SystemExit(
                        f"{key}: the change log holds {got:,} row changes, the binlog {expect:,}"
                    )
                print(
                    f"       decode: {m.notes['decode']}; compaction: {m.notes.get('compaction')}", flush=True
                )
                results[key].append(m)
                shutil.rmtree(lake, ignore_errors=True)
    results = {k: v for k, v in results.items() if v}
    C.print_table(f"parallel catch-up, {n:,} row changes", results, "a", {"p2": 1.3, "s2": 0.9})
    if results.get("p1") and results.get("p2"):
        p1, p2 = C.best(results["p1"]), C.best(results["p2"])
        print(f"scaling p2/p1 (local[2] over local[1]): {p2.rate / p1.rate:.2f}x  (target >= 1.6)")
    return results


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m bench.parallel_catchup", description=__doc__.split("\n")[0])
    C.add_common_args(p)
    p.add_argument("--file-mb", type=int, default=16, help="max_binlog_size while generating (MB)")
    p.add_argument(
        "--variants",
        default="s2,p1,p2",
        help="Spark variants to run beside (a), comma-separated (default: all)",
    )
    p.add_argument("--child", default=None, help=argparse.SUPPRESS)
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.child:
        return _child(args.child)
    C.QUIET["max_load"], C.QUIET["max_wait"] = args.max_load, args.max_wait
    C.print_machine()
    run(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
