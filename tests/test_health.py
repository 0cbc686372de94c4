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


def test_failed_runs_are_retried_with_exponential_backoff(tmp_path):
    """Issue 25 point 8: failed runs were retried at every tick (23 failed runs in 2.7 minutes
    against a broken lake path). The first retry is immediate, then the sensor waits
    retry_backoff_seconds, doubling; the wait and the failure's reason are in the tick's skip
    reason and the cursor (``retry_at``, ``last_error``)."""
    import json

    from dagster_mysql_cdc import run_sensor_ticks

    blocker = tmp_path / "not-a-directory"
    blocker.write_text("a file where the lake should be")
    with scratch_database("backoff") as (db, conn):
        with conn.cursor() as cur:
            cur.execute(f"CREATE TABLE {db}.t (id INT PRIMARY KEY, v INT)")
        cdc = SensorDriven(
            capture_resource(db),
            str(blocker / "lake"),
            sensor_options={"retry_backoff_seconds": 4, "retry_backoff_max_seconds": 60},
        )
        started = time.monotonic()
        skips, runs = [], []
        while time.monotonic() - started < 12:
            log = run_sensor_ticks(
                cdc.sensor, cdc.cdc, cdc.resources, cdc.instance, cursor=cdc.cursor, max_ticks=1,
                raise_on_error=False, max_backoff_wait_seconds=0,
            )  # fmt: skip
            cdc.cursor = log.cursor
            skips += log.skip_reasons
            runs += log.runs
            time.sleep(0.5)  # a tick every 0.5 s: the daemon ticks every 5 s at best
        assert runs and not any(r.success for r in runs)
        # attempt 1, attempt 2 at once, attempt 3 after 4 s, attempt 4 after 8 more: 12 s hold 3 or 4
        assert 3 <= len(runs) <= 4, [r.dagster_run.tags.get("dagster_mysql_cdc/request") for r in runs]
        assert any("in 4 s (backoff 4 s)" in s or "(backoff 4 s)" in s for s in skips), skips
        cursor = json.loads(cdc.cursor)
        assert cursor["retry_at"] > time.time() - 1
        assert "FAILURE" in cursor["last_error"] and "not-a-directory" in cursor["last_error"], cursor[
            "last_error"
        ]


def _status(home, *args):
    import os
    import subprocess
    import sys

    from conftest import CDC_PASSWORD, ROOT

    env = {
        **os.environ,
        "DAGSTER_HOME": str(home),
        "CDC_MYSQL_PASSWORD": CDC_PASSWORD,
        "PYTHONPATH": str(ROOT),
    }
    return subprocess.run(
        [sys.executable, "-m", "dagster_mysql_cdc", "status", *args],
        env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip


def test_status_shows_tick_errors_and_a_daemon_that_stopped_ticking(tmp_path):
    """Issue 25 points 7 and 9, under a real ``dagster-daemon``: a tick that fails (here: a corrupt
    cursor) showed as ``last error: none``; a daemon that died left the capture silently stopped,
    shown as ordinary lag. ``status`` now names the failing ticks and their error, and a sensor
    whose last tick is too old as NOT TICKING with the daemon's heartbeat age; the binlog asset
    gets the earlier ticks' failure as a health observation once ticks succeed again."""
    import json
    import os
    import signal
    import subprocess
    import sys

    from conftest import CDC_PASSWORD, ROOT, SPARK_REMOTE
    from deltalake import DeltaTable

    home = tmp_path / "home"
    home.mkdir()
    (home / "dagster.yaml").write_text(
        "telemetry:\n  enabled: false\nrun_queue:\n  dequeue_interval_seconds: 1\n"
    )
    with scratch_database("daemonhealth") as (db, conn):
        with conn.cursor() as cur:
            cur.execute(
                f"CREATE TABLE {db}.t (id BIGINT PRIMARY KEY, v VARCHAR(32), n INT, marker_ns BIGINT NULL)"
            )
            cur.execute(f"INSERT INTO {db}.t VALUES (1, 'a', 1, NULL)")
        sensor = f"{db}_cdc_binlog_sensor"  # the op of @mysql_cdc_assets is named after the server
        lake = tmp_path / "lake"
        env = {
            **os.environ,
            "DAGSTER_HOME": str(home),
            "BENCH_DAEMON_DB": db,
            "BENCH_DAEMON_LAKE": str(lake),
            "BENCH_DAEMON_INTERVAL": "5",
            "BENCH_DAEMON_FOLLOW": "0",
            "CDC_SPARK_REMOTE": SPARK_REMOTE,
            "CDC_MYSQL_PASSWORD": CDC_PASSWORD,
            "PYTHONPATH": str(ROOT),
        }
        location = ["-f", str(ROOT / "bench" / "daemon_location.py")]
        instance = dg.DagsterInstance.from_config(str(home))
        log = open(tmp_path / "daemon.log", "w")
        daemon = subprocess.Popen(
            [str(os.path.join(os.path.dirname(sys.executable), "dagster-daemon")), "run", *location],
            cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip
        try:
            state_uri = str(lake / db / db / "t" / "state")
            deadline = time.monotonic() + 240
            while not DeltaTable.is_deltatable(state_uri) and time.monotonic() < deadline:
                time.sleep(1)
            assert DeltaTable.is_deltatable(state_uri), (tmp_path / "daemon.log").read_text()[-3000:]
            ok = _status(home, "--sensor", sensor, "--no-server")
            assert ok.returncode == 0, ok.stderr
            assert "sensor: ticking, last tick" in ok.stdout and "last tick error: none" in ok.stdout, (
                ok.stdout
            )

            def cli_cursor(*args):
                p = subprocess.run(
                    [sys.executable, "-m", "dagster", "sensor", "cursor", sensor, *args, *location],
                    cwd=ROOT, env=env, capture_output=True, text=True, timeout=120,
                )  # fmt: skip
                assert p.returncode == 0, p.stderr
                return p

            good = next(s for s in instance.all_instigator_state() if s.name == sensor).instigator_data.cursor
            cli_cursor("--set", "not json")  # every tick fails now, no run is requested
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                bad = _status(home, "--sensor", sensor, "--no-server")
                if "failed tick(s) in a row" in bad.stdout:
                    break
                time.sleep(2)
            assert "CorruptCursorError" in bad.stdout or "is corrupt" in bad.stdout, (bad.stdout, bad.stderr)
            cli_cursor("--set", good)
            binlog = dg.AssetKey([db, "binlog"])
            deadline = time.monotonic() + 60
            seen = None
            while time.monotonic() < deadline and seen is None:
                for rec in instance.fetch_observations(binlog, limit=5).records:
                    md = rec.asset_observation.metadata if rec.asset_observation else {}
                    if "earlier ticks failed" in str(md.get("health", dg.MetadataValue.text("")).value):
                        seen = md
                time.sleep(2)
            assert seen is not None, "the binlog asset shows the failed ticks"
        finally:
            os.killpg(daemon.pid, signal.SIGKILL)  # the daemon dies as in the issue (no clean stop)
            daemon.wait()
            log.close()
        time.sleep(7)
        dead = _status(home, "--sensor", sensor, "--no-server", "--stale-after", "6")
        assert "sensor: NOT TICKING, last tick" in dead.stdout, dead.stdout
        assert "start dagster-daemon" in dead.stdout
        as_json = json.loads(
            _status(home, "--sensor", sensor, "--no-server", "--stale-after", "6", "--json").stdout
        )
        assert as_json["health"]["sensor"]["ticking"] is False


def test_a_check_that_raises_is_a_failed_evaluation_and_the_other_tables_are_checked(local_storage):
    """Issue 25 point 6: a check that raised (the "Execute checks" TypeError of point 2, a damaged
    lake table) failed the whole run, so no table's check had a result and the run's planned
    checks then broke the heartbeats. Now the raising table's checks are failed evaluations with
    the error and the other tables are checked."""
    import glob
    import os

    with scratch_database("checkraise") as (db, conn):
        with conn.cursor() as cur:
            cur.execute(f"USE {db}")
            cur.execute(f"CREATE TABLE {db}.a (id INT PRIMARY KEY, v INT)")
            cur.execute(f"CREATE TABLE {db}.b (id INT PRIMARY KEY, v INT)")
            cur.execute(f"INSERT INTO {db}.a SELECT seq, seq FROM seq_1_to_50")
            cur.execute(f"INSERT INTO {db}.b SELECT seq, seq FROM seq_1_to_50")
        cdc = SensorDriven(capture_resource(db), local_storage.base_uri)
        cdc.ticks()
        for f in glob.glob(f"{local_storage.uri(db, db, 'a', 'state')}/*.parquet"):
            os.remove(f)  # the lake table of a is damaged: reading it raises
        keys = [dg.AssetKey([db, db, "a"]), dg.AssetKey([db, db, "b"])]
        res = dg.materialize(
            [cdc.cdc],
            resources=cdc.resources,
            instance=cdc.instance,
            selection=dg.AssetSelection.checks_for_assets(*keys),
            raise_on_error=False,
        )
        assert res.success, "a check error is not a run failure"
        evals = {(e.asset_key.path[-1], e.check_name): e for e in res.get_asset_check_evaluations()}
        a_checksum = evals[("a", "checksum_matches_source")]
        assert not a_checksum.passed and a_checksum.severity == dg.AssetCheckSeverity.ERROR
        assert "error" in a_checksum.metadata
        assert (
            evals[("b", "checksum_matches_source")].passed and evals[("b", "row_count_matches_source")].passed
        )
