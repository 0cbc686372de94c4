"""Live-row counts read from the lake (the reads behind :mod:`.live_rows`' recorded counts and the
row-count asset check).

- :func:`state_live_count`: a compacted ``state`` table's live rows, from the Delta log's per-file
  statistics (only files mixing live rows and tombstones are read);
- :func:`live_count`: the current state's (the tail applied, :mod:`.read`), that count corrected
  by the tail's keys;
- :func:`keyless_live_change`: the change of a keyless table's live copies that a batch's tail
  rows make, before they are committed (:func:`.current.resolve`: never below zero).

A keyless table's row counts ``__count`` times everywhere.
"""

from __future__ import annotations

import logging
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from .current import aligned_to, resolve
from .data_files import read_files
from .delta import open_table
from .evolution import conform_table
from .key_model import key_columns_of
from .layout import TablePaths
from .read import live_only, load_parts, read_current
from .storage import StorageSettings
from .tail import CUT_COL, state_schema_after

log = logging.getLogger(__name__)


def state_live_count(storage: StorageSettings, state_uri: str) -> int | None:
    """Live rows of a state table (``__deleted = false``; a keyless row counts ``__count`` times).

    Read from the Delta log's per-file statistics (``numRecords``, min/max of ``__deleted``): a file
    whose rows are all live or all tombstones is not opened; only files mixing both are read (one
    boolean column). Keyless tables (``__count``) read the two meta columns.

    Returns:
        the count, or ``None`` when ``state_uri`` is not a Delta table yet.
    """
    import pyarrow.dataset as pads

    dtable = open_table(storage, state_uri)
    if dtable is None:
        return None
    live = pads.field("__deleted") == False  # noqa: E712

    def dataset() -> pads.Dataset:  # built only when files are read (a keyed table's stats suffice)
        return dtable.to_pyarrow_dataset(filesystem=storage.delta_filesystem(state_uri))

    if any(f.name == "__count" for f in dtable.schema().fields):
        ds = dataset()
        total = 0
        for batch in ds.to_batches(columns=["__count"], filter=live):
            s = pc.sum(pc.fill_null(batch.column("__count"), 1)).as_py()
            total += int(s or 0)
        return total
    try:
        actions = pa.table(dtable.get_add_actions(flatten=True))
        names = set(actions.column_names)
        lo_col, hi_col = "min.__deleted", "max.__deleted"
        if not {"num_records", lo_col, hi_col} <= names:
            raise KeyError("no __deleted statistics")
        total = 0
        mixed: list[str] = []
        rows = zip(
            actions.column("path").to_pylist(),
            actions.column("num_records").to_pylist(),
            actions.column(lo_col).to_pylist(),
            actions.column(hi_col).to_pylist(),
        )
        for path, n, lo, hi in rows:
            if n is None or lo is None or hi is None:
                mixed.append(path)
            elif hi is False:
                total += int(n)
            elif lo is True:
                continue
            else:
                mixed.append(path)
        if mixed:
            wanted = set(mixed)
            for frag in dataset().get_fragments():
                if any(frag.path.endswith(p) for p in wanted):
                    total += frag.count_rows(filter=live)
        return total
    except (KeyError, ValueError, pa.ArrowException) as e:  # no statistics: count by scanning
        log.debug("state_live_count(%s): %s; scanning __deleted", state_uri, e)
        return dataset().count_rows(filter=live)


def live_count(storage: StorageSettings, paths: TablePaths | str) -> int | None:
    """Live rows of a table's current state (a keyless table's row counts ``__count`` times), or
    ``None`` when it has no state yet.

    Without a tail, from the Delta log's per-file statistics of the state (``numRecords``,
    min/max of ``__deleted``; only files mixing live rows and tombstones are read). With one, that
    count corrected by the tail's keys: their live rows in the state against their current rows,
    from one read of the tail and one filtered read of the state's key and metadata columns."""
    if isinstance(paths, str):
        paths = TablePaths(changelog="", state=paths)
    tail_dt = open_table(storage, paths.tail)
    tail_files = pa.table(tail_dt.get_add_actions(flatten=True)).num_rows if tail_dt is not None else 0
    state_dt = open_table(storage, paths.state)
    key = key_columns_of(state_dt, tail_dt)
    if not tail_files:
        return state_live_count(storage, paths.state) if state_dt is not None else None
    if not key:  # keyless: the whole (small) table
        cur = read_current(storage, paths, live=True)
        return 0 if cur is None else int(pc.sum(pc.fill_null(cur.column("__count"), 1)).as_py() or 0)
    assert tail_dt is not None
    tail_keys = read_files(
        storage,
        paths.tail,
        pa.table(tail_dt.get_add_actions(flatten=True)).column("path").to_pylist(),
        pa.schema(
            [pa.schema(tail_dt.schema().to_arrow()).field(k) for k in key] + [pa.field("__cut", pa.bool_())]
        ),
    )
    if pc.any(pc.fill_null(tail_keys.column("__cut"), False)).as_py():  # a cut: count it all
        cur = read_current(storage, paths, live=True, columns=key)
        return 0 if cur is None else cur.num_rows
    touched = set(zip(*(tail_keys.column(k).to_pylist() for k in key)))
    parts = load_parts(
        storage, paths, columns=key, keys=(key, touched), with_tail=True, opened=(state_dt, tail_dt)
    )
    assert parts is not None
    old = parts.state_rows()
    now = parts.resolved()
    before = 0 if old is None else live_only(old).num_rows
    base = state_live_count(storage, paths.state) if state_dt is not None else 0
    return (base or 0) - before + (0 if now is None else live_only(now).num_rows)


def keyless_live_change(
    storage: StorageSettings, paths: TablePaths, window: pa.Table, *, opened: tuple[Any, Any]
) -> int:
    """The change of a keyless table's live copies that appending the tail rows ``window`` (a
    batch's, not committed yet) makes: the current counts of the values it touches with and
    without it (:func:`.current.resolve`: changes applied in order, never below zero, so a
    ``-1`` on a value the lake has no copy of changes nothing, and an update of such a row adds
    its new image). Reads the compacted state's rows whose first column has one of the window's
    values, and the tail (bounded by compaction); ``opened``: the ``(state, tail)`` Delta tables
    as they are now (the tail's schema holds the window's columns).

    Raises:
        whatever reading the lake raises.
    """

    state_dt, tail_dt = opened
    st_schema = pa.schema(state_dt.schema().to_arrow()) if state_dt is not None else None
    tail_schema = pa.schema(tail_dt.schema().to_arrow()) if tail_dt is not None else window.schema
    schema = state_schema_after(st_schema, tail_schema, True)
    first = schema.names[0]
    like = schema.field(first).type  # (a supertype of the state's, the tail's and the window's)
    touched = None
    if first in window.column_names and not pa.types.is_nested(like):
        touched = pc.unique(window.column(first).combine_chunks()).cast(like)

    def of_window(t: pa.Table) -> Any:
        """The rows whose first column has a value of the window's, and the cut markers."""
        assert touched is not None
        hit = pc.is_in(t.column(first).cast(like), value_set=touched)
        if CUT_COL in t.column_names:
            hit = pc.or_(hit, pc.fill_null(t.column(CUT_COL), False))
        return hit

    row_filter = None if touched is None else of_window
    state = None
    if state_dt is not None:
        files = pa.table(state_dt.get_add_actions(flatten=True)).column("path").to_pylist()
        state = read_files(storage, paths.state, files, st_schema, row_filter=row_filter)
        state = conform_table(state, pa.schema([schema.field(n) for n in state.column_names]))
    tail = tail_schema.empty_table()
    if tail_dt is not None:
        files = pa.table(tail_dt.get_add_actions(flatten=True)).column("path").to_pylist()
        tail = read_files(storage, paths.tail, files, tail_schema, row_filter=row_filter)

    def live_copies(t: pa.Table) -> int:
        live = live_only(t)
        return int(pc.sum(pc.fill_null(live.column("__count"), 1)).as_py() or 0) if live.num_rows else 0

    before = live_copies(resolve(state, tail, key=[], schema=schema))
    both = pa.concat_tables([tail, aligned_to(window, tail_schema)])
    return live_copies(resolve(state, both, key=[], schema=schema)) - before
