"""Lake types that follow the source's DDL (sink/evolution.py): supertypes, conversions, conformed
schemas. Pure Arrow, no services."""

from __future__ import annotations

import datetime as dt
import decimal

import pyarrow as pa
import pytest

from dagster_mysql_cdc.sink.evolution import (
    Conformed,
    category,
    changed_leaves,
    conform_schema,
    conform_table,
    convert,
    supertype,
)
from dagster_mysql_cdc.source.schema import ColumnSchema
from dagster_mysql_cdc.source.types import TypeOptions, arrow_field


def col(data_type: str, name: str = "c", **kw) -> pa.Field:
    """The lake field the type mapping gives a MySQL column (Debezium metadata included)."""
    c = ColumnSchema(name=name, position=1, data_type=data_type, **kw)
    return arrow_field(c, TypeOptions())


INT = col("int")
BIGINT = col("bigint")
TINYINT = col("tinyint")
FLOAT = col("float")
DOUBLE = col("double")
DATE = col("date")
DT0 = col("datetime", precision=0)
DT6 = col("datetime", precision=6)
TS = col("timestamp", precision=0)
VARCHAR = col("varchar", length=10, charset="utf8mb4")
BLOB = col("blob")
BIT1 = col("bit", length=1)


def dec(p: int, s: int) -> pa.Field:
    return col("decimal", precision=p, scale=s)


@pytest.mark.parametrize(
    ("lake", "new", "expected"),
    [
        (INT, BIGINT, pa.int64()),
        (BIGINT, INT, pa.int64()),  # narrowing keeps the wider lake type
        (TINYINT, INT, pa.int32()),
        (BIT1, INT, pa.int32()),
        (FLOAT, DOUBLE, pa.float64()),
        (INT, DOUBLE, pa.float64()),
        (BIGINT, DOUBLE, pa.string()),  # a 64-bit integer does not fit a double exactly
        (dec(8, 2), dec(12, 4), pa.decimal128(12, 4)),
        (dec(8, 2), dec(10, 0), pa.decimal128(12, 2)),
        (INT, dec(5, 2), pa.decimal128(12, 2)),
        (dec(30, 10), dec(30, 0), pa.string()),  # 30 integer digits + 10 decimals > 38
        (dec(10, 2), DOUBLE, pa.float64()),
        (dec(20, 2), DOUBLE, pa.string()),
        (INT, VARCHAR, pa.string()),
        (VARCHAR, INT, pa.string()),
        (DT0, DT6, pa.int64()),
        (DATE, DT0, pa.int64()),
        (TS, DT0, pa.string()),
        (BLOB, VARCHAR, pa.string()),
    ],
)
def test_supertype(lake, new, expected):
    assert supertype(lake, new).type == expected


def test_same_values_keep_the_lake_field_and_its_metadata():
    enum_a = col("enum", enum_values=("a", "b"))
    enum_b = col("enum", enum_values=("a", "b", "c"))
    assert supertype(enum_a, enum_b) is enum_a  # members added: same strings, no rewrite
    v10, v200 = col("varchar", length=10), col("varchar", length=200)
    assert supertype(v10, v200) is v10
    assert supertype(DT6, col("datetime", precision=4)) is DT6  # both MicroTimestamp


def test_temporal_units_are_converted_not_reinterpreted():
    ms = pa.array([1_700_000_000_123, None], pa.int64())
    up = convert(ms, DT0, supertype(DT0, DT6))
    assert up.to_pylist() == [1_700_000_000_123_000, None]
    assert category(supertype(DT0, DT6)) == "datetime_us"
    days = pa.array([19_000], pa.int32())
    assert convert(days, DATE, supertype(DATE, DT0)).to_pylist() == [19_000 * 86_400_000]


def test_text_rendering():
    s = supertype(INT, VARCHAR)
    assert convert(pa.array([1, -5, None], pa.int32()), INT, s).to_pylist() == ["1", "-5", None]
    d = pa.array([decimal.Decimal("1.50")], pa.decimal128(5, 2))
    assert convert(d, dec(5, 2), supertype(dec(5, 2), VARCHAR)).to_pylist() == ["1.50"]
    stamp = int(dt.datetime(2024, 1, 2, 3, 4, 5, 678000, tzinfo=dt.UTC).timestamp() * 1000)
    assert convert(pa.array([stamp], pa.int64()), DT0, supertype(DT0, VARCHAR)).to_pylist() == [
        "2024-01-02 03:04:05.678"
    ]
    zoned = supertype(TS, DT0)
    assert convert(pa.array([stamp], pa.int64()), DT0, zoned).to_pylist() == ["2024-01-02T03:04:05.678Z"]
    assert convert(pa.array([19_723], pa.int32()), DATE, supertype(DATE, VARCHAR)).to_pylist() == [
        "2024-01-01"
    ]
    t = col("time", precision=6)
    assert convert(
        pa.array([-(3600 + 61) * 10**6 - 5], pa.int64()), t, supertype(t, VARCHAR)
    ).to_pylist() == ["-01:01:01.000005"]
    assert convert(pa.array([b"ok", b"\xff"]), BLOB, supertype(BLOB, VARCHAR)).to_pylist() == ["ok", "/w=="]


def struct_field(name: str, *children: pa.Field) -> pa.Field:
    return pa.field(name, pa.struct(list(children)))


def test_conform_schema_recurses_into_row_images_and_reports_changes():
    lake = pa.schema(
        [struct_field("after", INT.with_name("id"), INT.with_name("qty")), pa.field("op", pa.string())]
    )
    incoming = pa.schema(
        [struct_field("after", INT.with_name("id"), BIGINT.with_name("qty"), VARCHAR.with_name("n"))]
    )
    c = conform_schema(lake, incoming)
    assert isinstance(c, Conformed)
    after = c.schema.field("after").type
    assert [f.name for f in after] == ["id", "qty", "n"]
    assert after.field("qty").type == pa.int64()
    assert c.changed == ("after.qty",) and c.added == ("after.n",)
    assert changed_leaves(c, ["after"]) == {"qty"}
    assert b"mysql.type" not in (after.field("n").metadata or {})  # change-log fields: lake semantics only
    assert after.field("n").metadata[b"debezium.type"] == b"string"
    # identical again: nothing changes
    again = conform_schema(c.schema, incoming)
    assert again.changed == () and again.added == () and again.schema.equals(c.schema)


def test_conform_table_converts_and_fills():
    lake = pa.schema(
        [struct_field("after", INT.with_name("id"), BIGINT.with_name("qty"), VARCHAR.with_name("n"))]
    )
    incoming = pa.schema([struct_field("after", INT.with_name("id"), INT.with_name("qty"))])
    data = pa.table(
        {"after": pa.array([{"id": 1, "qty": 2}, None], incoming.field("after").type)}, schema=incoming
    )
    out = conform_table(data, lake)
    assert out.schema.field("after").type == lake.field("after").type
    assert out.column("after").to_pylist() == [{"id": 1, "qty": 2, "n": None}, None]
    with pytest.raises(ValueError, match="not in the lake schema"):
        conform_table(pa.table({"x": [1]}), lake)


def test_a_unit_change_inside_a_row_image_is_seen():
    """``after.dt`` in milliseconds (DATETIME) and in microseconds (DATETIME(6)) are both int64:
    the row images' struct types compare equal, only the children's metadata differ. The change
    log takes the microseconds (a rewrite) and values of either unit are converted, never stored
    as they are (issue "Nothing lost": one column, one unit)."""
    ms_img = pa.schema([struct_field("after", INT.with_name("id"), DT0.with_name("dt"))])
    us_img = pa.schema([struct_field("after", INT.with_name("id"), DT6.with_name("dt"))])
    c = conform_schema(ms_img, us_img)
    assert c.changed == ("after.dt",)
    assert category(c.schema.field("after").type.field("dt")) == "datetime_us"
    # narrowing (DATETIME(6) -> DATETIME(3)): the lake keeps microseconds, new values convert up
    assert conform_schema(us_img, ms_img).changed == ()
    ms = pa.table(
        {"after": pa.array([{"id": 1, "dt": 1_700_000_000_123}], ms_img.field("after").type)}, ms_img
    )
    assert conform_table(ms, us_img).column("after").to_pylist() == [{"id": 1, "dt": 1_700_000_000_123_000}]
    t0, t6 = col("time", precision=0, name="tm"), col("time", precision=6, name="tm")
    same = conform_schema(pa.schema([struct_field("after", t0)]), pa.schema([struct_field("after", t6)]))
    assert same.changed == ()  # MicroTime whatever the digits
