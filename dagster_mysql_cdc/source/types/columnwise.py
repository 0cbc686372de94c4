"""Column-wise conversion to Arrow: a whole column's raw values converted by Arrow casts and
kernels where that equals the per-value converter, the per-value converter otherwise."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from ..schema import ColumnSchema
from .families import BINARY_TYPES, INT_TYPES, TEXT_TYPES, Core, FastPath, canonical_type, column_fsp
from .json_text import json_array_path
from .options import TypeOptions
from .queries import SNAPSHOT_TEXT_DECODERS
from .temporal import ADJUST_BELOW_DAYS, ADJUST_BELOW_US

#: ``f(raw values of one column) -> pa.Array`` of the column's :func:`~.schema_mapping.arrow_field` type.
ArrayConverter = Callable[[Sequence[Any]], pa.Array]

# What a vectorised attempt may raise when the raw values are not of the expected shape (the
# per-value path then decides, raising the same errors as it always did).
_FAST_ERRORS = (pa.ArrowException, TypeError, ValueError, OverflowError)


def _floor_div(x: pa.Array, d: int) -> pa.Array:
    """Integer division rounding towards minus infinity (``pc.divide`` truncates towards zero)."""
    q = pc.divide(x, d)
    if (pc.min(x).as_py() or 0) >= 0:
        return q
    return pc.if_else(pc.less(pc.subtract(x, pc.multiply(q, d)), 0), pc.subtract(q, 1), q)


class _ArrayPaths:
    """The two ways :func:`array_converter` converts one column's raw values to Arrow.

    ``generic`` is the per-value path, ``pa.array([none_value if v is None else core(v) ...], typ)``
    (with ``decode``, pymysql's own text decoder, applied first to ``str`` values); ``attempt(fast)``
    tries a vectorised ``fast(values)`` first and falls back to ``generic`` when it raises one of
    :data:`_FAST_ERRORS` or returns ``None``. ``parsed`` and ``fill`` are the fast paths' helpers.
    """

    __slots__ = ("core", "decode", "none_value", "nv_scalar", "typ")

    def __init__(self, core: Core, none_value: Any, typ: pa.DataType, decode: Callable[[str], Any] | None):
        self.core = core
        self.none_value = none_value
        self.typ = typ
        self.decode = decode
        self.nv_scalar = None if none_value is None else pa.scalar(none_value, type=typ)

    def generic(self, values: Sequence[Any]) -> pa.Array:
        decode, core, none_value, typ = self.decode, self.core, self.none_value, self.typ
        if decode is not None:
            values = [decode(v) if v.__class__ is str else v for v in values]
        if core is None:
            return pa.array(values, type=typ, from_pandas=False)
        if none_value is None:
            return pa.array([None if v is None else core(v) for v in values], type=typ, from_pandas=False)
        return pa.array([none_value if v is None else core(v) for v in values], type=typ, from_pandas=False)

    def attempt(self, fast: Callable[[Sequence[Any]], pa.Array | None]) -> ArrayConverter:
        generic = self.generic

        def convert(values: Sequence[Any]) -> pa.Array:
            try:
                out = fast(values)
            except _FAST_ERRORS:
                out = None
            return generic(values) if out is None else out

        return convert

    def parsed(self, vs: Sequence[Any], to: pa.DataType) -> pa.Array:
        """Raw values as an Arrow array of type ``to`` (text: parsed by an Arrow cast)."""
        if self.decode is None:
            return pa.array(vs, type=to, from_pandas=False)
        strings = pa.array(vs, type=pa.string(), from_pandas=False)  # non-str values raise
        if pa.types.is_temporal(to) and pc.any(pc.starts_with(strings, "0000")).as_py():
            # year 0 (zero dates, '0000-01-01'): Arrow parses it, Python's datetime cannot
            raise ValueError("year 0")
        return strings.cast(to)

    def fill(self, arr: pa.Array) -> pa.Array:
        """Nulls replaced by ``none_value`` (when it is not ``None``)."""
        nv_scalar = self.nv_scalar
        return arr if nv_scalar is None or not arr.null_count else arr.fill_null(nv_scalar)


def array_converter(
    column: ColumnSchema,
    options: TypeOptions,
    source: str,
    core: Core,
    none_value: Any,
    typ: pa.DataType,
    *,
    text: bool = False,
) -> ArrayConverter:
    """``f(values) -> pa.Array``, always equal to
    ``pa.array([none_value if v is None else core(v) for v in values], typ)``.

    For the common types the whole column is converted by Arrow (``pa.array`` with the target or a
    temporal type, then Arrow casts and string kernels), which is identical to the per-value
    converter for the raw values both sources deliver. Whenever the values are not of the shape
    the vectorised path expects (e.g. pymysql's zero-date strings, ``date`` objects in a DATETIME
    column, bytes in a text column), Arrow raises or the result type tells, and the column goes
    through the per-value converter instead.

    With ``text=True`` (``source="pymysql"`` only) the values of the column types read as text by
    :func:`snapshot_decoders` arrive as the server's text (``str``), are parsed by Arrow casts, and
    on the per-value path first get pymysql's own decoder, so the result is what the default
    decoders + ``core`` give.
    """
    t = canonical_type(column)
    paths = _ArrayPaths(core, none_value, typ, SNAPSHOT_TEXT_DECODERS.get(t) if text else None)
    fast = (
        _fast_numeric(paths, column, t, options, typ)
        or _fast_string_binary(paths, column, t, options)
        or _fast_temporal(paths, column, t, options, source == "binlog", none_value)
        or json_array_path(column, t)
    )
    return paths.generic if fast is None else paths.attempt(fast)


def _fast_numeric(
    paths: _ArrayPaths, column: ColumnSchema, t: str, options: TypeOptions, typ: pa.DataType
) -> FastPath | None:
    """Integers, BIGINT UNSIGNED (both handling modes), DOUBLE / FLOAT(M,D), DECIMAL (decimal128/256
    target): ``pa.array`` with the target type, plus a cast or a bit-for-bit view."""
    parsed = paths.parsed
    if t in INT_TYPES and not (t == "bigint" and column.unsigned):
        # pa.array takes Python ints (and, like int(), integral floats/Decimals); bool is rejected
        return lambda vs: parsed(vs, typ)
    if t == "bigint":  # unsigned
        if options.bigint_unsigned_handling_mode == "precise":
            return lambda vs: parsed(vs, pa.uint64()).cast(typ)
        # long: the two's-complement wrap of Debezium's Java long, bit for bit
        return lambda vs: parsed(vs, pa.uint64()).view(pa.int64())
    if t == "double" or (t == "float" and column.scale is not None):
        # text: Arrow's string -> double parsing is correctly rounded, as float(str)
        return lambda vs: parsed(vs, pa.float64())
    if t == "decimal" and pa.types.is_decimal(typ):
        # pa.array with a decimal type takes only int and Decimal, and (like the string cast)
        # raises when a value has more fraction digits than the scale (the per-value path rounds
        # those half-even) or does not fit the precision; exact values are rescaled exactly, like
        # Decimal.quantize
        return lambda vs: parsed(vs, typ)
    return None


def _fast_string_binary(
    paths: _ArrayPaths, column: ColumnSchema, t: str, options: TypeOptions
) -> FastPath | None:
    """Text, ENUM and SET columns whose values are all ``str``; binary columns in ``bytes`` mode
    whose values are all ``bytes`` (BINARY(n) values without their padding go per value)."""
    fill = paths.fill
    if t in TEXT_TYPES or t == "enum" or t == "set":

        def strings(vs: Sequence[Any]) -> pa.Array | None:
            arr = pa.array(vs, from_pandas=False)  # inferred: only all-str (or all-None) is used
            if arr.type == pa.string():
                return fill(arr)
            if arr.type == pa.null():
                return fill(arr.cast(pa.string()))
            return None

        return strings
    if t in BINARY_TYPES and options.binary_handling_mode == "bytes":
        pad_to = int(column.length) if (t == "binary" and column.length) else 0

        def binaries(vs: Sequence[Any]) -> pa.Array | None:
            arr = pa.array(vs, from_pandas=False)
            if arr.type == pa.null():
                return arr.cast(pa.binary())
            if arr.type != pa.binary():
                return None
            if pad_to and arr.null_count < len(arr) and pc.min(pc.binary_length(arr)).as_py() < pad_to:
                return None  # BINARY(n) values without their padding (binlog): re-padded per value
            return arr

        return binaries
    return None


def _fast_temporal(
    paths: _ArrayPaths, column: ColumnSchema, t: str, options: TypeOptions, binlog: bool, none_value: Any
) -> FastPath | None:
    """DATE (date32 days), DATETIME (timestamp -> epoch ms/us), TIMESTAMP (timestamp -> ISO text)."""
    parsed, fill = paths.parsed, paths.fill
    adjust = options.enable_time_adjuster
    if t == "date":

        def days(vs: Sequence[Any]) -> pa.Array | None:
            # date32 takes date and datetime (the date part, as core's v.date()); strings raise
            d = parsed(vs, pa.date32()).cast(pa.int32())
            if adjust and _any_below(d, ADJUST_BELOW_DAYS):
                return None  # years below 100: the time adjuster, per value
            return fill(d)

        return days
    if t == "datetime":
        millis = options.time_precision_mode == "connect" or column_fsp(column) <= 3

        def epoch(vs: Sequence[Any]) -> pa.Array | None:
            # naive datetimes are taken as wall-clock UTC, aware ones converted to UTC (as core);
            # date objects and (without text) strings raise
            us = parsed(vs, pa.timestamp("us")).cast(pa.int64())
            if adjust and _any_below(us, ADJUST_BELOW_US):
                return None  # years below 100: the time adjuster, per value
            return fill(_floor_div(us, 1000) if millis else us)

        return epoch
    if t == "timestamp":
        return _fast_timestamp(paths, column_fsp(column), binlog, none_value)
    return None


def _any_below(arr: pa.Array, bound: int) -> bool:
    """Whether a (nullable) integer array holds a value below ``bound``."""
    if arr.null_count == len(arr):
        return False
    return bool(pc.min(arr).as_py() < bound)


def _fast_timestamp(paths: _ArrayPaths, fsp: int, binlog: bool, none_value: Any) -> FastPath:
    """TIMESTAMP(fsp) values -> the per-value path's ISO-8601 UTC text, by Arrow casts."""
    parsed, fill = paths.parsed, paths.fill
    unit = {0: "s", 3: "ms", 6: "us"}.get(fsp, "us")
    keep = 19 if fsp == 0 else 20 + fsp  # "YYYY-MM-DD HH:MM:SS" + "." + fsp digits

    def iso(vs: Sequence[Any]) -> pa.Array | None:
        ts = parsed(vs, pa.timestamp("us"))
        us = ts.cast(pa.int64())
        if len(us) and us.null_count < len(us) and pc.min(us).as_py() < 0:
            return None  # before 1970 (not a TIMESTAMP value): per value
        # fsp 0/3: a safe cast raises on digits beyond the column's precision, which core
        # renders differently (fsp 0) or truncates (fsp 3): those values go per value
        out = ts.cast(pa.timestamp(unit)).cast(pa.string())
        if unit == "us" and fsp != 6:
            out = pc.utf8_slice_codeunits(out, 0, keep)
        out = pc.binary_join_element_wise(pc.replace_substring(out, " ", "T", max_replacements=1), "Z", "")
        if binlog:
            # python-mysql-replication's zero TIMESTAMP is datetime(1970, 1, 1)
            zero = pc.equal(us, 0)
            if pc.any(zero).as_py():
                out = pc.if_else(zero, pa.scalar(none_value, pa.string()), out)
        return fill(out)

    return iso
