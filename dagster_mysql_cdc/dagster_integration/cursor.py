"""The binlog sensor's cursor and its pure planning step (no I/O: unit-testable).

The cursor is small JSON kept by Dagster for the sensor::

    {"v": 1,
     "committed": {"file": "mysql-bin.000003", "pos": 1234, "gtid_set": "0-1-42", "epoch": 1} | null,
     "inflight": {"kind": "stream" | "snapshot", "start": {...} | null, "end": {...} | null,
                  "attempt": 1, "failures": 0, "run_key": "cap-...:stream:..."} | null,
     "snapshot_done": true,
     "server": {"server_id", "server_uuid", "gtid_domain_id", "file", "file_gtids", "address"} | null,
     "last_error": "..." | null,
     "incremental": {"snapshot_id", "tables": [{"table", "last_key", "max_key", "chunks", ...}],
                     "paused", "chunk_seq", "done"} | null,
     "retry_at": 1764150000.0,                    (only while a failed window waits for its retry)
     "stopped": {"db.table": {"since": {...}, "error", "attempts", "retry_at", "stopped_at"}},
                                                  (only while a table's capture is stopped)
     "state_due": {"db.table": 1764150900.0}}     (only while a table's state lacks changes)

``committed`` is the replication offset: everything before it is durably in the lake. It only
moves when the run that wrote a window (or the snapshot) has succeeded (the design's exactly-once
protocol: runs are idempotent per window, the cursor is advanced after success).

``epoch`` (present once it is not 0) is the offset epoch
(:class:`~dagster_mysql_cdc.events.BinlogPosition`): it goes up by one on every server change, so
the lake orders the new server's events after the old one's whatever their binlog file numbers.
Positions the sensor reads from the server (its current position) are in the committed offset's
epoch.

``server`` is the identity of the server ``committed`` was read from
(:class:`~dagster_mysql_cdc.source.failover.ServerIdentity`): a file/pos is only ever used on that
server. :func:`reconcile_cursor` checks it on every tick and translates the offset by GTID after a
failover (see :mod:`dagster_mysql_cdc.source.failover`).

``stopped`` holds the tables whose capture stopped alone (one table's window could not be written,
the others went on: :mod:`dagster_mysql_cdc.engine.isolation`): each with the position its capture
stopped at, everything before which is in the lake. Windows leave them out; a run catches a table
up from there when its backoff is due, or at once after the table is snapshotted again.

``state_due`` holds, per table whose compacted ``state`` lacks changes its runs wrote (its
``state_tail`` is not empty), when that ``state`` is due for a compaction by age (epoch seconds:
the tail's oldest change plus ``state_compact_max_age_seconds``), as the runs report it (the binlog
asset's ``state_due`` metadata). The tables that are due are compacted by the next window's run
(:data:`.protocol.COMPACT_TAG`), or by an empty window when the capture is idle, so a quiet
table's ``state`` is never left behind until its next write. No tick opens a Delta log for it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from typing import Any

from ..engine.isolation import StoppedTable
from ..errors import ConfigurationError
from ..events import BinlogPosition
from ..source.failover import OffsetError, ServerIdentity, reconcile_offset

CURSOR_VERSION = 1


class CorruptCursorError(ConfigurationError):
    """The sensor cursor cannot be read; nothing is reset silently."""


@dataclass(frozen=True)
class InFlight:
    """The run the sensor is waiting for.

    ``attempt`` counts the runs of the window (1-based); ``failures`` the attempts that failed by
    themselves (a killed run is not one): the retry backoff grows with it
    (:func:`retry_delay`). Cursors written before it existed count every earlier attempt."""

    kind: str  # "stream" | "snapshot"
    run_key: str
    attempt: int = 1
    start: BinlogPosition | None = None
    end: BinlogPosition | None = None
    snapshot_mode: str | None = None
    failures: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "run_key": self.run_key,
            "attempt": self.attempt,
            "failures": self.failures,
            "start": self.start.to_dict() if self.start else None,
            "end": self.end.to_dict() if self.end else None,
            "snapshot_mode": self.snapshot_mode,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> InFlight:
        attempt = int(d.get("attempt", 1))
        return cls(
            kind=d["kind"],
            run_key=d["run_key"],
            attempt=attempt,
            start=BinlogPosition.from_dict(d["start"]) if d.get("start") else None,
            end=BinlogPosition.from_dict(d["end"]) if d.get("end") else None,
            snapshot_mode=d.get("snapshot_mode"),
            failures=int(d.get("failures", attempt - 1)),
        )


@dataclass(frozen=True)
class StreamCursor:
    """Parsed sensor cursor (see module docs)."""

    committed: BinlogPosition | None = None
    inflight: InFlight | None = None
    snapshot_done: bool = False
    last_error: str | None = None
    incremental: dict | None = None  # IncrementalState.to_dict() of a running incremental snapshot
    server: dict | None = None  # ServerIdentity.to_dict() of the server `committed` belongs to
    retry_at: float | None = None  # epoch seconds: the failed run of `inflight` is retried then (backoff)
    #: tables whose capture stopped (``"db.table"``: :meth:`..engine.isolation.StoppedTable.to_dict`)
    stopped: dict[str, dict] | None = None
    #: ``"db.table"`` -> epoch seconds its ``state`` is due for a compaction by age (module docs)
    state_due: dict[str, float] | None = None

    def due_states(self, now: float | None = None, limit: int | None = None) -> list[str]:
        """The tables whose ``state`` is due for a compaction at ``now`` (default: the time),
        the longest due first, at most ``limit``."""
        import time

        now = time.time() if now is None else now
        due = sorted((t, n) for n, t in (self.state_due or {}).items() if t <= now)
        return [n for _, n in due][:limit]

    def with_state_due(self, reported: dict | None) -> StreamCursor:
        """The cursor with a run's reported ``state_due`` (``{"db.table": seconds | None}``;
        ``None``: that table's state holds every change) merged in."""
        if not reported:
            return self
        due = dict(self.state_due or {})
        for name, at in reported.items():
            if at is None:
                due.pop(name, None)
            else:
                due[name] = float(at)
        return replace(self, state_due=due or None)

    def stopped_tables(self) -> dict[str, StoppedTable]:
        """The stopped tables (``"db.table"`` -> :class:`~..engine.isolation.StoppedTable`)."""
        return {n: StoppedTable.from_dict(v) for n, v in (self.stopped or {}).items()}

    def identity(self) -> ServerIdentity | None:
        """The recorded server identity of ``committed`` (``None``: not recorded yet)."""
        return ServerIdentity.from_dict(self.server) if self.server else None

    def to_json(self) -> str:
        return json.dumps(
            {
                "v": CURSOR_VERSION,
                "committed": self.committed.to_dict() if self.committed else None,
                "inflight": self.inflight.to_dict() if self.inflight else None,
                "snapshot_done": self.snapshot_done,
                "last_error": self.last_error,
                "incremental": self.incremental,
                "server": self.server,
                **({"retry_at": self.retry_at} if self.retry_at is not None else {}),
                **({"stopped": self.stopped} if self.stopped else {}),
                **({"state_due": self.state_due} if self.state_due else {}),
            },
            sort_keys=True,
        )

    @classmethod
    def parse(cls, text: str | None, sensor_name: str = "<sensor>") -> StreamCursor:
        """Parse a cursor string; ``None``/empty is the initial state.

        Raises:
            CorruptCursorError: not JSON, wrong version or malformed positions. The message says
                how to reset (which re-snapshots) or set a position explicitly.
        """
        if not text:
            return cls()
        fix = (
            f"Fix it with `dagster sensor cursor {sensor_name} --set '<json>'` (see docs: "
            f"operations) or delete it with `dagster sensor cursor {sensor_name} --delete` to start "
            "over from a new snapshot."
        )
        try:
            d = json.loads(text)
            if not isinstance(d, dict) or d.get("v") != CURSOR_VERSION:
                raise ValueError(f"expected an object with v={CURSOR_VERSION}")
            return cls(
                committed=BinlogPosition.from_dict(d["committed"]) if d.get("committed") else None,
                inflight=InFlight.from_dict(d["inflight"]) if d.get("inflight") else None,
                snapshot_done=bool(d.get("snapshot_done", False)),
                last_error=d.get("last_error"),
                incremental=d.get("incremental"),
                server=ServerIdentity.from_dict(d["server"]).to_dict() if d.get("server") else None,
                retry_at=float(d["retry_at"]) if d.get("retry_at") is not None else None,
                stopped={n: StoppedTable.from_dict(v).to_dict() for n, v in (d.get("stopped") or {}).items()}
                or None,
                state_due={str(n): float(t) for n, t in (d.get("state_due") or {}).items()} or None,
            )
        except (ValueError, KeyError, TypeError) as e:
            raise CorruptCursorError(
                f"The cursor of sensor {sensor_name} is corrupt ({e}): {text[:200]!r}. {fix}"
            ) from None


@dataclass(frozen=True)
class ServerState:
    """What the sensor read from the source this tick."""

    current: BinlogPosition
    binlog_files: list[tuple[str, int]] = field(default_factory=list)  # (name, size) oldest first


@dataclass(frozen=True)
class Plan:
    """Outcome of one tick: at most one run to request, the new cursor, and why."""

    cursor: StreamCursor
    request: InFlight | None = None
    skip_reason: str | None = None
    warnings: tuple[str, ...] = ()
    #: what is wrong with the capture's table selection (a ``table_include_list`` entry that
    #: matches no table, each message ending with its fix): named in the tick and its health
    problems: tuple[str, ...] = ()


def purged_binlog_message(committed: BinlogPosition, oldest: str) -> str:
    """The error of a committed offset whose binlog file the server purged (the sensor's tick and
    the status command say the same)."""
    return (
        f"The committed offset {committed} is no longer on the server: binlog file "
        f"{committed.file} was purged (oldest is {oldest}). Changes made since are lost to "
        "streaming. Re-snapshot: set snapshot_mode='when_needed' (automatic) or delete the "
        "sensor cursor to start over; then increase binlog retention (binlog_expire_logs_seconds)."
    )


def retry_delay(failed_attempt: int, base_seconds: float, max_seconds: float) -> float:
    """Seconds to wait before retrying a window after its ``failed_attempt``-th (1-based) failure
    of its own (a killed run is retried at once and not counted, see :class:`InFlight`): the
    first retry at once (a transient error), then exponential backoff ``base_seconds * 2 ** (n -
    2)`` up to ``max_seconds`` (``base_seconds=0``: never wait)."""
    if failed_attempt <= 1 or base_seconds <= 0:
        return 0.0
    return float(min(max_seconds, base_seconds * 2 ** min(failed_attempt - 2, 30)))


def window_key(kind: str, start: BinlogPosition | None, end: BinlogPosition | None, attempt: int) -> str:
    """Deterministic run key of a window (a keyed run is launched at most once); positions of
    offset epoch ``n > 0`` carry ``@e<n>`` (the same file/pos on a later server is another window)."""
    s = f"{start.file}:{start.pos}{_epoch_suffix(start)}" if start else "-"
    e = f"{end.file}:{end.pos}{_epoch_suffix(end)}" if end else "-"
    return f"{kind}:{s}:{e}:a{attempt}"


def empty_window_key(at: BinlogPosition, attempt: int = 1) -> str:
    """Run key of an empty window at ``at`` (a stopped table's catch-up on an idle source): the
    window of :func:`window_key` and a nonce, since several such windows may start at the same
    offset (a run key is launched at most once)."""
    import time

    return f"{window_key('stream', at, at, attempt)}:nonce-{time.time_ns()}"


def standby_window_key(at: BinlogPosition, attempt: int = 1) -> str:
    """Run key of a standby run at ``at`` (:func:`is_standby_key`): an empty window with a nonce
    (:func:`empty_window_key`) marked ``standby``."""
    return empty_window_key(at, attempt).replace(":nonce-", ":standby-nonce-")


def is_standby_key(run_key: str) -> bool:
    """Whether ``run_key`` is a standby run's (:func:`standby_window_key`): an empty window the
    run waits in for the next change, selecting every captured table (see
    :mod:`..engine.follow`)."""
    return ":standby-nonce-" in run_key


def _epoch_suffix(pos: BinlogPosition) -> str:
    return f"@e{pos.epoch}" if pos.epoch else ""


def normalize(pos: BinlogPosition, files: list[tuple[str, int]]) -> BinlogPosition:
    """Move a position at the very end of a file to the start of the next file."""
    names = [f for f, _ in files]
    if pos.file in names:
        i = names.index(pos.file)
        size = files[i][1]
        if pos.pos >= size and i + 1 < len(files):
            return replace(pos, file=names[i + 1], pos=4)
    return pos


def plan_stream_window(
    cursor: StreamCursor,
    server: ServerState,
    *,
    snapshot_mode: str,
    retention_margin_files: int = 1,
    now: float | None = None,
    standby: bool = False,
) -> Plan:
    """Decide the next step when no run is in flight.

    - no committed offset: request the initial snapshot (``never``: start at the oldest binlog);
    - ``initial_only`` after the snapshot: nothing to do;
    - committed file purged: request a snapshot for ``when_needed``, else raise;
    - caught up: skip (an empty window when a stopped table's retry or a table's ``state``
      compaction is due at ``now``, default the time; with ``standby``, a standby run:
      :func:`standby_window_key`); otherwise request ``[committed, end)``
      where ``end`` is the server's current position, or the end of the committed file when the
      server has moved on to a newer file (one window never spans files, which bounds its size
      by ``max_binlog_size``).

    Raises:
        ConfigurationError: the committed binlog file was purged and ``snapshot_mode`` is not
            ``when_needed``; the message names the missing file and the fix.
    """
    assert cursor.inflight is None
    files = server.binlog_files
    names = [f for f, _ in files]
    if cursor.committed is None:
        return _plan_first(cursor, server, snapshot_mode)
    if snapshot_mode == "initial_only":
        return Plan(cursor, skip_reason="snapshot_mode=initial_only: the snapshot is done, streaming is off")
    committed = cursor.committed
    # the server's positions are in the committed offset's epoch (the same server since reconcile)
    server = replace(server, current=server.current.with_epoch(committed.epoch))
    if names and committed.file not in names:
        if snapshot_mode == "when_needed":
            return Plan(
                cursor,
                request=_snapshot_request("resnapshot", committed, server, snapshot_mode),
                warnings=(
                    f"Binlog file {committed.file} of the committed offset was purged; re-snapshotting (snapshot_mode=when_needed).",
                ),
            )
        raise ConfigurationError(purged_binlog_message(committed, names[0]))
    warnings: tuple[str, ...] = ()
    if names and committed.file in names[:retention_margin_files] and len(names) > 1:
        warnings = (
            f"The committed offset is in {committed.file}, among the {retention_margin_files} oldest "
            "binlog file(s): it will be lost if the server purges them before streaming catches up.",
        )
    committed = normalize(committed, files)
    if committed.sort_key() >= server.current.sort_key():
        return _plan_caught_up(replace(cursor, committed=committed), warnings, now, standby)
    end = server.current
    if committed.file != end.file and committed.file in names:
        end = committed.at(committed.file, files[names.index(committed.file)][1], None)
    return Plan(
        replace(cursor, committed=committed),
        request=InFlight("stream", window_key("stream", committed, end, 1), 1, committed, end),
        warnings=warnings,
    )


def _snapshot_request(
    kind: str, start: BinlogPosition | None, server: ServerState, snapshot_mode: str
) -> InFlight:
    """The first attempt of a snapshot up to the server's current position: the initial one
    (``kind="snapshot"``, no ``start``) or a re-snapshot from a purged offset (``"resnapshot"``)."""
    return InFlight(
        "snapshot", window_key(kind, start, server.current, 1), 1, start, server.current, snapshot_mode
    )


def _plan_first(cursor: StreamCursor, server: ServerState, snapshot_mode: str) -> Plan:
    """The plan of a capture with no committed offset: the initial snapshot, or with
    ``snapshot_mode=never`` streaming from the oldest binlog file."""
    if snapshot_mode != "never":
        return Plan(cursor, request=_snapshot_request("snapshot", None, server, snapshot_mode))
    if not server.binlog_files:
        return Plan(cursor, skip_reason="the server has no binlog files")
    start = BinlogPosition(server.binlog_files[0][0], 4, "")
    return Plan(
        replace(cursor, committed=start, snapshot_done=True),
        skip_reason=f"snapshot_mode=never: streaming from {start}",
    )


def _plan_caught_up(
    cursor: StreamCursor, warnings: tuple[str, ...], now: float | None, standby: bool = False
) -> Plan:
    """The plan of a capture whose committed offset is the server's position: skip, or an empty
    window ``[committed, committed)`` when it has work besides the binlog, or (``standby``) a
    standby run that waits in it for the next change."""
    committed = cursor.committed
    assert committed is not None
    inc = cursor.incremental
    if inc and inc.get("tables") and not inc.get("paused"):
        # an incremental snapshot has chunks left: an empty window that only reads chunks
        request = InFlight("stream", window_key("stream", committed, committed, 1), 1, committed, committed)
        return Plan(cursor, request=request, warnings=warnings)
    # a stopped table's retry is due on an idle source: an empty window that only catches it up
    # (engine/isolation.py; without it, the catch-up would wait for the next change); or a quiet
    # table's state is older than its bound on an idle source: an empty window that only
    # compacts it (its run gets the due tables in its tags, see .run_requests.run_request)
    if any(st.due() for st in cursor.stopped_tables().values()) or cursor.due_states(now):
        request = InFlight("stream", empty_window_key(committed), 1, committed, committed)
        return Plan(cursor, request=request, warnings=warnings)
    if standby:
        # (a paused incremental snapshot travels with it: the run reads no chunks, and its
        # state, with any resume-snapshot signal's, is reported back as every run's)
        request = InFlight("stream", standby_window_key(committed), 1, committed, committed)
        return Plan(cursor, request=request, warnings=warnings)
    return Plan(cursor, skip_reason=f"caught up at {committed}", warnings=warnings)


def reconcile_cursor(
    cursor: StreamCursor,
    conn: Any,
    info: Any,
    server: ServerState,
    *,
    snapshot_mode: str,
    address: str | None = None,
    bound: BinlogPosition | None = None,
) -> tuple[StreamCursor, Plan | None, list[str]]:
    """Check that the committed offset belongs to the connected server (queries it through
    :func:`~dagster_mysql_cdc.source.failover.reconcile_offset`); after a failover, move it to the
    new server's position by GTID.

    Returns:
        ``(cursor, plan, messages)``: the cursor with the checked/translated offset and the
        server's identity recorded; ``plan`` is a re-snapshot request when the offset cannot be
        used and ``snapshot_mode == "when_needed"`` (else ``None``); ``messages`` say what changed
        (warnings when the offset was translated).

    Raises:
        OffsetError: the offset cannot be used (see :mod:`..source.failover`) and
            ``snapshot_mode`` is not ``when_needed`` (or a re-snapshot could not help either).
    """
    committed = cursor.committed
    if committed is None or snapshot_mode == "initial_only":
        return cursor, None, []
    try:
        r = reconcile_offset(
            conn,
            info,
            committed,
            cursor.identity(),
            files=server.binlog_files,
            current=server.current,
            address=address,
            bound=bound,
        )
    except OffsetError as e:
        if snapshot_mode != "when_needed":
            raise
        # the re-snapshot starts a new offset epoch: its rows (at the server's position, whatever
        # its binlog numbering) sort after everything the lake holds
        limit = bound if bound is not None and bound.sort_key() > committed.sort_key() else committed
        at = server.current.with_epoch(limit.epoch + 1)
        plan = Plan(
            replace(cursor, server=None),
            request=InFlight(
                "snapshot",
                window_key("resnapshot", committed, at, 1),
                1,
                committed,
                at,
                snapshot_mode,
            ),
            warnings=(f"{e} Re-snapshotting (snapshot_mode=when_needed).",),
        )
        return plan.cursor, plan, list(plan.warnings)
    out = replace(cursor, committed=r.position, server=r.identity.to_dict())
    return out, None, [r.message] if r.message else []
