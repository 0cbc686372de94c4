"""A following run's table checks, evaluated and logged while the binlog is idle (issue 42).

A stream run that follows the binlog ends once it has been idle for ``stream_follow_idle_seconds``;
its checks used to start only then, and a 300-table window's 900 check evaluations then took
Dagster's event storage 15-25 s more, during which no run read the binlog: a change committed
then waited for the run's end and the next run's start. :class:`IdleChecks` is the run's
``on_idle`` callback (:class:`..engine.stream_run.StreamRun`): once the binlog has been idle for
:data:`IDLE_CHECKS_AFTER_SECONDS` (or carried only windows of other databases' traffic, which
change none of the run's tables: ``StreamRun.follow``), the table checks of what the run
committed so far, and of the tables it stopped (they fail naming the stop), run on a thread
(:class:`.check_run.BackgroundChecks`, the same checks as at the run's end, at the position
reached), and their results are logged in slices between the run's polls, so the run keeps
reading changes until every check is logged (and at least the idle time has passed).

A window read meanwhile changes some tables again: their results from before it are dropped
(never logged; logged ones are superseded) and checked again, at the next idle time or at the
run's end. The run's end (:meth:`.resources.MySqlCdcResource.sync`) evaluates only the checks
not logged here for the tables' latest materializations, plus the binlog asset's checks and the
planned checks it yields. Only logged table checks (:data:`.protocol.TABLE_CHECKS_TAG`, a
standby run's) are evaluated here: a planned check's result is an output of the run's step.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from functools import partial
from typing import TYPE_CHECKING, Any

import dagster as dg

from .check_run import BackgroundChecks, check_evaluation, materialization_targets
from .checks import TABLE_CHECKS
from .protocol import STANDBY_TAG
from .window_report import checked_tables, standby_checks, table_keys, window_report

if TYPE_CHECKING:
    from ..engine.stream_run import StreamRunOutcome
    from ..engine.window_result import WindowResult

#: The checks start once the binlog has been idle this long (seconds): a brief pause between
#: changes does not start (and then drop) them.
IDLE_CHECKS_AFTER_SECONDS = 1.0

#: At most this long is spent logging results (or waiting for the checks) at one idle poll
#: (seconds): the run checks the binlog for changes between slices, without sleeping.
LOG_SLICE_SECONDS = 0.25


class IdleChecks:
    """The ``on_idle(idle_seconds, interim)`` callback of a following stream run (module docs).

    Args:
        context: the run's asset context (logs on the run's thread).
        tables: ``(db, table)`` -> asset key of every table asset of the run's op.
        keys_for: ``keys_for(changed)`` -> the logged table checks of the tables ``changed``
            (``(db, table)`` pairs) the run evaluates.
        start: ``start(reached, report, keys)`` -> the :class:`.check_run.BackgroundChecks`
            evaluating ``keys`` at position ``reached`` with the run's interim ``report``
            (:func:`.window_report.window_report`).
        report_of: ``report_of(outcome)`` -> that report.

    Attributes:
        current: the check keys logged here whose table no window changed since.
    """

    def __init__(
        self,
        context: dg.AssetExecutionContext,
        tables: dict[tuple[str, str], dg.AssetKey],
        keys_for: Callable[[Iterable[tuple[str, str]]], list[dg.AssetCheckKey]],
        start: Callable[[Any, dict, list[dg.AssetCheckKey]], BackgroundChecks],
        report_of: Callable[[StreamRunOutcome], dict],
    ) -> None:
        self.context = context
        self._table_of = {k: t for t, k in tables.items()}
        self._keys_for = keys_for
        self._start = start
        self._report_of = report_of
        self.current: set[dg.AssetCheckKey] = set()
        self._job: BackgroundChecks | None = None
        self._stale: set[tuple[str, str]] = set()  # changed by a window since the job started
        self._pending: list[dg.AssetCheckResult] = []
        self._targets: dict[dg.AssetKey, Any] = {}
        # evaluated (or failed) since their table last changed: not started again at idle
        self._tried: set[dg.AssetCheckKey] = set()

    def window(self, result: WindowResult) -> None:
        """A window committed ``result``: its tables' checks logged here are no longer current,
        and a job's results for them will not be logged."""
        key_tables = set(result.tables)
        self._stale |= key_tables
        self.current = {k for k in self.current if self._table_of.get(k.asset_key) not in key_tables}
        self._tried = {k for k in self._tried if self._table_of.get(k.asset_key) not in key_tables}
        self._pending = [
            r
            for r in self._pending
            if r.asset_key is None or self._table_of.get(r.asset_key) not in key_tables
        ]

    def after(self, on_window: Callable[..., None]) -> Callable[..., None]:
        """The run's ``on_window``: ``on_window`` (the window's materializations), then
        :meth:`window`."""

        def both(result: WindowResult, *bounds: Any) -> None:
            on_window(result, *bounds)
            self.window(result)

        return both

    def __call__(self, idle_seconds: float, interim: Callable[[], StreamRunOutcome]) -> bool:
        """One idle poll: start the checks, collect them, or log a slice of their results.

        Returns:
            whether work is left (the run then keeps following).
        Raises:
            whatever the Dagster instance's event storage raises while logging (the run fails;
            its windows are committed). A check that fails to run is logged as a WARNING and
            left to the run's end.
        """
        if idle_seconds < IDLE_CHECKS_AFTER_SECONDS and self._job is None and not self._pending:
            return False
        if self._job is not None:
            if not self._job.done(wait=LOG_SLICE_SECONDS):
                return True
            self._collect()
        if self._pending:
            self._log_slice()
            return bool(self._pending)
        outcome = interim()
        changed = [(str(d), str(t)) for d, t in checked_tables(outcome.result)]
        keys = [
            k
            for k in self._keys_for(changed)
            if k.name in TABLE_CHECKS and k not in self.current and k not in self._tried
        ]
        if not keys:
            return False
        self._stale = set()
        self._tried.update(keys)
        self._job = self._start(outcome.reached, self._report_of(outcome), keys)
        return True

    def finish(self) -> None:
        """At the run's end: wait for a job still going and log what it found for tables no
        window changed since (the run's end evaluates the rest)."""
        if self._job is not None:
            self._collect()
        while self._pending:
            self._log_slice()

    def _collect(self) -> None:
        job, self._job = self._job, None
        assert job is not None
        try:
            results = job.results()
        except Exception as e:  # noqa: BLE001 - the run's end evaluates them again
            self.context.log.warning(
                f"The checks evaluated while the binlog was idle failed ({type(e).__name__}: {e}); "
                "the run evaluates them at its end"
            )
            return
        keep = [
            r
            for r in results
            if r.asset_key is not None and self._table_of.get(r.asset_key) not in self._stale
        ]
        self._targets = materialization_targets(self.context, {r.asset_key for r in keep if r.asset_key})
        self._pending = keep

    def _log_slice(self) -> None:
        until = time.monotonic() + LOG_SLICE_SECONDS
        while self._pending and time.monotonic() < until:
            r = self._pending.pop(0)
            assert r.asset_key is not None
            self.context.log_event(check_evaluation(r, self._targets.get(r.asset_key)))
            self.current.add(dg.AssetCheckKey(r.asset_key, r.check_name or ""))


def idle_checks_for(
    context: dg.AssetExecutionContext,
    logged: list[dg.AssetCheckKey],
    planned: list[dg.AssetCheckKey],
    window_checks: Callable[..., Iterable[dg.AssetCheckResult]],
) -> IdleChecks:
    """The :class:`IdleChecks` of a stream run: the logged table checks (``logged``, and a
    standby run's checks of the tables it changed, :func:`.window_report.standby_checks`, except
    ``planned``) of the tables the run changed, evaluated as at the run's end by
    ``window_checks(context, committed=, report=, keys=)``
    (:meth:`.resources.MySqlCdcResource._window_checks`)."""
    standby = context.run.tags.get(STANDBY_TAG) == "true"
    keys = table_keys(context)

    def keys_for(changed: Iterable[tuple[str, str]]) -> list[dg.AssetCheckKey]:
        changed = list(changed)
        assets = {keys[t] for t in changed if t in keys}
        extra = standby_checks(context, changed, planned) if standby else []
        return [k for k in dict.fromkeys([*logged, *extra]) if k.asset_key in assets]

    def start(reached: Any, report: dict, todo: list[dg.AssetCheckKey]) -> BackgroundChecks:
        return BackgroundChecks(partial(window_checks, committed=reached, report=report, keys=todo), context)

    return IdleChecks(context, keys, keys_for, start, window_report)
