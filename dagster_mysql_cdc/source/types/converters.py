"""One column's value converter: the dispatch from a column to its family's converter
(:func:`build_core`), :func:`value_converter`, and :func:`hashable_value`."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal

from ..schema import ColumnSchema
from .families import BINARY_TYPES, GEOMETRY_TYPES, INT_TYPES, TEXT_TYPES, Core, supported_type
from .json_text import json_core
from .numeric import bit_core, decimal_core, floating_core, integer_core
from .options import SOURCES, TypeOptions, UnsupportedTypeError
from .spatial import geometry_core
from .strings import binary_core, enum_core, set_core, text_core
from .temporal import temporal_core, year_core


def build_core(
    column: ColumnSchema, options: TypeOptions, source: str, table: str | None
) -> tuple[Core, Any]:
    """``(core, none_value)`` of a column: the type family's builder below for its canonical type.

    Raises:
        ValueError: ``source`` is not ``"pymysql"`` or ``"binlog"``.
        UnsupportedTypeError: the column's data type is not supported.
    """
    if source not in SOURCES:
        raise ValueError(f"source must be one of {SOURCES}, got {source!r}")
    t = supported_type(column, table)
    binlog = source == "binlog"
    if t in INT_TYPES:
        return integer_core(column, t, options)
    if t in ("float", "double"):
        return floating_core(column, t)
    if t == "decimal":
        return decimal_core(column, options)
    if t in TEXT_TYPES:
        return text_core(column)
    if t in BINARY_TYPES:
        return binary_core(column, t, options)
    if t == "bit":
        return bit_core(column)
    if t == "json":
        return json_core(column, binlog)
    if t == "enum":
        return enum_core(column)
    if t == "set":
        return set_core(column)
    if t == "year":
        return year_core(binlog)
    if t in ("date", "datetime", "timestamp", "time"):
        return temporal_core(column, t, options, binlog)
    if t in GEOMETRY_TYPES:
        return geometry_core(column)
    raise UnsupportedTypeError(column, table)  # pragma: no cover


def _identity(v: Any) -> Any:
    return v


def hashable_value(v: Any) -> Any:
    """A converted value in a form that can be hashed and compared: a struct (a geometry's
    ``{"wkb", "srid"}`` dict, as the converters and ``pyarrow``'s ``to_pylist`` give it) becomes a
    tuple of its sorted ``(field, value)`` pairs, a list a tuple; other values are returned as
    they are. Equal values map to equal results, so rows and keys holding structs can be set
    members and dict keys (a keyless table's key is all its columns)."""
    if isinstance(v, dict):
        return tuple(sorted((k, hashable_value(x)) for k, x in v.items()))
    if isinstance(v, (list, tuple)):
        return tuple(hashable_value(x) for x in v)
    return v


def value_converter(
    column: ColumnSchema,
    options: TypeOptions,
    source: Literal["pymysql", "binlog"],
    *,
    table: str | None = None,
) -> Callable[[Any], Any]:
    """A function converting one raw value of ``column`` into its Debezium value.

    Args:
        column: the column.
        options: the type options.
        source: ``"pymysql"`` (snapshot SELECT, default pymysql conversions, session
            ``time_zone='+00:00'``) or ``"binlog"`` (python-mysql-replication 1.0.17 row images).
        table: optional ``database.table`` used only in error messages.

    Returns:
        ``f(raw) -> value``. ``None`` becomes ``None``, except for the documented zero-value cases
        of NOT NULL columns (see below). Value shapes (Python objects, ready for
        ``pyarrow.array(..., type=arrow_field(...).type)``):

        * integers -> ``int``; BIGINT UNSIGNED -> ``Decimal`` (precise) or wrapped ``int`` (long);
        * FLOAT -> ``float`` rounded to the nearest float32; FLOAT(M,D), DOUBLE -> ``float``;
        * DECIMAL -> ``Decimal`` quantized to the column scale (precise, p <= 38), ``float``
          (double), plain-notation ``str`` (string mode, or precise with p > 38);
        * text -> ``str`` (bytes are decoded with the column charset, malformed sequences
          replaced as Java's ``new String(bytes, charset)`` does; 4-byte UTF-8 round-trips);
        * binary -> ``bytes`` / base64 / url-safe base64 / lower-case hex ``str``; BINARY(n) is
          right-padded with 0x00 to n bytes (Debezium DBZ-254: the binlog strips the padding);
        * BIT(1) -> ``bool``; BIT(n) -> little-endian ``bytes`` of ceil(n/8) bytes;
        * JSON -> ``str``: MariaDB's JSON (a LONGTEXT, :func:`json_is_text`) exactly as stored
          (every digit, duplicate keys, spacing); MySQL's binary JSON as compact JSON text
          (``separators=(",", ":")``, non-ASCII kept; the snapshot's text is parsed and
          re-serialized the same way so both sources agree; non-integer numbers go through IEEE
          double, which is how MySQL stores them anyway; text that is not valid JSON is kept as
          stored);
        * ENUM -> ``str`` (an ``int`` input is the binlog's 1-based index, 0 -> ``""``);
        * SET -> ``str``, members comma-separated in declaration order;
        * YEAR -> ``int``;
        * DATE -> ``int`` days since 1970-01-01;
        * DATETIME -> ``int`` ms (fsp 0-3, or connect mode) or us (fsp 4-6) since the epoch,
          the wall-clock value read as UTC;
        * DATE and DATETIME with a year below 100, with ``options.enable_time_adjuster`` (the
          default, as Debezium): the year read as a two-digit year (0-69 -> 2000-2069, 70-99 ->
          1970-1999; ``'0018-04-01'`` -> 17622 days);
        * TIMESTAMP -> ISO-8601 UTC ``str`` ending in ``Z``; the fraction has exactly fsp digits
          when fsp > 0 (Debezium 2.2+, DBZ-5996) and is omitted when fsp = 0;
        * TIME -> ``int`` us (may be negative, |value| < 839 h; Debezium's
          ``convertDurationToMicroseconds``) or, in connect mode, ms in [0, 86_400_000) (other
          values raise ``ValueError``, as Kafka Connect Time cannot hold them); with
          ``source="binlog"`` the library's wrong fraction of negative TIME(fsp>0) values is
          corrected (see :mod:`.temporal`);
        * geometries -> ``{"wkb": bytes, "srid": int}`` (``srid`` ``None`` for SRID 0, as Debezium).

        Zero values (Debezium "Temporal types": "represents zero-values as null values when the
        column definition allows null values, or as the epoch day when the column does not allow
        null values"): zero/invalid DATE/DATETIME/TIMESTAMP -> ``None`` when nullable, else
        ``0`` / ``0`` / ``"1970-01-01T00:00:00Z"``. Because python-mysql-replication already turns
        zero DATE/DATETIME into ``None``, a ``None`` of a NOT NULL temporal column also maps to the
        epoch value; a ``None`` of a NOT NULL SET (the library's empty set) maps to ``""``.

    Raises:
        UnsupportedTypeError: the column type is not supported (at build time).
        ValueError: ``source`` is not one of the two sources (at build time); a raw value has an
            unexpected Python type or is out of range (when the returned function is called).
    """
    core, none_value = build_core(column, options, source, table)
    if core is None:
        return _identity
    if none_value is None:
        return lambda v: None if v is None else core(v)
    return lambda v: none_value if v is None else core(v)
