"""Step 1 of a binlog sensor tick (:mod:`.sensor`): settling the run in flight, and the retry
policy of a window run that did not succeed.

A run that succeeded has its window end (or snapshot position) committed to the cursor; a failed
or killed following stream run first has the windows it recorded as committed committed; a
failure after a server change (failover) is re-planned by GTID; any other failure retries the
window as the next attempt, at once when the run was killed (canceled, or its worker died:
:func:`.capture_runs.run_died`), else after an exponential backoff (:func:`.cursor.retry_delay`).
A run still going is waited for (``run_wait_seconds``) or the tick says so.

The stopped tables a window run reports (:mod:`..engine.isolation`) are carried into the cursor
here too, and a stopped table snapshotted again since it stopped is caught up from that snapshot
(:func:`snapshotted_again`).
"""

from __future__ import annotations

import time
from dataclasses import replace

import dagster as dg

from ..engine.isolation import StoppedTable, stopped_after_run
from ..errors import SourceConnectionError
from ..events import BinlogPosition
from ..source.connection import connect, current_position, server_info
from ..source.failover import other_server_reason
from .capture_runs import (
    binlog_materializations,
    is_capture_run,
    reported_end,
    reported_json,
    run_died,
    run_progress,
    wait_for_run,
    window_run_starting_at,
)
from .cursor import (
    InFlight,
    Plan,
    StreamCursor,
    empty_window_key,
    is_standby_key,
    retry_delay,
    standby_window_key,
    window_key,
)
from .health import first_line, run_failure_reason
from .liveness import dead_worker_reason, mark_dead
from .protocol import REQUEST_TAG, TABLE_METADATA_KEY, key_capture
from .resources import MySqlCdcResource
from .run_requests import SensorTick, TickOutcome, refuse_snapshot
from .run_tags import ReportedProgress, progress_tag
from .translator import table_of_spec

_FAILED = {dg.DagsterRunStatus.FAILURE, dg.DagsterRunStatus.CANCELED}


def settle_inflight(
    cursor: StreamCursor,
    mysql: MySqlCdcResource,
    instance,
    tick: SensorTick,
    notes: list[str],
    run_wait_seconds: float,
) -> tuple[StreamCursor, BinlogPosition | None, TickOutcome | None]:
    """Step 1 of a tick: the run of ``cursor.inflight``. Success commits its window end (or
    snapshot position); a failed or killed stream run first has the windows it recorded as
    committed committed (:func:`_carry_progress`); a failure after a server change re-plans (the
    failed window's end is the returned bound); another failure retries the window as the next
    attempt, at once when the run died (:func:`.capture_runs.run_died`), else after the backoff
    (:func:`_retry_window`); otherwise the tick waits.

    Returns:
        (cursor, bound for :func:`.cursor.reconcile_cursor`, the tick's outcome if it ends here).
    """
    inf = cursor.inflight
    assert inf is not None
    run = _inflight_run(instance, inf, tick)
    if run is None:
        # Requested but not created yet (or the request was lost): same key, launched at most once.
        plan = Plan(cursor, skip_reason=f"waiting for run {inf.run_key} to be created")
        return cursor, None, (plan, [tick.request(inf, cursor)])
    # a run whose worker is gone is judged before, while and after the tick waits for it: it would
    # never finish, and the tick would hold its window run_wait_seconds for nothing
    run = _dead_marked_failed(instance, run, notes)
    if (
        run_wait_seconds > 0
        and not run.is_finished
        and not _standby_waiting(instance, inf, run, mysql, run_wait_seconds)
    ):
        run = wait_for_run(
            instance, run, run_wait_seconds, check=lambda r: _dead_marked_failed(instance, r, notes)
        )
        run = _dead_marked_failed(instance, run, notes)
    if run.status == dg.DagsterRunStatus.SUCCESS:
        cursor, done = _commit_run(cursor, inf, run, instance, tick, notes)
        return cursor, None, done
    if run.status not in _FAILED:
        if is_standby_key(inf.run_key) and inf.start is not None:
            return cursor, None, (Plan(cursor, skip_reason=standby_reason(mysql, inf, run)), [])
        plan = Plan(cursor, skip_reason=f"run {run.run_id[:8]} for {inf.run_key} is {run.status.value}")
        return cursor, None, (plan, [])
    return _settle_failed(cursor, inf, run, mysql, instance, tick, notes)


def _standby_waiting(
    instance, inf: InFlight, run: dg.DagsterRun, mysql: MySqlCdcResource, wait: float
) -> bool:
    """Whether ``run`` is a standby run still waiting for its first change that will not reach
    its budget (``stream_follow_seconds`` from its start) within ``wait`` seconds: a tick does
    not wait for it (it would hold the daemon's sensor loop ``run_wait_seconds`` on every tick
    of an idle capture); otherwise, as for any run, the tick waits, so the next run is
    requested the moment it ends. Windows of other databases' traffic (progress without rows)
    do not count as its first change."""
    if not is_standby_key(inf.run_key):
        return False
    progress = progress_tag(run.tags or {})
    if progress is not None and (progress.rows is None or progress.rows > 0):
        return False
    record = instance.get_run_record_by_id(run.run_id)
    started = getattr(record, "start_time", None) if record is not None else None
    if started is None:
        return True  # not started yet: it waits longer than this tick could
    return time.time() - float(started) < float(mysql.stream_follow_seconds) - wait


def standby_reason(mysql: MySqlCdcResource, inf: InFlight, run: dg.DagsterRun) -> str:
    """The skip reason of a tick whose standby run is going: ``caught up at <position>: ...``
    (the tables' and the binlog asset's heartbeats go on, as on an idle capture) when the run
    has read up to the server's position (its progress tag, else the window's start), else that
    it is reading, with both positions; an unreachable server counts as not caught up."""
    assert inf.start is not None
    progress = progress_tag(run.tags or {})
    at = (
        progress.reached
        if progress is not None and progress.reached.sort_key() > inf.start.sort_key()
        else inf.start
    )
    head: BinlogPosition | None = None
    try:
        conn = connect(mysql.connection_settings())
        try:
            head = current_position(conn, server_info(conn))
        finally:
            conn.close()
    except Exception:  # noqa: BLE001 - the tick only reports here: a server error is "not caught up"
        head = None
    what = f"standby run {run.run_id[:8]} ({run.status.value}) reads each change as it commits"
    if head is not None and (head.file, head.pos) <= (at.file, at.pos):
        return f"caught up at {at}: {what}"
    return f"{what}; it is at {at}, the server at {head if head is not None else 'unknown'}"


def _inflight_run(instance, inf: InFlight, tick: SensorTick) -> dg.DagsterRun | None:
    """The newest run of this capture (:func:`.capture_runs.is_capture_run`, with the capture id
    of ``inf``'s run key) requested with ``inf``'s run key; ``None`` when it is not created yet."""
    own = key_capture(inf.run_key)
    runs = [
        r
        for r in instance.get_runs(filters=dg.RunsFilter(tags={REQUEST_TAG: inf.run_key}), limit=20)
        if is_capture_run(r, tick, own)
    ]
    return runs[0] if runs else None


def _dead_marked_failed(instance, run: dg.DagsterRun, notes: list[str]) -> dg.DagsterRun:
    """``run``, marked failed when it is starting or started but its worker is dead
    (:func:`.liveness.dead_worker_reason`), with a note saying so."""
    if run.status not in (dg.DagsterRunStatus.STARTING, dg.DagsterRunStatus.STARTED):
        return run
    # a worker that died with the process that launched it leaves its run STARTED for ever
    # (Dagster's default run launcher does not check workers' health): see .liveness. A
    # queued run is not judged (it waits for the run queue, as long as that takes).
    record = instance.get_run_record_by_id(run.run_id)
    launched = time.time()
    if record is not None:  # started, else dequeued (the last update before any beat)
        launched = record.start_time or record.update_timestamp.timestamp()
    if dead := dead_worker_reason(run, launched):
        run = mark_dead(instance, run, dead)
        notes.append(f"run {run.run_id[:8]}: {dead}; marked failed")
    return run


def _settle_failed(
    cursor: StreamCursor,
    inf: InFlight,
    run: dg.DagsterRun,
    mysql: MySqlCdcResource,
    instance,
    tick: SensorTick,
    notes: list[str],
) -> tuple[StreamCursor, BinlogPosition | None, TickOutcome | None]:
    """:func:`settle_inflight` of a run of ``inf`` that failed or was canceled: the windows it
    committed committed, then a re-plan after a server change, the follow-on window it was
    reading requested, or the window retried (:func:`_retry_window`)."""
    if inf.kind == "snapshot":  # not retried while the server cannot be streamed from
        _refuse_snapshot_retry(mysql, inf.snapshot_mode or mysql.snapshot_mode)
    died = run_died(instance, run)
    progress = run_progress(run, inf)
    error = (
        f"run {run.run_id} {run.status.value}"
        f"{' (killed: retried at once)' if died and progress is None else ''}: "
        f"{run_failure_reason(instance, run.run_id)}"
    )
    if progress is not None:
        cursor = _carry_progress(cursor, run, progress, tick, notes, error)
    if changed := _server_changed(cursor, mysql):
        # the run read (or refused to read) another server than the window's: re-plan by GTID,
        # keeping the furthest end of its windows as the bound of what the lake may hold
        notes.append(f"run {run.run_id[:8]} {run.status.value}; the server changed ({changed})")
        bound = inf.end
        if progress is not None:
            bound = progress.next_end or progress.reached
        cursor = replace(cursor, inflight=None, last_error=f"run {run.run_id} {run.status.value}")
        return cursor, bound, None
    if progress is not None:
        if cursor.inflight is None:
            return cursor, None, None  # plan the window after the committed ones
        return (
            cursor,
            None,
            (Plan(cursor, skip_reason="; ".join(notes)), [tick.request(cursor.inflight, cursor)]),
        )
    plan, requests = _retry_window(cursor, inf, run, died, error, tick)
    return plan.cursor, None, (plan, requests)


def _retry_window(
    cursor: StreamCursor, inf: InFlight, run: dg.DagsterRun, died: bool, error: str, tick: SensorTick
) -> TickOutcome:
    """The retry policy of a window (or snapshot) whose run failed (``error``) with no progress
    to commit: the next attempt is requested at once when the run was killed (``died``) or on
    the first failure, else after the exponential backoff (:func:`.cursor.retry_delay` of
    ``tick.backoff``; its time is kept in the cursor's ``retry_at``)."""
    now = time.time()
    failures = inf.failures + (0 if died else 1)
    delay = 0.0 if died else retry_delay(failures, *tick.backoff)
    if cursor.retry_at is None and delay > 0:
        cursor = replace(cursor, retry_at=now + delay, last_error=error)
    if cursor.retry_at is not None and now < cursor.retry_at:
        wait = cursor.retry_at - now
        reason = (
            f"run {run.run_id[:8]} {run.status.value} (attempt {inf.attempt}); retrying the "
            f"window as attempt {inf.attempt + 1} in {wait:.0f} s (backoff {delay:.0f} s)"
        )
        return Plan(cursor, skip_reason=reason), []
    retry = tick.keyed(
        replace(
            inf,
            attempt=inf.attempt + 1,
            failures=failures,
            run_key=standby_window_key(inf.start, inf.attempt + 1)
            if is_standby_key(inf.run_key) and inf.start is not None
            else empty_window_key(inf.start, inf.attempt + 1)
            if ":nonce-" in inf.run_key and inf.start is not None
            else window_key(inf.kind, inf.start, inf.end, inf.attempt + 1),
        )
    )
    cursor = replace(cursor, inflight=retry, last_error=error, retry_at=None)
    why = "killed (canceled, or its worker died)" if died else run.status.value
    plan = Plan(cursor, skip_reason=f"run {run.run_id[:8]} {why}: retrying window as attempt {retry.attempt}")
    return plan, [tick.request(retry, cursor)]


def _refuse_snapshot_retry(mysql: MySqlCdcResource, snapshot_mode: str) -> None:
    """:func:`.run_requests.refuse_snapshot` before a failed snapshot run is retried (an unreachable server
    is left to the retry, as before)."""
    if snapshot_mode == "initial_only":
        return
    try:
        conn = connect(mysql.connection_settings())
    except SourceConnectionError:
        return
    try:
        info = server_info(conn)
    finally:
        conn.close()
    refuse_snapshot(info, snapshot_mode)


def _commit_run(
    cursor: StreamCursor, inf: InFlight, run: dg.DagsterRun, instance, tick: SensorTick, notes: list[str]
) -> tuple[StreamCursor, TickOutcome | None]:
    """A successful run of ``inf``: its reported window end (and incremental state) or snapshot
    position becomes the committed offset. Returns (cursor, the tick's outcome if it ends here:
    a window already requested from the new offset, or a snapshot that reported no position)."""
    mats = binlog_materializations(instance, run.run_id, tick.binlog_key)  # read once
    if inf.kind == "stream":
        end = reported_end(mats, "window_end") or inf.end
        assert end is not None  # a stream window always has an end
        inc = reported_json(mats, "incremental_state")
        stopped = _stopped_after(cursor, reported_json(mats, "stopped_tables"), tick, notes)
        cursor = replace(
            cursor, committed=end, inflight=None, last_error=None, incremental=inc or None, stopped=stopped
        ).with_state_due(reported_json(mats, "state_due"))
        notes.append(f"committed window {inf.start} -> {end} (run {run.run_id[:8]})")
        following = window_run_starting_at(instance, end, tick)
        if following is not None:  # requested by a tick whose cursor was lost: continue it next tick
            cursor = replace(cursor, inflight=following)
            return cursor, (
                Plan(cursor, skip_reason="; ".join(notes + [f"resuming window {following.run_key}"])),
                [],
            )
        return cursor, None
    pos = reported_end(mats, "snapshot")
    if pos is None:
        cursor = replace(cursor, inflight=None, last_error="snapshot run reported no position")
        return cursor, (
            Plan(cursor, skip_reason="snapshot run succeeded but reported no position; re-planning"),
            [],
        )
    cursor = replace(
        cursor, committed=pos, inflight=None, snapshot_done=True, last_error=None, server=None, stopped=None
    ).with_state_due(reported_json(mats, "state_due"))
    notes.append(f"snapshot committed at {pos} (run {run.run_id[:8]})")
    return cursor, None


def _carry_progress(
    cursor: StreamCursor,
    run: dg.DagsterRun,
    progress: ReportedProgress,
    tick: SensorTick,
    notes: list[str],
    error: str,
) -> StreamCursor:
    """``cursor`` with the windows a failed or killed run committed committed: ``reached`` is the
    offset, the stopped tables are the run's as of then; the follow-on window it was reading
    (``next``, maybe partly committed) is in flight as a new window with its saved bounds
    (attempt 1: the run made progress), else nothing is."""
    stopped = _stopped_after(cursor, progress.stopped, tick, notes)
    cursor = replace(
        cursor,
        committed=progress.reached,
        inflight=None,
        last_error=error,
        retry_at=None,
        incremental=progress.incremental,  # the snapshot's state at `reached` (chunks go on from it)
        stopped=stopped,
    )
    notes.append(
        f"run {run.run_id[:8]} {run.status.value} after committing its window and "
        f"{progress.windows} follow-on window(s): committed up to {progress.reached}"
    )
    if progress.next_start is not None and progress.next_end is not None:
        nxt = tick.keyed(
            InFlight(
                "stream",
                window_key("stream", progress.next_start, progress.next_end, 1),
                1,
                progress.next_start,
                progress.next_end,
            )
        )
        cursor = replace(cursor, inflight=nxt)
        notes.append(f"requesting the follow-on window it was reading ({nxt.run_key})")
    return cursor


def _stopped_after(
    cursor: StreamCursor, reported: dict | None, tick: SensorTick, notes: list[str]
) -> dict[str, dict] | None:
    """The cursor's stopped tables after a window run: what the run ``reported`` (the binlog
    asset's ``stopped_tables``, or its progress tag: every table still stopped after it, see
    :func:`..engine.isolation.stopped_after_run`), with the tick's notes on what changed. A run
    that reported nothing (its binlog asset was not selected) leaves them as they were."""
    if reported is None:
        return cursor.stopped
    before = cursor.stopped_tables()
    after = stopped_after_run(before, reported, base=tick.table_backoff[0], cap=tick.table_backoff[1])
    for name in sorted(set(before) - set(after)):
        notes.append(f"{name} caught up and captured again")
    for name in sorted(set(after) - set(before)):
        notes.append(f"{name} STOPPED at {after[name].since}: {first_line(after[name].error, 200)}")
    return {n: st.to_dict() for n, st in after.items()} or None


def snapshotted_again(
    cursor: StreamCursor, instance, assets_def: dg.AssetsDefinition, notes: list[str]
) -> StreamCursor:
    """``cursor`` with each stopped table that was snapshotted since it stopped (a UI
    "Materialize" of the table after its cause was fixed) set to catch up from that snapshot's
    position at the next window (it has the table's rows up to there), at once."""
    stopped = cursor.stopped_tables()
    keys = {
        f"{db}.{t}": spec.key
        for spec in assets_def.specs
        if TABLE_METADATA_KEY in (spec.metadata or {})
        for db, t in [table_of_spec(spec)]
        if f"{db}.{t}" in stopped
    }
    if not keys:
        return cursor
    latest = instance.get_latest_materialization_events(list(keys.values()))
    epoch = cursor.committed.epoch if cursor.committed is not None else 0
    changed = False
    for name, key in keys.items():
        ev = latest.get(key)
        mat = ev.asset_materialization if ev is not None else None
        st = stopped[name]
        if mat is None or ev.timestamp <= st.stopped_at or "snapshot_seconds" not in mat.metadata:
            continue
        md = mat.metadata
        at = BinlogPosition(
            str(md["binlog_file"].value),
            int(md["binlog_pos"].value),
            str(md["gtid_set"].value) if "gtid_set" in md else None,
            epoch=epoch,
        )
        if (at.file, at.pos) == (st.since.file, st.since.pos):
            continue  # already moved there (a catch-up from it failed since: its backoff holds)
        stopped[name] = StoppedTable(
            since=at,
            error=f"snapshotted again by run {ev.run_id[:8]}; catching up from its position",
            attempts=0,
            retry_at=0.0,
            stopped_at=st.stopped_at,
        )
        notes.append(f"{name} was snapshotted again at {at}: caught up from there with the next window")
        changed = True
    if not changed:
        return cursor
    return replace(cursor, stopped={n: st.to_dict() for n, st in stopped.items()})


def _server_changed(cursor: StreamCursor, mysql: MySqlCdcResource) -> str | None:
    """Why the resource's server is not the one the cursor's offset belongs to (``None``: same, or
    no identity recorded)."""
    recorded = cursor.identity()
    if recorded is None:
        return None
    try:
        conn = connect(mysql.connection_settings())
    except SourceConnectionError:
        return None  # unreachable: retry the window as before (the run fails or the server is back)
    try:
        return other_server_reason(conn, server_info(conn), recorded)
    finally:
        conn.close()
