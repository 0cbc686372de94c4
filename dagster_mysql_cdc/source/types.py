"""MySQL/MariaDB column types -> Debezium logical types -> Arrow types, and value conversion.

This is the ONE place that knows how a MySQL/MariaDB column value is represented in a change event.
Every mapping follows the *Debezium connector for MySQL* documentation, section "Data type
mappings" (sub-sections "Basic types", "Temporal types", "Decimal types", "Boolean values",
"Spatial types") and the connector properties ``decimal.handling.mode``,
``time.precision.mode``, ``bigint.unsigned.handling.mode`` and ``binary.handling.mode``.
Where the lake needs something Debezium does not say (Arrow types, DECIMAL wider than 38 digits)
or where we deliberately differ, the function docstrings say so.

Two value sources are supported, and both produce *identical* Debezium values for the same row:

``"pymysql"``
    Rows of a snapshot ``SELECT`` read with pymysql's default conversions on a connection whose
    session ``time_zone`` is ``'+00:00'`` (so ``TIMESTAMP`` values arrive as naive UTC datetimes).
``"binlog"``
    Row images of python-mysql-replication 1.0.17 row events (``event.rows[i]["values"]`` etc.).

Library facts this module relies on (read from the installed library sources, checked against
MariaDB 10.11 by ``tests/test_types_mariadb.py``):

* pymysql returns zero / invalid ``DATE``/``DATETIME``/``TIMESTAMP`` values as the raw *string*
  (``'0000-00-00'``), ``BIT`` as big-endian ``bytes``, ``SET`` as ``'a,b'``, ``TIME`` as
  ``timedelta`` (negative allowed), ``JSON`` as ``str``, ``BINARY(n)`` 0x00-padded, and ``FLOAT``
  parsed from the server's 6-significant-digit text (select it with :func:`select_expression`).
* python-mysql-replication returns zero ``DATE``/``DATETIME`` as ``None``, a zero ``TIMESTAMP`` as
  ``datetime(1970, 1, 1)`` (``utcfromtimestamp(0)``), ``TIMESTAMP`` as a *naive UTC* datetime
  (independent of the process time zone), ``BIT(n)`` as a string of ``n`` ``'0'``/``'1'``
  characters, ``SET`` as a Python ``set`` (an empty set as ``None``, flagged ``"empty set"`` in
  ``none_sources``), ``YEAR`` 0000 as ``1900``, ``BINARY(n)`` without its trailing ``0x00`` padding,
  negative ``TIME(fsp>0)`` values with the complementary fraction (``-00:00:01.25`` as
  ``-00:00:01.75``), MySQL binary ``JSON`` decoded to Python objects whose strings and keys are
  ``bytes`` (a JSON ``null`` literal as ``None``), and MariaDB's JSON (LONGTEXT) as ``str``.
  ENUM/SET values, column names and charsets need ``binlog_row_metadata=FULL``: without it ENUM
  values come back as ``None`` and binary columns are decoded as UTF-8 text (or fail to decode).
"""

from __future__ import annotations

import base64
import datetime as _dt
import decimal
import json
import operator
import re
import struct
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import pyarrow as pa
import pyarrow.compute as pc
import pymysql.converters as _pymysql_conv
from pymysql.constants import FIELD_TYPE

try:  # a declared dependency; the json module is the (slower, identical) fallback
    import orjson as _orjson

    _orjson_loads, _orjson_dumps = _orjson.loads, _orjson.dumps
except ImportError:  # pragma: no cover
    _orjson = None  # type: ignore[assignment]

from ..errors import ConfigurationError
from .columns import ColumnPolicy
from .schema import ColumnSchema, TableSchema

__all__ = [
    "TypeOptions",
    "UnsupportedTypeError",
    "debezium_type",
    "debezium_parameters",
    "arrow_field",
    "arrow_schema",
    "value_converter",
    "TableConverter",
    "SUPPORTED_DATA_TYPES",
    "select_expression",
    "quote_identifier",
    "snapshot_decoders",
    "hashable_value",
    "enum_allowed",
    "json_is_text",
    "binlog_value_as_parameter",
]

Source = Literal["pymysql", "binlog"]
#: Debezium ``decimal.handling.mode`` values.
DecimalHandlingMode = Literal["precise", "double", "string"]
#: Debezium ``time.precision.mode`` values supported for MySQL.
TimePrecisionMode = Literal["adaptive_time_microseconds", "connect"]
#: Debezium ``bigint.unsigned.handling.mode`` values.
BigintUnsignedHandlingMode = Literal["long", "precise"]
#: Debezium ``binary.handling.mode`` values.
BinaryHandlingMode = Literal["bytes", "base64", "base64-url-safe", "hex"]
_SOURCES = ("pymysql", "binlog")

# --------------------------------------------------------------------------------------------
# Options
# --------------------------------------------------------------------------------------------

_ALLOWED: dict[str, tuple[str, ...]] = {
    "decimal_handling_mode": ("precise", "double", "string"),
    "time_precision_mode": ("adaptive_time_microseconds", "connect"),
    "bigint_unsigned_handling_mode": ("long", "precise"),
    "binary_handling_mode": ("bytes", "base64", "base64-url-safe", "hex"),
}


@dataclass(frozen=True)
class TypeOptions:
    """The Debezium connector properties that change how values are represented.

    Attributes:
        decimal_handling_mode: Debezium ``decimal.handling.mode`` (section "Decimal types").
            ``"precise"`` (default): ``org.apache.kafka.connect.data.Decimal``, lake type
            ``decimal128(p, s)``; ``"double"``: ``float64``; ``"string"``: plain-notation string.
        time_precision_mode: Debezium ``time.precision.mode`` (section "Temporal types").
            ``"adaptive_time_microseconds"`` (default) or ``"connect"``. Debezium's deprecated
            ``adaptive`` mode is not offered.
        bigint_unsigned_handling_mode: Debezium ``bigint.unsigned.handling.mode``. ``"precise"``
            (OUR default): ``Decimal(20,0)``, every value exact. ``"long"`` (Debezium's default):
            ``int64``; values above 2**63-1 wrap to negative numbers exactly as Debezium's Java
            ``long`` does (18446744073709551615 -> -1). We default to ``precise`` because a silent
            wrap in a data lake is a correctness bug.
        binary_handling_mode: Debezium ``binary.handling.mode`` for BINARY/VARBINARY/BLOB columns:
            ``"bytes"`` (default), ``"base64"``, ``"base64-url-safe"`` or ``"hex"`` (lower-case).
        enable_time_adjuster: Debezium ``enable.time.adjuster`` (default ``True``, as Debezium):
            a DATE or DATETIME whose year is below 100 is read as a two-digit year, years 00-69
            becoming 2000-2069 and 70-99 becoming 1970-1999 (``'0018-04-01'`` -> 2018-04-01),
            as MySQL itself reads two-digit years in literals (Debezium
            ``MySqlValueConverters.adjustTemporal``). ``False`` keeps the stored year
            (``'0018-04-01'`` -> -712863 days). TIMESTAMP cannot hold such years (its range
            starts in 1970) and YEAR is stored with four digits, so neither is affected.
        columns: captured columns and value masks (Debezium ``column.include.list``,
            ``column.exclude.list``, ``column.truncate.to.<n>.chars``, ``column.mask.with.<n>.chars``,
            ``column.mask.hash.<algorithm>.with.salt.<salt>``; :mod:`.columns`): every
            :class:`TableConverter` converts only the captured columns and masks their values.

    Raises:
        ConfigurationError (a ValueError): an option has a value that is not allowed; the message
            names the option, the bad value and the allowed values.
    """

    decimal_handling_mode: DecimalHandlingMode = "precise"
    time_precision_mode: TimePrecisionMode = "adaptive_time_microseconds"
    bigint_unsigned_handling_mode: BigintUnsignedHandlingMode = "precise"
    binary_handling_mode: BinaryHandlingMode = "bytes"
    columns: ColumnPolicy = field(default_factory=ColumnPolicy)
    enable_time_adjuster: bool = True

    def __post_init__(self) -> None:
        if not isinstance(self.enable_time_adjuster, bool):
            raise ConfigurationError(
                f"enable_time_adjuster must be true or false (Debezium 'enable.time.adjuster'), got "
                f"{self.enable_time_adjuster!r}"
            )
        for name, allowed in _ALLOWED.items():
            value = getattr(self, name)
            if value not in allowed:
                raise ConfigurationError(
                    f"Invalid value {value!r} for type option {name!r} "
                    f"(Debezium '{name.replace('_', '.')}'); allowed values are "
                    + ", ".join(repr(a) for a in allowed)
                )


class UnsupportedTypeError(ConfigurationError):
    """A column has a MySQL/MariaDB type this connector cannot represent.

    Raised when converters / schemas are *built*, never per row.

    Attributes:
        table: ``database.table`` or ``None`` when not known at the call site.
        column: column name.
        column_type: the column type in MySQL syntax.
    """

    def __init__(self, column: ColumnSchema, table: str | None = None, reason: str | None = None):
        self.table = table
        self.column = column.name
        self.column_type = column.column_type
        where = f"{table}.{column.name}" if table else column.name
        detail = f": {reason}" if reason else ""
        super().__init__(
            f"Column {where!s} has type {column.column_type!r}, which is not supported{detail}. "
            "Exclude the column (column exclude list) or the table (table exclude list) from "
            "capture, or change the column type."
        )


# --------------------------------------------------------------------------------------------
# Type classification
# --------------------------------------------------------------------------------------------

# data_type aliases (information_schema names plus what a DDL parser may hand us) -> canonical name
_ALIASES: dict[str, str] = {
    "bool": "tinyint",
    "boolean": "tinyint",
    "int1": "tinyint",
    "int2": "smallint",
    "int3": "mediumint",
    "middleint": "mediumint",
    "integer": "int",
    "int4": "int",
    "int8": "bigint",
    "serial": "bigint",
    "real": "double",
    "double precision": "double",
    "float4": "float",
    "float8": "double",
    "numeric": "decimal",
    "dec": "decimal",
    "fixed": "decimal",
    "character": "char",
    "nchar": "char",
    "national char": "char",
    "nvarchar": "varchar",
    "national varchar": "varchar",
    "character varying": "varchar",
    "long varchar": "mediumtext",
    "long": "mediumtext",
    "long varbinary": "mediumblob",
    "geomcollection": "geometrycollection",
}

_INT_TYPES = frozenset({"tinyint", "smallint", "mediumint", "int", "bigint"})
_TEXT_TYPES = frozenset({"char", "varchar", "tinytext", "text", "mediumtext", "longtext"})
_BINARY_TYPES = frozenset({"binary", "varbinary", "tinyblob", "blob", "mediumblob", "longblob"})
_GEOMETRY_TYPES = frozenset(
    {
        "geometry",
        "point",
        "linestring",
        "polygon",
        "multipoint",
        "multilinestring",
        "multipolygon",
        "geometrycollection",
    }
)
_OTHER_TYPES = frozenset(
    {
        "float",
        "double",
        "decimal",
        "date",
        "datetime",
        "timestamp",
        "time",
        "year",
        "enum",
        "set",
        "bit",
        "json",
    }
)

#: Canonical data types :func:`value_converter` accepts (aliases such as ``integer`` are also accepted).
SUPPORTED_DATA_TYPES: frozenset[str] = (
    _INT_TYPES | _TEXT_TYPES | _BINARY_TYPES | _GEOMETRY_TYPES | _OTHER_TYPES
)

#: Largest precision Arrow decimal128 / Spark DecimalType can hold.
MAX_DECIMAL128_PRECISION = 38


def _canonical(column: ColumnSchema) -> str:
    t = column.data_type.strip().lower()
    return _ALIASES.get(t, t)


def _check_supported(column: ColumnSchema, table: str | None) -> str:
    t = _canonical(column)
    if t not in SUPPORTED_DATA_TYPES:
        raise UnsupportedTypeError(column, table)
    return t


def _fsp(column: ColumnSchema) -> int:
    """Fractional-seconds precision (0-6) of a DATETIME/TIMESTAMP/TIME column."""
    p = column.precision or 0
    return max(0, min(6, int(p)))


def _decimal_ps(column: ColumnSchema) -> tuple[int, int]:
    # MySQL's default for a bare DECIMAL is DECIMAL(10,0).
    p = column.precision if column.precision is not None else 10
    s = column.scale if column.scale is not None else 0
    return int(p), int(s)


def _bit_length(column: ColumnSchema) -> int:
    return int(column.length) if column.length else 1


# --------------------------------------------------------------------------------------------
# Debezium schema types
# --------------------------------------------------------------------------------------------

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
    t = _check_supported(column, table)
    if t in _INT_TYPES:
        if t in ("tinyint",):
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
    if t == "float":
        return ("float32", None) if column.scale is None else ("float64", None)
    if t == "double":
        return ("float64", None)
    if t == "decimal":
        mode = options.decimal_handling_mode
        if mode == "precise" and _decimal_ps(column)[0] <= MAX_DECIMAL128_PRECISION:
            return ("bytes", DEBEZIUM_DECIMAL)
        if mode == "double":
            return ("float64", None)
        return ("string", None)
    if t in _TEXT_TYPES:
        return ("string", None)
    if t in _BINARY_TYPES:
        return ("bytes", None) if options.binary_handling_mode == "bytes" else ("string", None)
    if t == "bit":
        if _bit_length(column) <= 1:
            return ("boolean", None)
        return ("bytes", "io.debezium.data.Bits")
    if t == "json":
        return ("string", "io.debezium.data.Json")
    if t == "enum":
        return ("string", "io.debezium.data.Enum")
    if t == "set":
        return ("string", "io.debezium.data.EnumSet")
    if t == "year":
        return ("int32", "io.debezium.time.Year")
    if t == "timestamp":
        return ("string", "io.debezium.time.ZonedTimestamp")
    connect = options.time_precision_mode == "connect"
    if t == "date":
        return ("int32", "org.apache.kafka.connect.data.Date" if connect else "io.debezium.time.Date")
    if t == "time":
        if connect:
            return ("int32", "org.apache.kafka.connect.data.Time")
        return ("int64", "io.debezium.time.MicroTime")
    if t == "datetime":
        if connect:
            return ("int64", "org.apache.kafka.connect.data.Timestamp")
        if _fsp(column) <= 3:
            return ("int64", "io.debezium.time.Timestamp")
        return ("int64", "io.debezium.time.MicroTimestamp")
    if t in _GEOMETRY_TYPES:
        return ("struct", "io.debezium.data.geometry.Geometry")
    raise UnsupportedTypeError(column, table)  # pragma: no cover - guarded by _check_supported


def debezium_parameters(column: ColumnSchema, options: TypeOptions) -> dict[str, str]:
    """Kafka Connect schema parameters Debezium attaches to the column's schema.

    ``{"scale": "s", "connect.decimal.precision": "p"}`` for Decimal, ``{"allowed": "a,b"}`` for
    Enum/EnumSet (:func:`enum_allowed`), ``{"length": "n"}`` for Bits; ``{}`` otherwise.
    """
    ctype, name = debezium_type(column, options)
    if name == DEBEZIUM_DECIMAL:
        if _canonical(column) == "bigint":
            return {"scale": "0", "connect.decimal.precision": "20"}
        p, s = _decimal_ps(column)
        return {"scale": str(s), "connect.decimal.precision": str(p)}
    if name in ("io.debezium.data.Enum", "io.debezium.data.EnumSet"):
        return {"allowed": enum_allowed(column.enum_values)}
    if name == "io.debezium.data.Bits":
        return {"length": str(_bit_length(column))}
    return {}


def enum_allowed(labels: Sequence[str]) -> str:
    """The ``allowed`` parameter of an ENUM/SET column: its labels comma-separated, a comma inside
    a label escaped as ``\\,`` so the list can be split back unambiguously (Debezium
    ``MySqlAntlrDdlParser.escapeOption``; BinlogEnumColumnIT expects
    ``station,post_office,...,a\\,b,c\\,'d`` for the labels ``'a,b'`` and ``'c,\\'d'``).
    Quotes are the labels' own (unescaped) characters."""
    return ",".join(label.replace(",", "\\,") for label in labels)


# --------------------------------------------------------------------------------------------
# Arrow
# --------------------------------------------------------------------------------------------

GEOMETRY_ARROW_TYPE = pa.struct([pa.field("wkb", pa.binary()), pa.field("srid", pa.int32())])

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
        if _canonical(column) == "bigint":
            return pa.decimal128(20, 0)
        p, s = _decimal_ps(column)
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


def _ordered_columns(table: TableSchema) -> list[ColumnSchema]:
    return sorted(table.columns, key=lambda c: c.position)


def arrow_schema(table: TableSchema, options: TypeOptions) -> pa.Schema:
    """Arrow schema of ``table``: one :func:`arrow_field` per column, in ordinal order.

    Schema metadata: ``b"mysql.table"`` = ``database.table``.

    Raises:
        UnsupportedTypeError: a column type is not supported (the message names table and column).
    """
    fields = [arrow_field(c, options, table=table.qualified_name) for c in _ordered_columns(table)]
    return pa.schema(fields, metadata={b"mysql.table": table.qualified_name.encode()})


# --------------------------------------------------------------------------------------------
# Value conversion helpers
# --------------------------------------------------------------------------------------------

_EPOCH_DATE = _dt.date(1970, 1, 1)
_EPOCH_ORDINAL = _EPOCH_DATE.toordinal()
_EPOCH_NAIVE = _dt.datetime(1970, 1, 1)
_ONE_DAY_US = 86_400_000_000
_UTC = _dt.UTC
_DEC_CTX = decimal.Context(prec=100, rounding=decimal.ROUND_HALF_EVEN)
_INT64_WRAP = 1 << 64
_INT64_MAX = (1 << 63) - 1
_FLOAT32 = struct.Struct("<f")

# MySQL character set name -> Python codec (only where the names differ / matter).
_CHARSET_CODECS = {
    "utf8mb4": "utf-8",
    "utf8mb3": "utf-8",
    "utf8": "utf-8",
    "latin1": "cp1252",  # MySQL's latin1 is Windows-1252
    "ascii": "ascii",
    "binary": None,
    "ucs2": "utf-16-be",
    "utf16": "utf-16-be",
    "utf16le": "utf-16-le",
    "utf32": "utf-32-be",
    "koi8r": "koi8_r",
    "koi8u": "koi8_u",
    "cp1250": "cp1250",
    "cp1251": "cp1251",
    "cp1256": "cp1256",
    "cp1257": "cp1257",
    "cp850": "cp850",
    "cp852": "cp852",
    "cp866": "cp866",
    "latin2": "iso8859_2",
    "latin5": "iso8859_9",
    "latin7": "iso8859_13",
    "greek": "iso8859_7",
    "hebrew": "iso8859_8",
    "sjis": "shift_jis",
    "cp932": "cp932",
    "ujis": "euc_jp",
    "eucjpms": "euc_jp",
    "gbk": "gbk",
    "gb2312": "gb2312",
    "gb18030": "gb18030",
    "big5": "big5",
    "euckr": "euc_kr",
    "tis620": "tis_620",
}


def _codec_for(column: ColumnSchema) -> str:
    name = (column.charset or "").lower()
    codec = _CHARSET_CODECS.get(name)
    if codec:
        return codec
    if name:
        try:
            import codecs

            return codecs.lookup(name).name
        except LookupError:
            pass
    return "utf-8"


def _type_error(column: ColumnSchema, value: Any, what: str) -> ValueError:
    # Never include the value itself: it may be sensitive (Debezium does the same).
    return ValueError(
        f"Cannot convert a {type(value).__name__} value of column {column.name!r} "
        f"({column.column_type}) to {what}"
    )


def _micros_since_epoch(v: _dt.datetime) -> int:
    if v.tzinfo is not None:
        v = v.astimezone(_UTC).replace(tzinfo=None)
    td = v - _EPOCH_NAIVE
    return (td.days * 86_400 + td.seconds) * 1_000_000 + td.microseconds


def _timedelta_micros(td: _dt.timedelta) -> int:
    return td.days * _ONE_DAY_US + td.seconds * 1_000_000 + td.microseconds


def _fix_binlog_negative_time(us: int) -> int:
    """Undo python-mysql-replication 1.0.17's decoding of negative TIME(fsp>0) values.

    MySQL/MariaDB store a negative TIME2 as a floored integer part plus a positive fraction
    (``-00:00:01.25`` is ``-2 s + 0.75 s``). The library takes the absolute value of the integer
    part and subtracts the fraction read as a *signed* number, which yields the right whole seconds
    but the complementary fraction: ``-00:00:01.250000`` comes back as ``-00:00:01.750000``
    (only ``.5`` and whole seconds survive). Given the library's value ``-(w + (1 - f))`` seconds
    with ``0 < f < 1`` this returns ``-(w + f)``; whole seconds are returned unchanged.
    """
    a = -us
    whole, frac = divmod(a, 1_000_000)
    if not frac:
        return us
    return -(whole * 1_000_000 + (1_000_000 - frac))


def _to_float32(v: float) -> float:
    return _FLOAT32.unpack(_FLOAT32.pack(v))[0]


def _plain(d: decimal.Decimal) -> str:
    return format(d, "f")


# ---- JSON -----------------------------------------------------------------------------------


def _json_key(k: Any) -> str:
    if isinstance(k, (bytes, bytearray)):
        k = bytes(k).decode("utf-8", "replace")
    return json.dumps(str(k), ensure_ascii=False)


def _json_text(obj: Any) -> str:
    """Compact JSON text of a value decoded by python-mysql-replication's binary JSON parser."""
    if obj is None:
        return "null"
    if obj is True:
        return "true"
    if obj is False:
        return "false"
    if isinstance(obj, dict):
        return "{" + ",".join(_json_key(k) + ":" + _json_text(v) for k, v in obj.items()) + "}"
    if isinstance(obj, (list, tuple)):
        return "[" + ",".join(_json_text(v) for v in obj) + "]"
    if isinstance(obj, (bytes, bytearray)):
        return json.dumps(bytes(obj).decode("utf-8", "replace"), ensure_ascii=False)
    if isinstance(obj, str):
        return json.dumps(obj, ensure_ascii=False)
    if isinstance(obj, int):
        return str(obj)
    if isinstance(obj, float):
        return json.dumps(obj)
    if isinstance(obj, decimal.Decimal):
        # MySQL stores JSON non-integer numbers as DOUBLE; a DECIMAL only appears through
        # CAST(... AS JSON). Render through float so text and binary sources agree.
        return json.dumps(float(obj))
    if isinstance(obj, _dt.datetime):
        return json.dumps(obj.strftime("%Y-%m-%d %H:%M:%S.%f"))
    if isinstance(obj, _dt.date):
        return json.dumps(obj.isoformat())
    if isinstance(obj, _dt.time):
        return json.dumps(obj.strftime("%H:%M:%S.%f"))
    return json.dumps(str(obj), ensure_ascii=False)


def _compact_json_text_stdlib(text: str) -> str:
    try:
        parsed = json.loads(text)
    except ValueError:
        return text  # not valid JSON (MariaDB LONGTEXT without the CHECK): keep as stored
    return json.dumps(parsed, separators=(",", ":"), ensure_ascii=False)


# orjson output that may differ from ``json.dumps``: a float in exponent notation (Python writes
# ``1e+16``/``1e-05``, orjson ``1e16``), or a float below 1e-4 that orjson writes in plain notation
# (``0.00001``); integers beyond 64 bits, which orjson parses as floats, also end up in exponent
# notation. Such text (and its false positives, e.g. a string containing ``"2e5"``) takes the
# ``json`` module path.
_ORJSON_RISKY = re.compile(r"[0-9][eE]|0\.0000")


def _compact_json_text(text: str) -> str:
    """Compact JSON text (``json.dumps(json.loads(text), separators=(",", ":"),
    ensure_ascii=False)``), byte-identical to it, computed with orjson where that is provably the
    same: orjson's compact output equals ``json``'s for everything but the number renderings
    matched by :data:`_ORJSON_RISKY`, and it rejects what ``json`` renders specially (``NaN``,
    ``Infinity``, lone surrogates, nesting deeper than 255); all of those fall back to ``json``.
    Text that is not valid JSON is returned unchanged."""
    if _orjson is not None:
        try:
            out = _orjson_dumps(_orjson_loads(text)).decode()
        except (ValueError, TypeError):  # orjson.JSONDecodeError / JSONEncodeError are ValueError/TypeError
            return _compact_json_text_stdlib(text)
        if _ORJSON_RISKY.search(out) is None:
            return out
    return _compact_json_text_stdlib(text)


# --------------------------------------------------------------------------------------------
# Converter builders. Each returns (core, none_value): ``core`` converts a non-None raw value
# (``None`` core means identity), ``none_value`` is what a raw ``None`` becomes.
# --------------------------------------------------------------------------------------------

Core = Callable[[Any], Any] | None


def _build(column: ColumnSchema, options: TypeOptions, source: str, table: str | None) -> tuple[Core, Any]:
    """``(core, none_value)`` of a column: the type family's builder below for its canonical type.

    Raises:
        ValueError: ``source`` is not ``"pymysql"`` or ``"binlog"``.
        UnsupportedTypeError: the column's data type is not supported.
    """
    if source not in _SOURCES:
        raise ValueError(f"source must be one of {_SOURCES}, got {source!r}")
    t = _check_supported(column, table)
    binlog = source == "binlog"
    if t in _INT_TYPES:
        return _integer_core(column, t, options)
    if t in ("float", "double"):
        return _floating_core(column, t)
    if t == "decimal":
        return _decimal_core(column, options)
    if t in _TEXT_TYPES:
        return _text_core(column)
    if t in _BINARY_TYPES:
        return _binary_core(column, t, options)
    if t == "bit":
        return _bit_core(column)
    if t == "json":
        return _json_core(column, binlog)
    if t == "enum":
        return _enum_core(column)
    if t == "set":
        return _set_core(column)
    if t == "year":
        return _year_core(binlog)
    if t in ("date", "datetime", "timestamp", "time"):
        return _temporal_core(column, t, options, binlog)
    if t in _GEOMETRY_TYPES:
        return _geometry_core(column)
    raise UnsupportedTypeError(column, table)  # pragma: no cover


# ---- integers -------------------------------------------------------------------------------


def _integer_core(column: ColumnSchema, t: str, options: TypeOptions) -> tuple[Core, Any]:
    """TINYINT..BIGINT: Python int; BIGINT UNSIGNED per ``bigint_unsigned_handling_mode`` (``long``:
    the two's-complement wrap of Java's long, ``precise``: Decimal)."""
    if t == "bigint" and column.unsigned:
        if options.bigint_unsigned_handling_mode == "precise":
            return (lambda v: decimal.Decimal(int(v))), None

        def wrap(v: Any) -> int:
            v = int(v)
            return v - _INT64_WRAP if v > _INT64_MAX else v

        return wrap, None

    def to_int(v: Any) -> int:
        return v if v.__class__ is int else int(v)

    return to_int, None


# ---- floating point -------------------------------------------------------------------------


def _floating_core(column: ColumnSchema, t: str) -> tuple[Core, Any]:
    """FLOAT: rounded to float32 (Debezium FLOAT32); FLOAT(M,D) and DOUBLE: float (FLOAT64)."""
    if t == "float" and column.scale is None:
        return (lambda v: _to_float32(float(v))), None
    if t == "float":  # FLOAT(M,D): FLOAT64 in Debezium
        return (lambda v: v if v.__class__ is float else float(v)), None
    return (lambda v: v if v.__class__ is float else float(v)), None


# ---- decimal --------------------------------------------------------------------------------


def _decimal_core(column: ColumnSchema, options: TypeOptions) -> tuple[Core, Any]:
    """DECIMAL per ``decimal_handling_mode``: Decimal quantized half-even to the scale, float, or
    the plain string (also for precisions above :data:`MAX_DECIMAL128_PRECISION`)."""
    p, s = _decimal_ps(column)
    quantum = decimal.Decimal(1).scaleb(-s)
    mode = options.decimal_handling_mode

    def to_dec(v: Any) -> decimal.Decimal:
        if not isinstance(v, decimal.Decimal):
            if isinstance(v, float):
                v = decimal.Decimal(repr(v))
            else:
                v = decimal.Decimal(v if isinstance(v, (int, str)) else str(v))
        return v.quantize(quantum, context=_DEC_CTX)

    if mode == "double":
        return (lambda v: float(v)), None
    if mode == "string" or p > MAX_DECIMAL128_PRECISION:
        return (lambda v: _plain(to_dec(v))), None
    return to_dec, None


# ---- strings and binary ---------------------------------------------------------------------


def _text_core(column: ColumnSchema) -> tuple[Core, Any]:
    """CHAR..LONGTEXT: str (bytes decoded with the column's charset)."""
    codec = _codec_for(column)

    def to_str(v: Any) -> str:
        if v.__class__ is str:
            return v
        if isinstance(v, (bytes, bytearray, memoryview)):
            return bytes(v).decode(codec, "replace")
        raise _type_error(column, v, "string")

    return to_str, None


def _binary_core(column: ColumnSchema, t: str, options: TypeOptions) -> tuple[Core, Any]:
    """BINARY..LONGBLOB per ``binary_handling_mode`` (bytes, base64, base64-url-safe, hex);
    BINARY(n) re-padded with 0x00 to n bytes (DBZ-254)."""
    pad_to = int(column.length) if (t == "binary" and column.length) else 0

    def to_bytes(v: Any) -> bytes:
        if v.__class__ is not bytes:
            if isinstance(v, (bytearray, memoryview)):
                v = bytes(v)
            elif isinstance(v, str):
                # python-mysql-replication without binlog_row_metadata=FULL decodes every
                # string-ish column as UTF-8 (strictly), so this round-trips exactly.
                v = v.encode("utf-8")
            else:
                raise _type_error(column, v, "bytes")
        if pad_to and len(v) < pad_to:
            # DBZ-254: the binlog strips BINARY(n)'s trailing 0x00 padding; Debezium re-pads.
            v = v + b"\x00" * (pad_to - len(v))
        return v

    bin_mode = options.binary_handling_mode
    if bin_mode == "bytes":
        return to_bytes, None
    if bin_mode == "base64":
        return (lambda v: base64.b64encode(to_bytes(v)).decode("ascii")), None
    if bin_mode == "base64-url-safe":
        return (lambda v: base64.urlsafe_b64encode(to_bytes(v)).decode("ascii")), None
    return (lambda v: to_bytes(v).hex()), None


# ---- BIT ------------------------------------------------------------------------------------


def _bit_core(column: ColumnSchema) -> tuple[Core, Any]:
    """BIT(1): bool; BIT(n > 1): little-endian bytes of (n + 7) // 8 (Debezium io.debezium.data.Bits)."""
    nbits = _bit_length(column)
    nbytes = (nbits + 7) // 8

    def bit_int(v: Any) -> int:
        if isinstance(v, str):  # python-mysql-replication: '0101...' (MSB first)
            return int(v, 2) if v else 0
        if isinstance(v, (bytes, bytearray, memoryview)):  # pymysql: big-endian bytes
            return int.from_bytes(bytes(v), "big")
        if isinstance(v, (bool, int)):
            return int(v)
        raise _type_error(column, v, "BIT")

    if nbits <= 1:
        return (lambda v: bit_int(v) != 0), None
    # Debezium io.debezium.data.Bits: little-endian byte[] of n/8 (+1) bytes.
    return (lambda v: bit_int(v).to_bytes(nbytes, "little")), None


# ---- JSON -----------------------------------------------------------------------------------


def json_is_text(column: ColumnSchema) -> bool:
    """Whether a JSON column stores its documents as text: MariaDB's JSON is an alias of
    ``LONGTEXT`` (with a ``json_valid`` CHECK), so it has a character set; MySQL's binary JSON has
    none (``information_schema.COLUMNS.CHARACTER_SET_NAME`` is NULL, as in the DDL parser's
    columns)."""
    return column.charset is not None


def _json_core(column: ColumnSchema, binlog: bool) -> tuple[Core, Any]:
    """JSON (Debezium io.debezium.data.Json). Text JSON (MariaDB, :func:`json_is_text`): the
    stored text as is, as Debezium passes it through -- no re-serialisation, so numbers keep every
    digit, duplicate keys and the server's spacing stay. MySQL's binary JSON: compact JSON text
    of the decoded document (the snapshot's text is compacted the same way, so both sources
    agree). A partial JSON update (JsonDiff) raises ValueError (``binlog_row_value_options`` must
    be empty, as Debezium requires)."""
    if json_is_text(column):
        codec = _codec_for(column)

        def stored_text(v: Any) -> str:
            if v.__class__ is str:
                return v
            if isinstance(v, (bytes, bytearray, memoryview)):
                return bytes(v).decode(codec, "replace")
            raise _type_error(column, v, "JSON text")

        return stored_text, None

    def to_json(v: Any) -> str:
        if isinstance(v, str):
            return _compact_json_text(v)
        if isinstance(v, (bytes, bytearray, memoryview)):
            if binlog:
                # MySQL binary JSON: a top-level JSON *string* is returned as bytes.
                return json.dumps(bytes(v).decode("utf-8", "replace"), ensure_ascii=False)
            return _compact_json_text(bytes(v).decode("utf-8", "replace"))
        if type(v).__name__ == "JsonDiff":
            raise ValueError(
                f"Column {column.name!r} received a partial JSON update (JsonDiff); set "
                "binlog_row_value_options='' on the server (Debezium requires the same)"
            )
        return _json_text(v)

    return to_json, None


# ---- ENUM / SET -----------------------------------------------------------------------------


def _enum_core(column: ColumnSchema) -> tuple[Core, Any]:
    """ENUM: the value's string (the binlog's 1-based index resolved; 0 is the '' error value)."""
    values = column.enum_values

    def to_enum(v: Any) -> str:
        if v.__class__ is str:
            return v
        if isinstance(v, (bytes, bytearray)):
            return bytes(v).decode("utf-8", "replace")
        if isinstance(v, int) and not isinstance(v, bool):
            # The binlog stores the 1-based index; 0 is the '' error value.
            if v == 0:
                return ""
            if 1 <= v <= len(values):
                return values[v - 1]
            raise ValueError(f"ENUM index {v} out of range for column {column.name!r} ({len(values)} values)")
        raise _type_error(column, v, "ENUM string")

    return to_enum, None


def _set_core(column: ColumnSchema) -> tuple[Core, Any]:
    """SET: comma-separated members in definition order (bit mask or member set resolved); a NULL
    of a NOT NULL column is the empty set ''."""
    values = column.enum_values
    order = {val: i for i, val in enumerate(values)}
    order_ci = {val.lower(): i for i, val in enumerate(values)}

    def rank(m: str) -> tuple[int, str]:
        i = order.get(m)
        if i is None:
            i = order_ci.get(m.lower(), len(values))
        return (i, m)

    def to_set(v: Any) -> str:
        if v.__class__ is str:
            return v
        if isinstance(v, (bytes, bytearray)):
            return bytes(v).decode("utf-8", "replace")
        if isinstance(v, (set, frozenset, list, tuple)):
            members = [m.decode("utf-8", "replace") if isinstance(m, bytes) else str(m) for m in v]
            return ",".join(sorted(members, key=rank))
        if isinstance(v, int) and not isinstance(v, bool):
            return ",".join(val for i, val in enumerate(values) if v >> i & 1)
        raise _type_error(column, v, "SET string")

    # python-mysql-replication returns an empty SET as None; a NOT NULL column cannot be
    # NULL, so it is the empty set (Debezium's fallback for NOT NULL SET is "" as well).
    return to_set, (None if column.nullable else "")


# ---- temporal -------------------------------------------------------------------------------


def _year_core(binlog: bool) -> tuple[Core, Any]:
    """YEAR: int (python-mysql-replication's 1900 for YEAR 0000 mapped back to 0)."""

    def to_year(v: Any) -> int:
        if isinstance(v, _dt.date):
            return v.year
        v = int(v)
        if binlog and v == 1900:
            return 0  # python-mysql-replication adds 1900 to the stored byte; YEAR 0000 -> 1900
        return v

    return to_year, None


def _temporal_core(column: ColumnSchema, t: str, options: TypeOptions, binlog: bool) -> tuple[Core, Any]:
    """DATE, DATETIME, TIMESTAMP, TIME (Debezium "Temporal types", per ``time_precision_mode``)."""
    connect = options.time_precision_mode == "connect"
    adjust = options.enable_time_adjuster
    if t == "date":
        return _date_core(column, adjust)
    if t == "datetime":
        return _datetime_core(column, connect, adjust)
    if t == "timestamp":
        return _timestamp_core(column, binlog)
    return _time_core(column, connect, binlog)


def _two_digit_year(v: Any) -> Any:
    """Debezium's time adjuster (``enable.time.adjuster``, ``adjustTemporal``): a date or datetime
    whose year is below 100 gets 2000 added to years 0-69 and 1900 to years 70-99 (the same day
    and time: ``+2000`` and ``+1900`` years keep leap years as they are). Other values unchanged."""
    y = v.year
    if y >= 100:
        return v
    return v.replace(year=y + (2000 if y < 70 else 1900))


#: The first date the time adjuster leaves alone (0100-01-01), in days and microseconds since 1970.
_ADJUST_BELOW_DAYS = _dt.date(100, 1, 1).toordinal() - _EPOCH_ORDINAL
_ADJUST_BELOW_US = _ADJUST_BELOW_DAYS * _ONE_DAY_US


def _date_core(column: ColumnSchema, adjust: bool = False) -> tuple[Core, Any]:
    """DATE: days since the epoch (io.debezium.time.Date); zero/invalid dates are NULL, or 0 in a
    NOT NULL column; ``adjust``: years below 100 read as two-digit years (:func:`_two_digit_year`)."""
    zero = None if column.nullable else 0

    def to_days(v: Any) -> int | None:
        if isinstance(v, _dt.datetime):
            v = v.date()
        if isinstance(v, _dt.date):
            if adjust:
                v = _two_digit_year(v)
            return v.toordinal() - _EPOCH_ORDINAL
        if isinstance(v, (str, bytes)):
            return zero  # pymysql: '0000-00-00' or another invalid date
        raise _type_error(column, v, "DATE")

    return to_days, zero


def _datetime_core(column: ColumnSchema, connect: bool, adjust: bool = False) -> tuple[Core, Any]:
    """DATETIME: epoch milliseconds (fsp <= 3 or ``connect``; io.debezium.time.Timestamp) or
    microseconds (MicroTimestamp) of the wall-clock time read as UTC; zero dates as for DATE;
    ``adjust``: years below 100 read as two-digit years (:func:`_two_digit_year`)."""
    millis = connect or _fsp(column) <= 3
    zero = None if column.nullable else 0

    def to_epoch(v: Any) -> int | None:
        if isinstance(v, _dt.datetime):
            if adjust:
                v = _two_digit_year(v)
            us = _micros_since_epoch(v)
            return us // 1000 if millis else us
        if isinstance(v, _dt.date):
            if adjust:
                v = _two_digit_year(v)
            us = (v.toordinal() - _EPOCH_ORDINAL) * _ONE_DAY_US
            return us // 1000 if millis else us
        if isinstance(v, (str, bytes)):
            return zero  # pymysql: '0000-00-00 00:00:00' or another invalid datetime
        raise _type_error(column, v, "DATETIME")

    return to_epoch, zero


def _timestamp_core(column: ColumnSchema, binlog: bool) -> tuple[Core, Any]:
    """TIMESTAMP: ISO-8601 UTC text with the column's fsp digits (io.debezium.time.ZonedTimestamp);
    the zero TIMESTAMP is NULL, or the epoch with the column's fsp digits in a NOT NULL column
    (``1970-01-01T00:00:00Z``, ``1970-01-01T00:00:00.00Z`` for TIMESTAMP(2), as Debezium)."""
    fsp = _fsp(column)
    epoch_iso = "1970-01-01T00:00:00" + ("." + "0" * fsp if fsp else "") + "Z"
    zero_iso = None if column.nullable else epoch_iso

    def to_iso(v: Any) -> str | None:
        if isinstance(v, (str, bytes)):
            return zero_iso  # pymysql: '0000-00-00 00:00:00'
        if not isinstance(v, _dt.datetime):
            raise _type_error(column, v, "TIMESTAMP")
        if v.tzinfo is not None:
            v = v.astimezone(_UTC).replace(tzinfo=None)
        if binlog and v == _EPOCH_NAIVE:
            # The zero TIMESTAMP is stored as 0 seconds; the smallest real TIMESTAMP is
            # 1970-01-01 00:00:01 UTC, so epoch 0 is unambiguous.
            return zero_iso
        base = f"{v.year:04d}-{v.month:02d}-{v.day:02d}T{v.hour:02d}:{v.minute:02d}:{v.second:02d}"
        if fsp:
            return f"{base}.{v.microsecond:06d}"[: len(base) + 1 + fsp] + "Z"
        if v.microsecond:
            return f"{base}.{v.microsecond:06d}".rstrip("0") + "Z"
        return base + "Z"

    return to_iso, zero_iso


def _time_core(column: ColumnSchema, connect: bool, binlog: bool) -> tuple[Core, Any]:
    """TIME: microseconds (io.debezium.time.MicroTime), or with ``connect`` milliseconds of a
    time of day (Kafka Connect Time; values outside 00:00-24:00 raise ValueError)."""
    fix_negative_fraction = binlog and _fsp(column) > 0

    def td_micros(td: _dt.timedelta) -> int:
        us = _timedelta_micros(td)
        if fix_negative_fraction and us < 0:
            return _fix_binlog_negative_time(us)
        return us

    if not connect:

        def to_micros(v: Any) -> int:
            if isinstance(v, _dt.timedelta):
                return td_micros(v)
            if isinstance(v, _dt.time):
                return ((v.hour * 60 + v.minute) * 60 + v.second) * 1_000_000 + v.microsecond
            raise _type_error(column, v, "TIME")

        return to_micros, None

    def to_millis(v: Any) -> int:
        if isinstance(v, _dt.time):
            us = ((v.hour * 60 + v.minute) * 60 + v.second) * 1_000_000 + v.microsecond
        elif isinstance(v, _dt.timedelta):
            us = td_micros(v)
        else:
            raise _type_error(column, v, "TIME")
        if not 0 <= us < _ONE_DAY_US:
            raise ValueError(
                f"TIME value of column {column.name!r} is outside 00:00:00-23:59:59.999, which "
                "time_precision_mode='connect' (Kafka Connect Time) cannot represent; use "
                "time_precision_mode='adaptive_time_microseconds'"
            )
        return us // 1000

    return to_millis, None


# ---- spatial --------------------------------------------------------------------------------


def _geometry_core(column: ColumnSchema) -> tuple[Core, Any]:
    """GEOMETRY and subtypes: ``{"wkb": bytes, "srid": int | None}``
    (io.debezium.data.geometry.Geometry) from MySQL's internal format (4-byte little-endian SRID +
    WKB). SRID 0 (no spatial reference system given) is ``None``, as in Debezium
    (BinlogGeometryIT: ``ST_GeomFromText('POLYGON(...)')`` has ``srid`` null)."""

    def to_geometry(v: Any) -> dict[str, Any]:
        if not isinstance(v, (bytes, bytearray, memoryview)):
            raise _type_error(column, v, "Geometry")
        v = bytes(v)
        if len(v) < 4:
            raise ValueError(f"Geometry value of column {column.name!r} is shorter than its SRID prefix")
        # MySQL internal geometry format: 4-byte little-endian SRID followed by the WKB.
        srid = int.from_bytes(v[:4], "little")
        return {"wkb": v[4:], "srid": srid or None}

    return to_geometry, None


# --------------------------------------------------------------------------------------------
# Public converter API
# --------------------------------------------------------------------------------------------


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


def binlog_value_as_parameter(column: ColumnSchema, raw: Any) -> Any:
    """A python-mysql-replication row-image value as a query parameter equal to the stored value
    (``WHERE (key columns) IN (...)`` of the rows a window changed): the library turns a zero
    DATE/DATETIME into ``None`` and a zero TIMESTAMP into 1970-01-01 00:00:00 (neither matches the
    stored zero), returns BIT(n) as ``'0101'`` text, BINARY(n) without its trailing 0x00 padding
    and SET as a Python set; those are given back in the server's terms. Other values as they are.
    """
    t = _canonical(column)
    if raw is None:
        if t == "date" and not column.nullable:
            return "0000-00-00"
        if t in ("datetime", "timestamp") and not column.nullable:
            return "0000-00-00 00:00:00"
        return None
    if t == "timestamp" and raw == _EPOCH_NAIVE:
        return "0000-00-00 00:00:00"
    if t == "bit" and isinstance(raw, str):
        return int(raw, 2) if raw else 0
    if t == "binary" and isinstance(raw, (bytes, bytearray)) and column.length and len(raw) < column.length:
        return bytes(raw) + b"\x00" * (int(column.length) - len(raw))
    if t == "set" and isinstance(raw, (set, frozenset)):
        return ",".join(m.decode() if isinstance(m, bytes) else str(m) for m in raw)
    return raw


def quote_identifier(name: str) -> str:
    """Back-quote a MySQL identifier (a back-quote inside the name is doubled)."""
    return "`" + name.replace("`", "``") + "`"


def select_expression(column: ColumnSchema) -> str:
    """The snapshot ``SELECT`` expression that makes pymysql deliver what the binlog delivers.

    The text protocol renders ``FLOAT`` with only 6 significant digits (MariaDB returns
    ``16777217`` stored as float32 ``16777216`` as ``"16777200"``), while the binlog carries the
    exact float32. ``(col + 0e0)`` makes the server send the exact value as DOUBLE (works on every
    MySQL/MariaDB version, unlike ``CAST(... AS DOUBLE)``); every other column is selected as is.

    Returns:
        e.g. ``"`price`"`` or ``"(`ratio` + 0e0) AS `ratio`"``.
    """
    q = quote_identifier(column.name)
    if _canonical(column) == "float":
        return f"({q} + 0e0) AS {q}"
    return q


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
          corrected (see :func:`_fix_binlog_negative_time`);
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
    core, none_value = _build(column, options, source, table)
    if core is None:
        return _identity
    if none_value is None:
        return lambda v: None if v is None else core(v)
    return lambda v: none_value if v is None else core(v)


# --------------------------------------------------------------------------------------------
# Column-wise conversion to Arrow
# --------------------------------------------------------------------------------------------

#: ``f(raw values of one column) -> pa.Array`` of the column's :func:`arrow_field` type.
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
    """The two ways :func:`_array_converter` converts one column's raw values to Arrow.

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


_FastPath = Callable[[Sequence[Any]], pa.Array | None]


def _array_converter(
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
    t = _canonical(column)
    paths = _ArrayPaths(core, none_value, typ, _TEXT_DECODERS.get(t) if text else None)
    fast = (
        _fast_numeric(paths, column, t, options, typ)
        or _fast_string_binary(paths, column, t, options)
        or _fast_temporal(paths, column, t, options, source == "binlog", none_value)
        or _fast_json(column, t)
    )
    return paths.generic if fast is None else paths.attempt(fast)


def _fast_numeric(
    paths: _ArrayPaths, column: ColumnSchema, t: str, options: TypeOptions, typ: pa.DataType
) -> _FastPath | None:
    """Integers, BIGINT UNSIGNED (both handling modes), DOUBLE / FLOAT(M,D), DECIMAL (decimal128/256
    target): ``pa.array`` with the target type, plus a cast or a bit-for-bit view."""
    parsed = paths.parsed
    if t in _INT_TYPES and not (t == "bigint" and column.unsigned):
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
) -> _FastPath | None:
    """Text, ENUM and SET columns whose values are all ``str``; binary columns in ``bytes`` mode
    whose values are all ``bytes`` (BINARY(n) values without their padding go per value)."""
    fill = paths.fill
    if t in _TEXT_TYPES or t == "enum" or t == "set":

        def strings(vs: Sequence[Any]) -> pa.Array | None:
            arr = pa.array(vs, from_pandas=False)  # inferred: only all-str (or all-None) is used
            if arr.type == pa.string():
                return fill(arr)
            if arr.type == pa.null():
                return fill(arr.cast(pa.string()))
            return None

        return strings
    if t in _BINARY_TYPES and options.binary_handling_mode == "bytes":
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
) -> _FastPath | None:
    """DATE (date32 days), DATETIME (timestamp -> epoch ms/us), TIMESTAMP (timestamp -> ISO text)."""
    parsed, fill = paths.parsed, paths.fill
    adjust = options.enable_time_adjuster
    if t == "date":

        def days(vs: Sequence[Any]) -> pa.Array | None:
            # date32 takes date and datetime (the date part, as core's v.date()); strings raise
            d = parsed(vs, pa.date32()).cast(pa.int32())
            if adjust and _any_below(d, _ADJUST_BELOW_DAYS):
                return None  # years below 100: the time adjuster, per value
            return fill(d)

        return days
    if t == "datetime":
        millis = options.time_precision_mode == "connect" or _fsp(column) <= 3

        def epoch(vs: Sequence[Any]) -> pa.Array | None:
            # naive datetimes are taken as wall-clock UTC, aware ones converted to UTC (as core);
            # date objects and (without text) strings raise
            us = parsed(vs, pa.timestamp("us")).cast(pa.int64())
            if adjust and _any_below(us, _ADJUST_BELOW_US):
                return None  # years below 100: the time adjuster, per value
            return fill(_floor_div(us, 1000) if millis else us)

        return epoch
    if t == "timestamp":
        return _fast_timestamp(paths, _fsp(column), binlog, none_value)
    return None


def _any_below(arr: pa.Array, bound: int) -> bool:
    """Whether a (nullable) integer array holds a value below ``bound``."""
    if arr.null_count == len(arr):
        return False
    return bool(pc.min(arr).as_py() < bound)


def _fast_timestamp(paths: _ArrayPaths, fsp: int, binlog: bool, none_value: Any) -> _FastPath:
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


def _fast_json(column: ColumnSchema, t: str) -> _FastPath | None:
    """Text JSON (MariaDB): the strings as they are. MySQL JSON text values re-serialised by
    orjson (when installed); values orjson renders differently from the json module (see
    :data:`_ORJSON_RISKY`) are redone by the json module."""
    if t != "json":
        return None
    if json_is_text(column):

        def stored(vs: Sequence[Any]) -> pa.Array | None:
            arr = pa.array(vs, from_pandas=False)  # inferred: only all-str (or all-None) is used
            if arr.type == pa.string():
                return arr
            return arr.cast(pa.string()) if arr.type == pa.null() else None

        return stored
    if _orjson is None:
        return None
    loads, dumps = _orjson_loads, _orjson_dumps

    def json_texts(vs: Sequence[Any]) -> pa.Array | None:
        kind = pa.array(vs, from_pandas=False).type
        if kind != pa.string():  # bytes/objects of MySQL binary JSON, or all NULL
            return None
        # orjson.loads/dumps raise (-> per value, json module) on what json renders
        # differently: NaN/Infinity, lone surrogates, deep nesting
        # (decoded at once: keeping orjson's bytes objects alive is twice as slow)
        out = pa.array([None if v is None else dumps(loads(v)).decode() for v in vs], pa.string())
        risky = pc.match_substring_regex(out, _ORJSON_RISKY.pattern)
        if pc.any(risky).as_py():
            texts = out.to_pylist()
            for i in pc.indices_nonzero(risky).to_pylist():
                texts[i] = _compact_json_text_stdlib(vs[i])
            out = pa.array(texts, pa.string())
        return out

    return json_texts


# pymysql field types the snapshot reads as text (see snapshot_decoders), and the decoder pymysql
# would have applied, per canonical column type (the SELECT of select_expression turns FLOAT into
# DOUBLE).
_TEXT_FIELD_TYPES = frozenset(
    {
        FIELD_TYPE.TINY,
        FIELD_TYPE.SHORT,
        FIELD_TYPE.INT24,
        FIELD_TYPE.LONG,
        FIELD_TYPE.LONGLONG,
        FIELD_TYPE.DOUBLE,
        FIELD_TYPE.DECIMAL,
        FIELD_TYPE.NEWDECIMAL,
        FIELD_TYPE.DATE,
        FIELD_TYPE.DATETIME,
        FIELD_TYPE.TIMESTAMP,
    }
)
_TEXT_DECODERS: dict[str, Callable[[str], Any]] = {
    **{t: int for t in _INT_TYPES},
    "float": float,
    "double": float,
    "decimal": decimal.Decimal,
    "date": _pymysql_conv.convert_date,
    "datetime": _pymysql_conv.convert_datetime,
    "timestamp": _pymysql_conv.convert_datetime,
}


def snapshot_decoders(decoders: Mapping[int, Any]) -> dict[int, Any]:
    """pymysql ``Connection.decoders`` for a snapshot ``SELECT`` read by
    ``TableConverter.to_record_batch(rows, text_values=True)``.

    ``decoders`` (the connection's own) without the decoders of the integer, DOUBLE, DECIMAL,
    DATE, DATETIME and TIMESTAMP field types: their values then arrive as the server's text
    (``str``) and are parsed column-wise by Arrow instead of one Python call per value. Every
    other field type keeps its decoder.
    """
    return {k: v for k, v in decoders.items() if k not in _TEXT_FIELD_TYPES}


_MISSING = object()


class _LoweredRow:
    """A row image keyed by lower-case column names, built on first use."""

    __slots__ = ("row", "_d")

    def __init__(self, row: Mapping[str, Any]):
        self.row = row
        self._d: dict[str, Any] | None = None

    def get(self, lname: str) -> Any:
        if self._d is None:
            self._d = {str(k).lower(): v for k, v in self.row.items()}
        return self._d.get(lname, _MISSING)


def _raw_image_value(
    row: Mapping[str, Any],
    name: str,
    lname: str,
    none_sources: Mapping[str, str] | None,
    lowered: _LoweredRow,
) -> Any:
    """The raw value of column ``name`` in a python-mysql-replication row image, or ``_MISSING``
    when the image has no value for it (absent, or ``None`` because the column is not in the
    event's column bitmap / unchanged in a MINIMAL image). A ``None`` that the library reports as
    "empty set" is the empty SET value ``""``. Names match exactly, then case-insensitively."""
    v = row.get(name, _MISSING)
    if v is _MISSING:
        v = lowered.get(lname)
        if v is _MISSING:
            return _MISSING
    if v is None and none_sources:
        reason = none_sources.get(name)
        if reason == "empty set":
            return ""
        if reason in ("cols bitmap", "same with before values"):
            return _MISSING
    return v


def _masked_value(conv: Callable[[Any], Any], mask: Callable | None) -> Callable[[Any], Any]:
    """``conv`` followed by a column mask (:mod:`.columns`)."""
    if mask is None:
        return conv
    return lambda v: mask(conv(v))


def _masked_array(conv: ArrayConverter, mask: Callable | None) -> ArrayConverter:
    """An array converter followed by a column mask, value by value (character columns only)."""
    if mask is None:
        return conv

    def convert(values: Sequence[Any]) -> pa.Array:
        arr = conv(values)
        return pa.array([mask(v) for v in arr.to_pylist()], type=arr.type)

    return convert


class TableConverter:
    """Pre-built per-table converters (no per-row type lookup).

    Only the table's *captured* columns are converted (``options.columns``, Debezium
    ``column.include.list``/``column.exclude.list``) and their values leave every method masked
    or truncated as ``options.columns`` says (Debezium ``column.mask.*``/``column.truncate.*``), so
    every reader (snapshot, incremental snapshot, binlog, checks) sees the same captured values.

    Args:
        table: the table schema (columns are used in ordinal order), full or already captured
            (filtering is idempotent).
        options: the type options.
        source: ``"pymysql"`` or ``"binlog"`` (see :func:`value_converter`).

    Attributes:
        table: the captured table schema (``source_table`` without the excluded columns).
        source_table: the schema the converter was built from.
        columns: the captured columns in ordinal order: raw rows handed to the converter hold
            these columns only, in this order (select them with :func:`select_expression`).
        names: their names.
        masked: names of the columns whose values are masked or truncated.
        arrow_schema: :func:`arrow_schema` of the captured table.

    Raises:
        UnsupportedTypeError: a column type is not supported (names table, column, type and fix).
        ConfigurationError: the column policy leaves out a primary-key column or cannot mask a
            column (see :class:`.columns.ColumnPolicy`).
    """

    def __init__(self, table: TableSchema, options: TypeOptions, source: Literal["pymysql", "binlog"]):
        self.source_table = table
        table = options.columns.captured(table)
        self.table = table
        self.options = options
        self.source = source
        self.columns: tuple[ColumnSchema, ...] = tuple(_ordered_columns(table))
        self.names: tuple[str, ...] = tuple(c.name for c in self.columns)
        qn = table.qualified_name
        self.arrow_schema: pa.Schema = arrow_schema(table, options)
        built = [_build(c, options, source, qn) for c in self.columns]
        masks = tuple(options.columns.mask_for(table, c) for c in self.columns)
        self.masked: tuple[str, ...] = tuple(n for n, m in zip(self.names, masks) if m is not None)
        self._masks = masks
        self._cores: tuple[Core, ...] = tuple(b[0] for b in built)
        self._none_values: tuple[Any, ...] = tuple(b[1] for b in built)
        self._converters: tuple[Callable[[Any], Any], ...] = tuple(
            _masked_value(value_converter(c, options, source, table=qn), m)
            for c, m in zip(self.columns, masks)
        )
        self._lower_names = tuple(n.lower() for n in self.names)
        self._array_converters: tuple[ArrayConverter, ...] = tuple(
            _masked_array(_array_converter(c, options, source, core, nv, f.type), m)
            for c, (core, nv), f, m in zip(self.columns, built, self.arrow_schema, masks)
        )
        self._text_array_converters: tuple[ArrayConverter, ...] = (
            tuple(
                _masked_array(_array_converter(c, options, source, core, nv, f.type, text=True), m)
                for c, (core, nv), f, m in zip(self.columns, built, self.arrow_schema, masks)
            )
            if source == "pymysql"
            else self._array_converters
        )

    def __repr__(self) -> str:
        return f"TableConverter({self.table.qualified_name}, source={self.source!r})"

    def convert_row(self, values: Sequence[Any]) -> tuple:
        """Convert one raw row given in column (ordinal) order.

        Raises:
            ValueError: ``values`` does not have one value per column, or a value cannot be
                converted.
        """
        if len(values) != len(self._converters):
            raise ValueError(
                f"Row of {self.table.qualified_name} has {len(values)} values, expected "
                f"{len(self._converters)} ({', '.join(self.names)})"
            )
        return tuple(conv(v) for conv, v in zip(self._converters, values))

    def convert_value(self, index: int, value: Any) -> Any:
        """Convert (and mask) one raw value of the ``index``-th captured column.

        Raises:
            ValueError: the value cannot be converted.
        """
        return self._converters[index](value)

    def convert_row_dict(
        self, row: Mapping[str, Any], none_sources: Mapping[str, str] | None = None
    ) -> tuple:
        """Convert one raw row keyed by column name (python-mysql-replication row images).

        Args:
            row: ``{column name: raw value}``, e.g. ``event.rows[i]["values"]``.
            none_sources: optional python-mysql-replication ``none_sources`` of the same image
                (``event.rows[i]["none_sources"]``), which says *why* a value is ``None``. When
                given, ``"empty set"`` is converted as the empty SET ``""`` (the library returns
                an empty SET as ``None``, indistinguishable from NULL in a nullable column), and
                ``"cols bitmap"`` (column absent from a MINIMAL image) / ``"same with before
                values"`` (partial JSON) become ``None`` without conversion.

        Returns:
            The converted values in column (ordinal) order. A column missing from ``row``
            (e.g. ``binlog_row_image=MINIMAL``) becomes ``None`` without conversion, so a NOT NULL
            temporal column is *not* turned into its epoch fallback. Names are matched exactly,
            then case-insensitively.
        """
        lowered = _LoweredRow(row)
        out = []
        for name, lname, conv in zip(self.names, self._lower_names, self._converters):
            v = _raw_image_value(row, name, lname, none_sources, lowered)
            out.append(None if v is _MISSING else conv(v))
        return tuple(out)

    def key_function(self, key_columns: Sequence[str]) -> Callable[..., tuple]:
        """``f(row, none_sources=None) -> tuple``: the converted values of ``key_columns`` of one
        python-mysql-replication row image, exactly as :meth:`convert_row_dict` converts them.

        Raises:
            ValueError: a key column is not a column of the table (at build time).
        """
        specs = []
        for k in key_columns:
            try:
                i = self._lower_names.index(k.lower())
            except ValueError:
                raise ValueError(f"Key column {k!r} is not a column of {self.table.qualified_name}") from None
            specs.append((self.names[i], self._lower_names[i], self._converters[i]))

        def key(row: Mapping[str, Any], none_sources: Mapping[str, str] | None = None) -> tuple:
            lowered = _LoweredRow(row)
            out = []
            for name, lname, conv in specs:
                v = _raw_image_value(row, name, lname, none_sources, lowered)
                out.append(None if v is _MISSING else conv(v))
            return tuple(out)

        return key

    def primary_key_function(self) -> Callable[..., tuple]:
        """:meth:`key_function` of the table's primary key (built once per converter)."""
        f = self.__dict__.get("_pk_function")
        if f is None:
            f = self._pk_function = self.key_function(self.table.primary_key)
        return f

    def primary_keys_unchanged(
        self, before: Sequence[Mapping[str, Any]], after: Sequence[Mapping[str, Any]]
    ) -> bool:
        """Whether each pair of python-mysql-replication row images (an update's before/after)
        has the same raw, non-NULL value in every primary-key column, so the converted keys are
        equal too. A cheap check without conversion; ``False`` also when it cannot tell (a key
        column missing from an image, a NULL, no primary key).
        """
        pk = self.table.primary_key
        if not pk:
            return False
        try:
            get = operator.itemgetter(*pk)
            b, a = list(map(get, before)), list(map(get, after))
        except (KeyError, TypeError):
            return False
        if b != a:
            return False
        if len(pk) == 1:
            return None not in b
        return not any(None in k for k in b)

    def convert_columns(self, rows: Sequence[Sequence[Any]]) -> list[list[Any]]:
        """Convert raw rows (column order) column-wise: one list of Debezium values per column."""
        n = len(self._cores)
        for r in rows:
            if len(r) != n:
                raise ValueError(f"Row of {self.table.qualified_name} has {len(r)} values, expected {n}")
        cols: list[list[Any]] = []
        for i, (core, nv) in enumerate(zip(self._cores, self._none_values)):
            raw = [r[i] for r in rows]
            if core is None:
                col = raw
            else:
                col = [nv if v is None else core(v) for v in raw]
            mask = self._masks[i]
            cols.append(col if mask is None else [mask(v) for v in col])
        return cols

    def column_arrays(self, columns: Sequence[Sequence[Any]], *, text_values: bool = False) -> list[pa.Array]:
        """Convert raw values given per column (ordinal order) into Arrow arrays.

        Args:
            columns: one sequence of raw values (``None`` = NULL) per column, all of one length.
            text_values: (``source="pymysql"`` only) the rows were read with
                :func:`snapshot_decoders`, so integer/DOUBLE/DECIMAL/DATE/DATETIME/TIMESTAMP values
                are the server's text (``str``); the result is the same as for rows read with
                pymysql's default decoders.

        Returns:
            One array per column with the column's :func:`arrow_field` type, holding exactly
            what :func:`value_converter` gives per value. The common types (integers, DOUBLE,
            DECIMAL (p <= 38), text, ENUM, SET strings, bytes, DATE, DATETIME, TIMESTAMP, JSON
            text) are converted by Arrow (JSON: orjson) for the whole column; a column whose raw
            values are not of the expected Python type (zero dates, etc.) and every other type
            use the per-value converter.

        Raises:
            ValueError: the number of sequences differs from the number of columns, or a value
                cannot be converted.
        """
        if len(columns) != len(self._array_converters):
            raise ValueError(
                f"{len(columns)} columns of values for {self.table.qualified_name}, expected "
                f"{len(self._array_converters)} ({', '.join(self.names)})"
            )
        convs = self._text_array_converters if text_values else self._array_converters
        return [conv(values) for conv, values in zip(convs, columns)]

    def unconvertible_rows(
        self, rows: Sequence[Sequence[Any]], *, text_values: bool = False
    ) -> dict[int, tuple[str, str]]:
        """Rows holding a value the conversion rejects: ``{row index: (column, error)}`` (the
        first rejected column of each row; the error's text, which may quote the value, is left
        out for masked columns). ``rows`` and ``text_values`` as for :meth:`to_record_batch`.
        Empty when every value converts."""
        convs = self._text_array_converters if text_values else self._array_converters
        masked = set(self.masked)
        bad: dict[int, tuple[str, str]] = {}
        for i, row in enumerate(rows):
            for name, conv, v in zip(self.names, convs, row):
                if v is None:
                    continue
                try:
                    conv([v])
                except (ValueError, TypeError, OverflowError, ArithmeticError, pa.ArrowException) as e:
                    bad[i] = (name, type(e).__name__ if name in masked else f"{type(e).__name__}: {e}")
                    break
        return bad

    def to_record_batch(self, rows: Sequence[Sequence[Any]], *, text_values: bool = False) -> pa.RecordBatch:
        """Convert raw rows given in column order into a record batch with :attr:`arrow_schema`.

        Built column-wise with :meth:`column_arrays` (rows are transposed once);
        ``text_values``: see there.

        Raises:
            ValueError: a row has the wrong number of values or a value cannot be converted.
        """
        n = len(self._cores)
        if rows and set(map(len, rows)) != {n}:
            bad = next(len(r) for r in rows if len(r) != n)
            raise ValueError(f"Row of {self.table.qualified_name} has {bad} values, expected {n}")
        cols = list(zip(*rows)) if rows else [()] * n
        return pa.RecordBatch.from_arrays(
            self.column_arrays(cols, text_values=text_values), schema=self.arrow_schema
        )
