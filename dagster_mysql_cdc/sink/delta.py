"""Atomic, idempotent Delta commits of data files written by Spark (delta-rs does the commit).

A *batch* is identified by ``(app_id, version)``: ``app_id`` names the writer stream (e.g.
``snapshot`` or ``stream`` of one table) and ``version`` is a monotonic integer (the binlog position
the batch starts at, :meth:`BinlogPosition.as_version`). The commit carries a Delta ``txn`` action
(``SetTransaction``), the protocol's own mechanism for idempotent writers (Delta protocol,
"Transaction Identifiers"): before committing, the table's recorded version for ``app_id`` is read,
and a batch at or below it was already committed, so it is skipped and its new files deleted.
Re-running a batch therefore leaves exactly one copy.
"""

from __future__ import annotations

import json
import logging
import os
import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Literal

import pyarrow as pa
from deltalake import CommitProperties, DeltaTable, PostCommitHookProperties, Transaction
from deltalake.exceptions import TableNotFoundError
from deltalake.transaction import AddAction, RemoveAction, create_table_with_add_actions

from ..errors import SinkError
from . import checkpoints
from .storage import StorageSettings

log = logging.getLogger(__name__)

#: Delta table properties of every change log / state table the library creates (and added to
#: existing ones on their next commit). ``delta.checkpointInterval``: a table fed by small stream
#: windows gets 2-3 commits per window (change log append; state merge + batch-identity commit;
#: compaction); with Delta's default interval of 100, a reader that opens the table replays up to
#: 99 JSON commits after the last checkpoint, which dominates a full read of a small table (up to
#: ~10x a freshly written copy, bench/small_files.py). 10 bounds the replay at 9 commits; writing a
#: checkpoint costs one Parquet file of the live files (bounded by compaction) and tombstones.
TABLE_PROPERTIES: dict[str, str] = {"delta.checkpointInterval": "10"}

#: Post-commit hooks of every commit the library makes through a handle outside the vacuum (then
#: :func:`wrote`): no checkpoint inside the commit (:func:`wrote` queues it, written beside the
#: windows by :mod:`.checkpoints`: with a week of removed files a checkpoint takes seconds) and no
#: expired-log cleanup. delta-rs runs that cleanup
#: after *every* commit (``delta.enableExpiredLogCleanup``, on by default), and it lists the whole
#: ``_delta_log``, which holds every commit of the log retention (7 days, :mod:`.retention`): a
#: commit's cost grew with the table's history, not with the batch (``python -m bench.log_growth``,
#: SeaweedFS S3: 28 ms with 100 log entries, 289 ms with 10,000; without the cleanup 27 and 24 ms;
#: a local disk still lists the log to commit: 6 and 63 ms, 137 ms with the cleanup). The
#: vacuum (:func:`.retention.vacuum_if_due`, daily by default) cleans up the expired entries
#: instead, once, with ``cleanup_metadata``; other writers of the table (a user's maintenance
#: job) keep Delta's default. Every new commit site of the library passes it too
#: (``post_commithook_properties=COMMIT_HOOKS``), and calls :func:`wrote` after it.
COMMIT_HOOKS = PostCommitHookProperties(create_checkpoint=False, cleanup_expired_logs=False)

#: Post-commit hooks of a write by path (``write_deltalake`` on a URI, then :func:`changed`): no
#: handle reaches :func:`wrote` to queue the checkpoint, so delta-rs writes it inside the commit
#: (as :data:`COMMIT_HOOKS`, no expired-log cleanup).
PATH_COMMIT_HOOKS = PostCommitHookProperties(create_checkpoint=True, cleanup_expired_logs=False)


@dataclass(frozen=True)
class CommitOutcome:
    """Result of :func:`commit_files`.

    Attributes:
        committed: ``False`` when the batch had already been committed (idempotent skip).
        table_version: Delta table version after the call.
        files: data files added by this commit (0 when skipped).
        rows: rows added by this commit.
    """

    committed: bool
    table_version: int
    files: int
    rows: int


_handles = threading.local()

#: The commits this process made to each table, by table URI, from any thread and through any
#: handle (:func:`wrote`, :func:`changed`): a count. Each handle records the count it has read
#: (``_cdc_seen`` in its ``__dict__``, set when :func:`open_table` or :func:`preload` loads or
#: refreshes it, or when a commit is made through it), so a handle the cache would serve as it is
#: (trusted in a ``sole_writer`` block, just preloaded) is brought up to date first when this
#: process committed to the table through another handle since: e.g. a window's commit task
#: committing the change log through the handle its record batches were prepared with, and the
#: run thread's preloaded handle of the same change log served to the next window's batch (its
#: commit, on that stale handle, failed with delta-rs' ``Concurrent transaction failed``: the
#: commit it missed carries the same Delta ``txn`` application id). Commits of other processes
#: are not known here (delta-rs' conflict check still reads them before a commit).
_commits: dict[str, int] = {}
_commits_lock = threading.Lock()


def _uri_of(dt: DeltaTable) -> str:
    """The URI a handle was opened with (:func:`open_table`), else delta-rs' own."""
    return dt.__dict__.get("_cdc_uri") or dt.table_uri


def _seen(dt: DeltaTable, table_uri: str, count: int) -> None:
    """Record that ``dt`` has read the first ``count`` commits this process made to the table."""
    dt.__dict__["_cdc_uri"] = table_uri
    dt.__dict__["_cdc_seen"] = count


def _behind(dt: DeltaTable, table_uri: str) -> bool:
    """Whether this process committed to the table since ``dt`` was last brought up to date."""
    return dt.__dict__.get("_cdc_seen", 0) < _commits.get(table_uri, 0)


def _local_log_dir(table_uri: str) -> str | None:
    """The ``_delta_log`` directory of a table on the local filesystem (a path or a ``file://``
    URI), else ``None`` (an object store)."""
    if table_uri.startswith("file://"):
        table_uri = table_uri[len("file://") :]
    elif "://" in table_uri:
        return None
    return os.path.join(table_uri, "_delta_log")


def _is_current(dt: DeltaTable, table_uri: str) -> bool:
    """Whether no commit follows the handle's version in the table's log, told by the one file a
    next commit must create (Delta protocol, "Delta Log Entries": version ``n`` is the file
    ``_delta_log/<n, 20 digits>.json``, written put-if-absent; versions are contiguous): a stat on
    the local filesystem (microseconds) instead of ``update_incremental``'s listing of the log
    directory, which grows with the table's history (1.7 ms at 200 commits). ``False`` on an object
    store (the caller lists), and whenever the answer is not certain."""
    log_dir = _local_log_dir(table_uri)
    if log_dir is None:
        return False
    try:
        nxt = os.path.join(log_dir, f"{dt.version() + 1:020d}.json")
        return not os.path.exists(nxt) and os.path.isdir(log_dir)
    except Exception:  # noqa: BLE001 - an unsure answer: the caller lists the log
        return False


def _refresh(dt: DeltaTable, table_uri: str) -> None:
    """Bring ``dt`` up to date (``dt.update_incremental()``, skipped when :func:`_is_current`
    says no newer commit exists), recording the commits of this process it has read."""
    count = _commits.get(table_uri, 0)  # read first: a commit landing meanwhile is read next time
    if not _is_current(dt, table_uri):
        dt.update_incremental()
    _seen(dt, table_uri, count)


def wrote(dt: DeltaTable, *, checkpointed: bool = False) -> None:
    """Record a commit this process made through the handle ``dt`` (any thread), which is
    current after it (delta-rs updates a handle it commits through, or the caller refreshed it):
    every other handle of the table is brought up to date at its next :func:`open_table` (see
    :data:`_commits`). Call it after each commit through a handle; a write by path calls
    :func:`changed` instead. Queues the table's checkpoint when the commit reached a checkpoint
    version (:func:`.checkpoints.after_commit`: the commit skipped delta-rs's, :data:`COMMIT_HOOKS`);
    ``checkpointed=True``: a commit with delta-rs's own checkpoint hook (nothing queued)."""
    uri = _uri_of(dt)
    with _commits_lock:
        count = _commits[uri] = _commits.get(uri, 0) + 1
    _seen(dt, uri, count)
    checkpoints.after_commit(dt, uri, dt.__dict__.get("_cdc_storage"), checkpointed=checkpointed)


@contextmanager
def handle_cache(*, sole_writer: bool = False) -> Iterator[None]:
    """Within this block, :func:`open_table` in the calling thread reuses the handles it opened
    (brought up to date with ``update_incremental``: a few new commits read, not the whole log
    from its checkpoint). A window commits each table through a dozen opens of its three Delta
    tables (schema checks, commits, compaction and vacuum checks): one load each instead.

    Per thread (a ``DeltaTable`` is not used by two threads at once) and per block (nothing is
    kept once the window is committed). Nested blocks share the outer cache.

    ``sole_writer=True``: for the block's duration the calling thread is the only writer of the
    tables it opens (one table's commit task of a window; the checks after the window, which
    write nothing), so a handle is brought up to date once, at its first open in the block, and
    then trusted: every write the thread makes through a handle leaves that handle current
    (delta-rs updates it; :func:`commit_files` reads its own commit back), and a write made
    another way (a path instead of the handle) calls :func:`changed`, which makes the next open
    refresh again. A table found missing stays missing for the block until the thread creates
    it (every creation calls :func:`changed`). On an object store each refresh is a LIST request: a table's commit opens its
    tables a dozen times, the window's checks half a dozen (issue 28). A commit on a handle
    another writer has overtaken is still safe: delta-rs's conflict check reads the newer
    commits before it writes.

    Whatever the block, a handle is brought up to date before it is served as it is when this
    process committed to its table through another handle meanwhile (:func:`wrote`,
    :func:`changed`); a handle :func:`preload` loaded is served as loaded at its next open in
    the same block only (the window that preloaded it), never in a later block.

    A table whose log :func:`preload` could not read is not cached: its :func:`open_table`
    calls in the block (and in blocks nested in it) raise that error again, so the one table
    fails, not the block (a window's tables stop alone, ``engine/isolation.py``)."""
    outer = getattr(_handles, "cache", None)
    if outer is None:
        _handles.cache = {}
        _handles.outer = []
        _handles.outer_failed = []
        _handles.fresh = set()
    # the enclosing block's sets, restored on exit (and cleared by changed() meanwhile)
    _handles.outer.append((getattr(_handles, "trusted", None), getattr(_handles, "absent", None)))
    parent_failed = getattr(_handles, "failed", None)
    _handles.outer_failed.append(parent_failed)
    _handles.trusted = set() if sole_writer else None
    _handles.absent = set() if sole_writer else None
    _handles.failed = dict(parent_failed or {})
    try:
        yield
    finally:
        _handles.trusted, _handles.absent = _handles.outer.pop()
        _handles.failed = _handles.outer_failed.pop()
        if _handles.fresh:
            _handles.fresh.clear()  # "just loaded" holds for the block that loaded them only
        if outer is None:
            _handles.cache = _handles.fresh = None


def in_handle_cache() -> bool:
    """Whether the calling thread is inside a :func:`handle_cache` block."""
    return getattr(_handles, "cache", None) is not None


def cached_handle_count() -> int:
    """How many Delta handles the calling thread's :func:`handle_cache` holds (0 outside one)."""
    cache = getattr(_handles, "cache", None)
    return len(cache) if cache else 0


def cached_handle(table_uri: str) -> DeltaTable | None:
    """The calling thread's cached handle of ``table_uri`` as it is (no refresh, nothing loaded,
    its :func:`preload` status untouched); ``None`` outside :func:`handle_cache` or when the
    block holds none. For work that only reads what a handle already holds (its log's facts at
    its version), on a thread that does not otherwise use the handle meanwhile."""
    cache = getattr(_handles, "cache", None)
    return None if cache is None else cache.get(table_uri)


def release_handles() -> dict[str, DeltaTable]:
    """Take every handle out of the calling thread's cache (``{table URI: handle}``; empty
    outside :func:`handle_cache`) so that another thread can :func:`adopt` them: from here on
    this thread opens those tables afresh and never touches the released handles (a
    ``DeltaTable`` is not used by two threads at once). A window hands its handles to the
    thread that runs its checks while the run's thread reports the materializations."""
    cache = getattr(_handles, "cache", None)
    if not cache:
        return {}
    out = dict(cache)
    cache.clear()
    for u in out:
        _forget(u)  # not trusted, fresh or known absent any more in this thread
    return out


def adopt(table_uri: str, dt: DeltaTable | None, *, current: bool = False) -> None:
    """Put ``dt``, a handle another thread opened (and no longer uses), into the calling thread's
    cache for ``table_uri`` unless it has one: the next :func:`open_table` brings it up to date
    (a few new commits read) instead of loading the table again from its checkpoint. A table's
    commit task adopts the handles the run's thread prepared the batch with (issue 28: one load
    per table and window instead of two).

    ``current=True``: inside a ``sole_writer`` block the handle is trusted as it is (no refresh
    at its next open): the caller knows nobody wrote the table another way since the handle was
    brought up to date. A table batch knows it when none of its record batches rewrote a table
    (a column type that widens is rewritten through a handle of the writing thread's own); a
    commit on a handle that another run's commit overtook is still checked by delta-rs (see
    :func:`handle_cache`)."""
    cache = getattr(_handles, "cache", None)
    if cache is not None and dt is not None and table_uri not in cache:
        cache[table_uri] = dt
        trusted = getattr(_handles, "trusted", None)
        if current and trusted is not None:
            trusted.add(table_uri)


def preload(
    storage: StorageSettings, table_uris: list[str], workers: int = 8, *, app_id: str | None = None
) -> None:
    """Bring the calling thread's cached handles of ``table_uris`` up to date side by side, on up
    to ``workers`` threads (delta-rs reads the logs without the GIL; on an object store the
    requests overlap): tables not cached yet are loaded, and inside a ``sole_writer`` block the
    cached ones not yet refreshed in that block are refreshed (and then trusted, see
    :func:`handle_cache`). The :func:`open_table` calls that follow find them ready. Tables that
    do not exist are skipped. A table whose log cannot be read (a commit file edited by hand, a
    permission on its prefix, the store failing) does not fail the others: its
    :func:`open_table` calls in the block raise a :class:`~..errors.SinkError` naming the table
    and the store (when the store itself fails, every table's does, and the caller tells that
    apart, :func:`..engine.isolation.lake_unreachable`). Nothing happens outside
    :func:`handle_cache` or for fewer than two tables. A window of hundreds of tables loads each
    table's change log, state and tail here, and its checks refresh them here, instead of one
    after another (issue 28). Outside a
    ``sole_writer`` block the next :func:`open_table` of each table takes the handle loaded here
    as it is (it was just brought up to date); the opens after that refresh it again. ``app_id``:
    each loaded table's batch version of that application is read here too
    (:func:`transaction_version`: the window's batches ask it of every table)."""
    from concurrent.futures import ThreadPoolExecutor

    cache = getattr(_handles, "cache", None)
    if cache is None:
        return
    trusted = getattr(_handles, "trusted", None)
    todo = [
        u for u in dict.fromkeys(table_uris) if u not in cache or (trusted is not None and u not in trusted)
    ]
    if len(todo) < 2:
        return
    opts = storage.delta_storage_options()

    def load(uri: str) -> DeltaTable | SinkError | None:
        try:
            dt = cache.get(uri)
            if dt is not None:
                _refresh(dt, uri)
            else:
                count = _commits.get(uri, 0)
                dt = DeltaTable(uri, storage_options=opts)
                _seen(dt, uri, count)
                dt.__dict__["_cdc_storage"] = storage
            if app_id is not None:
                transaction_version(dt, app_id)
            return dt
        except TableNotFoundError:
            return None
        except Exception as e:  # this table's log, or the store: say which one (raised at its open)
            return _log_error(storage, uri, e)

    with ThreadPoolExecutor(min(workers, len(todo)), thread_name_prefix="cdc-open") as pool:
        loaded = list(pool.map(load, todo))
    absent = getattr(_handles, "absent", None)
    fresh = getattr(_handles, "fresh", None)
    failed = getattr(_handles, "failed", None)
    for uri, dt in zip(todo, loaded):
        if isinstance(dt, SinkError):
            cache.pop(uri, None)  # (a cached handle that could not be refreshed is not used)
            if failed is not None:
                failed[uri] = dt
        elif dt is not None:
            cache[uri] = dt
            if trusted is not None:
                trusted.add(uri)
            elif fresh is not None:
                fresh.add(uri)
        elif absent is not None:
            absent.add(uri)


def _log_error(storage: StorageSettings, table_uri: str, e: BaseException) -> SinkError:
    """The error of a Delta log that cannot be read, naming the table and the store (delta-rs'
    text without the Rust backtrace it may carry)."""
    text = []
    for line in str(e).splitlines():
        if re.match(r"\s*\d+: ", line):  # "   0: <unknown>": the backtrace starts
            break
        text.append(line.strip())
    err = SinkError(
        f"reading the Delta log of {table_uri} on {storage.location()} failed: {type(e).__name__}: "
        f"{' '.join(t for t in text if t)} (docs/operations.md, 'A table stopped')"
    )
    err.__cause__ = e
    return err


def changed(table_uri: str) -> None:
    """Record that the calling thread wrote ``table_uri`` other than through its cached handle
    (e.g. ``write_deltalake`` on the path): the next :func:`open_table` of the table, in this
    thread (also in a ``sole_writer`` block) and in any other (see :data:`_commits`), brings its
    handle up to date again."""
    with _commits_lock:
        _commits[table_uri] = _commits.get(table_uri, 0) + 1
    _forget(table_uri)


def _forget(table_uri: str) -> None:
    """The calling thread no longer trusts its handle of ``table_uri`` (nor knows it absent)."""
    fresh = getattr(_handles, "fresh", None)
    if fresh is not None:
        fresh.discard(table_uri)
    for sets in getattr(_handles, "outer", []) + [
        (getattr(_handles, "trusted", None), getattr(_handles, "absent", None))
    ]:
        for s in sets:  # this block's and every enclosing one's
            if s is not None:
                s.discard(table_uri)


def open_table(storage: StorageSettings, table_uri: str) -> DeltaTable | None:
    """The Delta table at ``table_uri``, or ``None`` if none exists yet (inside
    :func:`handle_cache`: the thread's handle, updated; in a ``sole_writer`` block, updated at
    its first open only).

    Raises:
        SinkError: its Delta log cannot be read (naming the table and the store; in a
            :func:`handle_cache` block also when :func:`preload` could not read it).
    """
    failed = getattr(_handles, "failed", None)
    if failed and table_uri in failed:
        raise failed[table_uri]
    cache = getattr(_handles, "cache", None)
    trusted = getattr(_handles, "trusted", None)
    absent = getattr(_handles, "absent", None)
    if absent is not None and table_uri in absent:
        return None
    if cache is not None:
        dt = cache.get(table_uri)
        if dt is not None:
            fresh = getattr(_handles, "fresh", None)
            behind = _behind(dt, table_uri)  # this process committed through another handle
            if fresh and table_uri in fresh and not behind:  # just loaded or refreshed by preload()
                fresh.discard(table_uri)
            elif trusted is None or table_uri not in trusted or behind:
                if fresh:
                    fresh.discard(table_uri)
                try:
                    _refresh(dt, table_uri)
                except Exception as e:
                    raise _log_error(storage, table_uri, e) from e
                if trusted is not None:
                    trusted.add(table_uri)
            return dt
    count = _commits.get(table_uri, 0)
    try:  # one load (an S3 client is made per call: is_deltatable first would make two)
        dt = DeltaTable(table_uri, storage_options=storage.delta_storage_options())
    except TableNotFoundError:
        if absent is not None:
            absent.add(table_uri)
        return None
    except Exception as e:
        raise _log_error(storage, table_uri, e) from e
    _seen(dt, table_uri, count)
    dt.__dict__["_cdc_storage"] = storage  # (checkpoints.after_commit opens its own handle with it)
    if cache is not None:
        cache[table_uri] = dt
        if trusted is not None:
            trusted.add(table_uri)
    return dt


def transaction_version(dt: DeltaTable, app_id: str) -> int | None:
    """The newest batch version of ``app_id`` committed to the table as of the handle's version
    (Delta ``txn`` action, see the module docs), or ``None``: ``dt.transaction_version`` asked once
    per handle version (delta-rs reads the table's log again for each call: 0.3 ms on a local
    disk, 3 ms and several GET requests on S3; a window asks for each table's state, tail and
    change log on the run's thread and again in the table's commit). Kept on the handle, so a
    handle another thread adopts brings its answers along, and a refreshed handle asks again."""
    key = (dt.version(), app_id)
    memo: dict[tuple[int, str], int | None] = dt.__dict__.setdefault("_cdc_txn_versions", {})
    if key not in memo:
        for k in [k for k in memo if k[0] != key[0]]:  # a run-long cached handle lives for many versions
            del memo[k]
        memo[key] = dt.transaction_version(app_id)
    return memo[key]


def _remember_transaction(dt: DeltaTable, before: int, app_id: str, version: int) -> None:
    """Record in :func:`transaction_version`'s memo what the handle's current version, one commit
    after ``before`` and made through the handle, carries: ``app_id``'s batch ``version``, and every
    other application's batch as it was at ``before`` (the commit has no other ``txn`` action). The
    next window asks them of the same handle without reading the log again (1.8 ms each)."""
    memo: dict[tuple[int, str], int | None] = dt.__dict__.setdefault("_cdc_txn_versions", {})
    now = dt.version()
    carried = {(now, app): done for (v, app), done in memo.items() if v == before and app != app_id}
    memo.clear()
    memo.update(carried)
    memo[(now, app_id)] = version


def read_table(storage: StorageSettings, table_uri: str) -> DeltaTable:
    """The Delta table at ``table_uri`` (it must exist).

    Raises:
        deltalake.exceptions.TableNotFoundError: no Delta table there.
    """
    return DeltaTable(table_uri, storage_options=storage.delta_storage_options())


def append_rows(
    storage: StorageSettings,
    table_uri: str,
    rows: pa.Table,
    *,
    app_id: str,
    version: int,
    add_columns: bool = False,
) -> bool:
    """Append ``rows`` to the Delta table at ``table_uri`` (created on first use) in one commit,
    exactly once per batch identity ``(app_id, version)`` (Delta ``txn`` action, see module docs).

    For small bookkeeping tables written by the driver (schema history, ``_transactions``); data
    files of captured tables go through :func:`commit_files`. ``add_columns``: columns of ``rows``
    the table lacks are added (Delta schema merge; older rows read NULL there).

    Returns:
        ``True`` if committed, ``False`` if this batch (or a later one of ``app_id``) was already.
    Raises:
        deltalake errors: the commit failed (schema mismatch, storage); nothing was appended.
    """
    from deltalake import write_deltalake

    dt = open_table(storage, table_uri)
    if dt is not None:
        done = transaction_version(dt, app_id)
        if done is not None and done >= version:
            return False
    write_deltalake(
        table_uri,
        rows,
        mode="append",
        storage_options=storage.delta_storage_options(),
        commit_properties=CommitProperties(app_transactions=[Transaction(app_id=app_id, version=version)]),
        post_commithook_properties=PATH_COMMIT_HOOKS,
        schema_mode="merge" if add_columns and dt is not None else None,
    )
    changed(table_uri)
    return True


def commit_files(
    storage: StorageSettings,
    table_uri: str,
    schema: pa.Schema,
    files: list[dict],
    *,
    mode: Literal["append", "overwrite"],
    app_id: str,
    version: int,
    metadata: dict[str, str] | None = None,
    properties: dict[str, str] | None = None,
) -> CommitOutcome:
    """Publish Parquet files (already written under ``table_uri``) in one Delta commit.

    Args:
        schema: Arrow schema of the files; becomes the table schema (created on first commit).
        files: ``[{path (relative), size, num_records, modification_time}]``.
        mode: ``append`` adds the files; ``overwrite`` also removes every current file.
        app_id / version: batch identity (see module docs).
        metadata: custom commit info (e.g. binlog positions), visible in ``DESCRIBE HISTORY``.
        properties: table properties of a table this commit creates (besides
            :data:`TABLE_PROPERTIES`).

    Raises:
        SinkError: the commit failed (schema mismatch, storage error); nothing was published.
    """
    rows = sum(int(f["num_records"]) for f in files)
    actions = file_actions(files)
    props = CommitProperties(
        custom_metadata={"dagster_mysql_cdc.batch": f"{app_id}@{version}", **(metadata or {})},
        app_transactions=[Transaction(app_id=app_id, version=version)],
    )
    try:
        dt = open_table(storage, table_uri)
        if dt is None:
            create_table_with_add_actions(
                table_uri,
                delta_schema(schema),
                actions,
                mode="append",
                configuration=TABLE_PROPERTIES,
                storage_options=storage.delta_storage_options(),
                commit_properties=props,
                post_commithook_properties=PATH_COMMIT_HOOKS,
            )
            changed(table_uri)
            dt = open_table(storage, table_uri)
            assert dt is not None
            if properties:  # delta-rs accepts properties it does not know only through ALTER
                dt.alter.set_table_properties(
                    properties, raise_if_not_exists=False, post_commithook_properties=COMMIT_HOOKS
                )
                dt.update_incremental()
                wrote(dt)
            return CommitOutcome(True, dt.version(), len(actions), rows)
        done = transaction_version(dt, app_id)
        if done is not None and done >= version:
            log.info("Batch %s@%s already committed to %s; skipping", app_id, version, table_uri)
            delete_files(storage, table_uri, files)
            return CommitOutcome(False, dt.version(), 0, 0)
        ensure_table_properties(dt)
        writes: list[AddAction | RemoveAction] = list(actions)  # deltalake types the list invariantly
        before = dt.version()
        dt.create_write_transaction(
            writes,
            mode=mode,
            schema=delta_schema(schema),
            commit_properties=props,
            post_commithook_properties=COMMIT_HOOKS,
        )
        dt.update_incremental()
        if dt.version() == before + 1:  # the handle's new version is this commit: its txn is ours
            _remember_transaction(dt, before, app_id, version)
        wrote(dt)
        return CommitOutcome(True, dt.version(), len(actions), rows)
    except SinkError:
        raise
    except Exception as e:
        raise SinkError(
            f"Delta commit to {table_uri} on {storage.location()} failed: {type(e).__name__}: {e}"
        ) from e


def file_actions(files: list[dict]) -> list[AddAction]:
    """Delta add actions of data files a job wrote (``{path, size, num_records,
    modification_time}`` each, and ``stats``: ``{"minValues", "maxValues", "nullCount"}`` of some
    columns when the writer collected them, which readers use to skip files)."""
    out = []
    for f in files:
        stats = {"numRecords": int(f["num_records"]), **(f.get("stats") or {})}
        out.append(
            AddAction(
                path=f["path"],
                size=int(f["size"]),
                partition_values={},
                modification_time=int(f["modification_time"]),
                data_change=True,
                stats=json.dumps(stats, separators=(",", ":")),
            )
        )
    return out


def ensure_table_properties(dt: DeltaTable) -> None:
    """Add :data:`TABLE_PROPERTIES` missing from a table created by an older version (one
    metadata commit, once; best-effort: a concurrent writer winning it is retried next batch)."""
    conf = dt.metadata().configuration
    missing = {k: v for k, v in TABLE_PROPERTIES.items() if conf.get(k) is None}
    if not missing:
        return
    try:
        dt.alter.set_table_properties(missing, post_commithook_properties=COMMIT_HOOKS)
        dt.update_incremental()
        wrote(dt)
    except Exception as e:  # pragma: no cover - depends on concurrent writers
        log.warning("could not set %s on %s: %s", missing, dt.table_uri, e)


def delta_schema(schema: pa.Schema):
    """The delta-rs ``deltalake.Schema`` of an Arrow schema (``Schema.from_arrow``): what a
    transaction built from add actions (``create_write_transaction``,
    ``create_table_with_add_actions``) takes as the table's schema.

    Raises:
        deltalake errors: a type Delta cannot hold.
    """
    from deltalake import Schema

    return Schema.from_arrow(schema)


def rewrite_table(
    storage: StorageSettings,
    table_uri: str,
    schema: pa.Schema,
    *,
    reason: str,
    batch_rows: int = 100_000,
    attempts: int = 5,
) -> bool:
    """Rewrite every data file of the Delta table at ``table_uri`` into ``schema`` in one commit
    (Delta ``WRITE`` in overwrite mode with a new schema): the values of each column are converted
    to its new type (:func:`.evolution.conform_table`; e.g. ``INT`` -> ``BIGINT``, milliseconds ->
    microseconds, numbers -> text), columns the files lack are null.

    Used when a source column's type changes in a way the lake type cannot hold as it is (Delta has
    no in-place type change that delta-rs writes). Earlier versions stay readable (time travel)
    until ``VACUUM``; the table's properties and ``txn`` identities are kept. Memory: one record
    batch of ``batch_rows`` rows at a time. Optimistic: the commit fails if another writer
    committed since the files were listed (``max_commit_retries=0``), and the rewrite starts over
    from the new version (``attempts`` times).

    Args:
        schema: the new table schema: a lake schema whose every field is a supertype of the
            table's (:func:`.evolution.conform_schema`).
        reason: recorded in the commit info (``dagster_mysql_cdc.rewrite``).

    Returns:
        ``True`` when rewritten, ``False`` when there is no table or it already has ``schema``.
    Raises:
        SinkError: the rewrite failed (the table is unchanged).
    """
    import pyarrow.parquet as pq
    from deltalake import write_deltalake
    from deltalake.exceptions import CommitFailedError

    from .evolution import conform_table, relabel

    last: Exception | None = None
    for _ in range(max(1, attempts)):
        dt = open_table(storage, table_uri)
        if dt is None:
            return False
        current = pa.schema(dt.schema().to_arrow())
        if current.equals(schema, check_metadata=True):
            return False
        fs = storage.pyarrow_filesystem()
        base = storage.fs_path(table_uri)
        paths = dt.get_add_actions(flatten=False).column("path").to_pylist()

        def batches(paths=paths, current=current, fs=fs, base=base):
            for rel in paths:
                with fs.open_input_file(f"{base}/{rel}") as fh:
                    for b in pq.ParquetFile(fh).iter_batches(batch_size=batch_rows):
                        t = relabel(pa.Table.from_batches([b]), current)
                        yield from conform_table(t, schema).to_batches()

        try:
            write_deltalake(
                dt,
                pa.RecordBatchReader.from_batches(schema, batches()),
                mode="overwrite",
                schema_mode="overwrite",
                commit_properties=CommitProperties(
                    custom_metadata={"dagster_mysql_cdc.rewrite": reason}, max_commit_retries=0
                ),
                post_commithook_properties=COMMIT_HOOKS,
            )
            wrote(dt)
            log.info("rewrote %s (%d files) into its new schema: %s", table_uri, len(paths), reason)
            return True
        except CommitFailedError as e:  # another writer committed meanwhile: list the files again
            last = e
            changed(table_uri)  # (in a sole_writer block the next open would not refresh)
            continue
        except Exception as e:
            raise SinkError(
                f"Rewriting {table_uri} on {storage.location()} into its new column types failed "
                f"({reason}): {type(e).__name__}: {e}. The table is unchanged; the next run retries."
            ) from e
    raise SinkError(
        f"Rewriting {table_uri} on {storage.location()} kept conflicting with other writers ({last}); "
        "the next run retries."
    )


def rewrite_files(
    storage: StorageSettings,
    table_uri: str,
    files: list[dict],
    written: pa.Schema,
    schema: pa.Schema,
    *,
    batch_rows: int = 100_000,
) -> list[dict]:
    """Rewrite data files written for the Delta table at ``table_uri`` but **not committed yet**
    (a batch's earlier record batches) from the lake schema they were written in (``written``)
    into ``schema``, converting the values as :func:`rewrite_table` does the committed ones.

    :func:`rewrite_table` converts only what the table has published; a batch that widens a
    column type in the middle of a window (``DATETIME`` -> ``DATETIME(6)``: milliseconds ->
    microseconds) has files of its own, written before, whose values would otherwise be
    published under the new type unconverted.

    Args:
        files: ``[{path (relative), size, num_records, modification_time}]`` as written.
        written: the lake schema the files were written in (their values' units).
        schema: the new lake schema (each field a supertype of ``written``'s,
            :func:`.evolution.conform_schema`).

    Returns:
        the entries of the new files, in the same order (the old files are deleted).
    Raises:
        SinkError: a file could not be read or written (the batch fails; nothing is published).
    """
    import time
    import uuid

    import pyarrow.parquet as pq

    from .evolution import conform_table, relabel

    fs = storage.pyarrow_filesystem()
    base = storage.fs_path(table_uri)
    out: list[dict] = []
    for f in files:
        if not int(f.get("num_records") or 0):
            out.append(f)
            continue
        rel = f"part-{uuid.uuid4().hex}.snappy.parquet"
        try:
            with (
                fs.open_input_file(f"{base}/{f['path']}") as fh,
                fs.open_output_stream(f"{base}/{rel}") as sink,
            ):
                writer = pq.ParquetWriter(sink, schema, compression="snappy")
                rows = 0
                for b in pq.ParquetFile(fh).iter_batches(batch_size=batch_rows):
                    t = conform_table(relabel(pa.Table.from_batches([b]), written), schema)
                    writer.write_table(t)
                    rows += t.num_rows
                writer.close()
                size = sink.tell()
        except Exception as e:
            raise SinkError(
                f"Converting the uncommitted file {f['path']} of {table_uri} on {storage.location()} "
                f"into the table's new column types failed: {type(e).__name__}: {e}. Nothing of the "
                "batch is published; the next run retries."
            ) from e
        out.append(
            {
                "path": rel,
                "size": int(size),
                "num_records": rows,
                "modification_time": int(time.time() * 1000),
            }
        )
    delete_files(storage, table_uri, [f for f, n in zip(files, out) if n is not f])
    return out


def delete_files(storage: StorageSettings, table_uri: str, files: list[dict]) -> None:
    """Best-effort removal of uncommitted data files (orphans are invisible and vacuumed anyway)."""
    fs = storage.pyarrow_filesystem()
    base = storage.fs_path(table_uri)
    for f in files:
        try:
            fs.delete_file(f"{base}/{f['path']}")
        except Exception:
            pass
