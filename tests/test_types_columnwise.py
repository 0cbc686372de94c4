"""The column-wise (Arrow-vectorised) conversion equals the per-value conversion, value by value.

``TableConverter.column_arrays`` converts whole columns with Arrow where it can and falls back to
the per-value converters for a column as soon as one value does not fit. ``test_types_mariadb``
compares whole batches, where one zero date sends its column down the per-value path; here every
row of the every-type table is also converted on its own, so the vectorised path of each column is
checked against every edge value it accepts (both sources, every option set). The snapshot's
text read (``snapshot_decoders``: numbers and temporals arrive as the server's text and are parsed
by Arrow) must give the same batches as the default pymysql decoders.
"""

from __future__ import annotations

import pyarrow as pa
import pytest
from test_types_mariadb import DB, NAMES, OPTION_SETS, TABLE, captured, connect  # noqa: F401  (fixture)

from dagster_mysql_cdc.source.types import TableConverter, select_expression, snapshot_decoders

pytestmark = pytest.mark.integration


def _raw_binlog(values: dict, none_sources: dict) -> tuple:
    return tuple(
        "" if values.get(n) is None and none_sources.get(n) == "empty set" else values.get(n) for n in NAMES
    )


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
def test_column_arrays_equal_per_value_conversion(captured, options):  # noqa: F811
    schema, pymysql_rows, binlog_rows, _ = captured
    for source, rows in (
        ("pymysql", pymysql_rows),
        ("binlog", [_raw_binlog(v, ns) for v, ns in binlog_rows]),
    ):
        conv = TableConverter(schema, options, source)
        for chunk in [rows] + [[r] for r in rows]:
            got = conv.column_arrays(list(zip(*chunk)))
            for name, arr, field, values in zip(NAMES, got, conv.arrow_schema, zip(*chunk)):
                expected = pa.array([conv.convert_row(r)[NAMES.index(name)] for r in chunk], field.type)
                assert arr.type == field.type, (source, name)
                assert arr.equals(expected), (
                    f"{source} {name}: {arr.to_pylist()} != {expected.to_pylist()} (raw {values})"
                )


def _text_rows(schema) -> list[tuple]:
    conn = connect(init_command="SET time_zone='+00:00'")
    try:
        conn.decoders = snapshot_decoders(conn.decoders)
        with conn.cursor() as cur:
            cur.execute(
                "SELECT "
                + ", ".join(select_expression(c) for c in schema.columns)
                + f" FROM `{DB}`.`{TABLE}` ORDER BY id"
            )
            return [tuple(r) for r in cur.fetchall()]
    finally:
        conn.close()


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
def test_snapshot_text_values_give_the_same_batches(captured, options):  # noqa: F811
    schema, pymysql_rows, _, _ = captured
    text_rows = _text_rows(schema)
    assert len(text_rows) == len(pymysql_rows)
    assert any(
        isinstance(v, str) and isinstance(w, int)
        for r, q in zip(text_rows, pymysql_rows)
        for v, w in zip(r, q)
    )
    conv = TableConverter(schema, options, "pymysql")
    for a, b in [(pymysql_rows, text_rows)] + [([p], [t]) for p, t in zip(pymysql_rows, text_rows)]:
        expected = conv.to_record_batch(a)
        got = conv.to_record_batch(b, text_values=True)
        for name in NAMES:
            assert got.column(name).equals(expected.column(name)), (
                f"{name}: {got.column(name).to_pylist()} != {expected.column(name).to_pylist()} (text {[r[NAMES.index(name)] for r in b]})"
            )
        assert got.equals(expected)
