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
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

import pyarrow as pa

from .errors import CdcError
from .events import BinlogPosition, ChangeEventBuilder, now_ms
from .sink.lake import LakeWriter, TableWriteResult
from .source.binlog import BinlogReader, DdlStatement, RowsBatch, TransactionCommit
from .source.catalog import read_table_schemas
from .source.connection import ConnectionSettings, ServerInfo, connect
from .source.ddl import SchemaCatalog
from .source.filters import TableFilter
from .source.schema import TableSchema
from .source.schema_history import HistoryRecord, SchemaHistory, records_from_outcome
from .source.types import TableConverter, TypeOptions

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
        deadline_s: wall-clock budget of the binlog read (``None``: unbounded).
    """

    skip_unparseable_ddl: bool = False
    provide_transaction_metadata: bool = False
    batch_rows: int = 100_000
    deadline_s: float | None = None


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

    @property
    def rows(self) -> int:
        return sum(t.rows for t in self.tables.values())

    @property
    def lag_ms(self) -> int | None:
        """Milliseconds between the newest event's commit on the source and now (Debezium's
        ``MilliSecondsBehindSource``)."""
        return None if self.last_event_ts_ms is None else max(0, now_ms() - self.last_event_ts_ms)


class _TableEvents:
    """Events of one table in the window: finished batches + the builder of the current schema."""

    def __init__(self, schema: TableSchema, options: TypeOptions, server_name: str, batch_rows: int):
        self.options = options
        self.server_name = server_name
        self.batch_rows = batch_rows
        self.batches: list[pa.RecordBatch] = []
        self.truncated_at: BinlogPosition | None = None
        self._set_schema(schema)

    def _set_schema(self, schema: TableSchema) -> None:
        self.schema = schema
        self.conv = TableConverter(schema, self.options, "binlog")
        self.builder = ChangeEventBuilder(
            self.conv.arrow_schema, schema.primary_key,
            server_name=self.server_name, database=schema.database, table=schema.table,
        )
        self.names = schema.column_names

    def flush(self) -> None:
        if len(self.builder):
            self.batches.append(self.builder.to_record_batch())
            self._set_schema(self.schema)

    def schema_changed(self, schema: TableSchema) -> None:
        if schema != self.schema:
            self.flush()
            self._set_schema(schema)

    def maybe_flush(self) -> None:
        if len(self.builder) >= self.batch_rows:
            self.flush()


def _remap(values: dict, names: list[str]) -> dict:
    """Row dict keyed ``UNKNOWN_COL<i>`` (no binlog_row_metadata) → keyed by schema names."""
    return {names[int(k[len("UNKNOWN_COL"):])]: v for k, v in values.items()}


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
) -> WindowResult:
    """Read ``[start, end)`` of the binlog and commit its changes to the lake.

    Raises:
        BinlogReadError (and subclasses): see :mod:`.source.binlog`.
        UnparseableDdlError: a DDL could not be parsed (unless ``skip_unparseable_ddl``).
        SchemaMismatchError: an event's columns differ from the schema history.
        SinkError: a commit failed.
    """
    t0 = time.monotonic()
    catalog = SchemaCatalog(history.catalog_at(start), server_version=info.version)
    result = WindowResult(start=start, end=end)
    tables: dict[tuple[str, str], _TableEvents] = {}
    records: list[HistoryRecord] = []
    fallback_conn = None
    tx_counter: dict = {"total": 0, "per_table": {}, "id": None}
    reader = BinlogReader(
        settings, replica_server_id, start, end, is_mariadb=info.is_mariadb, deadline_s=options.deadline_s
    )

    def table_events(db: str, t: str) -> _TableEvents | None:
        nonlocal fallback_conn
        if not table_filter.matches(db, t):
            return None
        schema = catalog.get(db, t)
        if schema is None:
            # Not in the history (captured table never snapshotted): current schema, verified below.
            if fallback_conn is None:
                fallback_conn = connect(settings)
            schema = read_table_schemas(fallback_conn, [(db, t)]).get((db, t))
            if schema is None:
                return None
            log.warning("No schema history for %s.%s; using its current schema from information_schema", db, t)
            catalog.put(schema)  # seed the catalog for later DDL
        te = tables.get((db, t))
        if te is None:
            te = tables[(db, t)] = _TableEvents(schema, type_options, server_name, options.batch_rows)
        else:
            te.schema_changed(schema)
        return te

    try:
        for item in reader:
            if isinstance(item, RowsBatch):
                te = table_events(item.database, item.table)
                if te is None:
                    continue
                _add_rows(te, item, tx_counter if options.provide_transaction_metadata else None)
                result.last_event_ts_ms = item.ts_ms
                te.maybe_flush()
            elif isinstance(item, TransactionCommit):
                result.transactions += 1
                tx_counter.update(total=0, per_table={}, id=None)
            elif isinstance(item, DdlStatement):
                outcomes = catalog.apply(
                    item.sql, item.database, skip_unparseable=options.skip_unparseable_ddl, logger=log
                )
                for o in outcomes:
                    if o.ignored:
                        continue
                    result.ddl_statements += 1
                    records.append(records_from_outcome(o, item.end, len(records), item.ts_ms, item.server_id, item.gtid))
                    for db, t in o.truncated:
                        te = table_events(db, t)
                        if te is None:
                            continue
                        te.builder.add(
                            "t", None, None, file=item.file, pos=item.pos, row=0, ts_ms=now_ms(),
                            source_ts_ms=item.ts_ms, server_id=item.server_id, gtid=item.gtid,
                            thread=item.thread, query=item.sql,
                        )
                        te.truncated_at = BinlogPosition(item.file, item.pos)
                    for ch in o.table_changes:
                        te = tables.get((ch.database, ch.table))
                        if te is not None and ch.schema is not None:
                            te.schema_changed(ch.schema)
                result.last_event_ts_ms = item.ts_ms
        result.events_read = reader.events_read
        result.end = reader.position
        version = start.as_version()
        for (db, t), te in tables.items():
            te.flush()
            if not te.batches:
                continue
            value_schema = te.conv.arrow_schema
            result.tables[(db, t)] = writer.write_table_batch(
                db, t, te.batches, value_schema=value_schema, primary_key=te.schema.primary_key,
                app_id=STREAM_APP_ID, version=version, position=end, truncated_at=te.truncated_at,
            )
        history.append(records, app_id=STREAM_APP_ID, version=version)
    finally:
        if fallback_conn is not None:
            fallback_conn.close()
    result.seconds = time.monotonic() - t0
    return result


def _add_rows(te: _TableEvents, ev: RowsBatch, tx: dict | None) -> None:
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
    conv = te.conv.convert_row_dict
    b = te.builder
    now = now_ms()
    common = dict(
        file=ev.file, pos=ev.pos, ts_ms=now, source_ts_ms=ev.ts_ms, server_id=ev.server_id,
        gtid=ev.gtid, thread=ev.thread, query=ev.query,
    )

    def txinfo():
        if tx is None:
            return None
        if tx["id"] is None:
            tx["id"] = ev.gtid or f"{ev.file}:{ev.pos}"
        tx["total"] += 1
        key = te.schema.qualified_name
        tx["per_table"][key] = tx["per_table"].get(key, 0) + 1
        return (tx["id"], tx["total"], tx["per_table"][key])

    for i, row in enumerate(ev.rows):
        if ev.op == "u":
            bv, av = row["before_values"], row["after_values"]
            if remap:
                bv, av = _remap(bv, names), _remap(av, names)
            before = conv(bv, row.get("before_none_sources"))
            after = conv(av, row.get("after_none_sources"))
            if te.schema.primary_key and b.key_of(before) != b.key_of(after):
                b.add("d", before, None, row=i, tx=txinfo(), **common)
                b.add("c", None, after, row=i, tx=txinfo(), **common)
            else:
                b.add("u", before, after, row=i, tx=txinfo(), **common)
        else:
            v = row["values"]
            if remap:
                v = _remap(v, names)
            img = conv(v, row.get("none_sources"))
            if ev.op == "c":
                b.add("c", None, img, row=i, tx=txinfo(), **common)
            else:
                b.add("d", img, None, row=i, tx=txinfo(), **common)


def snapshot_history_app_id(tables: Sequence[tuple[str, str]]) -> str:
    """History batch identity of a snapshot of ``tables`` (distinct per table set)."""
    digest = hashlib.sha1(",".join(f"{d}.{t}" for d, t in sorted(tables)).encode()).hexdigest()[:12]
    return f"dagster-mysql-cdc/snapshot/{digest}"
