"""One table never stops the others: stopped tables and their catch-up.

A window commits table by table (:meth:`.stream.BinlogStreamingSource.commit`). When one table's
events cannot be written (a value that cannot be converted, a sink error of that table's Delta
tables), that table **stops alone**: nothing of its window is committed, the other tables and the
schema history are, and the window succeeds. The run reports the table in
:attr:`.stream.WindowResult.failed_tables`; the binlog sensor keeps it in its cursor with the
position its capture stopped at (``since``: the start of the window it could not commit), and
later windows leave it out (:meth:`..source.filters.TableFilter.without`).

A stopped table is retried with an exponential backoff (:func:`retry_delay`): the run of a window
first **catches the table up** (:func:`catch_up`: the binlog from ``since`` to the window's start,
read for that table only, committed with the same batch identities as streaming, so what an
earlier attempt committed is skipped), then reads the window with it. A catch-up that fails
again keeps the table stopped with the new error. When ``since`` is no longer on the server
(purged), the table is snapshotted again instead (a blocking snapshot), which ends its stop.

When the lake itself fails (storage down, credentials), no table is to blame: the window fails
as a whole and is retried (:func:`lake_unreachable` tells the two apart).

Debezium has no per-table isolation (a failing record stops the connector, or is skipped with
``event.processing.failure.handling.mode``); this follows Kafka Connect's dead-letter idea, per
table, without losing the table's events: they are replayed from the binlog.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass

from ..errors import describe
from ..events import BinlogPosition
from ..sink.storage import StorageSettings

log = logging.getLogger(__name__)

#: First retry of a stopped table after this many seconds, doubled per failed attempt ...
RETRY_BASE_SECONDS = 60.0
#: ... up to this many seconds between attempts.
RETRY_MAX_SECONDS = 3600.0


def retry_delay(attempts: int, base: float = RETRY_BASE_SECONDS, cap: float = RETRY_MAX_SECONDS) -> float:
    """Seconds before the next attempt after ``attempts`` failed ones: ``base * 2**(attempts-1)``,
    at most ``cap`` (``attempts <= 0``: 0)."""
    if attempts <= 0:
        return 0.0
    return float(min(cap, base * 2 ** min(attempts - 1, 30)))


def lake_unreachable(storage: StorageSettings, server_name: str) -> str | None:
    """Why the lake cannot be written, or ``None`` when it can: a small object is written to and
    read back from ``_staging/<server>/probe/`` (then removed).

    Used after a table failed to commit: a failure of the lake itself must fail the window
    (retried as a whole), not stop every table one by one."""
    uri = storage.uri("_staging", server_name, "probe", f"probe-{uuid.uuid4().hex}")
    body = b"dagster-mysql-cdc lake probe"
    try:
        storage.write_bytes(uri, body)
        if storage.read_bytes(uri) != body:
            return "a probe object written to the lake reads back differently"
    except Exception as e:
        return describe(e, 500)
    try:
        storage.pyarrow_filesystem().delete_file(storage.fs_path(uri))
    except Exception:
        pass
    return None


@dataclass(frozen=True)
class StoppedTable:
    """A table whose capture stopped (kept in the sensor cursor, passed to runs in a tag).

    Attributes:
        since: the position its capture stopped at: everything before is in the lake.
        error: why (the first line of the error).
        attempts: failed attempts so far (the first failure included).
        retry_at: when the next attempt is due (epoch seconds).
        stopped_at: when it first stopped (epoch seconds).
    """

    since: BinlogPosition
    error: str
    attempts: int = 1
    retry_at: float = 0.0
    stopped_at: float = 0.0

    def to_dict(self) -> dict:
        return {
            "since": self.since.to_dict(),
            "error": self.error,
            "attempts": self.attempts,
            "retry_at": round(self.retry_at, 3),
            "stopped_at": round(self.stopped_at, 3),
        }

    @classmethod
    def from_dict(cls, d: dict) -> StoppedTable:
        """Inverse of :meth:`to_dict`.

        Raises:
            ValueError: malformed.
        """
        try:
            return cls(
                since=BinlogPosition.from_dict(d["since"]),
                error=str(d.get("error") or ""),
                attempts=int(d.get("attempts") or 1),
                retry_at=float(d.get("retry_at") or 0.0),
                stopped_at=float(d.get("stopped_at") or 0.0),
            )
        except (KeyError, TypeError) as e:
            raise ValueError(f"not a stopped table: {d!r} ({e})") from None

    def due(self, now: float | None = None) -> bool:
        """Whether the next attempt is due."""
        return (time.time() if now is None else now) >= self.retry_at


def stopped_after_run(
    before: dict[str, StoppedTable],
    reported: dict[str, dict],
    *,
    now: float | None = None,
    base: float = RETRY_BASE_SECONDS,
    cap: float = RETRY_MAX_SECONDS,
) -> dict[str, StoppedTable]:
    """The stopped tables after a successful window run: ``before`` (the cursor's), updated with
    what the run reported (``reported``: ``{"db.table": {"since", "error", "attempted"}}``, every
    table still stopped after the run). A table the run no longer reports was caught up; a new one
    stopped in this window; one the run tried to catch up and could not gets one more attempt and
    a longer backoff."""
    now = time.time() if now is None else now
    out: dict[str, StoppedTable] = {}
    for name, r in reported.items():
        since = BinlogPosition.from_dict(r["since"])
        old = before.get(name)
        error = str(r.get("error") or (old.error if old else ""))
        if old is None:
            out[name] = StoppedTable(since, error, 1, now + retry_delay(1, base, cap), now)
        elif r.get("attempted"):
            n = old.attempts + 1
            out[name] = StoppedTable(old.since, error, n, now + retry_delay(n, base, cap), old.stopped_at)
        else:
            out[name] = old
    return out


def catch_up(
    read: Callable[[BinlogPosition, BinlogPosition], object],
    since: BinlogPosition,
    until: BinlogPosition,
    files: list[tuple[str, int]],
) -> int:
    """Read one stopped table's binlog from ``since`` to ``until`` window by window (a window never
    spans binlog files, as the sensor plans them): ``read(start, end)`` reads and commits one.

    Returns:
        the number of windows read.
    Raises:
        whatever ``read`` raises (the table stays stopped).
    """
    names = [f for f, _ in files]
    start, n = since, 0
    while start.sort_key() < until.sort_key():
        if start.file == until.file or start.file not in names:
            end = until
        else:
            end = start.at(start.file, files[names.index(start.file)][1])
        read(start, end)
        n += 1
        if end.file == until.file and end.pos >= until.pos:
            break
        i = names.index(start.file) if start.file in names else -1
        if i < 0 or i + 1 >= len(names):
            break
        start = start.at(names[i + 1], 4)
    return n
