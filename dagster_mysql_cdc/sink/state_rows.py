"""Change events → current-state rows, newest event per key, in Arrow (no Spark round trip).

The state table of a captured table holds one row per key: the image of its newest event plus the
metadata columns of :data:`dagster_mysql_cdc.events.STATE_META_FIELDS` (Debezium's
``ExtractNewRecordState`` with ``add.fields`` and ``delete.handling.mode=rewrite``). This module
computes those rows for one change-log record batch with pyarrow compute kernels, which run in
C++ and release the GIL: on the driver's sink thread (rows merged into the state table), so the
binlog reader is not held up, and in the Spark tasks that write a first snapshot's state files.
``tests/test_state_rows.py`` checks them against the same computation in Spark (column
expressions and a ``row_number`` window).

Ordering: an event is newer when its ordering key ``(__binlog_file, __binlog_pos, __binlog_row)``
is greater; snapshot reads (``op=r``) take ``__binlog_row = -1`` so they order before binlog events
at their position. Ties (a keyless update that changes nothing) prefer the live row over the
tombstone.
"""

from __future__ import annotations

from collections.abc import Sequence

import pyarrow as pa
import pyarrow.compute as pc

ORDER_COLS = ("__binlog_file", "__binlog_pos", "__binlog_row")


def state_rows(
    batch: pa.RecordBatch | pa.Table, value_names: Sequence[str], *, keyless: bool = False
) -> pa.Table:
    """State rows of the change events in ``batch`` (one per event, not yet deduplicated).

    Args:
        batch: change-log rows (columns ``before``, ``after``, ``source``, ``op``, ``ts_ms``).
        value_names: the table's columns, in state-table order (children of ``after``).
        keyless: the table has no key (every column is the key): an update also yields a
            tombstone for its ``before`` image, which is another key (Debezium
            ``message.key.columns`` unset on a keyless table).

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
    rows = rows.take(pc.sort_indices(rows, sort_keys=order))
    if all(_groupable(rows.schema.field(k).type) for k in key):
        ranked = rows.select(list(key)).append_column("__i", pa.array(range(rows.num_rows), pa.int64()))
        first = ranked.group_by(list(key), use_threads=False).aggregate([("__i", "min")]).column("__i_min")
        return rows.take(first)
    seen: set = set()
    keep: list[int] = []
    for i, k in enumerate(zip(*(rows.column(c).to_pylist() for c in key))):
        h = _hashable(k)
        if h not in seen:
            seen.add(h)
            keep.append(i)
    return rows.take(pa.array(keep, pa.int64()))


def _groupable(t: pa.DataType) -> bool:
    return not (pa.types.is_nested(t) or pa.types.is_dictionary(t))


def _hashable(v):
    if isinstance(v, dict):
        return tuple(sorted((k, _hashable(x)) for k, x in v.items()))
    if isinstance(v, (list, tuple)):
        return tuple(_hashable(x) for x in v)
    return v
