"""Value converters of the character and binary families: CHAR..LONGTEXT (decoded with the
column's character set), BINARY..LONGBLOB (per ``binary.handling.mode``), ENUM and SET."""

from __future__ import annotations

import base64
from typing import Any

from ..schema import ColumnSchema
from .families import Core, conversion_error
from .options import TypeOptions

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


def codec_for(column: ColumnSchema) -> str:
    """The Python codec of the column's MySQL character set (UTF-8 when it has none or Python
    does not know it)."""
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


# ---- strings and binary ---------------------------------------------------------------------


def text_core(column: ColumnSchema, what: str = "string") -> tuple[Core, Any]:
    """CHAR..LONGTEXT (and MariaDB's text JSON): str, bytes decoded with the column's charset;
    ``what`` names the target in the error for a value of another Python type."""
    codec = codec_for(column)

    def to_str(v: Any) -> str:
        if v.__class__ is str:
            return v
        if isinstance(v, (bytes, bytearray, memoryview)):
            return bytes(v).decode(codec, "replace")
        raise conversion_error(column, v, what)

    return to_str, None


def binary_core(column: ColumnSchema, t: str, options: TypeOptions) -> tuple[Core, Any]:
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
                raise conversion_error(column, v, "bytes")
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


# ---- ENUM / SET -----------------------------------------------------------------------------


def enum_core(column: ColumnSchema) -> tuple[Core, Any]:
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
        raise conversion_error(column, v, "ENUM string")

    return to_enum, None


def set_core(column: ColumnSchema) -> tuple[Core, Any]:
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
        raise conversion_error(column, v, "SET string")

    # python-mysql-replication returns an empty SET as None; a NOT NULL column cannot be
    # NULL, so it is the empty set (Debezium's fallback for NOT NULL SET is "" as well).
    return to_set, (None if column.nullable else "")
