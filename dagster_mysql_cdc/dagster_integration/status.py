"""The capture's state in one line, from the command line (``python -m dagster_mysql_cdc status``).

``dagster sensor cursor`` can only set or delete a cursor; this reads it from the Dagster instance
(``DAGSTER_HOME``) and adds what it means: the committed binlog position, how far the capture is
behind the server (bytes of binlog, and seconds since the oldest event not yet captured, when the
server is reachable), the run in flight and its status, the incremental snapshot's progress
(repairs of changes the binlog does not carry included), and the last error.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass
from typing import Any

from ..events import BinlogPosition
from ..source.binlog import BinlogReader
from ..source.connection import ConnectionSettings, binlog_files, connect, current_position, server_info
from .cursor import StreamCursor


@dataclass
class CaptureStatus:
    """What :func:`read_status` found (JSON-safe).

    Attributes:
        sensor: sensor name.
        committed: committed binlog position (``file:pos``) or ``None`` before the first snapshot.
        server_position: the server's current position (``None``: server not asked).
        lag_bytes: binlog bytes between committed and current position (across files).
        lag_seconds: seconds since the oldest binlog event not yet committed (``0`` when caught up).
        inflight: the run the sensor waits for: kind, window, attempt, run status.
        incremental: incremental snapshot progress (current table, chunks, rows, queued tables, repair reasons).
        last_error: the sensor's last recorded run failure.
    """

    sensor: str
    committed: str | None
    server_position: str | None = None
    lag_bytes: int | None = None
    lag_seconds: float | None = None
    inflight: dict[str, Any] | None = None
    incremental: dict[str, Any] | None = None
    last_error: str | None = None

    def line(self) -> str:
        """The one-line summary."""
        lag = (
            f"lag {self.lag_bytes} bytes, {self.lag_seconds:.1f} s"
            if self.lag_bytes is not None and self.lag_seconds is not None
            else "lag unknown (server not reachable)"
        )
        if self.inflight:
            i = self.inflight
            inflight = f"in flight: {i['kind']} {i['window']} attempt {i['attempt']} ({i['run_status']})"
        else:
            inflight = "in flight: none"
        if self.incremental:
            inc = self.incremental
            incremental = (
                f"incremental {inc['snapshot_id']}: {inc['current_table']} chunk {inc['current_chunks']} "
                f"({inc['current_rows']} rows), {len(inc['queued'])} queued"
                + (" [paused]" if inc["paused"] else "")
                + (f", repairing: {inc['repairs']}" if inc["repairs"] else "")
            )
        else:
            incremental = "incremental: none"
        parts = [
            f"{self.sensor}: committed {self.committed or 'nothing (no snapshot yet)'}",
            lag,
            inflight,
            incremental,
            f"last error: {self.last_error or 'none'}",
        ]
        return " | ".join(parts)

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)


def _lag(
    settings: ConnectionSettings, committed: BinlogPosition, replica_server_id: int
) -> tuple[str, int, float]:
    """(server position, lag in bytes, lag in seconds) of ``committed`` against the server."""
    conn = connect(settings)
    try:
        info = server_info(conn)
        now = current_position(conn, info).with_epoch(committed.epoch)  # the server the offset is on
        files = binlog_files(conn)
    finally:
        conn.close()
    names = [f for f, _ in files]
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
        LookupError: no sensor of that name has state in the instance (the message lists those that do).
    """
    from dagster._core.definitions.run_request import InstigatorType

    states = list(instance.all_instigator_state(instigator_type=InstigatorType.SENSOR))
    for s in states:
        if s.name == sensor_name:
            return getattr(s.instigator_data, "cursor", None)
    known = sorted({s.name for s in states})
    raise LookupError(
        f"No sensor named {sensor_name!r} has state in the Dagster instance at "
        f"{getattr(instance, 'root_directory', '?')} (sensors with state: {known or 'none'}). Check "
        "DAGSTER_HOME (the instance the daemon uses) and the sensor name (`dagster sensor list`)."
    )


def read_status(
    instance: Any,
    sensor_name: str,
    *,
    settings: ConnectionSettings | None = None,
    replica_server_id: int = 184054 + 11,
    cursor_text: str | None = None,
) -> CaptureStatus:
    """The capture status of ``sensor_name``.

    Args:
        instance: the Dagster instance holding the sensor's cursor and runs.
        settings: the source server (for the lag); ``None``: lag not computed.
        replica_server_id: binlog client id used to read one event for the lag in seconds.
        cursor_text: use this cursor instead of the stored one.

    Raises:
        LookupError: the sensor has no state in the instance.
        CorruptCursorError: the cursor cannot be read.
    """
    import dagster as dg

    from .protocol import REQUEST_TAG

    text = cursor_text if cursor_text is not None else find_sensor_cursor(instance, sensor_name)
    cur = StreamCursor.parse(text, sensor_name)
    status = CaptureStatus(
        sensor=sensor_name,
        committed=str(cur.committed) if cur.committed else None,
        last_error=cur.last_error,
    )
    if cur.committed is not None and settings is not None:
        status.server_position, status.lag_bytes, status.lag_seconds = _lag(
            settings, cur.committed, replica_server_id
        )
    if cur.inflight is not None:
        inf = cur.inflight
        runs = instance.get_runs(filters=dg.RunsFilter(tags={REQUEST_TAG: inf.run_key}), limit=1)
        status.inflight = {
            "kind": inf.kind,
            "window": f"{inf.start or '-'} -> {inf.end or '-'}",
            "attempt": inf.attempt,
            "run_id": runs[0].run_id if runs else None,
            "run_status": runs[0].status.value if runs else "not created yet",
        }
    if cur.incremental:
        from ..engine.incremental import IncrementalState

        state = IncrementalState.from_dict(cur.incremental)
        if state is not None:
            prog = state.progress()
            prog["repairs"] = [t.reason for t in state.tables if t.reason]
            status.incremental = prog
    return status
