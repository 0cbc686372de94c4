"""What the lake's current state holds after each DDL (issue "Nothing lost"): the source's values.

One table per DDL, all changed in one window (rows changed before and after each statement, most
rows not changed at all), captured through the public API (``mysql_cdc_assets`` and the binlog
sensor) on the real MariaDB and local Spark. After the window, every table's current state equals
the source (every column's values, not only the row count; the columns the source no longer has
null), every temporal value of the change log and the state is in the unit its column declares,
and the full checks pass. Temporal precision changes go both ways for DATETIME, TIMESTAMP and
TIME, alone in the window and after another DDL of the same table in the same window, in both
``time_precision_mode`` values.

Before the fix: ``RENAME COLUMN``/``CHANGE`` left the new column null on every row not changed
since; ``DATETIME`` -> ``DATETIME(6)`` was never rewritten (old rows in ms, new in us, under the
ms type) and ``DATETIME(6)`` -> ``DATETIME(3)`` wrote ms into the us column; a window's record
batch written before a widening kept the old unit; ``TIMESTAMP`` -> ``TIMESTAMP(6)`` kept the
old rows' text without the column's digits; ``DROP COLUMN`` left the dropped values in the state.
"""

from __future__ import annotations

import dagster as dg
import pytest
from sensor_harness import SensorDriven, capture_resource, scratch_database
from test_schema_evolution import assert_lake_equals_source, assert_one_unit

from dagster_mysql_cdc.sink.storage import StorageSettings
from dagster_mysql_cdc.source.signals import create_signal_table
from dagster_mysql_cdc.source.types import TypeOptions

pytestmark = [pytest.mark.integration, pytest.mark.spark]

COLUMNS = (
    "id INT PRIMARY KEY, descr VARCHAR(20), n INT, dt DATETIME, dt6 DATETIME(6), ts TIMESTAMP NULL, "
    "ts6 TIMESTAMP(6) NULL, tm TIME, tm6 TIME(6)"
)

#: table -> its DDL in the window, in order (DML before, between and after each statement)
TEMPORAL = {
    "t_dt_up": ["MODIFY dt DATETIME(6)"],
    "t_dt_up_other": ["MODIFY n BIGINT", "MODIFY dt DATETIME(6)"],
    "t_dt_down": ["MODIFY dt6 DATETIME(3)"],
    "t_dt_down_other": ["MODIFY n BIGINT", "MODIFY dt6 DATETIME(3)"],
    "t_dt_up_down": ["MODIFY dt DATETIME(6)", "MODIFY dt DATETIME(2)"],
    # a key change ends the window's first part; the next part widens dt before the first commits
    "t_dt_up_rekey": ["DROP PRIMARY KEY, ADD PRIMARY KEY (id, tm)", "MODIFY dt DATETIME(6)"],
    "t_ts_up": ["MODIFY ts TIMESTAMP(6) NULL"],
    "t_ts_up_other": ["MODIFY n BIGINT", "MODIFY ts TIMESTAMP(6) NULL"],
    "t_ts_down": ["MODIFY ts6 TIMESTAMP(3) NULL"],
    "t_ts_down_other": ["MODIFY dt DATETIME(6)", "MODIFY ts6 TIMESTAMP(3) NULL"],
    "t_tm_up": ["MODIFY tm TIME(6)"],
    "t_tm_up_other": ["MODIFY n BIGINT", "MODIFY tm TIME(6)"],
    "t_tm_down": ["MODIFY tm6 TIME(3)"],
    "t_tm_down_other": ["MODIFY dt DATETIME(6)", "MODIFY tm6 TIME(3)"],
}
COLUMN_DDL = {
    "t_ren": ["RENAME COLUMN descr TO description"],
    "t_chg": ["CHANGE descr d2 VARCHAR(40)"],
    "t_chg_other": ["MODIFY dt DATETIME(6)", "CHANGE COLUMN descr d2 TEXT AFTER id"],
    "t_ren_twice": ["RENAME COLUMN descr TO d1", "RENAME COLUMN d1 TO d2"],
    "t_drop": ["DROP COLUMN descr"],
    "t_drop_add": ["DROP COLUMN n, ADD COLUMN n INT"],
    "t_drop_then_add": ["DROP COLUMN n", "ADD COLUMN n INT"],
    "t_add_default": ["ADD COLUMN z INT NOT NULL DEFAULT 5"],
    "t_reorder": ["MODIFY n INT FIRST"],
    "t_other_type": ["MODIFY n VARCHAR(10)"],
}


def _row(i: int) -> tuple:
    """Times of day (Kafka Connect ``Time`` in ``connect`` mode holds nothing else)."""
    return (
        i,
        f"d{i}",
        i * 10,
        f"2024-01-02 03:{i:02d}:05",
        f"2024-01-02 03:{i:02d}:05.123456",
        f"2024-01-02 03:{i:02d}:05",
        f"2024-01-02 03:{i:02d}:05.654321",
        f"1{i % 10}:11:12",
        f"0{1 + i % 9}:11:12.654321",
    )


def _writes(cur, table: str, step: int) -> None:
    """Some rows changed, one added, one deleted: most rows of the table stay as they are."""
    cur.execute(
        f"INSERT INTO {table} (id, dt6, tm) VALUES ({100 + step}, '2025-05-05 05:05:05.5', '12:00:00')"
    )
    cur.execute(f"UPDATE {table} SET dt6 = '2025-06-06 06:06:06.25', tm = '13:00:00' WHERE id = {step + 3}")
    cur.execute(f"DELETE FROM {table} WHERE id = {step + 6}")


def run_ddl_window(tmp_path, plans: dict[str, list[str]], **capture_options) -> None:
    """Each table of ``plans`` snapshotted with 20 rows, then its DDL in one window amid writes;
    the sensor runs until it is caught up (repairs included); then the comparisons."""
    with scratch_database("ddlstate") as (db, conn):
        with conn.cursor() as cur:
            cur.execute(f"USE {db}")
            for t in plans:
                cur.execute(f"CREATE TABLE {t} ({COLUMNS})")
                cur.executemany(
                    f"INSERT INTO {t} VALUES ({', '.join(['%s'] * 9)})", [_row(i) for i in range(1, 21)]
                )
        create_signal_table(conn, f"{db}.debezium_signal")
        mysql = capture_resource(db, **capture_options)
        tables = [t for t in mysql.discover_tables() if t.table != "debezium_signal"]
        lake = str(tmp_path / "lake")
        cdc = SensorDriven(mysql, lake, tables)
        assert all(r.success for r in cdc.ticks(run_log_level="WARNING").runs)  # the snapshot
        with conn.cursor() as cur:
            cur.execute(f"USE {db}")
            for t, ddls in plans.items():
                for step, ddl in enumerate(ddls, start=1):
                    _writes(cur, t, step)
                    cur.execute(f"ALTER TABLE {t} {ddl}")
                _writes(cur, t, len(ddls) + 1)
        ticks = cdc.ticks(max_ticks=40, run_log_level="WARNING")
        assert ticks.runs and all(r.success for r in ticks.runs)
        storage = StorageSettings(base_uri=lake)
        options = TypeOptions(
            time_precision_mode=capture_options.get("time_precision_mode", "adaptive_time_microseconds")
        )
        checked = 0
        for t in plans:
            assert_lake_equals_source(storage, db, db, t, conn, options)
            checked += assert_one_unit(storage, db, db, t)
        assert checked > 40 * len(plans)
        keys = [k for k in cdc.cdc.keys if k.path[-1] in plans]
        checks = dg.materialize(
            [cdc.cdc],
            selection=dg.AssetSelection.checks_for_assets(*keys),
            resources=cdc.resources,
            instance=cdc.instance,
        )
        failed = [
            (e.asset_key.path[-1], e.check_name, e.metadata)
            for e in checks.get_asset_check_evaluations()
            if not e.passed
        ]
        assert not failed, failed


def test_the_state_equals_the_source_after_column_ddl(tmp_path):
    """Renamed columns carry their values (the rows are re-read: the binlog has no row event for
    them), dropped columns are null everywhere, a column dropped and added again is null, a
    column added with a default has it, a reorder and a type change keep every value."""
    run_ddl_window(tmp_path, COLUMN_DDL)


@pytest.mark.parametrize("mode", ["adaptive_time_microseconds", "connect"])
def test_temporal_precision_changes_keep_one_unit(tmp_path, mode):
    """DATETIME, TIMESTAMP and TIME columns made more and less precise, alone in the window and
    after another DDL of the table in the same window: one unit per column, in the state and in
    every change-log event, and the values equal the source's."""
    run_ddl_window(tmp_path, TEMPORAL, time_precision_mode=mode)


def test_a_rename_not_repaired_fails_the_window_checks(tmp_path):
    """With ``binlog_gap_handling="warn"`` the rows a RENAME COLUMN moved are reported, not
    re-read: the window run's checks compare the whole table (not only the keys the window
    changed) and fail on the renamed column, which is null in the lake and valued in the source.
    Before, the rename was no gap and the window's checks passed."""
    with scratch_database("ddlwarn") as (db, conn):
        with conn.cursor() as cur:
            cur.execute(f"USE {db}")
            cur.execute("CREATE TABLE t (id INT PRIMARY KEY, descr VARCHAR(20), n INT)")
            cur.executemany("INSERT INTO t VALUES (%s, %s, %s)", [(i, f"d{i}", i) for i in range(1, 21)])
        cdc = SensorDriven(capture_resource(db, binlog_gap_handling="warn"), str(tmp_path / "lake"))
        cdc.ticks(run_log_level="WARNING")
        with conn.cursor() as cur:
            cur.execute(f"USE {db}")
            cur.execute("ALTER TABLE t RENAME COLUMN descr TO description")
            cur.execute("UPDATE t SET n = n + 1 WHERE id <= 3")
        log = cdc.ticks(run_log_level="WARNING")
        evals = [
            e
            for r in log.runs
            for e in r.get_asset_check_evaluations()
            if e.asset_key.path[-1] == "t" and e.check_name == "checksum_matches_source"
        ]
        assert evals and not evals[-1].passed, [e.metadata for e in evals]
        assert "description" in evals[-1].metadata["columns_compared"].value


@pytest.mark.integration
def test_ddl_of_a_database_the_capture_rules_out_does_not_stop_it(tmp_path):
    """Found under `dagster dev` (`make ui`, capturing `inventory`, beside another application on
    the same server): ``CREATE TABLE other.copy LIKE other.src`` failed every window run with
    ``UnparseableDdlError`` (the schema catalog holds the captured databases' tables only, so it
    does not know ``other.src``), and the capture stopped for a database it does not capture.
    Such statements are passed over now, and the changes around them land; a statement the
    catalog cannot follow that names a captured database still stops the window, loudly."""
    with scratch_database("ddlcap") as (db, conn), scratch_database("ddlother") as (other, _):
        with conn.cursor() as cur:
            cur.execute(f"CREATE TABLE {db}.t (id INT PRIMARY KEY, v INT)")
            cur.execute(f"INSERT INTO {db}.t VALUES (1, 1)")
            cur.execute(f"CREATE TABLE {other}.src (id INT PRIMARY KEY, v INT)")
        lake = str(tmp_path / "lake")
        cdc = SensorDriven(capture_resource(db), lake)
        assert all(r.success for r in cdc.ticks().runs)  # the initial snapshot
        with conn.cursor() as cur:
            cur.execute(f"INSERT INTO {db}.t VALUES (2, 2)")
            cur.execute(f"CREATE TABLE {other}.copy LIKE {other}.src")
            cur.execute(f"ALTER TABLE {other}.src ADD COLUMN w INT NULL")
            cur.execute(f"RENAME TABLE {other}.copy TO {other}.copy2")
            cur.execute(f"DROP TABLE {other}.copy2")
            cur.execute(f"INSERT INTO {db}.t VALUES (3, 3)")
        runs = cdc.ticks().runs
        assert runs and all(r.success for r in runs)
        assert_lake_equals_source(StorageSettings(base_uri=lake), db, db, "t", conn)
        # each statement passed over is a WARNING of the run's event log (not only its stderr)
        import logging

        passed = [
            e.user_message
            for r in runs
            for e in cdc.instance.all_logs(r.run_id)
            if e.level == logging.WARNING and "Passed over a DDL statement of database(s)" in e.user_message
        ]
        assert len(passed) == 1 and f"database(s) {other} at " in passed[0] and "LIKE" in passed[0], passed

        with conn.cursor() as cur:  # names the captured database: the catalog must follow it
            cur.execute(f"CREATE TABLE {db}.bad LIKE {other}.src")
            cur.execute(f"INSERT INTO {db}.t VALUES (4, 4)")
        with pytest.raises(Exception, match=f"Cannot parse/apply DDL statement .*LIKE {other}.src") as failed:
            cdc.ticks(max_ticks=1)
        assert type(failed.value).__name__ == "UnparseableDdlError", failed.value
