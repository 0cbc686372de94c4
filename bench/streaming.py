"""Binlog streaming benchmark: raw python-mysql-replication vs our reader vs end-to-end ``run_window``.

    python -m bench.streaming            # 500,000 row changes
    python -m bench.streaming --quick    # 50,000
    python -m bench.streaming --rows 200000 --repeat 2 --profile

Set-up (not timed): a scratch database with a 10-column mixed-type table, snapshotted (empty) into a
template lake so the schema history and the state table exist, as after a real initial snapshot.
Then the binlog position is recorded, N row changes are generated (60 % multi-row INSERTs of 1000
rows, then 30 % UPDATEs and 10 % DELETEs interleaved, 1000 rows per statement), and the end position
is recorded. Every variant then reads exactly that binlog range:

  a   raw python-mysql-replication: BinLogStreamReader in file/pos mode (``is_mariadb=False``,
      ``resume_stream=True``, ``blocking=False``), every row's values touched, stop at the end.
  b0  our BinlogReader alone (same touch): the reader's own overhead.
  b   ``run_window`` with a sink that only counts the Arrow batches: reader + schema history +
      value conversion + change-event building (everything but Spark/Delta).
  c   ``run_window`` end to end into a local lake (Spark ``local[2]`` started BEFORE timing, JVM
      start excluded): binlog → Arrow → Spark jobs → Parquet → Delta commits of the change log and
      the merged current state, plus the schema-history check.

Rates are row changes of the benchmark table per second (an UPDATE is one change). The ratios
b/a and c/a are printed side by side with the targets (c/a >= 0.9).
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import time

from . import _common as C
from . import breakdown as B

SERVER = "bench"
TABLE = "events"


# -- data ----------------------------------------------------------------------------------------
def generate_changes(conn, db: str, n: int, chunk: int = 1000) -> dict[str, int]:
    """N row changes: inserts first, then updates and deletes interleaved. Returns rows by op."""
    n_ins = round(n * 0.6)
    n_upd = round(n * 0.3)
    n_del = n - n_ins - n_upd
    done = {"c": 0, "u": 0, "d": 0}
    with conn.cursor() as cur:
        for a in range(1, n_ins + 1, chunk):
            cur.execute(C.insert_select(db, TABLE, a, min(a + chunk - 1, n_ins)))
            done["c"] += cur.rowcount
        ups = [
            (
                (a - 1) / max(1, n_upd),
                f"UPDATE {db}.{TABLE} SET qty = qty + 1, price = price + 1.00, "
                f"name = CONCAT(COALESCE(name, ''), 'u'), updated = updated + INTERVAL 1 SECOND, "
                f"doc = JSON_SET(COALESCE(doc, '{{}}'), '$.u', id) "
                f"WHERE id BETWEEN {a} AND {min(a + chunk - 1, n_upd)}",
                "u",
            )
            for a in range(1, n_upd + 1, chunk)
        ]
        first_del = n_ins - n_del + 1
        dels = [
            (
                (a - first_del) / max(1, n_del),
                f"DELETE FROM {db}.{TABLE} WHERE id BETWEEN {a} AND {min(a + chunk - 1, n_ins)}",
                "d",
            )
            for a in range(first_del, n_ins + 1, chunk)
        ]
        # interleave proportionally (each list's chunks spread over [0, 1))
        for _, sql, op in sorted(ups + dels, key=lambda x: x[0]):
            cur.execute(sql)
            done[op] += cur.rowcount
    return done


# -- variants ------------------------------------------------------------------------------------
def _touch(rows) -> int:
    """Touch every value of every row image (what a consumer of the library must do at least)."""
    k = 0
    for r in rows:
        if "values" in r:
            for _ in r["values"].values():
                k += 1
        else:
            for _ in r["before_values"].values():
                k += 1
            for _ in r["after_values"].values():
                k += 1
    return k


def raw_library(settings, start, end, db: str, server_id: int) -> tuple[int, dict]:
    """(a) python-mysql-replication alone over [start, end)."""
    from pymysqlreplication import BinLogStreamReader
    from pymysqlreplication.event import QueryEvent, RotateEvent, XidEvent
    from pymysqlreplication.row_event import DeleteRowsEvent, UpdateRowsEvent, WriteRowsEvent

    from dagster_mysql_cdc.events import BinlogPosition

    stream = BinLogStreamReader(
        connection_settings=settings.replication_settings(),
        server_id=server_id,
        log_file=start.file,
        log_pos=start.pos,
        resume_stream=True,
        blocking=False,
        is_mariadb=False,
        only_events=[WriteRowsEvent, UpdateRowsEvent, DeleteRowsEvent, XidEvent, QueryEvent, RotateEvent],
    )
    rows_events = (WriteRowsEvent, UpdateRowsEvent, DeleteRowsEvent)
    end_key = (end.file_seq, end.pos)  # one server: (file number, offset)
    file_seq = start.file_seq
    ours = others = events = values = 0
    reached = False
    try:
        for ev in stream:
            events += 1
            if isinstance(ev, RotateEvent):
                file_seq = BinlogPosition(ev.next_binlog, 4).file_seq
                continue
            if isinstance(ev, rows_events):
                rows = ev.rows
                values += _touch(rows)
                if ev.schema == db and ev.table == TABLE:
                    ours += len(rows)
                else:
                    others += len(rows)
                continue
            if (file_seq, ev.packet.log_pos) >= end_key:  # XID / COMMIT / DDL: a boundary
                reached = True
                break
    finally:
        stream.close()
    if not reached:
        raise C.RangeLost(f"raw reader ended before {end}")
    return ours, {"events": events, "other_rows": others, "values": values}


def our_reader(settings, info, start, end, db: str, server_id: int) -> tuple[int, dict]:
    """(b0) our BinlogReader alone (values touched like in a)."""
    from dagster_mysql_cdc.source.binlog import BinlogReader, RowsBatch

    reader = BinlogReader(settings, server_id, start, end, is_mariadb=info.is_mariadb)
    ours = others = values = 0
    for item in reader:
        if isinstance(item, RowsBatch):
            values += _touch(item.rows)
            if item.database == db and item.table == TABLE:
                ours += len(item.rows)
            else:
                others += len(item.rows)
    return ours, {"events": reader.events_read, "other_rows": others, "values": values}


class NullWriter:
    """A LakeWriter stand-in that consumes the Arrow batches and writes nothing."""

    def __init__(self, storage):
        self.storage = storage  # run_window reads it (incremental-snapshot chunk plans)
        self.batches = 0

    def write_table_batch(
        self,
        database,
        table,
        batches,
        *,
        value_schema,
        primary_key,
        app_id,
        version,
        position=None,
        snapshot_position=None,
        truncated_at=None,
        epoch=0,
    ):
        from dagster_mysql_cdc.sink.delta import CommitOutcome
        from dagster_mysql_cdc.sink.lake import TablePaths, TableWriteResult

        rows_by_op: dict[str, int] = {}
        for b in batches:
            self.batches += 1
            vc = b.column(b.schema.get_field_index("op")).value_counts()
            for op, cnt in zip(vc.field("values").to_pylist(), vc.field("counts").to_pylist()):
                rows_by_op[op] = rows_by_op.get(op, 0) + cnt
        none = CommitOutcome(False, 0, 0, 0)
        return TableWriteResult(
            database, table, sum(rows_by_op.values()), rows_by_op, TablePaths("", ""), none, none, 0.0
        )

    def open_table_batch(
        self, database, table, *, primary_key, app_id, version, snapshot_position=None, epoch=0
    ):
        return _NullTableBatch(self, database, table)

    def paths(self, database, table):
        """The table's lake paths (run_window preloads their Delta handles; none exist here)."""
        from dagster_mysql_cdc.sink.layout import LakeLayout

        return LakeLayout(self.storage, SERVER).table(database, table)

    def write_together(self, items):
        """The window's last small record batches of many tables: counted, as ``add`` would."""
        for tb, batch in items:
            tb.add(batch)
        return {}


class _NullTableBatch:
    """What ``LakeWriter.open_table_batch`` returns, for :class:`NullWriter`: counts, writes nothing."""

    def __init__(self, writer, database, table):
        self.writer, self.database, self.table = writer, database, table
        self.batches = 0
        self.counts: dict[str, int] = {}
        self.rewritten = False  # TableBatch: the window rewrote the table's files (DDL); never here

    def drain(self):
        pass  # TableBatch: waits for the record batches' writes; nothing is written here

    def add(self, batch):
        self.batches += 1
        vc = batch.column(batch.schema.get_field_index("op")).value_counts()
        for op, cnt in zip(vc.field("values").to_pylist(), vc.field("counts").to_pylist()):
            self.counts[op] = self.counts.get(op, 0) + cnt

    def abort(self):
        pass

    def commit(self, *, value_schema, position=None, truncated_at=None):
        from dagster_mysql_cdc.sink.delta import CommitOutcome
        from dagster_mysql_cdc.sink.lake import TablePaths, TableWriteResult

        self.writer.batches += self.batches
        none = CommitOutcome(False, 0, 0, 0)
        return TableWriteResult(
            self.database,
            self.table,
            sum(self.counts.values()),
            self.counts,
            TablePaths("", ""),
            none,
            none,
            0.0,
        )


def window(
    settings, info, start, end, db: str, server_id: int, writer, lake_dir: str, options=None
) -> tuple[int, dict]:
    """(b)/(c) the library's ``run_window`` with ``writer``; history read from ``lake_dir``;
    ``options``: the ``StreamOptions`` (default: the engine's, the run process reads the window)."""
    from dagster_mysql_cdc.engine.stream import StreamOptions
    from dagster_mysql_cdc.engine.window_run import run_window
    from dagster_mysql_cdc.sink.schema_history import SchemaHistory
    from dagster_mysql_cdc.sink.storage import StorageSettings
    from dagster_mysql_cdc.source.filters import TableFilter
    from dagster_mysql_cdc.source.types import TypeOptions

    storage = StorageSettings(base_uri=lake_dir)
    res = run_window(
        settings,
        info,
        replica_server_id=server_id,
        start=start,
        end=end,
        writer=writer,
        history=SchemaHistory(storage, SERVER),
        table_filter=TableFilter(database_include_list=(db,)),
        type_options=TypeOptions(),
        options=options or StreamOptions(),
        server_name=SERVER,
    )
    tw = res.tables.get((db, TABLE))
    rows = tw.rows if tw else 0
    notes = {
        "events": res.events_read,
        "transactions": res.transactions,
        "sink_s": round(tw.seconds, 2) if tw else 0.0,
        "spark_jobs": tw.spark_jobs if tw else 0,
        "rows_by_op": tw.rows_by_op if tw else {},
        "window_s": round(res.seconds, 2),
    }
    if res.decode:  # a window the README's defaults decode in parallel Spark tasks (c_cl, c_cc)
        d = res.decode[0]
        notes["decode"] = {
            k: d[k] for k in ("mode", "reason", "plan_seconds", "decode_seconds", "commit_seconds") if k in d
        }
    return rows, notes


def readme_stream_options(server_id: int):
    """The ``StreamOptions`` a run gets from ``MySqlCdcResource``'s defaults (the README's code
    location), which the engine's own ``StreamOptions()`` leaves out: ``stream_parallel_min_bytes``
    (a window at least that large is decoded by parallel Spark tasks) with its default server ids."""
    from dagster_mysql_cdc.dagster_integration.resources import MySqlCdcResource
    from dagster_mysql_cdc.engine.segments import ParallelOptions
    from dagster_mysql_cdc.engine.stream import StreamOptions

    fields = MySqlCdcResource.model_fields
    min_bytes = fields["stream_parallel_min_bytes"].default
    if min_bytes is None:
        return StreamOptions()
    return StreamOptions(
        parallel=ParallelOptions.build(
            min_bytes,
            fields["stream_parallel_server_ids"].default,
            server_id,
            fields["stream_parallel_max_tasks"].default,
        )
    )


def cold_window(start, end, db: str, server_id: int, lake_dir: str, remote: str) -> tuple[int, dict]:
    """(c_cold) the same window in a **fresh Python process** that pays every start-up cost a
    deployment's run worker pays: imports, the server facts, the Spark session (a local JVM, or
    a session on the Spark Connect server ``remote``), then ``run_window`` end to end with the
    options a daemon-launched run of the README's resources gets (:func:`readme_stream_options`:
    a window of at least ``stream_parallel_min_bytes`` is decoded by parallel Spark tasks)."""
    payload = {
        "start": start.to_dict(),
        "end": end.to_dict(),
        "db": db,
        "server_id": server_id,
        "lake": lake_dir,
    }
    return C.run_cold_child("bench.streaming", payload, remote)


def _cold_child(arg: str) -> int:
    """Body of :func:`cold_window`'s process; prints ``{"rows", "notes"}`` as JSON."""
    import json

    t0 = time.monotonic()
    from dagster_mysql_cdc.dagster_integration.resources import CdcLakeResource
    from dagster_mysql_cdc.events import BinlogPosition
    from dagster_mysql_cdc.source.connection import connect, server_info

    a = json.loads(arg)
    settings = C.cdc_settings()
    conn = connect(settings)
    try:
        info = server_info(conn)
    finally:
        conn.close()
    lake = CdcLakeResource(base_uri=a["lake"], spark_remote=os.environ.get("CDC_SPARK_REMOTE") or None)
    t_imports = time.monotonic()
    writer = lake.get_writer(SERVER)
    rows, notes = window(
        settings,
        info,
        BinlogPosition.from_dict(a["start"]),
        BinlogPosition.from_dict(a["end"]),
        a["db"],
        a["server_id"],
        writer,
        a["lake"],
        readme_stream_options(a["server_id"]),
    )
    return C.cold_child_result(rows, notes, t0, t_imports)


def verify_lake(lake_dir: str, db: str, expect: dict[str, int]) -> str:
    """Row counts of the written change log / state (not timed) against what was generated."""
    from deltalake import DeltaTable

    base = os.path.join(lake_dir, SERVER, db, TABLE)
    log = DeltaTable(f"{base}/changelog").to_pyarrow_table(columns=["op"])
    state = DeltaTable(f"{base}/state").to_pyarrow_table(columns=["__deleted"])
    live = state.num_rows - sum(state.column("__deleted").to_pylist())
    want_log = sum(expect.values())
    want_live = expect["c"] - expect["d"]
    ok = log.num_rows == want_log and live == want_live and state.num_rows == expect["c"]
    return (
        f"changelog {log.num_rows:,} rows (want {want_log:,}), state {state.num_rows:,} rows, "
        f"{live:,} live (want {want_live:,}) -> {'OK' if ok else 'MISMATCH'}"
    )


# -- driver --------------------------------------------------------------------------------------
def run(args: argparse.Namespace) -> dict[str, list[C.Measurement]]:
    from dagster_mysql_cdc.engine.initial_snapshot import run_snapshot
    from dagster_mysql_cdc.sink.lake import LakeWriter
    from dagster_mysql_cdc.sink.schema_history import SchemaHistory
    from dagster_mysql_cdc.sink.storage import StorageSettings
    from dagster_mysql_cdc.source.connection import connect, current_position, server_info
    from dagster_mysql_cdc.source.snapshot import SnapshotOptions
    from dagster_mysql_cdc.source.types import TypeOptions

    n = C.rows_of(args)
    settings = C.cdc_settings()
    spark = C.get_spark()
    print(f"\n### streaming benchmark: {n:,} row changes")
    results: dict[str, list[C.Measurement]] = {"a": [], "b0": [], "b": [], "c": []}
    if args.fresh_lake:
        results["c0"] = []
    if args.cold:
        results["c_cl"] = []
        if os.environ.get("CDC_SPARK_REMOTE"):
            results["c_cc"] = []
    with C.scratch_database("stream") as (root, db), C.scratch_dir("bench-stream-", args.keep) as tmp:
        counter = iter(range(10**6))

        def prepare() -> dict:
            """(Re)create the table, an empty-snapshot template lake, and the binlog range."""
            k = next(counter)
            with root.cursor() as cur:
                cur.execute(f"DROP TABLE IF EXISTS {db}.{TABLE}")
                cur.execute(C.TABLE_DDL.format(db=db, table=TABLE))
            # template lake: empty snapshot of the table (schema history + empty state/changelog)
            template = os.path.join(tmp, f"template-{k}")
            storage = StorageSettings(base_uri=template)
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
            conn = connect(settings)
            try:
                info = server_info(conn)
                start = current_position(conn, info)
                t0 = time.perf_counter()
                expect = generate_changes(root, db, n)
                gen_s = time.perf_counter() - t0
                end = current_position(conn, info)
            finally:
                conn.close()
            size = (end.pos - start.pos) if end.file == start.file else float("nan")
            print(
                f"[data] {sum(expect.values()):,} changes {expect} generated in {gen_s:.1f}s; "
                f"binlog {start.file}:{start.pos} -> {end.file}:{end.pos} ({size / 1e6:.1f} MB)",
                flush=True,
            )
            return {"info": info, "start": start, "end": end, "expect": expect, "template": template}

        def lake_copy(template: str, name: str) -> str:
            d = os.path.join(tmp, name)
            shutil.copytree(template, d)
            return d

        rng = prepare()

        def repetition(rep: int, attempt: int) -> dict[str, C.Measurement]:
            info, start, end, expect = rng["info"], rng["start"], rng["end"], rng["expect"]
            out = {}
            out["a"] = C.measure(
                "a",
                "raw python-mysql-replication iteration",
                lambda: raw_library(settings, start, end, db, C.SERVER_IDS["raw"]),
            )
            out["b0"] = C.measure(
                "b0",
                "our BinlogReader (no decode)",
                lambda: our_reader(settings, info, start, end, db, C.SERVER_IDS["reader"]),
            )
            lb = lake_copy(rng["template"], f"null-{rep}-{attempt}")
            out["b"] = C.measure(
                "b",
                "run_window, null sink (reader+history+convert+Arrow)",
                lambda: window(
                    settings,
                    info,
                    start,
                    end,
                    db,
                    C.SERVER_IDS["null_sink"],
                    NullWriter(StorageSettings(base_uri=lb)),
                    lb,
                ),
            )
            lc = lake_copy(rng["template"], f"e2e-{rep}-{attempt}")
            writer = C.TimedLakeWriter.create(spark, StorageSettings(base_uri=lc), SERVER)
            m = C.measure(
                "c",
                "run_window end-to-end -> local Delta (JVM start excluded)",
                lambda: window(settings, info, start, end, db, C.SERVER_IDS["end_to_end"], writer, lc),
            )
            m.notes["phases"] = dict(writer.phases)
            out["c"] = m
            print(f"       c: {m.notes}")
            print(f"       c {C.phase_summary(writer.phases)}")
            print(f"       c check: {verify_lake(lc, db, expect)}")
            if args.cold:
                for key, label, rem in C.cold_variants():
                    lk = lake_copy(rng["template"], f"{key}-{rep}-{attempt}")
                    mk = C.measure(
                        key,
                        label,
                        lambda lk=lk, rem=rem: cold_window(
                            start, end, db, C.SERVER_IDS["end_to_end"], lk, rem
                        ),
                    )
                    out[key] = mk
                    print(f"       {key}: {mk.notes}")
                    print(f"       {key} check: {verify_lake(lk, db, expect)}")
            if args.fresh_lake:
                lf = os.path.join(tmp, f"fresh-{rep}-{attempt}")
                wf = C.TimedLakeWriter.create(spark, StorageSettings(base_uri=lf), SERVER)
                m0 = C.measure(
                    "c0",
                    "run_window end-to-end, empty lake (no history, no merge)",
                    lambda: window(settings, info, start, end, db, C.SERVER_IDS["end_to_end_fresh"], wf, lf),
                )
                out["c0"] = m0
                print(f"       c0: {m0.notes}")
                print(f"       c0 {C.phase_summary(wf.phases)}")
            return out

        def regenerate() -> None:
            nonlocal rng
            rng = prepare()

        C.run_repetitions(
            args.repeat,
            repetition,
            results,
            on_range_lost=regenerate,
            retry_note="regenerating the binlog range and repeating",
        )
        info, start, end = rng["info"], rng["start"], rng["end"]
        template = rng["template"]

        def lake_copy_1(name: str) -> str:
            return lake_copy(template, name)

        a = C.best(results["a"])
        print(
            f"[data] range: {a.notes['events']:,} events read by the raw reader; rows of other tables in it: {a.notes['other_rows']:,}"
        )
        C.print_table(
            f"streaming, {n:,} row changes (best of {args.repeat}); ratio = rows/s vs (a)",
            results,
            "a",
            {"c": 0.9},
        )
        b, c = C.best(results["b"]), C.best(results["c"])
        print(
            f"ratio (b)/(a) = {b.rate / a.rate:.2f}   ratio (c)/(a) = {c.rate / a.rate:.2f} (target >= 0.90)"
        )
        C.print_cold_ratios(results, a, c, 0.8)
        print(
            f"c breakdown: window {c.notes['window_s']}s = sink {c.notes['sink_s']}s "
            f"({c.notes['spark_jobs']} Spark jobs) + source/convert {c.notes['window_s'] - c.notes['sink_s']:.2f}s; "
            f"CPU: python driver {c.cpu_self:.1f}s, Spark JVM+workers {c.cpu_children:.1f}s, mariadbd {c.cpu_server:.1f}s"
        )
        print(f"c {C.phase_summary(c.notes.get('phases', {}))}")
        B.streaming(
            settings,
            info,
            start,
            end,
            db,
            TABLE,
            template,
            SERVER,
            C.SERVER_IDS["sample"],
            base_us=1e6 / a.rate,
            spark=spark,
        )
        if args.profile:
            lp = lake_copy_1("profile")
            wp = LakeWriter(spark, StorageSettings(base_uri=lp), SERVER)
            print("\n[profile] end-to-end run_window (c) under pyinstrument ...", flush=True)
            C.run_profiled(lambda: window(settings, info, start, end, db, C.SERVER_IDS["profile"], wp, lp))
    return results


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m bench.streaming", description=__doc__.split("\n")[0])
    C.add_common_args(p)
    p.add_argument(
        "--fresh-lake",
        action="store_true",
        help="also run (c0): end-to-end into an empty lake (first write: no state merge)",
    )
    C.add_cold_args(p, "the end-to-end window")
    return p


def main(argv: list[str] | None = None) -> int:
    return C.bench_main(argv, build_parser(), run, _cold_child)


if __name__ == "__main__":
    sys.exit(main())
