"""BinlogReader's ``rows_filter``: rows of rejected tables are never decoded, everything else about
the item sequence (kinds, positions, GTIDs, transaction ends) stays the same."""

from __future__ import annotations

import random
import uuid

import pytest
from conftest import cdc_settings, root_connect

from dagster_mysql_cdc.source.binlog import BinlogReader, RowsBatch
from dagster_mysql_cdc.source.connection import connect, current_position, server_info

pytestmark = pytest.mark.integration


def test_rows_filter_skips_decoding_but_keeps_the_item_sequence():
    db = "rf_" + uuid.uuid4().hex[:8]
    root = root_connect()
    try:
        with root.cursor() as cur:
            cur.execute(f"CREATE DATABASE `{db}`")
            cur.execute(f"CREATE TABLE `{db}`.kept (id INT PRIMARY KEY, v VARCHAR(10))")
            cur.execute(f"CREATE TABLE `{db}`.other (id INT PRIMARY KEY, v VARCHAR(10))")
        conn = connect(cdc_settings())
        info = server_info(conn)
        start = current_position(conn, info)
        with root.cursor() as cur:
            for i in range(3):
                cur.execute(f"INSERT INTO `{db}`.other VALUES ({i}, 'o')")
                cur.execute(f"INSERT INTO `{db}`.kept VALUES ({i}, 'k')")
            cur.execute(f"UPDATE `{db}`.other SET v = 'p'")
            cur.execute(f"ALTER TABLE `{db}`.other ADD COLUMN w INT")
            cur.execute(f"DELETE FROM `{db}`.kept WHERE id = 1")
        end = current_position(conn, info)
        conn.close()

        def read(rows_filter):
            reader = BinlogReader(
                cdc_settings(),
                random.randint(1_000_000, 2_000_000_000),
                start,
                end,
                is_mariadb=info.is_mariadb,
                deadline_s=60,
                rows_filter=rows_filter,
            )
            return list(reader), reader

        calls = []

        def only_kept(d, t):
            calls.append((d, t))
            return (d, t) == (db, "kept")

        full, _ = read(None)
        filtered, reader = read(only_kept)
        assert len(filtered) == len(full)
        for a, b in zip(full, filtered):
            assert type(a) is type(b)
            if isinstance(a, RowsBatch):
                assert (a.database, a.table, a.op, a.file, a.pos, a.gtid) == (
                    b.database,
                    b.table,
                    b.op,
                    b.file,
                    b.pos,
                    b.gtid,
                )
                if a.table == "kept":
                    assert b.rows == a.rows and b.column_names == a.column_names
                else:
                    assert a.rows and b.rows == [] and b.column_names == []
            else:
                assert a == b
        skipped = [b for b in filtered if isinstance(b, RowsBatch) and (b.database, b.table) != (db, "kept")]
        assert reader.rows_skipped == len(skipped)
        assert len([b for b in skipped if (b.database, b.table) == (db, "other")]) == 4  # 3 inserts, 1 update
        assert sorted(set(calls)) == sorted(calls), "the filter is asked once per table"
        assert {(db, "kept"), (db, "other")} <= set(calls)
    finally:
        with root.cursor() as cur:
            cur.execute(f"DROP DATABASE IF EXISTS `{db}`")
        root.close()
