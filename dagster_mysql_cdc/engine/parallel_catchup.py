"""Binlog catch-up that scales out: a large window decoded by parallel Spark tasks.

python-mysql-replication decodes row images in pure Python, on one core: a backlog (an outage, a
bulk load, a deployment starting from an old offset) is caught up no faster than one core decodes,
however many Spark executors there are (Debezium has the same single-reader limit). The decoding of
different parts of a binlog is independent work, so a window of at least
:attr:`~.segments.ParallelOptions.min_bytes` is decoded in parallel (:func:`parallel_window`, called
by :func:`.stream.run_window` before it reads a window itself):

1. **Plan** (run process, :func:`.segments.read_window_plan`): the window read once without
   decoding rows: transaction boundaries, the captured tables of each stretch, the DDL and
   statement-based DML in order. The window is cut at transaction boundaries into one segment per
   task (:func:`.segments.cut_segments`), balanced by bytes of captured tables' changes.
2. **Statements in order** (run process): the window's DDL is applied to the schema catalog in
   binlog order, exactly as the single reader applies it (:class:`.stream.BinlogStreamingSource`,
   with a writer that writes nothing): the catalog in force at each segment's start, the schema
   history records, what each DDL does to captured tables' rows (:mod:`.ddl_effects`), and the gaps
   of statement-based DML. The lake's schemas are conformed once for every schema a table has in
   the window (new columns, supertypes: :mod:`..sink.evolution`), so every segment writes its files
   in the same, final, lake schema.
3. **Decode** (Spark tasks, :mod:`.segment_reader`): one task per segment, each on its own
   replication connection (``server_id`` from :attr:`~.segments.ParallelOptions.server_ids`),
   decodes its segment with the single reader's code, starting from the catalog at its start, and
   writes the change-log and state-tail files itself; the run process gets a summary per segment.
4. **Commit** (run process): per table, each segment's files in binlog order with the Delta
   transaction identity ``(stream-segment app of the window's epoch, segment start)``, so a retried
   window skips the segments already committed; then the schema history (the window's identity,
   as the single reader commits it) and the transaction metadata records per segment. The
   sensor's cursor moves only after the run succeeded, i.e. after every commit.

Why commits go in binlog order although merge-on-read makes a keyed table's state independent of
commit order (newest ordering key wins, :mod:`..sink.current`): a compaction may run between two
commits, and after it a keyless table counts only tail rows newer than a value's compacted row, and
a cut marker (TRUNCATE, a dropped table) is consumed; an older segment committed after a newer one
would then be partly ignored. In order, each commit is newer than everything before it, as with the
single reader. Compaction, OPTIMIZE and VACUUM run after a table's last segment only.

What stays with the single reader (the run process reads the window as before; the decision and
its reason are logged and reported in ``WindowResult.decode``): a window below the threshold (the
steady state: no cost, not even a query), a window with a signal row or a statement-based write to
the signal table (signals and incremental-snapshot watermark windows are executed in binlog order
with the rows around them), a running incremental snapshot, the catch-up of stopped tables
(:mod:`.isolation`), a DDL that changes a captured table's key (its events are committed in two
parts, the second starting the state over), a state table keyed otherwise in the lake, a window of
one transaction, and a Spark job that fails (nothing is committed before every task finished:
executors that cannot reach the source, say, cost a second read, not the window).

Exactly-once and isolation: as in the single reader, a table whose events cannot be converted
stops alone and nothing of its window is committed (``since``: the window start); a table whose
commit fails after some of its segments committed stops at the first segment it lacks (``since``:
that segment's start), so its catch-up neither skips nor repeats events.
"""

from __future__ import annotations

import copy
import logging
import os
import pickle
import time
from dataclasses import replace
from typing import Any, cast

import pyarrow as pa

from ..errors import SinkError, describe
from ..events import BinlogPosition, change_log_schema
from ..sink.delta import commit_files, delete_files
from ..sink.lake import LakeWriter, TableBatch, TableWriteResult, root_cause
from ..sink.layout import LakeLayout
from ..sink.schema_history import SchemaHistory
from ..sink.spark_files import FileOutput, default_parallelism
from ..source.binlog import DdlStatement, StatementDml
from ..source.catalog import read_table_schemas
from ..source.connection import ConnectionSettings, ServerInfo, binlog_files, connect
from ..source.filters import TableFilter
from ..source.schema import TableSchema
from ..source.types import TableConverter, TypeOptions
from .incremental import IncrementalState
from .incremental_source import IncrementalOptions
from .isolation import lake_unreachable
from .segment_reader import SegmentJob, SegmentsDataSource, TableFiles, write_job_ref
from .segments import Segment, WindowPlan, cut_segments, file_offsets, read_window_plan
from .stream import (
    STREAM_APP_ID,
    TRANSACTIONS_SCHEMA,
    BinlogStreamingSource,
    PartialImages,
    StreamOptions,
    WindowResult,
    _combined,
    _table_key,
    _window_gaps,
)

log = logging.getLogger(__name__)

#: Delta ``txn`` app id of the segments' commits (per offset epoch: :meth:`BinlogPosition.txn_app`);
#: versioned by each segment's start, committed in binlog order.
SEGMENT_APP_ID = "dagster-mysql-cdc/stream-segment"


def window_size(
    settings: ConnectionSettings, start: BinlogPosition, end: BinlogPosition
) -> tuple[int, list[tuple[str, int]]]:
    """Bytes of binlog in ``[start, end)`` and ``SHOW BINARY LOGS`` (only read when the window spans
    files: a window inside one file costs no query)."""
    if start.file == end.file:
        return max(0, end.pos - start.pos), [(start.file, end.pos)]
    conn = connect(settings)
    try:
        files = binlog_files(conn)
    finally:
        conn.close()
    base = file_offsets(files, start)
    return max(0, base.get(end.file, 0) + end.pos - start.pos), files


def parallel_window(
    settings: ConnectionSettings,
    info: ServerInfo,
    *,
    replica_server_id: int,
    start: BinlogPosition,
    end: BinlogPosition,
    writer: LakeWriter,
    history: SchemaHistory,
    table_filter: TableFilter,
    type_options: TypeOptions,
    options: StreamOptions,
    server_name: str,
    incremental: IncrementalState | None = None,
    incremental_options: IncrementalOptions | None = None,
    catch_up: bool = False,
    resume_at: dict | None = None,
) -> tuple[WindowResult | None, list[dict]]:
    """Decode and commit ``[start, end)`` in parallel Spark tasks when it is large enough and can
    be (see the module docs).

    Returns:
        ``(result, decisions)``: the window's :class:`~.stream.WindowResult` when it was decoded in
        parallel (``result.decode`` holds the decision), else ``None`` and the decision to report
        with the single reader's result (``[]`` for a window below the threshold: nothing to say).
    Raises:
        BinlogReadError (and subclasses): the window's plan could not be read.
        UnparseableDdlError, BinlogGapError, SinkError: as :func:`.stream.run_window` raises them.
    """
    par = options.parallel
    if par is None:
        return None, []
    t0 = time.monotonic()
    size, files = window_size(settings, start, end)
    if size < par.min_bytes:
        return None, []
    decision: dict[str, Any] = {"window_start": str(start), "window_end": str(end), "bytes": size}

    def single(reason: str, level: int = logging.INFO) -> tuple[None, list[dict]]:
        decision.update(mode="single", reason=reason, seconds=round(time.monotonic() - t0, 3))
        log.log(level, "Window %s -> %s (%d bytes) read by the run process: %s", start, end, size, reason)
        return None, [decision]

    if catch_up or resume_at:
        return single("stopped tables are caught up in binlog order by the run process")
    if incremental is not None and incremental.active and not incremental.paused:
        return single("an incremental snapshot is running: its watermark windows are read in binlog order")
    inc = incremental_options or IncrementalOptions()
    plan = read_window_plan(
        settings,
        info,
        start=start,
        end=end,
        server_id=replica_server_id,
        files=files,
        table_filter=table_filter,
        signal_table=inc.signal_table,
        deadline_s=options.deadline_s,
    )
    decision.update(captured_bytes=plan.captured, plan_seconds=round(plan.seconds, 3))
    if plan.reasons:
        return single(plan.reasons[0])
    if plan.captured < par.min_bytes:
        return single(
            f"{plan.captured} of its bytes change captured tables (stream_parallel_min_bytes={par.min_bytes})"
        )
    tasks = min(par.max_tasks or default_parallelism(writer.spark), len(par.server_ids))
    segments = cut_segments(plan, max(1, tasks), par.server_ids)
    if len(segments) < 2 <= tasks:
        return single("the window is one transaction: nothing to decode in parallel")
    prepared = _prepare(
        settings,
        info,
        plan,
        segments,
        writer=writer,
        history=history,
        table_filter=table_filter,
        type_options=type_options,
        options=options,
        server_name=server_name,
        signal_table=inc.signal_table,
    )
    if isinstance(prepared, str):
        return single(prepared)
    decision.update(
        mode="parallel",
        segments=[
            {"start": str(s.start), "end": str(s.end), "bytes": s.weight, "server_id": s.server_id}
            for s in segments
        ],
    )
    t1 = time.monotonic()
    try:
        summaries = _decode(writer, prepared.job)
    except Exception as e:  # nothing is committed yet: the run process reads the window itself
        prepared.source.close()
        return single(
            f"the Spark tasks failed ({root_cause(e)}); every task connects to the source itself: "
            "the executors need network access to it and the capture user's grants must cover "
            "their hosts (docs/operations.md, 'Parallel catch-up of a backlog')",
            logging.WARNING,
        )
    decision["decode_seconds"] = round(time.monotonic() - t1, 3)
    for d, s in zip(decision["segments"], summaries):
        d.update(seconds=round(s["seconds"], 3), cpu_seconds=round(s["cpu_seconds"], 3))
    t2 = time.monotonic()
    try:
        result = _finish(prepared, summaries, writer, history, options, inc, type_options, incremental)
    finally:
        prepared.source.close()
    decision.update(commit_seconds=round(time.monotonic() - t2, 3), seconds=round(time.monotonic() - t0, 3))
    result.decode = [decision]
    result.seconds = time.monotonic() - t0
    log.info(
        "Window %s -> %s (%d bytes) decoded in %d parallel segments: plan %.1fs, decode %.1fs, commit %.1fs",
        start,
        result.end,
        size,
        len(segments),
        plan.seconds,
        decision["decode_seconds"],
        decision["commit_seconds"],
    )
    return result, [decision]


def _rekeyed(
    before: dict[tuple[str, str], TableSchema],
    after: dict[tuple[str, str], TableSchema],
    changed: set[tuple[str, str]],
    type_options: TypeOptions,
) -> list[str]:
    """Tables of ``changed`` (with row events in the window) whose message key a DDL changed."""
    keyed = type_options.columns.keyed
    return [
        f"{k[0]}.{k[1]}"
        for k, old in before.items()
        if k in changed
        and (new := after.get(k)) is not None
        and new is not old
        and tuple(keyed(new).primary_key) != tuple(keyed(old).primary_key)
    ]


class _PlanningBatch:
    """A table batch of the run process's pass over the window's statements: holds nothing."""

    def add(self, batch: pa.RecordBatch) -> None:
        pass

    def drain(self) -> None:
        pass

    def abort(self) -> None:
        pass


class _PlanningWriter:
    """The lake writer of that pass: the segments' tasks write the tables."""

    def __init__(self, storage: Any):
        self.storage = storage

    def open_table_batch(self, *args: Any, **kwargs: Any) -> _PlanningBatch:
        return _PlanningBatch()


class _Prepared:
    """What :func:`_prepare` leaves for the decode and the commits."""

    def __init__(self, plan: WindowPlan, segments: list[Segment], source: BinlogStreamingSource):
        self.plan = plan
        self.segments = segments
        self.source = source  # the run process's pass: catalog, history records, effects, gaps
        self.logs: dict[tuple[str, str], list[pa.Schema]] = {}
        self.value_schema: dict[tuple[str, str], pa.Schema] = {}
        self.keys: dict[tuple[str, str], tuple[str, ...]] = {}
        self.job: SegmentJob = cast(SegmentJob, None)


def _prepare(
    settings: ConnectionSettings,
    info: ServerInfo,
    plan: WindowPlan,
    segments: list[Segment],
    *,
    writer: LakeWriter,
    history: SchemaHistory,
    table_filter: TableFilter,
    type_options: TypeOptions,
    options: StreamOptions,
    server_name: str,
    signal_table: str | None,
) -> _Prepared | str:
    """Steps 2 of the module docs: the statements in order, the catalogs, the lake's schemas, the
    job. Returns why the window must be read by the run process instead (a ``str``)."""
    start = plan.start
    result = WindowResult(start=start, end=plan.end)
    source = BinlogStreamingSource(
        settings,
        info,
        start=start,
        writer=cast(Any, _PlanningWriter(writer.storage)),
        history=history,
        table_filter=table_filter,
        type_options=type_options,
        options=options,
        server_name=server_name,
        signal_table=signal_table,
        result=result,
    )
    try:
        versions: dict[tuple[str, str], list[TableSchema]] = {}
        rekeyed: set[str] = set()

        def note_versions() -> None:
            for key in set(plan.tables) | set(source.tables):
                s = source.catalog.get(*key)
                seen = versions.setdefault(key, [])
                if s is not None and (not seen or seen[-1] != s):
                    seen.append(s)

        note_versions()
        catalogs = []
        snapshot = None
        pending = list(plan.statements)
        for seg in segments:
            if snapshot is None:
                snapshot = copy.deepcopy(source.catalog)
            catalogs.append(snapshot)
            while pending and start.at(pending[0].file, pending[0].pos).sort_key() < seg.end.sort_key():
                item = pending.pop(0)
                if isinstance(item, DdlStatement):
                    before = source.catalog.tables()
                    source._on_ddl(item)
                    rekeyed.update(_rekeyed(before, source.catalog.tables(), plan.tables, type_options))
                    snapshot = None  # the next segment starts from the catalog after it
                    note_versions()
                elif isinstance(item, StatementDml):
                    source._on_statement_dml(item)
        rekeyed.update(f"{d}.{t}" for (d, t), te in source.tables.items() if te.sink_from is not None)
        if rekeyed:
            source.close()
            return (
                f"a DDL changes the key of {', '.join(sorted(rekeyed))}: its events before and after "
                "are committed in two parts, in order"
            )
        unknown = [k for k in plan.tables if not versions.get(k)]
        if unknown:  # no schema history (never snapshotted): the tasks read information_schema as the
            conn = connect(settings)  # single reader does, at their first event
            try:
                for k, s in read_table_schemas(conn, unknown).items():
                    versions[k] = [s]
            finally:
                conn.close()
        prepared = _Prepared(plan, segments, source)
        outputs: dict[tuple[str, str], TableFiles] = {}
        for key in sorted(versions):
            schemas = versions[key]
            if not schemas:
                continue  # unknown to the server: the tasks skip its events as the single reader does
            convs = [TableConverter(s, type_options, "binlog") for s in schemas]
            pk = tuple(convs[-1].table.primary_key)
            logs = [change_log_schema(c.arrow_schema, tuple(c.table.primary_key)) for c in convs]
            tb = _SegmentBatch(
                writer,
                key[0],
                key[1],
                primary_key=pk,
                app_id=start.txn_app(SEGMENT_APP_ID),
                version=segments[0].start.as_version(),
                snapshot_position=None,
                epoch=start.epoch,
            )
            try:
                if tb.model_changed:
                    source.close()
                    return (
                        f"{key[0]}.{key[1]} is keyed otherwise in the lake: its state starts over, "
                        "in binlog order"
                    )
                outs = tb.conform_to(
                    logs
                )  # the lake takes every schema of the window (rewrites, if any, now)
            finally:
                tb.abort()
            outputs[key] = TableFiles(outs[0], outs[1])
            prepared.logs[key] = logs
            prepared.value_schema[key] = convs[-1].arrow_schema
            prepared.keys[key] = pk
        tx = (
            FileOutput(
                LakeLayout(writer.storage, server_name).transactions(), TRANSACTIONS_SCHEMA, kind="rows"
            )
            if options.provide_transaction_metadata
            else None
        )
        prepared.job = SegmentJob(
            settings=settings,
            info=info,
            segments=tuple(segments),
            catalogs=tuple(catalogs),
            table_filter=table_filter,
            type_options=type_options,
            options=replace(options, parallel=None),
            server_name=server_name,
            signal_table=signal_table,
            tables=outputs,
            transactions=tx,
            storage_ref=writer._storage_ref,
            rows_per_file=writer.rows_per_file,
            foreign_keys=source.fks,
        )
        return prepared
    except BaseException:
        source.close()
        raise


def _decode(writer: LakeWriter, job: SegmentJob) -> list[dict]:
    """Step 3: one Spark job, one task per segment; the summaries in segment order.

    Raises:
        Exception: a task failed (Spark's error).
    """
    name = writer.register_data_source(SegmentsDataSource)
    ref = writer.private_file(lambda files: write_job_ref(job, files))
    try:
        rows = writer.active_spark().read.format(name).option("job_ref", ref).load().collect()
    finally:
        os.remove(ref)
    summaries = sorted((pickle.loads(bytes(r["summary"])) for r in rows), key=lambda s: s["segment"])
    if [s["segment"] for s in summaries] != list(range(len(job.segments))):
        raise SinkError(
            f"the segment tasks returned {len(summaries)} summaries for {len(job.segments)} segments"
        )
    return summaries


class _SegmentBatch(TableBatch):
    """One table's batch of one segment, committed by the run process (the data files written by
    the segment's task): a :class:`~..sink.table_batch.TableBatch` fed with files instead of record
    batches, so the commit, the key model, the lake schemas and the batch identity are the single
    reader's."""

    def conform_to(self, logs: list[pa.Schema]) -> list[FileOutput]:
        """Conform the lake to each change-log schema the table has in the window, in order, as
        the single reader's batch does record batch by record batch; returns the last outputs
        (change log, tail), whose schemas hold every column and type of the window."""
        outs: list[FileOutput] = []
        for s in logs:
            outs = self._job_outputs(s)
        return outs

    def written(self, files: dict) -> None:
        """The files a task wrote for this batch (``{"log", "tail", "rows_by_op"}``)."""
        self._job_written([list(files["log"]), list(files["tail"])])
        self.rows_by_op = dict(files["rows_by_op"])


class _DeferredMaintenance:
    """The lake writer as a table's batches but the last of a window see it: compaction, OPTIMIZE
    and VACUUM wait for the table's last segment (once per window, as with the single reader)."""

    def __init__(self, writer: LakeWriter):
        self._writer = writer

    def __getattr__(self, name: str) -> Any:
        return getattr(self._writer, name)

    def compact_if_due(self, paths: Any, primary_key: Any, *, force: bool = False) -> dict:
        return {}

    def maybe_compact(self, table_uri: str) -> None:
        return None

    def vacuum_if_due(self, paths: Any) -> dict:
        return {}


def _merge_gaps(source: BinlogStreamingSource, summaries: list[dict]) -> None:
    """The segments' foreign-key cascades and partial row images, in binlog order, into the run
    process's trackers (the first position of each wins, keys and counts add up)."""
    seen = source.cascades._seen
    partial = PartialImages()
    for s in summaries:
        for k, e in s["cascades"].items():
            if k not in seen:
                seen[k] = {**e, "pairs": list(e["pairs"])}
            else:
                seen[k]["events"] += e["events"]
                seen[k]["pairs"] += e["pairs"]
        for name, e in s["partial"].items():
            cur = partial.tables.get(name)
            if cur is None:
                partial.tables[name] = {**e, "keys": dict(e["keys"]), "images": set(e["images"])}
            else:
                cur["keys"].update(e["keys"])
                cur["rows"] += e["rows"]
                cur["images"] |= e["images"]
                cur["whole"] = cur["whole"] or e["whole"]
    source.partial = partial


def _finish(
    prepared: _Prepared,
    summaries: list[dict],
    writer: LakeWriter,
    history: SchemaHistory,
    options: StreamOptions,
    inc: IncrementalOptions,
    type_options: TypeOptions,
    incremental: IncrementalState | None,
) -> WindowResult:
    """Step 4: gaps, then the commits in binlog order (see the module docs).

    Raises:
        BinlogGapError: ``binlog_gap_handling="fail"`` and the window has gaps (nothing committed).
        SinkError: tables failed to commit and the lake itself fails (the window is retried).
    """
    plan, segments, source = prepared.plan, prepared.segments, prepared.source
    start = plan.start
    result = source.result
    result.end = plan.end
    result.events_read = plan.events_read
    result.transactions = plan.transactions
    result.last_event_ts_ms = plan.last_event_ts_ms
    failed: dict[tuple[str, str], str] = {}
    for s in summaries:
        for k, t in s["tables"].items():
            if t["failed"] is not None:
                failed.setdefault(k, t["failed"])
        result.events_skipped_count += s["skipped_count"]
        result.events_skipped = (result.events_skipped + s["skipped"])[:100]
    if options.event_processing_failure_handling_mode == "warn":
        for ev in result.events_skipped:
            log.warning(
                "Skipped an event of %s at %s that cannot be decoded: %s",
                ev["table"],
                ev["position"],
                ev["reason"],
            )
    _merge_gaps(source, summaries)
    result.ddl_effects = list(source.ddl_log)
    if source.resnapshots:
        again = [k for k in map(_table_key, source.resnapshots) if source.catalog.get(*k) is not None]
        result.blocking_tables = list(dict.fromkeys(again))
    state = incremental.copy() if incremental is not None else None
    result.gaps = source.gaps()
    if result.gaps:
        state = _window_gaps(
            result.gaps, state, options, inc, source.captured_tables(), type_options, start
        )  # raises BinlogGapError with binlog_gap_handling="fail": before any commit
    result.incremental_state = state.to_dict() if state is not None and state.active else None
    storage = writer.storage
    app = start.txn_app(SEGMENT_APP_ID)
    for key in prepared.logs:
        name = f"{key[0]}.{key[1]}"
        parts = [(seg, s["tables"][key]) for seg, s in zip(segments, summaries) if key in s["tables"]]
        if key in failed:
            _delete_unused(writer, key, [f for _, f in parts])
            result.failed_tables[name] = {"error": failed[key], "since": start.to_dict()}
            log.warning("%s stops: %s", name, failed[key])
            continue
        for n, (seg, files) in enumerate(parts):
            last = n == len(parts) - 1
            tb = _SegmentBatch(
                writer if last else cast(Any, _DeferredMaintenance(writer)),
                key[0],
                key[1],
                primary_key=prepared.keys[key],
                app_id=app,
                version=seg.start.as_version(),
                snapshot_position=None,
                epoch=start.epoch,
            )
            try:
                tb.conform_to(prepared.logs[key])
                tb.written(files)
                written: TableWriteResult = tb.commit(
                    value_schema=prepared.value_schema[key], position=plan.end
                )
            except Exception as e:  # this table stops alone, at the first segment it lacks
                log.warning("%s stops at %s: %s", name, seg.start, e, exc_info=True)
                _delete_unused(writer, key, [f for _, f in parts[n + 1 :]])
                result.failed_tables[name] = {
                    "error": describe(e, 2000),
                    "since": seg.start.to_dict(),
                }
                result.tables.pop(key, None)
                break
            prev = result.tables.get(key)
            result.tables[key] = written if prev is None else _combined(prev, written)
    if result.failed_tables:
        lake_down = lake_unreachable(storage, source.server_name)
        if lake_down is not None:
            raise SinkError(
                f"{len(result.failed_tables)} table(s) could not be committed and the lake itself fails "
                f"({lake_down}); the window is retried. First error: "
                f"{next(iter(result.failed_tables.values()))['error']}"
            )
    history.append(source.records, app_id=start.txn_app(STREAM_APP_ID), version=start.as_version())
    tx_uri = LakeLayout(storage, source.server_name).transactions()
    for seg, s in zip(segments, summaries):
        if s["transactions"]:
            commit_files(
                storage,
                tx_uri,
                TRANSACTIONS_SCHEMA,
                s["transactions"],
                mode="append",
                app_id=app,
                version=seg.start.as_version(),
            )
    return result


def _delete_unused(writer: LakeWriter, key: tuple[str, str], parts: list[dict]) -> None:
    """Delete files tasks wrote for a table that will not commit them (best effort: uncommitted
    files are invisible, and VACUUM removes what is left)."""
    paths = writer.paths(*key)
    for files in parts:
        delete_files(writer.storage, paths.changelog, list(files["log"]))
        delete_files(writer.storage, paths.tail, list(files["tail"]))
