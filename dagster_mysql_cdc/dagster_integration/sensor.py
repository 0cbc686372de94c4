"""The binlog sensor: plans streaming windows, keeps the replication offset in its cursor.

Each tick is light (a few metadata queries, far inside Dagster's 60 s sensor budget) and never
writes data (Dagster guidance: sensors plan, runs do the work):

1. If a run is in flight (found by its run key tag, among this capture's runs: see below;
   :mod:`.run_settlement`, reading the instance with :mod:`.capture_runs`): on
   success, commit its window end (or the snapshot position) to the cursor; on failure or
   cancellation commit the windows it recorded as committed (a following run that died), else
   re-request the same window with ``attempt + 1`` (a keyed run launches at most once): at once
   when the run was killed (canceled, or its worker died), with backoff when it failed by itself;
   otherwise wait.
2. With nothing in flight (:mod:`.window_planning`; the requests: :mod:`.run_requests`):
   request the initial snapshot, or the next window ``[committed, end)``
   (see :func:`.cursor.plan_stream_window`), or skip with the reason (caught up, ...). A window
   that changes none of the capture's tables (read ahead, :func:`.selection.changed_tables`) is
   committed without a run (:mod:`.window_planning`).

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
lookup of runs by tags keeps only the capture's own (:func:`.capture_runs.is_capture_run`); runs requested
before run keys carried the id are told apart by their server tag, binlog asset and sensor.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, replace
from functools import partial

import dagster as dg

from ..engine.isolation import RETRY_BASE_SECONDS, RETRY_MAX_SECONDS
from ..errors import SourceConnectionError
from ..events import BinlogPosition
from .capture_runs import binlog_key_of, window_run_starting_at
from .checks import GAPS, RETENTION, SCHEMA
from .cursor import Plan, StreamCursor
from .health import health_observation
from .heartbeat import idle_heartbeat, table_heartbeats
from .protocol import (
    BINLOG_METADATA_KEY,
    STANDBY_TAG,
    TABLE_METADATA_KEY,
    capture_id,
    default_sensor_name,
)
from .resources import MySqlCdcResource
from .run_requests import SensorTick
from .run_settlement import settle_inflight, snapshotted_again
from .selection import window_selection
from .window_planning import plan_next

log = logging.getLogger(__name__)


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
    standby: bool = False,
) -> tuple[Plan, list[dg.RunRequest]]:
    """One sensor evaluation (see module docs). Returns the plan and the run requests.

    ``standby``: when the capture is caught up, request a standby run (an empty window whose run
    waits for the next change up to ``stream_follow_seconds`` and reads each window as it
    commits: the first change after a quiet period does not wait for a tick and a run's start,
    see :mod:`..engine.follow`) instead of skipping.

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
            :func:`.run_requests.refuse_snapshot`): no run is requested until they are fixed.
    """
    binlog_key = binlog_key_of(assets_def)
    sensor_name = sensor_name or default_sensor_name(assets_def)
    tick = SensorTick(
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
        standby=standby,
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
    tick: SensorTick,
    run_wait_seconds: float,
    retention_margin_files: int,
) -> tuple[Plan, list[dg.RunRequest]]:
    """:func:`evaluate_tick` of a capture that selects tables."""
    bound: BinlogPosition | None = None
    notes: list[str] = []
    if cursor.stopped:
        cursor = snapshotted_again(cursor, instance, assets_def, notes)
    if cursor.inflight is None and cursor.snapshot_done and cursor.committed is not None:
        adopted = window_run_starting_at(instance, cursor.committed, tick)
        if adopted is not None:
            # A window starting at the committed offset was requested before, but the cursor that
            # recorded it was lost (the sensor died before storing it, or was set back). Its run
            # may have committed some tables with the Delta txn identity (app, start): a different
            # window with the same start would be skipped there and its extra events lost. So
            # continue exactly that window (commit it, wait for it, or retry it).
            cursor = replace(cursor, inflight=adopted)
            notes.append(f"resuming window {adopted.run_key} requested by an earlier tick")
    if cursor.inflight is not None:
        cursor, bound, done = settle_inflight(cursor, mysql, instance, tick, notes, run_wait_seconds)
        if done is not None:
            return done
    return plan_next(cursor, mysql, tick, notes, bound=bound, retention_margin_files=retention_margin_files)


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


def build_mysql_cdc_sensor(
    assets_def: dg.AssetsDefinition,
    *,
    name: str | None = None,
    minimum_interval_seconds: int = 30,
    retention_margin_files: int = 1,
    default_status: dg.DefaultSensorStatus = dg.DefaultSensorStatus.STOPPED,
    mysql_resource_key: str = "mysql",
    lake_resource_key: str = "lake",
    run_wait_seconds: float = 15.0,
    executor_def: dg.ExecutorDefinition | None = dg.in_process_executor,
    job_name: str | None = None,
    table_heartbeat_seconds: float | None = None,
    retry_backoff_seconds: float = 10.0,
    retry_backoff_max_seconds: float = 600.0,
    table_retry_backoff_seconds: float = RETRY_BASE_SECONDS,
    table_retry_backoff_max_seconds: float = RETRY_MAX_SECONDS,
    standby: bool | None = None,
) -> dg.SensorDefinition:
    """The binlog sensor for a ``@mysql_cdc_assets`` definition.

    Args:
        assets_def: the multi-asset built by :func:`mysql_cdc_assets` (tables + binlog asset).
        name: sensor name (default ``<op name>_binlog_sensor``).
        minimum_interval_seconds: seconds between ticks (the streaming latency floor).
        retention_margin_files: warn when the committed offset is in one of this many oldest
            binlog files (it may be purged before streaming catches up).
        default_status: turn the sensor on by default with ``DefaultSensorStatus.RUNNING``.
        mysql_resource_key, lake_resource_key: keys of the resources (a tick fails with
            ``LakeOwnerError`` while another Dagster instance owns the lake prefix: sink/owner.py).
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
        standby: keep a standby run resident while the capture is caught up (a stream run of the
            empty window at the committed offset that waits for the next change, up to the
            resource's ``stream_follow_seconds``, and reports each window's tables as it commits
            them): a change after a quiet period reaches the lake and the UI in about a second
            instead of waiting for the next tick and a run's start. ``None`` (default): on when
            the resource's ``stream_follow_seconds`` > 0. The standby run shows as a run of the
            binlog asset in progress; ``False``: ticks skip while caught up.
    """
    target: dg.AssetsDefinition | dg.UnresolvedAssetJobDefinition = assets_def
    if executor_def is not None:
        target = dg.define_asset_job(
            name=job_name or f"{assets_def.node_def.name}_capture",
            selection=dg.AssetSelection.assets(assets_def),
            executor_def=executor_def,
            description="Binlog windows and snapshots requested by the binlog sensor.",
        )
    evaluation = BinlogSensorEvaluation(
        assets_def,
        sensor_name := name or default_sensor_name(assets_def),
        mysql_resource_key=mysql_resource_key,
        lake_resource_key=lake_resource_key,
        minimum_interval_seconds=minimum_interval_seconds,
        retention_margin_files=retention_margin_files,
        run_wait_seconds=run_wait_seconds,
        table_heartbeat_seconds=table_heartbeat_seconds,
        retry_backoff=(retry_backoff_seconds, retry_backoff_max_seconds),
        table_retry_backoff=(table_retry_backoff_seconds, table_retry_backoff_max_seconds),
        standby=standby,
    )

    @dg.sensor(
        name=sensor_name,
        minimum_interval_seconds=minimum_interval_seconds,
        target=target,
        default_status=default_status,
        required_resource_keys={mysql_resource_key}
        | ({lake_resource_key} & assets_def.required_resource_keys),
        description=(
            "Streams the MySQL binlog into the lake: requests one run per binlog window and keeps "
            "the committed replication offset (file/pos, GTID set) in its cursor."
        ),
    )
    def _sensor(context: dg.SensorEvaluationContext):
        return evaluation(context)

    return _sensor


@dataclass(frozen=True)
class BinlogSensorEvaluation:
    """One evaluation of the binlog sensor :func:`build_mysql_cdc_sensor` builds (its options as
    fields): :func:`evaluate_tick`, then the tick's report: warnings and problems in the tick's
    log, the tables' runless heartbeats (:func:`.heartbeat.table_heartbeats`), the capture's
    health on the binlog asset (:func:`.health.health_observation`) and, on a tick that requests
    no run, the binlog asset's heartbeat (:func:`.heartbeat.idle_heartbeat`). Reporting never
    fails the tick: its errors are logged and the capture goes on."""

    assets_def: dg.AssetsDefinition
    sensor_name: str
    mysql_resource_key: str = "mysql"
    #: the lake resource's key (the owner marker's check, when the assets use that resource)
    lake_resource_key: str = "lake"
    minimum_interval_seconds: int = 30
    retention_margin_files: int = 1
    run_wait_seconds: float = 15.0
    table_heartbeat_seconds: float | None = None
    retry_backoff: tuple[float, float] = (10.0, 600.0)
    table_retry_backoff: tuple[float, float] = (RETRY_BASE_SECONDS, RETRY_MAX_SECONDS)
    #: standby runs while caught up (``None``: when the resource follows, ``stream_follow_seconds`` > 0)
    standby: bool | None = None

    def __call__(self, context: dg.SensorEvaluationContext) -> dg.SensorResult:
        """The tick's :class:`dagster.SensorResult`: its run requests or skip reason, the new
        cursor and the asset events it reports."""
        mysql: MySqlCdcResource = getattr(context.resources, self.mysql_resource_key)
        if self.lake_resource_key in self.assets_def.required_resource_keys:
            from .lake_owner import check_for_tick  # another instance's lake prefix: the tick fails

            check_for_tick(context, getattr(context.resources, self.lake_resource_key), mysql.server_name)
        cursor = StreamCursor.parse(context.cursor, self.sensor_name)
        plan, requests = evaluate_tick(
            cursor,
            mysql,
            context.instance,
            self.assets_def,
            retention_margin_files=self.retention_margin_files,
            run_wait_seconds=self.run_wait_seconds,
            retry_backoff=self.retry_backoff,
            table_retry_backoff=self.table_retry_backoff,
            sensor_name=self.sensor_name,
            standby=self.standby if self.standby is not None else float(mysql.stream_follow_seconds) > 0,
        )
        for w in plan.warnings:
            context.log.warning(w)
        if requests:  # a skipped tick has them in its skip reason
            for problem in plan.problems:
                context.log.warning(problem)
        new_cursor = plan.cursor.to_json()
        every = max(60, 4 * self.minimum_interval_seconds)
        # a tick whose only request is a standby run is caught up: the heartbeats go on
        standby = bool(requests) and all(r.tags.get(STANDBY_TAG) == "true" for r in requests)
        reason = plan.skip_reason or (
            f"caught up at {plan.cursor.committed}: a standby run waits for the next change"
            if standby
            else "nothing to do"
        )
        caught_up = (
            plan.cursor.committed if (standby or not requests) and reason.startswith("caught up") else None
        )
        events = self._capture_events(context, plan, caught_up, reason, every)
        if requests:
            if plan.skip_reason:  # what the tick committed before requesting (a dead run's windows ...)
                context.log.info(plan.skip_reason)
            if standby:
                events = [*self._binlog_heartbeat(context, plan, mysql, reason, every), *events]
            return dg.SensorResult(run_requests=requests, cursor=new_cursor, asset_events=events or None)
        context.log.info(f"Skipped: {reason}")  # the tick's log shows it (the tick list, on hover)
        heartbeat = self._binlog_heartbeat(context, plan, mysql, reason, every)
        return dg.SensorResult(skip_reason=reason, cursor=new_cursor, asset_events=[*heartbeat, *events])

    def _capture_events(
        self,
        context: dg.SensorEvaluationContext,
        plan: Plan,
        caught_up: BinlogPosition | None,
        reason: str,
        every: float,
    ) -> list[dg.AssetMaterialization | dg.AssetCheckEvaluation | dg.AssetObservation]:
        """The quiet tables' heartbeats and the capture's health observation (when it changed)."""
        beat_errors: list[str] = []
        try:
            beats = table_heartbeats(
                context.instance,
                self.assets_def,
                caught_up,
                reason,
                default_every_seconds=every,
                every_seconds=self.table_heartbeat_seconds,
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
                self.sensor_name,
                binlog_key_of(self.assets_def),
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
        return events

    def _binlog_heartbeat(
        self,
        context: dg.SensorEvaluationContext,
        plan: Plan,
        mysql: MySqlCdcResource,
        reason: str,
        every: float,
    ) -> list[dg.AssetMaterialization | dg.AssetCheckEvaluation]:
        """The binlog asset's heartbeat of a tick that requests no run (``[]`` when not due or
        when it failed: the error is logged)."""
        try:
            return idle_heartbeat(
                context.instance,
                self.assets_def,
                plan.cursor.committed,
                reason,
                every,
                mysql=mysql,
                retention_margin_files=self.retention_margin_files,
            )
        except Exception as e:  # noqa: BLE001 - heartbeats never fail the tick (capture goes on)
            context.log.error(f"binlog heartbeat failed: {type(e).__name__}: {e}")
            return []
