"""Initial-snapshot benchmark: raw pymysql scan vs our snapshot scan vs end-to-end ``run_snapshot``.

    python -m bench.snapshot            # 500,000 rows
    python -m bench.snapshot --quick    # 50,000
    python -m bench.snapshot --rows 200000 --repeat 2 --profile

Set-up (not timed): a scratch database with the same 10-column table as the streaming benchmark,
filled with N rows by ``INSERT ... SELECT`` from MariaDB's SEQUENCE engine. Variants:

  a   raw pymysql: ``SSCursor`` (unbuffered), ``SELECT *``, ``fetchmany(10000)`` until empty.
  b   our ``ConsistentSnapshot`` (preflight, lock, consistent-snapshot transaction, position) and
      ``scan()``: rows → converted values → Arrow change-event batches (``op=r``), nothing written.
  c   ``run_snapshot`` end to end into a local lake (Spark ``local[2]`` started BEFORE timing, JVM
      start excluded): scan → Arrow → Spark jobs → Parquet → Delta commits of the change log and
      the current state, plus the schema-history record.

Rates are table rows per second. The ratios b/a and c/a are printed side by side with the
target (c/a >= 0.8).
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import pymysql

from . import _common as C
from . import breakdown as B

SERVER = "bench"
TABLE = "snap"


def fill(conn, db: str, n: int, chunk: int = 50_000) -> None:
    with conn.cursor() as cur:
        cur.execute(C.TABLE_DDL.format(db=db, table=TABLE))
        for a in range(1, n + 1, chunk):
            cur.execute(C.insert_select(db, TABLE, a, min(a + chunk - 1, n)))


def raw_scan(settings, db: str, fetch: int = 10_000) -> tuple[int, dict]:
    """(a) pymysql SSCursor ``SELECT *`` + fetchmany."""
    conn = pymysql.connect(**settings.pymysql_kwargs())
    n = 0
    try:
        cur = conn.cursor(pymysql.cursors.SSCursor)
        cur.execute(f"SELECT * FROM {db}.{TABLE}")
        while True:
            rows = cur.fetchmany(fetch)
            if not rows:
                break
            n += len(rows)
        cur.close()
    finally:
        conn.close()
    return n, {}


def our_scan(settings, db: str) -> tuple[int, dict]:
    """(b) ConsistentSnapshot + scan into Arrow change-event batches (nothing written)."""
    from dagster_mysql_cdc.source.snapshot import ConsistentSnapshot, SnapshotOptions
    from dagster_mysql_cdc.source.types import TypeOptions

    n = batches = 0
    with ConsistentSnapshot(settings, [(db, TABLE)], TypeOptions(), SnapshotOptions(), SERVER) as snap:
        for b in snap.scan((db, TABLE)):
            n += b.num_rows
            batches += 1
        lock = (snap.lock_kind, round(snap.lock_seconds, 3))
    return n, {"batches": batches, "lock": lock}


def end_to_end(settings, db: str, writer, lake_dir: str) -> tuple[int, dict]:
    """(c) run_snapshot into ``lake_dir`` with the schema history."""
    from dagster_mysql_cdc.engine.initial_snapshot import run_snapshot
    from dagster_mysql_cdc.sink.schema_history import SchemaHistory
    from dagster_mysql_cdc.sink.storage import StorageSettings
    from dagster_mysql_cdc.source.snapshot import SnapshotOptions
    from dagster_mysql_cdc.source.types import TypeOptions

    storage = StorageSettings(base_uri=lake_dir)
    res = list(
        run_snapshot(
            settings,
            [(db, TABLE)],
            writer,
            type_options=TypeOptions(),
            options=SnapshotOptions(),
            server_name=SERVER,
            history=SchemaHistory(storage, SERVER),
        )
    )
    r = res[0]
    return r.write.rows, {
        "sink_s": round(r.write.seconds, 2),
        "spark_jobs": r.write.spark_jobs,
        "snapshot_s": round(r.snapshot_seconds, 2),
        "lock": (r.lock_kind, round(r.lock_seconds, 3)),
    }


def cold_end_to_end(db: str, lake_dir: str, remote: str) -> tuple[int, dict]:
    """(c_cl / c_cc) ``run_snapshot`` in a **fresh Python process** paying every start-up cost a
    run worker pays: imports, the Spark session (a local JVM, or a session on the Spark Connect
    server ``remote``), then the snapshot end to end."""
    return C.run_cold_child("bench.snapshot", {"db": db, "lake": lake_dir}, remote)


def _cold_child(arg: str) -> int:
    import json

    t0 = time.monotonic()
    from dagster_mysql_cdc.dagster_integration.resources import CdcLakeResource

    a = json.loads(arg)
    lake = CdcLakeResource(base_uri=a["lake"], spark_remote=os.environ.get("CDC_SPARK_REMOTE") or None)
    t_imports = time.monotonic()
    rows, notes = end_to_end(C.cdc_settings(), a["db"], lake.get_writer(SERVER), a["lake"])
    return C.cold_child_result(rows, notes, t0, t_imports)


def verify_lake(lake_dir: str, db: str, n: int) -> str:
    from deltalake import DeltaTable

    base = os.path.join(lake_dir, SERVER, db, TABLE)
    log = DeltaTable(f"{base}/changelog").to_pyarrow_table(columns=["op"])
    state = DeltaTable(f"{base}/state").to_pyarrow_table(columns=["id"])
    ok = log.num_rows == n and state.num_rows == n
    return f"changelog {log.num_rows:,} rows, state {state.num_rows:,} rows (want {n:,}) -> {'OK' if ok else 'MISMATCH'}"


def run(args: argparse.Namespace) -> dict[str, list[C.Measurement]]:
    from dagster_mysql_cdc.sink.storage import StorageSettings

    n = C.rows_of(args)
    settings = C.cdc_settings()
    spark = C.get_spark()
    print(f"\n### snapshot benchmark: {n:,} rows")
    results: dict[str, list[C.Measurement]] = {"a": [], "b": [], "c": []}
    if args.cold:
        results["c_cl"] = []
        if os.environ.get("CDC_SPARK_REMOTE"):
            results["c_cc"] = []
    with C.scratch_database("snap") as (root, db), C.scratch_dir("bench-snap-", args.keep) as tmp:
        t0 = time.perf_counter()
        fill(root, db, n)
        with root.cursor() as cur:
            cur.execute(f"ANALYZE TABLE {db}.{TABLE}")
            cur.fetchall()
            cur.execute(
                "SELECT data_length + index_length FROM information_schema.tables "
                "WHERE table_schema = %s AND table_name = %s",
                (db, TABLE),
            )
            size = cur.fetchone()[0] or 0
        print(
            f"[data] {n:,} rows inserted in {time.perf_counter() - t0:.1f}s (~{size / 1e6:.0f} MB InnoDB)",
            flush=True,
        )
        # warm the buffer pool so (a) does not pay the first read from disk
        raw_scan(settings, db)

        def repetition(rep: int, attempt: int) -> dict[str, C.Measurement]:
            out = {}
            out["a"] = C.measure(
                "a", "raw pymysql SSCursor SELECT * + fetchmany", lambda: raw_scan(settings, db)
            )
            out["b"] = C.measure(
                "b", "ConsistentSnapshot.scan -> Arrow events (no sink)", lambda: our_scan(settings, db)
            )
            lc = os.path.join(tmp, f"e2e-{rep}-{attempt}")
            writer = C.TimedLakeWriter.create(spark, StorageSettings(base_uri=lc), SERVER)
            m = C.measure(
                "c",
                "run_snapshot end-to-end -> local Delta (JVM start excluded)",
                lambda: end_to_end(settings, db, writer, lc),
            )
            m.notes["phases"] = dict(writer.phases)
            out["c"] = m
            print(f"       c: {m.notes}")
            print(f"       c {C.phase_summary(writer.phases)}")
            print(f"       c check: {verify_lake(lc, db, n)}")
            if args.cold:
                for key, label, rem in C.cold_variants():
                    lk = os.path.join(tmp, f"{key}-{rep}-{attempt}")
                    mk = C.measure(key, label, lambda lk=lk, rem=rem: cold_end_to_end(db, lk, rem))
                    out[key] = mk
                    print(f"       {key}: {mk.notes}")
                    print(f"       {key} check: {verify_lake(lk, db, n)}")
            return out

        C.run_repetitions(args.repeat, repetition, results)
        C.print_table(
            f"snapshot, {n:,} rows (best of {args.repeat}); ratio = rows/s vs (a)", results, "a", {"c": 0.8}
        )
        a, b, c = (C.best(results[k]) for k in "abc")
        print(
            f"ratio (b)/(a) = {b.rate / a.rate:.2f}   ratio (c)/(a) = {c.rate / a.rate:.2f} (target >= 0.80)"
        )
        C.print_cold_ratios(results, a, c, 0.6)
        print(
            f"c breakdown: CPU python driver {c.cpu_self:.1f}s, Spark JVM+workers {c.cpu_children:.1f}s, "
            f"mariadbd {c.cpu_server:.1f}s"
        )
        B.snapshot(settings, db, TABLE, SERVER, base_us=1e6 / a.rate)
        if args.profile:
            lp = os.path.join(tmp, "profile")
            from dagster_mysql_cdc.sink.lake import LakeWriter

            wp = LakeWriter(spark, StorageSettings(base_uri=lp), SERVER)
            print("\n[profile] end-to-end run_snapshot (c) under pyinstrument ...", flush=True)
            C.run_profiled(lambda: end_to_end(settings, db, wp, lp))
    return results


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m bench.snapshot", description=__doc__.split("\n")[0])
    C.add_common_args(p)
    C.add_cold_args(p, "the end-to-end snapshot")
    return p


def main(argv: list[str] | None = None) -> int:
    return C.bench_main(argv, build_parser(), run, _cold_child)


if __name__ == "__main__":
    sys.exit(main())
