"""What a stream run reports of each window as it commits it (issue 42, "Seconds, always").

A following run reads windows for minutes and a standby run waits for the next change as long
(:mod:`..engine.follow`); reported once at the run's end, a change would reach the UI a minute
after the lake. :class:`WindowReporter` is the run's ``on_window`` callback
(:class:`..engine.stream_run.StreamRun`): once a window is committed it logs one
``AssetMaterialization`` per table asset the window changed (the metadata of
:func:`.run_report.table_results`: row count, rows by op, window bounds, lag, Delta versions),
whether or not the run selected the table (a standby run selects only the binlog asset; a table
the sensor's look-ahead missed is materialized too). The run's end yields only what no window
reported (the tables a blocking snapshot replaced). :func:`standby_checks` names the table
checks a standby run logs for the tables it changed, and :func:`window_report` what a committed
run tells its checks.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import dagster as dg

from ..events import BinlogPosition
from ..sink.storage import StorageSettings
from ..source.connection import ConnectionSettings, ServerInfo
from .checks import TABLE_CHECKS
from .protocol import BINLOG_METADATA_KEY, TABLE_METADATA_KEY
from .run_report import estimated_rows_of, logged_materialization, table_results, window_lag_metadata
from .translator import table_of_spec

if TYPE_CHECKING:
    from ..engine.stream_run import StreamRunOutcome, TableCommitted
    from ..engine.window_result import WindowResult


def table_keys(context: dg.AssetExecutionContext) -> dict[tuple[str, str], dg.AssetKey]:
    """``(db, table)`` -> asset key of every table asset of the run's op, selected or not."""
    return {
        table_of_spec(s): s.key
        for s in context.assets_def.specs
        if BINLOG_METADATA_KEY not in (s.metadata or {}) and TABLE_METADATA_KEY in (s.metadata or {})
    }


class WindowReporter:
    """The ``on_window(result, start, end)`` callback of a stream run (see the module docs).

    Args:
        context: the run's asset context (``log_event``, the instance for the lag metadata).
        settings, info: the source (the lag behind the server's head).
        storage: the lake (row counts the commit did not count).
        tables: ``(db, table)`` -> asset key of the tables to report (:func:`table_keys`).
        chunk_size: ``incremental_snapshot_chunk_size`` (incremental snapshot progress).
        requested: the run's requested window ``(start, end)``: the lag of another window (a
            follow-on window) counts from its planning, not from the run's creation.

    Attributes:
        reported: the ``(db, table)`` reported so far.
    """

    def __init__(
        self,
        context: dg.AssetExecutionContext,
        settings: ConnectionSettings,
        info: ServerInfo,
        storage: StorageSettings,
        tables: dict[tuple[str, str], dg.AssetKey],
        chunk_size: int,
        requested: tuple[BinlogPosition, BinlogPosition] | None = None,
    ) -> None:
        self.requested = requested
        self.context = context
        self.settings = settings
        self.info = info
        self.storage = storage
        self.tables = tables
        self.chunk_size = chunk_size
        self.reported: set[tuple[str, str]] = set()
        # the window whose tables table_committed is logging (its start's sort key), those
        # tables, and the window's lag and estimates
        self._early_window: tuple | None = None
        self._early_tables: set[tuple[str, str]] = set()
        self._facts: dict[str, Any] | None = None

    def __call__(self, result: WindowResult, start: BinlogPosition, end: BinlogPosition) -> None:
        """Log the materializations of the tables window ``[start, end)`` (committed) changed
        that :meth:`table_committed` did not log already.

        Raises:
            whatever the Dagster instance's event storage raises (the run then fails: a window
            is never read after one whose report was lost).
        """
        early = self._early_tables if self._early_window == start.sort_key() else set()
        todo = {t for t in result.tables if t not in early}
        if todo:
            self._log(
                result,
                start,
                end,
                self._window_facts(result, start, end, time.time() - float(result.seconds)),
                todo,
            )
        self.reported.update(t for t in result.tables if t in self.tables)
        self._early_window, self._early_tables, self._facts = None, set(), None

    def table_committed(self, committed: TableCommitted) -> None:
        """Log one table's materialization as soon as its commit of a window is durable (the
        ``on_table`` callback of :class:`..engine.stream_run.StreamRun`), while the window's
        other tables are still committing: a 300-table window's first tables reach the UI
        seconds before its last one is committed (issue 42). The window's lag and row estimates
        are read once, at its first table.

        Raises:
            whatever the Dagster instance's event storage raises (the window then fails; its
            retry skips the tables that committed).
        """
        start, end, table = committed.start, committed.end, committed.table
        if table not in self.tables:
            return  # logged (WARNING) with the window's other unselected tables by __call__
        if self._early_window != start.sort_key():
            self._early_window, self._early_tables, self._facts = start.sort_key(), set(), None
        facts = self._window_facts(committed.result, start, end, committed.read_started_at)
        one = replace(committed.result, tables={table: committed.written})
        self._log(one, start, end, facts, {table})
        self._early_tables.add(table)
        self.reported.add(table)

    def _window_facts(
        self, result: WindowResult, start: BinlogPosition, end: BinlogPosition, read_started_at: float
    ) -> dict[str, Any]:
        """The window's lag metadata and the row estimates of its incremental snapshot tables,
        read once per window (cached until :meth:`__call__` closes the window)."""
        if self._facts is not None and self._early_window == start.sort_key():
            return self._facts
        # a follow-on window's end was the server's head when it was planned, just before its
        # read (a standby run was created minutes before its first change)
        follow_on = self.requested is not None and (start.sort_key(), end.sort_key()) != (
            self.requested[0].sort_key(),
            self.requested[1].sort_key(),
        )
        lag = window_lag_metadata(
            self.context,
            self.settings,
            self.info,
            end,
            result.last_event_ts_ms,
            planned_at=read_started_at if follow_on else None,
        )
        facts = {"lag": lag, "estimates": estimated_rows_of(self.settings, result)}
        if self._early_window == start.sort_key():
            self._facts = facts
        return facts

    def _log(
        self,
        result: WindowResult,
        start: BinlogPosition,
        end: BinlogPosition,
        facts: dict[str, Any],
        only: set[tuple[str, str]],
    ) -> None:
        for r in table_results(
            self.context,
            result,
            self.settings,
            self.storage,
            self.tables,
            start=start,
            reached=end,
            lag=facts["lag"],
            chunk_size=self.chunk_size,
            only=only,
            estimates=facts["estimates"],
        ):
            self.context.log_event(logged_materialization(r))


def standby_checks(
    context: dg.AssetExecutionContext, changed: Iterable[Any], planned: Iterable[dg.AssetCheckKey]
) -> list[dg.AssetCheckKey]:
    """The table checks (:data:`.checks.TABLE_CHECKS`) of the tables a standby run changed or
    stopped (``changed``: ``(db, table)`` pairs, :func:`window_report`'s ``"changed"``,
    :func:`checked_tables`), except those already ``planned``: the run evaluates and logs them."""
    keys = table_keys(context)
    assets = {keys[(str(t[0]), str(t[1]))] for t in changed if (str(t[0]), str(t[1])) in keys}
    have = set(planned)
    # every check the op defines (the run's subset ``check_keys`` holds only the selected ones)
    specs = getattr(context.assets_def, "node_check_specs_by_output_name", None)
    defined = [s.key for s in specs.values()] if specs else list(context.assets_def.check_keys)
    return [ck for ck in defined if ck.asset_key in assets and ck.name in TABLE_CHECKS and ck not in have]


def window_report(outcome: StreamRunOutcome, report: dict | None = None) -> dict[str, Any]:
    """What a committed window tells its checks (:meth:`.check_run.CheckRequest.after_window`),
    added to ``report`` (a new dict when ``None``): the tables stopped after it (``"stopped"``),
    the changes the binlog did not carry (``"gaps"``), the live rows (``"live_rows"``) and tail
    files (``"tail_files"``) of the tables it committed, by state URI, and what tells a pending
    repair from a divergence: the incremental snapshot state after it
    (``"incremental_state"``), the chunks it read (``"chunks"``) and the tables it snapshotted
    again (``"snapshotted"``, ``"db.table"``); the ``(db, table)`` it changed or stopped
    (``"changed"``, :func:`checked_tables`)."""
    report = {} if report is None else report
    report["stopped"] = outcome.stopped
    report["gaps"] = outcome.gaps
    report["live_rows"] = outcome.live_rows
    report["tail_files"] = outcome.tail_files
    report["incremental_state"] = outcome.result.incremental_state
    report["chunks"] = outcome.result.chunks
    report["snapshotted"] = [r.schema.qualified_name for r in outcome.snapshots]
    report["changed"] = checked_tables(outcome.result)
    return report


def checked_tables(result: WindowResult) -> list[tuple[str, str]]:
    """The ``(db, table)`` whose checks a stream run's windows (merged: ``result``) call for: those
    they changed, and those they stopped (their row checks fail naming the stop,
    :func:`.checks.stopped_results`, as soon as the run logs them: a standby run selects no
    table and checks only these)."""
    from ..engine.window_gaps import table_key  # (the data path: imported when the step runs)

    return list(dict.fromkeys([*result.tables, *map(table_key, result.failed_tables)]))
