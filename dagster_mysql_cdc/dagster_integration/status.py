"""The capture's state in one line, from the command line (``python -m dagster_mysql_cdc status``).

``dagster sensor cursor`` can only set or delete a cursor; this reads it from the Dagster instance
(``DAGSTER_HOME``) and adds what it means: the committed binlog position, how far the capture is
behind the server (bytes of binlog, and seconds since the oldest event not yet captured, when the
server is reachable), the run in flight and its status, the incremental snapshot's progress
(repairs of changes the binlog does not carry included), and the last error.

Its first line is the verdict (:meth:`CaptureStatus.verdict`): ``HEALTHY: <sensor>`` or
``UNHEALTHY: <sensor>: <cause>``, the cause being the first of :meth:`CaptureStatus.problems`;
the command exits with :data:`EXIT_HEALTHY`, :data:`EXIT_UNHEALTHY` or :data:`EXIT_UNKNOWN`.
"""

from __future__ import annotations

import json
import re
import time
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from ..errors import CdcError, ConfigurationError
from ..events import BinlogPosition
from ..source.binlog import BinlogReader
from ..source.connection import ConnectionSettings, binlog_files, connect, current_position, server_info
from .cursor import CorruptCursorError, InFlight, StreamCursor, purged_binlog_message
from .health import (
    SKIPPED_SIGNALS_WITHIN,
    CaptureHealth,
    capture_health,
    find_sensor_state,
    first_line,
    health_lines,
    shorten,
    stopped_lines,
)

#: Exit status of ``python -m dagster_mysql_cdc status``: no problem found.
EXIT_HEALTHY = 0
#: ... a problem found (:meth:`CaptureStatus.problems`): the first line names it.
EXIT_UNHEALTHY = 1
#: ... bad usage, or the state cannot be read (``DAGSTER_HOME`` unset, unknown sensor, an
#: instance that cannot be opened): nothing is known about the capture.
EXIT_UNKNOWN = 2


@dataclass
class CaptureStatus:
    """What :func:`read_status` found (JSON-safe).

    Attributes:
        sensor: sensor name.
        committed: committed binlog position (``file:pos``) or ``None`` before the first snapshot.
        server: the ``host:port`` asked for the lag (the address recorded in the cursor unless
            one was given), ``None`` with ``--no-server``.
        server_position: the server's current position (``None``: server not asked).
        server_error: why the lag could not be computed (unreachable, purged binlog ...).
        lag_bytes: binlog bytes between the lake's position and the server's current one (across
            files); the lake's position is ``run_committed`` when the run in flight has committed
            windows beyond ``committed``, else ``committed``.
        lag_seconds: seconds since the oldest binlog event not yet in the lake (``0`` when caught
            up), from the same position.
        run_committed: how far the run in flight (a following or standby run) has committed
            (:func:`_run_committed`), when that is beyond ``committed``: the sensor's cursor
            records a following run's windows when the run ends (minutes with
            ``stream_follow_seconds``), the lake has them as each window commits.
        inflight: the run the sensor waits for: kind, window, attempt, run status.
        incremental: incremental snapshot progress (current table, chunks, rows, key progress,
            queued tables, repair reasons).
        last_error: the sensor's last recorded run failure (with its reason).
        health: the sensor's ticks, last tick error, last run failure, retry, failing checks
            (:class:`.health.CaptureHealth`).
        cursor_error: why the stored cursor cannot be read (the sensor's ticks fail with it).
        stopped: the tables whose capture is stopped (the cursor's ``stopped``: since, error,
            attempts, next attempt; see :mod:`..engine.isolation`).
        signals_within: the seconds back in which skipped signals are reported.
        verification: the rotating verification's line (:func:`.rotation.status_line`: per table
            the time since its last full pass, a differing range), ``None`` without its sensor.
        state_due: the tables whose compacted ``state`` lacks changes, with when it is due for a
            compaction by age (the cursor's ``state_due``, epoch seconds).
        caught_up: ``db.table`` -> run id of the stopped tables the run in flight caught up (it
            succeeded and no longer reports them stopped, or it caught them up at its start and
            still follows): the sensor records that at its next tick after the run's end; they
            are left out of ``stopped`` and of the problems meanwhile.
    """

    sensor: str
    committed: str | None
    server: str | None = None
    server_position: str | None = None
    server_error: str | None = None
    lag_bytes: int | None = None
    lag_seconds: float | None = None
    inflight: dict[str, Any] | None = None
    incremental: dict[str, Any] | None = None
    last_error: str | None = None
    health: CaptureHealth | None = None
    cursor_error: str | None = None
    stopped: dict[str, dict] = field(default_factory=dict)
    signals_within: float = SKIPPED_SIGNALS_WITHIN
    verification: str | None = None
    state_due: dict[str, float] = field(default_factory=dict)
    caught_up: dict[str, str] = field(default_factory=dict)
    run_committed: str | None = None

    def lines(self) -> list[str]:
        """One short line per concern (offset and lag, the sensor's ticks, the last tick error,
        the last run failure, the run in flight, the retry, repairs, failing checks)."""
        if self.lag_bytes is not None and self.lag_seconds is not None:
            lag = f"lag {self.lag_bytes} bytes, {self.lag_seconds:.1f} s (server {self.server})"
        elif self.server is None:
            lag = "lag not computed (--no-server)"
        else:
            lag = f"lag unknown: {self.server_error or 'server not asked'}"
        if self.cursor_error:
            out = [f"{self.sensor}: cursor unreadable: {self.cursor_error}"]
        else:
            committed = self.committed or "nothing (no snapshot yet)"
            if self.server_error and self.committed and self.committed in self.server_error:
                committed = committed.split(" ")[0]  # file:pos; the error names the whole position
            ahead = ""
            if self.run_committed and self.inflight and self.inflight.get("run_id"):
                ahead = f" (run {self.inflight['run_id'][:8]} has committed up to {self.run_committed})"
            out = [f"{self.sensor}: committed {committed}{ahead} | {lag}"]
        health = self.health
        if health is not None:
            out += health_lines(health, self.sensor)
        else:
            if self.last_error:
                out.append(f"last run failure: {first_line(self.last_error, 200)}")
            out += stopped_lines(self.stopped)
        for name, run_id in sorted(self.caught_up.items()):
            going = (self.inflight or {}).get("run_status", "SUCCESS")
            when = "at its next tick" if going == "SUCCESS" else "once that run ends"
            out.append(f"table caught up: {name} by run {run_id[:8]} ({going}); the sensor records it {when}")
        if self.inflight:
            i = self.inflight
            out.append(f"in flight: {i['kind']} {i['window']} attempt {i['attempt']} ({i['run_status']})")
        else:
            out.append("in flight: none")
        out.append(self._incremental_line())
        if self.state_due:
            out.append(self._state_line())
        if self.health is not None:
            out.append(self._skipped_signals_line())
        if self.verification is not None:
            out.append(self.verification)
        return [first_line(line, 400) for line in out]

    def problems(self) -> list[str]:
        """What is wrong, most urgent first, one short sentence each naming the cause (and, where
        the message carries it, the fix); ``[]`` when healthy. Unhealthy: an unreadable cursor;
        a sensor that is stopped, has not ticked or no longer ticks; failing ticks (their error,
        unwrapped from Dagster's ``SensorExecutionError``); a failed run no later run succeeded
        after (a run created after it); stopped tables; failing checks of severity ERROR (not
        those a stop explains: a stopped table is its own problem, a caught-up one none); a lag
        that cannot be computed (a purged binlog, an unreachable server); signals skipped
        recently."""
        out: list[str] = []
        if self.cursor_error:
            out.append(
                f"the sensor cursor is unreadable (every tick fails): {first_line(self.cursor_error, 1000)}"
            )
        h = self.health
        if h is not None:
            s = h.sensor
            if s.state == "STOPPED":
                out.append(f"the sensor is STOPPED, nothing is captured: dagster sensor start {self.sensor}")
            elif s.last_tick_age_seconds is None:
                out.append(
                    "the sensor has not ticked yet: is dagster-daemon running (`dagster dev` starts one)?"
                )
            elif s.ticking is False:
                out.append(
                    f"the sensor is NOT TICKING (last tick {s.last_tick_age_seconds:.0f} s ago): start "
                    "dagster-daemon (or restart `dagster dev`)"
                )
            if s.last_tick_error and not self.cursor_error:
                out.append(
                    f"its ticks fail ({s.failed_ticks_in_a_row} in a row, no run is requested): {s.last_tick_error}"
                )
            f = h.last_run_failure
            if f and not f.get("succeeded_since"):
                retry = f"; retried in {h.retry_in_seconds:.0f} s" if h.retry_in_seconds is not None else ""
                out.append(f"run {f['run_id'][:8]} {f['status']}{retry}: {f['reason']}")
            for name, d in sorted(h.stopped.items()):
                out.append(f"table {name} is STOPPED (not captured): {first_line(d.get('error'), 1000)}")
            # a stopped table's checks fail with the stop's explanation: the stop is its line
            # above, or the table is caught up (their next evaluation is the catch-up run's)
            errors = [c for c in h.failing_checks if c.severity == "ERROR" and not c.of_stop]
            if errors:
                c = errors[0]
                more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
                out.append(f"check {c.check} of {c.asset} fails{more}: {c.description}")
            if h.skipped_signals:
                sig = h.skipped_signals[0]
                more = f" (and {len(h.skipped_signals) - 1} more)" if len(h.skipped_signals) > 1 else ""
                out.append(f"a signal was skipped {sig['age_seconds']:.0f} s ago{more}: {sig['message']}")
        else:  # no instance state (a cursor given): what the cursor records
            if self.last_error:  # "run <run id> FAILURE: <reason>": the run id's first 8 do
                error = re.sub(r"^run ([0-9a-f]{8})[0-9a-f-]{28}\b", r"run \1", self.last_error)
                out.append(f"the last run failed: {first_line(error, 1000)}")
            for name, d in sorted(self.stopped.items()):
                out.append(f"table {name} is STOPPED (not captured): {first_line(d.get('error'), 1000)}")
        if self.server_error:
            out.append(f"lag unknown: {self.server_error}")
        return out

    def verdict(self, limit: int = 400) -> str:
        """The first line: ``HEALTHY: <sensor>`` or ``UNHEALTHY: <sensor>: <first problem>`` (with
        the number of the others), in at most ``limit`` characters (whole words; the end of the
        cause, which names the fix, is kept)."""
        problems = self.problems()
        if not problems:
            return f"HEALTHY: {self.sensor}"
        more = f" [+{len(problems) - 1} more below]" if len(problems) > 1 else ""
        text = f"UNHEALTHY: {self.sensor}: {first_line(problems[0], 2000)}"
        return shorten(text, limit - len(more)) + more

    def _skipped_signals_line(self) -> str:
        sigs = self.health.skipped_signals if self.health is not None else []
        if not sigs:
            return "skipped signals: none"
        first = sigs[0]
        return (
            f"skipped signals: {len(sigs)} in the last {self.signals_within:.0f} s, latest "
            f"{first['age_seconds']:.0f} s ago (run {str(first['run_id'])[:8]}): {first['message']}"
        )

    def _incremental_line(self) -> str:
        inc = self.incremental
        if not inc:
            return "repairs / incremental snapshot: none"
        progress = f"chunk {inc['current_chunks']}, {inc['current_rows']} rows"
        if inc.get("key_progress"):
            progress += f", key {inc['key_progress']}"
        repairs = inc.get("repairs") or []
        what = "repair" if repairs else "incremental snapshot"
        why = (
            f"; why: {first_line(repairs[0], 120)}"
            + (f" (+{len(repairs) - 1} more)" if len(repairs) > 1 else "")
            if repairs
            else ""
        )
        return (
            f"{what} {inc['snapshot_id']}: {inc['current_table']} {progress}, {len(inc['queued'])} queued"
            + (" [paused]" if inc["paused"] else "")
            + why
        )

    def _state_line(self, now: float | None = None) -> str:
        """How many tables' ``state`` lacks changes, and the longest overdue compaction."""
        now = time.time() if now is None else now
        due = sorted((t, n) for n, t in self.state_due.items() if t <= now)
        line = f"state: {len(self.state_due)} table(s) with changes not compacted into `state` yet"
        if not due:
            return line + f", the next due in {min(self.state_due.values()) - now:.0f} s"
        return line + f", {len(due)} due (the longest for {now - due[0][0]:.0f} s: {due[0][1]})"

    def line(self) -> str:
        """The :meth:`verdict`, then all :meth:`lines`, one per line."""
        return "\n".join([self.verdict(), *self.lines()])

    @property
    def exit_code(self) -> int:
        """:data:`EXIT_UNHEALTHY` when :meth:`problems` found any, else :data:`EXIT_HEALTHY`."""
        return EXIT_UNHEALTHY if self.problems() else EXIT_HEALTHY

    def to_json(self) -> str:
        """Every attribute, plus ``healthy`` and ``problems`` (:meth:`problems`)."""
        problems = self.problems()
        return json.dumps({**asdict(self), "healthy": not problems, "problems": problems}, sort_keys=True)


def _lag(
    settings: ConnectionSettings, committed: BinlogPosition, replica_server_id: int
) -> tuple[str, int, float]:
    """(server position, lag in bytes, lag in seconds) of ``committed`` against the server.

    Raises:
        ConfigurationError: the committed binlog file was purged (the sensor's message).
        SourceConnectionError: the server is unreachable.
    """
    conn = connect(settings)
    try:
        info = server_info(conn)
        now = current_position(conn, info).with_epoch(committed.epoch)  # the server the offset is on
        files = binlog_files(conn)
    finally:
        conn.close()
    names = [f for f, _ in files]
    if names and committed.file not in names and committed.sort_key() < now.sort_key():
        raise ConfigurationError(purged_binlog_message(committed, names[0]))
    if committed.sort_key() >= now.sort_key():
        return str(now), 0, 0.0
    if committed.file == now.file or committed.file not in names:
        lag_bytes = max(0, now.pos - committed.pos)
    else:
        i, j = names.index(committed.file), names.index(now.file)
        lag_bytes = (files[i][1] - committed.pos) + sum(s for _, s in files[i + 1 : j]) + now.pos
    seconds = 0.0
    reader = BinlogReader(
        settings, replica_server_id, committed, None, is_mariadb=info.is_mariadb, deadline_s=30
    )
    for item in reader:  # the oldest event not yet captured: how old the capture's view is
        ts = getattr(item, "ts_ms", None)
        if ts:
            seconds = max(0.0, time.time() - ts / 1000)
            break
    return str(now), lag_bytes, seconds


def find_sensor_cursor(instance: Any, sensor_name: str) -> str | None:
    """The stored cursor of the sensor named ``sensor_name`` in ``instance``.

    Raises:
        LookupError: see :func:`find_sensor_state`.
    """
    return getattr(find_sensor_state(instance, sensor_name).instigator_data, "cursor", None)


def recorded_address(cursor: StreamCursor) -> tuple[str, int] | None:
    """``(host, port)`` of the server the cursor's offset was read from (``server.address``)."""
    address = (cursor.server or {}).get("address")
    if not address or ":" not in address:
        return None
    host, _, port = address.rpartition(":")
    return (host.strip("[]"), int(port)) if port.isdigit() else None


#: ``status`` reads one binlog event (the lag in seconds) as replica ``server_id`` + this: an id
#: of its own, so it never cuts off a capture's readers (windows +0, range re-snapshots +3, window
#: checks +7, full verification +11, look-ahead +13, rotation +17, segments +101..116).
STATUS_SERVER_ID_OFFSET = 19


def read_status(
    instance: Any,
    sensor_name: str,
    *,
    settings: ConnectionSettings | None = None,
    replica_server_id: int = 184054 + STATUS_SERVER_ID_OFFSET,
    cursor_text: str | None = None,
    use_recorded_address: bool = True,
    stale_seconds: float | None = None,
    signals_within: float = SKIPPED_SIGNALS_WITHIN,
) -> CaptureStatus:
    """The capture status of ``sensor_name``.

    Args:
        instance: the Dagster instance holding the sensor's cursor, ticks and runs.
        settings: the source server (for the lag); ``None``: lag not computed (``--no-server``).
        replica_server_id: binlog client id used to read one event for the lag in seconds
            (default: the default ``server_id`` + :data:`STATUS_SERVER_ID_OFFSET`).
        cursor_text: use this cursor instead of the stored one.
        use_recorded_address: connect to the address recorded in the cursor (the server the
            offset belongs to) instead of ``settings``' host and port.
        stale_seconds: the sensor is reported as not ticking after this long without a tick
            (default: :func:`.health.stale_after` its interval).
        signals_within: signals skipped in the last this many seconds are reported (and make
            the status unhealthy, :meth:`CaptureStatus.problems`).

    Raises:
        LookupError: the sensor has no state in the instance.

    A cursor that cannot be read is reported in ``cursor_error`` (with the health), not raised.
    """
    state = find_sensor_state(instance, sensor_name) if cursor_text is None else None
    text = (
        cursor_text
        if cursor_text is not None
        else getattr(getattr(state, "instigator_data", None), "cursor", None)
    )
    try:
        cur = StreamCursor.parse(text, sensor_name)
        cursor_error = None
    except CorruptCursorError as e:  # the health (failing ticks) is still worth showing
        cur, cursor_error = StreamCursor(), str(e)
    status = CaptureStatus(
        sensor=sensor_name,
        committed=str(cur.committed) if cur.committed else None,
        last_error=cur.last_error,
        stopped=dict(cur.stopped or {}),
        state_due=dict(cur.state_due or {}),
        cursor_error=cursor_error,
        signals_within=signals_within,
    )
    if cur.inflight is not None:
        status.inflight = _inflight_status(instance, cur.inflight)
    lake_at = cur.committed
    going = _going_progress(instance, status.inflight) if status.inflight else None
    reached = _run_committed(instance, *going) if going is not None else None
    if reached is not None and cur.committed is not None and reached.sort_key() > cur.committed.sort_key():
        status.run_committed, lake_at = str(reached), reached
    if settings is not None:
        address = recorded_address(cur) if use_recorded_address else None
        if address is not None:
            settings = replace(settings, host=address[0], port=address[1])
        status.server = f"{settings.host}:{settings.port}"
        if lake_at is not None:
            try:
                status.server_position, status.lag_bytes, status.lag_seconds = _lag(
                    settings, lake_at, replica_server_id
                )
            except CdcError as e:
                status.server_error = first_line(str(e), 2000)
    if state is not None:
        status.health = capture_health(
            instance,
            state,
            sensor_name,
            cur.retry_at,
            stale_seconds=stale_seconds,
            stopped=cur.stopped,
            signals_within=signals_within,
        )
    if status.inflight is not None:
        status.caught_up = _caught_up_by(instance, status.inflight, set(status.stopped))
        for name in status.caught_up:
            status.stopped.pop(name, None)
            if status.health is not None:
                status.health.stopped.pop(name, None)
    incremental = cur.incremental
    if going is not None and going[1] is not None:  # a following run reads chunks window after
        incremental = going[1].incremental  # window: as far as it committed (None: finished)
    if incremental:
        status.incremental = _incremental_status(incremental)
    if cursor_text is None:
        status.verification = _verification_line(instance, sensor_name)
    return status


def _inflight_status(instance: Any, inf: InFlight) -> dict[str, Any]:
    """The run the sensor waits for (``inf``, the cursor's ``inflight``): its kind, window
    (``start -> end``), attempt, and its run's id and status (``not created yet`` when no run
    carries its run key)."""
    import dagster as dg

    from .protocol import REQUEST_TAG
    from .run_tags import caught_up_tag

    runs = instance.get_runs(filters=dg.RunsFilter(tags={REQUEST_TAG: inf.run_key}), limit=1)
    return {
        "kind": inf.kind,
        "window": f"{inf.start or '-'} -> {inf.end or '-'}",
        "attempt": inf.attempt,
        "run_id": runs[0].run_id if runs else None,
        "run_status": runs[0].status.value if runs else "not created yet",
        "caught_up": caught_up_tag(runs[0].tags) if runs else [],
    }


def _going_progress(instance: Any, inflight: dict[str, Any]) -> tuple[str, Any] | None:
    """``(run id, its progress tag or None)`` of the run in flight (``inflight``,
    :func:`_inflight_status`) while it goes (a following or standby run records the tag after
    each follow-on window: :func:`.run_tags.progress_tag`); ``None`` when no run is going. The
    tag's ``incremental`` is the incremental snapshot as far as the run committed (the cursor's
    is the one at the run's start; ``None`` in the tag: the snapshot finished)."""
    import dagster as dg

    from .run_tags import progress_tag

    run_id = inflight.get("run_id")
    if not run_id or inflight.get("run_status") != dg.DagsterRunStatus.STARTED.value:
        return None
    run = instance.get_run_by_id(run_id)
    return run_id, progress_tag(run.tags) if run is not None else None


def _run_committed(instance: Any, run_id: str, progress: Any) -> BinlogPosition | None:
    """How far the run in flight ``run_id`` (going: :func:`_going_progress`) has committed: the
    ``reached`` of its ``progress`` tag (those of other databases' traffic included), or the
    ``window_end`` of its newest materialization (a table's is logged once its commit of the
    window is durable, :mod:`.window_report`), whichever is further; ``None`` when it reported
    neither yet."""
    import dagster as dg

    from .protocol import position_from_metadata

    found: list[BinlogPosition] = []
    if progress is not None:
        found.append(progress.reached)
    records = instance.get_records_for_run(
        run_id=run_id, of_type=dg.DagsterEventType.ASSET_MATERIALIZATION, ascending=False, limit=20
    ).records
    for r in records:
        mat = r.asset_materialization
        pos = position_from_metadata(mat.metadata, "window_end") if mat is not None else None
        if pos is not None:
            found.append(pos)
            break
    return max(found, key=lambda p: p.sort_key()) if found else None


def _caught_up_by(instance: Any, inflight: dict[str, Any], stopped: set[str]) -> dict[str, str]:
    """``db.table`` -> run id of the ``stopped`` tables the run in flight (``inflight``,
    :func:`_inflight_status`) caught up: it succeeded and its binlog asset's ``stopped_tables``
    (every table still stopped after it) leaves them out; or it is still going (following) and
    caught them up at its start (its :data:`.protocol.CAUGHT_UP_TAG`). ``{}`` otherwise (a
    failed run, a snapshot run)."""
    import dagster as dg

    run_id = inflight.get("run_id")
    status = inflight.get("run_status")
    if not stopped or not run_id:
        return {}
    if status in (dg.DagsterRunStatus.STARTING.value, dg.DagsterRunStatus.STARTED.value):
        return {name: run_id for name in sorted(stopped) if name in inflight.get("caught_up", [])}
    if status != dg.DagsterRunStatus.SUCCESS.value:
        return {}
    from .capture_runs import reported_json

    records = instance.get_records_for_run(run_id=run_id, of_type=dg.DagsterEventType.ASSET_MATERIALIZATION)
    mats = [r.asset_materialization for r in records.records if r.asset_materialization is not None]
    still = reported_json(mats, "stopped_tables")  # what the sensor reads (run_settlement)
    if still is None:
        return {}
    return {name: run_id for name in sorted(stopped) if name not in still}


def _incremental_status(incremental: dict) -> dict[str, Any] | None:
    """The progress of the cursor's incremental snapshot (:meth:`..engine.incremental.IncrementalState.progress`),
    with the reasons of its repairs (``repairs``) and, for a single integer key, how far the current
    table is read (``key_progress``); ``None`` when the state cannot be read."""
    from ..engine.incremental import IncrementalState

    inc_state = IncrementalState.from_dict(incremental)
    if inc_state is None:
        return None
    prog = inc_state.progress()
    prog["repairs"] = [t.reason for t in inc_state.tables if t.reason]
    last, top = prog.get("last_key"), prog.get("max_key")
    if last and top and len(last) == 1 and all(isinstance(v[0], int) for v in (last, top)) and top[0]:
        prog["key_progress"] = f"{last[0]} of {top[0]} ({100 * last[0] / top[0]:.0f} %)"
    return prog


def _verification_line(instance: Any, sensor_name: str) -> str | None:
    """The line of the rotating verification of binlog sensor ``sensor_name``
    (:func:`.rotation.status_line` of its verification sensor's cursor), ``None`` when that
    sensor has no state in the instance."""
    from .rotation import status_line, verification_sensor_name

    try:
        rotation = find_sensor_cursor(instance, verification_sensor_name(sensor_name))
    except LookupError:
        return None
    return status_line(rotation)
