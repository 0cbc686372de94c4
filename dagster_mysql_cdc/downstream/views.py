"""SQL views of the captured tables' exact current state, for DuckDB, Spark SQL and Trino.

One view per captured table, whose rows are those of :func:`.current.read_current` (live rows,
table and metadata columns; a keyless table one row per copy): the compacted ``state`` with the
``state_tail`` applied by :func:`dagster_mysql_cdc.sink.current.resolve`'s rules, written in SQL
once (:func:`current_sql`) and rendered per dialect:

- keyed: per key the row with the greatest ordering key ``(coalesce(__epoch, 0), __binlog_file,
  __binlog_pos, __binlog_row)`` wins, a live row before a tombstone on a tie; tail rows older than
  the newest cut marker (``__cut``: TRUNCATE, a dropped table, a full re-snapshot) are dropped and
  older rows become tombstones;
- keyless: per distinct value, the compacted ``__count`` (``0`` for a row older than the cut) plus
  the ``__count`` changes of the tail rows newer than the compacted row (a compacted state holds
  one row per value, so that row's ordering key is compared component by component); the newest
  row's image; then each live value repeated ``__count`` times.

The views read the two Delta tables at query time, so they stay exact as windows commit: DuckDB
through the ``delta`` extension's ``delta_scan``, Spark through the project's Python data source
(:mod:`.spark`: the current files listed at each query, no Delta jars needed) or ``delta.`path```
with delta-spark, Trino through its ``delta_lake`` connector. A view needs both tables; a table
that has only one (a keyed table never changed since its first snapshot has no tail yet, a keyless
one no compacted state yet) gets the other created empty first (:func:`ensure_tables`: one
metadata-only Delta commit, what a compaction leaves behind), so the view does not go stale when
it appears. Views carry the tables' columns and key as they are when made: make them again after
a DDL that adds columns or changes the key (``CREATE OR REPLACE``).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from ..errors import ConfigurationError, UnknownTableError
from ..events import COUNT_FIELD, STATE_META_NAMES
from .tables import CapturedTable, LakeLike, captured_table, captured_tables, lake_storage

log = logging.getLogger(__name__)

ENGINES = ("duckdb", "spark", "trino")
ORDER = ("__epoch", "__binlog_file", "__binlog_pos", "__binlog_row")


# -- dialects -------------------------------------------------------------------------------------


def quote(name: str, engine: str) -> str:
    """``name`` as a quoted identifier of ``engine`` (``"x"``; Spark ```x```)."""
    if engine == "spark":
        return "`" + name.replace("`", "``") + "`"
    return '"' + name.replace('"', '""') + '"'


def sql_type(t: pa.DataType, engine: str) -> str:
    """The SQL type of ``engine`` holding the lake's Arrow type ``t``.

    Raises:
        ConfigurationError: a type the lake never writes.
    """
    spark, trino = engine == "spark", engine == "trino"
    if pa.types.is_boolean(t):
        return "BOOLEAN"
    if pa.types.is_integer(t):
        bits = t.bit_width
        if spark:
            return {8: "TINYINT", 16: "SMALLINT", 32: "INT", 64: "BIGINT"}[bits]
        return {8: "TINYINT", 16: "SMALLINT", 32: "INTEGER", 64: "BIGINT"}[bits]
    if pa.types.is_float32(t):
        return "FLOAT" if spark else "REAL"
    if pa.types.is_float64(t):
        return "DOUBLE"
    if pa.types.is_decimal(t):
        return f"DECIMAL({t.precision},{t.scale})"
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return "STRING" if spark else "VARCHAR"
    if pa.types.is_binary(t) or pa.types.is_large_binary(t):
        return "BINARY" if spark else "VARBINARY" if trino else "BLOB"
    if pa.types.is_date32(t):
        return "DATE"
    if pa.types.is_timestamp(t):
        return "TIMESTAMP" if t.tz is None or spark else "TIMESTAMP WITH TIME ZONE"
    if pa.types.is_struct(t):
        if spark:
            return (
                "STRUCT<" + ", ".join(f"{quote(f.name, engine)}: {sql_type(f.type, engine)}" for f in t) + ">"
            )
        inner = ", ".join(f"{quote(f.name, engine)} {sql_type(f.type, engine)}" for f in t)
        return f"ROW({inner})" if trino else f"STRUCT({inner})"
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        v = sql_type(t.value_type, engine)
        return f"ARRAY<{v}>" if spark else f"ARRAY({v})" if trino else f"{v}[]"
    raise ConfigurationError(f"the lake type {t} has no SQL view mapping")


# -- the query ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class TableShape:
    """What the view of one table is made from: the two Delta tables' schemas and the key."""

    state: pa.Schema
    tail: pa.Schema
    key: list[str]  # [] keyless

    @property
    def keyless(self) -> bool:
        return not self.key

    @property
    def resolved(self) -> pa.Schema:
        """The current state's columns (the state's, the tail's merged in; ``__cut`` dropped)."""
        from ..sink.tail import state_schema_after

        return state_schema_after(self.state, self.tail, self.keyless)


def _side(schema: pa.Schema, target: pa.Schema, engine: str) -> list[str]:
    """The select list of one Delta table in ``target``'s columns (cast where the stored type
    differs, ``NULL`` where the table lacks the column).

    Raises:
        ConfigurationError: a column whose stored type changed in a way SQL cannot convert
            exactly (it is converted at the next compaction; see the message).
    """
    from ..sink.evolution import category

    out = []
    for f in target:
        q = quote(f.name, engine)
        if f.name not in schema.names:
            out.append(f"CAST(NULL AS {sql_type(f.type, engine)}) AS {q}")
            continue
        have = schema.field(f.name)
        if have.type == f.type:
            out.append(q)
            continue
        a, b = category(have), category(f)
        scale = {
            ("date", "datetime_ms"): 86_400_000,
            ("date", "datetime_us"): 86_400_000_000,
            ("datetime_ms", "datetime_us"): 1000,
            ("time_ms", "time_us"): 1000,
        }.get((a, b))
        if scale is not None:
            out.append(f"CAST({q} AS {sql_type(f.type, engine)}) * {scale} AS {q}")
        elif (a, b) in {(x, y) for x in ("int", "bool") for y in ("int", "float", "decimal")} or (
            a in ("float", "decimal")
            and b in ("float", "decimal")
            and a == b
            or (a, b) == ("decimal", "float")
        ):
            out.append(f"CAST({q} AS {sql_type(f.type, engine)}) AS {q}")
        elif (a, b) == ("int", "string"):
            out.append(f"CAST({q} AS {sql_type(f.type, engine)}) AS {q}")
        else:
            raise ConfigurationError(
                f"column {f.name!r} holds {have.type} ({a}) in one Delta table and {f.type} ({b}) in "
                "the other (a DDL changed its type since the last compaction); SQL cannot convert "
                "these values exactly. Compact the table (the next due compaction does it), or read "
                "it with read_current"
            )
    return out


def _older(row: Callable[[str], str], cut: Callable[[str], str]) -> str:
    """SQL: the ordering key of ``row`` sorts below ``cut``'s (lexicographic, spelled out so every
    dialect reads it the same way)."""
    r = [f"COALESCE({row('__epoch')}, 0)", row("__binlog_file"), row("__binlog_pos"), row("__binlog_row")]
    c = [cut(n) for n in ("c_e", "c_f", "c_p", "c_r")]
    expr = f"{r[3]} < {c[3]}"
    for x, y in reversed(list(zip(r[:3], c[:3]))):
        expr = f"({x} < {y} OR ({x} = {y} AND {expr}))"
    return expr


def _newer(a: list[str], b: list[str]) -> str:
    """SQL: ordering ``a`` (4 expressions) sorts above ``b``."""
    expr = f"{a[3]} > {b[3]}"
    for x, y in reversed(list(zip(a[:3], b[:3]))):
        expr = f"({x} > {y} OR ({x} = {y} AND {expr}))"
    return expr


def current_sql(
    shape: TableShape, state_ref: str, tail_ref: str, engine: str, *, tombstones: bool = False
) -> str:
    """The query of one table's current state (see the module docs) in ``engine``'s dialect,
    reading the compacted state from ``state_ref`` and the tail from ``tail_ref`` (table
    expressions: ``delta_scan('...')``, a view name, ...).

    ``tombstones=True``: the resolved state as :func:`.current.read_current` ``(tombstones=True)``
    returns it (deleted keys kept, a keyless value once with ``__count``).

    Raises:
        ConfigurationError: ``engine`` is unknown, or see :func:`_side`.
    """
    if engine not in ENGINES:
        raise ConfigurationError(f"engine {engine!r}: one of {', '.join(ENGINES)}")
    ctes = _union_ctes(shape, state_ref, tail_ref, engine)
    if not shape.keyless:
        return _keyed_sql(shape, ctes, engine, tombstones=tombstones)
    return _keyless_sql(shape, ctes, engine, tombstones=tombstones)


def _union_ctes(shape: TableShape, state_ref: str, tail_ref: str, engine: str) -> list[str]:
    """The common table expressions both queries start with: ``s`` (the compacted state) and
    ``t`` (the tail) in the current columns, ``u`` their union (``__src`` 0 / 1, ``__is_cut``),
    ``c`` the newest cut marker (``c_e, c_f, c_p, c_r, c_op``; no row: no cut)."""
    q = lambda n: quote(n, engine)  # noqa: E731
    target = shape.resolved
    bool_t = "BOOLEAN"
    s_sel = ", ".join(_side(shape.state, target, engine))
    t_sel = ", ".join(_side(shape.tail, target, engine))
    tail_cut = f"COALESCE({q('__cut')}, false)" if "__cut" in shape.tail.names else f"CAST(false AS {bool_t})"
    return [
        f"s AS (SELECT {s_sel}, 0 AS __src, CAST(false AS {bool_t}) AS __is_cut FROM {state_ref})",
        f"t AS (SELECT {t_sel}, 1 AS __src, {tail_cut} AS __is_cut FROM {tail_ref})",
        "u AS (SELECT * FROM s UNION ALL SELECT * FROM t)",
        (
            f"c AS (SELECT COALESCE({q('__epoch')}, 0) AS c_e, {q('__binlog_file')} AS c_f, "
            f"{q('__binlog_pos')} AS c_p, {q('__binlog_row')} AS c_r, {q('__op')} AS c_op FROM t "
            f"WHERE __is_cut ORDER BY c_e DESC, c_f DESC, c_p DESC, c_r DESC LIMIT 1)"
        ),
    ]


def _order_desc(q: Callable[[str], str]) -> str:
    """SQL ``ORDER BY`` terms: newest ordering key first (a NULL ``__epoch`` is 0)."""
    return ", ".join(
        [
            f"COALESCE({q('__epoch')}, 0) DESC",
            f"{q('__binlog_file')} DESC",
            f"{q('__binlog_pos')} DESC",
            f"{q('__binlog_row')} DESC",
        ]
    )


def _older_than_cut(q: Callable[[str], str]) -> str:
    """SQL: the row ``u`` sorts below the cut ``c`` (:func:`_older`)."""
    return _older(lambda n: f"u.{q(n)}", lambda n: f"c.{n}")


def _keyed_sql(shape: TableShape, ctes: list[str], engine: str, *, tombstones: bool) -> str:
    """:func:`current_sql` of a keyed table: per key the newest row (a live row before a
    tombstone on a tie), tail rows older than the cut dropped, older live rows tombstones at it."""
    q = lambda n: quote(n, engine)  # noqa: E731
    older_u = _older_than_cut(q)
    order_desc = _order_desc(q)
    out_cols = [c for c in (f.name for f in shape.resolved) if c != COUNT_FIELD.name or tombstones]
    ctes.append(
        f"k AS (SELECT u.*, c.c_e, c.c_f, c.c_p, c.c_r, c.c_op FROM u LEFT JOIN c ON 1 = 1 "
        f"WHERE NOT u.__is_cut AND (u.__src = 0 OR c.c_e IS NULL OR NOT {older_u}))"
    )
    part = ", ".join(q(k) for k in shape.key)
    ctes.append(
        f"r AS (SELECT k.*, row_number() OVER (PARTITION BY {part} ORDER BY {order_desc}, "
        f"COALESCE({q('__deleted')}, false) ASC) AS __rn FROM k)"
    )
    live = f"NOT COALESCE({q('__deleted')}, false)"
    hit = f"(c_e IS NOT NULL AND {live} AND {_older(lambda n: q(n), lambda n: n)})"
    sets = {
        "__deleted": "true",
        "__op": "c_op",
        "__epoch": "c_e",
        "__binlog_file": "c_f",
        "__binlog_pos": "c_p",
        "__binlog_row": "c_r",
    }
    sel = []
    for n in out_cols:
        if n == "__epoch":
            base = f"COALESCE({q(n)}, 0)"
        else:
            base = q(n)
        if tombstones and n in sets:
            sel.append(f"CASE WHEN {hit} THEN {sets[n]} ELSE {base} END AS {q(n)}")
        else:
            sel.append(f"{base} AS {q(n)}")
    where = "__rn = 1" + ("" if tombstones else f" AND {live} AND NOT {hit}")
    return "WITH " + ",\n".join(ctes) + f"\nSELECT {', '.join(sel)} FROM r WHERE {where}"


def _keyless_sql(shape: TableShape, ctes: list[str], engine: str, *, tombstones: bool) -> str:
    """:func:`current_sql` of a keyless table: per distinct value the count of copies (the
    compacted count with the newer tail rows' ``__count`` changes applied in order, never below
    zero), each live copy a row unless ``tombstones``."""
    q = lambda n: quote(n, engine)  # noqa: E731
    older_u = _older_than_cut(q)
    order_desc = _order_desc(q)
    cols = [f.name for f in shape.resolved]
    values = [n for n in cols if n not in STATE_META_NAMES]
    out_cols = [c for c in cols if c != COUNT_FIELD.name or tombstones]
    live_copy = f"CASE WHEN COALESCE({q('__deleted')}, false) THEN 0 ELSE 1 END"
    fresh = f"(u.__src = 0 AND c.c_e IS NOT NULL AND {older_u})"
    count = q(COUNT_FIELD.name)
    adjusted = []
    for n in cols:
        cut_v = {
            "__deleted": "true",
            "__op": "c.c_op",
            "__epoch": "c.c_e",
            "__binlog_file": "c.c_f",
            "__binlog_pos": "c.c_p",
            "__binlog_row": "c.c_r",
            COUNT_FIELD.name: "0",
        }.get(n)
        base = f"COALESCE(u.{q(n)}, 0)" if n == "__epoch" else f"u.{q(n)}"
        adjusted.append(
            f"CASE WHEN {fresh} THEN {cut_v} ELSE {base} END AS {q(n)}" if cut_v else f"{base} AS {q(n)}"
        )
    weight = (
        f"CASE WHEN {fresh} THEN 0 WHEN u.__src = 0 THEN COALESCE(u.{count}, {live_copy.replace(q('__deleted'), 'u.' + q('__deleted'))}) "
        f"ELSE COALESCE(u.{count}, 0) END"
    )
    ctes.append(
        f"k AS (SELECT {', '.join(adjusted)}, u.__src, {weight} AS __w, {fresh} AS __fresh FROM u LEFT JOIN c ON 1 = 1 "
        f"WHERE NOT u.__is_cut AND (u.__src = 0 OR c.c_e IS NULL OR NOT {older_u}))"
    )
    grp = ", ".join(q(v) for v in values) if values else "1"
    s_parts = []
    for alias, n in zip(("s_e", "s_f", "s_p", "s_r"), ORDER):
        s_parts.append(
            f"max(CASE WHEN __src = 0 AND NOT __fresh THEN {q(n)} END) OVER (PARTITION BY {grp}) AS {alias}"
        )
    ctes.append(f"g AS (SELECT k.*, {', '.join(s_parts)} FROM k)")
    newer = _newer([q(n) for n in ORDER], ["s_e", "s_f", "s_p", "s_r"])
    ctes.append(f"h AS (SELECT * FROM g WHERE __src = 0 OR s_e IS NULL OR {newer})")
    # the changes applied in order (the compacted row first, a -1 before a +1 at one position),
    # never below zero: P_n - least(0, min P_k), P_k the running sums (as sink/current.py does)
    order_asc = ", ".join(q(n) for n in ORDER)
    ctes.append(
        f"p AS (SELECT h.*, sum(__w) OVER (PARTITION BY {grp} ORDER BY __src, {order_asc}, "
        f"COALESCE({q('__deleted')}, false) DESC ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS __p FROM h)"
    )
    ctes.append(
        f"r AS (SELECT p.*, CAST(sum(__w) OVER (PARTITION BY {grp}) - least(min(__p) OVER (PARTITION BY {grp}), 0) "
        f"AS BIGINT) AS __n, row_number() OVER (PARTITION BY {grp} "
        f"ORDER BY {order_desc}, __src DESC, COALESCE({q('__deleted')}, false) ASC) AS __rn FROM p)"
    )
    sel = []
    for n in out_cols:
        if n == COUNT_FIELD.name:
            sel.append(f"__n AS {q(n)}")
        elif n == "__deleted":
            sel.append(f"__n <= 0 AS {q(n)}")
        elif n == "__op":
            sel.append(f"CASE WHEN __n > 0 AND {q(n)} = 'd' THEN 'u' ELSE {q(n)} END AS {q(n)}")
        else:
            sel.append(q(n))
    body = "WITH " + ",\n".join(ctes) + f"\nSELECT {', '.join(sel)} FROM r WHERE __rn = 1"
    if tombstones:
        return body
    names = ", ".join(q(n) for n in out_cols)
    ctes.append(f"x AS (SELECT {', '.join(sel)}, __n FROM r WHERE __rn = 1 AND __n > 0)")
    expand = {
        "duckdb": "x CROSS JOIN UNNEST(generate_series(1, x.__n)) AS e(__copy)",
        "spark": "x LATERAL VIEW explode(sequence(1, x.__n)) e AS __copy",
        "trino": "x CROSS JOIN UNNEST(sequence(1, x.__n)) AS e(__copy)",
    }[engine]
    return "WITH " + ",\n".join(ctes) + f"\nSELECT {names} FROM {expand}"


# -- the tables of a view -------------------------------------------------------------------------


def table_shape(table: CapturedTable) -> TableShape | None:
    """The shape of ``table``'s view (``None``: it has neither a state nor a tail yet). A missing
    state or tail is described as :func:`ensure_tables` creates it."""
    from ..sink.delta import open_table
    from ..sink.key_model import key_columns_of
    from ..sink.tail import state_schema_after, tail_schema

    tail_dt = open_table(table.storage, table.paths.tail)
    state_dt = open_table(table.storage, table.paths.state)
    if state_dt is None and tail_dt is None:
        return None
    st = pa.schema(state_dt.schema().to_arrow()) if state_dt is not None else None
    tl = pa.schema(tail_dt.schema().to_arrow()) if tail_dt is not None else None
    key = key_columns_of(state_dt, tail_dt)
    if key is None:
        key = [] if COUNT_FIELD.name in (tl or st).names else None  # type: ignore[union-attr]
    if key is None:
        raise ConfigurationError(f"{table}: its Delta tables record no key (dagster_mysql_cdc.primary_key)")
    keyless = not key
    if tl is None:
        assert st is not None
        tl = tail_schema(st, keyless=keyless)
    if st is None:
        st = state_schema_after(None, tl, keyless)
    return TableShape(st, tl, key)


def ensure_tables(table: CapturedTable) -> list[str]:
    """Create ``table``'s missing ``state`` or ``state_tail`` empty (the schema and key the sink
    gives it; a metadata-only Delta commit), so a view can read both. Returns the URIs created.

    Safe next to a running capture: the sink appends to an existing empty tail as it does after
    every compaction, and compacts into an existing empty state; a table created meanwhile by the
    sink is left as it is.

    Raises:
        SinkError: the lake cannot be written (read-only credentials: create the views after the
            table's first change and first compaction, or with a writer's credentials).
    """
    from deltalake import DeltaTable
    from deltalake import Schema as DeltaSchema

    from ..errors import SinkError
    from ..sink.delta import PATH_COMMIT_HOOKS, TABLE_PROPERTIES, changed, open_table
    from ..sink.key_model import KEY_PROPERTY

    shape = table_shape(table)
    if shape is None:
        return []
    made = []
    for uri, schema in ((table.paths.tail, shape.tail), (table.paths.state, shape.state)):
        if open_table(table.storage, uri) is not None:
            continue
        try:
            DeltaTable.create(
                uri,
                DeltaSchema.from_arrow(schema),
                mode="ignore",
                configuration=dict(TABLE_PROPERTIES),
                storage_options=table.storage.delta_storage_options(),
            )
            changed(uri)
            dt = open_table(table.storage, uri)
            if dt is not None and dt.metadata().configuration.get(KEY_PROPERTY) is None:
                dt.alter.set_table_properties(
                    {KEY_PROPERTY: json.dumps(shape.key)},
                    raise_if_not_exists=False,
                    post_commithook_properties=PATH_COMMIT_HOOKS,
                )
        except Exception as e:
            raise SinkError(
                f"could not create the empty {uri} that the SQL view of {table} reads "
                f"({type(e).__name__}: {e}); create the views with credentials that can write the lake"
            ) from e
        made.append(uri)
        log.info("created the empty %s for the SQL view of %s", uri, table)
    return made


# -- per engine -----------------------------------------------------------------------------------


def _tables(lake: LakeLike, server: str | None, tables: Sequence[Any] | None) -> list[CapturedTable]:
    if tables:
        return [captured_table(t, lake, server) for t in tables]
    return captured_tables(lake, server)


def _duckdb_path(table: CapturedTable, uri: str) -> str:
    return uri  # absolute local path or s3://bucket/key (StorageSettings.uri)


def _spark_delta_path(uri: str) -> str:
    return (
        "s3a://" + uri[len("s3://") :]
        if uri.startswith("s3://")
        else f"file://{uri}"
        if uri.startswith("/")
        else uri
    )


def _lit(s: str) -> str:
    return "'" + s.replace("'", "''") + "'"


@dataclass(frozen=True)
class View:
    """One table's view: its name and the statements that make it."""

    table: CapturedTable
    name: str
    statements: list[str]


def view_statements(
    engine: str,
    lake: LakeLike = ".lake",
    *,
    server: str | None = None,
    tables: Sequence[Any] | None = None,
    catalog: str = "delta",
    create_missing: bool = True,
    tombstones: bool = False,
) -> list[View]:
    """The statements making one view per captured table in ``engine``'s SQL (what
    ``python -m dagster_mysql_cdc sql-views`` prints):

    - ``duckdb``: ``CREATE SCHEMA <db>`` and ``CREATE OR REPLACE VIEW <db>.<table>`` over
      ``delta_scan('<uri>')`` (needs the ``delta`` extension loaded, and an S3 secret for an S3
      lake: see :func:`duckdb_connection`);
    - ``spark``: ``CREATE OR REPLACE TEMPORARY VIEW `<db>__<table>``` over ``delta.`<uri>```
      (delta-spark and, for S3, ``s3a://`` with hadoop-aws; without them use
      :func:`create_spark_views`, which needs neither);
    - ``trino``: ``CALL <catalog>.system.register_table(...)`` of the two Delta tables
      (``<table>__state``, ``<table>__state_tail`` in schema ``<db>``) and ``CREATE OR REPLACE VIEW
      <catalog>.<db>.<table>``, for Trino's ``delta_lake`` connector.

    Args:
        tables: the tables (``"db.table"``, tuples, asset keys); default: every captured table.
        catalog: the Trino catalog of the ``delta_lake`` connector.
        create_missing: create a missing ``state`` or ``state_tail`` empty (:func:`ensure_tables`);
            ``False``: skip such tables (logged).
        tombstones: views of the resolved state with tombstones (see :func:`current_sql`).

    Raises:
        ConfigurationError / UnknownTableError: an unknown engine, table or server.
    """
    if engine not in ENGINES:
        raise ConfigurationError(f"engine {engine!r}: one of {', '.join(ENGINES)}")
    out = []
    for t in _tables(lake, server, tables):
        shape = _prepared_shape(t, create_missing)
        if shape is None:
            continue
        p = t.paths
        if engine == "duckdb":
            name = f"{quote(t.database, engine)}.{quote(t.table, engine)}"
            sql = current_sql(
                shape,
                f"delta_scan({_lit(p.state)})",
                f"delta_scan({_lit(p.tail)})",
                engine,
                tombstones=tombstones,
            )
            stmts = [
                f"CREATE SCHEMA IF NOT EXISTS {quote(t.database, engine)}",
                f"CREATE OR REPLACE VIEW {name} AS\n{sql}",
            ]
        elif engine == "spark":
            name = quote(f"{t.database}__{t.table}", engine)
            sref = f"delta.{quote(_spark_delta_path(p.state), engine)}"
            tref = f"delta.{quote(_spark_delta_path(p.tail), engine)}"
            stmts = [
                f"CREATE OR REPLACE TEMPORARY VIEW {name} AS\n{current_sql(shape, sref, tref, engine, tombstones=tombstones)}"
            ]
        else:
            sch = f"{quote(catalog, engine)}.{quote(t.database, engine)}"
            st_name, tl_name = f"{t.table}__state", f"{t.table}__state_tail"
            name = f"{sch}.{quote(t.table, engine)}"
            stmts = [f"CREATE SCHEMA IF NOT EXISTS {sch}"]
            for n, uri in ((st_name, p.state), (tl_name, p.tail)):
                stmts.append(
                    f"CALL {quote(catalog, engine)}.system.register_table(schema_name => {_lit(t.database)}, "
                    f"table_name => {_lit(n)}, table_location => {_lit(uri)})"
                )
            sql = current_sql(
                shape,
                f"{sch}.{quote(st_name, engine)}",
                f"{sch}.{quote(tl_name, engine)}",
                engine,
                tombstones=tombstones,
            )
            stmts.append(f"CREATE OR REPLACE VIEW {name} AS\n{sql}")
        out.append(View(t, name, stmts))
    return out


def _prepared_shape(t: CapturedTable, create_missing: bool) -> TableShape | None:
    from ..sink.delta import open_table

    has = [open_table(t.storage, u) is not None for u in (t.paths.state, t.paths.tail)]
    if not any(has):
        return None
    if not all(has):
        if not create_missing:
            log.warning(
                "%s has no %s yet: no view (create_missing=False)", t, "state_tail" if has[0] else "state"
            )
            return None
        ensure_tables(t)
    return table_shape(t)


def render_script(views: list[View], engine: str, lake: LakeLike) -> str:
    """The statements of ``views`` as one SQL script (``;``-terminated), with the setup an engine
    needs first as comments (DuckDB: the delta extension and an S3 secret)."""
    storage = lake_storage(lake)
    head = [
        f"-- dagster-mysql-cdc: the current state of {len(views)} captured table(s) of {storage.root} ({engine})"
    ]
    if engine == "duckdb":
        head.append(
            "-- LOAD delta;  (INSTALL delta; first, or LOAD '<path of the duckdb-extension-delta wheel's file>')"
        )
        if storage.is_s3:
            head.append("-- " + duckdb_secret_sql(storage, placeholders=True))
    elif engine == "spark":
        head.append(
            "-- needs delta-spark (and hadoop-aws for s3a://); without them: dagster_mysql_cdc.create_spark_views"
        )
    else:
        head.append(
            f"-- a Trino catalog {quote('delta', engine)}... of the delta_lake connector reaching the lake's storage"
        )
    return "\n".join(head) + "\n" + "".join(s + ";\n\n" for v in views for s in v.statements)


# -- DuckDB -----------------------------------------------------------------------------------


def duckdb_secret_sql(storage: Any, *, placeholders: bool = False, name: str = "cdc_lake") -> str:
    """``CREATE SECRET`` of an S3 lake for DuckDB (scoped to the lake's bucket and prefix);
    ``placeholders``: no credentials (for printing)."""
    from urllib.parse import urlparse

    parts = ["TYPE s3", f"REGION {_lit(storage.s3_region)}", f"SCOPE {_lit(storage.root)}"]
    if placeholders:
        parts += ["KEY_ID '<access key id>'", "SECRET '<secret access key>'"]
    elif storage.s3_access_key_id:
        parts += [
            f"KEY_ID {_lit(storage.s3_access_key_id)}",
            f"SECRET {_lit(storage.s3_secret_access_key or '')}",
        ]
    else:
        parts += ["PROVIDER credential_chain"]
    if storage.s3_endpoint_url:
        u = urlparse(storage.s3_endpoint_url)
        parts += [
            f"ENDPOINT {_lit(u.netloc + u.path.rstrip('/'))}",
            "URL_STYLE 'path'",
            f"USE_SSL {str(u.scheme == 'https').lower()}",
        ]
    return f"CREATE OR REPLACE {'' if placeholders else 'TEMPORARY '}SECRET {name} ({', '.join(parts)})"


def load_duckdb_delta(con: Any) -> None:
    """Load DuckDB's ``delta`` extension (and ``httpfs``) on ``con``: from the
    ``duckdb-extension-delta`` / ``duckdb-extension-httpfs`` wheels when installed (their file
    must be built for this DuckDB version), else the installed extension, else ``INSTALL``.

    Raises:
        ConfigurationError: the extension cannot be loaded (the message names the fix).
    """
    import importlib
    import os

    import duckdb

    errors = []
    for ext in ("delta", "httpfs"):
        loaded = False
        try:
            pkg = importlib.import_module(f"duckdb_extension_{ext}")
            path = os.path.join(
                pkg.__path__[0], "extensions", f"v{duckdb.__version__}", f"{ext}.duckdb_extension"
            )
            if os.path.exists(path):
                con.execute(f"LOAD {_lit(path)}")
                loaded = True
            else:
                errors.append(
                    f"duckdb-extension-{ext} has no file for DuckDB {duckdb.__version__} (install the matching version)"
                )
        except ImportError:
            pass
        if not loaded:
            try:
                con.execute(f"LOAD {ext}")
                loaded = True
            except duckdb.Error:
                try:
                    con.execute(f"INSTALL {ext}")
                    con.execute(f"LOAD {ext}")
                    loaded = True
                except duckdb.Error as e:
                    errors.append(f"{ext}: {e}")
        if not loaded and ext == "delta":
            raise ConfigurationError(
                "DuckDB's delta extension cannot be loaded (" + "; ".join(errors) + "). With internet access "
                f"`INSTALL delta`; otherwise `pip install duckdb-extension-delta=={duckdb.__version__}` (the "
                "wheel's DuckDB version must equal the installed duckdb's)"
            )


def duckdb_connection(lake: LakeLike = ".lake", database: str = ":memory:") -> Any:
    """A DuckDB connection ready to read the lake: the ``delta`` extension loaded and, for an S3
    lake, a temporary secret with the lake's endpoint and credentials (never written to disk)."""
    import duckdb

    storage = lake_storage(lake)
    con = duckdb.connect(database)
    load_duckdb_delta(con)
    if storage.is_s3:
        con.execute(duckdb_secret_sql(storage))
    return con


def create_duckdb_views(
    lake: LakeLike = ".lake",
    connection: Any = None,
    *,
    server: str | None = None,
    tables: Sequence[Any] | None = None,
    tombstones: bool = False,
) -> Any:
    """Create one view per captured table (``<db>.<table>``, schema per database) on a DuckDB
    connection (default: :func:`duckdb_connection`, in memory); returns the connection. The views
    read the Delta tables with ``delta_scan`` at each query: exact as windows commit.

    Raises:
        ConfigurationError: the delta extension cannot be loaded; see :func:`view_statements`.
    """
    con = connection if connection is not None else duckdb_connection(lake)
    if connection is not None:
        load_duckdb_delta(con)
        storage = lake_storage(lake)
        if storage.is_s3:
            con.execute(duckdb_secret_sql(storage))
    for v in view_statements("duckdb", lake, server=server, tables=tables, tombstones=tombstones):
        for s in v.statements:
            con.execute(s)
    return con


# -- Spark ------------------------------------------------------------------------------------


def spark_frames(spark: Any, table: CapturedTable) -> tuple[Any, Any, TableShape] | None:
    """``(state DataFrame, tail DataFrame, shape)`` of ``table`` on ``spark``: the project's data
    source over each Delta table (files listed at each query; a table missing yet reads empty),
    every file converted by the executors into the current state's column types (so the query
    needs no casts), ``None`` when the table has neither a state nor a tail."""
    from .spark import delta_table_frame, spark_reader

    shape = table_shape(table)
    if shape is None:
        return None
    target = shape.resolved
    tail_cols = [*target, pa.field("__cut", pa.bool_())]
    state = pa.schema([f for f in target])
    tail = pa.schema(tail_cols)
    conformed = TableShape(state, tail, shape.key)
    writer = spark_reader(spark, table)
    return (
        delta_table_frame(writer, table.paths.state, state),
        delta_table_frame(writer, table.paths.tail, tail),
        conformed,
    )


def spark_current_frame(spark: Any, table: CapturedTable, *, tombstones: bool = False) -> Any:
    """The current state of ``table`` as a Spark DataFrame: :func:`current_sql` over
    :func:`spark_frames` (plain Spark SQL: the same on Spark Connect and a classic session).

    Raises:
        UnknownTableError: the table has neither a state nor a tail yet.
    """
    frames = spark_frames(spark, table)
    if frames is None:
        raise UnknownTableError(
            f"{table} has no current state yet (no state or state_tail): snapshot it first"
        )
    state, tail, shape = frames
    return spark.sql(
        current_sql(shape, "{state}", "{tail}", "spark", tombstones=tombstones), state=state, tail=tail
    )


def create_spark_views(
    spark: Any,
    lake: LakeLike = ".lake",
    *,
    server: str | None = None,
    tables: Sequence[Any] | None = None,
    tombstones: bool = False,
) -> list[str]:
    """Create one temporary view per captured table (`` `<db>__<table>` ``) on ``spark`` (Spark
    Connect or classic; no Delta jars needed). Each view is the query of :func:`current_sql` over
    two temporary views of the project's Python data source (``<view>__state``,
    ``<view>__state_tail``), which lists the Delta tables' current files at each query, so the
    views stay exact as windows commit; the executors read the files. A table missing its state or
    tail reads it as empty until it appears (nothing is written). Returns the view names.

    Raises:
        ConfigurationError / UnknownTableError: see :func:`view_statements`.
    """
    names = []
    for t in _tables(lake, server, tables):
        frames = spark_frames(spark, t)
        if frames is None:
            continue
        state, tail, shape = frames
        base = f"{t.database}__{t.table}"
        state.createOrReplaceTempView(quote(base + "__state", "spark"))  # names may hold spaces ...
        tail.createOrReplaceTempView(quote(base + "__state_tail", "spark"))
        refs = [quote(base + "__state", "spark"), quote(base + "__state_tail", "spark")]
        sql = current_sql(shape, refs[0], refs[1], "spark", tombstones=tombstones)
        spark.sql(f"CREATE OR REPLACE TEMPORARY VIEW {quote(base, 'spark')} AS\n{sql}")
        names.append(base)
    if not names and tables:
        raise UnknownTableError(f"none of {list(tables)} has a state yet")
    return names
