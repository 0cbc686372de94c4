"""One table never stops the others (engine/isolation.py), end to end through the binlog sensor:
a stream event holding a value that cannot be converted (event_processing_failure_handling_mode
``fail``) stops its table alone and loudly (a WARNING, the binlog asset's ``stopped_tables``, the
cursor, failed checks, the status command); the other table goes on; the stopped table is left
out of the windows while its backoff runs, and comes back without losing a change either way a
user brings it back: snapshotting it again (after fixing the row), or a catch-up from its stop
position once the cause is fixed (here: the failure mode switched to ``warn``), materialized by
the run that caught it up even when its window did not change it."""

import json

import dagster as dg
import pytest
from lake_utils import live_state_rows
from sensor_harness import SensorDriven, capture_resource, scratch_database

from dagster_mysql_cdc import build_mysql_cdc_sensor
from dagster_mysql_cdc.dagster_integration.cursor import StreamCursor
from dagster_mysql_cdc.dagster_integration.health import stopped_lines
from dagster_mysql_cdc.dagster_integration.protocol import WINDOW_START_TAG
from dagster_mysql_cdc.events import BinlogPosition

pytestmark = [pytest.mark.integration, pytest.mark.spark]

TIME_TABLE = "CREATE TABLE {db}.time_table (id INT NOT NULL, A TIME(1) NULL, PRIMARY KEY(id))"
# time_precision_mode=connect holds a time of day: -23:45:56.7 cannot be converted
BAD = "INSERT INTO {db}.time_table VALUES ({id}, '-23:45:56.7')"
GOOD = "INSERT INTO {db}.time_table VALUES ({id}, '23:45:56.7')"


def _binlog_md(run) -> dict:
    (mat,) = [m for m in run.get_asset_materialization_events() if m.asset_key.path[-1] == "binlog"]
    return {k: v.value for k, v in mat.materialization.metadata.items()}


def _ids(storage, db: str, table: str) -> list[int]:
    return [r["id"] for r in live_state_rows(storage, storage.uri(db, db, table, "state"), ["id"])]


def _source_ids(conn, db: str, table: str) -> list[int]:
    with conn.cursor() as cur:
        cur.execute(f"SELECT id FROM {db}.{table} ORDER BY id")
        return [r[0] for r in cur.fetchall()]


def _selected_tables(run) -> set[str]:
    return {m.asset_key.path[-1] for m in run.get_asset_materialization_events()}


def _captured(db: str, conn, local_storage) -> SensorDriven:
    """``time_table`` (row 1) and ``other`` (row ``(1, 10)``) of ``db``, captured with
    ``time_precision_mode=connect`` and a one-hour retry backoff, snapshotted."""
    with conn.cursor() as cur:
        cur.execute(TIME_TABLE.format(db=db))
        cur.execute(f"CREATE TABLE {db}.other (id INT PRIMARY KEY, v INT)")
        cur.execute(GOOD.format(db=db, id=1))
        cur.execute(f"INSERT INTO {db}.other VALUES (1, 10)")
    cdc = SensorDriven(
        capture_resource(db, time_precision_mode="connect"),
        local_storage.base_uri,
        sensor_options={"table_retry_backoff_seconds": 3600},
    )
    assert all(r.success for r in cdc.ticks().runs)  # the snapshot
    return cdc


def test_a_table_that_cannot_be_written_stops_alone_and_comes_back(local_storage):
    with scratch_database("iso") as (db, conn):
        cdc = _captured(db, conn, local_storage)
        # 1. a bad value: the window succeeds, time_table stops, other is captured
        with conn.cursor() as cur:
            cur.execute(BAD.format(db=db, id=201))
            cur.execute(GOOD.format(db=db, id=2))
            cur.execute(f"INSERT INTO {db}.other VALUES (2, 20)")
        (run,) = cdc.ticks().runs
        assert run.success
        stopped = _binlog_md(run)["stopped_tables"]
        assert list(stopped) == [f"{db}.time_table"]
        error = stopped[f"{db}.time_table"]["error"]
        assert "ValueConversionError" in error and "column after.A" in error and "-23:45:56" not in error
        assert _ids(local_storage, db, "other") == [1, 2]
        assert _ids(local_storage, db, "time_table") == [1]  # nothing of its window
        warnings = [e.message for e in cdc.instance.all_logs(run.run_id) if e.level >= 30]
        assert any(f"{db}.time_table stopped" in (m or "") for m in warnings), warnings
        checks = {
            e.check_name: e for e in run.get_asset_check_evaluations() if e.asset_key.path[-1] == "time_table"
        }
        assert not checks["row_count_matches_source"].passed
        assert "stopped" in checks["row_count_matches_source"].metadata["explanation"].value
        cursor = StreamCursor.parse(cdc.cursor)
        (st,) = cursor.stopped_tables().values()
        assert st.attempts == 1 and st.since.pos > 0 and st.retry_at > st.stopped_at
        (line,) = stopped_lines(cursor.stopped)
        assert f"table STOPPED: {db}.time_table" in line and "ValueConversionError" in line
        # 2. while its backoff runs, windows leave it out (not selected), other goes on
        with conn.cursor() as cur:
            cur.execute(GOOD.format(db=db, id=3))
            cur.execute(f"INSERT INTO {db}.other VALUES (3, 30)")
        (run,) = cdc.ticks().runs
        assert run.success and "time_table" not in _selected_tables(run)
        tag = json.loads(run.dagster_run.tags["dagster_mysql_cdc/stopped_tables"])
        assert tag[f"{db}.time_table"]["catch_up"] is False
        assert _ids(local_storage, db, "other") == [1, 2, 3]
        assert _ids(local_storage, db, "time_table") == [1]
        # 3. the user fixes the row and materializes the table (a snapshot): the next window
        #    catches it up from the snapshot's position at once, whatever the backoff
        with conn.cursor() as cur:
            cur.execute(f"DELETE FROM {db}.time_table WHERE id = 201")
        key = dg.AssetKey([db, db, "time_table"])
        snap = dg.materialize(
            [cdc.cdc], resources=cdc.resources, instance=cdc.instance, selection=dg.AssetSelection.assets(key)
        )
        assert snap.success
        with conn.cursor() as cur:
            cur.execute(GOOD.format(db=db, id=4))  # after the snapshot: streamed
            cur.execute(f"UPDATE {db}.time_table SET A = '01:02:03.4' WHERE id = 1")
        ticks = cdc.ticks()
        assert all(r.success for r in ticks.runs)
        tag = json.loads(ticks.runs[0].dagster_run.tags["dagster_mysql_cdc/stopped_tables"])
        assert tag[f"{db}.time_table"]["catch_up"] and "snapshotted again" in tag[f"{db}.time_table"]["error"]
        assert StreamCursor.parse(cdc.cursor).stopped is None
        for r in ticks.runs:  # the window's checks read only its keys: the deleted bad value is no error
            assert not [
                e for e in cdc.instance.all_logs(r.run_id) if "verification failed" in (e.message or "")
            ]
            failed = [e.check_name for e in r.get_asset_check_evaluations() if not e.passed]
            assert failed == [], failed
        assert _ids(local_storage, db, "time_table") == _source_ids(conn, db, "time_table") == [1, 2, 3, 4]
        rows = live_state_rows(local_storage, local_storage.uri(db, db, "time_table", "state"), ["id"])
        assert rows[0]["A"] == (1 * 3600 + 2 * 60 + 3) * 1000 + 400  # connect: ms of the day
        # 4. another bad value stops it again; the fix is a failure mode that leaves it out
        #    (warn): the catch-up from its stop position reads every change since, in order
        #    (no backoff now: each window tries to catch it up, and fails until the fix)
        cdc.sensor = build_mysql_cdc_sensor(cdc.cdc, table_retry_backoff_seconds=0)
        with conn.cursor() as cur:
            cur.execute(BAD.format(db=db, id=202))
            cur.execute(GOOD.format(db=db, id=5))
        cdc.ticks()
        assert list(StreamCursor.parse(cdc.cursor).stopped) == [f"{db}.time_table"]
        with conn.cursor() as cur:
            cur.execute(GOOD.format(db=db, id=6))
            cur.execute(f"DELETE FROM {db}.time_table WHERE id = 2")
            cur.execute(f"INSERT INTO {db}.other VALUES (4, 40)")
        cdc.resources["mysql"] = capture_resource(
            db, time_precision_mode="connect", event_processing_failure_handling_mode="warn"
        )
        ticks = cdc.ticks()
        assert all(r.success for r in ticks.runs)
        assert StreamCursor.parse(cdc.cursor).stopped is None
        caught = ticks.runs[0]
        logs = [e.message or "" for e in cdc.instance.all_logs(caught.run_id)]
        assert any(f"{db}.time_table caught up from" in m for m in logs), logs
        assert _ids(local_storage, db, "time_table") == [1, 3, 4, 5, 6]  # 202 left out (warn)
        assert _ids(local_storage, db, "other") == [1, 2, 3, 4]


def test_a_table_whose_delta_log_cannot_be_read_stops_alone(local_storage):
    """Issue "Nothing lost", point 2: an invalid commit file in one table's change-log
    ``_delta_log`` (a file edited by hand) failed every attempt of the window for every table
    (``SinkError: reading the Delta log of ... failed``, raised while the window's Delta handles
    were loaded side by side). That table must stop alone: the window succeeds, the other table
    is committed, the cursor keeps the table stopped with the error naming its change log; once
    the file is repaired its catch-up brings every change, once."""
    from pathlib import Path

    from deltalake import DeltaTable

    with scratch_database("isolog") as (db, conn):
        with conn.cursor() as cur:
            cur.execute(f"CREATE TABLE {db}.orders (id INT PRIMARY KEY, v INT)")
            cur.execute(f"CREATE TABLE {db}.other (id INT PRIMARY KEY, v INT)")
            cur.execute(f"INSERT INTO {db}.orders VALUES (1, 10)")
            cur.execute(f"INSERT INTO {db}.other VALUES (1, 10)")
        cdc = SensorDriven(
            capture_resource(db), local_storage.base_uri, sensor_options={"table_retry_backoff_seconds": 0}
        )
        assert all(r.success for r in cdc.ticks().runs)  # the snapshot
        changelog = local_storage.uri(db, db, "orders", "changelog")
        version = DeltaTable(changelog).version()
        invalid = Path(changelog) / "_delta_log" / f"{version + 1:020d}.json"
        invalid.write_text('{"commitInfo": {"timestamp": 1, edited by hand\n')
        with conn.cursor() as cur:
            cur.execute(f"INSERT INTO {db}.orders VALUES (2, 20)")
            cur.execute(f"INSERT INTO {db}.other VALUES (2, 20)")
        runs = cdc.ticks().runs  # (with no backoff, a second run may try to catch orders up)
        assert runs and all(r.success for r in runs)
        run = runs[0]
        stopped = _binlog_md(run)["stopped_tables"]
        assert list(stopped) == [f"{db}.orders"]
        error = stopped[f"{db}.orders"]["error"]
        assert "SinkError" in error and changelog in error and "Json error" in error, error
        assert "clone3" not in error  # (delta-rs' backtrace left out)
        assert _ids(local_storage, db, "other") == [1, 2]
        assert _ids(local_storage, db, "orders") == [1]
        cursor = StreamCursor.parse(cdc.cursor)
        assert list(cursor.stopped_tables()) == [f"{db}.orders"]
        warnings = [e.message or "" for e in cdc.instance.all_logs(run.run_id) if e.level >= 30]
        assert any(f"{db}.orders stopped" in m for m in warnings), warnings
        # the file repaired: the next window catches orders up, nothing lost, nothing twice
        invalid.unlink()
        with conn.cursor() as cur:
            cur.execute(f"INSERT INTO {db}.orders VALUES (3, 30)")
            cur.execute(f"INSERT INTO {db}.other VALUES (3, 30)")
        assert all(r.success for r in cdc.ticks().runs)
        assert StreamCursor.parse(cdc.cursor).stopped is None
        assert _ids(local_storage, db, "orders") == _source_ids(conn, db, "orders") == [1, 2, 3]
        assert _ids(local_storage, db, "other") == _source_ids(conn, db, "other") == [1, 2, 3]
        log_ids = DeltaTable(changelog).to_pyarrow_table(columns=["after"]).column("after").to_pylist()
        assert sorted(a["id"] for a in log_ids) == [1, 2, 3]


def test_no_table_stops_without_a_cause_in_a_following_run(local_storage):
    """Issue "Nothing lost", point 3: both tables stopped in the first stream run with no fault
    (``Delta commit to .../orders/changelog ... CommitFailedError: Failed to commit transaction:
    Concurrent transaction failed.``): a following run reads several windows in one process, and
    the handle of a change log loaded for one window was served as it was to the next window's
    batch, missing the commit the previous window had made through another handle. Here: a
    window of both tables whose change logs are written from the sink thread (orders has more
    events than one job of many tables takes, customers is the only small one) and committed
    by two commit tasks, then a follow-on window of both (small: one job on the run's thread),
    with a compaction after every window. No table may stop; the lake equals the source."""
    with scratch_database("isofollow") as (db, conn):
        with conn.cursor() as cur:
            cur.execute(f"CREATE TABLE {db}.orders (id INT PRIMARY KEY, v INT)")
            cur.execute(f"CREATE TABLE {db}.customers (id INT PRIMARY KEY, v INT)")
            cur.execute(f"INSERT INTO {db}.orders VALUES (1, 10)")
            cur.execute(f"INSERT INTO {db}.customers VALUES (1, 10)")
        mysql = capture_resource(db, stream_follow_seconds=60.0, stream_follow_idle_seconds=0.0)
        cdc = SensorDriven(mysql, local_storage.base_uri, state_compact_small_rows=1_000_000)
        assert all(r.success for r in cdc.ticks().runs)  # the snapshot
        with conn.cursor() as cur:
            cur.execute(f"INSERT INTO {db}.orders SELECT seq, seq FROM {db}.seq_10_to_12000")
            cur.execute(f"INSERT INTO {db}.customers VALUES (2, 20)")
        with dg.build_sensor_context(
            instance=cdc.instance, cursor=cdc.cursor, resources=cdc.resources
        ) as ctx:
            tick = cdc.sensor.evaluate_tick(ctx)
        cdc.cursor = tick.cursor or cdc.cursor
        (req,) = tick.run_requests
        with conn.cursor() as cur:  # after the window was planned: read by a follow-on window
            cur.execute(f"INSERT INTO {db}.orders VALUES (3, 30)")
            cur.execute(f"INSERT INTO {db}.customers VALUES (3, 30)")
        run = dg.materialize([cdc.cdc], resources=cdc.resources, instance=cdc.instance, tags=dict(req.tags))
        assert run.success
        md = _binlog_md(run)
        assert md["follow_windows"] >= 1
        assert not md.get("stopped_tables"), md.get("stopped_tables")
        warnings = [e.message or "" for e in cdc.instance.all_logs(run.run_id) if e.level >= 30]
        assert not any("stopped" in m or "Concurrent transaction" in m for m in warnings), warnings
        assert (
            _ids(local_storage, db, "orders") == _source_ids(conn, db, "orders") == [1, 3, *range(10, 12001)]
        )
        assert _ids(local_storage, db, "customers") == _source_ids(conn, db, "customers") == [1, 2, 3]


def test_a_table_stopped_in_a_following_run_stops_at_its_first_failed_window(local_storage):
    """Issue "Nothing lost", point 2: a run that reads follow-on windows stopped a table at the
    start of the last window that failed it, not of the first: the catch-up then began after
    changes that were never written (here row 2, in the requested window next to the bad value).
    The table now stops at the first failed window's start, the run ends there instead of
    following on (so the sensor records the stop at once), the next run leaves the table out
    (another bad value of it there changes nothing); once the cause is fixed its catch-up
    brings every change."""
    with scratch_database("isofollow") as (db, conn):
        with conn.cursor() as cur:
            cur.execute(TIME_TABLE.format(db=db))
            cur.execute(f"CREATE TABLE {db}.other (id INT PRIMARY KEY, v INT)")
            cur.execute(GOOD.format(db=db, id=1))
            cur.execute(f"INSERT INTO {db}.other VALUES (1, 10)")
        following = {"stream_follow_seconds": 60.0, "stream_follow_idle_seconds": 0.0}
        cdc = SensorDriven(
            capture_resource(db, time_precision_mode="connect", **following),
            local_storage.base_uri,
            sensor_options={"table_retry_backoff_seconds": 3600},
        )
        assert all(r.success for r in cdc.ticks().runs)  # the snapshot
        with conn.cursor() as cur:  # the requested window: a bad value and a good row
            cur.execute(BAD.format(db=db, id=201))
            cur.execute(GOOD.format(db=db, id=2))
            cur.execute(f"INSERT INTO {db}.other VALUES (2, 20)")
        (req,) = cdc.tick_once().run_requests
        start = BinlogPosition.from_dict(json.loads(req.tags[WINDOW_START_TAG]))
        with conn.cursor() as cur:  # after the window was planned: the run follows on to these
            cur.execute(GOOD.format(db=db, id=3))
            cur.execute(BAD.format(db=db, id=203))
            cur.execute(f"INSERT INTO {db}.other VALUES (3, 30)")
        run = cdc.launch(req)
        assert run.success
        md = _binlog_md(run)
        assert md["follow_windows"] == 0  # following ends at the stop
        stopped = md["stopped_tables"][f"{db}.time_table"]
        assert BinlogPosition.from_dict(stopped["since"]) == start, (stopped, start)
        logs = [e.message or "" for e in cdc.instance.all_logs(run.run_id)]
        assert any(f"{db}.time_table stopped: its changes from {start} on" in m for m in logs), logs
        assert any(m.startswith("Following ends at ") and f"{db}.time_table stopped;" in m for m in logs), (
            logs
        )
        assert all(r.success for r in cdc.ticks().runs)  # the next run: the table left out
        assert StreamCursor.parse(cdc.cursor).stopped[f"{db}.time_table"]["since"] == start.to_dict()
        assert _ids(local_storage, db, "other") == [1, 2, 3]
        assert _ids(local_storage, db, "time_table") == [1]
        # the cause fixed (bad values left out), the catch-up from the first window brings rows 2 and 3
        cursor = json.loads(cdc.cursor)
        for st in cursor["stopped"].values():  # the backoff is over
            st["retry_at"] = 0
        cdc.cursor = json.dumps(cursor)
        cdc.sensor = build_mysql_cdc_sensor(cdc.cdc, table_retry_backoff_seconds=0)
        cdc.resources["mysql"] = capture_resource(
            db, time_precision_mode="connect", event_processing_failure_handling_mode="warn", **following
        )
        with conn.cursor() as cur:
            cur.execute(f"INSERT INTO {db}.other VALUES (4, 40)")
        assert all(r.success for r in cdc.ticks().runs)
        assert StreamCursor.parse(cdc.cursor).stopped is None
        assert _ids(local_storage, db, "time_table") == [1, 2, 3]
        assert _source_ids(conn, db, "time_table") == [1, 2, 3, 201, 203]  # the bad values: left out (warn)


def test_a_table_caught_up_by_a_window_that_does_not_change_it_is_materialized(local_storage):
    """A stopped table caught up by the run of a window that changes only other tables: its rows
    since the stop reach the lake, and the run materializes it (with a new data version), so the
    UI and a downstream asset keyed on its materializations see them; it used to get none (only
    the tables the window itself changed were reported), its latest materialization staying the
    one before the stop. The run's checks of it target that new materialization and pass."""
    with scratch_database("isocatch") as (db, conn):
        cdc = _captured(db, conn, local_storage)
        with conn.cursor() as cur:
            cur.execute(BAD.format(db=db, id=201))
            cur.execute(GOOD.format(db=db, id=2))
        (run,) = cdc.ticks().runs
        assert list(_binlog_md(run)["stopped_tables"]) == [f"{db}.time_table"]
        key = dg.AssetKey([db, db, "time_table"])
        (before,) = cdc.instance.fetch_materializations(key, limit=10).records  # the snapshot's
        # fixed: the bad row deleted, then the snapshot-free way back (a catch-up at the next
        # window, which changes only the other table)
        with conn.cursor() as cur:
            cur.execute(f"DELETE FROM {db}.time_table WHERE id = 201")
            cur.execute(GOOD.format(db=db, id=3))
        (run,) = cdc.ticks().runs  # its backoff runs: the window leaves it out
        assert run.success and "time_table" not in _selected_tables(run)
        assert _ids(local_storage, db, "time_table") == [1]
        cdc.sensor = build_mysql_cdc_sensor(cdc.cdc, table_retry_backoff_seconds=0)
        cdc.resources["mysql"] = capture_resource(
            db, time_precision_mode="connect", event_processing_failure_handling_mode="warn"
        )
        cursor = json.loads(cdc.cursor)
        for st in cursor["stopped"].values():  # the backoff is over
            st["retry_at"] = 0
        cdc.cursor = json.dumps(cursor)
        with conn.cursor() as cur:
            cur.execute(f"INSERT INTO {db}.other VALUES (2, 20)")
        (run,) = cdc.ticks().runs
        assert run.success
        assert StreamCursor.parse(cdc.cursor).stopped is None
        logs = [e.message or "" for e in cdc.instance.all_logs(run.run_id)]
        assert any(f"{db}.time_table caught up from" in m for m in logs), logs
        assert _ids(local_storage, db, "time_table") == _source_ids(conn, db, "time_table") == [1, 2, 3]
        mats = {m.asset_key.path[-1]: m.materialization for m in run.get_asset_materialization_events()}
        assert {"time_table", "other"} <= set(mats), sorted(mats)
        latest = cdc.instance.fetch_materializations(key, limit=10).records[0]
        assert latest.run_id == run.run_id and latest.storage_id != before.storage_id
        # the catch-up's changes: rows 201 (left out, warn), 2, the delete of 201 (left out), 3
        assert mats["time_table"].metadata["rows_by_op"].value == {"c": 2}
        skipped = _binlog_md(run)["events_skipped"]  # what the catch-up left out is reported
        assert len(skipped) == 2 and {e["table"] for e in skipped} == {f"{db}.time_table"}, skipped
        assert run.dagster_run.tags.get("dagster_mysql_cdc/selection", "").count("caught up") == 1
        checks = {e.check_name: e for e in run.get_asset_check_evaluations() if e.asset_key == key}
        assert checks and all(e.passed for e in checks.values()), checks
        for e in checks.values():
            assert (
                e.target_materialization_data is None
                or e.target_materialization_data.storage_id == latest.storage_id
            )
