"""A PySpark Python data source that reads primary-key splits of a MySQL table on the executors.

``spark.read.format(<name>).option("job_ref", path).load()`` is a DataFrame of
**Arrow IPC payloads** (column ``payload``, binary: one row per record batch of ``op=r`` change
events, as :mod:`dagster_mysql_cdc.sink.spark_files` writes them). Its partitions are the
splits of one table (:mod:`.splits`): :meth:`SplitsReader.partitions` returns one
:class:`SplitGroup` per task and :meth:`SplitsReader.read` runs on an executor, opens its own
connection to the source and reads each split of its group in its own consistent snapshot. The
rows never pass through the driver: the same task hands its payloads to the lake writer
(``mysql_cdc_delta_files``), which writes the Parquet data files.

Parallelism follows the Spark session (one task per core, or per executor core on a cluster); a
group holds several splits when the job caps the concurrent connections to the source
(:func:`group_splits`).

The job (connection settings with the password, the table's schema, the splits) travels in a
sealed private file named by the option ``job_ref`` (Spark logs options and plans): a pickle
encrypted with the lake writer's key (:mod:`dagster_mysql_cdc.private_files`), which the
tasks get only inside the registered data source class (the writer's keyed subclass of
:class:`SplitsDataSource`, named ``mysql_cdc_splits_<id>``). The executors of a local session read
the file where the driver wrote it; on a cluster the lake writer ships it with the job
(``SparkContext.addFile`` / a Spark Connect artifact) and the executors find it through
``SparkFiles``; either way the password exists in clear only in the tasks' memory.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import pyarrow as pa
from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

from ..private_files import PrivateFiles, SealedDataSource, read_pickled, write_pickled
from .connection import ConnectionSettings, connect
from .splits import KeySplit, SplitScan, read_split

FORMAT_NAME = "mysql_cdc_splits"


@dataclass(frozen=True)
class SplitJob:
    """Everything the tasks of one table's split read need.

    Attributes:
        settings: how to reach the source (with the password: the job lives in a sealed file).
        scan: the table and how its rows become events.
        groups: the splits of each task, in key order.
    """

    settings: ConnectionSettings
    scan: SplitScan
    groups: tuple[tuple[KeySplit, ...], ...]


def group_splits(splits: Sequence[KeySplit], max_tasks: int) -> tuple[tuple[KeySplit, ...], ...]:
    """One split per task, or ``max_tasks`` contiguous groups when there are more splits (so at most
    ``max_tasks`` connections read the source at once). ``max_tasks <= 0``: no cap."""
    if max_tasks <= 0 or len(splits) <= max_tasks:
        return tuple((s,) for s in splits)
    size, extra = divmod(len(splits), max_tasks)
    groups, at = [], 0
    for i in range(max_tasks):
        n = size + (1 if i < extra else 0)
        groups.append(tuple(splits[at : at + n]))
        at += n
    return tuple(groups)


def merge_splits(splits: Sequence[KeySplit], n: int) -> tuple[tuple[KeySplit, ...], ...]:
    """At most ``n`` tasks of one key range each: runs of contiguous splits merged into one split
    (one connection, one ``SELECT`` per task; the per-task cost of a small split is paid once)."""
    return tuple((KeySplit(i, g[0].lo, g[-1].hi),) for i, g in enumerate(group_splits(splits, max(1, n))))


def write_job_ref(job: SplitJob, files: PrivateFiles) -> str:
    """Seal the pickled ``job`` into a new private file of ``files``; return its path
    (``cdc-splits-<random>.pkl``)."""
    return write_pickled(job, files, "cdc-splits-")


def read_job_ref(path: str, key: bytes | None) -> SplitJob:
    """The job a :func:`write_job_ref` file holds, decrypted with ``key`` (on a cluster executor:
    its ``SparkFiles`` copy).

    Raises:
        ValueError: ``key`` is not the file's; TypeError: the file holds no :class:`SplitJob`.
    """
    return read_pickled(path, key, SplitJob)


class SplitGroup(InputPartition):
    """One task's splits: ``value`` is the group's index in :attr:`SplitJob.groups`."""


def _payload(batch: pa.RecordBatch) -> pa.RecordBatch:
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, batch.schema) as w:
        w.write_batch(batch)
    return pa.RecordBatch.from_arrays([pa.array([sink.getvalue().to_pybytes()], pa.binary())], ["payload"])


class SplitsReader(DataSourceReader):
    """Reads the job's split groups, one Spark partition each (see the module docs)."""

    def __init__(self, options: dict[str, str], key: bytes | None):
        self.job_ref = options["job_ref"]
        self.key = key

    def partitions(self) -> list[InputPartition]:
        return [SplitGroup(i) for i in range(len(read_job_ref(self.job_ref, self.key).groups))]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        job = read_job_ref(self.job_ref, self.key)
        for split in job.groups[partition.value]:
            conn = connect(job.settings)
            try:
                for batch in read_split(conn, job.scan, split):
                    yield _payload(batch)
            finally:
                conn.close()


class SplitsDataSource(SealedDataSource, DataSource):
    """Spark data source ``mysql_cdc_splits`` (read only). See the module docs. Register the lake
    writer's keyed subclass (``LakeWriter.register_data_source``): only it opens the sealed job."""

    library_name = FORMAT_NAME

    def schema(self) -> str:
        return "payload binary"

    def reader(self, schema) -> SplitsReader:
        return SplitsReader(dict(self.options), type(self).file_key)
