"""The binlog sensor: plans streaming windows, keeps the replication offset in its cursor.

Each tick is light (a few metadata queries, far inside Dagster's 60 s sensor budget) and never
writes data (Dagster guidance: sensors plan, runs do the work):

1. If a run is in flight (found by its run key tag, among this capture's runs: see below): on
   success, commit its window end (or the snapshot position) to the cursor; on failure or
   cancellation commit the windows it recorded as committed (a following run that died), else
   re-request the same window with ``attempt + 1`` (a keyed run launches at most once): at once
   when the run was killed (canceled, or its worker died), with backoff when it failed by itself;
   otherwise wait.
2. With nothing in flight: request the initial snapshot, or the next window ``[committed, end)``
   (see :func:`.cursor.plan_stream_window`), or skip with the reason (caught up, ...). A window
   that changes none of the capture's tables (read ahead, :func:`.selection.changed_tables`) is
   committed without a run (:func:`_commit_unchanged_windows`).

Back-to-back windows: a tick that finds its run still going waits for it (up to
``run_wait_seconds``, polling the run's status) and, once it succeeded, commits it and requests the
next window in the same tick. A backlog is then read by consecutive runs without waiting for the
next tick (the daemon evaluates sensors at most every 5 s, whatever ``minimum_interval_seconds``).

The sensor targets a job of the assets that runs with the in-process executor (one process per
run: the run worker; Dagster's default multiprocess executor would start a second Python process,
import everything again and pay seconds per window).

Runs are idempotent per window (Delta ``txn`` identities), so a run that died after committing
part of its window, or a sensor that died between a run's success and its cursor update, loses
and duplicates nothing: the window is simply re-run or re-committed.

Several captures of one server in one Dagster instance (two code locations, two
``@mysql_cdc_assets``) plan windows with the same bounds. Every run key starts with the capture's
id (:func:`.protocol.capture_id`), every run carries it (:data:`.protocol.CAPTURE_TAG`) and every
lookup of runs by tags keeps only the capture's own (:func:`_is_capture_run`); runs requested
before run keys carried the id are told apart by their server tag, binlog asset and sensor.
"""

from __future__ import annotations

import json
import logging
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from functools import partial
from typing import Any

import dagster as dg

from ..engine.isolation import RETRY_BASE_SECONDS, RETRY_MAX_SECONDS, StoppedTable, stopped_after_run
from ..errors import PreflightError, SourceConnectionError
from ..events import BinlogPosition
from ..source.connection import (
    ServerInfo,
    binlog_files,
    binlog_setting_problems,
    connect,
    current_position,
    server_info,
)
from ..source.failover import other_server_reason
from .checks import GAPS, RETENTION, SCHEMA
from .cursor import (
    InFlight,
    Plan,
    ServerState,
    StreamCursor,
    empty_window_key,
    plan_stream_window,
    reconcile_cursor,
    retry_delay,
    window_key,
)
from .health import first_line, health_observation, run_failure_reason
from .heartbeat import idle_heartbeat, table_heartbeats
from .liveness import dead_worker_reason, mark_dead
from .protocol import (
    BINLOG_METADATA_KEY,
    CAPTURE_TAG,
    COMPACT_PER_RUN,
    COMPACT_TAG,
    EPOCH_TAG,
    IDENTITY_TAG,
    INCREMENTAL_TAG,
    MODE_TAG,
    REQUEST_TAG,
    SELECTION_TAG,
    SERVER_TAG,
    SNAPSHOT_MODE_TAG,
    STOPPED_TAG,
    TABLE_CHECKS_TAG,
    TABLE_METADATA_KEY,
    WINDOW_END_TAG,
    WINDOW_START_TAG,
    binlog_asset_key,
    capture_id,
    default_sensor_name,
    key_capture,
    position_from_metadata,
    position_from_tag,
    position_tag,
)
from .resources import MySqlCdcResource
from .run_tags import ReportedProgress, progress_tag
from .selection import WindowSelection, changed_tables, window_selection

log = logging.getLogger(__name__)

_FAILED = {dg.DagsterRunStatus.FAILURE, dg.DagsterRunStatus.CANCELED}


def _binlog_key(assets_def: dg.AssetsDefinition) -> dg.AssetKey:
    key = binlog_asset_key(assets_def.specs)
    if key is not None:
        return key
    raise ValueError(
        f"{assets_def.node_def.name} has no binlog asset; build it with @mysql_cdc_assets "
        "(include_binlog=True)"
    )


#: Newest binlog-asset materializations read to find a run's own (see _binlog_materializations).
_RECENT_BINLOG_MATERIALIZATIONS = 20


def _binlog_materializations(instance, run_id: str, binlog_key: dg.AssetKey) -> list[dg.AssetMaterialization]:
    """The binlog asset's materializations by run ``run_id``, oldest first.

    Read among the binlog asset's newest materializations (one indexed query, whatever the
    number of tables the run materialized: the run being settled is nearly always the newest);
    when the run's are not all among them, from the run's materializations (every table's)."""
    recent = instance.fetch_materializations(
        dg.AssetRecordsFilter(asset_key=binlog_key), limit=_RECENT_BINLOG_MATERIALIZATIONS, ascending=False
    ).records
    run = instance.get_run_record_by_id(run_id)
    # every materialization of the run is among them when the oldest one read predates the run
    complete = run is not None and (
        len(recent) < _RECENT_BINLOG_MATERIALIZATIONS
        or recent[-1].timestamp < run.create_timestamp.timestamp()
    )
    if complete:
        records = [r for r in reversed(recent) if r.run_id == run_id]
    else:
        records = instance.get_records_for_run(
            run_id=run_id, of_type=dg.DagsterEventType.ASSET_MATERIALIZATION
        ).records
    out = []
    for rec in records:
        mat = rec.event_log_entry.asset_materialization
        if mat is not None and mat.asset_key == binlog_key:
            out.append(mat)
    return out


def _reported_json(mats: list[dg.AssetMaterialization], name: str):
    """A JSON metadata entry a run reported on the binlog asset (``mats``: its binlog
    materializations, :func:`_binlog_materializations`; ``None`` if absent)."""
    for mat in mats:
        if name in mat.metadata:
            return mat.metadata[name].value
    return None


def _reported_end(mats: list[dg.AssetMaterialization], prefix: str) -> BinlogPosition | None:
    """The position a run reported on the binlog asset (``<prefix>_file/_pos/_gtid_set``;
    ``mats``: its binlog materializations, :func:`_binlog_materializations`)."""
    for mat in mats:
        pos = position_from_metadata(mat.metadata, prefix)
        if pos is not None:
            return pos
    return None


#: Dagster's tag of the sensor that launched a run (``dagster._core.storage.tags.SENSOR_NAME_TAG``).
_SENSOR_NAME_TAG = "dagster/sensor_name"

#: Dagster's run failure reasons of a run that failed by itself (an op raised, the run could not
#: start its job); any other failure (no reason: run monitoring, a worker restarted, ...) is a
#: run that died (``dagster._core.events.RunFailureReason``).
_OWN_FAILURE_REASONS = {"STEP_FAILURE", "RUN_EXCEPTION", "JOB_INITIALIZATION_FAILURE"}


def _is_capture_run(run: dg.DagsterRun, tick: _Tick, capture: str | None) -> bool:
    """Whether ``run`` is a run of this capture: its server tag is the capture's, and its capture
    tag is ``capture`` (the id the run key was requested with: this capture's, or an earlier id
    of it for a key requested before its selection changed). A run without the tag (requested
    before runs carried it) counts when it selected this capture's binlog asset and was launched
    by this sensor (when Dagster's sensor tag says)."""
    tags = run.tags or {}
    if tags.get(SERVER_TAG, tick.server_name) != tick.server_name:
        return False
    tagged = tags.get(CAPTURE_TAG)
    if tagged is not None:
        return tagged == capture
    if run.asset_selection is not None and tick.binlog_key not in run.asset_selection:
        return False
    return tags.get(_SENSOR_NAME_TAG, tick.sensor_name) == tick.sensor_name


def _window_run_starting_at(instance, start: BinlogPosition, tick: _Tick) -> InFlight | None:
    """The latest attempt of a stream window of this capture (:func:`_is_capture_run`) that
    starts at ``start``, if any run was ever requested for one (empty windows, ``start == end``,
    aside)."""
    best: InFlight | None = None
    stem, _, seq = start.file.rpartition(".")
    # the planner moves an offset at the very end of a file to the start of the next file
    candidates = (
        [start, replace(start, file=f"{stem}.{int(seq) + 1:0{len(seq)}d}", pos=4)]
        if seq.isdigit()
        else [start]
    )
    runs = [
        r
        for c in candidates
        for r in instance.get_runs(
            filters=dg.RunsFilter(tags={WINDOW_START_TAG: position_tag(c), SERVER_TAG: tick.server_name}),
            limit=50,
        )
        if _is_capture_run(r, tick, tick.capture)
    ]
    for run in runs:
        if run.tags.get(MODE_TAG) != "stream":
            continue
        key = run.tags.get(REQUEST_TAG, "")
        try:
            attempt = int(key.rsplit(":a", 1)[1])
            end = position_from_tag(run.tags, WINDOW_END_TAG)
        except (IndexError, ValueError, KeyError):
            continue
        begin = position_from_tag(run.tags, WINDOW_START_TAG)
        if end is not None and end.sort_key() <= begin.sort_key():
            # an empty window (only incremental-snapshot chunks or a stopped table's catch-up, on
            # an idle source) commits nothing under the window's identity: never continued, or
            # its own commit would find it again and again
            continue
        if best is None or attempt > best.attempt:
            best = InFlight("stream", key, attempt, begin, end, failures=attempt - 1)
    return best


def _request(
    inflight: InFlight,
    keys: Sequence[dg.AssetKey],
    incremental: dict | None = None,
    checks: Sequence[dg.AssetCheckKey] | None = None,
    server: str | None = None,
    identity: dict | None = None,
    select: Callable[..., WindowSelection] | None = None,
    stopped: dict[str, StoppedTable] | None = None,
    now: float | None = None,
    binlog_key: dg.AssetKey | None = None,
    logged_above: int | None = None,
    capture: str | None = None,
    compact: Sequence[str] = (),
) -> dg.RunRequest:
    """The run request of a window or snapshot. Stream windows select, with ``select``
    (:func:`.selection.window_selection`), the tables the window changed with all their checks
    (the stream-run variants) and the binlog asset; without it, every table with the cheap checks
    (schema drift, binlog retention, changes the binlog does not carry). Snapshots run every check
    of the selected assets.

    ``stopped``: the tables whose capture is stopped (:mod:`..engine.isolation`); a window's run
    gets them in the :data:`.protocol.STOPPED_TAG` tag, each marked ``catch_up`` when its next
    attempt is due (the run then catches it up first and it is selected), else left out.

    ``logged_above``: a snapshot of more tables than this (besides ``binlog_key``'s asset) selects
    only the binlog asset's checks and tags the run to log its tables' checks
    (``planned_checks_max_tables``, :data:`.protocol.TABLE_CHECKS_TAG`).

    ``capture``: the capture's id (:data:`.protocol.CAPTURE_TAG`); the one of the run key wins
    (a window requested before the capture's selection changed keeps its id).

    ``compact``: the tables whose ``state`` is due for a compaction by age
    (:meth:`.cursor.StreamCursor.due_states`): a window's run compacts them after its window
    (:data:`.protocol.COMPACT_TAG`)."""
    tags = {REQUEST_TAG: inflight.run_key}
    if server:
        tags[SERVER_TAG] = server
    tagged = key_capture(inflight.run_key) or capture
    if tagged:
        tags[CAPTURE_TAG] = tagged
    if inflight.kind == "stream":
        assert inflight.start is not None and inflight.end is not None  # a window has both ends
        tags.update(
            {
                MODE_TAG: "stream",
                WINDOW_START_TAG: position_tag(inflight.start),
                WINDOW_END_TAG: position_tag(inflight.end),
            }
        )
        if incremental:
            tags[INCREMENTAL_TAG] = json.dumps(incremental, separators=(",", ":"))
        if compact:
            tags[COMPACT_TAG] = json.dumps(list(compact), separators=(",", ":"))
        due: dict[str, bool] = {n: st.due(now) for n, st in (stopped or {}).items()}
        if stopped:
            tags[STOPPED_TAG] = json.dumps(
                {
                    n: {"since": st.since.to_dict(), "error": st.error[:300], "catch_up": due[n]}
                    for n, st in stopped.items()
                },
                separators=(",", ":"),
                sort_keys=True,
            )
        if select is not None:
            sel = select(inflight.start, inflight.end, incremental, due)
            keys, checks = sel.asset_keys, sel.check_keys
            tags[SELECTION_TAG] = sel.reason
            if sel.logged_checks:
                tags[TABLE_CHECKS_TAG] = "logged"
        if identity:  # the run checks it reads the server the window's positions belong to
            tags[IDENTITY_TAG] = json.dumps(identity, separators=(",", ":"), sort_keys=True)
    else:
        cheap, checks = checks or [], None
        tags[MODE_TAG] = "snapshot"
        tables = sum(k != binlog_key for k in keys)
        if logged_above is not None and binlog_key is not None and tables > logged_above:
            # every check of a snapshot's tables, logged by the run (see .selection)
            checks = [ck for ck in cheap if ck.asset_key == binlog_key]
            tags[TABLE_CHECKS_TAG] = "logged"
        if inflight.end is not None and inflight.end.epoch:  # a re-snapshot in a new offset epoch
            tags[EPOCH_TAG] = str(inflight.end.epoch)
        if inflight.snapshot_mode:
            tags[SNAPSHOT_MODE_TAG] = inflight.snapshot_mode
    return dg.RunRequest(
        run_key=inflight.run_key,
        asset_selection=list(keys),
        tags=tags,
        asset_check_keys=list(checks) if checks is not None else None,
    )


def _wait_for_run(instance, run: dg.DagsterRun, seconds: float, poll: float = 0.2) -> dg.DagsterRun:
    """``run`` once it is finished, or as it is after ``seconds`` (status polled every ``poll`` s)."""
    deadline = time.monotonic() + seconds
    while not run.is_finished and time.monotonic() < deadline:
        time.sleep(poll)
        run = instance.get_run_by_id(run.run_id) or run
    return run


def evaluate_tick(
    cursor: StreamCursor,
    mysql: MySqlCdcResource,
    instance,
    assets_def: dg.AssetsDefinition,
    *,
    retention_margin_files: int = 1,
    run_wait_seconds: float = 0.0,
    retry_backoff: tuple[float, float] = (0.0, 0.0),
    table_retry_backoff: tuple[float, float] = (RETRY_BASE_SECONDS, RETRY_MAX_SECONDS),
    sensor_name: str | None = None,
) -> tuple[Plan, list[dg.RunRequest]]:
    """One sensor evaluation (see module docs). Returns the plan and the run requests.

    ``sensor_name``: the sensor's name (default: :func:`build_mysql_cdc_sensor`'s); with the
    binlog asset and the resource's table selection it makes the capture's id
    (:func:`capture_selection`), which scopes run keys and run lookups to this capture.

    ``run_wait_seconds``: how long to wait for a run in flight to finish before reporting that it
    is still going (0: do not wait).

    ``retry_backoff``: ``(base, max)`` seconds of the exponential backoff between the retries of
    a window that failed by itself (:func:`.cursor.retry_delay`; the first retry is immediate; a
    run that was canceled or whose worker died is retried at once and does not count). The time
    of the next attempt is kept in the cursor (``retry_at``); the failure's reason in
    ``last_error``. A failed or killed stream run that recorded committed windows
    (:data:`.protocol.PROGRESS_TAG`, a following run) has them committed first.

    Before planning, the committed offset is checked against the server it belongs to and, after a
    failover, translated by GTID (:func:`.cursor.reconcile_cursor`); a run that failed because the
    server changed is re-planned that way instead of retried.

    ``table_retry_backoff``: ``(base, max)`` seconds between the catch-up attempts of a table whose
    capture stopped (:mod:`..engine.isolation`); a table snapshotted again since it stopped is
    caught up from its snapshot's position at once.

    Raises:
        ConfigurationError: purged binlog without ``when_needed``; corrupt cursor (earlier);
            :class:`~dagster_mysql_cdc.source.failover.OffsetError` when the offset cannot be used
            on the connected server (see docs/operations.md, "Failover").
        SourceConnectionError: the server is unreachable (the tick fails, the cursor is kept).
        PreflightError: a snapshot (or the retry of a failed one) is due but the server's binlog
            settings do not allow streaming after it (``binlog_format=MIXED`` ...,
            :func:`refuse_snapshot`): no run is requested until they are fixed.
    """
    binlog_key = _binlog_key(assets_def)
    sensor_name = sensor_name or default_sensor_name(assets_def)
    tick = _Tick(
        binlog_key=binlog_key,
        sensor_name=sensor_name,
        capture=capture_id(sensor_name, binlog_key, capture_selection(mysql)),
        keys=list(assets_def.keys),
        cheap=[ck for ck in assets_def.check_keys if ck.name in (SCHEMA, RETENTION, GAPS)],
        server_name=mysql.server_name,
        select=partial(window_selection, mysql, assets_def),
        planned_max=mysql.planned_checks_max_tables,
        backoff=retry_backoff,
        table_backoff=table_retry_backoff,
    )
    problems = selection_problems(mysql)
    if not any(_is_table_spec(s) for s in assets_def.specs):
        # nothing to snapshot or stream: a snapshot run of the binlog asset alone would succeed,
        # report no position and be requested again, tick after tick
        return nothing_captured(cursor, mysql, problems), []
    plan, requests = _evaluate(
        cursor, mysql, instance, assets_def, tick, run_wait_seconds, retention_margin_files
    )
    if problems:
        plan = replace(plan, problems=problems)
        if plan.skip_reason is not None:
            plan = replace(plan, skip_reason="; ".join([plan.skip_reason, *problems]))
    return plan, requests


def _is_table_spec(spec: dg.AssetSpec) -> bool:
    md = spec.metadata or {}
    return TABLE_METADATA_KEY in md and BINLOG_METADATA_KEY not in md


def selection_problems(mysql: MySqlCdcResource) -> tuple[str, ...]:
    """One message per ``table_include_list`` entry that matches no table on the server, each
    ending with its fix (:meth:`.resources.MySqlCdcResource.include_list_warnings`; ``()`` when
    the server cannot be reached: the tick reports that itself)."""
    if not mysql.table_include_list:
        return ()
    try:
        return tuple(mysql.include_list_warnings())
    except SourceConnectionError:
        return ()


def nothing_captured(cursor: StreamCursor, mysql: MySqlCdcResource, problems: Sequence[str]) -> Plan:
    """The plan of a tick whose capture selects no table (a typo in ``table_include_list``, a
    database that has no table): no run (a snapshot of no table reports no position and would be
    requested again and again), the cursor kept, and the reason, ending with the fix, as the
    tick's skip reason and the capture's problem (shown on the binlog asset's health)."""
    lists = ", ".join(
        f"{name}={value}" for name, value in capture_selection(mysql).items() if name != "server" and value
    )
    why = (
        "; ".join(problems)
        if problems
        else (f"no table on {mysql.host}:{mysql.port} passes the capture's lists ({lists or 'none set'})")
    )
    reason = (
        f"nothing to capture, no run requested: {why}. The table assets are read when the code "
        "location loads: fix the lists (or create the tables), then reload the code location"
    )
    return Plan(cursor, skip_reason=reason, problems=(reason,))


def _evaluate(
    cursor: StreamCursor,
    mysql: MySqlCdcResource,
    instance,
    assets_def: dg.AssetsDefinition,
    tick: _Tick,
    run_wait_seconds: float,
    retention_margin_files: int,
) -> tuple[Plan, list[dg.RunRequest]]:
    """:func:`evaluate_tick` of a capture that selects tables."""
    bound: BinlogPosition | None = None
    notes: list[str] = []
    if cursor.stopped:
        cursor = _snapshotted_again(cursor, instance, assets_def, notes)
    if cursor.inflight is None and cursor.snapshot_done and cursor.committed is not None:
        adopted = _window_run_starting_at(instance, cursor.committed, tick)
        if adopted is not None:
            # A window starting at the committed offset was requested before, but the cursor that
            # recorded it was lost (the sensor died before storing it, or was set back). Its run
            # may have committed some tables with the Delta txn identity (app, start): a different
            # window with the same start would be skipped there and its extra events lost. So
            # continue exactly that window (commit it, wait for it, or retry it).
            cursor = replace(cursor, inflight=adopted)
            notes.append(f"resuming window {adopted.run_key} requested by an earlier tick")
    if cursor.inflight is not None:
        cursor, bound, done = _settle_inflight(cursor, mysql, instance, tick, notes, run_wait_seconds)
        if done is not None:
            return done
    return _plan_next(cursor, mysql, tick, notes, bound=bound, retention_margin_files=retention_margin_files)


@dataclass(frozen=True)
class _Tick:
    """What the run requests of one sensor tick share: the assets, the cheap checks (selected
    without a window selection), the server name and the window selection function."""

    binlog_key: dg.AssetKey
    keys: list[dg.AssetKey]
    cheap: list[dg.AssetCheckKey]
    server_name: str
    select: Callable[..., WindowSelection]
    #: the capture's id (:func:`.protocol.capture_id`) and its sensor's name
    capture: str = ""
    sensor_name: str = ""
    backoff: tuple[float, float] = (0.0, 0.0)  # retry_backoff_seconds, retry_backoff_max_seconds
    #: planned_checks_max_tables of the resource (None: snapshots plan every check)
    planned_max: int | None = None
    #: table_retry_backoff_seconds, table_retry_backoff_max_seconds (stopped tables)
    table_backoff: tuple[float, float] = (RETRY_BASE_SECONDS, RETRY_MAX_SECONDS)

    def request(
        self,
        inflight: InFlight,
        cursor: StreamCursor,
        select: bool = True,
        changed: tuple[set[tuple[str, str]] | None, str] | None = None,
    ) -> dg.RunRequest:
        """:func:`_request` of ``inflight`` with ``cursor``'s incremental snapshot, server identity
        and stopped tables (with the window selection unless ``select=False``; ``changed``: the
        window's look-ahead when already read, :func:`.selection.changed_tables`)."""
        selector = partial(self.select, changed=changed) if changed is not None else self.select
        return _request(
            inflight,
            self.keys,
            cursor.incremental,
            self.cheap,
            self.server_name,
            cursor.server,
            select=selector if select else None,
            stopped=cursor.stopped_tables(),
            binlog_key=self.binlog_key,
            logged_above=self.planned_max,
            capture=self.capture,
            compact=cursor.due_states(limit=COMPACT_PER_RUN),
        )

    def keyed(self, inflight: InFlight) -> InFlight:
        """``inflight`` with its run key prefixed by the capture's id (``cap-...:stream:...``)."""
        return replace(inflight, run_key=f"{self.capture}:{inflight.run_key}")


_TickOutcome = tuple[Plan, list[dg.RunRequest]]


def _settle_inflight(
    cursor: StreamCursor,
    mysql: MySqlCdcResource,
    instance,
    tick: _Tick,
    notes: list[str],
    run_wait_seconds: float,
) -> tuple[StreamCursor, BinlogPosition | None, _TickOutcome | None]:
    """Step 1 of a tick: the run of ``cursor.inflight``. Success commits its window end (or
    snapshot position); a failed or killed stream run first has the windows it recorded as
    committed committed (:func:`_carry_progress`); a failure after a server change re-plans (the
    failed window's end is the returned bound); another failure retries the window as the next
    attempt, at once when the run died (:func:`_run_died`), else after the backoff; otherwise the
    tick waits.

    Returns:
        (cursor, bound for :func:`.cursor.reconcile_cursor`, the tick's outcome if it ends here).
    """
    inf = cursor.inflight
    assert inf is not None
    own = key_capture(inf.run_key)
    runs = [
        r
        for r in instance.get_runs(filters=dg.RunsFilter(tags={REQUEST_TAG: inf.run_key}), limit=20)
        if _is_capture_run(r, tick, own)
    ]
    if not runs:
        # Requested but not created yet (or the request was lost): same key, launched at most once.
        return (
            cursor,
            None,
            (
                Plan(cursor, skip_reason=f"waiting for run {inf.run_key} to be created"),
                [tick.request(inf, cursor)],
            ),
        )
    run = runs[0]
    if run_wait_seconds > 0 and not run.is_finished:
        run = _wait_for_run(instance, run, run_wait_seconds)
    if run.status in (dg.DagsterRunStatus.STARTING, dg.DagsterRunStatus.STARTED):
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
    if run.status == dg.DagsterRunStatus.SUCCESS:
        cursor, done = _commit_run(cursor, inf, run, instance, tick, notes)
        return cursor, None, done
    if run.status not in _FAILED:
        return (
            cursor,
            None,
            (Plan(cursor, skip_reason=f"run {run.run_id[:8]} for {inf.run_key} is {run.status.value}"), []),
        )
    if inf.kind == "snapshot":  # not retried while the server cannot be streamed from
        _refuse_snapshot_retry(mysql, inf.snapshot_mode or mysql.snapshot_mode)
    died = _run_died(instance, run)
    progress = _run_progress(run, inf)
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
    now = time.time()
    failures = inf.failures + (0 if died else 1)
    delay = 0.0 if died else retry_delay(failures, *tick.backoff)
    if cursor.retry_at is None and delay > 0:
        cursor = replace(cursor, retry_at=now + delay, last_error=error)
    if cursor.retry_at is not None and now < cursor.retry_at:
        wait = cursor.retry_at - now
        return (
            cursor,
            None,
            (
                Plan(
                    cursor,
                    skip_reason=(
                        f"run {run.run_id[:8]} {run.status.value} (attempt {inf.attempt}); retrying the "
                        f"window as attempt {inf.attempt + 1} in {wait:.0f} s (backoff {delay:.0f} s)"
                    ),
                ),
                [],
            ),
        )
    retry = tick.keyed(
        replace(
            inf,
            attempt=inf.attempt + 1,
            failures=failures,
            run_key=empty_window_key(inf.start, inf.attempt + 1)
            if ":nonce-" in inf.run_key and inf.start is not None
            else window_key(inf.kind, inf.start, inf.end, inf.attempt + 1),
        )
    )
    cursor = replace(cursor, inflight=retry, last_error=error, retry_at=None)
    why = "killed (canceled, or its worker died)" if died else run.status.value
    return (
        cursor,
        None,
        (
            Plan(
                cursor, skip_reason=f"run {run.run_id[:8]} {why}: retrying window as attempt {retry.attempt}"
            ),
            [tick.request(retry, cursor)],
        ),
    )


#: The code server's launch error for a run worker that died of a signal before it ran anything
#: (``DagsterLaunchFailedError: GRPC server: Subprocess for <run> terminated unexpectedly with
#: exit code -9``): a SIGKILL or an OOM kill, not a failure of the window.
_SIGNAL_EXIT = re.compile(r"terminated unexpectedly with exit code -\d+")


def _killed_by_signal(error: Any) -> bool:
    """Whether a run's engine error (a ``SerializableErrorInfo`` chain) says its worker process
    died of a signal (see :data:`_SIGNAL_EXIT`)."""
    while error is not None:
        if _SIGNAL_EXIT.search(getattr(error, "message", "") or ""):
            return True
        error = getattr(error, "cause", None) or getattr(error, "context", None)
    return False


def refuse_snapshot(info: ServerInfo, snapshot_mode: str) -> None:
    """Fail the tick instead of requesting a snapshot (or its retry) that the run's preflight
    would refuse: the server's binlog settings do not allow streaming after it
    (:func:`..source.connection.binlog_setting_problems`; an ``initial_only`` snapshot reads no
    binlog). The tick fails (red in the UI, its error in ``status``), no run is requested and the
    cursor is kept; the snapshot is requested by the first tick after the fix.

    Raises:
        PreflightError: every setting to change, each with its fix.
    """
    if snapshot_mode == "initial_only":
        return
    problems, _ = binlog_setting_problems(info)
    if problems:
        raise PreflightError(problems)


def _refuse_snapshot_retry(mysql: MySqlCdcResource, snapshot_mode: str) -> None:
    """:func:`refuse_snapshot` before a failed snapshot run is retried (an unreachable server
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


def _run_died(instance, run: dg.DagsterRun) -> bool:
    """Whether a failed run was killed rather than failing by itself: canceled (terminated from
    the UI or by the daemon), or failed with no failure of its own (no step failed, no run
    exception, no engine error such as a code location that could not load: run monitoring or
    the code server marked a dead run worker failed, a worker was restarted, a worker process
    died of a signal while the code server launched it ...). Its window did
    not fail: it is retried at once, without backoff."""
    if run.status == dg.DagsterRunStatus.CANCELED:
        return True
    if instance.get_records_for_run(
        run_id=run.run_id, of_type=dg.DagsterEventType.STEP_FAILURE, limit=1
    ).records:
        return False
    for rec in instance.get_records_for_run(
        run_id=run.run_id, of_type={dg.DagsterEventType.RUN_FAILURE, dg.DagsterEventType.ENGINE_EVENT}
    ).records:
        event = rec.event_log_entry.dagster_event
        data = getattr(event, "event_specific_data", None)
        if event is None or data is None:
            continue
        if event.event_type == dg.DagsterEventType.ENGINE_EVENT:
            error = getattr(data, "error", None)
            if error is not None and not _killed_by_signal(error):  # the worker could not run the job
                return False
        elif getattr(getattr(data, "failure_reason", None), "value", None) in _OWN_FAILURE_REASONS:
            return False
    return True


def _run_progress(run: dg.DagsterRun, inf: InFlight) -> ReportedProgress | None:
    """The committed windows a failed or killed following stream run of ``inf`` recorded
    (:data:`.protocol.PROGRESS_TAG`): at least one follow-on window past the window's start
    (``None``: the window is retried whole, as a run of one window is: the retry reports its
    tables' materializations and checks)."""
    if inf.kind != "stream" or inf.start is None:
        return None
    progress = progress_tag(run.tags or {})
    if progress is None or progress.windows < 1 or progress.reached.sort_key() <= inf.start.sort_key():
        return None
    return progress


def _carry_progress(
    cursor: StreamCursor,
    run: dg.DagsterRun,
    progress: ReportedProgress,
    tick: _Tick,
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
        incremental=None,  # following runs read no incremental snapshot
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


def _commit_run(
    cursor: StreamCursor, inf: InFlight, run: dg.DagsterRun, instance, tick: _Tick, notes: list[str]
) -> tuple[StreamCursor, _TickOutcome | None]:
    """A successful run of ``inf``: its reported window end (and incremental state) or snapshot
    position becomes the committed offset. Returns (cursor, the tick's outcome if it ends here:
    a window already requested from the new offset, or a snapshot that reported no position)."""
    mats = _binlog_materializations(instance, run.run_id, tick.binlog_key)  # read once
    if inf.kind == "stream":
        end = _reported_end(mats, "window_end") or inf.end
        assert end is not None  # a stream window always has an end
        inc = _reported_json(mats, "incremental_state")
        stopped = _stopped_after(cursor, _reported_json(mats, "stopped_tables"), tick, notes)
        cursor = replace(
            cursor, committed=end, inflight=None, last_error=None, incremental=inc or None, stopped=stopped
        ).with_state_due(_reported_json(mats, "state_due"))
        notes.append(f"committed window {inf.start} -> {end} (run {run.run_id[:8]})")
        following = _window_run_starting_at(instance, end, tick)
        if following is not None:  # requested by a tick whose cursor was lost: continue it next tick
            cursor = replace(cursor, inflight=following)
            return cursor, (
                Plan(cursor, skip_reason="; ".join(notes + [f"resuming window {following.run_key}"])),
                [],
            )
        return cursor, None
    pos = _reported_end(mats, "snapshot")
    if pos is None:
        cursor = replace(cursor, inflight=None, last_error="snapshot run reported no position")
        return cursor, (
            Plan(cursor, skip_reason="snapshot run succeeded but reported no position; re-planning"),
            [],
        )
    cursor = replace(
        cursor, committed=pos, inflight=None, snapshot_done=True, last_error=None, server=None, stopped=None
    ).with_state_due(_reported_json(mats, "state_due"))
    notes.append(f"snapshot committed at {pos} (run {run.run_id[:8]})")
    return cursor, None


def _snapshotted_again(cursor: StreamCursor, instance, assets_def: dg.AssetsDefinition, notes: list[str]):
    """``cursor`` with each stopped table that was snapshotted since it stopped (a UI
    "Materialize" of the table after its cause was fixed) set to catch up from that snapshot's
    position at the next window (it has the table's rows up to there), at once."""
    from .protocol import TABLE_METADATA_KEY
    from .translator import table_of_spec

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


def _stopped_after(
    cursor: StreamCursor, reported: dict | None, tick: _Tick, notes: list[str]
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


def _plan_next(
    cursor: StreamCursor,
    mysql: MySqlCdcResource,
    tick: _Tick,
    notes: list[str],
    *,
    bound: BinlogPosition | None,
    retention_margin_files: int,
) -> _TickOutcome:
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
        cursor, state, snapshot_mode=mysql.snapshot_mode, retention_margin_files=retention_margin_files
    )
    plan, changed, unchanged = _commit_unchanged_windows(plan, mysql, state, retention_margin_files)
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
    plan: Plan, mysql: MySqlCdcResource, state: ServerState, retention_margin_files: int
) -> tuple[Plan, tuple[set[tuple[str, str]] | None, str] | None, list[str]]:
    """``plan`` with the stream windows it requests committed without a run, while the window
    holds nothing the capture needs a run for (:func:`_needs_no_run`): several captures of one
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


def capture_selection(mysql: MySqlCdcResource) -> dict[str, object]:
    """What the resource captures, for :func:`.protocol.capture_id`: its server name
    (``topic.prefix``) and its database/table include and exclude lists."""
    return {
        "server": mysql.server_name,
        "database_include_list": list(mysql.database_include_list),
        "database_exclude_list": list(mysql.database_exclude_list),
        "table_include_list": list(mysql.table_include_list),
        "table_exclude_list": list(mysql.table_exclude_list),
    }


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


def build_mysql_cdc_sensor(
    assets_def: dg.AssetsDefinition,
    *,
    name: str | None = None,
    minimum_interval_seconds: int = 30,
    retention_margin_files: int = 1,
    default_status: dg.DefaultSensorStatus = dg.DefaultSensorStatus.STOPPED,
    mysql_resource_key: str = "mysql",
    run_wait_seconds: float = 15.0,
    executor_def: dg.ExecutorDefinition | None = dg.in_process_executor,
    job_name: str | None = None,
    table_heartbeat_seconds: float | None = None,
    retry_backoff_seconds: float = 10.0,
    retry_backoff_max_seconds: float = 600.0,
    table_retry_backoff_seconds: float = RETRY_BASE_SECONDS,
    table_retry_backoff_max_seconds: float = RETRY_MAX_SECONDS,
) -> dg.SensorDefinition:
    """The binlog sensor for a ``@mysql_cdc_assets`` definition.

    Args:
        assets_def: the multi-asset built by :func:`mysql_cdc_assets` (tables + binlog asset).
        name: sensor name (default ``<op name>_binlog_sensor``).
        minimum_interval_seconds: seconds between ticks (the streaming latency floor).
        retention_margin_files: warn when the committed offset is in one of this many oldest
            binlog files (it may be purged before streaming catches up).
        default_status: turn the sensor on by default with ``DefaultSensorStatus.RUNNING``.
        mysql_resource_key: resource key of the :class:`MySqlCdcResource`.
        run_wait_seconds: a tick that finds its run still going waits this long for it to finish,
            then commits it and requests the next window at once (back-to-back windows while a
            backlog exists). Keep it well below the sensor evaluation timeout (60 s by default);
            0 = never wait. With several such sensors in one deployment, let the daemon evaluate
            them in threads (``sensors: use_threads: true`` in dagster.yaml).
        executor_def: executor of the capture job the sensor launches (default: in-process, one
            process per run); ``None`` targets the assets directly (the Definitions' executor).
        job_name: name of that job (default ``<op name>_capture``).
        table_heartbeat_seconds: seconds between the runless heartbeats of a quiet table that has
            a freshness policy (default: half its warn window; see :mod:`.heartbeat`). Each
            heartbeat is one materialization plus one event per check of the table.
        retry_backoff_seconds, retry_backoff_max_seconds: a window run that failed by itself is
            retried at once, then after ``retry_backoff_seconds``, doubling each time up to
            ``retry_backoff_max_seconds`` (a persistent failure, e.g. a broken lake path, is not
            retried every tick); the wait and the failure's reason are in the tick's skip reason,
            the cursor (``retry_at``, ``last_error``) and ``python -m dagster_mysql_cdc status``.
            ``0`` retries at every tick. A killed run (canceled, or failed with no step failure:
            its worker died) is retried at once and does not lengthen the backoff.
        table_retry_backoff_seconds, table_retry_backoff_max_seconds: a table whose capture
            stopped alone (its window could not be written; the other tables go on, see
            :mod:`..engine.isolation` and docs/operations.md "A table stopped") is caught up by the
            first window after ``table_retry_backoff_seconds``, then after twice as long after each
            failed attempt, up to ``table_retry_backoff_max_seconds``; at once after the table is
            snapshotted again (materialized from the UI). ``0`` tries at every window.
    """
    sensor_name = name or default_sensor_name(assets_def)
    target: dg.AssetsDefinition | dg.UnresolvedAssetJobDefinition = assets_def
    if executor_def is not None:
        target = dg.define_asset_job(
            name=job_name or f"{assets_def.node_def.name}_capture",
            selection=dg.AssetSelection.assets(assets_def),
            executor_def=executor_def,
            description="Binlog windows and snapshots requested by the binlog sensor.",
        )

    @dg.sensor(
        name=sensor_name,
        minimum_interval_seconds=minimum_interval_seconds,
        target=target,
        default_status=default_status,
        required_resource_keys={mysql_resource_key},
        description=(
            "Streams the MySQL binlog into the lake: requests one run per binlog window and keeps "
            "the committed replication offset (file/pos, GTID set) in its cursor."
        ),
    )
    def _sensor(context: dg.SensorEvaluationContext):
        mysql: MySqlCdcResource = getattr(context.resources, mysql_resource_key)
        cursor = StreamCursor.parse(context.cursor, sensor_name)
        plan, requests = evaluate_tick(
            cursor,
            mysql,
            context.instance,
            assets_def,
            retention_margin_files=retention_margin_files,
            run_wait_seconds=run_wait_seconds,
            retry_backoff=(retry_backoff_seconds, retry_backoff_max_seconds),
            table_retry_backoff=(table_retry_backoff_seconds, table_retry_backoff_max_seconds),
            sensor_name=sensor_name,
        )
        for w in plan.warnings:
            context.log.warning(w)
        if requests:  # a skipped tick has them in its skip reason
            for problem in plan.problems:
                context.log.warning(problem)
        new_cursor = plan.cursor.to_json()
        every = max(60, 4 * minimum_interval_seconds)
        reason = plan.skip_reason or "nothing to do"
        caught_up = plan.cursor.committed if not requests and reason.startswith("caught up") else None
        beat_errors: list[str] = []
        try:
            beats = table_heartbeats(
                context.instance,
                assets_def,
                caught_up,
                reason,
                default_every_seconds=every,
                every_seconds=table_heartbeat_seconds,
                errors=beat_errors,
                stopped=set(plan.cursor.stopped or {}),
            )
        except Exception as e:  # noqa: BLE001 - heartbeats never fail the tick (capture goes on)
            beats, beat_errors = [], [f"table heartbeats failed: {type(e).__name__}: {e}"]
        for message in beat_errors:
            context.log.error(message)
        try:  # the capture's health on the binlog asset, when it changed
            seen = health_observation(
                context.instance,
                sensor_name,
                _binlog_key(assets_def),
                last_error=plan.cursor.last_error,
                retry_at=plan.cursor.retry_at,
                incremental=plan.cursor.incremental,
                tick_notes=beat_errors,
                stopped=plan.cursor.stopped,
                problems=plan.problems,
            )
        except Exception as e:  # noqa: BLE001 - reporting health never fails the tick
            context.log.error(f"reporting the capture's health failed: {type(e).__name__}: {e}")
            seen = None
        events: list[dg.AssetMaterialization | dg.AssetCheckEvaluation | dg.AssetObservation] = [*beats]
        if seen is not None:
            events.append(seen)
        if requests:
            if plan.skip_reason:  # what the tick committed before requesting (a dead run's windows ...)
                context.log.info(plan.skip_reason)
            return dg.SensorResult(run_requests=requests, cursor=new_cursor, asset_events=events or None)
        context.log.info(f"Skipped: {reason}")  # the tick's log shows it (the tick list, on hover)
        try:
            heartbeat = idle_heartbeat(
                context.instance,
                assets_def,
                plan.cursor.committed,
                reason,
                every,
                mysql=mysql,
                retention_margin_files=retention_margin_files,
            )
        except Exception as e:  # noqa: BLE001 - heartbeats never fail the tick (capture goes on)
            context.log.error(f"binlog heartbeat failed: {type(e).__name__}: {e}")
            heartbeat = []
        return dg.SensorResult(skip_reason=reason, cursor=new_cursor, asset_events=[*heartbeat, *events])

    return _sensor
