"""One table's part of a batch (a stream window, a snapshot): its change log and its state changes,
written by Spark and committed together (merge-on-read: the state's tail, :mod:`.tail`).

:meth:`TableBatch.add` hands a change-log record batch to the writer's sink thread: one Spark job
writes its change-log Parquet files and its tail rows (:func:`.tail.tail_rows`, one state row per
event) from the executors, uncommitted. :meth:`TableBatch.commit` publishes the change log in one
Delta commit and the tail in another, both with the batch identity ``(app_id, version)`` (Delta
``txn``): a batch a table already has is skipped (exactly-once retries). A window therefore writes
what it changed, whatever the size of the table; the compacted ``state`` is rewritten by
:mod:`.compaction` when the tail has grown past a fraction of it, which the commit checks.

A keyed table's *first* snapshot writes its state rows straight into a new ``state`` table (unique
keys, nothing to merge with: one Spark job writes both datasets) and creates its empty tail, which
records the snapshot's live-row count (:mod:`.live_rows`). A full snapshot of an existing
table writes tail rows and a cut marker at its position (keys it did not read are deleted).

The state tables record their key columns (table property :data:`KEY_PROPERTY`): a batch keyed
another way (the table's primary key changed) never applies its rows over rows keyed the old way:
a keyed full snapshot replaces the state in one commit; otherwise the old rows are removed first
(a key change always comes with a cut or a new snapshot of the table, ``engine/ddl_effects.py``).
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import tempfile
import time
import uuid
import weakref
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

import pyarrow as pa
import pyarrow.compute as pc

from ..errors import SinkError, describe
from ..events import BinlogPosition, change_log_schema, state_schema
from . import row_counts
from .data_files import read_files
from .delta import (
    COMMIT_HOOKS,
    CommitOutcome,
    adopt,
    commit_files,
    delete_files,
    open_table,
    rewrite_files,
    rewrite_table,
    transaction_version,
    wrote,
)
from .evolution import Conformed, conform_schema, conform_table, state_value_field
from .key_model import KEY_PROPERTY, recorded_key
from .layout import TablePaths
from .live_rows import LIVE_ROWS, LIVE_STATE_VERSION, LIVE_TAIL_VERSION, window_delta
from .live_rows import recorded as recorded_live_rows
from .live_rows import remember as remember_live_rows
from .spark_files import FileOutput
from .storage import StorageSettings
from .tail import cut_markers, tail_schema

if TYPE_CHECKING:
    from deltalake import DeltaTable

log = logging.getLogger(__name__)


class BatchWriter(Protocol):
    """What a :class:`TableBatch` needs of the writer it belongs to: the lake, the Spark jobs that
    write its files, and the schema and maintenance steps around its commit. Implemented by
    :class:`.lake.LakeWriter` (which imports this module: the batch sees only this interface)."""

    storage: StorageSettings
    #: the lake schema each Delta table was last rewritten into by this writer (see LakeWriter)
    rewritten_schemas: dict[str, pa.Schema]

    def paths(self, database: str, table: str) -> TablePaths: ...

    def submit(self, tb: TableBatch, batch: pa.RecordBatch) -> Future: ...

    def write_files(
        self, events: pa.Table, outputs: list[FileOutput], manifests: str
    ) -> list[list[dict]]: ...

    def evolve_schema(self, table_uri: str, schema: pa.Schema) -> pa.Schema: ...

    def compact_if_due(
        self, paths: TablePaths, primary_key: tuple[str, ...], *, force: bool = False
    ) -> dict: ...

    def maybe_compact(self, table_uri: str) -> dict | None: ...

    def vacuum_if_due(self, paths: TablePaths) -> dict: ...


@dataclass
class TableWriteResult:
    """What one batch wrote for one table (reported as Dagster metadata).

    ``state`` is the commit of the rows' state changes: the tail's (or a first snapshot's state);
    ``compaction`` what a compaction after the commit did (``{}``: none ran)."""

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


def set_properties(dt: DeltaTable, properties: dict[str, str]) -> None:
    """Set table properties (one metadata commit; delta-rs accepts properties it does not know
    only this way). Best-effort: a concurrent writer may win it; the next batch sets them again."""
    try:
        dt.alter.set_table_properties(
            properties, raise_if_not_exists=False, post_commithook_properties=COMMIT_HOOKS
        )
        wrote(dt)
    except Exception as e:  # pragma: no cover - depends on concurrent writers
        log.warning("could not set %s on %s: %s", properties, dt.table_uri, e)


def _arrow_schema(dt: DeltaTable | None) -> pa.Schema | None:
    return None if dt is None else pa.schema(dt.schema().to_arrow())


def _empty_log_schema(value_schema: pa.Schema, primary_key: tuple[str, ...]) -> pa.Schema:
    return change_log_schema(value_schema, primary_key)


class TableBatch:
    """One table's part of a batch while it is being written (see the module docs).

    Not thread-safe: one producer thread calls :meth:`add` / :meth:`commit` / :meth:`abort`.
    """

    def __init__(
        self,
        writer: BatchWriter,
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
        self.primary_key = tuple(primary_key)
        self.keyless = not primary_key
        self.app_id, self.version = app_id, version
        self.snapshot_position = snapshot_position
        self.paths = writer.paths(database, table)
        self.started = time.monotonic()
        self._manifests: str | None = None  # made by the batch's first job of its own
        self.log_files: list[dict] = []
        self.tail_files: list[dict] = []
        self.state_files: list[dict] = []
        self.rows_by_op: dict[str, int] = {}
        self.live_after: int | None = None  # live rows after the tail commit (.live_rows)
        self.committed_tail: list[str] = []  # the tail files this batch's commit added
        self.log_schema: pa.Schema | None = None
        self.names: list[str] = []
        self.jobs = 0
        self.futures: list[Future] = []
        #: a table of the batch was rewritten while its record batches were prepared (a column
        #: type that widens, through the preparing thread's own handle): the handles the batch was
        #: opened with are refreshed before its commit (see commit)
        self.rewritten = False
        self._dead: str | None = None  # why a record batch failed (the later ones are not written)
        storage = writer.storage
        self.state_dt = open_table(storage, self.paths.state)
        self.tail_dt = open_table(storage, self.paths.tail)
        done = [transaction_version(dt, app_id) for dt in (self.state_dt, self.tail_dt) if dt is not None]
        done_v = max((d for d in done if d is not None), default=None)
        self.skip = done_v is not None and done_v >= version
        if self.skip:
            log.info("state of %s.%s already has batch %s@%s", database, table, app_id, version)
        #: a keyed table's first snapshot: its state rows go straight into a new state table
        self.direct = not self.keyless and snapshot_position is not None and self.state_dt is None
        self.replace = False  # ... or replace a state keyed another way, in one commit
        self.model_changed = False
        self._check_key_model()
        self.lake = _LakeSchemas(writer, self.paths, self)
        #: per column of the newest batch: its source field (the state column metadata to refresh)
        self.source_fields: dict[str, pa.Field] = {}

    @property
    def manifests(self) -> str:
        """The batch's directory of job manifests, made at its first use (a batch written by a job
        of many tables, :meth:`.lake.LakeWriter.write_together`, never needs one)."""
        if self._manifests is None:
            self._manifests = tempfile.mkdtemp(prefix="cdc-manifests-")
        return self._manifests

    def _drop_manifests(self) -> None:
        if self._manifests is not None:
            shutil.rmtree(self._manifests, ignore_errors=True)
            self._manifests = None

    # -- the key model ---------------------------------------------------------------------------
    def _key_json(self) -> str:
        return json.dumps(list(self.primary_key))

    def _check_key_model(self) -> None:
        recorded = recorded_key(self.state_dt) or recorded_key(self.tail_dt)
        if recorded is None or self.skip:
            return
        if recorded == list(self.primary_key):
            return
        log.info(
            "%s.%s is keyed %s in the lake, %s now: its state starts over",
            self.database,
            self.table,
            recorded,
            list(self.primary_key),
        )
        self.model_changed = True
        if self.snapshot_position is not None and not self.keyless:
            self.direct = self.replace = True

    def _start_over(self) -> None:
        """Remove the rows keyed the old way (state and tail) and record the new key."""
        storage = self.w.storage
        # the tables as they are now (the handles opened with this batch predate the commits of
        # the table's earlier batches of the window: a delete on them would keep those rows)
        for dt in (open_table(storage, self.paths.state), open_table(storage, self.paths.tail)):
            if dt is not None:
                dt.delete(post_commithook_properties=COMMIT_HOOKS)
                wrote(dt)
                set_properties(dt, {KEY_PROPERTY: self._key_json()})
        self.state_dt = open_table(self.w.storage, self.paths.state)
        self.tail_dt = open_table(self.w.storage, self.paths.tail)

    # -- adding record batches -------------------------------------------------------------------
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
        self.futures.append(self.w.submit(self, batch))

    def _raise_failed(self) -> None:
        for f in self.futures:
            exc = f.exception() if f.done() else None
            if exc is not None:
                raise exc

    def _wait(self) -> None:
        for f in self.futures:
            f.result()

    def drain(self) -> None:
        """Wait until the record batches added so far are written (errors are kept for
        :meth:`commit`, which raises them)."""
        for f in self.futures:
            try:
                f.result()
            except BaseException:
                pass

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
        self._drop_manifests()

    # -- on the sink thread ------------------------------------------------------------------
    def _write(self, batch: pa.RecordBatch) -> None:
        """Write one record batch (on the sink thread, in order). Once one failed, the later ones
        of this table batch fail without writing."""
        if self._dead is not None:
            raise SinkError(f"an earlier record batch of {self.database}.{self.table} failed: {self._dead}")
        try:
            self._write_one(batch)
        except BaseException as e:
            self._dead = describe(e, 500)
            raise

    def _write_one(self, batch: pa.RecordBatch) -> None:
        outputs, events = self.prepare(batch)
        files = self.w.write_files(events, outputs, self.manifests)
        self._job_written(files)

    def prepare(self, batch: pa.RecordBatch) -> tuple[list[FileOutput], pa.Table]:
        """A record batch's job: its outputs (the lake conformed to its columns, see
        :meth:`_job_outputs`) and its events in the lake's column types (a column whose source
        type changed is converted into the type the lake keeps for it, see .evolution; unchanged
        columns are not copied). The caller writes them and passes the files to
        :meth:`_job_written` (:meth:`.lake.LakeWriter.write_together` does so for many tables)."""
        self._count_ops(batch.column(batch.schema.get_field_index("op")))
        outputs = self._job_outputs(batch.schema)
        return outputs, conform_table(batch, outputs[0].schema)

    def mark_failed(self, error: BaseException) -> None:
        """A job of this batch's record batch failed outside :meth:`add` (a job of many tables):
        the batch is dead, :meth:`commit` raises ``error``."""
        self._dead = describe(error, 500)
        f: Future = Future()
        f.set_exception(error)
        self.futures.append(f)

    def add_files(self, write: Callable[[list[FileOutput]], list[list[dict]]], log_schema: pa.Schema) -> None:
        """Add the data files of snapshot events (``op=r``, change-log schema ``log_schema``) that
        ``write(outputs)`` has something else write for this batch's outputs (the change log, and
        the tail or a first snapshot's state: see :meth:`_job_outputs`) and returns, per output, as
        a Spark job's manifest lists them (e.g. the split snapshot's tasks, which read the source
        and write the files themselves: :mod:`..engine.split_files`). Called on the producer
        thread, after the record batches :meth:`add` queued are written.

        Raises:
            whatever ``write`` raises (call :meth:`abort`).
        """
        self._wait()
        outputs = self._job_outputs(log_schema)
        files = write(outputs)
        self._job_written(files)
        self.rows_by_op["r"] = self.rows_by_op.get("r", 0) + sum(int(f["num_records"]) for f in files[0])

    def _count_ops(self, ops: pa.Array | pa.ChunkedArray) -> None:
        for vc in pc.value_counts(ops).to_pylist():
            self.rows_by_op[vc["values"]] = self.rows_by_op.get(vc["values"], 0) + vc["counts"]

    def _job_outputs(self, log_schema: pa.Schema) -> list[FileOutput]:
        """Conform the lake to a job's events (schema ``log_schema``, the source's column types at
        their position): the change log's and the tail's (or state's) lake schemas take the new
        columns and the supertypes of changed ones, rewriting a table whose column type widens
        (:mod:`.evolution`). Returns the job's outputs: the change log (in its lake schema) and
        the tail rows, or a first snapshot's state rows."""
        target = self.lake.conform_log(log_schema)
        self.log_schema = target
        source_after = list(log_schema.field("after").type)
        lake_after = target.field("after").type
        names = [f.name for f in source_after]
        self.names += [n for n in names if n not in self.names]
        self.source_fields.update({f.name: f for f in source_after})
        values = pa.schema([state_value_field(lake_after.field(f.name), f) for f in source_after])
        wanted = state_schema(values, keyless=self.keyless)
        out = [FileOutput(self.paths.changelog, target)]
        if self.direct:
            lake_state = self.lake.conform_state(wanted)
            st = pa.schema([lake_state.field(f.name) for f in wanted])
            out.append(
                FileOutput(self.paths.state, st, kind="state", value_names=tuple(names), epoch=self.epoch)
            )
        else:
            tl = self.lake.conform_tail(tail_schema(wanted, keyless=self.keyless))
            out.append(
                FileOutput(
                    self.paths.tail,
                    tl,
                    kind="tail",
                    value_names=tuple(names),
                    epoch=self.epoch,
                    keyless=self.keyless,
                )
            )
        return out

    def convert_pending(self, uri: str, written: pa.Schema, schema: pa.Schema) -> None:
        """The files this batch wrote for the table at ``uri`` and has not committed (its
        earlier record batches, in the lake schema ``written``), converted into ``schema``: a
        column type widened in the middle of the batch (a DDL in the window), and the commit
        publishes every file of the batch under the new type (:func:`.delta.rewrite_files`)."""
        pending = {
            self.paths.changelog: self.log_files,
            self.paths.tail: self.tail_files,
            self.paths.state: self.state_files,
        }.get(uri)
        if pending:
            pending[:] = rewrite_files(self.w.storage, uri, pending, written, schema)

    def _job_written(self, files: list[list[dict]]) -> None:
        """Record the data files a job wrote (per output, as :meth:`_job_outputs` listed them)."""
        self.jobs += 1
        self.log_files += files[0]
        if self.direct:
            self.state_files += files[1]
        else:
            self.tail_files += files[1]

    # -- on the producer thread --------------------------------------------------------------
    def commit(
        self,
        *,
        value_schema: pa.Schema,
        position: BinlogPosition | None = None,
        truncated_at: BinlogPosition | None = None,
    ) -> TableWriteResult:
        """Wait for the queued record batches, then publish the batch (see the module docs); a
        compaction of the table follows when its tail is due (:mod:`.compaction`; its failure is
        logged, never raised: the batch is committed).

        Args:
            value_schema: the newest column schema of the table (state table columns).
            position: position recorded in the commit metadata.
            truncated_at: unused (TRUNCATE's ``t`` events are cut markers in the tail).

        Raises:
            SinkError: a write or commit failed (nothing of that dataset was published).
        """
        meta = {"dagster_mysql_cdc.position": str(position)} if position else {}
        storage = self.w.storage
        # the handles the batch was prepared with (on the run's thread), not reloaded; refreshed
        # only when a table was rewritten since (they were current when the batch was opened)
        for uri, dt in (
            (self.paths.state, self.state_dt),
            (self.paths.tail, self.tail_dt),
            (self.paths.changelog, self.lake.log_dt),
        ):
            adopt(uri, dt, current=not self.rewritten)
        try:
            self._wait()
            self.lake.adopt_rewrites()
            if self.log_schema is None:
                self.log_schema = self.lake.conform_log(_empty_log_schema(value_schema, self.primary_key))
            self.w.evolve_schema(self.paths.changelog, self.log_schema)
            log_commit = commit_files(
                storage,
                self.paths.changelog,
                self.log_schema,
                self.log_files,
                mode="append",
                app_id=self.app_id,
                version=self.version,
                metadata=meta,
            )
            if self.skip:  # an earlier attempt committed this batch's state changes
                delete_files(storage, self.paths.tail, self.tail_files)
                delete_files(storage, self.paths.state, self.state_files)
                dt = self.tail_dt or self.state_dt
                state_commit = CommitOutcome(False, dt.version() if dt is not None else -1, 0, 0)
            elif self.direct:
                state_commit = self._commit_state(value_schema, meta)
            else:
                state_commit = self._commit_tail(value_schema, meta)
        except BaseException:
            self.abort()
            raise
        self._drop_manifests()
        extra: dict = {}
        if not self.skip and (self.state_dt is not None or open_table(storage, self.paths.state) is not None):
            self.lake.refresh_state_metadata({**{f.name: f for f in value_schema}, **self.source_fields})
        # also after a skipped batch: an earlier attempt may have committed it and died before
        # its compaction
        extra["compaction"] = self.w.compact_if_due(self.paths, self.primary_key)
        self.w.maybe_compact(self.paths.changelog)
        vacuumed = self.w.vacuum_if_due(self.paths)
        if vacuumed:
            extra["vacuum"] = vacuumed
        extra["live_rows"] = self._live_rows()
        if self.committed_tail:
            extra["tail_files"] = self.committed_tail
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
            extra=extra,
        )

    def _live_rows(self) -> int | None:
        """The current state's live rows after the commit (:func:`.row_counts.live_count`: what the
        tail changed, not the whole table), counted here so that a window's tables are counted
        in parallel with their commits; ``None`` when it cannot be counted (logged)."""
        if self.live_after is not None:  # recorded with the tail commit
            return self.live_after
        try:
            return row_counts.live_count(self.w.storage, self.paths)
        except Exception as e:  # noqa: BLE001 - metadata: the batch is committed
            log.warning("could not count the live rows of %s: %s", self.paths.state, e)
            return None

    def _values_schema(self, value_schema: pa.Schema) -> pa.Schema:
        """The table's state columns in lake types: the newest columns, then those only older
        events had."""
        assert self.log_schema is not None
        lake_after = self.log_schema.field("after").type
        values = [
            state_value_field(lake_after.field(f.name) if lake_after.get_field_index(f.name) >= 0 else f, f)
            for f in value_schema
        ]
        seen = {f.name for f in values}
        values += [lake_after.field(n) for n in self.names if n not in seen]
        return pa.schema(values)

    def _commit_state(self, value_schema: pa.Schema, meta: dict) -> CommitOutcome:
        """A first snapshot's state files: a new state table, or the replacement of one keyed
        another way (and the tail's rows older than the snapshot removed)."""
        storage = self.w.storage
        schema = self.lake.conform_state(
            state_schema(self._values_schema(value_schema), keyless=self.keyless)
        )
        outcome = commit_files(
            storage,
            self.paths.state,
            schema,
            self.state_files,
            mode="overwrite" if self.replace else "append",
            app_id=self.app_id,
            version=self.version,
            metadata=meta,
            properties={KEY_PROPERTY: self._key_json()},
        )
        if self.replace and outcome.committed:
            dt = open_table(storage, self.paths.state)
            assert dt is not None
            set_properties(dt, {KEY_PROPERTY: self._key_json()})
            self.tail_dt = open_table(storage, self.paths.tail)  # as it is now (see _start_over)
            if self.tail_dt is not None and self.snapshot_position is not None:
                from .compaction import older_than_sql

                self.tail_dt.delete(
                    predicate=older_than_sql(self.snapshot_position, -1),
                    post_commithook_properties=COMMIT_HOOKS,
                )
                wrote(self.tail_dt)
                set_properties(self.tail_dt, {KEY_PROPERTY: self._key_json()})
        elif outcome.committed:
            self._open_tail(schema, outcome.table_version)
        self.state_dt = open_table(storage, self.paths.state)
        return outcome

    def _open_tail(self, state: pa.Schema, state_version: int) -> None:
        """After a keyed table's first snapshot (a new state table of ``state``'s schema, at
        ``state_version``): its empty ``state_tail``, with the key property and the live-row
        count (:mod:`.live_rows`: the snapshot's rows, all live) recorded against that version.
        The table's first window then appends to its tail as every later one does, instead of
        creating it (a create, a reopen and a property commit) and counting the state's live rows
        from its log (issue 42: about 60 % more commit work in the first 300-table window after
        the snapshot). Nothing when the batch found a tail (a ``no_data`` capture's windows made
        one); a tail another writer made since gets an empty commit whose count is not trusted
        (its ``LIVE_TAIL_VERSION`` is not the version before it: :func:`.live_rows.recorded`).

        Raises:
            nothing: a tail not created here is created by the table's first window (logged).
        """
        if self.tail_dt is not None:
            return
        storage = self.w.storage
        try:
            rows = sum(int(f["num_records"]) for f in self.state_files)
            commit_files(
                storage,
                self.paths.tail,
                self.lake.conform_tail(tail_schema(state, keyless=False)),
                [],
                mode="append",
                app_id=self.app_id,
                version=self.version,
                metadata={
                    LIVE_ROWS: str(rows),
                    LIVE_STATE_VERSION: str(state_version),
                    LIVE_TAIL_VERSION: "-1",
                },
                properties={KEY_PROPERTY: self._key_json()},
            )
        except SinkError as e:
            log.warning("%s: its first window creates it instead (%s)", self.paths.tail, e)

    def _commit_tail(self, value_schema: pa.Schema, meta: dict) -> CommitOutcome:
        """The tail rows of the batch in one commit (with a full snapshot's cut marker)."""
        storage = self.w.storage
        if self.model_changed:
            self._start_over()
        schema = self.lake.conform_tail(
            tail_schema(
                state_schema(self._values_schema(value_schema), keyless=self.keyless), keyless=self.keyless
            )
        )
        files = list(self.tail_files)
        if self.snapshot_position is not None:
            files.append(self._write_cut(schema, self.snapshot_position))
        if self.tail_dt is not None:
            self.w.evolve_schema(self.paths.tail, schema)
        live = None if self.model_changed or self.snapshot_position is not None else self._live_after(schema)
        if live is not None:
            meta = {
                **meta,
                LIVE_ROWS: str(live[0]),
                LIVE_STATE_VERSION: str(live[1]),
                LIVE_TAIL_VERSION: str(live[2]),
            }
        before = self.tail_dt.version() if self.tail_dt is not None else None
        outcome = commit_files(
            storage,
            self.paths.tail,
            schema,
            files,
            mode="append",
            app_id=self.app_id,
            version=self.version,
            metadata=meta,
            properties={KEY_PROPERTY: self._key_json()},
        )
        self.tail_dt = open_table(storage, self.paths.tail)
        if outcome.committed and self.tail_dt is not None and before is not None:
            from .compaction import appended

            appended(self.tail_dt, before, files)  # its compaction check does not list it again
        if live is not None and outcome.committed:
            self.live_after = live[0]
            if self.tail_dt is not None and self.tail_dt.version() == live[2] + 1 == outcome.table_version:
                remember_live_rows(self.tail_dt, live[1], live[0])
        if outcome.committed:
            self.committed_tail = [str(f["path"]) for f in files]
        return outcome

    def _live_after(self, schema: pa.Schema) -> tuple[int, int, int] | None:
        """The live rows after this batch's tail commit, the state version they are counted
        against and the tail version they were read at (:mod:`.live_rows`): the count the last
        tail commit recorded plus the batch's ``c - d``; counted exactly first when no recorded
        count holds. A keyless batch that deletes or updates copies changes the count by what
        its tail rows (read back, in ``schema``) do to the values' current counts
        (:func:`.row_counts.keyless_live_change`: a copy the lake never had is not removed). ``None``
        when the batch's ops do not say the change (snapshot reads) or counting failed (logged)."""
        delta = window_delta(self.rows_by_op)
        if delta is None:
            return None
        storage = self.w.storage
        try:
            tail_dt = open_table(storage, self.paths.tail)
            state_dt = open_table(storage, self.paths.state)
            base = recorded_live_rows(tail_dt, state_dt)
            if base is None:
                base = row_counts.live_count(storage, self.paths) or 0
            if self.keyless and (self.rows_by_op.get("d") or self.rows_by_op.get("u")):
                mine = read_files(storage, self.paths.tail, [str(f["path"]) for f in self.tail_files], schema)
                delta = row_counts.keyless_live_change(storage, self.paths, mine, opened=(state_dt, tail_dt))
            return (
                base + delta,
                state_dt.version() if state_dt is not None else -1,
                tail_dt.version() if tail_dt is not None else -1,
            )
        except Exception as e:  # noqa: BLE001 - metadata: counted after the commit instead
            log.warning("could not count the live rows of %s before its commit: %s", self.paths.state, e)
            return None

    def _write_cut(self, schema: pa.Schema, at: BinlogPosition) -> dict:
        """A data file in the tail with the cut marker of a full snapshot at ``at`` (every key the
        snapshot did not read, older than it, is deleted)."""
        import pyarrow.parquet as pq

        storage = self.w.storage
        marks = cut_markers(
            files=pa.array([at.file]),
            positions=pa.array([at.pos], pa.int64()),
            row=-1,
            op="r",
            epoch=at.epoch,
            like=schema,
            snapshot="true",
            gtids=pa.array([at.gtid_set], pa.string()),
        )
        rel = f"cut-{uuid.uuid4().hex}.parquet"
        fs = storage.pyarrow_filesystem()
        base = storage.fs_path(self.paths.tail)
        if not storage.is_s3:
            os.makedirs(base, exist_ok=True)
        pq.write_table(marks, f"{base}/{rel}", filesystem=fs)
        size = fs.get_file_info(f"{base}/{rel}").size
        return {
            "path": rel,
            "size": int(size),
            "num_records": 1,
            "modification_time": int(time.time() * 1000),
        }


class _LakeSchemas:
    """The lake schemas of one table batch's change log, tail and state, conformed to each record
    batch (:func:`.evolution.conform_schema`): new columns are added, a column whose type the lake
    cannot hold as it is gets its supertype, and the table holding it is rewritten first
    (:func:`.delta.rewrite_table`), so the data files written next match the table's schema. The
    compacted state takes the tail's types at its next compaction (which rewrites it anyway)."""

    def __init__(self, writer: BatchWriter, paths: TablePaths, batch: TableBatch):
        self.w = writer
        self.paths = paths
        self._batch = weakref.ref(batch)  # no cycle: a batch's writer is released with it
        self._log: pa.Schema | None = None
        self._log_read = False
        self.log_dt: DeltaTable | None = None  # the change log's handle, once read
        self.tail: pa.Schema | None = None if batch.model_changed else _arrow_schema(batch.tail_dt)
        self.state: pa.Schema | None = None if batch.replace else _arrow_schema(batch.state_dt)

    @property
    def log(self) -> pa.Schema | None:
        if not self._log_read:
            self.log_dt = open_table(self.w.storage, self.paths.changelog)
            self._log = _arrow_schema(self.log_dt)
            self._log_read = True
        return self._log

    def conform_log(self, incoming: pa.Schema) -> pa.Schema:
        """The change log's lake schema for events of schema ``incoming`` (rewriting it first when
        a column's type widens)."""
        self._log = self._conformed(self.paths.changelog, self.log, incoming, keep_metadata=False).schema
        return self._log

    def conform_tail(self, incoming: pa.Schema) -> pa.Schema:
        """The tail's lake schema for tail rows of schema ``incoming`` (rewritten when a column's
        type widens: the tail is small)."""
        c = self._conformed(self.paths.tail, self.tail, incoming, keep_metadata=True)
        if self.tail is not None and c.changed:
            batch = self._batch()
            if batch is not None:
                batch.tail_dt = open_table(self.w.storage, self.paths.tail)
        self.tail = c.schema
        return c.schema

    def conform_state(self, incoming: pa.Schema) -> pa.Schema:
        """The state's lake schema for a first snapshot's state rows of schema ``incoming``."""
        self.state = self._conformed(self.paths.state, self.state, incoming, keep_metadata=True).schema
        return self.state

    def _conformed(
        self, uri: str, lake: pa.Schema | None, incoming: pa.Schema, *, keep_metadata: bool
    ) -> Conformed:
        """:func:`.evolution.conform_schema` of ``lake`` and ``incoming``; the Delta table at
        ``uri`` is rewritten first when a column's type widens."""
        c = conform_schema(lake, incoming, keep_metadata=keep_metadata)
        if lake is not None and c.changed:
            batch = self._batch()
            if batch is not None:
                batch.rewritten = True
                batch.convert_pending(uri, lake, c.schema)
            rewrite_table(
                self.w.storage, uri, c.schema, reason=f"column(s) {', '.join(c.changed)} change type"
            )
            self.w.rewritten_schemas[uri] = c.schema
        return c

    def adopt_rewrites(self) -> None:
        """Take the column types another batch of the same table rewrote the change log or the
        tail into after this batch was prepared (a later part of the window: a DDL that changes
        the table's key ends a part, and the next part's first record batch may widen a column),
        converting this batch's files (:meth:`TableBatch.convert_pending`): every file a commit
        publishes holds the values in the unit its table declares."""
        batch = self._batch()
        if batch is None:
            return
        log = self._log if self._log_read else None  # unread: read at the commit, as it is now
        for uri, mine, keep in ((self.paths.changelog, log, False), (self.paths.tail, self.tail, True)):
            theirs = self.w.rewritten_schemas.get(uri)
            if theirs is None or mine is None:
                continue
            c = conform_schema(mine, theirs, keep_metadata=keep)
            if c.changed:
                batch.convert_pending(uri, mine, c.schema)
            if c.changed or c.added:
                if uri == self.paths.changelog:
                    self._log = batch.log_schema = c.schema
                else:
                    self.tail = c.schema

    def refresh_state_metadata(self, fields: dict[str, pa.Field]) -> None:
        """Set the state table's column metadata to the source's (``fields``: the newest source
        field of each column; ``mysql.type``, ENUM members ...) where it changed: a metadata-only
        Delta commit, no data rewritten. Best-effort."""
        dt = open_table(self.w.storage, self.paths.state)
        if dt is None or not fields:
            return
        lake = pa.schema(dt.schema().to_arrow())
        for name, src in fields.items():
            if name not in lake.names:
                continue
            cur = lake.field(name)
            want = state_value_field(cur, src).metadata or {}
            have = cur.metadata or {}
            update = {k.decode(): v.decode() for k, v in want.items() if have.get(k) != v}
            update.update({k.decode(): "" for k in have if k not in want and have[k]})
            if update:
                try:
                    dt.alter.set_column_metadata(name, update, post_commithook_properties=COMMIT_HOOKS)
                    wrote(dt)
                except Exception as e:  # pragma: no cover - concurrent writers
                    log.warning("could not refresh the metadata of %s.%s: %s", self.paths.state, name, e)
                    return
                reopened = open_table(self.w.storage, self.paths.state)
                assert reopened is not None
                dt = reopened
