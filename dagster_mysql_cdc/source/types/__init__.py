"""MySQL/MariaDB column types -> Debezium logical types -> Arrow types, and value conversion.

This package is the ONE place that knows how a MySQL/MariaDB column value is represented in a change event.
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

Library facts this package relies on (read from the installed library sources, checked against
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
Modules, bottom to top: :mod:`.options` (``TypeOptions``, ``UnsupportedTypeError``),
:mod:`.families` (canonical type names and families), the value converters of each family
(:mod:`.numeric`, :mod:`.strings`, :mod:`.json_text`, :mod:`.temporal`, :mod:`.spatial`),
:mod:`.schema_mapping` (Debezium schema and Arrow field of a column), :mod:`.queries` (snapshot
``SELECT`` expressions and decoders, query parameters), :mod:`.converters` (one column's
converter), :mod:`.columnwise` (a whole column to Arrow) and :mod:`.table_converter`
(``TableConverter``). This module is the package's public face: import from
``dagster_mysql_cdc.source.types``.
"""

from __future__ import annotations

from .converters import hashable_value, value_converter
from .families import MAX_DECIMAL128_PRECISION, SUPPORTED_DATA_TYPES
from .json_text import json_is_text
from .options import (
    BigintUnsignedHandlingMode,
    BinaryHandlingMode,
    DecimalHandlingMode,
    Source,
    TimePrecisionMode,
    TypeOptions,
    UnsupportedTypeError,
)
from .queries import binlog_value_as_parameter, quote_identifier, select_expression, snapshot_decoders
from .schema_mapping import (
    DEBEZIUM_DECIMAL,
    arrow_field,
    arrow_schema,
    debezium_parameters,
    debezium_type,
    enum_allowed,
)
from .spatial import GEOMETRY_ARROW_TYPE
from .table_converter import TableConverter

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
    "BigintUnsignedHandlingMode",
    "BinaryHandlingMode",
    "DecimalHandlingMode",
    "TimePrecisionMode",
    "Source",
    "DEBEZIUM_DECIMAL",
    "GEOMETRY_ARROW_TYPE",
    "MAX_DECIMAL128_PRECISION",
]
