"""``sink.lake.run_concurrently``'s ``on_done`` (issue 42): a table's commit is reported in the
calling thread as soon as it finishes, while the other commits go on; the outcomes keep the
tasks' order; an error of the callback is raised only once every task has finished."""

import threading

import pytest

from dagster_mysql_cdc.sink.lake import run_concurrently


def test_on_done_reports_a_finished_task_while_another_still_runs():
    release = threading.Event()
    seen: list[tuple[int, object, bool]] = []

    def slow():
        assert release.wait(10), "on_done of the fast task never came while this one ran"
        return "slow"

    def on_done(i, outcome):
        seen.append((i, outcome[0], threading.current_thread() is threading.main_thread()))
        release.set()  # only now may the slow task finish: it waits for the fast one's report

    outcomes = run_concurrently([slow, lambda: "fast"], workers=2, on_done=on_done)
    assert outcomes == [("slow", None), ("fast", None)]
    assert seen == [(1, "fast", True), (0, "slow", True)]  # in finishing order, in the caller's thread


def test_task_errors_are_outcomes_and_reach_on_done():
    def boom():
        raise ValueError("x")

    seen = {}
    outcomes = run_concurrently([boom, lambda: 1], workers=2, on_done=lambda i, o: seen.update({i: o}))
    assert isinstance(outcomes[0][1], ValueError) and outcomes[1] == (1, None)
    assert set(seen) == {0, 1} and isinstance(seen[0][1], ValueError)


@pytest.mark.parametrize("workers", [1, 4])
def test_a_failing_on_done_is_raised_after_every_task_finished(workers):
    finished = []

    def task(i):
        def run():
            finished.append(i)
            return i

        return run

    calls = []

    def on_done(i, outcome):
        calls.append(i)
        raise RuntimeError("event storage down")

    with pytest.raises(RuntimeError, match="event storage down"):
        run_concurrently([task(i) for i in range(6)], workers=workers, on_done=on_done)
    assert sorted(finished) == list(range(6))  # no task is left half-done
    assert len(calls) == 1  # no further report after the first failed one
