"""How the source is queried so that its values are the binlog's: the snapshot ``SELECT``
expression, identifier quoting, the snapshot's text decoders, and binlog values as query
parameters."""

from __future__ import annotations

import decimal
from collections.abc import Callable, Mapping
from typing import Any

import pymysql.converters as _pymysql_conv
from pymysql.constants import FIELD_TYPE

from ..schema import ColumnSchema
from .families import INT_TYPES, canonical_type
from .temporal import EPOCH_NAIVE


def binlog_value_as_parameter(column: ColumnSchema, raw: Any) -> Any:
    """A python-mysql-replication row-image value as a query parameter equal to the stored value
    (``WHERE (key columns) IN (...)`` of the rows a window changed): the library turns a zero
    DATE/DATETIME into ``None`` and a zero TIMESTAMP into 1970-01-01 00:00:00 (neither matches the
    stored zero), returns BIT(n) as ``'0101'`` text, BINARY(n) without its trailing 0x00 padding
    and SET as a Python set; those are given back in the server's terms. Other values as they are.
    """
    t = canonical_type(column)
    if raw is None:
        if t == "date" and not column.nullable:
            return "0000-00-00"
        if t in ("datetime", "timestamp") and not column.nullable:
            return "0000-00-00 00:00:00"
        return None
    if t == "timestamp" and raw == EPOCH_NAIVE:
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
    if canonical_type(column) == "float":
        return f"({q} + 0e0) AS {q}"
    return q


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
#: pymysql's decoder of the text the snapshot reads (:func:`snapshot_decoders`), per canonical type.
SNAPSHOT_TEXT_DECODERS: dict[str, Callable[[str], Any]] = {
    **{t: int for t in INT_TYPES},
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
