"""What a stream run does, apart from how Dagster reports it: the coordinator of one run's windows.

The binlog sensor requests a stream run for the window ``[start, end)`` (its run tags, decoded
into a :class:`StreamRunRequest`). :meth:`StreamRun.run` then, in order:

1. refuses to read when the window's positions belong to another server than the one the run
   connects to (:func:`check_window_server`; failover, see ``docs/operations.md``);
2. catches up the stopped tables whose retry is due, each from its stop position to ``start``
   (:meth:`StreamRun.catch_up_stopped`, :mod:`.isolation`);
3. reads and commits the window (:func:`.window_run.run_window`: the run process, or parallel Spark
   segments for a backlog, :mod:`.parallel_catchup`), without the still-stopped tables;
4. reads follow-on windows while changes keep coming (:meth:`StreamRun.follow`, :mod:`.follow`),
   reporting its progress (:class:`RunProgress`) each time a follow-on window is committed, so
   the windows of a run that dies later still count;
5. stops the tables whose events could not be written, alone (from the start of the first
   window that could not write them: later windows of the run leave them out);
6. logs the run's signals, gaps and skipped events, and computes the offset it reached
   (:func:`.window_result.reached_offset`), which the sensor commits;
7. runs the blocking snapshot a signal asked for, streaming paused at the window's end
   (:mod:`.snapshot_run`).

It returns a :class:`StreamRunOutcome`; the Dagster side (``dagster_integration/resources.py``)
turns it into materializations and their metadata (``dagster_integration/run_report.py``) and
the inputs of the run's checks (``dagster_integration/check_run.py``). Nothing here imports
Dagster: the run's log is a :class:`~.run_log.RunLog`, and what only the sensor knows (how it
would plan the next window, which tables the run selected) comes in as plain values and callables.

Debezium: the connector's ``ChangeEventSourceCoordinator`` (snapshot, streaming and incremental
snapshot sources over one offset context), bounded to the windows of one run.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING

from ..errors import SinkError, describe
from ..events import BinlogPosition
from ..sink.delta import cached_handle_count, handle_cache, in_handle_cache, preload
from ..source.connection import ConnectionSettings, ServerInfo, binlog_files, connect
from ..source.failover import ServerChangedError, ServerIdentity, other_server_reason
from ..source.filters import TableFilter
from ..source.snapshot import SnapshotOptions
from ..source.types import TypeOptions
from .follow import (
    STANDBY_POLL_SECONDS,
    FollowPlanner,
    FollowWindow,
    NextWindow,
    QuietWindows,
    RunProgress,
    has_work,
    load_follow_window,
    save_follow_window,
)
from .incremental import IncrementalState, state_tag
from .incremental_source import IncrementalOptions
from .isolation import catch_up
from .run_log import RunLog
from .snapshot_run import SnapshotReads, snapshot_tables
from .stream import STREAM_APP_ID, StreamOptions
from .window_gaps import table_key
from .window_result import (
    WindowResult,
    merge_window_results,
    reached_offset,
    reached_planned_end,
    with_catch_ups,
)
from .window_run import run_window

if TYPE_CHECKING:
    from ..sink.lake import LakeWriter, TableWriteResult
    from ..sink.schema_history import SchemaHistory
    from .initial_snapshot import SnapshotTableResult


@dataclass(frozen=True)
class StreamRunOptions:
    """The capture's settings a stream run reads with (``MySqlCdcResource`` fields).

    Attributes:
        server_name: logical server name (Debezium ``topic.prefix``): the lake's paths.
        server_id: replication client id the windows are read as (``database.server.id``).
        table_filter: the captured tables (include/exclude lists).
        type_options: the type mapping and column policy.
        stream: how windows are read and committed (:class:`.stream.StreamOptions`).
        incremental: incremental snapshots and signals of the requested window.
        snapshot: makes the options of a blocking snapshot (``snapshot.mode=initial``) when one
            runs (a bad snapshot setting fails the blocking snapshot, not every window).
        snapshot_reads: how a blocking snapshot reads (split reads or the locked scan).
        follow_seconds: follow-on windows start within this many seconds of the run's start
            (0: only windows an earlier attempt saved are read).
        follow_idle_seconds: following ends once the binlog had nothing new for this long.
    """

    server_name: str
    server_id: int
    table_filter: TableFilter
    type_options: TypeOptions
    stream: StreamOptions
    incremental: IncrementalOptions
    snapshot: Callable[[], SnapshotOptions]
    snapshot_reads: SnapshotReads = SnapshotReads()
    follow_seconds: float = 0.0
    follow_idle_seconds: float = 5.0


@dataclass(frozen=True)
class StreamRunRequest:
    """What the binlog sensor asked a stream run to do (its run tags, decoded).

    Attributes:
        start, end: the window ``[start, end)``; ``start`` is the committed offset.
        identity: the server the window's positions belong to (``None``: not recorded).
        incremental: the incremental snapshot in progress (``None``: none).
        stopped: the stopped tables, ``"db.table"`` -> ``{"since": position dict, "error",
            "catch_up": due now, "retry_at": epoch seconds}`` (:class:`.isolation.StoppedTable`
            as the sensor tags it).
        selected: the ``(database, table)`` of the table assets the run selected: a follow-on
            window that changes another table ends the run.
        standby: a standby run (the sensor requests one when the capture is caught up, see
            :mod:`.follow`): its requested window is empty and it waits for the next change up
            to ``follow_seconds``, however long the binlog stays idle, then follows as any run,
            reading every window whose changes stay inside ``selected`` (every captured table);
            its progress is recorded from the first follow-on window on.
    """

    start: BinlogPosition
    end: BinlogPosition
    identity: ServerIdentity | None = None
    incremental: IncrementalState | None = None
    stopped: dict[str, dict] = field(default_factory=dict)
    selected: frozenset[tuple[str, str]] = frozenset()
    standby: bool = False


@dataclass(frozen=True)
class TableCommitted:
    """One table's commit of a window is durable (the argument of ``StreamRun``'s ``on_table``),
    while the window's other tables may still be committing.

    Attributes:
        result: the window's :class:`.window_result.WindowResult` so far (its read is done:
            chunks and incremental snapshot state are final; ``tables`` is filled only after
            every table committed).
        start, end: the window's bounds as ``on_window`` gets them (``end`` carries the planned
            end's GTID set when the window reached it).
        table: ``(database, table)``; written: what its commit wrote.
        read_started_at: when the run began reading the window (epoch seconds).
    """

    result: WindowResult
    start: BinlogPosition
    end: BinlogPosition
    table: tuple[str, str]
    written: TableWriteResult
    read_started_at: float


@dataclass
class StreamRunOutcome:
    """What a stream run read, committed and reached (:meth:`StreamRun.run`).

    Attributes:
        result: the requested window and its follow-on windows, merged
            (:func:`.stream.merge_window_results`); ``signal_log`` ends with the blocking
            snapshot's lines.
        start: the requested window's start.
        reached: the offset the run reached, for the sensor to commit (:func:`.window_result.reached_offset`).
        follow_windows: follow-on windows read after the requested one.
        stopped: the tables stopped after the run, ``"db.table"`` -> ``{"since", "error",
            "attempted"}`` (``attempted``: a catch-up was tried and failed).
        snapshots: the tables of a blocking snapshot, in commit order.
    """

    result: WindowResult
    start: BinlogPosition
    reached: BinlogPosition
    follow_windows: int = 0
    stopped: dict[str, dict] = field(default_factory=dict)
    snapshots: list[SnapshotTableResult] = field(default_factory=list)

    @property
    def gaps(self) -> list[dict]:
        """The changes the binlog did not carry in the run's windows (``BinlogGap.to_dict``)."""
        return [g.to_dict() for g in self.result.gaps]

    @property
    def live_rows(self) -> dict[str, int]:
        """State URI -> the lake's live rows of each table the run committed, counted by its
        commit (tables the commit did not count are absent)."""
        return {
            w.paths.state: w.extra["live_rows"]
            for w in self.result.tables.values()
            if w.extra.get("live_rows") is not None
        }

    @property
    def tail_files(self) -> dict[str, list[str]]:
        """State URI -> the tail files each table's commit wrote (relative paths)."""
        return {
            w.paths.state: w.extra["tail_files"]
            for w in self.result.tables.values()
            if w.extra.get("tail_files")
        }


class StreamRun:
    """The coordinator of one stream run's windows (see the module docs).

    Args:
        settings, info: the source's connection settings and server facts.
        writer: the run's lake writer (Spark starts only when data is written).
        history: the schema history windows are decoded with and append to.
        options: the capture's settings.
        log: the run's log (Dagster's ``context.log`` in a run).
        planner: how a following run finds its next window; ``None``: no new follow-on windows
            (windows an earlier attempt saved are still read).
        on_caught_up: called with the ``db.table`` names of the stopped tables the run caught up
            at its start (before its windows), e.g. so ``status`` shows them while it follows.
        on_progress: called with the run's :class:`RunProgress` each time it committed a
            follow-on window that needs nothing more of the run (no blocking snapshot, gap or
            skipped event in any window so far; an incremental snapshot's state is part of the
            progress) and before it reads the next one; an
            error it raises fails the run (so a window is never read after a progress that
            could not be recorded).
        on_window: called as ``on_window(result, start, end)`` once each window of the run (the
            requested one, then each follow-on window) is committed, with that window's own
            :class:`.window_result.WindowResult` and bounds, before the next window is planned:
            the Dagster side reports the window's materializations there, seconds after the
            COMMIT instead of at the run's end. An error it raises fails the run.
        on_table: called with a :class:`TableCommitted` as soon as one table's commit of a
            window (the requested or a follow-on one; not a stopped table's catch-up) is
            durable, in the run's thread while the other tables commit: the Dagster side logs
            that table's materialization there, before the window's last table is committed;
            ``on_window`` then reports only what was not reported so. An error it raises fails
            the window once its commits are done (a retry skips what committed).
        on_idle: called as ``on_idle(idle_seconds, interim)`` in the run's thread at each poll
            of a following run that has written changes and finds the binlog idle (issue 42):
            ``interim()`` is the :class:`StreamRunOutcome` of the run so far (what the run
            would report if it ended now). The Dagster side evaluates and logs the checks of
            what is committed there, in slices, instead of after the run stops following.
            Each call does at most a fraction of a second of work; while it returns
            ``True`` (work left) the run polls again without sleeping and keeps following past
            ``follow_idle_seconds`` (up to ``follow_seconds``), so a change committed meanwhile
            is read at once instead of waiting for the next run. An error it raises fails
            the run (every window so far is committed).
    """

    def __init__(
        self,
        settings: ConnectionSettings,
        info: ServerInfo,
        *,
        writer: LakeWriter,
        history: SchemaHistory,
        options: StreamRunOptions,
        log: RunLog,
        planner: FollowPlanner | None = None,
        on_progress: Callable[[RunProgress], None] | None = None,
        on_window: Callable[[WindowResult, BinlogPosition, BinlogPosition], None] | None = None,
        on_table: Callable[[TableCommitted], None] | None = None,
        on_idle: Callable[[float, Callable[[], StreamRunOutcome]], bool] | None = None,
        on_caught_up: Callable[[list[str]], None] | None = None,
    ) -> None:
        self.on_caught_up = on_caught_up
        self.on_table = on_table
        self.on_idle = on_idle
        self.settings = settings
        self.info = info
        self.writer = writer
        self.history = history
        self.options = options
        self.log = log
        self.planner = planner
        self.on_progress = on_progress
        self.on_window = on_window
        self.retries_due: dict[str, float] = {}  # stopped tables not caught up by this run: retry at
        self.retries_failed: list[str] = []  # stopped tables whose catch-up failed again at the start

    def run(self, request: StreamRunRequest) -> StreamRunOutcome:
        """Read the requested window and what follows it (steps 1-7 of the module docs).

        Raises:
            ServerChangedError: the window's positions belong to another server.
            ConfigurationError: a setting does not allow reading the window (preflight).
            BinlogGapError: ``binlog_gap_handling="fail"`` met a change the binlog does not carry.
            SinkError, pymysql errors, ...: the window failed as a whole (the lake is down, the
                source unreachable); the sensor retries it and the retry skips what committed
                (each commit carries the window's transaction identity).
        """
        start, end = request.start, request.end
        if request.identity is not None:
            check_window_server(self.settings, self.info, request.identity, start)
        self.log.info(f"Binlog window {start} -> {end}")
        stopped, again, resume, caught = self.catch_up_stopped(request.stopped, start)
        if self.on_caught_up is not None and (back := [n for n in request.stopped if n not in stopped]):
            self.on_caught_up(sorted(back))
        self.retries_failed = sorted(n for n, t in stopped.items() if t.get("attempted"))
        self.retries_due = {  # (their retry coming due ends a standby run's wait, _idle_limit)
            n: float(t["retry_at"])
            for n, t in request.stopped.items()
            if not t.get("catch_up") and t.get("retry_at")
        }
        table_filter = self.options.table_filter.without([table_key(n) for n in stopped])
        result = self.read_window(start, end, request.incremental, table_filter, resume_at=resume)
        result = with_catch_ups(caught, result)
        result.blocking_tables = list(dict.fromkeys([*result.blocking_tables, *again]))
        follow_windows = 0
        if (result.end.file, result.end.pos) == (end.file, end.pos):
            result.end = end  # the requested end carries the server's GTID set
        if self.on_window is not None and result.tables:
            self.on_window(result, start, result.end)
        if reached_planned_end(result, end):
            if not result.blocking_tables:

                def progress(res: WindowResult, windows: int, nxt: FollowWindow | None = None) -> None:
                    # from the first follow-on window on (a run that dies before is retried
                    # whole); a standby run's requested window is empty: from its first one
                    first = 0 if request.standby else 1
                    if self.on_progress is None or windows < first or res.gaps or res.events_skipped_count:
                        return
                    reached = reached_offset(start, end, res)
                    self.on_progress(
                        RunProgress(
                            reached,
                            windows,
                            _stopped_now(stopped, res),
                            nxt,
                            rows=res.rows,
                            incremental=res.incremental_state,
                        )
                    )

                result, follow_windows = self.follow(
                    result,
                    set(request.selected),
                    table_filter,
                    resume_at=resume,
                    progress=progress,
                    standby=request.standby,
                    interim=partial(run_outcome, start, end, stopped),
                )
        self.log_window(result)
        outcome = run_outcome(start, end, stopped, result, follow_windows)
        if result.blocking_tables:
            outcome.snapshots = self.blocking_snapshot(result)
            for r in outcome.snapshots:  # its state was replaced: the window's count and tail
                w = result.tables.get((r.schema.database, r.schema.table))  # files are stale
                if w is not None:
                    w.extra.pop("live_rows", None)
                    w.extra.pop("tail_files", None)
        return outcome

    def read_window(
        self,
        start: BinlogPosition,
        end: BinlogPosition,
        incremental: IncrementalState | None,
        table_filter: TableFilter | None = None,
        resume_at: dict[tuple[str, str], BinlogPosition] | None = None,
        *,
        catch_up: bool = False,
    ) -> WindowResult:
        """One binlog window ``[start, end)`` into the lake (:func:`.window_run.run_window`); the
        requested window, every follow-on window and every catch-up window of a run go through it.

        Args:
            incremental: the incremental snapshot in progress (reads its next chunks).
            table_filter: the capture's, without stopped tables (default: the capture's).
            resume_at: tables whose events before a position are skipped (snapshotted again
                there after ``start``).
            catch_up: a stopped table's catch-up window (``table_filter`` restricted to it): it
                re-reads positions whose schema history an earlier window committed, and
                executes no signals.
        """
        opts = self.options
        on_table = None
        if self.on_table is not None and not catch_up:
            callback, started = self.on_table, time.time()

            def on_table(result: WindowResult, db: str, t: str, written: TableWriteResult) -> None:
                exact = (result.end.file, result.end.pos) == (end.file, end.pos)
                callback(
                    TableCommitted(result, start, end if exact else result.end, (db, t), written, started)
                )

        r = run_window(
            self.settings,
            self.info,
            replica_server_id=opts.server_id,
            start=start,
            end=end,
            writer=self.writer,
            history=self.history,
            table_filter=table_filter or opts.table_filter,
            type_options=opts.type_options,
            options=opts.stream,
            server_name=opts.server_name,
            incremental=incremental,
            incremental_options=IncrementalOptions() if catch_up else opts.incremental,
            catch_up=catch_up,
            resume_at=resume_at,
            on_table=on_table,
        )
        if not catch_up:  # (a catch-up's failure is the catch-up's: the table stays stopped)
            self.warn_stopped(r)
        return r

    def warn_stopped(self, r: WindowResult) -> None:
        """A WARNING per table window ``r`` could not write, as soon as the window is committed
        (a following run goes on for minutes after it; its other tables go on): where it
        stopped, why, and the way back (:mod:`.isolation`)."""
        for name, failed in r.failed_tables.items():
            self.log.warning(
                f"{name} stopped: its changes from {BinlogPosition.from_dict(failed['since'])} on could not "
                f"be written ({failed['error']}). The other tables go on. It is caught up from that "
                "position automatically (retries back off from 1 minute to 1 hour), or at once after "
                "the cause is fixed and the table is materialized (docs/operations.md, 'A table stopped')."
            )

    def catch_up_stopped(
        self, tagged: dict[str, dict], start: BinlogPosition
    ) -> tuple[
        dict[str, dict], list[tuple[str, str]], dict[tuple[str, str], BinlogPosition], list[WindowResult]
    ]:
        """Catch up the stopped tables the sensor marked due (``"catch_up"``, see
        :mod:`.isolation`): each one's binlog from its stop position to ``start``, read for that
        table only.

        Returns:
            the tables still stopped (``{"since", "error", "attempted"}``), the tables to snapshot
            again (their stop position was purged, or the catch-up met changes the binlog does
            not carry), the tables whose stop position lies after ``start`` (snapshotted again
            since: the window skips their events before it), and the catch-up windows of the
            tables caught up (:func:`with_catch_ups` adds what they wrote to the run's result,
            so each such table is materialized by the run, and the events they left out are
            reported with the window's).
        """
        opts = self.options
        still: dict[str, dict] = {}
        again: list[tuple[str, str]] = []
        resume: dict[tuple[str, str], BinlogPosition] = {}
        caught: list[WindowResult] = []
        for name, s in tagged.items():
            since = BinlogPosition.from_dict(s["since"])
            if not s.get("catch_up"):
                still[name] = {"since": s["since"], "error": s.get("error") or "", "attempted": False}
                continue
            key = table_key(name)
            conn = connect(self.settings)
            try:
                files = binlog_files(conn)
            finally:
                conn.close()
            if since.file not in [f for f, _ in files]:
                self.log.warning(
                    f"{name}: its stop position {since} is no longer on the server (purged); it is "
                    "snapshotted again instead of caught up"
                )
                again.append(key)
                continue
            base = opts.table_filter.restricted_to([key])
            done: list[WindowResult] = []  # this table's catch-up windows

            def read(a: BinlogPosition, b: BinlogPosition, base=base, key=key, done=done) -> None:
                r = self.read_window(a, b, None, base, catch_up=True)
                if r.failed_tables:
                    raise SinkError(next(iter(r.failed_tables.values()))["error"])
                again.extend(r.blocking_tables)
                if r.gaps:  # repairs are incremental snapshots of the main window: re-read it whole
                    again.append(key)
                done.append(r)

            try:
                n = catch_up(read, since, start, files)
            except Exception as e:  # the table stays stopped, with the new error
                still[name] = {
                    "since": s["since"],
                    "error": describe(e, 2000),
                    "attempted": True,
                }
                self.log.warning(f"{name} is still stopped: catching up from {since} failed: {e}")
                continue
            caught.extend(done)
            if since.sort_key() > start.sort_key():  # snapshotted after the window's start
                resume[key] = since
                self.log.info(
                    f"{name} is captured again from {since} (its snapshot's position; its events "
                    f"between {start} and there are in that snapshot)"
                )
                continue
            self.log.info(f"{name} caught up from {since} to {start} ({n} window(s)); it is captured again")
        return still, list(dict.fromkeys(again)), resume, caught

    def follow(
        self,
        result: WindowResult,
        selected: set[tuple[str, str]],
        table_filter: TableFilter | None = None,
        resume_at: dict[tuple[str, str], BinlogPosition] | None = None,
        progress: Callable[..., None] | None = None,
        standby: bool = False,
        interim: Callable[[WindowResult, int], StreamRunOutcome] | None = None,
    ) -> tuple[WindowResult, int]:
        """Follow-on windows after the requested one (see :mod:`.follow`).

        Saved windows (an earlier attempt's) are always read; new ones only within
        ``options.follow_seconds``, until the binlog was idle for ``follow_idle_seconds``
        (:meth:`_idle_limit`; the idle work, ``on_idle``, starts once no captured table changes,
        whatever other databases' windows), and only while they change tables this run selected
        (``selected``, ``(db, table)``): a window that changes another table, or carries DDL,
        statement DML or a signal (the planner's ``changed_tables`` cannot judge it), ends the
        run, so the sensor requests it with the selection it needs; so does a stopped table's
        retry coming due (:meth:`_retry_ends`). Each new window is saved (create-if-absent)
        before it is read, so a retry reads the same windows. Planning the next window fails:
        following ends there (the sensor requests the next window). A table that could not be
        written in a window (it stops) ends following there too (:meth:`_stop_ends`).

        An incremental snapshot goes on window after window, on an idle binlog too (:meth:`_chunks_left`).

        ``progress(result, windows, next)``: called before a follow-on window is read (``next``:
        it) and after it was committed. ``standby``: :meth:`_standby_budget`; ``interim``: on_idle.

        Returns:
            ``(merged result, number of follow-on windows read)``.
        """
        if self._stop_ends(result):  # a table stopped in the requested window
            return result, 0
        opts, storage = self.options, self.writer.storage
        deadline = time.monotonic() + max(0.0, float(opts.follow_seconds))
        if standby and self.planner is not None:
            self.warm_up()
            self.load_handles(selected, result.end.txn_app(STREAM_APP_ID))
        idle_since: float | None = None  # the binlog had nothing new since (ends following)
        calm_since: float | None = None  # no captured table changed since (starts the idle work)
        windows, first_change, busy, quiet = 0, False, False, QuietWindows(self.log)
        while True:
            after, tag = result.end, state_tag(result.incremental_state)
            w = load_follow_window(storage, opts.server_name, after, tag)
            if w is None:
                if time.monotonic() >= deadline or (nxt := self._planned_after(after)) is None:
                    break
                chunking = self._chunks_left(result, selected)
                if chunking is False:
                    break  # (logged): the sensor requests the next window with the selection it needs
                if (nxt.start is None or nxt.end is None) and chunking and not nxt.requested:
                    # an incremental snapshot has chunks left on an idle binlog: an empty window
                    # that only reads chunks, as the sensor plans one on an idle source
                    # (.cursor's caught-up plan); its chunk plan extends it past the watermarks
                    idle_since = calm_since = None
                    w = save_follow_window(storage, opts.server_name, FollowWindow(after, after, after), tag)
                elif nxt.start is None or nxt.end is None:
                    now = time.monotonic()
                    idle_since = idle_since if idle_since is not None else now
                    calm_since = calm_since if calm_since is not None else now
                    busy = self._idle_work(now - calm_since, result, windows, interim)
                    ends = now - idle_since >= self._idle_limit(idle_since, deadline, result, standby)
                    if (ends and not busy) or nxt.requested:
                        break
                    poll = 0.0 if busy else STANDBY_POLL_SECONDS if standby else 0.5  # (on_idle paces)
                    time.sleep(min(poll, max(0.0, deadline - time.monotonic())))
                    continue
                else:
                    idle_since = None
                    if (changed := self._changed_within(nxt.start, nxt.end, selected)) is None:
                        break  # (logged)
                    if standby and changed and not first_change:  # (not: another database's traffic)
                        deadline, first_change = self._standby_budget(deadline), True
                    w = save_follow_window(storage, opts.server_name, FollowWindow(after, nxt.start, nxt.end))
            if progress is not None:
                progress(result, windows, w)
            r, exact = self._read_follow_window(w, result, table_filter, resume_at)
            windows += 1
            quiet.window(w.start, r, 0.0 if busy else deadline - time.monotonic())  # (checks pace)
            result = merge_window_results(result, r)
            # its saved window would come again (a chunk-only window moves the snapshot state instead)
            stuck = (r.end.file, r.end.pos) == (after.file, after.pos) and state_tag(
                result.incremental_state
            ) == tag
            if not exact or r.blocking_tables or self._stop_ends(result) or stuck:
                break
            if progress is not None:
                progress(result, windows)
            calm_since = None if r.rows or r.tables else (calm_since or time.monotonic())
            if calm_since is not None:  # only other databases' traffic: its checks may start
                busy = self._idle_work(time.monotonic() - calm_since, result, windows, interim)
                if not busy and self._retry_ends(result, standby):
                    break
        quiet.flush()
        return result, windows

    def _planned_after(self, after: BinlogPosition) -> NextWindow | None:
        """The planner's next window after ``after``; ``None`` (logged as a WARNING: following
        ends, the run keeps what it committed and the sensor requests the next window) when there
        is no planner or planning fails (the server restarting)."""
        if self.planner is None:
            return None
        try:
            return self.planner.next_window(after)
        except Exception as e:  # noqa: BLE001 - following is optional: end it, keep what committed
            self.log.warning(
                f"Following ends at {after}: planning the next window failed "
                f"({type(e).__name__}: {e}); the sensor requests it"
            )
            return None

    def _changed_within(
        self, start: BinlogPosition, end: BinlogPosition, selected: set[tuple[str, str]]
    ) -> set[tuple[str, str]] | None:
        """The tables window ``[start, end)`` changes (the planner's look-ahead), or ``None``
        (logged: following ends before it) when it leaves the run's ``selected`` tables or cannot
        be judged (DDL, statement DML, a signal, too large)."""
        assert self.planner is not None
        changed, why = self.planner.changed_tables(start, end)
        if changed is None or not changed <= selected:
            self.log.info(
                f"Following ends before {start}: the next window leaves this run's selection ({why})"
            )
            return None
        return changed

    def _read_follow_window(
        self,
        w: FollowWindow,
        result: WindowResult,
        table_filter: TableFilter | None,
        resume_at: dict[tuple[str, str], BinlogPosition] | None,
    ) -> tuple[WindowResult, bool]:
        """Read follow-on window ``w`` after ``result`` (:meth:`read_window`), with the
        incremental snapshot state ``result`` ended with and without the tables an earlier window
        could not write (their stop position is that window's start), and report it
        (``on_window``). Returns its result (``end`` with ``w``'s GTID set when it ended there)
        and whether it was read to its planned end (:func:`reached_planned_end`)."""
        base = table_filter or self.options.table_filter
        window_filter = base.without([table_key(n) for n in result.failed_tables])
        inc = IncrementalState.from_dict(result.incremental_state)
        r = self.read_window(w.start, w.end, inc, window_filter, resume_at=resume_at)
        exact = reached_planned_end(r, w.end)
        if (r.end.file, r.end.pos) == (w.end.file, w.end.pos):
            r.end = w.end
        if self.on_window is not None and r.tables:
            self.on_window(r, w.start, r.end)
        return r, exact

    def _chunks_left(self, result: WindowResult, selected: set[tuple[str, str]]) -> bool | None:
        """Whether the incremental snapshot after ``result`` has chunks left that this run may
        read. A following run reads them window after window until its budget ends (Debezium
        reads chunk after chunk while it streams), not one window's ``max_chunks_per_run`` per
        sensor tick: each window's chunk plan may extend its end past the watermarks, and an
        idle binlog gets an empty window that only reads chunks. Returns
        ``None`` when no snapshot is active or it is paused; ``False`` (logged: following ends,
        the sensor requests the next window with the selection it needs) when one of its tables
        is not among the run's ``selected`` tables (its chunks could not be reported: a table
        queued by a signal is selected by the sensor's next request)."""
        state = IncrementalState.from_dict(result.incremental_state)
        if state is None or not state.active or state.paused:
            return None
        outside = [p.table for p in state.tables if tuple(p.table.split(".", 1)) not in selected]
        if outside:
            self.log.info(
                f"Following ends at {result.end}: the incremental snapshot's table(s) "
                f"{', '.join(outside)} are not selected by this run; the sensor requests the next window"
            )
            return False
        return True

    def _idle_limit(self, idle_since: float, deadline: float, result: WindowResult, standby: bool) -> float:
        """How long a following run waits on an idle binlog (seconds from ``idle_since``): a run
        that has written nothing does not wait for changes (a quiet source does not keep runs
        alive) unless it is a standby run, which waits for its first change until ``deadline``
        or until the retry of a table stopped before the run comes due (:attr:`retries_due`: the
        sensor's next run catches it up at its start, so a fix of its cause, e.g. an option
        changed and the code location reloaded, takes effect within the retry backoff and a tick
        instead of after the standby run's whole budget); one that has written changes (or
        stopped a table, :func:`has_work`) waits ``options.follow_idle_seconds`` (and longer
        while its idle work, ``on_idle``, is not done)."""
        if standby and not has_work(result):
            return 0.0 if self._retry_ends(result, standby) else max(0.0, deadline - idle_since)
        return self.options.follow_idle_seconds if has_work(result) else 0.0

    def _stop_ends(self, result: WindowResult) -> bool:
        """Whether following ends after ``result`` because a table stopped in this run, or its
        catch-up at the run's start failed again (:attr:`retries_failed`) (logged; its caller
        ends it): the sensor then records the stop or the failed attempt at once (its cursor,
        ``status``, the health observation) and retries the table after its backoff, at the
        start of a run, so a fix applies then. A following run on a busy server (other
        databases' traffic) used to keep reading for its whole budget first. Never before a
        window an earlier attempt saved (see :meth:`_retry_ends`)."""
        names = sorted({*result.failed_tables, *self.retries_failed})
        if not names or self._saved_after(result):
            return False
        self.log.info(
            f"Following ends at {result.end}: {', '.join(names)} stopped; the sensor records the "
            "stop and retries the table(s) after the backoff"
        )
        return True

    def _retry_ends(self, result: WindowResult, standby: bool) -> bool:
        """Whether the retry of a table stopped before the run (:attr:`retries_due`) is due, so
        the run ends here (logged; its caller ends it): the sensor's next run catches the table
        up at its start, with the code location and options of then. Asked when the binlog is
        idle (:meth:`_idle_limit`) and after each window that changed no captured table: on a
        busy server (other databases' traffic) the binlog is never idle, and a standby run used
        to wait out its whole budget before a fix applied. Never before a window an earlier
        attempt saved after ``result.end``: that attempt may have committed part of it, and a
        run planned from there would skip those tables' commits of other bounds (each commit's
        identity is its window's start), so the saved window is read first."""
        due = sorted(n for n, at in self.retries_due.items() if time.time() >= at)
        if due and self._saved_after(result):
            return False
        if due:
            run = "Standby" if standby and not has_work(result) else "Following"
            self.log.info(
                f"{run} ends: the retry of stopped table(s) {', '.join(due)} is due; the "
                "sensor's next run catches them up"
            )
        return bool(due)

    def _saved_after(self, result: WindowResult) -> bool:
        """Whether an earlier attempt saved a follow-on window from ``result.end`` (the run must
        read it before it may end: see :meth:`_retry_ends`)."""
        storage, tag = self.writer.storage, state_tag(result.incremental_state)
        return load_follow_window(storage, self.options.server_name, result.end, tag) is not None

    def _idle_work(
        self,
        idle_seconds: float,
        result: WindowResult,
        windows: int,
        interim: Callable[[WindowResult, int], StreamRunOutcome] | None,
    ) -> bool:
        """``on_idle`` at one idle poll of a run that wrote changes or stopped a table
        (:func:`has_work`): whether it has work left."""
        if self.on_idle is None or interim is None or not has_work(result):
            return False
        return bool(self.on_idle(idle_seconds, partial(interim, result, windows)))

    def _standby_budget(self, deadline: float) -> float:
        """The following deadline of a standby run at its first change (``time.monotonic()``).

        Until it has written a change a standby run waits for one as long as
        ``options.follow_seconds`` allow, however long the binlog is idle, polling the server's
        position every :data:`STANDBY_POLL_SECONDS`; from its first change it follows as a run
        started then would: for ``options.follow_seconds`` more (its wait did not use up the
        budget), ending once the binlog was idle for ``options.follow_idle_seconds`` (so its
        checks run and the sensor commits it). Only a window that changes a captured table is
        its first change: windows of other databases' traffic on the server are read (its
        position advances) but do not extend the budget, else a standby run on a busy server
        would never end and the sensor would never commit where it reached."""
        return max(deadline, time.monotonic() + max(0.0, float(self.options.follow_seconds)))

    def warm_up(self) -> None:
        """A standby run's Spark session, data source and first job, before the first change
        (:meth:`..sink.lake.LakeWriter.warm_up`); a failure is logged, the first write retries."""
        try:
            import pymysqlreplication  # noqa: F401 - the binlog reader's imports, before the first change

            seconds = self.writer.warm_up()
        except Exception as e:  # noqa: BLE001 - warming is an optimisation: the first write starts Spark
            self.log.warning(f"Warming Spark up failed ({type(e).__name__}: {e}); the first write starts it")
            return
        self.log.info(f"Standby: Spark warm in {seconds:.1f}s, waiting for the next change")

    def load_handles(self, tables: set[tuple[str, str]], app_id: str) -> None:
        """A standby run's Delta handles of ``tables``' change logs, states and tails, loaded
        side by side before the first change (:func:`..sink.delta.preload`) into the run's handle
        cache (the :func:`..sink.delta.handle_cache` block a Dagster run holds for its whole
        length, ``MySqlCdcResource.sync``): the first window then brings each one up to date (a
        stat of its next commit file on a local disk) instead of loading three per table, about
        11 ms of CPU each; and what each table's first commit reads of them (its recorded
        live-row count, its state's and tail's sizes: :meth:`..sink.lake.LakeWriter.warm_table_facts`).
        Nothing is loaded outside such a block (nothing would keep them). A
        table that cannot be read is left to its window (which stops it alone, as it would
        have); a failure here is logged, never raised. ``app_id``: the windows' batch application
        (each table's batch version of it is read here too, as a window's own preload does)."""
        if not in_handle_cache():
            return
        try:
            uris = [
                uri for db, table in sorted(tables) for uri in self.writer.paths(db, table).delta_tables()
            ]
            t0 = time.monotonic()
            workers = max(1, self.options.stream.commit_workers)
            with handle_cache():  # (nested: the handles stay in the run's block)
                preload(self.writer.storage, uris, workers, app_id=app_id)
                count = cached_handle_count()
                warmed = self.writer.warm_table_facts(sorted(tables), workers)
            self.log.info(
                f"Standby: {count} Delta handles of {len(tables)} table(s) loaded, the commit facts of "
                f"{warmed} read, in {time.monotonic() - t0:.1f}s"
            )
        except Exception as e:  # noqa: BLE001 - an optimisation: each window loads what it needs
            self.log.warning(
                f"Loading the tables' Delta handles failed ({type(e).__name__}: {e}); windows load them"
            )

    def log_window(self, result: WindowResult) -> None:
        """Log the run's signals (rejected ones as WARNING), gaps (WARNING), DDL of ruled-out
        databases passed over (WARNING) and skipped events
        (``event.processing.failure.handling.mode``: ``warn`` each of the first 20, and one
        summary)."""
        for line in result.signal_log:
            (self.log.warning if line in result.signals_rejected else self.log.info)(line)
        for gap in result.gaps:
            self.log.warning(gap.message())
        for line in result.ddl_passed_over:
            self.log.warning(line)
        if result.events_skipped_count:
            mode = self.options.stream.event_processing_failure_handling_mode
            if mode == "warn":
                for ev in result.events_skipped[:20]:
                    self.log.warning(f"Skipped an event of {ev['table']} at {ev['position']}: {ev['reason']}")
            self.log.warning(
                f"{result.events_skipped_count} event(s) that cannot be decoded were skipped "
                f"(event_processing_failure_handling_mode={mode}); the binlog asset's events_skipped "
                "metadata lists them. Re-snapshot the affected tables to repair the lake."
            )

    def blocking_snapshot(self, result: WindowResult) -> list[SnapshotTableResult]:
        """Blocking snapshot of ``result.blocking_tables`` (Debezium's blocking snapshot):
        streaming is paused at ``result.end``; the tables are snapshotted in its offset epoch,
        then streaming resumes there. Each table's line is appended to ``result.signal_log``.

        Returns:
            the snapshotted tables' results, in commit order.
        """
        opts = self.options
        self.log.info(f"Blocking snapshot of {[f'{d}.{t}' for d, t in result.blocking_tables]}")
        out: list[SnapshotTableResult] = []
        for r in snapshot_tables(
            self.settings,
            result.blocking_tables,
            self.writer,
            reads=opts.snapshot_reads,
            options=opts.snapshot(),
            type_options=opts.type_options,
            server_name=opts.server_name,
            history=self.history,
            epoch=result.end.epoch,
        ):
            result.signal_log.append(
                f"blocking snapshot of {r.schema.qualified_name}: {r.write.rows} rows at {r.position}"
            )
            out.append(r)
        return out


def check_window_server(
    settings: ConnectionSettings, info: ServerInfo, recorded: ServerIdentity, start: BinlogPosition
) -> None:
    """Run-side guard: the window's positions belong to the server ``recorded`` (the sensor's
    identity run tag); refuse to read another server's binlog at those offsets.

    Raises:
        ServerChangedError: ``settings`` now point at another server (the sensor re-plans the
            window by GTID on its next tick).
    """
    conn = connect(settings)
    try:
        reason = other_server_reason(conn, info, recorded)
    finally:
        conn.close()
    if reason:
        raise ServerChangedError(
            f"This run's binlog window starts at {start}, a position of {recorded.describe()}, but "
            f"{settings.host}:{settings.port} is another server ({reason}). Reading it there would lose "
            "or duplicate changes, so nothing was read. The binlog sensor re-plans the window by GTID "
            "on its next tick (see docs/operations.md, 'Failover')."
        )


def run_outcome(
    start: BinlogPosition, end: BinlogPosition, stopped: dict[str, dict], result: WindowResult, windows: int
) -> StreamRunOutcome:
    """The outcome of a stream run of window ``[start, end)`` whose windows merged into
    ``result`` (``windows``: follow-on windows), ``stopped`` the tables stopped before its
    windows (those ``result`` could not write are added): the run's end, or the interim one
    ``on_idle`` gets."""
    return StreamRunOutcome(
        result=result,
        start=start,
        reached=reached_offset(start, end, result),
        follow_windows=windows,
        stopped=_stopped_now(stopped, result),
    )


def _stopped_now(stopped: dict[str, dict], result: WindowResult) -> dict[str, dict]:
    """The tables stopped after ``result``'s windows: ``stopped`` (still stopped after the
    catch-up) and the tables its windows could not write (``attempted``: it was stopped before)."""
    out = dict(stopped)
    for name, failed in result.failed_tables.items():
        out[name] = {**failed, "attempted": name in stopped}
    return out
