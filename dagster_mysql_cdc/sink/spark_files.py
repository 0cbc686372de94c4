"""A PySpark Python data source that writes Parquet data files for a Delta table.

Spark executors write the data files straight to the lake with pyarrow (``pyarrow.fs`` S3 or local
filesystem), so it works with a Spark that has no ``hadoop-aws``/s3a jars; the files are invisible
until :mod:`.delta` commits them to the table's Delta log in one atomic commit. This is the classic
two-phase file commit of Spark's own ``FileFormatWriter``: tasks write, the job commit publishes.

Usage (done by :class:`dagster_mysql_cdc.sink.lake.LakeWriter`)::

    spark.dataSource.register(DeltaFilesDataSource)
    df.write.format("mysql_cdc_delta_files").mode("append")
      .option("table_uri", uri).option("arrow_schema", b64).option("manifest", "/tmp/m.json")
      .option("storage_ref", "/tmp/cdc-storage-xyz.json").save()

Each job's commit (on the driver) writes a JSON manifest ``[{path, size, num_records,
modification_time}]`` to the local ``manifest`` path; an aborted job deletes its files.

Credentials never travel as data source options (Spark and py4j log options and plans): the
option ``storage_ref`` names a private (0600) JSON file with the :class:`StorageSettings`, written
by the driver (:func:`write_storage_ref`). In local mode the executors read the same file; on a
cluster the writer ships it with ``SparkContext.addFile`` and executors find it through
``SparkFiles`` (or leave the S3 credentials unset and give the executors ``AWS_*`` environment
variables or an instance profile: the AWS default chain).
"""

from __future__ import annotations

import base64
import json
import os
import tempfile
import time
import uuid
from dataclasses import dataclass, field

import pyarrow as pa
import pyarrow.parquet as pq
from pyspark.sql.datasource import DataSource, DataSourceArrowWriter, WriterCommitMessage

from .storage import StorageSettings

FORMAT_NAME = "mysql_cdc_delta_files"


def encode_schema(schema: pa.Schema) -> str:
    """Arrow schema → base64 IPC text for a data source option."""
    return base64.b64encode(schema.serialize().to_pybytes()).decode("ascii")


def decode_schema(text: str) -> pa.Schema:
    """Inverse of :func:`encode_schema`."""
    return pa.ipc.read_schema(pa.py_buffer(base64.b64decode(text)))


@dataclass
class FilesWritten(WriterCommitMessage):
    """Commit message of one write task: the data files it wrote (paths relative to the table)."""

    files: list[dict] = field(default_factory=list)


class DeltaFilesDataSource(DataSource):
    """Spark data source ``mysql_cdc_delta_files`` (write only). See the module docs."""

    @classmethod
    def name(cls) -> str:
        return FORMAT_NAME

    def writer(self, schema, overwrite: bool) -> DeltaFilesWriter:
        return DeltaFilesWriter(dict(self.options))


class DeltaFilesWriter(DataSourceArrowWriter):
    """Writes each task's Arrow batches as Parquet files of at most ``rows_per_file`` rows.

    Options: ``table_uri`` (lake URI of the Delta table), ``arrow_schema`` (base64 Arrow schema the
    files must have: Spark's own Arrow types are cast back to it, field metadata included),
    ``manifest`` (driver-local JSON path), ``storage_ref`` (path of the storage settings file),
    ``rows_per_file`` (default 1,000,000).
    """

    def __init__(self, options: dict[str, str]):
        self.table_uri = options["table_uri"]
        self.schema_b64 = options["arrow_schema"]
        self.manifest = options["manifest"]
        self.storage_ref = options["storage_ref"]
        self.rows_per_file = int(options.get("rows_per_file", 1_000_000))

    def write(self, iterator) -> FilesWritten:
        storage = read_storage_ref(self.storage_ref)
        fs = storage.pyarrow_filesystem()
        schema = decode_schema(self.schema_b64)
        base = storage.fs_path(self.table_uri)
        if not storage.is_s3:
            os.makedirs(base, exist_ok=True)
        files: list[dict] = []
        writer = None
        rel = ""
        rows = 0

        def close():
            nonlocal writer
            if writer is None:
                return
            writer.close()
            info = fs.get_file_info(f"{base}/{rel}")
            files.append(
                {
                    "path": rel,
                    "size": int(info.size),
                    "num_records": rows,
                    "modification_time": int(time.time() * 1000),
                }
            )
            writer = None

        try:
            for batch in iterator:
                if batch.num_rows == 0:
                    continue
                table = pa.Table.from_batches([batch]).select(schema.names).cast(schema)
                if writer is None:
                    rel = f"part-{uuid.uuid4().hex}.snappy.parquet"
                    writer = pq.ParquetWriter(
                        f"{base}/{rel}", schema, filesystem=fs, compression="snappy"
                    )
                    rows = 0
                writer.write_table(table)
                rows += table.num_rows
                if rows >= self.rows_per_file:
                    close()
            close()
        except BaseException:
            if writer is not None:
                try:
                    writer.close()
                except Exception:
                    pass
                files.append({"path": rel, "size": 0, "num_records": 0, "modification_time": 0})
            _delete(fs, base, files)
            raise
        return FilesWritten(files=files)

    def commit(self, messages) -> None:
        files = [f for m in messages if m is not None for f in m.files]
        tmp = self.manifest + ".tmp"
        with open(tmp, "w") as fh:
            json.dump(files, fh)
        os.replace(tmp, self.manifest)

    def abort(self, messages) -> None:
        storage = read_storage_ref(self.storage_ref)
        files = [f for m in messages if m is not None for f in m.files]
        _delete(storage.pyarrow_filesystem(), storage.fs_path(self.table_uri), files)


def write_storage_ref(storage: StorageSettings, directory: str) -> str:
    """Write ``storage`` (with credentials) to a new 0600 file in ``directory``; return its path."""
    fd, path = tempfile.mkstemp(prefix="cdc-storage-", suffix=".json", dir=directory)
    with os.fdopen(fd, "w") as fh:
        fh.write(storage.to_json())
    os.chmod(path, 0o600)
    return path


def read_storage_ref(path: str) -> StorageSettings:
    """The storage settings a :func:`write_storage_ref` file holds (an executor may find it under
    its own working directory when shipped with ``spark.files``)."""
    if not os.path.exists(path):
        from pyspark import SparkFiles

        path = SparkFiles.get(os.path.basename(path))
    with open(path) as fh:
        return StorageSettings.from_json(fh.read())


def _delete(fs, base: str, files: list[dict]) -> None:
    for f in files:
        try:
            fs.delete_file(f"{base}/{f['path']}")
        except Exception:
            pass  # already gone; orphans are invisible to Delta readers and removed by vacuum
