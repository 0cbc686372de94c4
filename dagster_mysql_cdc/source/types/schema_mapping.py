"""The Debezium schema of a column (Kafka Connect type, semantic name, parameters) and the lake's
Arrow field and schema derived from it (Debezium MySQL connector, "Data type mappings")."""

from __future__ import annotations

import json
from collections.abc import Sequence

import pyarrow as pa

from ..schema import ColumnSchema, TableSchema
from .families import (
    BINARY_TYPES,
    GEOMETRY_TYPES,
    INT_TYPES,
    MAX_DECIMAL128_PRECISION,
    TEXT_TYPES,
    bit_length,
    canonical_type,
    column_fsp,
    decimal_precision_scale,
    supported_type,
)
from .options import TypeOptions, UnsupportedTypeError
from .spatial import GEOMETRY_ARROW_TYPE

#: Kafka Connect's logical name of an arbitrary-precision decimal (``decimal.handling.mode=precise``).
DEBEZIUM_DECIMAL = "org.apache.kafka.connect.data.Decimal"


def debezium_type(
    column: ColumnSchema, options: TypeOptions, *, table: str | None = None
) -> tuple[str, str | None]:
    """Kafka Connect schema type and Debezium semantic type of ``column``.

    Args:
        column: the column.
        options: the type options.
        table: optional ``database.table`` used only in error messages.

    Returns:
        ``(connect_type, semantic_name)``: ``connect_type`` is the lower-case Kafka Connect schema
        type (``"int16"``, ``"int32"``, ``"int64"``, ``"float32"``, ``"float64"``,
        ``"boolean"``, ``"string"``, ``"bytes"``, ``"struct"``); ``semantic_name`` is the
        Debezium / Kafka Connect logical name (e.g. ``"io.debezium.time.MicroTimestamp"``) or
        ``None`` for plain literal types.

    Mapping (Debezium MySQL connector, "Data type mappings"):

    * "Basic types": TINYINT/SMALLINT -> int16; SMALLINT UNSIGNED, MEDIUMINT, INT -> int32;
      INT UNSIGNED, BIGINT -> int64; BIGINT UNSIGNED -> int64 (``long``) or
      ``Decimal(20,0)`` (``precise``). BOOLEAN/BOOL is stored by the server as TINYINT(1) and is
      mapped like TINYINT -> int16 (section "Boolean values": snapshots see TINYINT(1); Debezium
      only emits BOOLEAN for columns it saw created by DDL while streaming, which would make the
      lake type depend on history - we never do that). FLOAT -> float32, DOUBLE -> float64,
      REAL -> float64 (the doc lists REAL as FLOAT32, but the server stores REAL as DOUBLE unless
      sql_mode REAL_AS_FLOAT, and information_schema reports ``double``)
      ``FLOAT(M,D)`` -> float64 as in Debezium, recognised by ``column.scale`` being set (a plain
      FLOAT or FLOAT(p) has no scale). CHAR/VARCHAR/*TEXT -> string;
      BINARY/VARBINARY/*BLOB -> bytes, or string for the base64/hex ``binary.handling.mode``.
      BIT(1) -> boolean; BIT(n>1) -> bytes ``io.debezium.data.Bits``. JSON -> string
      ``io.debezium.data.Json``; ENUM -> string ``io.debezium.data.Enum``; SET -> string
      ``io.debezium.data.EnumSet``; YEAR -> int32 ``io.debezium.time.Year``; TIMESTAMP -> string
      ``io.debezium.time.ZonedTimestamp`` (every ``time.precision.mode``).
    * "Temporal types" (``time.precision.mode``): adaptive_time_microseconds: DATE -> int32
      ``io.debezium.time.Date``; TIME -> int64 ``io.debezium.time.MicroTime``; DATETIME(0-3) ->
      int64 ``io.debezium.time.Timestamp``; DATETIME(4-6) -> int64
      ``io.debezium.time.MicroTimestamp``. connect: DATE -> int32
      ``org.apache.kafka.connect.data.Date``; TIME -> int32 ``org.apache.kafka.connect.data.Time``
      (milliseconds - Kafka Connect's Time is INT32 millis; the Debezium doc table says INT64
      microseconds, which contradicts Kafka Connect's definition of that logical type);
      DATETIME -> int64 ``org.apache.kafka.connect.data.Timestamp``.
    * "Decimal types" (``decimal.handling.mode``): precise -> bytes
      ``org.apache.kafka.connect.data.Decimal``; double -> float64; string -> string. In
      ``precise`` mode a DECIMAL wider than :data:`MAX_DECIMAL128_PRECISION` digits is held as
      a plain-notation string (Arrow decimal128 and Spark's DecimalType stop at 38 digits,
      Debezium's Decimal is arbitrary precision), so its type is string, as in Debezium's
      ``string`` mode: the field metadata says what the column holds; ``double`` makes it a
      float64 as any DECIMAL.
    * "Spatial types": GEOMETRY, POINT, LINESTRING, POLYGON, MULTI*, GEOMETRYCOLLECTION -> struct
      ``io.debezium.data.geometry.Geometry`` ``{wkb: bytes, srid: int32}``. (Debezium maps POINT to
      the ``io.debezium.data.geometry.Point`` struct with extra x/y fields; we use Geometry for
      POINT too so the whole spatial family has one lake type.)

    Raises:
        UnsupportedTypeError: the column type is not supported.
    """
    t = supported_type(column, table)
    fixed = _FIXED_TYPES.get(t)
    if fixed is not None:
        return fixed
    if t in INT_TYPES:
        return _integer_type(column, t, options)
    if t == "float":
        return ("float32", None) if column.scale is None else ("float64", None)
    if t == "decimal":
        return _decimal_type(column, options)
    if t in BINARY_TYPES:
        return ("bytes", None) if options.binary_handling_mode == "bytes" else ("string", None)
    if t == "bit":
        return ("boolean", None) if bit_length(column) <= 1 else ("bytes", "io.debezium.data.Bits")
    if t in ("date", "time", "datetime"):
        return _temporal_type(column, t, options)
    raise UnsupportedTypeError(column, table)  # pragma: no cover - guarded by supported_type


#: Canonical types whose Debezium schema depends neither on the column nor on the options.
_FIXED_TYPES: dict[str, tuple[str, str | None]] = {
    "double": ("float64", None),
    **{t: ("string", None) for t in TEXT_TYPES},
    "json": ("string", "io.debezium.data.Json"),
    "enum": ("string", "io.debezium.data.Enum"),
    "set": ("string", "io.debezium.data.EnumSet"),
    "year": ("int32", "io.debezium.time.Year"),
    "timestamp": ("string", "io.debezium.time.ZonedTimestamp"),
    **{t: ("struct", "io.debezium.data.geometry.Geometry") for t in GEOMETRY_TYPES},
}


def _integer_type(column: ColumnSchema, t: str, options: TypeOptions) -> tuple[str, str | None]:
    """TINYINT..BIGINT: the smallest Connect integer holding the column's range; BIGINT UNSIGNED
    per ``bigint.unsigned.handling.mode``."""
    if t == "tinyint":
        return ("int16", None)
    if t == "smallint":
        return ("int32", None) if column.unsigned else ("int16", None)
    if t == "mediumint":
        return ("int32", None)
    if t == "int":
        return ("int64", None) if column.unsigned else ("int32", None)
    # bigint
    if column.unsigned and options.bigint_unsigned_handling_mode == "precise":
        return ("bytes", DEBEZIUM_DECIMAL)
    return ("int64", None)


def _decimal_type(column: ColumnSchema, options: TypeOptions) -> tuple[str, str | None]:
    """DECIMAL per ``decimal.handling.mode``; wider than 38 digits a string in ``precise`` mode."""
    mode = options.decimal_handling_mode
    if mode == "precise" and decimal_precision_scale(column)[0] <= MAX_DECIMAL128_PRECISION:
        return ("bytes", DEBEZIUM_DECIMAL)
    if mode == "double":
        return ("float64", None)
    return ("string", None)


def _temporal_type(column: ColumnSchema, t: str, options: TypeOptions) -> tuple[str, str | None]:
    """DATE, TIME and DATETIME per ``time.precision.mode`` (TIMESTAMP and YEAR do not depend on it)."""
    connect = options.time_precision_mode == "connect"
    if t == "date":
        return ("int32", "org.apache.kafka.connect.data.Date" if connect else "io.debezium.time.Date")
    if t == "time":
        if connect:
            return ("int32", "org.apache.kafka.connect.data.Time")
        return ("int64", "io.debezium.time.MicroTime")
    if connect:  # datetime
        return ("int64", "org.apache.kafka.connect.data.Timestamp")
    if column_fsp(column) <= 3:
        return ("int64", "io.debezium.time.Timestamp")
    return ("int64", "io.debezium.time.MicroTimestamp")


def debezium_parameters(column: ColumnSchema, options: TypeOptions) -> dict[str, str]:
    """Kafka Connect schema parameters Debezium attaches to the column's schema.

    ``{"scale": "s", "connect.decimal.precision": "p"}`` for Decimal, ``{"allowed": "a,b"}`` for
    Enum/EnumSet (:func:`enum_allowed`), ``{"length": "n"}`` for Bits; ``{}`` otherwise.
    """
    ctype, name = debezium_type(column, options)
    if name == DEBEZIUM_DECIMAL:
        if canonical_type(column) == "bigint":
            return {"scale": "0", "connect.decimal.precision": "20"}
        p, s = decimal_precision_scale(column)
        return {"scale": str(s), "connect.decimal.precision": str(p)}
    if name in ("io.debezium.data.Enum", "io.debezium.data.EnumSet"):
        return {"allowed": enum_allowed(column.enum_values)}
    if name == "io.debezium.data.Bits":
        return {"length": str(bit_length(column))}
    return {}


def enum_allowed(labels: Sequence[str]) -> str:
    """The ``allowed`` parameter of an ENUM/SET column: its labels comma-separated, a comma inside
    a label escaped as ``\\,`` so the list can be split back unambiguously (Debezium
    ``MySqlAntlrDdlParser.escapeOption``; BinlogEnumColumnIT expects
    ``station,post_office,...,a\\,b,c\\,'d`` for the labels ``'a,b'`` and ``'c,\\'d'``).
    Quotes are the labels' own (unescaped) characters."""
    return ",".join(label.replace(",", "\\,") for label in labels)


_CONNECT_TO_ARROW = {
    "boolean": pa.bool_(),
    "int16": pa.int16(),
    "int32": pa.int32(),
    "int64": pa.int64(),
    "float32": pa.float32(),
    "float64": pa.float64(),
    "string": pa.string(),
    "bytes": pa.binary(),
}


def _arrow_type(column: ColumnSchema, options: TypeOptions, table: str | None) -> pa.DataType:
    ctype, name = debezium_type(column, options, table=table)
    if name == DEBEZIUM_DECIMAL:
        if canonical_type(column) == "bigint":
            return pa.decimal128(20, 0)
        p, s = decimal_precision_scale(column)
        return pa.decimal128(p, s)  # p <= 38: wider DECIMALs are strings (debezium_type)
    if ctype == "struct":
        return GEOMETRY_ARROW_TYPE
    return _CONNECT_TO_ARROW[ctype]


def arrow_field(column: ColumnSchema, options: TypeOptions, *, table: str | None = None) -> pa.Field:
    """The lake (Arrow) field of ``column``.

    The field is always ``nullable=True`` (a lake column must be able to hold deletes' missing
    after-images, schema evolution, etc.). Field metadata:

    * ``b"mysql.type"``: :attr:`ColumnSchema.column_type` (e.g. ``b"decimal(10,2) unsigned"``);
    * ``b"debezium.type"``: Kafka Connect type from :func:`debezium_type` (e.g. ``b"int64"``);
    * ``b"debezium.name"``: the semantic name, only when there is one;
    * ``b"debezium.parameters"``: JSON of :func:`debezium_parameters`, only when non-empty.

    Arrow types: int16/int32/int64/float32/float64/bool as the Connect type; ``string`` for
    strings; ``binary`` for bytes; ``decimal128(p, s)`` for Decimal (``decimal128(20, 0)`` for
    BIGINT UNSIGNED precise); in ``precise`` mode a DECIMAL with p > 38 is a ``string`` column
    holding the exact plain-notation value and says so (``debezium.type`` ``string``, no Decimal name or
    parameters; ``mysql.type`` keeps ``decimal(p,s)``); ``struct<wkb: binary, srid: int32>`` for
    geometries.

    Raises:
        UnsupportedTypeError: the column type is not supported.
    """
    ctype, name = debezium_type(column, options, table=table)
    meta = {b"mysql.type": column.column_type.encode(), b"debezium.type": ctype.encode()}
    if name:
        meta[b"debezium.name"] = name.encode()
    params = debezium_parameters(column, options)
    if params:
        meta[b"debezium.parameters"] = json.dumps(params, separators=(",", ":")).encode()
    return pa.field(column.name, _arrow_type(column, options, table), nullable=True, metadata=meta)


def ordered_columns(table: TableSchema) -> list[ColumnSchema]:
    """The table's columns in ordinal (``ORDINAL_POSITION``) order."""
    return sorted(table.columns, key=lambda c: c.position)


def arrow_schema(table: TableSchema, options: TypeOptions) -> pa.Schema:
    """Arrow schema of ``table``: one :func:`arrow_field` per column, in ordinal order.

    Schema metadata: ``b"mysql.table"`` = ``database.table``.

    Raises:
        UnsupportedTypeError: a column type is not supported (the message names table and column).
    """
    fields = [arrow_field(c, options, table=table.qualified_name) for c in ordered_columns(table)]
    return pa.schema(fields, metadata={b"mysql.table": table.qualified_name.encode()})
