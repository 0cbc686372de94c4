"""Reading a captured table's current state from the lake (merge-on-read).

The ``state`` Delta table is the *compacted* state: what any Delta reader sees, as of its last
compaction (:mod:`.compaction`; every window for small tables). The changes since are in the
``state_tail`` table. :func:`read_current` (Arrow, in this process) and :func:`current_frame`
(a Spark DataFrame, read by the executors) apply the tail to the compacted state
(:func:`.current.resolve`), so the result is the state as of the last committed window, exactly.
``docs/output-layout.md`` has the same read as DuckDB and Spark SQL.

Both return the state table's layout: the table's columns, then the metadata columns
(``__deleted`` tombstones included: filter ``__deleted = false`` for the live rows; a keyless
table's row stands for ``__count`` copies, :func:`.state_rows.live_multiset`).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from .current import resolve
from .data_files import read_file_parts, read_files
from .delta import open_table
from .key_model import key_columns_of
from .layout import TablePaths
from .storage import StorageSettings
from .tail import state_schema_after

#: Columns every current read keeps besides the ones asked for (what resolving the tail needs).
RESOLVE_COLUMNS = (
    "__op",
    "__deleted",
    "__epoch",
    "__binlog_file",
    "__binlog_pos",
    "__binlog_row",
    "__count",
    "__cut",
)


@dataclass
class _Parts:
    """What a current read loaded: the compacted state's rows (filtered to some keys, or all),
    the tail's rows, and how to resolve them."""

    state: pa.Table | None
    tail: pa.Table | None  # None: no tail files
    key: list[str] | None
    keyless: bool
    #: the resolved rows' schema (with a tail; without tail files, the state's columns in the
    #: tail table's types, when it has a tail table)
    schema: pa.Schema | None
    key_set: set[tuple]
    #: the compacted state's files, read one at a time while resolving (a keyed full read with a
    #: tail; ``state`` is then ``None``)
    state_files: Iterator[list[pa.Table]] | None = None

    def resolved(self) -> pa.Table | None:
        """The current rows (:func:`.current.resolve`), restricted to the keys asked for."""
        import pyarrow.compute as pc

        from .evolution import conform_table

        if self.tail is None:
            if self.state is not None and self.schema is not None:
                # a tail without rows, made by a DDL (a column added, a type widened: the state
                # takes them at its next compaction): the state read in the current types
                return self._only_keys(conform_table(self.state, self.schema), pc)
            return self._only_keys(self.state, pc)
        assert self.schema is not None
        schema = self.schema

        def conformed(t: pa.Table) -> pa.Table:
            return conform_table(t, pa.schema([schema.field(n) for n in t.column_names]))

        state: pa.Table | Iterator[pa.Table] | None
        if self.state_files is not None:
            state = (conformed(pa.concat_tables(b)) for b in self.state_files if b)
        else:
            state = None if self.state is None else conformed(self.state)
        return self._only_keys(resolve(state, self.tail, key=self.key or [], schema=schema), pc)

    def state_rows(self) -> pa.Table | None:
        """The compacted state's rows alone (restricted to the keys asked for)."""
        import pyarrow.compute as pc

        return self._only_keys(self.state, pc)

    def _only_keys(self, out: pa.Table | None, pc: Any) -> pa.Table | None:
        if out is None or not self.key_set or not out.num_rows or not self.key:
            return out
        hits = [
            i
            for i, k in enumerate(zip(*(out.column(c).to_pylist() for c in self.key)))
            if tuple(k) in self.key_set
        ]
        return out.take(pa.array(hits, pa.int64()))


def live_only(t: pa.Table) -> pa.Table:
    """The live rows of state rows ``t`` (``__deleted`` false or null)."""
    import pyarrow.compute as pc

    return t.filter(pc.invert(pc.fill_null(t.column("__deleted"), False)))


def load_parts(
    storage: StorageSettings,
    paths: TablePaths,
    *,
    columns: Sequence[str] | None,
    keys: tuple[Sequence[str], Iterable[tuple]] | None,
    with_tail: bool,
    opened: tuple[Any, Any] | None = None,
    tail_only: Sequence[str] | None = None,
    key_range: tuple[str, Any, Any] | None = None,
) -> _Parts | None:
    """Read what a current read needs once (see :func:`read_current` for the arguments;
    ``opened``: the ``(state, tail)`` Delta tables when the caller has just opened them;
    ``tail_only``: read these tail files and no compacted state, see :func:`read_window_rows`)."""
    import pyarrow.compute as pc

    if opened is not None:
        state_dt, tail_dt = opened[0], opened[1] if with_tail else None
    else:  # the tail first: a compaction in between leaves rows in both (applied again harmlessly)
        tail_dt = open_table(storage, paths.tail) if with_tail else None
        state_dt = open_table(storage, paths.state)
    if state_dt is None and tail_dt is None:
        return None
    key = key_columns_of(state_dt, tail_dt)
    st_schema = pa.schema(state_dt.schema().to_arrow()) if state_dt is not None else None
    tail_schema = pa.schema(tail_dt.schema().to_arrow()) if tail_dt is not None else None
    keyless = (not key) if key is not None else "__count" in (tail_schema or st_schema).names  # type: ignore[union-attr]
    wanted = None if columns is None or keyless else {*columns, *(key or []), *RESOLVE_COLUMNS}

    def subset(schema: pa.Schema | None) -> pa.Schema | None:
        if schema is None or wanted is None:
            return schema
        return pa.schema([f for f in schema if f.name in wanted])

    row_filter = None
    key_set: set[tuple] = set()
    if keys is not None:
        key_cols, key_set = list(keys[0]), set(keys[1])
        firsts = sorted({k[0] for k in key_set}, key=repr)

        def row_filter(t: pa.Table):
            col = t.column(key_cols[0])
            return pc.is_in(col, value_set=pa.array(firsts, col.type))

    elif key_range is not None:
        range_col, range_lo, range_hi = key_range

        def row_filter(t: pa.Table):
            col = t.column(range_col)
            mask = (
                pc.fill_null(pc.greater_equal(col, pa.scalar(range_lo, col.type)), True)
                if range_lo is not None
                else None
            )
            if range_hi is not None:
                hi = pc.fill_null(pc.less_equal(col, pa.scalar(range_hi, col.type)), True)
                mask = hi if mask is None else pc.and_(mask, hi)
            return mask if mask is not None else pa.array([True] * t.num_rows)

    if tail_only is not None:
        tail_files = list(tail_only)
    else:
        tail_files = (
            pa.table(tail_dt.get_add_actions(flatten=True)).column("path").to_pylist()
            if tail_dt is not None
            else []
        )
    state = None
    state_files = None
    if state_dt is not None and tail_only is None:
        files = pa.table(state_dt.get_add_actions(flatten=True)).column("path").to_pylist()
        if key_range is not None and not keyless:
            files = _files_in_range(state_dt, files, key_range)
        if (
            tail_files and keys is None and key_range is None and not keyless
        ):  # resolved file by file (see _Parts)
            state_files = read_file_parts(storage, paths.state, files, subset(st_schema))
        else:
            state = read_files(storage, paths.state, files, subset(st_schema), row_filter=row_filter)
    if not tail_files:
        after = (
            subset(state_schema_after(st_schema, tail_schema, keyless)) if tail_schema is not None else None
        )
        return _Parts(state, None, key, keyless, after, key_set if keys is not None else set())
    schema = subset(state_schema_after(st_schema, tail_schema, keyless))
    tail = read_files(storage, paths.tail, tail_files, subset(tail_schema))
    return _Parts(state, tail, key, keyless, schema, key_set if keys is not None else set(), state_files)


def _files_in_range(state_dt: Any, files: list[str], key_range: tuple[str, Any, Any]) -> list[str]:
    """The data files of ``files`` whose Delta statistics (min/max of ``key_range``'s column) may
    hold a value in ``[lo, hi]`` (either bound ``None``: open); a file without them is kept."""
    col, lo, hi = key_range
    try:
        actions = pa.table(state_dt.get_add_actions(flatten=True))
        mins, maxs = actions.column(f"min.{col}").to_pylist(), actions.column(f"max.{col}").to_pylist()
    except (KeyError, ValueError, pa.ArrowException):
        return files
    stats = dict(zip(actions.column("path").to_pylist(), zip(mins, maxs)))
    out = []
    for f in files:
        fmin, fmax = stats.get(f, (None, None))
        if fmin is None or fmax is None:
            out.append(f)
        elif (hi is None or fmin <= hi) and (lo is None or fmax >= lo):
            out.append(f)
    return out


def read_current(
    storage: StorageSettings,
    paths: TablePaths | str,
    *,
    live: bool = False,
    columns: Sequence[str] | None = None,
    keys: tuple[Sequence[str], Iterable[tuple]] | None = None,
    with_tail: bool = True,
    key_range: tuple[str, Any, Any] | None = None,
) -> pa.Table | None:
    """The current state of one table (Arrow): the compacted state with the tail applied.

    Args:
        paths: the table's :class:`.layout.TablePaths`, or the URI of its ``state`` table.
        live: only the live rows (``__deleted = false``).
        columns: read only these columns (and the metadata columns the tail's rules need); a
            keyless table is always read whole (every column is its key).
        keys: ``(key columns, key tuples)``: only the rows of these keys (the state is read with
            a filter on the first key column; the tail, small, whole).
        with_tail: ``False``: the compacted state alone (what a plain Delta reader sees).
        key_range: ``(column, lo, hi)``: only the compacted state's rows with ``lo <= column <= hi``
            (either bound ``None``: open; files pruned by their Delta statistics), the tail whole:
            the caller keeps the rows of the range it wants (tail rows outside it are returned).

    Returns:
        the rows (one per key; a keyless table one per distinct value with ``__count``), or
        ``None`` when the table has neither a state nor a tail yet.
    """
    if isinstance(paths, str):
        paths = TablePaths(changelog="", state=paths)
    parts = load_parts(storage, paths, columns=columns, keys=keys, with_tail=with_tail, key_range=key_range)
    out = parts.resolved() if parts is not None else None
    if out is None:
        return None
    return live_only(out) if live else out


def read_window_rows(
    storage: StorageSettings,
    paths: TablePaths | str,
    files: Sequence[str],
    *,
    columns: Sequence[str],
    keys: tuple[Sequence[str], Iterable[tuple]],
) -> pa.Table | None:
    """The current live rows of keys that one window changed last, from that window's tail files
    alone (``files``, relative paths, as its commit added them): for such a key the newest of
    the window's rows is the current row, so neither the compacted state nor the rest of the tail
    is read (a window's check costs what it changed). Same columns as :func:`read_current`.

    Returns:
        the live rows of ``keys`` (keyed tables), or ``None`` when the files are no longer all in
        the tail (a compaction folded them into the state: the caller reads the current state).
    """
    if isinstance(paths, str):
        paths = TablePaths(changelog="", state=paths)
    tail_dt = open_table(storage, paths.tail)
    if tail_dt is None or not files:
        return None
    current = set(pa.table(tail_dt.get_add_actions(flatten=True)).column("path").to_pylist())
    if not set(files) <= current:
        return None
    state_dt = open_table(storage, paths.state)
    if not key_columns_of(state_dt, tail_dt):
        return None
    parts = load_parts(
        storage,
        paths,
        columns=columns,
        keys=keys,
        with_tail=True,
        opened=(state_dt, tail_dt),
        tail_only=files,
    )
    out = parts.resolved() if parts is not None else None
    return None if out is None else live_only(out)


def current_schema(storage: StorageSettings, paths: TablePaths | str) -> pa.Schema | None:
    """The schema of a table's current state (:func:`read_current`'s columns): the compacted
    state's, with the tail's columns and types merged in (a table captured since its last
    compaction, or never compacted, has only a tail). ``None``: the table has neither yet."""
    if isinstance(paths, str):
        paths = TablePaths(changelog="", state=paths)
    state_dt = open_table(storage, paths.state)
    tail_dt = open_table(storage, paths.tail)
    if state_dt is None and tail_dt is None:
        return None
    st = pa.schema(state_dt.schema().to_arrow()) if state_dt is not None else None
    if tail_dt is None:
        return st
    tail = pa.schema(tail_dt.schema().to_arrow())
    key = key_columns_of(state_dt, tail_dt)
    keyless = (not key) if key is not None else "__count" in tail.names
    return state_schema_after(st, tail, keyless)


def current_frame(writer: Any, paths: TablePaths) -> Any:
    """The current state of one table as a Spark DataFrame on ``writer``'s session (the files are
    read by the executors; for tables too large for one process). Same layout as
    :func:`read_current`.

    Raises:
        ValueError: the table has neither a state nor a tail.
    """
    from .compaction_spark import state_frame

    storage = writer.storage
    tail_dt = open_table(storage, paths.tail)  # before the state (see load_parts)
    state_dt = open_table(storage, paths.state)
    if state_dt is None and tail_dt is None:
        raise ValueError(f"{paths.state} has no state yet")
    df, _schema, _as_of = state_frame(
        writer, paths, key_columns_of(state_dt, tail_dt) or [], state_dt=state_dt, tail_dt=tail_dt
    )
    return df
