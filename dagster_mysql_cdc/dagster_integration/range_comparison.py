"""One primary-key range of one captured table compared, lake against source: the comparison
each tick of the rotating verification makes (:mod:`.rotation`, whose module docs give the
steps: the committed position ``C``, the lake's live rows, the source's rows in a consistent
snapshot at ``P ≥ C``, the keys the binlog changed in ``[C, P)`` left out on both sides).

Rows are compared as the full checks compare them (:mod:`.checks`: Debezium-converted values, in
the lake's types); with an integer key, lake rows between the range's first and last key count
too (a row deleted behind the binlog's back is found).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field

import pyarrow as pa
import pyarrow.compute as pc
import pymysql

from ..events import STATE_META_NAMES, BinlogPosition
from ..sink.storage import StorageSettings
from ..source.catalog import read_table_schemas
from ..source.connection import ConnectionSettings, ServerInfo, connect
from ..source.schema import TableSchema
from ..source.types import TableConverter, TypeOptions, quote_identifier, select_expression
from .check_source import (
    SCHEMA_CHANGED,
    consistent_source,
    converted_rows,
    hashable_rows,
    struct_positions,
    touched_keys,
)


@dataclass
class RangeResult:
    """What :meth:`RangeComparison.compare` found.

    Attributes:
        rows: source rows read; ``end``: the range reached the table's end.
        hi, hi_converted: the last source key read (the range's end when it was open).
        differing: converted keys whose rows differ or exist on one side only (sorted);
            ``lake_only``: those only the lake has.
        compared: keys compared (touched keys left out); ``touched``: keys left out.
        not_compared: why nothing was compared (a DDL since the committed position ...).
    """

    rows: int = 0
    end: bool = False
    hi: tuple | None = None
    hi_converted: tuple | None = None
    differing: list[tuple] = field(default_factory=list)
    lake_only: list[tuple] = field(default_factory=list)
    compared: int = 0
    touched: int = 0
    not_compared: str | None = None
    schema: TableSchema | None = None


def _key_where(pk: Sequence[str], lo: tuple | None, hi: tuple | None) -> tuple[str, list]:
    """``WHERE`` text (with ``%s``) of the keys ``> lo`` and ``<= hi`` (either ``None``: open),
    as OR-ed column comparisons (an index range on any server)."""

    def cmp(key: tuple, op: str, last: str) -> tuple[str, list]:
        parts, params = [], []
        for i in range(len(pk)):
            eq = [f"{quote_identifier(pk[j])} = %s" for j in range(i)]
            parts.append("(" + " AND ".join([*eq, f"{quote_identifier(pk[i])} {op} %s"]) + ")")
            params += [*key[:i], key[i]]
        last_eq = " AND ".join(f"{quote_identifier(c)} = %s" for c in pk)
        if last:
            parts.append(f"({last_eq})")
            params += list(key)
        return "(" + " OR ".join(parts) + ")", params

    clauses, params = [], []
    if lo is not None:
        c, p = cmp(lo, ">", "")
        clauses.append(c)
        params += p
    if hi is not None:
        c, p = cmp(hi, "<", "eq")
        clauses.append(c)
        params += p
    return (" AND ".join(clauses) or "1=1"), params


def _int_keys(*keys: tuple | None) -> bool:
    return all(k is None or all(isinstance(v, int) and not isinstance(v, bool) for v in k) for k in keys)


def _table_ref(database: str, table: str) -> str:
    return f"{quote_identifier(database)}.{quote_identifier(table)}"


def _key_order(pk: Sequence[str]) -> str:
    return ", ".join(quote_identifier(k) for k in pk)


@dataclass(frozen=True)
class _ComparedColumns:
    """The columns a range compares: the captured ones the lake has (``names``, in the source
    converter's order, with their lake types), and the positions of the primary key's columns in
    them (``kidx``) and in the source's rows (``src_kidx``)."""

    names: list[str]
    lake_types: pa.Schema
    kidx: list[int]
    src_kidx: list[int]
    structs: list

    @classmethod
    def of(cls, conv: TableConverter, lake_schema: pa.Schema) -> _ComparedColumns | None:
        """The columns of ``conv``'s table the lake (``lake_schema``) has; ``None`` when it lacks
        a column of the primary key."""
        pk = list(conv.table.primary_key)
        lake_cols = {f.name: f for f in lake_schema if f.name not in STATE_META_NAMES}
        names = [n for n in conv.arrow_schema.names if n in lake_cols]
        if any(k not in names for k in pk):
            return None
        lake_types = pa.schema([lake_cols[n] for n in names])
        return cls(
            names=names,
            lake_types=lake_types,
            kidx=[names.index(k) for k in pk],
            src_kidx=[[c.name for c in conv.table.columns].index(k) for k in pk],
            structs=struct_positions(lake_types, names),
        )


@dataclass(frozen=True)
class RangeComparison:
    """Compares primary-key ranges of the captured tables, lake against source (module docs).

    Attributes:
        settings, info: the source server.
        storage: the lake.
        type_options: the capture's value conversion (rows are compared as the lake holds them).
        server_id: replica id of the binlog read of the keys changed since the committed position.
        max_binlog_scan_bytes: a range is not compared while the lake is more than this many
            binlog bytes behind (those keys are read from the binlog).
    """

    settings: ConnectionSettings
    info: ServerInfo
    storage: StorageSettings
    type_options: TypeOptions
    server_id: int
    max_binlog_scan_bytes: int = 64 * 1024 * 1024

    def compare(
        self,
        *,
        database: str,
        table: str,
        state_uri: str,
        committed: BinlogPosition,
        lo: tuple | None,
        lo_converted: tuple | None,
        hi: tuple | None = None,
        hi_converted: tuple | None = None,
        rows: int = 50_000,
        seconds: float = 10.0,
    ) -> RangeResult:
        """Compare the rows of ``database.table`` with keys ``> lo`` (and ``<= hi`` when given;
        else the next at most ``rows`` rows, read for at most ``seconds``) in the lake (state URI
        ``state_uri``, committed up to ``committed``) and in the source (see the module docs).

        ``lo``/``hi`` are source key values (as ``pymysql`` returns them); ``lo_converted``/
        ``hi_converted`` the same keys as the lake holds them (``None`` with ``lo``/``hi``).

        Returns:
            a :class:`RangeResult`; ``not_compared`` says why nothing was compared (table gone,
            not captured, keyless, a DDL since ``committed``, the lake too far behind).

        Raises:
            pymysql.err.MySQLError, OSError: the source or the lake cannot be read.
        """
        from ..sink.read import current_schema, read_current

        out = RangeResult()
        lake_schema = current_schema(self.storage, state_uri)  # the lake is read after ``committed``
        if lake_schema is None:
            out.not_compared = "not captured yet"
            return out
        found = self._source_table(database, table, lo, hi, rows)
        if isinstance(found, str):
            out.not_compared = found
            return out
        conv, bound = found
        out.schema = conv.table
        pk = list(conv.table.primary_key)
        if not pk:
            out.not_compared = "no primary key (keyless tables are compared by the full checks)"
            return out
        # the lake's rows, read after ``committed`` and before the source's snapshot; with an
        # integer key only the state files whose statistics overlap the range
        bound_c = hi_converted if hi is not None else bound
        key_range = None
        if _int_keys(lo_converted, bound_c) and _int_keys(lo, bound):
            key_range = (pk[0], lo_converted[0] if lo_converted else None, bound_c[0] if bound_c else None)
        lake_all = read_current(self.storage, state_uri, live=True, key_range=key_range)
        conn, pos = consistent_source(self.settings, self.info, committed.epoch)
        try:
            if (
                pos.sort_key() > committed.sort_key()
                and pos.file == committed.file
                and pos.pos - committed.pos > self.max_binlog_scan_bytes
            ):
                out.not_compared = f"the lake is more than {self.max_binlog_scan_bytes} binlog bytes behind"
                return out
            cols = _ComparedColumns.of(conv, lake_schema)
            if cols is None:
                out.not_compared = "the lake has no column of the primary key yet"
                return out
            raw, timed_out = _read_source_range(
                conn, _table_ref(database, table), conv.table, lo, bound, hi is None, seconds
            )
            src = (
                list(hashable_rows(converted_rows(conv, raw, [0], cols.lake_types), cols.structs))
                if raw
                else []
            )
            upper = _range_end(out, raw, src, cols, hi, hi_converted, bound, timed_out)
            touched = touched_keys(
                self.settings, self.info, conv.table, committed, pos, self.type_options, self.server_id
            )
            if SCHEMA_CHANGED in touched:
                out.not_compared = "a DDL changed the table since the committed position"
                return out
        finally:
            try:
                conn.rollback()
            finally:
                conn.close()
        src_by_key = {tuple(r[i] for i in cols.kidx): r for r in src}
        lake_by_key = _lake_rows_in_range(lake_all, pk[0], cols, lo_converted, upper, src_by_key)
        keys = (set(src_by_key) | set(lake_by_key)) - touched
        out.touched = len((set(src_by_key) | set(lake_by_key)) & touched)
        out.compared = len(keys)
        diff = [k for k in keys if src_by_key.get(k) != lake_by_key.get(k)]
        out.differing = sorted(diff, key=repr)
        out.lake_only = sorted((k for k in diff if k not in src_by_key), key=repr)
        return out

    def _source_table(
        self, database: str, table: str, lo: tuple | None, hi: tuple | None, rows: int
    ) -> tuple[TableConverter, tuple | None] | str:
        """The converter of the source's table and the range's last key: ``hi`` when given,
        else the ``rows``-th key after ``lo`` (``None``: the table's end); or why the table
        cannot be compared (gone from the source)."""
        plain = connect(self.settings, autocommit=True)
        try:
            full = read_table_schemas(plain, [(database, table)]).get((database, table))
            if full is None:
                return "the table no longer exists on the source"
            conv = TableConverter(full, self.type_options, "pymysql")
            pk = list(conv.table.primary_key)
            if hi is not None or not pk:
                return conv, hi
            # the slice's last key: the rows-th key after ``lo`` (None: the table's end)
            where, params = _key_where(pk, lo, None)
            order = _key_order(pk)
            with plain.cursor() as cur:
                cur.execute(
                    f"SELECT {order} FROM {_table_ref(database, table)} WHERE {where} ORDER BY {order} "
                    f"LIMIT 1 OFFSET {max(0, int(rows) - 1)}",
                    params,
                )
                found = cur.fetchone()
            return conv, tuple(found) if found else None
        finally:
            plain.close()


def _read_source_range(
    conn,
    tbl: str,
    schema: TableSchema,
    lo: tuple | None,
    bound: tuple | None,
    open_ended: bool,
    seconds: float,
) -> tuple[list, bool]:
    """The source's rows of table ``tbl`` (``schema``) of the keys ``> lo`` and ``<= bound`` in
    the consistent snapshot of ``conn``, in key order, and whether the read stopped after ``seconds`` (only an
    ``open_ended`` range, whose end is then the last row read, stops early)."""
    pk = list(schema.primary_key)
    where, params = _key_where(pk, lo, bound)
    cols = ", ".join(select_expression(c) for c in schema.columns)
    order = _key_order(pk)
    sql = f"SELECT {cols} FROM {tbl} WHERE {where} ORDER BY {order}"
    raw: list = []
    deadline = time.monotonic() + seconds
    cur = conn.cursor(pymysql.cursors.SSCursor)
    try:
        cur.execute(sql, params)
        while True:
            batch = cur.fetchmany(5000)
            if not batch:
                return raw, False
            raw.extend(batch)
            if open_ended and time.monotonic() > deadline:
                return raw, True
    finally:
        cur.close()


def _range_end(
    out: RangeResult,
    raw: list,
    src: list,
    cols: _ComparedColumns,
    hi: tuple | None,
    hi_converted: tuple | None,
    bound: tuple | None,
    timed_out: bool,
) -> tuple | None:
    """Record in ``out`` the rows read and where the range ends (``hi``, its last row read, or
    the table's end); returns the converted upper key of the lake rows that count (``None``:
    open, the range reached the table's end)."""
    out.rows = len(raw)
    out.end = hi is None and bound is None and not timed_out
    if hi is not None:
        out.hi, out.hi_converted = hi, hi_converted
    elif raw:  # the range ends at the last row read (the bound, unless the read timed out)
        out.hi = tuple(raw[-1][i] for i in cols.src_kidx)
        out.hi_converted = tuple(src[-1][i] for i in cols.kidx)
    elif bound is not None and _int_keys(bound):
        out.hi = out.hi_converted = bound
    else:
        out.end = True
    return None if (out.end or (hi is None and bound is None and not timed_out)) else out.hi_converted


def _lake_rows_in_range(
    lake_all: pa.Table | None,
    first_key: str,
    cols: _ComparedColumns,
    lo_converted: tuple | None,
    upper: tuple | None,
    src_by_key: dict[tuple, tuple],
) -> dict[tuple, tuple]:
    """The lake's rows of the range by converted key: with an integer key every key inside
    ``(lo_converted, upper]``, else the source's keys (``src_by_key``)."""
    lake_by_key: dict[tuple, tuple] = {}
    if lake_all is None or not lake_all.num_rows:
        return lake_by_key
    first = lake_all.column(first_key)
    ranged = _int_keys(lo_converted, upper, *list(src_by_key)[:1]) and pa.types.is_integer(first.type)
    if ranged:
        mask = None
        if lo_converted is not None:
            mask = pc.greater_equal(first, pa.scalar(lo_converted[0], first.type))
        if upper is not None:
            m2 = pc.less_equal(first, pa.scalar(upper[0], first.type))
            mask = m2 if mask is None else pc.and_(mask, m2)
        sub = lake_all.filter(mask) if mask is not None else lake_all
    else:
        firsts = sorted({k[0] for k in src_by_key}, key=repr)
        sub = lake_all.filter(pc.is_in(first, value_set=pa.array(firsts, first.type))) if firsts else None
    if sub is None or not sub.num_rows:
        return lake_by_key
    sub = sub.select(cols.names)
    for r in hashable_rows(zip(*[sub.column(c).to_pylist() for c in cols.names]), cols.structs):
        k = tuple(r[i] for i in cols.kidx)
        if ranged:
            if (lo_converted is not None and k <= tuple(lo_converted)) or (
                upper is not None and k > tuple(upper)
            ):
                continue
        elif k not in src_by_key:
            continue
        lake_by_key[k] = r
    return lake_by_key
