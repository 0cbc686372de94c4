"""The current state: the compacted state with the tail applied (merge-on-read).

:func:`resolve` is the one definition of "applying the tail", shared by the current read
(:func:`current_state`), the in-process compaction and, expressed as Spark SQL, the Spark
compaction (:mod:`.compaction`); ``tests/test_current_unit.py`` checks it against a replay of the
events one by one.

Rules (Debezium's ``ExtractNewRecordState`` with ``delete.handling.mode=rewrite``, as the state
table always had them):

- keyed tables: per key, the row with the greatest ordering key ``(__epoch, __binlog_file,
  __binlog_pos, __binlog_row)`` wins, the compacted row or a tail row (a tail row older than the
  compacted one, e.g. a stream window behind a snapshot, loses); on a tie a live row beats a
  tombstone;
- keyless tables (one row per distinct value, ``__count`` copies): a value's copies are its
  compacted count with the ``__count`` changes of its tail rows *newer* than the compacted row
  applied one by one in ordering-key order (a ``-1`` before a ``+1`` on a tie: a keyless update
  that changes nothing), **never below zero**: a ``-1`` on a value without copies changes nothing
  (the copy it removes is one the lake never had: a row that existed before a ``no_data``
  capture). The compacted row's ordering key is the newest event it holds, so a tail row already
  compacted is never counted twice, even when its file is still in the tail. Applied this way, a
  count is ``P_n - min(0, min_k P_k)`` with ``P_k`` the plain running sum (compacted count first):
  what the Spark SQL form computes with window functions;
- cut markers (``__cut``): every row older than the newest cut becomes a tombstone at the cut
  (``__op`` of the cut, ``t`` or ``r``; a keyless row's count 0), and tail rows older than it are
  dropped.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from ..events import COUNT_FIELD, STATE_META_NAMES
from .state_rows import EPOCH_COL, ORDER_COLS, epoch_filled, newest_per_key
from .tail import CUT_COL

Ordering = tuple[int, str, int, int]


def newest_cut(tail: pa.Table | None) -> tuple[Ordering, str] | None:
    """The newest cut marker of ``tail`` as ``((epoch, file, pos, row), op)``, or ``None``."""
    if tail is None or tail.num_rows == 0 or CUT_COL not in tail.column_names:
        return None
    cuts = tail.filter(pc.fill_null(tail.column(CUT_COL), False))
    if cuts.num_rows == 0:
        return None
    cuts = epoch_filled(cuts)
    order = [(c, "descending") for c in ORDER_COLS]
    top = cuts.take(pc.sort_indices(cuts, sort_keys=order)[:1]).to_pylist()[0]
    return (
        int(top[EPOCH_COL]),
        top["__binlog_file"],
        int(top["__binlog_pos"]),
        int(top["__binlog_row"]),
    ), top["__op"]


def _ordering_cols(t: pa.Table, prefix: str = "") -> list:
    e = pc.fill_null(t.column(prefix + EPOCH_COL).cast(pa.int64()), 0)
    return [
        e,
        t.column(prefix + "__binlog_file"),
        t.column(prefix + "__binlog_pos"),
        t.column(prefix + "__binlog_row"),
    ]


def _greater(a: list, b: list) -> Any:
    """Lexicographic ``a > b`` of two orderings given as four column arrays each (null -> false)."""
    out = None
    for x, y in reversed(list(zip(a, b))):
        gt = pc.greater(x, y)
        out = gt if out is None else pc.or_(gt, pc.and_(pc.equal(x, y), out))
    return pc.fill_null(out, False)


def older_than_cut(t: pa.Table, cut: Ordering) -> Any:
    """Mask: the row's ordering key sorts below ``cut`` (null -> false)."""
    e, f, p, r = cut
    scalars = [
        pa.scalar(e, pa.int64()),
        pa.scalar(f, pa.string()),
        pa.scalar(p, pa.int64()),
        pa.scalar(r, t.schema.field("__binlog_row").type),
    ]
    return _greater([pa.repeat(s, t.num_rows) for s in scalars], _ordering_cols(t))


def _tombstoned(t: pa.Table, mask, cut: Ordering, op: str, keyless: bool) -> pa.Table:
    """``t`` with the live rows under ``mask`` turned into tombstones at ``cut``."""
    live = pc.invert(pc.fill_null(t.column("__deleted"), False))
    hit = pc.and_(mask, live)
    if not pc.any(hit).as_py():
        return t
    e, f, p, r = cut
    sets = {
        "__deleted": pa.scalar(True),
        "__op": pa.scalar(op),
        EPOCH_COL: pa.scalar(e, pa.int64()),
        "__binlog_file": pa.scalar(f),
        "__binlog_pos": pa.scalar(p, pa.int64()),
        "__binlog_row": pa.scalar(r, t.schema.field("__binlog_row").type),
    }
    if keyless and COUNT_FIELD.name in t.column_names:
        sets[COUNT_FIELD.name] = pa.scalar(0, pa.int64())
    for name, value in sets.items():
        if name not in t.column_names:
            continue
        i = t.column_names.index(name)
        col = t.column(i)
        t = t.set_column(i, t.schema.field(i), pc.if_else(hit, pc.cast(value, col.type), col))
    return t


def aligned_to(t: pa.Table, schema: pa.Schema) -> pa.Table:
    """``t`` with ``schema``'s columns (missing ones null, others dropped), in its order."""
    cols = [
        t.column(f.name).cast(f.type) if f.name in t.column_names else pa.nulls(t.num_rows, f.type)
        for f in schema
    ]
    return pa.Table.from_arrays(cols, schema=schema)


def resolve(
    state: pa.Table | Iterable[pa.Table] | None,
    tail: pa.Table | None,
    *,
    key: Sequence[str],
    schema: pa.Schema,
) -> pa.Table:
    """The state after applying ``tail`` (tail rows: :func:`.tail.tail_rows`) to ``state`` (rows
    of the compacted state), in the layout ``schema`` (a state schema). See the module docs.

    Args:
        state: the compacted rows: one table, or (keyed tables) an iterable of parts, e.g. one
            per data file as they are read: each part is resolved against the tail and only its
            surviving rows are kept, so the whole unresolved state is never held beside the
            result (a keyed key is in one part only: the compacted state has one row per key).
        key: the primary key columns; empty: keyless (every value column is the key, ``__count``).
        schema: the output's columns (the state table's, after the tail's schema is merged in).

    Returns:
        one row per key (keyless: per distinct value), tombstones kept, no particular order.
    """
    keyless = not key
    cut = newest_cut(tail)
    if tail is not None and CUT_COL in tail.column_names:
        tail = tail.filter(pc.invert(pc.fill_null(tail.column(CUT_COL), False)))
    rows = aligned_to(epoch_filled(tail), schema) if tail is not None else schema.empty_table()
    if cut is not None:
        rows = rows.filter(pc.invert(older_than_cut(rows, cut[0])))
    parts: Iterable[pa.Table] = [] if state is None else [state] if isinstance(state, pa.Table) else state
    if not keyless:
        out = _resolve_keyed((aligned_to(epoch_filled(p), schema) for p in parts), rows, list(key), schema)
        if cut is not None:
            out = _tombstoned(out, older_than_cut(out, cut[0]), cut[0], cut[1], False)
        return out
    loaded = list(parts)
    base = (
        aligned_to(epoch_filled(pa.concat_tables(loaded) if len(loaded) > 1 else loaded[0]), schema)
        if loaded
        else schema.empty_table()
    )
    fresh = pa.chunked_array([pa.repeat(pa.scalar(False), base.num_rows)], pa.bool_())
    if cut is not None:  # the cut empties the older values first; tail rows at or after it count
        fresh = older_than_cut(base, cut[0])
        base = _tombstoned(base, fresh, cut[0], cut[1], True)
    return _resolve_keyless(base, rows, schema, fresh)


def _resolve_keyed(parts: Iterable[pa.Table], rows: pa.Table, key: list[str], schema: pa.Schema) -> pa.Table:
    """Keyed: every compacted part without the rows a tail row beats, then the tail's newest rows
    that no compacted row beats. Parts are applied in groups of at least twice the tail's keys
    (each group pays one hash table of the tail's keys)."""
    newest = newest_per_key(rows, key) if rows.num_rows else None
    if newest is None:
        loaded = list(parts)
        return pa.concat_tables(loaded) if loaded else schema.empty_table()
    import numpy as np

    kept: list[pa.Table] = []
    tail_wins = np.ones(newest.num_rows, dtype=bool)
    group: list[pa.Table] = []
    group_rows = 0
    at_least = max(1_000_000, 2 * newest.num_rows)

    def apply() -> None:
        nonlocal group, group_rows
        base = pa.concat_tables(group) if len(group) > 1 else group[0]
        group, group_rows = [], 0
        survivors, beaten = _apply_tail(base, newest, key)
        kept.append(survivors)
        if beaten is not None and len(beaten):
            tail_wins[beaten.to_numpy(zero_copy_only=False)] = False

    for part in parts:
        group.append(part)
        group_rows += part.num_rows
        if group_rows >= at_least:
            apply()
    if group:
        apply()
    if not tail_wins.all():
        newest = newest.filter(pa.array(tail_wins))
    if not kept:
        return newest
    like = kept[0].schema
    return pa.concat_tables([*kept, newest.select(like.names).cast(like)])


def _apply_tail(base: pa.Table, newest: pa.Table, key: list[str]) -> tuple[pa.Table, pa.Array | None]:
    """``base`` (compacted rows) without the rows whose key has a newer tail row in ``newest``
    (one row per key), and the positions in ``newest`` of the rows a compacted row beats
    (``None``: none)."""
    # the compacted rows whose key the tail touches, with the position of their tail row: a hash
    # lookup over the state (no join of the whole table); only those few are compared
    hit_i, hit_j = _touched(base, newest, key)
    if len(hit_i) == 0:
        return base, None
    # only the ordering columns are compared (never nested non-key columns, e.g. a geometry struct)
    cmp_cols = [c for c in (*ORDER_COLS, "__deleted") if c in base.column_names]
    mine = base.select(cmp_cols).take(hit_i)
    theirs = newest.select([c for c in (*ORDER_COLS, "__deleted") if c in newest.column_names]).take(hit_j)
    s_ord, t_ord = _ordering_cols(mine), _ordering_cols(theirs)
    tie = pc.and_(pc.invert(_greater(s_ord, t_ord)), pc.invert(_greater(t_ord, s_ord)))
    s_live = pc.invert(pc.fill_null(mine.column("__deleted"), False))
    t_dead = pc.fill_null(theirs.column("__deleted"), False)
    state_wins = pc.or_(_greater(s_ord, t_ord), pc.and_(tie, pc.and_(s_live, t_dead)))
    losers = pc.filter(hit_i, pc.invert(state_wins))
    beaten = pc.filter(hit_j, state_wins)
    if len(losers):
        import numpy as np

        keep = np.ones(base.num_rows, dtype=bool)
        keep[losers.to_numpy(zero_copy_only=False)] = False
        base = _filtered(base, pa.array(keep))
    return base, beaten


def _filtered(t: pa.Table, mask: pa.Array) -> pa.Table:
    """``t.filter(mask)`` with the columns copied by parallel threads (Arrow's kernels release the
    GIL; a table's filter copies its columns one after another)."""
    if t.num_rows < 100_000 or t.num_columns < 2:
        return t.filter(mask)
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=min(8, os.cpu_count() or 1)) as pool:
        cols = list(pool.map(lambda c: pc.filter(c, mask), t.columns))
    return pa.Table.from_arrays(cols, schema=t.schema)


def _touched(base: pa.Table, newest: pa.Table, key: list[str]) -> tuple[pa.Array, pa.Array]:
    """``(rows of base, rows of newest)``: the index pairs of equal keys (``newest`` has one row per
    key), ordered by the ``base`` index."""
    if len(key) == 1:
        col = base.column(key[0])
        pos = pc.index_in(col, value_set=newest.column(key[0]).combine_chunks().cast(col.type))
        hit_i = pc.indices_nonzero(pc.is_valid(pos))
        return hit_i, pc.take(pos, hit_i).combine_chunks().cast(pa.int64())
    # a composite key: the first column narrows, a small join decides
    first = base.column(key[0])
    near = pc.indices_nonzero(
        pc.is_in(first, value_set=pc.unique(newest.column(key[0]).combine_chunks().cast(first.type)))
    )
    cand = base.select(key).take(near).append_column("__i", near)
    ids = newest.select(key).append_column("__j", pa.array(range(newest.num_rows), pa.int64()))
    hits = cand.join(ids, keys=key, join_type="inner", use_threads=False)
    order = pc.sort_indices(hits, sort_keys=[("__i", "ascending")])
    hits = hits.take(order)
    return hits.column("__i").combine_chunks(), hits.column("__j").combine_chunks()


def _resolve_keyless(base: pa.Table, rows: pa.Table, schema: pa.Schema, fresh) -> pa.Table:
    """Keyless: per distinct value, the compacted count with the tail's changes newer than the
    compacted row applied oldest first, never below zero (``fresh``: compacted rows a cut just
    emptied, every tail row counts for them)."""
    from ..source.types import hashable_value as _hashable  # the value identity of count_per_value

    if rows.num_rows == 0:
        return base
    values = [n for n in schema.names if n not in STATE_META_NAMES]
    count = COUNT_FIELD.name
    if count not in base.column_names:
        base = base.append_column(COUNT_FIELD, pa.nulls(base.num_rows, pa.int64()))
    order = [(c, "ascending") for c in ORDER_COLS] + [("__deleted", "descending")]
    rows = rows.take(pc.sort_indices(rows, sort_keys=order))  # oldest first: applied in order
    groups: dict[Any, dict] = {}
    b_vals = list(zip(*(base.column(v).to_pylist() for v in values))) if values else [()] * base.num_rows
    b_ord = list(zip(*(c.to_pylist() for c in _ordering_cols(base))))
    b_del = base.column("__deleted").to_pylist()
    b_cnt = base.column(count).to_pylist()
    b_fresh = fresh.to_pylist()
    for i, v in enumerate(b_vals):
        c = b_cnt[i]
        c = (0 if b_del[i] else 1) if c is None else max(0, c)  # a row written before counts: one copy
        since = None if b_fresh[i] else b_ord[i]
        groups[_hashable(v)] = {"since": since, "ord": b_ord[i], "count": c, "src": ("s", i)}
    r_vals = list(zip(*(rows.column(v).to_pylist() for v in values))) if values else [()] * rows.num_rows
    r_ord = list(zip(*(c.to_pylist() for c in _ordering_cols(rows))))
    r_cnt = rows.column(count).to_pylist()
    for i, v in enumerate(r_vals):
        h = _hashable(v)
        g = groups.get(h)
        if g is None:
            g = groups[h] = {"since": None, "ord": r_ord[i], "count": 0, "src": ("t", i)}
        if g["since"] is not None and not r_ord[i] > g["since"]:
            continue  # already in the compacted count
        g["count"] = max(0, g["count"] + (r_cnt[i] or 0))  # in order, never below zero
        if r_ord[i] >= g["ord"]:
            g["ord"], g["src"] = r_ord[i], ("t", i)
    s_idx = [g["src"][1] for g in groups.values() if g["src"][0] == "s"]
    t_idx = [g["src"][1] for g in groups.values() if g["src"][0] == "t"]
    s_cnt = [g["count"] for g in groups.values() if g["src"][0] == "s"]
    t_cnt = [g["count"] for g in groups.values() if g["src"][0] == "t"]
    parts = []
    for tbl, idx, cnts in ((base, s_idx, s_cnt), (rows, t_idx, t_cnt)):
        if not idx:
            continue
        part = aligned_to(tbl.take(pa.array(idx, pa.int64())), base.schema)
        part = _with_counts(part, cnts)
        parts.append(part)
    return pa.concat_tables(parts) if parts else base.slice(0, 0)


def _with_counts(t: pa.Table, counts: list[int]) -> pa.Table:
    """Set ``__count`` and make ``__deleted``/``__op`` agree with it (a live value never says
    ``d``: a value left with copies after some were deleted reads ``u``)."""
    cnt = pa.chunked_array([pa.array(counts, pa.int64())])
    dead = pc.less_equal(cnt, 0)
    i = t.column_names.index(COUNT_FIELD.name)
    t = t.set_column(i, COUNT_FIELD, cnt)
    j = t.column_names.index("__deleted")
    t = t.set_column(j, t.schema.field(j), dead)
    k = t.column_names.index("__op")
    op = t.column(k)
    live_d = pc.and_(pc.invert(dead), pc.equal(op, "d"))
    return t.set_column(k, t.schema.field(k), pc.if_else(live_d, pa.scalar("u"), op))
