"""The current state of a captured table, for downstream code: Arrow, Polars, DuckDB, Spark.

A captured table is merge-on-read (docs/design.md, "Current state: merge-on-read"): its ``state``
Delta table is the state as of the last compaction, and the changes since are in ``state_tail``.
Plain Delta readers of ``state`` alone are behind by up to a compaction interval; the reads here
apply the tail (:func:`dagster_mysql_cdc.sink.current.resolve`, the rules every reader of the lake
shares), so they are exact as of the last committed window.

What every read returns (one layout, whatever the engine):

- the table's columns (the newest schema first, then columns only older rows had), then the
  metadata columns of Debezium's ``ExtractNewRecordState`` (``__op``, ``__deleted``, ``__ts_ms``,
  ``__source_ts_ms``, ``__snapshot``, ``__epoch``, ``__binlog_file``, ``__binlog_pos``,
  ``__binlog_row``, ``__gtid``); ``metadata=False`` drops them;
- the **live rows**: one per key of a keyed table; a keyless table (no primary key) one row per
  copy the source holds, as ``SELECT * FROM t`` on the source would return them;
- ``tombstones=True``: the resolved state as it is stored: deleted keys stay as tombstones
  (``__deleted = true``) and a keyless table has one row per distinct value with ``__count``
  copies (``0``: a tombstone).

Values are Debezium's (docs/output-layout.md, "Type mapping": dates are days since the epoch,
``DATETIME`` epoch milliseconds or microseconds, ...). Rows come in no particular order.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, TypedDict, Unpack

import pyarrow as pa
import pyarrow.compute as pc

from ..errors import ConfigurationError, UnknownTableError
from ..events import COUNT_FIELD, STATE_META_NAMES
from .tables import CapturedTable, LakeLike, TableLike, captured_table

#: A row filter: a ``pyarrow.compute.Expression`` (``pc.field("qty") > 5``), or deltalake/pyarrow
#: disjunctive normal form: ``[("qty", ">", 5), ("status", "in", ["a", "b"])]`` (AND) or a list of
#: such lists (OR of ANDs). :func:`read_current_spark` also takes a Spark SQL string or Column.
Filter = Any


class CurrentReadOptions(TypedDict, total=False):
    """The keyword arguments of a current read (:func:`read_current`'s, which documents them),
    taken as they are by :func:`read_current_spark`."""

    server: str | None
    columns: Sequence[str] | None
    filter: Filter
    tombstones: bool
    metadata: bool


def _expression(filter: Filter) -> pc.Expression | None:
    """``filter`` as a pyarrow expression (``None``: no filter).

    Raises:
        ConfigurationError: not an expression or DNF list.
    """
    if filter is None:
        return None
    if isinstance(filter, pc.Expression):
        return filter
    if isinstance(filter, list | tuple) and filter:
        import pyarrow.parquet as pq

        try:
            return pq.filters_to_expression(list(filter))
        except (TypeError, ValueError) as e:
            raise ConfigurationError(f"filter={filter!r} is not a valid DNF filter: {e}") from None
    raise ConfigurationError(
        f"filter={filter!r}: pass a pyarrow.compute.Expression (pc.field('qty') > 5) or a DNF list "
        "[('qty', '>', 5)]"
    )


def _dnf_columns(filter: Filter) -> set[str] | None:
    """The columns a DNF filter names (``None``: not DNF, unknown)."""
    if not isinstance(filter, list | tuple) or not filter:
        return None
    clauses = (
        filter
        if isinstance(filter[0], list | tuple) and filter[0] and isinstance(filter[0][0], list | tuple)
        else [filter]
    )
    return {str(term[0]) for clause in clauses for term in clause}


def open_tables(table: CapturedTable) -> tuple[Any, Any]:
    """``(state, tail)`` Delta tables, the tail opened first: a compaction commits the new state
    before it removes the tail files it consumed, so a tail read before the state can only hold
    rows the state also has (applied again harmlessly), never miss rows a newer state lacks."""
    from ..sink.delta import open_table

    tail_dt = open_table(table.storage, table.paths.tail)
    state_dt = open_table(table.storage, table.paths.state)
    return state_dt, tail_dt


def resolved_state(
    table: CapturedTable,
    *,
    columns: Sequence[str] | None = None,
    filter: Filter = None,
    opened: tuple[Any, Any] | None = None,
) -> pa.Table:
    """The resolved state of ``table`` (tombstones and ``__count`` kept: the stored layout), with
    ``filter`` applied (see :func:`read_current`).

    Raises:
        UnknownTableError: the table has neither a state nor a tail yet.
    """
    from ..sink.key_model import key_columns_of
    from ..sink.read import load_parts

    state_dt, tail_dt = opened or open_tables(table)
    if state_dt is None and tail_dt is None:
        raise UnknownTableError(
            f"{table} has no current state yet (no state or state_tail): snapshot it first"
        )
    expr = _expression(filter)
    read_cols = columns
    if expr is not None and columns is not None:
        named = _dnf_columns(filter)
        read_cols = None if named is None else [*columns, *(c for c in named if c not in columns)]
    key = key_columns_of(state_dt, tail_dt)
    if expr is None or not key:  # no filter, or keyless (read whole: every column is its key)
        parts = load_parts(
            table.storage,
            table.paths,
            columns=read_cols,
            keys=None,
            with_tail=True,
            opened=(state_dt, tail_dt),
        )
        assert parts is not None
        out = parts.resolved()
        assert out is not None
    else:
        out = _resolved_filtered(table, state_dt, tail_dt, key, read_cols, expr)
    if expr is not None:
        out = out.filter(expr)
    return out


def _resolved_filtered(
    table: CapturedTable,
    state_dt: Any,
    tail_dt: Any,
    key: list[str],
    columns: Sequence[str] | None,
    expr: pc.Expression,
) -> pa.Table:
    """A keyed table's resolved state, the filter pushed into the compacted state's read: a
    compacted row is read when it matches the filter or its key is in the tail (a tail row may
    replace it, or lose to it: the rows of those keys are resolved whole); the caller filters the
    result again (a tail row that replaced a matching row may not match)."""
    from ..sink.current import resolve
    from ..sink.data_files import read_files
    from ..sink.read import RESOLVE_COLUMNS
    from ..sink.tail import state_schema_after

    storage, paths = table.storage, table.paths
    st_schema = pa.schema(state_dt.schema().to_arrow()) if state_dt is not None else None
    tl_schema = pa.schema(tail_dt.schema().to_arrow()) if tail_dt is not None else None
    wanted = None if columns is None else {*columns, *key, *RESOLVE_COLUMNS}

    def subset(schema: pa.Schema | None) -> pa.Schema | None:
        if schema is None or wanted is None:
            return schema
        return pa.schema([f for f in schema if f.name in wanted])

    tail = None
    tl_subset = subset(tl_schema)
    if tail_dt is not None and tl_subset is not None:
        files = pa.table(tail_dt.get_add_actions(flatten=True)).column("path").to_pylist()
        if files:
            tail = read_files(storage, paths.tail, files, tl_subset)
    schema = state_schema_after(st_schema, tl_schema, False) if tl_schema is not None else st_schema
    assert schema is not None
    schema = subset(schema)
    assert schema is not None
    state = None
    if state_dt is not None:
        pushed = expr
        if tail is not None and tail.num_rows:
            first = tail.column(key[0]).drop_null().unique()
            if len(first):
                pushed = expr | pc.field(key[0]).isin(first)
        files = pa.table(state_dt.get_add_actions(flatten=True)).column("path").to_pylist()
        state = _read_state_filtered(storage, paths.state, files, schema, pushed)
    if tail is None:
        return state if state is not None else schema.empty_table()
    from ..sink.evolution import conform_table

    if state is not None:
        state = conform_table(state, pa.schema([schema.field(n) for n in state.column_names]))
    return resolve(state, tail, key=key, schema=schema)


def _read_state_filtered(
    storage: Any, uri: str, files: list[str], schema: pa.Schema, expr: pc.Expression
) -> pa.Table:
    """The compacted state's rows matching ``expr``: each data file read through pyarrow's
    dataset scanner with the filter (row groups pruned by their statistics) when its columns have
    the table's types; a file that predates a type change is read whole, converted, filtered."""
    import pyarrow.dataset as ds

    from ..sink.data_files import read_files
    from ..sink.evolution import conform_table, relabel

    fs = storage.pyarrow_filesystem()
    base = storage.fs_path(uri)
    parts = []
    for rel in files:
        d = ds.dataset(f"{base}/{rel}", filesystem=fs, format="parquet")
        same = all(f.name not in schema.names or schema.field(f.name).type == f.type for f in d.schema)
        t = None
        if same:
            try:
                cols = [n for n in d.schema.names if n in schema.names]
                t = d.to_table(columns=cols, filter=expr)
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError, KeyError):
                t = None  # the filter names a column this file lacks (added later): below
            if t is not None:
                t = conform_table(relabel(t, schema), schema)
        if t is None:
            t = read_files(storage, uri, [rel], schema).filter(expr)
        parts.append(t)
    return pa.concat_tables(parts) if parts else schema.empty_table()


def _expand_copies(t: pa.Table) -> pa.Table:
    """A keyless table's live rows once per copy (``__count`` times; a row written before counts
    existed: once), ``__count`` dropped."""
    import numpy as np

    counts = pc.fill_null(t.column(COUNT_FIELD.name), 1).to_numpy(zero_copy_only=False)
    idx = np.repeat(np.arange(t.num_rows), np.maximum(counts, 0))
    return t.take(pa.array(idx, pa.int64())).drop_columns([COUNT_FIELD.name])


def output_columns(names: Sequence[str], columns: Sequence[str] | None, *, metadata: bool) -> list[str]:
    """The columns a current read returns, in order, from the resolved state's ``names``: the
    table columns ``columns`` asked for (default all), then the ``__`` metadata columns unless
    ``metadata=False`` (the same for the Arrow and the Spark reads).

    Raises:
        ConfigurationError: a column of ``columns`` is not in the table.
    """
    meta = [c for c in names if c in STATE_META_NAMES]
    if columns is None:
        return list(names) if metadata else [c for c in names if c not in meta]
    missing = [c for c in columns if c not in names]
    if missing:
        raise ConfigurationError(
            f"column(s) {missing} are not in the table (it has {[c for c in names if c not in meta]})"
        )
    return list(columns) + [m for m in meta if m not in columns] if metadata else list(columns)


def shape(t: pa.Table, *, tombstones: bool, metadata: bool, columns: Sequence[str] | None) -> pa.Table:
    """The resolved state ``t`` in :func:`read_current`'s layout (see the module docs)."""
    if "__epoch" in t.column_names and t.column("__epoch").null_count:  # rows from before epochs: 0
        i = t.column_names.index("__epoch")
        t = t.set_column(i, t.schema.field(i), pc.fill_null(t.column(i), 0))
    if not tombstones:
        t = t.filter(pc.invert(pc.fill_null(t.column("__deleted"), False)))
        if COUNT_FIELD.name in t.column_names:
            t = _expand_copies(t)
    return t.select(output_columns(t.column_names, columns, metadata=metadata))


def read_current(
    table: TableLike,
    lake: LakeLike = ".lake",
    *,
    server: str | None = None,
    columns: Sequence[str] | None = None,
    filter: Filter = None,
    tombstones: bool = False,
    metadata: bool = True,
) -> pa.Table:
    """The current state of a captured table as an Arrow table (exact as of the last committed
    window: the compacted state with its tail applied).

    Args:
        table: ``"db.table"``, ``(db, table)``, ``(server, db, table)`` or the table asset's key.
        lake: the lake's base URI (``.lake``, ``s3://bucket/prefix``), a ``StorageSettings``, or the
            ``CdcLakeResource`` (its S3 settings are used).
        server: the logical server (default: the asset key's, else the lake's only one).
        columns: only these table columns (and the metadata columns unless ``metadata=False``);
            a keyed table reads only them (and what resolving needs) from the files.
        filter: keep the rows matching it (see :data:`Filter`); on a keyed table it is pushed into
            the compacted state's read (Parquet row groups pruned by statistics), keys the tail
            changed are resolved whole, then the current rows are filtered.
        tombstones: also the deleted keys, and a keyless table's values uncounted (``__count``).
        metadata: keep the ``__`` metadata columns.

    Returns:
        the rows (see the module docs for the layout); no particular order.

    Raises:
        UnknownTableError: the lake has no such table, or it has no state yet.
        ConfigurationError: a malformed table name, lake, filter or column.
    """
    ref = captured_table(table, lake, server)
    out = resolved_state(ref, columns=columns, filter=filter)
    return shape(out, tombstones=tombstones, metadata=metadata, columns=columns)


def read_current_polars(table: TableLike, lake: LakeLike = ".lake", **kwargs: Any) -> Any:
    """:func:`read_current` as a ``polars.DataFrame`` (``pip install dagster-mysql-cdc[polars]``).
    Same arguments and errors; ``ImportError`` (naming the extra) without polars."""
    try:
        import polars as pl
    except ImportError as e:
        raise ImportError("read_current_polars needs polars: pip install 'dagster-mysql-cdc[polars]'") from e
    return pl.from_arrow(read_current(table, lake, **kwargs))


def read_current_duckdb(
    table: TableLike, lake: LakeLike = ".lake", *, connection: Any = None, **kwargs: Any
) -> Any:
    """:func:`read_current` as a DuckDB relation on ``connection`` (default: a new in-memory
    database; ``pip install duckdb``). Same arguments and errors. For views that stay current
    as windows commit, see :func:`dagster_mysql_cdc.create_duckdb_views`."""
    try:
        import duckdb
    except ImportError as e:
        raise ImportError("read_current_duckdb needs duckdb: pip install 'dagster-mysql-cdc[duckdb]'") from e
    con = connection if connection is not None else duckdb.connect()
    return con.from_arrow(read_current(table, lake, **kwargs))


# -- Spark ----------------------------------------------------------------------------------------


def _spark_filter(filter: Filter) -> Any:
    """A Spark filter: a SQL string or Column as it is; DNF as SQL."""
    if filter is None or isinstance(filter, str):
        return filter
    if type(filter).__name__ == "Column":
        return filter
    if isinstance(filter, list | tuple) and filter:
        clauses = (
            filter
            if isinstance(filter[0], list | tuple) and filter[0] and isinstance(filter[0][0], list | tuple)
            else [filter]
        )
        return " OR ".join("(" + " AND ".join(_sql_term(*t) for t in c) + ")" for c in clauses)
    raise ConfigurationError(
        f"filter={filter!r}: read_current_spark takes a Spark SQL string, a Column or a DNF list "
        "(not a pyarrow expression)"
    )


def _sql_literal(v: Any) -> str:
    if v is None:
        return "NULL"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int | float):
        return repr(v)
    return "'" + str(v).replace("\\", "\\\\").replace("'", "\\'") + "'"


def _sql_term(col: str, op: str, value: Any) -> str:
    c = "`" + col.replace("`", "``") + "`"
    op = op.strip().lower()
    if op in ("in", "not in"):
        return f"{c} {op.upper()} ({', '.join(_sql_literal(v) for v in value)})"
    if op in ("=", "==", "!=", "<", "<=", ">", ">="):
        return f"{c} {'=' if op == '==' else op} {_sql_literal(value)}"
    raise ConfigurationError(f"filter operator {op!r} is not one of =, ==, !=, <, <=, >, >=, in, not in")


def read_current_spark(
    spark: Any, table: TableLike, lake: LakeLike = ".lake", **options: Unpack[CurrentReadOptions]
) -> Any:
    """The current state of a captured table as a Spark DataFrame on ``spark`` (Spark Connect or
    a classic session), for tables too large for one process: the compacted state's and the
    tail's files are read by the executors (the project's Python data source, which lists the
    Delta tables' files when a query runs; no Delta jars needed) and resolved in Spark SQL
    (:func:`.views.current_sql`, the query of the SQL views).

    Same arguments and layout as :func:`read_current`; ``filter`` is a Spark SQL string, a
    ``Column`` or a DNF list, applied to the current rows (Spark pushes it down its plan).

    Raises:
        UnknownTableError / ConfigurationError: as :func:`read_current`.
        TypeError: an argument :func:`read_current` does not take.
    """
    from .views import spark_current_frame

    unknown = sorted(set(options) - set(CurrentReadOptions.__annotations__))
    if unknown:
        raise TypeError(f"read_current_spark() got unexpected keyword argument(s) {unknown}")
    ref = captured_table(table, lake, options.get("server"))
    df = spark_current_frame(spark, ref, tombstones=options.get("tombstones", False))
    f = _spark_filter(options.get("filter"))
    if f is not None:
        df = df.filter(f)
    return df.select(
        *output_columns(df.columns, options.get("columns"), metadata=options.get("metadata", True))
    )
