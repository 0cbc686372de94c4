"""Debezium message.key.columns against MariaDB: a keyless table gets a key (keyed state, key struct,
incremental snapshots in key order) and a primary key can be overridden by another unique column;
together with column.include.list."""

import pytest
from deltalake import DeltaTable
from lake_utils import live_state_rows
from sensor_harness import SensorDriven, capture_resource, scratch_database

from dagster_mysql_cdc.errors import ConfigurationError
from dagster_mysql_cdc.sink.read import read_current
from dagster_mysql_cdc.source.columns import ColumnPolicy
from dagster_mysql_cdc.source.schema import ColumnSchema, TableSchema

pytestmark = [pytest.mark.integration, pytest.mark.spark]


def test_policy_keys_tables_by_the_first_matching_pattern():
    t = TableSchema("db", "log", (ColumnSchema("a", "int", 1), ColumnSchema("B", "varchar", 2, length=5)))
    p = ColumnPolicy(message_key_columns=((r"db\.lo.", ("b",)), (r"db\..*", ("a",))))
    assert p.keyed(t).primary_key == ("B",)  # names as the table spells them
    assert p.captured(t).primary_key == ("B",)
    assert ColumnPolicy(message_key_columns=((r"other\..*", ("a",)),)).keyed(t) is t
    with pytest.raises(ConfigurationError, match=r"names \['zz'\] for db.log"):
        ColumnPolicy(message_key_columns=((r"db\.log", ("zz",)),)).keyed(t)
    with pytest.raises(ConfigurationError, match="one or more column names"):
        ColumnPolicy(message_key_columns=((r"db\.log", ()),))


def test_keyless_table_and_primary_key_override(local_storage):
    with scratch_database("mkey") as (db, conn):
        with conn.cursor() as cur:
            cur.execute(f"USE {db}")
            cur.execute("CREATE TABLE log (a INT NOT NULL, b VARCHAR(10), n INT)")  # no primary key
            cur.execute("INSERT INTO log SELECT seq, CONCAT('b', seq), seq FROM seq_1_to_30")
            cur.execute("CREATE TABLE t (id INT PRIMARY KEY, code VARCHAR(10) NOT NULL UNIQUE, v INT)")
            cur.execute("INSERT INTO t VALUES (1, 'x', 1), (2, 'y', 2)")
        mysql = capture_resource(
            db,
            message_key_columns={rf"{db}\.log": ["a"], rf"{db}\.t": ["code"]},
            # column.include.list on every path too: log.b is not captured
            column_include_list=[rf"{db}\.log\.(a|n)", rf"{db}\.t\..*", rf"{db}\.debezium_signal\..*"],
            incremental_snapshot_chunk_size=7,
        )
        mysql.create_signal_table()
        tables = [s for s in mysql.discover_tables() if s.table != "debezium_signal"]
        assert {s.table: s.primary_key for s in tables} == {"log": ("a",), "t": ("code",)}
        cdc = SensorDriven(mysql, local_storage.base_uri, tables=tables)
        cdc.ticks()
        with conn.cursor() as cur:
            cur.execute(f"UPDATE {db}.log SET n = n + 100 WHERE a <= 3")
            cur.execute(f"DELETE FROM {db}.log WHERE a = 30")
            cur.execute(f"UPDATE {db}.t SET id = 20 WHERE code = 'y'")  # a new primary key, same message key
            cur.execute(
                f"INSERT INTO {db}.debezium_signal VALUES ('mk-1', 'execute-snapshot', "
                f'\'{{"data-collections": ["{db}.log"]}}\')'
            )
        cdc.ticks()
        state = read_current(local_storage, local_storage.uri(db, db, "log", "state"))
        assert "__count" not in state.column_names  # keyed by the message key, not a multiset
        rows = live_state_rows(local_storage, local_storage.uri(db, db, "log", "state"), ["a"])
        assert [r["a"] for r in rows] == list(range(1, 30))
        assert set(rows[0]) == {"a", "n"}
        assert [r["n"] for r in rows[:4]] == [101, 102, 103, 4]
        changelog = DeltaTable(local_storage.uri(db, db, "log", "changelog")).to_pyarrow_table().to_pylist()
        assert all(e["key"] == {"a": (e["after"] or e["before"])["a"]} for e in changelog)
        assert any(e["source"]["snapshot"] == "incremental" for e in changelog)
        t_rows = live_state_rows(local_storage, local_storage.uri(db, db, "t", "state"), ["code"])
        assert [(r["code"], r["id"]) for r in t_rows] == [("x", 1), ("y", 20)]
        t_log = DeltaTable(local_storage.uri(db, db, "t", "changelog")).to_pyarrow_table().to_pylist()
        assert [e["op"] for e in t_log if e["source"]["snapshot"] == "false"] == ["u"]  # not a key change
