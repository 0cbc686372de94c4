"""The Arrow state-row computation (sink/state_rows.py) agrees with the Spark expressions.

The sink computes state rows (newest event per key) in Arrow, on the driver and in the Spark tasks
that write a first snapshot. The reference here is the same computation in Spark
(:func:`state_columns` + a ``row_number`` window), which the library used before. Both are run
over the same random change events, keyed and keyless, with nulls, repeated keys, ties and every
op, and must give the same rows.
"""

import datetime as dt
import decimal
import random
from collections import Counter
from collections.abc import Sequence

import pyarrow as pa
import pytest

from dagster_mysql_cdc.events import ChangeEventBuilder
from dagster_mysql_cdc.sink.state_rows import (
    ORDER_COLS,
    count_per_value,
    live_multiset,
    newest_per_key,
    state_rows,
)

VALUE_SCHEMA = pa.schema(
    [
        ("id", pa.int64()),
        ("name", pa.string()),
        ("amount", pa.decimal128(12, 2)),
        ("at", pa.timestamp("us")),
        ("flag", pa.int16()),
    ]
)


def random_batch(seed: int, keyed: bool, n: int = 400) -> pa.RecordBatch:
    rng = random.Random(seed)
    b = ChangeEventBuilder(VALUE_SCHEMA, ("id",) if keyed else (), server_name="s", database="d", table="t")
    live: dict = {}
    used: set = set()

    def image(k):
        return (
            k if keyed or rng.random() < 0.9 else None,
            rng.choice([None, "a", "b", "😀"]),
            decimal.Decimal(rng.randint(-999, 999)) / 100,
            dt.datetime(2024, 1, 1) + dt.timedelta(seconds=rng.randint(0, 5)),
            rng.choice([0, 1]),
        )

    for i in range(n):
        # events out of order over a few files; every event has its own ordering key (as in the
        # binlog), except a keyless update's tombstone, which shares its update's
        file = f"mysql-bin.00000{rng.randint(1, 3)}"
        pos = 100 + 10 * rng.randint(0, 10_000)
        while (file, pos) in used:
            pos += 10
        used.add((file, pos))
        k = rng.randint(1, 25)
        op = rng.choice("ccuuddrt") if i % 50 else "t"
        common = dict(
            file=file,
            pos=pos,
            row=rng.randint(0, 3),
            ts_ms=i,
            source_ts_ms=1000 + i,
            server_id=1,
            gtid=rng.choice([None, f"0-1-{i}"]),
        )
        if op == "t":
            b.add("t", None, None, **common)
        elif op == "c" or (op in "ud" and k not in live):
            live[k] = image(k)
            b.add("c", None, live[k], **common)
        elif op == "u":
            new = image(k) if rng.random() < 0.8 else live[k]  # some keyless updates change nothing
            b.add("u", live[k], new, **common)
            live[k] = new
        elif op == "d":
            b.add("d", live.pop(k), None, **common)
        else:
            live[k] = image(k)
            b.add("r", None, live[k], snapshot="true", **{**common, "row": 0})
    return b.to_record_batch()


def state_columns(value_names: Sequence[str], replaced_before: bool = False):
    """The reference: Spark column expressions turning change events into current-state rows
    (the library's state rows before they were computed in Arrow).

    The row image is ``after`` (``before`` for deletes, so a tombstone keeps its key and last
    values), followed by the ``__op``/``__deleted``/``__ts_ms``/``__source_ts_ms``/``__snapshot``/
    ``__epoch``/``__binlog_file``/``__binlog_pos``/``__binlog_row``/``__gtid`` metadata columns. Read events
    (``op=r``) order before binlog events at the same position (``__binlog_row = -1``).
    """
    from pyspark.sql import functions as F

    if replaced_before:
        # keyless tables: an update replaces the row identified by its before image
        img, op, deleted = F.col("before"), F.lit("d"), F.lit(True)
    else:
        img = F.when(F.col("op").isin("d", "t"), F.col("before")).otherwise(F.col("after"))
        op, deleted = F.col("op"), F.col("op").isin("d", "t")
    cols = [img.getField(n).alias(n) for n in value_names]
    return cols + [
        op.alias("__op"),
        deleted.alias("__deleted"),
        F.col("ts_ms").alias("__ts_ms"),
        F.col("source.ts_ms").alias("__source_ts_ms"),
        F.col("source.snapshot").alias("__snapshot"),
        F.lit(0).cast("long").alias("__epoch"),  # one batch, one offset epoch (0 here)
        F.col("source.file").alias("__binlog_file"),
        F.col("source.pos").alias("__binlog_pos"),
        F.when(F.col("op") == "r", F.lit(-1))
        .otherwise(F.col("source.row"))
        .cast("int")
        .alias("__binlog_row"),
        F.col("source.gtid").alias("__gtid"),
    ]


def spark_newest(spark, batch: pa.RecordBatch, key: list[str], keyless: bool) -> list[dict]:
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    names = VALUE_SCHEMA.names
    df = spark.createDataFrame(pa.Table.from_batches([batch]))
    rows = df.where(df["op"] != "t").select(*state_columns(names))
    if keyless:
        rows = rows.unionByName(df.where(df["op"] == "u").select(*state_columns(names, replaced_before=True)))
    order = [F.col(c).desc() for c in ORDER_COLS] + [F.col("__deleted").asc()]
    w = Window.partitionBy(*[F.col(k) for k in key]).orderBy(*order)
    rows = rows.withColumn("__rn", F.row_number().over(w)).where(F.col("__rn") == 1).drop("__rn")
    return [r.asDict() for r in rows.collect()]


def canonical(rows: list[dict]) -> list[tuple]:
    def norm(v):
        if isinstance(v, dt.datetime):
            return v.replace(tzinfo=None).isoformat()
        return v

    return sorted((tuple((k, norm(v)) for k, v in sorted(r.items())) for r in rows), key=repr)


@pytest.mark.parametrize("keyed", [True, False], ids=["keyed", "keyless"])
def test_state_rows_before_dedup_have_the_expected_shape(keyed):
    batch = random_batch(7, keyed)
    rows = state_rows(batch, VALUE_SCHEMA.names, keyless=not keyed)
    ops = batch.column("op").to_pylist()
    n_updates = ops.count("u")
    assert rows.num_rows == len(ops) - ops.count("t") + (0 if keyed else n_updates)
    assert rows.column_names[: len(VALUE_SCHEMA)] == VALUE_SCHEMA.names
    reads = [r for r in rows.to_pylist() if r["__op"] == "r"]
    assert reads and all(r["__binlog_row"] == -1 for r in reads)
    deletes = [r for r in rows.to_pylist() if r["__deleted"]]
    assert all(r["__op"] == "d" for r in deletes) and all(r["id"] is not None or not keyed for r in deletes)


@pytest.mark.spark
@pytest.mark.parametrize("seed", [1, 2, 3])
@pytest.mark.parametrize("keyed", [True, False], ids=["keyed", "keyless"])
def test_arrow_newest_per_key_equals_spark_window(spark, seed, keyed):
    batch = random_batch(seed, keyed)
    key = ["id"] if keyed else VALUE_SCHEMA.names
    ours = newest_per_key(state_rows(batch, VALUE_SCHEMA.names, keyless=not keyed), key)
    assert ours.num_rows == len({tuple(r[k] for k in key) for r in ours.select(key).to_pylist()}), (
        "one row per key"
    )
    assert canonical(ours.to_pylist()) == canonical(spark_newest(spark, batch, key, keyless=not keyed))


def test_newest_per_key_with_nested_key_columns_falls_back_to_python_grouping():
    pos = pa.array([1, 2, 2, 1], pa.int64())
    rows = pa.table(
        {
            "g": pa.array([{"x": 1}, {"x": 1}, {"x": 2}, None], pa.struct([("x", pa.int64())])),
            "__op": ["c", "u", "c", "c"],
            "__deleted": [False, False, False, False],
            "__binlog_file": ["f.1"] * 4,
            "__binlog_pos": pos,
            "__binlog_row": pa.array([0, 0, 0, 0], pa.int32()),
        }
    )
    out = newest_per_key(rows, ["g"]).to_pylist()
    assert sorted(((r["g"]["x"] if r["g"] else None, r["__binlog_pos"]) for r in out), key=repr) == sorted(
        [(1, 2), (2, 2), (None, 1)], key=repr
    )


# -- keyless tables: a multiset (a ``__count`` per distinct value) ---------------------------------


def reference_counts(batch: pa.RecordBatch) -> Counter:
    """The reference for keyless counts: replay every event as +1 for the image it adds and -1 for
    the image it removes (TRUNCATE markers apart), in Python."""
    counts: Counter = Counter()
    names = VALUE_SCHEMA.names
    for e in batch.to_pylist():
        if e["op"] in ("c", "r", "u"):
            counts[tuple(e["after"][n] for n in names)] += 1
        if e["op"] in ("d", "u"):
            counts[tuple(e["before"][n] for n in names)] -= 1
    return counts


def duplicate_batch(seed: int, n: int = 600) -> pa.RecordBatch:
    """Keyless change events over a pool of 6 row values (so most values have several copies):
    inserts, deletes and updates of single copies, snapshot reads and TRUNCATE markers, at
    distinct, shuffled ordering keys."""
    rng = random.Random(seed)
    b = ChangeEventBuilder(VALUE_SCHEMA, (), server_name="s", database="d", table="t")
    pool = [
        (i % 3 if i else None, rng.choice([None, "a", "😀"]), decimal.Decimal(i), dt.datetime(2024, 1, 1), 0)
        for i in range(6)
    ]
    live: list = []
    positions = rng.sample(range(100, 100 + 20 * n), n)
    for i, pos in enumerate(positions):
        common = dict(file="mysql-bin.000001", pos=pos, row=0, ts_ms=i, source_ts_ms=i, server_id=1)
        op = rng.choice("cccrdduu") if live else rng.choice("cr")
        if op in "cr":
            live.append(rng.choice(pool))
            b.add(op, None, live[-1], **({**common, "snapshot": "true"} if op == "r" else common))
        elif op == "d":
            b.add("d", live.pop(rng.randrange(len(live))), None, **common)
        else:
            j = rng.randrange(len(live))
            new = rng.choice(pool)
            b.add("u", live[j], new, **common)
            live[j] = new
        if i % 97 == 96:
            b.add("t", None, None, **{**common, "pos": pos + 1})
    return b.to_record_batch()


@pytest.mark.parametrize("seed", [1, 2, 3, 4])
def test_keyless_count_per_value_equals_a_replay_of_the_events(seed):
    batch = duplicate_batch(seed)
    names = VALUE_SCHEMA.names
    rows = state_rows(batch, names, keyless=True)
    counted = count_per_value(rows, names)
    got = {tuple(r[n] for n in names): r["__count"] for r in counted.to_pylist()}
    assert len(got) == counted.num_rows, "one row per distinct value"
    ref = reference_counts(batch)
    assert got == {k: v for k, v in ref.items() if k in got} and set(got) == set(ref)
    assert any(v > 1 for v in got.values()), "the batch has duplicate values (the case counts exist for)"
    # each value's row is its newest event, as newest_per_key picks it
    newest = {tuple(r[n] for n in names): r for r in newest_per_key(rows, names).to_pylist()}
    for r in counted.to_pylist():
        k = tuple(r[n] for n in names)
        assert {c: r[c] for c in ORDER_COLS + ("__op",)} == {c: newest[k][c] for c in ORDER_COLS + ("__op",)}


def test_count_per_value_with_nested_value_columns_falls_back_to_python_grouping():
    rows = pa.table(
        {
            "g": pa.array([{"x": 1}, {"x": 1}, {"x": 2}, {"x": 1}], pa.struct([("x", pa.int64())])),
            "__op": ["c", "c", "c", "d"],
            "__deleted": [False, False, False, True],
            "__binlog_file": ["f.1"] * 4,
            "__binlog_pos": pa.array([1, 2, 3, 4], pa.int64()),
            "__binlog_row": pa.array([0, 0, 0, 0], pa.int32()),
        }
    )
    out = {r["g"]["x"]: (r["__count"], r["__op"]) for r in count_per_value(rows, ["g"]).to_pylist()}
    assert out == {1: (1, "d"), 2: (1, "c")}


def test_live_multiset_repeats_each_live_value_count_times():
    state = pa.table(
        {
            "a": [1, 2, 3, 4, 5],
            "__deleted": [False, True, False, False, False],
            "__count": pa.array([2, 0, 3, None, 0], pa.int64()),
            "__op": ["c", "d", "r", "c", "u"],
        }
    )
    assert sorted(live_multiset(state).column("a").to_pylist()) == [1, 1, 3, 3, 3, 4]
    assert live_multiset(state).column_names == ["a"]
    keyed = state.drop_columns(["__count"])
    assert sorted(live_multiset(keyed).column("a").to_pylist()) == [1, 3, 4, 5]
