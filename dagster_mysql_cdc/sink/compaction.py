"""Compaction: the state's tail applied to the compacted state, which is rewritten (merge-on-read).

A window appends its changes to the table's ``state_tail`` (:mod:`.tail`) and never rewrites
the compacted ``state``; reading the current state applies the tail (:mod:`.current`). A
compaction rewrites the compacted state with the tail applied and then removes the tail files it
consumed. It runs after a table batch's commit when it is due (:class:`CompactionPolicy`): when the
tail holds a fraction of the state's rows (so its cost, a rewrite of the state, is amortized over
that many changes: the state is written ``1 / tail_fraction`` times per its size of changes), when
the tail's oldest change is older than an age, or at every commit while the table is small.

Two ways, the same result (:func:`.current.resolve`):

- **in the run process** (pyarrow) while state and tail hold at most ``in_process_rows`` rows;
- **by Spark tasks** above that (:mod:`.compaction_spark`): the state and tail files are read by
  the executors (a Python data source over the lake's files, no Hadoop S3 connector needed),
  grouped by key, and written back by the executors, so a cluster compacts a large table in
  parallel and the run process never holds it.

Exactly once, and never in the way of readers: the new state is one Delta commit (an overwrite,
optimistic: it fails if another writer committed to the state since the compaction read it, and
the compaction is simply left for the next batch); the consumed tail files are removed in a second
commit. Between the two, or when the second one fails, the tail still holds rows the state
already has: applying them again changes nothing (a keyed row loses to the compacted one or
equals it; a keyless value counts only tail rows newer than its compacted row). Readers of older
versions keep their files until ``VACUUM`` (:mod:`.retention`).
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc

from ..events import BinlogPosition
from .compaction_commit import compaction_commit_info, remove_files
from .current import resolve
from .data_files import read_files
from .evolution import conform_table
from .state_rows import newest_order_key
from .storage import StorageSettings
from .tail import state_schema_after

if TYPE_CHECKING:
    from deltalake import DeltaTable

    from .layout import TablePaths

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class CompactionPolicy:
    """When a table's state is compacted (after a batch commits, in the same run).

    Attributes:
        tail_fraction: compact when the tail holds this fraction of the compacted state's rows
            (0.1: the state is rewritten once per 10 % of its size in changes) ...
        min_tail_rows: ... and at least this many rows: a small table is not rewritten for each
            handful of changes (a window that changes hundreds of small tables would pay a
            compaction each).
        small_state_rows: a state below this many rows is compacted at every commit, so plain
            Delta readers of ``state`` see every window at once (0, the default: none; the current
            read, :mod:`.read`, always does).
        max_tail_age_seconds: compact when the oldest uncompacted change is older (0: never by
            age): how far behind the change log a plain reader of ``state`` may be.
        in_process_rows: state + tail rows up to this are compacted in the run process; a larger
            table by Spark tasks.
    """

    tail_fraction: float = 0.1
    min_tail_rows: int = 1_000
    small_state_rows: int = 0
    max_tail_age_seconds: float = 900.0
    in_process_rows: int = 2_000_000


@dataclass(frozen=True)
class TableSizes:
    """Rows and files of a table's compacted state and tail (from the Delta log's statistics)."""

    state_rows: int
    tail_rows: int
    tail_files: int
    tail_oldest_ms: int | None

    def due(self, policy: CompactionPolicy, now_ms: int | None = None) -> str | None:
        """Why a compaction is due, or ``None``."""
        if self.tail_files == 0:
            return None
        if self.state_rows < policy.small_state_rows:
            return f"small table ({self.state_rows} rows < {policy.small_state_rows})"
        if self.tail_rows >= max(policy.tail_fraction * self.state_rows, policy.min_tail_rows):
            return (
                f"tail of {self.tail_rows} rows >= {policy.tail_fraction:g} x {self.state_rows} state rows "
                f"(and >= {policy.min_tail_rows})"
            )
        now_ms = int(time.time() * 1000) if now_ms is None else now_ms
        if (
            policy.max_tail_age_seconds > 0
            and self.tail_oldest_ms is not None
            and now_ms - self.tail_oldest_ms >= policy.max_tail_age_seconds * 1000
        ):
            return f"tail older than {policy.max_tail_age_seconds:g} s"
        return None


def _summary(dt: DeltaTable | None) -> tuple[int, int, int | None]:
    """``(rows, files, oldest modification time in ms or None)`` of the table's live files (from
    its add actions' statistics; ``(0, 0, None)`` when the table does not exist), read once per
    handle version: a window asks it of each table's state and tail after its commit, and a
    following run's cached handle of a state (:func:`.delta.handle_cache`, held for the whole run)
    stays at one version for many windows."""
    if dt is None:
        return (0, 0, None)
    memo = dt.__dict__.get("_cdc_sizes")
    version = dt.version()
    if memo is not None and memo[0] == version:
        return memo[1]
    a = pa.table(dt.get_add_actions(flatten=True))
    rows = 0 if a.num_rows == 0 else int(pc.sum(a.column("num_records")).as_py() or 0)
    oldest = None
    if a.num_rows:
        m = pc.min(a.column("modification_time")).as_py()
        oldest = int(m.timestamp() * 1000) if hasattr(m, "timestamp") else int(m)
    out = (rows, a.num_rows, oldest)
    dt.__dict__["_cdc_sizes"] = (version, out)
    return out


def appended(dt: DeltaTable, before: int, files: list[dict]) -> None:
    """Carry :func:`_summary`'s answer of the handle's version ``before`` to its current version
    when that is one append of ``files`` (``{num_records, modification_time}`` each, as
    :func:`.delta.commit_files` publishes them) through the handle: the tail of a window's table
    is then not listed again to decide its compaction. Nothing happens when no answer for
    ``before`` is kept or the handle moved by more than that commit."""
    memo = dt.__dict__.get("_cdc_sizes")
    if memo is None or memo[0] != before or dt.version() != before + 1:
        return
    rows, count, oldest = memo[1]
    times = [int(f["modification_time"]) for f in files]
    rows += sum(int(f["num_records"]) for f in files)
    if times:
        oldest = min(times) if oldest is None else min(oldest, *times)
    dt.__dict__["_cdc_sizes"] = (dt.version(), (rows, count + len(files), oldest))


def table_sizes(state: DeltaTable | None, tail: DeltaTable | None) -> TableSizes:
    """:class:`TableSizes` of a table (``None``: that Delta table does not exist)."""
    state_rows = _summary(state)[0]
    tail_rows, tail_files, oldest = _summary(tail)
    return TableSizes(state_rows, tail_rows, tail_files, oldest)


def older_than_sql(pos: BinlogPosition, row: int = 0) -> str:
    """SQL predicate (delta-rs/DataFusion) on a state or tail table: the row's ordering key sorts
    below ``(pos, row)`` (a NULL ``__epoch`` is 0)."""
    file = pos.file.replace("'", "''")
    e, n = 'COALESCE("__epoch", 0)', int(pos.epoch)
    f, p, r = '"__binlog_file"', '"__binlog_pos"', '"__binlog_row"'
    return (
        f"({e} < {n}) OR ({e} = {n} AND (({f} < '{file}') OR ({f} = '{file}' AND {p} < {pos.pos}) "
        f"OR ({f} = '{file}' AND {p} = {pos.pos} AND {r} < {row})))"
    )


def compact_in_process(
    storage: StorageSettings,
    paths: TablePaths,
    key: list[str],
    *,
    state_dt: DeltaTable | None,
    tail_dt: DeltaTable,
    reason: str,
) -> dict[str, Any]:
    """Compact one table in the run process (see the module docs).

    Returns:
        metrics: ``rows_in``, ``tail_rows``, ``rows_out``, ``files_removed``, ``seconds``,
        ``state_as_of``; ``{"skipped": why}`` when another writer won the state commit.
    Raises:
        deltalake errors: reading or writing failed (nothing committed).
    """
    from deltalake import CommitProperties, write_deltalake
    from deltalake.exceptions import CommitFailedError

    t0 = time.monotonic()
    keyless = not key
    tail_actions = pa.table(tail_dt.get_add_actions(flatten=True))
    tail_paths = tail_actions.column("path").to_pylist()
    tail_schema = pa.schema(tail_dt.schema().to_arrow())
    state_schema = pa.schema(state_dt.schema().to_arrow()) if state_dt is not None else None
    schema = state_schema_after(state_schema, tail_schema, keyless)
    tail = read_files(storage, paths.tail, tail_paths, tail_schema)
    state = None
    if state_dt is not None:
        state_paths = pa.table(state_dt.get_add_actions(flatten=True)).column("path").to_pylist()
        state = read_files(storage, paths.state, state_paths, pa.schema(state_dt.schema().to_arrow()))
        state = conform_table(state, pa.schema([schema.field(n) for n in state.column_names]))
    out = resolve(state, tail, key=key, schema=schema)
    as_of = newest_order_key(tail)
    from .delta import COMMIT_HOOKS, PATH_COMMIT_HOOKS, TABLE_PROPERTIES, changed, wrote

    try:
        write_deltalake(
            state_dt if state_dt is not None else paths.state,
            out,
            mode="overwrite",
            schema_mode="overwrite",
            configuration=TABLE_PROPERTIES if state_dt is None else None,
            storage_options=storage.delta_storage_options() if state_dt is None else None,
            commit_properties=CommitProperties(
                custom_metadata=compaction_commit_info(reason, as_of),
                max_commit_retries=0,
            ),
            post_commithook_properties=COMMIT_HOOKS if state_dt is not None else PATH_COMMIT_HOOKS,
        )
    except CommitFailedError as e:  # another writer committed to the state meanwhile: next time
        log.info("compaction of %s left for later: %s", paths.state, e)
        return {"skipped": f"another writer committed first ({e})"}
    finally:
        if state_dt is None:
            changed(paths.state)  # created by path (see .delta.handle_cache)
    if state_dt is not None:
        wrote(state_dt)  # (other handles of the state in this process read it at their next open)
    removed = remove_files(tail_dt, tail_actions)
    return {
        "mode": "in_process",
        "reason": reason,
        "rows_in": (state.num_rows if state is not None else 0) + tail.num_rows,
        "tail_rows": tail.num_rows,
        "rows_out": out.num_rows,
        "files_removed": removed,
        "seconds": round(time.monotonic() - t0, 3),
        "state_as_of": as_of,
    }


def compact_table(writer: Any, paths: TablePaths, key: list[str], *, force: bool = False) -> dict[str, Any]:
    """Compact ``paths``' state when it is due under ``writer.compaction`` (or ``force``): in the
    run process up to ``in_process_rows`` rows, by Spark tasks above. Then the tail's small files
    are optimized (``OPTIMIZE``, ``dataChange=false``) when it has many.

    Returns:
        the compaction's metrics with ``reason`` (``{}`` when none was due; then, when the table
        has a tail, ``{"pending": TableSizes}``: what is left for a later compaction).
    """
    from .delta import open_table

    storage = writer.storage
    tail_dt = open_table(storage, paths.tail)
    if tail_dt is None:
        return {}
    state_dt = open_table(storage, paths.state)
    sizes = table_sizes(state_dt, tail_dt)
    policy: CompactionPolicy = writer.compaction
    reason = sizes.due(policy) or ("forced" if force and sizes.tail_files else None)
    if reason is None:
        writer.maybe_compact(paths.tail)
        return {"pending": sizes} if sizes.tail_files else {}
    if sizes.state_rows + sizes.tail_rows > policy.in_process_rows:
        from .compaction_spark import compact_with_spark

        return compact_with_spark(writer, paths, key, state_dt=state_dt, tail_dt=tail_dt, reason=reason)
    return compact_in_process(storage, paths, key, state_dt=state_dt, tail_dt=tail_dt, reason=reason)


def state_due_at(result: dict[str, Any], bound_seconds: float, now: float | None = None) -> float | None:
    """When a table's compacted ``state`` is due for a compaction by age, after a run's
    :meth:`~.lake.LakeWriter.compact_if_due` of it returned ``result`` (epoch seconds; ``None``:
    nothing is pending, its ``state`` holds every change, or ``bound_seconds`` is 0).

    The tail's oldest change plus ``bound_seconds`` (``max_tail_age_seconds``); after a failed or
    skipped compaction, not before ``now + bound_seconds`` (the next attempt waits one bound
    instead of being retried at every tick)."""
    if bound_seconds <= 0:
        return None
    now = time.time() if now is None else now
    pending: TableSizes | None = result.get("pending")
    failed = "error" in result or "skipped" in result
    if pending is not None and pending.tail_files and pending.tail_oldest_ms is not None:
        due = pending.tail_oldest_ms / 1000 + bound_seconds
        return max(due, now + bound_seconds) if failed else due
    if failed:
        return now + bound_seconds
    return None
