"""Consistent initial snapshot (Debezium MySQL connector, "Initial snapshots").

The steps, as the Debezium docs number them for ``snapshot.locking.mode=minimal``:

1. Establish a connection.
2. Determine the tables to capture.
3. Obtain a global read lock (``FLUSH TABLES WITH READ LOCK``) to block writes.
4. Start a ``REPEATABLE READ`` transaction ``WITH CONSISTENT SNAPSHOT``.
5. Read the current binlog position (file, pos, GTID set).
6. Read the schema of the captured tables.
7. Release the global read lock: other clients may write again.
8. Scan every table inside the transaction and emit ``op=r`` read events.
9. Commit the transaction and record the snapshot as complete.

When the user lacks RELOAD (managed services), step 3 falls back to ``LOCK TABLES ... READ`` on the
captured tables. ``LOCK TABLES`` cannot be combined with a transaction (starting one releases
the locks), so in that mode the table locks are held until every table is scanned, exactly like
Debezium's table-level-lock fallback. ``extended`` holds the global lock for the whole scan;
``none`` takes no lock: on MariaDB the position then comes from the consistent-snapshot status
variables ``binlog_snapshot_file``/``binlog_snapshot_position`` (exact, no lock needed); on MySQL
it is read without a lock and is only safe when no DDL runs concurrently (Debezium's warning).

Rows stream from an unbuffered cursor and leave as Arrow batches of at most ``batch_rows`` rows:
no table is ever held in memory. Numbers and temporals are read as the server's text
(``types.snapshot_decoders``) and converted column-wise by Arrow, which gives the same values as
pymysql's decoders at a fraction of the per-value cost.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import pyarrow as pa
import pymysql

from ..errors import FAILURE_HANDLING_MODES, ConfigurationError, UnknownTableError, ValueConversionError
from ..events import BinlogPosition, change_log_schema, now_ms, snapshot_events
from .catalog import read_table_schemas
from .connection import ConnectionSettings, ServerInfo, connect, current_position, preflight, server_info
from .schema import TableSchema
from .select_overrides import checked_condition
from .types import TableConverter, TypeOptions, select_expression, snapshot_decoders

log = logging.getLogger(__name__)

LockingMode = Literal["minimal", "extended", "none"]
LOCKING_MODES = ("minimal", "extended", "none")


def check_failure_handling_mode(mode: str) -> None:
    """Check an ``event_processing_failure_handling_mode`` (Debezium
    ``event.processing.failure.handling.mode``: one of :data:`~..errors.FAILURE_HANDLING_MODES`).

    Raises:
        ConfigurationError: ``mode`` is not one of them.
    """
    if mode not in FAILURE_HANDLING_MODES:
        raise ConfigurationError(
            f"event_processing_failure_handling_mode={mode!r} "
            f"is not valid; use one of {', '.join(FAILURE_HANDLING_MODES)} "
            "(Debezium event.processing.failure.handling.mode)"
        )


@dataclass(frozen=True)
class SnapshotOptions:
    """How the initial snapshot reads the source.

    Attributes:
        locking_mode: Debezium ``snapshot.locking.mode``: ``minimal`` (global read lock only while
            the position and schemas are read), ``extended`` (lock held for the whole scan) or
            ``none`` (no lock; see the module docs for its consistency guarantees).
        fetch_size: rows fetched per round trip from the unbuffered cursor
            (Debezium ``snapshot.fetch.size``).
        batch_rows: rows per Arrow batch handed to the sink (bounds memory).
        include_data: ``False`` reads position and schemas only (``snapshot.mode=no_data``).
        select_overrides: ``(("db.table", condition), ...)``: the rows the snapshot reads from
            those tables (Debezium ``snapshot.select.statement.overrides``, parsed by
            :func:`.select_overrides.parse_overrides`; checked against the columns on enter).
        event_processing_failure_handling_mode: a row holding a value the type mapping cannot
            convert (Debezium ``event.processing.failure.handling.mode``, as for streamed
            events): ``fail`` (default) raises :class:`~..errors.ValueConversionError` naming the
            table, the column and the row (snapshot position and primary key); ``warn`` leaves
            the row out with a WARNING each; ``skip`` leaves it out with one WARNING per table.
            Rows left out are listed in :attr:`ConsistentSnapshot.skipped`.
    """

    locking_mode: LockingMode = "minimal"
    fetch_size: int = 10_000
    batch_rows: int = 100_000
    include_data: bool = True
    select_overrides: tuple[tuple[str, str], ...] = ()
    event_processing_failure_handling_mode: str = "fail"

    def __post_init__(self) -> None:
        check_failure_handling_mode(self.event_processing_failure_handling_mode)
        if self.locking_mode not in LOCKING_MODES:
            raise ConfigurationError(
                f"snapshot_locking_mode={self.locking_mode!r} is not valid; use one of {LOCKING_MODES}"
            )
        if self.fetch_size < 1 or self.batch_rows < 1:
            raise ConfigurationError("snapshot fetch_size and batch_rows must be positive integers")


def _q(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


class ConsistentSnapshot:
    """A consistent snapshot of several tables at one binlog position.

    Use as a context manager; inside it :attr:`position`, :attr:`schemas` are set and
    :meth:`scan` streams each table's read events::

        with ConsistentSnapshot(settings, [("inventory", "customers")], TypeOptions(), opts, "srv") as s:
            for batch in s.scan(("inventory", "customers")):
                ...  # pa.RecordBatch in the change-log schema, op='r'

    Tables must be scanned one at a time, in any order, each at most once (one unbuffered cursor on
    the snapshot's connection).

    Raises (on enter):
        SourceConnectionError, PreflightError, UnknownTableError: see :mod:`.connection`.
    """

    def __init__(
        self,
        settings: ConnectionSettings,
        tables: Sequence[tuple[str, str]],
        type_options: TypeOptions,
        options: SnapshotOptions,
        server_name: str,
        *,
        need_streaming: bool = True,
    ):
        self.settings = settings
        self.tables = list(dict.fromkeys(tables))
        self.type_options = type_options
        self.options = options
        self.server_name = server_name
        self.need_streaming = need_streaming
        self.position: BinlogPosition | None = None
        self.schemas: dict[tuple[str, str], TableSchema] = {}
        self.create_statements: dict[tuple[str, str], str] = {}
        self.info: ServerInfo | None = None
        self.lock_kind: str = "none"
        self.lock_seconds: float = 0.0
        self.started_ms: int = 0
        self._conn: pymysql.connections.Connection | None = None
        self._lock_started = 0.0
        self._in_tx = False
        self._remaining: list[tuple[str, str]] = []
        self._where: dict[tuple[str, str], str] = {}  # snapshot.select.statement.overrides
        #: rows left out (event_processing_failure_handling_mode warn|skip), per table: the first
        #: 100 ``{"table", "position", "reason"}`` and the count
        self.skipped: dict[tuple[str, str], list[dict]] = {}
        self.skipped_count: dict[tuple[str, str], int] = {}
        self._scanning: tuple[str, str] = ("", "")  # the table being converted

    # -- lifecycle ---------------------------------------------------------------------------
    def __enter__(self) -> ConsistentSnapshot:
        self._conn = connect(self.settings, autocommit=True)
        try:
            self._begin()
        except BaseException:
            self._close(ok=False)
            raise
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        self._close(ok=exc_type is None)

    def _connection(self) -> pymysql.connections.Connection:
        if self._conn is None:
            raise RuntimeError("ConsistentSnapshot is used outside its `with` block")
        return self._conn

    def _begin(self) -> None:
        conn = self._connection()
        self.info = server_info(conn)
        for w in preflight(
            conn,
            self.info,
            self.tables,
            need_streaming=self.need_streaming,
            need_lock=self.options.locking_mode != "none",
        ):
            log.warning(w)
        mode = self.options.locking_mode
        with conn.cursor() as cur:
            cur.execute("SET SESSION TRANSACTION ISOLATION LEVEL REPEATABLE READ")
            if mode in ("minimal", "extended"):
                self._lock_started = time.monotonic()
                try:
                    cur.execute("FLUSH TABLES WITH READ LOCK")
                    self.lock_kind = "global"
                except pymysql.err.OperationalError as e:
                    if e.args and e.args[0] in (1227, 1044, 1045):
                        log.warning(
                            "FLUSH TABLES WITH READ LOCK not permitted (%s); falling back to "
                            "table-level locks held for the whole snapshot (Debezium behaviour).",
                            e.args[-1],
                        )
                        cur.execute(
                            "LOCK TABLES " + ", ".join(f"{_q(d)}.{_q(t)} READ" for d, t in self.tables)
                        )
                        self.lock_kind = "tables"
                    else:
                        raise
            if self.lock_kind != "tables":
                cur.execute("START TRANSACTION WITH CONSISTENT SNAPSHOT")
                self._in_tx = True
            self.started_ms = now_ms()
            self.position = self._read_position(cur)
            self.schemas = read_table_schemas(conn, self.tables)
            missing = [f"{d}.{t}" for d, t in self.tables if (d, t) not in self.schemas]
            if missing:
                raise UnknownTableError(f"Table(s) vanished before the snapshot: {missing}")
            # refused before anything is read or written
            self._where = override_conditions(self.options.select_overrides, self.tables, self.schemas)
            self.create_statements = create_statements(conn, self.tables)
            if self.lock_kind == "global" and mode == "minimal":
                cur.execute("UNLOCK TABLES")
                self.lock_seconds = time.monotonic() - self._lock_started
                self.lock_kind = "released"
        self._remaining = list(self.tables)
        log.info(
            "Snapshot of %d table(s) at %s (lock: %s, held %.3fs)",
            len(self.tables),
            self.position,
            self.lock_kind,
            self.lock_seconds,
        )

    def _read_position(self, cur) -> BinlogPosition:
        info = self.info
        assert info is not None
        if self.lock_kind == "none" and info.is_mariadb and self._in_tx:
            position = mariadb_snapshot_position(cur)
            if position is not None:
                return position
        return current_position(self._connection(), info)

    def _close(self, ok: bool) -> None:
        conn = self._connection()
        self._conn = None
        if conn is None:
            return
        try:
            if self._in_tx:
                conn.commit() if ok else conn.rollback()
            if self.lock_kind in ("global", "tables"):
                with conn.cursor() as cur:
                    cur.execute("UNLOCK TABLES")
                self.lock_seconds = time.monotonic() - self._lock_started
        except Exception:  # connection already broken: the server drops locks with it
            log.debug("cleanup after snapshot failed", exc_info=True)
        finally:
            conn.close()

    # -- scanning ----------------------------------------------------------------------------
    def scan(self, table: tuple[str, str]) -> Iterator[pa.RecordBatch]:
        """Stream ``op=r`` events of one table as change-log record batches.

        Snapshot markers follow Debezium: the very first row of the snapshot is ``first``, the first
        row of every other table ``first_in_data_collection``, the last row of a table
        ``last_in_data_collection`` and the last row of the last table ``last``; all others ``true``.

        Raises:
            ValueError: the table is not part of this snapshot or was already scanned.
        """
        if table not in self._remaining:
            raise ValueError(f"{table} is not pending in this snapshot (already scanned or unknown)")
        first_table = len(self._remaining) == len(self.tables)
        self._remaining.remove(table)
        last_table = not self._remaining
        schema = self.schemas[table]
        conv = TableConverter(schema, self.type_options, "pymysql")
        if not self.options.include_data:
            return
        sql = (
            "SELECT "
            + ", ".join(select_expression(c) for c in conv.columns)  # captured columns only
            + f" FROM {_q(table[0])}.{_q(table[1])}"
        )
        if table in self._where:  # executed without parameters: a '%' of the condition stays as is
            sql += f" WHERE {self._where[table]}"
            log.info("Snapshot of %s.%s reads the rows WHERE %s", table[0], table[1], self._where[table])
        assert self.position is not None and self.info is not None
        prev = None
        first_batch = True
        chunks = text_row_chunks(
            self._connection(), sql, None, self.options.fetch_size, self.options.batch_rows
        )
        for chunk in chunks:
            if prev is not None:
                yield self._events(conv, prev, first_batch, first_table, last=False, last_table=last_table)
                first_batch = False
            prev = chunk
        if prev is not None:
            yield self._events(conv, prev, first_batch, first_table, last=True, last_table=last_table)
        if self.skipped_count.get(table) and self.options.event_processing_failure_handling_mode == "skip":
            log.warning(
                "%d row(s) of %s.%s holding a value that cannot be converted were left out of the "
                "snapshot (event_processing_failure_handling_mode=skip)",
                self.skipped_count[table],
                table[0],
                table[1],
            )

    def _skipped(self, table: str, position: str, reason: str) -> None:
        """A row left out (event_processing_failure_handling_mode warn|skip)."""
        key = self._scanning
        self.skipped_count[key] = self.skipped_count.get(key, 0) + 1
        listed = self.skipped.setdefault(key, [])
        if len(listed) < 100:
            listed.append({"table": table, "position": position, "reason": reason})
        if self.options.event_processing_failure_handling_mode == "warn":
            log.warning("Left a row of %s at %s out of the snapshot: %s", table, position, reason)

    def _events(self, conv, rows, first, first_table, *, last, last_table):
        assert self.info is not None and self.position is not None  # set by _begin
        self._scanning = (conv.table.database, conv.table.table)
        fail = self.options.event_processing_failure_handling_mode == "fail"
        return read_events(
            conv,
            rows,
            server_name=self.server_name,
            server_id=self.info.server_id,
            position=self.position,
            snapshot_ts_ms=self.started_ms,
            first=first,
            last=last,
            first_table=first_table,
            last_table=last_table,
            on_failure=None if fail else self._skipped,
        )

    def change_log_schema(self, table: tuple[str, str]) -> pa.Schema:
        """Change-log schema of ``table`` (valid inside the context)."""
        conv = TableConverter(self.schemas[table], self.type_options, "pymysql")
        return change_log_schema(conv.arrow_schema, conv.table.primary_key)


def mariadb_snapshot_position(cur: Any, known: BinlogPosition | None = None) -> BinlogPosition | None:
    """The binlog position matching the consistent snapshot of ``cur``'s transaction (MariaDB's
    ``binlog_snapshot_file`` / ``binlog_snapshot_position`` status, exact without a lock), with its
    GTID set; ``None`` when the server has no such status (MySQL).

    ``known``: a position read earlier; when the snapshot is at it, its GTID set (and epoch) is
    reused. ``BINLOG_GTID_POS`` otherwise scans the binlog file up to the position (~0.1 s at the
    end of a 700 MB file).
    """
    cur.execute("SHOW STATUS LIKE 'binlog_snapshot_%'")
    status = {k.lower(): v for k, v in cur.fetchall()}
    f, p = status.get("binlog_snapshot_file"), status.get("binlog_snapshot_position")
    if not f or p is None:
        return None
    if known is not None and (f, int(p)) == (known.file, known.pos):
        return known
    cur.execute("SELECT BINLOG_GTID_POS(%s, %s)", (f, int(p)))
    gtid = cur.fetchone()[0] or None
    return BinlogPosition(file=f, pos=int(p), gtid_set=gtid, epoch=known.epoch if known else 0)


def text_row_chunks(
    conn: Any, sql: str, params: Sequence[Any] | None, fetch_size: int, batch_rows: int
) -> Iterator[list]:
    """Run ``sql`` on an unbuffered cursor of ``conn`` and yield its raw rows in lists of at most
    ``batch_rows`` (``fetch_size`` per round trip). Numbers and temporals arrive as the server's
    text (``types.snapshot_decoders``: no pymysql decoder call per value), for
    ``TableConverter.to_record_batch(text_values=True)``. Without ``params`` the statement is sent
    as is (a ``%`` in it stays)."""
    cur = conn.cursor(pymysql.cursors.SSCursor)
    try:
        # the decoders are picked when the result's columns are described, i.e. inside execute()
        saved = conn.decoders
        conn.decoders = snapshot_decoders(saved)
        try:
            cur.execute(sql, params or None)
        finally:
            conn.decoders = saved
        buf: list = []
        while True:
            rows = cur.fetchmany(min(fetch_size, batch_rows - len(buf)))
            if not rows:
                break
            buf.extend(rows)
            if len(buf) >= batch_rows:
                yield buf
                buf = []
        if buf:
            yield buf
    finally:
        cur.close()


#: ``(table, position, reason)`` of a snapshot row left out (event_processing_failure_handling_mode).
OnFailure = Callable[[str, str, str], None]


def row_position(conv: TableConverter, row: Sequence[Any], where: str, index: int) -> str:
    """Where a snapshot row is, for messages: ``where`` (e.g. ``snapshot at <position>``) and the
    row's primary key (``id=5``), or its index in the record batch when the table has no key or a
    key column is masked (a masked value never appears in a message)."""
    pk = conv.table.primary_key
    if pk and not set(pk) & set(conv.masked):
        values = dict(zip(conv.names, row))
        key = ", ".join(f"{k}={values[k]!r}" for k in pk)
        return f"{where}, row with key {key}"
    return f"{where}, row {index} of a record batch"


def convert_snapshot_rows(
    conv: TableConverter,
    rows: list,
    where: str,
    on_failure: OnFailure | None = None,
    *,
    text_values: bool = True,
) -> pa.RecordBatch:
    """``conv.to_record_batch(rows, text_values=text_values)`` of rows read by a snapshot
    (``where``: ``snapshot at <position>``, an incremental chunk, ...); a row holding a value that
    cannot be converted raises :class:`~..errors.ValueConversionError` (table, column, row) when
    ``on_failure`` is ``None``, else is reported to ``on_failure`` and left out."""
    try:
        return conv.to_record_batch(rows, text_values=text_values)
    except (ValueError, TypeError, OverflowError, ArithmeticError, pa.ArrowException):
        bad = conv.unconvertible_rows(rows, text_values=text_values)
        if not bad:
            raise
    table = conv.table.qualified_name
    if on_failure is None:
        i, (column, why) = min(bad.items())
        raise ValueConversionError(table, column, row_position(conv, rows[i], where, i), why) from None
    for i, (column, why) in sorted(bad.items()):
        on_failure(table, row_position(conv, rows[i], where, i), f"{column}: {why}")
    return conv.to_record_batch([r for i, r in enumerate(rows) if i not in bad], text_values=text_values)


def read_events(
    conv: TableConverter,
    rows: list,
    *,
    server_name: str,
    server_id: int,
    position: BinlogPosition,
    snapshot_ts_ms: int,
    first: bool,
    last: bool,
    first_table: bool,
    last_table: bool,
    on_failure: OnFailure | None = None,
) -> pa.RecordBatch:
    """``op=r`` events of raw text rows (:func:`text_row_chunks`) at ``position``. Snapshot markers
    follow Debezium: the first row of a table (``first``) is ``first`` in the snapshot's first
    table, else ``first_in_data_collection``; a table's last row (``last``) is ``last`` in the
    snapshot's last table, else ``last_in_data_collection``; all others ``true``.

    A value that cannot be converted: see :func:`convert_snapshot_rows` (``on_failure``).
    """
    values = convert_snapshot_rows(conv, rows, f"snapshot at {position}", on_failure)
    flags = ["true"] * values.num_rows
    if first and flags:
        flags[0] = "first" if first_table else "first_in_data_collection"
    if last and flags:
        flags[-1] = "last" if last_table else "last_in_data_collection"
    return snapshot_events(
        values,
        primary_key=conv.table.primary_key,  # the message key (message.key.columns)
        server_name=server_name,
        server_id=server_id,
        database=conv.table.database,
        table=conv.table.table,
        position=position,
        snapshot_flags=pa.array(flags, pa.string()),
        snapshot_ts_ms=snapshot_ts_ms,
    )


def override_conditions(
    select_overrides: Sequence[tuple[str, str]],
    tables: Sequence[tuple[str, str]],
    schemas: dict[tuple[str, str], TableSchema],
) -> dict[tuple[str, str], str]:
    """The ``snapshot.select.statement.overrides`` condition of each table that has one, checked
    against its columns (:func:`.select_overrides.checked_condition`).

    Raises:
        ConfigurationError: a condition names an unknown column or is not a safe filter.
    """
    overrides = dict(select_overrides)
    out = {}
    for d, t in tables:
        cond = overrides.get(f"{d}.{t}".lower())
        if cond is not None:
            out[(d, t)] = checked_condition(f"{d}.{t}", cond, schemas[(d, t)].column_names)
    return out


def create_statements(conn: Any, tables: Sequence[tuple[str, str]]) -> dict[tuple[str, str], str]:
    """``SHOW CREATE TABLE`` of each table (the schema history's ``CREATE`` records).

    Raises:
        UnknownTableError: a table vanished.
    """
    out = {}
    with conn.cursor() as cur:
        for d, t in tables:
            cur.execute(f"SHOW CREATE TABLE {_q(d)}.{_q(t)}")
            row = cur.fetchone()
            if row is None:
                raise UnknownTableError(f"Table {d}.{t} vanished before the snapshot")
            out[(d, t)] = row[1]
    return out
