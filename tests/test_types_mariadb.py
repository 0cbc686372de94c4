"""Integration test of dagster_mysql_cdc.source.types against a real MariaDB.

One table with a column of every supported type gets edge values INSERTed; the same rows are then
read (a) by a snapshot-style pymysql SELECT (session time_zone '+00:00') and (b) from the binlog
with python-mysql-replication, converted with ``source="pymysql"`` / ``source="binlog"``, and
compared with the expected Debezium values and with each other.

The INSERT session runs with ``time_zone='+05:30'`` and the Python process with
``TZ=America/Los_Angeles`` while reading, so a TIMESTAMP handled in any zone but UTC shows up.

Server: ``CDC_MYSQL_HOST``/``CDC_MYSQL_PORT`` (default 127.0.0.1:3307), root password
``CDC_MYSQL_ROOT_PASSWORD`` (default ``root-secret``); started by ``infra/up.sh``.
"""

from __future__ import annotations

import datetime as dt
import os
import struct
import time
from decimal import Decimal
from typing import Any

import pyarrow as pa
import pymysql
import pymysql.cursors
import pytest
from pymysqlreplication import BinLogStreamReader
from pymysqlreplication.row_event import WriteRowsEvent

from dagster_mysql_cdc.source.schema import ColumnSchema, TableSchema, parse_enum_values
from dagster_mysql_cdc.source.types import TableConverter, TypeOptions, select_expression

pytestmark = pytest.mark.integration

HOST = os.environ.get("CDC_MYSQL_HOST", "127.0.0.1")
PORT = int(os.environ.get("CDC_MYSQL_PORT", "3307"))
ROOT_PASSWORD = os.environ.get("CDC_MYSQL_ROOT_PASSWORD", "root-secret")
DB = "types_test"
TABLE = f"all_types_{os.getpid()}"
SERVER_ID = 4242

EMOJI = "😀 héllo 👩‍👩‍👧 ✓"
LONG = "x" * 70000 + "😀"
DEC65_MAX = "99999999999999999999999999999999999.999999999999999999999999999999"
DEC65_NEG = "-12345678901234567890123456789012345.123456789012345678901234567890"
LINESTRING_WKB = struct.pack("<BII4d", 1, 2, 2, 0.0, 0.0, 1.0, 1.0)
POINT_WKB = struct.pack("<BIdd", 1, 1, 1.0, 2.0)


def f32(x: float) -> float:
    return struct.unpack("<f", struct.pack("<f", x))[0]


def epoch_us(*args: int) -> int:
    d = dt.datetime(*args) - dt.datetime(1970, 1, 1)
    return (d.days * 86400 + d.seconds) * 1_000_000 + d.microseconds


# (column name, DDL type)
COLUMNS = [
    ("id", "INT NOT NULL PRIMARY KEY"),
    ("ti", "TINYINT"),
    ("tb", "BOOLEAN"),
    ("tu", "TINYINT UNSIGNED"),
    ("si", "SMALLINT"),
    ("su", "SMALLINT UNSIGNED"),
    ("mi", "MEDIUMINT"),
    ("mu", "MEDIUMINT UNSIGNED"),
    ("i", "INT"),
    ("iu", "INT UNSIGNED"),
    ("bi", "BIGINT"),
    ("bu", "BIGINT UNSIGNED"),
    ("f", "FLOAT"),
    ("d", "DOUBLE"),
    ("dn", "DECIMAL(10,2)"),
    ("d65", "DECIMAL(65,30)"),
    ("ch", "CHAR(5)"),
    ("vc", "VARCHAR(100) CHARACTER SET utf8mb4"),
    ("tx", "TEXT"),
    ("lt", "LONGTEXT"),
    ("l1", "VARCHAR(20) CHARACTER SET latin1"),
    ("bn", "BINARY(4)"),
    ("vb", "VARBINARY(10)"),
    ("bl", "BLOB"),
    ("b1", "BIT(1)"),
    ("b10", "BIT(10)"),
    ("b64", "BIT(64)"),
    ("j", "JSON"),
    ("e", "ENUM('small','medium','large')"),
    ("st", "SET('a','b','c')"),
    ("stn", "SET('a','b') NOT NULL DEFAULT ''"),
    ("y", "YEAR"),
    ("dte", "DATE"),
    ("dnn", "DATE NOT NULL DEFAULT '2000-01-01'"),
    ("dt0", "DATETIME"),
    ("dt3", "DATETIME(3)"),
    ("dt6", "DATETIME(6)"),
    ("dtnn", "DATETIME(6) NOT NULL DEFAULT '2000-01-01 00:00:00'"),
    ("ts0", "TIMESTAMP NULL"),
    ("ts3", "TIMESTAMP(3) NULL"),
    ("ts6", "TIMESTAMP(6) NULL"),
    ("tsnn", "TIMESTAMP NOT NULL DEFAULT '2000-01-01 00:00:00'"),
    ("tm", "TIME"),
    ("tm1", "TIME(1)"),
    ("tm3", "TIME(3)"),
    ("tm6", "TIME(6)"),
    ("g", "GEOMETRY"),
    ("pt", "POINT"),
]
NAMES = [n for n, _ in COLUMNS]

# Each row: {column: (SQL literal, expected Debezium value with default TypeOptions)}.
# Columns not listed are NULL / None. The INSERT session time zone is +05:30.
ROWS: list[dict[str, tuple[str, Any]]] = [
    {  # maxima and positive edges
        "id": ("1", 1),
        "ti": ("127", 127),
        "tb": ("TRUE", 1),
        "tu": ("255", 255),
        "si": ("32767", 32767),
        "su": ("65535", 65535),
        "mi": ("8388607", 8388607),
        "mu": ("16777215", 16777215),
        "i": ("2147483647", 2147483647),
        "iu": ("4294967295", 4294967295),
        "bi": ("9223372036854775807", 9223372036854775807),
        "bu": ("18446744073709551615", Decimal(18446744073709551615)),
        "f": ("3.14159", f32(3.14159)),
        "d": ("1.7976931348623157e308", 1.7976931348623157e308),
        "dn": ("99999999.99", Decimal("99999999.99")),
        "d65": (f"'{DEC65_MAX}'", DEC65_MAX),
        "ch": ("'ab  '", "ab"),
        "vc": (f"'{EMOJI}'", EMOJI),
        "tx": ("'text ✓ ñ'", "text ✓ ñ"),
        "lt": (f"'{LONG}'", LONG),
        "l1": ("'café'", "café"),
        "bn": ("'ab'", b"ab\x00\x00"),
        "vb": ("x'00ff00'", b"\x00\xff\x00"),
        "bl": ("x'deadbeef00'", b"\xde\xad\xbe\xef\x00"),
        "b1": ("b'1'", True),
        "b10": ("b'1000000101'", b"\x05\x02"),
        "b64": ("b'" + "1" * 64 + "'", b"\xff" * 8),
        "j": (  # MariaDB's JSON is LONGTEXT: the stored text, as Debezium passes it through
            """'{"b": [1, 2.5, "x"], "a": "😀", "n": null, "t": true, "o": {}}'""",
            '{"b": [1, 2.5, "x"], "a": "😀", "n": null, "t": true, "o": {}}',
        ),
        "e": ("'large'", "large"),
        "st": ("'c,a'", "a,c"),
        "stn": ("'b,a'", "a,b"),
        "y": ("2155", 2155),
        "dte": ("'9999-12-31'", 2932896),
        "dnn": ("'2018-06-20'", 17702),
        "dt0": ("'2018-06-20 06:37:03'", 1529476623000),
        "dt3": ("'2018-06-20 06:37:03.123'", 1529476623123),
        "dt6": ("'2018-06-20 06:37:03.123456'", 1529476623123456),
        "dtnn": ("'9999-12-31 23:59:59.999999'", epoch_us(9999, 12, 31, 23, 59, 59, 999999)),
        "ts0": ("'2018-06-20 19:07:03'", "2018-06-20T13:37:03Z"),
        "ts3": ("'2018-06-20 19:07:03.120'", "2018-06-20T13:37:03.120Z"),
        "ts6": ("'2038-01-19 08:44:07.999999'", "2038-01-19T03:14:07.999999Z"),
        "tsnn": ("'1970-01-01 05:30:01'", "1970-01-01T00:00:01Z"),
        "tm": ("'838:59:59'", 3020399000000),
        "tm1": ("'12:34:56.7'", 45296700000),
        "tm3": ("'-12:34:56.789'", -45296789000),
        "tm6": ("'13:37:03.000001'", 49023000001),
        "g": ("ST_GeomFromText('LINESTRING(0 0,1 1)')", {"wkb": LINESTRING_WKB, "srid": None}),  # SRID 0
        "pt": ("ST_GeomFromText('POINT(1 2)', 4326)", {"wkb": POINT_WKB, "srid": 4326}),
    },
    {  # minima, negatives, empty values and zero dates
        "id": ("2", 2),
        "ti": ("-128", -128),
        "tb": ("FALSE", 0),
        "tu": ("0", 0),
        "si": ("-32768", -32768),
        "su": ("0", 0),
        "mi": ("-8388608", -8388608),
        "mu": ("0", 0),
        "i": ("-2147483648", -2147483648),
        "iu": ("0", 0),
        "bi": ("-9223372036854775808", -9223372036854775808),
        "bu": ("0", Decimal(0)),
        "f": ("-0.5", -0.5),
        "d": ("-2.2250738585072014e-308", -2.2250738585072014e-308),
        "dn": ("-0.05", Decimal("-0.05")),
        "d65": (f"'{DEC65_NEG}'", DEC65_NEG),
        "ch": ("''", ""),
        "vc": ("''", ""),
        "tx": ("'a\\nb'", "a\nb"),
        "lt": ("''", ""),
        "l1": ("''", ""),
        "bn": ("x'00'", b"\x00\x00\x00\x00"),
        "vb": ("''", b""),
        "bl": ("''", b""),
        "b1": ("b'0'", False),
        "b10": ("b'0'", b"\x00\x00"),
        "b64": ("b'0'", b"\x00" * 8),
        "j": ("""'"just a string"'""", '"just a string"'),
        "e": ("'small'", "small"),
        "st": ("''", ""),
        "stn": ("''", ""),
        "y": ("0", 0),
        "dte": ("'0000-00-00'", None),
        "dnn": ("'0000-00-00'", 0),
        "dt0": ("'0000-00-00 00:00:00'", None),
        "dt3": ("'1000-01-01 00:00:00.000'", -30610224000000),
        "dt6": ("'1969-12-31 23:59:59.999999'", -1),
        "dtnn": ("'0000-00-00 00:00:00'", 0),
        "ts0": ("'0000-00-00 00:00:00'", None),
        "ts6": ("'1970-01-01 05:30:01.000001'", "1970-01-01T00:00:01.000001Z"),
        "tsnn": ("'0000-00-00 00:00:00'", "1970-01-01T00:00:00Z"),
        "tm": ("'-838:59:59'", -3020399000000),
        "tm1": ("'-00:00:00.1'", -100000),
        "tm3": ("'-838:59:58.999'", -3020398999000),
        "tm6": ("'-00:00:01.500000'", -1500000),
    },
    {  # NULL in every nullable column
        "id": ("3", 3),
        "stn": ("'a'", "a"),
        "dnn": ("'2000-01-01'", 10957),
        "dtnn": ("'2000-01-01 00:00:00'", 946684800000000),
        "tsnn": ("'2000-01-01 05:30:00'", "2000-01-01T00:00:00Z"),
    },
    {  # more edges
        "id": ("4", 4),
        "bu": ("9223372036854775808", Decimal(2**63)),
        "f": ("16777217", f32(16777216.0)),
        "d": ("0.1", 0.1),
        "dn": ("0", Decimal("0.00")),
        "d65": ("'0.000000000000000000000000000001'", "0.000000000000000000000000000001"),
        "b10": ("b'0000000101'", b"\x05\x00"),
        "j": ("'[]'", "[]"),
        "e": ("'medium'", "medium"),
        "st": ("'a,b,c'", "a,b,c"),
        "stn": ("'a,b'", "a,b"),
        "y": ("1901", 1901),
        "dte": ("'2020-05-00'", None),
        "dnn": ("'2020-00-15'", 0),
        "dt0": ("'1970-01-01 00:00:00'", 0),
        "dtnn": ("'2000-01-01 00:00:00.5'", 946684800500000),
        "tsnn": ("'2000-01-01 05:30:00'", "2000-01-01T00:00:00Z"),
        "ts3": ("'2018-06-20 19:07:03.000'", "2018-06-20T13:37:03.000Z"),
        "tm": ("'00:00:00'", 0),
        "tm1": ("'-00:00:59.9'", -59900000),
        "tm3": ("'-00:01:00.25'", -60250000),
        "tm6": ("'-01:00:00.000001'", -3600000001),
        "g": ("ST_GeomFromText('POINT(1 2)')", {"wkb": POINT_WKB, "srid": None}),
    },
]

OPTION_SETS = [
    TypeOptions(),
    TypeOptions(
        decimal_handling_mode="string",
        time_precision_mode="adaptive_time_microseconds",
        bigint_unsigned_handling_mode="long",
        binary_handling_mode="hex",
    ),
    TypeOptions(decimal_handling_mode="double", binary_handling_mode="base64"),
    TypeOptions(binary_handling_mode="base64-url-safe"),
]


# --------------------------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------------------------


def connect(**kw: Any) -> pymysql.connections.Connection:
    try:
        return pymysql.connect(
            host=HOST, port=PORT, user="root", password=ROOT_PASSWORD, charset="utf8mb4", **kw
        )
    except pymysql.err.OperationalError as e:
        pytest.fail(
            f"MariaDB test server at {HOST}:{PORT} is unreachable ({e}). Start it with infra/up.sh "
            "(or set CDC_MYSQL_HOST/CDC_MYSQL_PORT/CDC_MYSQL_ROOT_PASSWORD); CI always provides it.",
            pytrace=False,
        )


def table_schema_from_information_schema(conn, db: str, table: str) -> TableSchema:
    """Tiny information_schema.COLUMNS -> TableSchema reader (MariaDB JSON = LONGTEXT + json_valid CHECK)."""
    with conn.cursor(pymysql.cursors.DictCursor) as cur:
        cur.execute(
            "SELECT CHECK_CLAUSE FROM information_schema.CHECK_CONSTRAINTS "
            "WHERE CONSTRAINT_SCHEMA=%s AND TABLE_NAME=%s",
            (db, table),
        )
        json_cols = {
            r["CHECK_CLAUSE"].strip().lower()[len("json_valid(") : -1].strip("` ")
            for r in cur.fetchall()
            if r["CHECK_CLAUSE"].strip().lower().startswith("json_valid(")
        }
        cur.execute(
            "SELECT COLUMN_NAME, ORDINAL_POSITION, IS_NULLABLE, DATA_TYPE, COLUMN_TYPE, "
            "CHARACTER_MAXIMUM_LENGTH, NUMERIC_PRECISION, NUMERIC_SCALE, DATETIME_PRECISION, "
            "CHARACTER_SET_NAME FROM information_schema.COLUMNS "
            "WHERE TABLE_SCHEMA=%s AND TABLE_NAME=%s ORDER BY ORDINAL_POSITION",
            (db, table),
        )
        cols = []
        for r in cur.fetchall():
            dtype = r["DATA_TYPE"].lower()
            ctype = r["COLUMN_TYPE"].lower()
            if r["COLUMN_NAME"].lower() in json_cols:
                dtype = "json"
            length = precision = scale = None
            if dtype in ("char", "varchar", "binary", "varbinary"):
                length = r["CHARACTER_MAXIMUM_LENGTH"]
            elif dtype == "bit":
                length = r["NUMERIC_PRECISION"]
            elif dtype == "decimal":
                precision, scale = r["NUMERIC_PRECISION"], r["NUMERIC_SCALE"]
            elif dtype in ("datetime", "timestamp", "time"):
                precision = r["DATETIME_PRECISION"] or 0
            cols.append(
                ColumnSchema(
                    name=r["COLUMN_NAME"],
                    data_type=dtype,
                    position=r["ORDINAL_POSITION"],
                    nullable=r["IS_NULLABLE"] == "YES",
                    unsigned="unsigned" in ctype,
                    length=None if length is None else int(length),
                    precision=None if precision is None else int(precision),
                    scale=None if scale is None else int(scale),
                    enum_values=parse_enum_values(ctype) if dtype in ("enum", "set") else (),
                    charset=r["CHARACTER_SET_NAME"],
                )
            )
    return TableSchema(db, table, tuple(cols), primary_key=("id",))


class _LocalTimeZone:
    """Run with a non-UTC process time zone, so any local-time conversion would show."""

    def __init__(self, tz: str):
        self.tz = tz

    def __enter__(self):
        self.old = os.environ.get("TZ")
        os.environ["TZ"] = self.tz
        time.tzset()

    def __exit__(self, *exc):
        if self.old is None:
            os.environ.pop("TZ", None)
        else:
            os.environ["TZ"] = self.old
        time.tzset()


# --------------------------------------------------------------------------------------------
# fixture: create, insert, read back from both sources
# --------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def captured():
    admin = connect(autocommit=True)
    try:
        with admin.cursor() as cur:
            cur.execute(
                "SHOW VARIABLES WHERE Variable_name IN ('log_bin','binlog_format','binlog_row_image','binlog_row_metadata')"
            )
            settings = {k.lower(): v.upper() for k, v in cur.fetchall()}
        assert settings.get("log_bin") == "ON" and settings.get("binlog_format") == "ROW", settings
        assert settings.get("binlog_row_image") == "FULL", settings
        assert settings.get("binlog_row_metadata") == "FULL", (
            "python-mysql-replication needs binlog_row_metadata=FULL for column names, ENUM/SET "
            f"values and charsets; server has {settings}"
        )
        with admin.cursor() as cur:
            cur.execute(f"CREATE DATABASE IF NOT EXISTS `{DB}` CHARACTER SET utf8mb4")
            cur.execute(f"DROP TABLE IF EXISTS `{DB}`.`{TABLE}`")
            cur.execute(
                f"CREATE TABLE `{DB}`.`{TABLE}` ("
                + ", ".join(f"`{n}` {t}" for n, t in COLUMNS)
                + ") CHARACTER SET utf8mb4"
            )
            schema = table_schema_from_information_schema(admin, DB, TABLE)
            cur.execute("SHOW MASTER STATUS")
            log_file, log_pos = cur.fetchone()[:2]
            cur.execute("SET SESSION sql_mode = '', time_zone = '+05:30'")
            for row in ROWS:
                names = list(row)
                cur.execute(
                    f"INSERT INTO `{DB}`.`{TABLE}` ("
                    + ", ".join(f"`{n}`" for n in names)
                    + ") VALUES ("
                    + ", ".join(row[n][0] for n in names)
                    + ")"
                )
                cur.execute("SHOW WARNINGS")
                warnings = [w for w in cur.fetchall() if w[0] != "Note"]
                # zero/invalid dates and the like are intended; data truncation is not
                assert not [
                    w for w in warnings if "truncat" in w[2].lower() and "date" not in w[2].lower()
                ], warnings

        with _LocalTimeZone("America/Los_Angeles"):
            snap = connect(init_command="SET time_zone='+00:00'")
            try:
                with snap.cursor() as cur:
                    cur.execute(
                        "SELECT "
                        + ", ".join(select_expression(c) for c in schema.columns)
                        + f" FROM `{DB}`.`{TABLE}` ORDER BY id"
                    )
                    pymysql_rows = [tuple(r) for r in cur.fetchall()]
                    cur.execute(f"SELECT `f` FROM `{DB}`.`{TABLE}` ORDER BY id")
                    plain_float = [r[0] for r in cur.fetchall()]
            finally:
                snap.close()

            stream = BinLogStreamReader(
                connection_settings=dict(host=HOST, port=PORT, user="root", password=ROOT_PASSWORD),
                server_id=SERVER_ID,
                is_mariadb=False,
                log_file=log_file,
                log_pos=log_pos,
                resume_stream=True,
                blocking=False,
                only_events=[WriteRowsEvent],
                only_schemas=[DB],
                only_tables=[TABLE],
            )
            binlog_rows: list[tuple[dict, dict]] = []
            try:
                for event in stream:
                    for r in event.rows:
                        binlog_rows.append((r["values"], r["none_sources"]))
                    if len(binlog_rows) >= len(ROWS):
                        break
            finally:
                stream.close()
        yield schema, pymysql_rows, binlog_rows, plain_float
    finally:
        with admin.cursor() as cur:
            cur.execute(f"DROP TABLE IF EXISTS `{DB}`.`{TABLE}`")
        admin.close()


def expected_rows() -> list[tuple]:
    return [tuple(row[n][1] if n in row else None for n in NAMES) for row in ROWS]


# --------------------------------------------------------------------------------------------
# tests
# --------------------------------------------------------------------------------------------


def test_schema_read_from_information_schema(captured):
    schema, _, _, _ = captured
    assert schema.column_names == NAMES
    by = {c.name: c for c in schema.columns}
    assert by["j"].data_type == "json"
    assert by["tb"].data_type == "tinyint"
    assert by["bu"].unsigned and by["bu"].data_type == "bigint"
    assert by["d65"].precision == 65 and by["d65"].scale == 30
    assert by["b10"].length == 10 and by["bn"].length == 4
    assert by["dt6"].precision == 6 and by["ts3"].precision == 3 and by["tm"].precision == 0
    assert by["st"].enum_values == ("a", "b", "c")
    assert not by["dnn"].nullable and by["dte"].nullable


def test_got_every_row_from_both_sources(captured):
    _, pymysql_rows, binlog_rows, _ = captured
    assert len(pymysql_rows) == len(ROWS)
    assert len(binlog_rows) == len(ROWS), "did not find all inserted rows in the binlog"
    assert [v["id"] for v, _ in binlog_rows] == [1, 2, 3, 4]


def _assert_rows(actual: list[tuple], expected: list[tuple], label: str) -> None:
    problems = []
    for r, (got, exp) in enumerate(zip(actual, expected)):
        for name, g, e in zip(NAMES, got, exp):
            if g != e or type(g) is not type(e):
                problems.append(f"row {r + 1} column {name}: got {g!r}, expected {e!r}")
    assert not problems, f"{label}:\n" + "\n".join(problems)


def test_snapshot_values(captured):
    schema, pymysql_rows, _, _ = captured
    tc = TableConverter(schema, TypeOptions(), "pymysql")
    _assert_rows([tc.convert_row(r) for r in pymysql_rows], expected_rows(), "pymysql")


def test_binlog_values(captured):
    schema, _, binlog_rows, _ = captured
    tc = TableConverter(schema, TypeOptions(), "binlog")
    got = [tc.convert_row_dict(values, none_sources) for values, none_sources in binlog_rows]
    _assert_rows(got, expected_rows(), "binlog")


def test_binlog_empty_nullable_set_needs_none_sources(captured):
    """python-mysql-replication returns an empty SET as None; only none_sources tells it from NULL."""
    schema, _, binlog_rows, _ = captured
    tc = TableConverter(schema, TypeOptions(), "binlog")
    st = NAMES.index("st")
    values, none_sources = binlog_rows[1]
    assert values["st"] is None and none_sources["st"] == "empty set"
    assert tc.convert_row_dict(values)[st] is None
    assert tc.convert_row_dict(values, none_sources)[st] == ""
    # NULL stays NULL with none_sources too
    values3, none_sources3 = binlog_rows[2]
    assert tc.convert_row_dict(values3, none_sources3)[st] is None


@pytest.mark.parametrize(
    "options",
    OPTION_SETS,
    ids=lambda o: "-".join(
        [
            o.decimal_handling_mode,
            o.time_precision_mode[:7],
            o.bigint_unsigned_handling_mode,
            o.binary_handling_mode,
        ]
    ),
)
def test_both_sources_agree_and_build_identical_batches(captured, options):
    schema, pymysql_rows, binlog_rows, _ = captured
    snap = TableConverter(schema, options, "pymysql")
    binl = TableConverter(schema, options, "binlog")
    a = [snap.convert_row(r) for r in pymysql_rows]
    b = [binl.convert_row_dict(v, ns) for v, ns in binlog_rows]
    _assert_rows(b, a, f"binlog vs pymysql with {options}")

    batch_a = snap.to_record_batch(pymysql_rows)
    # binlog rows: same values re-keyed into column order (empty SET restored from none_sources)
    raw_b = [
        tuple("" if v.get(n) is None and ns.get(n) == "empty set" else v.get(n) for n in NAMES)
        for v, ns in binlog_rows
    ]
    batch_b = binl.to_record_batch(raw_b)
    assert batch_a.schema.equals(snap.arrow_schema, check_metadata=True)
    assert batch_b.schema.equals(binl.arrow_schema, check_metadata=True)
    assert batch_a.equals(batch_b)
    assert pa.Table.from_batches([batch_a]).to_pylist() == [dict(zip(NAMES, r)) for r in a]


@pytest.mark.parametrize(
    "mode, arrow_type, debezium_type, value",
    [
        ("precise", pa.string(), b"string", DEC65_MAX),
        ("string", pa.string(), b"string", DEC65_MAX),
        ("double", pa.float64(), b"float64", float(DEC65_MAX)),
    ],
)
def test_decimal_wider_than_38_digits_per_mode(captured, mode, arrow_type, debezium_type, value):
    """docs/output-layout.md said a DECIMAL above 38 digits is a string "in every mode";
    ``decimal_handling_mode="double"`` makes it a double, as Debezium's ``decimal.handling.mode``
    and docs/configuration.md say. Only ``precise`` cannot hold it (Arrow's decimal128 stops at
    38 digits) and falls back to the exact plain-notation string."""
    schema, pymysql_rows, binlog_rows, _ = captured
    options = TypeOptions(decimal_handling_mode=mode)
    i = NAMES.index("d65")
    snap, binl = TableConverter(schema, options, "pymysql"), TableConverter(schema, options, "binlog")
    for tc in (snap, binl):
        field = tc.arrow_schema.field("d65")
        assert field.type == arrow_type and field.metadata[b"debezium.type"] == debezium_type
        assert field.metadata[b"mysql.type"] == b"decimal(65,30)"
    values, none_sources = binlog_rows[0]
    for got in (snap.convert_row(pymysql_rows[0])[i], binl.convert_row_dict(values, none_sources)[i]):
        assert got == value and type(got) is type(value), got


def test_connect_time_precision_mode(captured):
    """connect mode: DATETIME in ms, DATE days, TIME in ms; TIME outside a day is rejected."""
    schema, pymysql_rows, binlog_rows, _ = captured
    options = TypeOptions(time_precision_mode="connect")
    snap = TableConverter(schema, options, "pymysql")
    binl = TableConverter(schema, options, "binlog")
    # row 3 has NULL TIMEs; row 4 has tm6 = -01:00:00.000001 (out of range) -> only check row 3 fully
    a = snap.convert_row(pymysql_rows[2])
    b = binl.convert_row_dict(*binlog_rows[2])
    assert a == b
    assert a[NAMES.index("dtnn")] == 946684800000
    assert a[NAMES.index("dnn")] == 10957
    for conv, raw in ((snap.convert_row, pymysql_rows[0]), (binl.convert_row_dict, binlog_rows[0][0])):
        with pytest.raises(ValueError, match="adaptive_time_microseconds"):
            conv(raw)  # 838:59:59 cannot be a Kafka Connect Time
    dt6 = snap._converters[NAMES.index("dt6")]
    assert dt6(pymysql_rows[0][NAMES.index("dt6")]) == 1529476623123
    assert binl._converters[NAMES.index("tm6")](binlog_rows[0][0]["tm6"]) == 49023000


def test_plain_select_of_float_loses_digits(captured):
    """Why the snapshot must use select_expression(): the text protocol prints FLOAT with 6 digits."""
    _, pymysql_rows, binlog_rows, plain_float = captured
    f = NAMES.index("f")
    assert binlog_rows[3][0]["f"] == 16777216.0
    assert pymysql_rows[3][f] == 16777216.0  # via (f + 0e0)
    assert plain_float[3] != 16777216.0  # MariaDB sends "16777200"
