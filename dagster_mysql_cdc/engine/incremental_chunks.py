"""The chunks of an incremental snapshot or repair: planned at the start of a window run, read
between watermarks and stashed in the lake (DBLog's chunk selection; see :mod:`.incremental` for
the snapshot's progress and signals, :mod:`.incremental_source` for how the window emits them)."""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

import pyarrow as pa

from ..events import BinlogPosition
from ..sink.layout import LakeLayout
from ..sink.storage import StorageSettings
from ..source.connection import ConnectionSettings, ServerInfo, connect, current_position
from ..source.schema import TableSchema
from ..source.snapshot import convert_snapshot_rows
from ..source.types import TableConverter, TypeOptions, quote_identifier, select_expression
from .absent_rows import (
    LakeLiveRows,
    chunk_keys,
    converted_key,
    source_keys_in_range,
    unsupported_key_reason,
)
from .incremental import (
    IncrementalSnapshotError,
    IncrementalState,
    PlannedChunk,
    TableProgress,
    chunk_id_for,
    chunk_key_columns,
    decode_key,
    encode_key,
)
from .split_snapshot import stage_split_rows
from .watermark import WATERMARK_STRATEGIES, close_window, log_rows, open_window

if TYPE_CHECKING:
    from ..sink.lake import LakeWriter


log = logging.getLogger(__name__)


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
    sdb, _, stable = signal_table.partition(".")
    sig = f"{quote_identifier(sdb)}.{quote_identifier(stable)}"
    conn = connect(settings, autocommit=True)
    try:
        if not read_only:
            log_rows(conn)  # watermarks as row events when the server logs statements and we may
        # lake rows older than this: committed before
        plan_start = current_position(conn, info).with_epoch(epoch)
        tasks = _spark_tasks(writer, max_connections)
        reads = _ChunkReads(
            conn=conn,
            info=info,
            settings=settings,
            writer=writer,
            storage=storage,
            server_name=server_name,
            sig=sig,
            chunk_size=chunk_size,
            type_options=type_options,
            strategy=strategy,
            read_only=read_only,
            epoch=epoch,
            group_chunks=max(1, tasks * split_rows // chunk_size),
            tasks=tasks,
        )
        deadline = time.monotonic() + seconds if seconds > 0 else None
        chunks = _plan_budget(reads, state, schemas, plan_start, max_chunks, deadline)
        end = current_position(conn, info).with_epoch(epoch)
    finally:
        conn.close()
    return chunks, state, end


@dataclass
class _ChunkReads:
    """How one window's chunks are read (:func:`plan_chunks`'s arguments, shared by its steps)."""

    conn: Any
    info: ServerInfo
    settings: ConnectionSettings
    writer: LakeWriter | None
    storage: StorageSettings
    server_name: str
    sig: str  # quoted signal table
    chunk_size: int
    type_options: TypeOptions
    strategy: str
    read_only: bool
    epoch: int
    group_chunks: int  # chunks of one group read by Spark tasks (tasks x split_rows rows)
    tasks: int


def _spark_tasks(writer: LakeWriter | None, max_connections: int) -> int:
    """Spark tasks of a group of splits: ``max_connections``, else one per core (0: no writer,
    chunks are read one by one here)."""
    if writer is None:
        return 0
    from ..sink.spark_files import default_parallelism

    return max_connections or default_parallelism(writer.spark)


def _plan_budget(
    r: _ChunkReads,
    state: IncrementalState,
    schemas: dict[tuple[str, str], TableSchema],
    plan_start: BinlogPosition,
    budget: int,
    deadline: float | None,
) -> list[PlannedChunk]:
    """Up to ``budget`` chunks, table after table of ``state``'s queue (advanced in place), in
    groups of splits where Spark reads them; none is started after ``deadline`` (monotonic
    seconds) once one was read. Lake rows older than ``plan_start`` are committed before."""
    chunks: list[PlannedChunk] = []
    lake_rows: dict[str, LakeLiveRows | None] = {}
    while state.tables and not state.paused and budget > 0:
        if deadline is not None and chunks and time.monotonic() >= deadline:
            break
        t = _next_chunk_table(state, schemas, r.type_options, lake_rows, r.storage, r.server_name, plan_start)
        if t is None:
            continue
        if r.writer is not None and _group_ok(t):
            chunk, used = _plan_group(r, state, t, budget)
            chunks.append(chunk)
            budget -= used
            continue
        budget -= 1
        planned = _plan_next(r, state, t)
        if planned is not None:
            chunks.append(planned)
    return chunks


def _plan_group(
    r: _ChunkReads, state: IncrementalState, t: _ChunkTable, budget: int
) -> tuple[PlannedChunk, int]:
    """The next chunks of ``t`` read as one group of splits by Spark tasks (:func:`_read_chunk_group`),
    its progress advanced; returns the group's chunk and how many chunks of the budget it used."""
    group = _read_chunk_group(
        r.conn,
        r.info,
        state,
        t,
        settings=r.settings,
        writer=cast(Any, r.writer),
        storage=r.storage,
        server_name=r.server_name,
        sig=r.sig,
        chunk_size=r.chunk_size,
        n_chunks=min(budget, r.group_chunks),
        tasks=r.tasks,
        type_options=r.type_options,
        strategy=r.strategy,
        read_only=r.read_only,
        epoch=r.epoch,
    )
    t.prog.chunks += group.splits
    t.prog.rows += group.chunk.rows
    t.prog.last_key = group.chunk.key_hi
    group.chunk.table_chunks, group.chunk.table_rows = t.prog.chunks, t.prog.rows
    if group.last:
        state.done.append(t.prog.table)
        state.tables.pop(0)
    return group.chunk, group.splits


def _plan_next(r: _ChunkReads, state: IncrementalState, t: _ChunkTable) -> PlannedChunk | None:
    """The next chunk of ``t`` read here (:func:`_read_next_chunk`) and stashed, its progress
    advanced; ``None``: the table had nothing to read (it is done)."""
    read = _read_next_chunk(r, state, t)
    if read is None:
        return None
    chunk = _stash_chunk(r.storage, r.server_name, t, read)
    prog = t.prog
    prog.chunks += 1
    prog.rows += len(read.rows)
    chunk.table_chunks, chunk.table_rows = prog.chunks, prog.rows
    if read.rows:
        prog.last_key = read.last_row_key
    if read.last:
        state.done.append(prog.table)
        state.tables.pop(0)
    return chunk


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

    prog = state.tables[0]
    schema = schemas.get(prog.key)
    if schema is None:
        log.warning("Incremental snapshot: table %s no longer exists; skipped", prog.table)
        state.tables.pop(0)
        return None
    conv = TableConverter(schema, type_options, "pymysql")
    # captured columns only (column_include_list/column_exclude_list), keyed by message.key.columns
    schema = conv.table
    pk = chunk_key_columns(schema)
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


def _read_next_chunk(r: _ChunkReads, state: IncrementalState, t: _ChunkTable) -> _ChunkRead | None:
    """Open a watermark window, read the next chunk of ``t`` (and, without the filter, the keys
    the source has in its range), close the window. ``None``: the table has nothing to read (empty,
    or nothing matches the filter, and no lake rows or repair keys to check): it is done."""
    conn, info, sig, chunk_size = r.conn, r.info, r.sig, r.chunk_size
    type_options, strategy, read_only, epoch = r.type_options, r.strategy, r.read_only, r.epoch

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
            have = (
                chunk_keys(schema, type_options, rows)
                if _rows_are_the_range(t, rows, last)
                else source_keys_in_range(cur, schema, type_options, key_lo, key_hi)
            )
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


def _rows_are_the_range(t: _ChunkTable, rows: list[tuple], last: bool) -> bool:
    """Whether a chunk's own rows hold every key the source has in its range ``(key_lo,
    key_hi]``, so the absent-row check needs no second ``SELECT`` of the range's keys: a full
    chunk (not the table's last: that range is open above the maximum key) read without a filter
    (the check's range is read without it), keyed by the table's own key columns, none of them a
    ``FLOAT`` (its chunk ``SELECT`` reads it as a ``DOUBLE``, :func:`select_expression`, unlike
    the key ``SELECT``)."""
    schema = t.schema
    return (
        bool(rows)
        and not last
        and not t.where_filter
        and list(schema.primary_key) == t.pk
        and all(select_expression(schema.column(c)) == quote_identifier(c) for c in t.pk)
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
