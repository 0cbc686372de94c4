"""Bounded binlog reader over python-mysql-replication.

Reads the source server's binary log from a start position to an end position (both at
transaction boundaries) and yields row-event batches, DDL statements and transaction commits with
the Debezium ``source`` fields (file, pos, row, server_id, gtid, thread, ts_ms, query).

Guarantees, given the pitfalls of python-mysql-replication 1.0.17 measured here:

- always terminates: file/pos mode with ``is_mariadb=False``, ``resume_stream=True``,
  ``blocking=False`` ends at the server's end of log; the reader also stops at ``end`` and enforces
  a wall-clock ``deadline_s`` (checked per event) raising :class:`BinlogReadTimeout`;
- reaching the end of the log before ``end`` raises :class:`BinlogEndedEarly` instead of silently
  returning a shorter window;
- MySQL 8.0.20+ compressed transaction payloads (silently dropped by the library) raise
  :class:`CompressedTransactionError`;
- rotation is followed (the library's RotateEvent handling) and positions are tracked per file.

Offsets are only ever reported at transaction boundaries (after XID / COMMIT / a DDL statement, or
after a data-less event written between transactions: file header, MariaDB binlog checkpoint, stop
event), so resuming from a reported position never replays half a transaction, and a window may
end wherever ``SHOW MASTER STATUS`` pointed.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, fields
from typing import Any

import pymysql
from pymysqlreplication import BinLogStreamReader
from pymysqlreplication.event import (
    FormatDescriptionEvent,
    GtidEvent,
    MariadbAnnotateRowsEvent,
    MariadbBinLogCheckPointEvent,
    MariadbGtidEvent,
    MariadbGtidListEvent,
    PreviousGtidsEvent,
    QueryEvent,
    RotateEvent,
    RowsQueryLogEvent,
    StopEvent,
    XidEvent,
)
from pymysqlreplication.row_event import DeleteRowsEvent, UpdateRowsEvent, WriteRowsEvent

from ..errors import CdcError
from ..events import BinlogPosition
from .connection import Connection, ConnectionSettings, raise_for_missing_privilege
from .statements import is_dml

log = logging.getLogger(__name__)

try:  # MySQL 8.0.20+ binlog_transaction_compression payload event
    from pymysqlreplication.event import TransactionPayloadEvent
except ImportError:  # pragma: no cover - depends on library version
    TransactionPayloadEvent = None


#: Events written between transactions that carry no data: file headers, MariaDB's binlog
#: checkpoints (written asynchronously, e.g. after a transaction that follows a rotation) and the
#: stop event of a server shut down. The server's position (SHOW MASTER STATUS, a window end) can
#: lie right after them, so their end is a transaction boundary too.
_BETWEEN_TRANSACTIONS = (
    FormatDescriptionEvent,
    MariadbGtidListEvent,
    MariadbBinLogCheckPointEvent,
    PreviousGtidsEvent,
    StopEvent,
)


class BinlogReadError(CdcError):
    """The binlog could not be read as requested."""


class BinlogReadTimeout(BinlogReadError):
    """The bounded read did not reach its end position before its deadline."""


class BinlogEndedEarly(BinlogReadError):
    """The server's binlog ended before the requested end position."""


class CompressedTransactionError(BinlogReadError):
    """A compressed transaction payload was found (cannot be decoded: data would be lost)."""


@dataclass
class EventOrigin:
    """Where a binlog event comes from: what Debezium's ``source`` block records of it, shared by
    :class:`RowsBatch` and :class:`QueryStatement`.

    Attributes:
        file, pos: binlog file and start offset of the event (Debezium ``source.file``/``pos``).
        ts_ms: event timestamp in epoch ms (second precision on the wire).
        server_id: originating server id.
        gtid: GTID of the enclosing transaction (``None`` without GTIDs).
        thread: id of the session that made the change (from the transaction's BEGIN, or the
            statement's own session).
    """

    file: str
    pos: int
    ts_ms: int
    server_id: int
    gtid: str | None
    thread: int | None

    def origin(self) -> dict[str, Any]:
        """The origin fields alone, as keyword arguments (another event at the same place)."""
        return {f.name: getattr(self, f.name) for f in fields(EventOrigin)}


@dataclass
class RowsBatch(EventOrigin):
    """The rows of one binlog rows event (built by keyword; the origin fields of
    :class:`EventOrigin` first).

    Attributes:
        database, table: the changed table.
        op: ``c`` (WriteRows), ``u`` (UpdateRows) or ``d`` (DeleteRows).
        rows: library row dicts: ``{"values": {...}}`` for c/d, ``{"before_values", "after_values"}``
            for u, keyed by column name (``UNKNOWN_COL<i>`` without ``binlog_row_metadata=FULL``).
        query: the statement text when the server annotates row events, else ``None``.
        column_names: column names the library used for this event.
        partial: the row images that do not carry every column (``"before"``, ``"after"`` of an
            update, ``"values"`` of an insert/delete): logged with ``binlog_row_image=MINIMAL``
            or ``NOBLOB`` (the event's columns-present bitmap); empty for full images.
    """

    database: str
    table: str
    op: str
    rows: list[dict]
    query: str | None
    column_names: list[str]
    partial: tuple[str, ...] = ()


@dataclass
class QueryStatement(EventOrigin):
    """A statement QUERY event that is not BEGIN/COMMIT/XA: what :class:`DdlStatement` and
    :class:`StatementDml` both carry (built by keyword).

    Attributes:
        sql: the statement text, stripped.
        database: the event's default database (``None`` when the session had none).
    """

    sql: str
    database: str | None


@dataclass
class DdlStatement(QueryStatement):
    """A statement QueryEvent that is not BEGIN/COMMIT (DDL; the catalog decides what it does);
    ``end`` is the position after it (a transaction boundary)."""

    end: BinlogPosition


@dataclass
class StatementDml(QueryStatement):
    """A QUERY event carrying data-changing SQL (``binlog_format=STATEMENT``/``MIXED``): the
    change has no row images, so row-based capture misses it (see :mod:`.statements`)."""


@dataclass
class TransactionCommit:
    """End of a transaction: ``end`` is a safe resume position (with the GTID set after it)."""

    end: BinlogPosition
    gtid: str | None
    ts_ms: int


def advance_gtid_set(gtid_set: str | None, gtid: str | None, is_mariadb: bool) -> str | None:
    """The executed GTID set after a transaction with ``gtid`` committed.

    MariaDB: ``domain-server-seq`` per domain, comma-separated (the domain's entry is replaced).
    MySQL: ``uuid:1-N`` interval sets, merged with pymysqlreplication's :class:`GtidSet`.
    """
    if not gtid:
        return gtid_set
    if is_mariadb:
        domains: dict[str, str] = {}
        for part in (gtid_set or "").split(","):
            part = part.strip()
            if part:
                domains[part.split("-", 1)[0]] = part
        domains[gtid.split("-", 1)[0]] = gtid
        return ",".join(domains[d] for d in sorted(domains, key=lambda x: int(x)))
    from pymysqlreplication.gtid import Gtid, GtidSet

    s = GtidSet(gtid_set or "")
    s = s + Gtid(gtid)
    return str(s).replace("\n", "")


_COM_BINLOG_DUMP = 0x12
_BINLOG_SEND_ANNOTATE_ROWS_EVENT = 0x02


class _AnnotatingConnection(Connection):
    """A replication connection whose ``COM_BINLOG_DUMP`` request asks MariaDB for its
    ``Annotate_rows`` events (dump flag ``BINLOG_SEND_ANNOTATE_ROWS_EVENT``; MariaDB sends them
    only when asked, and python-mysql-replication asks only in its MariaDB GTID mode, not in the
    file/position mode used here). The packet is ``length(3) seq(1) command(1) position(4)
    flags(2) server_id(4) file``; only its flags change."""

    def _write_bytes(self, data: bytes) -> None:
        if len(data) >= 11 and data[4] == _COM_BINLOG_DUMP:
            buf = bytearray(data)
            flags = int.from_bytes(buf[9:11], "little") | _BINLOG_SEND_ANNOTATE_ROWS_EVENT
            buf[9:11] = flags.to_bytes(2, "little")
            data = bytes(buf)
        super()._write_bytes(data)  # type: ignore[misc]  # pymysql internal, not in its stubs


class BinlogReader:
    """Iterate a bounded window ``[start, end)`` of the binlog.

    Args:
        settings: connection of the capture user (needs REPLICATION SLAVE/CLIENT).
        server_id: this client's replica id (must be unique among the server's replicas).
        start: resume position (a transaction boundary), with its GTID set.
        end: stop at the first transaction boundary at or after this position; ``None`` reads to
            the server's current end of log.
        is_mariadb: GTID format of the server.
        deadline_s: wall-clock budget; exceeding it raises :class:`BinlogReadTimeout`.
        rows_filter: ``f(database, table) -> bool``; the rows of a rows event whose table it
            rejects are never decoded (python-mysql-replication decodes row images lazily, on
            the first access to ``event.rows``, at ~50 µs per row in pure Python): such an event
            is still yielded, with ``rows=[]`` and ``column_names=[]``, so positions and the item
            sequence are unchanged. Called once per table (cached). ``None``: decode every row.
        annotate_rows: on MariaDB, ask the server for its ``Annotate_rows`` events
            (``binlog_annotate_row_events=ON``), so :attr:`RowsBatch.query` holds each row
            change's statement (Debezium ``include.query``). MySQL sends ``Rows_query`` events
            whenever ``binlog_rows_query_log_events=ON``.

    Iterating yields :class:`RowsBatch`, :class:`DdlStatement`, :class:`StatementDml` and
    :class:`TransactionCommit` items. After iteration :attr:`position` is the last boundary reached (== end when complete).
    Every position it builds is in ``start``'s offset epoch (:meth:`BinlogPosition.at`).

    Raises (while iterating):
        BinlogEndedEarly, BinlogReadTimeout, CompressedTransactionError;
        MissingPrivilegeError when the user lacks REPLICATION SLAVE/CLIENT (the preflight's
        ``GRANT`` advice); the library's pymysql errors for connection failures (the caller
        retries the whole window).
    """

    def __init__(
        self,
        settings: ConnectionSettings,
        server_id: int,
        start: BinlogPosition,
        end: BinlogPosition | None,
        *,
        is_mariadb: bool,
        deadline_s: float | None = None,
        rows_filter: Callable[[str, str], bool] | None = None,
        annotate_rows: bool = False,
    ):
        self.annotate_rows = annotate_rows
        self.settings = settings
        self.rows_filter = rows_filter
        self._decode: dict[tuple[str, str], bool] = {}
        self.rows_skipped = 0  # rows events whose rows were not decoded (rows_filter)
        self.server_id = server_id
        self.start = start
        # one server's binlog: every position of the window is in the start's offset epoch
        self.end = end.with_epoch(start.epoch) if end is not None else None
        self.is_mariadb = is_mariadb
        self.deadline_s = deadline_s
        self.position = start
        self.events_read = 0

    def _reached_end(self, pos: BinlogPosition) -> bool:
        return self.end is not None and pos.sort_key() >= self.end.sort_key()

    def __iter__(self) -> Iterator[RowsBatch | DdlStatement | StatementDml | TransactionCommit]:
        if self._reached_end(self.start):
            return
        stream = self._open_stream()
        deadline = time.monotonic() + self.deadline_s if self.deadline_s else None
        st = _WindowState(file=self.start.file, gtid_set=self.start.gtid_set)
        try:
            for ev in stream:
                self.events_read += 1
                if deadline is not None and time.monotonic() > deadline:
                    raise BinlogReadTimeout(
                        f"Binlog window {self.start} → {self.end} not finished within "
                        f"{self.deadline_s:.0f}s (at {self.position}); the window is retried."
                    )
                if isinstance(ev, RotateEvent):
                    if self._rotate(ev, st):
                        break
                    continue
                end_pos = ev.packet.log_pos
                start_pos = end_pos - ev.packet.event_size
                ts_ms = int(ev.timestamp) * 1000
                if isinstance(ev, _BETWEEN_TRANSACTIONS):
                    if self._between_transactions(end_pos, st):
                        break
                    continue
                if isinstance(ev, (GtidEvent, MariadbGtidEvent)):
                    st.tx_gtid = ev.gtid
                    st.query = None
                    continue
                if isinstance(ev, (MariadbAnnotateRowsEvent,)):
                    q = ev.sql_statement
                    st.query = q.decode("utf-8", "replace") if isinstance(q, bytes) else q
                    continue
                if isinstance(ev, RowsQueryLogEvent):
                    st.query = ev.query
                    continue
                if TransactionPayloadEvent is not None and isinstance(ev, TransactionPayloadEvent):
                    raise CompressedTransactionError(
                        f"Compressed transaction payload at {st.file}:{start_pos}: python-mysql-replication "
                        "cannot decode it. SET GLOBAL binlog_transaction_compression = OFF and "
                        "re-snapshot the affected tables."
                    )
                if isinstance(ev, (WriteRowsEvent, UpdateRowsEvent, DeleteRowsEvent)):
                    yield self._rows_batch(ev, st, start_pos, ts_ms)
                    continue
                if isinstance(ev, XidEvent):
                    yield self._commit(st, end_pos, ts_ms)
                    if self._stop_at_boundary(st):
                        break
                    continue
                if isinstance(ev, QueryEvent):
                    item = self._query_item(ev, st, start_pos, end_pos, ts_ms)
                    if item is None:
                        continue  # BEGIN / XA START
                    yield item
                    if not isinstance(item, StatementDml) and self._stop_at_boundary(st):
                        break
        except pymysql.err.MySQLError as e:
            raise_for_missing_privilege(
                e, self.settings.user, "reading the binlog (REPLICATION SLAVE, REPLICATION CLIENT)"
            )
            raise
        finally:
            stream.close()
        if not st.done and self.end is not None and not self._reached_end(self.position):
            raise BinlogEndedEarly(
                f"The binlog ended at {self.position} before the window end {self.end}: the "
                "position is not (or no longer) on the server."
            )

    # -- steps of __iter__ -----------------------------------------------------------------------

    def _open_stream(self) -> BinLogStreamReader:
        """The library's stream from ``start``: file/pos mode, non-blocking (ends at the server's end
        of log), only the events the window needs (see the module docstring's guarantees)."""
        only = [
            WriteRowsEvent,
            UpdateRowsEvent,
            DeleteRowsEvent,
            QueryEvent,
            XidEvent,
            RotateEvent,
            GtidEvent,
            MariadbGtidEvent,
            MariadbAnnotateRowsEvent,
            RowsQueryLogEvent,
            *_BETWEEN_TRANSACTIONS,
        ]
        if TransactionPayloadEvent is not None:
            only.append(TransactionPayloadEvent)
        return BinLogStreamReader(
            connection_settings=self.settings.replication_settings(),
            server_id=self.server_id,
            log_file=self.start.file,
            log_pos=self.start.pos,
            resume_stream=True,
            blocking=False,
            is_mariadb=False,
            only_events=only,
            enable_logging=False,
            pymysql_wrapper=_AnnotatingConnection if self.annotate_rows and self.is_mariadb else Connection,
        )

    def _stop_at_boundary(self, st: _WindowState) -> bool:
        """After a boundary: whether :attr:`position` reached ``end`` (then the window is done)."""
        if self._reached_end(self.position):
            st.done = True
        return st.done

    def _rotate(self, ev: RotateEvent, st: _WindowState) -> bool:
        """A rotation to a new file moves the position to its start (a transaction boundary);
        returns whether that reached ``end``."""
        if ev.next_binlog != st.file:
            # The start of a binlog file is a transaction boundary.
            st.file = ev.next_binlog
            self.position = self.start.at(st.file, int(ev.position), st.gtid_set)
            return self._stop_at_boundary(st)
        return False

    def _between_transactions(self, end_pos: int, st: _WindowState) -> bool:
        """A data-less event between transactions: its end is a boundary; returns whether that
        reached ``end``."""
        # artificial events (log_pos 0, e.g. the format description sent when the dump
        # starts mid-file) and positions behind us never move the position
        if end_pos > 0 and st.tx_gtid is None and st.thread is None:
            here = self.start.at(st.file, end_pos, st.gtid_set)
            if here.sort_key() > self.position.sort_key():
                self.position = here
                return self._stop_at_boundary(st)
        return False

    def _rows_batch(self, ev: Any, st: _WindowState, start_pos: int, ts_ms: int) -> RowsBatch:
        """The rows event as a :class:`RowsBatch` (rows not decoded when ``rows_filter`` rejects the
        table)."""
        op = "c" if isinstance(ev, WriteRowsEvent) else "u" if isinstance(ev, UpdateRowsEvent) else "d"
        decode = True
        if self.rows_filter is not None:
            key = (ev.schema, ev.table)
            cached = self._decode.get(key)
            if cached is None:
                cached = self._decode[key] = bool(self.rows_filter(*key))
            decode = cached
        if not decode:
            self.rows_skipped += 1
        return RowsBatch(
            database=ev.schema,
            table=ev.table,
            op=op,
            rows=ev.rows if decode else [],
            file=st.file,
            pos=start_pos,
            ts_ms=ts_ms,
            server_id=ev.packet.server_id,
            gtid=st.tx_gtid,
            thread=st.thread,
            query=st.query,
            column_names=[c.name for c in ev.columns] if decode else [],
            partial=_partial_images(ev, op) if decode else (),
        )

    def _commit(self, st: _WindowState, end_pos: int, ts_ms: int) -> TransactionCommit:
        """XID / COMMIT / XA end: the GTID set advances, the position moves to the boundary and the
        transaction's state is cleared."""
        tx_gtid = st.tx_gtid
        self._end_transaction(st, end_pos)
        return TransactionCommit(self.position, tx_gtid, ts_ms)

    def _end_transaction(self, st: _WindowState, end_pos: int) -> None:
        """A boundary at ``end_pos`` ends the open transaction (its GTID joins the set)."""
        st.gtid_set = advance_gtid_set(st.gtid_set, st.tx_gtid, self.is_mariadb)
        self.position = self.start.at(st.file, end_pos, st.gtid_set)
        st.tx_gtid, st.thread, st.query = None, None, None

    def _query_item(
        self, ev: QueryEvent, st: _WindowState, start_pos: int, end_pos: int, ts_ms: int
    ) -> TransactionCommit | StatementDml | DdlStatement | None:
        """A QUERY event: ``None`` for BEGIN / XA START (the transaction's thread is noted), a
        commit for COMMIT / XA END..., :class:`StatementDml` for statement-based DML (not a
        boundary), else a :class:`DdlStatement` (a boundary)."""
        sql = ev.query.strip()
        upper = sql[:6].upper()
        if upper == "BEGIN" or sql.upper().startswith("XA START"):
            st.thread = ev.slave_proxy_id
            return None
        if upper == "COMMIT" or upper.startswith("XA "):
            return self._commit(st, end_pos, ts_ms)
        schema = ev.schema.decode() if isinstance(ev.schema, bytes) else ev.schema
        statement: dict[str, Any] = {
            "sql": sql,
            "database": schema or None,
            "file": st.file,
            "pos": start_pos,
            "ts_ms": ts_ms,
            "server_id": ev.packet.server_id,
            "gtid": st.tx_gtid,
            "thread": ev.slave_proxy_id,
        }
        if is_dml(sql):
            # statement-based DML inside a transaction: not a boundary (its XID/COMMIT is)
            return StatementDml(**statement)
        self._end_transaction(st, end_pos)
        return DdlStatement(**statement, end=self.position)


@dataclass
class _WindowState:
    """Where :meth:`BinlogReader.__iter__` is: the current file, the GTID set after the last
    boundary, the open transaction's GTID, thread id and row-change statement, and whether the
    window reached its end."""

    file: str
    gtid_set: str | None
    tx_gtid: str | None = None
    thread: int | None = None
    query: str | None = None
    done: bool = False


def _partial_images(ev: Any, op: str) -> tuple[str, ...]:
    """The row images of rows event ``ev`` that lack columns (``binlog_row_image=MINIMAL`` /
    ``NOBLOB``): a columns-present bitmap with fewer bits set than the table map has columns
    (python-mysql-replication reads the bitmaps with the event; padding bits are 0)."""
    from pymysqlreplication.bitmap import BitCount

    n = ev.number_of_columns
    out = []
    first = getattr(ev, "columns_present_bitmap", None)
    if first is not None and BitCount(first) < n:
        out.append("before" if op == "u" else "values")
    second = getattr(ev, "columns_present_bitmap2", None)
    if op == "u" and second is not None and BitCount(second) < n:
        out.append("after")
    return tuple(out)
