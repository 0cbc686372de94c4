"""Source → events → sink for an initial snapshot, independent of Dagster.

:func:`run_snapshot` is what materializing table assets runs: one consistent snapshot of the
selected tables (one binlog position for all of them), each table streamed into its change log and
current-state Delta tables, one :class:`SnapshotTableResult` per table.
"""

from __future__ import annotations

import hashlib
import itertools
import logging
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import pyarrow as pa

from ..events import BinlogPosition
from ..sink.lake import LakeWriter, TableBatch, TableWriteResult, run_concurrently
from ..sink.schema_history import SchemaHistory, snapshot_records
from ..source.connection import ConnectionSettings
from ..source.schema import TableSchema
from ..source.snapshot import ConsistentSnapshot, SnapshotOptions
from ..source.types import TableConverter, TypeOptions

log = logging.getLogger(__name__)

SNAPSHOT_APP_ID = "dagster-mysql-cdc/snapshot"


#: A table whose snapshot is one record batch of at most this many rows is written together with
#: the other small tables of the snapshot (one Spark job, concurrent commits).
SMALL_TABLE_ROWS = 10_000
#: Small tables committed at the same time.
COMMIT_WORKERS = 8


@dataclass
class _SmallTable:
    key: tuple[str, str]
    conv: TableConverter
    batch: TableBatch
    rows: pa.RecordBatch | None
    t0: float


def _write_small(
    writer: LakeWriter, small: list[_SmallTable], position: BinlogPosition, workers: int
) -> list[TableWriteResult]:
    """The small tables of a snapshot: their rows written by one Spark job
    (:meth:`..sink.lake.LakeWriter.write_together`), their batches committed concurrently
    (:func:`..sink.lake.run_concurrently`). A snapshot of hundreds of small tables costs a few
    jobs, not hundreds.

    Raises:
        SinkError: a table could not be written or committed (the others' batches are aborted
            when they were not committed; a snapshot fails as a whole, as before).
    """
    if not small:
        return []
    items = [(st.batch, st.rows) for st in small if st.rows is not None and st.rows.num_rows]
    errors = writer.write_together(items) if items else {}
    if errors:
        for st in small:
            st.batch.abort()
        raise next(iter(errors.values()))
    outcomes = run_concurrently(
        [partial(st.batch.commit, value_schema=st.conv.arrow_schema, position=position) for st in small],
        workers,
    )
    failed = [e for _, e in outcomes if e is not None]
    if failed:
        raise failed[0]
    return [r for r, _ in outcomes]


def _result(snap, key, conv, position, result, t0: float, started: float) -> SnapshotTableResult:
    log.info(
        "Snapshot of %s.%s: %d rows in %.2fs (changelog v%s, state v%s)",
        key[0],
        key[1],
        result.rows,
        time.monotonic() - t0,
        result.changelog.table_version,
        result.state.table_version,
    )
    return SnapshotTableResult(
        schema=conv.table,  # captured columns (the history keeps the full schema)
        position=position,
        write=result,
        lock_kind=snap.lock_kind,
        lock_seconds=snap.lock_seconds,
        snapshot_seconds=time.monotonic() - started,
        rows_skipped=snap.skipped.get(key, []),
        rows_skipped_count=snap.skipped_count.get(key, 0),
    )


@dataclass
class SnapshotTableResult:
    """One table's part of a snapshot: where it started and what the sink committed."""

    schema: TableSchema
    position: BinlogPosition
    write: TableWriteResult
    lock_kind: str
    lock_seconds: float
    snapshot_seconds: float
    #: rows left out because a value could not be converted (event_processing_failure_handling_mode
    #: warn|skip): the first 100 ``{"table", "position", "reason"}``, and how many
    rows_skipped: list[dict] = field(default_factory=list)
    rows_skipped_count: int = 0


def run_snapshot(
    settings: ConnectionSettings,
    tables: Sequence[tuple[str, str]],
    writer: LakeWriter | Callable[[], LakeWriter],
    *,
    type_options: TypeOptions,
    options: SnapshotOptions,
    server_name: str,
    need_streaming: bool = True,
    history: SchemaHistory | None = None,
    epoch: int = 0,
) -> Iterator[SnapshotTableResult]:
    """Snapshot ``tables`` consistently and write each to the lake.

    The read-only transaction stays open while tables are written one after the other, so every
    table reflects the same binlog position (Debezium MySQL connector, snapshot steps 1-9).
    ``writer`` may be a factory, called once the source passed preflight (so a misconfigured
    source fails before a Spark JVM is started).
    ``options.include_data=False`` (``snapshot.mode=no_data``) creates empty datasets with the
    right schema and records the position.

    ``history``: when given, one ``CREATE`` schema-history record per table is appended at the
    snapshot position after all tables are written (Debezium records the snapshot's schema the
    same way), so streaming from that position decodes events with these schemas.

    ``epoch``: the offset epoch of the snapshot position (a re-snapshot after a failover, or a
    snapshot taken by a window of that epoch): the position, the state rows and the history
    records carry it (see :class:`~dagster_mysql_cdc.events.BinlogPosition`).

    Yields:
        one :class:`SnapshotTableResult` per table, in the order given, after its data is committed.

    Raises:
        SourceConnectionError, PreflightError, UnknownTableError: source problems (before any write).
        SinkError: a commit failed.
    """
    started = time.monotonic()
    with ConsistentSnapshot(
        settings, tables, type_options, options, server_name, need_streaming=need_streaming
    ) as snap:
        assert snap.position is not None
        position = snap.position.with_epoch(epoch)
        results: list[SnapshotTableResult] = []
        if not isinstance(writer, LakeWriter):
            writer = writer()
        small: list[_SmallTable] = []
        done: dict[tuple[str, str], SnapshotTableResult] = {}
        for key in snap.tables:
            t0 = time.monotonic()
            schema = snap.schemas[key]
            conv = TableConverter(schema, type_options, "pymysql")
            batches = snap.scan(key)
            first = next(batches, None)
            # a second batch only to tell a small table (one batch of at most SMALL_TABLE_ROWS) from a
            # large one: a large first batch is written while the next ones are read
            second = next(batches, None) if first is not None and first.num_rows <= SMALL_TABLE_ROWS else None
            identity: dict[str, Any] = dict(
                primary_key=conv.table.primary_key,  # the message key (message.key.columns)
                app_id=position.txn_app(SNAPSHOT_APP_ID),
                version=position.as_version(),
                snapshot_position=position,
                epoch=epoch,
            )
            if second is None and (first is None or first.num_rows <= SMALL_TABLE_ROWS):
                # a small table: written with the other small ones by one Spark job (below)
                tb = writer.open_table_batch(key[0], key[1], **identity)
                small.append(_SmallTable(key, conv, tb, first, t0))
                continue
            head = [b for b in (first, second) if b is not None]
            result = writer.write_table_batch(
                key[0],
                key[1],
                itertools.chain(head, batches),
                value_schema=conv.arrow_schema,
                position=position,
                **identity,
            )
            done[key] = _result(snap, key, conv, position, result, t0, started)
        for st, result in zip(small, _write_small(writer, small, position, COMMIT_WORKERS)):
            done[st.key] = _result(snap, st.key, st.conv, position, result, st.t0, started)
        results = [done[key] for key in snap.tables]
        if history is not None:
            assert snap.info is not None and snap.position is not None  # set when the snapshot began
            record_snapshot_schemas(
                history, position, snap.tables, snap.schemas, snap.create_statements, snap.info.server_id
            )
    yield from results


def record_snapshot_schemas(
    history: SchemaHistory,
    position: BinlogPosition,
    tables: Sequence[tuple[str, str]],
    schemas: dict[tuple[str, str], TableSchema],
    create_statements: dict[tuple[str, str], str],
    server_id: int,
) -> None:
    """Append one ``CREATE`` schema-history record per snapshotted table at the snapshot position
    (idempotent: the batch identity is the tables and the position)."""
    history.append(
        snapshot_records(position, [schemas[k] for k in tables], create_statements, server_id),
        app_id=position.txn_app(snapshot_history_app_id(tables)),
        version=position.as_version(),
    )


def snapshot_history_app_id(tables: Sequence[tuple[str, str]]) -> str:
    """History batch identity of a snapshot of ``tables`` (distinct per table set)."""
    digest = hashlib.sha1(",".join(f"{d}.{t}" for d, t in sorted(tables)).encode()).hexdigest()[:12]
    return f"dagster-mysql-cdc/snapshot/{digest}"
