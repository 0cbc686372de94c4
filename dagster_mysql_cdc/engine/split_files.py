"""A PySpark Python data source whose tasks read primary-key splits and write their lake files.

The split snapshot (:mod:`.split_snapshot`) reads a table's splits on the executors. Its tasks
used to hand the events to a second data source through Spark (``mysql_cdc_splits`` as Arrow IPC
payload rows, written by ``mysql_cdc_delta_files``): each task then ran two Python workers, a
reader and a writer, and every row crossed the JVM twice between them (IPC-encoded by the reader,
copied by the JVM, decoded by the writer). Measured on 500,000 rows on a Spark Connect server
(docs/benchmarks.md): the readers used 6.8 s of CPU, the writers 1.7 s and the JVM between them
3.5 s.

Here one task does both, as the parallel catch-up's segment tasks do (:mod:`.segment_reader`): it
reads each split of its group (:func:`..source.splits.read_split`, each split in its own consistent
snapshot) and writes the events' outputs itself (:class:`..sink.spark_files.OutputFiles`: the
change log's Parquet files and the tail's, or a first snapshot's state rows), then returns one row,
``(task, summary)``: the files written per output, pickled. The run process commits them
(:meth:`..sink.table_batch.TableBatch.add_files`); a file never committed stays invisible (Delta)
and is removed by VACUUM. A task that fails deletes the files it wrote.

The job (connection settings with the password, the table's schema and splits, the outputs) travels
in a sealed private file named by the option ``job_ref``, as :mod:`..source.split_reader`'s does;
the storage settings in the lake writer's sealed ``storage_ref``: only the writer's keyed subclass
of :class:`SplitFilesDataSource` (``mysql_cdc_split_files_<id>``) opens them.
"""

from __future__ import annotations

import pickle
from collections.abc import Iterator
from dataclasses import dataclass

import pyarrow as pa
from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

from ..private_files import PrivateFiles, SealedDataSource, read_pickled, write_pickled
from ..sink.spark_files import FileOutput, OutputFiles, all_or_nothing, read_storage_ref
from ..source.connection import connect
from ..source.split_reader import SplitJob
from ..source.splits import read_split

FORMAT_NAME = "mysql_cdc_split_files"


@dataclass(frozen=True)
class SplitFilesJob:
    """What the tasks of one table's split snapshot need.

    Attributes:
        split: the splits (one group per task), the table and how its rows become events.
        outputs: what each task writes of the events (the change log; the tail, or a first
            snapshot's state), in the lake schemas the run process conformed.
        storage_ref: the lake writer's sealed storage settings (the S3 keys).
        rows_per_file: upper bound of rows per Parquet file.
    """

    split: SplitJob
    outputs: tuple[FileOutput, ...]
    storage_ref: str
    rows_per_file: int


def write_job_ref(job: SplitFilesJob, files: PrivateFiles) -> str:
    """Seal the pickled ``job`` into a new private file of ``files``; return its path."""
    return write_pickled(job, files, "cdc-split-files-")


def read_job_ref(path: str, key: bytes | None) -> SplitFilesJob:
    """The job a :func:`write_job_ref` file holds, decrypted with ``key``.

    Raises:
        ValueError: ``key`` is not the file's; TypeError: the file holds no :class:`SplitFilesJob`.
    """
    return read_pickled(path, key, SplitFilesJob)


def write_group(job: SplitFilesJob, group: int, key: bytes | None) -> dict:
    """Read the splits of task ``group`` and write their outputs; returns the task's summary
    ``{"group", "rows", "files"}`` (``files``: per output, the Delta add entries of the files
    written). On any error the files written so far are deleted and the error raised.

    Raises:
        pymysql.err.MySQLError: the source refused the read; OSError and others: the lake.
    """
    storage = read_storage_ref(job.storage_ref, key)
    fs = storage.pyarrow_filesystem()
    rows = 0
    with all_or_nothing([OutputFiles(o, storage, fs, job.rows_per_file) for o in job.outputs]) as outs:
        for split in job.split.groups[group]:
            conn = connect(job.split.settings)
            try:
                for batch in read_split(conn, job.split.scan, split):
                    events = pa.Table.from_batches([batch])
                    for o in outs:
                        o.write(o.out.rows(events))
                    rows += batch.num_rows
            finally:
                conn.close()
    return {"group": group, "rows": rows, "files": [o.files for o in outs]}


class SplitFilesReader(DataSourceReader):
    """One partition per task group of the job; a task returns its summary (see the module docs)."""

    def __init__(self, options: dict[str, str], key: bytes | None):
        self.job_ref = options["job_ref"]
        self.key = key

    def partitions(self) -> list[InputPartition]:
        return [InputPartition(i) for i in range(len(read_job_ref(self.job_ref, self.key).split.groups))]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        summary = write_group(read_job_ref(self.job_ref, self.key), partition.value, self.key)
        yield pa.RecordBatch.from_arrays(
            [pa.array([partition.value], pa.int32()), pa.array([pickle.dumps(summary)], pa.binary())],
            ["task", "summary"],
        )


class SplitFilesDataSource(SealedDataSource, DataSource):
    """Spark data source ``mysql_cdc_split_files`` (read only). See the module docs. Register the
    lake writer's keyed subclass (``LakeWriter.register_data_source``): only it opens the job."""

    library_name = FORMAT_NAME

    def schema(self) -> str:
        return "task int, summary binary"

    def reader(self, schema) -> SplitFilesReader:
        return SplitFilesReader(dict(self.options), type(self).file_key)


def merged_files(summaries: list[dict], outputs: int, tasks: int) -> list[list[dict]]:
    """The files of every task, per output, in task order (the splits' key order).

    Raises:
        RuntimeError: not exactly one summary per task.
    """
    got = sorted(summaries, key=lambda s: s["group"])
    if [s["group"] for s in got] != list(range(tasks)):
        raise RuntimeError(f"the split tasks returned {len(got)} summaries for {tasks} tasks")
    return [[f for s in got for f in s["files"][i]] for i in range(outputs)]
