"""Binlog catch-up that scales out: a large window decoded by parallel Spark tasks.

python-mysql-replication decodes row images in pure Python, on one core: a backlog (an outage, a
bulk load, a deployment starting from an old offset) is caught up no faster than one core decodes,
however many Spark executors there are (Debezium has the same single-reader limit). The decoding of
different parts of a binlog is independent work, so a window of at least
:attr:`~.segments.ParallelOptions.min_bytes` is decoded in parallel (:func:`parallel_window`, called
by :func:`.window_run.run_window` before it reads a window itself):

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
from ..source.schema import TableSchema
from ..source.types import TableConverter, TypeOptions
from .row_events import PartialImages
from .segment_reader import SegmentJob, SegmentsDataSource, TableFiles, write_job_ref
from .segments import ParallelOptions, Segment, WindowPlan, cut_segments, file_offsets, read_window_plan
from .stream import STREAM_APP_ID, BinlogStreamingSource, StreamOptions, StreamWindow
from .transactions import TRANSACTIONS_SCHEMA
from .window_gaps import settle_window
from .window_result import WindowResult, combined_write_results

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
    settings: ConnectionSettings, info: ServerInfo, **window: Any
) -> tuple[WindowResult | None, list[dict]]:
    """:func:`decode_in_parallel` of the window given as :func:`.window_run.run_window`'s keyword
    arguments (``window``: the other fields of :class:`~.stream.StreamWindow`).

    Raises:
        TypeError: a keyword is not a field of :class:`~.stream.StreamWindow`.
    """
    return decode_in_parallel(StreamWindow(settings, info, **window))


def decode_in_parallel(window: StreamWindow) -> tuple[WindowResult | None, list[dict]]:
    """Decode and commit ``window`` in parallel Spark tasks when it is large enough and can be
    (see the module docs).

    Returns:
        ``(result, decisions)``: the window's :class:`~.window_result.WindowResult` when it was
        decoded in parallel (``result.decode`` holds the decision), else ``None`` and the decision
        to report with the single reader's result (``[]`` for a window below the threshold:
        nothing to say).
    Raises:
        BinlogReadError (and subclasses): the window's plan could not be read.
        UnparseableDdlError, BinlogGapError, SinkError: as :func:`.window_run.run_window` raises them.
    """
    par = window.options.parallel
    if par is None:
        return None, []
    size, files = window_size(window.settings, window.start, window.end)
    if size < par.min_bytes:
        return None, []
    # the session starts (a cold run: Spark Connect's client import, its session, the data
    # source's registration) while the planning pass reads the window; either path writes with it
    window.writer.start_spark()
    return ParallelCatchUp(window, size).run(files)


class ParallelCatchUp:
    """The parallel read of one window of ``size`` bytes, and the decision it reports
    (``WindowResult.decode``): steps 1 to 4 of the module docs, or why the run process reads
    the window instead."""

    def __init__(self, window: StreamWindow, size: int):
        self.window = window
        self.size = size
        self.t0 = time.monotonic()
        self.decision: dict[str, Any] = {
            "window_start": str(window.start),
            "window_end": str(window.end),
            "bytes": size,
        }

    def single(self, reason: str, level: int = logging.INFO) -> tuple[None, list[dict]]:
        """The run process reads the window (``reason``: why, logged and reported)."""
        w = self.window
        self.decision.update(mode="single", reason=reason, seconds=round(time.monotonic() - self.t0, 3))
        log.log(
            level, "Window %s -> %s (%d bytes) read by the run process: %s", w.start, w.end, self.size, reason
        )
        return None, [self.decision]

    def run(self, files: list[tuple[str, int]]) -> tuple[WindowResult | None, list[dict]]:
        """Plan, prepare, decode and commit the window (see :func:`decode_in_parallel`)."""
        w = self.window
        if w.catch_up or w.resume_at:
            return self.single("stopped tables are caught up in binlog order by the run process")
        if w.incremental is not None and w.incremental.active and not w.incremental.paused:
            return self.single(
                "an incremental snapshot is running: its watermark windows are read in binlog order"
            )
        planned = self._plan(files)
        if isinstance(planned, str):
            return self.single(planned)
        plan, segments = planned
        prepared = _prepare(w, plan, segments)
        if isinstance(prepared, str):
            return self.single(prepared)
        self.decision.update(
            mode="parallel",
            segments=[
                {"start": str(s.start), "end": str(s.end), "bytes": s.weight, "server_id": s.server_id}
                for s in segments
            ],
        )
        t1 = time.monotonic()
        try:
            summaries = _decode(w.writer, prepared.job)
        except Exception as e:  # nothing is committed yet: the run process reads the window itself
            prepared.source.close()
            return self.single(
                f"the Spark tasks failed ({root_cause(e)}); every task connects to the source itself: "
                "the executors need network access to it and the capture user's grants must cover "
                "their hosts (docs/operations.md, 'Parallel catch-up of a backlog')",
                logging.WARNING,
            )
        return self._commit(prepared, summaries, t1), [self.decision]

    def _plan(self, files: list[tuple[str, int]]) -> tuple[WindowPlan, list[Segment]] | str:
        """Step 1: the window's plan and segments, or why it is read by the run process."""
        w = self.window
        par = cast(ParallelOptions, w.options.parallel)
        plan = read_window_plan(
            w.settings,
            w.info,
            start=w.start,
            end=w.end,
            server_id=w.replica_server_id,
            files=files,
            table_filter=w.table_filter,
            signal_table=w.incremental_options.signal_table,
            deadline_s=w.options.deadline_s,
        )
        self.decision.update(captured_bytes=plan.captured, plan_seconds=round(plan.seconds, 3))
        if plan.reasons:
            return plan.reasons[0]
        if plan.captured < par.min_bytes:
            return (
                f"{plan.captured} of its bytes change captured tables "
                f"(stream_parallel_min_bytes={par.min_bytes})"
            )
        tasks = min(par.max_tasks or default_parallelism(w.writer.spark), len(par.server_ids))
        segments = cut_segments(plan, max(1, tasks), par.server_ids)
        if len(segments) < 2 <= tasks:
            return "the window is one transaction: nothing to decode in parallel"
        return plan, segments

    def _commit(self, prepared: _Prepared, summaries: list[dict], t1: float) -> WindowResult:
        """Step 4, timed into the decision."""
        decision, w = self.decision, self.window
        decision["decode_seconds"] = round(time.monotonic() - t1, 3)
        for d, s in zip(decision["segments"], summaries):
            d.update(seconds=round(s["seconds"], 3), cpu_seconds=round(s["cpu_seconds"], 3))
        t2 = time.monotonic()
        try:
            result = _finish(prepared, summaries, w)
        finally:
            prepared.source.close()
        decision.update(
            commit_seconds=round(time.monotonic() - t2, 3), seconds=round(time.monotonic() - self.t0, 3)
        )
        result.decode = [decision]
        result.seconds = time.monotonic() - self.t0
        log.info(
            "Window %s -> %s (%d bytes) decoded in %d parallel segments: "
            "plan %.1fs, decode %.1fs, commit %.1fs",
            w.start,
            result.end,
            self.size,
            len(prepared.segments),
            prepared.plan.seconds,
            decision["decode_seconds"],
            decision["commit_seconds"],
        )
        return result


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


def _prepare(window: StreamWindow, plan: WindowPlan, segments: list[Segment]) -> _Prepared | str:
    """Steps 2 of the module docs: the statements in order, the catalogs, the lake's schemas, the
    job. Returns why the window must be read by the run process instead (a ``str``)."""
    result = WindowResult(start=plan.start, end=plan.end)
    planning = cast(Any, _PlanningWriter(window.writer.storage))
    source = BinlogStreamingSource.of_window(window, result, planning)
    try:
        catalogs, versions, rekeyed = _statements_in_order(source, plan, segments, window.type_options)
        if rekeyed:
            source.close()
            return (
                f"a DDL changes the key of {', '.join(sorted(rekeyed))}: its events before and after "
                "are committed in two parts, in order"
            )
        prepared = _Prepared(plan, segments, source)
        outputs = _conform_tables(window, prepared, versions)
        if isinstance(outputs, str):
            source.close()
            return outputs
        prepared.job = _segment_job(window, prepared, catalogs, outputs)
        return prepared
    except BaseException:
        source.close()
        raise


def _statements_in_order(
    source: BinlogStreamingSource, plan: WindowPlan, segments: list[Segment], type_options: TypeOptions
) -> tuple[list[Any], dict[tuple[str, str], list[TableSchema]], set[str]]:
    """The window's DDL and statement-based DML applied in binlog order, as the single reader
    applies them. Returns the catalog in force at each segment's start, every schema each
    captured table has in the window (in order) and the tables whose message key a DDL changed."""
    start = plan.start
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
                source.on_ddl(item)
                rekeyed.update(_rekeyed(before, source.catalog.tables(), plan.tables, type_options))
                snapshot = None  # the next segment starts from the catalog after it
                note_versions()
            elif isinstance(item, StatementDml):
                source.on_statement_dml(item)
    rekeyed.update(f"{d}.{t}" for (d, t), te in source.tables.items() if te.sink_from is not None)
    unknown = [k for k in plan.tables if not versions.get(k)]
    if unknown and not rekeyed:  # no schema history (never snapshotted): the tasks read
        conn = connect(source.settings)  # information_schema as the single reader does, at their first event
        try:
            for k, s in read_table_schemas(conn, unknown).items():
                versions[k] = [s]
        finally:
            conn.close()
    return catalogs, versions, rekeyed


def _conform_tables(
    window: StreamWindow, prepared: _Prepared, versions: dict[tuple[str, str], list[TableSchema]]
) -> dict[tuple[str, str], TableFiles] | str:
    """The lake takes every schema each table has in the window (rewrites, if any, now); returns
    each table's outputs, or why the window is read by the run process (a ``str``)."""
    start, writer = prepared.plan.start, window.writer
    outputs: dict[tuple[str, str], TableFiles] = {}
    for key in sorted(versions):
        schemas = versions[key]
        if not schemas:
            continue  # unknown to the server: the tasks skip its events as the single reader does
        convs = [TableConverter(s, window.type_options, "binlog") for s in schemas]
        pk = tuple(convs[-1].table.primary_key)
        logs = [change_log_schema(c.arrow_schema, tuple(c.table.primary_key)) for c in convs]
        tb = _SegmentBatch(
            writer,
            key[0],
            key[1],
            primary_key=pk,
            app_id=start.txn_app(SEGMENT_APP_ID),
            version=prepared.segments[0].start.as_version(),
            snapshot_position=None,
            epoch=start.epoch,
        )
        try:
            if tb.model_changed:
                return (
                    f"{key[0]}.{key[1]} is keyed otherwise in the lake: its state starts over, "
                    "in binlog order"
                )
            outs = tb.conform_to(logs)
        finally:
            tb.abort()
        outputs[key] = TableFiles(outs[0], outs[1])
        prepared.logs[key] = logs
        prepared.value_schema[key] = convs[-1].arrow_schema
        prepared.keys[key] = pk
    return outputs


def _segment_job(
    window: StreamWindow, prepared: _Prepared, catalogs: list[Any], outputs: dict[tuple[str, str], TableFiles]
) -> SegmentJob:
    """Step 3's job: what every segment task is given."""
    writer, options = window.writer, window.options
    tx = (
        FileOutput(
            LakeLayout(writer.storage, window.server_name).transactions(), TRANSACTIONS_SCHEMA, kind="rows"
        )
        if options.provide_transaction_metadata
        else None
    )
    return SegmentJob(
        settings=window.settings,
        info=window.info,
        segments=tuple(prepared.segments),
        catalogs=tuple(catalogs),
        table_filter=window.table_filter,
        type_options=window.type_options,
        options=replace(options, parallel=None),
        server_name=window.server_name,
        signal_table=window.incremental_options.signal_table,
        tables=outputs,
        transactions=tx,
        storage_ref=writer._storage_ref,
        rows_per_file=writer.rows_per_file,
        foreign_keys=prepared.source.fks,
    )


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
    partial = PartialImages()
    for s in summaries:
        source.cascades.merge(s["cascades"])
        partial.merge(s["partial"])
    source.partial = partial


def _finish(prepared: _Prepared, summaries: list[dict], window: StreamWindow) -> WindowResult:
    """Step 4: gaps, then the commits in binlog order (see the module docs).

    Raises:
        BinlogGapError: ``binlog_gap_handling="fail"`` and the window has gaps (nothing committed).
        SinkError: tables failed to commit and the lake itself fails (the window is retried).
    """
    plan, source = prepared.plan, prepared.source
    result = source.result
    result.end = plan.end
    result.events_read = plan.events_read
    result.transactions = plan.transactions
    result.last_event_ts_ms = plan.last_event_ts_ms
    failed = _collect_summaries(result, summaries, window.options)
    _merge_gaps(source, summaries)
    state = window.incremental.copy() if window.incremental is not None else None
    state = settle_window(source, state, window.incremental_options)  # BinlogGapError: before any commit
    result.incremental_state = state.to_dict() if state is not None and state.active else None
    for key in prepared.logs:
        _commit_table(prepared, summaries, window.writer, key, failed.get(key))
    if result.failed_tables:
        source.raise_if_lake_down()
    _commit_history_and_transactions(prepared, summaries, window.history)
    return result


def _collect_summaries(result: WindowResult, summaries: list[dict], options: StreamOptions) -> dict:
    """The segments' skipped events into ``result``; returns each table's first failure."""
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
    return failed


def _commit_table(
    prepared: _Prepared, summaries: list[dict], writer: LakeWriter, key: tuple[str, str], failed: str | None
) -> None:
    """One table's segments committed in binlog order; a table that fails stops alone (``since``:
    the window start when a segment could not write it, else the first segment it lacks)."""
    start, result = prepared.plan.start, prepared.source.result
    name = f"{key[0]}.{key[1]}"
    parts = [(seg, s["tables"][key]) for seg, s in zip(prepared.segments, summaries) if key in s["tables"]]
    if failed is not None:
        _delete_unused(writer, key, [f for _, f in parts])
        result.failed_tables[name] = {"error": failed, "since": start.to_dict()}
        log.warning("%s stops: %s", name, failed)
        return
    for n, (seg, files) in enumerate(parts):
        last = n == len(parts) - 1
        tb = _SegmentBatch(
            writer if last else cast(Any, _DeferredMaintenance(writer)),
            key[0],
            key[1],
            primary_key=prepared.keys[key],
            app_id=start.txn_app(SEGMENT_APP_ID),
            version=seg.start.as_version(),
            snapshot_position=None,
            epoch=start.epoch,
        )
        try:
            tb.conform_to(prepared.logs[key])
            tb.written(files)
            written: TableWriteResult = tb.commit(
                value_schema=prepared.value_schema[key], position=prepared.plan.end
            )
        except Exception as e:  # this table stops alone, at the first segment it lacks
            log.warning("%s stops at %s: %s", name, seg.start, e, exc_info=True)
            _delete_unused(writer, key, [f for _, f in parts[n + 1 :]])
            result.failed_tables[name] = {"error": describe(e, 2000), "since": seg.start.to_dict()}
            result.tables.pop(key, None)
            return
        prev = result.tables.get(key)
        result.tables[key] = written if prev is None else combined_write_results(prev, written)


def _commit_history_and_transactions(
    prepared: _Prepared, summaries: list[dict], history: SchemaHistory
) -> None:
    """The window's schema history (the window's identity, as the single reader commits it), then
    each segment's transaction metadata records (the segment's identity)."""
    start, source = prepared.plan.start, prepared.source
    storage = source.writer.storage
    history.append(source.records, app_id=start.txn_app(STREAM_APP_ID), version=start.as_version())
    tx_uri = LakeLayout(storage, source.server_name).transactions()
    for seg, s in zip(prepared.segments, summaries):
        if s["transactions"]:
            commit_files(
                storage,
                tx_uri,
                TRANSACTIONS_SCHEMA,
                s["transactions"],
                mode="append",
                app_id=start.txn_app(SEGMENT_APP_ID),
                version=seg.start.as_version(),
            )


def _delete_unused(writer: LakeWriter, key: tuple[str, str], parts: list[dict]) -> None:
    """Delete files tasks wrote for a table that will not commit them (best effort: uncommitted
    files are invisible, and VACUUM removes what is left)."""
    paths = writer.paths(*key)
    for files in parts:
        delete_files(writer.storage, paths.changelog, list(files["log"]))
        delete_files(writer.storage, paths.tail, list(files["tail"]))
