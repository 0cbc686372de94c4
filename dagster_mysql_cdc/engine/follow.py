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
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from ..events import BinlogPosition
from ..sink.layout import LakeLayout
from ..sink.storage import StorageSettings


@dataclass(frozen=True)
class FollowWindow:
    """A follow-on window ``[start, end)`` planned from position ``after`` (where the previous
    window ended; ``start`` differs from it only when ``after`` is the end of a binlog file)."""

    after: BinlogPosition
    start: BinlogPosition
    end: BinlogPosition

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
    storage: StorageSettings, server_name: str, after: BinlogPosition
) -> FollowWindow | None:
    """The follow-on window an earlier run (or attempt) planned from ``after``, if any."""
    data = storage.read_bytes(LakeLayout(storage, server_name).follow_window(after))
    return FollowWindow.from_json(data.decode()) if data is not None else None


def save_follow_window(storage: StorageSettings, server_name: str, window: FollowWindow) -> FollowWindow:
    """Save ``window`` unless a window from the same position exists (then return that one:
    the first writer wins, so every attempt reads the same bounds).

    Raises:
        botocore ClientError / OSError: the lake cannot be written.
    """
    existing = storage.first_write(
        LakeLayout(storage, server_name).follow_window(window.after), window.to_json().encode()
    )
    return window if existing is None else FollowWindow.from_json(existing.decode())
