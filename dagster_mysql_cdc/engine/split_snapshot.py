"""Source → events → sink for a lock-free initial snapshot read in parallel splits on Spark.

:func:`run_split_snapshot` is the ``snapshot_split_reads`` variant of
:func:`.initial_snapshot.run_snapshot`: no global read lock, no long transaction on the driver.
Per table, the driver plans primary-key splits (:func:`..source.splits.plan_splits`) and runs one
Spark job in which every task reads its splits from the source, each in its own consistent
snapshot (:mod:`..source.split_reader`), and writes the change-log (and a first snapshot's
state) data files; the driver only commits them.

Consistency (see :mod:`..source.splits`): the snapshot's offset is the binlog position ``P0``
read before any split; a split's rows carry the position of its own snapshot (MariaDB: exact;
MySQL: ``P0``). Streaming from ``P0`` replays every change made while the splits were read and
the state keeps, per key, the newest of the split row and the binlog events. A DDL statement on a
snapshotted table while its splits are read would mix schemas: it is detected (the table's
``SHOW CREATE TABLE`` is compared after its job) and the snapshot fails without returning an
offset, so the next materialization snapshots again.
"""

from __future__ import annotations

import logging
import os
import pickle
import re
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from ..errors import ConfigurationError, SinkError, SourceConnectionError, UnknownTableError
from ..events import BinlogPosition, change_log_schema, now_ms
from ..sink.lake import LakeWriter, root_cause
from ..sink.schema_history import SchemaHistory
from ..sink.spark_files import FileOutput, default_parallelism
from ..source.catalog import read_table_schemas
from ..source.connection import (
    ConnectionSettings,
    ServerInfo,
    connect,
    current_position,
    preflight,
    server_info,
)
from ..source.schema import TableSchema
from ..source.snapshot import create_statements, override_conditions
from ..source.split_reader import SplitJob, SplitsDataSource, group_splits, write_job_ref
from ..source.splits import KeySplit, SplitScan, plan_splits
from ..source.types import TableConverter, TypeOptions
from .initial_snapshot import SNAPSHOT_APP_ID, SnapshotTableResult, record_snapshot_schemas
from .split_files import SplitFilesDataSource, SplitFilesJob, merged_files
from .split_files import write_job_ref as write_files_job_ref

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class SplitOptions:
    """How a split snapshot reads the source.

    Attributes:
        split_rows: rows per split (Flink CDC ``scan.incremental.snapshot.chunk.size``).
        max_connections: at most this many tasks read the source at once (``0``: one per Spark
            core, Spark's default parallelism).
        fetch_size / batch_rows: rows per round trip / per Arrow record batch in a task.
    """

    split_rows: int = 100_000
    max_connections: int = 0
    fetch_size: int = 10_000
    batch_rows: int = 50_000

    def __post_init__(self) -> None:
        if self.split_rows < 1 or self.max_connections < 0 or self.fetch_size < 1 or self.batch_rows < 1:
            raise ConfigurationError(
                "snapshot_split_rows, fetch size and batch rows must be positive and "
                "snapshot_max_connections 0 (no cap) or more"
            )


_AUTO_INCREMENT = re.compile(r"\s+AUTO_INCREMENT=\d+")


def _check_no_ddl(conn: Any, table: tuple[str, str], before: str) -> None:
    """Refuse a table whose definition changed while its splits were read (mixed schemas)."""
    now = create_statements(conn, [table])[table]
    if _AUTO_INCREMENT.sub("", now) != _AUTO_INCREMENT.sub("", before):
        raise ConfigurationError(
            f"{table[0]}.{table[1]} was altered while its splits were read, so its rows may mix two "
            "schemas. Nothing after the position of this snapshot was acknowledged: materialize the "
            "table again once the DDL is done (or use the locked snapshot, snapshot_split_reads=False)."
        )


def run_split_snapshot(
    settings: ConnectionSettings,
    tables: Sequence[tuple[str, str]],
    writer: LakeWriter | Callable[[], LakeWriter],
    *,
    type_options: TypeOptions,
    split: SplitOptions,
    server_name: str,
    select_overrides: Sequence[tuple[str, str]] = (),
    need_streaming: bool = True,
    history: SchemaHistory | None = None,
    epoch: int = 0,
    failure_handling: str = "fail",
) -> Iterator[SnapshotTableResult]:
    """Snapshot ``tables`` without locks, in parallel splits read and written by the Spark executors.

    Same contract as :func:`.initial_snapshot.run_snapshot` (one :class:`SnapshotTableResult` per
    table after its data is committed; the schema history gets one ``CREATE`` record per table),
    except that the results' ``position`` is the offset streaming must resume from (``P0``, read
    before the first split) and ``lock_kind`` is ``"none"``. ``write.extra`` holds ``splits`` and
    ``tasks`` per table.

    Raises:
        SourceConnectionError, PreflightError, UnknownTableError: source problems (before any write).
        ConfigurationError: a table was altered while it was read (its data may be committed; no
            offset is returned, so the next snapshot repeats it), or a bad override condition.
        SinkError: a Spark task or a commit failed.
    """
    started, started_ms = time.monotonic(), now_ms()
    conn = connect(settings)
    try:
        info = server_info(conn)
        for w in preflight(conn, info, tables, need_streaming=need_streaming, need_lock=False):
            log.warning(w)
        position = current_position(conn, info).with_epoch(epoch)
        schemas = read_table_schemas(conn, tables)
        missing = [f"{d}.{t}" for d, t in tables if (d, t) not in schemas]
        if missing:
            raise UnknownTableError(f"Table(s) vanished before the snapshot: {missing}")
        conditions = override_conditions(select_overrides, tables, schemas)
        creates = create_statements(conn, tables)
        if not isinstance(writer, LakeWriter):
            writer = writer()
        cores = default_parallelism(writer.spark)
        results = []
        for i, key in enumerate(tables):
            t0 = time.monotonic()
            conv = TableConverter(schemas[key], type_options, "pymysql")
            splits = plan_splits(conn, schemas[key], split_rows=split.split_rows, min_splits=cores)
            scan = SplitScan(
                schema=schemas[key],
                type_options=type_options,
                server_name=server_name,
                server_id=info.server_id,
                is_mariadb=info.is_mariadb,
                fallback=position,
                n_splits=len(splits),
                first_table=i == 0,
                last_table=i == len(tables) - 1,
                condition=conditions.get(key),
                fetch_size=split.fetch_size,
                batch_rows=split.batch_rows,
                snapshot_ts_ms=started_ms,
                failure_handling=failure_handling,
            )
            job = SplitJob(settings, scan, group_splits(splits, split.max_connections))
            table_write = _TableWrite(writer, key, job, conv, position, epoch)
            if conv.table.primary_key and len(splits) > 1:
                result = table_write.by_spark()
            else:  # one split (a small or keyless table): no Spark job to read it
                result = table_write.one_split(exact=info.is_mariadb)
            _check_no_ddl(conn, key, creates[key])
            log.info(
                "Split snapshot of %s.%s: %d rows in %d split(s), %d task(s), %.2fs",
                key[0],
                key[1],
                result.rows,
                len(splits),
                len(job.groups),
                time.monotonic() - t0,
            )
            results.append(
                SnapshotTableResult(
                    schema=conv.table,
                    position=position,
                    write=result,
                    lock_kind="none",
                    lock_seconds=0.0,
                    snapshot_seconds=time.monotonic() - started,
                )
            )
        if history is not None:
            record_snapshot_schemas(history, position, list(tables), schemas, creates, info.server_id)
    finally:
        conn.close()
    yield from results


@contextmanager
def split_frame(writer: LakeWriter, job: SplitJob) -> Iterator[Callable[[Any], Any]]:
    """The ``mysql_cdc_splits`` DataFrame of ``job`` (a function of the Spark session), with the
    job's sealed private file shipped to the executors for the duration of the block (the
    password in clear only in the tasks' memory: :mod:`dagster_mysql_cdc.private_files`)."""
    name = writer.register_data_source(SplitsDataSource)
    ref = writer.private_file(lambda files: write_job_ref(job, files))
    try:
        yield lambda spark: spark.read.format(name).option("job_ref", ref).load()
    except SinkError as e:
        if not _source_error(e):
            raise
        raise _unreachable(job, e) from e
    finally:
        os.remove(ref)


def _source_error(e: BaseException) -> bool:
    """Whether a Spark job's error is the source's (a task could not connect or read)."""
    return "pymysql" in str(e) or "MySQL" in str(e)


def _unreachable(job: SplitJob, e: BaseException) -> SourceConnectionError:
    st = job.settings
    return SourceConnectionError(
        f"The Spark executors could not read {job.scan.schema.qualified_name} from "
        f"{st.host}:{st.port} as {st.user!r}: {e}. With snapshot_split_reads every Spark task "
        "connects to the source itself: the executor hosts need network access to it and the "
        "capture user's grants must cover them ('cdc'@'<executor host>'); or set "
        "snapshot_split_reads=False to read on the run process. Nothing was committed."
    )


def write_split_files(writer: LakeWriter, job: SplitJob, outputs: list[FileOutput]) -> list[list[dict]]:
    """One Spark job: each task reads its group of ``job``'s splits and writes the events'
    ``outputs`` itself (:mod:`.split_files`); returns the files written, per output, in key order
    (uncommitted: the caller's table batch commits them).

    Raises:
        SourceConnectionError: the executors could not read the source; SinkError: a task failed
            otherwise (the files of the tasks that finished stay uncommitted, invisible, until
            VACUUM removes them).
    """
    name = writer.register_data_source(SplitFilesDataSource)
    task_job = SplitFilesJob(job, tuple(outputs), writer._storage_ref, writer.rows_per_file)
    ref = writer.private_file(lambda files: write_files_job_ref(task_job, files))
    try:
        rows = writer.active_spark().read.format(name).option("job_ref", ref).load().collect()
    except Exception as e:  # a task's error arrives wrapped by Spark (py4j / gRPC)
        if _source_error(e):
            raise _unreachable(job, SinkError(root_cause(e))) from e
        raise SinkError(
            f"Reading the splits of {job.scan.schema.qualified_name} into {outputs[0].table_uri} on "
            f"{writer.storage.location()} failed: {root_cause(e)}"
        ) from e
    finally:
        os.remove(ref)
    summaries = [pickle.loads(bytes(r["summary"])) for r in rows]
    return merged_files(summaries, len(outputs), len(job.groups))


def stage_split_rows(
    writer: LakeWriter,
    settings: ConnectionSettings,
    info: ServerInfo,
    schema: TableSchema,
    type_options: TypeOptions,
    tasks: tuple[tuple[KeySplit, ...], ...],
    stage_uri: str,
    *,
    condition: str | None = None,
) -> list[tuple[str, int]]:
    """One Spark job: the executors read the key ranges of ``tasks`` (one group per task) of
    ``schema``'s table, and write the rows (the value schema, no change events: their consistency
    comes from the caller's watermark window) as plain Parquet files under ``stage_uri``.

    Returns:
        ``(uri, rows)`` of each file written (none when no row was read).
    Raises:
        SourceConnectionError: the executors could not read the source; SinkError: a task failed.
    """
    scan = SplitScan(
        schema=schema,
        type_options=type_options,
        server_name="",
        server_id=info.server_id,
        is_mariadb=info.is_mariadb,
        fallback=BinlogPosition("", 0),
        n_splits=sum(len(g) for g in tasks),
        condition=condition,
        values_only=True,
    )
    value_schema = TableConverter(schema, type_options, "pymysql").arrow_schema
    with split_frame(writer, SplitJob(settings, scan, tasks)) as frame:
        return writer.write_frame_files(frame, stage_uri, value_schema)


@dataclass(frozen=True)
class _TableWrite:
    """One table of the split snapshot written at ``position``: its splits (``job``), converter,
    and the writer's batch identity (the snapshot app of ``position``, ``epoch``)."""

    writer: LakeWriter
    key: tuple[str, str]
    job: SplitJob
    conv: TableConverter
    position: BinlogPosition
    epoch: int

    def by_spark(self):
        """One Spark job: the executors read ``job``'s splits and write the table's data files
        (:func:`write_split_files`); the run process commits them."""
        result = self.writer.write_files_batch(
            self.key[0],
            self.key[1],
            lambda outputs: write_split_files(self.writer, self.job, outputs),
            log_schema=change_log_schema(self.conv.arrow_schema, self.conv.table.primary_key),
            value_schema=self.conv.arrow_schema,
            primary_key=self.conv.table.primary_key,
            app_id=self.position.txn_app(SNAPSHOT_APP_ID),
            version=self.position.as_version(),
            position=self.position,
            snapshot_position=self.position,
            epoch=self.epoch,
        )
        result.extra.update(splits=sum(len(g) for g in self.job.groups), tasks=len(self.job.groups))
        return result

    def one_split(self, *, exact: bool):
        """A table of one split (smaller than ``split_rows``, or keyless: no key to split on): read on
        the driver in its own consistent snapshot at position ``S`` (no Spark job to read a few rows),
        written like a locked snapshot's table.

        A keyless table has no "latest wins" per key: its value counts are set at ``S`` (its cut
        marker there, ``sink/tail.py``), so the binlog events between the snapshot's offset and ``S``
        (already in the counts, older than ``S``) are not counted again.

        Raises:
            ConfigurationError: a keyless table on a server that gives no exact snapshot position
                (MySQL): the counts would be off by the changes made meanwhile.
        """
        keyless = not self.conv.table.primary_key
        if keyless and not exact:
            raise ConfigurationError(
                f"{self.key[0]}.{self.key[1]} has no primary key and this server (MySQL) gives no exact "
                "position of a "
                "consistent snapshot, so a lock-free split snapshot cannot count its duplicate rows exactly. "
                "Set message_key_columns for it, or use snapshot_split_reads=False."
            )
        from ..source.splits import KeySplit, read_split, split_position

        conn = connect(self.job.settings)
        try:
            at = split_position(conn, self.job.scan)
            result = self.writer.write_table_batch(
                self.key[0],
                self.key[1],
                read_split(conn, self.job.scan, KeySplit(0, None, None), position=at),
                value_schema=self.conv.arrow_schema,
                primary_key=self.conv.table.primary_key,
                app_id=self.position.txn_app(SNAPSHOT_APP_ID),
                version=self.position.as_version(),
                position=self.position,
                snapshot_position=at if keyless else self.position,
                epoch=self.epoch,
            )
        finally:
            conn.close()
        result.extra.update(splits=1, tasks=0, read_at=str(at))
        return result
