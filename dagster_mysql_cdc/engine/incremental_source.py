"""The incremental snapshot's side of one binlog window: planned chunks, watermark windows, dedup.

:mod:`.incremental` plans the chunks at the start of a window run (watermark rows written, chunk
rows read and stashed, see :mod:`.watermark`); :class:`IncrementalSnapshotSource` is what happens
to them while the window's binlog is read by :class:`~.stream.BinlogStreamingSource`: a chunk's
window opens at its low watermark event, every key the binlog changes inside it is dropped from
the chunk, and at the high watermark event the remaining rows are emitted as ``op=r`` events
(``source.snapshot=incremental``), with the deletes of a repair and of rows absent from the
source. It also holds the snapshot progress (:class:`~.incremental.IncrementalState`) that the
signals of the window change (:class:`~.signals.SignalProcessor`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from ..events import BinlogPosition, now_ms, snapshot_events
from ..sink.storage import StorageSettings
from ..source.binlog import RowsBatch
from ..source.catalog import read_table_schemas
from ..source.connection import ConnectionSettings, ServerInfo, connect
from ..source.schema import TableSchema
from ..source.signals import matches_collection
from ..source.types import TypeOptions
from .absent_rows import delete_events, key_tuples
from .gaps import REPAIR_HEADER
from .incremental import (
    ChunkPlan,
    IncrementalState,
    PlannedChunk,
    load_plan,
    read_absent,
    read_chunk,
    save_plan,
    start_snapshot,
    stop_snapshot,
    with_paused,
)
from .incremental_chunks import plan_chunks
from .watermark import without_keys

if TYPE_CHECKING:
    from ..sink.lake import LakeWriter
    from .table_events import TableEvents
    from .window_result import WindowResult


@dataclass(frozen=True)
class IncrementalOptions:
    """Signal table and incremental snapshot options.

    Attributes:
        signal_table: ``db.table`` of the signal table (Debezium ``signal.data.collection``);
            ``None`` disables signals and incremental snapshots.
        chunk_size: rows per chunk (``incremental.snapshot.chunk.size``).
        max_chunks_per_run: chunks read per window run (bounds a run's snapshot work).
        watermark_strategy: ``insert_insert`` or ``insert_delete``
            (``incremental.snapshot.watermarking.strategy``).
        read_only: read-only incremental snapshot (``read.only``): no watermark rows; the binlog
            positions (and GTID sets) before and after each chunk SELECT are its watermarks.
        split_reads: read a run's chunks of a table as parallel splits on the Spark executors,
            inside one watermark window (:func:`~.incremental_chunks.plan_chunks`); ``max_connections``
            caps the tasks reading the source at once (0: one per Spark core), ``split_rows``
            the rows of one task's read.
        run_seconds: time budget of a run's chunk reads (0: only ``max_chunks_per_run`` bounds it).
    """

    signal_table: str | None = None
    chunk_size: int = 1024
    max_chunks_per_run: int = 64
    watermark_strategy: str = "insert_insert"
    read_only: bool = False
    split_reads: bool = False
    max_connections: int = 0
    split_rows: int = 100_000
    run_seconds: float = 0.0


class IncrementalSnapshotSource:
    """The incremental snapshot during one binlog window (Debezium
    ``AbstractIncrementalSnapshotChangeEventSource`` / ``SignalBasedIncrementalSnapshotChangeEventSource``,
    and ``MySqlReadOnlyIncrementalSnapshotChangeEventSource`` for ``read_only``).

    Lifecycle: :meth:`plan` (before the binlog is read: loads or makes the window's chunk plan and
    may extend the window end), then, in binlog order, :meth:`open_window` / :meth:`close_window`
    (watermark rows of the signal table), :meth:`positional_watermarks` (read-only chunks, whose
    watermarks are binlog positions), :meth:`touched` (the key set a captured table's row events
    are recorded in), the signal actions (:meth:`pause`, :meth:`stop`, :meth:`add_tables`), and
    at the end :meth:`flush_positional`, :meth:`resume_before_blocking` and :meth:`final_state`.

    Args:
        table_events: the streaming source's per-table event sink (``None``: table not captured);
            chunk rows go there, in binlog order with the table's change events.
        result: the window's result: ``signal_log`` and ``chunks`` are appended to.
        state: the snapshot progress at the window start (``None``: no snapshot).
        writer: the lake writer (with ``options.split_reads``, its Spark session reads the chunks).

    Chunk state: ``open_windows`` maps a table to its open chunk and the keys the binlog touched
    inside the window; ``seen`` holds the keys of planned tables touched outside chunk windows (a
    lake row the binlog changes in this window is not deleted as absent); ``stopped`` the tables a
    stop-snapshot removed before their chunk closed (the chunk is dropped).
    """

    def __init__(
        self,
        settings: ConnectionSettings,
        info: ServerInfo,
        *,
        storage: StorageSettings,
        server_name: str,
        options: IncrementalOptions,
        type_options: TypeOptions,
        result: WindowResult,
        table_events: Callable[[str, str], TableEvents | None],
        state: IncrementalState | None,
        writer: LakeWriter | None = None,
    ):
        self.settings = settings
        self.info = info
        self.storage = storage
        self.server_name = server_name
        self.options = options
        self.type_options = type_options
        self.result = result
        self.table_events = table_events
        self.writer = writer
        # the state after the planned chunks, and the state at the window start (a blocking
        # snapshot pauses streaming before the planned chunks: they are re-planned later)
        self.state = state.copy() if state else None
        self.state_before = state.copy() if state else None
        self.chunks_by_open: dict[str, PlannedChunk] = {}
        self.chunks_by_close: dict[str, PlannedChunk] = {}
        self.positional: list[PlannedChunk] = []
        self.open_windows: dict[str, tuple[PlannedChunk, set]] = {}  # table -> (chunk, touched keys)
        self.seen: dict[str, set] = {}
        self.stopped: set[str] = set()
        self.emitted: set[str] = set()  # ids of the chunks whose high watermark was read
        # converted keys each table's chunks deleted in this window: a key is deleted once, even
        # when two chunks (two repairs of the table) find it gone
        self.deleted: dict[str, set] = {}
        self.planned: list[PlannedChunk] = []  # the window's chunks, in plan order
        # the window's offset epoch (set by plan()): every position built from the binlog takes it
        self.start = BinlogPosition("", 0)

    # -- before the binlog is read ------------------------------------------------------------
    def plan(self, start: BinlogPosition, end: BinlogPosition) -> BinlogPosition:
        """Load the chunk plan of the window starting at ``start`` (an earlier attempt's) or make
        and save one (:func:`~.incremental_chunks.plan_chunks`), when a snapshot is active and not paused.

        Returns:
            The window end: ``end``, or just after the last chunk's high watermark if later (also
            set as ``result.end``).
        """
        self.start = start
        state = self.state
        if self.options.signal_table and state is not None and state.active and not state.paused:
            plan = load_plan(self.storage, self.server_name, start, state)
            if plan is None:
                plan = self._new_plan(state, start)
            else:
                self.result.signal_log.append(
                    f"reusing the chunk plan of an earlier attempt ({len(plan.chunks)} chunks)"
                )
            self.state = IncrementalState.from_dict(plan.state_after)
            self.planned = list(plan.chunks)
            for c in plan.chunks:
                if c.low is not None and c.high is not None:
                    self.positional.append(c)  # read-only watermarks: binlog positions, not rows
                else:
                    self.chunks_by_open[c.open_id] = c
                    self.chunks_by_close[c.close_id] = c
                self.chunks_by_close.setdefault(c.close_id, c)  # stop-snapshot bookkeeping
            if plan.end is not None and plan.end.with_epoch(start.epoch).sort_key() > end.sort_key():
                end = plan.end.with_epoch(start.epoch)
                self.result.end = end
        # keys of the planned tables touched by this window before their chunk closes (outside chunk
        # windows and in earlier chunks' windows): a lake row the binlog changes in this window is not
        # deleted as absent (the binlog's own event says what happened)
        self.seen = {c.table: set() for c in [*self.chunks_by_close.values(), *self.positional]}
        return end

    def _new_plan(self, state: IncrementalState, start: BinlogPosition) -> ChunkPlan:
        """Plan this window's chunks (watermarks written, rows stashed) and save the plan
        create-if-absent (a concurrent attempt's plan wins and is returned)."""
        conn = connect(self.settings)
        try:
            current = read_table_schemas(conn, [p.key for p in state.tables])
        finally:
            conn.close()
        inc = self.options
        assert inc.signal_table is not None  # plans are made only with a signal table
        planned, after, plan_end = plan_chunks(
            self.settings,
            self.info,
            state,
            current,
            storage=self.storage,
            server_name=self.server_name,
            signal_table=inc.signal_table,
            chunk_size=inc.chunk_size,
            max_chunks=inc.max_chunks_per_run,
            type_options=self.type_options,
            strategy=inc.watermark_strategy,
            read_only=inc.read_only,
            epoch=start.epoch,
            writer=self.writer if inc.split_reads else None,
            max_connections=inc.max_connections,
            split_rows=inc.split_rows,
            seconds=inc.run_seconds,
        )
        plan = ChunkPlan(start, plan_end, planned, after.to_dict())
        return save_plan(self.storage, self.server_name, plan, state)

    # -- while the binlog is read -------------------------------------------------------------
    def touched(self, table: str) -> set | None:
        """The set the keys of ``table`` (``db.table``) changed by a row event go to: the open
        chunk window's, else the planned table's ``seen`` set, else ``None`` (not recorded)."""
        window = self.open_windows.get(table)
        return window[1] if window else self.seen.get(table)

    def open_window(self, open_id: str) -> None:
        """Low watermark row ``open_id`` (``snapshot-window-open``) read: its chunk's window opens."""
        c = self.chunks_by_open.get(open_id)
        if c is not None:
            self.open_windows[c.table] = (c, set())

    def close_window(self, close_id: str, ev: RowsBatch) -> None:
        """High watermark row ``close_id`` read in event ``ev`` (a ``snapshot-window-close``
        insert, or the open row's delete with ``insert_delete``): its chunk is emitted there."""
        c = self.chunks_by_close.get(close_id)
        if c is not None:
            self._emit_chunk(c, ev)

    def positional_watermarks(self, file: str, pos: int) -> None:
        """Read-only chunks: open at their low position, close (emit) at their high position."""
        here = self.start.at(file, pos).sort_key()
        server_id = self.info.server_id
        for c in list(self.positional):
            assert c.low is not None and c.high is not None  # read-only chunks carry both positions
            low = BinlogPosition.from_dict(c.low).with_epoch(self.start.epoch)
            high = BinlogPosition.from_dict(c.high).with_epoch(self.start.epoch)
            if here >= high.sort_key():
                self.positional.remove(c)
                self.open_windows.setdefault(c.table, (c, set()))
                self._emit_chunk(
                    c,
                    RowsBatch(
                        file=high.file,
                        pos=high.pos,
                        ts_ms=now_ms(),
                        server_id=server_id,
                        gtid=None,
                        thread=None,
                        database="",
                        table="",
                        op="r",
                        rows=[],
                        query=None,
                        column_names=[],
                    ),
                )
            elif here >= low.sort_key() and c.table not in self.open_windows:
                self.open_windows[c.table] = (c, set())

    def flush_positional(self, position: BinlogPosition) -> None:
        """High watermarks of read-only chunks at the very end of the window (``position``)."""
        self.positional_watermarks(position.file, position.pos)
        for c in list(self.positional):  # a high watermark can equal the window end exactly
            assert c.high is not None
            self.positional_watermarks(c.high["file"], c.high["pos"])

    # -- signal actions (see .signals.SignalProcessor) ------------------------------------------
    def pause(self, paused: bool) -> None:
        """``pause-snapshot`` (``True``) / ``resume-snapshot`` (``False``)."""
        self.state, self.state_before = (
            with_paused(self.state, paused),
            with_paused(self.state_before, paused),
        )

    def stop(self, data_collections: Sequence[str]) -> None:
        """``stop-snapshot`` of the tables matching ``data_collections`` (empty: all): their queued
        progress is removed and their planned chunks not yet closed are dropped."""
        if data_collections:
            self.stopped.update(
                t for t in self.open_windows if any(matches_collection(p, t) for p in data_collections)
            )
            self.stopped.update(
                c.table
                for c in self.chunks_by_close.values()
                if any(matches_collection(p, c.table) for p in data_collections)
            )
        else:
            self.stopped.update(c.table for c in self.chunks_by_close.values())
        self.state = stop_snapshot(self.state, list(data_collections))
        self.state_before = stop_snapshot(self.state_before, list(data_collections))

    def add_tables(
        self,
        signal_id: str,
        tables: list[tuple[str, str]],
        conditions: dict[str, str],
        schemas: dict[tuple[str, str], TableSchema],
        *,
        conn: Any,
        reason: str | None,
        delete_keys: Sequence[Sequence[Any]],
    ) -> list[str]:
        """Incremental ``execute-snapshot`` of ``tables``: queued (:func:`~.incremental.start_snapshot`;
        filters probed on ``conn`` if given), and no longer stopped.

        Returns:
            log messages.
        Raises:
            InvalidSignal, IncrementalSnapshotError: the signal is skipped (nothing changed).
        """
        state, msgs = start_snapshot(
            self.state,
            signal_id,
            tables,
            conditions,
            schemas,
            conn=conn,
            reason=reason,
            delete_keys=delete_keys,
        )
        state_before, _ = start_snapshot(
            self.state_before,
            signal_id,
            tables,
            conditions,
            schemas,
            reason=reason,
            delete_keys=delete_keys,
        )
        self.state, self.state_before = state, state_before
        self.stopped.difference_update(f"{d}.{t}" for d, t in tables)
        return msgs

    # -- at the end of the window -----------------------------------------------------------
    def resume_before_blocking(self) -> None:
        """A blocking snapshot paused streaming before the planned chunks: back to the state at
        the window start (the chunks are re-planned later)."""
        self.state = self.state_before

    def requeue_unclosed(self, end: BinlogPosition) -> list[str]:
        """Planned chunks whose high watermark was not read in the window (their watermark rows
        reached the binlog in no form the window reads: a binlog filter on the signal table's
        database, a statement the signal reader cannot read ...): their tables are put back in the
        snapshot progress at the first such chunk's lower bound, to be planned again with new
        watermarks, instead of being dropped while the progress had moved past them.

        Returns:
            one WARNING line per table put back (also in ``result.signal_log``).
        """
        missing: dict[str, PlannedChunk] = {}
        for c in self.planned:
            if c.id not in self.emitted and c.table not in self.stopped:
                missing.setdefault(c.table, c)
        if not missing:
            return []
        state = self.state.copy() if self.state is not None else None
        before = {p.table: p for p in (self.state_before.tables if self.state_before else [])}
        lines = []
        for table, c in missing.items():
            prog = before.get(table)
            if prog is None:
                continue
            prog = replace(prog, last_key=c.key_lo)
            if state is None:
                assert self.state_before is not None  # the plan came from it
                state = IncrementalState(
                    snapshot_id=self.state_before.snapshot_id, chunk_seq=self.state_before.chunk_seq
                )
            state.tables = [prog, *(p for p in state.tables if p.table != table)]
            state.done = [d for d in state.done if d != table]
            lines.append(
                f"chunk {c.id} of {table}: its watermark rows were not found in the binlog up to {end} "
                "(as rows or as a readable statement): the table is read again from that chunk on, "
                "with new watermarks; check that the signal table's writes reach the binlog "
                "(no binlog_ignore_db/replicate filter on its database)"
            )
        self.state = state
        self.result.signal_log.extend(lines)
        self.result.signals_rejected.extend(lines)
        return lines

    def final_state(self) -> dict | None:
        """The progress to report (``None``: no active snapshot; a finished snapshot leaves
        nothing behind, and a pause without active tables is a no-op, as in Debezium)."""
        return self.state.to_dict() if self.state is not None and self.state.active else None

    # -- emitting a chunk at its high watermark -----------------------------------------------
    def _emit_chunk(self, c: PlannedChunk, ev: RowsBatch) -> None:
        """Emit chunk ``c`` at its high watermark event ``ev``: its rows the binlog did not touch
        inside the window as ``op=r``, then the repair's deletes and the deletes of lake rows
        absent from the source; a line in ``result.chunks``."""
        _, touched = self.open_windows.pop(c.table, (c, set()))
        self.emitted.add(c.id)
        if c.table in self.stopped:
            self.result.signal_log.append(f"chunk {c.id} of stopped table {c.table} dropped")
            return
        db, _, t = c.table.partition(".")
        te = self.table_events(db, t)
        if te is None:
            return
        target = te.conv.arrow_schema
        batch = _in_layout(read_chunk(self.storage, c), target)
        if touched:
            batch = without_keys(batch, te.conv.table.primary_key, touched)
        emitted = batch.num_rows
        te.append_batch(self._chunk_events(c, te, ev, batch, "r"))
        info_row: dict[str, Any] = {
            "chunk": c.id,
            "table": c.table,
            "read": c.rows,
            "emitted": emitted,
            "dropped": c.rows - emitted,
            "key_lo": c.key_lo,
            "key_hi": c.key_hi,
            # the table's progress after this chunk (cumulative; None in a plan saved before)
            "table_chunks": c.table_chunks,
            "table_rows": c.table_rows,
        }
        done = self.deleted.setdefault(c.table, set())
        gone_keys: set[tuple] = set()
        if c.deletes_path:
            gone_keys = self._emit_repair_deletes(c, te, ev, touched | done, info_row)
            done |= gone_keys
        # keys the binlog changed, and keys this window's deletes above already cover
        deleted = self._emit_absent_deletes(c, te, ev, touched | self.seen.get(c.table, set()) | done)
        if c.table in self.seen:  # the next chunks of the table leave these keys to the binlog too
            self.seen[c.table] |= touched
        info_row["deleted_absent_from_source"] = deleted
        if c.reason:
            info_row["repair"] = c.reason
        self.result.chunks.append(info_row)

    def _chunk_events(
        self, c: PlannedChunk, te: TableEvents, ev: RowsBatch, rows: pa.RecordBatch, op: str
    ) -> pa.RecordBatch:
        """``op`` events of the chunk's rows at the high watermark (``source.snapshot=incremental``)."""
        return snapshot_events(
            rows,
            primary_key=te.conv.table.primary_key,
            server_name=self.server_name,
            server_id=ev.server_id,
            database=te.schema.database,
            table=te.schema.table,
            position=self.start.at(ev.file, ev.pos),
            snapshot_flags=pa.repeat(pa.scalar("incremental"), rows.num_rows),
            snapshot_ts_ms=ev.ts_ms,
            op=op,
            headers={REPAIR_HEADER: c.reason} if c.reason else None,
        )

    def _emit_repair_deletes(
        self, c: PlannedChunk, te: TableEvents, ev: RowsBatch, touched: set, info_row: dict[str, Any]
    ) -> set[tuple]:
        """Keys a repair found gone from the source (between the watermarks): deleted at the high
        watermark unless the binlog changed them inside the window. Returns the keys deleted."""

        assert c.deletes_path is not None
        gone = _in_layout(read_chunk(self.storage, c, c.deletes_path), te.conv.arrow_schema)
        if touched:
            gone = without_keys(gone, te.conv.table.primary_key, touched)
        te.append_batch(self._chunk_events(c, te, ev, gone, "d"))
        info_row["deleted"] = gone.num_rows
        return key_tuples(gone, te.conv.table.primary_key)

    def _emit_absent_deletes(self, c: PlannedChunk, te: TableEvents, ev: RowsBatch, skip_keys: set) -> int:
        """Deletes of the lake rows of the chunk's key range the source no longer had (except
        ``skip_keys``). Returns how many were emitted."""

        absent = read_absent(self.storage, c)
        if absent is None:
            return 0
        target = te.conv.arrow_schema
        values = pa.table(
            [
                absent.column(f.name).cast(f.type)
                if f.name in absent.column_names
                else pa.nulls(absent.num_rows, f.type)
                for f in target
            ],
            schema=target,
        )
        deletes = delete_events(
            values,
            schema=te.conv.table,
            value_schema=target,
            server_name=self.server_name,
            server_id=ev.server_id,
            position=self.start.at(ev.file, ev.pos),
            source_ts_ms=ev.ts_ms,
            skip_keys=skip_keys,
        )
        te.append_batch(deletes)
        if deletes.num_rows:
            self.deleted.setdefault(c.table, set()).update(
                key_tuples(values, te.conv.table.primary_key) - skip_keys
            )
        return deletes.num_rows


def _in_layout(rows: pa.Table, target: pa.Schema) -> pa.RecordBatch:
    """Stashed chunk rows in the table's current column layout, built column-wise (no per-row work)."""
    return pa.RecordBatch.from_arrays(
        [
            (
                rows.column(f.name).combine_chunks()
                if f.name in rows.column_names
                else pa.nulls(rows.num_rows, f.type)
            ).cast(f.type)
            for f in target
        ],
        schema=target,
    )
