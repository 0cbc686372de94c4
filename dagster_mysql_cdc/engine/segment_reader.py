"""A PySpark Python data source whose tasks decode binlog segments and write their lake files.

``spark.read.format(<name>).option("job_ref", path).load()`` has one partition per
:class:`~.segments.Segment` of a window (:mod:`.parallel_catchup` plans them). A task, on an
executor, opens its own replication connection to the source with the segment's ``server_id``,
reads ``[segment start, segment end)`` and turns it into Debezium change events with the very
code of the run process's reader (:class:`~.stream.BinlogStreamingSource`: row events of the
captured tables, DDL in order with the schema in force at the segment's start, transaction
metadata), then writes what the run process's sink would write, itself: each table's change-log
Parquet files and its state tail rows (:mod:`..sink.tail`), in the lake schemas the run process
conformed for the whole window, and the ``_transactions`` records. Rows never pass through the run
process: a task returns one row per segment, ``(segment, summary)``, the summary (pickled) naming
the files written, the counts by operation, the tables that could not be written (they stop alone,
:mod:`.isolation`), the foreign-key cascades and partial row images seen (gaps, :mod:`.gaps`) and
the events skipped (``event.processing.failure.handling.mode``). The run process commits the files
(:mod:`.parallel_catchup`); a file never committed stays invisible (Delta) and is removed by VACUUM.

The job (connection settings with the password, catalogs, lake schemas) travels in a sealed private
file named by the option ``job_ref`` (:mod:`dagster_mysql_cdc.private_files`), as split reads do
(:mod:`..source.split_reader`): only the lake writer's keyed subclass of :class:`SegmentsDataSource`
(registered as ``mysql_cdc_segments_<id>``) opens it.
"""

from __future__ import annotations

import pickle
import time
from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import Any, cast

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

from ..errors import CdcError
from ..private_files import PrivateFiles, SealedDataSource, read_pickled, write_pickled
from ..sink.evolution import conform_table
from ..sink.spark_files import FileOutput, OutputFiles, read_storage_ref
from ..source.binlog import DdlStatement, RowsBatch, TransactionCommit
from ..source.connection import ConnectionSettings, ServerInfo
from ..source.ddl import SchemaCatalog
from ..source.filters import TableFilter
from ..source.foreign_keys import CascadingForeignKey
from ..source.types import TypeOptions
from .segments import Segment
from .stream import BinlogStreamingSource, StreamOptions
from .transactions import TRANSACTIONS_SCHEMA
from .window_result import WindowResult

FORMAT_NAME = "mysql_cdc_segments"

#: Transaction metadata records a task holds before writing them out (2 per transaction).
TX_FLUSH_RECORDS = 50_000


@dataclass(frozen=True)
class TableFiles:
    """Where one table's events of a parallel window go: its change log's and its tail's output,
    in the lake schemas the run process conformed for every schema the table has in the window
    (``tail.value_names`` is set per record batch to the batch's own columns)."""

    changelog: FileOutput
    tail: FileOutput


@dataclass(frozen=True)
class SegmentJob:
    """Everything the tasks of one parallel window need.

    Attributes:
        settings: how to reach the source (with the password: the job lives in a sealed file).
        segments: the window's segments, in binlog order (one task each).
        catalogs: the schema catalog in force at each segment's start (shared objects when no DDL
            lies between two starts).
        tables: the lake outputs of every captured table the window writes.
        transactions: the ``_transactions`` output (``provide_transaction_metadata``), or ``None``.
        storage_ref: the lake writer's sealed storage settings (the S3 keys).
        foreign_keys: the cascading foreign keys the planning run read (by parent table), so the
            tasks do not read every captured table's ``SHOW CREATE TABLE`` again (``None``: each
            task reads them).
    """

    settings: ConnectionSettings
    info: ServerInfo
    segments: tuple[Segment, ...]
    catalogs: tuple[SchemaCatalog, ...]
    table_filter: TableFilter
    type_options: TypeOptions
    options: StreamOptions
    server_name: str
    signal_table: str | None
    tables: dict[tuple[str, str], TableFiles]
    transactions: FileOutput | None
    storage_ref: str
    rows_per_file: int
    foreign_keys: dict[tuple[str, str], list[CascadingForeignKey]] | None = None


def write_job_ref(job: SegmentJob, files: PrivateFiles) -> str:
    """Seal the pickled ``job`` into a new private file of ``files``; return its path
    (``cdc-segments-<random>.pkl``)."""
    return write_pickled(job, files, "cdc-segments-")


def read_job_ref(path: str, key: bytes | None) -> SegmentJob:
    """The job a :func:`write_job_ref` file holds, decrypted with ``key``.

    Raises:
        ValueError: ``key`` is not the file's; TypeError: the file holds no :class:`SegmentJob`.
    """
    return read_pickled(path, key, SegmentJob)


class _NoChunks:
    """The incremental snapshot source of a segment: none runs (the run process reads windows with
    an active incremental snapshot itself), so no key a row event touches is recorded."""

    positional: list = []

    def touched(self, table: str) -> None:
        return None


class _SegmentHistory:
    """The schema history seen by a segment's source: its catalog is set from the job."""

    def catalog_at(self, position: Any) -> dict:
        return {}


class _SegmentSink:
    """One table's files of one segment: what :class:`~..sink.table_batch.TableBatch` would hand to
    Spark, written by this task (change log in the lake's schema, tail rows of the batch's own
    columns)."""

    def __init__(self, files: TableFiles, storage: Any, fs: Any, rows_per_file: int):
        self.files = files
        self.log = OutputFiles(files.changelog, storage, fs, rows_per_file)
        self.tail = OutputFiles(files.tail, storage, fs, rows_per_file)
        self.rows_by_op: dict[str, int] = {}

    def add(self, batch: pa.RecordBatch) -> None:
        if batch.num_rows == 0:
            return
        for vc in pc.value_counts(batch.column(batch.schema.get_field_index("op"))).to_pylist():
            self.rows_by_op[vc["values"]] = self.rows_by_op.get(vc["values"], 0) + vc["counts"]
        names = tuple(f.name for f in batch.schema.field("after").type)
        events = conform_table(batch, self.files.changelog.schema)
        self.log.write(events)
        self.tail.write(replace(self.files.tail, value_names=names).rows(events))

    def drain(self) -> None:
        """Nothing queued: every record batch is written when added."""

    def abort(self) -> None:
        self.log.discard()
        self.tail.discard()

    def close(self) -> dict:
        self.log.close()
        self.tail.close()
        return {"log": self.log.files, "tail": self.tail.files, "rows_by_op": dict(self.rows_by_op)}


class _SegmentWriter:
    """The lake writer seen by a segment's :class:`~.stream.BinlogStreamingSource`: a table's
    batch is a :class:`_SegmentSink` (one per table: a key change, which would make a second part,
    is read by the run process instead)."""

    def __init__(self, job: SegmentJob, storage: Any):
        self.job = job
        self.storage = storage
        self.fs = storage.pyarrow_filesystem()
        self.sinks: dict[tuple[str, str], _SegmentSink] = {}

    def open_table_batch(self, database: str, table: str, **_: Any) -> _SegmentSink:
        key = (database, table)
        files = self.job.tables.get(key)
        if files is None or key in self.sinks:
            # the run process planned every table the window writes, each in one part: a table
            # it did not plan is a bug, reported loudly (the window is then read by the run process)
            raise _PlanMismatch(
                f"{database}.{table} was not planned for this segment (or needs a second part)"
            )
        sink = self.sinks[key] = _SegmentSink(files, self.storage, self.fs, self.job.rows_per_file)
        return sink


class _PlanMismatch(BaseException):
    """A segment met what the run process did not plan (raised through the per-table isolation,
    which catches ``Exception``, so the task fails and the run process reads the window itself)."""


def decode_segment(job: SegmentJob, index: int, key: bytes | None) -> dict:
    """Decode segment ``index`` of ``job`` and write its files (on an executor).

    Returns:
        the summary (see the module docs): ``segment``, ``tables`` (``{(db, table): {"log",
        "tail", "rows_by_op", "failed"}}``), ``transactions`` (files), ``cascades``, ``partial``,
        ``skipped``, ``skipped_count``, ``events_read``, ``seconds``.
    Raises:
        whatever reading the segment raises (connection, privileges, a schema mismatch with
        ``event_processing_failure_handling_mode=fail``): the task fails, its files are deleted.
    """
    t0, c0 = time.monotonic(), time.process_time()
    seg = job.segments[index]
    storage = read_storage_ref(job.storage_ref, key)
    writer = _SegmentWriter(job, storage)
    result = WindowResult(start=seg.start, end=seg.end)
    source = BinlogStreamingSource(
        job.settings,
        job.info,
        start=seg.start,
        writer=cast(Any, writer),
        history=cast(Any, _SegmentHistory()),
        table_filter=job.table_filter,
        type_options=job.type_options,
        options=job.options,
        server_name=job.server_name,
        signal_table=job.signal_table,
        result=result,
        foreign_keys=job.foreign_keys,
    )
    source.catalog = job.catalogs[index]
    tx = (
        OutputFiles(job.transactions, storage, writer.fs, job.rows_per_file)
        if job.transactions is not None
        else None
    )
    chunks = cast(Any, _NoChunks())
    reader = source.reader(seg.server_id, seg.end)
    try:
        for item in reader:
            if isinstance(item, RowsBatch):
                if source.sig_key is not None and (item.database, item.table) == source.sig_key:
                    raise _PlanMismatch(f"a signal row at {item.file}:{item.pos} in a parallel segment")
                source._on_rows(item, chunks)
            elif isinstance(item, TransactionCommit):
                source._on_commit(item)
                if tx is not None and len(source.tx_records) >= TX_FLUSH_RECORDS:
                    tx.write(pa.Table.from_pylist(source.tx_records, schema=TRANSACTIONS_SCHEMA))
                    source.tx_records = []
            elif isinstance(item, DdlStatement):
                source.on_ddl(item)
            # StatementDml: its gaps are recorded by the run process, from the window's plan
        tables: dict[tuple[str, str], dict] = {}
        for k, te in source.tables.items():
            te.finish()
            sink = writer.sinks.get(k)
            if te.failed is not None:
                if sink is not None:
                    sink.abort()
                tables[k] = {"log": [], "tail": [], "rows_by_op": {}, "failed": te.failed}
            elif sink is not None:
                tables[k] = {**sink.close(), "failed": None}
        tx_files: list[dict] = []
        if tx is not None:
            if source.tx_records:
                tx.write(pa.Table.from_pylist(source.tx_records, schema=TRANSACTIONS_SCHEMA))
            tx.close()
            tx_files = tx.files
    except BaseException as e:
        for sink in writer.sinks.values():
            sink.abort()
        if tx is not None:
            tx.discard()
        if isinstance(e, _PlanMismatch):
            raise CdcError(f"internal: {e}") from None
        raise
    finally:
        source.close()
    return {
        "segment": index,
        "tables": tables,
        "transactions": tx_files,
        "cascades": source.cascades.seen,
        "partial": source.partial.tables,
        "skipped": result.events_skipped,
        "skipped_count": result.events_skipped_count,
        "events_read": reader.events_read,
        "seconds": time.monotonic() - t0,
        "cpu_seconds": time.process_time() - c0,
    }


class SegmentPartition(InputPartition):
    """One task: ``value`` is the segment's index in :attr:`SegmentJob.segments`."""


class SegmentsReader(DataSourceReader):
    """Decodes the job's segments, one Spark partition each (see the module docs)."""

    def __init__(self, options: dict[str, str], key: bytes | None):
        self.job_ref = options["job_ref"]
        self.key = key

    def partitions(self) -> list[InputPartition]:
        return [SegmentPartition(i) for i in range(len(read_job_ref(self.job_ref, self.key).segments))]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        job = read_job_ref(self.job_ref, self.key)
        summary = decode_segment(job, partition.value, self.key)
        yield pa.RecordBatch.from_arrays(
            [pa.array([partition.value], pa.int32()), pa.array([pickle.dumps(summary)], pa.binary())],
            ["segment", "summary"],
        )


class SegmentsDataSource(SealedDataSource, DataSource):
    """Spark data source ``mysql_cdc_segments`` (read only). See the module docs. Register the lake
    writer's keyed subclass (``LakeWriter.register_data_source``): only it opens the sealed job."""

    library_name = FORMAT_NAME

    def schema(self) -> str:
        return "segment int, summary binary"

    def reader(self, schema) -> SegmentsReader:
        return SegmentsReader(dict(self.options), type(self).file_key)
