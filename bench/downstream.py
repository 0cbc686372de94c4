"""Downstream cost: an incremental downstream asset against the same asset recomputed from the
whole captured table.

    python -m bench.downstream                                  # 200,000 and 20,000,000 rows
    python -m bench.downstream --sizes 200000 2000000           # quicker

For each size, a captured table ``bench.items (id BIGINT PRIMARY KEY, grp INT, qty INT)`` is
built directly as a lake (its compacted ``state`` written as the sink writes it: Delta, the state
columns, the key property; an empty ``changelog``), then one window of ``--changes`` row changes
(50 % inserts, 30 % updates, 20 % deletes of random live keys) goes through the sink
(``LakeWriter``: change log + state tail, Spark Connect when ``CDC_SPARK_REMOTE`` is set, else a
local Spark). The downstream asset is "units and rows per group" (1,024 groups):

- **incremental**: ``read_changes`` after the position recorded with the previous result (taken
  with the full read below), each event's ``before`` subtracted and ``after`` added to the
  previous 1,024 sums;
- **full**: ``read_current`` of the two columns (compacted state + tail) and a ``group_by``.

Printed per size: seconds (best of ``--repeat``) and rows read from the lake by each, and whether
both give the same sums. Targets (issue 31): incremental <= 2 s and <= 1 % of the rows read.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import tempfile
import time

import pyarrow as pa
import pyarrow.compute as pc

SERVER, DB, TABLE = "bench", "bench", "items"
GROUPS = 1024


def build_state(storage, rows: int, chunk: int = 2_000_000) -> None:
    """The compacted state of ``rows`` snapshot rows, as the sink writes a first snapshot."""
    from deltalake import write_deltalake

    from dagster_mysql_cdc.events import change_log_schema, state_schema
    from dagster_mysql_cdc.sink.delta import TABLE_PROPERTIES, open_table
    from dagster_mysql_cdc.sink.key_model import KEY_PROPERTY
    from dagster_mysql_cdc.sink.layout import LakeLayout

    paths = LakeLayout(storage, SERVER).table(DB, TABLE)
    values = pa.schema([("id", pa.int64()), ("grp", pa.int32()), ("qty", pa.int32())])
    schema = state_schema(values)
    for start in range(0, rows, chunk):
        n = min(chunk, rows - start)
        ids = pa.array(range(start + 1, start + n + 1), pa.int64())
        cols = {
            "id": ids,
            "grp": pc.cast(pc.bit_wise_and(ids, GROUPS - 1), pa.int32()),
            "qty": pc.cast(pc.add(pc.bit_wise_and(ids, 15), 1), pa.int32()),
            "__op": pa.repeat(pa.scalar("r"), n),
            "__deleted": pa.repeat(pa.scalar(False), n),
            "__ts_ms": pa.repeat(pa.scalar(1, pa.int64()), n),
            "__source_ts_ms": pa.repeat(pa.scalar(1, pa.int64()), n),
            "__snapshot": pa.repeat(pa.scalar("true"), n),
            "__epoch": pa.repeat(pa.scalar(0, pa.int64()), n),
            "__binlog_file": pa.repeat(pa.scalar("mysql-bin.000001"), n),
            "__binlog_pos": pa.repeat(pa.scalar(4, pa.int64()), n),
            "__binlog_row": pa.repeat(pa.scalar(-1, pa.int32()), n),
            "__gtid": pa.nulls(n, pa.string()),
        }
        write_deltalake(
            paths.state,
            pa.table(cols, schema=schema),
            mode="append",
            configuration=dict(TABLE_PROPERTIES),
            storage_options=storage.delta_storage_options(),
        )
    dt = open_table(storage, paths.state)
    dt.alter.set_table_properties({KEY_PROPERTY: json.dumps(["id"])}, raise_if_not_exists=False)
    write_deltalake(paths.changelog, change_log_schema(values, ("id",)).empty_table(), mode="append")


def window(storage, spark, rows: int, changes: int, rng: random.Random):
    """One window of ``changes`` random changes through the sink."""
    from dagster_mysql_cdc.engine.stream import STREAM_APP_ID
    from dagster_mysql_cdc.events import BinlogPosition, ChangeEventBuilder
    from dagster_mysql_cdc.sink.lake import LakeWriter

    values = pa.schema([("id", pa.int64()), ("grp", pa.int32()), ("qty", pa.int32())])
    b = ChangeEventBuilder(values, ("id",), server_name=SERVER, database=DB, table=TABLE)
    at = BinlogPosition("mysql-bin.000002", 4)
    keys = rng.sample(range(1, rows + 1), changes)
    for i, k in enumerate(keys):
        old = (k, k & 1023, (k & 15) + 1)
        r = rng.random()
        pos = dict(file=at.file, pos=at.pos + 10 * i, row=0, ts_ms=1, source_ts_ms=1, server_id=1)
        if r < 0.5:
            b.add("c", None, (rows + 1 + i, rng.randrange(GROUPS), rng.randint(1, 9)), **pos)
        elif r < 0.8:
            b.add("u", old, (k, rng.randrange(GROUPS), rng.randint(1, 9)), **pos)
        else:
            b.add("d", old, None, **pos)
    w = LakeWriter(spark, storage, SERVER)
    w.write_table_batch(
        DB,
        TABLE,
        [b.to_record_batch()],
        value_schema=values,
        primary_key=("id",),
        app_id=STREAM_APP_ID,
        version=at.as_version(),
        position=at,
    )


def sums(t: pa.Table) -> dict[int, tuple[int, int]]:
    g = t.group_by("grp").aggregate([([], "count_all"), ("qty", "sum")])
    return {r["grp"]: (r["count_all"], r["qty_sum"]) for r in g.to_pylist()}


def apply(previous: dict[int, tuple[int, int]], events: pa.Table) -> dict[int, tuple[int, int]]:
    out = dict(previous)
    for side, sign in (("before", -1), ("after", 1)):
        img = events.column(side)
        rows = pa.table({"grp": pc.struct_field(img, "grp"), "qty": pc.struct_field(img, "qty")}).filter(
            pc.is_valid(img)
        )
        for g, (n, q) in sums(rows).items():
            n0, q0 = out.get(g, (0, 0))
            out[g] = (n0 + sign * n, q0 + sign * (q or 0))
    return {g: v for g, v in out.items() if v[0]}


def measure(rows: int, changes: int, repeat: int, spark) -> dict:
    from dagster_mysql_cdc import read_changes, read_current
    from dagster_mysql_cdc.sink.storage import StorageSettings

    tmp = tempfile.mkdtemp(prefix="bench-downstream-")
    try:
        storage = StorageSettings(base_uri=os.path.join(tmp, "lake"))
        t0 = time.monotonic()
        build_state(storage, rows)
        built = time.monotonic() - t0
        first = read_changes((DB, TABLE), storage)  # no position yet: rebuild
        previous = sums(first.read_current(columns=["grp", "qty"], metadata=False))
        position = first.end
        window(storage, spark, rows, changes, random.Random(rows))
        inc_s, full_s = [], []
        for _ in range(repeat):
            t0 = time.monotonic()
            batch = read_changes((DB, TABLE), storage, since=position)
            incremental = apply(previous, batch.events)
            inc_s.append(time.monotonic() - t0)
            t0 = time.monotonic()
            current = read_current((DB, TABLE), storage, columns=["grp", "qty"], metadata=False)
            full = sums(current)
            full_s.append(time.monotonic() - t0)
        return {
            "rows": rows,
            "build_s": built,
            "incremental_s": min(inc_s),
            "incremental_rows_read": batch.rows_read,
            "full_s": min(full_s),
            "full_rows_read": rows + changes,
            "equal": incremental == full,
        }
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--sizes", type=int, nargs="+", default=[200_000, 20_000_000])
    p.add_argument("--changes", type=int, default=1000)
    p.add_argument("--repeat", type=int, default=3)
    args = p.parse_args()
    remote = os.environ.get("CDC_SPARK_REMOTE") or (
        f"sc://127.0.0.1:{os.environ['CDC_SPARK_CONNECT_PORT']}"
        if os.environ.get("CDC_SPARK_CONNECT_PORT")
        else ""
    )
    if remote:
        from dagster_mysql_cdc.sink.spark_session import remote_spark_session

        spark = remote_spark_session(remote)
    else:
        from pyspark.sql import SparkSession

        spark = SparkSession.builder.master("local[2]").getOrCreate()
    print(
        f"{'table rows':>12} | {'incremental':>11} | {'rows read':>9} | {'full':>8} | {'rows read':>11} | {'read %':>6} | {'speed-up':>8} | same"
    )
    for rows in args.sizes:
        r = measure(rows, args.changes, args.repeat, spark)
        pct = 100.0 * r["incremental_rows_read"] / r["full_rows_read"]
        print(
            f"{r['rows']:>12,} | {r['incremental_s']:>10.3f}s | {r['incremental_rows_read']:>9,} | "
            f"{r['full_s']:>7.2f}s | {r['full_rows_read']:>11,} | {pct:>5.3f}% | "
            f"{r['full_s'] / r['incremental_s']:>7.0f}x | {r['equal']}",
            flush=True,
        )


if __name__ == "__main__":
    main()
