"""Nothing stops silently (issue 25): a failed run, check or heartbeat of one table never stops the
capture of the others, failed runs are retried with backoff, and the capture's health (sensor
ticking, last tick error, last run failure, failing checks, repairs, retries) is readable from
``python -m dagster_mysql_cdc status`` and on the binlog asset.

Real MariaDB, local Spark, the sensor driven in process (tests/sensor_harness.py).
"""

import time
from datetime import timedelta

import dagster as dg
import pytest
from sensor_harness import SensorDriven, capture_resource, scratch_database

from dagster_mysql_cdc import MySqlCdcResource

pytestmark = [pytest.mark.integration, pytest.mark.spark]


def test_failed_run_that_planned_a_tables_checks_does_not_stop_the_heartbeats(local_storage):
    """Issue 25 point 6: a run that planned a table's checks and failed (here: a materialization
    stopped by a preflight error) leaves ``PLANNED`` check records; the next heartbeat of the table
    read them as evaluations (``AttributeError: 'AssetCheckEvaluationPlanned' object has no
    attribute 'passed'``) and every later tick failed, so no table was captured any more."""
    policy = dg.FreshnessPolicy.time_window(fail_window=timedelta(minutes=2))
    with scratch_database("hbfail") as (db, conn):
        with conn.cursor() as cur:
            cur.execute(f"USE {db}")
            cur.execute(f"CREATE TABLE {db}.busy (id INT PRIMARY KEY, v INT)")
            cur.execute(f"CREATE TABLE {db}.quiet (id INT PRIMARY KEY, v INT)")
            cur.execute(f"INSERT INTO {db}.quiet SELECT seq, seq FROM seq_1_to_40")
        mysql = capture_resource(db)
        cdc = SensorDriven(
            mysql,
            local_storage.base_uri,
            assets_options={"table_freshness_policy": policy},
            sensor_options={"table_heartbeat_seconds": 1},
        )
        cdc.ticks()  # initial snapshot, caught up
        quiet = dg.AssetKey([db, db, "quiet"])
        broken = {**cdc.resources, "mysql": MySqlCdcResource(**{**mysql.model_dump(), "password": "wrong"})}
        failed = dg.materialize(
            [cdc.cdc],
            resources=broken,
            instance=cdc.instance,
            selection=dg.AssetSelection.assets(quiet),
            raise_on_error=False,
        )
        assert not failed.success
        planned = [k for k in cdc.cdc.check_keys if k.asset_key == quiet]
        assert planned and all(
            cdc.instance.get_latest_asset_check_evaluation_record(k).evaluation is not None for k in planned
        )
        time.sleep(1.5)
        with conn.cursor() as cur:
            cur.execute(f"INSERT INTO {db}.busy VALUES (1, 1)")
        log = cdc.ticks()  # raised AttributeError in the heartbeat before the fix
        assert any(r.dagster_run.tags.get("dagster_mysql_cdc/mode") == "stream" for r in log.runs)
        busy = cdc.instance.get_latest_materialization_event(dg.AssetKey([db, db, "busy"]))
        assert busy is not None and busy.asset_materialization.metadata["dagster/row_count"].value == 1
        beat = cdc.instance.get_latest_materialization_event(quiet)
        assert beat is not None and beat.run_id == "", "the quiet table got its heartbeat"
