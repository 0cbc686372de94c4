"""The DBLog watermark window (dagster_mysql_cdc/engine/watermark.py): which binlog rows count as
changed inside a window, for both watermark strategies. Pure logic on the reader's item type."""

import pytest

from dagster_mysql_cdc.engine.watermark import close_window, keys_touched, open_window
from dagster_mysql_cdc.source.binlog import RowsBatch

SIG = ("db", "debezium_signal")
TBL = ("db", "t")


def rows(table, op, *ids, pos=0, key="id"):
    if op == "u":
        images = [{"before_values": {key: i}, "after_values": {key: i}} for i in ids]
    else:
        images = [{"values": {key: i}} for i in ids]
    return RowsBatch(
        file="mysql-bin.000001",
        pos=pos,
        ts_ms=1000 + pos,
        server_id=7,
        gtid=None,
        thread=None,
        database=table[0],
        table=table[1],
        op=op,
        rows=images,
        query=None,
        column_names=[key],
    )


def key_of(image):
    return (image["id"],)


def test_without_a_window_every_row_of_the_table_counts():
    items = [rows(TBL, "c", 1, 2), rows(("db", "other"), "c", 3), "not a rows batch", rows(TBL, "d", 4)]
    keys, high = keys_touched(items, TBL, key_of)
    assert keys == {(1,), (2,), (4,)} and high is None


def test_insert_insert_counts_rows_between_the_open_and_close_rows():
    items = [
        rows(TBL, "c", 1, pos=10),  # before the low watermark: not in the window
        rows(SIG, "c", "w-o", pos=20),
        rows(TBL, "u", 2, pos=30),
        rows(TBL, "d", 3, pos=40),
        rows(SIG, "c", "w-c", pos=50),
        rows(TBL, "c", 4, pos=60),  # after the high watermark
    ]
    keys, high = keys_touched(items, TBL, key_of, signal=SIG, open_id="w-o", close_id="w-c")
    assert keys == {(2,), (3,)}
    assert (high.file, high.pos, high.ts_ms, high.server_id) == ("mysql-bin.000001", 50, 1050, 7)


def test_insert_delete_closes_the_window_with_the_open_rows_delete():
    items = [
        rows(SIG, "c", "w-o", pos=20),
        rows(TBL, "c", 5, pos=30),
        rows(SIG, "d", "w-o", pos=40),
        rows(TBL, "c", 6, pos=50),
    ]
    keys, high = keys_touched(items, TBL, key_of, signal=SIG, open_id="w-o", close_id="w-o")
    assert keys == {(5,)} and high.pos == 40


def test_a_window_whose_close_is_missing_reports_no_high_watermark():
    keys, high = keys_touched(
        [rows(SIG, "c", "w-o"), rows(TBL, "c", 1)], TBL, key_of, signal=SIG, open_id="w-o", close_id="w-c"
    )
    assert keys == {(1,)} and high is None


class _Cursor:
    def __init__(self):
        self.sql: list[tuple[str, tuple]] = []

    def execute(self, sql, params=()):
        self.sql.append((sql, params))


def test_watermark_rows_use_debeziums_types_and_strategies():
    cur = _Cursor()
    open_window(cur, "`db`.`sig`", "w-o", "w")
    assert close_window(cur, "`db`.`sig`", "w-o", "w-c", "w") == "w-c"
    assert close_window(cur, "`db`.`sig`", "w-o", "w-c", "w", "insert_delete") == "w-o"
    assert cur.sql == [
        ("INSERT INTO `db`.`sig` (id, type, data) VALUES (%s, %s, %s)", ("w-o", "snapshot-window-open", "w")),
        (
            "INSERT INTO `db`.`sig` (id, type, data) VALUES (%s, %s, %s)",
            ("w-c", "snapshot-window-close", "w"),
        ),
        ("DELETE FROM `db`.`sig` WHERE id = %s", ("w-o",)),
    ]
    with pytest.raises(ValueError, match="insert_update"):
        close_window(cur, "`db`.`sig`", "w-o", "w-c", "w", "insert_update")
