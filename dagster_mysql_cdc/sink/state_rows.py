"""Change events → current-state rows, newest event per key, in Arrow (no Spark round trip).

The state table of a captured table holds one row per key: the image of its newest event plus the
metadata columns of :data:`dagster_mysql_cdc.events.STATE_META_FIELDS` (Debezium's
``ExtractNewRecordState`` with ``add.fields`` and ``delete.handling.mode=rewrite``). This module
computes those rows for one change-log record batch with pyarrow compute kernels, which run in
C++ and release the GIL: on the driver's sink thread (rows merged into the state table), so the
binlog reader is not held up, and in the Spark tasks that write a first snapshot's state files.
``tests/test_state_rows.py`` checks them against the same computation in Spark (column
expressions and a ``row_number`` window).

Keyless tables (every column is the key) keep the source's multiplicity: their state holds one
row per distinct row value with a ``__count`` column (:data:`~dagster_mysql_cdc.events.COUNT_FIELD`),
computed per record batch by :func:`count_per_value` (binlog events: +1 per ``c``/``u`` after
image, −1 per ``d``/``u`` before image; snapshot reads: the number of copies read) and read back as
a multiset by :func:`live_multiset`.

Ordering: an event is newer when its ordering key ``(__epoch, __binlog_file, __binlog_pos,
__binlog_row)`` is greater (``__epoch``: the offset epoch of the window that wrote it, see
:class:`~dagster_mysql_cdc.events.BinlogPosition`; NULL in rows written before epochs existed,
read as 0); snapshot reads (``op=r``) take ``__binlog_row = -1`` so they order before binlog events
at their position. Ties (a keyless update that changes nothing) prefer the live row over the
tombstone.
"""

from __future__ import annotations

from collections.abc import Sequence

import pyarrow as pa
import pyarrow.compute as pc

ORDER_COLS = ("__epoch", "__binlog_file", "__binlog_pos", "__binlog_row")
EPOCH_COL = ORDER_COLS[0]


def state_rows(
    batch: pa.RecordBatch | pa.Table, value_names: Sequence[str], *, keyless: bool = False, epoch: int = 0
) -> pa.Table:
    """State rows of the change events in ``batch`` (one per event, not yet deduplicated).

    Args:
        batch: change-log rows (columns ``before``, ``after``, ``source``, ``op``, ``ts_ms``).
        value_names: the table's columns, in state-table order (children of ``after``).
        keyless: the table has no key (every column is the key): an update also yields a
            tombstone for its ``before`` image, which is another key (Debezium
            ``message.key.columns`` unset on a keyless table).
        epoch: the offset epoch of the events' positions (``__epoch`` of every row; the change
            log's ``source`` has no such field: one batch is one window, of one epoch).

    Returns:
        a table with ``value_names`` followed by the state metadata columns, for every event
        except TRUNCATE markers (``op=t``; their effect is applied as tombstones by the sink).
    """
    t = batch if isinstance(batch, pa.Table) else pa.Table.from_batches([batch])
    t = t.filter(pc.not_equal(t.column("op"), "t"))
    op = t.column("op")
    deleted = pc.equal(op, "d")
    before, after, source = t.column("before"), t.column("after"), t.column("source")
    row = pc.cast(pc.struct_field(source, "row"), pa.int32())
    meta = {
        "__ts_ms": pc.cast(t.column("ts_ms"), pa.int64()),
        "__source_ts_ms": pc.cast(pc.struct_field(source, "ts_ms"), pa.int64()),
        "__snapshot": pc.struct_field(source, "snapshot"),
        "__epoch": pa.repeat(pa.scalar(int(epoch), pa.int64()), t.num_rows),
        "__binlog_file": pc.struct_field(source, "file"),
        "__binlog_pos": pc.cast(pc.struct_field(source, "pos"), pa.int64()),
        "__binlog_row": pc.if_else(pc.equal(op, "r"), pa.scalar(-1, pa.int32()), row),
        "__gtid": pc.struct_field(source, "gtid"),
    }
    cols = {
        n: pc.if_else(deleted, pc.struct_field(before, n), pc.struct_field(after, n)) for n in value_names
    }
    out = _assemble(cols, op, deleted, meta)
    if keyless:
        upd = pc.equal(op, "u")
        if pc.any(upd).as_py():
            idx = pc.indices_nonzero(upd)
            olds = {n: pc.struct_field(before, n).take(idx) for n in value_names}
            n_old = len(idx)
            old_meta = {k: v.take(idx) for k, v in meta.items()}
            out = pa.concat_tables(
                [
                    out,
                    _assemble(
                        olds, pa.repeat(pa.scalar("d"), n_old), pa.repeat(pa.scalar(True), n_old), old_meta
                    ),
                ]
            )
    return out


def _assemble(cols: dict, op, deleted, meta: dict) -> pa.Table:
    names = list(cols) + ["__op", "__deleted"] + list(meta)
    arrays = list(cols.values()) + [op, deleted] + list(meta.values())
    return pa.table([_chunked(a) for a in arrays], names=names)


def _chunked(a) -> pa.ChunkedArray:
    return a if isinstance(a, pa.ChunkedArray) else pa.chunked_array([a])


def epoch_filled(rows: pa.Table) -> pa.Table:
    """``rows`` with ``__epoch`` NULLs (state rows written before epochs existed) as 0, and the
    column added (all 0) when absent, so Arrow sorts by :data:`ORDER_COLS` order them as the
    lake's SQL predicates do (``COALESCE(__epoch, 0)``)."""
    if EPOCH_COL not in rows.column_names:
        return rows.append_column(
            EPOCH_COL, pa.chunked_array([pa.repeat(pa.scalar(0, pa.int64()), rows.num_rows)])
        )
    col = rows.column(EPOCH_COL)
    if col.null_count == 0:
        return rows
    i = rows.column_names.index(EPOCH_COL)
    return rows.set_column(i, EPOCH_COL, pc.fill_null(col.cast(pa.int64()), 0))


def newest_order_key(rows: pa.Table) -> str | None:
    """The ordering key of the newest of ``rows`` (state or tail rows: a NULL ``__epoch`` is 0)
    as ``epoch:file:pos:row`` text, what a compaction records as its ``STATE_AS_OF``; ``None``:
    no rows."""
    if rows.num_rows == 0:
        return None
    t = epoch_filled(rows)
    top = t.take(pc.sort_indices(t, sort_keys=[(c, "descending") for c in ORDER_COLS])[:1]).to_pylist()[0]
    return f"{top['__epoch']}:{top['__binlog_file']}:{top['__binlog_pos']}:{top['__binlog_row']}"


def older_than(rows: pa.Table, epoch: int, file: str, pos: int) -> pa.ChunkedArray:
    """Boolean mask: the state row's ``(__epoch, __binlog_file, __binlog_pos)`` sorts below
    ``(epoch, file, pos)`` (``__epoch`` NULL or absent: 0; NULL file/pos: false)."""
    e = (
        pc.fill_null(rows.column(EPOCH_COL).cast(pa.int64()), 0)
        if EPOCH_COL in rows.column_names
        else pa.chunked_array([pa.repeat(pa.scalar(0, pa.int64()), rows.num_rows)])
    )
    f, p = rows.column("__binlog_file"), rows.column("__binlog_pos")
    same = pc.equal(e, epoch)
    in_epoch = pc.or_(pc.less(f, file), pc.and_(pc.equal(f, file), pc.less(p, pos)))
    return pc.fill_null(pc.or_(pc.less(e, epoch), pc.and_(same, in_epoch)), False)


def newest_per_key(rows: pa.Table, key: Sequence[str]) -> pa.Table:
    """Keep the newest row of each key (greatest ordering key; live before tombstone on ties).

    Nulls in key columns compare equal (``IS NOT DISTINCT FROM``, as the merge predicate of a
    keyless table). Key columns of nested types (e.g. a geometry struct in a keyless table) fall
    back to grouping in Python.

    Args:
        rows: output of :func:`state_rows`.
        key: key column names (all value columns for a keyless table).

    Returns:
        at most one row per distinct key, in no particular order.
    """
    if rows.num_rows <= 1:
        return rows
    order = [(c, "descending") for c in ORDER_COLS] + [("__deleted", "ascending")]
    rows = epoch_filled(rows)
    if all(_groupable(rows.schema.field(k).type) for k in key):
        keys = rows.select(list(key))
        if keys.group_by(list(key), use_threads=False).aggregate([]).num_rows == rows.num_rows:
            return rows  # every key once (e.g. random updates): nothing to choose, nothing copied
        # the order is computed on the ordering columns only, and the rows copied once (winners)
        idx = pc.sort_indices(rows.select([c for c, _ in order]), sort_keys=order)
        ranked = keys.take(idx).append_column("__r", pa.array(range(rows.num_rows), pa.int64()))
        first = ranked.group_by(list(key), use_threads=False).aggregate([("__r", "min")]).column("__r_min")
        return rows.take(idx.take(first))
    rows = rows.take(pc.sort_indices(rows, sort_keys=order))
    from ..source.types import hashable_value  # not at import: Spark's Python workers import this module

    seen: set = set()
    keep: list[int] = []
    for i, k in enumerate(zip(*(rows.column(c).to_pylist() for c in key))):
        h = hashable_value(k)
        if h not in seen:
            seen.add(h)
            keep.append(i)
    return rows.take(pa.array(keep, pa.int64()))


def count_per_value(rows: pa.Table, key: Sequence[str]) -> pa.Table:
    """One row per distinct value of a keyless table's state rows, with its signed multiplicity.

    Each input row counts +1, a tombstone (``__deleted``: a delete's or an update's ``before``
    image) −1; the output row carries the image and metadata of the value's newest event (as
    :func:`newest_per_key`) and ``__count`` (int64), the sum. For snapshot reads (``op=r``) the sum
    is the number of copies read; for binlog events it is the change of the value's number of
    copies (Debezium MySQL connector: a keyless table's events carry whole rows, one per copy
    changed, e.g. ``DELETE ... LIMIT 1`` is one ``d`` event).

    Args:
        rows: output of :func:`state_rows` with ``keyless=True``.
        key: every value column.

    Returns:
        at most one row per distinct value (nulls compare equal), ``rows``' columns + ``__count``.
    """
    sign = pc.if_else(rows.column("__deleted"), pa.scalar(-1, pa.int64()), pa.scalar(1, pa.int64()))
    if rows.num_rows == 0:
        return rows.append_column("__count", pa.chunked_array([sign], pa.int64()))
    order = [(c, "descending") for c in ORDER_COLS] + [("__deleted", "ascending")]
    idx = pc.sort_indices(epoch_filled(rows), sort_keys=order)
    rows, sign = rows.take(idx), sign.take(idx)
    if all(_groupable(rows.schema.field(k).type) for k in key):
        ranked = (
            rows.select(list(key))
            .append_column("__i", pa.array(range(rows.num_rows), pa.int64()))
            .append_column("__sign", sign)
        )
        g = ranked.group_by(list(key), use_threads=False).aggregate([("__i", "min"), ("__sign", "sum")])
        first, counts = g.column("__i_min"), g.column("__sign_sum")
    else:
        from ..source.types import hashable_value

        pos: dict = {}
        keep: list[int] = []
        sums: list[int] = []
        signs = sign.to_pylist()
        for i, k in enumerate(zip(*(rows.column(c).to_pylist() for c in key))):
            h = hashable_value(k)
            j = pos.get(h)
            if j is None:
                pos[h] = len(keep)
                keep.append(i)
                sums.append(signs[i])
            else:
                sums[j] += signs[i]
        first, counts = pa.array(keep, pa.int64()), pa.array(sums, pa.int64())
    return rows.take(first).append_column("__count", pa.chunked_array([counts], pa.int64()).cast(pa.int64()))


def live_multiset(state: pa.Table) -> pa.Table:
    """The live rows of a state table as the source holds them, metadata columns dropped.

    Tombstones (``__deleted``) are dropped; a keyless table's row (it has ``__count``) is repeated
    ``__count`` times, so the result is the source table as a multiset (one row per copy). Columns
    of :data:`~dagster_mysql_cdc.events.STATE_META_NAMES` are removed.

    Args:
        state: a state table (or part of one) with ``__deleted`` and, for keyless tables, ``__count``.
    """
    from ..events import STATE_META_NAMES

    live = state.filter(pc.invert(pc.fill_null(state.column("__deleted"), False)))
    if "__count" in live.column_names:
        counts = pc.fill_null(live.column("__count"), 1)  # a row written before counts existed: one copy
        parts = []
        for c in pc.unique(counts).to_pylist():
            if c > 0:  # zero-copy: the rows with c copies, referenced c times
                parts += [live.filter(pc.equal(counts, c))] * c
        live = pa.concat_tables(parts) if parts else live.slice(0, 0)
    return live.drop_columns([c for c in live.column_names if c in STATE_META_NAMES])


def _groupable(t: pa.DataType) -> bool:
    return not (pa.types.is_nested(t) or pa.types.is_dictionary(t))
