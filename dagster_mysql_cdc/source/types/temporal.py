"""Value converters of the temporal family: DATE, DATETIME, TIMESTAMP, TIME and YEAR (Debezium
"Temporal types", ``time.precision.mode``, ``enable.time.adjuster``), zero dates included."""

from __future__ import annotations

import datetime as _dt
from typing import Any

from ..schema import ColumnSchema
from .families import Core, column_fsp, conversion_error
from .options import TypeOptions

_EPOCH_DATE = _dt.date(1970, 1, 1)
#: ``date.toordinal()`` of 1970-01-01.
EPOCH_ORDINAL = _EPOCH_DATE.toordinal()
#: 1970-01-01 00:00:00 as a naive datetime (python-mysql-replication's zero TIMESTAMP).
EPOCH_NAIVE = _dt.datetime(1970, 1, 1)
#: Microseconds in a day.
ONE_DAY_US = 86_400_000_000
_UTC = _dt.UTC


def _micros_since_epoch(v: _dt.datetime) -> int:
    if v.tzinfo is not None:
        v = v.astimezone(_UTC).replace(tzinfo=None)
    td = v - EPOCH_NAIVE
    return (td.days * 86_400 + td.seconds) * 1_000_000 + td.microseconds


def _timedelta_micros(td: _dt.timedelta) -> int:
    return td.days * ONE_DAY_US + td.seconds * 1_000_000 + td.microseconds


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


def year_core(binlog: bool) -> tuple[Core, Any]:
    """YEAR: int (python-mysql-replication's 1900 for YEAR 0000 mapped back to 0)."""

    def to_year(v: Any) -> int:
        if isinstance(v, _dt.date):
            return v.year
        v = int(v)
        if binlog and v == 1900:
            return 0  # python-mysql-replication adds 1900 to the stored byte; YEAR 0000 -> 1900
        return v

    return to_year, None


def temporal_core(column: ColumnSchema, t: str, options: TypeOptions, binlog: bool) -> tuple[Core, Any]:
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
ADJUST_BELOW_DAYS = _dt.date(100, 1, 1).toordinal() - EPOCH_ORDINAL
ADJUST_BELOW_US = ADJUST_BELOW_DAYS * ONE_DAY_US


def _date_core(column: ColumnSchema, adjust: bool = False) -> tuple[Core, Any]:
    """DATE: days since the epoch (io.debezium.time.Date); zero/invalid dates are NULL, or 0 in a
    NOT NULL column; ``adjust``: years below 100 read as two-digit years (``_two_digit_year``)."""
    zero = None if column.nullable else 0

    def to_days(v: Any) -> int | None:
        if isinstance(v, _dt.datetime):
            v = v.date()
        if isinstance(v, _dt.date):
            if adjust:
                v = _two_digit_year(v)
            return v.toordinal() - EPOCH_ORDINAL
        if isinstance(v, (str, bytes)):
            return zero  # pymysql: '0000-00-00' or another invalid date
        raise conversion_error(column, v, "DATE")

    return to_days, zero


def _datetime_core(column: ColumnSchema, connect: bool, adjust: bool = False) -> tuple[Core, Any]:
    """DATETIME: epoch milliseconds (fsp <= 3 or ``connect``; io.debezium.time.Timestamp) or
    microseconds (MicroTimestamp) of the wall-clock time read as UTC; zero dates as for DATE;
    ``adjust``: years below 100 read as two-digit years (``_two_digit_year``)."""
    millis = connect or column_fsp(column) <= 3
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
            us = (v.toordinal() - EPOCH_ORDINAL) * ONE_DAY_US
            return us // 1000 if millis else us
        if isinstance(v, (str, bytes)):
            return zero  # pymysql: '0000-00-00 00:00:00' or another invalid datetime
        raise conversion_error(column, v, "DATETIME")

    return to_epoch, zero


def _timestamp_core(column: ColumnSchema, binlog: bool) -> tuple[Core, Any]:
    """TIMESTAMP: ISO-8601 UTC text with the column's fsp digits (io.debezium.time.ZonedTimestamp);
    the zero TIMESTAMP is NULL, or the epoch with the column's fsp digits in a NOT NULL column
    (``1970-01-01T00:00:00Z``, ``1970-01-01T00:00:00.00Z`` for TIMESTAMP(2), as Debezium)."""
    fsp = column_fsp(column)
    epoch_iso = "1970-01-01T00:00:00" + ("." + "0" * fsp if fsp else "") + "Z"
    zero_iso = None if column.nullable else epoch_iso

    def to_iso(v: Any) -> str | None:
        if isinstance(v, (str, bytes)):
            return zero_iso  # pymysql: '0000-00-00 00:00:00'
        if not isinstance(v, _dt.datetime):
            raise conversion_error(column, v, "TIMESTAMP")
        if v.tzinfo is not None:
            v = v.astimezone(_UTC).replace(tzinfo=None)
        if binlog and v == EPOCH_NAIVE:
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
    fix_negative_fraction = binlog and column_fsp(column) > 0

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
            raise conversion_error(column, v, "TIME")

        return to_micros, None

    def to_millis(v: Any) -> int:
        if isinstance(v, _dt.time):
            us = ((v.hour * 60 + v.minute) * 60 + v.second) * 1_000_000 + v.microsecond
        elif isinstance(v, _dt.timedelta):
            us = td_micros(v)
        else:
            raise conversion_error(column, v, "TIME")
        if not 0 <= us < ONE_DAY_US:
            raise ValueError(
                f"TIME value of column {column.name!r} is outside 00:00:00-23:59:59.999, which "
                "time_precision_mode='connect' (Kafka Connect Time) cannot represent; use "
                "time_precision_mode='adaptive_time_microseconds'"
            )
        return us // 1000

    return to_millis, None
