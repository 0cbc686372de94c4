"""Bounded storage: files the Delta tables no longer use are vacuumed after a retention.

Every commit that replaces files leaves the old ones on storage: a compaction of the state (its
old files), the removal of the tail files it consumed, an ``OPTIMIZE`` of small files, a rewrite
after a type change; and a run killed before its commit leaves uncommitted files. Delta keeps
them so that readers of an older version (time travel, a query that started before the commit, a
retried run) still find them; ``VACUUM`` deletes those removed longer ago than the retention
(Delta's default: 7 days, ``delta.deletedFileRetentionDuration``) and the orphans as old, and the
Delta log's cleanup drops commit files older than the log retention behind a checkpoint; the
log retention (``delta.logRetentionDuration``, Delta's default 30 days) is set to the file
retention, because older entries name files already vacuumed.

:func:`vacuum_if_due` runs both on a table when its last vacuum (table property
:data:`VACUUMED_AT`) is older than ``interval_hours``, after a batch commits to it; so storage
stays bounded by the live data plus what the retention keeps, without a maintenance job. The log
is cleaned up only here: the library's other commits skip delta-rs's cleanup after each commit
(:data:`.delta.COMMIT_HOOKS`), which lists the whole log every time.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .delta import open_table, wrote
from .storage import StorageSettings

if TYPE_CHECKING:
    from deltalake import DeltaTable

log = logging.getLogger(__name__)

#: Table property: when the table was last vacuumed (epoch seconds).
VACUUMED_AT = "dagster_mysql_cdc.vacuumed_at"


@dataclass(frozen=True)
class RetentionPolicy:
    """Attributes:
    retention_hours: files removed from a table longer ago than this are deleted (time travel
        reaches back this far); Delta's default, 168 (7 days).
    interval_hours: vacuum a table at most this often (``0``: never; run ``VACUUM`` yourself).
    """

    retention_hours: float = 168.0
    interval_hours: float = 24.0


def vacuum_if_due(
    storage: StorageSettings, table_uri: str, policy: RetentionPolicy, now: float | None = None
) -> dict[str, Any]:
    """Vacuum ``table_uri`` and clean up its log when the last vacuum is older than
    ``policy.interval_hours``. Best-effort: a failure is logged and left for the next time.

    Returns:
        ``{"files_deleted", "seconds"}`` when it ran, ``{}`` otherwise.
    """
    if policy.interval_hours <= 0:
        return {}
    dt = open_table(storage, table_uri)
    if dt is None:
        return {}
    now = time.time() if now is None else now
    last = dt.metadata().configuration.get(VACUUMED_AT)
    since = float(last) if last is not None else _created_at(storage, table_uri, dt)
    if since is None or now - since < policy.interval_hours * 3600:
        return {}
    t0 = time.monotonic()
    try:
        deleted = dt.vacuum(
            retention_hours=int(policy.retention_hours),
            dry_run=False,
            enforce_retention_duration=False,
            full=True,  # also files no commit ever referenced (a run killed before its commit)
        )
        _log_retention(dt, policy.retention_hours)
        dt.cleanup_metadata()
        _mark(dt, now)
        dt.update_incremental()
        # (VACUUM START/END and the properties: other handles read them at their next open; these
        # commits took delta-rs's default hooks, their checkpoint included)
        wrote(dt, checkpointed=True)
    except Exception as e:  # noqa: BLE001 - maintenance: the batch is committed
        log.warning("vacuum of %s failed (retried later): %s", table_uri, e)
        return {"error": f"{type(e).__name__}: {e}"[:500]}
    log.info("vacuumed %s: %d files deleted", table_uri, len(deleted))
    return {"files_deleted": len(deleted), "seconds": round(time.monotonic() - t0, 3)}


def _created_at(storage: StorageSettings, table_uri: str, dt: DeltaTable | None = None) -> float | None:
    """When the table was created (epoch seconds; ``None``: unknown). A table never vacuumed
    counts its interval from its creation: the ``createdTime`` of its metadata (kept by every
    later metadata change; no request), else the time of its first log file (one stat, no
    commit: a batch that commits nothing leaves the table's version alone)."""
    from pyarrow import fs

    created_ms = dt.metadata().created_time if dt is not None else None
    if created_ms:
        return created_ms / 1000.0
    path = storage.fs_path(f"{table_uri.rstrip('/')}/_delta_log/{0:020d}.json")
    try:
        info = storage.pyarrow_filesystem().get_file_info(path)
    except Exception:  # noqa: BLE001 - unknown: not due
        return None
    if info.type == fs.FileType.NotFound or info.mtime is None:
        return None  # the first commit's file was cleaned up: only a vacuum does that, and marks
    return info.mtime.timestamp()


#: Delta table property: how long log entries are kept behind a checkpoint (Delta's default: 30
#: days). Set to the file retention: older entries name files a vacuum deleted, so time travel
#: cannot reach them anyway, and a log kept 30 days grows by every window's commits.
LOG_RETENTION = "delta.logRetentionDuration"


def log_retention_value(retention_hours: float) -> str:
    """The ``delta.logRetentionDuration`` value for a file retention (whole hours, rounded down)."""
    return f"interval {max(0, int(retention_hours))} hours"


def _log_retention(dt: Any, retention_hours: float) -> None:
    """Keep ``dt``'s log entries as long as its files (:data:`LOG_RETENTION`); a commit only when
    the property differs."""
    want = log_retention_value(retention_hours)
    if dt.metadata().configuration.get(LOG_RETENTION) == want:
        return
    dt.alter.set_table_properties({LOG_RETENTION: want}, raise_if_not_exists=False)
    dt.update_incremental()


def _mark(dt: Any, now: float) -> None:
    try:
        dt.alter.set_table_properties({VACUUMED_AT: f"{now:.0f}"}, raise_if_not_exists=False)
    except Exception as e:  # pragma: no cover - concurrent writers
        log.debug("could not record the vacuum of %s: %s", dt.table_uri, e)
