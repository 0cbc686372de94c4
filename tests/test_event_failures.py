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
