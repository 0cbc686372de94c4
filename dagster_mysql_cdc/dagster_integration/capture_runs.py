"""The capture's runs as the Dagster instance records them, read by the binlog sensor
(:mod:`.sensor`): which runs are this capture's (:func:`is_capture_run`), the latest window run
requested from an offset (:func:`window_run_starting_at`), what a run reported on the binlog asset
(:func:`binlog_materializations`, :func:`reported_end`, :func:`reported_json`), and how a run
that did not succeed ended (:func:`run_died`: killed, or failed by itself; :func:`run_progress`:
the follow-on windows a following run committed before it stopped).

Everything here reads the instance only; nothing connects to the source.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import dagster as dg

from ..events import BinlogPosition
from .cursor import InFlight
from .protocol import (
    CAPTURE_TAG,
    MODE_TAG,
    REQUEST_TAG,
    SERVER_TAG,
    WINDOW_END_TAG,
    WINDOW_START_TAG,
    binlog_asset_key,
    position_from_metadata,
    position_from_tag,
    position_tag,
)
from .run_tags import ReportedProgress, progress_tag

if TYPE_CHECKING:
    from .run_requests import SensorTick


def binlog_key_of(assets_def: dg.AssetsDefinition) -> dg.AssetKey:
    """The key of the ``binlog`` asset of ``assets_def`` (:func:`.protocol.binlog_asset_key`).

    Raises:
        ValueError: ``assets_def`` has no binlog asset (built without ``include_binlog``).
    """
    key = binlog_asset_key(assets_def.specs)
    if key is not None:
        return key
    raise ValueError(
        f"{assets_def.node_def.name} has no binlog asset; build it with @mysql_cdc_assets "
        "(include_binlog=True)"
    )


#: Newest binlog-asset materializations read to find a run's own (see binlog_materializations).
RECENT_BINLOG_MATERIALIZATIONS = 20


def binlog_materializations(instance, run_id: str, binlog_key: dg.AssetKey) -> list[dg.AssetMaterialization]:
    """The binlog asset's materializations by run ``run_id``, oldest first.

    Read among the binlog asset's newest materializations (one indexed query, whatever the
    number of tables the run materialized: the run being settled is nearly always the newest);
    when the run's are not all among them, from the run's materializations (every table's)."""
    recent = instance.fetch_materializations(
        dg.AssetRecordsFilter(asset_key=binlog_key), limit=RECENT_BINLOG_MATERIALIZATIONS, ascending=False
    ).records
    run = instance.get_run_record_by_id(run_id)
    # every materialization of the run is among them when the oldest one read predates the run
    complete = run is not None and (
        len(recent) < RECENT_BINLOG_MATERIALIZATIONS
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


def reported_json(mats: list[dg.AssetMaterialization], name: str):
    """A JSON metadata entry a run reported on the binlog asset (``mats``: its binlog
    materializations, :func:`binlog_materializations`; ``None`` if absent)."""
    for mat in mats:
        if name in mat.metadata:
            return mat.metadata[name].value
    return None


def reported_end(mats: list[dg.AssetMaterialization], prefix: str) -> BinlogPosition | None:
    """The position a run reported on the binlog asset (``<prefix>_file/_pos/_gtid_set``;
    ``mats``: its binlog materializations, :func:`binlog_materializations`)."""
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


def is_capture_run(run: dg.DagsterRun, tick: SensorTick, capture: str | None) -> bool:
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


def window_run_starting_at(instance, start: BinlogPosition, tick: SensorTick) -> InFlight | None:
    """The latest attempt of a stream window of this capture (:func:`is_capture_run`) that
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
        if is_capture_run(r, tick, tick.capture)
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


def wait_for_run(
    instance,
    run: dg.DagsterRun,
    seconds: float,
    poll: float = 0.2,
    check: Callable[[dg.DagsterRun], dg.DagsterRun] | None = None,
    check_every: float = 2.0,
) -> dg.DagsterRun:
    """``run`` once it is finished, or as it is after ``seconds`` (status polled every ``poll`` s).

    ``check``: called with the run every ``check_every`` seconds while it is not finished; what
    it returns replaces the run (e.g. :func:`.run_settlement`'s dead-worker verdict marks a run
    whose worker is gone failed, so a tick does not wait ``seconds`` for a run that can never
    finish: Dagster's default run launcher leaves such a run ``STARTED``, see :mod:`.liveness`)."""
    deadline = time.monotonic() + seconds
    next_check = time.monotonic() + check_every
    while not run.is_finished and time.monotonic() < deadline:
        time.sleep(poll)
        run = instance.get_run_by_id(run.run_id) or run
        if check is not None and not run.is_finished and time.monotonic() >= next_check:
            run = check(run)
            next_check = time.monotonic() + check_every
    return run


#: The code server's launch error for a run worker that died of a signal before it ran anything
#: (``DagsterLaunchFailedError: GRPC server: Subprocess for <run> terminated unexpectedly with
#: exit code -9``): a SIGKILL or an OOM kill, not a failure of the window.
_SIGNAL_EXIT = re.compile(r"terminated unexpectedly with exit code -\d+")


def killed_by_signal(error: Any) -> bool:
    """Whether a run's engine error (a ``SerializableErrorInfo`` chain) says its worker process
    died of a signal (see :data:`_SIGNAL_EXIT`)."""
    while error is not None:
        if _SIGNAL_EXIT.search(getattr(error, "message", "") or ""):
            return True
        error = getattr(error, "cause", None) or getattr(error, "context", None)
    return False


def run_died(instance, run: dg.DagsterRun) -> bool:
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
            if error is not None and not killed_by_signal(error):  # the worker could not run the job
                return False
        elif getattr(getattr(data, "failure_reason", None), "value", None) in _OWN_FAILURE_REASONS:
            return False
    return True


def run_progress(run: dg.DagsterRun, inf: InFlight) -> ReportedProgress | None:
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
