"""Source → events → sink for one binlog window (Debezium's streaming phase, bounded).

:func:`run_window` reads the binlog from ``start`` to ``end`` (both transaction boundaries), decodes
every row with the schema in force at its position (schema history replayed up to ``start``, then
every DDL in the window applied in order), turns rows into Debezium change events (``c``/``u``/
``d``, ``t`` for TRUNCATE; a primary-key update becomes ``d`` of the old key + ``c`` of the new
key, as Debezium does), and commits each changed table's change log and state, then the window's
schema history records. Every commit is tagged with the window start, so re-running a window
(after a crash anywhere) commits nothing twice.

The window is split as Debezium splits its connector: :func:`run_window` coordinates (Debezium's
``ChangeEventSourceCoordinator``) the :class:`BinlogStreamingSource` (this module: events →
envelopes → record batches → commit), the incremental snapshot source
(:class:`~.incremental_source.IncrementalSnapshotSource`: the window's chunks and watermarks) and
the :class:`~.signals.SignalProcessor` (signal-table rows).
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from functools import partial
from typing import Any

import pyarrow as pa
from pymysql.constants import CLIENT

from ..errors import (
    FAILURE_HANDLING_MODES,
    CdcError,
    ConfigurationError,
    SinkError,
    ValueConversionError,
    describe,
)
from ..events import BinlogPosition, ChangeEventBuilder, now_ms
from ..sink.delta import handle_cache, preload
from ..sink.lake import LakeWriter, TableBatch, TableWriteResult, run_concurrently
from ..sink.layout import LakeLayout
from ..sink.schema_history import HistoryRecord, SchemaHistory, records_from_outcome
from ..source.binlog import BinlogReader, DdlStatement, RowsBatch, StatementDml, TransactionCommit
from ..source.catalog import list_tables, read_table_schemas
from ..source.connection import ConnectionSettings, ServerInfo, connect
from ..source.ddl import SchemaCatalog
from ..source.filters import TableFilter
from ..source.foreign_keys import CascadingForeignKey, read_cascading_foreign_keys
from ..source.schema import TableSchema
from ..source.statements import (
    UnreadableSignalStatement,
    dml_target_tables,
    signal_statement_rows,
    trigger_events,
    updated_columns,
)
from ..source.triggers import (
    HIDDEN,
    TriggerVisibility,
    read_trigger_visibility,
    read_triggers,
    trigger_writes,
)
from ..source.types import TableConverter, TypeOptions
from .ddl_effects import REASON_HEADER, DdlEffect, ddl_effects
from .gaps import (
    BinlogGap,
    BinlogGapError,
    CascadeTracker,
    check_gap_handling,
    queue_repairs,
)
from .incremental import IncrementalState
from .incremental_source import IncrementalOptions, IncrementalSnapshotSource
from .isolation import lake_unreachable
from .segments import ParallelOptions
from .signals import SignalProcessor

log = logging.getLogger(__name__)

STREAM_APP_ID = "dagster-mysql-cdc/stream"


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
        together_rows: at the window's end, the tables with at most this many events left are
            written by one Spark job together (:meth:`..sink.lake.LakeWriter.write_together`): a
            window that changes hundreds of tables a little pays one job, not one per table.
        commit_workers: tables committed at the same time at the window's end (their Delta
            commits are independent; delta-rs and object stores serve them in parallel).
        deadline_s: wall-clock budget of the binlog read (``None``: unbounded).
        gap_handling: what to do with changes the binlog does not carry (statement DML,
            foreign-key cascades; see :mod:`.gaps`): ``repair`` queues a targeted incremental
            snapshot, ``warn`` only reports, ``fail`` raises :class:`~.gaps.BinlogGapError`.
        event_processing_failure_handling_mode: a row event that cannot be decoded (its columns
            differ from the schema history, or a value cannot be converted): ``fail`` (default)
            fails the window run (a value: :class:`~..errors.ValueConversionError` naming the
            table, the column and the event's position); ``warn`` skips it and logs a WARNING
            with its position;
            ``skip`` skips it with one WARNING per window. Both report every skipped event in
            :attr:`WindowResult.events_skipped` (Debezium ``event.processing.failure.handling.mode``;
            its silent ``ignore`` is not offered).
        include_query: fill ``source.query`` with the statement of each row change (Debezium
            ``include.query``): needs MariaDB ``binlog_annotate_row_events=ON`` (its default) or
            MySQL ``binlog_rows_query_log_events=ON``.
        parallel: decode large windows (a backlog) in parallel Spark tasks
            (:mod:`.parallel_catchup`); ``None``: the run process reads every window.
    """

    skip_unparseable_ddl: bool = False
    provide_transaction_metadata: bool = False
    batch_rows: int = 50_000
    together_rows: int = 10_000
    commit_workers: int = 8
    deadline_s: float | None = None
    gap_handling: str = "repair"
    include_query: bool = False
    event_processing_failure_handling_mode: str = "fail"
    parallel: ParallelOptions | None = None

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
    #: what DDL did to captured tables' rows (lines for people, see .ddl_effects)
    ddl_effects: list[str] = field(default_factory=list)
    #: ``db.table`` -> ``{"error", "since"}`` (``since``: the window start, a position's dict) of
    #: the tables whose events of the window could not be written: they stop alone (nothing of
    #: theirs committed by this window), the others are committed (see .isolation)
    failed_tables: dict[str, dict] = field(default_factory=dict)
    #: how windows of at least ``StreamOptions.parallel.min_bytes`` were decoded: ``{"mode":
    #: "parallel" | "single", "reason", "segments", ...}`` each (see .parallel_catchup)
    decode: list[dict] = field(default_factory=list)

    @property
    def rows(self) -> int:
        return sum(t.rows for t in self.tables.values())

    @property
    def lag_ms(self) -> int | None:
        """Milliseconds between the newest event's commit on the source and now (Debezium's
        ``MilliSecondsBehindSource``)."""
        return None if self.last_event_ts_ms is None else max(0, now_ms() - self.last_event_ts_ms)


def _combined(a: TableWriteResult, b: TableWriteResult) -> TableWriteResult:
    """One table's two results in one window (parts, see :class:`_TableEvents`) or in two windows
    of a following run: counts added up, ``b``'s commit outcomes (the newer), and the tail files
    of both commits (``extra["tail_files"]``: the run's checks read the rows of every key the
    run changed from them, not only the last commit's keys; dropped when one commit's files are
    unknown, so the checks read the current state instead)."""
    by_op = dict(a.rows_by_op)
    for op, n in b.rows_by_op.items():
        by_op[op] = by_op.get(op, 0) + n
    extra = dict(b.extra)
    files_a, files_b = a.extra.get("tail_files"), b.extra.get("tail_files")
    if files_a and files_b:
        extra["tail_files"] = list(dict.fromkeys([*files_a, *files_b]))
    else:
        extra.pop("tail_files", None)
    return replace(
        b,
        rows=a.rows + b.rows,
        rows_by_op=by_op,
        seconds=a.seconds + b.seconds,
        spark_jobs=a.spark_jobs + b.spark_jobs,
        extra=extra,
    )


def merge_window_results(a: WindowResult, b: WindowResult) -> WindowResult:
    """One result for window ``a`` followed by window ``b`` (``b.start`` is where ``a`` ended):
    counts added up, per-table results combined (rows summed, the newer commit outcomes kept), the
    newest event time, ``b``'s end and incremental state; a table that failed in both keeps
    ``a``'s failure (its stop position is the earlier window's start)."""
    tables = dict(a.tables)
    for k, tb in b.tables.items():
        ta = tables.get(k)
        tables[k] = tb if ta is None else _combined(ta, tb)
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
        events_skipped=(a.events_skipped + b.events_skipped)[:100],
        events_skipped_count=a.events_skipped_count + b.events_skipped_count,
        ddl_effects=a.ddl_effects + b.ddl_effects,
        failed_tables={**b.failed_tables, **a.failed_tables},  # a table stops at its first failure
        decode=a.decode + b.decode,
    )


@dataclass
class _SinkPart:
    """A finished part of a table's events in the window (see :meth:`_TableEvents.schema_changed`)."""

    sink: TableBatch
    value_schema: pa.Schema
    truncated_at: BinlogPosition | None


class _TableEvents:
    """Events of one table in the window: the builder of the current schema, finished record
    batches on their way to the sink (merged up to ``batch_rows`` while their schema is the same),
    and the table's :class:`~.sink.lake.TableBatch`, opened with the first record batch.

    A DDL that changes the table's primary key (or replaces the table by one keyed otherwise)
    ends the current batch: the events before it are one *part* (merged into the state by the old
    key), those after it the next (by the new key), committed in order with the batch identities
    of the window start and of the DDL's position (:meth:`parts`)."""

    def __init__(
        self,
        schema: TableSchema,
        options: TypeOptions,
        server_name: str,
        batch_rows: int,
        open_sink: Callable[[TableSchema, BinlogPosition | None], TableBatch],
        on_failure: Callable[[str, str, str], None] | None = None,
    ):
        self.on_failure = on_failure  # (table, position, reason) of a skipped event; None: fail
        self.options = options
        self.server_name = server_name
        self.batch_rows = batch_rows
        self.open_sink = open_sink
        self.sink: TableBatch | None = None
        self.sink_key: tuple[str, ...] | None = None
        self.sink_from: BinlogPosition | None = None  # None: the window start
        self.done_parts: list[_SinkPart] = []
        self.pending: list[pa.RecordBatch] = []
        self.pending_rows = 0
        self.truncated_at: BinlogPosition | None = None
        #: why this table's events of the window cannot be written (its later events are dropped
        #: and nothing of it is committed: the table stops alone, see .isolation)
        self.failed: str | None = None
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

    def fail(self, error: BaseException) -> None:
        """This table's window cannot be written: drop what is pending, keep the first error."""
        if self.failed is None:
            self.failed = describe(error, 2000)
            log.warning("%s stops: %s", self.schema.qualified_name, self.failed, exc_info=error)
        self.pending, self.pending_rows = [], 0
        self._set_schema(self.schema)  # a fresh builder: events of a failed table are not kept

    def flush(self) -> None:
        if self.failed is not None:
            self._set_schema(self.schema)
            return
        try:
            self._flush()
        except Exception as e:  # a value that cannot be converted (failure mode "fail")
            self.fail(e)

    def _flush(self) -> None:
        if len(self.builder):
            try:
                batch = self.builder.to_record_batch()
            except ValueError:
                # event.processing.failure.handling.mode: fail names the table, the column and the
                # event's position; warn|skip drop the events holding a value that cannot be
                # converted, report each, and convert the rest
                bad = self.builder.unconvertible_values()
                if not bad:
                    raise
                if self.on_failure is None:
                    i, (column, why) = min(bad.items())
                    raise ValueConversionError(
                        self.schema.qualified_name, column, self.builder.event_position(i), why
                    ) from None
                for i, (column, why) in sorted(bad.items()):
                    self.on_failure(
                        self.schema.qualified_name, self.builder.event_position(i), f"{column}: {why}"
                    )
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
        if not self.pending or self.failed is not None:
            self.pending, self.pending_rows = [], 0
            return
        try:
            self._hand_over()
        except Exception as e:  # this table's sink failed (an earlier record batch, a rewrite ...)
            self.fail(e)

    def _hand_over(self) -> None:
        batch = (
            self.pending[0]
            if len(self.pending) == 1
            else (pa.Table.from_batches(self.pending).combine_chunks().to_batches()[0])
        )
        self.pending, self.pending_rows = [], 0
        if self.sink is None:
            self.sink = self.open_sink(self.conv.table, self.sink_from)
            self.sink_key = tuple(self.conv.table.primary_key)
        self.sink.add(batch)

    def ensure_sink(self) -> None:
        """Open the table's batch now (a DDL: the commit gives the lake its new columns even when
        no event of the table follows in the window)."""
        self.flush()
        self.hand_over()
        if self.sink is None and self.failed is None:
            try:
                self.sink = self.open_sink(self.conv.table, self.sink_from)
            except Exception as e:
                self.fail(e)

    def finish(self) -> None:
        """Everything built so far goes to the sink."""
        self.flush()
        self.hand_over()

    def take_small(self, limit: int) -> pa.RecordBatch | None:
        """Flush, then take the pending events as one record batch when there are at most
        ``limit`` of them (to be written with other tables' in one job), opening the table's
        batch; otherwise hand them over as usual and return ``None``."""
        self.flush()
        if not self.pending or self.failed is not None or self.pending_rows > limit:
            self.hand_over()
            return None
        batch = (
            self.pending[0]
            if len(self.pending) == 1
            else pa.Table.from_batches(self.pending).combine_chunks().to_batches()[0]
        )
        self.pending, self.pending_rows = [], 0
        try:
            if self.sink is None:
                self.sink = self.open_sink(self.conv.table, self.sink_from)
                self.sink_key = tuple(self.conv.table.primary_key)
        except Exception as e:
            self.fail(e)
            return None
        return batch

    def append_batch(self, batch: pa.RecordBatch) -> None:
        """Add a ready change-log batch (built column-wise, e.g. a snapshot chunk)."""
        self.flush()
        if batch.num_rows:
            self._finished(batch)

    def schema_changed(self, schema: TableSchema, at: BinlogPosition | None = None) -> None:
        """The table's schema changed (a DDL at ``at``): later events use it. When the message key
        changes and events were written with the old one, the current part ends here."""
        if schema == self.schema:
            return
        self.flush()
        new_key = tuple(TableConverter(schema, self.options, "binlog").table.primary_key)
        if at is not None and new_key != tuple(self.conv.table.primary_key):
            self.end_part(at)  # with the old schema: the part so far is written by the old key
        self._set_schema(schema)

    def end_part(self, at: BinlogPosition) -> None:
        """Hand the pending events over and close the current part: later events go to a new
        part whose batch identity is ``at`` (a DDL's position)."""
        self.hand_over()
        if self.sink is not None:
            self.sink.drain()  # the next part starts from the state this one leaves (same Delta tables)
            self.done_parts.append(_SinkPart(self.sink, self.conv.arrow_schema, self.truncated_at))
            self.sink = None
            self.truncated_at = None
        self.sink_from = at

    def parts(self) -> list[_SinkPart]:
        """The table's parts in binlog order (the open one last), to commit in that order."""
        out = list(self.done_parts)
        if self.sink is not None:
            out.append(_SinkPart(self.sink, self.conv.arrow_schema, self.truncated_at))
        return out

    def maybe_flush(self) -> None:
        if len(self.builder) >= self.batch_rows:
            self.flush()


def _remap(values: dict, names: list[str]) -> dict:
    """Row dict keyed ``UNKNOWN_COL<i>`` (no binlog_row_metadata) → keyed by schema names."""
    return {names[int(k[len("UNKNOWN_COL") :])]: v for k, v in values.items()}


#: Cascading foreign keys read by this process: ``(host, port, captured tables)`` -> by parent
#: (:meth:`BinlogStreamingSource.read_foreign_keys`); emptied whenever a window reads DDL.
_FOREIGN_KEYS: dict[tuple, dict[tuple[str, str], list[CascadingForeignKey]]] = {}
#: DDL that may add, drop or re-point a foreign key (the others leave the keys as they are).
_MAY_CHANGE_FOREIGN_KEYS = re.compile(r"\b(FOREIGN|REFERENCES|RENAME|DROP|CREATE)\b", re.IGNORECASE)


class BinlogStreamingSource:
    """The binlog of one window turned into Debezium change events and committed (Debezium
    ``BinlogStreamingChangeEventSource``, ``MySqlStreamingChangeEventSource`` before 3.0, bounded
    to ``[start, end)``).

    :meth:`stream` reads a :class:`~.source.binlog.BinlogReader` in order: row events become
    ``c``/``u``/``d`` events of their table (:class:`_TableEvents`: record batches to the
    :class:`~.sink.lake.LakeWriter`), DDL goes through the schema catalog (``t`` events for
    TRUNCATE, schema history records), transaction commits feed the transaction metadata, and
    statement DML / foreign-key cascades are recorded as gaps (:mod:`.gaps`). Rows of the signal
    table go to the :class:`~.signals.SignalProcessor`; the keys a row event touches are recorded
    for the :class:`~.incremental_source.IncrementalSnapshotSource` (its chunk dedup). At the end
    :meth:`commit` commits every changed table at the window's end position, then the schema
    history and transaction records, all tagged with the window start (idempotent re-runs);
    :meth:`abort` drops the open table batches instead.

    Raises (from :meth:`stream`): see :func:`run_window`.
    """

    def __init__(
        self,
        settings: ConnectionSettings,
        info: ServerInfo,
        *,
        start: BinlogPosition,
        writer: LakeWriter,
        history: SchemaHistory,
        table_filter: TableFilter,
        type_options: TypeOptions,
        options: StreamOptions,
        server_name: str,
        signal_table: str | None,
        result: WindowResult,
        catch_up: bool = False,
        resume_at: dict[tuple[str, str], BinlogPosition] | None = None,
        foreign_keys: dict[tuple[str, str], list[CascadingForeignKey]] | None = None,
    ):
        self.catch_up = catch_up
        self.resume_at = {k: p.sort_key() for k, p in (resume_at or {}).items()}
        self.settings = settings
        self.info = info
        self.start = start
        self.writer = writer
        self.history = history
        self.table_filter = table_filter
        self.type_options = type_options
        self.options = options
        self.server_name = server_name
        self.result = result
        self.catalog = SchemaCatalog(history.catalog_at(start), server_version=info.version)
        self.tables: dict[tuple[str, str], _TableEvents] = {}
        self.records: list[HistoryRecord] = []
        self.fallback_conn: Any = None
        self.tx_counter: dict = {"total": 0, "per_table": {}, "id": None}
        self.tx_records: list[dict] = []
        self.sig_key = tuple(signal_table.split(".", 1)) if signal_table else None
        check_gap_handling(options.gap_handling)
        # foreign keys whose actions change captured child rows without row events (see .gaps)
        self.fks = foreign_keys if foreign_keys is not None else self.read_foreign_keys()
        self.cascades = CascadeTracker(self.fks)
        self.dml_gaps: dict[str, BinlogGap] = {}
        #: tables a DDL requires to be snapshotted again (``db.table``: why), see .ddl_effects
        self.resnapshots: dict[str, str] = {}
        #: what DDL did to captured tables' rows, for the run's log
        self.ddl_log: list[str] = []
        self._signal_exists: bool | None = None
        self.partial = PartialImages()
        self.triggers: dict[tuple[str, str], list] = {}  # (db, table) -> its triggers (read once)
        #: what the capture user sees of triggers (read when statement DML first needs it)
        self.trigger_visibility: TriggerVisibility | None = None

    def read_foreign_keys(self, fresh: bool = False) -> dict[tuple[str, str], list[CascadingForeignKey]]:
        """The cascading foreign keys of the captured tables on the server now, by parent table
        (``SHOW CREATE TABLE`` of each, see :func:`~.source.foreign_keys.read_cascading_foreign_keys`;
        a multi-statement connection sends them a hundred per round trip).

        Kept in this process (:data:`_FOREIGN_KEYS`) for the next windows of the same tables until
        a window reads DDL (:meth:`_on_ddl`): a following run's windows and a process's later runs
        do not read 1,000 tables' definitions each. ``fresh``: read the server even when kept."""
        conn = connect(self.settings, client_flag=CLIENT.MULTI_STATEMENTS)
        try:
            children = tuple(
                sorted(
                    k
                    for k in list_tables(conn, self.table_filter.literal_databases())
                    if self.table_filter.matches(*k) and k != self.sig_key
                )
            )
            key = (self.settings.host, self.settings.port, children)
            if fresh or key not in _FOREIGN_KEYS:
                _FOREIGN_KEYS.clear()
                _FOREIGN_KEYS[key] = read_cascading_foreign_keys(conn, children)
            return _FOREIGN_KEYS[key]
        finally:
            conn.close()

    def reader(self, replica_server_id: int, end: BinlogPosition) -> BinlogReader:
        """The binlog reader of ``[start, end)``."""
        sig_key, table_filter = self.sig_key, self.table_filter
        return BinlogReader(
            self.settings,
            replica_server_id,
            self.start,
            end,
            is_mariadb=self.info.is_mariadb,
            deadline_s=self.options.deadline_s,
            # rows of tables that are neither captured nor the signal table are never decoded (the
            # loop below skips them anyway); their events still arrive, so positions are unchanged
            # (self.fks: a DDL may change the foreign keys mid-window, see _on_ddl)
            rows_filter=lambda db, t: (
                (db, t) == sig_key or (db, t) in self.fks or table_filter.matches(db, t)
            ),
            annotate_rows=self.options.include_query,
        )

    def connection(self) -> Any:
        """The window's source connection for look-ups (opened on first use, closed by :meth:`close`)."""
        if self.fallback_conn is None:
            self.fallback_conn = connect(self.settings)
        return self.fallback_conn

    def close(self) -> None:
        """Close the look-up connection, if opened."""
        if self.fallback_conn is not None:
            self.fallback_conn.close()

    def skipped(self, table: str, position: str, reason: str) -> None:
        """An event that cannot be decoded, skipped (event.processing.failure.handling.mode)."""
        result = self.result
        result.events_skipped_count += 1
        if len(result.events_skipped) < 100:
            result.events_skipped.append({"table": table, "position": position, "reason": reason})
        if self.options.event_processing_failure_handling_mode == "warn":
            log.warning("Skipped an event of %s at %s that cannot be decoded: %s", table, position, reason)

    def table_events(self, db: str, t: str) -> _TableEvents | None:
        """The events of captured table ``db.t`` in the window, at its schema at the current
        position (``None``: not captured, the signal table, or unknown to the server)."""
        if not self.table_filter.matches(db, t) or (db, t) == self.sig_key:
            return None
        schema = self.catalog.get(db, t)
        if schema is None:
            # Not in the history (captured table never snapshotted): current schema, verified below.
            schema = read_table_schemas(self.connection(), [(db, t)]).get((db, t))
            if schema is None:
                return None
            log.warning(
                "No schema history for %s.%s; using its current schema from information_schema", db, t
            )
            self.catalog.put(schema)  # seed the catalog for later DDL
        return self._events_of(db, t, schema)

    def _events_of(
        self, db: str, t: str, schema: TableSchema, at: BinlogPosition | None = None
    ) -> _TableEvents:
        """The window's :class:`_TableEvents` of ``db.t`` (made on first use) at ``schema``."""
        te = self.tables.get((db, t))
        if te is None:
            options = self.options
            te = self.tables[(db, t)] = _TableEvents(
                schema,
                self.type_options,
                self.server_name,
                options.batch_rows,
                self._open_sink(db, t),
                on_failure=None if options.event_processing_failure_handling_mode == "fail" else self.skipped,
            )
        else:
            te.schema_changed(schema, at)
        return te

    def _open_sink(self, db: str, t: str) -> Callable[[TableSchema, BinlogPosition | None], TableBatch]:
        def opener(schema: TableSchema, since: BinlogPosition | None) -> TableBatch:
            # the first part of a table in the window has the window start's identity; a part
            # that begins at a DDL (a new primary key) that DDL's position: versions grow
            return self.writer.open_table_batch(
                db,
                t,
                primary_key=schema.primary_key,
                app_id=self.start.txn_app(STREAM_APP_ID),
                version=(since or self.start).as_version(),
                epoch=self.start.epoch,
            )

        return opener

    def captured_tables(self) -> dict[tuple[str, str], TableSchema]:
        """``{(db, table): schema}`` of the captured tables at the current position."""
        return {
            k: self.type_options.columns.keyed(v)  # message.key.columns: the key repairs use
            for k, v in self.catalog.tables().items()
            if self.table_filter.matches(*k) and k != self.sig_key
        }

    def stream(
        self, reader: BinlogReader, snapshot: IncrementalSnapshotSource, signals: SignalProcessor
    ) -> None:
        """Read the window's binlog in order (stops early after the transaction of a blocking
        execute-snapshot)."""
        for item in reader:
            if snapshot.positional:
                if isinstance(item, RowsBatch):
                    snapshot.positional_watermarks(item.file, item.pos)
                elif isinstance(item, DdlStatement):
                    snapshot.positional_watermarks(item.file, item.pos)
            if isinstance(item, RowsBatch):
                if self.sig_key is not None and (item.database, item.table) == self.sig_key:
                    signals.process_rows(item)
                    continue
                self._on_rows(item, snapshot)
            elif isinstance(item, TransactionCommit):
                self._on_commit(item)
                if signals.blocking:
                    break  # streaming pauses here; the caller runs the blocking snapshot
            elif isinstance(item, StatementDml):
                self._on_signal_statement(item, signals)
                self._on_statement_dml(item)
            elif isinstance(item, DdlStatement):
                self._on_ddl(item)

    def _on_rows(self, item: RowsBatch, snapshot: IncrementalSnapshotSource) -> None:
        """A rows event of a table other than the signal table."""
        if item.op != "c" and (item.database, item.table) in self.fks:
            self.cascades.add((item.database, item.table), item.op, item.rows, f"{item.file}:{item.pos}")
        te = self.table_events(item.database, item.table)
        if te is None:
            return
        resume = self.resume_at.get((item.database, item.table))
        if resume is not None and self.start.at(item.file, item.pos).sort_key() < resume:
            return  # in the snapshot the table was taken again at (see run_window's resume_at)
        name = f"{item.database}.{item.table}"
        try:
            if item.partial and self.partial.add(te, item, snapshot.touched(name)):
                self.result.last_event_ts_ms = item.ts_ms
                return  # not decodable into full rows: its keys are repaired (see PartialImages)
            _add_rows(
                te,
                item,
                self.tx_counter if self.options.provide_transaction_metadata else None,
                touched=snapshot.touched(name),
                include_query=self.options.include_query,
            )
        except SchemaMismatchError as e:  # raised before any of the event's rows is added
            if te.on_failure is None:
                raise
            te.on_failure(name, f"{item.file}:{item.pos}", str(e))
            return
        self.result.last_event_ts_ms = item.ts_ms
        te.maybe_flush()

    def _on_commit(self, item: TransactionCommit) -> None:
        """A transaction commit: counted; its transaction metadata records (BEGIN/END)."""
        self.result.transactions += 1
        tx_counter = self.tx_counter
        if self.options.provide_transaction_metadata and tx_counter["total"]:
            self.tx_records += _transaction_records(tx_counter, item)
        tx_counter.update(total=0, per_table={}, id=None)

    def _on_signal_statement(self, item: StatementDml, signals: SignalProcessor) -> None:
        """A statement-based write to the signal table (``binlog_format=STATEMENT``/``MIXED``):
        its rows, read from the SQL text, are processed as a rows event would be (watermarks of
        incremental snapshots and repairs, signals); one that cannot be read is a WARNING."""
        if self.sig_key is None:
            return
        try:
            parsed = signal_statement_rows(item.sql, item.database, (self.sig_key[0], self.sig_key[1]))
        except UnreadableSignalStatement as e:
            signals.reject(
                f"statement-based write to the signal table at {item.file}:{item.pos} skipped: {e}; "
                "write signals with literal VALUES, or with binlog_format=ROW"
            )
            return
        if parsed is None:
            return
        op, rows = parsed
        db, t = self.sig_key
        signals.process_rows(
            RowsBatch(
                db,
                t,
                op,
                rows,
                item.file,
                item.pos,
                item.ts_ms,
                item.server_id,
                item.gtid,
                item.thread,
                None,
                list(rows[0]["values"]) if rows else [],
            )
        )

    def _on_statement_dml(self, item: StatementDml) -> None:
        """Statement-based DML: a gap of each captured table it writes (the first per table)."""
        targets = dml_target_tables(item.sql, item.database)
        if not targets and (
            item.database is None or any(d == item.database for d, _ in self.captured_tables())
        ):
            targets = [(item.database or "?", "?")]  # tables not named: reported, not repaired
        for db, t in targets or []:
            if t != "?" and (not self.table_filter.matches(db, t) or (db, t) == self.sig_key):
                continue
            name = f"{db}.{t}"
            if name not in self.dml_gaps:
                self.dml_gaps[name] = BinlogGap(
                    kind="statement_dml",
                    table=name,
                    position=f"{item.file}:{item.pos}",
                    detail=(
                        f"statement-based DML (binlog_format=STATEMENT or MIXED, thread "
                        f"{item.thread}) has no row images: "
                        + (
                            # the statement may hold values the column policy masks or leaves out
                            "statement text withheld (column filters/masks are configured)"
                            if self.type_options.columns.hides_values
                            else repr(item.sql[:200])
                        )
                    ),
                )
        written = [(db, t) for db, t in targets or [] if t != "?"]
        self._side_effect_gaps(item, written, trigger_events(item.sql), updated_columns(item.sql))

    def _side_effect_gaps(
        self,
        item: StatementDml,
        written: list[tuple[str, str]],
        events: Sequence[str],
        columns: frozenset[str] | None,
    ) -> None:
        """Gaps of the captured tables that statement-based DML changed besides the ``written``
        ones, transitively: the rows the triggers it fired (``events`` on each written table) wrote,
        and the child rows of cascading foreign keys of the tables it (or a trigger) updated or
        deleted from (an ``UPDATE`` only when it assigns a referenced column: ``columns``, the
        lower-case names it assigns, ``None``: unknown). None of them has row events.

        Triggers are read as :class:`~.source.triggers.TriggerVisibility` allows: with their
        bodies, the tables they write are repaired; when a fired trigger's body is hidden
        (MariaDB without ``TRIGGER``), or the user sees no triggers at all of a table of a
        captured database (``SELECT`` only), a trigger may have written anything, so every
        captured table is repaired (whole), and the gap says which ``GRANT`` narrows it. Tables of
        other databases the user cannot see the triggers of are not assumed to have any (a tool
        such as pt-table-checksum writes its own database statement-based all day).
        Child rows of a statement's cascades are repaired whole (the parent keys are unknown)."""
        position = f"{item.file}:{item.pos}"
        todo: list[tuple[tuple[str, str], tuple[str, ...], frozenset[str] | None]] = [
            (k, tuple(events), columns) for k in written
        ]
        seen: set[tuple[tuple[str, str], str, frozenset[str] | None]] = set()
        while todo:
            (db, t), evs, cols = todo.pop(0)
            evs = tuple(e for e in evs if ((db, t), e, cols) not in seen)
            if not evs:
                continue
            seen.update(((db, t), e, cols) for e in evs)
            self._statement_cascade_gaps(item, (db, t), evs, cols)
            if self.trigger_visibility is None:
                self.trigger_visibility = read_trigger_visibility(self.connection(), self.info.is_mariadb)
            vis = self.trigger_visibility
            grant = f"GRANT TRIGGER ON `{db}`.* TO {vis.user}"
            if vis.of(db, t) == HIDDEN:
                if not self._captured_database(db):
                    continue
                self._every_captured_table_gap(
                    position,
                    f"statement-based DML (thread {item.thread}) on {db}.{t} may have fired triggers, "
                    f"whose writes have no row images; the capture user cannot see the triggers of "
                    f"{db}.{t} (information_schema.TRIGGERS lists them only with the TRIGGER "
                    f"privilege; MariaDB also with INSERT, UPDATE or DELETE), so every captured "
                    f"table is re-read ({grant} narrows it to the tables its triggers write)",
                )
                return
            if (db, t) not in self.triggers:
                self.triggers[(db, t)] = read_triggers(self.connection(), db, t)
            for trg in self.triggers[(db, t)]:
                if trg.event.upper() not in evs:
                    continue
                ran = (
                    f"trigger {trg.schema}.{trg.name} ({trg.event} on {db}.{t}) ran for "
                    f"statement-based DML (thread {item.thread}), whose trigger writes have no row images"
                )
                if trg.body is None:
                    self._every_captured_table_gap(
                        position,
                        f"{ran}; its body is hidden (the capture user lacks the TRIGGER privilege), "
                        f"so every captured table is re-read ({grant} narrows it to the tables it writes)",
                    )
                    return
                for target, target_events in trigger_writes(trg.body, trg.schema):
                    todo.append((target, target_events, None))
                    if self._captured(*target):
                        self.dml_gaps.setdefault(
                            f"{target[0]}.{target[1]}",
                            BinlogGap(
                                kind="trigger",
                                table=f"{target[0]}.{target[1]}",
                                position=position,
                                detail=f"{ran}; it writes this table",
                            ),
                        )

    def _captured_database(self, db: str) -> bool:
        """Whether a captured table of the current catalog is in database ``db``."""
        return any(d == db and self._captured(d, t) for d, t in self.catalog.tables())

    def _every_captured_table_gap(self, position: str, detail: str) -> None:
        """A ``trigger`` gap (whole-table repair) of every captured table that has none yet."""
        for db, t in self.catalog.tables():
            if self._captured(db, t):
                self.dml_gaps.setdefault(
                    f"{db}.{t}",
                    BinlogGap(kind="trigger", table=f"{db}.{t}", position=position, detail=detail),
                )

    def _statement_cascade_gaps(
        self,
        item: StatementDml,
        parent: tuple[str, str],
        events: Sequence[str],
        columns: frozenset[str] | None,
    ) -> None:
        """``fk_cascade`` gaps (whole child table) of the captured children of ``parent`` whose
        foreign key acts on the ``UPDATE``/``DELETE`` among ``events`` of statement-based DML (the
        statement names no keys, so every child row may have changed); an ``UPDATE`` that
        assigns none of the referenced columns (``columns``) cascades nothing."""
        for fk in self.fks.get(parent, []):
            for event, op in (("UPDATE", "u"), ("DELETE", "d")):
                action = fk.acts_on(op) if event in events else None
                if action is None:
                    continue
                if op == "u" and columns is not None and not {c.lower() for c in fk.parent_columns} & columns:
                    continue  # the referenced key is not assigned: nothing cascades
                child = f"{fk.child[0]}.{fk.child[1]}"
                self.dml_gaps.setdefault(
                    child,
                    BinlogGap(
                        kind="fk_cascade",
                        table=child,
                        position=f"{item.file}:{item.pos}",
                        detail=(
                            f"statement-based DML (thread {item.thread}) on {parent[0]}.{parent[1]} may "
                            f"have changed referenced keys; foreign key {fk.name} "
                            f"({', '.join(fk.child_columns)}) ON {event} {action} changed {child} rows "
                            "that the binlog does not show (keys unknown: the whole table is re-read)"
                        ),
                    ),
                )

    def _on_ddl(self, item: DdlStatement) -> None:
        """A DDL: applied to the catalog; schema history records; ``t`` events for TRUNCATE; the
        statement's effects on the rows of captured tables (:mod:`.ddl_effects`): ``t`` events of
        tables whose rows end here, tables to snapshot again, rows to re-read."""
        _FOREIGN_KEYS.clear()  # the next window reads them again (see read_foreign_keys)
        if _MAY_CHANGE_FOREIGN_KEYS.search(item.sql):
            # the foreign keys the rest of this window's parent changes cascade through
            self.fks = self.read_foreign_keys(fresh=True)
            self.cascades.by_parent = self.fks
        before = self.catalog.tables()
        outcomes = self.catalog.apply(
            item.sql, item.database, skip_unparseable=self.options.skip_unparseable_ddl, logger=log
        )
        records = self.records
        for o in outcomes:
            if o.ignored:
                continue
            self.result.ddl_statements += 1
            records.append(
                records_from_outcome(o, item.end, len(records), item.ts_ms, item.server_id, item.gtid)
            )
            for db, t in o.truncated:
                te = self.table_events(db, t)
                if te is None:
                    continue
                self._cut(te, item)
            at = self.start.at(item.file, item.pos)
            for ch in o.table_changes:
                for effect in ddl_effects(ch, before):
                    self._ddl_effect(effect, item, before.get(effect.table))
                te = self.tables.get((ch.database, ch.table))
                if te is not None and ch.schema is not None:
                    te.schema_changed(ch.schema, at)
                if ch.schema is not None and self._captured(ch.database, ch.table):
                    # the lake takes the new columns now, even if no row of the table changes
                    self._events_of(ch.database, ch.table, ch.schema, at).ensure_sink()
            before = self.catalog.tables()
        self.result.last_event_ts_ms = item.ts_ms

    def _cut(self, te: _TableEvents, item: DdlStatement, headers: dict[str, str] | None = None) -> None:
        """A ``t`` event of the statement ``item`` for the table of ``te`` (TRUNCATE, or a DDL
        that ends its rows): every older row of the table is cut at that position."""
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
            headers=headers,
        )
        te.truncated_at = self.start.at(item.file, item.pos)

    def _captured(self, db: str, t: str) -> bool:
        return self.table_filter.matches(db, t) and (db, t) != self.sig_key

    def _ddl_effect(self, effect: DdlEffect, item: DdlStatement, old: TableSchema | None) -> None:
        """Apply one :class:`~.ddl_effects.DdlEffect` of a DDL to a captured table."""
        db, t = effect.table
        if not self._captured(db, t):
            return
        name = f"{db}.{t}"
        if effect.kind == "cut":
            schema = self.tables[(db, t)].schema if (db, t) in self.tables else old
            if schema is None:
                return  # never known: nothing of it can be in the lake
            self._cut(self._events_of(db, t, schema), item, {REASON_HEADER: effect.reason})
            self.ddl_log.append(f"{name}: rows end at {item.file}:{item.pos} ({effect.reason})")
            return
        if effect.kind == "repair" and self._repairable(db, t):
            self.dml_gaps.setdefault(
                name,
                BinlogGap(
                    kind="ddl",
                    table=name,
                    position=f"{item.file}:{item.pos}",
                    detail=f"{effect.reason}: {item.sql[:200]!r}",
                ),
            )
            return
        if name not in self.resnapshots:
            self.resnapshots[name] = effect.reason
            self.ddl_log.append(f"{name}: snapshot again after {item.file}:{item.pos} ({effect.reason})")

    def _repairable(self, db: str, t: str) -> bool:
        """Whether rows the server rewrote can be re-read by a targeted incremental snapshot:
        a keyed table, with gap repairs on (``binlog_gap_handling``; ``fail``/``warn`` handle the
        gap as they do any other) and a signal table; else the table is snapshotted again."""
        if self.options.gap_handling != "repair":
            return True
        schema = self.catalog.get(db, t)
        return schema is not None and bool(schema.primary_key) and self._signal_table_exists()

    def _signal_table_exists(self) -> bool:
        if self._signal_exists is None:
            self._signal_exists = False
            if self.sig_key is not None:
                with self.connection().cursor() as cur:
                    cur.execute(
                        "SELECT 1 FROM information_schema.TABLES WHERE TABLE_SCHEMA = %s AND TABLE_NAME = %s",
                        self.sig_key,
                    )
                    self._signal_exists = cur.fetchone() is not None
        return self._signal_exists

    def gaps(self) -> list[BinlogGap]:
        """The window's changes the binlog does not carry: statement DML, then FK cascades, then
        row changes logged with partial row images."""
        gaps = list(self.dml_gaps.values()) + self.cascades.gaps() + self.partial.gaps()
        if any(g.kind == "statement_dml" for g in self.dml_gaps.values()) or self.partial.tables:
            note = self._server_format_note()
            for g in gaps:
                if note and g.kind in ("statement_dml", "partial_row_image"):
                    g.detail += f"; {note}"
        return gaps

    def _server_format_note(self) -> str | None:
        """What the server's global binlog settings mean for the capture, when they are not
        ``binlog_format=ROW`` / ``binlog_row_image=FULL`` (``None``: they are; the gap came from
        one session)."""
        try:
            with self.connection().cursor() as cur:
                cur.execute("SELECT @@GLOBAL.binlog_format, @@GLOBAL.binlog_row_image")
                row = cur.fetchone()
        except Exception:  # noqa: BLE001 - only a hint in a message
            return None
        fmt, image = (str(v).upper() for v in row) if row else ("ROW", "FULL")
        bad = ([f"binlog_format={fmt}"] if fmt != "ROW" else []) + (
            [f"binlog_row_image={image}"] if image != "FULL" else []
        )
        if not bad:
            return None
        return (
            f"the server logs {' and '.join(bad)} globally: every change is repaired by re-reading, "
            "set binlog_format=ROW and binlog_row_image=FULL (SET GLOBAL and in the server's config)"
        )

    def commit(self, position: BinlogPosition) -> None:
        """Commit every changed table at ``position`` (into ``result.tables``), then the schema
        history records and transaction metadata of the window, all tagged with the window start.

        Raises:
            SinkError: a commit failed.
        """
        with handle_cache():
            self._commit(position)

    def _commit(self, position: BinlogPosition) -> None:
        version = self.start.as_version()
        app = self.start.txn_app(STREAM_APP_ID)  # versions restart in every offset epoch
        self._write_last_batches()
        items = list(self.tables.items())
        outcomes = run_concurrently(
            [partial(self._commit_parts, te, position) for _, te in items], self.options.commit_workers
        )
        for ((db, t), te), (result, raised) in zip(items, outcomes):
            written, error = result if raised is None else (None, raised)
            if error is None:
                if written is not None:
                    self.result.tables[(db, t)] = written
                continue
            # this table stops alone (see .isolation); the others go on
            # (the traceback of the error the task returned; none for a failure already logged)
            log.warning("%s.%s stops: %s", db, t, error, exc_info=error if te.failed is None else None)
            self.result.failed_tables[f"{db}.{t}"] = {
                "error": te.failed or describe(error, 2000),
                "since": self.start.to_dict(),
            }
        if self.result.failed_tables:
            lake_down = lake_unreachable(self.writer.storage, self.server_name)
            if lake_down is not None:  # not the tables: the lake itself fails the window
                raise SinkError(
                    f"{len(self.result.failed_tables)} table(s) could not be committed and the lake "
                    f"itself fails ({lake_down}); the window is retried. First error: "
                    f"{next(iter(self.result.failed_tables.values()))['error']}"
                )
        if self.catch_up:
            return  # the history and transactions of these positions were committed by their windows
        self.history.append(self.records, app_id=app, version=version)
        if self.tx_records:
            _append_transactions(self.writer.storage, self.server_name, self.tx_records, app, version)

    def _write_last_batches(self) -> None:
        """Hand every table's last events over: the small ones of all tables in one Spark job
        (:meth:`..sink.lake.LakeWriter.write_together`), the others as usual."""
        small: list[tuple[_TableEvents, pa.RecordBatch]] = []
        # the tables' handles (opened by each batch, read by its schemas) loaded side by side
        preload(
            self.writer.storage,
            [
                uri
                for (db, t), te in self.tables.items()
                if te.sink is None
                for p in (self.writer.paths(db, t),)
                for uri in (p.state, p.tail, p.changelog)
            ],
            self.options.commit_workers,
            app_id=self.start.txn_app(STREAM_APP_ID),  # what each table's batch asks first
        )
        for te in self.tables.values():
            batch = te.take_small(self.options.together_rows)
            if batch is not None:
                small.append((te, batch))
        if len(small) == 1:
            te, batch = small[0]
            te.pending, te.pending_rows = [batch], batch.num_rows
            te.hand_over()
            return
        if not small:
            return
        errors = self.writer.write_together([(te.sink, batch) for te, batch in small if te.sink is not None])
        with_sink = [te for te, _ in small if te.sink is not None]
        for i, error in errors.items():
            with_sink[i].fail(error)

    def _commit_parts(
        self, te: _TableEvents, position: BinlogPosition
    ) -> tuple[TableWriteResult | None, BaseException | None]:
        """Commit one table's parts in order (a worker thread of :meth:`commit`): ``(what it
        wrote, None)`` or ``(None, the error)`` (its parts not committed are aborted)."""
        parts = te.parts()
        done = 0
        written: TableWriteResult | None = None
        try:
            if te.failed is not None:
                raise SinkError(te.failed)
            for part in parts:  # every part's files first: from here on this thread alone writes
                part.sink.drain()  # the table (its commit task trusts its handles, see handle_cache)
            if any(part.sink.rewritten for part in parts):
                for part in parts:  # the parts share the run thread's handles: all are refreshed
                    part.sink.rewritten = True
            for part in parts:
                w = part.sink.commit(
                    value_schema=part.value_schema, position=position, truncated_at=part.truncated_at
                )
                done += 1
                written = w if written is None else _combined(written, w)
        except Exception as e:
            for part in parts[done:]:
                part.sink.abort()  # (the failed part aborted itself; aborting twice is harmless)
            return None, e
        return written, None

    def abort(self) -> None:
        """Drop every open table batch (nothing of the window is committed by this attempt)."""
        for te in self.tables.values():
            for part in te.parts():
                part.sink.abort()


#: python-mysql-replication's ``none_sources`` value of a column absent from a row image.
NOT_IN_IMAGE = "cols bitmap"


class PartialImages:
    """Row events logged with partial row images (``binlog_row_image=MINIMAL`` or ``NOBLOB``,
    set on the server or in one session): an update's before image holds only the key columns and
    its after image only the changed ones (NOBLOB: blob columns left out). Decoding them as rows
    would turn missing columns into NULLs and an absent key into a key change (rows deleted from
    the lake, a row with a NULL key). Debezium requires ``binlog_row_image=FULL`` and does not
    check it while streaming.

    Inserts and updates with a partial image are not emitted; their keys (before and after
    images) are recorded and repaired: a targeted incremental snapshot re-reads them (filter
    ``key IN (...)``, the keys the source no longer has are deleted). Deletes are emitted when
    their image has the key (the tombstone is exact; ``before`` holds only the logged columns).
    An image without the key columns makes the whole table's repair.
    """

    def __init__(self) -> None:
        self.tables: dict[str, dict[str, Any]] = {}

    def add(self, te: _TableEvents, ev: RowsBatch, touched: set | None) -> bool:
        """Record rows event ``ev`` of ``te``'s table. Returns ``True`` when its events must not be
        emitted (an insert or update), ``False`` for a delete whose images carry the key.

        Raises:
            SchemaMismatchError: the event's columns differ from the schema history.
        """
        pk = list(te.conv.table.primary_key)
        remap = _check_columns(te, ev)
        keys: list[tuple | None] = []
        images = []
        for r in ev.rows:
            if ev.op == "u":
                images.append((r["before_values"], r.get("before_none_sources") or {}))
                images.append((r["after_values"], r.get("after_none_sources") or {}))
            else:
                images.append((r["values"], r.get("none_sources") or {}))
        for values, ns in images:
            if remap:
                values = _remap(values, te.names)
                ns = _remap(ns, te.names)
            if not pk or any(c not in values or ns.get(c) == NOT_IN_IMAGE for c in pk):
                keys.append(None)
                continue
            keys.append(tuple(values[c] for c in pk))
            if touched is not None:  # an open chunk window drops these keys (the binlog changed them)
                touched.add(te.conv.primary_key_function()(values, ns))
        if ev.op == "d" and all(k is not None for k in keys):
            return False
        if ev.op == "u":  # an after image without the key columns: the key did not change
            keys = [k if k is not None or i % 2 == 0 else keys[i - 1] for i, k in enumerate(keys)]
        name = te.schema.qualified_name
        entry = self.tables.setdefault(
            name,
            {
                "pk": pk,
                "position": f"{ev.file}:{ev.pos}",
                "keys": {},
                "rows": 0,
                "images": set(),
                "whole": False,
            },
        )
        entry["rows"] += len(ev.rows)
        entry["images"].update(ev.partial)
        for k in keys:
            if k is None:
                entry["whole"] = True
            else:
                entry["keys"][k] = None
        return True

    def gaps(self) -> list[BinlogGap]:
        """One gap per table, repairing its recorded keys (or the whole table)."""
        from ..source.foreign_keys import key_in_condition
        from .gaps import MAX_FILTER_KEYS
        from .incremental import encode_key

        out = []
        for name, e in self.tables.items():
            keys = list(e["keys"])
            flt = None
            if not e["whole"] and keys and len(keys) <= MAX_FILTER_KEYS:
                flt = key_in_condition(e["pk"], keys)
            gap = BinlogGap(
                kind="partial_row_image",
                table=name,
                position=e["position"],
                detail=(
                    f"{e['rows']} row change(s) logged with partial row images ({', '.join(sorted(e['images']))}): "
                    "binlog_row_image is MINIMAL or NOBLOB, so their other column values are not in the "
                    "binlog; inserts and updates were not applied from them"
                ),
                filter=flt,
            )
            if flt is not None:
                gap.candidate_keys = [encode_key(k) for k in keys]
            out.append(gap)
        return out


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
    catch_up: bool = False,
    resume_at: dict[tuple[str, str], BinlogPosition] | None = None,
) -> WindowResult:
    """Read ``[start, end)`` of the binlog and commit its changes to the lake.

    ``catch_up``: the window re-reads positions whose schema history (and transaction metadata)
    an earlier window committed, for tables that were stopped (:mod:`.isolation`): only their
    tables are written.

    ``resume_at``: tables whose row events before a position are skipped (a stopped table
    snapshotted again at that position after ``start``: the snapshot holds them; see
    :mod:`.isolation`).

    With ``incremental_options.signal_table`` set, signal rows in the binlog are executed in
    order and an active incremental snapshot reads its next chunks (see :mod:`.incremental`): the
    window then extends to just after the last chunk's high watermark (``result.end``). A
    ``blocking`` execute-snapshot ends the window after its transaction and is reported in
    ``result.blocking_tables`` for the caller to snapshot.

    The coordinator of the window's three parts (Debezium's ``ChangeEventSourceCoordinator``):
    the :class:`BinlogStreamingSource`, the :class:`~.incremental_source.IncrementalSnapshotSource`
    and the :class:`~.signals.SignalProcessor`.

    Raises:
        BinlogReadError (and subclasses): see :mod:`.source.binlog`.
        UnparseableDdlError: a DDL could not be parsed (unless ``skip_unparseable_ddl``).
        SchemaMismatchError: an event's columns differ from the schema history.
        SinkError: a commit failed.
    """
    t0 = time.monotonic()
    inc = incremental_options or IncrementalOptions()
    decode: list[dict] = []
    if options.parallel is not None:  # a backlog is decoded by parallel Spark tasks (.parallel_catchup)
        from .parallel_catchup import parallel_window

        done, decode = parallel_window(
            settings,
            info,
            replica_server_id=replica_server_id,
            start=start,
            end=end,
            writer=writer,
            history=history,
            table_filter=table_filter,
            type_options=type_options,
            options=options,
            server_name=server_name,
            incremental=incremental,
            incremental_options=inc,
            catch_up=catch_up,
            resume_at=resume_at,
        )
        if done is not None:
            return done
    result = WindowResult(start=start, end=end, decode=decode)
    source = BinlogStreamingSource(
        settings,
        info,
        start=start,
        writer=writer,
        history=history,
        table_filter=table_filter,
        type_options=type_options,
        options=options,
        server_name=server_name,
        signal_table=inc.signal_table,
        result=result,
        catch_up=catch_up,
        resume_at=resume_at,
    )
    # -- incremental snapshot: plan this window's chunks (reused on retry) ---------------------
    snapshot = IncrementalSnapshotSource(
        settings,
        info,
        storage=writer.storage,
        server_name=server_name,
        options=inc,
        type_options=type_options,
        result=result,
        table_events=source.table_events,
        state=incremental,
        writer=writer,
    )
    end = snapshot.plan(start, end)
    signals = SignalProcessor(
        result=result,
        snapshot=snapshot,
        captured_tables=source.captured_tables,
        type_options=type_options,
        connection=source.connection,
    )
    reader = source.reader(replica_server_id, end)
    try:
        source.stream(reader, snapshot, signals)
        if snapshot.positional and not signals.blocking:  # high watermarks at the very end of the window
            snapshot.flush_positional(reader.position)
        result.events_read = reader.events_read
        result.end = reader.position
        if signals.blocking:
            # the planned chunks lie after the pause point: they are re-planned later
            snapshot.resume_before_blocking()
            result.blocking_tables = list(dict.fromkeys(signals.blocking))
        else:  # a chunk whose watermarks never came is read again, not dropped
            snapshot.requeue_unclosed(result.end)
        result.ddl_effects = list(source.ddl_log)
        if source.resnapshots:  # tables a DDL left with rows the binlog does not carry (.ddl_effects)
            again = [k for k in map(_table_key, source.resnapshots) if source.catalog.get(*k) is not None]
            result.blocking_tables = list(dict.fromkeys([*result.blocking_tables, *again]))
        result.gaps = source.gaps()
        if result.gaps:
            snapshot.state = _window_gaps(
                result.gaps, snapshot.state, options, inc, source.captured_tables(), type_options, start
            )
        result.incremental_state = snapshot.final_state()
        source.commit(result.end)
    except BaseException:
        source.abort()
        raise
    finally:
        source.close()
    for line in result.signal_log:
        log.log(logging.WARNING if line in result.signals_rejected else logging.INFO, line)
    result.seconds = time.monotonic() - t0
    return result


def _window_gaps(
    gaps: list[BinlogGap],
    state: IncrementalState | None,
    options: StreamOptions,
    inc: IncrementalOptions,
    known: dict[tuple[str, str], TableSchema],
    type_options: TypeOptions,
    start: BinlogPosition,
) -> IncrementalState | None:
    """:func:`_handle_gaps` of the window's gaps; with ``repair``, gaps of tables whose key column
    is masked are reported, not repaired (a repair stores raw key values: candidate keys, chunk
    bounds). Returns the incremental state with the repairs queued."""
    handled = gaps
    if options.gap_handling == "repair":
        masked = {id(g) for g in gaps if type_options.columns.masked_key(known.get(_table_key(g.table)))}
        for g in gaps:
            if id(g) in masked:
                g.repair = (
                    "Not repaired: its key column is masked and a repair stores raw key values; "
                    "re-snapshot the table (materialize its asset)"
                )
        handled = [g for g in gaps if id(g) not in masked]
    return _handle_gaps(handled, state, options, inc, known, start)


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
    remap = _check_columns(te, ev)
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
                ops, rownos, headers, before, after, bns, ans = _split_key_changes(
                    pk, before, after, bns, ans, bk, ak
                )
        te.builder.add_raw(
            conv,
            ops,
            before,
            after,
            before_none_sources=bns,
            after_none_sources=ans,
            rows=rownos,
            tx=_tx_orders(tx, te, ev, len(before)),
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
    orders = _tx_orders(tx, te, ev, len(values))
    if ev.op == "c":
        te.builder.add_raw(conv, "c", None, values, after_none_sources=nss, tx=orders, **common)
    else:
        te.builder.add_raw(conv, "d", values, None, before_none_sources=nss, tx=orders, **common)


def _check_columns(te: _TableEvents, ev: RowsBatch) -> bool:
    """Check a rows event's columns against the table's schema at its position.

    Returns:
        Whether the row dicts are keyed ``UNKNOWN_COL<i>`` (no ``binlog_row_metadata``: remap them).
    Raises:
        SchemaMismatchError: the columns (names, or their number) differ from the schema history.
    """
    names = te.names
    if ev.column_names and ev.column_names[0].startswith("UNKNOWN_COL"):
        if len(ev.column_names) != len(names):
            raise SchemaMismatchError(
                f"Row event for {te.schema.qualified_name} at {ev.file}:{ev.pos} has "
                f"{len(ev.column_names)} columns, the schema history has {len(names)}: the history "
                "is out of sync; re-snapshot the table."
            )
        return True
    if ev.column_names != names:
        raise SchemaMismatchError(
            f"Row event for {te.schema.qualified_name} at {ev.file}:{ev.pos} has columns "
            f"{ev.column_names}, but the schema history at that position has {names}. The history "
            "is out of sync with the server (a DDL was missed or skipped); re-snapshot the table."
        )
    return False


def _tx_orders(tx: dict | None, te: _TableEvents, ev: RowsBatch, n: int) -> list[tuple[str, int, int]] | None:
    """Debezium transaction metadata of the next ``n`` events of ``te``'s table in event ``ev``:
    ``(id, total_order, data_collection_order)`` each (1-based orders), advancing ``tx``
    (``None``: no transaction metadata)."""
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


def _split_key_changes(
    pk: Sequence[str], before: list, after: list, bns: list, ans: list, bk: list, ak: list
) -> tuple[list[str], list[int], dict[int, dict[str, str]], list, list, list, list]:
    """Update rows whose key changed (``bk[i] != ak[i]``) as Debezium emits them: a delete of the
    old key + a create of the new key, linked by ``__debezium.newkey`` / ``__debezium.oldkey``
    headers; other rows stay updates.

    Returns:
        (ops, source row number of each event, headers by event index, before images, after
        images, before none-sources, after none-sources), one entry per event.
    """
    ops: list[str] = []
    rownos: list[int] = []
    headers: dict[int, dict[str, str]] = {}
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
    return ops, rownos, headers, b2, a2, bns2, ans2


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
    append_rows(
        storage, LakeLayout(storage, server_name).transactions(), table, app_id=app_id, version=version
    )


def _key_json(columns: Sequence[str], values: tuple) -> str:
    return json.dumps(dict(zip(columns, values)), default=str, separators=(",", ":"))


def snapshot_history_app_id(tables: Sequence[tuple[str, str]]) -> str:
    """History batch identity of a snapshot of ``tables`` (distinct per table set)."""
    digest = hashlib.sha1(",".join(f"{d}.{t}" for d, t in sorted(tables)).encode()).hexdigest()[:12]
    return f"dagster-mysql-cdc/snapshot/{digest}"
