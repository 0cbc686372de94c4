"""The source side of the reconciliation checks (:mod:`.checks`, :mod:`.verify`, :mod:`.rotation`).

A check compares the lake, complete up to the committed position ``C``, with the source read in a
consistent-snapshot transaction at its position ``P >= C`` (:func:`consistent_source`); the keys
the binlog changed in ``[C, P)`` are left out of the comparison (:func:`touched_keys`, or one
binlog read for many tables: :class:`SharedSource`). Source rows are compared as the lake holds
them: Debezium-converted, in the lake's column types (:func:`converted_rows`), struct values made
hashable (:func:`hashable_rows`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

import pyarrow as pa
import pymysql

from ..events import BinlogPosition
from ..source.catalog import read_table_schemas
from ..source.connection import ConnectionSettings, ServerInfo, connect
from ..source.schema import TableSchema
from ..source.types import TableConverter, TypeOptions, hashable_value, quote_identifier, select_expression


def touched_keys(
    settings: ConnectionSettings,
    info: ServerInfo,
    schema: TableSchema,
    start: BinlogPosition,
    end: BinlogPosition,
    type_options: TypeOptions,
    server_id: int,
) -> set[tuple]:
    """Converted primary keys of ``schema``'s rows changed by the binlog in ``[start, end)``."""
    if start.sort_key() >= end.sort_key():
        return set()
    from ..engine.watermark import keys_touched
    from ..source.binlog import BinlogReader  # imported when a check runs (load time stays low)

    key_of = _key_function(schema, type_options)  # an image of other columns: a DDL since ``start``
    keys, _ = keys_touched(
        BinlogReader(settings, server_id, start, end, is_mariadb=info.is_mariadb, deadline_s=300),
        (schema.database, schema.table),
        key_of,
    )
    return keys


def ddl_since(
    settings: ConnectionSettings,
    info: ServerInfo,
    database: str,
    start: BinlogPosition,
    end: BinlogPosition,
    server_id: int,
) -> bool:
    """Whether the binlog ``[start, end)`` holds a DDL statement that may change a table of
    ``database`` (:func:`..source.ddl.scope.ddl_databases`): a source schema read at ``end`` can then differ
    from the lake's, complete up to ``start``, without anything being lost. One binlog read whose
    rows are not decoded.

    Raises:
        BinlogReadError: the binlog cannot be read (purged, the server gone).
    """
    if start.sort_key() >= end.sort_key():
        return False
    from ..source.binlog import BinlogReader, DdlStatement
    from ..source.ddl.scope import ddl_databases  # sqlglot: imported when a check runs

    reader = BinlogReader(
        settings,
        server_id,
        start,
        end,
        is_mariadb=info.is_mariadb,
        deadline_s=300,
        rows_filter=lambda d, t: False,
    )
    return any(
        _names(ddl_databases(item.sql, item.database), database)
        for item in reader
        if isinstance(item, DdlStatement)
    )


def _names(databases: set[str] | None, database: str) -> bool:
    """Whether a DDL that names ``databases`` (``None``: it cannot be judged, so any) may change a
    table of ``database`` (compared case-insensitively too: ``lower_case_table_names``)."""
    return databases is None or database in databases or database.lower() in {d.lower() for d in databases}


#: In :func:`touched_keys`: the binlog changed the table's rows with another schema since the
#: committed position (a DDL): rows changed then cannot be told apart, the comparison waits.
SCHEMA_CHANGED = ("<schema changed>",)


def _hashable_row(values: Iterable[Any]) -> tuple:
    """A converted row (or key) as a tuple that can be hashed: struct values (geometries, dicts in
    Python) as tuples (:func:`~..source.types.hashable_value`), the same on the lake's and the
    source's side, so a keyless table with a spatial column (every column is its key) compares."""
    return tuple(hashable_value(v) for v in values)


def struct_positions(schema: pa.Schema, names: Sequence[str]) -> list[int]:
    """Positions in ``names`` of the struct columns of ``schema`` (their values need
    :func:`_hashable_row`)."""
    return [i for i, n in enumerate(names) if pa.types.is_struct(schema.field(n).type)]


def hashable_rows(rows: Iterable[tuple], structs: list[int]) -> Iterable[tuple]:
    """``rows`` with their struct values made hashable (unchanged when there are none)."""
    if not structs:
        return rows
    return (_hashable_row(r) for r in rows)


class SharedSource:
    """The source side of the full checks of many tables in one run (a snapshot of hundreds of
    tables checks each): one connection in one consistent-snapshot transaction (its position),
    the tables' schemas in one query, and the keys each table changed since the committed
    position in one binlog read, instead of one of each per table. Close it after the checks.

    Args:
        tables: ``(database, table)`` of every table to check.
        committed: the lake's committed position (rows changed since are not compared).
    """

    def __init__(
        self,
        settings: ConnectionSettings,
        info: ServerInfo,
        tables: Sequence[tuple[str, str]],
        committed: BinlogPosition,
        type_options: TypeOptions,
        server_id: int,
    ):
        self.settings, self.info = settings, info
        self.tables = list(tables)
        self.committed = committed
        self.type_options = type_options
        self.server_id = server_id
        self._conn: Any = None
        self._pos: BinlogPosition | None = None
        self.schemas: dict[tuple[str, str], TableSchema] = {}
        self._touched: dict[tuple[str, str], set[tuple]] | None = None
        self._ddl: list[set[str] | None] = []  # the databases each DDL of the read names

    def source(self) -> tuple[Any, BinlogPosition]:
        """(the connection, its consistent-snapshot position), opened on first use."""
        if self._conn is None:
            self._conn, self._pos = consistent_source(self.settings, self.info, self.committed.epoch)
            self.schemas = read_table_schemas(self._conn, self.tables)
        assert self._pos is not None
        return self._conn, self._pos

    def touched(self, schema: TableSchema) -> set[tuple]:
        """:func:`touched_keys` of ``schema``'s table (the captured columns), from the one binlog
        read of every table's changes in ``[committed, position)``."""
        if self._touched is None:
            self._touched = self._read_touched()
        return self._touched.get((schema.database, schema.table), set())

    def ddl_since(self, database: str) -> bool:
        """Whether the binlog ``[committed, position)`` holds a DDL statement that may change a
        table of ``database`` (:func:`..source.ddl.scope.ddl_databases`), from the same one read as
        :meth:`touched`."""
        if self._touched is None:
            self._touched = self._read_touched()
        return any(_names(dbs, database) for dbs in self._ddl)

    def _read_touched(self) -> dict[tuple[str, str], set[tuple]]:
        from ..source.binlog import BinlogReader, DdlStatement, RowsBatch
        from ..source.ddl.scope import ddl_databases

        _, pos = self.source()
        out: dict[tuple[str, str], set[tuple]] = {k: set() for k in self.schemas}
        if self.committed.sort_key() >= pos.sort_key() or not self.schemas:
            return out
        key_of = {}
        for k, full in self.schemas.items():
            conv = TableConverter(full, self.type_options, "pymysql")
            key_of[k] = _key_function(conv.table, self.type_options)
        reader = BinlogReader(
            self.settings,
            self.server_id + 7,
            self.committed,
            pos,
            is_mariadb=self.info.is_mariadb,
            deadline_s=300,
            rows_filter=lambda d, t: (d, t) in out,
        )
        for item in reader:
            if isinstance(item, DdlStatement):
                self._ddl.append(ddl_databases(item.sql, item.database))
                continue
            if not isinstance(item, RowsBatch):
                continue
            k = (item.database, item.table)
            if k not in out:
                continue
            for row in item.rows:
                for image in ("values", "before_values", "after_values"):
                    if image in row:
                        out[k].add(key_of[k](row[image]))
        return out

    def close(self) -> None:
        if self._conn is not None:
            try:
                self._conn.rollback()
            finally:
                self._conn.close()
                self._conn = None


def _key_function(schema: TableSchema, type_options: TypeOptions) -> Callable[[dict], tuple]:
    """The key of one binlog row image of ``schema``'s table as :func:`touched_keys` computes it
    (``SCHEMA_CHANGED`` for an image of other columns)."""
    conv = TableConverter(schema, type_options, "binlog")
    names = list(conv.names)
    idx = [names.index(k) for k in schema.primary_key] or list(range(len(names)))
    pk = list(schema.primary_key)
    keyf = conv.primary_key_function() if pk else None

    def key_of(image: dict) -> tuple:
        if keyf is not None:
            if any(k not in image for k in pk):
                return SCHEMA_CHANGED
            return keyf(image, None)
        if any(n not in image for n in names):
            return SCHEMA_CHANGED
        return _hashable_row(conv.convert_row_dict(image)[i] for i in idx)

    return key_of


def consistent_source(settings: ConnectionSettings, info: ServerInfo, epoch: int = 0):
    """(connection in a consistent-snapshot transaction, its binlog position in offset epoch
    ``epoch``: the epoch of the committed position it is compared with)."""
    from ..source.connection import current_position

    conn = connect(settings, autocommit=True)
    with conn.cursor() as cur:
        cur.execute("SET SESSION TRANSACTION ISOLATION LEVEL REPEATABLE READ")
        cur.execute("START TRANSACTION WITH CONSISTENT SNAPSHOT")
        pos = None
        if info.is_mariadb:
            cur.execute("SHOW STATUS LIKE 'binlog_snapshot_%'")
            st = {k.lower(): v for k, v in cur.fetchall()}
            if st.get("binlog_snapshot_file"):
                pos = BinlogPosition(st["binlog_snapshot_file"], int(st["binlog_snapshot_position"]))
        if pos is None:  # MySQL: position read right after the snapshot started (no DDL assumed)
            pos = current_position(conn, info)
    return conn, pos.with_epoch(epoch)


class _NotConvertible:
    """Stands for every value of a source row the type mapping rejects: equal to nothing else."""

    __slots__ = ("n",)

    def __init__(self, n: int):
        self.n = n

    def __repr__(self) -> str:
        return f"<source row {self.n} not convertible>"


def converted_rows(
    conv: TableConverter, rows: list, unconvertible: list[int], lake: pa.Schema
) -> Iterable[tuple]:
    """Converted source rows, as tuples of ``lake``'s columns in the lake's types (the lake keeps
    a supertype of a column whose type changed: ``sink/evolution.py``); a row holding a value that
    cannot be converted (left out of the lake by event_processing_failure_handling_mode
    warn|skip, or failing the capture) becomes a row of :class:`_NotConvertible` values, counted
    in ``unconvertible[0]``."""
    from ..sink.evolution import conform_table

    try:
        batch = conform_table(conv.to_record_batch(rows).select(lake.names), lake)
        return zip(*[c.to_pylist() for c in batch.columns])
    except (ValueError, TypeError, OverflowError, ArithmeticError, pa.ArrowException):
        bad = conv.unconvertible_rows(rows)
        if not bad:
            raise
    good = iter(converted_rows(conv, [r for i, r in enumerate(rows) if i not in bad], unconvertible, lake))
    out = []
    for i in range(len(rows)):
        if i in bad:
            unconvertible[0] += 1
            out.append(tuple(_NotConvertible(unconvertible[0]) for _ in lake.names))
        else:
            out.append(next(good))
    return out


def source_rows(
    conn,
    schema: TableSchema,
    conv: TableConverter,
    chunk_rows: int,
    lake: pa.Schema,
    unconvertible: list[int] | None = None,
) -> Iterable[tuple]:
    """The source table's rows as tuples of ``lake``'s columns, in the lake's types (see
    :func:`converted_rows`)."""
    unconvertible = [0] if unconvertible is None else unconvertible
    cols = ", ".join(select_expression(c) for c in schema.columns)
    tbl = f"{quote_identifier(schema.database)}.{quote_identifier(schema.table)}"
    structs = struct_positions(lake, lake.names)
    cur = conn.cursor(pymysql.cursors.SSCursor)
    try:
        cur.execute(f"SELECT {cols} FROM {tbl}")
        while True:
            rows = cur.fetchmany(chunk_rows)
            if not rows:
                break
            yield from hashable_rows(converted_rows(conv, list(rows), unconvertible, lake), structs)
    finally:
        cur.close()
