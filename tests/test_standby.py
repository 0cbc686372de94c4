"""Standby runs and per-window materializations (issue 42, "Seconds, always").

- A caught-up capture whose resource follows (``stream_follow_seconds`` > 0) gets a standby run
  from the sensor: it selects the binlog asset, waits for the next change and reports each table
  a window changes as the window commits, with the table's checks logged; the sensor commits
  where it reached.
- A following run reports each window's materializations as the window commits, not once at
  its end, and never twice for one window.
- A table a standby run stops (a value it cannot convert) gets its WARNING and failed checks
  while the run follows, also on a busy server with compaction after every window, and comes
  back once the cause is fixed.

Against the real MariaDB and a local Spark (the harness's lake resource), with the Dagster
instance in memory; the runs execute in a thread of this process (``materialize``), as the
daemon's run worker would in its own process.
"""

import json
import re
import threading
import time
from contextlib import contextmanager
from dataclasses import replace

import dagster as dg
import pytest
from conftest import other_application
from sensor_harness import SensorDriven, capture_resource, scratch_database
from test_isolation import BAD, GOOD, TIME_TABLE  # a TIME value time_precision_mode=connect rejects

from dagster_mysql_cdc import build_mysql_cdc_sensor, read_current
from dagster_mysql_cdc.dagster_integration.cursor import (
    InFlight,
    ServerState,
    StreamCursor,
    is_standby_key,
    plan_stream_window,
    standby_window_key,
)
from dagster_mysql_cdc.dagster_integration.protocol import (
    CAUGHT_UP_TAG,
    PROGRESS_TAG,
    REQUEST_TAG,
    SELECTION_TAG,
    STANDBY_TAG,
    STOPPED_TAG,
    TABLE_CHECKS_TAG,
    WINDOW_END_TAG,
    WINDOW_START_TAG,
)
from dagster_mysql_cdc.dagster_integration.run_requests import run_request
from dagster_mysql_cdc.engine.stream_run import STANDBY_POLL_SECONDS
from dagster_mysql_cdc.events import BinlogPosition


def _pos(file: str, pos: int) -> BinlogPosition:
    return BinlogPosition(file, pos, "0-1-5")


def test_a_caught_up_capture_plans_a_standby_run_only_when_asked():
    at = _pos("mysql-bin.000003", 400)
    cursor = StreamCursor(committed=at, snapshot_done=True)
    server = ServerState(current=at, binlog_files=[("mysql-bin.000003", 400)])
    plain = plan_stream_window(cursor, server, snapshot_mode="initial")
    assert plain.request is None and plain.skip_reason.startswith("caught up")
    plan = plan_stream_window(cursor, server, snapshot_mode="initial", standby=True)
    req = plan.request
    assert req is not None and req.kind == "stream" and is_standby_key(req.run_key)
    assert (req.start, req.end) == (at, at)
    again = standby_window_key(at)
    assert again != req.run_key and is_standby_key(again)  # a nonce: each standby launches
    assert not is_standby_key(InFlight("stream", "stream:a:1:a:1:a1:nonce-5", 1, at, at).run_key)
    # a paused incremental snapshot: a standby run too (it reads no chunks; it follows, as any run)
    paused = replace(cursor, incremental={"tables": [{"table": "db.t"}], "paused": True})
    held = plan_stream_window(paused, server, snapshot_mode="initial", standby=True).request
    assert held is not None and is_standby_key(held.run_key)
    assert plan_stream_window(paused, server, snapshot_mode="initial").request is None
    # a running one: an empty window that reads its chunks (not a standby run)
    running = replace(cursor, incremental={"tables": [{"table": "db.t"}], "paused": False})
    chunks = plan_stream_window(running, server, snapshot_mode="initial", standby=True).request
    assert (
        chunks is not None and not is_standby_key(chunks.run_key) and (chunks.start, chunks.end) == (at, at)
    )
    # not caught up: a window, whatever the flag
    ahead = ServerState(current=_pos("mysql-bin.000003", 900), binlog_files=[("mysql-bin.000003", 900)])
    window = plan_stream_window(cursor, ahead, snapshot_mode="initial", standby=True).request
    assert window is not None and not is_standby_key(window.run_key) and window.end.pos == 900


def test_a_standby_request_selects_the_binlog_asset_and_logs_table_checks():
    at = _pos("mysql-bin.000003", 400)
    binlog = dg.AssetKey(["srv", "binlog"])
    tables = [dg.AssetKey(["srv", "db", "a"]), dg.AssetKey(["srv", "db", "b"])]
    cheap = [
        dg.AssetCheckKey(binlog, "binlog_retention"),
        dg.AssetCheckKey(tables[0], "schema_matches_source"),
    ]

    def select(*_a, **_k):  # a standby run never asks for the window's look-ahead
        raise AssertionError("standby runs select without a look-ahead")

    req = run_request(
        InFlight("stream", standby_window_key(at), 1, at, at),
        [*tables, binlog],
        None,
        cheap,
        "srv",
        select=select,
        binlog_key=binlog,
    )
    assert list(req.asset_selection) == [binlog]
    assert list(req.asset_check_keys) == []  # logged, the binlog asset's checks too
    assert req.tags[STANDBY_TAG] == "true" and req.tags[TABLE_CHECKS_TAG] == "logged"
    assert "standby" in req.tags[SELECTION_TAG]
    assert json.loads(req.tags[WINDOW_START_TAG]) == json.loads(req.tags[WINDOW_END_TAG])


def _table_materializations(instance: dg.DagsterInstance, key: dg.AssetKey, run_id: str | None = None):
    records = instance.fetch_materializations(key, limit=100).records
    return [r for r in records if run_id is None or r.run_id == run_id]


def _launch_in_thread(cdc: SensorDriven, req: dg.RunRequest) -> tuple[threading.Thread, dict]:
    out: dict = {}

    def go():
        out["result"] = cdc.launch(req)

    t = threading.Thread(target=go, daemon=True)
    t.start()
    return t, out


def _standby_capture(db, conn, tables, idle_seconds: float, local_storage, instance) -> SensorDriven:
    """A following capture of ``db``'s ``tables`` (each ``(id, v)`` with row ``(1, 10)``) whose
    sensor requests standby runs (``stream_follow_idle_seconds=idle_seconds``)."""
    with conn.cursor() as cur:
        for t in tables:
            cur.execute(f"CREATE TABLE {db}.{t} (id INT PRIMARY KEY, v INT)")
            cur.execute(f"INSERT INTO {db}.{t} VALUES (1, 10)")
    return SensorDriven(
        capture_resource(db, stream_follow_seconds=120.0, stream_follow_idle_seconds=idle_seconds),
        local_storage.base_uri,
        sensor_options={"run_wait_seconds": 0},
        instance=instance,
    )


@contextmanager
def _standby_among_other_traffic(cdc: SensorDriven, other_db: str):
    """The snapshot, then the sensor's standby run launched in a thread while another application
    writes into ``other_db``, once the run has recorded progress over that traffic's windows:
    yields ``(writer thread, run thread, its result holder, run id, launch time)``
    (``time.monotonic()``); the writer is stopped and joined on exit."""
    assert all(r.success for r in cdc.ticks().runs)
    (req,) = cdc.tick_once().run_requests
    assert req.tags[STANDBY_TAG] == "true"
    stop = threading.Event()
    writer = other_application(other_db, stop)
    try:
        launched = time.monotonic()
        thread, out = _launch_in_thread(cdc, req)
        mine = dg.RunsFilter(tags={REQUEST_TAG: req.run_key})
        run = _wait(
            lambda: [r for r in cdc.instance.get_runs(filters=mine) if PROGRESS_TAG in r.tags], timeout=60.0
        )
        assert run, "the standby run recorded no progress over the other database's windows"
        yield writer, thread, out, run[0].run_id, launched
    finally:
        stop.set()
        writer.join(timeout=10.0)


def _wait(pred, timeout: float, poll: float = 0.1):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        v = pred()
        if v:
            return v
        time.sleep(poll)
    return pred()


def _timed_tick(cdc: SensorDriven, run_wait_seconds: float):
    """One tick of ``cdc``'s sensor built with ``run_wait_seconds``, on ``cdc``'s cursor (which it
    does not advance): ``(tick result, seconds it took)``."""
    sensor = build_mysql_cdc_sensor(cdc.cdc, run_wait_seconds=run_wait_seconds)
    t0 = time.monotonic()
    with dg.build_sensor_context(instance=cdc.instance, cursor=cdc.cursor, resources=cdc.resources) as ctx:
        tick = sensor.evaluate_tick(ctx)
    return tick, time.monotonic() - t0


@pytest.mark.integration
def test_a_standby_run_reports_a_change_while_it_waits_and_the_sensor_commits_it(
    local_storage, files_instance
):
    with scratch_database("stby") as (db, conn):
        cdc = _standby_capture(db, conn, ("t", "quiet"), 3.0, local_storage, files_instance)
        log = cdc.ticks()  # the snapshot; then caught up: the in-process driver starts no standby
        assert log.runs and all(r.success for r in log.runs)
        assert "standby run not started" in log.skip_reasons[-1], log.skip_reasons
        (req,) = cdc.tick_once().run_requests
        assert req.tags[STANDBY_TAG] == "true"
        t_key = dg.AssetKey([db, db, "t"])
        quiet_key = dg.AssetKey([db, db, "quiet"])
        assert t_key not in set(req.asset_selection)  # only the binlog asset shows as materializing
        before = len(_table_materializations(cdc.instance, t_key))
        thread, out = _launch_in_thread(cdc, req)
        time.sleep(8.0)  # the run is up and waits (longer than its idle time: it does not end)
        assert thread.is_alive(), "a standby run must wait for its first change"
        # a tick does not hold the daemon's sensor loop run_wait_seconds for an idle standby run,
        # and reports the capture caught up (heartbeats go on)
        tick, took = _timed_tick(cdc, 20)
        assert took < 10.0 and not tick.run_requests
        assert tick.skip_message.startswith("caught up at") and "standby run" in tick.skip_message
        with conn.cursor() as cur:
            cur.execute(f"INSERT INTO {db}.t VALUES (2, 20)")
        committed_at = time.monotonic()
        seen = _wait(lambda: len(_table_materializations(cdc.instance, t_key)) > before, timeout=8.0)
        seen_after = time.monotonic() - committed_at
        assert seen, "the standby run did not report the change while it ran"
        assert thread.is_alive(), "the standby run ended before its deadline"  # reported during the run
        ids = sorted(read_current((db, "t"), local_storage.base_uri, server=db)["id"].to_pylist())
        assert ids == [1, 2]
        print(f"standby: COMMIT -> table materialization {seen_after:.2f}s")
        thread.join(timeout=60)  # after its change it follows as any run: idle 3 s ends it
        assert not thread.is_alive(), "the standby run did not end after its change (idle)"
        result = out["result"]
        assert result.success
        run_id = result.run_id
        # the tables' Delta handles were loaded while it waited, and kept for its windows
        loaded = [
            re.search(
                r"Standby: (\d+) Delta handles of (\d+) table\(s\) loaded, the commit facts of (\d+) read",
                e.user_message or "",
            )
            for e in cdc.instance.all_logs(run_id)
        ]
        (m,) = [m for m in loaded if m]
        assert int(m.group(1)) >= 4 and int(m.group(2)) == 2, m.group(0)  # change logs and states
        assert int(m.group(3)) == 2, m.group(0)  # and what their first commits read of them
        mats = _table_materializations(cdc.instance, t_key, run_id)
        assert len(mats) == 1, "one materialization per window, none repeated at the run's end"
        md = mats[0].asset_materialization.metadata
        assert md["rows"].value == 1 and md["dagster/row_count"].value == 2
        # its lag counts from the window's planning, not from the run's creation (8 s before)
        assert md["lag_seconds"].value < 8.0, md["lag_seconds"]
        assert not _table_materializations(cdc.instance, quiet_key, run_id)  # it did not change
        checks = {e.check_name for e in result.get_asset_check_evaluations() if e.asset_key == t_key}
        logged = {
            e.dagster_event.asset_check_evaluation_data.check_name
            for e in cdc.instance.all_logs(run_id)
            if e.dagster_event is not None
            and e.dagster_event.event_type_value == "ASSET_CHECK_EVALUATION"
            and e.dagster_event.asset_check_evaluation_data.asset_key == t_key
        }
        assert "row_count_matches_source" in checks | logged, (checks, logged)
        # the sensor commits where the standby run reached, then keeps one waiting again
        res = cdc.tick_once()
        cursor = StreamCursor.parse(cdc.cursor)
        with conn.cursor() as cur:
            cur.execute("SHOW MASTER STATUS")
            file, pos = cur.fetchone()[:2]
        assert (cursor.committed.file, cursor.committed.pos) == (file, pos), res.skip_message
        (nxt,) = res.run_requests
        assert nxt.tags[STANDBY_TAG] == "true" and nxt.run_key != req.run_key


def _following_run(db, conn, local_storage, idle_seconds: float, instance: dg.DagsterInstance):
    """A capture of ``db``'s table ``t`` (rows 1, then 2 after the snapshot) and its following
    (not standby) run launched in a thread for the window of row 2, once that window's
    materialization is logged: ``(cdc, key, thread, out, run_id)``."""
    with conn.cursor() as cur:
        cur.execute(f"CREATE TABLE {db}.t (id INT PRIMARY KEY, v INT)")
        cur.execute(f"INSERT INTO {db}.t VALUES (1, 10)")
    cdc = SensorDriven(
        capture_resource(db, stream_follow_seconds=30.0, stream_follow_idle_seconds=idle_seconds),
        local_storage.base_uri,
        sensor_options={"run_wait_seconds": 0, "standby": False},
        instance=instance,
    )
    assert all(r.success for r in cdc.ticks().runs)
    with conn.cursor() as cur:
        cur.execute(f"INSERT INTO {db}.t VALUES (2, 20)")
    (req,) = cdc.tick_once().run_requests
    assert STANDBY_TAG not in req.tags
    key = dg.AssetKey([db, db, "t"])
    thread, out = _launch_in_thread(cdc, req)
    mine = dg.RunsFilter(tags={REQUEST_TAG: req.run_key})
    run_id = _wait(lambda: [r.run_id for r in cdc.instance.get_runs(filters=mine)][:1], timeout=30.0)[0]
    # the requested window's materialization comes while the run goes on (it follows)
    assert _wait(lambda: _table_materializations(cdc.instance, key, run_id), timeout=20.0)
    assert thread.is_alive(), "the run ended before following"
    return cdc, key, thread, out, run_id


@pytest.mark.integration
def test_a_following_run_reports_each_window_as_it_commits(local_storage, files_instance):
    with scratch_database("perwin") as (db, conn):
        cdc, key, thread, out, run_id = _following_run(db, conn, local_storage, 2.0, files_instance)
        for i in (3, 4):  # two more windows, apart: each is read and reported on its own
            time.sleep(0.8)
            with conn.cursor() as cur:
                cur.execute(f"INSERT INTO {db}.t VALUES ({i}, {i * 10})")
        thread.join(timeout=120)
        result = out["result"]
        assert result.success and result.run_id == run_id
        mats = _table_materializations(cdc.instance, key, run_id)
        (binlog,) = [
            m
            for m in result.get_asset_materialization_events()
            if m.materialization.asset_key.path[-1] == "binlog"
        ]
        follow_windows = binlog.materialization.metadata["follow_windows"].value
        assert follow_windows >= 1
        rows = sum(m.asset_materialization.metadata["rows"].value for m in mats)
        assert rows == 3, "each change in exactly one window's materialization"
        assert 2 <= len(mats) <= 1 + follow_windows, (len(mats), follow_windows)


@pytest.mark.integration
def test_a_window_of_several_tables_logs_each_table_once_as_its_commit_is_done(local_storage, monkeypatch):
    """Each table of a multi-table window is materialized by its own commit's callback
    (``WindowReporter.table_committed``, while the other tables commit) with the window's full
    metadata, exactly once: the window's ``on_window`` and the run's end log it no second time."""
    from dagster_mysql_cdc.dagster_integration.protocol import position_from_metadata
    from dagster_mysql_cdc.dagster_integration.window_report import WindowReporter

    early: list[tuple[str, str]] = []
    original = WindowReporter.table_committed

    def spy(self, committed):
        early.append(committed.table)
        return original(self, committed)

    monkeypatch.setattr(WindowReporter, "table_committed", spy)  # the run executes in this process

    with scratch_database("multiwin") as (db, conn):
        names = ["a", "b", "c", "quiet"]
        with conn.cursor() as cur:
            for n in names:
                cur.execute(f"CREATE TABLE {db}.{n} (id INT PRIMARY KEY, v INT)")
                cur.execute(f"INSERT INTO {db}.{n} VALUES (1, 10)")
        cdc = SensorDriven(capture_resource(db, stream_follow_seconds=0.0), local_storage.base_uri)
        assert all(r.success for r in cdc.ticks().runs)
        conn.begin()
        with conn.cursor() as cur:
            for n in names[:3]:
                cur.execute(f"INSERT INTO {db}.{n} VALUES (2, 20)")
        conn.commit()
        (req,) = cdc.tick_once().run_requests
        result = cdc.launch(req)
        assert result.success
        start = BinlogPosition.from_dict(json.loads(req.tags[WINDOW_START_TAG]))
        end = BinlogPosition.from_dict(json.loads(req.tags[WINDOW_END_TAG]))
        for n in names[:3]:
            mats = _table_materializations(cdc.instance, dg.AssetKey([db, db, n]), result.run_id)
            assert len(mats) == 1, (n, len(mats))
            md = mats[0].asset_materialization.metadata
            assert md["rows"].value == 1 and md["dagster/row_count"].value == 2, n
            assert position_from_metadata(md, "window_start") == start
            assert position_from_metadata(md, "window_end") == end  # the planned end's GTID set too
            assert "lag_seconds" in md and "behind_head_bytes" in md, sorted(md)
        assert not _table_materializations(cdc.instance, dg.AssetKey([db, db, "quiet"]), result.run_id)
        assert sorted(early) == [(db, n) for n in names[:3]]  # each logged by its own commit


@pytest.mark.integration
def test_a_following_run_goes_on_over_ddl_of_a_database_it_does_not_capture(local_storage, files_instance):
    """DDL elsewhere on the server (another application's migration, a database created and
    dropped) cannot change a captured table: the run follows on over it instead of ending, so
    the next change is read by the same run, not by a run the sensor starts after a tick."""
    with scratch_database("ddlelse") as (db, conn):
        cdc, key, thread, out, run_id = _following_run(db, conn, local_storage, 3.0, files_instance)
        other = f"{db}_other"
        with conn.cursor() as cur:
            cur.execute(f"CREATE DATABASE {other}")
            cur.execute(f"CREATE TABLE {other}.o (id INT PRIMARY KEY)")
            cur.execute(f"INSERT INTO {other}.o VALUES (1)")
            cur.execute(f"DROP DATABASE {other}")
        time.sleep(0.8)
        with conn.cursor() as cur:
            cur.execute(f"INSERT INTO {db}.t VALUES (3, 30)")
        thread.join(timeout=120)
        result = out["result"]
        assert result.success and result.run_id == run_id
        mats = _table_materializations(cdc.instance, key, run_id)
        rows = sum(m.asset_materialization.metadata["rows"].value for m in mats)
        assert rows == 2, "the change after the other database's DDL was read by the same run"
        ids = sorted(read_current((db, "t"), local_storage.base_uri, server=db)["id"].to_pylist())
        assert ids == [1, 2, 3]


def _check_evaluations(instance: dg.DagsterInstance, run_id: str, key: dg.AssetKey, name: str) -> list:
    """``(timestamp, evaluation)`` of the run's logged evaluations of check ``name`` of ``key``."""
    return [
        (e.event_log_entry.timestamp, e.event_log_entry.dagster_event.asset_check_evaluation_data)
        for e in instance.get_records_for_run(
            run_id, of_type=dg.DagsterEventType.ASSET_CHECK_EVALUATION
        ).records
        if e.event_log_entry.dagster_event.asset_check_evaluation_data.asset_key == key
        and e.event_log_entry.dagster_event.asset_check_evaluation_data.check_name == name
    ]


@pytest.mark.integration
def test_a_standby_run_logs_its_checks_while_idle_and_still_reads_changes(local_storage, files_instance):
    """Issue 42: the checks of what a following run committed are evaluated and logged while the
    binlog is idle, not after the run stops following; a change committed after them is read by
    the same run, and only its table is checked again (at the run's end), against its new
    materialization."""
    with scratch_database("idlechk") as (db, conn):
        cdc = _standby_capture(db, conn, ("t", "u"), 8.0, local_storage, files_instance)
        assert all(r.success for r in cdc.ticks().runs)
        (req,) = cdc.tick_once().run_requests
        assert req.tags[STANDBY_TAG] == "true"
        t_key, u_key = dg.AssetKey([db, db, "t"]), dg.AssetKey([db, db, "u"])
        thread, out = _launch_in_thread(cdc, req)
        mine = dg.RunsFilter(tags={REQUEST_TAG: req.run_key})
        run_id = _wait(lambda: [r.run_id for r in cdc.instance.get_runs(filters=mine)][:1], timeout=60.0)[0]
        time.sleep(3.0)  # the run waits for its first change
        with conn.cursor() as cur:
            cur.execute(f"INSERT INTO {db}.t VALUES (2, 20)")
            cur.execute(f"INSERT INTO {db}.u VALUES (2, 20)")
        row_count = "row_count_matches_source"
        first = _wait(
            lambda: all(_check_evaluations(cdc.instance, run_id, k, row_count) for k in (t_key, u_key)),
            timeout=30.0,
        )
        assert first, "the checks were not logged while the run followed"
        assert thread.is_alive(), "the run ended before its idle time: the checks were not logged while idle"
        with conn.cursor() as cur:
            cur.execute(f"INSERT INTO {db}.t VALUES (3, 30)")
        thread.join(timeout=120)
        assert not thread.is_alive()
        result = out["result"]
        assert result.success and result.run_id == run_id
        t_mats = _table_materializations(cdc.instance, t_key, run_id)
        assert len(t_mats) == 2, "the change after the checks was read by the same run"
        assert len(_table_materializations(cdc.instance, u_key, run_id)) == 1
        for name in ("row_count_matches_source", "checksum_matches_source", "schema_matches_source"):
            t_evals = _check_evaluations(cdc.instance, run_id, t_key, name)
            u_evals = _check_evaluations(cdc.instance, run_id, u_key, name)
            assert len(u_evals) == 1, (name, "u did not change again: checked once, while idle")
            assert len(t_evals) == 2, (name, "t changed again: checked again against its new materialization")
            latest_t = max(t_mats, key=lambda m: m.storage_id)
            assert t_evals[-1][1].target_materialization_data.storage_id == latest_t.storage_id
            assert t_evals[0][0] < latest_t.timestamp < t_evals[-1][0]  # the first before the change
            assert all(ev.passed for _, ev in t_evals + u_evals), (t_evals, u_evals)
        ids = sorted(read_current((db, "t"), local_storage.base_uri, server=db)["id"].to_pylist())
        assert ids == [1, 2, 3]


@pytest.mark.integration
def test_a_standby_run_ends_on_its_budget_while_only_other_databases_change(local_storage, files_instance):
    """Another application's writes on the same server are binlog traffic, not changes of the
    capture: a standby run reads their windows (its position advances) but they are not its first
    change, so it ends after ``stream_follow_seconds`` as an idle one would (it used to restart
    its budget at each such window and never end, so the sensor never committed its position),
    logs them as one line per series instead of one per transaction, reads them at most four
    times a second, and a tick meanwhile does not hold the sensor loop for it."""
    with scratch_database("stbyother") as (db, conn):
        with conn.cursor() as cur:
            cur.execute(f"CREATE TABLE {db}.t (id INT PRIMARY KEY, v INT)")
            cur.execute(f"INSERT INTO {db}.t VALUES (1, 10)")
        follow = 20.0
        cdc = SensorDriven(
            capture_resource(db, stream_follow_seconds=follow, stream_follow_idle_seconds=2.0),
            local_storage.base_uri,
            sensor_options={"run_wait_seconds": 0},
            instance=files_instance,
        )
        with _standby_among_other_traffic(cdc, f"{db}_other") as (writer, thread, out, _, launched):
            start = StreamCursor.parse(cdc.cursor).committed
            tick, took = _timed_tick(cdc, 5)
            assert took < 4.0, "the tick waited for a standby run with no change yet"
            assert not tick.run_requests and "standby run" in tick.skip_message, tick.skip_message
            thread.join(timeout=follow + 40.0)
            ended = time.monotonic() - launched
            assert not thread.is_alive(), (
                "the standby run did not end on its budget while other databases changed"
            )
            assert writer.is_alive(), "the other application stopped first: the test proves nothing"
        result = out["result"]
        assert result.success
        messages = [e.user_message or "" for e in cdc.instance.all_logs(result.run_id)]
        assert not [m for m in messages if m.startswith("Follow-on window ")], "one line per quiet window"
        series = [m for m in messages if "no change to a captured table" in m]
        assert len(series) == 1, series
        # such windows are paced (STANDBY_POLL_SECONDS after each): not one per transaction
        n = int(re.search(r": (\d+) window\(s\)", series[0]).group(1))
        assert 0 < n <= ended / STANDBY_POLL_SECONDS + 2, (n, ended, series[0])
        assert not _table_materializations(cdc.instance, dg.AssetKey([db, db, "t"]), result.run_id)
        # the sensor commits where it reached (past the other application's first writes)
        res = cdc.tick_once()
        committed = StreamCursor.parse(cdc.cursor).committed
        assert committed.sort_key() > start.sort_key(), (start, committed, res.skip_message)
        print(
            f"standby over other databases' traffic ended after {ended:.1f}s (budget {follow:.0f}s); {series[0]}"
        )


@pytest.mark.integration
def test_a_following_run_on_a_busy_server_logs_its_checks_while_its_tables_are_idle(
    local_storage, files_instance
):
    """Windows of another database's traffic change none of the capture's tables, so they do not
    hold back a following run's checks: they are evaluated and logged once its tables had no
    change for a second, as on a quiet server (they used to wait for the binlog to be idle, that
    is for the run's end, up to ``stream_follow_seconds``, while that traffic lasted). The run
    itself goes on following that traffic, reading the capture's next change at once, and ends
    once the binlog is idle."""
    with scratch_database("busyidle") as (db, conn):
        idle = 3.0
        cdc = _standby_capture(db, conn, ("t",), idle, local_storage, files_instance)
        t_key = dg.AssetKey([db, db, "t"])
        with _standby_among_other_traffic(cdc, f"{db}_other") as (writer, thread, out, run_id, _):
            checked: list[float] = []

            def _row_count_evaluations():
                return _check_evaluations(cdc.instance, run_id, t_key, "row_count_matches_source")

            for n, value in ((2, 20), (3, 30)):
                with conn.cursor() as cur:
                    cur.execute(f"INSERT INTO {db}.t VALUES ({n}, {value})")
                committed_at = time.monotonic()
                seen = _wait(lambda: len(_row_count_evaluations()) > len(checked), timeout=30.0)
                assert seen, "the run's checks were not logged while the other database's traffic went on"
                checked.append(time.monotonic() - committed_at)
                assert thread.is_alive(), "the run ended while the binlog was busy"
            assert writer.is_alive(), "the other application stopped first: the test proves nothing"
        thread.join(timeout=idle + 30.0)  # the binlog idle: it ends
        assert not thread.is_alive(), "the run did not end once the binlog was idle"
        result = out["result"]
        assert result.success and result.run_id == run_id
        assert len(_table_materializations(cdc.instance, t_key, run_id)) == 2, "one run read both changes"
        evaluations = _row_count_evaluations()
        assert all(ev.passed for _, ev in evaluations), evaluations
        assert all(c < 10.0 for c in checked), checked
        ids = sorted(read_current((db, "t"), local_storage.base_uri, server=db)["id"].to_pylist())
        assert ids == [1, 2, 3]
        print(f"busy server: change -> its checks logged {', '.join(f'{c:.1f}s' for c in checked)}")


@pytest.mark.integration
def test_a_table_stopped_in_a_standby_run_on_a_busy_server_fails_its_checks_at_once_and_comes_back(
    local_storage, files_instance
):
    """A standby run on a busy server (another database's writes every 50 ms), with every
    table's state compacted after each window, reads a transaction whose value one table cannot
    convert: that table stops alone. Its WARNING and its failed row checks (naming the stop) are
    logged at once (a standby run selects no table, so they used to be never logged at all and
    the stopped table's checks stayed green over a lake missing its changes), and the run ends
    at the end of that window although the binlog is never idle (it used to follow on for its
    whole budget, so the sensor recorded the stop, and retried the table, minutes later). The
    other table's change is materialized, compacted and checked. Once the cause is fixed the
    next run catches the table up from where it stopped, the lake equals the source, and its
    checks pass again."""
    with scratch_database("busystop") as (db, conn):
        with conn.cursor() as cur:
            cur.execute(TIME_TABLE.format(db=db))
            cur.execute(GOOD.format(db=db, id=1))
            cur.execute(f"CREATE TABLE {db}.t (id INT PRIMARY KEY, v INT)")
            cur.execute(f"INSERT INTO {db}.t VALUES (1, 10)")
        following = {"stream_follow_seconds": 120.0, "stream_follow_idle_seconds": 3.0}
        cdc = SensorDriven(
            capture_resource(db, time_precision_mode="connect", **following),
            local_storage.base_uri,
            sensor_options={"run_wait_seconds": 0, "table_retry_backoff_seconds": 3600},
            instance=files_instance,
            state_compact_small_rows=1000,  # every window compacts the state it wrote
        )
        keys = {n: dg.AssetKey([db, db, n]) for n in ("t", "time_table")}
        row_checks = ("row_count_matches_source", "checksum_matches_source")
        with _standby_among_other_traffic(cdc, f"{db}_other") as (writer, thread, out, run_id, _):
            with conn.cursor() as cur:
                cur.execute(BAD.format(db=db, id=201))
                cur.execute(GOOD.format(db=db, id=2))
                cur.execute(f"INSERT INTO {db}.t VALUES (2, 20)")
            logged = _wait(
                lambda: (
                    all(_check_evaluations(cdc.instance, run_id, keys["time_table"], c) for c in row_checks)
                    and _check_evaluations(cdc.instance, run_id, keys["t"], "row_count_matches_source")
                ),
                timeout=30.0,
            )
            assert logged, "the stopped table's checks were not logged at once"
            warnings = [e.message or "" for e in cdc.instance.all_logs(run_id) if e.level >= 30]
            assert any(f"{db}.time_table stopped: its changes from" in m for m in warnings), warnings
            # the run ends at the end of the window that stopped the table, although the binlog
            # is never idle, so the sensor records the stop at once
            thread.join(timeout=30.0)
            assert not thread.is_alive(), (
                "the run followed on past the stop: the sensor records it at its end"
            )
            assert writer.is_alive(), "the other application stopped first: the test proves nothing"
            messages = [e.user_message or "" for e in cdc.instance.all_logs(run_id)]
            assert any(
                m.startswith("Following ends at ") and f"{db}.time_table stopped;" in m for m in messages
            ), messages
        result = out["result"]
        assert result.success and result.run_id == run_id
        for name in row_checks:  # failed once, naming the stop; not evaluated again at the end
            (ev,) = [e for _, e in _check_evaluations(cdc.instance, run_id, keys["time_table"], name)]
            assert not ev.passed and "is stopped at" in ev.metadata["explanation"].value, ev
        for name in (*row_checks, "schema_matches_source"):
            assert all(e.passed for _, e in _check_evaluations(cdc.instance, run_id, keys["t"], name)), name
        (mat,) = _table_materializations(cdc.instance, keys["t"], run_id)
        compaction = mat.asset_materialization.metadata["compaction"].value
        assert compaction, "the window's state was not compacted"
        assert not _table_materializations(cdc.instance, keys["time_table"], run_id)
        # the cause fixed (the bad row deleted, bad values left out from now on): the sensor
        # commits the run, with the stop in its cursor, and the next run catches the table up
        # from its stop
        cdc.sensor = build_mysql_cdc_sensor(cdc.cdc, run_wait_seconds=0, table_retry_backoff_seconds=0)
        cdc.resources["mysql"] = capture_resource(
            db, time_precision_mode="connect", event_processing_failure_handling_mode="warn"
        )
        with conn.cursor() as cur:
            cur.execute(f"DELETE FROM {db}.time_table WHERE id = 201")
            cur.execute(GOOD.format(db=db, id=3))
        runs = cdc.ticks().runs
        assert runs and all(r.success for r in runs)
        assert StreamCursor.parse(cdc.cursor).stopped is None
        tags = [json.loads(r.dagster_run.tags.get(STOPPED_TAG) or "{}") for r in runs]
        assert [t[f"{db}.time_table"]["catch_up"] for t in tags if t] == [True], tags
        caught = [
            r
            for r in runs
            if keys["time_table"] in {m.asset_key for m in r.get_asset_materialization_events()}
        ]
        assert caught, "no run materialized the stopped table again"
        evaluations = [  # the caught-up table's checks: every one passes again
            (name, ev)
            for r in runs
            for name in (*row_checks, "schema_matches_source")
            for _, ev in _check_evaluations(cdc.instance, r.run_id, keys["time_table"], name)
        ]
        assert {n for n, _ in evaluations} == {*row_checks, "schema_matches_source"}, evaluations
        assert all(ev.passed for _, ev in evaluations), [e for e in evaluations if not e[1].passed]
        for table in ("t", "time_table"):
            ids = sorted(read_current((db, table), local_storage.base_uri, server=db)["id"].to_pylist())
            with conn.cursor() as cur:
                cur.execute(f"SELECT id FROM {db}.{table} ORDER BY id")
                assert ids == [r[0] for r in cur.fetchall()] == ([1, 2] if table == "t" else [1, 2, 3])


@pytest.mark.integration
def test_a_standby_run_whose_only_change_stops_a_table_ends_at_once(local_storage, files_instance):
    """A standby run whose first change is one no table can write (its table stops, no row is
    written) has something to report: it logs the stop and the failed checks, and ends at the
    end of that window (not even waiting ``stream_follow_idle_seconds``), so the sensor records
    the stop in its cursor (it used to wait out ``stream_follow_seconds`` as a run that had seen
    no change)."""
    with scratch_database("onlystop") as (db, conn):
        with conn.cursor() as cur:
            cur.execute(TIME_TABLE.format(db=db))
            cur.execute(GOOD.format(db=db, id=1))
        idle = 2.0
        cdc = SensorDriven(
            capture_resource(
                db,
                time_precision_mode="connect",
                stream_follow_seconds=120.0,
                stream_follow_idle_seconds=idle,
            ),
            local_storage.base_uri,
            sensor_options={"run_wait_seconds": 0, "table_retry_backoff_seconds": 3600},
            instance=files_instance,
        )
        assert all(r.success for r in cdc.ticks().runs)
        (req,) = cdc.tick_once().run_requests
        assert req.tags[STANDBY_TAG] == "true"
        thread, out = _launch_in_thread(cdc, req)
        time.sleep(3.0)  # the run waits for its first change
        with conn.cursor() as cur:
            cur.execute(BAD.format(db=db, id=201))
        changed = time.monotonic()
        thread.join(timeout=60.0)
        ended = time.monotonic() - changed
        assert not thread.is_alive(), "the run waited out its budget after stopping its table"
        result = out["result"]
        assert result.success
        key = dg.AssetKey([db, db, "time_table"])
        for name in ("row_count_matches_source", "checksum_matches_source"):
            (ev,) = [e for _, e in _check_evaluations(cdc.instance, result.run_id, key, name)]
            assert not ev.passed and "is stopped at" in ev.metadata["explanation"].value, ev
        cdc.tick_once()
        assert list(StreamCursor.parse(cdc.cursor).stopped or {}) == [f"{db}.time_table"]
        print(f"standby run whose only change stopped its table ended {ended:.1f}s after the change")


def _stopped_before_a_standby_run(db, conn, local_storage, instance, backoff: float):
    """``db.time_table`` stopped by a standby run (a TIME value ``time_precision_mode=connect``
    rejects), the stop recorded by the sensor, and the next standby request, made before the
    table's retry (``table_retry_backoff_seconds=backoff``) is due: ``(cdc, request, following
    options of the resource)``."""
    with conn.cursor() as cur:
        cur.execute(TIME_TABLE.format(db=db))
        cur.execute(GOOD.format(db=db, id=1))
    following = {"stream_follow_seconds": 120.0, "stream_follow_idle_seconds": 2.0}
    cdc = SensorDriven(
        capture_resource(db, time_precision_mode="connect", **following),
        local_storage.base_uri,
        sensor_options={"run_wait_seconds": 0, "table_retry_backoff_seconds": backoff},
        instance=instance,
    )
    name = f"{db}.time_table"
    assert all(r.success for r in cdc.ticks().runs)
    (req,) = cdc.tick_once().run_requests
    thread, out = _launch_in_thread(cdc, req)
    time.sleep(3.0)  # the standby run waits for its first change
    with conn.cursor() as cur:
        cur.execute(BAD.format(db=db, id=201))
        cur.execute(GOOD.format(db=db, id=2))
    thread.join(timeout=60.0)
    assert not thread.is_alive() and out["result"].success
    # the sensor records the stop and requests the next standby run before the retry is due
    res = cdc.tick_once()
    assert name in (StreamCursor.parse(cdc.cursor).stopped or {})
    (req,) = res.run_requests or cdc.tick_once().run_requests
    tag = json.loads(req.tags[STOPPED_TAG])[name]
    assert req.tags[STANDBY_TAG] == "true" and tag["catch_up"] is False and tag["retry_at"] > time.time()
    return cdc, req, following


def _fix_ends_the_standby_run(cdc, conn, db, req, following, backoff) -> float:
    """Launch the standby ``req``, fix the stopped table's cause while it waits (the bad row
    deleted, bad values left out from the next run on), and check that the run ends once the
    retry is due, logging why: returns the seconds from the launch to the run's end."""
    name = f"{db}.time_table"
    launched = time.monotonic()
    thread, out = _launch_in_thread(cdc, req)
    time.sleep(1.0)
    with conn.cursor() as cur:
        cur.execute(f"DELETE FROM {db}.time_table WHERE id = 201")  # a change of the stopped table: left out
    cdc.resources["mysql"] = capture_resource(
        db, time_precision_mode="connect", event_processing_failure_handling_mode="warn", **following
    )
    thread.join(timeout=backoff + 40.0)
    ended = time.monotonic() - launched
    assert not thread.is_alive(), "the standby run waited out its budget past the stopped table's retry"
    result = out["result"]
    assert result.success
    messages = [e.user_message or "" for e in cdc.instance.all_logs(result.run_id)]
    assert any(m.startswith(f"Standby ends: the retry of stopped table(s) {name} is due") for m in messages)
    return ended


def _next_run_catches_up(cdc, db, local_storage) -> None:
    """The sensor's next run catches ``db.time_table`` up at its start, with the fix, although
    the source wrote nothing since; its stop leaves the cursor and the lake equals the source."""
    name, key = f"{db}.time_table", dg.AssetKey([db, db, "time_table"])
    (req,) = cdc.tick_once().run_requests or cdc.tick_once().run_requests
    assert json.loads(req.tags[STOPPED_TAG])[name]["catch_up"] is True
    thread, out = _launch_in_thread(cdc, req)
    thread.join(timeout=60.0)
    assert not thread.is_alive(), "the run that caught the table up did not end"
    caught = out["result"]
    assert caught.success
    assert key in {m.asset_key for m in caught.get_asset_materialization_events()}
    # named in the run's tags from its start (status shows it caught up while the run follows)
    assert json.loads(caught.dagster_run.tags[CAUGHT_UP_TAG]) == [name]
    cdc.tick_once()
    assert StreamCursor.parse(cdc.cursor).stopped is None
    ids = sorted(read_current((db, "time_table"), local_storage.base_uri, server=db)["id"].to_pylist())
    assert ids == [1, 2]


@pytest.mark.integration
def test_a_standby_run_ends_when_a_stopped_tables_retry_comes_due_so_the_fix_applies_at_once(
    local_storage, files_instance
):
    """A standby run started while a stopped table's retry was not yet due used to wait out its
    whole budget (``stream_follow_seconds``, 5 minutes in the README example; the change that
    fixes the cause even restarted it), so a fix (an option changed, the code location reloaded)
    applied minutes later. Now the standby run ends once that retry is due and the binlog is
    idle, and the sensor's next run catches the table up at its start, with the fix, although
    the source wrote nothing since."""
    backoff = 8.0
    with scratch_database("retrydue") as (db, conn):
        cdc, req, following = _stopped_before_a_standby_run(db, conn, local_storage, files_instance, backoff)
        ended = _fix_ends_the_standby_run(cdc, conn, db, req, following, backoff)
        _next_run_catches_up(cdc, db, local_storage)
        print(f"standby run ended {ended:.1f}s after its launch (retry backoff {backoff:.0f}s)")


@pytest.mark.integration
def test_a_retry_that_fails_again_ends_its_run_so_the_sensor_records_the_attempt(
    local_storage, files_instance
):
    """The retry of a stopped table whose cause is not fixed fails again at the run's start: the
    run ends there (logging why) instead of following for its whole budget, so the sensor
    records the failed attempt at once and backs off further."""
    backoff = 3.0
    with scratch_database("retryagain") as (db, conn):
        cdc, req, _ = _stopped_before_a_standby_run(db, conn, local_storage, files_instance, backoff)
        name = f"{db}.time_table"
        time.sleep(backoff + 0.5)  # the retry is due: the next request catches the table up first
        (req,) = cdc.tick_once().run_requests or cdc.tick_once().run_requests
        assert json.loads(req.tags[STOPPED_TAG])[name]["catch_up"] is True
        launched = time.monotonic()
        thread, out = _launch_in_thread(cdc, req)
        thread.join(timeout=60.0)
        ended = time.monotonic() - launched
        assert not thread.is_alive(), "the run followed on after its retry failed"
        result = out["result"]
        assert result.success
        messages = [e.user_message or "" for e in cdc.instance.all_logs(result.run_id)]
        assert any(f"{name} is still stopped: catching up from" in m for m in messages), messages
        assert any(m.startswith("Following ends at ") and f"{name} stopped;" in m for m in messages), messages
        assert CAUGHT_UP_TAG not in result.dagster_run.tags
        cdc.tick_once()
        assert StreamCursor.parse(cdc.cursor).stopped[name]["attempts"] == 2
        print(f"run whose retry failed again ended {ended:.1f}s after its launch (budget 120 s)")


@pytest.mark.integration
def test_a_standby_run_on_a_busy_server_ends_when_a_stopped_tables_retry_comes_due(
    local_storage, files_instance
):
    """The same on a busy server (another application commits into another database every
    50 ms, all along): the binlog is never idle, so the standby run used to read that traffic's
    windows until its whole budget was spent before the fix applied. It ends at the first window
    boundary after the retry is due."""
    backoff = 8.0
    with scratch_database("busyretry") as (db, conn):
        cdc, req, following = _stopped_before_a_standby_run(db, conn, local_storage, files_instance, backoff)
        stop = threading.Event()
        writer = other_application(f"{db}_other", stop)
        try:
            ended = _fix_ends_the_standby_run(cdc, conn, db, req, following, backoff)
            assert writer.is_alive(), (
                "the other application stopped: the binlog was idle, the test proves nothing"
            )
        finally:
            stop.set()
            writer.join(timeout=10.0)
        assert ended < backoff + 20.0, ended
        # (the other application stopped first: a run that changed a table follows until the
        # binlog is idle, or for its whole budget)
        _next_run_catches_up(cdc, db, local_storage)
        print(
            f"standby run on a busy server ended {ended:.1f}s after its launch (retry backoff {backoff:.0f}s)"
        )
