"""Delta checkpoints written beside the windows, not inside their commits.

A Delta checkpoint (protocol, "Checkpoints") is a Parquet copy of a table's state at a version:
every live file and every file removed within ``delta.deletedFileRetentionDuration`` (7 days by
default, a *tombstone*). delta-rs writes one inside the commit whose version is a multiple of
``delta.checkpointInterval`` (10 on the library's tables, :data:`.delta.TABLE_PROPERTIES`), so that
commit costs the whole checkpoint. A table streamed for days collects its compactions' removed
files (about one per window in each of its change log and tail: 600,000 a week at one window a
second): one commit in ten then took 0.28 s (local disk) to 0.36 s (S3) more per 100,000 of them
(``python -m bench.log_growth --tombstones``), on the path from the COMMIT to the lake.

Commits the library makes through a handle (:func:`.delta.wrote`) skip delta-rs's checkpoint
(:data:`.delta.COMMIT_HOOKS`) and call :func:`after_commit`, which queues the table here when the
commit reached a checkpoint version; a background thread opens the table afresh and writes the
checkpoint (``DeltaTable.create_checkpoint``) at its latest version. A table is queued at most once:
while its checkpoint waits or is written, later windows do not queue it again, so a table whose
checkpoints are slow gets fewer of them instead of a growing queue. A checkpoint is an
optimisation (readers replay the JSON commits after the last one): a failure is logged and left for
the next checkpoint version. The process waits for queued checkpoints at exit (at most
:data:`EXIT_WAIT_SECONDS`); a checkpoint cut short leaves no partial file (object stores and
delta-rs's local store publish a file whole) and the next one is written later.

Writes by path (``write_deltalake`` on a URI, followed by :func:`.delta.changed`) keep delta-rs's
inline checkpoint (:data:`.delta.PATH_COMMIT_HOOKS`): no handle follows them to here.
"""

from __future__ import annotations

import atexit
import logging
import os
import threading
import time
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .storage import StorageSettings

log = logging.getLogger(__name__)

#: Delta's default ``delta.checkpointInterval`` (a table without the property).
DEFAULT_INTERVAL = 100

#: Seconds a process waits at exit for the checkpoints still queued.
EXIT_WAIT_SECONDS = 30.0

#: Background threads writing checkpoints (object stores: mostly requests; a local disk: CPU).
WORKERS = 2


def checkpoint_interval(dt: Any) -> int:
    """The table's ``delta.checkpointInterval`` (:data:`DEFAULT_INTERVAL` when unset or invalid)."""
    try:
        return max(1, int(dt.metadata().configuration.get("delta.checkpointInterval", DEFAULT_INTERVAL)))
    except (TypeError, ValueError):
        return DEFAULT_INTERVAL


def crossed(before: int | None, after: int, interval: int) -> bool:
    """Whether a table that went from version ``before`` to ``after`` passed a checkpoint version
    (a multiple of ``interval``; ``before=None``: unknown, then only ``after`` itself counts), as
    delta-rs's post-commit hook decides for one commit."""
    if before is None:
        return after > 0 and after % interval == 0
    return after > before and after // interval > before // interval


class Checkpointer:
    """Queue of tables to checkpoint, written by :data:`WORKERS` daemon threads (started on demand).

    Attributes:
        written / failed: checkpoints written and failed by this process.
        seconds: their total wall time (open + write).
    """

    def __init__(self, workers: int = WORKERS) -> None:
        self._workers = max(1, workers)
        self.reset()

    def reset(self) -> None:
        """Forget every queued table and thread (a forked child, which has none of them)."""
        self._cond = threading.Condition()
        self._queued: dict[str, StorageSettings] = {}  # table URI -> its storage, in queue order
        self._running: set[str] = set()
        self._threads: list[threading.Thread] = []
        self._paused = False
        self.written = 0
        self.failed = 0
        self.seconds = 0.0

    def queue(self, storage: StorageSettings, table_uri: str) -> None:
        """Checkpoint ``table_uri`` at its latest version, soon (nothing when already queued)."""
        with self._cond:
            if table_uri in self._queued:
                return
            self._queued[table_uri] = storage
            if len(self._threads) < self._workers:
                t = threading.Thread(target=self._work, name="cdc-delta-checkpoint", daemon=True)
                self._threads.append(t)
                t.start()
            self._cond.notify()

    def pending(self) -> int:
        """Tables queued or being checkpointed."""
        with self._cond:
            return len(self._queued) + len(self._running)

    def drain(self, timeout: float | None = None) -> bool:
        """Wait until no checkpoint is queued or being written (``timeout`` seconds at most).

        Returns:
            ``True`` when none is left.
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._cond:
            while self._queued or self._running:
                if self._paused:
                    return False
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    return False
                self._cond.wait(left)
        return True

    def pause(self, paused: bool) -> None:
        """Hold queued checkpoints (``True``) or let them be written (tests, benchmarks)."""
        with self._cond:
            self._paused = paused
            self._cond.notify_all()

    def _next(self) -> tuple[str, StorageSettings] | None:
        with self._cond:
            while True:
                if not self._paused:
                    uri = next((u for u in self._queued if u not in self._running), None)
                    if uri is not None:
                        self._running.add(uri)
                        return uri, self._queued.pop(uri)
                if not self._cond.wait(timeout=60.0) and not self._queued:
                    # idle for a minute: the thread ends (off the list under the lock, so the next
                    # queue() starts another instead of counting on this one)
                    me = threading.current_thread()
                    self._threads = [t for t in self._threads if t is not me]
                    return None

    def _work(self) -> None:
        while (job := self._next()) is not None:
            uri, storage = job
            t0 = time.monotonic()
            ok = _write(storage, uri)
            with self._cond:
                self._running.discard(uri)
                self.seconds += time.monotonic() - t0
                if ok:
                    self.written += 1
                else:
                    self.failed += 1
                self._cond.notify_all()


def _write(storage: StorageSettings, table_uri: str) -> bool:
    """Open ``table_uri`` afresh (a handle of its own: a commit thread may be using the cached
    one) and write its checkpoint at the latest version. Best-effort."""
    from deltalake import DeltaTable

    try:
        dt = DeltaTable(table_uri, storage_options=storage.delta_storage_options())
        dt.create_checkpoint()
        log.debug("checkpoint of %s at version %d", table_uri, dt.version())
        return True
    except Exception as e:  # noqa: BLE001 - an optimisation: the next checkpoint version retries
        log.warning("checkpoint of %s skipped (written at its next checkpoint version): %s", table_uri, e)
        return False


#: The process's checkpoints.
CHECKPOINTS = Checkpointer()

#: The version each table was last seen at by :func:`after_commit` in this process.
_last_seen: dict[str, int] = {}
_last_lock = threading.Lock()


def after_commit(
    dt: Any, table_uri: str, storage: StorageSettings | None, *, checkpointed: bool = False
) -> bool:
    """After a commit through the handle ``dt`` (its version now the commit's): queue the table's
    checkpoint when the commit reached a checkpoint version (:func:`crossed`, counted from the
    version this process last saw). Without ``storage`` (a handle not opened by
    :func:`.delta.open_table`), the checkpoint is written now, through ``dt``, as delta-rs would.
    ``checkpointed=True``: the commit ran delta-rs's own checkpoint hook; only its version is noted.

    Returns:
        whether a checkpoint is due (queued or written).
    """
    version = dt.version()
    with _last_lock:
        before = _last_seen.get(table_uri)
        _last_seen[table_uri] = version
    if checkpointed or not crossed(before, version, checkpoint_interval(dt)):
        return False
    if storage is None:
        try:
            dt.create_checkpoint()
        except Exception as e:  # noqa: BLE001 - as in _write
            log.warning("checkpoint of %s skipped: %s", table_uri, e)
        return True
    CHECKPOINTS.queue(storage, table_uri)
    return True


def _reset_in_child() -> None:
    """A forked child has none of the parent's threads: it starts with an empty queue of its own."""
    CHECKPOINTS.reset()  # (the same object: importers keep their reference)


os.register_at_fork(after_in_child=_reset_in_child)


@atexit.register
def _at_exit() -> None:
    if CHECKPOINTS.pending() and not CHECKPOINTS.drain(EXIT_WAIT_SECONDS):
        log.warning("%d Delta checkpoint(s) left unwritten at exit", CHECKPOINTS.pending())
