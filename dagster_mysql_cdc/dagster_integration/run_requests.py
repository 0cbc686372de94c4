"""The run requests of a binlog sensor tick (:mod:`.sensor`): what a tick's requests share
(:class:`SensorTick`: the assets, the cheap checks, the window selection, the capture's id), the
``RunRequest`` of a stream window or a snapshot (:func:`run_request`: its run key, tags and asset
selection, see :mod:`.protocol`), and the refusal of a snapshot the server could not stream
after (:func:`refuse_snapshot`).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from functools import partial

import dagster as dg

from ..engine.isolation import RETRY_BASE_SECONDS, RETRY_MAX_SECONDS, StoppedTable
from ..errors import PreflightError
from ..source.connection import ServerInfo, binlog_setting_problems
from .cursor import InFlight, Plan, StreamCursor, is_standby_key
from .protocol import (
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
    STANDBY_TAG,
    STOPPED_TAG,
    TABLE_CHECKS_TAG,
    WINDOW_END_TAG,
    WINDOW_START_TAG,
    key_capture,
    position_tag,
)
from .selection import WindowSelection

TickOutcome = tuple[Plan, list[dg.RunRequest]]


@dataclass(frozen=True)
class SensorTick:
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
    #: request a standby run when the capture is caught up (:func:`.cursor.standby_window_key`)
    standby: bool = False

    def request(
        self,
        inflight: InFlight,
        cursor: StreamCursor,
        select: bool = True,
        changed: tuple[set[tuple[str, str]] | None, str] | None = None,
    ) -> dg.RunRequest:
        """:func:`run_request` of ``inflight`` with ``cursor``'s incremental snapshot, server identity
        and stopped tables (with the window selection unless ``select=False``; ``changed``: the
        window's look-ahead when already read, :func:`.selection.changed_tables`)."""
        selector = partial(self.select, changed=changed) if changed is not None else self.select
        return run_request(
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


def run_request(
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
    (schema drift, binlog retention, changes the binlog does not carry). A standby run
    (:func:`.cursor.is_standby_key`) selects the binlog asset and no check (it logs them)
    and is tagged :data:`.protocol.STANDBY_TAG`. Snapshots run every check of the selected assets.

    ``stopped``: the tables whose capture is stopped (:mod:`..engine.isolation`); a window's run
    gets them in the :data:`.protocol.STOPPED_TAG` tag, each marked ``catch_up`` when its next
    attempt is due (the run then catches it up first and it is selected), else left out.

    ``logged_above``: a snapshot of more tables than this (besides ``binlog_key``'s asset) selects
    no check and tags the run to log the checks of its tables and of the binlog asset
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
        due = {n: st.due(now) for n, st in (stopped or {}).items()}  # one clock for tag and selection
        if stopped:
            tags[STOPPED_TAG] = stopped_tag_value(stopped, due)
        if is_standby_key(inflight.run_key):
            # a standby run: the binlog asset (no check: it logs them); the tables each window
            # changes are reported as the windows commit, their checks logged
            tags[STANDBY_TAG] = "true"
            tags[TABLE_CHECKS_TAG] = "logged"
            tags[SELECTION_TAG] = "standby: waits for the next change, reports the tables it changes"
            keys = [k for k in keys if k == binlog_key] or list(keys)
            checks = []  # every check of the run is logged (the binlog asset's too)
        elif select is not None:
            sel = select(inflight.start, inflight.end, incremental, due)
            keys, checks = sel.asset_keys, sel.check_keys
            tags[SELECTION_TAG] = sel.reason
            if sel.logged_checks:
                tags[TABLE_CHECKS_TAG] = "logged"
        if identity:  # the run checks it reads the server the window's positions belong to
            tags[IDENTITY_TAG] = json.dumps(identity, separators=(",", ":"), sort_keys=True)
    else:
        checks = None  # every check of the selected assets
        tags[MODE_TAG] = "snapshot"
        tables = sum(k != binlog_key for k in keys)
        if logged_above is not None and binlog_key is not None and tables > logged_above:
            # every check of a snapshot's tables and binlog asset, logged by the run (see .selection)
            checks = []
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


def stopped_tag_value(stopped: Mapping[str, StoppedTable], due: Mapping[str, bool]) -> str:
    """The :data:`.protocol.STOPPED_TAG` value of a window's run: per stopped table (``"db.table"``)
    its stop position, error (300 characters), whether its retry is due (``catch_up``, from
    ``due``: the run catches it up first) and when it is (``retry_at``, epoch seconds: a standby
    run ends its wait then, see :meth:`..engine.stream_run.StreamRun._idle_limit`)."""
    return json.dumps(
        {
            n: {
                "since": st.since.to_dict(),
                "error": st.error[:300],
                "catch_up": due[n],
                "retry_at": round(st.retry_at, 3),
            }
            for n, st in stopped.items()
        },
        separators=(",", ":"),
        sort_keys=True,
    )
