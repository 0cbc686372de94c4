"""Debezium snapshot.select.statement.overrides against MariaDB: the initial snapshot reads only the
rows of the statement's WHERE condition (validated like a signal filter), streaming is unfiltered,
and unsafe statements are refused before anything is read."""

import pytest
from conftest import cdc_settings
from lake_utils import live_state_rows
from sensor_harness import SensorDriven, capture_resource, scratch_database

from dagster_mysql_cdc.errors import ConfigurationError
from dagster_mysql_cdc.source.select_overrides import override_condition, parse_overrides
from dagster_mysql_cdc.source.snapshot import ConsistentSnapshot, SnapshotOptions
from dagster_mysql_cdc.source.types import TypeOptions

pytestmark = [pytest.mark.integration]  # the parsing tests first need no server


@pytest.mark.parametrize(
    ("sql", "message"),
    [
        ("SELECT id FROM db.t", "the projection must be"),
        ("SELECT * FROM db.u", "it reads db.u, not db.t"),
        ("SELECT * FROM db.t JOIN db.u ON 1 = 1", "JOIN is not allowed"),
        ("SELECT * FROM db.t LIMIT 3", "LIMIT is not allowed"),
        ("SELECT * FROM db.t; DROP TABLE db.t", "one SELECT statement"),
        ("DELETE FROM db.t", "one SELECT statement"),
        ("SELECT * FROM db.t WHERE id > 1 -- x", "comments are not allowed"),
        ("SELECT * FROM (SELECT * FROM db.t) s", "it must read one table"),
        ("SELEC * FROM db.t", "not valid SQL"),
    ],
)
def test_statements_other_than_select_star_where_are_refused(sql, message):
    with pytest.raises(ConfigurationError, match=message):
        override_condition("db.t", sql)


def test_the_where_condition_is_what_is_kept():
    assert override_condition("db.t", "select * from T where id > 5 and v like 'a%'") == (
        "id > 5 AND v LIKE 'a%'"
    )
    assert parse_overrides({"DB.T": "SELECT * FROM db.t", "db.u": "SELECT * FROM u WHERE n = 1"}) == (
        ("db.u", "n = 1"),
    )
    with pytest.raises(ConfigurationError, match="must be 'database.table'"):
        parse_overrides({"t": "SELECT * FROM t"})


def test_unsafe_condition_is_refused_before_reading(root_conn):
    with scratch_database("ovr") as (db, conn):
        with conn.cursor() as cur:
            cur.execute(f"CREATE TABLE {db}.t (id INT PRIMARY KEY, v VARCHAR(10))")
        for cond, message in [
            ("SLEEP(1) = 0", "calls function SLEEP"),
            ("nope > 1", "unknown column 'nope'"),
        ]:
            opts = SnapshotOptions(select_overrides=((f"{db}.t", cond),))
            with pytest.raises(ConfigurationError, match=message):
                with ConsistentSnapshot(cdc_settings(), [(db, "t")], TypeOptions(), opts, "srv"):
                    pass


@pytest.mark.spark
def test_initial_snapshot_reads_only_the_overridden_rows_and_streaming_is_unfiltered(local_storage):
    with scratch_database("ovr") as (db, conn):
        with conn.cursor() as cur:
            cur.execute(f"USE {db}")
            cur.execute(f"CREATE TABLE {db}.t (id INT PRIMARY KEY, v VARCHAR(10))")
            cur.execute(
                f"INSERT INTO {db}.t SELECT seq, IF(seq = 7, 'skip', CONCAT('v', seq)) FROM seq_1_to_10"
            )
            cur.execute(f"CREATE TABLE {db}.other (id INT PRIMARY KEY)")
            cur.execute(f"INSERT INTO {db}.other VALUES (1), (2)")
        mysql = capture_resource(
            db,
            snapshot_select_statement_overrides={
                f"{db}.t": f"SELECT * FROM {db}.t WHERE id > 5 AND v <> 'skip' AND v LIKE 'v%'"
            },
        )
        cdc = SensorDriven(mysql, local_storage.base_uri)
        cdc.ticks()
        ids = [
            r["id"] for r in live_state_rows(local_storage, local_storage.uri(db, db, "t", "state"), ["id"])
        ]
        assert ids == [6, 8, 9, 10]
        other = live_state_rows(local_storage, local_storage.uri(db, db, "other", "state"), ["id"])
        assert [r["id"] for r in other] == [1, 2]  # tables without an override: every row
        with conn.cursor() as cur:
            cur.execute(f"INSERT INTO {db}.t VALUES (0, 'streamed')")
        cdc.ticks()
        ids = [
            r["id"] for r in live_state_rows(local_storage, local_storage.uri(db, db, "t", "state"), ["id"])
        ]
        assert ids == [0, 6, 8, 9, 10]
