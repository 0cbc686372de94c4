"""Compaction and the current read of a large table by Spark tasks (see :mod:`.compaction`).

The compacted state's and the tail's data files are read by the executors (the
``mysql_cdc_lake_files`` Python data source: pyarrow on the lake's filesystem, local or S3, no
Hadoop connector), and :func:`.current.resolve`'s rules are applied as Spark SQL over them:

- keyed: the rows of each key ordered by ``(__epoch, __binlog_file, __binlog_pos, __binlog_row)``
  descending (a live row before a tombstone on a tie), the first kept (``row_number``);
- keyless: the rows of each distinct value (Spark groups ``NULL``s together, as the Arrow
  path does), the compacted count with the ``__count`` changes of tail rows newer than the
  compacted row applied in order, never below zero (``P_n - least(0, min(P_k))``, ``P_k`` the
  running sum over the compacted row then the tail rows in ordering-key order, a ``-1`` first on a
  tie), the newest row's image (``max_by``);
- cut markers: tail rows older than the newest cut are dropped, rows older than it become
  tombstones at it.

The result is written by the executors (``mysql_cdc_delta_files``, its Arrow batches as they
are) and committed by the driver in one Delta commit (an overwrite, optimistic), so a cluster
compacts a large table in parallel and neither the table nor the tail passes through the run
process. :func:`state_frame` is the same plan without the write: the current state as a Spark
DataFrame.
"""

from __future__ import annotations

import logging
import shutil
import tempfile
import time
from typing import Any

import pyarrow as pa

from ..events import COUNT_FIELD, STATE_META_NAMES
from .compaction_commit import compaction_commit_info, remove_files
from .current import newest_cut
from .data_files import read_files
from .state_rows import ORDER_COLS, newest_order_key
from .tail import CUT_COL, state_schema_after

log = logging.getLogger(__name__)


def _frame(F, writer: Any, table_uri: str, actions: pa.Table, schema: pa.Schema, extra: dict[str, Any]):
    """A DataFrame of the data files ``actions`` of ``table_uri`` in ``schema`` (read by the
    executors), with constant columns ``extra`` (``F``: the session's functions module)."""
    from .spark_files import LakeFilesDataSource, encode_schema, file_groups, lake_files_options

    spark = writer.active_spark()
    reader = spark.read.format(writer.register_data_source(LakeFilesDataSource))
    for k, v in lake_files_options(writer, table_uri, file_groups(actions), schema).items():
        reader = reader.option(k, v)
    df = reader.option("schema", encode_schema(schema)).load()
    for name, value in extra.items():
        df = df.withColumn(name, F.lit(value))
    return df


def _ordering(F):
    return F.struct(
        F.coalesce(F.col("__epoch"), F.lit(0)).cast("long").alias("e"),
        F.col("__binlog_file").alias("f"),
        F.col("__binlog_pos").alias("p"),
        F.col("__binlog_row").alias("r"),
    )


def _cut_struct(F, cut):
    (e, f, p, r), _op = cut
    return F.struct(
        F.lit(e).cast("long").alias("e"),
        F.lit(f).alias("f"),
        F.lit(p).cast("long").alias("p"),
        F.lit(r).cast("int").alias("r"),
    )


def state_frame(
    writer: Any, paths: Any, key: list[str], *, state_dt: Any, tail_dt: Any
) -> tuple[Any, pa.Schema, str | None]:
    """The current state of a table as a Spark DataFrame (the compacted state with the tail
    applied, :mod:`.current`'s rules in Spark SQL; see the module docs).

    Returns:
        ``(DataFrame, its Arrow schema, the newest tail row's ordering key as text)``.
    """
    from .spark_files import sql_functions

    # the functions of the session's flavour (Spark Connect or classic), see sql_functions
    F, Window = sql_functions(writer.active_spark())

    keyless = not key
    tail_schema = pa.schema(tail_dt.schema().to_arrow()) if tail_dt is not None else None
    st_schema = pa.schema(state_dt.schema().to_arrow()) if state_dt is not None else None
    assert tail_schema is not None or st_schema is not None
    schema = state_schema_after(st_schema, tail_schema, keyless) if tail_schema is not None else st_schema
    assert schema is not None
    values = [f.name for f in schema if f.name not in STATE_META_NAMES]
    tail_actions = pa.table(tail_dt.get_add_actions(flatten=True)) if tail_dt is not None else None
    # the cut markers and the newest ordering key: a small read of the tail's metadata columns
    meta_cols = (
        pa.schema([tail_schema.field(c) for c in (*ORDER_COLS, "__op", CUT_COL) if c in tail_schema.names])
        if tail_schema is not None
        else None
    )
    tail_meta = (
        read_files(writer.storage, paths.tail, tail_actions.column("path").to_pylist(), meta_cols)
        if tail_actions is not None and meta_cols is not None
        else None
    )
    cut = newest_cut(tail_meta)
    as_of = newest_order_key(tail_meta) if tail_meta is not None else None
    order = _ordering(F)
    df = _state_and_tail(F, writer, paths, state_dt, tail_actions, schema, keyless)
    if cut is not None:
        cs = _cut_struct(F, cut)
        df = df.filter((F.col("__src") == 0) | (order >= cs))
    out_cols = [f.name for f in schema]
    if not keyless:
        w = Window.partitionBy(*[F.col(k) for k in key]).orderBy(
            F.coalesce(F.col("__epoch"), F.lit(0)).desc(),
            F.col("__binlog_file").desc(),
            F.col("__binlog_pos").desc(),
            F.col("__binlog_row").desc(),
            F.col("__deleted").asc(),
        )
        df = df.withColumn("__rn", F.row_number().over(w)).filter(F.col("__rn") == 1)
        if cut is not None:
            df = _tombstone(F, df, cut, keyless=False)
        return df.select(*out_cols), schema, as_of
    return _keyless_resolved(F, Window, df, values, out_cols, cut), schema, as_of


def _state_and_tail(
    F, writer: Any, paths: Any, state_dt: Any, tail_actions: pa.Table | None, schema: pa.Schema, keyless: bool
):
    """The compacted state's rows (``__src`` 0) and the tail's (``__src`` 1) in ``schema`` as one
    DataFrame read by the executors, the cut markers left out (``__cut`` kept: false or null)."""
    parts = []
    with_count = schema if keyless else pa.schema([f for f in schema if f.name != COUNT_FIELD.name])
    if state_dt is not None:
        s_actions = pa.table(state_dt.get_add_actions(flatten=True))
        if s_actions.num_rows:
            parts.append(_frame(F, writer, paths.state, s_actions, with_count, {"__src": 0, CUT_COL: False}))
    if tail_actions is not None and tail_actions.num_rows:
        tail_read = pa.schema([*with_count, pa.field(CUT_COL, pa.bool_())])
        parts.append(_frame(F, writer, paths.tail, tail_actions, tail_read, {"__src": 1}))
    df = parts[0]
    for p in parts[1:]:
        df = df.unionByName(p, allowMissingColumns=True)
    return df.filter(~F.coalesce(F.col(CUT_COL), F.lit(False)))


def _keyless_resolved(F, Window, df, values: list[str], out_cols: list[str], cut):
    """A keyless table's current rows from its state and tail rows ``df`` (see the module docs):
    per distinct value the compacted count with the newer tail rows' changes applied in order,
    never below zero, and the newest row's image."""
    order = _ordering(F)
    live_copies = F.when(F.coalesce(F.col("__deleted"), F.lit(False)), F.lit(0)).otherwise(F.lit(1))
    weight = F.when(F.col("__src") == 0, F.coalesce(F.col(COUNT_FIELD.name), live_copies)).otherwise(
        F.coalesce(F.col(COUNT_FIELD.name), F.lit(0))
    )
    fresh = F.lit(False)
    if cut is not None:
        fresh = (F.col("__src") == 0) & (order < _cut_struct(F, cut))
        weight = F.when(fresh, F.lit(0)).otherwise(weight)
    df = df.withColumn("__w", weight.cast("long")).withColumn("__fresh", fresh).withColumn("__ord", order)
    grp = Window.partitionBy(*[F.col(v) for v in values])
    s_ord = F.max(F.when((F.col("__src") == 0) & ~F.col("__fresh"), F.col("__ord"))).over(grp)
    df = df.withColumn("__s_ord", s_ord).filter(
        (F.col("__src") == 0) | F.col("__s_ord").isNull() | (F.col("__ord") > F.col("__s_ord"))
    )
    # the changes applied in order, never below zero: P_n - least(0, min P_k) (see .current)
    running = (
        Window.partitionBy(*[F.col(v) for v in values])
        .orderBy(F.col("__src"), F.col("__ord"), F.col("__deleted").desc())
        .rowsBetween(Window.unboundedPreceding, Window.currentRow)
    )
    df = df.withColumn("__p", F.sum("__w").over(running))
    meta = [c for c in out_cols if c not in values and c != COUNT_FIELD.name]
    agg = df.groupBy(*[F.col(v) for v in values]).agg(
        (F.sum("__w") - F.least(F.min("__p"), F.lit(0))).alias(COUNT_FIELD.name),
        F.max_by(F.struct(*[F.col(m) for m in meta]), F.col("__ord")).alias("__m"),
    )
    agg = agg.select(
        *[F.col(v) for v in values], F.col(COUNT_FIELD.name), *[F.col(f"__m.{m}").alias(m) for m in meta]
    )
    dead = F.col(COUNT_FIELD.name) <= 0
    agg = agg.withColumn("__deleted", dead).withColumn(
        "__op", F.when(~dead & (F.col("__op") == "d"), F.lit("u")).otherwise(F.col("__op"))
    )
    if cut is not None:
        agg = _tombstone(F, agg, cut, keyless=True)
    return agg.select(*out_cols)


def _tombstone(F, df, cut, *, keyless: bool):
    """Rows older than the cut and still live become tombstones at the cut."""
    (e, f, p, r), op = cut
    hit = (~F.coalesce(F.col("__deleted"), F.lit(False))) & (_ordering(F) < _cut_struct(F, cut))
    sets = {
        "__deleted": F.lit(True),
        "__op": F.lit(op),
        "__epoch": F.lit(e).cast("long"),
        "__binlog_file": F.lit(f),
        "__binlog_pos": F.lit(p).cast("long"),
        "__binlog_row": F.lit(r).cast("int"),
    }
    if keyless:
        sets[COUNT_FIELD.name] = F.lit(0).cast("long")
    for name, v in sets.items():
        df = df.withColumn(name, F.when(hit, v).otherwise(F.col(name)))
    return df


def compact_with_spark(
    writer: Any, paths: Any, key: list[str], *, state_dt: Any, tail_dt: Any, reason: str
) -> dict:
    """Compact one table with Spark (see the module docs).

    Returns:
        metrics as :func:`.compaction.compact_in_process`'s (``mode="spark"``).
    """
    from deltalake import CommitProperties
    from deltalake.exceptions import CommitFailedError

    from .delta import (
        COMMIT_HOOKS,
        PATH_COMMIT_HOOKS,
        TABLE_PROPERTIES,
        changed,
        delete_files,
        delta_schema,
        file_actions,
        wrote,
    )
    from .spark_files import FileOutput

    t0 = time.monotonic()
    tail_actions = pa.table(tail_dt.get_add_actions(flatten=True))
    df, schema, as_of = state_frame(writer, paths, key, state_dt=state_dt, tail_dt=tail_dt)
    manifests = tempfile.mkdtemp(prefix="cdc-manifests-")
    try:
        files = writer.write_frame(
            df, [FileOutput(paths.state, schema, kind="rows", stats=("__deleted",))], manifests, rows=True
        )[0]
    finally:
        shutil.rmtree(manifests, ignore_errors=True)
    props = CommitProperties(
        custom_metadata=compaction_commit_info(reason, as_of),
        max_commit_retries=0,
    )
    try:
        if state_dt is None:
            from deltalake.transaction import create_table_with_add_actions

            create_table_with_add_actions(
                paths.state,
                delta_schema(schema),
                file_actions(files),
                mode="append",
                configuration=TABLE_PROPERTIES,
                storage_options=writer.storage.delta_storage_options(),
                commit_properties=props,
                post_commithook_properties=PATH_COMMIT_HOOKS,
            )
            changed(paths.state)
        else:
            state_dt.create_write_transaction(
                file_actions(files),
                mode="overwrite",
                schema=delta_schema(schema),
                commit_properties=props,
                post_commithook_properties=COMMIT_HOOKS,
            )
            state_dt.update_incremental()  # the handle reads its own commit (see .delta.handle_cache)
            wrote(state_dt)
    except CommitFailedError as e:
        delete_files(writer.storage, paths.state, files)
        log.info("compaction of %s left for later: %s", paths.state, e)
        return {"skipped": f"another writer committed first ({e})"}
    removed = remove_files(tail_dt, tail_actions)
    return {
        "mode": "spark",
        "reason": reason,
        "rows_out": sum(int(f["num_records"]) for f in files),
        "tail_rows": int(pa.compute.sum(tail_actions.column("num_records")).as_py() or 0),
        "files_written": len(files),
        "files_removed": removed,
        "seconds": round(time.monotonic() - t0, 3),
        "state_as_of": as_of,
    }
