"""Incremental snapshots with watermark windows (Netflix DBLog; Debezium incremental snapshot).

A table is read in primary-key order in chunks while streaming continues, without locks. For each
chunk: write a *low watermark* row to the signal table, ``SELECT`` the chunk, write a *high
watermark* row. While reading the binlog, every key that a row event touches between the chunk's
low and high watermark is dropped from the chunk buffer (the binlog has a version at least as new);
at the high watermark the remaining rows are emitted as ``op=r`` events with
``source.snapshot="incremental"`` at the high watermark's position. Rows therefore order after all
events before the window and before all events after it, and the current state converges.

How it fits the bounded window runs of the binlog sensor:

- the snapshot progress (:class:`IncrementalState`: queued tables, current table, last key, max
  key, chunk counter, paused) travels in the sensor cursor and run tags, and is reported back by
  the run, so it survives restarts: a resumed snapshot continues after the last emitted chunk;
- at the start of a window run, up to ``max_chunks_per_run`` chunks are *planned*: watermarks
  written, chunks read and stored in the lake staging area, the window end extended to just after
  the last high watermark. The plan is saved with a create-if-absent write keyed by the window
  start, so a retried run reuses exactly the same chunks, watermarks and end: the window stays
  deterministic and its idempotent commits stay correct;
- signals (``execute-snapshot``, ``stop-snapshot``, ``pause-snapshot``, ``resume-snapshot``) are
  applied in binlog order while the window is read; a chunk whose table was stopped before its high
  watermark is dropped. Chunk memory is bounded by ``chunk_size`` (one chunk in memory at a time).

Watermark strategies (Debezium ``incremental.snapshot.watermarking.strategy``): ``insert_insert``
writes an open row and a close row; ``insert_delete`` writes the open row and deletes it as the
high watermark (the signal table stays empty).
"""

from __future__ import annotations

import base64
import datetime as _dt
import decimal
import json
import logging
import time
import uuid
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pymysql

from ..errors import CdcError
from ..events import BinlogPosition
from ..sink.layout import LakeLayout
from ..sink.storage import StorageSettings
from ..source.connection import ConnectionSettings, ServerInfo, connect, current_position
from ..source.schema import TableSchema
from ..source.signals import validate_filter
from ..source.snapshot import convert_snapshot_rows
from ..source.types import TableConverter, TypeOptions, quote_identifier, select_expression
from .watermark import WATERMARK_STRATEGIES, close_window, log_rows, open_window

if TYPE_CHECKING:
    from ..sink.lake import LakeWriter
    from .absent_rows import LakeLiveRows

log = logging.getLogger(__name__)


# -- key (de)serialisation: raw pymysql key values <-> JSON ------------------------------------
def encode_key(values: Sequence[Any]) -> list[Any]:
    """JSON-safe form of raw key values (as pymysql returns them), reversible by :func:`decode_key`."""
    out: list[Any] = []
    for v in values:
        if v is None or isinstance(v, (bool, int, float, str)):
            out.append(v)
        elif isinstance(v, decimal.Decimal):
            out.append({"dec": str(v)})
        elif isinstance(v, _dt.datetime):
            out.append({"dt": v.isoformat()})
        elif isinstance(v, _dt.date):
            out.append({"d": v.isoformat()})
        elif isinstance(v, _dt.timedelta):
            out.append({"td": v.total_seconds()})
        elif isinstance(v, (bytes, bytearray)):
            out.append({"b64": base64.b64encode(bytes(v)).decode()})
        else:
            out.append({"s": str(v)})
    return out


def decode_key(values: Sequence[Any]) -> list[Any]:
    """Inverse of :func:`encode_key` (values to bind as SQL parameters)."""
    out: list[Any] = []
    for v in values:
        if not isinstance(v, dict):
            out.append(v)
        elif "dec" in v:
            out.append(decimal.Decimal(v["dec"]))
        elif "dt" in v:
            out.append(_dt.datetime.fromisoformat(v["dt"]))
        elif "d" in v:
            out.append(_dt.date.fromisoformat(v["d"]))
        elif "td" in v:
            out.append(_dt.timedelta(seconds=v["td"]))
        elif "b64" in v:
            out.append(base64.b64decode(v["b64"]))
        else:
            out.append(v.get("s"))
    return out


# -- progress ----------------------------------------------------------------------------------
@dataclass
class TableProgress:
    """Progress of one table of an incremental snapshot."""

    table: str  # "db.table"
    filter: str | None = None  # validated additional condition
    last_key: list | None = None  # encoded raw key of the last planned row
    max_key: list | None = None  # encoded raw key of the last row when the table was started
    chunks: int = 0
    rows: int = 0
    reason: str | None = None  # why a repair re-reads these rows (change-log header, see .gaps)
    # ON UPDATE CASCADE into the key: {"columns": child key columns, "pairs": [[old, new], ...]}
    key_map: dict | None = None
    candidate_keys: list | None = None  # encoded keys to delete when the source no longer has them

    @property
    def key(self) -> tuple[str, str]:
        db, _, t = self.table.partition(".")
        return db, t


_REPAIR_FIELDS = ("reason", "key_map", "candidate_keys")


@dataclass
class IncrementalState:
    """Incremental snapshot progress carried by the sensor cursor (JSON).

    Attributes:
        snapshot_id: id of the ``execute-snapshot`` signal that started it.
        tables: tables still to read; the first is the current one.
        done: tables finished (for reporting).
        paused: ``pause-snapshot`` received.
        chunk_seq: chunks planned so far (chunk ids: :func:`chunk_id_for`).
    """

    snapshot_id: str
    tables: list[TableProgress] = field(default_factory=list)
    done: list[str] = field(default_factory=list)
    paused: bool = False
    chunk_seq: int = 0

    @property
    def active(self) -> bool:
        return bool(self.tables)

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe form; a table's repair fields (``reason``, ``key_map``, ``candidate_keys``)
        appear only when set, so the cursor of a plain incremental snapshot stays as it was."""
        d = asdict(self)
        for t in d["tables"]:
            for k in _REPAIR_FIELDS:
                if t.get(k) is None:
                    t.pop(k, None)
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any] | None) -> IncrementalState | None:
        if not d:
            return None
        return cls(
            snapshot_id=d["snapshot_id"],
            tables=[TableProgress(**t) for t in d.get("tables", [])],
            done=list(d.get("done", [])),
            paused=bool(d.get("paused", False)),
            chunk_seq=int(d.get("chunk_seq", 0)),
        )

    def copy(self) -> IncrementalState:
        return IncrementalState.from_dict(json.loads(json.dumps(self.to_dict())))  # type: ignore[return-value]

    def progress(self) -> dict[str, Any]:
        """Compact progress for Dagster metadata."""
        cur = self.tables[0] if self.tables else None
        return {
            "snapshot_id": self.snapshot_id,
            "paused": self.paused,
            "current_table": cur.table if cur else None,
            "current_chunks": cur.chunks if cur else 0,
            "current_rows": cur.rows if cur else 0,
            "last_key": cur.last_key if cur else None,
            "max_key": cur.max_key if cur else None,
            "queued": [t.table for t in self.tables[1:]],
            "done": self.done,
            "chunks_planned": self.chunk_seq,
        }


@dataclass
class PlannedChunk:
    """One chunk read at the start of a window run."""

    id: str
    table: str
    rows: int
    path: str  # lake URI of the stashed rows (Parquet, the table's value schema)
    open_id: str
    close_id: str
    low: dict | None = None  # read-only mode: binlog position before the SELECT (low watermark)
    high: dict | None = None  # read-only mode: binlog position after the SELECT (high watermark)
    reason: str | None = None  # repair reason (``__cdc.repair`` header of the emitted rows)
    deletes_path: str | None = None  # stashed before-images of keys the source no longer has
    key_lo: list | None = None  # the chunk's key range (key_lo, key_hi], encoded raw keys; None:
    key_hi: list | None = None  # unbounded (first / last chunk of the table)
    absent_path: str | None = None  # lake rows in the range the source no longer has (Parquet)
    absent: int = 0
    files: list[str] | None = None  # a group of splits: every file of its rows (``path`` the first)
    #: the table's chunks and rows planned so far, this chunk included (its progress after it)
    table_chunks: int | None = None
    table_rows: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class ChunkPlan:
    """The chunks of one window and the window's (extended) end; saved create-if-absent."""

    start: BinlogPosition
    end: BinlogPosition | None
    chunks: list[PlannedChunk]
    state_after: dict | None

    def to_json(self) -> str:
        return json.dumps(
            {
                "start": self.start.to_dict(),
                "end": self.end.to_dict() if self.end else None,
                "chunks": [c.to_dict() for c in self.chunks],
                "state_after": self.state_after,
            }
        )

    @classmethod
    def from_json(cls, text: str) -> ChunkPlan:
        d = json.loads(text)
        return cls(
            start=BinlogPosition.from_dict(d["start"]),
            end=BinlogPosition.from_dict(d["end"]) if d.get("end") else None,
            chunks=[PlannedChunk(**c) for c in d["chunks"]],
            state_after=d.get("state_after"),
        )


class IncrementalSnapshotError(CdcError):
    """The incremental snapshot cannot proceed (e.g. a table without primary key)."""


# -- plan persistence (create-if-absent) ---------------------------------------------------------
def load_plan(storage: StorageSettings, server_name: str, start: BinlogPosition) -> ChunkPlan | None:
    """The saved plan of the window starting at ``start``, if an earlier attempt made one."""
    data = storage.read_bytes(LakeLayout(storage, server_name).chunk_plan(start))
    return ChunkPlan.from_json(data.decode()) if data is not None else None


def save_plan(storage: StorageSettings, server_name: str, plan: ChunkPlan) -> ChunkPlan:
    """Save ``plan`` unless one exists already (then return the existing one: first writer wins)."""
    existing = storage.first_write(
        LakeLayout(storage, server_name).chunk_plan(plan.start), plan.to_json().encode()
    )
    return plan if existing is None else ChunkPlan.from_json(existing.decode())


def read_chunk(storage: StorageSettings, chunk: PlannedChunk, path: str | None = None) -> pa.Table:
    """The stashed rows of a planned chunk (or its file ``path``, e.g. ``chunk.deletes_path``)."""
    if path is None and chunk.files:
        return pa.concat_tables([storage.read_parquet(f) for f in chunk.files])
    return storage.read_parquet(path or chunk.path)


def read_absent(storage: StorageSettings, chunk: PlannedChunk) -> pa.Table | None:
    """The lake rows in the chunk's key range that the source no longer had (``None``: none)."""
    if not chunk.absent_path:
        return None
    return storage.read_parquet(chunk.absent_path)


# -- planning ----------------------------------------------------------------------------------
def chunk_id_for(snapshot_id: str, seq: int) -> str:
    """Id of a chunk: ``<snapshot id prefix>-<seq>-<random>``, at most 39 characters so that its
    watermark ids (``-o``/``-c`` appended) fit the signal table's ``VARCHAR(42)`` id.

    Unique even when the signal id is long (a 36-character UUID) and when a signal id is reused
    for a later snapshot while the earlier snapshot's watermark rows are still in the table.
    """
    return f"{snapshot_id[:20]}-{seq}-{uuid.uuid4().hex[:8]}"[-39:]


def _pk_cols(schema: TableSchema) -> list[str]:
    if not schema.primary_key:
        raise IncrementalSnapshotError(
            f"{schema.qualified_name} has no primary key: incremental snapshots read in key order; "
            "add a primary key or use a blocking snapshot."
        )
    return list(schema.primary_key)


def _row_cmp(cols: list[str], op: str) -> str:
    lhs = "(" + ", ".join(quote_identifier(c) for c in cols) + ")"
    rhs = "(" + ", ".join(["%s"] * len(cols)) + ")"
    return f"{lhs} {op} {rhs}"


@dataclass
class _ChunkTable:
    """The table a chunk is read from: its progress, captured schema and converter."""

    prog: TableProgress
    schema: TableSchema  # captured columns only, keyed by message.key.columns
    conv: TableConverter
    pk: list[str]
    lake: LakeLiveRows | None  # None: the lake's rows cannot be compared (unsupported key)
    tbl: str  # quoted `db`.`table`
    where_filter: str  # " AND (<filter>)" or ""
    source_schema: TableSchema | None = None  # the table as the server has it (split reads)


@dataclass
class _ChunkRead:
    """What one watermark window read: the chunk's rows and what the lake must delete."""

    chunk_id: str
    open_id: str
    close_id: str
    low: dict | None
    high: dict | None
    rows: list[tuple]
    gone: list[tuple]  # before-images of keys a repair expects gone from the source
    key_lo: list | None
    key_hi: list | None
    last: bool  # the table's last chunk
    last_row_key: list | None  # encoded key of the last row read
    absent: pa.Table | None  # lake rows in the range the source no longer has


def plan_chunks(
    settings: ConnectionSettings,
    info: ServerInfo,
    state: IncrementalState,
    schemas: dict[tuple[str, str], TableSchema],
    *,
    storage: StorageSettings,
    server_name: str,
    signal_table: str,
    chunk_size: int,
    max_chunks: int,
    type_options: TypeOptions,
    strategy: str = "insert_insert",
    read_only: bool = False,
    epoch: int = 0,
    writer: LakeWriter | None = None,
    max_connections: int = 0,
    split_rows: int = 100_000,
    seconds: float = 0.0,
) -> tuple[list[PlannedChunk], IncrementalState, BinlogPosition]:
    """Read up to ``max_chunks`` chunks with watermarks (DBLog steps 1-3 per chunk).

    ``writer``: read chunks as parallel splits on the Spark executors (see
    :func:`_read_chunk_group`): after a table's first chunk, the rest of the run's chunk budget for
    it is read by one Spark job inside one watermark window (at most ``max_connections`` tasks at
    once; 0: one per core), each task reading at most about ``split_rows`` rows (a group holds
    at most tasks x ``split_rows`` rows: the emission at its high watermark holds them in memory).
    Without it, or for a repair's chunks, chunks are read one by one here.

    ``seconds``: a time budget: no chunk is started once this many seconds were spent reading
    (0: none); ``max_chunks`` still bounds the run.

    ``read_only``: write nothing to the source (Debezium's read-only incremental snapshot): the
    server's binlog position (with its executed GTID set) read just before and just after the
    chunk ``SELECT`` are the low and high watermarks.

    ``epoch``: the window's offset epoch, given to every server position read here.

    Each chunk covers the key range ``(key_lo, key_hi]`` (the first chunk of a table starts at
    the smallest key, the last one ends above the largest; a filter that matches nothing gives
    one empty chunk over the whole table). Inside the watermark window, the keys the source has
    in that range are read *without* the filter, and the lake's live rows in the range that the
    source no longer has are stashed with the chunk (:mod:`.absent_rows`): the window emits a
    delete for each (unless the binlog touched its key inside the window).

    Returns:
        (chunks, state after planning, server position after the last high watermark).

    Raises:
        IncrementalSnapshotError: a table has no primary key.
    """
    if strategy not in WATERMARK_STRATEGIES:
        raise IncrementalSnapshotError(
            f"watermark strategy {strategy!r} is not one of {WATERMARK_STRATEGIES}"
        )
    state = state.copy()
    chunks: list[PlannedChunk] = []
    sdb, _, stable = signal_table.partition(".")
    sig = f"{quote_identifier(sdb)}.{quote_identifier(stable)}"
    conn = connect(settings, autocommit=True)
    lake_rows: dict[str, LakeLiveRows | None] = {}
    try:
        if not read_only:
            log_rows(conn)  # watermarks as row events when the server logs statements and we may
        # lake rows older than this: committed before
        plan_start = current_position(conn, info).with_epoch(epoch)
        budget = max_chunks
        deadline = time.monotonic() + seconds if seconds > 0 else None
        tasks = 0
        if writer is not None:
            from ..sink.spark_files import default_parallelism

            tasks = max_connections or default_parallelism(writer.spark)
        while state.tables and not state.paused and budget > 0:
            if deadline is not None and chunks and time.monotonic() >= deadline:
                break
            t = _next_chunk_table(state, schemas, type_options, lake_rows, storage, server_name, plan_start)
            if t is None:
                continue
            if writer is not None and _group_ok(t):
                group = _read_chunk_group(
                    conn,
                    info,
                    state,
                    t,
                    settings=settings,
                    writer=writer,
                    storage=storage,
                    server_name=server_name,
                    sig=sig,
                    chunk_size=chunk_size,
                    n_chunks=min(budget, max(1, tasks * split_rows // chunk_size)),
                    tasks=tasks,
                    type_options=type_options,
                    strategy=strategy,
                    read_only=read_only,
                    epoch=epoch,
                )
                chunks.append(group.chunk)
                budget -= group.splits
                t.prog.chunks += group.splits
                t.prog.rows += group.chunk.rows
                t.prog.last_key = group.chunk.key_hi
                group.chunk.table_chunks, group.chunk.table_rows = t.prog.chunks, t.prog.rows
                if group.last:
                    state.done.append(t.prog.table)
                    state.tables.pop(0)
                continue
            budget -= 1
            read = _read_next_chunk(
                conn,
                info,
                state,
                t,
                sig=sig,
                chunk_size=chunk_size,
                type_options=type_options,
                strategy=strategy,
                read_only=read_only,
                epoch=epoch,
            )
            if read is None:
                continue
            chunk = _stash_chunk(storage, server_name, t, read)
            chunks.append(chunk)
            prog = t.prog
            prog.chunks += 1
            prog.rows += len(read.rows)
            chunk.table_chunks, chunk.table_rows = prog.chunks, prog.rows
            if read.rows:
                prog.last_key = read.last_row_key
            if read.last:
                state.done.append(prog.table)
                state.tables.pop(0)
        end = current_position(conn, info).with_epoch(epoch)
    finally:
        conn.close()
    return chunks, state, end


def _next_chunk_table(
    state: IncrementalState,
    schemas: dict[tuple[str, str], TableSchema],
    type_options: TypeOptions,
    lake_rows: dict[str, LakeLiveRows | None],
    storage: StorageSettings,
    server_name: str,
    plan_start: BinlogPosition,
) -> _ChunkTable | None:
    """The first queued table, ready to read; ``None`` when it was skipped (dropped from the queue:
    the table no longer exists or a key column is masked). ``lake_rows`` caches the lake readers."""
    from .absent_rows import LakeLiveRows, unsupported_key_reason

    prog = state.tables[0]
    schema = schemas.get(prog.key)
    if schema is None:
        log.warning("Incremental snapshot: table %s no longer exists; skipped", prog.table)
        state.tables.pop(0)
        return None
    conv = TableConverter(schema, type_options, "pymysql")
    # captured columns only (column_include_list/column_exclude_list), keyed by message.key.columns
    schema = conv.table
    pk = _pk_cols(schema)
    if set(pk) & set(conv.masked):  # chunk bounds are raw key values: they would leak
        log.warning(
            "Incremental snapshot: %s has a masked key column %s; skipped (use a blocking snapshot)",
            prog.table,
            sorted(set(pk) & set(conv.masked)),
        )
        state.tables.pop(0)
        return None
    if prog.table not in lake_rows:
        why = unsupported_key_reason(schema)
        if why:
            log.warning("Incremental snapshot: %s", why)
        lake_rows[prog.table] = (
            None if why else LakeLiveRows(storage, server_name, schema, conv.arrow_schema, before=plan_start)
        )
    return _ChunkTable(
        prog=prog,
        schema=schema,
        conv=conv,
        pk=pk,
        lake=lake_rows[prog.table],
        tbl=f"{quote_identifier(schema.database)}.{quote_identifier(schema.table)}",
        where_filter=f" AND ({prog.filter})" if prog.filter else "",
        source_schema=schemas[prog.key],
    )


def _read_next_chunk(
    conn: Any,
    info: ServerInfo,
    state: IncrementalState,
    t: _ChunkTable,
    *,
    sig: str,
    chunk_size: int,
    type_options: TypeOptions,
    strategy: str,
    read_only: bool,
    epoch: int = 0,
) -> _ChunkRead | None:
    """Open a watermark window, read the next chunk of ``t`` (and, without the filter, the keys
    the source has in its range), close the window. ``None``: the table has nothing to read (empty,
    or nothing matches the filter, and no lake rows or repair keys to check): it is done."""
    from .absent_rows import converted_key, source_keys_in_range

    prog, schema, pk, tbl, where_filter = t.prog, t.schema, t.pk, t.tbl, t.where_filter
    empty = False
    with conn.cursor() as cur:
        if prog.max_key is None:
            cur.execute(
                f"SELECT {', '.join(quote_identifier(c) for c in pk)} FROM {tbl} WHERE 1=1{where_filter} "
                f"ORDER BY {', '.join(quote_identifier(c) + ' DESC' for c in pk)} LIMIT 1"
            )
            row = cur.fetchone()
            if row is None and t.lake is None and not (prog.candidate_keys and prog.chunks == 0):
                # empty table (or nothing matches the filter): no lake rows or repair keys to check
                state.done.append(prog.table)
                state.tables.pop(0)
                return None
            if row is None:  # one empty chunk: lake rows of the whole table may be gone, and a
                empty = True  # repair's candidate keys are checked between its watermarks
            else:
                prog.max_key = encode_key(row)
        chunk_id, open_id, close_id, low = _open_chunk_window(conn, cur, info, state, sig, read_only, epoch)
        high = None
        conds = []
        params: list[Any] = []
        if prog.last_key is not None:
            conds.append(_row_cmp(pk, ">"))
            params += decode_key(prog.last_key)
        rows: list[tuple] = []
        if not empty:
            conds.append(_row_cmp(pk, "<="))
            params += decode_key(prog.max_key or [])
            cols = ", ".join(select_expression(c) for c in schema.columns)
            # this query has parameters: pymysql %-formats it, so a '%' of the filter
            # (modulo, LIKE pattern, string literal) must be doubled
            cur.execute(
                f"SELECT {cols} FROM {tbl} WHERE {' AND '.join(conds)}{where_filter.replace('%', '%%')} "
                f"ORDER BY {', '.join(quote_identifier(c) for c in pk)} LIMIT {int(chunk_size)}",
                params,
            )
            rows = list(cur.fetchall())
        # between the watermarks, like the chunk: keys a repair expects gone from the source
        gone = _absent_rows(cur, schema, tbl, pk, rows, prog)
        if gone and t.lake is not None:  # a key the lake has no live row for is not deleted again
            live = set(t.lake.keys)
            keyf = t.conv.primary_key_function()
            names = schema.column_names
            gone = [img for img in gone if keyf(dict(zip(names, img))) in live]
        idx = [schema.column_names.index(c) for c in pk]
        last_row_key = encode_key([rows[-1][i] for i in idx]) if rows else None
        key_lo = prog.last_key
        last = empty or len(rows) < chunk_size or last_row_key == prog.max_key
        key_hi = None if last else last_row_key
        absent = None
        if t.lake is not None:  # inside the watermark window, without the filter
            have = source_keys_in_range(cur, schema, type_options, key_lo, key_hi)
            absent = t.lake.absent(
                converted_key(schema, type_options, key_lo),
                converted_key(schema, type_options, key_hi),
                have,
            )
        if read_only:
            high = current_position(conn, info).with_epoch(epoch).to_dict()
        else:
            close_id = close_window(cur, sig, open_id, close_id, chunk_id, strategy)
    return _ChunkRead(
        chunk_id, open_id, close_id, low, high, rows, gone, key_lo, key_hi, last, last_row_key, absent
    )


def _group_ok(t: _ChunkTable) -> bool:
    """Whether ``t``'s next chunks may be read as a group of splits: its key range is known (the
    first chunk, which finds the maximum key and checks a repair's candidate keys, is read alone),
    no cascade key map, and the chunk key is the table's own (indexed) primary key."""
    return (
        t.prog.max_key is not None
        and not t.prog.key_map
        and t.source_schema is not None
        and list(t.source_schema.primary_key) == t.pk
    )


@dataclass
class _ChunkGroup:
    chunk: PlannedChunk
    splits: int
    last: bool


def _read_chunk_group(
    conn: Any,
    info: ServerInfo,
    state: IncrementalState,
    t: _ChunkTable,
    *,
    settings: ConnectionSettings,
    writer: LakeWriter,
    storage: StorageSettings,
    server_name: str,
    sig: str,
    chunk_size: int,
    n_chunks: int,
    tasks: int,
    type_options: TypeOptions,
    strategy: str,
    read_only: bool,
    epoch: int,
) -> _ChunkGroup:
    """Read up to ``n_chunks`` chunks of ``t`` as parallel splits on the Spark executors, all inside
    ONE watermark window (DBLog: any read between the low and the high watermark is valid at the
    high watermark once the keys the binlog touched inside the window are dropped, so the window
    may hold several concurrent reads): low watermark, one Spark job whose tasks read one key
    range each (their own connections) and write its rows to the lake's staging area, the lake's
    absent rows of the whole range, high watermark. The stream side treats the group as one chunk
    covering ``(key_lo, key_hi]`` (:class:`~.incremental_source.IncrementalSnapshotSource`).

    Raises:
        SinkError: a Spark task failed (the watermark rows stay; the window is planned again).
    """
    from ..source.split_reader import merge_splits
    from ..source.splits import step_splits
    from .absent_rows import converted_key, source_keys_in_range
    from .split_snapshot import stage_split_rows

    prog, schema = t.prog, t.schema
    assert t.source_schema is not None  # checked by _group_ok
    maxk = tuple(decode_key(prog.max_key or []))
    lo = tuple(decode_key(prog.last_key)) if prog.last_key is not None else None
    # up to n_chunks chunks of chunk_size keys; the last one ends at the maximum key when reached
    splits = step_splits(conn, t.source_schema, t.pk, lo, maxk, step=chunk_size, n=n_chunks, rest=False)
    with conn.cursor() as cur:
        key_lo = prog.last_key
        last = splits[-1].hi == maxk
        key_hi = None if last else encode_key(list(splits[-1].hi or ()))
        chunk_id, open_id, close_id, low = _open_chunk_window(conn, cur, info, state, sig, read_only, epoch)
        high = None
        path = LakeLayout(storage, server_name).chunk_file(chunk_id)
        # the chunk boundaries bound the group's rows; the reads are one key range per task
        staged = stage_split_rows(
            writer,
            settings,
            info,
            t.source_schema,
            type_options,
            merge_splits(splits, tasks),
            path[: -len(".parquet")],
            condition=prog.filter or None,
        )
        files = [f for f, _ in staged]
        absent = None
        if t.lake is not None and t.lake.keys:  # inside the watermark window, without the filter
            if prog.filter:
                have = source_keys_in_range(cur, schema, type_options, key_lo, key_hi)
            else:  # the splits read every row up to the maximum key: their keys are the source's
                have = _staged_keys(storage, files, t.pk)
                if key_hi is None:  # the last group's range is open above: keys inserted after
                    # the maximum key was read are the source's too (the splits stop at it)
                    have |= source_keys_in_range(cur, schema, type_options, prog.max_key, None)
            absent = t.lake.absent(
                converted_key(schema, type_options, key_lo), converted_key(schema, type_options, key_hi), have
            )
        if read_only:
            high = current_position(conn, info).with_epoch(epoch).to_dict()
        else:
            close_id = close_window(cur, sig, open_id, close_id, chunk_id, strategy)
    if not files:  # nothing read: one empty file keeps the chunk readable
        storage.write_parquet(path, t.conv.arrow_schema.empty_table())
        files = [path]
    rows = sum(n for _, n in staged)
    absent_path = None
    if absent is not None and absent.num_rows:
        absent_path = path.replace(".parquet", "-absent.parquet")
        storage.write_parquet(absent_path, absent)
    chunk = PlannedChunk(
        chunk_id,
        prog.table,
        rows,
        files[0],
        open_id,
        close_id,
        low,
        high,
        reason=prog.reason,
        key_lo=key_lo,
        key_hi=key_hi,
        absent_path=absent_path,
        absent=absent.num_rows if absent is not None else 0,
        files=files,
    )
    return _ChunkGroup(chunk, len(splits), last)


def _staged_keys(storage: StorageSettings, files: list[str], pk: list[str]) -> set[tuple]:
    """The (converted) primary keys of staged chunk rows (only the key columns are read)."""
    keys: set[tuple] = set()
    for f in files:
        t = storage.read_parquet(f, columns=pk)
        keys.update(zip(*(t.column(k).to_pylist() for k in pk)))
    return keys


def _open_chunk_window(
    conn: Any, cur: Any, info: ServerInfo, state: IncrementalState, sig: str, read_only: bool, epoch: int
) -> tuple[str, str, str, dict | None]:
    """The next chunk's id and its low watermark: the open row written to the signal table ``sig``,
    or (``read_only``) the server's position now. Returns (chunk id, open row id, close row id,
    low position or ``None``)."""
    state.chunk_seq += 1
    chunk_id = chunk_id_for(state.snapshot_id, state.chunk_seq)
    open_id, close_id = f"{chunk_id}-o", f"{chunk_id}-c"
    low = None
    if read_only:
        low = current_position(conn, info).with_epoch(epoch).to_dict()
    else:
        open_window(cur, sig, open_id, chunk_id)
    return chunk_id, open_id, close_id, low


def _stash_chunk(
    storage: StorageSettings, server_name: str, t: _ChunkTable, read: _ChunkRead
) -> PlannedChunk:
    """Write the chunk's rows (and its deletes / absent lake rows, if any) to the lake's staging
    area as Parquet; the planned chunk pointing at them."""
    conv = t.conv
    path = LakeLayout(storage, server_name).chunk_file(read.chunk_id)
    where = f"incremental snapshot chunk {read.chunk_id}"  # a value that cannot be converted: named
    rows = convert_snapshot_rows(conv, read.rows, where, text_values=False)
    storage.write_parquet(path, pa.Table.from_batches([rows], schema=conv.arrow_schema))
    deletes_path = None
    if read.gone:
        deletes_path = path[: -len(".parquet")] + "-deletes.parquet"
        gone = convert_snapshot_rows(conv, read.gone, where, text_values=False)
        storage.write_parquet(deletes_path, pa.Table.from_batches([gone], schema=conv.arrow_schema))
    absent_path = None
    absent = read.absent
    if absent is not None and absent.num_rows:
        absent_path = path.replace(".parquet", "-absent.parquet")
        storage.write_parquet(absent_path, absent)
    return PlannedChunk(
        read.chunk_id,
        t.prog.table,
        len(read.rows),
        path,
        read.open_id,
        read.close_id,
        read.low,
        read.high,
        reason=t.prog.reason,
        deletes_path=deletes_path,
        key_lo=read.key_lo,
        key_hi=read.key_hi,
        absent_path=absent_path,
        absent=absent.num_rows if absent is not None else 0,
    )


def _absent_rows(
    cur: Any, schema: TableSchema, tbl: str, pk: list[str], rows: list[tuple], prog: TableProgress
) -> list[tuple]:
    """Before-images (raw, column order) of keys a repair expects the source to have dropped.

    Candidates: ``prog.candidate_keys`` (checked once, with the table's first chunk) and, for an
    ``ON UPDATE CASCADE`` into the key (``prog.key_map``), each chunk row's key with the child
    columns set back to the parent's old value. The candidates the source still has are kept;
    the others are returned, to be emitted as deletes at the chunk's high watermark (keys the
    binlog changes inside the chunk window are dropped there, as for the chunk's rows).
    Candidates from ``candidate_keys`` carry only their key columns (other columns ``NULL``).
    """
    names = schema.column_names
    pk_idx = [names.index(c) for c in pk]
    images: dict[tuple, tuple] = {}
    if prog.candidate_keys and prog.chunks == 0:
        for k in prog.candidate_keys:
            key = tuple(decode_key(k))
            img: list[Any] = [None] * len(names)
            for i, v in zip(pk_idx, key):
                img[i] = v
            images[key] = tuple(img)
    if prog.key_map:
        cols = [names.index(c) for c in prog.key_map["columns"]]
        back = {tuple(decode_key(n)): tuple(decode_key(o)) for o, n in prog.key_map["pairs"]}
        for r in rows:
            old = back.get(tuple(r[i] for i in cols))
            if old is None:
                continue
            img = list(r)
            for i, v in zip(cols, old):
                img[i] = v
            images[tuple(img[i] for i in pk_idx)] = tuple(img)
    if not images:
        return []
    keys = list(images)
    present: set[tuple] = set()
    for i in range(0, len(keys), 500):
        part = keys[i : i + 500]
        cond = " OR ".join([_row_cmp(pk, "=")] * len(part))
        cur.execute(
            f"SELECT {', '.join(quote_identifier(c) for c in pk)} FROM {tbl} WHERE {cond}",
            [v for k in part for v in k],
        )
        present.update(tuple(r) for r in cur.fetchall())
    return [img for k, img in images.items() if k not in present]


def probe_filter(conn: Any, schema: TableSchema, flt: str) -> None:
    """Run a validated filter once on the server (``LIMIT 0``: parsed and prepared, nothing read).

    A filter that is safe but that the server rejects (row-constructor arity, out-of-range
    literal, unsupported CAST type ...) would otherwise fail every window run that reads a chunk.

    Raises:
        UnsafeFilter: the server rejects the filter.
        pymysql.err.MySQLError: a client/connection error (transient: the run fails and is retried).
    """
    from ..source.signals import UnsafeFilter

    tbl = f"{quote_identifier(schema.database)}.{quote_identifier(schema.table)}"
    try:
        with conn.cursor() as cur:
            cur.execute(f"SELECT 1 FROM {tbl} WHERE ({flt}) LIMIT 0")  # no parameters: '%' stays as is
            cur.fetchall()
    except pymysql.err.MySQLError as e:
        code = e.args[0] if e.args else None
        if not isinstance(code, int) or code < 1000 or 2000 <= code < 3000:
            raise  # client-side errors (CR_* 2xxx: lost connection ...): not the filter's fault
        reason = e.args[1] if len(e.args) > 1 else str(e)
        raise UnsafeFilter(
            f"Filter {flt!r} fails on the server for {schema.qualified_name}: ({code}) {reason}"
        ) from None


def start_snapshot(
    state: IncrementalState | None,
    signal_id: str,
    tables: Sequence[tuple[str, str]],
    conditions: dict[str, str],
    schemas: dict[tuple[str, str], TableSchema],
    conn: Any = None,
    reason: str | None = None,
    delete_keys: Sequence[Sequence[Any]] = (),
) -> tuple[IncrementalState, list[str]]:
    """Apply an ``execute-snapshot`` (incremental) signal: queue ``tables`` (skipping ones already
    queued). Filters are validated against each table's columns and, with ``conn``, tried on the
    server (:func:`probe_filter`); an unsafe or failing filter skips the whole signal (raises).
    ``reason`` and ``delete_keys`` (a repair, see :mod:`.gaps`) go to every queued table's
    progress (``delete_keys`` only when one table is queued).

    Returns:
        (new state, log messages)

    Raises:
        UnsafeFilter: a filter is not a safe boolean expression, or the server rejects it.
        IncrementalSnapshotError: a table has no primary key.
    """
    from ..source.signals import matches_collection

    msgs: list[str] = []
    new = state.copy() if state is not None else IncrementalState(snapshot_id=signal_id)
    queued = {t.table for t in new.tables}
    progs = []
    for db, t in tables:
        qualified = f"{db}.{t}"
        schema = schemas[(db, t)]
        _pk_cols(schema)
        flt = None
        for pattern, f in conditions.items():
            if matches_collection(pattern, qualified):
                flt = validate_filter(f, schema.column_names)
                if conn is not None:
                    probe_filter(conn, schema, flt)
        if qualified in queued:
            msgs.append(f"{qualified} is already in the incremental snapshot; not queued again")
            continue
        progs.append(
            TableProgress(
                table=qualified,
                filter=flt,
                reason=reason,
                candidate_keys=[list(k) for k in delete_keys] if delete_keys and len(tables) == 1 else None,
            )
        )
    new.tables.extend(progs)
    if state is None or not state.tables:
        new.snapshot_id = signal_id
    msgs.append(f"incremental snapshot {signal_id}: queued {[p.table for p in progs]}")
    return new, msgs


def stop_snapshot(state: IncrementalState | None, tables: Sequence[str]) -> IncrementalState | None:
    """Apply ``stop-snapshot``: all tables (empty list) or the listed names/regexes."""
    from ..source.signals import matches_collection

    if state is None:
        return None
    if not tables:
        return None
    new = state.copy()
    new.tables = [p for p in new.tables if not any(matches_collection(pat, p.table) for pat in tables)]
    return new if new.tables else None


def with_paused(state: IncrementalState | None, paused: bool) -> IncrementalState | None:
    return replace(state.copy(), paused=paused) if state is not None else None
