"""Source → events → sink for one binlog window (Debezium's streaming phase, bounded).

:func:`run_window` reads the binlog from ``start`` to ``end`` (both transaction boundaries), decodes
every row with the schema in force at its position (schema history replayed up to ``start``, then
every DDL in the window applied in order), turns rows into Debezium change events (``c``/``u``/
``d``, ``t`` for TRUNCATE; a primary-key update becomes ``d`` of the old key + ``c`` of the new
key, as Debezium does), and commits each changed table's change log and state, then the window's
schema history records. Every commit is tagged with the window start, so re-running a window
(after a crash anywhere) commits nothing twice.
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import pyarrow as pa

from ..errors import CdcError, ConfigurationError
from ..events import BinlogPosition, ChangeEventBuilder, now_ms, snapshot_events
from ..sink.lake import LakeWriter, TableBatch, TableWriteResult
from ..source.binlog import BinlogReader, DdlStatement, RowsBatch, StatementDml, TransactionCommit
from ..source.catalog import read_table_schemas
from ..source.connection import ConnectionSettings, ServerInfo, connect
from ..source.ddl import SchemaCatalog
from ..source.filters import TableFilter
from ..source.foreign_keys import read_cascading_foreign_keys
from ..source.schema import TableSchema
from ..source.schema_history import HistoryRecord, SchemaHistory, records_from_outcome
from ..source.signals import InvalidSignal, Signal, matches_collection, parse_signal
from ..source.statements import dml_target_tables
from ..source.types import TableConverter, TypeOptions
from .gaps import (
    REPAIR_HEADER,
    BinlogGap,
    BinlogGapError,
    CascadeTracker,
    check_gap_handling,
    queue_repairs,
)
from .incremental import (
    ChunkPlan,
    IncrementalSnapshotError,
    IncrementalState,
    PlannedChunk,
    load_plan,
    plan_chunks,
    read_absent,
    read_chunk,
    save_plan,
    start_snapshot,
    stop_snapshot,
    with_paused,
)

log = logging.getLogger(__name__)

STREAM_APP_ID = "dagster-mysql-cdc/stream"


#: Debezium ``event.processing.failure.handling.mode`` values offered (not the silent ``ignore``).
FAILURE_HANDLING_MODES = ("fail", "warn", "skip")


class SchemaMismatchError(CdcError):
    """A binlog row event does not match the schema history at its position."""


@dataclass(frozen=True)
class StreamOptions:
    """Streaming options.

    Attributes:
        skip_unparseable_ddl: log and skip DDL that cannot be parsed (Debezium
            ``schema.history.internal.skip.unparseable.ddl``) instead of failing.
        provide_transaction_metadata: fill the ``transaction`` struct (Debezium
            ``provide.transaction.metadata``): id (GTID, else ``file:pos`` of the first event),
            ``total_order`` and ``data_collection_order`` (1-based).
        batch_rows: events per Arrow batch / Spark job for one table.
        deadline_s: wall-clock budget of the binlog read (``None``: unbounded).
        gap_handling: what to do with changes the binlog does not carry (statement DML,
            foreign-key cascades; see :mod:`.gaps`): ``repair`` queues a targeted incremental
            snapshot, ``warn`` only reports, ``fail`` raises :class:`~.gaps.BinlogGapError`.
        event_processing_failure_handling_mode: a row event that cannot be decoded (its columns
            differ from the schema history, or a value cannot be converted): ``fail`` (default)
            fails the window run; ``warn`` skips it and logs a WARNING with its position;
            ``skip`` skips it with one WARNING per window. Both report every skipped event in
            :attr:`WindowResult.events_skipped` (Debezium ``event.processing.failure.handling.mode``;
            its silent ``ignore`` is not offered).
        include_query: fill ``source.query`` with the statement of each row change (Debezium
            ``include.query``): needs MariaDB ``binlog_annotate_row_events=ON`` (its default) or
            MySQL ``binlog_rows_query_log_events=ON``.
    """

    skip_unparseable_ddl: bool = False
    provide_transaction_metadata: bool = False
    batch_rows: int = 50_000
    deadline_s: float | None = None
    gap_handling: str = "repair"
    include_query: bool = False
    event_processing_failure_handling_mode: str = "fail"

    def __post_init__(self) -> None:
        if self.event_processing_failure_handling_mode not in FAILURE_HANDLING_MODES:
            raise ConfigurationError(
                f"event_processing_failure_handling_mode={self.event_processing_failure_handling_mode!r} "
                f"is not valid; use one of {', '.join(FAILURE_HANDLING_MODES)} "
                "(Debezium event.processing.failure.handling.mode)"
            )


@dataclass
class WindowResult:
    """What one window read and committed."""

    start: BinlogPosition
    end: BinlogPosition
    tables: dict[tuple[str, str], TableWriteResult] = field(default_factory=dict)
    ddl_statements: int = 0
    events_read: int = 0
    transactions: int = 0
    last_event_ts_ms: int | None = None
    seconds: float = 0.0
    signal_log: list[str] = field(default_factory=list)
    signals_rejected: list[str] = field(default_factory=list)  # lines of signal_log that are WARNINGs
    chunks: list[dict] = field(default_factory=list)
    incremental_state: dict | None = None
    blocking_tables: list[tuple[str, str]] = field(default_factory=list)
    gaps: list[BinlogGap] = field(default_factory=list)
    #: events skipped by event.processing.failure.handling.mode=warn|skip (the first 100) and
    #: how many there were: {"table", "position", "reason"} each
    events_skipped: list[dict] = field(default_factory=list)
    events_skipped_count: int = 0

    @property
    def rows(self) -> int:
        return sum(t.rows for t in self.tables.values())

    @property
    def lag_ms(self) -> int | None:
        """Milliseconds between the newest event's commit on the source and now (Debezium's
        ``MilliSecondsBehindSource``)."""
        return None if self.last_event_ts_ms is None else max(0, now_ms() - self.last_event_ts_ms)


def merge_window_results(a: WindowResult, b: WindowResult) -> WindowResult:
    """One result for window ``a`` followed by window ``b`` (``b.start`` is where ``a`` ended):
    counts added up, per-table results combined (rows summed, the newer commit outcomes kept), the
    newest event time, ``b``'s end and incremental state."""
    tables = dict(a.tables)
    for k, tb in b.tables.items():
        ta = tables.get(k)
        if ta is None:
            tables[k] = tb
            continue
        by_op = dict(ta.rows_by_op)
        for op, n in tb.rows_by_op.items():
            by_op[op] = by_op.get(op, 0) + n
        tables[k] = replace(
            tb,
            rows=ta.rows + tb.rows,
            rows_by_op=by_op,
            seconds=ta.seconds + tb.seconds,
            spark_jobs=ta.spark_jobs + tb.spark_jobs,
        )
    return WindowResult(
        start=a.start,
        end=b.end,
        tables=tables,
        ddl_statements=a.ddl_statements + b.ddl_statements,
        events_read=a.events_read + b.events_read,
        transactions=a.transactions + b.transactions,
        last_event_ts_ms=b.last_event_ts_ms if b.last_event_ts_ms is not None else a.last_event_ts_ms,
        seconds=a.seconds + b.seconds,
        signal_log=a.signal_log + b.signal_log,
        signals_rejected=a.signals_rejected + b.signals_rejected,
        chunks=a.chunks + b.chunks,
        incremental_state=b.incremental_state,
        blocking_tables=b.blocking_tables,
        gaps=a.gaps + b.gaps,
    )


class _TableEvents:
    """Events of one table in the window: the builder of the current schema, finished record
    batches on their way to the sink (merged up to ``batch_rows`` while their schema is the same),
    and the table's :class:`~.sink.lake.TableBatch`, opened with the first record batch."""

    def __init__(
        self,
        schema: TableSchema,
        options: TypeOptions,
        server_name: str,
        batch_rows: int,
        open_sink: Callable[[TableSchema], TableBatch],
        on_failure: Callable[[str, str, str], None] | None = None,
    ):
        self.on_failure = on_failure  # (table, position, reason) of a skipped event; None: fail
        self.options = options
        self.server_name = server_name
        self.batch_rows = batch_rows
        self.open_sink = open_sink
        self.sink: TableBatch | None = None
        self.pending: list[pa.RecordBatch] = []
        self.pending_rows = 0
        self.truncated_at: BinlogPosition | None = None
        self._set_schema(schema)

    def _set_schema(self, schema: TableSchema) -> None:
        self.schema = schema
        self.conv = TableConverter(schema, self.options, "binlog")
        self.builder = ChangeEventBuilder(
            self.conv.arrow_schema,
            self.conv.table.primary_key,  # the message key (message.key.columns)
            server_name=self.server_name,
            database=schema.database,
            table=schema.table,
        )
        self.names = schema.column_names

    def flush(self) -> None:
        if len(self.builder):
            try:
                batch = self.builder.to_record_batch()
            except ValueError:
                # event.processing.failure.handling.mode=warn|skip: drop the events holding a
                # value that cannot be converted, report each, convert the rest
                bad = self.builder.unconvertible_events() if self.on_failure is not None else {}
                if not bad:
                    raise
                for i, why in sorted(bad.items()):
                    assert self.on_failure is not None
                    self.on_failure(self.schema.qualified_name, self.builder.event_position(i), why)
                self.builder.drop_events(set(bad))
                batch = self.builder.to_record_batch()
            if batch.num_rows:
                self._finished(batch)
            self._set_schema(self.schema)

    def _finished(self, batch: pa.RecordBatch) -> None:
        if self.pending and (
            not batch.schema.equals(self.pending[0].schema)
            or self.pending_rows + batch.num_rows > self.batch_rows
        ):
            self.hand_over()
        self.pending.append(batch)
        self.pending_rows += batch.num_rows
        if self.pending_rows >= self.batch_rows:
            self.hand_over()

    def hand_over(self) -> None:
        """Pass the pending record batches (as one) to the sink thread."""
        if not self.pending:
            return
        batch = (
            self.pending[0]
            if len(self.pending) == 1
            else (pa.Table.from_batches(self.pending).combine_chunks().to_batches()[0])
        )
        self.pending, self.pending_rows = [], 0
        if self.sink is None:
            self.sink = self.open_sink(self.conv.table)
        self.sink.add(batch)

    def finish(self) -> None:
        """Everything built so far goes to the sink."""
        self.flush()
        self.hand_over()

    def append_batch(self, batch: pa.RecordBatch) -> None:
        """Add a ready change-log batch (built column-wise, e.g. a snapshot chunk)."""
        self.flush()
        if batch.num_rows:
            self._finished(batch)

    def schema_changed(self, schema: TableSchema) -> None:
        if schema != self.schema:
            self.flush()
            self._set_schema(schema)

    def maybe_flush(self) -> None:
        if len(self.builder) >= self.batch_rows:
            self.flush()


def _remap(values: dict, names: list[str]) -> dict:
    """Row dict keyed ``UNKNOWN_COL<i>`` (no binlog_row_metadata) → keyed by schema names."""
    return {names[int(k[len("UNKNOWN_COL") :])]: v for k, v in values.items()}


@dataclass(frozen=True)
class IncrementalOptions:
    """Signal table and incremental snapshot options.

    Attributes:
        signal_table: ``db.table`` of the signal table (Debezium ``signal.data.collection``);
            ``None`` disables signals and incremental snapshots.
        chunk_size: rows per chunk (``incremental.snapshot.chunk.size``).
        max_chunks_per_run: chunks read per window run (bounds a run's snapshot work).
        watermark_strategy: ``insert_insert`` or ``insert_delete``
            (``incremental.snapshot.watermarking.strategy``).
        read_only: read-only incremental snapshot (``read.only``): no watermark rows; the binlog
            positions (and GTID sets) before and after each chunk SELECT are its watermarks.
    """

    signal_table: str | None = None
    chunk_size: int = 1024
    max_chunks_per_run: int = 64
    watermark_strategy: str = "insert_insert"
    read_only: bool = False


def run_window(
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
) -> WindowResult:
    """Read ``[start, end)`` of the binlog and commit its changes to the lake.

    With ``incremental_options.signal_table`` set, signal rows in the binlog are executed in
    order and an active incremental snapshot reads its next chunks (see :mod:`.incremental`): the
    window then extends to just after the last chunk's high watermark (``result.end``). A
    ``blocking`` execute-snapshot ends the window after its transaction and is reported in
    ``result.blocking_tables`` for the caller to snapshot.

    Raises:
        BinlogReadError (and subclasses): see :mod:`.source.binlog`.
        UnparseableDdlError: a DDL could not be parsed (unless ``skip_unparseable_ddl``).
        SchemaMismatchError: an event's columns differ from the schema history.
        SinkError: a commit failed.
    """
    t0 = time.monotonic()
    inc = incremental_options or IncrementalOptions()
    storage = writer.storage
    catalog = SchemaCatalog(history.catalog_at(start), server_version=info.version)
    result = WindowResult(start=start, end=end)
    tables: dict[tuple[str, str], _TableEvents] = {}
    records: list[HistoryRecord] = []
    fallback_conn = None
    tx_counter: dict = {"total": 0, "per_table": {}, "id": None}
    tx_records: list[dict] = []
    sig_key = tuple(inc.signal_table.split(".", 1)) if inc.signal_table else None
    check_gap_handling(options.gap_handling)
    # foreign keys whose actions change captured child rows without row events (see .gaps)
    conn = connect(settings)
    try:
        fks = {
            parent: kept
            for parent, keys in read_cascading_foreign_keys(conn, table_filter.literal_databases()).items()
            if (kept := [k for k in keys if table_filter.matches(*k.child) and k.child != sig_key])
        }
    finally:
        conn.close()
    cascades = CascadeTracker(fks)
    dml_gaps: dict[str, BinlogGap] = {}

    # -- incremental snapshot: plan this window's chunks (reused on retry) ---------------------
    state_before = incremental.copy() if incremental else None
    state = incremental.copy() if incremental else None
    chunks_by_open: dict[str, PlannedChunk] = {}
    chunks_by_close: dict[str, PlannedChunk] = {}
    positional: list[PlannedChunk] = []
    if sig_key and state is not None and state.active and not state.paused:
        plan = load_plan(storage, server_name, start)
        if plan is None:
            conn = connect(settings)
            try:
                current = read_table_schemas(conn, [p.key for p in state.tables])
            finally:
                conn.close()
            assert inc.signal_table is not None  # sig_key is set only with a signal table
            planned, after, plan_end = plan_chunks(
                settings,
                info,
                state,
                current,
                storage=storage,
                server_name=server_name,
                signal_table=inc.signal_table,
                chunk_size=inc.chunk_size,
                max_chunks=inc.max_chunks_per_run,
                type_options=type_options,
                strategy=inc.watermark_strategy,
                read_only=inc.read_only,
                epoch=start.epoch,
            )
            plan = save_plan(storage, server_name, ChunkPlan(start, plan_end, planned, after.to_dict()))
        else:
            result.signal_log.append(
                f"reusing the chunk plan of an earlier attempt ({len(plan.chunks)} chunks)"
            )
        state = IncrementalState.from_dict(plan.state_after)
        for c in plan.chunks:
            if c.low is not None and c.high is not None:
                positional.append(c)  # read-only watermarks: binlog positions, not rows
            else:
                chunks_by_open[c.open_id] = c
                chunks_by_close[c.close_id] = c
            chunks_by_close.setdefault(c.close_id, c)  # stop-snapshot bookkeeping
        if plan.end is not None and plan.end.with_epoch(start.epoch).sort_key() > end.sort_key():
            end = plan.end.with_epoch(start.epoch)
            result.end = end
    open_windows: dict[str, tuple[PlannedChunk, set]] = {}  # table -> (chunk, touched keys)
    # keys of the planned tables touched by this window before their chunk closes (outside chunk
    # windows and in earlier chunks' windows): a lake row the binlog changes in this window is not
    # deleted as absent (the binlog's own event says what happened)
    seen: dict[str, set] = {c.table: set() for c in [*chunks_by_close.values(), *positional]}
    stopped: set[str] = set()
    blocking: list[tuple[str, str]] = []

    reader = BinlogReader(
        settings,
        replica_server_id,
        start,
        end,
        is_mariadb=info.is_mariadb,
        deadline_s=options.deadline_s,
        # rows of tables that are neither captured nor the signal table are never decoded (the
        # loop below skips them anyway); their events still arrive, so positions are unchanged
        rows_filter=lambda db, t: (db, t) == sig_key or (db, t) in fks or table_filter.matches(db, t),
        annotate_rows=options.include_query,
    )

    def skipped(table: str, position: str, reason: str) -> None:
        """An event that cannot be decoded, skipped (event.processing.failure.handling.mode)."""
        result.events_skipped_count += 1
        if len(result.events_skipped) < 100:
            result.events_skipped.append({"table": table, "position": position, "reason": reason})
        if options.event_processing_failure_handling_mode == "warn":
            log.warning("Skipped an event of %s at %s that cannot be decoded: %s", table, position, reason)

    def table_events(db: str, t: str) -> _TableEvents | None:
        nonlocal fallback_conn
        if not table_filter.matches(db, t) or (db, t) == sig_key:
            return None
        schema = catalog.get(db, t)
        if schema is None:
            # Not in the history (captured table never snapshotted): current schema, verified below.
            if fallback_conn is None:
                fallback_conn = connect(settings)
            schema = read_table_schemas(fallback_conn, [(db, t)]).get((db, t))
            if schema is None:
                return None
            log.warning(
                "No schema history for %s.%s; using its current schema from information_schema", db, t
            )
            catalog.put(schema)  # seed the catalog for later DDL
        te = tables.get((db, t))
        if te is None:
            te = tables[(db, t)] = _TableEvents(
                schema,
                type_options,
                server_name,
                options.batch_rows,
                open_sink(db, t),
                on_failure=None if options.event_processing_failure_handling_mode == "fail" else skipped,
            )
        else:
            te.schema_changed(schema)
        return te

    def open_sink(db: str, t: str) -> Callable[[TableSchema], TableBatch]:
        def opener(schema: TableSchema) -> TableBatch:
            return writer.open_table_batch(
                db,
                t,
                primary_key=schema.primary_key,
                app_id=start.txn_app(STREAM_APP_ID),
                version=start.as_version(),
                epoch=start.epoch,
            )

        return opener

    def captured_tables() -> dict[tuple[str, str], TableSchema]:
        return {
            k: type_options.columns.keyed(v)  # message.key.columns: the key repairs use
            for k, v in catalog.tables().items()
            if table_filter.matches(*k) and k != sig_key
        }

    def reject(message: str) -> None:
        """A signal that cannot be executed: logged as WARNING, capture continues."""
        result.signal_log.append(message)
        result.signals_rejected.append(message)

    def on_signal(sig: Signal, ev: RowsBatch) -> None:
        nonlocal state, state_before, fallback_conn
        here = f"{ev.file}:{ev.pos}"
        if sig.type == "log":
            result.signal_log.append(f"log signal {sig.id}: " + (sig.message or "").replace("{}", here))
            return
        if sig.type == "pause-snapshot":
            state, state_before = with_paused(state, True), with_paused(state_before, True)
            result.signal_log.append(f"incremental snapshot paused by {sig.id} at {here}")
            return
        if sig.type == "resume-snapshot":
            state, state_before = with_paused(state, False), with_paused(state_before, False)
            result.signal_log.append(f"incremental snapshot resumed by {sig.id} at {here}")
            return
        if sig.type == "stop-snapshot":
            if sig.data_collections:
                stopped.update(
                    t for t in open_windows if any(matches_collection(p, t) for p in sig.data_collections)
                )
                stopped.update(
                    c.table
                    for c in chunks_by_close.values()
                    if any(matches_collection(p, c.table) for p in sig.data_collections)
                )
            else:
                stopped.update(c.table for c in chunks_by_close.values())
            state = stop_snapshot(state, list(sig.data_collections))
            state_before = stop_snapshot(state_before, list(sig.data_collections))
            result.signal_log.append(
                f"incremental snapshot stopped by {sig.id} at {here} ({list(sig.data_collections) or 'all tables'})"
            )
            return
        # execute-snapshot
        known = captured_tables()
        wanted = sorted(
            {k for k in known for p in sig.data_collections if matches_collection(p, f"{k[0]}.{k[1]}")}
        )
        unknown = [
            p for p in sig.data_collections if not any(matches_collection(p, f"{k[0]}.{k[1]}") for k in known)
        ]
        if unknown:
            reject(f"signal {sig.id}: unknown or not captured data-collections {unknown}; ignored")
        if not wanted:
            reject(f"signal {sig.id}: no captured table matches {list(sig.data_collections)}; skipped")
            return
        masked = [f"{d}.{t}" for d, t in wanted if type_options.columns.masked_key(known[(d, t)])]
        if masked and sig.snapshot_type != "blocking":
            # chunk bounds would carry raw key values into the cursor, run tags and the lake's plan
            reject(
                f"signal {sig.id}: {masked} have a masked key column, so they cannot be snapshotted "
                "incrementally (its raw key values would be stored); use a blocking snapshot"
            )
            wanted = [k for k in wanted if f"{k[0]}.{k[1]}" not in masked]
            if not wanted:
                return
        if sig.snapshot_type == "blocking":
            blocking.extend(wanted)
            result.signal_log.append(
                f"blocking snapshot {sig.id} of {[f'{d}.{t}' for d, t in wanted]}: streaming pauses at {here}"
            )
            return
        try:
            if sig.conditions and fallback_conn is None:
                fallback_conn = connect(settings)  # filters are tried on the server once
            state, msgs = start_snapshot(
                state,
                sig.id,
                wanted,
                sig.conditions,
                known,
                conn=fallback_conn,
                reason=sig.reason,
                delete_keys=sig.delete_keys,
            )
            state_before, _ = start_snapshot(
                state_before,
                sig.id,
                wanted,
                sig.conditions,
                known,
                reason=sig.reason,
                delete_keys=sig.delete_keys,
            )
        except (InvalidSignal, IncrementalSnapshotError) as e:
            reject(f"signal {sig.id} skipped: {e}")
            return
        stopped.difference_update(f"{d}.{t}" for d, t in wanted)
        result.signal_log.extend(msgs)

    def on_signal_rows(ev: RowsBatch) -> None:
        for row in ev.rows:
            values = row.get("values") or row.get("after_values") or {}
            if ev.op == "d":  # insert_delete strategy: deleting the open row is the high watermark
                c = chunks_by_close.get(str(values.get("id")))
                if c is not None:
                    close_window(c, ev)
                continue
            if ev.op != "c":
                continue
            try:
                sig = parse_signal(values)
            except InvalidSignal as e:
                reject(f"signal row at {ev.file}:{ev.pos} skipped: {e}")
                continue
            if sig.type == "snapshot-window-open":
                c = chunks_by_open.get(sig.id)
                if c is not None:
                    open_windows[c.table] = (c, set())
                continue
            if sig.type == "snapshot-window-close":
                c = chunks_by_close.get(sig.id)
                if c is not None:
                    close_window(c, ev)
                continue
            on_signal(sig, ev)

    def positional_watermarks(file: str, pos: int) -> None:
        """Read-only chunks: open at their low position, close (emit) at their high position."""
        here = start.at(file, pos).sort_key()
        for c in list(positional):
            assert c.low is not None and c.high is not None  # read-only chunks carry both positions
            low = BinlogPosition.from_dict(c.low).with_epoch(start.epoch)
            high = BinlogPosition.from_dict(c.high).with_epoch(start.epoch)
            if here >= high.sort_key():
                positional.remove(c)
                open_windows.setdefault(c.table, (c, set()))
                close_window(
                    c,
                    RowsBatch(
                        "", "", "r", [], high.file, high.pos, now_ms(), info.server_id, None, None, None, []
                    ),
                )
            elif here >= low.sort_key() and c.table not in open_windows:
                open_windows[c.table] = (c, set())

    def close_window(c: PlannedChunk, ev: RowsBatch) -> None:
        _, touched = open_windows.pop(c.table, (c, set()))
        if c.table in stopped:
            result.signal_log.append(f"chunk {c.id} of stopped table {c.table} dropped")
            return
        db, _, t = c.table.partition(".")
        te = table_events(db, t)
        if te is None:
            return
        target = te.conv.arrow_schema
        batch = _in_layout(read_chunk(storage, c), target)
        if touched:
            batch = _without_keys(batch, te.conv.table.primary_key, touched)
        emitted = batch.num_rows
        headers = {REPAIR_HEADER: c.reason} if c.reason else None

        def chunk_events(rows: pa.RecordBatch, op: str) -> pa.RecordBatch:
            """``op`` events of the chunk's rows at the high watermark (``source.snapshot=incremental``)."""
            return snapshot_events(
                rows,
                primary_key=te.conv.table.primary_key,
                server_name=server_name,
                server_id=ev.server_id,
                database=te.schema.database,
                table=te.schema.table,
                position=start.at(ev.file, ev.pos),
                snapshot_flags=pa.repeat(pa.scalar("incremental"), rows.num_rows),
                snapshot_ts_ms=ev.ts_ms,
                op=op,
                headers=headers,
            )

        te.append_batch(chunk_events(batch, "r"))
        from .absent_rows import delete_events, key_tuples

        info_row: dict[str, Any] = {
            "chunk": c.id,
            "table": c.table,
            "read": c.rows,
            "emitted": emitted,
            "dropped": c.rows - emitted,
        }
        gone_keys: set[tuple] = set()
        if c.deletes_path:
            # keys a repair found gone from the source (between the watermarks): deleted at the
            # high watermark unless the binlog changed them inside the window
            gone = _in_layout(read_chunk(storage, c, c.deletes_path), target)
            if touched:
                gone = _without_keys(gone, te.conv.table.primary_key, touched)
            te.append_batch(chunk_events(gone, "d"))
            info_row["deleted"] = gone.num_rows
            gone_keys = key_tuples(gone, te.conv.table.primary_key)
        deleted = 0
        absent = read_absent(storage, c)
        if absent is not None:  # lake rows of the chunk's key range the source no longer had
            deletes = delete_events(
                pa.table(
                    [
                        absent.column(f.name).cast(f.type)
                        if f.name in absent.column_names
                        else pa.nulls(absent.num_rows, f.type)
                        for f in target
                    ],
                    schema=target,
                ),
                schema=te.conv.table,
                value_schema=target,
                server_name=server_name,
                server_id=ev.server_id,
                position=start.at(ev.file, ev.pos),
                source_ts_ms=ev.ts_ms,
                # keys the binlog changed, and keys the repair's own deletes above already cover
                skip_keys=touched | seen.get(c.table, set()) | gone_keys,
            )
            deleted = deletes.num_rows
            te.append_batch(deletes)
        if c.table in seen:  # the next chunks of the table leave these keys to the binlog too
            seen[c.table] |= touched
        info_row["deleted_absent_from_source"] = deleted
        if c.reason:
            info_row["repair"] = c.reason
        result.chunks.append(info_row)

    try:
        for item in reader:
            if positional:
                if isinstance(item, RowsBatch):
                    positional_watermarks(item.file, item.pos)
                elif isinstance(item, DdlStatement):
                    positional_watermarks(item.file, item.pos)
            if isinstance(item, RowsBatch):
                if sig_key is not None and (item.database, item.table) == sig_key:
                    on_signal_rows(item)
                    continue
                if item.op != "c" and (item.database, item.table) in fks:
                    cascades.add((item.database, item.table), item.op, item.rows, f"{item.file}:{item.pos}")
                te = table_events(item.database, item.table)
                if te is None:
                    continue
                name = f"{item.database}.{item.table}"
                window = open_windows.get(name)
                try:
                    _add_rows(
                        te,
                        item,
                        tx_counter if options.provide_transaction_metadata else None,
                        touched=window[1] if window else seen.get(name),
                        include_query=options.include_query,
                    )
                except SchemaMismatchError as e:  # raised before any of the event's rows is added
                    if te.on_failure is None:
                        raise
                    te.on_failure(name, f"{item.file}:{item.pos}", str(e))
                    continue
                result.last_event_ts_ms = item.ts_ms
                te.maybe_flush()
            elif isinstance(item, TransactionCommit):
                result.transactions += 1
                if options.provide_transaction_metadata and tx_counter["total"]:
                    tx_records += _transaction_records(tx_counter, item)
                tx_counter.update(total=0, per_table={}, id=None)
                if blocking:
                    break  # streaming pauses here; the caller runs the blocking snapshot
            elif isinstance(item, StatementDml):
                targets = dml_target_tables(item.sql, item.database)
                if not targets and (
                    item.database is None or any(d == item.database for d, _ in captured_tables())
                ):
                    targets = [(item.database or "?", "?")]  # tables not named: reported, not repaired
                for db, t in targets or []:
                    if t != "?" and (not table_filter.matches(db, t) or (db, t) == sig_key):
                        continue
                    name = f"{db}.{t}"
                    if name not in dml_gaps:
                        dml_gaps[name] = BinlogGap(
                            kind="statement_dml",
                            table=name,
                            position=f"{item.file}:{item.pos}",
                            detail=(
                                f"statement-based DML (binlog_format=STATEMENT or MIXED, thread "
                                f"{item.thread}) has no row images: "
                                + (
                                    # the statement may hold values the column policy masks or leaves out
                                    "statement text withheld (column filters/masks are configured)"
                                    if type_options.columns.hides_values
                                    else repr(item.sql[:200])
                                )
                            ),
                        )
            elif isinstance(item, DdlStatement):
                outcomes = catalog.apply(
                    item.sql, item.database, skip_unparseable=options.skip_unparseable_ddl, logger=log
                )
                for o in outcomes:
                    if o.ignored:
                        continue
                    result.ddl_statements += 1
                    records.append(
                        records_from_outcome(o, item.end, len(records), item.ts_ms, item.server_id, item.gtid)
                    )
                    for db, t in o.truncated:
                        te = table_events(db, t)
                        if te is None:
                            continue
                        te.builder.add(
                            "t",
                            None,
                            None,
                            file=item.file,
                            pos=item.pos,
                            row=0,
                            ts_ms=now_ms(),
                            source_ts_ms=item.ts_ms,
                            server_id=item.server_id,
                            gtid=item.gtid,
                            thread=item.thread,
                            query=item.sql,
                        )
                        te.truncated_at = start.at(item.file, item.pos)
                    for ch in o.table_changes:
                        te = tables.get((ch.database, ch.table))
                        if te is not None and ch.schema is not None:
                            te.schema_changed(ch.schema)
                result.last_event_ts_ms = item.ts_ms
        if positional and not blocking:  # high watermarks at the very end of the window
            positional_watermarks(reader.position.file, reader.position.pos)
            for c in list(positional):  # a high watermark can equal the window end exactly
                assert c.high is not None
                positional_watermarks(c.high["file"], c.high["pos"])
        result.events_read = reader.events_read
        result.end = reader.position
        if blocking:
            # the planned chunks lie after the pause point: they are re-planned later
            state = state_before
            result.blocking_tables = list(dict.fromkeys(blocking))
        result.gaps = list(dml_gaps.values()) + cascades.gaps()
        if result.gaps:
            known = captured_tables()
            handled = result.gaps
            if options.gap_handling == "repair":
                # a repair stores raw key values (candidate keys, chunk bounds): not for masked keys
                masked = {
                    id(g)
                    for g in result.gaps
                    if type_options.columns.masked_key(known.get(_table_key(g.table)))
                }
                for g in result.gaps:
                    if id(g) in masked:
                        g.repair = (
                            "Not repaired: its key column is masked and a repair stores raw key values; "
                            "re-snapshot the table (materialize its asset)"
                        )
                handled = [g for g in result.gaps if id(g) not in masked]
            state = _handle_gaps(handled, state, options, inc, known, start)
        # a finished snapshot leaves nothing behind (a pause without active tables is a no-op, as in Debezium)
        result.incremental_state = state.to_dict() if state is not None and state.active else None
        version = start.as_version()
        app = start.txn_app(STREAM_APP_ID)  # versions restart in every offset epoch
        for te in tables.values():
            te.finish()
        for (db, t), te in tables.items():
            if te.sink is not None:
                result.tables[(db, t)] = te.sink.commit(
                    value_schema=te.conv.arrow_schema,
                    position=result.end,
                    truncated_at=te.truncated_at,
                )
        history.append(records, app_id=app, version=version)
        if tx_records:
            _append_transactions(storage, server_name, tx_records, app, version)
    except BaseException:
        for te in tables.values():
            if te.sink is not None:
                te.sink.abort()
        raise
    finally:
        if fallback_conn is not None:
            fallback_conn.close()
    for line in result.signal_log:
        log.log(logging.WARNING if line in result.signals_rejected else logging.INFO, line)
    result.seconds = time.monotonic() - t0
    return result


def _in_layout(rows: pa.Table, target: pa.Schema) -> pa.RecordBatch:
    """Stashed chunk rows in the table's current column layout, built column-wise (no per-row work)."""
    return pa.RecordBatch.from_arrays(
        [
            (
                rows.column(f.name).combine_chunks()
                if f.name in rows.column_names
                else pa.nulls(rows.num_rows, f.type)
            ).cast(f.type)
            for f in target
        ],
        schema=target,
    )


def _without_keys(batch: pa.RecordBatch, pk: Sequence[str], keys: set) -> pa.RecordBatch:
    """``batch`` without the rows whose (converted) primary key is in ``keys``."""
    key_cols = [batch.column(batch.schema.get_field_index(k)).to_pylist() for k in pk]
    return batch.filter(pa.array([tuple(k) not in keys for k in zip(*key_cols)], pa.bool_()))


def _table_key(name: str) -> tuple[str, str]:
    db, _, t = name.partition(".")
    return (db, t)


def _handle_gaps(
    gaps: list[BinlogGap],
    state: IncrementalState | None,
    options: StreamOptions,
    inc: IncrementalOptions,
    schemas: dict[tuple[str, str], TableSchema],
    start: BinlogPosition,
) -> IncrementalState | None:
    """Apply ``options.gap_handling`` to the window's gaps (sets each gap's ``repair`` text).

    Raises:
        BinlogGapError: ``gap_handling="fail"``.
    """
    if options.gap_handling == "fail":
        raise BinlogGapError(
            "Changes the binlog does not carry (binlog_gap_handling='fail'):\n"
            + "\n".join(f"  - {g.kind} on {g.table} at {g.position}: {g.detail}" for g in gaps)
            + "\nRe-snapshot the tables named (materialize their assets, or send an execute-snapshot "
            "signal), or set binlog_gap_handling='repair' to have them re-read automatically."
        )
    if options.gap_handling == "warn":
        for g in gaps:
            g.repair = "Not repaired (binlog_gap_handling='warn'): re-snapshot the table"
        return state
    if not inc.signal_table:
        for g in gaps:
            g.repair = (
                "Not repaired: repairs are incremental snapshots, which need the signal table "
                "(set signal_data_collection='db.debezium_signal' and create it)"
            )
        return state
    unknown = [g for g in gaps if g.table.endswith(".?")]
    for g in unknown:
        g.repair = (
            "Not repaired: the statement's tables could not be named; re-snapshot the database's tables"
        )
    return queue_repairs(
        state, [g for g in gaps if g not in unknown], schemas, f"repair-{start.version_tag()}"
    )


def _add_rows(
    te: _TableEvents, ev: RowsBatch, tx: dict | None, touched: set | None = None, include_query: bool = True
) -> None:
    """Add one rows event's change events to the table's builder; record touched keys of an open
    chunk window. ``include_query``: fill ``source.query`` with the statement the server annotated
    the rows event with (Debezium ``include.query``).

    The row images stay raw and are converted column-wise when the builder is flushed
    (``ChangeEventBuilder.add_raw``); only the primary-key values of updates (to detect a key
    change) and, inside a chunk window, of every image are converted here, per row. A key change
    becomes a delete of the old key + a create of the new key with ``__debezium.newkey`` /
    ``__debezium.oldkey`` headers, as Debezium emits it.
    """
    names = te.names
    if ev.column_names and ev.column_names[0].startswith("UNKNOWN_COL"):
        if len(ev.column_names) != len(names):
            raise SchemaMismatchError(
                f"Row event for {te.schema.qualified_name} at {ev.file}:{ev.pos} has "
                f"{len(ev.column_names)} columns, the schema history has {len(names)}: the history "
                "is out of sync; re-snapshot the table."
            )
        remap = True
    else:
        remap = False
        if ev.column_names != names:
            raise SchemaMismatchError(
                f"Row event for {te.schema.qualified_name} at {ev.file}:{ev.pos} has columns "
                f"{ev.column_names}, but the schema history at that position has {names}. The history "
                "is out of sync with the server (a DDL was missed or skipped); re-snapshot the table."
            )
    rows = ev.rows
    if not rows:
        return
    conv = te.conv
    pk = te.conv.table.primary_key
    common: dict[str, Any] = dict(
        file=ev.file,
        pos=ev.pos,
        ts_ms=now_ms(),
        source_ts_ms=ev.ts_ms,
        server_id=ev.server_id,
        gtid=ev.gtid,
        thread=ev.thread,
        query=ev.query if include_query else None,
    )

    def tx_orders(n: int) -> list[tuple[str, int, int]] | None:
        """Debezium transaction metadata of the next ``n`` events of this table:
        ``(id, total_order, data_collection_order)`` each (1-based orders), advancing ``tx``."""
        if tx is None:
            return None
        if tx["id"] is None:
            tx["id"] = ev.gtid or f"{ev.file}:{ev.pos}"
        key = te.schema.qualified_name
        t0, c0 = tx["total"], tx["per_table"].get(key, 0)
        tx["total"] = t0 + n
        tx["per_table"][key] = c0 + n
        tid = tx["id"]
        return [(tid, t0 + j, c0 + j) for j in range(1, n + 1)]

    keyf = conv.primary_key_function() if pk and (ev.op == "u" or touched is not None) else None
    if touched is not None and not pk:
        touched.add(())
    if ev.op == "u":
        before = [r["before_values"] for r in rows]
        after = [r["after_values"] for r in rows]
        if remap:
            before, after = [_remap(v, names) for v in before], [_remap(v, names) for v in after]
        bns = [r.get("before_none_sources") for r in rows]
        ans = [r.get("after_none_sources") for r in rows]
        ops: str | list[str] = "u"
        rownos: list[int] | None = None
        headers: dict[int, dict[str, str]] | None = None
        if keyf is not None and touched is None and conv.primary_keys_unchanged(before, after):
            keyf = None  # no key changed (equal raw values convert to equal key values)
        if keyf is not None:
            bk = [keyf(v, ns) for v, ns in zip(before, bns)]
            ak = [keyf(v, ns) for v, ns in zip(after, ans)]
            if touched is not None:
                touched.update(bk)
                touched.update(ak)
            if bk != ak:
                # Debezium: delete of the old key + create of the new key, linked by key headers
                ops, rownos, headers = [], [], {}
                b2: list = []
                a2: list = []
                bns2: list = []
                ans2: list = []

                def emit(op: str, bv: Any, av: Any, bn: Any, an: Any, i: int) -> None:
                    ops.append(op)
                    b2.append(bv)
                    a2.append(av)
                    bns2.append(bn)
                    ans2.append(an)
                    rownos.append(i)

                for i, (bv, av, bn, an, k0, k1) in enumerate(zip(before, after, bns, ans, bk, ak)):
                    if k0 == k1:
                        emit("u", bv, av, bn, an, i)
                        continue
                    headers[len(ops)] = {"__debezium.newkey": _key_json(pk, k1)}
                    emit("d", bv, None, bn, None, i)
                    headers[len(ops)] = {"__debezium.oldkey": _key_json(pk, k0)}
                    emit("c", None, av, None, an, i)
                before, after, bns, ans = b2, a2, bns2, ans2
        te.builder.add_raw(
            conv,
            ops,
            before,
            after,
            before_none_sources=bns,
            after_none_sources=ans,
            rows=rownos,
            tx=tx_orders(len(before)),
            headers=headers,
            **common,
        )
        return
    values = [r["values"] for r in rows]
    if remap:
        values = [_remap(v, names) for v in values]
    nss = [r.get("none_sources") for r in rows]
    if keyf is not None and touched is not None:
        touched.update(keyf(v, ns) for v, ns in zip(values, nss))
    orders = tx_orders(len(values))
    if ev.op == "c":
        te.builder.add_raw(conv, "c", None, values, after_none_sources=nss, tx=orders, **common)
    else:
        te.builder.add_raw(conv, "d", values, None, before_none_sources=nss, tx=orders, **common)


TRANSACTIONS_SCHEMA = pa.schema(
    [
        ("status", pa.string()),
        ("id", pa.string()),
        ("event_count", pa.int64()),
        (
            "data_collections",
            pa.list_(pa.struct([("data_collection", pa.string()), ("event_count", pa.int64())])),
        ),
        ("ts_ms", pa.int64()),
        ("file", pa.string()),
        ("pos", pa.int64()),
    ]
)


def _transaction_records(tx: dict, commit: TransactionCommit) -> list[dict]:
    """Debezium transaction metadata events (``BEGIN`` and ``END`` with per-table event counts)."""
    base = {"id": tx["id"], "ts_ms": commit.ts_ms, "file": commit.end.file, "pos": commit.end.pos}
    return [
        {**base, "status": "BEGIN", "event_count": None, "data_collections": None},
        {
            **base,
            "status": "END",
            "event_count": tx["total"],
            "data_collections": [
                {"data_collection": k, "event_count": v} for k, v in tx["per_table"].items()
            ],
        },
    ]


def _append_transactions(storage, server_name: str, rows: list[dict], app_id: str, version: int) -> None:
    """Append to ``<server>/_transactions`` (Debezium's transaction topic), idempotent per window
    (``(app_id, version)``: the window's per-epoch app id and start version)."""
    from ..sink.delta import append_rows

    table = pa.Table.from_pylist(rows, schema=TRANSACTIONS_SCHEMA)
    append_rows(storage, storage.uri(server_name, "_transactions"), table, app_id=app_id, version=version)


def _key_json(columns: Sequence[str], values: tuple) -> str:
    return json.dumps(dict(zip(columns, values)), default=str, separators=(",", ":"))


def snapshot_history_app_id(tables: Sequence[tuple[str, str]]) -> str:
    """History batch identity of a snapshot of ``tables`` (distinct per table set)."""
    digest = hashlib.sha1(",".join(f"{d}.{t}" for d, t in sorted(tables)).encode()).hexdigest()[:12]
    return f"dagster-mysql-cdc/snapshot/{digest}"
