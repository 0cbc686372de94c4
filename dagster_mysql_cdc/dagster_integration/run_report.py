"""How Dagster sees a run's outcome: the metadata of its materializations.

The engine reports a stream run as a :class:`~..engine.stream.WindowResult` (inside
:class:`~..engine.stream_run.StreamRunOutcome`), a snapshot as one
:class:`~..engine.initial_snapshot.SnapshotTableResult` per table and a key range's re-snapshot as
a :class:`~..engine.snapshot_run.RangeResnapshot`; here they become the ``MaterializeResult``
metadata of the table assets (:func:`table_results`, :func:`snapshot_metadata`, both with
:func:`state_tail_metadata`), of the ``binlog`` asset (:func:`stream_metadata` with
:func:`window_lag_metadata`, :func:`snapshot_binlog_metadata`) and of a ``pk_ranges`` partition
(:func:`range_resnapshot_result`). Metadata that needs another read once the data is committed
(live rows, row estimates, backlog) is best effort (:func:`optional`): it never fails a committed
run.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Iterator, Sequence
from functools import partial
from typing import TYPE_CHECKING, Any

import dagster as dg

from ..engine.incremental import IncrementalState
from ..events import BinlogPosition
from ..sink.storage import StorageSettings
from ..source.connection import ConnectionSettings, ServerInfo
from .protocol import position_metadata
from .verify import backlog, estimated_rows, incremental_progress_metadata, lag_metadata, live_row_count

#: The most incremental-snapshot chunks a stream run lists in its binlog asset's
#: ``incremental_chunks`` metadata (the newest; ``incremental_chunks_count`` counts them all).
CHUNKS_LISTED = 256

if TYPE_CHECKING:
    from ..engine.initial_snapshot import SnapshotTableResult
    from ..engine.ranges import KeyRange
    from ..engine.snapshot_run import RangeResnapshot
    from ..engine.window_result import WindowResult
    from ..sink.table_batch import TableWriteResult

log = logging.getLogger(__name__)


def table_results(
    context: dg.AssetExecutionContext,
    result: WindowResult,
    settings: ConnectionSettings,
    storage: StorageSettings,
    keys_by_table: dict,
    *,
    start: BinlogPosition,
    reached: BinlogPosition,
    lag: dict[str, Any],
    chunk_size: int,
    only: set[tuple[str, str]] | None = None,
    estimates: dict[str, int] | None = None,
) -> Iterator[dg.MaterializeResult]:
    """The materialization of every changed table of ``keys_by_table`` (row count, lag, window,
    incremental snapshot progress against ``chunk_size``, commit facts); changed tables not in
    it are logged (WARNING). ``only``: just these ``(db, table)`` (the others are left out
    silently: reported already). ``estimates``: :func:`estimated_rows_of` the window, when the
    caller read it already."""
    if estimates is None:
        estimates = estimated_rows_of(settings, result)
    unselected = []
    for (db, t), w in result.tables.items():
        if only is not None and (db, t) not in only:
            continue
        key = keys_by_table.get((db, t))
        if key is None:
            unselected.append(f"{db}.{t}")
            continue
        rows_now = w.extra.get("live_rows")  # counted by the commit (in parallel)
        if rows_now is None:
            rows_now = optional(partial(live_row_count, storage, w.paths.state), "row count")
        yield dg.MaterializeResult(
            asset_key=key,
            data_version=table_data_version(w.changelog.table_version, reached),
            metadata={
                **({"dagster/row_count": dg.MetadataValue.int(rows_now)} if rows_now is not None else {}),
                "dagster/uri": dg.MetadataValue.path(w.paths.state),
                "rows_by_op": dg.MetadataValue.json(w.rows_by_op),
                "rows": dg.MetadataValue.int(w.rows),
                **lag,
                **position_metadata("window_start", start),
                **position_metadata("window_end", reached),
                **incremental_progress_metadata(
                    f"{db}.{t}",
                    result.incremental_state,
                    result.chunks,
                    estimates.get(f"{db}.{t}"),
                    chunk_size,
                ),
                "incremental_chunks": dg.MetadataValue.json(
                    [c for c in result.chunks if c["table"] == f"{db}.{t}"]
                ),
                "changelog_uri": dg.MetadataValue.path(w.paths.changelog),
                "state_uri": dg.MetadataValue.path(w.paths.state),
                **state_tail_metadata(w),
                "changelog_delta_version": dg.MetadataValue.int(w.changelog.table_version),
                "committed": dg.MetadataValue.bool(w.changelog.committed),
            },
        )
    if unselected:
        context.log.warning(
            f"{', '.join(sorted(unselected))} changed but not selected in this run (no asset in this "
            "code location, or the sensor's look-ahead missed it); the data was written, the asset "
            "materializes with its next change or snapshot"
        )


def stream_metadata(
    result: WindowResult,
    start: BinlogPosition,
    reached: BinlogPosition,
    lag: dict[str, Any],
    follow_windows: int,
    spark_seconds: float,
) -> dict[str, Any]:
    """The binlog asset's metadata of a stream run (``kind=stream``)."""
    return {
        "kind": "stream",
        **position_metadata("window_start", start),
        **position_metadata("window_end", reached),
        "events_read": dg.MetadataValue.int(result.events_read),
        "transactions": dg.MetadataValue.int(result.transactions),
        "rows": dg.MetadataValue.int(result.rows),
        "ddl_statements": dg.MetadataValue.int(result.ddl_statements),
        "tables_changed": dg.MetadataValue.json(
            {f"{d}.{t}": w.rows_by_op for (d, t), w in result.tables.items()}
        ),
        **lag,
        "lag_ms": dg.MetadataValue.int(result.lag_ms or 0),
        "seconds": dg.MetadataValue.float(round(result.seconds, 3)),
        **(
            {
                "incremental_snapshot": dg.MetadataValue.json(
                    IncrementalState.from_dict(result.incremental_state).progress()  # type: ignore[union-attr]
                )
            }
            if result.incremental_state
            else {}
        ),
        "incremental_state": dg.MetadataValue.json(result.incremental_state or {}),
        # a following run reads chunk after chunk for its whole budget: the newest ones (each
        # table's materializations list the chunks of their own windows), and how many in all
        "incremental_chunks": dg.MetadataValue.json(result.chunks[-CHUNKS_LISTED:]),
        "incremental_chunks_count": dg.MetadataValue.int(len(result.chunks)),
        "signals": dg.MetadataValue.json(result.signal_log),
        # the signals skipped (logged as WARNINGs): `status` lists them (.health.skipped_signals)
        "signals_rejected": dg.MetadataValue.json(result.signals_rejected),
        "binlog_gaps": dg.MetadataValue.json([g.to_dict() for g in result.gaps]),
        "events_skipped_count": dg.MetadataValue.int(result.events_skipped_count),
        "events_skipped": dg.MetadataValue.json(result.events_skipped),
        "follow_windows": dg.MetadataValue.int(follow_windows),
        # how each window of at least stream_parallel_min_bytes was decoded (parallel segments or
        # the single reader, with the reason): engine/parallel_catchup.py
        **({"decode": dg.MetadataValue.json(result.decode)} if result.decode else {}),
        "spark_session_seconds": dg.MetadataValue.float(round(spark_seconds, 3)),
    }


def state_tail_metadata(w: TableWriteResult) -> dict[str, Any]:
    """Merge-on-read facts of a table the run wrote (``sink/compaction.py``): the tail's URI and
    pending rows, how far behind the change log the compacted ``state`` table is (``state_as_of``:
    the newest change it holds; ``state_behind_seconds``: age of the oldest change it lacks, 0 when
    the tail is empty), and what a compaction or vacuum in this run did."""
    md = state_behind_metadata(w.extra.get("compaction") or {}, w.paths.tail)
    if w.extra.get("vacuum"):
        md["vacuum"] = dg.MetadataValue.json(w.extra["vacuum"])
    return md


def state_behind_metadata(compaction: dict[str, Any], tail_uri: str) -> dict[str, Any]:
    """How far behind the change log a table's compacted ``state`` is after a compaction (or
    none) returned ``compaction`` (:meth:`~dagster_mysql_cdc.sink.lake.LakeWriter.compact_if_due`):
    ``state_tail_uri``, ``state_tail_rows``, ``state_behind_seconds`` (0 when compacted),
    ``state_as_of`` and ``compaction`` (see :func:`state_tail_metadata`)."""
    comp = dict(compaction)
    pending = comp.pop("pending", None)
    md: dict[str, Any] = {"state_tail_uri": dg.MetadataValue.path(tail_uri)}
    if pending is not None:
        md["state_tail_rows"] = dg.MetadataValue.int(pending.tail_rows)
        if pending.tail_oldest_ms is not None:
            behind = max(0.0, (time.time() * 1000 - pending.tail_oldest_ms) / 1000)
            md["state_behind_seconds"] = dg.MetadataValue.float(round(behind, 1))
    elif comp.get("state_as_of") is not None or not comp:
        md["state_tail_rows"] = dg.MetadataValue.int(0)
        md["state_behind_seconds"] = dg.MetadataValue.float(0.0)
    if comp.get("state_as_of"):
        md["state_as_of"] = dg.MetadataValue.text(str(comp["state_as_of"]))
    if comp:
        md["compaction"] = dg.MetadataValue.json({k: v for k, v in comp.items() if k != "state_as_of"})
    return md


def state_due_report(
    compactions: dict[tuple[str, str], dict[str, Any]], bound_seconds: float
) -> dict[str, float | None]:
    """The binlog asset's ``state_due`` metadata of a run: per table it wrote or compacted
    (``compactions``: ``(database, table)`` -> what :meth:`~dagster_mysql_cdc.sink.lake.LakeWriter.compact_if_due`
    returned), when its ``state`` is next due for a compaction by age (epoch seconds,
    :func:`~dagster_mysql_cdc.sink.compaction.state_due_at`; ``None``: nothing pending). The
    binlog sensor keeps these in its cursor and has the due tables compacted by the next run
    (:data:`.protocol.COMPACT_TAG`), so no tick opens a table's Delta log to find them."""
    from ..sink.compaction import state_due_at

    now = time.time()
    out: dict[str, float | None] = {}
    for (db, table), comp in compactions.items():
        due = state_due_at(comp, bound_seconds, now)
        out[f"{db}.{table}"] = None if due is None else float(math.ceil(due))  # whole seconds: a small cursor
    return out


def table_data_version(changelog_version: int, position: BinlogPosition) -> dg.DataVersion:
    """A table materialization's data version: the Delta version of its change log after the
    commit and the binlog position the data is as of (``v<version>@<file>:<pos>``). It changes
    exactly when the table's data may have changed: a window or snapshot that appended to the
    change log, or a new change log after a reset (a new position); a retried commit that was
    skipped (the data committed by an earlier attempt) keeps it.

    Given explicitly because a materialization logged with ``context.log_event`` gets none from
    Dagster (a yielded output does): without it ``AutomationCondition.data_version_changed()``
    (the README's downstream example, ``assets/downstream.py``) would see two windows in a row
    as no change."""
    return dg.DataVersion(f"v{changelog_version}@{position.file}:{position.pos}")


def logged_materialization(r: dg.MaterializeResult) -> dg.AssetMaterialization:
    """``r`` as an ``AssetMaterialization`` event for ``context.log_event`` (no step output),
    its data version (:func:`table_data_version`) as the ``dagster/data_version`` tag Dagster
    reads it from."""
    from dagster._core.definitions.data_version import DATA_VERSION_TAG

    assert r.asset_key is not None
    tags = {DATA_VERSION_TAG: r.data_version.value} if r.data_version is not None else None
    return dg.AssetMaterialization(asset_key=r.asset_key, metadata=r.metadata, tags=tags)


def snapshot_result(key: dg.AssetKey, r: SnapshotTableResult) -> dg.MaterializeResult:
    """A table's snapshot as its materialization: :func:`snapshot_metadata` and its data
    version (:func:`table_data_version`)."""
    return dg.MaterializeResult(
        asset_key=key,
        metadata=snapshot_metadata(r),
        data_version=table_data_version(r.write.changelog.table_version, r.position),
    )


def outputs_read_in_run(context: dg.AssetExecutionContext) -> bool:
    """Whether another step of the run may read this op's outputs: its job (the run's subset of
    it) holds a node other than the capture's op, e.g. a downstream asset selected with the
    tables. A table's output then is yielded (``MaterializeResult``): a skippable asset whose
    output is not yielded makes Dagster skip its downstream steps. Otherwise a snapshot logs each
    table's ``AssetMaterialization`` alone, without the ``STEP_OUTPUT`` event Dagster stores
    for an output (12-14 ms each on SQLite: docs/benchmarks.md, "Dagster's share"). A partitioned
    run yields (the partition is the output's)."""
    if context.has_partition_key:
        return True
    return any(n.name != context.op.name for n in context.job_def.nodes)


def snapshot_metadata(r: SnapshotTableResult) -> dict[str, Any]:
    """Dagster metadata of one table's snapshot result."""
    w = r.write
    return {
        "dagster/row_count": dg.MetadataValue.int(w.rows),
        "rows_by_op": dg.MetadataValue.json(w.rows_by_op),
        "binlog_file": r.position.file,
        "binlog_pos": dg.MetadataValue.int(r.position.pos),
        "gtid_set": r.position.gtid_set or "",
        "snapshot_seconds": dg.MetadataValue.float(round(w.seconds, 3)),
        "lock": r.lock_kind,
        "lock_seconds": dg.MetadataValue.float(round(r.lock_seconds, 3)),
        "dagster/uri": dg.MetadataValue.path(w.paths.state),
        "changelog_uri": dg.MetadataValue.path(w.paths.changelog),
        "state_uri": dg.MetadataValue.path(w.paths.state),
        "changelog_delta_version": dg.MetadataValue.int(w.changelog.table_version),
        "state_delta_version": dg.MetadataValue.int(w.state.table_version),
        "committed": dg.MetadataValue.bool(w.state.committed),
        **state_tail_metadata(w),
        "dagster/column_schema": dg.TableSchema(
            columns=[dg.TableColumn(name=c.name, type=c.column_type) for c in r.schema.columns]
        ),
        # split reads: the table's splits and the Spark tasks that read them (0: read by the run)
        **(
            {
                "splits": dg.MetadataValue.int(w.extra["splits"]),
                "split_tasks": dg.MetadataValue.int(w.extra["tasks"]),
            }
            if "splits" in w.extra
            else {}
        ),
        # rows left out: a value could not be converted (event_processing_failure_handling_mode)
        **(
            {
                "events_skipped_count": dg.MetadataValue.int(r.rows_skipped_count),
                "events_skipped": dg.MetadataValue.json(r.rows_skipped),
            }
            if r.rows_skipped_count
            else {}
        ),
    }


def range_resnapshot_result(
    context: dg.AssetExecutionContext,
    done: RangeResnapshot,
    *,
    key: str,
    rng: KeyRange,
    ranges_total: int,
    table_key: dg.AssetKey,
) -> dg.MaterializeResult:
    """The materialization of a ``pk_ranges`` partition whose key range ``rng`` (partition ``key``,
    one of ``ranges_total``) was re-snapshotted (:func:`..engine.snapshot_run.resnapshot_key_range`):
    rows read, emitted, dropped and deleted, the watermarks and the backfill's progress
    (:func:`backfill_progress`). The progress is also logged as an ``AssetObservation`` of the
    table asset ``table_key``, so the table's page shows it."""
    snap, w = done.snapshot, done.write
    progress = backfill_progress(context, key, ranges_total)
    progress.update(
        {
            "last_range": key,
            "last_range_keys": {"after": rng.lo, "up_to": rng.hi},
            "last_range_rows": snap.rows_read,
        }
    )
    done_n, of = progress["ranges_done"], progress["backfill_ranges"]
    context.log_event(  # the table's page shows the backfill's progress (an observation)
        dg.AssetObservation(
            asset_key=table_key,
            description=(
                f"pk_ranges backfill: range {key} re-snapshotted ({done_n} of the {of} range(s) of "
                f"{'backfill ' + progress['backfill_id'] if progress['backfill_id'] else 'this run'}; "
                f"the table has {ranges_total})"
            ),
            metadata={"pk_ranges_backfill": dg.MetadataValue.json(progress)},
        )
    )
    return dg.MaterializeResult(
        metadata={
            "dagster/partition_row_count": dg.MetadataValue.int(snap.rows_read),
            "backfill_progress": dg.MetadataValue.json(progress),
            "backfill_percent": dg.MetadataValue.float(progress["percent"]),
            # None = unbounded (the first/last range); MetadataValue.json takes None at run time
            "range_low_exclusive": dg.MetadataValue.json(rng.lo),  # type: ignore[arg-type]
            "range_high_inclusive": dg.MetadataValue.json(rng.hi),  # type: ignore[arg-type]
            "rows_read": dg.MetadataValue.int(snap.rows_read),
            "rows_emitted": dg.MetadataValue.int(snap.rows_emitted),
            "rows_dropped_changed_in_window": dg.MetadataValue.int(snap.rows_read - snap.rows_emitted),
            "rows_deleted_absent_from_source": dg.MetadataValue.int(snap.rows_deleted),
            **position_metadata("low_watermark", snap.low),
            **position_metadata("high_watermark", snap.high),
            "changelog_uri": dg.MetadataValue.path(w.paths.changelog),
            "state_uri": dg.MetadataValue.path(w.paths.state),
        }
    )


def backfill_progress(context: dg.AssetExecutionContext, key: str, ranges_total: int) -> dict[str, Any]:
    """How far the backfill that re-snapshots range ``key`` of a ``pk_ranges`` asset is, this
    range included: ``backfill_id`` (the run's ``dagster/backfill`` tag; ``None`` for a run that
    is no asset backfill's), ``backfill_ranges`` (the partitions of this asset the backfill targets; a
    run of its own: its one partition), ``ranges_done`` (of those, the ones
    materialized since the backfill started, by its runs), ``percent`` (of the backfill, so a
    finished backfill of 2 of the table's 7 ranges reads 100) and ``ranges_total`` (the table's
    ranges).

    One instance query for the backfill and one for the asset's materializations since it began."""
    from dagster._core.storage.tags import BACKFILL_ID_TAG

    backfill_id = context.run.tags.get(BACKFILL_ID_TAG)
    backfill = context.instance.get_backfill(backfill_id) if backfill_id else None
    data = getattr(backfill, "asset_backfill_data", None)
    target: set[str] = set()
    if data is not None:
        try:
            target = set(data.get_target_partitions_subset(context.asset_key).get_partition_keys())
        except Exception as e:  # noqa: BLE001 - progress is reporting: never fail the range's run
            log.warning("could not read the partitions of backfill %s: %s", backfill_id, e)
    done = {key}
    if target and backfill is not None:
        records = context.instance.fetch_materializations(
            dg.AssetRecordsFilter(
                asset_key=context.asset_key,
                asset_partitions=sorted(target),
                after_timestamp=backfill.backfill_timestamp,
            ),
            limit=len(target) * 4 + 10,
        ).records
        done |= {r.partition_key for r in records if r.partition_key in target}
    else:  # no backfill (a partition materialized on its own), or one this run cannot read
        target, backfill_id = {key}, None
    of = len(target | {key})
    return {
        "backfill_id": backfill_id,
        "backfill_ranges": of,
        "ranges_done": len(done),
        "percent": round(100.0 * len(done) / of, 1),
        "ranges_total": ranges_total,
    }


def snapshot_binlog_metadata(
    position: BinlogPosition, tables: Sequence[tuple[str, str]], history_uri: str
) -> dict[str, Any]:
    """The binlog asset's metadata of a snapshot run (``kind=snapshot``): the snapshot's position,
    the tables it read and the schema history's URI."""
    return {
        "kind": "snapshot",
        **position_metadata("snapshot", position),
        "tables": dg.MetadataValue.json([f"{d}.{t}" for d, t in tables]),
        "schema_history_uri": dg.MetadataValue.path(history_uri),
    }


def window_lag_metadata(
    context: dg.AssetExecutionContext,
    settings: ConnectionSettings,
    info: ServerInfo,
    reached: BinlogPosition,
    last_event_ts_ms: int | None,
    planned_at: float | None = None,
) -> dict[str, Any]:
    """Lag and backlog metadata of a committed window (see :func:`.verify.lag_metadata`).
    ``planned_at``: when the window's end was read from the server (epoch seconds), for a
    follow-on window; default the run's creation (the tick that planned the requested window)."""
    if planned_at is None:
        record = optional(lambda: context.instance.get_run_record_by_id(context.run.run_id), "run record")
        created = getattr(record, "create_timestamp", None)
        planned_at = created.timestamp() if created is not None else None
    return lag_metadata(
        run_created_at=planned_at,
        last_event_ts_ms=last_event_ts_ms,
        behind=optional(lambda: backlog(settings, info, reached), "backlog behind the server's head"),
    )


def estimated_rows_of(settings: ConnectionSettings, result: WindowResult) -> dict[str, int]:
    """``{"db.table": estimated rows}`` of the tables whose incremental snapshot a window read
    chunks of or is at (``{}`` when there are none or the estimate fails; one query)."""
    progress_tables = {c["table"] for c in result.chunks} | {
        t.get("table") for t in (result.incremental_state or {}).get("tables", [])[:1]
    }
    tables = [x for x in progress_tables if x]
    return _estimated_rows(settings, tables) if tables else {}


def _estimated_rows(settings: ConnectionSettings, tables: list[str]) -> dict[str, int]:
    """``{"db.table": estimated rows}`` of ``tables`` (:func:`.verify.estimated_rows`), ``{}`` when
    the estimate fails."""
    return optional(lambda: estimated_rows(settings, tables), "row estimates") or {}


def optional(fn: Callable[[], Any], what: str) -> Any:
    """``fn()``, or ``None`` (logged) when it fails: optional metadata never fails a committed run."""
    try:
        return fn()
    except Exception as e:  # noqa: BLE001 - metadata is best effort once the data is committed
        log.warning("could not compute %s: %s", what, e)
        return None
