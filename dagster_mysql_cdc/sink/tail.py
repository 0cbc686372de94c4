"""The state's tail: the state rows of every change since the last compaction (merge-on-read).

A window appends its changes to the lake, it does not rewrite the state: each table batch's change
events become **tail rows** in the table's ``state_tail`` Delta table (one per event, not
deduplicated), written by the same Spark job as the change log (:class:`.spark_files.FileOutput`
``kind="tail"``) and committed with the same batch identity. The compacted ``state`` table is
rewritten only by a compaction (:mod:`.compaction`), when the tail has grown past a fraction of
it. A reader that wants the state as of the last committed window applies the tail to the
compacted state (:mod:`.current`). This is the merge-on-read design of Apache Hudi (log files
merged at read or compaction time) and Apache Paimon (an LSM of sorted runs per bucket), on plain
Delta tables: any Delta reader sees the compacted state as a normal table.

A tail row has the state table's columns (:func:`~..events.state_schema`: the row image of the
event, ``__op``, ``__deleted`` and the ordering key ``(__epoch, __binlog_file, __binlog_pos,
__binlog_row)``), plus:

``__cut``
    ``true`` on a **cut marker**: every row older than its ordering key is gone (a ``TRUNCATE``,
    a dropped or replaced table: ``__op='t'`` at ``(pos, 0)``; a full snapshot:
    ``__op='r'`` at ``(snapshot position, -1)``, so keys the snapshot did not read are deleted).
    Its value columns are null.
``__count``
    keyless tables only: the change of the value's number of copies this event makes (``+1`` an
    insert, an update's new image or a snapshot read; ``-1`` a delete or an update's old image).
"""

from __future__ import annotations

from collections.abc import Sequence

import pyarrow as pa
import pyarrow.compute as pc

from ..events import COUNT_FIELD, STATE_META_FIELDS
from .evolution import conform_schema
from .state_rows import state_rows

CUT_COL = "__cut"
CUT_FIELD = pa.field(CUT_COL, pa.bool_())


def tail_schema(state: pa.Schema, *, keyless: bool) -> pa.Schema:
    """The tail rows' schema for a state schema (``state`` with or without ``__count``)."""
    fields = [f for f in state if f.name not in (CUT_COL, COUNT_FIELD.name)]
    if keyless:
        fields.append(COUNT_FIELD)
    return pa.schema([*fields, CUT_FIELD])


def tail_rows(events: pa.Table, value_names: Sequence[str], *, keyless: bool, epoch: int = 0) -> pa.Table:
    """The tail rows of a chunk of change events (Debezium envelopes, change-log schema): one state
    row per event (:func:`.state_rows.state_rows`; a keyless update gives two: the old image's
    ``-1`` and the new image's ``+1``), and a cut marker per ``t`` event.

    Returns:
        a table of the state columns of ``value_names``, the metadata columns, ``__count`` for a
        keyless table, and ``__cut``.
    """
    rows = state_rows(events, value_names, keyless=keyless, epoch=epoch)
    n = rows.num_rows
    if keyless:
        sign = pc.if_else(rows.column("__deleted"), pa.scalar(-1, pa.int64()), pa.scalar(1, pa.int64()))
        rows = rows.append_column(COUNT_FIELD, sign)
    rows = rows.append_column(CUT_FIELD, pa.chunked_array([pa.repeat(pa.scalar(False), n)], pa.bool_()))
    ops = events.column("op")
    cuts = pc.indices_nonzero(pc.fill_null(pc.equal(ops, "t"), False))
    if len(cuts) == 0:
        return rows
    src = events.column("source").take(cuts)
    marks = cut_markers(
        files=pc.struct_field(src, "file"),
        positions=pc.cast(pc.struct_field(src, "pos"), pa.int64()),
        row=0,
        op="t",
        epoch=epoch,
        ts_ms=pc.cast(events.column("ts_ms").take(cuts), pa.int64()),
        source_ts_ms=pc.cast(pc.struct_field(src, "ts_ms"), pa.int64()),
        gtids=pc.struct_field(src, "gtid"),
        like=rows.schema,
    )
    return pa.concat_tables([rows, marks])


def cut_markers(
    *,
    files: pa.Array | pa.ChunkedArray,
    positions: pa.Array | pa.ChunkedArray,
    row: int,
    op: str,
    epoch: int,
    like: pa.Schema,
    ts_ms: pa.Array | pa.ChunkedArray | None = None,
    source_ts_ms: pa.Array | pa.ChunkedArray | None = None,
    gtids: pa.Array | pa.ChunkedArray | None = None,
    snapshot: str = "false",
) -> pa.Table:
    """Cut marker rows (``__cut = true``) at ``(epoch, files[i], positions[i], row)`` in the
    layout ``like`` (value columns null)."""
    n = len(files)
    meta = {
        "__op": pa.repeat(pa.scalar(op), n),
        "__deleted": pa.repeat(pa.scalar(True), n),
        "__ts_ms": ts_ms if ts_ms is not None else pa.nulls(n, pa.int64()),
        "__source_ts_ms": source_ts_ms if source_ts_ms is not None else pa.nulls(n, pa.int64()),
        "__snapshot": pa.repeat(pa.scalar(snapshot), n),
        "__epoch": pa.repeat(pa.scalar(int(epoch), pa.int64()), n),
        "__binlog_file": files,
        "__binlog_pos": positions,
        "__binlog_row": pa.repeat(pa.scalar(int(row), pa.int32()), n),
        "__gtid": gtids if gtids is not None else pa.nulls(n, pa.string()),
        CUT_COL: pa.repeat(pa.scalar(True), n),
    }
    cols = []
    for f in like:
        v = meta.get(f.name)
        cols.append(pa.nulls(n, f.type) if v is None else pc.cast(v, f.type))
    return pa.Table.from_arrays(
        [c if isinstance(c, pa.ChunkedArray) else pa.chunked_array([c], c.type) for c in cols], schema=like
    )


STATE_META = tuple(f.name for f in STATE_META_FIELDS)


def state_schema_after(state: pa.Schema | None, tail: pa.Schema, keyless: bool) -> pa.Schema:
    """The compacted state's schema with the tail's columns and types merged in (``__cut``
    dropped; ``__count`` kept only for a keyless table)."""
    tail_state = pa.schema([f for f in tail if f.name != CUT_COL and (keyless or f.name != COUNT_FIELD.name)])
    return conform_schema(state, tail_state, keep_metadata=True).schema
