"""The Debezium connector properties that change how values are represented (``TypeOptions``),
the two value sources, and the error for a column type this connector cannot represent."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from ...errors import ConfigurationError
from ..columns import ColumnPolicy
from ..schema import ColumnSchema

#: Where raw values come from: a snapshot ``SELECT`` read by pymysql, or binlog row images.
Source = Literal["pymysql", "binlog"]
#: Debezium ``decimal.handling.mode`` values.
DecimalHandlingMode = Literal["precise", "double", "string"]
#: Debezium ``time.precision.mode`` values supported for MySQL.
TimePrecisionMode = Literal["adaptive_time_microseconds", "connect"]
#: Debezium ``bigint.unsigned.handling.mode`` values.
BigintUnsignedHandlingMode = Literal["long", "precise"]
#: Debezium ``binary.handling.mode`` values.
BinaryHandlingMode = Literal["bytes", "base64", "base64-url-safe", "hex"]
#: The values of :data:`Source`.
SOURCES = ("pymysql", "binlog")

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
