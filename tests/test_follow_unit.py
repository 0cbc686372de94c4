"""Unit tests of what ends a following run's wait (``engine.follow``, ``StreamRun._retry_ends``,
``StreamRun._idle_limit``): pure logic, no server."""

import time
from types import SimpleNamespace

from dagster_mysql_cdc.engine.follow import has_work
from dagster_mysql_cdc.engine.stream_run import StreamRun
from dagster_mysql_cdc.engine.window_result import WindowResult
from dagster_mysql_cdc.events import BinlogPosition


class _Log:
    def __init__(self) -> None:
        self.lines: list[str] = []

    def info(self, msg: str) -> None:
        self.lines.append(msg)


def _run(retries_due: dict[str, float]) -> tuple[StreamRun, _Log]:
    """A ``StreamRun`` holding only what ``_retry_ends``/``_idle_limit`` read (no source, no lake)."""
    run = StreamRun.__new__(StreamRun)
    run.log = _Log()  # type: ignore[assignment]
    run.retries_due = retries_due
    run.options = SimpleNamespace(follow_idle_seconds=4.0)  # type: ignore[assignment]
    return run, run.log  # type: ignore[return-value]


def _result(stopped: bool = False) -> WindowResult:
    p = BinlogPosition("mysql-bin.000001", 4, "0-1-1")
    failed = {"db.t": {"error": "x", "since": p.to_dict()}} if stopped else {}
    return WindowResult(start=p, end=p, failed_tables=failed)


def test_no_due_retry_ends_nothing_and_logs_nothing():
    run, log = _run({"db.s": time.time() + 60})
    assert not run._retry_ends(_result(), standby=True)
    assert not run._retry_ends(_result(stopped=True), standby=False)
    assert log.lines == []


def test_a_due_retry_ends_a_standby_run_without_work_and_says_so():
    run, log = _run({"db.s": time.time() - 1, "db.a": time.time() - 2, "db.later": time.time() + 60})
    assert run._retry_ends(_result(), standby=True)
    assert log.lines == [
        "Standby ends: the retry of stopped table(s) db.a, db.s is due; the sensor's next run catches them up"
    ]


def test_a_due_retry_ends_a_run_with_work_as_following():
    run, log = _run({"db.s": time.time() - 1})
    assert has_work(_result(stopped=True)) and not has_work(_result())
    assert run._retry_ends(_result(stopped=True), standby=True)
    assert run._retry_ends(_result(), standby=False)
    assert [line.split(":")[0] for line in log.lines] == ["Following ends", "Following ends"]


def test_idle_limit_of_a_standby_run_is_its_budget_until_a_retry_is_due():
    run, _ = _run({"db.s": time.time() + 60})
    now = time.monotonic()
    assert 29.0 < run._idle_limit(now, now + 30.0, _result(), standby=True) <= 30.0
    run.retries_due = {"db.s": time.time() - 1}
    assert run._idle_limit(now, now + 30.0, _result(), standby=True) == 0.0
    # a run with work waits follow_idle_seconds on an idle binlog; one without ends at once
    assert run._idle_limit(now, now + 30.0, _result(stopped=True), standby=False) == 4.0
    assert run._idle_limit(now, now + 30.0, _result(), standby=False) == 0.0
