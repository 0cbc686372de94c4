"""Spark writer of a table's change log and current state (Delta tables on the lake).

Paths below the lake root: :class:`.layout.LakeLayout` (``<server>/<database>/<table>/changelog``
and ``.../state`` here).

Data path: Arrow record batches of change events (bounded size) are handed to a sink thread, so
the caller reads the next record batch (binlog or snapshot scan) while the previous one is written:
the record batch becomes a DataFrame of Arrow IPC chunks and the ``mysql_cdc_delta_files`` data
source writes the change log's Parquet from the executors (:mod:`.spark_files`); the state rows
(``after`` image, ``before`` for deletes, plus metadata columns, newest event per key) are computed
in Arrow (:mod:`.state_rows`) and merged by delta-rs; a first snapshot's state rows are written by
the same Spark job as its change log. One Delta commit per dataset and batch (:mod:`.delta`).

Current-state semantics (DBLog / Debezium "latest wins"): every state row carries its ordering key
``(__epoch, __binlog_file, __binlog_pos, __binlog_row)``; a row replaces the stored one only if its
key is greater. ``__epoch`` is the offset epoch (:class:`~dagster_mysql_cdc.events.BinlogPosition`):
after a failover the new server's binlog numbering may sort below the old one's, the epoch keeps
its events after the old ones. State tables written before epochs existed get the column on their
next write (schema evolution); their NULLs read as 0 (``COALESCE``). Snapshot rows take ``__binlog_row = -1`` at the snapshot position, so they order before
any binlog event at that position. Hence a batch may be re-applied, and a snapshot and a stream
window may commit in either order: the state converges to the same rows. Deletes and TRUNCATE
leave tombstones (``__deleted = true``).

Keyless tables keep the source's multiplicity: one state row per distinct row value with a
``__count`` of copies (see :class:`_StateApplier` and docs/design.md, "Keyless tables").
Counting merges are not idempotent by themselves, so each one carries a Delta ``txn`` marker in
the same commit (binlog events: the position of the newest event applied; snapshot reads: the
record batch's sequence number) and a retried window skips what the state already has. Versions
from :meth:`BinlogPosition.as_version` restart in every epoch, so their app ids are per epoch
(:meth:`BinlogPosition.txn_app`, applied by the callers to the batch's ``app_id``).
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import sys
import tempfile
import threading
import time
import uuid
import weakref
from collections.abc import Callable, Iterable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc
from deltalake import CommitProperties, Transaction

from ..errors import SinkError
from ..events import BinlogPosition, state_schema
from ..private_files import PrivateFiles
from .delta import CommitOutcome, commit_files, open_table
from .layout import LakeLayout, TablePaths
from .spark_files import (
    FORMAT_NAME,
    DeltaFilesDataSource,
    FileOutput,
    encode_outputs,
    is_connect_session,
    payload_frame,
    payloads_can_be_staged,
    remove_staged,
    write_storage_ref,
)
from .state_rows import EPOCH_COL, ORDER_COLS, count_per_value, newest_per_key, state_rows
from .storage import StorageSettings

if TYPE_CHECKING:
    from deltalake import DeltaTable

log = logging.getLogger(__name__)

#: GIL switch interval while a sink thread overlaps the reader (see :func:`hold_switch_interval`)
SINK_SWITCH_INTERVAL_S = 0.0005
_switch_lock = threading.Lock()
_switch_holders = 0
_switch_saved = 0.0


def hold_switch_interval(seconds: float) -> Callable[[], None]:
    """Lower the interpreter's GIL switch interval (``sys.setswitchinterval``, Python's default
    5 ms) to ``seconds`` while a sink thread runs beside a CPU-bound reader; returns the function
    that gives it back (the previous value returns when the last holder releases).

    Why: the reader thread (binlog decoding, snapshot row parsing) holds the GIL for whole switch
    intervals; the sink thread's Spark calls (py4j / gRPC round trips, many per job) release it on
    every socket wait and then wait up to one interval to get it back (the "convoy effect"). Measured
    on 500,000 row changes (``bench.streaming``, 2 cores, in-process reader): the sink thread's busy
    time fell from 26.4 s to 10.3 s (1 ms) and 10.0 s (0.2 ms), the window from 28.3 s to 26.3-27.1 s.
    ``seconds <= 0`` changes nothing.
    """
    global _switch_holders, _switch_saved
    if seconds <= 0:
        return lambda: None
    with _switch_lock:
        if _switch_holders == 0:
            _switch_saved = sys.getswitchinterval()
        _switch_holders += 1
        sys.setswitchinterval(min(seconds, sys.getswitchinterval()))
    released = False

    def release() -> None:
        global _switch_holders
        nonlocal released
        with _switch_lock:
            if released:
                return
            released = True
            _switch_holders -= 1
            if _switch_holders == 0:
                sys.setswitchinterval(_switch_saved)

    return release


@dataclass
class TableWriteResult:
    """What one batch wrote for one table (reported as Dagster metadata)."""

    database: str
    table: str
    rows: int
    rows_by_op: dict[str, int]
    paths: TablePaths
    changelog: CommitOutcome
    state: CommitOutcome
    seconds: float
    spark_jobs: int = 0
    extra: dict = field(default_factory=dict)


def _q(name: str) -> str:
    """Double-quoted SQL identifier for delta-rs (DataFusion) predicates."""
    return '"' + name.replace('"', '""') + '"'


def _epoch(alias: str = "") -> str:
    """SQL of a state row's offset epoch (NULL in rows written before epochs existed: 0)."""
    return f"COALESCE({alias + '.' if alias else ''}{_q(EPOCH_COL)}, 0)"


def newer_predicate(s: str = "s", t: str = "t") -> str:
    """SQL predicate: the source row's ordering key ``(__epoch, __binlog_file, __binlog_pos,
    __binlog_row)`` is greater than the target row's (NULL ``__epoch`` = 0)."""
    f, p, r = (_q(c) for c in ORDER_COLS[1:])
    se, te = _epoch(s), _epoch(t)
    return (
        f"({se} > {te}) OR ({se} = {te} AND (({s}.{f} > {t}.{f}) OR ({s}.{f} = {t}.{f} AND {s}.{p} > {t}.{p}) "
        f"OR ({s}.{f} = {t}.{f} AND {s}.{p} = {t}.{p} AND {s}.{r} > {t}.{r})))"
    )


def union_struct(a: pa.DataType, b: pa.DataType) -> pa.DataType:
    """Union of two struct types by child name (``a``'s order first); other types: ``b`` wins."""
    if not (pa.types.is_struct(a) and pa.types.is_struct(b)):
        return b
    fields = {f.name: f for f in a}
    for f in b:
        fields[f.name] = (
            fields[f.name].with_type(union_struct(fields[f.name].type, f.type)) if f.name in fields else f
        )
    return pa.struct(list(fields.values()))


def union_schema(a: pa.Schema | None, b: pa.Schema) -> pa.Schema:
    """Union of two schemas, merging struct children (columns are only ever added)."""
    if a is None:
        return b
    fields = {f.name: f for f in a}
    for f in b:
        fields[f.name] = (
            fields[f.name].with_type(union_struct(fields[f.name].type, f.type)) if f.name in fields else f
        )
    return pa.schema(list(fields.values()))


class LakeWriter:
    """Writes change-event batches of captured tables to the lake through Spark.

    Args:
        spark: a ``SparkSession`` (classic local/cluster, or Spark Connect), or a function returning
            one: then Spark is started (or connected to) only when the first data files are
            written, so a window with nothing to write never pays for Spark.
        storage: lake location and credentials.
        server_name: logical server name (Debezium ``topic.prefix``), first path segment.
        rows_per_file: upper bound of rows per Parquet data file.
        compact_min_files: compact a dataset (Delta ``OPTIMIZE``: small files rewritten into
            large ones, ``dataChange=false``, readers unaffected) once it has this many files;
            ``0`` disables. Keeps the file count of tables fed by many small windows bounded.
        pipeline_depth: record batches that may wait for or be in the sink thread while the
            caller reads the next ones (reading overlaps writing; memory stays bounded by
            ``pipeline_depth + 1`` record batches). ``0`` writes in the caller's thread.
        switch_interval_s: the GIL switch interval while the sink thread exists (see
            :func:`hold_switch_interval`; given back when the writer is garbage-collected);
            ``0`` leaves the interpreter's.
    """

    def __init__(
        self,
        spark,
        storage: StorageSettings,
        server_name: str,
        *,
        rows_per_file: int = 1_000_000,
        compact_min_files: int = 64,
        pipeline_depth: int = 2,
        switch_interval_s: float = SINK_SWITCH_INTERVAL_S,
    ):
        self._spark_factory: Callable[[], Any] | None = spark if callable(spark) else None
        self._spark: Any = None if callable(spark) else spark
        self._spark_lock = threading.Lock()
        self._stage_dir: str | None = None
        #: registered data sources: the library's name -> the name of this writer's keyed subclass
        self._registered: dict[str, str] = {}
        #: seconds it took to start (or connect to) Spark and register the data source; 0 until then
        self.spark_seconds = 0.0
        self.storage = storage
        self.server_name = server_name
        self.rows_per_file = rows_per_file
        self.compact_min_files = compact_min_files
        self.pipeline_depth = pipeline_depth
        self.switch_interval_s = switch_interval_s
        self._pool: ThreadPoolExecutor | None = None
        self._slots: threading.BoundedSemaphore | None = None
        storage.ensure_root()
        # the executors' secrets: sealed files, whose key reaches them only in the data sources
        self._files = PrivateFiles()
        self._storage_ref = write_storage_ref(storage, self._files)
        if self._spark is not None:
            self._prepare(self._spark)

    @property
    def spark(self):
        """The Spark session (started or connected to on first use when given as a function)."""
        if self._spark is None:
            with self._spark_lock:
                if self._spark is None:
                    assert self._spark_factory is not None  # set when no session was given
                    t0 = time.monotonic()
                    spark = self._spark_factory()
                    self._prepare(spark)
                    self._spark = spark
                    self.spark_seconds = time.monotonic() - t0
                    log.info("Spark session ready in %.1fs (%s)", self.spark_seconds, type(spark).__module__)
        return self._spark

    @spark.setter
    def spark(self, value) -> None:
        self._spark = value

    def active_spark(self):
        """:attr:`spark`, made the JVM's active session of the calling thread first (classic
        sessions). Spark resolves a Python data source's name in the *active* session; a thread
        that never had one (e.g. a Dagster step after another session's job) would otherwise get
        ``ClassNotFoundException: mysql_cdc_delta_files.DefaultSource``."""
        spark = self.spark
        if not is_connect_session(spark):
            spark._jvm.org.apache.spark.sql.SparkSession.setActiveSession(spark._jsparkSession)
        return spark

    def _prepare(self, spark) -> None:
        """Register the data source on ``spark``; decide how payloads reach its executors."""
        self._registered = {}
        self._register(spark, DeltaFilesDataSource)
        if payloads_can_be_staged(spark):
            # executors on this host: payload chunks travel as local Arrow files, not in tasks
            self._stage_dir = tempfile.mkdtemp(prefix="cdc-payloads-")
            weakref.finalize(self, shutil.rmtree, self._stage_dir, True)
        self._ship(spark, self._storage_ref)

    def _ship(self, spark, path: str) -> None:
        """Make the driver-local file ``path`` readable by the executors (under its base name
        through ``SparkFiles`` when they do not share this host's disk)."""
        if self._stage_dir is not None:
            return  # executors on this host (payloads_can_be_staged, decided once) read it where it is
        if is_connect_session(spark):
            # a Spark Connect server on another host: the file travels as a session artifact
            spark.addArtifacts(path, file=True)
        else:
            # cluster executors do not share the driver's disk: ship the file with the job
            spark.sparkContext.addFile(path)

    def register_data_source(self, source: Any) -> str:
        """Register this writer's keyed subclass of the Python data source ``source`` (a
        :class:`~dagster_mysql_cdc.private_files.SealedDataSource`: it opens this writer's
        :meth:`private_file` files) on the session, once per writer; returns the format name to
        read or write it with (``<source.name()>_<random id>``)."""
        return self._register(self.spark, source)

    def _register(self, spark, source: Any) -> str:
        """:meth:`register_data_source` on ``spark`` (also before :attr:`spark` is set)."""
        name = source.name()
        if name not in self._registered:
            keyed = self._files.data_source(source)
            spark.dataSource.register(keyed)
            self._registered[name] = keyed.name()
        return self._registered[name]

    def write_frame_files(
        self, frame: Callable[[Any], Any], uri: str, schema: pa.Schema
    ) -> list[tuple[str, int]]:
        """One Spark job writing the Arrow IPC payloads of ``frame(spark)`` as plain Parquet files of
        ``schema`` under ``uri`` (a staging directory: nothing is committed to a Delta table).

        Returns:
            ``(uri, rows)`` of each file written (none when the frame had no rows).
        Raises:
            SinkError: a task failed.
        """
        manifests = tempfile.mkdtemp(prefix="cdc-manifests-")
        try:
            files = self._write_frame(frame(self.active_spark()), [FileOutput(uri, schema)], manifests)[0]
        finally:
            shutil.rmtree(manifests, ignore_errors=True)
        return [(f"{uri.rstrip('/')}/{f['path']}", int(f["num_records"])) for f in files]

    def private_file(self, write: Callable[[PrivateFiles], str]) -> str:
        """A sealed private file for the executors: ``write(files)`` creates it with
        :meth:`PrivateFiles.write` (encrypted with this writer's key, which the tasks get from the
        data sources of :meth:`register_data_source`) and returns its path, which is shipped to the
        executors (see :meth:`_ship`) and returned. The caller deletes it after the job."""
        path = write(self._files)
        self._ship(self.spark, path)
        return path

    def paths(self, database: str, table: str) -> TablePaths:
        return LakeLayout(self.storage, self.server_name).table(database, table)

    # -- one Spark job ----------------------------------------------------------------------
    def _write_files(self, events: pa.Table, outputs: list[FileOutput], manifests: str) -> list[list[dict]]:
        """One Spark job: the executors write ``events`` (change-log rows) as Parquet data files of
        each output (see :mod:`.spark_files`); returns the files written, per output."""
        spark = self.active_spark()
        staged = tempfile.mkdtemp(prefix="job-", dir=self._stage_dir) if self._stage_dir else None
        try:
            return self._write_frame(payload_frame(spark, events, stage_dir=staged), outputs, manifests)
        finally:
            remove_staged(staged)

    def _write_frame(self, frame, outputs: list[FileOutput], manifests: str) -> list[list[dict]]:
        """One Spark job writing ``frame`` (a DataFrame of Arrow IPC payloads: column ``payload``
        or ``payload_path``, see :mod:`.spark_files`) as the Parquet data files of each output;
        returns the files written, per output.

        Raises:
            SinkError: a task failed (its files are deleted by the job's abort; nothing committed).
        """
        manifest = os.path.join(manifests, f"manifest-{uuid.uuid4().hex}.json")
        try:
            (
                frame.write.format(self._registered[FORMAT_NAME])
                .mode("append")
                .option("outputs", encode_outputs(outputs))
                .option("manifest", manifest)
                .option("rows_per_file", str(self.rows_per_file))
                .option("storage_ref", self._storage_ref)
                .save()
            )
        except Exception as e:  # a Spark task's error arrives as a long PythonException/Py4JJavaError
            where = ", ".join(o.table_uri for o in outputs)
            raise SinkError(
                f"Writing data files to {where} on {self.storage.location()} failed: {_root_cause(e)}"
            ) from e
        with open(manifest) as fh:
            return json.load(fh)

    def maybe_compact(self, table_uri: str) -> dict | None:
        """Compact ``table_uri`` when it has ``compact_min_files`` files or more.

        Compaction is an optimisation: a failure (e.g. a concurrent writer won the commit) is
        logged and left for the next batch, never raised.
        """
        if self.compact_min_files <= 0:
            return None
        dt = open_table(self.storage, table_uri)
        if dt is None or len(dt.file_uris()) < self.compact_min_files:
            return None
        try:
            metrics = dt.optimize.compact(target_size=256 * 1024 * 1024)
            log.info(
                "compacted %s: %s",
                table_uri,
                {k: metrics.get(k) for k in ("numFilesAdded", "numFilesRemoved")},
            )
            return metrics
        except Exception as e:  # pragma: no cover - depends on concurrent writers
            log.warning("compaction of %s skipped: %s", table_uri, e)
            return None

    def _evolve(self, table_uri: str, schema: pa.Schema) -> pa.Schema:
        """Add columns/struct children of ``schema`` missing from the Delta table; return the union."""
        dt = open_table(self.storage, table_uri)
        if dt is None:
            return schema
        current = pa.schema(dt.schema().to_arrow())
        union = union_schema(current, schema)
        if union.equals(current):
            return current
        from deltalake import write_deltalake

        try:
            write_deltalake(
                table_uri,
                union.empty_table(),
                mode="append",
                schema_mode="merge",
                storage_options=self.storage.delta_storage_options(),
            )
        except Exception as e:
            raise SinkError(
                f"Cannot evolve the schema of {table_uri} to {union} ({e}). A column type change "
                "that Delta cannot widen needs a re-snapshot of the table into a new location."
            ) from e
        return union

    # -- a batch of one table ----------------------------------------------------------------
    def write_table_batch(
        self,
        database: str,
        table: str,
        batches: Iterable[pa.RecordBatch],
        *,
        value_schema: pa.Schema,
        primary_key: tuple[str, ...],
        app_id: str,
        version: int,
        position: BinlogPosition | None = None,
        snapshot_position: BinlogPosition | None = None,
        truncated_at: BinlogPosition | None = None,
        epoch: int = 0,
    ) -> TableWriteResult:
        """Append a batch of change events to the change log and apply it to the current state.

        Shorthand for :meth:`open_table_batch`, :meth:`TableBatch.add` of every record batch and
        :meth:`TableBatch.commit`: ``batches`` is consumed in the calling thread (e.g. a snapshot
        scan) while the sink thread writes the previous record batches.

        Args:
            batches: change-log record batches (consumed lazily; they may have different column
                sets after DDL: the lake schema is the union).
            value_schema: the newest column schema of the table (state table columns).
            primary_key: key columns; empty = keyless (every column is the key).
            app_id / version: batch identity (idempotent commits, see :mod:`.delta`).
            position: position recorded in the commit metadata.
            snapshot_position: set for an initial/full snapshot at that position: keys absent from
                the snapshot and older than it become tombstones.
            truncated_at: position of the last TRUNCATE in the batch: rows older than it become
                tombstones after the batch is applied.
            epoch: offset epoch of the events' positions (their state rows' ``__epoch``).

        Raises:
            SinkError: a commit failed or the schema cannot evolve (nothing of that dataset
                was published).
        """

        def fill(tb: TableBatch) -> None:
            for batch in batches:
                tb.add(batch)

        return self._write_batch(
            database,
            table,
            fill,
            value_schema=value_schema,
            primary_key=primary_key,
            app_id=app_id,
            version=version,
            position=position,
            snapshot_position=snapshot_position,
            truncated_at=truncated_at,
            epoch=epoch,
        )

    def _write_batch(
        self,
        database: str,
        table: str,
        fill: Callable[[TableBatch], None],
        *,
        value_schema: pa.Schema,
        primary_key: tuple[str, ...],
        app_id: str,
        version: int,
        position: BinlogPosition | None,
        snapshot_position: BinlogPosition | None,
        truncated_at: BinlogPosition | None,
        epoch: int,
    ) -> TableWriteResult:
        """Open a table batch, ``fill`` it, commit it (abort on any error)."""
        tb = self.open_table_batch(
            database,
            table,
            primary_key=primary_key,
            app_id=app_id,
            version=version,
            snapshot_position=snapshot_position,
            epoch=epoch,
        )
        try:
            fill(tb)
        except BaseException:
            tb.abort()
            raise
        return tb.commit(value_schema=value_schema, position=position, truncated_at=truncated_at)

    def write_frame_batch(
        self,
        database: str,
        table: str,
        frame: Callable[[Any], Any],
        *,
        log_schema: pa.Schema,
        value_schema: pa.Schema,
        primary_key: tuple[str, ...],
        app_id: str,
        version: int,
        position: BinlogPosition | None = None,
        snapshot_position: BinlogPosition | None = None,
        epoch: int = 0,
    ) -> TableWriteResult:
        """Like :meth:`write_table_batch`, for events a Spark DataFrame produces on the executors
        (:meth:`TableBatch.add_frame`): one job writes the change log (and a first snapshot's state).

        Raises:
            SinkError: the job, a merge or a commit failed (nothing of that dataset was published).
        """
        return self._write_batch(
            database,
            table,
            lambda tb: tb.add_frame(frame, log_schema),
            value_schema=value_schema,
            primary_key=primary_key,
            app_id=app_id,
            version=version,
            position=position,
            snapshot_position=snapshot_position,
            truncated_at=None,
            epoch=epoch,
        )

    def open_table_batch(
        self,
        database: str,
        table: str,
        *,
        primary_key: tuple[str, ...],
        app_id: str,
        version: int,
        snapshot_position: BinlogPosition | None = None,
        epoch: int = 0,
    ) -> TableBatch:
        """Start a batch of one table: record batches are written as they are added.

        The change log's data files are written by Spark on the sink thread as record batches
        arrive and stay invisible until :meth:`TableBatch.commit` publishes them in one Delta
        commit; state rows are merged per record batch ("latest wins" merges commute, so a
        killed batch is simply applied again). See :class:`TableBatch`. ``epoch``: the offset epoch
        of the events' positions (see :meth:`write_table_batch`).
        """
        return TableBatch(
            self,
            database,
            table,
            primary_key=tuple(primary_key),
            app_id=app_id,
            version=version,
            snapshot_position=snapshot_position,
            epoch=epoch,
        )

    def _submit(self, tb: TableBatch, batch: pa.RecordBatch) -> Future:
        """Run ``tb._write(batch)`` on the sink thread; blocks while ``pipeline_depth`` record
        batches are already waiting or being written (bounded memory, back-pressure on the reader)."""
        if self.pipeline_depth <= 0:
            f: Future = Future()
            try:
                tb._write(batch)
                f.set_result(None)
            except BaseException as e:
                f.set_exception(e)
            return f
        if self._pool is None:
            self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="cdc-sink")
            self._slots = threading.BoundedSemaphore(self.pipeline_depth)
            weakref.finalize(self, self._pool.shutdown, False)
            weakref.finalize(self, hold_switch_interval(self.switch_interval_s))
        slots = self._slots
        assert slots is not None  # made with the pool
        slots.acquire()
        try:
            f = self._pool.submit(tb._write, batch)
        except BaseException:
            slots.release()
            raise
        f.add_done_callback(lambda _f: slots.release())
        return f


class TableBatch:
    """One table's part of a batch (a stream window or a snapshot) while it is being written.

    :meth:`add` hands a change-log record batch to the writer's sink thread, which writes its
    Parquet data files with Spark (uncommitted) and merges its state rows (newest per key,
    computed in Arrow by :mod:`.state_rows`) into the state table; :meth:`commit` waits for
    them and publishes the change log in one Delta commit, then applies snapshot / TRUNCATE
    tombstones to the state and records the batch identity ``(app_id, version)`` in both tables.
    A batch whose identity a table already has is skipped for that table (exactly-once retries).

    Not thread-safe: one producer thread calls :meth:`add` / :meth:`commit` / :meth:`abort`.
    """

    def __init__(
        self,
        writer: LakeWriter,
        database: str,
        table: str,
        *,
        primary_key: tuple[str, ...],
        app_id: str,
        version: int,
        snapshot_position: BinlogPosition | None,
        epoch: int = 0,
    ):
        self.w = writer
        self.epoch = epoch
        self.database, self.table = database, table
        self.primary_key = primary_key
        self.app_id, self.version = app_id, version
        self.snapshot_position = snapshot_position
        self.paths = writer.paths(database, table)
        self.started = time.monotonic()
        self.manifests = tempfile.mkdtemp(prefix="cdc-manifests-")
        self.log_files: list[dict] = []
        self.rows_by_op: dict[str, int] = {}
        self.log_schema: pa.Schema | None = None
        self.names: list[str] = []
        self.jobs = 0
        self.futures: list[Future] = []
        self._dead: str | None = None  # why a record batch failed (the later ones are not written)
        self.state = _StateApplier(
            writer, self.paths.state, app_id, version, self.manifests, keyless=not primary_key
        )
        if self.state.skip:
            log.info("state of %s.%s already has batch %s@%s", database, table, app_id, version)

    def add(self, batch: pa.RecordBatch) -> None:
        """Queue ``batch`` (change-log rows) for writing; blocks while the sink thread is busy
        with ``pipeline_depth`` batches.

        Raises:
            SinkError: an earlier record batch of this table failed to write (the batch is dead:
                call :meth:`abort`).
        """
        if batch.num_rows == 0:
            return
        self._raise_failed()
        self.futures.append(self.w._submit(self, batch))

    def _raise_failed(self) -> None:
        for f in self.futures:
            exc = f.exception() if f.done() else None
            if exc is not None:
                raise exc

    def _wait(self) -> None:
        for f in self.futures:
            f.result()

    def abort(self) -> None:
        """Stop: cancel queued record batches, wait for the one being written, drop temp files.
        Written data files stay uncommitted (invisible; removed by Delta VACUUM)."""
        for f in self.futures:
            f.cancel()
        for f in self.futures:
            try:
                f.result()
            except BaseException:
                pass
        shutil.rmtree(self.manifests, ignore_errors=True)

    # -- on the sink thread ------------------------------------------------------------------
    def _write(self, batch: pa.RecordBatch) -> None:
        """Write one record batch (on the sink thread, in order). Once one failed, the later ones
        of this table batch fail without writing: a keyless table's counting merges must apply a
        prefix of the window's events, which a retry then continues (see :class:`_StateApplier`)."""
        if self._dead is not None:
            raise SinkError(f"an earlier record batch of {self.database}.{self.table} failed: {self._dead}")
        try:
            self._write_one(batch)
        except BaseException as e:
            self._dead = f"{type(e).__name__}: {e}"[:500]
            raise

    def _write_one(self, batch: pa.RecordBatch) -> None:
        self._count_ops(batch.column(batch.schema.get_field_index("op")))
        names, st_b, outputs = self._job_outputs(batch.schema)
        events = pa.Table.from_batches([batch])
        files = self.w._write_files(events, outputs, self.manifests)
        self._job_written(files, st_b)
        if len(outputs) == 1:
            self._merge_state(events, st_b, names)

    def add_frame(self, frame: Callable[[Any], Any], log_schema: pa.Schema) -> None:
        """Write change events that a Spark DataFrame produces on the executors (one job).

        ``frame(spark)`` returns a DataFrame of Arrow IPC payloads (column ``payload``, e.g. the
        ``mysql_cdc_splits`` reader: the executors read the source themselves) whose events have
        the change-log schema ``log_schema``. A first snapshot's state rows are written by the
        same job; otherwise the change-log files just written are read back in record batches and
        merged into the state like :meth:`add`'s (keyed: latest wins; keyless: counts).
        Called on the producer thread, after the record batches :meth:`add` queued are written.

        Raises:
            SinkError: the job or a merge failed (call :meth:`abort`).
        """
        self._wait()
        names, st_b, outputs = self._job_outputs(log_schema)
        files = self.w._write_frame(frame(self.w.active_spark()), outputs, self.manifests)
        self._job_written(files, st_b)
        if len(outputs) > 1:  # the state rows were written directly: count the events written
            self.rows_by_op["r"] = self.rows_by_op.get("r", 0) + sum(int(f["num_records"]) for f in files[0])
            return
        for events in self._read_back(files[0]):
            self._count_ops(events.column("op"))
            self._merge_state(events, st_b, names)

    def _count_ops(self, ops: pa.Array | pa.ChunkedArray) -> None:
        for vc in pc.value_counts(ops).to_pylist():
            self.rows_by_op[vc["values"]] = self.rows_by_op.get(vc["values"], 0) + vc["counts"]

    def _job_outputs(self, log_schema: pa.Schema) -> tuple[list[str], pa.Schema, list[FileOutput]]:
        """Record the change-log schema of a job's events; returns their columns, their state
        schema and the job's outputs: the change log, and the state rows too for a first snapshot
        (unique keys, no older rows: written by the same Spark job, committed at the end; otherwise
        they are merged by :meth:`_merge_state`). A keyless table's copies of one value may be in
        different record batches: its counts are always merged."""
        self.log_schema = union_schema(self.log_schema, log_schema)
        after = list(log_schema.field("after").type)
        names = [f.name for f in after]
        self.names += [n for n in names if n not in self.names]
        keyless = not self.primary_key
        st_b = state_schema(pa.schema(after), keyless=keyless)
        outputs = [FileOutput(self.paths.changelog, log_schema)]
        if not self.state.skip and self.state.direct and self.snapshot_position is not None and not keyless:
            outputs.append(
                FileOutput(self.paths.state, st_b, kind="state", value_names=tuple(names), epoch=self.epoch)
            )
        return names, st_b, outputs

    def _job_written(self, files: list[list[dict]], st_b: pa.Schema) -> None:
        """Record the data files a job wrote (per output, as :meth:`_job_outputs` listed them)."""
        self.jobs += 1
        self.log_files += files[0]
        if len(files) > 1:
            self.state.add_direct(files[1], st_b)

    def _merge_state(self, events: pa.Table, st_b: pa.Schema, names: list[str]) -> None:
        """Merge the state rows of change events into the state table (keyless: their counts)."""
        if self.state.skip:
            return
        if not self.primary_key:
            self._merge_counts(events, st_b, names)
        else:
            self.state.merge(state_rows(events, names, epoch=self.epoch), st_b, list(self.primary_key), True)

    def _read_back(self, files: list[dict], batch_rows: int = 100_000) -> Iterable[pa.Table]:
        """The change events of data files this batch wrote (not yet committed), in record batches."""
        import pyarrow.parquet as pq

        storage = self.w.storage
        fs = storage.pyarrow_filesystem()
        base = storage.fs_path(self.paths.changelog)
        for f in files:
            with fs.open_input_file(f"{base}/{f['path']}") as fh:
                for batch in pq.ParquetFile(fh).iter_batches(batch_size=batch_rows):
                    yield pa.Table.from_batches([batch])

    def _merge_counts(self, events: pa.Table, st_b: pa.Schema, names: list[str]) -> None:
        """Keyless table: merge the record batch's count changes, applying each TRUNCATE (``op=t``)
        in binlog order between the events before and after it (its copies go to 0 first)."""
        ops = events.column("op").to_pylist()
        cuts = [i for i, op in enumerate(ops) if op == "t"]
        start = 0
        src = events.column("source")
        for i in [*cuts, len(ops)]:
            if i > start:
                self.state.merge_counts(
                    state_rows(events.slice(start, i - start), names, keyless=True, epoch=self.epoch),
                    st_b,
                    names,
                )
            if i < len(ops):
                at = src[i].as_py()
                self.state.truncate_counts(BinlogPosition(at["file"], int(at["pos"]), epoch=self.epoch), st_b)
            start = i + 1

    # -- on the producer thread --------------------------------------------------------------
    def commit(
        self,
        *,
        value_schema: pa.Schema,
        position: BinlogPosition | None = None,
        truncated_at: BinlogPosition | None = None,
    ) -> TableWriteResult:
        """Wait for the queued record batches, then publish the batch (see the class docs).

        Args:
            value_schema: the newest column schema of the table (state table columns).
            position: position recorded in the commit metadata.
            truncated_at: position of the last TRUNCATE in the batch (older rows → tombstones).

        Raises:
            SinkError: a write or commit failed (nothing of that dataset was published).
        """
        meta = {"dagster_mysql_cdc.position": str(position)} if position else {}
        storage = self.w.storage
        try:
            self._wait()
            if self.log_schema is not None:
                self.w._evolve(self.paths.changelog, self.log_schema)
            log_commit = commit_files(
                storage,
                self.paths.changelog,
                self.log_schema or _empty_log_schema(value_schema, self.primary_key),
                self.log_files,
                mode="append",
                app_id=self.app_id,
                version=self.version,
                metadata=meta,
            )
            state_commit = self.state.finish(
                _state_schema_of(self.names, self.log_schema, value_schema, keyless=not self.primary_key),
                metadata=meta,
                snapshot_position=self.snapshot_position,
                truncated_at=truncated_at,
            )
        except BaseException:
            self.abort()
            raise
        shutil.rmtree(self.manifests, ignore_errors=True)
        for uri in (self.paths.changelog, self.paths.state):
            self.w.maybe_compact(uri)
        return TableWriteResult(
            database=self.database,
            table=self.table,
            rows=sum(self.rows_by_op.values()),
            rows_by_op=dict(self.rows_by_op),
            paths=self.paths,
            changelog=log_commit,
            state=state_commit,
            seconds=time.monotonic() - self.started,
            spark_jobs=self.jobs,
        )


class _StateApplier:
    """Applies a table batch to its state table one record batch at a time (bounded memory).

    The first snapshot of a table writes its rows straight into a new table (one commit at the
    end); otherwise each record batch's state rows (newest per key within the record batch) are
    merged with "latest ordering key wins" — merges commute, so applying the record batches one
    after the other equals applying the whole batch at once. :meth:`finish` then applies
    snapshot / TRUNCATE tombstones and records the batch identity.
    """

    def __init__(
        self,
        writer: LakeWriter,
        uri: str,
        app_id: str,
        version: int,
        manifests: str,
        *,
        keyless: bool = False,
    ):
        self.w = writer
        self.keyless = keyless
        self.read_seq = 0  # record batches of snapshot reads merged so far (keyless counts)
        self.uri = uri
        self.app_id = app_id
        self.version = version
        self.manifests = manifests
        self.dt = open_table(writer.storage, uri)
        done = self.dt.transaction_version(app_id) if self.dt is not None else None
        self.skip = done is not None and done >= version
        self.direct_files: list[dict] = []
        self.direct_schema: pa.Schema | None = None
        self.direct = self.dt is None  # nothing to merge with yet

    def _table(self) -> DeltaTable:
        """The state table, which exists once :meth:`merge` or :meth:`finish` created it."""
        if self.dt is None:
            raise SinkError(f"State table {self.uri} does not exist yet (internal order error)")
        return self.dt

    def add_direct(self, files: list[dict], st_schema: pa.Schema) -> None:
        """Record state files of a first snapshot (written by Spark, committed by :meth:`finish`)."""
        self.direct_files += files
        self.direct_schema = union_schema(self.direct_schema, st_schema)

    def _ensure_table(self, st_schema: pa.Schema) -> None:
        """No table yet (streaming before any snapshot, or a keyless table's first snapshot):
        create it empty."""
        if self.direct:
            commit_files(
                self.w.storage,
                self.uri,
                st_schema,
                [],
                mode="append",
                app_id=self.app_id + "/init",
                version=0,
            )
            self.dt = open_table(self.w.storage, self.uri)
            self.direct = False
        elif self.dt is not None and EPOCH_COL not in pa.schema(self.dt.schema().to_arrow()).names:
            # a state table written before offset epochs: add the column (NULL = epoch 0) so the
            # merge predicates can read it
            self.w._evolve(self.uri, st_schema)
            self.dt = open_table(self.w.storage, self.uri)

    def _source(self, rows: pa.Table, st_schema: pa.Schema) -> pa.Table:
        """``rows`` in the merge source layout: ``st_schema`` then the target's other columns (nulls).

        A state row is the image of its newest event: columns of the table that this record batch
        does not have (dropped or renamed by a DDL before its events) are nulls, so the update
        clears them instead of keeping an older event's values."""
        assert self.dt is not None
        target = pa.schema(self.dt.schema().to_arrow())
        wide = pa.schema(list(st_schema) + [f for f in target if f.name not in st_schema.names])
        return pa.table(
            [
                rows.column(f.name).cast(f.type)
                if f.name in rows.column_names
                else pa.nulls(rows.num_rows, f.type)
                for f in wide
            ],
            schema=wide,
        )

    def merge(self, rows: pa.Table, st_schema: pa.Schema, key: list[str], keyed: bool) -> None:
        """Merge state rows (one record batch's, any number per key) into the state table."""
        self._ensure_table(st_schema)
        assert self.dt is not None
        rows = newest_per_key(rows, key)
        try:
            source = self._source(rows, st_schema)
            on = " AND ".join(
                (f"t.{_q(k)} = s.{_q(k)}" if keyed else f"(t.{_q(k)} IS NOT DISTINCT FROM s.{_q(k)})")
                for k in key
            )
            metrics = (
                self._table()
                .merge(source, predicate=on, source_alias="s", target_alias="t", merge_schema=True)
                .when_matched_update_all(predicate=newer_predicate())
                .when_not_matched_insert_all()
                .execute()
            )
            log.debug("merge into %s: %s", self.uri, metrics)
        except Exception as e:
            raise SinkError(
                f"Merging into {self.uri} on {self.w.storage.location()} failed: {type(e).__name__}: {e}"
            ) from e
        self._table().update_incremental()

    # -- keyless tables: a multiset of row values (``__count`` copies each) ----------------------
    def _marker(self, app_id: str, version: int) -> CommitProperties:
        return CommitProperties(
            custom_metadata={"dagster_mysql_cdc.batch": f"{self.app_id}@{self.version}"},
            app_transactions=[Transaction(app_id=app_id, version=version)],
        )

    def _counts_ready(self, st_schema: pa.Schema) -> None:
        self._ensure_table(st_schema)
        assert self.dt is not None
        if (
            "__count" not in pa.schema(self.dt.schema().to_arrow()).names
        ):  # a table written before counts existed
            self.w._evolve(self.uri, st_schema)
            self.dt = open_table(self.w.storage, self.uri)

    def merge_counts(self, rows: pa.Table, st_schema: pa.Schema, key: list[str]) -> None:
        """Merge a keyless table's state rows (:func:`.state_rows.state_rows`, ``keyless=True``)
        as changes of each value's number of copies (``__count``).

        Snapshot reads (``op=r``, all at one snapshot position S) *set* a value's count to the
        copies read when the stored row is older than S, and *add* to it when it is at S (the
        same snapshot's earlier record batch); binlog events *add* their +1/-1 when their newest
        event is newer than the stored row (older events are already in a newer snapshot's
        count). A value is live while its count is above 0.

        Exactly once: the commit of a merge records a Delta ``txn`` marker, and rows the marker
        covers are skipped on a retry. Binlog events: app id ``<app_id>/counts``, version the
        position (:meth:`BinlogPosition.as_version`) of the newest event applied (all events of a
        binlog position are in one record batch); snapshot reads: app id
        ``<app_id>/counts@<version>``, version the record batch's sequence number in the batch.

        Raises:
            SinkError: the merge failed (nothing of it was committed).
        """
        if rows.num_rows == 0:
            return
        self._counts_ready(st_schema)
        assert self.dt is not None
        reads = pc.equal(rows.column("__op"), "r")
        if pc.any(reads).as_py():
            self.read_seq += 1
            app = f"{self.app_id}/counts@{self.version}"
            done = self.dt.transaction_version(app)
            if done is None or done < self.read_seq:
                self._merge_counted(
                    rows.filter(reads), st_schema, key, reads=True, marker=(app, self.read_seq)
                )
            rows = rows.filter(pc.invert(reads))
        if rows.num_rows == 0:
            return
        app = f"{self.app_id}/counts"
        versions = _position_versions(rows)
        done = self.dt.transaction_version(app)
        if done is not None:
            newer = pc.greater(versions, done)
            rows, versions = rows.filter(newer), versions.filter(newer)
            if rows.num_rows == 0:
                log.info("state of %s already has these events (retried window)", self.uri)
                return
        self._merge_counted(rows, st_schema, key, reads=False, marker=(app, pc.max(versions).as_py()))

    def _merge_counted(
        self, rows: pa.Table, st_schema: pa.Schema, key: list[str], *, reads: bool, marker: tuple[str, int]
    ) -> None:
        assert self.dt is not None
        source = self._source(count_per_value(rows, key), st_schema)
        on = " AND ".join(f"(t.{_q(k)} IS NOT DISTINCT FROM s.{_q(k)})" for k in key)
        cnt, dl = _q("__count"), _q("__deleted")
        stored = f"COALESCE(t.{cnt}, CASE WHEN t.{dl} THEN 0 ELSE 1 END)"  # no count yet: one copy
        take = {_q(n): f"s.{_q(n)}" for n in source.schema.names if n not in ("__count", "__deleted")}
        added = f"({stored} + s.{cnt})"
        add = {**take, cnt: added, dl: f"{added} <= 0"}
        put = {**take, cnt: f"s.{cnt}", dl: f"s.{cnt} <= 0"}
        f, p, r = (_q(c) for c in ORDER_COLS[1:])
        same = (
            f"{_epoch('s')} = {_epoch('t')} AND s.{f} = t.{f} AND s.{p} = t.{p} AND s.{r} = t.{r} "
            f"AND t.{_q('__op')} = 'r'"
        )
        try:
            m = self.dt.merge(
                source,
                predicate=on,
                source_alias="s",
                target_alias="t",
                merge_schema=True,
                commit_properties=self._marker(*marker),
            )
            if reads:  # same snapshot, another record batch: add; an older row: set
                m = m.when_matched_update(add, predicate=same).when_matched_update(
                    put, predicate=newer_predicate()
                )
            else:
                m = m.when_matched_update(add, predicate=newer_predicate())
            metrics = m.when_not_matched_insert(put).execute()
            log.debug("count merge into %s: %s", self.uri, metrics)
        except Exception as e:
            raise SinkError(
                f"Merging into {self.uri} on {self.w.storage.location()} failed: {type(e).__name__}: {e}"
            ) from e
        self.dt.update_incremental()

    def truncate_counts(self, at: BinlogPosition, st_schema: pa.Schema) -> None:
        """A TRUNCATE inside a keyless table's record batch: every value older than ``at`` goes to
        0 copies before the events after it are merged (idempotent; marker as binlog events)."""
        self._counts_ready(st_schema)
        assert self.dt is not None
        app = f"{self.app_id}/counts"
        done = self.dt.transaction_version(app)
        if done is not None and done >= at.as_version():
            return
        self.dt.update(
            updates={**_tombstone_updates(at, "t"), _q("__count"): "0"},
            predicate=f"({_q('__deleted')} = false) AND ({_older_plain(at)})",
            commit_properties=self._marker(app, at.as_version()),
        )
        self.dt.update_incremental()

    def finish(
        self,
        st_schema: pa.Schema,
        *,
        metadata: dict,
        snapshot_position: BinlogPosition | None,
        truncated_at: BinlogPosition | None,
    ) -> CommitOutcome:
        storage = self.w.storage
        if self.skip:
            return CommitOutcome(False, self._table().version(), 0, 0)
        try:
            if self.direct:
                schema = (
                    union_schema(self.direct_schema, st_schema)
                    if self.direct_schema is not None
                    else st_schema
                )
                if self.direct_files or truncated_at is None:
                    return commit_files(
                        storage,
                        self.uri,
                        schema,
                        self.direct_files,
                        mode="append",
                        app_id=self.app_id,
                        version=self.version,
                        metadata=metadata,
                    )
                commit_files(
                    storage, self.uri, schema, [], mode="append", app_id=self.app_id + "/init", version=0
                )
                self.dt = open_table(storage, self.uri)
            self.w._evolve(self.uri, st_schema)
            self.dt = open_table(storage, self.uri)
            assert self.dt is not None
            zero = {_q("__count"): "0"} if self.keyless else {}
            if snapshot_position is not None:  # keys absent from a full snapshot were deleted before it
                self._table().update(
                    updates={**_tombstone_updates(snapshot_position, "r"), **zero},
                    predicate=f"({_q('__deleted')} = false) AND ({_older_plain(snapshot_position, -1)})",
                )
            if truncated_at is not None:
                self._table().update(
                    updates={**_tombstone_updates(truncated_at, "t"), **zero},
                    predicate=f"({_q('__deleted')} = false) AND ({_older_plain(truncated_at)})",
                )
            outcome = commit_files(
                storage,
                self.uri,
                st_schema,
                [],
                mode="append",
                app_id=self.app_id,
                version=self.version,
                metadata=metadata,
            )
            return CommitOutcome(True, outcome.table_version, 0, 0)
        except SinkError:
            raise
        except Exception as e:
            raise SinkError(
                f"Applying the batch to {self.uri} on {self.w.storage.location()} failed: {type(e).__name__}: {e}"
            ) from e


def _older_plain(pos: BinlogPosition, row: int = 0) -> str:
    """SQL predicate: a state row's ordering key is below ``(pos, row)`` (NULL ``__epoch`` = 0)."""
    f, p, r = (_q(c) for c in ORDER_COLS[1:])
    file = pos.file.replace("'", "''")
    e, n = _epoch(), int(pos.epoch)
    return (
        f"({e} < {n}) OR ({e} = {n} AND (({f} < '{file}') OR ({f} = '{file}' AND {p} < {pos.pos}) "
        f"OR ({f} = '{file}' AND {p} = {pos.pos} AND {r} < {row})))"
    )


def _tombstone_updates(pos: BinlogPosition, op: str) -> dict[str, str]:
    file = pos.file.replace("'", "''")
    return {
        '"__deleted"': "true",
        '"__op"': f"'{op}'",
        _q(EPOCH_COL): str(int(pos.epoch)),
        '"__binlog_file"': f"'{file}'",
        '"__binlog_pos"': str(int(pos.pos)),
        '"__binlog_row"': "-1" if op == "r" else "0",
    }


def _position_versions(rows: pa.Table) -> pa.Array:
    """:meth:`BinlogPosition.as_version` of each state row's ``(__binlog_file, __binlog_pos)``:
    the version within the rows' epoch (one table batch is one epoch; its count markers' app id
    is per epoch, see :meth:`BinlogPosition.txn_app`)."""
    files = rows.column("__binlog_file").combine_chunks()
    uniq = pc.unique(files)
    seqs = pa.array([BinlogPosition(f, 0).file_seq for f in uniq.to_pylist()], pa.int64())
    seq = seqs.take(pc.index_in(files, value_set=uniq))
    return pc.add(pc.multiply(seq, 10**12), rows.column("__binlog_pos").combine_chunks().cast(pa.int64()))


def _state_schema_of(
    names: list[str], log_schema: pa.Schema | None, value_schema: pa.Schema, *, keyless: bool = False
) -> pa.Schema:
    """State schema: the newest columns first, then columns only older events had, then metadata."""
    fields = list(value_schema)
    if log_schema is not None:
        seen = {f.name for f in fields}
        after = {f.name: f for f in log_schema.field("after").type}
        fields += [after[n] for n in names if n not in seen]
    return state_schema(pa.schema(fields), keyless=keyless)


def _root_cause(e: BaseException) -> str:
    """The last ``Error:`` line of an exception's text (the executor's own error inside Spark's
    wrapping), or its first line."""
    lines = [ln.strip() for ln in str(e).splitlines() if ln.strip()]
    causes = [ln for ln in lines if "Error:" in ln or "Exception:" in ln]
    return (causes[-1] if causes else (lines[0] if lines else type(e).__name__))[:1000]


def _empty_log_schema(value_schema: pa.Schema, primary_key: tuple[str, ...]) -> pa.Schema:
    from ..events import change_log_schema

    return change_log_schema(value_schema, primary_key)
