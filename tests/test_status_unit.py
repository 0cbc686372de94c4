"""What an on-call engineer reads, as pure logic (no services): error labels, Dagster's wrapped
tick errors unwrapped to their cause, long lines cut on whole words with the fix kept, and the
verdict and exit status of ``python -m dagster_mysql_cdc status``.

The Dagster errors are built by Dagster itself (its user-code error boundary and
``serializable_error_info_from_exc_info``, as the sensor daemon stores a failed tick)."""

import sys

import pytest

from dagster_mysql_cdc.dagster_integration.cursor import purged_binlog_message
from dagster_mysql_cdc.dagster_integration.health import (
    CaptureHealth,
    FailingCheck,
    SensorHealth,
    error_line,
    first_line,
    meaningful_error,
    shorten,
)
from dagster_mysql_cdc.dagster_integration.status import (
    EXIT_HEALTHY,
    EXIT_UNHEALTHY,
    EXIT_UNKNOWN,
    CaptureStatus,
)
from dagster_mysql_cdc.errors import PreflightError, SinkError, SourceConnectionError, describe, error_text
from dagster_mysql_cdc.events import BinlogPosition

ACCESS_DENIED = (
    "Access denied for 'cdc'@127.0.0.1:3306: the user name or password is wrong. Fix the "
    "`user`/`password` of the MySQL CDC resource (password usually comes from an environment "
    "variable, e.g. EnvVar('CDC_MYSQL_PASSWORD'))."
)


def failed_tick_error(exc: BaseException):
    """The ``SerializableErrorInfo`` the sensor daemon stores for a tick whose evaluation raised
    ``exc``: Dagster's user-code boundary wraps it in ``SensorExecutionError``."""
    from dagster._core.errors import SensorExecutionError, user_code_error_boundary
    from dagster._utils.error import serializable_error_info_from_exc_info

    try:
        with user_code_error_boundary(
            SensorExecutionError,
            lambda: "Error occurred during the execution of evaluation_fn for sensor s_binlog_sensor",
        ):
            raise exc
    except SensorExecutionError:
        return serializable_error_info_from_exc_info(sys.exc_info())
    raise AssertionError("the boundary did not raise")


def test_errors_are_labelled_once():
    assert (
        describe(SinkError("Delta commit failed: OSError: x")) == "SinkError: Delta commit failed: OSError: x"
    )
    # a recorded error re-raised (a stopped table's catch-up) keeps its label, not a second one
    assert describe(SinkError("SinkError: Delta commit failed")) == "SinkError: Delta commit failed"
    assert describe(SinkError("ValueConversionError: bad TIME")) == "ValueConversionError: bad TIME"
    # Python's "package.module.Class: message" (Dagster's SerializableErrorInfo.message)
    assert (
        error_text("SourceConnectionError", "dagster_mysql_cdc.errors.SourceConnectionError: Access denied\n")
        == "SourceConnectionError: Access denied"
    )
    assert error_text("KeyError", "'x'") == "KeyError: 'x'"
    assert describe(SinkError("x" * 100), 20) == "SinkError: xxxxxxxxx"


def test_a_failed_ticks_error_is_unwrapped_to_its_cause():
    info = failed_tick_error(SourceConnectionError(ACCESS_DENIED))
    assert info.cls_name == "SensorExecutionError" and "evaluation_fn" in info.message
    assert meaningful_error(info).cls_name == "SourceConnectionError"
    line = error_line(info)
    assert line.startswith("SourceConnectionError: Access denied for 'cdc'@127.0.0.1:3306"), line
    assert line.endswith("EnvVar('CDC_MYSQL_PASSWORD'))."), line
    # an error raised from another keeps the one our code raised (it names the fix)
    try:
        try:
            raise OSError("connection reset")
        except OSError as e:
            raise SinkError("Delta commit failed; the next run retries") from e
    except SinkError as e:
        nested = failed_tick_error(e)
    assert error_line(nested) == "SinkError: Delta commit failed; the next run retries"
    assert meaningful_error(None) is None and error_line(None) == ""


def test_long_lines_are_cut_on_whole_words_keeping_the_fix():
    gtid = ",".join(f"{d}-{d + 1}-{1000 + d}" for d in range(14))
    message = purged_binlog_message(BinlogPosition("mysql-bin.000001", 4, gtid), "mysql-bin.000007")
    line = f"s: committed mysql-bin.000001:4 | lag unknown: {message}"
    assert len(line) > 400
    cut = shorten(line, 400)
    assert len(cut) <= 400 and cut.endswith("increase binlog retention (binlog_expire_logs_seconds).")
    assert "was purged (oldest is mysql-bin.000007)" in cut, cut  # the cause stays too
    words = set(line.split())
    for word in set(cut.split()) - {"…"}:
        head, mark, tail = word.partition("…")
        assert word in words if not mark else any(w.startswith(head) and w.endswith(tail) for w in words)
    tight = shorten(line, 160)
    assert len(tight) <= 160 and tight.endswith("(binlog_expire_logs_seconds).") and tight.startswith("s: ")
    assert shorten("short", 10) == "short"
    one_token = shorten("x" * 500, 100)
    assert len(one_token) <= 100 and " … " in one_token
    # a PreflightError's first line is its list of problems, not "... is not ready for change data capture:"
    preflight = first_line(str(PreflightError(["binlog_format is STATEMENT: set binlog_format=ROW"])), 300)
    assert preflight.endswith("- binlog_format is STATEMENT: set binlog_format=ROW"), preflight


def _health(**sensor) -> CaptureHealth:
    base = dict(state="RUNNING", interval_seconds=5, last_tick_age_seconds=3.0, ticking=True)
    return CaptureHealth(sensor=SensorHealth(**{**base, "last_tick_status": "SKIPPED", **sensor}))


def test_verdict_names_the_cause_and_the_exit_status():
    healthy = CaptureStatus("s", "mysql-bin.000002:400", health=_health())
    assert healthy.problems() == [] and healthy.verdict() == "HEALTHY: s"
    assert healthy.exit_code == EXIT_HEALTHY and healthy.line().startswith("HEALTHY: s\ns: committed")

    tick = error_line(failed_tick_error(SourceConnectionError(ACCESS_DENIED)))
    failing = CaptureStatus(
        "s",
        "mysql-bin.000002:400",
        health=_health(last_tick_status="FAILURE", last_tick_error=tick, failed_ticks_in_a_row=7),
    )
    verdict = failing.verdict()
    assert verdict.startswith("UNHEALTHY: s: its ticks fail (7 in a row, no run is requested): ")
    assert "SourceConnectionError: Access denied" in verdict and verdict.endswith(
        "'CDC_MYSQL_PASSWORD'))."
    ), verdict
    assert failing.exit_code == EXIT_UNHEALTHY

    several = _health(ticking=False, last_tick_age_seconds=900.0)
    several.stopped = {
        "d.t": {"since": {"file": "f", "pos": 4}, "error": "SinkError: x", "attempts": 1, "retry_at": 0.0}
    }
    several.failing_checks = [
        FailingCheck("s/d/u", "row_count_matches_source", "WARN", "lag"),
        FailingCheck("s/d/t", "checksum_matches_source", "ERROR", "3 rows differ"),
    ]
    several.skipped_signals = [{"message": "signal x skipped: no table", "age_seconds": 60.0, "run_id": "r"}]
    st = CaptureStatus("s", "f:4", health=several)
    problems = st.problems()
    assert problems[0].startswith("the sensor is NOT TICKING (last tick 900 s ago)")
    assert problems[1] == "table d.t is STOPPED (not captured): SinkError: x"
    assert problems[2] == "check checksum_matches_source of s/d/t fails: 3 rows differ"  # not the WARN one
    assert problems[3] == "a signal was skipped 60 s ago: signal x skipped: no table"
    assert st.verdict().endswith("[+3 more below]") and len(problems) == 4
    assert st.lines()[-1].startswith("skipped signals: 1 in the last 3600 s, latest 60 s ago")

    stopped = CaptureStatus("s", None, health=_health(state="STOPPED"))
    assert (
        stopped.verdict()
        == "UNHEALTHY: s: the sensor is STOPPED, nothing is captured: dagster sensor start s"
    )
    succeeded_since = _health()
    succeeded_since.last_run_failure = {
        "run_id": "r" * 36,
        "status": "FAILURE",
        "reason": "x",
        "succeeded_since": True,
    }
    assert CaptureStatus("s", "f:4", health=succeeded_since).problems() == []
    # a cursor given instead of the instance's state: what the cursor records
    from_cursor = CaptureStatus(
        "s", "f:4", last_error="run 2c6499a7-048f-4d84-8823-d2ece44233b3 FAILURE: LakeUnavailableError: down"
    )
    assert from_cursor.problems() == ["the last run failed: run 2c6499a7 FAILURE: LakeUnavailableError: down"]


def test_cli_exit_status_when_the_state_cannot_be_read(tmp_path, monkeypatch, capsys):
    from dagster_mysql_cdc.__main__ import main

    monkeypatch.delenv("DAGSTER_HOME", raising=False)
    assert main(["status", "--sensor", "s", "--no-server"]) == EXIT_UNKNOWN
    assert "DAGSTER_HOME is not set" in capsys.readouterr().err
    not_a_dir = tmp_path / "file"
    not_a_dir.write_text("")
    monkeypatch.setenv("DAGSTER_HOME", str(not_a_dir))
    assert main(["status", "--sensor", "s", "--no-server"]) == EXIT_UNKNOWN
    assert "Cannot read the capture's state from the Dagster instance" in capsys.readouterr().err
    with pytest.raises(SystemExit) as usage:
        main(["status"])
    assert usage.value.code == EXIT_UNKNOWN


def test_failing_checks_lists_each_failed_latest_result_of_the_capture_only():
    """``failing_checks`` reads every check of the capture's assets at once from a real (in
    memory) instance: a failed latest result is listed with its explanation, a check that
    passed after failing is not, nor another server's assets."""
    import dagster as dg

    from dagster_mysql_cdc.dagster_integration.health import failing_checks

    names = ("row_count_matches_source", "checksum_matches_source", "schema_matches_source")

    def table(server: str, name: str, failing: dict[str, str]) -> dg.AssetsDefinition:
        key = dg.AssetKey([server, "db", name])

        @dg.asset(key=key, check_specs=[dg.AssetCheckSpec(n, asset=key) for n in names])
        def _t():
            yield dg.MaterializeResult()
            for n in names:
                md = {"explanation": failing[n]} if n in failing else {}
                yield dg.AssetCheckResult(check_name=n, passed=n not in failing, metadata=md)

        return _t

    instance = dg.DagsterInstance.ephemeral()
    first = {"checksum_matches_source": "1 differing key(s): (5,)", "row_count_matches_source": "3 != 4"}
    dg.materialize([table("srv", "a", first)], instance=instance)
    dg.materialize(
        [table("srv", "a", {"checksum_matches_source": "1 differing key(s): (6,)"})], instance=instance
    )
    dg.materialize([table("srv", "b", {})], instance=instance)
    dg.materialize([table("other", "c", {"schema_matches_source": "missing column x"})], instance=instance)
    got = [(f.asset, f.check, f.description, f.of_stop) for f in failing_checks(instance, "srv")]
    assert got == [("srv/db/a", "checksum_matches_source", "1 differing key(s): (6,)", False)], got
    from dagster_mysql_cdc.dagster_integration.checks import STOPPED_EXPLANATION

    dg.materialize(
        [table("srv", "s", {"checksum_matches_source": STOPPED_EXPLANATION + "f:4: ..."})], instance=instance
    )
    assert [f.of_stop for f in failing_checks(instance, "srv") if f.asset == "srv/db/s"] == [True]
    assert failing_checks(instance, "nobody") == []


def test_a_stopped_table_the_run_in_flight_caught_up_is_no_longer_a_problem():
    """Between a run that caught a stopped table up and the sensor's next tick (up to its
    interval) the cursor still holds the stop: ``status`` used to print UNHEALTHY ... STOPPED
    beside ``in flight: ... (SUCCESS)``. Now a table the succeeded run in flight no longer
    reports stopped (its binlog asset's ``stopped_tables``) is shown as caught up, not as a
    problem; one it still reports stopped stays a problem. Read from a real (in memory)
    instance."""
    import dagster as dg

    from dagster_mysql_cdc.dagster_integration.cursor import InFlight, StreamCursor
    from dagster_mysql_cdc.dagster_integration.protocol import REQUEST_TAG
    from dagster_mysql_cdc.dagster_integration.status import read_status
    from dagster_mysql_cdc.engine.isolation import StoppedTable

    since = BinlogPosition("mysql-bin.000002", 500, "0-1-9")
    stop = StoppedTable(since, "ValueConversionError: bad TIME", attempts=1, retry_at=0.0, stopped_at=1.0)
    cursor = StreamCursor(
        committed=BinlogPosition("mysql-bin.000002", 900),
        snapshot_done=True,
        stopped={"d.t": stop.to_dict(), "d.u": stop.to_dict()},
        inflight=InFlight("stream", "window-key-1"),
    )

    def run(still_stopped: dict | None, key: str) -> None:
        @dg.asset(key=dg.AssetKey(["srv", "binlog"]))
        def binlog():
            md = {} if still_stopped is None else {"stopped_tables": dg.MetadataValue.json(still_stopped)}
            return dg.MaterializeResult(metadata=md)

        dg.materialize([binlog], instance=instance, tags={REQUEST_TAG: key})

    instance = dg.DagsterInstance.ephemeral()
    status = read_status(instance, "s", cursor_text=cursor.to_json())
    assert status.inflight["run_status"] == "not created yet" and status.caught_up == {}
    assert [p.split(":")[0] for p in status.problems()] == [
        "table d.t is STOPPED (not captured)",
        "table d.u is STOPPED (not captured)",
    ]
    run({"d.u": stop.to_dict()}, "window-key-1")  # d.t caught up, d.u failed again
    status = read_status(instance, "s", cursor_text=cursor.to_json())
    run_id = status.inflight["run_id"]
    assert status.caught_up == {"d.t": run_id} and list(status.stopped) == ["d.u"]
    assert [p.split(":")[0] for p in status.problems()] == ["table d.u is STOPPED (not captured)"]
    assert f"table caught up: d.t by run {run_id[:8]} (SUCCESS); the sensor records it at its next tick" in (
        status.lines()
    )
    # a run that reported no stopped_tables (e.g. a snapshot run) proves nothing
    cursor = StreamCursor(
        committed=cursor.committed,
        snapshot_done=True,
        stopped=cursor.stopped,
        inflight=InFlight("stream", "window-key-2"),
    )
    run(None, "window-key-2")
    status = read_status(instance, "s", cursor_text=cursor.to_json())
    assert status.inflight["run_status"] == "SUCCESS" and status.caught_up == {}
    assert len(status.problems()) == 2


def test_a_stopped_table_a_following_run_caught_up_at_its_start_is_shown_caught_up():
    """A run that caught a stopped table up at its start and still follows (on a busy server, up
    to its budget) names it in its ``caught_up`` tag: ``status`` shows it caught up, not as a
    problem, while that run goes; a table it did not name stays STOPPED."""
    import json

    import dagster as dg

    from dagster_mysql_cdc.dagster_integration.cursor import InFlight, StreamCursor
    from dagster_mysql_cdc.dagster_integration.protocol import CAUGHT_UP_TAG, REQUEST_TAG
    from dagster_mysql_cdc.dagster_integration.status import read_status
    from dagster_mysql_cdc.engine.isolation import StoppedTable

    stop = StoppedTable(BinlogPosition("mysql-bin.000002", 500), "SinkError: x", attempts=1, retry_at=0.0)
    cursor = StreamCursor(
        committed=BinlogPosition("mysql-bin.000002", 900),
        snapshot_done=True,
        stopped={"d.t": stop.to_dict(), "d.u": stop.to_dict()},
        inflight=InFlight("stream", "window-key-9"),
    )
    instance = dg.DagsterInstance.ephemeral()
    run = dg.DagsterRun(
        job_name="cdc",
        status=dg.DagsterRunStatus.STARTED,
        tags={REQUEST_TAG: "window-key-9", CAUGHT_UP_TAG: json.dumps(["d.t"])},
    )
    instance.add_run(run)
    status = read_status(instance, "s", cursor_text=cursor.to_json())
    assert status.caught_up == {"d.t": run.run_id} and list(status.stopped) == ["d.u"]
    assert [p.split(":")[0] for p in status.problems()] == ["table d.u is STOPPED (not captured)"]
    line = f"table caught up: d.t by run {run.run_id[:8]} (STARTED); the sensor records it once that run ends"
    assert line in status.lines()
    instance.report_run_failed(run)  # a failed run proves nothing: both are stopped again
    status = read_status(instance, "s", cursor_text=cursor.to_json())
    assert status.caught_up == {} and len(status.problems()) == 2


def _materialized_in(instance, run, key: list[str], metadata: dict) -> None:
    """Store an asset materialization of ``key`` logged by ``run``, as a run's step does."""
    import dagster as dg
    from dagster._core.events import DagsterEvent, DagsterEventType, StepMaterializationData

    mat = dg.AssetMaterialization(asset_key=dg.AssetKey(key), metadata=metadata)
    event = DagsterEvent(
        DagsterEventType.ASSET_MATERIALIZATION.value,
        run.job_name,
        event_specific_data=StepMaterializationData(mat),
    )
    instance.report_dagster_event(event, run_id=run.run_id)


def test_the_lake_position_of_a_following_run_is_its_newest_committed_window():
    """A following or standby run commits window after window for minutes, and the sensor's
    cursor records them when the run ends: ``status`` measured the lag from the cursor (148 s
    and growing under ``dagster dev`` while the lake was a second behind). It now takes the end
    of the newest window the run in flight reported (a table's materialization, logged once its
    commit is durable) when that is beyond the cursor, and says so on its second line."""
    import dagster as dg

    from dagster_mysql_cdc.dagster_integration.cursor import InFlight, StreamCursor
    from dagster_mysql_cdc.dagster_integration.protocol import REQUEST_TAG, position_metadata
    from dagster_mysql_cdc.dagster_integration.status import read_status

    committed = BinlogPosition("mysql-bin.000002", 900, "0-1-9")
    cursor = StreamCursor(
        committed=committed, snapshot_done=True, inflight=InFlight("stream", "window-key-3")
    )
    instance = dg.DagsterInstance.ephemeral()
    run = dg.DagsterRun(
        job_name="cdc", status=dg.DagsterRunStatus.STARTED, tags={REQUEST_TAG: "window-key-3"}
    )
    instance.add_run(run)
    assert read_status(instance, "s", cursor_text=cursor.to_json()).run_committed is None  # nothing reported
    for end in (1500, 2700):
        md = {
            "rows": 3,
            **position_metadata("window_end", BinlogPosition("mysql-bin.000002", end, f"0-1-{end}")),
        }
        _materialized_in(instance, run, ["srv", "d", "t"], md)
    status = read_status(instance, "s", cursor_text=cursor.to_json())
    assert status.run_committed == "mysql-bin.000002:2700 gtid=0-1-2700"
    assert (
        f"(run {run.run_id[:8]} has committed up to mysql-bin.000002:2700 gtid=0-1-2700)" in status.lines()[0]
    )
    instance.report_run_failed(run)  # a run that is not going: the cursor is what counts
    assert read_status(instance, "s", cursor_text=cursor.to_json()).run_committed is None

    # a standby run that read windows of other databases' traffic materializes nothing: its
    # progress tag (recorded after each follow-on window it committed) says how far it is
    import json

    from dagster_mysql_cdc.dagster_integration.protocol import PROGRESS_TAG

    reached = BinlogPosition("mysql-bin.000003", 120, "0-1-4000")
    progress = {"reached": reached.to_dict(), "windows": 5, "rows": 0, "stopped": {}}
    standby = dg.DagsterRun(
        job_name="cdc",
        status=dg.DagsterRunStatus.STARTED,
        tags={REQUEST_TAG: "window-key-4", PROGRESS_TAG: json.dumps(progress)},
    )
    instance.add_run(standby)
    cursor = StreamCursor(
        committed=committed, snapshot_done=True, inflight=InFlight("stream", "window-key-4")
    )
    assert read_status(instance, "s", cursor_text=cursor.to_json()).run_committed == str(reached)


def test_a_success_after_a_failed_run_counts_while_a_newer_run_is_going():
    """After a killed run the sensor's retry succeeded and the next run, a following run, kept
    going for minutes: ``status`` said UNHEALTHY (the failed run) all that time, because only the
    newest run counted as "succeeded since". Any run of the sensor created after the failed one
    that succeeded counts now; a failure after the last success still does not."""
    import dagster as dg

    from dagster_mysql_cdc.dagster_integration.health import _succeeded_since

    instance = dg.DagsterInstance.ephemeral()
    tags = {"dagster/sensor_name": "s"}

    def add(status) -> dg.DagsterRun:
        run = dg.DagsterRun(job_name="cdc", status=status, tags=tags)
        instance.add_run(run)
        return run

    failed = add(dg.DagsterRunStatus.FAILURE)
    record = instance.get_run_record_by_id(failed.run_id)
    assert not _succeeded_since(instance, None, "s", record)
    add(dg.DagsterRunStatus.SUCCESS)
    add(dg.DagsterRunStatus.STARTED)  # the newest run is going
    assert _succeeded_since(instance, None, "s", record)
    again = add(dg.DagsterRunStatus.FAILURE)
    assert not _succeeded_since(instance, None, "s", instance.get_run_record_by_id(again.run_id))


def test_a_run_that_failed_before_its_step_names_the_engines_error():
    """A run whose job could not be built (its code location's assets no longer hold the keys
    the sensor selected) fails before any step; Dagster's run failure then only says "marked as
    failed from outside the execution context". The reason is the engine event's error."""
    import dagster as dg
    from dagster._core.errors import DagsterInvalidSubsetError
    from dagster._core.events import EngineEventData
    from dagster._utils.error import serializable_error_info_from_exc_info

    from dagster_mysql_cdc.dagster_integration.health import run_failure_reason

    instance = dg.DagsterInstance.ephemeral()
    run = dg.DagsterRun(job_name="cdc", status=dg.DagsterRunStatus.STARTING)
    instance.add_run(run)
    try:
        raise DagsterInvalidSubsetError(
            "AssetKey(s) ['srv/d/t'] were selected, but no AssetsDefinition objects supply these keys."
        )
    except DagsterInvalidSubsetError:
        error = serializable_error_info_from_exc_info(sys.exc_info())
    instance.report_engine_event(
        "An exception was thrown during execution", run, EngineEventData.engine_error(error)
    )
    instance.report_run_failed(run)
    assert run_failure_reason(instance, run.run_id).startswith(
        "DagsterInvalidSubsetError: AssetKey(s) ['srv/d/t']"
    )


def test_checks_a_stop_explains_are_not_problems_of_their_own():
    """A stopped table's checks fail with the stop's explanation: the stop is its own problem,
    and once a run caught the table up (``table caught up:``) those results, logged before,
    are no problem until the run that caught it up logs the table's checks again."""
    from dagster_mysql_cdc.dagster_integration.checks import STOPPED_EXPLANATION

    h = _health()
    h.failing_checks = [
        FailingCheck("s/d/t", "row_count_matches_source", "ERROR", STOPPED_EXPLANATION + "f:4", of_stop=True),
    ]
    assert CaptureStatus("s", "f:4", health=h).problems() == []
    h.failing_checks.append(FailingCheck("s/d/u", "checksum_matches_source", "ERROR", "3 rows differ"))
    assert CaptureStatus("s", "f:4", health=h).problems() == [
        "check checksum_matches_source of s/d/u fails: 3 rows differ"
    ]


def test_the_incremental_snapshot_of_a_following_run_shows_as_far_as_it_committed():
    """A following run reads an incremental snapshot window after window for minutes; the
    cursor's state is the one at the run's start. ``status`` shows the state of the run's
    progress tag while it goes (``None`` there: finished), and the cursor's otherwise."""
    import json

    import dagster as dg

    from dagster_mysql_cdc.dagster_integration.cursor import InFlight, StreamCursor
    from dagster_mysql_cdc.dagster_integration.protocol import PROGRESS_TAG, REQUEST_TAG
    from dagster_mysql_cdc.dagster_integration.status import read_status

    def state(last: int) -> dict:
        return {
            "snapshot_id": "s1",
            "tables": [{"table": "d.big", "last_key": [last], "max_key": [100000], "chunks": last // 1000}],
            "chunk_seq": last // 1000,
        }

    committed = BinlogPosition("mysql-bin.000002", 900, "0-1-9")
    cursor = StreamCursor(
        committed=committed,
        snapshot_done=True,
        incremental=state(5000),
        inflight=InFlight("stream", "window-key-5"),
    )
    instance = dg.DagsterInstance.ephemeral()
    reached = BinlogPosition("mysql-bin.000002", 5000, "0-1-80").to_dict()
    progress = {"reached": reached, "windows": 40, "rows": 40000, "stopped": {}, "incremental": state(45000)}
    run = dg.DagsterRun(
        job_name="cdc",
        status=dg.DagsterRunStatus.STARTED,
        tags={REQUEST_TAG: "window-key-5", PROGRESS_TAG: json.dumps(progress)},
    )
    instance.add_run(run)
    status = read_status(instance, "s", cursor_text=cursor.to_json())
    assert status.incremental["key_progress"] == "45000 of 100000 (45 %)"
    instance.add_run_tags(run.run_id, {PROGRESS_TAG: json.dumps({**progress, "incremental": None})})
    assert read_status(instance, "s", cursor_text=cursor.to_json()).incremental is None  # finished
    instance.report_run_failed(run)  # not going: the cursor's (the sensor commits the tag's then)
    status = read_status(instance, "s", cursor_text=cursor.to_json())
    assert status.incremental["key_progress"] == "5000 of 100000 (5 %)"
