"""Follow-on windows: a stream run keeps reading the binlog after its requested window.

A window run under a real deployment pays a fixed cost before it reads anything (the run worker's
process start, imports, code location load, the Spark session: seconds), so one run per sensor
window bounds the latency by that cost twice over. With ``stream_follow_seconds`` > 0 a stream run,
once its requested window ``[start, end)`` is committed, plans and commits the next window
``[end, now)`` itself, and so on while changes keep coming (up to ``stream_follow_seconds``, and
until the binlog has been idle for ``stream_follow_idle_seconds``); its Spark session and imports
stay warm, so each follow-on window costs about what it reads. The run reports where it reached;
the sensor commits that and requests the next window from there.

Exactly-once is kept as for incremental-snapshot chunk plans (:mod:`.incremental`): the bounds of
each follow-on window are saved **create-if-absent** under the lake's staging area, keyed by the
position it starts from, before it is read. A retried run re-reads its requested window and then
*must* follow every saved window (whatever its time budget), so it re-reads exactly the windows an
earlier attempt may have partly committed (Delta ``txn`` identities ``(app, window start)`` skip
what is already there) and reports an end at or after theirs. Windows are bounded like the
sensor's (:func:`.dagster_integration.cursor.plan_stream_window`: never across binlog files).

What a following run waits for is here too: :data:`STANDBY_POLL_SECONDS` (a standby run's poll
of an idle binlog), :func:`has_work` (a run that wrote or stopped something waits
``stream_follow_idle_seconds`` on an idle binlog, one that did not ends, unless it is a standby
run) and :class:`QuietWindows` (the run log's lines of windows that changed no captured table).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..events import BinlogPosition
from ..sink.layout import LakeLayout
from ..sink.storage import StorageSettings

if TYPE_CHECKING:
    from .run_log import RunLog
    from .window_result import WindowResult

#: A standby run asks the server for its position this often while the binlog is idle (seconds):
#: half of it is the mean wait between a COMMIT and the read of its window.
STANDBY_POLL_SECONDS = 0.25


@dataclass(frozen=True)
class FollowWindow:
    """A follow-on window ``[start, end)`` planned from position ``after`` (where the previous
    window ended; ``start`` differs from it only when ``after`` is the end of a binlog file)."""

    after: BinlogPosition
    start: BinlogPosition
    end: BinlogPosition

    @property
    def chunks_only(self) -> bool:
        """An empty window (``after == start == end``): it reads incremental-snapshot chunks only."""
        return self.start.sort_key() == self.after.sort_key() and self.end.sort_key() == self.after.sort_key()

    def to_json(self) -> str:
        return json.dumps(
            {"after": self.after.to_dict(), "start": self.start.to_dict(), "end": self.end.to_dict()},
            sort_keys=True,
        )

    @classmethod
    def from_json(cls, text: str) -> FollowWindow:
        d = json.loads(text)
        return cls(
            BinlogPosition.from_dict(d["after"]),
            BinlogPosition.from_dict(d["start"]),
            BinlogPosition.from_dict(d["end"]),
        )


def load_follow_window(
    storage: StorageSettings, server_name: str, after: BinlogPosition, state_tag: str | None = None
) -> FollowWindow | None:
    """The follow-on window an earlier run (or attempt) planned from ``after``, if any.

    ``state_tag``: the incremental snapshot's (``engine.incremental.state_tag``) at ``after``. An
    empty window that only reads chunks is saved under it (:func:`save_follow_window`) and is
    this window only for that state; a window that reads the binlog is saved under ``after``
    alone (an empty one found there was saved before the tag existed and is passed over when a
    snapshot is active: it belonged to another state)."""
    layout = LakeLayout(storage, server_name)
    if state_tag and (data := storage.read_bytes(layout.follow_window(after, state_tag))) is not None:
        return FollowWindow.from_json(data.decode())
    data = storage.read_bytes(layout.follow_window(after))
    if data is None:
        return None
    w = FollowWindow.from_json(data.decode())
    return None if state_tag and w.chunks_only else w


def save_follow_window(
    storage: StorageSettings, server_name: str, window: FollowWindow, state_tag: str | None = None
) -> FollowWindow:
    """Save ``window`` unless a window from the same position exists (then return that one:
    the first writer wins, so every attempt reads the same bounds). An empty window that only
    reads chunks (:attr:`FollowWindow.chunks_only`) is saved under the snapshot's ``state_tag``.

    Raises:
        botocore ClientError / OSError: the lake cannot be written.
    """
    tag = state_tag if window.chunks_only else None
    existing = storage.first_write(
        LakeLayout(storage, server_name).follow_window(window.after, tag), window.to_json().encode()
    )
    return window if existing is None else FollowWindow.from_json(existing.decode())


def has_work(result: WindowResult) -> bool:
    """Whether a following run's windows did something to report and check: wrote changes, or
    stopped a table (its checks fail naming the stop; the sensor records it in its cursor)."""
    return result.rows > 0 or bool(result.failed_tables)


class QuietWindows:
    """The run log's lines of follow-on windows: one per window that changed a captured table,
    one per series of windows that changed none (another database's traffic on the same server:
    a line per transaction would be an event per transaction in Dagster's event log)."""

    def __init__(self, log: RunLog) -> None:
        self.log = log
        self.first: BinlogPosition | None = None
        self.last: BinlogPosition | None = None
        self.count = 0
        self.events = 0

    def window(self, start: BinlogPosition, r: WindowResult, most: float = 0.0) -> None:
        """Log the window ``[start, r.end)`` read as ``r``, or count it while it changed nothing
        and then wait :data:`STANDBY_POLL_SECONDS` (a standby run's idle poll), at most ``most``
        seconds (``0``: a run logging its idle checks, whose slices pace it): on a busy server the
        next window then gathers that much traffic instead of one transaction (each window costs
        a saved window in the lake, a progress tag and two binlog connections), at most that much
        later for a change of a captured table."""
        if r.rows == 0 and not r.tables:
            self.first = start if self.first is None else self.first
            self.last, self.count, self.events = r.end, self.count + 1, self.events + r.events_read
            time.sleep(max(0.0, min(STANDBY_POLL_SECONDS, most)))
            return
        self.flush()
        self.log.info(
            f"Follow-on window {start} -> {r.end}: {r.rows} rows, {r.events_read} events in {r.seconds:.1f}s"
        )

    def flush(self) -> None:
        """Log the series of windows that changed no captured table, if any."""
        if self.count:
            self.log.info(
                f"Follow-on windows {self.first} -> {self.last}: {self.count} window(s), "
                f"{self.events} events, no change to a captured table"
            )
        self.first, self.last, self.count, self.events = None, None, 0, 0


@dataclass(frozen=True)
class NextWindow:
    """What the sensor would request after a followed window (:class:`FollowPlanner`).

    Attributes:
        requested: the sensor would request a run (``False``: the source is caught up).
        start, end: the stream window ``[start, end)`` it would request; both ``None`` when it
            would request another kind of run (a re-snapshot): following ends there.
    """

    requested: bool
    start: BinlogPosition | None = None
    end: BinlogPosition | None = None


@dataclass(frozen=True)
class FollowPlanner:
    """How a following run finds its next window, as the binlog sensor would.

    Attributes:
        next_window: ``next_window(after)``: the window after the offset ``after``
            (reads the server's current position and binlog files).
        changed_tables: ``changed_tables(start, end)``: ``(tables with row events in [start,
            end), why)``; ``None`` when the window cannot be judged (DDL, statement DML, a signal,
            too large): following ends.
    """

    next_window: Callable[[BinlogPosition], NextWindow]
    changed_tables: Callable[[BinlogPosition, BinlogPosition], tuple[set[tuple[str, str]] | None, str]]


@dataclass(frozen=True)
class RunProgress:
    """How far a following stream run got while it runs: reported each time it committed a
    follow-on window, and before it reads the next one (a run that dies before its first
    follow-on window is committed is retried whole, as any window run).

    Attributes:
        reached: everything before it is committed (:func:`.window_result.reached_offset` of the windows read).
        windows: follow-on windows committed so far.
        stopped: the tables stopped so far, as :attr:`StreamRunOutcome.stopped`.
        next: the follow-on window the run saved and is reading from ``reached`` (an attempt may
            have committed part of it: whoever continues from ``reached`` reads exactly it).
        rows: row changes written so far (0: a standby run still waiting for its first change,
            whatever windows of other databases' traffic it read).
        incremental: the incremental snapshot state at ``reached``
            (:meth:`.incremental.IncrementalState.to_dict`; ``None``: none running): whoever
            continues from ``reached`` reads its next chunks with it (``next``'s saved chunk
            plan, if that window planned any, was made from it).
    """

    reached: BinlogPosition
    windows: int
    stopped: dict[str, dict]
    next: FollowWindow | None = None
    rows: int = 0
    incremental: dict | None = None

    def to_dict(self) -> dict:
        """JSON-able form (positions as :meth:`BinlogPosition.to_dict`; errors cut to 300
        characters)."""
        out: dict = {
            "reached": self.reached.to_dict(),
            "windows": self.windows,
            "rows": self.rows,
            "stopped": {n: {**v, "error": str(v.get("error") or "")[:300]} for n, v in self.stopped.items()},
            "incremental": self.incremental,
        }
        if self.next is not None:
            out["next"] = {"start": self.next.start.to_dict(), "end": self.next.end.to_dict()}
        return out
