"""IdleChecks (issue 42): which checks a following run evaluates while the binlog is idle, which
results it logs and which it drops. The checks themselves are stand-ins (their own tests run
them against MariaDB); the evaluations go to a real (ephemeral) Dagster instance's reads."""

from types import SimpleNamespace

import dagster as dg

from dagster_mysql_cdc.dagster_integration.idle_checks import IDLE_CHECKS_AFTER_SECONDS, IdleChecks

TABLES = {("db", "t"): dg.AssetKey(["s", "db", "t"]), ("db", "u"): dg.AssetKey(["s", "db", "u"])}
NAMES = ("row_count_matches_source", "checksum_matches_source", "schema_matches_source")


class _Job:
    """A BackgroundChecks stand-in: the results of ``keys``, once released."""

    def __init__(self, keys):
        self.keys, self.finished = list(keys), False

    def done(self, wait: float = 0.0) -> bool:
        return self.finished

    def results(self):
        return [dg.AssetCheckResult(asset_key=k.asset_key, check_name=k.name, passed=True) for k in self.keys]


class _Context:
    def __init__(self):
        self.instance = dg.DagsterInstance.ephemeral()
        self.events: list[dg.AssetCheckEvaluation] = []
        self.warnings: list[str] = []
        self.log = SimpleNamespace(warning=self.warnings.append)

    def log_event(self, event):
        self.events.append(event)


def _outcome(*tables, stopped=()):
    """A run's interim outcome: ``tables`` written, ``stopped`` (``(db, table)``) failed."""
    failed = {f"{db}.{t}": {"since": {}, "error": "x"} for db, t in stopped}
    result = SimpleNamespace(tables={t: object() for t in tables}, failed_tables=failed)
    return SimpleNamespace(result=result, reached="pos")


def _idle():
    ctx = _Context()
    jobs: list[tuple[list, _Job]] = []

    def keys_for(changed):
        return [dg.AssetCheckKey(TABLES[t], n) for t in changed for n in NAMES] + [
            dg.AssetCheckKey(dg.AssetKey(["s", "binlog"]), "binlog_retention")  # not a table check
        ]

    def start(reached, report, keys):
        job = _Job(keys)
        jobs.append((keys, job))
        return job

    return ctx, jobs, IdleChecks(ctx, TABLES, keys_for, start, lambda outcome: {})


def _logged(ctx):
    return sorted((e.asset_key.path[-1], e.check_name) for e in ctx.events)


def test_checks_start_after_a_second_of_idle_and_are_logged_once():
    ctx, jobs, idle = _idle()
    both = lambda: _outcome(("db", "t"), ("db", "u"))  # noqa: E731
    assert idle(IDLE_CHECKS_AFTER_SECONDS / 2, both) is False and not jobs  # a brief pause: nothing
    assert idle(IDLE_CHECKS_AFTER_SECONDS, both) is True
    ((keys, job),) = jobs
    assert {k.name for k in keys} == set(NAMES) and len(keys) == 6  # the binlog asset's: at the end
    assert idle(2.0, both) is True and not ctx.events  # still computing: the run keeps following
    job.finished = True
    assert idle(2.5, both) is False  # logged (a fraction of a second): nothing left
    assert len(ctx.events) == 6 and idle.current == set(keys)
    assert idle(3.0, both) is False and len(jobs) == 1  # not evaluated twice


def test_a_window_meanwhile_drops_its_tables_results_and_they_are_checked_again():
    ctx, jobs, idle = _idle()
    both = lambda: _outcome(("db", "t"), ("db", "u"))  # noqa: E731
    idle(1.0, both)
    (_, job) = jobs[0]
    idle.window(SimpleNamespace(tables={("db", "t"): object()}))  # t changes while they run
    job.finished = True
    assert idle(0.0, both) is False
    assert _logged(ctx) == sorted(("u", n) for n in NAMES)  # t's results were for its old rows
    assert idle(1.0, both) is True  # t again, alone
    keys, again = jobs[1]
    assert {k.asset_key for k in keys} == {TABLES[("db", "t")]}
    again.finished = True
    idle(1.5, both)
    assert len(ctx.events) == 6 and len(idle.current) == 6
    idle.window(SimpleNamespace(tables={("db", "u"): object()}))  # a logged check goes stale
    assert {k.asset_key for k in idle.current} == {TABLES[("db", "t")]}


def test_checks_that_failed_are_left_to_the_runs_end():
    ctx, jobs, idle = _idle()
    one = lambda: _outcome(("db", "t"))  # noqa: E731
    idle(1.0, one)
    (_, job) = jobs[0]

    def boom():
        raise RuntimeError("source unreachable")

    job.results, job.finished = boom, True
    assert idle(1.5, one) is False  # not retried while idle: the run's end evaluates them
    assert not ctx.events and not idle.current and len(jobs) == 1
    assert "source unreachable" in ctx.warnings[0]


def test_finish_logs_what_a_job_still_going_found():
    ctx, jobs, idle = _idle()
    idle(1.0, lambda: _outcome(("db", "t")))
    jobs[0][1].finished = True
    idle.finish()
    assert len(ctx.events) == 3 and len(idle.current) == 3


def test_the_checks_of_a_table_the_run_stopped_are_evaluated_with_those_it_wrote():
    """A table a window could not write (it stops alone) has its checks evaluated at idle time
    with the written tables' (they fail naming the stop): a standby run selects no table, and
    they would otherwise never be logged."""
    ctx, jobs, idle = _idle()
    outcome = lambda: _outcome(("db", "t"), stopped=[("db", "u")])  # noqa: E731
    assert idle(IDLE_CHECKS_AFTER_SECONDS, outcome) is True
    ((keys, job),) = jobs
    assert {k.asset_key.path[-1] for k in keys} == {"t", "u"} and len(keys) == 6
    job.finished = True
    assert idle(2.0, outcome) is False
    assert _logged(ctx) == sorted((t, n) for t in ("t", "u") for n in NAMES)
    only_stopped = lambda: _outcome(stopped=[("db", "u")])  # noqa: E731
    ctx2, jobs2, idle2 = _idle()
    assert idle2(IDLE_CHECKS_AFTER_SECONDS, only_stopped) is True  # no row written: still checked
    assert {k.asset_key.path[-1] for k in jobs2[0][0]} == {"u"}
