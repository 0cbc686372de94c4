"""Unit tests of what ends a following run's wait (``engine.follow``, ``StreamRun._retry_ends``,
``StreamRun._idle_limit``): pure logic, no server."""

import time
from types import SimpleNamespace

import pytest

from dagster_mysql_cdc.engine.follow import FollowWindow, has_work, save_follow_window
from dagster_mysql_cdc.engine.stream_run import StreamRun
from dagster_mysql_cdc.engine.window_result import WindowResult
from dagster_mysql_cdc.events import BinlogPosition
from dagster_mysql_cdc.sink.storage import StorageSettings

P = BinlogPosition("mysql-bin.000001", 4, "0-1-1")


class _Log:
    def __init__(self) -> None:
        self.lines: list[str] = []

    def info(self, msg: str) -> None:
        self.lines.append(msg)


@pytest.fixture
def storage(tmp_path) -> StorageSettings:
    return StorageSettings(base_uri=str(tmp_path / "lake"))


def _run(retries_due: dict[str, float], storage: StorageSettings) -> tuple[StreamRun, _Log]:
    """A ``StreamRun`` holding only what ``_retry_ends``/``_idle_limit`` read (no source; a
    local lake for the saved follow-on windows)."""
    run = StreamRun.__new__(StreamRun)
    run.log = _Log()  # type: ignore[assignment]
    run.retries_due = retries_due
    run.retries_failed = []
    run.options = SimpleNamespace(follow_idle_seconds=4.0, server_name="srv")  # type: ignore[assignment]
    run.writer = SimpleNamespace(storage=storage)  # type: ignore[assignment]
    return run, run.log  # type: ignore[return-value]


def _result(stopped: bool = False) -> WindowResult:
    failed = {"db.t": {"error": "x", "since": P.to_dict()}} if stopped else {}
    return WindowResult(start=P, end=P, failed_tables=failed)


def test_no_due_retry_ends_nothing_and_logs_nothing(storage):
    run, log = _run({"db.s": time.time() + 60}, storage)
    assert not run._retry_ends(_result(), standby=True)
    assert not run._retry_ends(_result(stopped=True), standby=False)
    assert log.lines == []


def test_a_due_retry_ends_a_standby_run_without_work_and_says_so(storage):
    run, log = _run({"db.s": time.time() - 1, "db.a": time.time() - 2, "db.later": time.time() + 60}, storage)
    assert run._retry_ends(_result(), standby=True)
    assert log.lines == [
        "Standby ends: the retry of stopped table(s) db.a, db.s is due; the sensor's next run catches them up"
    ]


def test_a_due_retry_ends_a_run_with_work_as_following(storage):
    run, log = _run({"db.s": time.time() - 1}, storage)
    assert has_work(_result(stopped=True)) and not has_work(_result())
    assert run._retry_ends(_result(stopped=True), standby=True)
    assert run._retry_ends(_result(), standby=False)
    assert [line.split(":")[0] for line in log.lines] == ["Following ends", "Following ends"]


def test_idle_limit_of_a_standby_run_is_its_budget_until_a_retry_is_due(storage):
    run, _ = _run({"db.s": time.time() + 60}, storage)
    now = time.monotonic()
    assert 29.0 < run._idle_limit(now, now + 30.0, _result(), standby=True) <= 30.0
    run.retries_due = {"db.s": time.time() - 1}
    assert run._idle_limit(now, now + 30.0, _result(), standby=True) == 0.0
    # a run with work waits follow_idle_seconds on an idle binlog; one without ends at once
    assert run._idle_limit(now, now + 30.0, _result(stopped=True), standby=False) == 4.0
    assert run._idle_limit(now, now + 30.0, _result(), standby=False) == 0.0


def test_a_due_retry_never_ends_a_run_before_a_window_an_earlier_attempt_saved(storage):
    """An earlier attempt saved (and may have partly committed) the window after ``result.end``:
    the run reads it before it may end, whatever the retry (a run planned from there would skip
    those tables' commits: each commit's identity is its window's start)."""
    run, log = _run({"db.s": time.time() - 1}, storage)
    nxt = BinlogPosition("mysql-bin.000001", 900, "0-1-2")
    save_follow_window(storage, "srv", FollowWindow(P, P, nxt))
    assert not run._retry_ends(_result(), standby=True)
    assert log.lines == []
    after = WindowResult(start=P, end=nxt)  # once it is read, the run may end
    assert run._retry_ends(after, standby=True) and log.lines[0].startswith("Standby ends")


def test_a_stop_or_a_failed_retry_ends_following_but_never_before_a_saved_window(storage):
    """A table stopped in the run's windows, or whose catch-up at the run's start failed again,
    ends following (logged, so the sensor records it at once); a window an earlier attempt
    saved after ``result.end`` is read first."""
    run, log = _run({}, storage)
    assert not run._stop_ends(_result())
    assert run._stop_ends(_result(stopped=True))
    run.retries_failed = ["db.s"]
    assert run._stop_ends(_result())
    assert log.lines[-1].startswith("Following ends at ") and "db.s stopped;" in log.lines[-1]
    save_follow_window(storage, "srv", FollowWindow(P, P, BinlogPosition("mysql-bin.000001", 900, "0-1-2")))
    assert not run._stop_ends(_result(stopped=True)) and len(log.lines) == 2
