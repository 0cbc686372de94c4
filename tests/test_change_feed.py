"""Change feeds consumed exactly once (dagster_mysql_cdc.read_changes, incremental_changes) and the
input manager, against lakes written through the sink and a real capture (MariaDB, local Spark):

- a consumer applying the feed in small budgets tracks the current state, each event once,
  through compactions, OPTIMIZE and a rewrite into a widened type;
- cuts (TRUNCATE, a re-snapshot) say rebuild; a window behind a re-snapshot is not delivered;
- a position older than the retention says rebuild (never short);
- a rebuild's position keeps a batch whose state was not committed yet;
- the incremental example asset equals a recomputation from the source after seeded windows with
  SIGKILLed downstream runs and a re-snapshot in the middle.

No ``from __future__ import annotations``: Dagster reads the input annotations of the asset below.
"""

import json
import random
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import dagster as dg
import polars as pl
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from conftest import ROOT, root_connect
from deltalake import DeltaTable
from downstream_lake import DB, I32, I64, S, schema
from pyspark.sql import DataFrame as SparkDataFrame

# the streaming suite's capture harness (fixtures)
from test_streaming import make_cdc, scratch_db, sql  # noqa: F401

import dagster_mysql_cdc as cdc
from dagster_mysql_cdc.engine.stream import STREAM_APP_ID

pytestmark = [pytest.mark.integration, pytest.mark.spark]


class Replica:
    """A keyed consumer: applies envelopes to a dict (the downstream copy of a table)."""

    def __init__(self, current: pa.Table, key: str):
        self.key = key
        self.rows = {r[key]: r for r in current.to_pylist()}
        self.names = [n for n in current.column_names]

    def apply(self, events: pa.Table) -> None:
        for e in events.to_pylist():
            if e["op"] in ("d",):
                self.rows.pop(e["before"][self.key], None)
            elif e["op"] in ("c", "u", "r"):
                self.rows[e["after"][self.key]] = {n: e["after"].get(n) for n in self.names}
            else:
                raise AssertionError(f"unexpected op {e['op']}")

    def live(self, names: list[str]) -> list[tuple]:
        return sorted(tuple(r.get(n) for n in names) for r in self.rows.values())


def random_window(rng: random.Random, model, next_id: list[int]) -> list[tuple]:
    """2-6 random events (c/u/d) against the model's rows (the model is not changed here)."""
    rows = {k[0]: tuple(r.values()) for k, r in model.rows.items()}
    events: list[tuple] = []
    for _ in range(rng.randint(2, 6)):
        r = rng.random()
        if r < 0.4 or not rows:
            next_id[0] += 1
            after = (next_id[0], f"c{next_id[0]}")
            events.append(("c", None, after))
            rows[after[0]] = after
        elif r < 0.75:
            k = rng.choice(sorted(rows))
            after = (k, f"u{rng.randint(0, 999)}")
            events.append(("u", rows[k], after))
            rows[k] = after
        else:
            k = rng.choice(sorted(rows))
            events.append(("d", rows.pop(k), None))
    return events


def drain(table: str, storage, pos, replica: Replica, **kw) -> tuple[object, int]:
    """Read and apply the feed until nothing is left; returns (position, events delivered)."""
    n = 0
    while True:
        b = cdc.read_changes(table, storage, since=pos, **kw)
        assert b.rebuild is None, b.rebuild
        replica.apply(b.events)
        n += b.events.num_rows
        pos = b.end
        if not b.more:
            return pos, n


def stream_events(storage, paths) -> int:
    log = DeltaTable(paths.changelog, storage_options=storage.delta_storage_options()).to_pyarrow_table(
        columns=["op"]
    )
    return int(pc.sum(pc.not_equal(log["op"], "r")).as_py())


def test_a_consumer_of_the_feed_tracks_the_current_state_each_event_once(downstream_lake):
    lake = downstream_lake
    kv = schema(("id", I32), ("v", S))
    lake.window(
        "feed", [("r", None, (i, f"f{i}")) for i in range(1, 21)], values=kv, key=("id",), snapshot=True
    )
    first = cdc.read_changes("db.feed", lake.storage)
    assert first.rebuild and "first read" in first.rebuild and first.events is None
    replica = Replica(first.read_current(metadata=False), "id")
    pos = first.end
    model = lake.models["feed"]
    rng, next_id, delivered = random.Random(11), [100], 0
    for w in range(6):
        lake.window("feed", random_window(rng, model, next_id))
        lake.window("feed", random_window(rng, model, next_id))
        if w == 2:
            lake.compact("feed")  # the compacted state moves; the change log does not
        if w == 3:  # OPTIMIZE of the change log's small files: dataChange=false, no new events
            DeltaTable(lake.writer.paths(DB, "feed").changelog).optimize.compact()
        pos, n = drain("db.feed", lake.storage, pos, replica, max_rows=2)  # commits split by the budget
        delivered += n
        assert replica.live(["id", "v"]) == model.live()
    # a column widened INT -> BIGINT: the change log is rewritten (same events), new events follow
    kv64 = schema(("id", I64), ("v", S))
    lake.window(
        "feed",
        [("u", (1, "f1"), (1, "wide"))] if (1,) in model.rows else [("c", None, (1, "wide"))],
        values=kv64,
    )
    pos, n = drain("db.feed", lake.storage, pos, replica, max_commits=1)
    delivered += n
    assert replica.live(["id", "v"]) == model.live()
    assert delivered == stream_events(lake.storage, lake.writer.paths(DB, "feed"))  # each event once
    # nothing new: no events, the same position
    again = cdc.read_changes("db.feed", lake.storage, since=pos)
    assert again.events.num_rows == 0 and again.end == pos and not again.more
    # the flat format: ExtractNewRecordState rows with the ordering key; a keyless table's counts
    lake.window("feed", [("c", None, (5000, "flat"))])
    flat = cdc.read_changes("db.feed", lake.storage, since=pos, format="flat")
    assert flat.events.select(["id", "v", "__op", "__deleted"]).to_pylist() == [
        {"id": 5000, "v": "flat", "__op": "c", "__deleted": False}
    ]
    assert {"__epoch", "__binlog_file", "__binlog_pos", "__binlog_row", "_commit_version"} <= set(
        flat.events.column_names
    )
    # the position survives its JSON form (the asset metadata)
    assert cdc.ChangePosition.from_json(flat.end.to_json()) == flat.end


def test_cuts_say_rebuild_and_a_window_behind_a_resnapshot_is_not_delivered(downstream_lake):
    lake = downstream_lake
    kv = schema(("id", I32), ("v", S))
    lake.window(
        "feed_cut", [("r", None, (i, f"k{i}")) for i in range(1, 11)], values=kv, key=("id",), snapshot=True
    )
    b = cdc.read_changes("db.feed_cut", lake.storage)
    replica = Replica(b.read_current(metadata=False), "id")
    lake.window("feed_cut", [("u", (1, "k1"), (1, "x"))])
    lake.window("feed_cut", [("t", None, None), ("c", None, (40, "after"))])
    b = cdc.read_changes("db.feed_cut", lake.storage, since=b.end)
    assert b.rebuild and "TRUNCATE" in b.rebuild and b.events is None
    replica = Replica(b.read_current(metadata=False), "id")
    assert replica.live(["id", "v"]) == lake.models["feed_cut"].live() == [(40, "after")]
    lake.window("feed_cut", [("c", None, (41, "n"))])
    pos, _ = drain("db.feed_cut", lake.storage, b.end, replica)
    # a re-snapshot lacking keys, and a stream window that started before it committing after it
    behind, snap_at = lake.next_position(), lake.next_position()
    lake.window("feed_cut", [("r", None, (41, "s41")), ("r", None, (42, "s42"))], snapshot=True, at=snap_at)
    b = cdc.read_changes("db.feed_cut", lake.storage, since=pos)
    assert b.rebuild and "full snapshot" in b.rebuild
    replica = Replica(b.read_current(metadata=False), "id")
    lake.window(
        "feed_cut", [("u", (41, "n"), (41, "stale")), ("c", None, (99, "stale"))], at=behind, model=False
    )
    lake.window("feed_cut", [("c", None, (43, "new"))])
    pos, n = drain("db.feed_cut", lake.storage, b.end, replica)
    assert n == 1  # the stale window's events order before the snapshot: the state ignores them too
    assert replica.live(["id", "v"]) == lake.models["feed_cut"].live()
    assert sorted(cdc.read_current("db.feed_cut", lake.storage).column("id").to_pylist()) == [41, 42, 43]


def test_a_position_older_than_the_retention_says_rebuild(downstream_lake):
    from dagster_mysql_cdc.sink.retention import RetentionPolicy, vacuum_if_due

    lake = downstream_lake
    kv = schema(("id", I32), ("v", S))
    lake.window("feed_old", [("r", None, (1, "a"))], values=kv, key=("id",), snapshot=True)
    b = cdc.read_changes("db.feed_old", lake.storage)
    b.read_current()
    old = b.end
    for k in range(12):  # past a checkpoint (delta.checkpointInterval = 10)
        lake.window("feed_old", [("c", None, (10 + k, "n"))])
    mid = cdc.read_changes("db.feed_old", lake.storage, since=old, max_commits=11).end
    paths = lake.writer.paths(DB, "feed_old")
    DeltaTable(paths.changelog).optimize.compact()  # the commits after `mid` now live in one new file
    done = vacuum_if_due(
        lake.storage, paths.changelog, RetentionPolicy(retention_hours=0, interval_hours=1e-9)
    )
    assert done.get("files_deleted"), done
    expired = cdc.read_changes("db.feed_old", lake.storage, since=old)
    assert expired.rebuild and "older than what the change log keeps" in expired.rebuild
    gone = cdc.read_changes("db.feed_old", lake.storage, since=mid)
    assert gone.rebuild and "older than what the change log keeps" in gone.rebuild
    # a change log created anew is another feed
    other = cdc.ChangePosition("another-table-id", old.version)
    assert "created anew" in cdc.read_changes("db.feed_old", lake.storage, since=other).rebuild


def test_a_rebuild_position_keeps_a_batch_whose_state_is_not_committed_yet(downstream_lake):
    """A window commits its change log first and its state tail next: a run killed between the two
    leaves events that the current state lacks until the retry. The position taken with the
    current-state read lists that commit as pending, the next read delivers it, and the retry's
    tail commit (its change log is skipped) is not delivered again."""
    import pyarrow.parquet as pq

    from dagster_mysql_cdc.events import ChangeEventBuilder
    from dagster_mysql_cdc.sink.delta import commit_files, open_table
    from dagster_mysql_cdc.sink.evolution import conform_table

    lake = downstream_lake
    kv = schema(("id", I32), ("v", S))
    lake.window(
        "feed_pending",
        [("r", None, (i, f"p{i}")) for i in range(1, 6)],
        values=kv,
        key=("id",),
        snapshot=True,
    )
    paths = lake.writer.paths(DB, "feed_pending")
    at = lake.next_position()
    events = [("u", (1, "p1"), (1, "killed")), ("c", None, (6, "p6"))]
    builder = ChangeEventBuilder(kv, ("id",), server_name="srv", database=DB, table="feed_pending")
    for i, (op, before, after) in enumerate(events):
        builder.add(
            op, before, after, file=at.file, pos=at.pos + 10 * i, row=0, ts_ms=1, source_ts_ms=1, server_id=1
        )
    log_schema = pa.schema(open_table(lake.storage, paths.changelog).schema().to_arrow())
    rows = conform_table(pa.Table.from_batches([builder.to_record_batch()]), log_schema)
    pq.write_table(rows, f"{paths.changelog}/killed-run.parquet")
    size = Path(f"{paths.changelog}/killed-run.parquet").stat().st_size
    commit_files(
        lake.storage,
        paths.changelog,
        log_schema,
        [
            {
                "path": "killed-run.parquet",
                "size": size,
                "num_records": rows.num_rows,
                "modification_time": int(time.time() * 1000),
            }
        ],
        mode="append",
        app_id=STREAM_APP_ID,
        version=at.as_version(),
    )
    b = cdc.read_changes("db.feed_pending", lake.storage)
    replica = Replica(b.read_current(metadata=False), "id")
    assert replica.rows[1]["v"] == "p1" and 6 not in replica.rows  # the state lacks the batch
    assert len(b.end.pending) == 1
    b = cdc.read_changes("db.feed_pending", lake.storage, since=b.end)
    assert b.events.num_rows == 2
    replica.apply(b.events)
    lake.window("feed_pending", events, at=at)  # the retry: the change log has the batch, the tail gets it
    assert replica.live(["id", "v"]) == lake.models["feed_pending"].live()
    now = cdc.read_current("db.feed_pending", lake.storage, metadata=False)
    assert dict(zip(now["id"].to_pylist(), now["v"].to_pylist()))[1] == "killed"
    again = cdc.read_changes("db.feed_pending", lake.storage, since=b.end)
    assert again.events.num_rows == 0  # delivered once


def test_the_input_manager_hands_the_current_state_by_annotation(downstream_lake, spark):
    lake = downstream_lake
    seen = {}
    keyed_key, keyless_key = dg.AssetKey(["srv", DB, "keyed"]), dg.AssetKey(["srv", DB, "keyless"])
    composite_key = dg.AssetKey(["srv", DB, "composite"])

    @dg.asset(
        ins={
            "keyed": dg.AssetIn(key=keyed_key, input_manager_key="cdc_tables"),
            "keyless": dg.AssetIn(
                key=keyless_key, input_manager_key="cdc_tables", metadata={"columns": ["a"]}
            ),
            "big": dg.AssetIn(
                key=composite_key, input_manager_key="cdc_tables", metadata={"filter": [("v", ">", 3)]}
            ),
        }
    )
    def consumer(keyed: pa.Table, keyless: pl.DataFrame, big: SparkDataFrame) -> None:
        seen["keyed"], seen["keyless"], seen["big"] = keyed, keyless, big.collect()

    resource = cdc.CdcLakeResource(base_uri=lake.storage.base_uri, spark_remote=None)
    result = dg.materialize(
        [consumer, dg.SourceAsset(keyed_key), dg.SourceAsset(keyless_key), dg.SourceAsset(composite_key)],
        resources={"lake": resource, "cdc_tables": cdc.CdcInputManager(lake=resource)},
    )
    assert result.success
    assert isinstance(seen["keyed"], pa.Table)
    assert sorted(seen["keyed"].column("id").to_pylist()) == sorted(k[0] for k in lake.models["keyed"].rows)
    assert isinstance(seen["keyless"], pl.DataFrame) and seen["keyless"].columns[0] == "a"
    assert Counter(seen["keyless"]["a"].to_list()) == Counter(v[0] for v in lake.models["keyless"].live())
    want = sorted((a, b) for (a, b), r in lake.models["composite"].rows.items() if r["v"] > 3)
    assert want and sorted((r["a"], r["b"]) for r in seen["big"]) == want


# -- the incremental example asset, exactly once ---------------------------------------------------

SOURCE_TOTALS = """
SELECT o.product_id, p.name, COUNT(*), SUM(o.quantity), MAX(o.order_date)
FROM `{db}`.orders o LEFT JOIN `{db}`.products p ON p.id = o.product_id
GROUP BY o.product_id, p.name ORDER BY o.product_id
"""


def source_totals(db: str) -> list[tuple]:
    import datetime as dt

    conn = root_connect()
    try:
        with conn.cursor() as cur:
            cur.execute(SOURCE_TOTALS.format(db=db))
            rows = cur.fetchall()
    finally:
        conn.close()
    return [(pid, name, int(n), int(q), d if isinstance(d, dt.date) else None) for pid, name, n, q, d in rows]


def test_the_incremental_asset_equals_the_source_after_sigkills_and_a_resnapshot(
    scratch_db, make_cdc, tmp_path
):
    rng = random.Random(20261128)
    db = scratch_db
    sql(
        f"CREATE TABLE `{db}`.products (id INT PRIMARY KEY, name VARCHAR(20), weight DOUBLE)",
        f"CREATE TABLE `{db}`.orders (order_number INT AUTO_INCREMENT PRIMARY KEY, order_date DATE, "
        "quantity INT, product_id INT)",
        f"INSERT INTO `{db}`.products VALUES " + ", ".join(f"({i}, 'p{i}', {i}.5)" for i in range(1, 9)),
    )
    conn = root_connect(autocommit=True)

    def dml(n: int) -> None:
        with conn.cursor() as cur:
            for _ in range(n):
                r = rng.random()
                if r < 0.5:
                    cur.execute(
                        f"INSERT INTO `{db}`.orders (order_date, quantity, product_id) VALUES "
                        f"(DATE '2016-01-01' + INTERVAL {rng.randint(0, 60)} DAY, {rng.randint(1, 9)}, {rng.randint(1, 8)})"
                    )
                elif r < 0.8:
                    cur.execute(
                        f"UPDATE `{db}`.orders SET quantity = {rng.randint(1, 9)}, product_id = {rng.randint(1, 8)}, "
                        f"order_date = DATE '2016-01-01' + INTERVAL {rng.randint(0, 60)} DAY "
                        f"ORDER BY RAND({rng.randint(0, 999)}) LIMIT 2"
                    )
                else:
                    cur.execute(f"DELETE FROM `{db}`.orders ORDER BY RAND({rng.randint(0, 999)}) LIMIT 1")

    dml(40)
    capture = make_cdc(db)
    capture.ticks()  # the initial snapshot
    spec = {
        "server": capture.server,
        "database": db,
        "lake": capture.storage.base_uri,
        "instance_dir": str(tmp_path / "downstream-instance"),
        "output": ["analytics", "totals"],
        "by_day": ["analytics", "totals_by_day"],
    }
    Path(spec["instance_dir"]).mkdir()
    child = Path(__file__).with_name("downstream_consumer.py")

    def run(kill_after: float | None = None, kill_after_writes: int | None = None) -> str:
        args = json.dumps({**spec, "kill_after_writes": kill_after_writes})
        p = subprocess.Popen([sys.executable, str(child), args], cwd=ROOT, stderr=subprocess.PIPE)
        if kill_after is not None:
            try:
                p.wait(timeout=kill_after)
            except subprocess.TimeoutExpired:
                p.send_signal(signal.SIGKILL)
                p.wait()
                return "killed"
        err = p.communicate(timeout=300)[1]
        if kill_after_writes:
            assert p.returncode == -signal.SIGKILL, err.decode()[-3000:]
            return f"killed after write {kill_after_writes}"
        assert p.returncode == 0, err.decode()[-3000:]
        return "ok"

    outcomes = []
    for i in range(7):
        dml(rng.randint(5, 20))
        capture.ticks()
        if i == 3:  # a re-snapshot of orders, as a UI materialization does (cut marker)
            key = dg.AssetKey([capture.server, db, "orders"])
            res = dg.materialize(
                [capture.assets], selection=[key], resources=capture.resources, instance=capture.instance
            )
            assert res.success
        # crashes of incremental runs after the running sums were written, after the totals too
        # (before and after the re-snapshot), and at random times; a recorded run follows most
        if i in (1, 4):
            outcomes.append(run(kill_after_writes=1))
        if i in (2, 5):
            outcomes.append(run(kill_after_writes=2))
        if i >= 3:
            outcomes.append(run(kill_after=rng.uniform(1.0, 8.0)))
        if i < 6:
            outcomes.append(run())
    outcomes.append(run())
    assert outcomes.count("ok") >= 7, outcomes
    totals = DeltaTable(capture.storage.uri("analytics", "totals")).to_pyarrow_table()
    got = [
        (r["product_id"], r["product_name"], r["orders"], r["total_quantity"], r["last_order_date"])
        for r in totals.to_pylist()
    ]
    assert got == source_totals(db)
    # incremental runs applied changes; the re-snapshot (and the first run) rebuilt
    instance = dg.DagsterInstance.local_temp(spec["instance_dir"])
    mats = instance.fetch_materializations(dg.AssetKey("order_totals"), limit=100).records
    rebuilt = [
        m.asset_materialization.metadata[
            f"dagster_mysql_cdc/changes/{capture.server}.{db}.orders/rebuilt"
        ].value
        for m in mats
    ]
    assert True in rebuilt and False in rebuilt, rebuilt
