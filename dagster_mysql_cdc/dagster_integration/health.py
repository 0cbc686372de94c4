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

import re
import time
from dataclasses import dataclass, field
from typing import Any

import dagster as dg

from ..errors import error_text

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


#: A token of a message longer than this (a GTID set of many domains, a long URI) is shortened
#: first, at its separators, by :func:`shorten`.
LONG_TOKEN = 48


def _shorter_token(token: str, keep: int = 18) -> str:
    """``token`` with its middle replaced by ``…`` between two of its separators (``,`` ``/`` ``:``
    ``;``), keeping about ``keep`` characters at each end (whole GTID ranges, path segments);
    ``token`` itself when it has no such separators."""
    seps = [i for i, ch in enumerate(token) if ch in ",/:;"]
    head = [i for i in seps if i >= keep // 2 and i <= keep]
    tail = [i for i in seps if len(token) - keep <= i <= len(token) - keep // 2]
    if not head or not tail or head[-1] >= tail[0]:
        return token
    return token[: head[-1] + 1] + "…" + token[tail[0] :]


def shorten(text: str, limit: int) -> str:
    """``text`` in at most ``limit`` characters, cut on whole words, keeping its beginning (what
    failed) and its end (the messages of this library end with the fix): first its overlong
    tokens (GTID sets, URIs: longer than :data:`LONG_TOKEN`) lose their middle between
    separators, then its middle sentences go (whole, marked `` … ``), and if it is still too long
    its middle words."""
    if len(text) <= limit:
        return text
    words = text.split(" ")
    for i in sorted(range(len(words)), key=lambda j: -len(words[j])):
        if len(words[i]) <= LONG_TOKEN or sum(map(len, words)) + len(words) - 1 <= limit:
            break
        words[i] = _shorter_token(words[i])
    text = " ".join(words)
    sentences = re.split(r"(?<=[.;])\s+(?=[A-Z(])", text)
    if len(sentences) > 2:  # the middle sentences go first, whole, the first and the last kept
        first, *middle, last = sentences
        while middle and len(text) > limit:
            middle.pop(0)
            text = " ".join([first, "…", *middle, last])
    if len(text) <= limit:
        return text
    if limit < 24:
        return text[: limit - 1] + "…"
    mark = " … "
    head_room = (limit - len(mark)) // 2
    tail_room = limit - len(mark) - head_room
    head, tail = text[:head_room], text[len(text) - tail_room :]
    space = head.rfind(" ")
    if space > head_room // 2:  # whole words (unless one long token fills the room)
        head = head[:space]
    space = tail.find(" ")
    if 0 <= space < tail_room // 2:
        tail = tail[space + 1 :]
    return head.rstrip() + mark + tail.lstrip()


def first_line(text: str | None, limit: int = 200) -> str:
    """The first non-empty line of ``text`` (with the ``- item`` lines that follow a line ending
    in a colon: the problems a :class:`~..errors.PreflightError` lists), in at most ``limit``
    characters (:func:`shorten`: whole words, the fix at the end kept). Items that do not fit are
    shortened each to its share, so that every one keeps its end (its own fix)."""
    lines = [line.strip() for line in (text or "").splitlines() if line.strip()]
    if not lines:
        return ""
    line = lines[0]
    if line.endswith(":"):
        items = []
        for more in lines[1:]:
            if not more.startswith(("- ", "* ")):
                break
            items.append(more)
        joined = " ".join([line, *items])
        if len(items) > 1 and len(joined) > limit:
            # the header's words after its label go first ("PreflightError: MySQL/MariaDB source
            # is not ready ...:" -> "PreflightError:"), then each item is shortened to its share
            label = line.split(": ", 1)[0] + ":" if ": " in line else ""
            share = (limit - len(label) - len(items)) // len(items)
            if share >= 60:
                return " ".join([label, *(shorten(i, share) for i in items)]).strip()
        line = joined
    return shorten(line, limit)


def _is_framework_wrapper(cls_name: str | None) -> bool:
    """Whether an error of class ``cls_name`` is Dagster's wrapper of the error user code raised
    (``SensorExecutionError``, ``DagsterExecutionStepExecutionError``, ... : the user-code error
    boundary raises it *from* the error, which is its ``cause``)."""
    import dagster._core.errors as dagster_errors

    cls = getattr(dagster_errors, cls_name or "", None)
    if isinstance(cls, type) and issubclass(
        cls, (dagster_errors.DagsterUserCodeExecutionError, dagster_errors.DagsterUserCodeProcessError)
    ):
        return True
    return (cls_name or "").startswith("Dagster")


def meaningful_error(error: Any) -> Any:
    """The error that says why, in a Dagster ``SerializableErrorInfo`` chain: Dagster's wrappers
    (:func:`_is_framework_wrapper`, e.g. a failed sensor tick's ``SensorExecutionError: Error
    occurred during the execution of evaluation_fn for sensor ...``) are unwrapped down their
    ``cause`` (else ``context``) to the error the code raised, e.g. ``SourceConnectionError: Access
    denied ...``. ``None`` stays ``None``."""
    while error is not None and _is_framework_wrapper(error.cls_name):
        inner = error.cause or error.context
        if inner is None:
            break
        error = inner
    return error


def error_line(error: Any, limit: int = 300) -> str:
    """``"<Class>: <first line of its message>"`` of a ``SerializableErrorInfo``, unwrapped to its
    :func:`meaningful_error` and labelled once (:func:`..errors.error_text`), in at most ``limit``
    characters."""
    err = meaningful_error(error)
    if err is None:
        return ""
    return first_line(error_text(err.cls_name, err.message), limit)


def run_failure_reason(instance: Any, run_id: str) -> str:
    """Why run ``run_id`` failed: its first step failure's error (``<Error>: message``), else the
    error of an engine event (a run that failed before any step: its code location could not be
    loaded, its asset selection no longer resolves; Dagster's run failure then only says "marked
    as failed from outside the execution context"), else its run failure message, else ``"no
    failure recorded"`` (a run killed from outside)."""
    steps = instance.all_logs(run_id, of_type=dg.DagsterEventType.STEP_FAILURE)
    for rec in steps:
        data = rec.dagster_event.step_failure_data if rec.dagster_event else None
        err = getattr(data, "error", None)
        if err is not None:
            # Dagster wraps the op's exception (DagsterExecutionStepExecutionError): its cause is ours
            return error_line(err, 300)
    for rec in instance.all_logs(run_id, of_type=dg.DagsterEventType.ENGINE_EVENT):
        data = rec.dagster_event.engine_event_data if rec.dagster_event else None
        err = getattr(data, "error", None)
        if err is not None:
            return error_line(err, 300)
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
            out.last_tick_error = error_line(last.error, 300)
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
    #: it failed because the table's capture was stopped (:data:`.checks.STOPPED_EXPLANATION`):
    #: the stop itself is the problem to report, or it is over (the table caught up)
    of_stop: bool = False


def failing_checks(instance: Any, server_name: str) -> list[FailingCheck]:
    """The checks of the capture's assets (asset keys under ``server_name``) whose latest
    evaluation failed (one event log query for all of them: 300 tables made 1,500)."""
    from .checks import STOPPED_EXPLANATION

    out: list[FailingCheck] = []
    keys = [k for k in instance.get_asset_keys() if k.path and k.path[0] == server_name]
    cks = [
        dg.AssetCheckKey(k, n) for k in sorted(keys, key=lambda k: k.to_user_string()) for n in CHECK_NAMES
    ]
    latest = instance.event_log_storage.get_latest_asset_check_execution_by_key(cks) if cks else {}
    for ck in cks:
        rec = latest.get(ck)
        ev = rec.evaluation if rec is not None else None
        if isinstance(ev, dg.AssetCheckEvaluation) and not ev.passed:
            md = ev.metadata or {}
            text = next(
                (str(md[k].value) for k in ("explanation", "gaps", "error") if k in md),
                ev.description or "",
            )
            out.append(
                FailingCheck(
                    ck.asset_key.to_user_string(),
                    ck.name,
                    ev.severity.value if ev.severity else "ERROR",
                    first_line(text, 160),
                    of_stop=text.startswith(STOPPED_EXPLANATION),
                )
            )
    return out


#: Seconds during which a skipped signal is reported (and makes the status unhealthy).
SKIPPED_SIGNALS_WITHIN = 3600.0


def skipped_signals(
    instance: Any, server_name: str, now: float, within: float = SKIPPED_SIGNALS_WITHIN, limit: int = 200
) -> list[dict[str, Any]]:
    """The signals the capture skipped (rejected: invalid, unknown tables, unsafe filters ...) in
    the last ``within`` seconds, newest first: ``{"message", "age_seconds", "run_id"}`` each, from
    the ``signals_rejected`` metadata of the binlog asset's (``[server_name, "binlog"]``) newest
    ``limit`` materializations."""
    records = instance.fetch_materializations(
        dg.AssetRecordsFilter(asset_key=dg.AssetKey([server_name, "binlog"]), after_timestamp=now - within),
        limit=limit,
        ascending=False,
    ).records
    out: list[dict[str, Any]] = []
    for rec in records:
        mat = rec.asset_materialization
        rejected = mat.metadata.get("signals_rejected") if mat is not None else None
        for message in reversed(list(getattr(rejected, "value", None) or [])):
            out.append(
                {"message": str(message), "age_seconds": round(now - rec.timestamp, 1), "run_id": rec.run_id}
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
    #: signals the capture skipped recently (:func:`skipped_signals`)
    skipped_signals: list[dict[str, Any]] = field(default_factory=list)


def capture_health(
    instance: Any,
    state: Any,
    sensor_name: str,
    retry_at: float | None,
    now: float | None = None,
    stale_seconds: float | None = None,
    stopped: dict[str, dict] | None = None,
    signals_within: float = SKIPPED_SIGNALS_WITHIN,
) -> CaptureHealth:
    """The health of the capture driven by sensor ``sensor_name`` (instigator ``state``);
    ``retry_at`` and ``stopped`` are the sensor cursor's; signals skipped in the last
    ``signals_within`` seconds are listed (:func:`skipped_signals`)."""
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
            "succeeded_since": _succeeded_since(instance, state, sensor_name, record),
        }
    server = runs[0].tags.get(SERVER_TAG) if runs else None
    if server:
        health.failing_checks = failing_checks(instance, server)
        health.skipped_signals = skipped_signals(instance, server, now, signals_within)
    if retry_at is not None:
        health.retry_in_seconds = round(max(0.0, retry_at - now), 1)
    health.stopped = dict(stopped or {})
    return health


def _succeeded_since(instance: Any, state: Any, sensor_name: str, failed: Any) -> bool:
    """Whether a run of the sensor created after the failed run (its record ``failed``)
    succeeded. Not only the newest run counts: after a killed run the sensor's retry may have
    succeeded and the next run, a following or standby run, still be going for minutes."""
    ok = _sensor_runs(instance, state, sensor_name, [dg.DagsterRunStatus.SUCCESS])
    if not ok or failed is None:
        return False
    record = instance.get_run_record_by_id(ok[0].run_id)
    return record is not None and record.create_timestamp > failed.create_timestamp


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
    problems: tuple[str, ...] | list[str] = (),
) -> dg.AssetObservation | None:
    """The capture's health as an observation of the binlog asset (shown on its page in the UI),
    reported by the sensor when it changed since the last one (``None``: unchanged).

    One line each: the earlier ticks' failures (a failing tick reports nothing itself; the next
    tick that succeeds does), the last run failure and its reason, the time of the retry, the
    repair or incremental snapshot in progress, the tables whose capture is stopped
    (:func:`stopped_lines`), this tick's own notes (a heartbeat that failed ...), and the
    problems of the capture's table selection (``problems``: a ``table_include_list`` entry that
    matches no table; in full, they end with the fix; also in the ``selection_problems``
    metadata). Failing checks are on their assets already.
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
                + (error_line(e, 240) if e else "no error recorded")
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
    lines += [f"capture selection: {p}" for p in problems]
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
            **({"selection_problems": dg.MetadataValue.json(list(problems))} if problems else {}),
        },
    )


def find_sensor_state(instance: Any, sensor_name: str) -> Any:
    """The instigator state of the sensor named ``sensor_name`` in ``instance``.

    Raises:
        LookupError: no sensor of that name has state in the instance (the message lists those that do).
    """
    from dagster._core.definitions.run_request import InstigatorType

    states = list(instance.all_instigator_state(instigator_type=InstigatorType.SENSOR))
    for s in states:
        if s.name == sensor_name:
            return s
    known = sorted({s.name for s in states})
    raise LookupError(
        f"No sensor named {sensor_name!r} has state in the Dagster instance at "
        f"{getattr(instance, 'root_directory', '?')} (sensors with state: {known or 'none'}). Check "
        "DAGSTER_HOME (the instance the daemon uses) and the sensor name (`dagster sensor list`)."
    )


def _origin(instance: Any, sensor_name: str) -> tuple[str, str] | None:
    """``(origin id, selector id)`` of the sensor's ticks, ``None`` when the instance has no state
    for it (evaluated outside a daemon, e.g. :func:`.local.run_sensor_ticks`)."""
    try:
        state = find_sensor_state(instance, sensor_name)
    except Exception:  # noqa: BLE001 - no state for it, or an instance without schedule storage
        return None
    return state.instigator_origin_id, state.selector_id
