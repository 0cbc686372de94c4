"""Type families: the canonical name of a column's MySQL/MariaDB data type, the families the
schema mapping and the converters dispatch on, the column facts they read (fractional-seconds
precision, DECIMAL precision/scale, BIT length), and the contract of a family's value converter
(:data:`Core`, :func:`conversion_error`)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import pyarrow as pa

from ..schema import ColumnSchema
from .options import UnsupportedTypeError

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

#: The canonical type names of each family the mapping and the converters dispatch on.
INT_TYPES = frozenset({"tinyint", "smallint", "mediumint", "int", "bigint"})
TEXT_TYPES = frozenset({"char", "varchar", "tinytext", "text", "mediumtext", "longtext"})
BINARY_TYPES = frozenset({"binary", "varbinary", "tinyblob", "blob", "mediumblob", "longblob"})
GEOMETRY_TYPES = frozenset(
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
SUPPORTED_DATA_TYPES: frozenset[str] = INT_TYPES | TEXT_TYPES | BINARY_TYPES | GEOMETRY_TYPES | _OTHER_TYPES

#: Largest precision Arrow decimal128 / Spark DecimalType can hold.
MAX_DECIMAL128_PRECISION = 38


def canonical_type(column: ColumnSchema) -> str:
    """The canonical lower-case name of the column's data type: an alias (``integer``, ``bool``,
    ``numeric``, ``nvarchar``, ...) becomes the name ``information_schema`` uses (``int``,
    ``tinyint``, ``decimal``, ``varchar``, ...); any other name is returned lower-cased."""
    t = column.data_type.strip().lower()
    return _ALIASES.get(t, t)


def supported_type(column: ColumnSchema, table: str | None) -> str:
    """:func:`canonical_type` of a column whose type this connector represents.

    Raises:
        UnsupportedTypeError: the type is not in :data:`SUPPORTED_DATA_TYPES` (``table``, a
            ``database.table`` or ``None``, only names the column in the message).
    """
    t = canonical_type(column)
    if t not in SUPPORTED_DATA_TYPES:
        raise UnsupportedTypeError(column, table)
    return t


def column_fsp(column: ColumnSchema) -> int:
    """Fractional-seconds precision (0-6) of a DATETIME/TIMESTAMP/TIME column."""
    p = column.precision or 0
    return max(0, min(6, int(p)))


def decimal_precision_scale(column: ColumnSchema) -> tuple[int, int]:
    """``(precision, scale)`` of a DECIMAL column; MySQL's default for a bare DECIMAL is
    DECIMAL(10,0)."""
    p = column.precision if column.precision is not None else 10
    s = column.scale if column.scale is not None else 0
    return int(p), int(s)


def bit_length(column: ColumnSchema) -> int:
    """The ``n`` of a BIT(n) column, in bits (1 for a bare BIT)."""
    return int(column.length) if column.length else 1


def conversion_error(column: ColumnSchema, value: Any, what: str) -> ValueError:
    """The ValueError a converter raises for a raw value of an unexpected Python type: it names
    the value's type, the column and its type and the target (``what``), never the value itself,
    which may be sensitive (Debezium does the same)."""
    return ValueError(
        f"Cannot convert a {type(value).__name__} value of column {column.name!r} "
        f"({column.column_type}) to {what}"
    )


#: A family's value converter: ``core(raw) -> Debezium value`` of a non-None raw value (``None``
#: means identity). The builders (``integer_core``, ``temporal_core``, ...) return
#: ``(core, none_value)``, ``none_value`` being what a raw ``None`` becomes.
Core = Callable[[Any], Any] | None

#: A vectorised conversion of a whole column: ``fast(raw values) -> pa.Array``, or ``None`` (or a
#: raised error) when the values are not of the shape it expects, which sends the column through
#: the per-value converter.
FastPath = Callable[[Sequence[Any]], pa.Array | None]
