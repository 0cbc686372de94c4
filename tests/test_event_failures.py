"""Debezium event.processing.failure.handling.mode against MariaDB: a row event that cannot be
decoded (here: its columns differ from the schema history because the ALTER was made with
sql_log_bin=0) fails the window run by default, and with warn/skip is skipped, never silently: a
WARNING with its position and the binlog asset's events_skipped metadata."""

import re

import pytest
from lake_utils import live_state_rows
from sensor_harness import SensorDriven, capture_resource, scratch_database

from dagster_mysql_cdc.engine.stream import StreamOptions
from dagster_mysql_cdc.errors import ConfigurationError

pytestmark = [pytest.mark.integration, pytest.mark.spark]


def test_unknown_mode_is_refused():
    with pytest.raises(ConfigurationError, match="event.processing.failure.handling.mode"):
        StreamOptions(event_processing_failure_handling_mode="ignore")


def _binlog_metadata(cdc: SensorDriven, run) -> dict:
    (mat,) = [m for m in run.get_asset_materialization_events() if m.asset_key.path[-1] == "binlog"]
    return {k: v.value for k, v in mat.materialization.metadata.items()}


@pytest.mark.parametrize("mode", ["fail", "warn", "skip"])
def test_undecodable_events_fail_or_are_skipped_and_reported(local_storage, mode):
    with scratch_database("evf") as (db, conn):
        with conn.cursor() as cur:
            cur.execute(f"CREATE TABLE {db}.t (id INT PRIMARY KEY, v VARCHAR(10))")
            cur.execute(f"INSERT INTO {db}.t VALUES (1, 'a')")
        cdc = SensorDriven(
            capture_resource(db, event_processing_failure_handling_mode=mode), local_storage.base_uri
        )
        cdc.ticks()
        with conn.cursor() as cur:
            cur.execute(f"INSERT INTO {db}.t VALUES (2, 'b')")
            cur.execute("SET SESSION sql_log_bin = 0")
            cur.execute(f"ALTER TABLE {db}.t ADD COLUMN x INT")  # the history never learns of it
            cur.execute("SET SESSION sql_log_bin = 1")
            cur.execute(f"INSERT INTO {db}.t VALUES (3, 'c', 30)")
        ticks = cdc.ticks(raise_on_error=False, max_ticks=3, until_caught_up=mode != "fail")
        run = ticks.runs[0]
        if mode == "fail":
            assert not run.success
            failure = next(e for e in run.all_events if e.is_step_failure)
            assert "SchemaMismatchError" in str(failure.step_failure_data.error)
            return
        assert run.success
        md = _binlog_metadata(cdc, run)
        assert md["events_skipped_count"] == 1
        (skipped,) = md["events_skipped"]
        assert skipped["table"] == f"{db}.t" and re.fullmatch(r".+\.\d+:\d+", skipped["position"])
        assert "schema history" in skipped["reason"]
        warnings = [
            e.message
            for e in cdc.instance.all_logs(run.run_id)
            if e.level >= 30 and "that cannot be decoded were skipped" in (e.message or "")
        ]
        assert warnings, "a skipped event is never silent"
        per_event = [
            e.message for e in cdc.instance.all_logs(run.run_id) if "Skipped an event of" in (e.message or "")
        ]
        assert bool(per_event) == (mode == "warn")
        rows = live_state_rows(local_storage, local_storage.uri(db, db, "t", "state"), ["id"])
        assert [r["id"] for r in rows] == [1, 2]  # the decodable event before it was kept


# -- values that cannot be converted (Debezium BinlogConvertingFailureIT, converting_failure.sql) ----

TIME_TABLE = "CREATE TABLE {db}.time_table (id INT NOT NULL, A TIME(1) NULL, B TIME(6) NULL, C TIME(1) NOT NULL, PRIMARY KEY(id))"
# time_precision_mode=connect holds a time of day: -23:45:56.7 and 123:00:00.123456 cannot be converted
BAD_ROW = "INSERT INTO {db}.time_table VALUES (201, '-23:45:56.7', '123:00:00.123456', '23:45:56.0')"
GOOD_ROW = "INSERT INTO {db}.time_table VALUES ({id}, '23:45:56.7', '23:00:00.123456', '23:45:56.0')"


def _failure_message(run) -> str:
    failure = next(e for e in run.all_events if e.is_step_failure)
    return str(failure.step_failure_data.error)


def test_a_value_that_cannot_be_converted_fails_naming_table_column_and_position(local_storage):
    """event_processing_failure_handling_mode=fail (the default): the snapshot fails and the
    stream window stops the table, with ValueConversionError naming the table, the column and the
    row (snapshot: position and key; stream: binlog file:pos and row), never the value, and the fix."""
    with scratch_database("convfail") as (db, conn):
        with conn.cursor() as cur:
            cur.execute(TIME_TABLE.format(db=db))
            cur.execute(GOOD_ROW.format(db=db, id=1))
            cur.execute(BAD_ROW.format(db=db))
        cdc = SensorDriven(capture_resource(db, time_precision_mode="connect"), local_storage.base_uri)
        snap = cdc.ticks(raise_on_error=False, max_ticks=1, until_caught_up=False).runs[0]
        assert not snap.success
        msg = _failure_message(snap)
        assert "ValueConversionError" in msg and f"{db}.time_table column A at snapshot at" in msg, msg
        assert "row with key id='201'" in msg and "time_precision_mode" in msg
        assert "event_processing_failure_handling_mode" in msg and "-23:45:56" not in msg
        with conn.cursor() as cur:
            cur.execute(f"DELETE FROM {db}.time_table WHERE id = 201")
        assert all(r.success for r in cdc.ticks().runs)  # the snapshot is retried and now passes
        with conn.cursor() as cur:
            cur.execute(BAD_ROW.format(db=db))
        # streaming: the table stops alone (tests/test_isolation.py), the window succeeds and
        # reports the same error on the binlog asset
        window = cdc.ticks(raise_on_error=False, max_ticks=1, until_caught_up=False).runs[0]
        assert window.success
        msg = _binlog_metadata(cdc, window)["stopped_tables"][f"{db}.time_table"]["error"]
        assert "ValueConversionError" in msg and f"{db}.time_table column after.A at " in msg, msg
        assert re.search(r"at \S+\.\d+:\d+ row 0 ", msg) and "-23:45:56" not in msg


@pytest.mark.parametrize("mode", ["warn", "skip"])
def test_a_value_that_cannot_be_converted_is_left_out_and_reported(local_storage, mode):
    """warn/skip: the row (snapshot) or event (stream) holding the value is left out, reported in
    the materialization metadata (events_skipped: table, position, column) and the run log; every
    other row, and every other table (Debezium's dbz7143 beside it), is captured."""
    with scratch_database("convskip") as (db, conn):
        with conn.cursor() as cur:
            cur.execute(
                f"CREATE TABLE {db}.dbz7143 (id INT NOT NULL, age INT NULL, name VARCHAR(255) NULL, PRIMARY KEY(id))"
            )
            cur.execute(f"INSERT INTO {db}.dbz7143 VALUES (1, 30, 'a')")
            cur.execute(TIME_TABLE.format(db=db))
            cur.execute(GOOD_ROW.format(db=db, id=1))
            cur.execute(BAD_ROW.format(db=db))
            cur.execute(GOOD_ROW.format(db=db, id=2))
        mysql = capture_resource(
            db, time_precision_mode="connect", event_processing_failure_handling_mode=mode
        )
        cdc = SensorDriven(mysql, local_storage.base_uri)
        (snap,) = cdc.ticks().runs
        (mat,) = [m for m in snap.get_asset_materialization_events() if m.asset_key.path[-1] == "time_table"]
        md = {k: v.value for k, v in mat.materialization.metadata.items()}
        assert md["events_skipped_count"] == 1 and md["dagster/row_count"] == 2
        (skipped,) = md["events_skipped"]
        assert skipped["table"] == f"{db}.time_table" and "row with key id='201'" in skipped["position"]
        assert skipped["reason"].startswith("A: ValueError")
        logs = [e.message for e in cdc.instance.all_logs(snap.run_id) if e.level >= 30]
        assert any("time_table" in (m or "") and "out of the snapshot" in (m or "") for m in logs)
        with conn.cursor() as cur:
            cur.execute(BAD_ROW.format(db=db).replace("201", "202"))
            cur.execute(GOOD_ROW.format(db=db, id=3))
            cur.execute(f"INSERT INTO {db}.dbz7143 VALUES (2, 40, 'b')")
        (window,) = cdc.ticks().runs
        md = _binlog_metadata(cdc, window)
        assert md["events_skipped_count"] == 1
        (skipped,) = md["events_skipped"]
        assert skipped["table"] == f"{db}.time_table" and skipped["reason"].startswith("after.A: ValueError")
        rows = live_state_rows(local_storage, local_storage.uri(db, db, "time_table", "state"), ["id"])
        assert [r["id"] for r in rows] == [1, 2, 3]
        other = live_state_rows(local_storage, local_storage.uri(db, db, "dbz7143", "state"), ["id"])
        assert [(r["id"], r["age"]) for r in other] == [(1, 30), (2, 40)]
