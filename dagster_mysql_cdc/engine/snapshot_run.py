"""What a snapshot run does, apart from how Dagster reports it.

A snapshot run (a UI "Materialize", a backfill, the sensor's initial snapshot or re-snapshot, and
a stream run's blocking snapshot) reads its tables in one consistent snapshot with the reader the
capture is configured for (:func:`snapshot_tables`: split reads on the Spark executors, or the
locked consistent scan; each table's outcome logged), then recomputes the tables' primary-key
ranges (:func:`refresh_key_ranges`). A ``pk_ranges`` partition run re-snapshots one key range
(:func:`find_key_range`, :func:`resnapshot_key_range`).

The Dagster side (``dagster_integration/resources.py``) decodes the run's tags, turns each
result into a ``MaterializeResult`` (``dagster_integration/run_report.py``) and registers the
ranges as dynamic partitions (``dagster_integration/partitions.py``).

Debezium MySQL connector: ``MySqlSnapshotChangeEventSource`` (initial and blocking snapshots);
range re-snapshots are DBLog chunks (see :mod:`.ranges`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..errors import ConfigurationError
from ..sink.layout import LakeLayout
from ..sink.storage import StorageSettings
from ..source.catalog import read_table_schemas
from ..source.columns import ColumnPolicy
from ..source.connection import ConnectionSettings, connect, server_info
from ..source.snapshot import SnapshotOptions
from ..source.types import TableConverter, TypeOptions
from .initial_snapshot import SnapshotTableResult
from .ranges import KeyRange, RangeSnapshot, compute_ranges, load_ranges, save_ranges, snapshot_range
from .run_log import RunLog

if TYPE_CHECKING:
    from ..sink.lake import LakeWriter
    from ..sink.schema_history import SchemaHistory
    from ..sink.table_batch import TableWriteResult

#: A range re-snapshot reads the binlog between its watermarks as replica ``server_id + 3``
#: (the stream run reads as ``server_id``; ids must be unique among the server's replicas).
RANGE_SERVER_ID_OFFSET = 3


@dataclass(frozen=True)
class SnapshotReads:
    """How the capture's snapshots read the source (``MySqlCdcResource.snapshot_split_*``).

    Attributes:
        split: read in primary-key splits on the Spark executors, each split on its own
            connection without a lock (Flink CDC's lock-free snapshot, :mod:`.split_snapshot`);
            ``False``: the run process reads in one locked consistent scan
            (:mod:`.initial_snapshot`, ``snapshot.locking.mode``).
        split_rows: rows per split (Flink CDC ``scan.incremental.snapshot.chunk.size``).
        max_connections: at most this many Spark tasks read the source at once (0: one per
            Spark core).
    """

    split: bool = False
    split_rows: int = 100_000
    max_connections: int = 0


def snapshot_tables(
    settings: ConnectionSettings,
    tables: Sequence[tuple[str, str]],
    writer: LakeWriter | Callable[[], LakeWriter],
    *,
    reads: SnapshotReads,
    options: SnapshotOptions,
    type_options: TypeOptions,
    server_name: str,
    history: SchemaHistory,
    epoch: int,
    need_streaming: bool = True,
    log: RunLog | None = None,
) -> Iterator[SnapshotTableResult]:
    """Snapshot ``tables`` (``(database, table)`` each) into the lake with the configured reader:
    split reads on the Spark executors when ``reads.split`` and data is read
    (:func:`.split_snapshot.run_split_snapshot`), else the locked consistent scan
    (:func:`.initial_snapshot.run_snapshot`). Every table is read at one binlog position.

    Args:
        writer: the lake writer, or a factory called once the source passed preflight.
        epoch: the offset epoch of the snapshot's position.
        need_streaming: the source must allow streaming afterwards (binlog settings checked).
        log: the run's log: each table's outcome (its rows, position, whether it committed or an
            earlier attempt had; of more than :data:`TABLE_LINES_MAX` tables: progress lines and
            a summary) and the rows left out of it (:func:`log_rows_left_out`) are logged before
            it is yielded; ``None``: nothing is logged.

    Yields:
        one :class:`SnapshotTableResult` per table, once it is committed.

    Raises:
        whatever the chosen reader raises (preflight, connection, conversion, sink errors).
    """
    results: Iterator[SnapshotTableResult]
    if reads.split and options.include_data:
        from .split_snapshot import SplitOptions, run_split_snapshot

        results = run_split_snapshot(
            settings,
            tables,
            writer,
            type_options=type_options,
            split=SplitOptions(
                split_rows=reads.split_rows,
                max_connections=reads.max_connections,
                fetch_size=options.fetch_size,
                batch_rows=min(options.batch_rows, 50_000),
            ),
            server_name=server_name,
            select_overrides=options.select_overrides,
            need_streaming=need_streaming,
            history=history,
            epoch=epoch,
            failure_handling=options.event_processing_failure_handling_mode,
        )
    else:
        from .initial_snapshot import run_snapshot

        results = run_snapshot(
            settings,
            tables,
            writer,
            type_options=type_options,
            options=options,
            server_name=server_name,
            need_streaming=need_streaming,
            history=history,
            epoch=epoch,
        )
    return (
        results
        if log is None
        else _logged(results, log, options.event_processing_failure_handling_mode, len(tables))
    )


#: A snapshot of at most this many tables logs one INFO line per table; a larger one logs its
#: progress at most every :data:`PROGRESS_SECONDS` and a summary (each log line is an event
#: Dagster stores: 300 lines cost a 300-table snapshot 2-3 s under a daemon, docs/benchmarks.md).
TABLE_LINES_MAX = 20
PROGRESS_SECONDS = 10.0


def _logged(
    results: Iterator[SnapshotTableResult], log: RunLog, mode: str, tables: int
) -> Iterator[SnapshotTableResult]:
    """``results``, each table's outcome logged before it is yielded (see :func:`snapshot_tables`):
    one line per table for up to :data:`TABLE_LINES_MAX` ``tables``, else progress lines and a
    summary. The rows left out of a table are always logged (:func:`log_rows_left_out`)."""
    per_table = tables <= TABLE_LINES_MAX
    committed = skipped = rows = 0
    position = None
    shown = time.monotonic()
    for r in results:
        if per_table:
            log.info(
                f"{r.schema.qualified_name}: {r.write.rows} rows at {r.position} "
                f"({'committed' if r.write.state.committed else 'already committed, skipped'})"
            )
        else:
            committed += 1 if r.write.state.committed else 0
            skipped += 0 if r.write.state.committed else 1
            rows += r.write.rows
            position = r.position
            if time.monotonic() - shown >= PROGRESS_SECONDS:
                shown = time.monotonic()
                log.info(f"Snapshot: {committed + skipped} of {tables} table(s) done, {rows:,} rows so far")
        log_rows_left_out(log, r, mode)
        yield r
    if not per_table and committed + skipped:
        again = f", {skipped} already committed by an earlier attempt (skipped)" if skipped else ""
        log.info(
            f"Snapshot: {committed} table(s) committed{again}, {rows:,} rows at {position} "
            "(each table's rows are in its materialization's metadata)"
        )


def log_rows_left_out(log: RunLog, r: SnapshotTableResult, mode: str) -> None:
    """WARNINGs for the snapshot rows of a table left out because a value could not be converted
    (Debezium ``event.processing.failure.handling.mode`` ``mode``: ``warn`` logs each of the first
    20, and both ``warn`` and ``skip`` one summary)."""
    if not r.rows_skipped_count:
        return
    if mode == "warn":
        for ev in r.rows_skipped[:20]:
            log.warning(f"Left a row of {ev['table']} out of the snapshot, {ev['position']}: {ev['reason']}")
    log.warning(
        f"{r.rows_skipped_count} row(s) of {r.schema.qualified_name} holding a value that cannot be "
        f"converted were left out of the snapshot (event_processing_failure_handling_mode={mode}); "
        "the table's events_skipped metadata lists them. Fix the value or the type mapping option "
        "and re-snapshot the table."
    )


def refresh_key_ranges(
    settings: ConnectionSettings,
    storage: StorageSettings,
    server_name: str,
    columns: ColumnPolicy,
    tables: Sequence[tuple[str, str]],
    range_rows: int,
) -> Iterator[tuple[tuple[str, str], list[KeyRange]]]:
    """Recompute and store the primary-key ranges of ``tables`` (about ``range_rows`` rows each,
    :func:`.ranges.compute_ranges`) in the lake (``LakeLayout.pk_ranges``).

    Keys are the captured ones (``message.key.columns``); keyless tables, and tables whose key is
    masked (raw key bounds would leak), are skipped.

    Yields:
        ``((database, table), ranges)`` per table, once its ranges are stored (the caller
        registers them as partitions as they come).

    Raises:
        SourceConnectionError / pymysql errors: the source cannot be read.
    """
    layout = LakeLayout(storage, server_name)
    conn = connect(settings)
    try:
        schemas = read_table_schemas(conn, tables)
        for (db, t), full in schemas.items():
            schema = columns.keyed(full)  # message.key.columns
            if not schema.primary_key or columns.masked_key(full):  # raw key bounds would leak
                continue
            ranges = compute_ranges(conn, schema, range_rows)
            save_ranges(storage, layout.pk_ranges(db, t), ranges)
            yield (db, t), ranges
    finally:
        conn.close()


def find_key_range(
    storage: StorageSettings, server_name: str, database: str, table: str, key: str
) -> tuple[KeyRange, int]:
    """The stored key range of partition ``key`` of ``database.table`` and how many ranges the
    table has (see :func:`refresh_key_ranges`).

    Raises:
        ConfigurationError: the table has no range ``key`` (snapshot the table first).
    """
    ranges = load_ranges(storage, LakeLayout(storage, server_name).pk_ranges(database, table))
    rng = ranges.get(key)
    if rng is None:
        raise ConfigurationError(
            f"Partition {key} of {database}.{table} has no key range: materialize the table asset "
            "(a snapshot recomputes the ranges) and retry."
        )
    return rng, len(ranges)


@dataclass(frozen=True)
class RangeResnapshot:
    """One key range re-snapshotted and committed (:func:`resnapshot_key_range`)."""

    range: KeyRange
    snapshot: RangeSnapshot
    write: TableWriteResult


def resnapshot_key_range(
    settings: ConnectionSettings,
    storage: StorageSettings,
    writer: LakeWriter,
    *,
    database: str,
    table: str,
    key: str,
    rng: KeyRange,
    signal_table: str,
    type_options: TypeOptions,
    server_name: str,
    server_id: int,
    reads: SnapshotReads,
    epoch: int,
    range_rows: int,
    log: RunLog,
) -> RangeResnapshot:
    """Re-snapshot the key range ``rng`` (partition ``key``) of ``database.table`` inside a
    watermark window (:func:`.ranges.snapshot_range`) and commit it: the rows read, and deletes of
    lake rows of the range the source no longer has, as one batch with the high watermark's
    transaction identity (a retry commits nothing twice). Logs one INFO line with the counts.

    Args:
        signal_table: the ``db.table`` the watermarks are written to (must exist).
        server_id: the capture's replication id; the window's binlog is read as
            ``server_id +`` :data:`RANGE_SERVER_ID_OFFSET`.
        reads: ``reads.split`` reads the range on the Spark executors in
            ``reads.max_connections`` tasks (0: one per core) of about ``range_rows / tasks`` keys.
        epoch: the capture's offset epoch (the watermarks carry it).

    Raises:
        ConfigurationError: no signal table; pymysql / sink errors from the read or the commit.
    """
    conn = connect(settings)
    try:
        info = server_info(conn)
        schema = read_table_schemas(conn, [(database, table)])[(database, table)]
    finally:
        conn.close()
    snap = snapshot_range(
        settings,
        info,
        schema,
        rng,
        signal_table=signal_table,
        type_options=type_options,
        server_name=server_name,
        replica_server_id=server_id + RANGE_SERVER_ID_OFFSET,
        storage=storage,
        epoch=epoch,
        writer=writer if reads.split else None,
        tasks=reads.max_connections,
        range_rows=range_rows,
    )
    conv = TableConverter(schema, type_options, "pymysql")
    w = writer.write_table_batch(
        database,
        table,
        [snap.batch] + ([snap.deletes] if snap.deletes is not None and snap.deletes.num_rows else []),
        value_schema=conv.arrow_schema,
        primary_key=conv.table.primary_key,
        app_id=snap.high.txn_app(f"dagster-mysql-cdc/range/{key}"),
        version=snap.high.as_version(),
        position=snap.high,
        epoch=snap.high.epoch,
    )
    log.info(
        f"{database}.{table} range {key} ({rng.lo} .. {rng.hi}]: read {snap.rows_read} rows, "
        f"emitted {snap.rows_emitted}, deleted {snap.rows_deleted} the source no longer has, "
        f"at high watermark {snap.high}"
    )
    return RangeResnapshot(rng, snap, w)
