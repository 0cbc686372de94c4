"""Which runs a binlog sensor counts as its own, and what it learns from a run that died (pure
logic, no services): the capture id in run keys and tags, runs requested before it existed, the
progress a following run records, the backoff count of an in-flight window."""

from __future__ import annotations

import json

import dagster as dg

from dagster_mysql_cdc.dagster_integration.capture_runs import is_capture_run
from dagster_mysql_cdc.dagster_integration.cursor import InFlight, retry_delay
from dagster_mysql_cdc.dagster_integration.protocol import (
    CAPTURE_TAG,
    PROGRESS_TAG,
    REQUEST_TAG,
    SERVER_TAG,
    capture_id,
    key_capture,
)
from dagster_mysql_cdc.dagster_integration.run_requests import SensorTick
from dagster_mysql_cdc.dagster_integration.run_tags import progress_tag
from dagster_mysql_cdc.engine.follow import FollowWindow
from dagster_mysql_cdc.engine.stream_run import RunProgress
from dagster_mysql_cdc.engine.window_result import WindowResult, merge_window_results
from dagster_mysql_cdc.events import BinlogPosition

BINLOG = dg.AssetKey(["srv", "binlog"])
SELECTION = {"server": "srv", "database_include_list": ["a"]}


def tick(capture: str = "cap-000000000001", sensor: str = "srv_cdc_binlog_sensor") -> SensorTick:
    return SensorTick(
        binlog_key=BINLOG,
        keys=[BINLOG],
        cheap=[],
        server_name="srv",
        select=lambda *a: None,  # type: ignore[arg-type,return-value]
        capture=capture,
        sensor_name=sensor,
    )


def run(tags: dict[str, str], selection=frozenset({BINLOG})) -> dg.DagsterRun:
    return dg.DagsterRun(job_name="j", run_id="r", tags=tags, asset_selection=selection)


def test_capture_id_is_stable_and_tells_captures_apart():
    a = capture_id("s", BINLOG, SELECTION)
    assert a == capture_id("s", BINLOG, dict(reversed(list(SELECTION.items()))))
    assert a.startswith("cap-") and len(a) == 16
    assert a != capture_id("s2", BINLOG, SELECTION)
    assert a != capture_id("s", dg.AssetKey(["other", "binlog"]), SELECTION)
    assert a != capture_id("s", BINLOG, {**SELECTION, "database_include_list": ["b"]})
    assert key_capture(f"{a}:stream:f:4:f:9:a1") == a
    assert key_capture("stream:mysql-bin.000001:4:mysql-bin.000001:9:a1") is None


def test_a_run_counts_only_for_its_own_capture():
    t = tick()
    own = {SERVER_TAG: "srv", CAPTURE_TAG: t.capture, REQUEST_TAG: "k"}
    assert is_capture_run(run(own), t, t.capture)
    assert not is_capture_run(run({**own, CAPTURE_TAG: "cap-000000000002"}), t, t.capture)
    assert not is_capture_run(run({**own, SERVER_TAG: "other"}), t, t.capture)
    # a key requested under an earlier id of this capture (its selection changed since)
    assert is_capture_run(run({**own, CAPTURE_TAG: "cap-00000000000e"}), t, "cap-00000000000e")


def test_a_run_requested_before_capture_tags_is_told_apart_by_its_assets_and_sensor():
    t = tick()
    legacy = {SERVER_TAG: "srv", REQUEST_TAG: "stream:f:4:f:9:a1"}
    assert is_capture_run(run(legacy), t, None)
    assert is_capture_run(run({**legacy, "dagster/sensor_name": t.sensor_name}), t, None)
    assert not is_capture_run(run({**legacy, "dagster/sensor_name": "b_cdc_binlog_sensor"}), t, None)
    other_binlog = frozenset({dg.AssetKey(["b", "binlog"])})
    assert not is_capture_run(run(legacy, other_binlog), t, None)
    assert is_capture_run(run(legacy, None), t, None)  # no selection recorded: every asset


def test_progress_tag_round_trip():
    p = lambda n: BinlogPosition("mysql-bin.000002", n, f"0-1-{n}")  # noqa: E731
    nxt = FollowWindow(p(900), p(900), p(1200))
    stopped = {"db.t": {"since": p(100).to_dict(), "error": "x" * 500, "attempted": False}}
    tags = {PROGRESS_TAG: json.dumps(RunProgress(p(900), 3, stopped, nxt).to_dict())}
    got = progress_tag(tags)
    assert got is not None
    assert (got.reached, got.windows, got.next_start, got.next_end) == (p(900), 3, p(900), p(1200))
    assert got.stopped["db.t"]["since"] == p(100).to_dict() and len(got.stopped["db.t"]["error"]) == 300
    assert progress_tag({PROGRESS_TAG: json.dumps(RunProgress(p(5), 0, {}).to_dict())}).next_start is None
    assert progress_tag({}) is None and progress_tag({PROGRESS_TAG: "{"}) is None


def test_the_progress_tag_carries_the_incremental_snapshot_state():
    """A following run reading chunks records the snapshot's state with the offset it reached;
    a tag from before the field, or a run with no snapshot, carries none; a state that does not
    decode makes the whole tag unreadable (the run is then retried whole, never committed with
    its snapshot lost)."""
    p = lambda n: BinlogPosition("mysql-bin.000002", n, f"0-1-{n}")  # noqa: E731
    state = {
        "snapshot_id": "s1",
        "tables": [{"table": "db.big", "last_key": [5000], "max_key": [90000], "chunks": 5}],
        "chunk_seq": 5,
    }
    tag = json.dumps(RunProgress(p(900), 4, {}, incremental=state).to_dict())
    got = progress_tag({PROGRESS_TAG: tag})
    assert got is not None and got.incremental == state
    assert progress_tag({PROGRESS_TAG: json.dumps(RunProgress(p(900), 4, {}).to_dict())}).incremental is None
    legacy = {"reached": p(900).to_dict(), "windows": 2, "stopped": {}}
    assert progress_tag({PROGRESS_TAG: json.dumps(legacy)}).incremental is None
    broken = {**legacy, "incremental": {"tables": [{"no_table": 1}]}}
    assert progress_tag({PROGRESS_TAG: json.dumps(broken)}) is None


def test_a_window_read_to_its_planned_end_is_told_from_one_cut_short():
    from dagster_mysql_cdc.engine.stream_run import reached_planned_end

    s, e, extended, cut = (BinlogPosition("mysql-bin.000001", n) for n in (4, 100, 180, 60))
    assert reached_planned_end(WindowResult(start=s, end=e), e)  # no chunk plan
    assert reached_planned_end(WindowResult(start=s, end=extended, planned_end=extended), e)
    assert not reached_planned_end(WindowResult(start=s, end=e, planned_end=extended), e)
    assert not reached_planned_end(WindowResult(start=s, end=cut, planned_end=e), e)  # a blocking snapshot
    merged = merge_window_results(
        WindowResult(start=s, end=e), WindowResult(start=e, end=extended, planned_end=extended)
    )
    assert merged.planned_end == extended


def test_a_killed_attempt_does_not_grow_the_backoff():
    legacy = InFlight.from_dict({"kind": "stream", "run_key": "k", "attempt": 4})
    assert legacy.failures == 3  # a cursor written before: every earlier attempt counted
    inf = InFlight.from_dict(InFlight("stream", "k", 5, failures=1).to_dict())
    assert (inf.attempt, inf.failures) == (5, 1)
    assert retry_delay(inf.failures, 10, 600) == 0  # four killed attempts and one failure: at once
    assert retry_delay(3, 10, 600) == 20


def test_a_table_keeps_its_first_failure_across_merged_windows():
    s1, s2, s3 = (BinlogPosition("f", n) for n in (4, 100, 200))
    a = WindowResult(start=s1, end=s2, failed_tables={"db.t": {"error": "first", "since": s1.to_dict()}})
    b = WindowResult(start=s2, end=s3, failed_tables={"db.t": {"error": "again", "since": s2.to_dict()}})
    merged = merge_window_results(a, b)
    assert merged.failed_tables["db.t"]["since"] == s1.to_dict()
    assert merged.end == s3


def test_a_run_that_died_is_told_from_one_that_failed_by_itself():
    import uuid

    from dagster_mysql_cdc.dagster_integration.capture_runs import run_died

    @dg.asset
    def boom() -> None:
        raise RuntimeError("the window failed")

    instance = dg.DagsterInstance.ephemeral()
    failed = dg.materialize([boom], instance=instance, raise_on_error=False)
    assert not run_died(instance, instance.get_run_by_id(failed.run_id))  # an op raised
    job = dg.Definitions(assets=[boom]).resolve_implicit_global_asset_job_def()
    dead = instance.create_run_for_job(job, run_id=str(uuid.uuid4()))
    instance.report_run_failed(dead)  # run monitoring: its worker is gone
    assert run_died(instance, instance.get_run_by_id(dead.run_id))
    canceled = instance.create_run_for_job(job, run_id=str(uuid.uuid4()))
    instance.report_run_canceled(canceled)
    assert run_died(instance, instance.get_run_by_id(canceled.run_id))
    unloadable = instance.create_run_for_job(job, run_id=str(uuid.uuid4()))
    try:
        raise ImportError("no module named definitions")
    except ImportError:
        import sys

        from dagster._core.events import EngineEventData
        from dagster._utils.error import serializable_error_info_from_exc_info

        error = EngineEventData.engine_error(serializable_error_info_from_exc_info(sys.exc_info()))
    instance.report_engine_event("Could not load job definition.", unloadable, error)
    instance.report_run_failed(unloadable)  # the code server's report: a failure of its own
    assert not run_died(instance, instance.get_run_by_id(unloadable.run_id))


def test_a_caught_up_table_joins_the_window_result_and_the_window_keeps_its_positions():
    from dagster_mysql_cdc.engine.window_result import with_catch_ups
    from dagster_mysql_cdc.sink.table_batch import TableWriteResult

    def wrote(table: str, by_op: dict[str, int], files: list[str]) -> TableWriteResult:
        return TableWriteResult(
            "db", table, sum(by_op.values()), by_op, None, None, None, 0.1, extra={"tail_files": files}
        )  # type: ignore[arg-type]

    s1, s2, s3 = (BinlogPosition("f", n) for n in (4, 100, 200))
    skipped = {"table": "db.stopped", "pos": 50}
    caught = WindowResult(
        start=s1,
        end=s2,
        tables={
            ("db", "stopped"): wrote("stopped", {"c": 2}, ["a"]),
            ("db", "both"): wrote("both", {"c": 1}, ["b"]),
        },
        events_skipped=[skipped],
        events_skipped_count=1,
    )
    window = WindowResult(
        start=s2, end=s3, tables={("db", "both"): wrote("both", {"u": 3}, ["c"])}, events_read=7
    )
    assert with_catch_ups([], window) is window
    merged = with_catch_ups([caught], window)
    assert (merged.start, merged.end, merged.events_read) == (s2, s3, 7)
    assert list(merged.tables) == [("db", "stopped"), ("db", "both")]
    both = merged.tables[("db", "both")]
    assert (both.rows, both.rows_by_op, both.extra["tail_files"]) == (4, {"c": 1, "u": 3}, ["b", "c"])
    assert merged.tables[("db", "stopped")].rows_by_op == {"c": 2}
    assert (merged.events_skipped, merged.events_skipped_count) == ([skipped], 1)
