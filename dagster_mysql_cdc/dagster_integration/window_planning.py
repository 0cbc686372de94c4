"""Step 2 of a binlog sensor tick (:mod:`.sensor`), nothing in flight: the offset reconciled
with the server (failover, purged binlog: :func:`.cursor.reconcile_cursor`), then the initial
snapshot or the next window requested (:func:`.cursor.plan_stream_window`), or the tick skipped
with the reason. Windows that change none of the capture's tables (the sensor's look-ahead,
:func:`.selection.changed_tables`) are committed without a run.
"""

from __future__ import annotations

from dataclasses import replace

from ..events import BinlogPosition
from ..source.connection import binlog_files, connect, current_position, server_info
from .cursor import InFlight, Plan, ServerState, StreamCursor, plan_stream_window, reconcile_cursor
from .resources import MySqlCdcResource
from .run_requests import SensorTick, TickOutcome, refuse_snapshot
from .selection import changed_tables


def plan_next(
    cursor: StreamCursor,
    mysql: MySqlCdcResource,
    tick: SensorTick,
    notes: list[str],
    *,
    bound: BinlogPosition | None,
    retention_margin_files: int,
) -> TickOutcome:
    """Step 2 of a tick, nothing in flight: reconcile the offset with the server (failover, purged
    binlog: :func:`.cursor.reconcile_cursor`), then request the initial snapshot or the next window
    (:func:`.cursor.plan_stream_window`), or skip with the reason."""
    conn = connect(mysql.connection_settings())
    try:
        info = server_info(conn)
        state = ServerState(current=current_position(conn, info), binlog_files=binlog_files(conn))
        cursor, resnapshot, messages = reconcile_cursor(
            cursor,
            conn,
            info,
            state,
            snapshot_mode=mysql.snapshot_mode,
            address=f"{mysql.host}:{mysql.port}",
            bound=bound,
        )
    finally:
        conn.close()
    if resnapshot is not None:
        assert resnapshot.request is not None
        refuse_snapshot(info, resnapshot.request.snapshot_mode or mysql.snapshot_mode)
        req = tick.keyed(resnapshot.request)
        return replace(resnapshot, cursor=replace(resnapshot.cursor, inflight=req), request=req), [
            tick.request(req, StreamCursor(), select=False)
        ]
    warnings = [m for m in messages if m.startswith("Server changed")]
    notes.extend(m for m in messages if m not in warnings)
    plan = plan_stream_window(
        cursor,
        state,
        snapshot_mode=mysql.snapshot_mode,
        retention_margin_files=retention_margin_files,
        standby=tick.standby,
    )
    plan, changed, unchanged = _commit_unchanged_windows(
        plan, mysql, state, retention_margin_files, standby=tick.standby
    )
    if warnings:
        plan = replace(plan, warnings=(*warnings, *plan.warnings))
    if notes or unchanged:
        reason = notes + ([plan.skip_reason] if plan.skip_reason else []) + unchanged
        plan = replace(plan, skip_reason="; ".join(reason))
    if plan.request is None:
        return plan, []
    if plan.request.kind == "snapshot":
        refuse_snapshot(info, plan.request.snapshot_mode or mysql.snapshot_mode)
    req = tick.keyed(plan.request)
    return replace(plan, cursor=replace(plan.cursor, inflight=req), request=req), [
        tick.request(req, plan.cursor, changed=changed)
    ]


#: At most this many windows that change none of the capture's tables are committed in one tick
#: without a run (each costs a look-ahead read of its binlog).
_UNCHANGED_WINDOWS_PER_TICK = 8


def _commit_unchanged_windows(
    plan: Plan,
    mysql: MySqlCdcResource,
    state: ServerState,
    retention_margin_files: int,
    standby: bool = False,
) -> tuple[Plan, tuple[set[tuple[str, str]] | None, str] | None, list[str]]:
    """``plan`` with the stream windows it requests committed without a run, while the window
    holds nothing the capture needs a run for (:func:`_may_need_no_run`): several captures of one
    server each plan every window of the server, most of them holding only other databases'
    changes. The offset then moves to the window's end (nothing before it is the capture's
    data) and the next window is planned, as a tick does after a run succeeded; the binlog
    asset's heartbeat and the tables' heartbeats go on as when the server is idle.

    Returns:
        ``(plan, the look-ahead of the window it requests, or None, one note per window
        committed without a run)``.
    """
    notes: list[str] = []
    for _ in range(_UNCHANGED_WINDOWS_PER_TICK):
        req = plan.request
        if req is None or not _may_need_no_run(plan.cursor, req, mysql):
            return plan, None, notes
        assert req.start is not None and req.end is not None
        changed = changed_tables(mysql, req.start, req.end)
        tables, _why = changed
        if tables is None or tables:
            return plan, changed, notes
        notes.append(
            f"window {req.start} -> {req.end} committed without a run: none of the captured tables changed in it"
        )
        nxt = plan_stream_window(
            replace(plan.cursor, committed=req.end),
            state,
            snapshot_mode=mysql.snapshot_mode,
            retention_margin_files=retention_margin_files,
            standby=standby,
        )
        plan = replace(nxt, warnings=tuple(dict.fromkeys((*plan.warnings, *nxt.warnings))))
    return plan, None, notes


def _may_need_no_run(cursor: StreamCursor, req: InFlight, mysql: MySqlCdcResource) -> bool:
    """Whether window ``req`` may be committed without a run once its look-ahead
    (:func:`.selection.changed_tables`) finds no row event of a captured table and none of what
    makes it select every table (DDL, statement-based DML: a gap to repair, a row in the signal
    table, a window too large to read ahead). Never when it is not a plain binlog window
    (snapshots, empty windows), when an incremental snapshot or repair is in progress (its chunks
    are read by window runs), when a stopped table's catch-up is due, with
    ``stream_materialize_unchanged``, or when the window's end has no GTID set (a window that
    ends at the end of a binlog file: the run reads the GTID set there, which the offset needs)."""
    if req.kind != "stream" or req.start is None or req.end is None:
        return False
    if req.end.sort_key() <= req.start.sort_key() or req.end.gtid_set is None:
        return False
    if cursor.incremental or mysql.stream_materialize_unchanged:
        return False
    return not any(st.due() for st in cursor.stopped_tables().values())
