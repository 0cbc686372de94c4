"""Lake column types that follow the source's DDL: the supertype of every type a column had.

A captured column keeps one type in the lake while the source's type may change (``ALTER TABLE ...
MODIFY``, ``CHANGE``, a column dropped and added again with another type, ENUM members added ...).
Debezium's Kafka sinks evolve their schema (a schema registry with compatible promotions; the JDBC
sink's ``schema.evolution=basic`` only adds columns). Here the lake keeps, per column, the
**supertype** of every type the column had: a type that holds every value of each, exactly where
one exists:

* same family, wider type: integers (``int16 < int32 < int64``, BIT(1) booleans into integers),
  ``float32 < float64``, decimals (the precision that keeps both the integer digits and the scale
  of each, up to 38 digits), temporal units (``Date`` days < ``Timestamp`` ms < ``MicroTimestamp``
  µs; ``connect`` ms time < ``MicroTime`` µs);
* across numeric families where no value changes: integers up to 32 bits and decimals of at most
  15 digits into ``float64``, integers into decimals;
* otherwise ``string``: every value rendered as text (integers and decimals in plain notation,
  floats in their shortest round-trip form, dates ``YYYY-MM-DD``, date-times ``YYYY-MM-DD
  HH:MM:SS[.fff[fff]]`` (ISO-8601 with ``Z`` next to a ``ZonedTimestamp``), times
  ``[-]HH:MM:SS[.ffffff]``, booleans ``1``/``0``, bytes as UTF-8 when they are, else base64,
  geometries as the hex of their WKB).

A narrowing change (``BIGINT`` -> ``INT``) keeps the wider lake type: new values are converted up.
A widening change rewrites the Delta tables that hold the column (:func:`.delta.rewrite_table`),
once, converting the stored values, and the files the batch wrote before the change but has not
committed (:func:`.delta.rewrite_files`); earlier versions stay readable by Delta time travel.
Units are told apart by the field metadata alone (milliseconds and microseconds are both int64),
so row images (structs) are compared child by child, never by their Arrow type.

Field metadata: a lake field carries ``debezium.type``/``debezium.name`` (and ``debezium.parameters``
of a Decimal, which the Arrow decimal type fixes) describing the *values it holds*; they change only
with a rewrite. The source column's own type (``mysql.type``, ENUM members, BIT length) changes
with DDL and lives in the schema history (and in the state table's column metadata, refreshed after
each change: see :mod:`.lake`). The batch written is always conformed to the lake's fields
(:func:`conform_table`), so a Delta schema merge never sees two metadata values for one field.

Everything here is pure Arrow (no I/O): it runs on the driver and in Spark tasks.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterable
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc

#: Field metadata keys that describe the lake values (kept on lake fields); other keys describe the
#: source column and are dropped from change-log fields.
SEMANTIC_KEYS = (b"debezium.type", b"debezium.name")
DECIMAL_NAME = "org.apache.kafka.connect.data.Decimal"
GEOMETRY_NAME = "io.debezium.data.geometry.Geometry"
ZONED_NAME = "io.debezium.time.ZonedTimestamp"
MAX_DECIMAL_PRECISION = 38

# semantic names by category (Debezium MySQL connector, "Data type mappings")
_DATE = {"io.debezium.time.Date", "org.apache.kafka.connect.data.Date"}
_DATETIME_MS = {"io.debezium.time.Timestamp", "org.apache.kafka.connect.data.Timestamp"}
_DATETIME_US = {"io.debezium.time.MicroTimestamp"}
_TIME_US = {"io.debezium.time.MicroTime"}
_TIME_MS = {"org.apache.kafka.connect.data.Time"}

_MS_PER_DAY = 86_400_000
_INT_DIGITS = {8: 3, 16: 5, 32: 10, 64: 19}
_INT_TYPES = {8: pa.int8(), 16: pa.int16(), 32: pa.int32(), 64: pa.int64()}


def _meta(field: pa.Field, key: bytes) -> str | None:
    m = field.metadata or {}
    v = m.get(key)
    return v.decode() if v else None


def category(field: pa.Field) -> str:
    """The value family of a lake field: ``bool``, ``int``, ``float``, ``decimal``, ``date`` (days),
    ``datetime_ms``, ``datetime_us``, ``time_ms``, ``time_us``, ``string``, ``zoned`` (a
    ``ZonedTimestamp`` string), ``binary``, ``geometry`` or ``struct`` (a container: the change
    log's ``before``/``after``/``key``, compared child by child)."""
    t, name = field.type, _meta(field, b"debezium.name")
    if pa.types.is_struct(t):
        return "geometry" if name == GEOMETRY_NAME or _is_geometry(t) else "struct"
    if pa.types.is_boolean(t):
        return "bool"
    if pa.types.is_integer(t):
        if name in _DATE:
            return "date"
        if name in _DATETIME_MS:
            return "datetime_ms"
        if name in _DATETIME_US:
            return "datetime_us"
        if name in _TIME_US:
            return "time_us"
        if name in _TIME_MS:
            return "time_ms"
        return "int"
    if pa.types.is_floating(t):
        return "float"
    if pa.types.is_decimal(t):
        return "decimal"
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return "zoned" if name == ZONED_NAME else "string"
    if pa.types.is_binary(t) or pa.types.is_large_binary(t):
        return "binary"
    return "other"


def _is_geometry(t: pa.DataType) -> bool:
    return pa.types.is_struct(t) and sorted(f.name for f in t) == ["srid", "wkb"]


def _has_semantics(field: pa.Field) -> bool:
    return bool(field.metadata) and b"debezium.type" in field.metadata


def lake_metadata(field: pa.Field) -> dict[bytes, bytes] | None:
    """The metadata a change-log field keeps: :data:`SEMANTIC_KEYS`, plus ``debezium.parameters``
    of a Decimal (its precision and scale are the Arrow type's)."""
    m = field.metadata or {}
    out = {k: v for k, v in m.items() if k in SEMANTIC_KEYS}
    if _meta(field, b"debezium.name") == DECIMAL_NAME and b"debezium.parameters" in m:
        out[b"debezium.parameters"] = m[b"debezium.parameters"]
    return out or None


def _same_values(lake: pa.Field, new: pa.Field) -> bool:
    """Whether ``new``'s values can be stored in ``lake`` as they are (same Arrow type and unit)."""
    if lake.type != new.type:
        return False
    if category(lake) == "struct" and category(new) == "struct":
        # Arrow's type equality ignores the children's metadata: ``after.dt`` in milliseconds and
        # in microseconds are both int64, so a container is the same only when every child is
        return all(_same_values(a, b) for a, b in zip(lake.type, new.type))
    if not (_has_semantics(lake) and _has_semantics(new)):
        return True  # a field without Debezium metadata: the Arrow type is all we know
    return category(lake) == category(new)


def supertype(lake: pa.Field, new: pa.Field) -> pa.Field:
    """The lake field that holds the values of both ``lake`` (what the lake column holds) and
    ``new`` (a batch's field of the same column). Returns ``lake`` itself when ``new``'s values
    fit as they are. See the module docs for the rules.

    Struct containers (``struct`` category) are merged child by child (union by name, ``lake``'s
    order first).
    """
    if _same_values(lake, new):
        return lake
    ca, cb = category(lake), category(new)
    if ca == "struct" and cb == "struct":
        return lake.with_type(_struct_union(lake.type, new.type))
    t = _super_type(lake, new, ca, cb)
    if t is None:
        return _typed(lake.name, pa.string(), None)
    dtype, name = t
    if dtype == lake.type and name == _meta(lake, b"debezium.name"):
        return lake
    return _typed(lake.name, dtype, name)


def _typed(name: str, dtype: pa.DataType, semantic: str | None) -> pa.Field:
    """A lake field of ``dtype`` with metadata describing it (``debezium.type`` from the Arrow type)."""
    meta: dict[bytes, bytes] = {b"debezium.type": _connect_type(dtype).encode()}
    if semantic:
        meta[b"debezium.name"] = semantic.encode()
    if semantic == DECIMAL_NAME and pa.types.is_decimal(dtype):
        meta[b"debezium.parameters"] = json.dumps(
            {"scale": str(dtype.scale), "connect.decimal.precision": str(dtype.precision)},
            separators=(",", ":"),
        ).encode()
    return pa.field(name, dtype, nullable=True, metadata=meta)


def _connect_type(t: pa.DataType) -> str:
    if pa.types.is_boolean(t):
        return "boolean"
    if pa.types.is_integer(t):
        return f"int{max(16, t.bit_width)}" if t.bit_width < 64 else "int64"
    if pa.types.is_floating(t):
        return "float32" if t.bit_width == 32 else "float64"
    if pa.types.is_decimal(t) or pa.types.is_binary(t):
        return "bytes"
    if pa.types.is_struct(t):
        return "struct"
    return "string"


def _int_bits(t: pa.DataType) -> int:
    return 16 if pa.types.is_boolean(t) else max(16, t.bit_width)


def _super_type(a: pa.Field, b: pa.Field, ca: str, cb: str) -> tuple[pa.DataType, str | None] | None:
    """``(type, semantic name)`` of the supertype of two leaf fields, ``None`` for text."""
    na, nb = _meta(a, b"debezium.name"), _meta(b, b"debezium.name")
    same_name = na if na == nb else None
    cats = {ca, cb}
    if cats <= {"bool", "int"}:
        if cats == {"bool"}:
            return pa.bool_(), same_name
        bits = max(_int_bits(a.type), _int_bits(b.type))
        return _INT_TYPES[bits], same_name
    if cats <= {"bool", "int", "float"}:
        ints = [f for f in (a, b) if category(f) in ("int", "bool")]
        if any(_int_bits(f.type) > 32 for f in ints):
            return None  # a 64-bit integer does not fit a double exactly
        return pa.float64(), None
    if cats <= {"bool", "int", "decimal"}:
        p, s = _decimal_union(a.type, b.type)
        if p > MAX_DECIMAL_PRECISION:
            return None
        return pa.decimal128(p, s), DECIMAL_NAME if DECIMAL_NAME in (na, nb) else None
    if cats == {"float", "decimal"}:
        dec = a.type if ca == "decimal" else b.type
        return (pa.float64(), None) if dec.precision <= 15 else None
    if cats <= {"date", "datetime_ms", "datetime_us"}:
        unit = (
            "datetime_us" if "datetime_us" in cats else ("datetime_ms" if "datetime_ms" in cats else "date")
        )
        keep = [n for f, n in ((a, na), (b, nb)) if category(f) == unit]
        if unit == "date":
            return pa.int32(), keep[0] if keep else None
        return pa.int64(), keep[0] if keep else None
    if cats == {"time_ms", "time_us"}:
        return pa.int64(), "io.debezium.time.MicroTime"
    if cats == {"binary"}:
        return pa.binary(), same_name
    if cats <= {"string", "zoned"}:
        return pa.string(), same_name
    if "zoned" in cats and cats <= {"zoned", "date", "datetime_ms", "datetime_us"}:
        # a DATETIME/DATE column that became TIMESTAMP (or back): ISO-8601 text with Z, the
        # ZonedTimestamp form, Debezium's reading of a DATETIME as UTC
        return pa.string(), ZONED_NAME
    return None


def _digits(t: pa.DataType) -> tuple[int, int]:
    """(integer digits, scale) of an integer, boolean or decimal type."""
    if pa.types.is_decimal(t):
        return t.precision - t.scale, t.scale
    return _INT_DIGITS[_int_bits(t)], 0


def _decimal_union(a: pa.DataType, b: pa.DataType) -> tuple[int, int]:
    ia, sa = _digits(a)
    ib, sb = _digits(b)
    s = max(sa, sb)
    return max(ia, ib) + s, s


def _struct_union(a: pa.DataType, b: pa.DataType) -> pa.StructType:
    fields = {f.name: f for f in a}
    for f in b:
        fields[f.name] = supertype(fields[f.name], f) if f.name in fields else _new_field(f)
    return pa.struct(list(fields.values()))


def _new_field(f: pa.Field) -> pa.Field:
    """A field new to the lake: nullable, with the metadata a lake field keeps (children too)."""
    t = f.type
    if category(f) == "struct":
        t = pa.struct([_new_field(c) for c in t])
    return pa.field(f.name, t, nullable=True, metadata=lake_metadata(f))


@dataclass(frozen=True)
class Conformed:
    """Result of :func:`conform_schema`.

    Attributes:
        schema: the lake schema that holds the lake's rows and the batch's (columns only added,
            types only widened).
        changed: dotted paths (``after.qty``) of lake columns whose type changes: the Delta table
            must be rewritten (:func:`.delta.rewrite_table`) before rows of ``schema`` are written.
        added: dotted paths of columns (or struct children) new to the lake.
    """

    schema: pa.Schema
    changed: tuple[str, ...] = ()
    added: tuple[str, ...] = ()


def conform_schema(lake: pa.Schema | None, incoming: pa.Schema, *, keep_metadata: bool = False) -> Conformed:
    """The lake schema after writing rows of ``incoming`` into a table of schema ``lake``.

    Args:
        lake: the Delta table's schema (``None``: no table yet).
        incoming: the batch's schema (its fields carry the source's Debezium metadata).
        keep_metadata: new top-level fields keep all their metadata (the state table, whose
            column metadata is refreshed in place); otherwise only :func:`lake_metadata`.

    Returns:
        see :class:`Conformed`.
    """
    if lake is None:
        fields = [f if keep_metadata else _new_field(f) for f in incoming]
        return Conformed(pa.schema(fields), (), tuple(f.name for f in incoming))
    out = {f.name: f for f in lake}
    changed: list[str] = []
    added: list[str] = []
    for f in incoming:
        cur = out.get(f.name)
        if cur is None:
            out[f.name] = f.with_nullable(True) if keep_metadata else _new_field(f)
            added.append(f.name)
            continue
        sup = supertype(cur, f)
        if sup is not cur:
            _diff(cur, sup, f.name, changed, added)
            out[f.name] = sup
    return Conformed(pa.schema(list(out.values()), metadata=lake.metadata), tuple(changed), tuple(added))


def _diff(old: pa.Field, new: pa.Field, path: str, changed: list[str], added: list[str]) -> None:
    """Record where ``new`` differs from ``old``: changed leaf types and added struct children."""
    if category(old) == "struct" and pa.types.is_struct(new.type):
        olds = {c.name: c for c in old.type}
        for c in new.type:
            if c.name not in olds:
                added.append(f"{path}.{c.name}")
            elif c is not olds[c.name] and not c.equals(olds[c.name], check_metadata=True):
                _diff(olds[c.name], c, f"{path}.{c.name}", changed, added)
        return
    if old.type != new.type or category(old) != category(new):
        changed.append(path)


def conform_table(data: pa.Table | pa.RecordBatch, target: pa.Schema) -> pa.Table:
    """``data`` in ``target``'s schema: each column converted to its lake type (:func:`convert`),
    columns and struct children ``target`` has and ``data`` lacks filled with nulls, in
    ``target``'s order.

    Raises:
        ValueError: ``data`` has a column ``target`` lacks (conform the schema first).
    """
    t = data if isinstance(data, pa.Table) else pa.Table.from_batches([data])
    extra = [n for n in t.column_names if n not in target.names]
    if extra:
        raise ValueError(f"columns {extra} are not in the lake schema (internal: conform the schema first)")
    cols = []
    for f in target:
        if f.name in t.column_names:
            src = t.schema.field(f.name)
            cols.append(_convert_chunked(t.column(f.name), src, f))
        else:
            cols.append(pa.nulls(t.num_rows, f.type))
    return pa.Table.from_arrays(cols, schema=target)


def _convert_chunked(col: pa.ChunkedArray, src: pa.Field, dst: pa.Field) -> pa.ChunkedArray:
    if src.type == dst.type and (
        _same_values(dst, src) or category(dst) == "struct" and _same_tree(src, dst)
    ):
        return col
    return pa.chunked_array([convert(c, src, dst) for c in col.chunks], dst.type)


def _same_tree(a: pa.Field, b: pa.Field) -> bool:
    """Two struct fields whose every leaf holds the same values (metadata aside)."""
    if category(a) != "struct":
        return _same_values(b, a)
    if a.type != b.type:
        return False
    return all(_same_tree(x, y) for x, y in zip(a.type, b.type))


def convert(arr: pa.Array, src: pa.Field, dst: pa.Field) -> pa.Array:
    """Values of ``arr`` (field ``src``) as values of the lake field ``dst`` (a supertype of
    ``src``: :func:`supertype`). Nulls stay null.

    Raises:
        ValueError: ``dst`` cannot hold ``src``'s values (not a supertype).
    """
    if category(dst) == "struct" and pa.types.is_struct(arr.type):
        children = []
        for child in dst.type:
            if arr.type.get_field_index(child.name) >= 0:
                sf = arr.type.field(child.name)
                children.append(convert(pc.struct_field(arr, child.name), sf, child))
            else:
                children.append(pa.nulls(len(arr), child.type))
        mask = pc.is_null(arr) if arr.null_count else None
        return pa.StructArray.from_arrays(children, fields=list(dst.type), mask=mask)
    if arr.type == dst.type and _same_values(dst, src):
        return arr
    cs, cd = category(src), category(dst)
    if cd in ("string", "zoned"):
        return render_text(arr, src, zoned=cd == "zoned" or _meta(dst, b"debezium.name") == ZONED_NAME)
    if cd in ("int", "bool", "float", "decimal", "binary", "geometry"):
        return pc.cast(arr, dst.type)
    scale = _UNIT_SCALE.get((cs, cd))
    if scale is not None:
        return pc.multiply_checked(pc.cast(arr, pa.int64()), pa.scalar(scale, pa.int64())).cast(dst.type)
    if cs == cd:
        return pc.cast(arr, dst.type)
    raise ValueError(f"cannot convert {src} to {dst}")


_UNIT_SCALE = {
    ("date", "datetime_ms"): _MS_PER_DAY,
    ("date", "datetime_us"): _MS_PER_DAY * 1000,
    ("datetime_ms", "datetime_us"): 1000,
    ("time_ms", "time_us"): 1000,
}


def render_text(arr: pa.Array, src: pa.Field, *, zoned: bool = False) -> pa.Array:
    """``arr`` rendered as the text a string lake column holds (see the module docs).

    ``zoned``: date-times as ISO-8601 with ``Z`` (next to a ``ZonedTimestamp``)."""
    c = category(src)
    t = arr.type
    if pa.types.is_string(t):
        return arr
    if pa.types.is_large_string(t):
        return pc.cast(arr, pa.string())
    if c == "bool":
        return pc.if_else(arr, "1", "0")
    if c in ("int", "decimal", "float"):
        return pc.cast(arr, pa.string())
    if c == "date":
        fmt = "%Y-%m-%dT00:00:00Z" if zoned else "%Y-%m-%d"
        return pc.strftime(pc.cast(pc.cast(arr, pa.int32()), pa.date32()), format=fmt)
    if c in ("datetime_ms", "datetime_us"):
        unit = "ms" if c == "datetime_ms" else "us"
        digits = 3 if unit == "ms" else 6
        ts = pc.cast(pc.cast(arr, pa.int64()), pa.timestamp(unit))
        try:
            return _render_values(ts, lambda v: _datetime_text(v, zoned, digits))
        except (ValueError, OverflowError):  # outside Python's datetime range: the stored number
            return pc.cast(arr, pa.string())
    if c in ("time_ms", "time_us"):
        us = arr if c == "time_us" else pc.multiply(pc.cast(arr, pa.int64()), 1000)
        return _render_values(pc.cast(us, pa.int64()), _time_text)
    if c == "binary":
        return _render_values(arr, _bytes_text)
    if c == "geometry":
        return _render_values(pc.struct_field(arr, "wkb"), lambda v: v.hex())
    return _render_values(arr, str)


def _render_values(arr: pa.Array, fn) -> pa.Array:
    return pa.array([None if v is None else fn(v) for v in arr.to_pylist()], pa.string())


def _datetime_text(v, zoned: bool, digits: int) -> str:
    frac = f".{v.microsecond:06d}"[: 1 + digits] if v.microsecond else ""
    sep = "T" if zoned else " "
    return v.strftime(f"%Y-%m-%d{sep}%H:%M:%S") + frac + ("Z" if zoned else "")


def _time_text(us: int) -> str:
    sign = "-" if us < 0 else ""
    us = abs(us)
    s, frac = divmod(us, 1_000_000)
    h, rem = divmod(s, 3600)
    m, s = divmod(rem, 60)
    return f"{sign}{h:02d}:{m:02d}:{s:02d}" + (f".{frac:06d}" if frac else "")


def _bytes_text(v: bytes) -> str:
    try:
        return v.decode("utf-8")
    except UnicodeDecodeError:
        return base64.b64encode(v).decode("ascii")


def changed_leaves(conformed: Conformed, prefixes: Iterable[str] = ()) -> set[str]:
    """The changed top-level value columns of :attr:`Conformed.changed`: ``after.qty`` -> ``qty``
    for the given container ``prefixes`` (e.g. ``before``, ``after``, ``key``); top-level paths as
    they are."""
    out = set()
    pre = tuple(f"{p}." for p in prefixes)
    for path in conformed.changed:
        for p in pre:
            if path.startswith(p):
                path = path[len(p) :]
                break
        out.add(path.split(".", 1)[0])
    return out


def relabel(data: pa.Table, lake: pa.Schema) -> pa.Table:
    """``data`` (rows read back from a lake data file) with the lake's fields where the types
    agree, so conversions know the unit of the stored values (a file may lack metadata, or columns
    and struct children the table gained later)."""
    fields = []
    for f in data.schema:
        fields.append(_relabel_field(f, lake.field(f.name)) if f.name in lake.names else f)
    return pa.Table.from_arrays(data.columns, schema=pa.schema(fields, metadata=data.schema.metadata))


def _relabel_field(f: pa.Field, lake: pa.Field) -> pa.Field:
    if pa.types.is_struct(f.type) and pa.types.is_struct(lake.type) and category(lake) == "struct":
        by_name = {c.name: c for c in lake.type}
        children = [_relabel_field(c, by_name[c.name]) if c.name in by_name else c for c in f.type]
        return pa.field(f.name, pa.struct(children), nullable=f.nullable, metadata=lake.metadata)
    if f.type == lake.type:
        return lake.with_nullable(f.nullable)
    return f


def state_value_field(lake: pa.Field, source: pa.Field) -> pa.Field:
    """A state table column: the lake type of the change log's column (``lake``) with the source
    column's metadata (``mysql.type``, ENUM members ...), whose ``debezium.*`` keys describe the
    lake values (they differ from the source's after a change the lake keeps a supertype for)."""
    meta = dict(source.metadata or {})
    if _has_semantics(lake):
        for k in (b"debezium.type", b"debezium.name", b"debezium.parameters"):
            meta.pop(k, None)
        meta.update(lake.metadata or {})
        if _meta(lake, b"debezium.name") != DECIMAL_NAME and b"debezium.parameters" in (
            source.metadata or {}
        ):
            if lake.type == source.type:  # ENUM members, BIT length: the source column's
                meta[b"debezium.parameters"] = source.metadata[b"debezium.parameters"]
    return pa.field(source.name, lake.type, nullable=True, metadata=meta or None)
