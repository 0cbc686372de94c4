"""Value converters of the numeric families: integers (BIGINT UNSIGNED per
``bigint.unsigned.handling.mode``), FLOAT/DOUBLE, DECIMAL (per ``decimal.handling.mode``) and BIT."""

from __future__ import annotations

import decimal
import struct
from typing import Any

from ..schema import ColumnSchema
from .families import MAX_DECIMAL128_PRECISION, Core, bit_length, conversion_error, decimal_precision_scale
from .options import TypeOptions

_DEC_CTX = decimal.Context(prec=100, rounding=decimal.ROUND_HALF_EVEN)
_INT64_WRAP = 1 << 64
_INT64_MAX = (1 << 63) - 1
_FLOAT32 = struct.Struct("<f")


def _to_float32(v: float) -> float:
    return _FLOAT32.unpack(_FLOAT32.pack(v))[0]


def _plain(d: decimal.Decimal) -> str:
    return format(d, "f")


# ---- integers -------------------------------------------------------------------------------


def integer_core(column: ColumnSchema, t: str, options: TypeOptions) -> tuple[Core, Any]:
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


def floating_core(column: ColumnSchema, t: str) -> tuple[Core, Any]:
    """FLOAT: rounded to float32 (Debezium FLOAT32); FLOAT(M,D) and DOUBLE: float (FLOAT64)."""
    if t == "float" and column.scale is None:
        return (lambda v: _to_float32(float(v))), None
    if t == "float":  # FLOAT(M,D): FLOAT64 in Debezium
        return (lambda v: v if v.__class__ is float else float(v)), None
    return (lambda v: v if v.__class__ is float else float(v)), None


# ---- decimal --------------------------------------------------------------------------------


def decimal_core(column: ColumnSchema, options: TypeOptions) -> tuple[Core, Any]:
    """DECIMAL per ``decimal_handling_mode``: Decimal quantized half-even to the scale, float, or
    the plain string (also for precisions above :data:`MAX_DECIMAL128_PRECISION`)."""
    p, s = decimal_precision_scale(column)
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


# ---- BIT ------------------------------------------------------------------------------------


def bit_core(column: ColumnSchema) -> tuple[Core, Any]:
    """BIT(1): bool; BIT(n > 1): little-endian bytes of (n + 7) // 8 (Debezium io.debezium.data.Bits)."""
    nbits = bit_length(column)
    nbytes = (nbits + 7) // 8

    def bit_int(v: Any) -> int:
        if isinstance(v, str):  # python-mysql-replication: '0101...' (MSB first)
            return int(v, 2) if v else 0
        if isinstance(v, (bytes, bytearray, memoryview)):  # pymysql: big-endian bytes
            return int.from_bytes(bytes(v), "big")
        if isinstance(v, (bool, int)):
            return int(v)
        raise conversion_error(column, v, "BIT")

    if nbits <= 1:
        return (lambda v: bit_int(v) != 0), None
    # Debezium io.debezium.data.Bits: little-endian byte[] of n/8 (+1) bytes.
    return (lambda v: bit_int(v).to_bytes(nbytes, "little")), None
