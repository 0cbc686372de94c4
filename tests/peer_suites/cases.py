"""The CREATE TABLE / INSERT cases of two peer test suites, and the values their tests state.

Sources (both Apache License 2.0; see README.md in this folder for the exact files and terms):

* python-mysql-replication, ``pymysqlreplication/tests/test_data_type.py`` and ``test_basic.py``:
  one table per test (their tables are all named ``test``; here ``pmr_<test name>``), the
  statements as the tests send them (the JSON documents their tests build with ``json.dumps``
  are built the same way here).
* Debezium's MySQL/binlog connector test DDL (``src/test/resources/ddl/*.sql``) with the
  values its ``*IT`` tests assert (BinlogYearIT, BinlogDecimalIT, BinlogGeometryIT, MySqlFloatIT /
  BinlogFloatIT, BinlogEnumColumnIT, BinlogRegressionIT, BinlogUnsignedIntegerIT, ...).

Statements refer to their table as ``{t}`` (replaced by the quoted name when the case is
created) and to the peer database implicitly (the connection's default database). Adaptations to
MariaDB 10.11 are marked ``MariaDB:`` (e.g. ``CAST(... AS JSON)`` does not exist there).

``stated`` holds the values the peer tests assert, as Debezium values (what the lake holds):
``((row match, {column: value}), ...)``: every lake row whose columns equal ``row match`` must
have those values. ``stated_types``: ``{column: (debezium.type, {parameter: value})}`` the field
metadata must say. ``differs`` documents where this project deliberately differs from a stated
Debezium value (the assertion then uses the project's value; README.md lists them with reasons).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

#: database the case is created in: the main peer database, or the one whose name needs a
#: mapping to Dagster names (Debezium's special_characters_test database is ``special_"[`]$'_db``)
MAIN, DASHED = "main", "dashed"


@dataclass(frozen=True)
class Case:
    source: str
    table: str
    statements: tuple[str, ...]
    database: str = MAIN
    stated: tuple[tuple[dict[str, Any], dict[str, Any]], ...] = ()
    stated_types: dict[str, tuple[str, dict[str, str]]] = field(default_factory=dict)
    differs: tuple[str, ...] = ()


PMR = "python-mysql-replication pymysqlreplication/tests/test_data_type.py::"
PMR_BASIC = "python-mysql-replication pymysqlreplication/tests/test_basic.py::"
DBZ = "debezium "


def _pmr(test: str, create: str, *inserts: str, stated=(), database: str = MAIN) -> Case:
    return Case(PMR + test, "pmr_" + test.removeprefix("test_"), (create, *inserts), database, stated)


def _insert_json(id_: int, document: str) -> str:
    """The tests' ``INSERT INTO test (id, value) VALUES (<id>, '<json.dumps(...)>')``."""
    return "INSERT INTO {t} (id, value) VALUES (" + str(id_) + ", '" + document + "')"


def _json_rows(values: list[Any], wrap: bool) -> tuple[str, ...]:
    return tuple(
        _insert_json(i, json.dumps({"foo": v} if wrap else v)) for i, v in enumerate(values, start=1)
    )


# python-mysql-replication test_json_types / test_json_basic loop over these (2 ^ 14 is Python XOR)
_JSON_TYPES = [True, False, None, 1.2, 2 ^ 14, 2 ^ 30, 2 ^ 62, -1 * 2 ^ 14, -1 * 2 ^ 30, -1 * 2 ^ 62]
_NULL_COLS = ", ".join(f"test{'' if i == 1 else i} TINYINT NULL DEFAULT NULL" for i in range(1, 21))
_BIT_MASK_COLS = ", ".join(
    f"{chr(ord('a') + i)} INT{'' if (0b1101100001 >> i) & 1 else ' NOT NULL'}" for i in range(16)
)

PMR_CASES: list[Case] = [
    _pmr(
        "test_decimal",
        "CREATE TABLE {t} (test DECIMAL(2,1))",
        "INSERT INTO {t} VALUES(4.2)",
        stated=(({}, {"test": Decimal("4.2")}),),
    ),
    _pmr(
        "test_decimal_long_values",
        "CREATE TABLE {t} (test DECIMAL(20,10))",
        "INSERT INTO {t} VALUES(42000.123456)",
        stated=(({}, {"test": Decimal("42000.123456")}),),
    ),
    _pmr(
        "test_decimal_long_values_1",
        "CREATE TABLE {t} (test DECIMAL(20,10))",
        "INSERT INTO {t} VALUES(9000000123.123456)",
        stated=(({}, {"test": Decimal("9000000123.123456")}),),
    ),
    _pmr(
        "test_decimal_long_values_2",
        "CREATE TABLE {t} (test DECIMAL(20,10))",
        "INSERT INTO {t} VALUES(9000000123.0000012345)",
        stated=(({}, {"test": Decimal("9000000123.0000012345")}),),
    ),
    _pmr(
        "test_decimal_negative_values",
        "CREATE TABLE {t} (test DECIMAL(20,10))",
        "INSERT INTO {t} VALUES(-42000.123456)",
        stated=(({}, {"test": Decimal("-42000.123456")}),),
    ),
    _pmr(
        "test_decimal_two_values",
        "CREATE TABLE {t} (test DECIMAL(2,1), test2 DECIMAL(20,10))",
        "INSERT INTO {t} VALUES(4.2, 42000.123456)",
        stated=(({}, {"test": Decimal("4.2"), "test2": Decimal("42000.123456")}),),
    ),
    _pmr(
        "test_decimal_with_zero_scale_1",
        "CREATE TABLE {t} (test DECIMAL(23,0))",
        "INSERT INTO {t} VALUES(10)",
        stated=(({}, {"test": Decimal("10")}),),
    ),
    _pmr(
        "test_decimal_with_zero_scale_2",
        "CREATE TABLE {t} (test DECIMAL(23,0))",
        "INSERT INTO {t} VALUES(12345678912345678912345)",
        stated=(({}, {"test": Decimal("12345678912345678912345")}),),
    ),
    _pmr(
        "test_decimal_with_zero_scale_3",
        "CREATE TABLE {t} (test DECIMAL(23,0))",
        "INSERT INTO {t} VALUES(100000.0)",
        stated=(({}, {"test": Decimal("100000")}),),
    ),
    _pmr(
        "test_decimal_with_zero_scale_4",
        "CREATE TABLE {t} (test DECIMAL(23,0))",
        "INSERT INTO {t} VALUES(-100000.0)",
        stated=(({}, {"test": Decimal("-100000")}),),
    ),
    _pmr(
        "test_decimal_with_zero_scale_6",
        "CREATE TABLE {t} (test DECIMAL(23,0))",
        "INSERT INTO {t} VALUES(-1234567891234567891234)",
        stated=(({}, {"test": Decimal("-1234567891234567891234")}),),
    ),
    _pmr(
        "test_tiny",
        "CREATE TABLE {t} (id TINYINT UNSIGNED NOT NULL, test TINYINT)",
        "INSERT INTO {t} VALUES(255, -128)",
        stated=(({}, {"id": 255, "test": -128}),),
    ),
    _pmr(
        "test_tiny_maps_to_boolean_true",
        "CREATE TABLE {t} (id TINYINT UNSIGNED NOT NULL, test BOOLEAN)",
        "INSERT INTO {t} VALUES(1, TRUE)",
        stated=(({}, {"id": 1, "test": 1}),),
    ),
    _pmr(
        "test_tiny_maps_to_boolean_false",
        "CREATE TABLE {t} (id TINYINT UNSIGNED NOT NULL, test BOOLEAN)",
        "INSERT INTO {t} VALUES(1, FALSE)",
        stated=(({}, {"id": 1, "test": 0}),),
    ),
    _pmr(
        "test_tiny_maps_to_none",
        "CREATE TABLE {t} (id TINYINT UNSIGNED NOT NULL, test BOOLEAN)",
        "INSERT INTO {t} VALUES(1, NULL)",
        stated=(({}, {"id": 1, "test": None}),),
    ),
    _pmr(
        "test_tiny_maps_to_none_2",
        "CREATE TABLE {t} (test BOOLEAN)",
        "INSERT INTO {t} VALUES(NULL)",
        stated=(({}, {"test": None}),),
    ),
    _pmr(
        "test_short",
        "CREATE TABLE {t} (id SMALLINT UNSIGNED NOT NULL, test SMALLINT)",
        "INSERT INTO {t} VALUES(65535, -32768)",
        stated=(({}, {"id": 65535, "test": -32768}),),
    ),
    _pmr(
        "test_long",
        "CREATE TABLE {t} (id INT UNSIGNED NOT NULL, test INT)",
        "INSERT INTO {t} VALUES(4294967295, -2147483648)",
        stated=(({}, {"id": 4294967295, "test": -2147483648}),),
    ),
    _pmr(
        "test_float",
        "CREATE TABLE {t} (id FLOAT NOT NULL, test FLOAT)",
        "INSERT INTO {t} VALUES(42.42, -84.84)",
    ),
    _pmr(
        "test_double",
        "CREATE TABLE {t} (id DOUBLE NOT NULL, test DOUBLE)",
        "INSERT INTO {t} VALUES(42.42, -84.84)",
        stated=(({}, {"id": 42.42, "test": -84.84}),),
    ),
    _pmr(
        "test_timestamp", "CREATE TABLE {t} (test TIMESTAMP)", "INSERT INTO {t} VALUES('1984-12-03 12:33:07')"
    ),
    _pmr(
        "test_timestamp_mysql56",
        "CREATE TABLE {t} (test0 TIMESTAMP(0), test1 TIMESTAMP(1), test2 TIMESTAMP(2), test3 TIMESTAMP(3), "
        "test4 TIMESTAMP(4), test5 TIMESTAMP(5), test6 TIMESTAMP(6))",
        "INSERT INTO {t} VALUES('1984-12-03 12:33:07', '1984-12-03 12:33:07.1', '1984-12-03 12:33:07.12', "
        "'1984-12-03 12:33:07.123', '1984-12-03 12:33:07.1234', '1984-12-03 12:33:07.12345', '1984-12-03 12:33:07.123456')",
    ),
    _pmr(
        "test_longlong",
        "CREATE TABLE {t} (id BIGINT UNSIGNED NOT NULL, test BIGINT)",
        "INSERT INTO {t} VALUES(18446744073709551615, -9223372036854775808)",
        stated=(({}, {"id": Decimal(18446744073709551615), "test": -9223372036854775808}),),
    ),
    _pmr(
        "test_int24",
        "CREATE TABLE {t} (id MEDIUMINT UNSIGNED NOT NULL, test MEDIUMINT, test2 MEDIUMINT, test3 MEDIUMINT, "
        "test4 MEDIUMINT, test5 MEDIUMINT)",
        "INSERT INTO {t} VALUES(16777215, 8388607, -8388608, 8, -8, 0)",
        stated=(
            ({}, {"id": 16777215, "test": 8388607, "test2": -8388608, "test3": 8, "test4": -8, "test5": 0}),
        ),
    ),
    _pmr(
        "test_date",
        "CREATE TABLE {t} (test DATE)",
        "INSERT INTO {t} VALUES('1984-12-03')",
        stated=(({}, {"test": 5450}),),
    ),
    _pmr(
        "test_zero_date",
        "CREATE TABLE {t} (id INTEGER, test DATE, test2 DATE)",
        "INSERT INTO {t} (id, test2) VALUES(1, '0000-01-21')",
        stated=(({}, {"test": None, "test2": None}),),
    ),
    _pmr(
        "test_zero_month",
        "CREATE TABLE {t} (id INTEGER, test DATE, test2 DATE)",
        "INSERT INTO {t} (id, test2) VALUES(1, '2015-00-21')",
        stated=(({}, {"test": None, "test2": None}),),
    ),
    _pmr(
        "test_zero_day",
        "CREATE TABLE {t} (id INTEGER, test DATE, test2 DATE)",
        "INSERT INTO {t} (id, test2) VALUES(1, '2015-05-00')",
        stated=(({}, {"test": None, "test2": None}),),
    ),
    _pmr(
        "test_time",
        "CREATE TABLE {t} (test1 TIME, test2 TIME)",
        "INSERT INTO {t} VALUES('838:59:59', '-838:59:59')",
        stated=(({}, {"test1": 3020399000000, "test2": -3020399000000}),),
    ),
    _pmr(
        "test_time2",
        "CREATE TABLE {t} (test1 TIME(6), test2 TIME(6))",
        "INSERT INTO {t} VALUES('838:59:59.000000', '-838:59:59.000000')",
        stated=(({}, {"test1": 3020399000000, "test2": -3020399000000}),),
    ),
    _pmr(
        "test_zero_time",
        "CREATE TABLE {t} (id INTEGER, test TIME NOT NULL DEFAULT 0)",
        "INSERT INTO {t} (id) VALUES(1)",
        stated=(({}, {"test": 0}),),
    ),
    _pmr(
        "test_datetime",
        "CREATE TABLE {t} (test DATETIME)",
        "INSERT INTO {t} VALUES('1984-12-03 12:33:07')",
        stated=(({}, {"test": 470925187000}),),
    ),
    # a NOT NULL zero DATETIME is the epoch, as Debezium (python-mysql-replication returns None)
    _pmr(
        "test_zero_datetime",
        "CREATE TABLE {t} (id INTEGER, test DATETIME NOT NULL DEFAULT 0)",
        "INSERT INTO {t} (id) VALUES(1)",
        stated=(({}, {"test": 0}),),
    ),
    _pmr(
        "test_broken_datetime",
        "CREATE TABLE {t} (test DATETIME NOT NULL)",
        "INSERT INTO {t} VALUES('2013-00-00 00:00:00')",
        stated=(({}, {"test": 0}),),
    ),
    _pmr(
        "test_year",
        "CREATE TABLE {t} (a YEAR(4), b YEAR)",
        "INSERT INTO {t} VALUES(1984, 1984)",
        stated=(({}, {"a": 1984, "b": 1984}),),
    ),
    _pmr(
        "test_varchar",
        "CREATE TABLE {t} (test VARCHAR(242)) CHARACTER SET latin1 COLLATE latin1_bin",
        "INSERT INTO {t} VALUES('Hello')",
        stated=(({}, {"test": "Hello"}),),
    ),
    _pmr(
        "test_bit",
        "CREATE TABLE {t} (test BIT(6), test2 BIT(16), test3 BIT(12), test4 BIT(9), test5 BIT(64))",
        "INSERT INTO {t} VALUES(b'100010', b'1000101010111000', b'100010101101', b'101100111', "
        "b'1101011010110100100111100011010100010100101110111011101011011010')",
        # Debezium io.debezium.data.Bits: little-endian bytes of the value
        stated=(
            (
                {},
                {
                    "test": (0b100010).to_bytes(1, "little"),
                    "test2": (0b1000101010111000).to_bytes(2, "little"),
                    "test3": (0b100010101101).to_bytes(2, "little"),
                    "test4": (0b101100111).to_bytes(2, "little"),
                    "test5": (0b1101011010110100100111100011010100010100101110111011101011011010).to_bytes(
                        8, "little"
                    ),
                },
            ),
        ),
    ),
    _pmr(
        "test_tiny_blob",
        "CREATE TABLE {t} (test TINYBLOB, test2 TINYTEXT) CHARACTER SET latin1 COLLATE latin1_bin",
        "INSERT INTO {t} VALUES('Hello', 'World')",
        stated=(({}, {"test": b"Hello", "test2": "World"}),),
    ),
    _pmr(
        "test_medium_blob",
        "CREATE TABLE {t} (test MEDIUMBLOB, test2 MEDIUMTEXT) CHARACTER SET latin1 COLLATE latin1_bin",
        "INSERT INTO {t} VALUES('Hello', 'World')",
        stated=(({}, {"test": b"Hello", "test2": "World"}),),
    ),
    _pmr(
        "test_long_blob",
        "CREATE TABLE {t} (test LONGBLOB, test2 LONGTEXT) CHARACTER SET latin1 COLLATE latin1_bin",
        "INSERT INTO {t} VALUES('Hello', 'World')",
        stated=(({}, {"test": b"Hello", "test2": "World"}),),
    ),
    _pmr(
        "test_blob",
        "CREATE TABLE {t} (test BLOB, test2 TEXT) CHARACTER SET latin1 COLLATE latin1_bin",
        "INSERT INTO {t} VALUES('Hello', 'World')",
        stated=(({}, {"test": b"Hello", "test2": "World"}),),
    ),
    _pmr(
        "test_string",
        "CREATE TABLE {t} (test CHAR(12)) CHARACTER SET latin1 COLLATE latin1_bin",
        "INSERT INTO {t} VALUES('Hello')",
        stated=(({}, {"test": "Hello"}),),
    ),
    # a keyless table with a spatial column (issue 26, point 1); SRID 0 is null (point 5)
    _pmr(
        "test_geometry",
        "CREATE TABLE {t} (test GEOMETRY)",
        "INSERT INTO {t} VALUES(ST_GeomFromText('POINT(1 1)'))",
        stated=(
            (
                {},
                {"test": {"wkb": bytes.fromhex("0101000000000000000000f03f000000000000f03f"), "srid": None}},
            ),
        ),
    ),
    _pmr(
        "test_json",
        "CREATE TABLE {t} (id int, value json)",
        """INSERT INTO {t} (id, value) VALUES (1, '{"my_key": "my_val", "my_key2": "my_val2"}')""",
        stated=(({"id": 1}, {"value": '{"my_key": "my_val", "my_key2": "my_val2"}'}),),
    ),
    _pmr(
        "test_json_array",
        "CREATE TABLE {t} (id int, value json)",
        """INSERT INTO {t} (id, value) VALUES (1, '["my_val", "my_val2"]')""",
        stated=(({"id": 1}, {"value": '["my_val", "my_val2"]'}),),
    ),
    _pmr(
        "test_json_large",
        "CREATE TABLE {t} (id int, value json)",
        _insert_json(1, json.dumps({f"foooo{i}": f"baaaaar{i}" for i in range(2560)})),
    ),
    _pmr(
        "test_json_large_array",
        "CREATE TABLE {t} (id int, value json)",
        _insert_json(1, json.dumps({"my_key": list(range(100000))})),
    ),
    _pmr(
        "test_json_large_with_literal",
        "CREATE TABLE {t} (id int, value json)",
        _insert_json(1, json.dumps(dict([(f"foooo{i}", f"baaaaar{i}") for i in range(2560)], literal=True))),
    ),
    Case(
        PMR + "test_json_types",
        "pmr_json_types",
        ("CREATE TABLE {t} (id int, value json)", *_json_rows([*_JSON_TYPES, ["foo", "bar"]], wrap=True)),
    ),
    Case(
        PMR + "test_json_basic",
        "pmr_json_basic",
        ("CREATE TABLE {t} (id int, value json)", *_json_rows(_JSON_TYPES, wrap=False)),
    ),
    _pmr(
        "test_json_unicode",
        "CREATE TABLE {t} (id int, value json)",
        """INSERT INTO {t} (id, value) VALUES (1, '{"miam": "🍔"}')""",
        stated=(({"id": 1}, {"value": '{"miam": "🍔"}'}),),
    ),
    _pmr(
        "test_json_long_string",
        "CREATE TABLE {t} (id int, value json)",
        """INSERT INTO {t} (id, value) VALUES (1, '{"my_key": "%s"}')""" % ("super_long_string" * 100),
    ),
    Case(
        PMR + "test_json_deciaml_time_datetime",
        "json_deciaml_time_datetime_test",
        (
            "CREATE TABLE {t} (id INT PRIMARY KEY AUTO_INCREMENT, json_data JSON)",
            "INSERT INTO {t} (json_data) VALUES (JSON_OBJECT('time_key', CAST('18:54:12' AS TIME), 'datetime_key', "
            "CAST('2023-09-24 18:54:12' AS DATETIME) ,'decimal', CAST('99.99' AS DECIMAL(10, 2))))",
        ),
    ),
    _pmr(
        "test_null",
        f"CREATE TABLE {{t}} ({_NULL_COLS})",
        "INSERT INTO {t} (test, test2, test3, test7, test20) VALUES(NULL, -128, NULL, 42, 84)",
        stated=(({}, {"test": None, "test2": -128, "test3": None, "test7": 42, "test20": 84}),),
    ),
    # MariaDB: the latin-1 byte as a _latin1 literal (the test sends it on a latin1 connection)
    _pmr(
        "test_encoding_latin1",
        "CREATE TABLE {t} (test CHAR(12)) CHARACTER SET latin1 COLLATE latin1_bin",
        "INSERT INTO {t} VALUES(_latin1 x'E9')",
        stated=(({}, {"test": "\u00e9"}),),
    ),
    _pmr(
        "test_encoding_utf8",
        "CREATE TABLE {t} (test CHAR(12)) CHARACTER SET utf8 COLLATE utf8_bin",
        "INSERT INTO {t} VALUES('\u20ac')",
        stated=(({}, {"test": "\u20ac"}),),
    ),
    _pmr(
        "test_partition_id",
        "CREATE TABLE {t} (id INTEGER) PARTITION BY RANGE (id) (PARTITION p0 VALUES LESS THAN (1), "
        "PARTITION p1 VALUES LESS THAN (2), PARTITION p2 VALUES LESS THAN (3), PARTITION p3 VALUES LESS THAN (4), "
        "PARTITION p4 VALUES LESS THAN (5))",
        "INSERT INTO {t} (id) VALUES(3)",
        stated=(({}, {"id": 3}),),
    ),
    _pmr(
        "test_null_bitmask",
        f"CREATE TABLE {{t}} ({_BIT_MASK_COLS})",
        "INSERT INTO {t} VALUES (" + ",".join(["0"] * 16) + ")",
    ),
    _pmr(
        "test_varbinary",
        "CREATE TABLE {t}(b VARBINARY(4))",
        "INSERT INTO {t} VALUES(UNHEX('ff010000'))",
        stated=(({}, {"b": b"\xff\x01\x00\x00"}),),
    ),
    Case(
        PMR_BASIC + "test_write_row_event",
        "pmr_basic_test",
        (
            "CREATE TABLE {t} (id INT NOT NULL AUTO_INCREMENT, data VARCHAR (50) NOT NULL, PRIMARY KEY (id))",
            "INSERT INTO {t} (data) VALUES('Hello World')",
            "INSERT INTO {t} (data) VALUES('Hello'),('World')",
        ),
        stated=(({"id": 1}, {"data": "Hello World"}), ({"id": 3}, {"data": "World"})),
    ),
    # the table and column names of test_read_query_event_with_unicode (in the database whose name
    # needs a Dagster mapping)
    Case(
        PMR_BASIC + "test_read_query_event_with_unicode",
        "testÈ",
        (
            "CREATE TABLE {t} (id INT NOT NULL AUTO_INCREMENT, dataÈ VARCHAR (50) NOT NULL, PRIMARY KEY (id))",
            "INSERT INTO {t} (dataÈ) VALUES('Hello World')",
        ),
        database=DASHED,
        stated=(({"id": 1}, {"dataÈ": "Hello World"}),),
    ),
    Case(
        PMR_BASIC + "test_drop_column",
        "test_drop_column",
        (
            "CREATE TABLE {t} (id INTEGER(11), data VARCHAR(50))",
            "INSERT INTO {t} VALUES (1, 'A value')",
            "ALTER TABLE {t} DROP COLUMN data",
            "INSERT INTO {t} VALUES (2)",
        ),
        stated=(({"id": 2}, {}),),
    ),
    Case(
        PMR_BASIC + "test_alter_column",
        "test_alter_column",
        (
            "CREATE TABLE {t} (id INTEGER(11), data VARCHAR(50))",
            "INSERT INTO {t} VALUES (1, 'A value')",
            "ALTER TABLE {t} ADD COLUMN another_data VARCHAR(50) AFTER id",
            "INSERT INTO {t} VALUES (2, 'Another value', 'A value')",
        ),
        stated=(
            ({"id": 1}, {"data": "A value", "another_data": None}),
            ({"id": 2}, {"another_data": "Another value"}),
        ),
    ),
]


# -- Debezium ------------------------------------------------------------------------------------

_ENUM_ALLOWED = "station,post_office,plane,ahihi_dongok,now,test,a\\,b,c\\,'d,g\\,'h"
_DBZ_JSON = [  # json_test.sql rows whose JSON is a literal (MariaDB has no CAST(... AS JSON)); the
    # table's expectedJdbcStr column is what JDBC reads back: on MariaDB the stored text
    ("NULL", "NULL"),
    ("'{\"a\": 2}'", "'{\"a\": 2}'"),
    ("'[1, 2]'", "'[1, 2]'"),
    ('\'{"key1": "value1", "key2": "value2"}\'', '\'{"key1": "value1", "key2": "value2"}\''),
    ('\'["a", "b",1]\'', '\'["a", "b",1]\''),
    (
        '\'{"k1": "v1", "k2": {"k21": "v21", "k22": "v22"}, "k3": ["a", "b", 1]}\'',
        '\'{"k1": "v1", "k2": {"k21": "v21", "k22": "v22"}, "k3": ["a", "b", 1]}\'',
    ),
    (
        '\'{"a": "b", "c": "d", "ab": "abc", "bc": ["x", "y"]}\'',
        '\'{"a": "b", "c": "d", "ab": "abc", "bc": ["x", "y"]}\'',
    ),
    ('\'["here", ["I", "am"], "!!!"]\'', '\'["here", ["I", "am"], "!!!"]\''),
    ("'\"scalar string\"'", "'\"scalar string\"'"),
    ("'true'", "'true'"),
    ("'false'", "'false'"),
    ("'null'", "'null'"),
    ("'-1'", "'-1'"),
    ("'32767'", "'32767'"),
    ("'32768'", "'32768'"),
    ("'-32768'", "'-32768'"),
    ("'2147483647'", "'2147483647'"),
    ("'2147483648'", "'2147483648'"),
    ("'-2147483648'", "'-2147483648'"),
    ("'-2147483649'", "'-2147483649'"),
    ("'18446744073709551615'", "'18446744073709551615'"),
    ("'18446744073709551616'", "'18446744073709551616'"),
    ("'3.14'", "'3.14'"),
    ("'{}'", "'{}'"),
    ("'[]'", "'[]'"),
    ("CAST('[]' AS CHAR CHARACTER SET 'ascii')", "'[]'"),
]
# issue 26, point 3: MariaDB's JSON text as stored (numbers keep every digit, duplicate keys stay)
_JSON_TEXT = [
    '{"pi": 3.141592653589793238462643383279}',
    '{"big": 12345678901234567890.5}',
    '{"huge": 1e400}',
    '{"a": 1, "a": 2}',
]

DBZ_CASES: list[Case] = [
    Case(
        DBZ + "ddl/year_test.sql (BinlogYearIT)",
        "dbz_1143_year_test",
        (
            "CREATE TABLE {t} (id INT AUTO_INCREMENT NOT NULL, y18 YEAR, y0018 YEAR, y2018 YEAR, d18 DATE, d0018 DATE, "
            "d2018 DATE, dt18 DATETIME, dt0018 DATETIME, dt2018 DATETIME, y78 YEAR, y0078 YEAR, y1978 YEAR, d78 DATE, "
            "d0078 DATE, d1978 DATE, dt78 DATETIME, dt0078 DATETIME, dt1978 DATETIME, PRIMARY KEY (id)) DEFAULT CHARSET=utf8",
            "INSERT INTO {t} VALUES (default, '18', '0018', '2018', '18-04-01', '0018-04-01', '2018-04-01', "
            "'18-04-01 12:34:56', '0018-04-01 12:34:56', '2018-04-01 12:34:56', '78', '0078', '1978', '78-04-01', "
            "'0078-04-01', '1978-04-01', '78-04-01 12:34:56', '0078-04-01 12:34:56', '1978-04-01 12:34:56')",
        ),
        stated=(
            (
                {"id": 1},
                {  # shouldProcessTwoAndForDigitYearsInConnector: enable.time.adjuster=true
                    "y18": 2018,
                    "y0018": 2018,
                    "y2018": 2018,
                    "d18": 17622,
                    "d0018": 17622,
                    "d2018": 17622,
                    "dt18": 1_522_586_096_000,
                    "dt0018": 1_522_586_096_000,
                    "dt2018": 1_522_586_096_000,
                    "y78": 1978,
                    "y0078": 1978,
                    "y1978": 1978,
                    "d78": 3012,
                    "d0078": 3012,
                    "d1978": 3012,
                    "dt78": 260_282_096_000,
                    "dt0078": 260_282_096_000,
                    "dt1978": 260_282_096_000,
                },
            ),
        ),
    ),
    Case(
        DBZ + "BinlogYearIT.shouldPreserveZeroYearsAndDefaults (dbz#2757)",
        "zero_year",
        (
            "CREATE TABLE {t} (id INT PRIMARY KEY, y YEAR NULL DEFAULT 0, quoted_year YEAR DEFAULT '0')",
            "INSERT INTO {t} (id, y) VALUES (1, 0), (2, '0'), (3, 1901), (4, 2155), (5, NULL)",
        ),
        stated=tuple(
            ({"id": i}, {"y": y, "quoted_year": 2000})
            for i, y in ((1, 0), (2, 2000), (3, 1901), (4, 2155), (5, None))
        ),
    ),
    Case(
        DBZ + "ddl/decimal_test.sql (BinlogDecimalIT)",
        "DBZ730",
        (
            "CREATE TABLE {t} (id INT NOT NULL PRIMARY KEY AUTO_INCREMENT, A NUMERIC(3, 2) NOT NULL DEFAULT 1.23, "
            "B DECIMAL(4, 3) NOT NULL DEFAULT 2.321, C NUMERIC(7, 5) NULL DEFAULT '12.678', "
            "D NUMERIC(7, 5) NULL DEFAULT '15.28', E DECIMAL(65, 18) NULL DEFAULT '0.000000000000000000') "
            "ENGINE=InnoDB AUTO_INCREMENT=15851 DEFAULT CHARSET=utf8",
            "INSERT INTO {t}(A, B, C, D) VALUES (1.33, -2.111 , 3.444, NULL)",
        ),
        stated=(
            (
                {},
                {
                    "A": Decimal("1.33"),
                    "B": Decimal("-2.111"),
                    "C": Decimal("3.44400"),
                    "D": None,
                    "E": "0.000000000000000000",
                },
            ),
        ),
        # issue 26, point 7: DECIMAL(65,18) is held as a string (Delta decimals stop at 38 digits)
        stated_types={"A": ("bytes", {"scale": "2", "connect.decimal.precision": "3"}), "E": ("string", {})},
        differs=(
            "E: Debezium's precise mode gives a BigDecimal; the lake holds the exact value as a plain-notation "
            "string (Arrow/Spark decimals stop at 38 digits), typed string in the field metadata",
        ),
    ),
    Case(
        DBZ + "ddl/geometry_test_5.sql (BinlogGeometryIT, MariaDB)",
        "dbz_222_point",
        (
            "CREATE TABLE {t} (id INT AUTO_INCREMENT NOT NULL, point POINT DEFAULT NULL, expected_x FLOAT, "
            "expected_y FLOAT, expected_srid INT, PRIMARY KEY (id)) DEFAULT CHARSET=utf8",
            "INSERT INTO {t} VALUES (default,ST_GeomFromText('POINT(1 1)'), 1.0, 1.0, NULL)",
            "INSERT INTO {t} VALUES (default,ST_GeomFromText('POINT(8.25554554 3.22124447)', 4326), 8.25554554, 3.22124447, 4326)",
            "INSERT INTO {t} VALUES (default,ST_GeomFromText('POINT(0 0)', 1234), 0.0, 0.0, 1234)",
            "INSERT INTO {t} VALUES (default,NULL, NULL, NULL, NULL)",
        ),
        stated=(
            (
                {"id": 1},
                {"point": {"wkb": bytes.fromhex("0101000000000000000000F03F000000000000F03F"), "srid": None}},
            ),
            (
                {"id": 3},
                {"point": {"wkb": bytes.fromhex("010100000000000000000000000000000000000000"), "srid": 1234}},
            ),
            ({"id": 4}, {"point": None}),
        ),
    ),
    Case(
        DBZ + "ddl/geometry_test_5.sql (BinlogGeometryIT, MariaDB)",
        "dbz_507_geometry",
        (
            "CREATE TABLE {t} (id INT NOT NULL, geom GEOMETRY, linestring LINESTRING, polygon POLYGON, "
            "collection GEOMETRYCOLLECTION, PRIMARY KEY (id))",
            "INSERT INTO {t} VALUES (1, ST_GeomFromText('POINT(1 1)', 4326), ST_GeomFromText('LINESTRING(0 0, 1 1)', 3187), "
            "ST_GeomFromText('POLYGON((0 0, 1 1, 1 0, 0 0))'), "
            "ST_GeomFromText('GEOMETRYCOLLECTION(POINT(1 1), LINESTRING(0 0, 1 1))', 4326))",
            "INSERT INTO {t} VALUES (2, ST_GeomFromText('LINESTRING(0 0, 1 1)'), NULL, NULL, NULL)",
        ),
        stated=(
            (
                {"id": 1},
                {
                    "geom": {
                        "srid": 4326,
                        "wkb": bytes.fromhex("0101000000000000000000F03F000000000000F03F"),
                    },
                    "linestring": {
                        "srid": 3187,
                        "wkb": bytes.fromhex(
                            "01020000000200000000000000000000000000000000000000000000000000F03F000000000000F03F"
                        ),
                    },
                    "polygon": {
                        "srid": None,
                        "wkb": bytes.fromhex(
                            "0103000000010000000400000000000000000000000000000000000000000000000000F03F000000000000F03F"
                            "000000000000F03F000000000000000000000000000000000000000000000000"
                        ),
                    },
                    "collection": {
                        "srid": 4326,
                        "wkb": bytes.fromhex(
                            "0107000000020000000101000000000000000000F03F000000000000F03F010200000002000000000000000000"
                            "00000000000000000000000000000000F03F000000000000F03F"
                        ),
                    },
                },
            ),
            (
                {"id": 2},
                {
                    "geom": {
                        "srid": None,
                        "wkb": bytes.fromhex(
                            "01020000000200000000000000000000000000000000000000000000000000F03F000000000000F03F"
                        ),
                    },
                    "linestring": None,
                    "polygon": None,
                    "collection": None,
                },
            ),
        ),
    ),
    Case(
        DBZ + "ddl/float_test.sql + MySqlFloatIT DBZ3865_2 (BinlogFloatIT)",
        "DBZ3865",
        (
            "CREATE TABLE {t} (`id` INT NOT NULL AUTO_INCREMENT, `f1` FLOAT DEFAULT 5.6, `f2` FLOAT(10, 2) DEFAULT NULL, "
            "`f3` FLOAT(35, 5) DEFAULT NULL, `f4_23` FLOAT(23) DEFAULT NULL, `f4_24` FLOAT(24) DEFAULT NULL, "
            "`f4_25` FLOAT(25) DEFAULT NULL, `weight` FLOAT UNSIGNED DEFAULT '0', PRIMARY KEY (`ID`)) "
            "ENGINE=InnoDB AUTO_INCREMENT=1 DEFAULT CHARSET=utf8mb4",
            "INSERT INTO {t}(f1, f2, f3, f4_23, f4_24, f4_25, weight) VALUE (5.6, 5.61, 30.123456, 64.1, 64.1, 64.1, 64.1234)",
        ),
        stated=(
            (
                {},
                {  # float32 values as Java's (float) casts give them; FLOAT(M,D) is FLOAT64 of that float
                    "f1": 5.599999904632568,
                    "f2": 5.610000133514404,
                    "f3": 30.123460769653320,
                    "f4_23": 64.0999984741211,
                    "f4_24": 64.0999984741211,
                    "f4_25": 64.1,
                    "weight": 64.12339782714844,
                },
            ),
        ),
        stated_types={
            "f1": ("float32", {}),
            "f2": ("float64", {}),
            "f3": ("float64", {}),
            "f4_23": ("float32", {}),
            "f4_24": ("float32", {}),
            "f4_25": ("float64", {}),
            "weight": ("float32", {}),
        },
    ),
    Case(
        DBZ + "ddl/enum_column_test.sql (BinlogEnumColumnIT)",
        "test_stations_10",
        (
            "CREATE TABLE {t} (`id` int(10) unsigned NOT NULL AUTO_INCREMENT, `name` varchar(500) COLLATE utf8_unicode_ci NOT NULL, "
            "`type` enum('station', 'post_office') COLLATE utf8_unicode_ci NOT NULL DEFAULT 'station', "
            "`created` datetime DEFAULT CURRENT_TIMESTAMP, `modified` datetime DEFAULT CURRENT_TIMESTAMP ON UPDATE CURRENT_TIMESTAMP, "
            "PRIMARY KEY (`id`))",
            "INSERT INTO {t} (`name`, `type`) values ( 'ha Tinh 7', 'station' )",
            "ALTER TABLE {t} MODIFY COLUMN `type` ENUM('station', 'post_office', 'plane', 'ahihi_dongok', 'now', 'test', "
            "'a,b', 'c,\\'d', 'g,''h') CHARACTER SET 'utf8' COLLATE 'utf8_unicode_ci' NOT NULL DEFAULT 'station'",
            "INSERT INTO {t} ( `name`, `type` ) values ( 'Ha Tinh 1', 'now' )",
            "INSERT INTO {t} ( `name`, `type` ) values ( 'comma', 'a,b' ), ( 'quote', 'c,''d' )",
        ),
        stated=(
            ({"name": "Ha Tinh 1"}, {"type": "now"}),
            ({"name": "comma"}, {"type": "a,b"}),
            ({"name": "quote"}, {"type": "c,'d"}),
        ),
        stated_types={"type": ("string", {"allowed": _ENUM_ALLOWED})},
    ),
    # the table and column of special_characters_test.sql, in the database whose name needs mapping
    Case(
        DBZ + "ddl/special_characters_test.sql (BinlogSpecialCharactersIT)",
        "special\"[`]$'",
        (
            "CREATE TABLE {t} (`special\"[``$]'_id` INT AUTO_INCREMENT NOT NULL, `value` INT NOT NULL, "
            "PRIMARY KEY (`special\"[``$]'_id`))",
            "INSERT INTO {t} VALUES (default, 123)",
        ),
        database=DASHED,
        stated=(({"value": 123}, {"special\"[`$]'_id": 1}),),
    ),
    Case(
        "issue 26 (names MySQL accepts)",
        "Ünïcode",
        ("CREATE TABLE {t} (id INT PRIMARY KEY, v VARCHAR(10))", "INSERT INTO {t} VALUES (1, 'ü')"),
        database=DASHED,
        stated=(({"id": 1}, {"v": "ü"}),),
    ),
    Case(
        "issue 26 (names MySQL accepts)",
        "tbl space",
        ("CREATE TABLE {t} (id INT PRIMARY KEY, `col space` INT)", "INSERT INTO {t} VALUES (1, 2)"),
        database=DASHED,
        stated=(({"id": 1}, {"col space": 2}),),
    ),
    Case(
        "issue 26 (names MySQL accepts)",
        "a/b..c",
        ("CREATE TABLE {t} (id INT PRIMARY KEY)", "INSERT INTO {t} VALUES (7)"),
        database=DASHED,
        stated=(({"id": 7}, {}),),
    ),
    Case(
        "issue 26 (names MySQL accepts)",
        "a-b",
        ("CREATE TABLE {t} (id INT PRIMARY KEY)", "INSERT INTO {t} VALUES (1)"),
    ),
    Case(
        "issue 26 (names MySQL accepts)",
        "a_b",
        ("CREATE TABLE {t} (id INT PRIMARY KEY)", "INSERT INTO {t} VALUES (2)"),
    ),
    Case(
        "issue 26, point 3 (MariaDB JSON as stored)",
        "json_text",
        (
            "CREATE TABLE {t} (id INT PRIMARY KEY, j JSON)",
            *(f"INSERT INTO {{t}} VALUES ({i}, '{v}')" for i, v in enumerate(_JSON_TEXT, start=1)),
        ),
        stated=tuple(({"id": i}, {"j": v}) for i, v in enumerate(_JSON_TEXT, start=1)),
    ),
    Case(
        DBZ + "ddl/json_test.sql (BinlogJsonIT; literal rows)",
        "dbz_126_jsontable",
        (
            "CREATE TABLE {t} (id INT AUTO_INCREMENT NOT NULL, json JSON, expectedJdbcStr VARCHAR(256), "
            "expectedBinlogStr VARCHAR(256), PRIMARY KEY(id)) DEFAULT CHARSET=utf8",
            *(f"INSERT INTO {{t}} VALUES (default, {j}, {e}, NULL)" for j, e in _DBZ_JSON),
        ),
    ),
    # -- regression_test.sql (BinlogRegressionIT) --
    Case(
        DBZ + "ddl/regression_test.sql DBZ-61 (BinlogRegressionIT)",
        "t1464075356413_testtable6",
        (
            "CREATE TABLE {t} (pk_column int auto_increment NOT NULL, varbinary_col varbinary(20) NOT NULL, PRIMARY KEY(pk_column))",
            "INSERT INTO {t} (pk_column, varbinary_col) VALUES(default, 0x4D7953514C)",
        ),
        stated=(({}, {"varbinary_col": b"MySQL"}),),
    ),
    Case(
        DBZ + "ddl/regression_test.sql DBZ-84 (BinlogRegressionIT)",
        "dbz84_integer_types_table",
        (
            "CREATE TABLE {t} (colTinyIntA tinyint NOT NULL DEFAULT 100, colTinyIntB tinyint(1) NOT NULL DEFAULT 101, "
            "colTinyIntC tinyint(2) UNSIGNED NOT NULL DEFAULT 102, colTinyIntD tinyint(3) UNSIGNED NOT NULL DEFAULT 103, "
            "colSmallIntA smallint NOT NULL DEFAULT 200, colSmallIntB smallint(1) NOT NULL DEFAULT 201, "
            "colSmallIntC smallint(2) NOT NULL DEFAULT 201, colSmallIntD smallint(3) NOT NULL DEFAULT 201, "
            "colMediumIntA mediumint NOT NULL DEFAULT 300, colMediumIntB mediumint(1) NOT NULL DEFAULT 301, "
            "colMediumIntC mediumint(2) NOT NULL DEFAULT 302, colMediumIntD mediumint(3) NOT NULL DEFAULT 303, "
            "colIntA int NOT NULL DEFAULT 400, colIntB int(1) NOT NULL DEFAULT 401, colIntC int(2) NOT NULL DEFAULT 402, "
            "colIntD int(3) NOT NULL DEFAULT 403, colBigIntA bigint NOT NULL DEFAULT 500, colBigIntB bigint(1) NOT NULL DEFAULT 501, "
            "colBigIntC bigint(2) NOT NULL DEFAULT 502, colBigIntD bigint(3) NOT NULL DEFAULT 503)",
            "INSERT INTO {t} VALUES(127,-128,128,255, default,201,202,203, default,301,302,303, default,401,402,403, default,501,502,503)",
        ),
        stated=(
            (
                {},
                {
                    "colTinyIntA": 127,
                    "colTinyIntB": -128,
                    "colTinyIntC": 128,
                    "colTinyIntD": 255,
                    "colSmallIntA": 200,
                    "colBigIntD": 503,
                },
            ),
        ),
    ),
    Case(
        DBZ + "ddl/regression_test.sql DBZ-85 (BinlogRegressionIT)",
        "dbz_85_fractest",
        (
            "CREATE TABLE {t} (c1 DATE, c2 TIME(2), c3 DATETIME(2), c4 TIMESTAMP(2))",
            "INSERT INTO {t} VALUES ('2014-09-08', '17:51:04.777', '2014-09-08 17:51:04.777', '2014-09-08 17:51:04.777')",
        ),
        # MariaDB stores .777 in TIME(2)/DATETIME(2) as .77: it truncates the fraction beyond the
        # column's precision, MySQL rounds it to .78 (the value the IT states for MySQL)
        stated=(({}, {"c1": 16321, "c2": 64_264_770_000, "c3": 1_410_198_664_770}),),
        differs=("c2, c3: .77 on MariaDB (it truncates the stored fraction), .78 on MySQL",),
    ),
    Case(
        DBZ + "ddl/regression_test.sql DBZ-100 (BinlogRegressionIT)",
        "dbz_100_enumsettest",
        (
            "CREATE TABLE {t} (c1 enUM('a','b','c'), c2 Set('a','b','c'))",
            "INSERT INTO {t} VALUES ('a', 'a,b,c')",
            "INSERT INTO {t} VALUES ('b', 'b,a')",
            "INSERT INTO {t} VALUES ('c', 'a')",
        ),
        stated=(({"c1": "a"}, {"c2": "a,b,c"}), ({"c1": "b"}, {"c2": "a,b"}), ({"c1": "c"}, {"c2": "a"})),
    ),
    Case(
        DBZ + "ddl/regression_test.sql DBZ-102 (BinlogRegressionIT)",
        "dbz_102_charsettest",
        (
            "CREATE TABLE {t} (id INT(11) NOT NULL AUTO_INCREMENT, text VARCHAR(255) DEFAULT NULL, PRIMARY KEY (`id`)) "
            "ENGINE=InnoDB AUTO_INCREMENT=2001 DEFAULT CHARSET=utf8",
            'INSERT INTO {t} VALUES (default, "产品")',
        ),
        stated=(({}, {"text": "产品"}),),
    ),
    Case(
        DBZ + "ddl/regression_test.sql DBZ-114 (BinlogRegressionIT)",
        "dbz_114_zerovaluetest",
        (
            "CREATE TABLE {t} (c1 DATE, c2 TIME(2), c3 DATETIME(2), c4 TIMESTAMP(2))",
            "INSERT IGNORE INTO {t} VALUES ('0000-00-00', '00:00:00.000', '0000-00-00 00:00:00.000', '0000-00-00 00:00:00.000')",
            "INSERT IGNORE INTO {t} VALUES ('0001-00-00', '00:01:00.000', '0001-00-00 00:00:00.000', '0001-00-00 00:00:00.000')",
        ),
        stated=(
            ({"c2": 0}, {"c1": None, "c3": None, "c4": None}),
            ({"c2": 60_000_000}, {"c1": None, "c3": None, "c4": None}),
        ),
        differs=(
            "c4: a zero TIMESTAMP in a nullable column is null here (Debezium: 1970-01-01T00:00:00Z); "
            "Debezium's own rule for zero dates (null when the column allows it) applied to TIMESTAMP too",
        ),
    ),
    Case(
        DBZ + "ddl/regression_test.sql DBZ-1318 (BinlogRegressionIT)",
        "dbz_1318_zerovaluetest",
        (
            "CREATE TABLE {t} (c1 DATE, c2 TIME(2), c3 DATETIME(2), c4 TIMESTAMP(2), nnc1 DATE NOT NULL, "
            "nnc2 TIME(2) NOT NULL, nnc3 DATETIME(2) NOT NULL)",
            "SET sql_mode='ONLY_FULL_GROUP_BY,STRICT_TRANS_TABLES,ERROR_FOR_DIVISION_BY_ZERO,NO_ENGINE_SUBSTITUTION'",
            "INSERT IGNORE INTO {t} VALUES ('0000-00-00', '00:00:00.000', '0000-00-00 00:00:00.000', '0000-00-00 00:00:00.000', "
            "'0000-00-00', '00:00:00.000', '0000-00-00 00:00:00.000')",
            "INSERT IGNORE INTO {t} VALUES ('0001-00-00', '00:01:00.000', '0000-00-00 14:02:10.000', '0000-00-00 14:02:10.000', "
            "'0001-00-00', '00:01:00.000', '0000-00-00 14:02:10.000')",
            "SET sql_mode=''",
        ),
        stated=(
            ({"c2": 0}, {"c1": None, "c3": None, "c4": None, "nnc1": 0, "nnc2": 0, "nnc3": 0}),
            (
                {"c2": 60_000_000},
                {"c1": None, "c3": None, "c4": None, "nnc1": 0, "nnc2": 60_000_000, "nnc3": 0},
            ),
        ),
        differs=("c4: null here, Debezium 1970-01-01T00:00:00.00Z (a nullable zero TIMESTAMP, as DBZ-114)",),
    ),
    Case(
        DBZ + "ddl/regression_test.sql DBZ-123 (BinlogRegressionIT)",
        "dbz_123_bitvaluetest",
        (
            "CREATE TABLE {t} (c1 BIT, c2 BIT(2), c3 BIT(8) NOT NULL, c4 BIT(64))",
            "INSERT INTO {t} VALUES (1,2,64,23989979)",
            "INSERT INTO {t} VALUES (b'1',b'10',b'01000000',b'1011011100000111011011011')",
        ),
        stated=(
            (
                {},
                {"c1": True, "c2": bytes([2]), "c3": bytes([64]), "c4": bytes([219, 14, 110, 1, 0, 0, 0, 0])},
            ),
        ),
    ),
    Case(
        DBZ + "ddl/regression_test.sql DBZ-104 (connector_test.customers)",
        "connector_test_customers",
        (
            "CREATE TABLE {t} (id INTEGER NOT NULL AUTO_INCREMENT PRIMARY KEY, first_name VARCHAR(255) NOT NULL, "
            "last_name VARCHAR(255) NOT NULL, email VARCHAR(255) NOT NULL UNIQUE KEY) AUTO_INCREMENT=1001",
            'INSERT INTO {t} VALUES (default,"Sally","Thomas","sally.thomas@acme.com"), '
            '(default,"George","Bailey","gbailey@foobar.com"), (default,"Edward","Walker","ed@walker.com"), '
            '(default,"Anne","Kretchmar","annek@noanswer.org")',
        ),
    ),
    Case(
        DBZ + "ddl/regression_test.sql DBZ-104 (BinlogRegressionIT)",
        "dbz_104_customers",
        (
            "CREATE TABLE {t} LIKE connector_test_customers",
            "INSERT INTO {t} SELECT * FROM connector_test_customers",
        ),
        stated=(({"id": 1001}, {"first_name": "Sally", "email": "sally.thomas@acme.com"}),),
    ),
    Case(
        DBZ + "ddl/regression_test.sql DBZ-147 (BinlogRegressionIT)",
        "dbz_147_decimalvalues",
        (
            "CREATE TABLE {t} (pk_column int auto_increment NOT NULL, decimal_value decimal(7,2) NOT NULL, PRIMARY KEY(pk_column))",
            "INSERT INTO {t} (pk_column, decimal_value) VALUES(default, 12345.67)",
        ),
        stated=(({}, {"decimal_value": Decimal("12345.67")}),),
    ),
    Case(
        DBZ + "ddl/regression_test.sql DBZ-195 (BinlogRegressionIT)",
        "dbz_195_numvalues",
        (
            "CREATE TABLE {t} (id int auto_increment NOT NULL, `search_version_read` int(11) NOT NULL DEFAULT '0', "
            "PRIMARY KEY (`id`)) ENGINE=InnoDB AUTO_INCREMENT=4972 DEFAULT CHARSET=utf8",
            "INSERT INTO {t} VALUES (default,0)",
            "INSERT INTO {t} VALUES (default,-2147483648)",
            "INSERT INTO {t} VALUES (default,2147483647)",
        ),
        stated=(({"id": 4973}, {"search_version_read": -2147483648}),),
    ),
    Case(
        DBZ + "ddl/regression_test.sql DBZ-342 (BinlogRegressionIT)",
        "dbz_342_timetest",
        (
            "CREATE TABLE {t} (c1 TIME(2), c2 TIME(0), c3 TIME(3), c4 TIME(3), c5 TIME(6), c6 TIME(6), c7 TIME(6), "
            "c8 TIME(6), c9 TIME(6), c10 TIME(6), c11 TIME(6))",
            "INSERT INTO {t} VALUES ('517:51:04.777', '-13:14:50', '-733:00:00.0011', '-1:59:59.0011', '-838:59:58.999999', "
            "'-00:20:38.000000', '-01:01:01.000001', '-01:01:01.000000', '-01:01:00.000000', '-01:00:00.000000', "
            "'-00:00:00.000000')",
        ),
        stated=(
            (
                {},
                {
                    "c1": 1_864_264_770_000,  # MariaDB truncates .777 to .77 (MySQL: .78)
                    "c2": -47_690_000_000,
                    "c3": -2_638_800_001_000,
                    "c4": -7_199_001_000,
                    "c5": -3_020_398_999_999,
                    "c6": -1_238_000_000,
                    "c7": -3_661_000_001,
                    "c8": -3_661_000_000,
                    "c9": -3_660_000_000,
                    "c10": -3_600_000_000,
                    "c11": 0,
                },
            ),
        ),
    ),
    # -- unsigned_integer_test.sql (BinlogUnsignedIntegerIT) --
    *(
        Case(
            DBZ + "ddl/unsigned_integer_test.sql (BinlogUnsignedIntegerIT)",
            name,
            (
                f"CREATE TABLE {{t}} (id int auto_increment NOT NULL, c1 {ty} UNSIGNED ZEROFILL NOT NULL, "
                f"c2 {ty} UNSIGNED NOT NULL, c3 {ty} NOT NULL, PRIMARY KEY (`id`)) ENGINE=InnoDB DEFAULT CHARSET=utf8",
                *(f"INSERT INTO {{t}} VALUES (default, {a}, {a}, {b})" for a, b in rows),
            ),
            stated=tuple(
                ({"id": i}, {"c1": u(a), "c2": u(a), "c3": b}) for i, (a, b) in enumerate(rows, start=1)
            ),
        )
        # BIGINT UNSIGNED: bigint.unsigned.handling.mode=precise (the project's default) gives Decimal(20,0)
        for name, ty, rows, u in (
            ("dbz_228_tinyint_unsigned", "TINYINT(3)", ((255, 127), (155, -100), (0, -128)), int),
            ("dbz_228_smallint_unsigned", "SMALLINT", ((65535, 32767), (45535, -12767), (0, -32768)), int),
            (
                "dbz_228_mediumint_unsigned",
                "MEDIUMINT",
                ((16777215, 8388607), (10777215, -6388607), (0, -8388608)),
                int,
            ),
            (
                "dbz_integer_unsigned",
                "INTEGER(11)",
                ((4294967295, 2147483647), (3294967295, -1147483647), (0, -2147483648)),
                int,
            ),
            (
                "dbz_228_bigint_unsigned",
                "BIGINT",
                (
                    (18446744073709551615, 9223372036854775807),
                    (14446744073709551615, -1223372036854775807),
                    (0, -9223372036854775808),
                ),
                Decimal,
            ),
        )
    ),
    Case(
        DBZ + "ddl/unsigned_integer_test.sql (BinlogUnsignedIntegerIT)",
        "dbz_228_int_unsigned",
        (
            "CREATE TABLE {t} (id int auto_increment NOT NULL, c1 int(11) UNSIGNED ZEROFILL NOT NULL, c2 int(11) UNSIGNED NOT NULL, "
            "c3 int(11) NOT NULL, c4 int(5) UNSIGNED ZEROFILL NOT NULL, c5 int(5) UNSIGNED NOT NULL , c6 int(5) NOT NULL, "
            "PRIMARY KEY (`id`)) ENGINE=InnoDB DEFAULT CHARSET=utf8",
            "INSERT INTO {t} VALUES (default, 4294967295, 4294967295, 2147483647, 4294967295, 4294967295, 2147483647)",
            "INSERT INTO {t} VALUES (default, 3294967295, 3294967295, -1147483647, 3294967295, 3294967295, -1147483647)",
            "INSERT INTO {t} VALUES (default, 0, 0, -2147483648, 0, 0, -2147483648)",
        ),
        stated=(({"id": 1}, {"c1": 4294967295, "c3": 2147483647, "c4": 4294967295, "c6": 2147483647}),),
    ),
    Case(
        DBZ + "ddl/unsigned_integer_test.sql DBZ-1185 (BinlogUnsignedIntegerIT)",
        "dbz_1185_serial",
        (
            "CREATE TABLE {t} (id SERIAL NOT NULL, PRIMARY KEY (`id`)) ENGINE=InnoDB DEFAULT CHARSET=utf8",
            "INSERT INTO {t} VALUES (10)",
            "INSERT INTO {t} VALUES (default)",
            "INSERT INTO {t} VALUES (18446744073709551615)",
        ),
        stated=(({"id": Decimal(18446744073709551615)}, {}), ({"id": 11}, {})),
    ),
    Case(
        DBZ + "ddl/unsigned_integer_test.sql DBZ-1185 (BinlogUnsignedIntegerIT)",
        "dbz_1185_serial_default_value",
        (
            "CREATE TABLE {t} (id SMALLINT UNSIGNED SERIAL DEFAULT VALUE NOT NULL, PRIMARY KEY (`id`)) ENGINE=InnoDB DEFAULT CHARSET=utf8",
            "INSERT INTO {t} VALUES (10)",
            "INSERT INTO {t} VALUES (default)",
            "INSERT INTO {t} VALUES (1000)",
        ),
        stated=(({"id": 1000}, {}),),
    ),
    # -- tinyint_test.sql (BinlogTinyIntIT) --
    Case(
        DBZ + "ddl/tinyint_test.sql (BinlogTinyIntIT)",
        "DBZ1773",
        (
            "CREATE TABLE {t} (id int not null primary key auto_increment, ti TINYINT SIGNED, ti1 TINYINT(1) SIGNED, "
            "ti2 TINYINT(2), b BOOLEAN) ENGINE=InnoDB AUTO_INCREMENT=10851 DEFAULT CHARSET=utf8",
            "INSERT INTO {t} VALUES (DEFAULT, 100, 5, 50, TRUE)",
        ),
        stated=(({}, {"ti": 100, "ti1": 5, "ti2": 50, "b": 1}),),
    ),
    Case(
        DBZ + "ddl/tinyint_test.sql (BinlogTinyIntIT)",
        "DBZ2085",
        (
            "CREATE TABLE {t} (id int not null primary key auto_increment, b BOOLEAN NOT NULL DEFAULT 0) "
            "ENGINE=InnoDB AUTO_INCREMENT=10851 DEFAULT CHARSET=utf8",
            "INSERT INTO {t} VALUES (DEFAULT, 1)",
        ),
        stated=(({}, {"b": 1}),),
    ),
    Case(
        DBZ + "ddl/tinyint_test.sql (BinlogTinyIntIT)",
        "DBZ5236",
        (
            "CREATE TABLE {t} (id int(11) not null primary key auto_increment, ti1 tinyint(3) unsigned NOT NULL DEFAULT '0', "
            "ti2 tinyint(1) unsigned NOT NULL DEFAULT '0', ti3 tinyint(1) NOT NULL DEFAULT '1') "
            "ENGINE=InnoDB AUTO_INCREMENT=1 DEFAULT CHARSET=utf8",
            "INSERT INTO {t} VALUES (DEFAULT, 1, 1, 0)",
        ),
        stated=(({}, {"ti1": 1, "ti2": 1, "ti3": 0}),),
    ),
    Case(
        DBZ + "ddl/datetime_key_test.sql (BinlogDateTimeInKeyIT)",
        "dbz_1194_datetime_key_test",
        (
            "CREATE TABLE {t} (id INT AUTO_INCREMENT NOT NULL, dtval DATETIME NOT NULL, dval DATE NOT NULL, tval TIME NOT NULL, "
            "PRIMARY KEY (id, dtval, dval, tval)) DEFAULT CHARSET=utf8",
            "INSERT INTO {t} VALUES (default, '0000-00-00 00:00:00', '0000-00-00', '00:00:00')",
        ),
        stated=(({}, {"dtval": 0, "dval": 0, "tval": 0}),),
    ),
    Case(
        DBZ + "ddl/timestamp_column_test.sql (BinlogTimestampColumnIT)",
        "t_user_block_list",
        (
            "CREATE TABLE {t} (`id` int(10) unsigned NOT NULL, `data` varchar(20), `create_time` datetime, "
            "`update_time` datetime, PRIMARY KEY (`id`))",
            "ALTER TABLE {t} MODIFY COLUMN `update_time` datetime(0) NOT NULL DEFAULT CURRENT_TIMESTAMP(0) "
            "COMMENT 'update_time' AFTER create_time",
            "INSERT INTO {t} (`id`,`create_time`,`data`) VALUES (1, CURRENT_TIMESTAMP(), 'test')",
            "UPDATE {t} SET `data` = 'test2' WHERE `id` = 1",
        ),
        stated=(({"id": 1}, {"data": "test2"}),),
    ),
    Case(
        DBZ + "ddl/binary_column_test.sql (BinlogFixedLengthBinaryColumnIT, DBZ-254)",
        "dbz_254_binary_column_test",
        (
            "CREATE TABLE {t} (id INT AUTO_INCREMENT NOT NULL, file_uuid BINARY(16), PRIMARY KEY (id)) DEFAULT CHARSET=utf8",
            "INSERT INTO {t} VALUES (default, unhex(replace('651aed08-390f-4893-b2f1-36923e7b7400','-','')))",
            "INSERT INTO {t} VALUES (default, unhex(replace('651aed08-390f-4893-b2f1-36923e7b74ab','-','')))",
            "INSERT INTO {t} VALUES (default, unhex(replace('651aed08-390f-4893-b2f1-36923e7b74','-','')))",
            "INSERT INTO {t} VALUES (default, unhex(00))",
        ),
        stated=(
            ({"id": 1}, {"file_uuid": bytes.fromhex("651aed08390f4893b2f136923e7b7400")}),
            ({"id": 3}, {"file_uuid": bytes.fromhex("651aed08390f4893b2f136923e7b7400")}),
            ({"id": 4}, {"file_uuid": bytes(16)}),
        ),
    ),
    Case(
        DBZ + "ddl/numeric_column_test.sql (BinlogNumericColumnIT, DBZ-751)",
        "dbz_751_numeric_column_test",
        (
            "CREATE TABLE {t} (id INT AUTO_INCREMENT NOT NULL, rating1 NUMERIC, rating2 NUMERIC(8, 4), rating3 NUMERIC(7), "
            "rating4 NUMERIC(6, 0), PRIMARY KEY (id)) DEFAULT CHARSET=utf8",
            "INSERT INTO {t} VALUES (default, 123, 123.4567, 234.5, 345.6)",
        ),
        stated=(
            (
                {},
                {
                    "rating1": Decimal(123),
                    "rating2": Decimal("123.4567"),
                    "rating3": Decimal(235),
                    "rating4": Decimal(346),
                },
            ),
        ),
    ),
    Case(
        DBZ + "ddl/decimal_column_test.sql (BinlogDecimalColumnIT, DBZ-751)",
        "dbz_751_decimal_column_test",
        (
            "CREATE TABLE {t} (id INT AUTO_INCREMENT NOT NULL, rating1 DECIMAL, rating2 DECIMAL(8, 4), rating3 DECIMAL(7), "
            "rating4 DECIMAL(6, 0), PRIMARY KEY (id)) DEFAULT CHARSET=utf8",
            "INSERT INTO {t} VALUES (default, 123, 123.4567, 234.5, 345.6)",
        ),
        stated=(
            (
                {},
                {
                    "rating1": Decimal(123),
                    "rating2": Decimal("123.4567"),
                    "rating3": Decimal(235),
                    "rating4": Decimal(346),
                },
            ),
        ),
    ),
    Case(
        DBZ + "ddl/nationalized_character_test.sql",
        "NC_TEST",
        (
            "CREATE TABLE {t} (`id` INT NOT NULL AUTO_INCREMENT, `nc1` nchar default null, `nc2` nchar(5) default null, "
            "`nc3` nvarchar(25) default null, PRIMARY KEY (`ID`)) ENGINE=InnoDB AUTO_INCREMENT=1 DEFAULT CHARSET=utf8mb4",
            "INSERT INTO {t}(nc1,nc2,nc3) VALUES ('a', '123', 'hello')",
        ),
        stated=(({}, {"nc1": "a", "nc2": "123", "nc3": "hello"}),),
    ),
]

CASES: list[Case] = PMR_CASES + DBZ_CASES
