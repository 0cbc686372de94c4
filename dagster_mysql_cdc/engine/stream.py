"""The binlog reader of one window (Debezium's ``BinlogStreamingChangeEventSource``, bounded).

:class:`BinlogStreamingSource` reads the binlog from ``start`` to ``end`` (both transaction
boundaries), decodes every row with the schema in force at its position (schema history replayed
up to ``start``, then every DDL in the window applied in order), turns rows into Debezium change
events (``c``/``u``/``d``, ``t`` for TRUNCATE; a primary-key update becomes ``d`` of the old key +
``c`` of the new key, as Debezium does: :mod:`.row_events`), batches them per table
(:class:`~.table_events.TableEvents`) and commits each changed table's change log and state, then
the window's schema history records and transaction metadata (:mod:`.transactions`). Every commit
is tagged with the window start, so re-running a window (after a crash anywhere) commits nothing
twice.

Two drivers read windows with it: :func:`.window_run.run_window` (Debezium's
``ChangeEventSourceCoordinator`` of the window: this source, the incremental snapshot source and
the signal processor) and :mod:`.parallel_catchup` (a backlog's statements in the run process, its
row events decoded by Spark tasks, :mod:`.segment_reader`).
"""

from __future__ import annotations

import hashlib
import logging
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import pyarrow as pa
from pymysql.constants import CLIENT

from ..errors import (
    SinkError,
    describe,
)
from ..events import BinlogPosition, now_ms
from ..sink.delta import handle_cache, preload
from ..sink.lake import LakeWriter, TableBatch, TableWriteResult, run_concurrently
from ..sink.schema_history import HistoryRecord, SchemaHistory, records_from_outcome
from ..source.binlog import BinlogReader, DdlStatement, RowsBatch, StatementDml, TransactionCommit
from ..source.catalog import list_tables, read_table_schemas
from ..source.connection import ConnectionSettings, ServerInfo, connect
from ..source.ddl import SchemaCatalog, UnparseableDdlError
from ..source.filters import TableFilter
from ..source.foreign_keys import CascadingForeignKey, read_cascading_foreign_keys
from ..source.schema import TableSchema
from ..source.snapshot import check_failure_handling_mode
from ..source.statements import (
    UnreadableSignalStatement,
    signal_statement_rows,
)
from ..source.types import TypeOptions
from .ddl_effects import REASON_HEADER, DdlEffect, ddl_effects
from .gaps import (
    BinlogGap,
    CascadeTracker,
    check_gap_handling,
)
from .incremental import IncrementalState
from .incremental_source import IncrementalOptions, IncrementalSnapshotSource
from .isolation import lake_unreachable
from .row_events import PartialImages, SchemaMismatchError, add_rows
from .segments import ParallelOptions
from .signals import SignalProcessor
from .statement_gaps import StatementGaps
from .table_events import TableEvents
from .transactions import append_transactions, transaction_records
from .window_result import WindowResult, combined_write_results

log = logging.getLogger(__name__)

STREAM_APP_ID = "dagster-mysql-cdc/stream"


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
        check_failure_handling_mode(self.event_processing_failure_handling_mode)


@dataclass(frozen=True)
class StreamWindow:
    """One binlog window to read and commit: what both drivers of :class:`BinlogStreamingSource`
    (:func:`.window_run.run_window` and :func:`.parallel_catchup.parallel_window`) are given (the
    keyword arguments of :func:`.window_run.run_window`; Debezium's offset context and task
    configuration of one bounded streaming pass).

    Attributes:
        settings, info: the source server and what it is (flavour, version).
        replica_server_id: the ``server_id`` the binlog reader registers with.
        start, end: the window ``[start, end)``, both transaction boundaries.
        writer, history: the lake writer and the schema history (read at ``start``, appended).
        table_filter, type_options: the captured tables and how their values convert.
        options: :class:`StreamOptions`; server_name: the lake's server folder (Debezium
            ``topic.prefix``).
        incremental, incremental_options: the incremental snapshot's progress and options.
        catch_up, resume_at: see :func:`.window_run.run_window`.
        on_table: called as ``on_table(result, db, table, written)`` in the committing thread as soon as
            one table's commit of the window is durable (:class:`~.sink.lake.TableWriteResult`),
            while the other tables' commits go on, before the window's schema history: the
            Dagster side logs that table's materialization then (issue 42). An error it raises
            fails the window once its commits are done (a retry skips what committed). Not
            called by the parallel catch-up or a stopped table's catch-up window.
    """

    settings: ConnectionSettings
    info: ServerInfo
    replica_server_id: int
    start: BinlogPosition
    end: BinlogPosition
    writer: LakeWriter
    history: SchemaHistory
    table_filter: TableFilter
    type_options: TypeOptions
    options: StreamOptions
    server_name: str
    incremental: IncrementalState | None = None
    incremental_options: IncrementalOptions = field(default_factory=IncrementalOptions)
    catch_up: bool = False
    resume_at: dict[tuple[str, str], BinlogPosition] | None = None
    on_table: Callable[[WindowResult, str, str, TableWriteResult], None] | None = None

    def __post_init__(self) -> None:
        if self.incremental_options is None:  # given as None: no signal table
            object.__setattr__(self, "incremental_options", IncrementalOptions())


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
    ``c``/``u``/``d`` events of their table (:class:`TableEvents`: record batches to the
    :class:`~.sink.lake.LakeWriter`), DDL goes through the schema catalog (``t`` events for
    TRUNCATE, schema history records), transaction commits feed the transaction metadata, and
    statement DML / foreign-key cascades are recorded as gaps (:mod:`.gaps`). Rows of the signal
    table go to the :class:`~.signals.SignalProcessor`; the keys a row event touches are recorded
    for the :class:`~.incremental_source.IncrementalSnapshotSource` (its chunk dedup). At the end
    :meth:`commit` commits every changed table at the window's end position, then the schema
    history and transaction records, all tagged with the window start (idempotent re-runs);
    :meth:`abort` drops the open table batches instead.

    Raises (from :meth:`stream`): see :func:`.window_run.run_window`.
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
        on_table: Callable[[WindowResult, str, str, TableWriteResult], None] | None = None,
    ):
        self.on_table = on_table
        self.catch_up = catch_up
        # the window's identity in every Delta commit (idempotent re-runs): its start position,
        # or its chunks' (:meth:`identify_as_chunks`)
        self.txn_app_id, self.txn_version = start.txn_app(STREAM_APP_ID), start.as_version()
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
        self.tables: dict[tuple[str, str], TableEvents] = {}
        self.records: list[HistoryRecord] = []
        self.fallback_conn: Any = None
        self.tx_counter: dict = {"total": 0, "per_table": {}, "id": None}
        self.tx_records: list[dict] = []
        self.sig_key = tuple(signal_table.split(".", 1)) if signal_table else None
        check_gap_handling(options.gap_handling)
        # foreign keys whose actions change captured child rows without row events (see .gaps)
        self.fks = foreign_keys if foreign_keys is not None else self.read_foreign_keys()
        self.cascades = CascadeTracker(self.fks)
        self.statements = StatementGaps(
            info,
            table_filter,
            self.sig_key,
            lambda: self.catalog.tables(),
            lambda: self.fks,
            self.connection,
            type_options.columns.hides_values,
        )
        #: gaps of statement-based DML and of DDL, by table (the first of each)
        self.dml_gaps: dict[str, BinlogGap] = self.statements.dml_gaps
        #: tables a DDL requires to be snapshotted again (``db.table``: why), see .ddl_effects
        self.resnapshots: dict[str, str] = {}
        #: what DDL did to captured tables' rows, for the run's log
        self.ddl_log: list[str] = []
        self._signal_exists: bool | None = None
        self.partial = PartialImages()

    @classmethod
    def of_window(
        cls, window: StreamWindow, result: WindowResult, writer: LakeWriter | None = None
    ) -> BinlogStreamingSource:
        """The source of ``window``, reporting into ``result``; ``writer`` replaces the window's
        (the parallel catch-up's pass over the statements writes nothing)."""
        return cls(
            window.settings,
            window.info,
            start=window.start,
            writer=writer or window.writer,
            history=window.history,
            table_filter=window.table_filter,
            type_options=window.type_options,
            options=window.options,
            server_name=window.server_name,
            signal_table=window.incremental_options.signal_table,
            result=result,
            catch_up=window.catch_up,
            resume_at=window.resume_at,
            on_table=None if writer is not None or window.catch_up else window.on_table,
        )

    def read_foreign_keys(self, fresh: bool = False) -> dict[tuple[str, str], list[CascadingForeignKey]]:
        """The cascading foreign keys of the captured tables on the server now, by parent table
        (``SHOW CREATE TABLE`` of each, see :func:`~.source.foreign_keys.read_cascading_foreign_keys`;
        a multi-statement connection sends them a hundred per round trip).

        Kept in this process (:data:`_FOREIGN_KEYS`) for the next windows of the same tables until
        a window reads DDL (:meth:`on_ddl`): a following run's windows and a process's later runs
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
            # (self.fks: a DDL may change the foreign keys mid-window, see on_ddl)
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

    def table_events(self, db: str, t: str) -> TableEvents | None:
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
    ) -> TableEvents:
        """The window's :class:`TableEvents` of ``db.t`` (made on first use) at ``schema``."""
        te = self.tables.get((db, t))
        if te is None:
            options = self.options
            te = self.tables[(db, t)] = TableEvents(
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
                app_id=self.txn_app_id,
                version=since.as_version() if since is not None else self.txn_version,
                epoch=self.start.epoch,
            )

        return opener

    def identify_as_chunks(self, snapshot_id: str, chunk_seq: int) -> None:
        """This window reads no binlog (``start == end``): it only emits incremental-snapshot
        chunks (read-only watermarks on an idle binlog, which are all this position). Its commits
        take an identity of their own instead of the start position's: app
        ``dagster-mysql-cdc/stream/chunks/<start>/<snapshot>``, version the snapshot's
        ``chunk_seq`` before the window (it grows with every window's chunks, and a retry starts
        from the same). With the start position's identity, the next window from the same
        position (more chunks, or the binlog's next changes) was taken for this one and skipped
        as already committed: its rows were lost."""
        tag = hashlib.blake2b(snapshot_id.encode(), digest_size=6).hexdigest()
        self.txn_app_id = f"{STREAM_APP_ID}/chunks/{self.start.version_tag()}/{tag}"
        self.txn_version = int(chunk_seq)

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
                self.on_statement_dml(item)
            elif isinstance(item, DdlStatement):
                self.on_ddl(item)

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
            add_rows(
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
            self.tx_records += transaction_records(tx_counter, item)
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
                **item.origin(),
                database=db,
                table=t,
                op=op,
                rows=rows,
                query=None,
                column_names=list(rows[0]["values"]) if rows else [],
            )
        )

    def _apply_ddl(self, item: DdlStatement) -> list:
        """The schema catalog's outcomes of ``item`` (:meth:`..source.ddl.SchemaCatalog.apply`).

        The catalog holds the tables of the databases this capture may capture (it is loaded
        from them), so another application's DDL on the same server can name tables it never
        saw: ``CREATE TABLE other.t2 LIKE other.t1``, an ``ALTER`` of ``other.t1``. A statement
        the catalog cannot follow that names only databases the capture's filter rules out
        (:meth:`..source.filters.TableFilter.ddl_may_change_captured`) cannot change a captured
        table: it is passed over, as Debezium's DDL parser passes over a ``LIKE`` of a table it
        does not know (``CreateTableParserListener``), with a line in the window's
        ``ddl_passed_over`` (the run logs it as a WARNING in its event log).

        Raises:
            UnparseableDdlError: the statement cannot be followed and may change a captured table
                (unless ``skip_unparseable_ddl``).
        """
        try:
            return self.catalog.apply(
                item.sql, item.database, skip_unparseable=self.options.skip_unparseable_ddl, logger=log
            )
        except UnparseableDdlError as e:
            from ..source.ddl.scope import ddl_databases

            dbs = ddl_databases(item.sql, item.database)
            if dbs is None or self.table_filter.ddl_may_change_captured(
                dbs, self.sig_key[0] if self.sig_key else None
            ):
                raise
            self.result.ddl_passed_over.append(
                f"Passed over a DDL statement of database(s) {', '.join(sorted(dbs))} at "
                f"{item.file}:{item.pos}, which this capture rules out: the schema catalog (the "
                f"captured databases' tables) cannot follow it, and it cannot change a captured "
                f"table ({e})"
            )
            return []

    def on_statement_dml(self, item: StatementDml) -> None:
        """Statement-based DML: gaps of the captured tables it (and what it sets off) changed
        (see :class:`~.statement_gaps.StatementGaps`)."""
        self.statements.add(item)

    def on_ddl(self, item: DdlStatement) -> None:
        """A DDL: applied to the catalog; schema history records; ``t`` events for TRUNCATE; the
        statement's effects on the rows of captured tables (:mod:`.ddl_effects`): ``t`` events of
        tables whose rows end here, tables to snapshot again, rows to re-read."""
        _FOREIGN_KEYS.clear()  # the next window reads them again (see read_foreign_keys)
        if _MAY_CHANGE_FOREIGN_KEYS.search(item.sql):
            # the foreign keys the rest of this window's parent changes cascade through
            self.fks = self.read_foreign_keys(fresh=True)
            self.cascades.by_parent = self.fks
        before = self.catalog.tables()
        outcomes = self._apply_ddl(item)
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

    def _cut(self, te: TableEvents, item: DdlStatement, headers: dict[str, str] | None = None) -> None:
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
        version, app = self.txn_version, self.txn_app_id  # versions restart in every offset epoch
        self._write_last_batches()
        items = list(self.tables.items())
        on_table = self.on_table

        def committed(i: int, outcome: tuple[Any, BaseException | None]) -> None:
            result, raised = outcome
            if on_table is not None and raised is None and result[1] is None and result[0] is not None:
                on_table(self.result, items[i][0][0], items[i][0][1], result[0])

        outcomes = run_concurrently(
            [partial(self._commit_parts, te, position) for _, te in items],
            self.options.commit_workers,
            on_done=committed,
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
            self.raise_if_lake_down()
        if self.catch_up:
            return  # the history and transactions of these positions were committed by their windows
        self.history.append(self.records, app_id=app, version=version)
        if self.tx_records:
            append_transactions(self.writer.storage, self.server_name, self.tx_records, app, version)

    def raise_if_lake_down(self) -> None:
        """Tables failed to commit (``result.failed_tables``): when the lake itself fails, not the
        tables, the whole window fails (and is retried) instead of the tables stopping alone.

        Raises:
            SinkError: the lake is unreachable (:func:`~.isolation.lake_unreachable`).
        """
        failed = self.result.failed_tables
        lake_down = lake_unreachable(self.writer.storage, self.server_name)
        if lake_down is not None:
            raise SinkError(
                f"{len(failed)} table(s) could not be committed and the lake "
                f"itself fails ({lake_down}); the window is retried. First error: "
                f"{next(iter(failed.values()))['error']}"
            )

    def _write_last_batches(self) -> None:
        """Hand every table's last events over: the small ones of all tables in one Spark job
        (:meth:`..sink.lake.LakeWriter.write_together`), the others as usual."""
        small: list[tuple[TableEvents, pa.RecordBatch]] = []
        # the tables' handles (opened by each batch, read by its schemas) loaded side by side
        preload(
            self.writer.storage,
            [
                uri
                for (db, t), te in self.tables.items()
                if te.sink is None
                for uri in self.writer.paths(db, t).delta_tables()
            ],
            self.options.commit_workers,
            app_id=self.txn_app_id,  # what each table's batch asks first
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
        self, te: TableEvents, position: BinlogPosition
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
                written = w if written is None else combined_write_results(written, w)
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
