"""The capture's health as the Dagster instance records it: is the sensor ticking, why did its
last tick or run fail, which checks fail, which repairs run, when is the next retry.

Read by the status command (:mod:`.status`) and by the sensor, which reports the same health on
the binlog asset (:func:`health_observation`). Everything here reads the instance only (the
sensor's state and tick history, run and check records); nothing connects to the source.

- *Sensor not ticking*: its last tick is older than :func:`stale_after` its interval (the daemon
  is not running, e.g. ``dagster dev`` lost its ``dagster-daemon``; or the sensor is stopped).
  The daemon's own ``SENSOR`` heartbeat is reported with it.
- *Last tick error*: the error of the latest tick when it failed (``FAILURE``), with the number of
  failed ticks in a row (a failing tick requests no run: capture is stopped).
- *Last run failure*: the reason of the sensor's latest failed run (its first step failure's error,
  else the run failure message).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import dagster as dg

#: The checks whose latest result the health lists when it failed.
CHECK_NAMES = (
    "row_count_matches_source",
    "checksum_matches_source",
    "schema_matches_source",
    "binlog_retention",
    "changes_in_binlog",
)


def stale_after(interval_seconds: float | None) -> float:
    """Seconds without a tick after which a running sensor is reported as not ticking: four
    intervals, at least 60 s (the daemon evaluates sensors every 5 s at best, and a tick may wait
    ``run_wait_seconds`` for its run)."""
    return max(60.0, 4.0 * float(interval_seconds or 30))


def first_line(text: str | None, limit: int = 200) -> str:
    """The first non-empty line of ``text``, cut to ``limit`` characters."""
    for line in (text or "").splitlines():
        if line.strip():
            line = line.strip()
            return line if len(line) <= limit else line[: limit - 1] + "…"
    return ""


def run_failure_reason(instance: Any, run_id: str) -> str:
    """Why run ``run_id`` failed: its first step failure's error (``<Error>: message``), else its
    run failure message, else ``"no failure recorded"`` (a run killed from outside)."""
    steps = instance.all_logs(run_id, of_type=dg.DagsterEventType.STEP_FAILURE)
    for rec in steps:
        data = rec.dagster_event.step_failure_data if rec.dagster_event else None
        err = getattr(data, "error", None)
        # Dagster wraps the op's exception (DagsterExecutionStepExecutionError): its cause is ours
        while err is not None and err.cause is not None and (err.cls_name or "").startswith("Dagster"):
            err = err.cause
        if err is not None:
            cls = err.cls_name or "Error"
            message = first_line(err.message)
            return message if message.startswith(cls) else f"{cls}: {message}"
    for rec in instance.all_logs(run_id, of_type=dg.DagsterEventType.RUN_FAILURE):
        if rec.dagster_event is not None and rec.dagster_event.message:
            return first_line(rec.dagster_event.message)
    return "no failure recorded (the run was killed or canceled)"


@dataclass
class SensorHealth:
    """The sensor's ticks (JSON-safe).

    Attributes:
        state: ``RUNNING``, ``STOPPED`` or ``DECLARED_IN_CODE`` (the instance's sensor status).
        interval_seconds: the sensor's minimum interval.
        last_tick_age_seconds: seconds since the latest tick started (``None``: never ticked).
        ticking: the latest tick is younger than :func:`stale_after` (``None``: cannot tell).
        last_tick_status: ``SKIPPED``, ``SUCCESS``, ``FAILURE`` or ``STARTED``.
        last_tick_error: the latest tick's error when it failed.
        failed_ticks_in_a_row: how many of the latest ticks failed.
        daemon_heartbeat_age_seconds: age of the ``SENSOR`` daemon's heartbeat (``None``: none).
    """

    state: str | None = None
    interval_seconds: float | None = None
    last_tick_age_seconds: float | None = None
    ticking: bool | None = None
    last_tick_status: str | None = None
    last_tick_error: str | None = None
    failed_ticks_in_a_row: int = 0
    daemon_heartbeat_age_seconds: float | None = None


def sensor_health(
    instance: Any, state: Any, now: float | None = None, stale_seconds: float | None = None
) -> SensorHealth:
    """:class:`SensorHealth` of the sensor whose instigator ``state`` the instance holds
    (``stale_seconds``: not ticking after this long without a tick; default :func:`stale_after`)."""
    now = time.time() if now is None else now
    data = getattr(state, "instigator_data", None)
    out = SensorHealth(
        state=getattr(getattr(state, "status", None), "value", None),
        interval_seconds=getattr(data, "min_interval", None),
    )
    ticks = instance.get_ticks(state.instigator_origin_id, state.selector_id, limit=20)
    if ticks:
        last = ticks[0]
        out.last_tick_age_seconds = round(now - last.timestamp, 1)
        out.last_tick_status = last.status.value
        out.ticking = now - last.timestamp < (stale_seconds or stale_after(out.interval_seconds))
        for t in ticks:
            if t.status.value != "FAILURE":
                break
            out.failed_ticks_in_a_row += 1
        if last.status.value == "FAILURE" and last.error is not None:
            out.last_tick_error = first_line(f"{last.error.cls_name}: {last.error.message}", 300)
    beats = instance.get_daemon_heartbeats()
    beat = beats.get("SENSOR") if beats else None
    if beat is not None:
        out.daemon_heartbeat_age_seconds = round(now - beat.timestamp, 1)
    return out


@dataclass
class FailingCheck:
    """A check whose latest result failed."""

    asset: str
    check: str
    severity: str
    description: str


def failing_checks(instance: Any, server_name: str) -> list[FailingCheck]:
    """The checks of the capture's assets (asset keys under ``server_name``) whose latest
    evaluation failed."""
    out: list[FailingCheck] = []
    keys = [k for k in instance.get_asset_keys() if k.path and k.path[0] == server_name]
    for key in sorted(keys, key=lambda k: k.to_user_string()):
        for name in CHECK_NAMES:
            rec = instance.get_latest_asset_check_evaluation_record(dg.AssetCheckKey(key, name))
            ev = rec.evaluation if rec is not None else None
            if isinstance(ev, dg.AssetCheckEvaluation) and not ev.passed:
                md = ev.metadata or {}
                text = next(
                    (str(md[k].value) for k in ("explanation", "gaps", "error") if k in md),
                    ev.description or "",
                )
                out.append(
                    FailingCheck(
                        key.to_user_string(),
                        name,
                        ev.severity.value if ev.severity else "ERROR",
                        first_line(text, 160),
                    )
                )
    return out


@dataclass
class CaptureHealth:
    """Everything :func:`capture_health` found (JSON-safe)."""

    sensor: SensorHealth = field(default_factory=SensorHealth)
    last_run_failure: dict[str, Any] | None = None
    failing_checks: list[FailingCheck] = field(default_factory=list)
    retry_in_seconds: float | None = None
    stopped: dict[str, dict] = field(default_factory=dict)  # the cursor's stopped tables


def capture_health(
    instance: Any,
    state: Any,
    sensor_name: str,
    retry_at: float | None,
    now: float | None = None,
    stale_seconds: float | None = None,
    stopped: dict[str, dict] | None = None,
) -> CaptureHealth:
    """The health of the capture driven by sensor ``sensor_name`` (instigator ``state``);
    ``retry_at`` and ``stopped`` are the sensor cursor's."""
    from .protocol import SERVER_TAG

    now = time.time() if now is None else now
    health = CaptureHealth(sensor=sensor_health(instance, state, now, stale_seconds))
    # a sensor of the same name in another code location launches runs with the same sensor tag:
    # keep the runs of this sensor's code location (as Dagster's run-key dedupe does)
    runs = _sensor_runs(instance, state, sensor_name)
    failed = _sensor_runs(
        instance, state, sensor_name, [dg.DagsterRunStatus.FAILURE, dg.DagsterRunStatus.CANCELED]
    )
    if failed:
        run = failed[0]
        record = instance.get_run_record_by_id(run.run_id)
        ended = getattr(record, "end_time", None) if record is not None else None
        health.last_run_failure = {
            "run_id": run.run_id,
            "status": run.status.value,
            "age_seconds": round(now - ended, 1) if ended else None,
            "reason": run_failure_reason(instance, run.run_id),
            "succeeded_since": bool(runs)
            and runs[0].run_id != run.run_id
            and runs[0].status == dg.DagsterRunStatus.SUCCESS,
        }
    server = runs[0].tags.get(SERVER_TAG) if runs else None
    if server:
        health.failing_checks = failing_checks(instance, server)
    if retry_at is not None:
        health.retry_in_seconds = round(max(0.0, retry_at - now), 1)
    health.stopped = dict(stopped or {})
    return health


def _sensor_runs(instance: Any, state: Any, sensor_name: str, statuses: list | None = None) -> list[Any]:
    """The newest run launched by sensor ``sensor_name`` of the code location of its instigator
    ``state`` (with one of ``statuses``), as a list of at most one. A run without an origin (run
    in process) counts by its sensor tag alone."""
    filters = dg.RunsFilter(tags={"dagster/sensor_name": sensor_name}, statuses=statuses or [])
    mine = getattr(getattr(state, "origin", None), "repository_origin", None)
    for run in instance.get_runs(filters=filters, limit=20):
        origin = getattr(run, "remote_job_origin", None)
        if mine is None or origin is None or origin.repository_origin.get_selector() == mine.get_selector():
            return [run]
    return []


def health_lines(health: CaptureHealth, sensor_name: str) -> list[str]:
    """One short line per concern: the sensor's ticks, the last tick error, the last run
    failure, the retry, the failing checks."""
    s = health.sensor
    if s.state == "STOPPED":
        ticks = f"sensor: STOPPED; start it: dagster sensor start {sensor_name} (or turn it on in the UI)"
    elif s.last_tick_age_seconds is None:
        ticks = "sensor: no tick yet (is dagster-daemon running? `dagster dev` starts one)"
    elif s.ticking is False:
        daemon = (
            f"; the daemon's SENSOR heartbeat is {s.daemon_heartbeat_age_seconds:.0f} s old"
            if s.daemon_heartbeat_age_seconds is not None
            else "; no daemon heartbeat recorded"
        )
        ticks = (
            f"sensor: NOT TICKING, last tick {s.last_tick_age_seconds:.0f} s ago (interval "
            f"{s.interval_seconds or '?'} s){daemon}: start dagster-daemon (or restart `dagster dev`)"
        )
    else:
        ticks = f"sensor: ticking, last tick {s.last_tick_age_seconds:.0f} s ago ({s.last_tick_status}, interval {s.interval_seconds or '?'} s)"
    lines = [ticks]
    if s.last_tick_error:
        lines.append(
            f"last tick error ({s.failed_ticks_in_a_row} failed tick(s) in a row, no run requested): {s.last_tick_error}"
        )
    else:
        lines.append("last tick error: none")
    f = health.last_run_failure
    if f:
        age = f" {f['age_seconds']:.0f} s ago" if f.get("age_seconds") is not None else ""
        since = " (a run succeeded since)" if f.get("succeeded_since") else ""
        lines.append(
            f"last run failure: run {f['run_id'][:8]} {f['status']}{age}{since}: {first_line(f['reason'], 160)}"
        )
    else:
        lines.append("last run failure: none")
    if health.retry_in_seconds is not None:
        lines.append(
            f"retry: the failed window is retried in {health.retry_in_seconds:.0f} s (exponential backoff)"
        )
    lines += stopped_lines(health.stopped) or ["stopped tables: none"]
    checks = health.failing_checks
    if checks:
        shown = "; ".join(f"{c.asset} {c.check} ({c.severity}): {c.description}" for c in checks[:3])
        more = f"; and {len(checks) - 3} more" if len(checks) > 3 else ""
        lines.append(f"failing checks: {len(checks)}: {shown}{more}"[:400])
    else:
        lines.append("failing checks: none")
    return lines


def stopped_lines(stopped: dict[str, dict] | None, now: float | None = None) -> list[str]:
    """One line per table whose capture is stopped (the sensor cursor's ``stopped``, see
    :mod:`..engine.isolation`): since where, why, when the next catch-up is tried."""
    from datetime import UTC, datetime

    from ..engine.isolation import StoppedTable

    now = time.time() if now is None else now
    out = []
    for name, d in sorted((stopped or {}).items()):
        st = StoppedTable.from_dict(d)
        when = (
            "with the next window"
            if st.retry_at <= now
            else "at " + datetime.fromtimestamp(st.retry_at, UTC).isoformat(timespec="seconds")
        )
        out.append(
            f"table STOPPED: {name} is not captured from {st.since.file}:{st.since.pos} on "
            f"({st.attempts} failed attempt(s)): {first_line(st.error, 200)}; caught up {when}, or at "
            "once after it is materialized (docs/operations.md, 'A table stopped')"
        )
    return out


def health_observation(
    instance: Any,
    sensor_name: str,
    binlog_key: dg.AssetKey,
    *,
    last_error: str | None,
    retry_at: float | None,
    incremental: dict | None,
    tick_notes: list[str],
    stopped: dict[str, dict] | None = None,
    now: float | None = None,
) -> dg.AssetObservation | None:
    """The capture's health as an observation of the binlog asset (shown on its page in the UI),
    reported by the sensor when it changed since the last one (``None``: unchanged).

    One line each: the earlier ticks' failures (a failing tick reports nothing itself; the next
    tick that succeeds does), the last run failure and its reason, the time of the retry, the
    repair or incremental snapshot in progress, the tables whose capture is stopped
    (:func:`stopped_lines`), and this tick's own notes (a heartbeat that failed ...). Failing
    checks are on their assets already.
    """
    from datetime import UTC, datetime

    now = time.time() if now is None else now
    lines = []
    origin = _origin(instance, sensor_name)
    if origin is not None:
        ticks = instance.get_ticks(*origin, limit=20)
        errors = [t for t in ticks[1:] if t.status.value == "FAILURE"]  # ticks before this one
        if errors:
            e = errors[0].error
            when = datetime.fromtimestamp(errors[0].timestamp, UTC).isoformat(timespec="seconds")
            lines.append(
                f"earlier ticks failed ({len(errors)} of the last {len(ticks) - 1}), latest at {when}: "
                + first_line(f"{e.cls_name}: {e.message}" if e else "", 200)
            )
    lines.append(
        f"last run failure: {first_line(last_error, 240)}" if last_error else "last run failure: none"
    )
    if retry_at is not None:
        when = datetime.fromtimestamp(retry_at, UTC).isoformat(timespec="seconds")
        lines.append(f"the failed window is retried at {when} (exponential backoff)")
    if incremental and incremental.get("tables"):
        cur = incremental["tables"][0]
        reason = cur.get("reason")
        lines.append(
            f"{'repair' if reason else 'incremental snapshot'} {incremental.get('snapshot_id')}: {cur['table']} "
            f"chunk {cur.get('chunks', 0)}, {cur.get('rows', 0)} rows, {len(incremental['tables']) - 1} queued"
            + (f"; why: {first_line(reason, 120)}" if reason else "")
        )
    lines += stopped_lines(stopped, now)
    lines += [first_line(n, 240) for n in tick_notes]
    text = "\n".join(f"- {line}" for line in lines)
    previous = instance.fetch_observations(binlog_key, limit=1).records
    observed = previous[0].asset_observation if previous else None
    if observed is not None and "health" in observed.metadata and observed.metadata["health"].value == text:
        return None
    if observed is None and lines == ["last run failure: none"]:
        return None  # healthy from the start: nothing to say
    return dg.AssetObservation(
        asset_key=binlog_key,
        description="Capture health (`python -m dagster_mysql_cdc status` shows it with the lag)",
        metadata={
            "health": dg.MetadataValue.md(text),
            "last_run_failure": dg.MetadataValue.text(last_error or "none"),
            "retry_at": dg.MetadataValue.text(
                datetime.fromtimestamp(retry_at, UTC).isoformat(timespec="seconds") if retry_at else "none"
            ),
            "stopped_tables": dg.MetadataValue.json(stopped or {}),
        },
    )


def _origin(instance: Any, sensor_name: str) -> tuple[str, str] | None:
    """``(origin id, selector id)`` of the sensor's ticks, ``None`` when the instance has no state
    for it (evaluated outside a daemon, e.g. :func:`.local.run_sensor_ticks`)."""
    from .status import find_sensor_state

    try:
        state = find_sensor_state(instance, sensor_name)
    except Exception:  # noqa: BLE001 - no state for it, or an instance without schedule storage
        return None
    return state.instigator_origin_id, state.selector_id
