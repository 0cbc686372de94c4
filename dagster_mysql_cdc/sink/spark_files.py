"""A PySpark Python data source that writes Parquet data files for Delta tables.

Spark executors write the data files straight to the lake with pyarrow (``pyarrow.fs`` S3 or local
filesystem), so it works with a Spark that has no ``hadoop-aws``/s3a jars; the files are invisible
until :mod:`.delta` commits them to the table's Delta log in one atomic commit. This is the classic
two-phase file commit of Spark's own ``FileFormatWriter``: tasks write, the job commit publishes.

The DataFrame written holds **Arrow IPC payloads**: one row per chunk of change events, column
``payload`` (binary, an Arrow IPC stream; :func:`payload_frame`). Spark distributes the chunks over
its tasks like any rows, but the JVM never converts individual events (a nested Debezium envelope
row costs ~27 µs of CPU through ``createDataFrame`` + the Python writer, a payload chunk ~10 µs per
event, measured in docs/benchmarks.md). Each task decodes its chunks and writes one or more
**outputs**: the events as they are (a change log) and/or their current-state rows
(:func:`.state_rows.state_rows`, for a table's first snapshot), so one Spark job writes both.

Usage (done by :class:`dagster_mysql_cdc.sink.lake.LakeWriter`)::

    files = PrivateFiles()
    source = files.data_source(DeltaFilesDataSource)  # carries the writer's key
    spark.dataSource.register(source)
    payload_frame(spark, arrow_table).write.format(source.name()).mode("append")
      .option("outputs", encode_outputs([FileOutput(uri, schema)])).option("manifest", "/tmp/m.json")
      .option("storage_ref", write_storage_ref(storage, files)).save()

Each job's commit (on the driver) writes a JSON manifest: per output, ``[{path, size,
num_records, modification_time}]``; an aborted job deletes its files.

Credentials never travel as data source options (Spark and py4j log options and plans): the
option ``storage_ref`` names a sealed private file with the :class:`StorageSettings`
(:func:`write_storage_ref`, :mod:`dagster_mysql_cdc.private_files`: encrypted with the writer's key, which reaches
the tasks only inside the registered data source class). In local mode the executors read the
driver's file; on a cluster the writer ships it with ``SparkContext.addFile`` and executors find
it through ``SparkFiles`` (or leave the S3 credentials unset and give the executors ``AWS_*``
environment variables or an instance profile: the AWS default chain).
"""

from __future__ import annotations

import base64
import json
import math
import os
import shutil
import time
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from pyspark.sql.datasource import (
    DataSource,
    DataSourceArrowWriter,
    DataSourceReader,
    InputPartition,
    WriterCommitMessage,
)

from ..private_files import PrivateFiles, SealedDataSource, read_private_file
from .storage import StorageSettings

FORMAT_NAME = "mysql_cdc_delta_files"

#: Upper bound of one payload chunk (bytes of Arrow data before IPC framing).
PAYLOAD_CHUNK_BYTES = 8 * 1024 * 1024

#: Column of a payload DataFrame whose rows are paths of staged Arrow IPC files.
STAGED_COLUMN = "payload_path"


def encode_schema(schema: pa.Schema) -> str:
    """Arrow schema → base64 IPC text for a data source option."""
    return base64.b64encode(schema.serialize().to_pybytes()).decode("ascii")


def decode_schema(text: str) -> pa.Schema:
    """Inverse of :func:`encode_schema`."""
    return pa.ipc.read_schema(pa.py_buffer(base64.b64decode(text)))


@dataclass(frozen=True)
class FileOutput:
    """One dataset a write job produces from the payload events.

    Attributes:
        table_uri: lake URI of the Delta table the files are for.
        schema: Arrow schema of the files (rows are cast to it, field metadata included).
        kind: ``"events"`` writes the change events as they are; ``"state"`` writes their
            current-state rows (:func:`.state_rows.state_rows`, no deduplication: for a first
            snapshot, whose keys are unique); ``"tail"`` their tail rows (:func:`.tail.tail_rows`:
            state rows and cut markers, merged at read or compaction time).
        value_names: the table's columns (``kind="state"``/``"tail"`` only).
        epoch: offset epoch of the events' positions (``kind="state"``/``"tail"``: ``__epoch``).
        keyless: the table has no key (``kind="tail"``: rows carry ``__count`` changes).
        stats: columns whose min/max/null count each file's Delta statistics carry (readers
            skip files by them; ``kind="rows"``, a compacted state's ``__deleted``).

    ``kind="rows"``: the job's DataFrame rows are this output's rows (a compaction), written as
    they are.

    ``group``: in a job of several tables (:func:`grouped_payload_frame`), the payload rows of
    group ``g`` are written to the outputs of group ``g`` only.
    """

    table_uri: str
    schema: pa.Schema
    kind: str = "events"
    value_names: tuple[str, ...] = ()
    epoch: int = 0
    keyless: bool = False
    stats: tuple[str, ...] = ()
    group: int = 0

    def to_dict(self) -> dict:
        return {
            "group": self.group,
            "table_uri": self.table_uri,
            "schema": encode_schema(self.schema),
            "kind": self.kind,
            "value_names": list(self.value_names),
            "epoch": self.epoch,
            "keyless": self.keyless,
            "stats": list(self.stats),
        }

    @classmethod
    def from_dict(cls, d: dict) -> FileOutput:
        return cls(
            d["table_uri"],
            decode_schema(d["schema"]),
            d["kind"],
            tuple(d["value_names"]),
            int(d.get("epoch") or 0),
            bool(d.get("keyless")),
            tuple(d.get("stats") or ()),
            int(d.get("group") or 0),
        )

    def rows(self, events: pa.Table) -> pa.Table:
        """This output's rows of a chunk of change events in :attr:`schema` (the lake's column
        types: values converted where the source type differs, :func:`.evolution.conform_table`;
        columns the events lack are null)."""
        from .evolution import conform_table

        if self.kind == "state":
            from .state_rows import state_rows

            events = state_rows(events, self.value_names, epoch=self.epoch)
        elif self.kind == "tail":
            from .tail import tail_rows

            events = tail_rows(events, self.value_names, keyless=self.keyless, epoch=self.epoch)
        elif self.kind not in ("events", "rows"):
            raise ValueError(f"unknown output kind {self.kind!r}")
        return conform_table(
            events.select([n for n in events.column_names if n in self.schema.names]), self.schema
        )


def encode_outputs(outputs: Sequence[FileOutput]) -> str:
    """Outputs → the ``outputs`` data source option (base64 JSON)."""
    return base64.b64encode(json.dumps([o.to_dict() for o in outputs]).encode()).decode("ascii")


def decode_outputs(text: str) -> list[FileOutput]:
    """Inverse of :func:`encode_outputs`."""
    return [FileOutput.from_dict(d) for d in json.loads(base64.b64decode(text))]


def is_connect_session(spark) -> bool:
    """Whether ``spark`` is a Spark Connect client session (no ``sparkContext``, no py4j)."""
    return type(spark).__module__.startswith("pyspark.sql.connect")


def sql_functions(spark) -> tuple[Any, Any]:
    """``(functions module, Window class)`` of ``spark``'s flavour, to build column expressions for
    its DataFrames: ``pyspark.sql.connect.functions`` and its ``Window`` for a Spark Connect
    session, ``pyspark.sql.functions`` and ``pyspark.sql.Window`` for a classic one.

    ``pyspark.sql.functions`` and ``Window`` dispatch to their Connect versions only when the
    process's environment has ``SPARK_CONNECT_MODE_ENABLED`` (``pyspark.sql.utils.is_remote``),
    which only the classic builder's ``SparkSession.builder.remote(...)`` sets, process-wide (a
    classic ``SparkContext`` then refuses to start). The sessions of
    :func:`.spark_session.remote_spark_session` come from the Connect client's own builder (so
    a process may hold both kinds): for them the classic functions would run and fail with a
    bare ``AssertionError`` (no active ``SparkContext``).
    """
    if is_connect_session(spark):
        from pyspark.sql.connect import functions as connect_functions
        from pyspark.sql.connect.window import Window as ConnectWindow

        return connect_functions, ConnectWindow
    from pyspark.sql import Window, functions

    return functions, Window


def _connect_host(spark) -> str:
    """Host of a Spark Connect session's server (``""`` if unknown)."""
    try:
        return str(spark.client._builder.host)
    except AttributeError:
        return ""


def payloads_can_be_staged(spark) -> bool:
    """Whether ``spark``'s executors run on this host and can read this process's temporary files:
    a ``local[...]`` master, or a Spark Connect server on a loopback address whose master is
    local. Then payload chunks are staged as Arrow IPC files instead of travelling inside tasks."""
    try:
        master = str(spark.conf.get("spark.master", "local"))
    except Exception:
        return False
    if not master.startswith("local"):
        return False
    if is_connect_session(spark):
        return _connect_host(spark) in ("127.0.0.1", "localhost", "::1")
    return True


def default_parallelism(spark) -> int:
    """Spark's default parallelism: ``sparkContext.defaultParallelism`` on a classic session; on
    Spark Connect (no ``sparkContext``) ``spark.default.parallelism`` or the cores of a
    ``local[N]`` master (2 when neither tells)."""
    if not is_connect_session(spark):
        return int(spark.sparkContext.defaultParallelism)
    try:
        conf = spark.conf.get("spark.default.parallelism", None)
        if conf:
            return int(conf)
        master = str(spark.conf.get("spark.master", ""))
    except Exception:
        return 2
    if master.startswith("local[") and master[6:-1].isdigit():
        return int(master[6:-1])
    if master.startswith("local[*"):
        return os.cpu_count() or 2
    return 2


def payload_frame(
    spark,
    table: pa.Table,
    *,
    chunk_bytes: int = PAYLOAD_CHUNK_BYTES,
    min_chunks: int | None = None,
    stage_dir: str | None = None,
):
    """A DataFrame with one row per chunk of ``table``.

    Without ``stage_dir`` the rows hold the chunks themselves (column ``payload``, Arrow IPC stream
    bytes): they travel to the executors inside the tasks (works on any cluster; Spark warns about
    "task of very large size" above 1 MiB). With ``stage_dir`` (executors on this host) each chunk
    is written to an Arrow IPC file there and the rows hold only the paths (column
    ``payload_path``): tasks stay tiny and the executors memory-map the files. The caller removes
    the staged files after the job (:func:`remove_staged`).

    Args:
        table: change events (any schema; kept exactly, metadata included).
        chunk_bytes: target size of a chunk.
        min_chunks: at least this many chunks (default: Spark's default parallelism, so every
            core gets work).
        stage_dir: directory for staged chunk files (``None``: inline payloads).
    """
    n = max(
        1,
        min(
            table.num_rows,
            max(min_chunks or default_parallelism(spark), math.ceil(table.nbytes / chunk_bytes)),
        ),
    )
    step = math.ceil(table.num_rows / n) if table.num_rows else 1
    if stage_dir is not None:
        paths = []
        for off in range(0, max(table.num_rows, 1), step):
            path = os.path.join(stage_dir, f"chunk-{uuid.uuid4().hex}.arrows")
            with pa.OSFile(path, "wb") as fh, pa.ipc.new_stream(fh, table.schema) as w:
                w.write_table(table.slice(off, step))
            paths.append(path)
        return spark.createDataFrame(pa.table({STAGED_COLUMN: pa.array(paths, pa.string())}))
    bufs = []
    for off in range(0, max(table.num_rows, 1), step):
        sink = pa.BufferOutputStream()
        with pa.ipc.new_stream(sink, table.schema) as w:
            w.write_table(table.slice(off, step))
        bufs.append(sink.getvalue().to_pybytes())
    return spark.createDataFrame(pa.table({"payload": pa.array(bufs, pa.binary())}))


#: Column of a grouped payload DataFrame: the group (table) of the row's events.
GROUP_COLUMN = "payload_group"
#: threads of a write task writing the files of several groups (tables) side by side
GROUP_WRITERS = 8


def grouped_payload_frame(spark, tables: Sequence[pa.Table], *, stage_dir: str | None = None):
    """A DataFrame with one payload row per table of ``tables`` (the change events of several
    tables, each in its own schema), and column :data:`GROUP_COLUMN`: its index in ``tables``. One
    job writes every table's outputs (:attr:`FileOutput.group`): a window that changed many tables
    a little costs one Spark job, not one per table. For small tables: each table is one chunk.

    Args:
        tables: change events of each group (any schemas).
        stage_dir: as :func:`payload_frame` (``None``: inline payloads).
    """
    values: list = []
    for t in tables:
        if stage_dir is not None:
            path = os.path.join(stage_dir, f"chunk-{uuid.uuid4().hex}.arrows")
            with pa.OSFile(path, "wb") as fh, pa.ipc.new_stream(fh, t.schema) as w:
                w.write_table(t)
            values.append(path)
        else:
            sink = pa.BufferOutputStream()
            with pa.ipc.new_stream(sink, t.schema) as w:
                w.write_table(t)
            values.append(sink.getvalue().to_pybytes())
    column = pa.array(values, pa.string()) if stage_dir is not None else pa.array(values, pa.binary())
    frame = pa.table(
        {
            STAGED_COLUMN if stage_dir is not None else "payload": column,
            GROUP_COLUMN: pa.array(range(len(tables)), pa.int32()),
        }
    )
    # a local relation: Spark splits its rows over up to its default parallelism (no shuffle)
    return spark.createDataFrame(frame)


def remove_staged(stage_dir: str | None) -> None:
    """Delete ``stage_dir`` and the chunk files :func:`payload_frame` staged there (the job is over)."""
    if stage_dir is not None:
        shutil.rmtree(stage_dir, ignore_errors=True)


def _read_payload(value, staged: bool) -> pa.Table:
    """The change events of one payload row: an inline IPC stream or a staged file's path."""
    if staged:
        with pa.memory_map(value.as_py(), "r") as src:
            return pa.ipc.open_stream(src).read_all()
    return pa.ipc.open_stream(value.as_buffer()).read_all()


@dataclass
class FilesWritten(WriterCommitMessage):
    """Commit message of one write task: per output, the data files it wrote (paths relative to
    the output's table)."""

    files: list[list[dict]] = field(default_factory=list)


class DeltaFilesDataSource(SealedDataSource, DataSource):
    """Spark data source ``mysql_cdc_delta_files`` (write only). See the module docs. Register the
    writer's keyed subclass (:meth:`dagster_mysql_cdc.private_files.PrivateFiles.data_source`, named
    ``mysql_cdc_delta_files_<id>``): only it can open the sealed ``storage_ref``."""

    library_name = FORMAT_NAME

    def writer(self, schema, overwrite: bool) -> DeltaFilesWriter:
        return DeltaFilesWriter(dict(self.options), type(self).file_key)


class OutputFiles:
    """Parquet files of one output in one task, rotated every ``rows_per_file`` rows."""

    def __init__(self, out: FileOutput, storage: StorageSettings, fs, rows_per_file: int):
        self.out = out
        self.fs = fs
        self.base = storage.fs_path(out.table_uri)
        if not storage.is_s3:
            os.makedirs(self.base, exist_ok=True)
        self.rows_per_file = rows_per_file
        self.files: list[dict] = []
        self.writer: pq.ParquetWriter | None = None
        self.sink = None  # the file's output stream (its position is the file's size)
        self.rel = ""
        self.rows = 0
        self._stats: dict[str, list] = {}

    def _collect(self, table: pa.Table) -> None:
        """Min, max and null count of :attr:`FileOutput.stats` columns of the current file."""
        import pyarrow.compute as pc

        for name in self.out.stats:
            if name not in table.column_names:
                continue
            col = table.column(name)
            mm = pc.min_max(col).as_py()
            lo, hi, nulls = self._stats.get(name, [None, None, 0])
            if mm["min"] is not None:
                lo = mm["min"] if lo is None else min(lo, mm["min"])
                hi = mm["max"] if hi is None else max(hi, mm["max"])
            self._stats[name] = [lo, hi, nulls + col.null_count]

    def write(self, table: pa.Table) -> None:
        if table.num_rows == 0:
            return
        if self.writer is None:
            self.rel = f"part-{uuid.uuid4().hex}.snappy.parquet"
            self.sink = self.fs.open_output_stream(f"{self.base}/{self.rel}")
            self.writer = pq.ParquetWriter(self.sink, self.out.schema, compression="snappy")
            self.rows = 0
        self.writer.write_table(table)
        self._collect(table)
        self.rows += table.num_rows
        if self.rows >= self.rows_per_file:
            self.close()

    def close(self) -> None:
        if self.writer is None:
            return
        self.writer.close()  # (a stream it was given stays open)
        self.writer = None
        assert self.sink is not None
        size = self.sink.tell()  # the bytes written: no request to ask the store the size
        self.sink.close()  # on S3, the upload completes here
        self.sink = None
        entry: dict = {
            "path": self.rel,
            "size": int(size),
            "num_records": self.rows,
            "modification_time": int(time.time() * 1000),
        }
        if self._stats:
            entry["stats"] = {
                "minValues": {k: v[0] for k, v in self._stats.items() if v[0] is not None},
                "maxValues": {k: v[1] for k, v in self._stats.items() if v[1] is not None},
                "nullCount": {k: v[2] for k, v in self._stats.items()},
            }
        self.files.append(entry)
        self._stats = {}

    def discard(self) -> None:
        if self.writer is not None:
            try:
                self.writer.close()
                if self.sink is not None:
                    self.sink.close()
            except Exception:
                pass
            self.sink = None
            self.files.append({"path": self.rel, "size": 0, "num_records": 0, "modification_time": 0})
            self.writer = None
        _delete(self.fs, self.base, self.files)


@contextmanager
def all_or_nothing(outs: list[OutputFiles]) -> Iterator[list[OutputFiles]]:
    """The output files of one Spark task, all or nothing: when the block ends, each output's
    last file is closed (:meth:`OutputFiles.close`, uploaded on S3); when the block or a close
    raises, every file the task wrote is deleted (:meth:`OutputFiles.discard`) and the error is
    raised. The driver commits only what a task returned, so a failed task leaves no files.

    Yields:
        ``outs``.
    """
    try:
        yield outs
        for o in outs:
            o.close()
    except BaseException:
        for o in outs:
            o.discard()
        raise


class DeltaFilesWriter(DataSourceArrowWriter):
    """Writes each task's payload chunks as Parquet files of at most ``rows_per_file`` rows.

    Options: ``outputs`` (:func:`encode_outputs`), ``manifest`` (driver-local JSON path),
    ``storage_ref`` (path of the sealed storage settings file), ``rows_per_file`` (default
    1,000,000). ``key``: the key of the sealed file (from the data source class, never an option).
    """

    def __init__(self, options: dict[str, str], key: bytes | None):
        self.outputs_b64 = options["outputs"]
        self.manifest = options["manifest"]
        self.storage_ref = options["storage_ref"]
        self.rows_per_file = int(options.get("rows_per_file", 1_000_000))
        self.direct_rows = options.get("rows") == "true"
        self.key = key

    def write(self, iterator) -> FilesWritten:
        storage = read_storage_ref(self.storage_ref, self.key)
        fs = storage.pyarrow_filesystem()
        outs = [OutputFiles(o, storage, fs, self.rows_per_file) for o in decode_outputs(self.outputs_b64)]
        by_group: dict[int | None, list[OutputFiles]] = {}
        for o in outs:
            by_group.setdefault(o.out.group, []).append(o)
        pool = None
        try:
            with all_or_nothing(outs):
                for batch in iterator:
                    if self.direct_rows:  # the frame's rows are the data (a compaction)
                        o = outs[0]
                        o.write(o.out.rows(pa.Table.from_batches([batch])))
                        continue
                    staged = batch.schema.names[0] == STAGED_COLUMN
                    if GROUP_COLUMN not in batch.schema.names:
                        for value in batch.column(0):
                            events = _read_payload(value, staged)
                            for o in outs:
                                o.write(o.out.rows(events))
                        continue
                    # payloads of several tables (grouped_payload_frame): each group's files are its
                    # own, so the groups are written side by side (small files: the store's round
                    # trips, not the CPU, are the cost), each group's payloads in order
                    rows: dict[int, list] = {}
                    for value, g in zip(batch.column(0), batch.column(GROUP_COLUMN).to_pylist()):
                        rows.setdefault(g, []).append(value)

                    def write_group(item, staged=staged) -> None:
                        g, values = item
                        for value in values:
                            events = _read_payload(value, staged)
                            for o in by_group.get(g, []):
                                o.write(o.out.rows(events))
                        for o in by_group.get(g, []):
                            o.close()  # uploaded here, beside the other groups' (a later payload of the group opens a new file)

                    if len(rows) > 1:
                        if pool is None:
                            from concurrent.futures import ThreadPoolExecutor

                            pool = ThreadPoolExecutor(GROUP_WRITERS, thread_name_prefix="cdc-files")
                        list(pool.map(write_group, rows.items()))
                    else:
                        for item in rows.items():
                            write_group(item)
        finally:
            if pool is not None:
                pool.shutdown()
        return FilesWritten(files=[o.files for o in outs])

    def commit(self, messages) -> None:
        n = len(decode_outputs(self.outputs_b64))
        files: list[list[dict]] = [[] for _ in range(n)]
        for m in messages:
            if m is not None:
                for i, fl in enumerate(m.files):
                    files[i] += fl
        tmp = self.manifest + ".tmp"
        with open(tmp, "w") as fh:
            json.dump(files, fh)
        os.replace(tmp, self.manifest)

    def abort(self, messages) -> None:
        storage = read_storage_ref(self.storage_ref, self.key)
        fs = storage.pyarrow_filesystem()
        outputs = decode_outputs(self.outputs_b64)
        for m in messages:
            if m is not None:
                for o, fl in zip(outputs, m.files):
                    _delete(fs, storage.fs_path(o.table_uri), fl)


LAKE_FILES_FORMAT = "mysql_cdc_lake_files"


#: Target Parquet bytes read per Spark task (a compaction's, a downstream read's).
SPLIT_BYTES = 128 * 1024 * 1024


class FileGroup(InputPartition):
    """Data files one read task reads (paths relative to the table)."""

    def __init__(self, paths: list[str]):
        self.paths = paths


def file_groups(actions: pa.Table, split_bytes: int = SPLIT_BYTES) -> list[list[str]]:
    """Data files (Delta add actions: columns ``path``, ``size_bytes``) grouped into read tasks
    of about ``split_bytes`` bytes each, in the log's order."""
    groups: list[list[str]] = []
    cur: list[str] = []
    size = 0
    for p, s in zip(actions.column("path").to_pylist(), actions.column("size_bytes").to_pylist()):
        cur.append(p)
        size += int(s or 0)
        if size >= split_bytes:
            groups.append(cur)
            cur, size = [], 0
    if cur:
        groups.append(cur)
    return groups


class LakeFilesReader(DataSourceReader):
    """Reads a Delta table's data files, one task per group (``groups``), in ``schema`` (each
    file's columns relabelled with the table's fields and converted; missing ones null): the
    executors read the lake themselves, with pyarrow's filesystem (no Hadoop S3 connector)."""

    def __init__(self, options: dict[str, str], key: bytes | None):
        self.key = key
        self.table_uri = options["table_uri"]
        self.groups = json.loads(base64.b64decode(options["groups"]))
        self.schema = decode_schema(options["schema"])
        self.storage_ref = options["storage_ref"]

    def partitions(self):
        return [FileGroup(g) for g in self.groups] or [FileGroup([])]

    def read(self, partition):
        from .evolution import conform_table, relabel

        storage = read_storage_ref(self.storage_ref, self.key)
        fs = storage.pyarrow_filesystem()
        base = storage.fs_path(self.table_uri)
        for rel in partition.paths:
            with fs.open_input_file(f"{base}/{rel}") as fh:
                pf = pq.ParquetFile(fh)
                cols = [n for n in pf.schema_arrow.names if n in self.schema.names]  # only those read
                for b in pf.iter_batches(batch_size=65_536, columns=cols):
                    t = relabel(pa.Table.from_batches([b]), self.schema)
                    yield from conform_table(t, self.schema).to_batches()


class LakeFilesDataSource(SealedDataSource, DataSource):
    """Spark data source ``mysql_cdc_lake_files`` (read only): a Delta table's data files as rows.
    Options: ``table_uri``, ``groups`` (base64 JSON list of file-path lists, one per task),
    ``schema`` (:func:`encode_schema`; a field's Spark type follows its Arrow type),
    ``storage_ref`` (the writer's sealed storage settings). Register the writer's keyed subclass
    (``LakeWriter.register_data_source``, named ``mysql_cdc_lake_files_<id>``): only it opens them."""

    library_name = LAKE_FILES_FORMAT

    def schema(self):
        from pyspark.sql.pandas.types import from_arrow_schema

        return from_arrow_schema(decode_schema(self.options["schema"]))

    def reader(self, schema) -> LakeFilesReader:
        return LakeFilesReader(dict(self.options), type(self).file_key)


def lake_files_options(writer, table_uri: str, groups: list[list[str]], schema: pa.Schema) -> dict[str, str]:
    """Options of a ``mysql_cdc_lake_files`` read of ``writer``'s lake (see
    :class:`LakeFilesDataSource`; credentials travel sealed in the writer's storage reference)."""
    return {
        "table_uri": table_uri,
        "groups": base64.b64encode(json.dumps(groups).encode()).decode("ascii"),
        "storage_ref": writer._storage_ref,
    }


def write_storage_ref(storage: StorageSettings, files: PrivateFiles) -> str:
    """Seal ``storage`` (with credentials) into a new private file of ``files``; return its path
    (``cdc-storage-<random>.json``, a Fernet token of the settings' JSON)."""
    return files.write(storage.to_json().encode(), prefix="cdc-storage-", suffix=".json")


def read_storage_ref(path: str, key: bytes | None) -> StorageSettings:
    """The storage settings a :func:`write_storage_ref` file holds, decrypted with ``key`` (an
    executor may find the file under its own working directory when shipped with ``addFile``).

    Raises:
        ValueError: ``key`` is not the file's (:func:`dagster_mysql_cdc.private_files.read_private_file`).
    """
    return StorageSettings.from_json(read_private_file(path, key).decode())


def _delete(fs, base: str, files: list[dict]) -> None:
    for f in files:
        try:
            fs.delete_file(f"{base}/{f['path']}")
        except Exception:
            pass  # already gone; orphans are invisible to Delta readers and removed by vacuum
