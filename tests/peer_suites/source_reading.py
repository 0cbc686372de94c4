"""An independent reading of the source: what a table's rows must be in the lake, as Debezium
values, computed from the server's own rendering of each value (``CAST(... AS CHAR)``, ``HEX``,
``ST_AsBinary``, ...) and the Debezium MySQL connector's documented mapping, without the
project's converters, pymysql's decoders or python-mysql-replication.

Rules (Debezium MySQL connector, "Data type mappings", with the project's documented choices):
integers as is (BIGINT UNSIGNED as an exact number); FLOAT the stored float32, DOUBLE the stored
double; DECIMAL the exact number (a plain-notation string above 38 digits); text as the server
returns it in utf8mb4; binary as its bytes (BINARY(n) padded); BIT(1) a boolean, BIT(n) the value's
little-endian bytes; JSON the stored text (MariaDB); ENUM/SET their text; YEAR the number; DATE
days and DATETIME epoch ms (fsp <= 3) or us since 1970-01-01 (wall clock as UTC), a date with a
zero year, month or day is null (0 in a NOT NULL column), years below 100 read as two-digit years
(``enable.time.adjuster``); TIMESTAMP ISO-8601 UTC with fsp digits (zero: null, or the epoch in a
NOT NULL column); TIME signed microseconds; spatial ``{"wkb", "srid"}`` (SRID 0 null).
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

import pymysql


@dataclass(frozen=True)
class SourceColumn:
    name: str
    data_type: str
    column_type: str
    nullable: bool
    precision: int | None
    scale: int | None
    fsp: int
    json: bool


def q(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def source_columns(conn: pymysql.connections.Connection, db: str, table: str) -> list[SourceColumn]:
    """The table's columns as ``information_schema`` describes them (MariaDB JSON: LONGTEXT with
    a ``json_valid`` CHECK)."""
    with conn.cursor() as cur:
        cur.execute(
            "SELECT CHECK_CLAUSE FROM information_schema.CHECK_CONSTRAINTS WHERE CONSTRAINT_SCHEMA=%s AND TABLE_NAME=%s",
            (db, table),
        )
        checks = [str(r[0]).strip().lower() for r in cur.fetchall()]
        cur.execute(
            "SELECT COLUMN_NAME, DATA_TYPE, COLUMN_TYPE, IS_NULLABLE, NUMERIC_PRECISION, NUMERIC_SCALE, "
            "DATETIME_PRECISION FROM information_schema.COLUMNS WHERE TABLE_SCHEMA=%s AND TABLE_NAME=%s "
            "ORDER BY ORDINAL_POSITION",
            (db, table),
        )
        rows = cur.fetchall()
    return [
        SourceColumn(
            name=name,
            data_type=str(dtype).lower(),
            column_type=str(ctype).lower(),
            nullable=nullable == "YES",
            precision=prec,
            scale=scale,
            fsp=int(fsp or 0),
            json=f"json_valid({q(name).lower()})" in checks or f"json_valid({name.lower()})" in checks,
        )
        for name, dtype, ctype, nullable, prec, scale, fsp in rows
    ]


_GEOMETRY = {
    "geometry", "point", "linestring", "polygon", "multipoint", "multilinestring", "multipolygon", "geometrycollection",
}  # fmt: skip


def _select(c: SourceColumn) -> str:
    """What the server renders for the column (one or two select items)."""
    n = q(c.name)
    t = c.data_type
    if t in _GEOMETRY:
        return f"HEX(ST_AsBinary({n})), ST_SRID({n})"
    if t in ("binary", "varbinary", "tinyblob", "blob", "mediumblob", "longblob"):
        return f"HEX({n})"
    if t == "bit":
        return f"CAST({n} AS UNSIGNED)"
    if t == "float":
        return f"CAST({n} AS DOUBLE)"
    if t == "year":
        return f"CAST({n} AS UNSIGNED)"
    if t in ("date", "datetime", "timestamp", "time", "decimal", "enum", "set") or c.json:
        return f"CAST({n} AS CHAR)"
    return n


def _width(c: SourceColumn) -> int:
    return 2 if c.data_type in _GEOMETRY else 1


def _days(y: int, m: int, d: int) -> int:
    return dt.date(y, m, d).toordinal() - dt.date(1970, 1, 1).toordinal()


def _adjusted_year(y: int) -> int:
    return y + (2000 if y < 70 else 1900) if 0 < y < 100 else y


def _temporal(c: SourceColumn, text: str | None) -> Any:
    zero_value = None if c.nullable else 0
    if text is None:
        return None
    if c.data_type == "time":
        neg = text.startswith("-")
        h, m, s = text.lstrip("-").split(":")
        sec, _, frac = s.partition(".")
        us = ((int(h) * 60 + int(m)) * 60 + int(sec)) * 1_000_000 + int((frac + "000000")[:6])
        return -us if neg else us
    date_part, _, time_part = text.partition(" ")
    y, mo, d = (int(p) for p in date_part.split("-"))
    if c.data_type == "timestamp":
        if (y, mo, d) == (0, 0, 0):
            return None if c.nullable else "1970-01-01T00:00:00Z"
        hh, mm, ss = time_part.split(":")
        sec, _, frac = ss.partition(".")
        base = f"{y:04d}-{mo:02d}-{d:02d}T{hh}:{mm}:{sec}"
        return f"{base}.{(frac + '000000')[: c.fsp]}Z" if c.fsp else f"{base}Z"
    if y == 0 or mo == 0 or d == 0:
        return zero_value
    days = _days(_adjusted_year(y), mo, d)
    if c.data_type == "date":
        return days
    hh, mm, ss = time_part.split(":")
    sec, _, frac = ss.partition(".")
    us = (
        days * 86_400_000_000
        + ((int(hh) * 60 + int(mm)) * 60 + int(sec)) * 1_000_000
        + int((frac + "000000")[:6])
    )
    return us // 1000 if c.fsp <= 3 else us


def _value(c: SourceColumn, raw: tuple) -> Any:
    t = c.data_type
    v = raw[0]
    if t in _GEOMETRY:
        return None if v is None else {"wkb": bytes.fromhex(v), "srid": int(raw[1]) or None}
    if v is None:
        return _temporal(c, None) if t in ("date", "datetime", "timestamp", "time") else None
    if t in ("binary", "varbinary", "tinyblob", "blob", "mediumblob", "longblob"):
        return bytes.fromhex(v)
    if t == "bit":
        bits = int(c.column_type.partition("(")[2].rstrip(")") or 1)
        return bool(v) if bits == 1 else int(v).to_bytes((bits + 7) // 8, "little")
    if t == "decimal":
        return v if (c.precision or 10) > 38 else Decimal(v)
    if t == "bigint" and "unsigned" in c.column_type:
        return Decimal(v)
    if t in ("date", "datetime", "timestamp", "time"):
        return _temporal(c, v)
    if t == "year":
        return int(v)
    return v


def read_rows(
    conn: pymysql.connections.Connection, db: str, table: str, cols: list[SourceColumn]
) -> list[tuple]:
    """Every row of the table as the tuple of its expected Debezium values (column order)."""
    with conn.cursor() as cur:
        cur.execute("SET SESSION time_zone = '+00:00'")
        cur.execute(f"SELECT {', '.join(_select(c) for c in cols)} FROM {q(db)}.{q(table)}")
        rows = cur.fetchall()
    out = []
    for r in rows:
        i, vals = 0, []
        for c in cols:
            w = _width(c)
            vals.append(_value(c, tuple(r[i : i + w])))
            i += w
        out.append(tuple(vals))
    return out
