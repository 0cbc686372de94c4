"""Unit tests of dagster_mysql_cdc.source.types: value by value, no server needed.

Raw inputs are exactly what the two libraries deliver (read from their installed sources):
pymysql 1.x default conversions and python-mysql-replication 1.0.17 row events.
"""

from __future__ import annotations

import base64
import dataclasses
import datetime as dt
import json
import struct
from decimal import Decimal

import pyarrow as pa
import pytest

from dagster_mysql_cdc.errors import ConfigurationError
from dagster_mysql_cdc.source.schema import ColumnSchema, TableSchema
from dagster_mysql_cdc.source.types import (
    TableConverter,
    TypeOptions,
    UnsupportedTypeError,
    arrow_field,
    arrow_schema,
    debezium_parameters,
    debezium_type,
    select_expression,
    value_converter,
)

DEFAULT = TypeOptions()
CONNECT = TypeOptions(time_precision_mode="connect")


def col(data_type: str, name: str = "c", position: int = 1, **kw) -> ColumnSchema:
    return ColumnSchema(name=name, data_type=data_type, position=position, **kw)


def conv(column: ColumnSchema, source: str = "pymysql", options: TypeOptions = DEFAULT):
    return value_converter(column, options, source)


def both(column: ColumnSchema, raw_pymysql, raw_binlog, options: TypeOptions = DEFAULT):
    """Convert the same logical value from both sources; assert equal; return it."""
    a = conv(column, "pymysql", options)(raw_pymysql)
    b = conv(column, "binlog", options)(raw_binlog)
    assert a == b, (a, b)
    assert type(a) is type(b)
    return a


def arrow_roundtrip(column: ColumnSchema, value, options: TypeOptions = DEFAULT):
    f = arrow_field(column, options)
    return pa.array([value], type=f.type).to_pylist()[0]


# --------------------------------------------------------------------------------------------
# Options
# --------------------------------------------------------------------------------------------


def test_option_defaults():
    o = TypeOptions()
    assert o.decimal_handling_mode == "precise"
    assert o.time_precision_mode == "adaptive_time_microseconds"
    assert o.bigint_unsigned_handling_mode == "precise"
    assert o.binary_handling_mode == "bytes"


@pytest.mark.parametrize(
    "option,bad,allowed",
    [
        ("decimal_handling_mode", "exact", ["precise", "double", "string"]),
        ("time_precision_mode", "adaptive", ["adaptive_time_microseconds", "connect"]),
        ("bigint_unsigned_handling_mode", "bigint", ["long", "precise"]),
        ("binary_handling_mode", "base32", ["bytes", "base64", "base64-url-safe", "hex"]),
    ],
)
def test_bad_option_value_message(option, bad, allowed):
    with pytest.raises(ValueError) as ei:
        TypeOptions(**{option: bad})
    msg = str(ei.value)
    assert option in msg and repr(bad) in msg
    for a in allowed:
        assert repr(a) in msg
    assert isinstance(ei.value, ConfigurationError)


def test_options_are_frozen_and_hashable():
    o = TypeOptions(decimal_handling_mode="string")
    with pytest.raises(dataclasses.FrozenInstanceError):
        o.decimal_handling_mode = "double"  # type: ignore[misc]
    assert hash(o) == hash(TypeOptions(decimal_handling_mode="string"))


# --------------------------------------------------------------------------------------------
# Schema types
# --------------------------------------------------------------------------------------------

SCHEMA_CASES = [
    # column, options, (connect type, name), arrow type
    (col("tinyint"), DEFAULT, ("int16", None), pa.int16()),
    (col("tinyint", unsigned=True), DEFAULT, ("int16", None), pa.int16()),
    (col("boolean"), DEFAULT, ("int16", None), pa.int16()),
    (col("smallint"), DEFAULT, ("int16", None), pa.int16()),
    (col("smallint", unsigned=True), DEFAULT, ("int32", None), pa.int32()),
    (col("mediumint"), DEFAULT, ("int32", None), pa.int32()),
    (col("mediumint", unsigned=True), DEFAULT, ("int32", None), pa.int32()),
    (col("int"), DEFAULT, ("int32", None), pa.int32()),
    (col("integer", unsigned=True), DEFAULT, ("int64", None), pa.int64()),
    (col("bigint"), DEFAULT, ("int64", None), pa.int64()),
    (
        col("bigint", unsigned=True),
        DEFAULT,
        ("bytes", "org.apache.kafka.connect.data.Decimal"),
        pa.decimal128(20, 0),
    ),
    (
        col("bigint", unsigned=True),
        TypeOptions(bigint_unsigned_handling_mode="long"),
        ("int64", None),
        pa.int64(),
    ),
    (col("float"), DEFAULT, ("float32", None), pa.float32()),
    (col("float", precision=7, scale=4), DEFAULT, ("float64", None), pa.float64()),
    (col("double"), DEFAULT, ("float64", None), pa.float64()),
    (col("real"), DEFAULT, ("float64", None), pa.float64()),
    (
        col("decimal", precision=10, scale=2),
        DEFAULT,
        ("bytes", "org.apache.kafka.connect.data.Decimal"),
        pa.decimal128(10, 2),
    ),
    (
        # wider than 38 digits: written as a plain-notation string, and the metadata says so
        col("decimal", precision=65, scale=30),
        DEFAULT,
        ("string", None),
        pa.string(),
    ),
    (col("float"), DEFAULT, ("float32", None), pa.float32()),
    # FLOAT(M,D): FLOAT64 (Debezium DBZ-3865), precision and scale kept in mysql.type
    (col("float", precision=10, scale=2), DEFAULT, ("float64", None), pa.float64()),
    (col("double", precision=10, scale=2), DEFAULT, ("float64", None), pa.float64()),
    (
        col("decimal", precision=10, scale=2),
        TypeOptions(decimal_handling_mode="double"),
        ("float64", None),
        pa.float64(),
    ),
    (
        col("decimal", precision=10, scale=2),
        TypeOptions(decimal_handling_mode="string"),
        ("string", None),
        pa.string(),
    ),
    (col("varchar", length=10), DEFAULT, ("string", None), pa.string()),
    (col("longtext"), DEFAULT, ("string", None), pa.string()),
    (col("binary", length=4), DEFAULT, ("bytes", None), pa.binary()),
    (col("blob"), TypeOptions(binary_handling_mode="hex"), ("string", None), pa.string()),
    (col("bit", length=1), DEFAULT, ("boolean", None), pa.bool_()),
    (col("bit", length=10), DEFAULT, ("bytes", "io.debezium.data.Bits"), pa.binary()),
    (col("json"), DEFAULT, ("string", "io.debezium.data.Json"), pa.string()),
    (col("enum", enum_values=("a", "b")), DEFAULT, ("string", "io.debezium.data.Enum"), pa.string()),
    (col("set", enum_values=("a", "b")), DEFAULT, ("string", "io.debezium.data.EnumSet"), pa.string()),
    (col("year"), DEFAULT, ("int32", "io.debezium.time.Year"), pa.int32()),
    (col("date"), DEFAULT, ("int32", "io.debezium.time.Date"), pa.int32()),
    (col("date"), CONNECT, ("int32", "org.apache.kafka.connect.data.Date"), pa.int32()),
    (col("time", precision=6), DEFAULT, ("int64", "io.debezium.time.MicroTime"), pa.int64()),
    (col("time", precision=0), CONNECT, ("int32", "org.apache.kafka.connect.data.Time"), pa.int32()),
    (col("datetime", precision=0), DEFAULT, ("int64", "io.debezium.time.Timestamp"), pa.int64()),
    (col("datetime", precision=3), DEFAULT, ("int64", "io.debezium.time.Timestamp"), pa.int64()),
    (col("datetime", precision=4), DEFAULT, ("int64", "io.debezium.time.MicroTimestamp"), pa.int64()),
    (col("datetime", precision=6), DEFAULT, ("int64", "io.debezium.time.MicroTimestamp"), pa.int64()),
    (col("datetime", precision=6), CONNECT, ("int64", "org.apache.kafka.connect.data.Timestamp"), pa.int64()),
    (col("timestamp", precision=6), DEFAULT, ("string", "io.debezium.time.ZonedTimestamp"), pa.string()),
    (col("timestamp"), CONNECT, ("string", "io.debezium.time.ZonedTimestamp"), pa.string()),
]
SCHEMA_CASES += [
    (
        col(g),
        DEFAULT,
        ("struct", "io.debezium.data.geometry.Geometry"),
        pa.struct([("wkb", pa.binary()), ("srid", pa.int32())]),
    )
    for g in (
        "geometry",
        "point",
        "linestring",
        "polygon",
        "multipoint",
        "multilinestring",
        "multipolygon",
        "geometrycollection",
    )
]


@pytest.mark.parametrize(
    "column,options,expected,arrow_type", SCHEMA_CASES, ids=lambda x: getattr(x, "column_type", None)
)
def test_schema_mapping(column, options, expected, arrow_type):
    assert debezium_type(column, options) == expected
    f = arrow_field(column, options)
    assert f.type == arrow_type
    assert f.nullable is True
    assert f.name == column.name
    assert f.metadata[b"mysql.type"] == column.column_type.encode()
    assert f.metadata[b"debezium.type"] == expected[0].encode()
    if expected[1]:
        assert f.metadata[b"debezium.name"] == expected[1].encode()
    else:
        assert b"debezium.name" not in f.metadata


def test_not_null_column_is_still_nullable_in_the_lake():
    assert arrow_field(col("int", nullable=False), DEFAULT).nullable is True


def test_debezium_parameters():
    assert debezium_parameters(col("decimal", precision=10, scale=2), DEFAULT) == {
        "scale": "2",
        "connect.decimal.precision": "10",
    }
    assert debezium_parameters(col("bigint", unsigned=True), DEFAULT) == {
        "scale": "0",
        "connect.decimal.precision": "20",
    }
    assert debezium_parameters(col("enum", enum_values=("x", "y")), DEFAULT) == {"allowed": "x,y"}
    assert debezium_parameters(col("bit", length=10), DEFAULT) == {"length": "10"}
    assert debezium_parameters(col("int"), DEFAULT) == {}
    meta = arrow_field(col("set", enum_values=("a", "b")), DEFAULT).metadata
    assert json.loads(meta[b"debezium.parameters"]) == {"allowed": "a,b"}
    # a DECIMAL held as a string has no Decimal parameters (it is not a Decimal)
    assert debezium_parameters(col("decimal", precision=65, scale=18), DEFAULT) == {}


def test_enum_allowed_escapes_commas_as_debezium():
    """BinlogEnumColumnIT (DBZ-1203): labels with commas are escaped, quotes kept as they are."""
    labels = ("station", "post_office", "plane", "ahihi_dongok", "now", "test", "a,b", "c,'d", "g,'h")
    expected = "station,post_office,plane,ahihi_dongok,now,test,a\\,b,c\\,'d,g\\,'h"
    assert debezium_parameters(col("enum", enum_values=labels), DEFAULT) == {"allowed": expected}
    meta = arrow_field(col("set", enum_values=("x,y", "z")), DEFAULT).metadata
    assert json.loads(meta[b"debezium.parameters"]) == {"allowed": "x\\,y,z"}


def test_float_m_d_is_float64_with_the_float32_value():
    """DBZ-3865 (BinlogFloatIT): FLOAT(10,2) 5.61 is the double of the stored float32 5.61."""
    c = col("float", precision=10, scale=2)
    stored = struct.unpack("<f", struct.pack("<f", 5.61))[0]
    assert both(c, stored, stored) == stored == 5.610000133514404
    assert arrow_field(c, DEFAULT).metadata[b"mysql.type"] == b"float(10,2)"


def test_arrow_schema_is_in_ordinal_order():
    t = TableSchema(
        "db",
        "t",
        (col("varchar", "b", 2, length=5), col("int", "a", 1), col("date", "c", 3)),
    )
    s = arrow_schema(t, DEFAULT)
    assert s.names == ["a", "b", "c"]
    assert [f.type for f in s] == [pa.int32(), pa.string(), pa.int32()]
    assert s.metadata[b"mysql.table"] == b"db.t"


# --------------------------------------------------------------------------------------------
# Unsupported types and bad arguments
# --------------------------------------------------------------------------------------------


def test_unsupported_type_error_at_build_time():
    c = col("vector", name="emb")
    with pytest.raises(UnsupportedTypeError) as ei:
        value_converter(c, DEFAULT, "binlog")
    assert isinstance(ei.value, ValueError)
    assert "emb" in str(ei.value) and "vector" in str(ei.value)
    with pytest.raises(UnsupportedTypeError):
        arrow_field(c, DEFAULT)
    with pytest.raises(UnsupportedTypeError):
        debezium_type(c, DEFAULT)


def test_unsupported_type_error_names_table_column_type_and_fix():
    t = TableSchema("shop", "items", (col("int", "id", 1), col("uuid", "ref", 2)))
    with pytest.raises(UnsupportedTypeError) as ei:
        TableConverter(t, DEFAULT, "pymysql")
    msg = str(ei.value)
    assert "shop.items.ref" in msg
    assert "'uuid'" in msg
    assert "xclude" in msg  # names the fix: exclude the column or the table
    assert ei.value.table == "shop.items" and ei.value.column == "ref" and ei.value.column_type == "uuid"
    with pytest.raises(UnsupportedTypeError):
        arrow_schema(t, DEFAULT)


def test_bad_source():
    with pytest.raises(ValueError, match="source"):
        value_converter(col("int"), DEFAULT, "jdbc")  # type: ignore[arg-type]


def test_unexpected_value_type_error_does_not_leak_value():
    with pytest.raises(ValueError) as ei:
        conv(col("date", name="d"))(12345.678)
    assert "12345" not in str(ei.value) and "'d'" in str(ei.value)


# --------------------------------------------------------------------------------------------
# Integers
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "column,value",
    [
        (col("tinyint"), -128),
        (col("tinyint"), 127),
        (col("tinyint", unsigned=True), 255),
        (col("smallint"), -32768),
        (col("smallint", unsigned=True), 65535),
        (col("mediumint"), -8388608),
        (col("mediumint", unsigned=True), 16777215),
        (col("int"), -2147483648),
        (col("int", unsigned=True), 4294967295),
        (col("bigint"), -9223372036854775808),
        (col("bigint"), 9223372036854775807),
    ],
)
def test_integers_fit_their_arrow_type(column, value):
    assert both(column, value, value) == value
    assert arrow_roundtrip(column, value) == value


def test_none_stays_none():
    for c in (col("int"), col("varchar"), col("json"), col("bit", length=3), col("date"), col("timestamp")):
        assert conv(c)(None) is None
        assert conv(c, "binlog")(None) is None


BIGINT_UNSIGNED_MAX = 18446744073709551615


def test_bigint_unsigned_precise():
    c = col("bigint", unsigned=True)
    v = both(c, BIGINT_UNSIGNED_MAX, BIGINT_UNSIGNED_MAX)
    assert v == Decimal(BIGINT_UNSIGNED_MAX) and isinstance(v, Decimal)
    assert arrow_roundtrip(c, v) == Decimal("18446744073709551615")
    assert both(c, 0, 0) == Decimal(0)


def test_bigint_unsigned_long_wraps_like_java_long():
    o = TypeOptions(bigint_unsigned_handling_mode="long")
    c = col("bigint", unsigned=True)
    assert both(c, BIGINT_UNSIGNED_MAX, BIGINT_UNSIGNED_MAX, o) == -1
    assert both(c, 2**63, 2**63, o) == -(2**63)
    assert both(c, 2**63 - 1, 2**63 - 1, o) == 2**63 - 1
    assert both(c, 42, 42, o) == 42
    assert arrow_roundtrip(c, -1, o) == -1


# --------------------------------------------------------------------------------------------
# Floating point and decimals
# --------------------------------------------------------------------------------------------


def test_float_is_float32_from_both_sources():
    c = col("float")
    binlog_raw = struct.unpack("<f", struct.pack("<f", 3.14159))[0]  # what the binlog lib returns
    v = both(c, 3.14159, binlog_raw)  # pymysql parses the server's text "3.14159"
    assert v == binlog_raw
    assert arrow_roundtrip(c, v) == v


def test_select_expression_reads_float_exactly():
    assert select_expression(col("float", name="ratio")) == "(`ratio` + 0e0) AS `ratio`"
    assert select_expression(col("double", name="x")) == "`x`"
    assert select_expression(col("int", name="we`ird")) == "`we``ird`"


def test_double():
    c = col("double")
    assert both(c, 1.7976931348623157e308, 1.7976931348623157e308) == 1.7976931348623157e308
    assert both(c, -0.1, -0.1) == -0.1


def test_decimal_precise_quantized_to_scale():
    c = col("decimal", precision=10, scale=2)
    v = both(c, Decimal("1.50"), Decimal("1.50"))
    assert v == Decimal("1.50") and str(v) == "1.50"
    assert str(conv(c)(Decimal("7"))) == "7.00"
    assert arrow_roundtrip(c, conv(c)(Decimal("-99999999.99"))) == Decimal("-99999999.99")


def test_decimal_38_fits_decimal128():
    c = col("decimal", precision=38, scale=10)
    raw = Decimal("9999999999999999999999999999.9999999999")
    assert arrow_roundtrip(c, both(c, raw, raw)) == raw


DEC65 = "12345678901234567890123456789012345.123456789012345678901234567890"


def test_decimal_65_30_precise_is_exact_plain_string():
    c = col("decimal", precision=65, scale=30)
    assert both(c, Decimal(DEC65), Decimal(DEC65)) == DEC65
    assert both(c, Decimal("-" + DEC65), Decimal("-" + DEC65)) == "-" + DEC65
    assert conv(c)(Decimal("1E+2")) == "100." + "0" * 30  # plain notation, never exponent
    assert arrow_roundtrip(c, DEC65) == DEC65


def test_decimal_string_mode():
    o = TypeOptions(decimal_handling_mode="string")
    c = col("decimal", precision=10, scale=2)
    assert both(c, Decimal("1.5"), Decimal("1.50"), o) == "1.50"
    assert both(col("decimal", precision=65, scale=30), Decimal(DEC65), Decimal(DEC65), o) == DEC65
    assert conv(c, options=o)(Decimal("0E-8")) == "0.00"


def test_decimal_double_mode():
    o = TypeOptions(decimal_handling_mode="double")
    c = col("decimal", precision=10, scale=2)
    assert both(c, Decimal("1.25"), Decimal("1.25"), o) == 1.25
    assert isinstance(conv(c, options=o)(Decimal("1.25")), float)


# --------------------------------------------------------------------------------------------
# Strings and binary
# --------------------------------------------------------------------------------------------

EMOJI = "emoji 😀 👩‍👩‍👧 ok ñ"


def test_text_emoji_roundtrip():
    c = col("varchar", length=100, charset="utf8mb4")
    assert both(c, EMOJI, EMOJI) == EMOJI
    # the binlog lib returns bytes when it cannot decode: decoded as UTF-8, 4-byte chars intact
    assert conv(c, "binlog")(EMOJI.encode("utf-8")) == EMOJI
    assert arrow_roundtrip(c, EMOJI) == EMOJI


def test_text_bytes_use_column_charset_and_replace_malformed():
    assert conv(col("varchar", charset="latin1"), "binlog")(b"caf\xe9") == "café"
    assert conv(col("text"), "binlog")(b"ab\xff") == "ab\ufffd"


def test_binary_bytes_and_binary_padding():
    c = col("binary", length=4)
    assert both(c, b"ab\x00\x00", b"ab") == b"ab\x00\x00"  # binlog strips the 0x00 padding
    assert conv(col("varbinary", length=4))(b"ab") == b"ab"  # VARBINARY is never padded
    assert conv(col("blob"), "binlog")(b"\x00\xff") == b"\x00\xff"
    # binlog lib without binlog_row_metadata=FULL decodes bytes as UTF-8 str
    assert conv(col("blob"), "binlog")("é") == "é".encode()


@pytest.mark.parametrize(
    "mode,expected",
    [
        ("bytes", b"\xfb\xff\x00"),
        ("base64", base64.b64encode(b"\xfb\xff\x00").decode()),
        ("base64-url-safe", base64.urlsafe_b64encode(b"\xfb\xff\x00").decode()),
        ("hex", "fbff00"),
    ],
)
def test_binary_handling_modes(mode, expected):
    o = TypeOptions(binary_handling_mode=mode)
    c = col("varbinary", length=8)
    assert both(c, b"\xfb\xff\x00", b"\xfb\xff\x00", o) == expected
    assert arrow_roundtrip(c, expected, o) == expected
    if mode == "base64-url-safe":
        assert "-" in expected or "_" in expected


# --------------------------------------------------------------------------------------------
# BIT
# --------------------------------------------------------------------------------------------


def test_bit1_both_sources():
    c = col("bit", length=1)
    assert both(c, b"\x01", "1") is True
    assert both(c, b"\x00", "0") is False
    assert arrow_roundtrip(c, True) is True


def test_bit10_little_endian_both_sources():
    c = col("bit", length=10)
    # b'1000000101' = 517 = 0x0205; pymysql: big-endian b'\x02\x05'; binlog lib: '1000000101'
    assert both(c, b"\x02\x05", "1000000101") == b"\x05\x02"
    assert both(c, b"\x00\x05", "0000000101") == b"\x05\x00"
    assert arrow_roundtrip(c, b"\x05\x02") == b"\x05\x02"


def test_bit64_max_and_bit8():
    c = col("bit", length=64)
    assert both(c, b"\xff" * 8, "1" * 64) == b"\xff" * 8
    c8 = col("bit", length=8)
    assert both(c8, b"\x81", "10000001") == b"\x81"


# --------------------------------------------------------------------------------------------
# ENUM, SET, JSON, YEAR
# --------------------------------------------------------------------------------------------


def test_enum_string_and_index():
    c = col("enum", enum_values=("small", "medium", "large"))
    assert both(c, "medium", "medium") == "medium"
    assert conv(c, "binlog")(2) == "medium"  # 1-based index as stored in the binlog
    assert conv(c, "binlog")(0) == ""  # MySQL's error value
    with pytest.raises(ValueError):
        conv(c, "binlog")(4)


def test_set_both_sources_declaration_order():
    c = col("set", enum_values=("a", "b", "c"))
    assert both(c, "a,c", {"c", "a"}) == "a,c"
    assert both(c, "a,b,c", {"b", "c", "a"}) == "a,b,c"
    assert conv(c, "binlog")(0b101) == "a,c"  # bitmask input
    assert conv(c)("") == ""


def test_set_empty_from_binlog():
    # python-mysql-replication returns an empty SET as None
    assert conv(col("set", enum_values=("a",), nullable=False), "binlog")(None) == ""
    assert conv(col("set", enum_values=("a",), nullable=True), "binlog")(None) is None


def test_json_text_and_binary_agree():
    c = col("json")
    text = '{"a": 1, "b": [1, 2.5, "x", true, null], "é": {"k": "😀"}}'
    decoded = {b"a": 1, b"b": [1, 2.5, b"x", True, None], "é".encode(): {b"k": "😀".encode()}}
    v = both(c, text, decoded)
    assert v == '{"a":1,"b":[1,2.5,"x",true,null],"é":{"k":"😀"}}'
    assert json.loads(v)["é"]["k"] == "😀"


def test_json_scalars():
    c = col("json")
    assert both(c, '"abc"', b"abc") == '"abc"'  # binlog: top-level JSON string comes as bytes
    assert both(c, "42", 42) == "42"
    assert both(c, "true", True) == "true"
    assert both(c, "[]", []) == "[]"
    assert both(c, "{}", {}) == "{}"
    assert conv(c, "binlog")(Decimal("1.5")) == "1.5"


def test_json_mysql_text_is_compacted_and_invalid_text_kept():
    c = col("json")  # MySQL: binary JSON (no character set); the snapshot's text is compacted
    assert conv(c)('{"a" : [1,  2]}') == '{"a":[1,2]}'
    assert conv(c)("not json") == "not json"


@pytest.mark.parametrize(
    "text",
    [
        '{"pi": 3.141592653589793238462643383279}',  # every digit kept
        '{"big": 12345678901234567890.5, "huge": 1e400}',  # no float rounding, no Infinity
        '{"a": 1, "a": 2}',  # duplicate keys kept
        '{"a" : [1,  2]}',  # the server's spacing kept
        "not json",
        '"\\ud83d"',
    ],
)
def test_json_mariadb_text_passes_through_as_stored(text):
    """MariaDB's JSON is LONGTEXT: Debezium passes the stored text through; so do both sources."""
    c = col("json", charset="utf8mb4")
    assert both(c, text, text) == text
    assert both(c, text, text.encode()) == text
    tc = TableConverter(TableSchema("db", "t", (c,)), DEFAULT, "pymysql")
    assert tc.to_record_batch([(text,), (None,)], text_values=True).column(0).to_pylist() == [text, None]


def test_year():
    c = col("year")
    assert both(c, 2155, 2155) == 2155
    assert both(c, 1901, 1901) == 1901
    assert both(c, 0, 1900) == 0  # binlog lib adds 1900 to the stored byte: YEAR 0000 -> 1900


# --------------------------------------------------------------------------------------------
# Temporal
# --------------------------------------------------------------------------------------------


def test_date():
    c = col("date")
    assert both(c, dt.date(2018, 6, 20), dt.date(2018, 6, 20)) == 17702
    assert both(c, dt.date(1970, 1, 1), dt.date(1970, 1, 1)) == 0
    assert both(c, dt.date(1000, 1, 1), dt.date(1000, 1, 1)) == -354285
    assert both(c, dt.date(9999, 12, 31), dt.date(9999, 12, 31)) == 2932896
    assert both(c, dt.date(2018, 6, 20), dt.date(2018, 6, 20), CONNECT) == 17702


NO_ADJUSTER = TypeOptions(enable_time_adjuster=False)


def test_time_adjuster_two_digit_years_as_debezium():
    """BinlogYearIT (DBZ-1143): with enable.time.adjuster (the default) the years 0018 and 0078
    are 2018 and 1978; without it they are kept (days/millis counted back to year 18/78)."""
    d, dtm = col("date"), col("datetime")
    assert both(d, dt.date(18, 4, 1), dt.date(18, 4, 1)) == 17622
    assert both(d, dt.date(78, 4, 1), dt.date(78, 4, 1)) == 3012
    assert (
        both(dtm, dt.datetime(18, 4, 1, 12, 34, 56), dt.datetime(18, 4, 1, 12, 34, 56)) == 1_522_586_096_000
    )
    assert both(dtm, dt.datetime(78, 4, 1, 12, 34, 56), dt.datetime(78, 4, 1, 12, 34, 56)) == 260_282_096_000
    assert both(d, dt.date(18, 4, 1), dt.date(18, 4, 1), NO_ADJUSTER) == -712863
    assert both(d, dt.date(78, 4, 1), dt.date(78, 4, 1), NO_ADJUSTER) == -690948
    # bounds: 69 -> 2069, 70 -> 1970, 99 -> 1999, 100 stays; leap days stay leap days
    assert conv(d)(dt.date(69, 1, 1)) == conv(d)(dt.date(2069, 1, 1))
    assert conv(d)(dt.date(70, 1, 1)) == 0
    assert conv(d)(dt.date(99, 12, 31)) == conv(d)(dt.date(1999, 12, 31))
    assert conv(d)(dt.date(100, 1, 1)) == dt.date(100, 1, 1).toordinal() - dt.date(1970, 1, 1).toordinal()
    assert conv(d)(dt.date(96, 2, 29)) == conv(d)(dt.date(1996, 2, 29))
    us6 = col("datetime", precision=6)
    assert conv(us6, "binlog")(dt.datetime(1, 1, 1, 0, 0, 0, 5)) == conv(us6)(
        dt.datetime(2001, 1, 1, 0, 0, 0, 5)
    )
    with pytest.raises(ConfigurationError, match="enable.time.adjuster"):
        TypeOptions(enable_time_adjuster="yes")  # type: ignore[arg-type]


def test_time_adjuster_column_wise_equals_per_value():
    """The Arrow fast paths (snapshot text and binlog objects) give the per-value results."""
    schema = TableSchema("db", "t", (col("date", "d", 1), col("datetime", "t", 2, precision=3)))
    text_rows = [
        ("0018-04-01", "0078-04-01 12:34:56.5"),
        ("2018-04-01", "1978-04-01 12:34:56.5"),
        (None, None),
    ]
    obj_rows = [
        (dt.date(18, 4, 1), dt.datetime(78, 4, 1, 12, 34, 56, 500000)),
        (dt.date(2018, 4, 1), dt.datetime(1978, 4, 1, 12, 34, 56, 500000)),
        (None, None),
    ]
    for options in (DEFAULT, NO_ADJUSTER):
        pm = TableConverter(schema, options, "pymysql").to_record_batch(text_rows, text_values=True)
        bl = TableConverter(schema, options, "binlog").to_record_batch(obj_rows)
        per_value = [TableConverter(schema, options, "binlog").convert_row(r) for r in obj_rows]
        assert pm.to_pylist() == bl.to_pylist() == [dict(zip(("d", "t"), r)) for r in per_value]
    adjusted = TableConverter(schema, DEFAULT, "binlog").to_record_batch(obj_rows).to_pylist()
    assert adjusted[0] == adjusted[1] == {"d": 17622, "t": 260_282_096_500}


def test_zero_date_nullable_and_not_null():
    nullable = col("date", nullable=True)
    not_null = col("date", nullable=False)
    # pymysql returns the raw string, the binlog lib returns None
    assert both(nullable, "0000-00-00", None) is None
    assert both(not_null, "0000-00-00", None) == 0
    assert both(not_null, "2020-00-15", None) == 0  # zero month
    assert both(nullable, "2020-05-00", None) is None  # zero day


def test_datetime6_micros():
    c = col("datetime", precision=6)
    raw = dt.datetime(2018, 6, 20, 6, 37, 3, 123456)
    assert both(c, raw, raw) == 1529476623123456
    assert arrow_roundtrip(c, 1529476623123456) == 1529476623123456


def test_datetime3_and_0_millis():
    raw = dt.datetime(2018, 6, 20, 6, 37, 3, 123000)
    assert both(col("datetime", precision=3), raw, raw) == 1529476623123
    # Debezium doc example: DATETIME 2018-06-20 06:37:03 -> 1529476623000 (wall clock read as UTC)
    raw0 = dt.datetime(2018, 6, 20, 6, 37, 3)
    assert both(col("datetime", precision=0), raw0, raw0) == 1529476623000
    assert both(col("datetime"), raw0, raw0) == 1529476623000


def test_datetime_before_epoch_floors_like_java():
    c = col("datetime", precision=3)
    raw = dt.datetime(1969, 12, 31, 23, 59, 59, 999000)
    assert both(c, raw, raw) == -1
    raw = dt.datetime(1000, 1, 1)
    assert both(col("datetime", precision=6), raw, raw) == -30610224000000000


def test_datetime_connect_mode_millis():
    raw = dt.datetime(2018, 6, 20, 6, 37, 3, 123456)
    assert both(col("datetime", precision=6), raw, raw, CONNECT) == 1529476623123


def test_zero_datetime():
    assert both(col("datetime", precision=6, nullable=True), "0000-00-00 00:00:00", None) is None
    assert both(col("datetime", precision=6, nullable=False), "0000-00-00 00:00:00.000000", None) == 0
    assert both(col("datetime", nullable=False), "0000-00-00 00:00:00", None) == 0


def test_timestamp_formatting():
    raw = dt.datetime(2018, 6, 20, 13, 37, 3)
    assert both(col("timestamp"), raw, raw) == "2018-06-20T13:37:03Z"
    raw6 = dt.datetime(2018, 6, 20, 13, 37, 3, 120000)
    assert both(col("timestamp", precision=6), raw6, raw6) == "2018-06-20T13:37:03.120000Z"
    assert both(col("timestamp", precision=3), raw6, raw6) == "2018-06-20T13:37:03.120Z"
    assert both(col("timestamp", precision=2), raw6, raw6) == "2018-06-20T13:37:03.12Z"
    assert both(col("timestamp", precision=6), raw, raw) == "2018-06-20T13:37:03.000000Z"
    assert both(col("timestamp"), raw, raw, CONNECT) == "2018-06-20T13:37:03Z"
    # an aware datetime is converted to UTC first
    aware = dt.datetime(2018, 6, 20, 6, 37, 3, tzinfo=dt.timezone(dt.timedelta(hours=-7)))
    assert conv(col("timestamp"))(aware) == "2018-06-20T13:37:03Z"
    assert both(col("timestamp"), dt.datetime(2038, 1, 19, 3, 14, 7), dt.datetime(2038, 1, 19, 3, 14, 7)) == (
        "2038-01-19T03:14:07Z"
    )


def test_zero_timestamp():
    epoch = dt.datetime(1970, 1, 1)  # binlog lib: utcfromtimestamp(0)
    assert both(col("timestamp", nullable=True), "0000-00-00 00:00:00", epoch) is None
    assert both(col("timestamp", nullable=False), "0000-00-00 00:00:00", epoch) == "1970-01-01T00:00:00Z"
    # the epoch with the column's fsp digits, as Debezium (BinlogRegressionIT DBZ-1318: ...00.00Z)
    assert both(col("timestamp", precision=3, nullable=False), "0000-00-00 00:00:00.000", epoch) == (
        "1970-01-01T00:00:00.000Z"
    )
    assert both(col("timestamp", precision=2, nullable=False), "0000-00-00 00:00:00.00", epoch) == (
        "1970-01-01T00:00:00.00Z"
    )
    first = dt.datetime(1970, 1, 1, 0, 0, 1)
    assert both(col("timestamp", nullable=True), first, first) == "1970-01-01T00:00:01Z"


def test_time_micros_including_negative():
    c = col("time", precision=6)
    td = dt.timedelta(hours=838, minutes=59, seconds=59)
    assert both(c, td, td) == 3020399000000
    assert both(c, -td, -td) == -3020399000000
    neg = -dt.timedelta(seconds=1, microseconds=500000)  # '-00:00:01.500000'
    assert both(c, neg, neg) == -1500000
    assert (
        both(
            c,
            dt.timedelta(hours=13, minutes=37, seconds=3, microseconds=1),
            dt.timedelta(hours=13, minutes=37, seconds=3, microseconds=1),
        )
        == 49023000001
    )
    assert arrow_roundtrip(c, -3020399000000) == -3020399000000


@pytest.mark.parametrize(
    "true_value,library_value",
    [
        ("-00:00:00.100000", -dt.timedelta(microseconds=900000)),
        ("-00:00:00.900000", -dt.timedelta(microseconds=100000)),
        ("-00:00:59.900000", -dt.timedelta(seconds=59, microseconds=100000)),
        ("-12:34:56.789000", -dt.timedelta(hours=12, minutes=34, seconds=56, microseconds=211000)),
        ("-838:59:58.999999", -dt.timedelta(hours=838, minutes=59, seconds=58, microseconds=1)),
        ("-00:00:01.500000", -dt.timedelta(seconds=1, microseconds=500000)),
        ("-00:00:01.000000", -dt.timedelta(seconds=1)),
        ("00:00:00.100000", dt.timedelta(microseconds=100000)),
    ],
)
def test_negative_fractional_time_from_binlog(true_value, library_value):
    """python-mysql-replication 1.0.17 returns the complementary fraction for negative TIME(fsp>0)
    values (observed on MariaDB 10.11 for fsp 1-6); the binlog converter undoes it."""
    sign = -1 if true_value.startswith("-") else 1
    h, m, s = true_value.lstrip("-").split(":")
    sec, us = s.split(".")
    expected = sign * (((int(h) * 60 + int(m)) * 60 + int(sec)) * 1_000_000 + int(us))
    for fsp in (1, 3, 6):
        assert conv(col("time", precision=fsp), "binlog")(library_value) == expected
    pymysql_value = sign * dt.timedelta(hours=int(h), minutes=int(m), seconds=int(sec), microseconds=int(us))
    assert conv(col("time", precision=6), "pymysql")(pymysql_value) == expected
    # TIME(0) has no fraction, so the library value is taken as is
    assert (
        conv(col("time", precision=0), "binlog")(-dt.timedelta(hours=838, minutes=59, seconds=59))
        == -3020399000000
    )


def test_time_connect_mode_millis_int32():
    c = col("time", precision=3)
    td = dt.timedelta(hours=23, minutes=59, seconds=59, microseconds=999000)
    assert both(c, td, td, CONNECT) == 86399999
    assert arrow_roundtrip(c, 86399999, CONNECT) == 86399999
    for bad in (dt.timedelta(hours=24), dt.timedelta(seconds=-1)):
        with pytest.raises(ValueError, match="adaptive_time_microseconds"):
            conv(c, options=CONNECT)(bad)


# --------------------------------------------------------------------------------------------
# Spatial
# --------------------------------------------------------------------------------------------

POINT_WKB = struct.pack("<BIdd", 1, 1, 1.0, 2.0)


def test_geometry_srid_split():
    c = col("point")
    raw = struct.pack("<I", 4326) + POINT_WKB
    v = both(c, raw, raw)
    assert v == {"wkb": POINT_WKB, "srid": 4326}
    assert arrow_roundtrip(c, v) == v
    # SRID 0 (none given) is null, as Debezium (BinlogGeometryIT)
    assert both(col("geometry"), b"\x00\x00\x00\x00" + POINT_WKB, b"\x00\x00\x00\x00" + POINT_WKB) == {
        "wkb": POINT_WKB,
        "srid": None,
    }
    assert arrow_roundtrip(col("geometry"), {"wkb": POINT_WKB, "srid": None}) == {
        "wkb": POINT_WKB,
        "srid": None,
    }


# --------------------------------------------------------------------------------------------
# TableConverter
# --------------------------------------------------------------------------------------------

ALL_COLUMNS = (
    col("int", "id", 1, nullable=False),
    col("tinyint", "ti", 2),
    col("bigint", "bu", 3, unsigned=True),
    col("float", "f", 4),
    col("double", "d", 5),
    col("decimal", "dec", 6, precision=10, scale=2),
    col("decimal", "dec65", 7, precision=65, scale=30),
    col("varchar", "s", 8, length=50, charset="utf8mb4"),
    col("binary", "bin", 9, length=4),
    col("bit", "b1", 10, length=1),
    col("bit", "b10", 11, length=10),
    col("json", "j", 12),
    col("enum", "e", 13, enum_values=("x", "y")),
    col("set", "st", 14, enum_values=("a", "b", "c")),
    col("year", "y", 15),
    col("date", "dt", 16, nullable=False),
    col("datetime", "dtm6", 17, precision=6),
    col("datetime", "dtm3", 18, precision=3),
    col("timestamp", "ts", 19, precision=6, nullable=False),
    col("time", "tm", 20, precision=6),
    col("geometry", "g", 21),
)
ALL_TABLE = TableSchema("shop", "everything", ALL_COLUMNS, primary_key=("id",))

F32 = struct.unpack("<f", struct.pack("<f", 1.1))[0]
ROW_PYMYSQL = (
    1,
    -5,
    BIGINT_UNSIGNED_MAX,
    1.1,
    2.5,
    Decimal("12.30"),
    Decimal(DEC65),
    EMOJI,
    b"ab\x00\x00",
    b"\x01",
    b"\x02\x05",
    '{"k": [1, "v"]}',
    "y",
    "a,c",
    2024,
    "0000-00-00",
    dt.datetime(2018, 6, 20, 6, 37, 3, 123456),
    dt.datetime(2018, 6, 20, 6, 37, 3, 123000),
    dt.datetime(2018, 6, 20, 13, 37, 3, 5),
    -dt.timedelta(hours=1, microseconds=1),
    b"\xe6\x10\x00\x00" + POINT_WKB,
)
ROW_BINLOG = (
    1,
    -5,
    BIGINT_UNSIGNED_MAX,
    F32,
    2.5,
    Decimal("12.30"),
    Decimal(DEC65),
    EMOJI,
    b"ab",
    "1",
    "1000000101",
    {b"k": [1, b"v"]},
    "y",
    {"c", "a"},
    2024,
    None,
    dt.datetime(2018, 6, 20, 6, 37, 3, 123456),
    dt.datetime(2018, 6, 20, 6, 37, 3, 123000),
    dt.datetime(2018, 6, 20, 13, 37, 3, 5),
    -dt.timedelta(hours=1, microseconds=999999),  # the binlog lib's decoding of -01:00:00.000001
    b"\xe6\x10\x00\x00" + POINT_WKB,
)
EXPECTED_ROW = (
    1,
    -5,
    Decimal(BIGINT_UNSIGNED_MAX),
    F32,
    2.5,
    Decimal("12.30"),
    DEC65,
    EMOJI,
    b"ab\x00\x00",
    True,
    b"\x05\x02",
    '{"k":[1,"v"]}',
    "y",
    "a,c",
    2024,
    0,
    1529476623123456,
    1529476623123,
    "2018-06-20T13:37:03.000005Z",
    -3600000001,
    {"wkb": POINT_WKB, "srid": 4326},
)


def test_convert_row_both_sources_identical():
    a = TableConverter(ALL_TABLE, DEFAULT, "pymysql").convert_row(ROW_PYMYSQL)
    b = TableConverter(ALL_TABLE, DEFAULT, "binlog").convert_row(ROW_BINLOG)
    assert a == EXPECTED_ROW
    assert b == EXPECTED_ROW


def test_convert_row_dict_missing_and_case_insensitive():
    tc = TableConverter(ALL_TABLE, DEFAULT, "binlog")
    row = dict(zip(tc.names, ROW_BINLOG))
    assert tc.convert_row_dict(row) == EXPECTED_ROW
    partial = {"ID": 7, "dt": None}
    out = tc.convert_row_dict(partial)
    assert out[0] == 7  # matched case-insensitively
    assert out[15] == 0  # present None of NOT NULL DATE: the binlog lib's zero date
    assert out[18] is None  # missing NOT NULL TIMESTAMP -> None, not the zero fallback
    assert all(v is None for i, v in enumerate(out) if i not in (0, 15))


def test_convert_row_dict_none_sources():
    t = TableSchema(
        "db",
        "t",
        (
            col("set", "s", 1, enum_values=("a", "b")),
            col("date", "d", 2, nullable=False),
            col("datetime", "m", 3, nullable=False),
            col("int", "i", 4),
        ),
    )
    tc = TableConverter(t, DEFAULT, "binlog")
    row = {"s": None, "d": None, "m": None, "i": None}
    sources = {"s": "empty set", "d": "out of date range", "m": "cols bitmap", "i": "null"}
    assert tc.convert_row_dict(row, sources) == ("", 0, None, None)
    assert tc.convert_row_dict(row) == (None, 0, 0, None)


def test_convert_row_wrong_length():
    tc = TableConverter(ALL_TABLE, DEFAULT, "pymysql")
    with pytest.raises(ValueError, match="shop.everything"):
        tc.convert_row((1, 2))
    with pytest.raises(ValueError):
        tc.to_record_batch([(1, 2)])


def test_to_record_batch_has_exact_schema():
    for source, row in (("pymysql", ROW_PYMYSQL), ("binlog", ROW_BINLOG)):
        tc = TableConverter(ALL_TABLE, DEFAULT, source)
        nulls = tuple([None] * len(ALL_COLUMNS))
        batch = tc.to_record_batch([row, nulls, row])
        assert batch.schema.equals(tc.arrow_schema, check_metadata=True)
        assert batch.schema.equals(arrow_schema(ALL_TABLE, DEFAULT), check_metadata=True)
        assert batch.num_rows == 3
        got = batch.to_pylist()
        assert tuple(got[0].values()) == EXPECTED_ROW
        assert tuple(got[2].values()) == EXPECTED_ROW
        # NOT NULL temporal columns turn None into the epoch fallback, the rest stays null
        assert got[1]["dt"] == 0 and got[1]["ts"] == "1970-01-01T00:00:00.000000Z"  # TIMESTAMP(6)
        assert got[1]["id"] is None and got[1]["j"] is None


def test_to_record_batch_empty_and_option_modes():
    opts = TypeOptions(
        decimal_handling_mode="string",
        time_precision_mode="connect",
        bigint_unsigned_handling_mode="long",
        binary_handling_mode="base64",
    )
    tc = TableConverter(ALL_TABLE, opts, "binlog")
    empty = tc.to_record_batch([])
    assert empty.num_rows == 0 and empty.schema.equals(tc.arrow_schema, check_metadata=True)
    row = list(ROW_BINLOG)
    row[19] = dt.timedelta(hours=1, microseconds=1500)
    got = tc.to_record_batch([row]).to_pylist()[0]
    assert got["bu"] == -1
    assert got["dec"] == "12.30"
    assert got["bin"] == base64.b64encode(b"ab\x00\x00").decode()
    assert got["dtm6"] == 1529476623123
    assert got["tm"] == 3600001
    assert tc.arrow_schema.field("tm").type == pa.int32()


def test_value_converter_matches_table_converter():
    tc = TableConverter(ALL_TABLE, DEFAULT, "pymysql")
    for c, raw, exp in zip(ALL_COLUMNS, ROW_PYMYSQL, EXPECTED_ROW):
        assert value_converter(c, DEFAULT, "pymysql")(raw) == exp
    assert tc.convert_columns([ROW_PYMYSQL])[6] == [DEC65]


def test_binlog_values_as_query_parameters():
    """python-mysql-replication's raw key values given back in the server's terms, so a
    ``WHERE key IN (...)`` of the rows a window changed finds them (Debezium's datetime_key_test:
    zero dates in a primary key)."""
    from dagster_mysql_cdc.source.types import binlog_value_as_parameter as p

    assert p(col("datetime", nullable=False), None) == "0000-00-00 00:00:00"
    assert p(col("date", nullable=False), None) == "0000-00-00"
    assert p(col("date", nullable=True), None) is None
    assert p(col("timestamp", nullable=False), dt.datetime(1970, 1, 1)) == "0000-00-00 00:00:00"
    assert p(col("timestamp"), dt.datetime(2020, 1, 1)) == dt.datetime(2020, 1, 1)
    assert p(col("bit", length=4), "0101") == 5
    assert p(col("binary", length=4), b"ab") == b"ab\x00\x00"
    assert p(col("set", enum_values=("a", "b")), {"b"}) == "b"
    assert p(col("int"), 7) == 7
