"""Spark writer of the captured tables' change logs and states (Delta tables on the lake).

Paths below the lake root: :class:`.layout.LakeLayout` (``<server>/<database>/<table>/changelog``,
``.../state`` and ``.../state_tail`` here).

Data path: Arrow record batches of change events (bounded size) are handed to a sink thread, so
the caller reads the next record batch (binlog or snapshot scan) while the previous one is written:
the record batch becomes a DataFrame of Arrow IPC chunks and the ``mysql_cdc_delta_files`` data
source writes, from the executors (:mod:`.spark_files`), the change log's Parquet files and the
events' **tail rows** (their state rows, :mod:`.tail`); a first snapshot's state rows are written
by the same job. One Delta commit per dataset and batch (:mod:`.delta`, :mod:`.table_batch`).

Current-state semantics (DBLog / Debezium "latest wins"), merge-on-read: a window appends its
changes to the state's tail and never rewrites the compacted state; the current state is the
compacted state with the tail applied (:mod:`.current`: per key, the greatest ordering key
``(__epoch, __binlog_file, __binlog_pos, __binlog_row)`` wins; a keyless table counts copies;
cut markers end older rows). A compaction rewrites the compacted state when the tail has grown
past a fraction of it (:mod:`.compaction`, checked after each batch). ``__epoch`` is the offset
epoch (:class:`~dagster_mysql_cdc.events.BinlogPosition`): after a failover the new server's
binlog numbering may sort below the old one's, the epoch keeps its events after the old ones;
NULLs (state tables from before epochs) read as 0. Snapshot rows take ``__binlog_row = -1`` at the
snapshot position, so they order before any binlog event at that position. Hence a batch may be
applied again, and a snapshot and a stream window may commit in either order: the state converges
to the same rows. Deletes and TRUNCATE leave tombstones (``__deleted = true``).
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
from concurrent.futures import Future, ThreadPoolExecutor, as_completed
from typing import Any, NotRequired, TypedDict, Unpack

import pyarrow as pa

from ..errors import SinkError
from ..events import BinlogPosition
from ..private_files import PrivateFiles
from .compaction import CompactionPolicy
from .delta import COMMIT_HOOKS, PATH_COMMIT_HOOKS, changed, open_table, wrote
from .layout import LakeLayout, TablePaths
from .live_rows import EVOLVED
from .retention import RetentionPolicy, vacuum_if_due
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
from .storage import StorageSettings
from .table_batch import TableBatch, TableWriteResult

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


def union_fields(a: Iterable[pa.Field], b: Iterable[pa.Field]) -> list[pa.Field]:
    """The fields of ``a`` with those of ``b`` merged in by name (``a``'s order first, then ``b``'s
    new ones): a field in both takes ``b``'s type, or the union of the two struct types."""
    fields = {f.name: f for f in a}
    for f in b:
        fields[f.name] = (
            fields[f.name].with_type(union_struct(fields[f.name].type, f.type)) if f.name in fields else f
        )
    return list(fields.values())


def union_struct(a: pa.DataType, b: pa.DataType) -> pa.DataType:
    """Union of two struct types by child name (``a``'s order first); other types: ``b`` wins."""
    if not (pa.types.is_struct(a) and pa.types.is_struct(b)):
        return b
    return pa.struct(union_fields(a, b))


def union_schema(a: pa.Schema | None, b: pa.Schema) -> pa.Schema:
    """Union of two schemas, merging struct children (columns are only ever added)."""
    if a is None:
        return b
    return pa.schema(union_fields(a, b))


class BatchCommit(TypedDict):
    """Where one table batch commits: its identity and the positions it records (the keyword
    arguments :meth:`LakeWriter.write_table_batch` and :meth:`LakeWriter.write_files_batch` share).

    Keys:
        primary_key: key columns; empty = keyless (every column is the key).
        app_id / version: batch identity (idempotent commits, see :mod:`.delta`).
        position: position recorded in the commit metadata (default ``None``).
        snapshot_position: set for an initial/full snapshot at that position: keys absent from
            the snapshot and older than it become tombstones (default ``None``).
        epoch: offset epoch of the events' positions (their state rows' ``__epoch``; default 0).
    """

    primary_key: tuple[str, ...]
    app_id: str
    version: int
    position: NotRequired[BinlogPosition | None]
    snapshot_position: NotRequired[BinlogPosition | None]
    epoch: NotRequired[int]


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
        compaction: when a table's state is compacted after a batch (:mod:`.compaction`).
        retention: how long removed files are kept, and how often a table is vacuumed after a
            batch (:mod:`.retention`).
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
        compaction: CompactionPolicy | None = None,
        retention: RetentionPolicy | None = None,
    ):
        self._spark_factory: Callable[[], Any] | None = spark if callable(spark) else None
        self._spark: Any = None if callable(spark) else spark
        self._spark_lock = threading.Lock()
        self._stage_dir: str | None = None
        #: registered data sources: the library's name -> the name of this writer's keyed subclass
        self._registered: dict[str, str] = {}
        self._register_lock = threading.Lock()
        #: seconds it took to start (or connect to) Spark and register the data source; 0 until then
        self.spark_seconds = 0.0
        self.storage = storage
        self.server_name = server_name
        self.rows_per_file = rows_per_file
        self.compact_min_files = compact_min_files
        self.pipeline_depth = pipeline_depth
        self.switch_interval_s = switch_interval_s
        self.compaction = compaction or CompactionPolicy()
        self.retention = retention or RetentionPolicy()
        #: the lake schema each Delta table was last rewritten into by this writer (a column type
        #: widened): a batch of the same table prepared before that, and committed after it (an
        #: earlier part of a window, see TableBatch.commit), converts its files first
        self.rewritten_schemas: dict[str, pa.Schema] = {}
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

    def start_spark(self) -> None:
        """Start (or connect to) Spark on a background thread, when the writer was given a factory
        and has no session yet: a caller that will need the session after work of its own (a
        parallel window's planning pass, :mod:`..engine.parallel_catchup`) overlaps the session's
        start with it (on Spark Connect: the client's import, the gRPC session, the data source's
        registration). The next use of :attr:`spark` waits for it; a failure there is left for
        that use to raise (it tries again)."""
        if self._spark is not None or self._spark_factory is None:
            return

        def start() -> None:
            try:
                self.spark  # noqa: B018 - the property starts the session
            except Exception as e:  # noqa: BLE001 - raised again by the caller's own use
                log.debug("starting Spark in the background failed (the next use retries): %s", e)

        threading.Thread(target=start, name="cdc-spark-start", daemon=True).start()

    def active_spark(self):
        """:attr:`spark`, made the JVM's active session of the calling thread first (classic
        sessions). Spark resolves a Python data source's name in the *active* session; a thread
        that never had one (e.g. a Dagster step after another session's job) would otherwise get
        ``ClassNotFoundException: mysql_cdc_delta_files.DefaultSource``."""
        spark = self.spark
        if not is_connect_session(spark):
            spark._jvm.org.apache.spark.sql.SparkSession.setActiveSession(spark._jsparkSession)
        return spark

    def warm_up(self) -> float:
        """Start (or connect to) Spark, register the data source and run one trivial job now,
        before there is data to write: a standby run (``engine/follow.py``) does it while it
        waits, so the first change after a quiet period does not pay the session's start and
        first job (seconds) on its way to the lake.

        Returns:
            the seconds it took.

        Raises:
            whatever starting the session raises (the caller logs it and goes on: the first write
            starts it again).
        """
        t0 = time.monotonic()
        self.active_spark().range(1).count()
        return time.monotonic() - t0

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
        """:meth:`register_data_source` on ``spark`` (also before :attr:`spark` is set). One
        thread at a time: the tables of a window compact (and split-read) in threads of their own,
        and a Spark Connect server refuses a name two of them register at once
        (``DATA_SOURCE_ALREADY_EXISTS``; registering it again later is accepted)."""
        name = source.name()
        with self._register_lock:
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
            files = self.write_frame(frame(self.active_spark()), [FileOutput(uri, schema)], manifests)[0]
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
    def write_files(self, events: pa.Table, outputs: list[FileOutput], manifests: str) -> list[list[dict]]:
        """One Spark job: the executors write ``events`` (change-log rows) as Parquet data files of
        each output (see :mod:`.spark_files`); returns the files written, per output."""
        spark = self.active_spark()
        staged = tempfile.mkdtemp(prefix="job-", dir=self._stage_dir) if self._stage_dir else None
        try:
            return self.write_frame(payload_frame(spark, events, stage_dir=staged), outputs, manifests)
        finally:
            remove_staged(staged)

    def write_together(self, items: list[tuple[TableBatch, pa.RecordBatch]]) -> dict[int, BaseException]:
        """Write the record batches of many tables' batches in **one** Spark job (a window's last,
        small record batches: a window that changed hundreds of tables a little pays one job, not
        one per table). Each batch gets its files as if :meth:`TableBatch.add` had written it;
        commit them with :meth:`TableBatch.commit` as usual.

        Isolation: a table whose batch cannot be prepared (its lake schema cannot take the
        batch) fails alone; when the common job fails, each table's record batch is written by a
        job of its own, so only the failing table's fails (:meth:`TableBatch.mark_failed`).

        Returns:
            ``{index in items: error}`` of the batches that failed (the others are written).
        """
        errors: dict[int, BaseException] = {}
        jobs: list[tuple[int, TableBatch, list[FileOutput], pa.Table]] = []
        for i, (tb, batch) in enumerate(items):
            try:
                tb._wait()  # its earlier record batches (they may have evolved the lake schemas)
                outputs, events = tb.prepare(batch)
            except Exception as e:  # noqa: BLE001 - this table fails alone
                errors[i] = e
                tb.mark_failed(e)
                continue
            jobs.append((i, tb, outputs, events))
        if not jobs:
            return errors
        if len(jobs) > 1:
            try:
                files = self._write_grouped([(o, ev) for _, _, o, ev in jobs])
            except SinkError as e:
                log.warning("the common job of %d tables failed (%s); writing each alone", len(jobs), e)
            else:
                for (_, tb, _, _), f in zip(jobs, files):
                    tb._job_written(f)
                return errors
        for i, tb, outputs, events in jobs:
            try:
                tb._job_written(self.write_files(events, outputs, tb.manifests))
            except Exception as e:  # noqa: BLE001 - this table fails alone
                errors[i] = e
                tb.mark_failed(e)
        return errors

    def _write_grouped(self, jobs: list[tuple[list[FileOutput], pa.Table]]) -> list[list[list[dict]]]:
        """One Spark job writing each ``(outputs, events)`` of ``jobs`` (see
        :func:`.spark_files.grouped_payload_frame`); returns each job's files, per output."""
        from dataclasses import replace

        from .spark_files import grouped_payload_frame

        outputs = [replace(o, group=g) for g, (outs, _) in enumerate(jobs) for o in outs]
        spark = self.active_spark()
        staged = tempfile.mkdtemp(prefix="job-", dir=self._stage_dir) if self._stage_dir else None
        manifests = tempfile.mkdtemp(prefix="cdc-manifests-")
        try:
            frame = grouped_payload_frame(spark, [ev for _, ev in jobs], stage_dir=staged)
            files = self.write_frame(frame, outputs, manifests)
        finally:
            remove_staged(staged)
            shutil.rmtree(manifests, ignore_errors=True)
        out, k = [], 0
        for outs, _ in jobs:
            out.append(files[k : k + len(outs)])
            k += len(outs)
        return out

    def write_frame(
        self, frame, outputs: list[FileOutput], manifests: str, *, rows: bool = False
    ) -> list[list[dict]]:
        """One Spark job writing ``frame`` (a DataFrame of Arrow IPC payloads: column ``payload``
        or ``payload_path``, see :mod:`.spark_files`; with ``rows``, a DataFrame whose rows are
        the data itself, written to the one output as they are) as the Parquet data files of each
        output; returns the files written, per output.

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
                .option("rows", "true" if rows else "false")
                .save()
            )
        except Exception as e:  # a Spark task's error arrives as a long PythonException/Py4JJavaError
            where = ", ".join(o.table_uri for o in outputs)
            raise SinkError(
                f"Writing data files to {where} on {self.storage.location()} failed: {root_cause(e)}"
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
            metrics = dt.optimize.compact(
                target_size=256 * 1024 * 1024, post_commithook_properties=COMMIT_HOOKS
            )
            if metrics.get("numFilesAdded") or metrics.get("numFilesRemoved"):
                wrote(dt)
            log.info(
                "compacted %s: %s",
                table_uri,
                {k: metrics.get(k) for k in ("numFilesAdded", "numFilesRemoved")},
            )
            return metrics
        except Exception as e:  # pragma: no cover - depends on concurrent writers
            log.warning("compaction of %s skipped: %s", table_uri, e)
            return None

    def warm_table_facts(self, tables: Iterable[tuple[str, str]], workers: int = 8) -> int:
        """Do ahead, on the calling thread's cached handles, what a window's commit of each table
        of ``tables`` (``(db, table)``) asks of them first: the live-row count its tail's newest
        commit recorded (:func:`.live_rows.recorded`, from the tail's history) and the state's and
        tail's sizes (:func:`.compaction.table_sizes`, the compaction decision, from their file
        lists). Each answer is kept on its handle for the handle's version, so the window finds
        it instead of reading it (then carries it over its own commit). For a standby run, after
        :func:`.delta.preload`, while it waits for its first change (issue 42: about 1 ms of CPU
        per table, 0.3 s of a 300-table window's commits, where they compete for 2 cores).

        Side by side on up to ``workers`` threads; the calling thread must not use the handles
        meanwhile. Tables whose handles the block does not hold (not loaded, missing) are
        skipped; nothing is loaded here.

        Returns:
            how many tables were warmed.
        Raises:
            nothing: a table whose facts cannot be read is left to its window (logged at DEBUG).
        """
        from .compaction import table_sizes
        from .delta import cached_handle
        from .live_rows import recorded

        pairs = []
        for db, table in dict.fromkeys(tables):
            p = self.paths(db, table)
            tail, state = cached_handle(p.tail), cached_handle(p.state)
            if tail is not None or state is not None:
                pairs.append((p.state, tail, state))

        def warm(pair: tuple) -> bool:
            where, tail, state = pair
            try:
                table_sizes(state, tail)
                recorded(tail, state)
            except Exception as e:  # noqa: BLE001 - an optimisation: the window reads them
                log.debug("warming %s failed: %s", where, e)
                return False
            return True

        if not pairs:
            return 0
        with ThreadPoolExecutor(max(1, min(workers, len(pairs))), thread_name_prefix="cdc-warm") as pool:
            return sum(pool.map(warm, pairs))

    def compact_if_due(self, paths: TablePaths, primary_key: tuple[str, ...], *, force: bool = False) -> dict:
        """Compact the table's state when :attr:`compaction` says it is due (or ``force``), and
        optimize its tail's small files. Never raises: a compaction that fails is logged and left
        for the next batch (the batch it follows is committed).

        A failure is logged as a WARNING with its traceback each time, and its result carries the
        error and the rows still pending (the asset's ``compaction`` and ``state_tail_rows`` /
        ``state_behind_seconds`` metadata), so a compaction that keeps failing shows as a
        growing tail rather than staying silent.

        Returns:
            the compaction's metrics (``{}``: none was due; ``{"error": ..., "pending":
            TableSizes}``: it failed, ``pending`` when the table's sizes could still be read).
        """
        from .compaction import compact_table, table_sizes

        try:
            return compact_table(self, paths, list(primary_key), force=force)
        except Exception as e:  # noqa: BLE001 - an optimisation: the batch is committed
            log.warning(
                "compaction of %s failed (left for the next batch): %s: %s",
                paths.state,
                type(e).__name__,
                e,
                exc_info=True,
            )
            out: dict = {"error": f"{type(e).__name__}: {e}"[:1000]}
            try:
                out["pending"] = table_sizes(
                    open_table(self.storage, paths.state), open_table(self.storage, paths.tail)
                )
            except Exception:  # noqa: BLE001 - the error above is what the caller reports
                pass
            return out

    def compact_stale(self, tables: Iterable[tuple[str, str]]) -> dict[tuple[str, str], dict]:
        """Compact the ``state`` of each ``(database, table)`` whose tail holds changes (tables
        no window of this run wrote, whose oldest uncompacted change is older than
        ``compaction.max_tail_age_seconds``: the binlog sensor names them, see
        docs/output-layout.md), keyed or keyless as their Delta tables record. Never raises (as
        :meth:`compact_if_due`).

        Returns:
            ``{(database, table): metrics}`` of :meth:`compact_if_due` (``{}``: no tail).
        """
        from .key_model import recorded_key

        out: dict[tuple[str, str], dict] = {}
        for db, table in tables:
            paths = self.paths(db, table)
            try:
                tail_dt = open_table(self.storage, paths.tail)
                key = recorded_key(tail_dt) if tail_dt is not None else None
                if key is None:
                    key = recorded_key(open_table(self.storage, paths.state)) or []
            except Exception as e:  # noqa: BLE001 - reported like a failed compaction
                log.warning("the state of %s.%s could not be opened for compaction: %s", db, table, e)
                out[(db, table)] = {"error": f"{type(e).__name__}: {e}"[:1000]}
                continue
            if tail_dt is None:
                out[(db, table)] = {}
                continue
            out[(db, table)] = self.compact_if_due(paths, tuple(key), force=True)
        return out

    def vacuum_if_due(self, paths: TablePaths) -> dict:
        """Vacuum the table's change log, state and tail when due under :attr:`retention`
        (:mod:`.retention`; never raises). Returns ``{dataset: metrics}`` of those vacuumed."""
        out = {}
        for name, uri in (("changelog", paths.changelog), ("state", paths.state), ("state_tail", paths.tail)):
            m = vacuum_if_due(self.storage, uri, self.retention)
            if m:
                out[name] = m
        return out

    def evolve_schema(self, table_uri: str, schema: pa.Schema) -> pa.Schema:
        """Add columns/struct children of ``schema`` missing from the Delta table; return the union."""
        dt = open_table(self.storage, table_uri)
        if dt is None:
            return schema
        current = pa.schema(dt.schema().to_arrow())
        union = union_schema(current, schema)
        if union.equals(current):
            return current
        from deltalake import CommitProperties, write_deltalake

        try:
            write_deltalake(
                table_uri,
                union.empty_table(),
                mode="append",
                schema_mode="merge",
                storage_options=self.storage.delta_storage_options(),
                commit_properties=CommitProperties(custom_metadata={EVOLVED: "add columns"}),
                post_commithook_properties=PATH_COMMIT_HOOKS,
            )
        except Exception as e:
            raise SinkError(
                f"Cannot evolve the schema of {table_uri} to {union} ({e}). A column type change "
                "that Delta cannot widen needs a re-snapshot of the table into a new location."
            ) from e
        finally:
            changed(table_uri)  # written by path, not through the cached handle
        return union

    # -- a batch of one table ----------------------------------------------------------------
    def write_table_batch(
        self,
        database: str,
        table: str,
        batches: Iterable[pa.RecordBatch],
        *,
        value_schema: pa.Schema,
        truncated_at: BinlogPosition | None = None,
        **commit: Unpack[BatchCommit],
    ) -> TableWriteResult:
        """Append a batch of change events to the change log and apply it to the current state.

        Shorthand for :meth:`open_table_batch`, :meth:`TableBatch.add` of every record batch and
        :meth:`TableBatch.commit`: ``batches`` is consumed in the calling thread (e.g. a snapshot
        scan) while the sink thread writes the previous record batches.

        Args:
            batches: change-log record batches (consumed lazily; they may have different column
                sets after DDL: the lake schema is the union).
            value_schema: the newest column schema of the table (state table columns).
            truncated_at: unused (a TRUNCATE's ``t`` event is a cut marker in the tail).
            commit: where the batch commits (:class:`BatchCommit`: primary_key, app_id, version,
                position, snapshot_position, epoch).

        Raises:
            SinkError: a commit failed or the schema cannot evolve (nothing of that dataset
                was published).
        """

        def fill(tb: TableBatch) -> None:
            for batch in batches:
                tb.add(batch)

        return self._write_batch(database, table, fill, value_schema, truncated_at, commit)

    def _write_batch(
        self,
        database: str,
        table: str,
        fill: Callable[[TableBatch], None],
        value_schema: pa.Schema,
        truncated_at: BinlogPosition | None,
        commit: BatchCommit,
    ) -> TableWriteResult:
        """Open a table batch, ``fill`` it, commit it (abort on any error)."""
        tb = self.open_table_batch(
            database,
            table,
            primary_key=commit["primary_key"],
            app_id=commit["app_id"],
            version=commit["version"],
            snapshot_position=commit.get("snapshot_position"),
            epoch=commit.get("epoch", 0),
        )
        try:
            fill(tb)
        except BaseException:
            tb.abort()
            raise
        return tb.commit(
            value_schema=value_schema, position=commit.get("position"), truncated_at=truncated_at
        )

    def write_files_batch(
        self,
        database: str,
        table: str,
        write: Callable[[list[FileOutput]], list[list[dict]]],
        *,
        log_schema: pa.Schema,
        value_schema: pa.Schema,
        **commit: Unpack[BatchCommit],
    ) -> TableWriteResult:
        """Like :meth:`write_table_batch`, for snapshot events whose data files ``write(outputs)``
        has written for the batch's outputs (:meth:`TableBatch.add_files`: e.g. Spark tasks that
        read the source and write the files themselves, :mod:`..engine.split_files`); then the
        batch commits them.

        Raises:
            whatever ``write`` raises; SinkError: a commit failed (nothing of that dataset was
            published).
        """
        return self._write_batch(
            database, table, lambda tb: tb.add_files(write, log_schema), value_schema, None, commit
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

        The change log's and the tail's data files are written by Spark on the sink thread as
        record batches arrive and stay invisible until :meth:`TableBatch.commit` publishes them
        (:mod:`.table_batch`). ``epoch``: the offset epoch of the events' positions (see
        :meth:`write_table_batch`).
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

    def submit(self, tb: TableBatch, batch: pa.RecordBatch) -> Future:
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


def run_concurrently(
    tasks: list[Callable[[], Any]],
    workers: int,
    on_done: Callable[[int, tuple[Any, BaseException | None]], None] | None = None,
) -> list[tuple[Any, BaseException | None]]:
    """Run ``tasks`` (e.g. one table's commit each) on up to ``workers`` threads; returns
    ``(result, None)`` or ``(None, error)`` per task, in order. ``on_done(index, outcome)`` is
    called in the calling thread as each task finishes (in the order they finish), while the
    others go on: e.g. a table's materialization reported as soon as its own commit is durable
    (issue 42). An error ``on_done`` raises is raised once every task has finished (the tasks
    are never left half-done). Each task must be the only writer
    of the tables it commits to (one table each): it opens them once and refreshes them once
    (:func:`.delta.handle_cache` with ``sole_writer``); delta-rs and the object store serve
    the commits in parallel while they wait (the GIL switch interval is shortened meanwhile, see
    :func:`hold_switch_interval`, so a worker's many short GIL releases cost little)."""
    from .delta import handle_cache

    def run(task: Callable[[], Any]) -> tuple[Any, BaseException | None]:
        with handle_cache(sole_writer=True):
            try:
                return task(), None
            except Exception as e:  # noqa: BLE001 - reported per task
                return None, e

    callback_error: list[BaseException] = []

    def done(i: int, outcome: tuple[Any, BaseException | None]) -> None:
        if on_done is not None and not callback_error:
            try:
                on_done(i, outcome)
            except BaseException as e:  # noqa: BLE001 - raised once the tasks are done
                callback_error.append(e)

    if workers <= 1 or len(tasks) <= 1:
        outcomes = []
        for i, t in enumerate(tasks):
            outcomes.append(run(t))
            done(i, outcomes[-1])
    else:
        release = hold_switch_interval(SINK_SWITCH_INTERVAL_S)
        try:
            with ThreadPoolExecutor(min(workers, len(tasks)), thread_name_prefix="cdc-commit") as pool:
                futures = {pool.submit(run, t): i for i, t in enumerate(tasks)}
                by_index: dict[int, tuple[Any, BaseException | None]] = {}
                for f in as_completed(futures):
                    by_index[futures[f]] = f.result()  # run() returns errors, it never raises
                    done(futures[f], by_index[futures[f]])
                outcomes = [by_index[i] for i in range(len(tasks))]
        finally:
            release()
    if callback_error:
        raise callback_error[0]
    return outcomes


def root_cause(e: BaseException) -> str:
    """The last ``Error:`` line of an exception's text (the executor's own error inside Spark's
    wrapping), or its first line."""
    lines = [ln.strip() for ln in str(e).splitlines() if ln.strip()]
    causes = [ln for ln in lines if "Error:" in ln or "Exception:" in ln]
    return (causes[-1] if causes else (lines[0] if lines else type(e).__name__))[:1000]


__all__ = [
    "LakeWriter",
    "TableBatch",
    "TableWriteResult",
    "hold_switch_interval",
    "run_concurrently",
    "union_schema",
]
