"""Merge-on-read against real services (local Spark, local and S3 lakes): a window appends to the
state's tail and leaves the compacted state alone while the tail is small; the current read
(Arrow and Spark) applies the tail exactly; a compaction (in the run process, and by Spark tasks)
gives the same state; nothing is rewritten by a window but what it changed."""

from __future__ import annotations

import json
from collections import Counter

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from deltalake import DeltaTable
from lake_utils import delta_log_versions

from dagster_mysql_cdc.events import BinlogPosition, ChangeEventBuilder
from dagster_mysql_cdc.sink.checkpoints import CHECKPOINTS
from dagster_mysql_cdc.sink.compaction import CompactionPolicy, compact_table
from dagster_mysql_cdc.sink.key_model import KEY_PROPERTY
from dagster_mysql_cdc.sink.lake import LakeWriter
from dagster_mysql_cdc.sink.live_rows import recorded as recorded_live_rows
from dagster_mysql_cdc.sink.read import current_frame, read_current
from dagster_mysql_cdc.sink.state_rows import live_multiset

pytestmark = [pytest.mark.integration, pytest.mark.spark]

VALUES = pa.schema([pa.field("id", pa.int32()), pa.field("v", pa.string())])


def window(
    builder_rows: list[tuple],
    file: str,
    pos0: int,
    *,
    table: str = "t",
    schema: pa.Schema = VALUES,
    key: tuple[str, ...] = ("id",),
) -> pa.RecordBatch:
    """Change-log rows of ``(op, before, after)`` events at increasing positions."""
    b = ChangeEventBuilder(schema, key, server_name="srv", database="db", table=table)
    for i, (op, before, after) in enumerate(builder_rows):
        b.add(op, before, after, file=file, pos=pos0 + 10 * i, row=0, ts_ms=1, source_ts_ms=1, server_id=1)
    return b.to_record_batch()


def write(
    w: LakeWriter,
    batch: pa.RecordBatch,
    start: BinlogPosition,
    snapshot: BinlogPosition | None = None,
    *,
    table: str = "t",
    schema: pa.Schema = VALUES,
    key: tuple[str, ...] = ("id",),
):
    return w.write_table_batch(
        "db",
        table,
        [batch],
        value_schema=schema,
        primary_key=key,
        app_id="app" if snapshot is None else "snap",
        version=start.as_version(),
        snapshot_position=snapshot,
    )


def docs_sql_current(storage, p) -> dict:
    """The current state's live rows by the DuckDB query of docs/output-layout.md."""
    import re
    from pathlib import Path

    import duckdb

    text = (Path(__file__).resolve().parents[1] / "docs" / "output-layout.md").read_text()
    section = text[text.index("## The current state (merge-on-read)") :]
    sql = re.search(r"```sql\n(.*?)```", section, re.S).group(1)
    con = duckdb.connect()
    opts = storage.delta_storage_options()
    con.register("state", DeltaTable(p.state, storage_options=opts).to_pyarrow_dataset())
    con.register("state_tail", DeltaTable(p.tail, storage_options=opts).to_pyarrow_dataset())
    t = con.sql(sql).to_arrow_table()
    return dict(zip(t.column("id").to_pylist(), t.column("v").to_pylist()))


def live(t: pa.Table) -> dict:
    return {r["id"]: r["v"] for r in live_multiset(t).to_pylist()}


def test_windows_append_to_the_tail_and_compactions_keep_the_current_state(any_spark, storage):
    """On a local Spark and on Spark Connect (the README default), on a local and an S3 lake."""
    # a big "small table" threshold off: compaction only when asked or by the tail fraction
    w = LakeWriter(
        any_spark, storage, "srv", compaction=CompactionPolicy(small_state_rows=0, tail_fraction=0.5)
    )
    p = w.paths("db", "t")
    snap = window([("r", None, (i, f"v{i}")) for i in range(1, 101)], "b.000001", 100)
    at = BinlogPosition("b.000001", 100)
    write(w, snap, at, snapshot=at)
    state_v = DeltaTable(p.state, storage_options=storage.delta_storage_options()).version()
    expect = {i: f"v{i}" for i in range(1, 101)}
    # ten small windows: updates, deletes, inserts; the state table is not rewritten by them
    pos = 10_000
    for k in range(10):
        events = [
            ("u", (k + 1, f"v{k + 1}"), (k + 1, f"w{k}")),
            ("d", (50 + k, f"v{50 + k}"), None),
            ("c", None, (200 + k, "new")),
        ]
        res = write(w, window(events, "b.000002", pos), BinlogPosition("b.000002", pos))
        pos += 1000
        expect[k + 1] = f"w{k}"
        expect.pop(50 + k)
        expect[200 + k] = "new"
        pending = res.extra["compaction"]["pending"]
        assert pending.tail_rows == 3 * (k + 1) and pending.state_rows == 100
        assert live(read_current(storage, p)) == expect
    assert DeltaTable(p.state, storage_options=storage.delta_storage_options()).version() == state_v
    tail = DeltaTable(p.tail, storage_options=storage.delta_storage_options())
    tail_files = sum(1 for _ in tail.file_uris())
    assert tail_files >= 10  # each window's job wrote its own (one per Spark task)
    # the SQL of docs/output-layout.md (DuckDB) gives the same rows
    assert docs_sql_current(storage, p) == expect
    # the Spark read of the current state equals the Arrow one
    df = current_frame(w, p)
    spark_rows = {r["id"]: r["v"] for r in df.filter("NOT __deleted").select("id", "v").collect()}
    assert spark_rows == expect
    # a compaction by Spark tasks: the state table is the current state, the tail is empty
    w.compaction = CompactionPolicy(small_state_rows=0, in_process_rows=0)
    m = compact_table(w, p, ["id"], force=True)
    assert m["mode"] == "spark" and m["files_removed"] == tail_files, m
    compacted = DeltaTable(p.state, storage_options=storage.delta_storage_options()).to_pyarrow_table()
    assert live(compacted) == expect
    assert pc.sum(pc.cast(compacted.column("__deleted"), pa.int64())).as_py() == 10  # tombstones kept
    assert (
        sum(1 for _ in DeltaTable(p.tail, storage_options=storage.delta_storage_options()).file_uris()) == 0
    )
    assert live(read_current(storage, p)) == expect
    # the tail fraction triggers the in-process compaction
    w.compaction = CompactionPolicy(tail_fraction=0.005, min_tail_rows=0)
    res = write(w, window([("d", (1, "w0"), None)], "b.000003", 4), BinlogPosition("b.000003", 4))
    assert res.extra["compaction"]["mode"] == "in_process", res.extra
    expect.pop(1)
    assert (
        live(DeltaTable(p.state, storage_options=storage.delta_storage_options()).to_pyarrow_table())
        == expect
    )


NK = pa.schema([pa.field("a", pa.int32()), pa.field("b", pa.string())])


def multiset(state: pa.Table) -> Counter:
    """The live rows of a state (Arrow) as a multiset of value tuples (a keyless row per copy)."""
    return Counter(tuple(r.values()) for r in live_multiset(state).to_pylist())


def test_compactions_by_spark_tasks_apply_cuts_and_keyless_counts(any_spark, local_storage):
    """The Spark plan of :mod:`dagster_mysql_cdc.sink.compaction_spark` (the current read as a
    Spark DataFrame, and a compaction by Spark tasks) on a local Spark and on Spark Connect, for a
    keyed and a keyless table whose tails hold updates, deletes, a TRUNCATE (a cut marker) and
    duplicate rows: the same rows as the Arrow read and as the source, before and after a
    compaction, and again after windows on top of the compacted state. Issue "Nothing lost":
    every compaction by Spark tasks failed on Spark Connect (``F.col`` asserted a SparkContext)."""
    w = LakeWriter(
        any_spark,
        local_storage,
        "srv",
        compaction=CompactionPolicy(small_state_rows=0, min_tail_rows=10**9, max_tail_age_seconds=0),
    )
    tables = {"t": (VALUES, ("id",)), "nk": (NK, ())}
    pos = {"t": 10_000, "nk": 10_000}

    def step(table: str, events: list[tuple], snapshot: bool = False) -> None:
        schema, key = tables[table]
        if snapshot:
            at = BinlogPosition("b.000001", 100)
            batch = window(events, "b.000001", 100, table=table, schema=schema, key=key)
            write(w, batch, at, snapshot=at, table=table, schema=schema, key=key)
            return
        batch = window(events, "b.000002", pos[table], table=table, schema=schema, key=key)
        write(w, batch, BinlogPosition("b.000002", pos[table]), table=table, schema=schema, key=key)
        pos[table] += 1000

    def check(table: str, expect: Counter) -> None:
        p = w.paths("db", table)
        arrow = read_current(local_storage, p)
        spark_rows = current_frame(w, p).toArrow()
        assert multiset(arrow) == expect, table
        assert multiset(spark_rows) == expect, table

    def compact(table: str, expect: Counter) -> None:
        p = w.paths("db", table)
        w.compaction = CompactionPolicy(small_state_rows=0, in_process_rows=0)
        m = compact_table(w, p, list(tables[table][1]), force=True)
        assert m.get("mode") == "spark" and m["files_removed"] > 0, m
        opts = local_storage.delta_storage_options()
        assert multiset(DeltaTable(p.state, storage_options=opts).to_pyarrow_table()) == expect, table
        assert not DeltaTable(p.tail, storage_options=opts).file_uris()

    step("t", [("r", None, (i, f"v{i}")) for i in range(1, 21)], snapshot=True)
    step("nk", [("r", None, r) for r in [(1, "x")] * 3 + [(2, "y"), (3, "z")]], snapshot=True)
    # changes, then a TRUNCATE (a cut marker): what came before it is gone, in the state and the tail
    step(
        "t",
        [
            ("u", (1, "v1"), (1, "x")),
            ("d", (2, "v2"), None),
            ("c", None, (30, "n")),
            ("t", None, None),
            ("c", None, (40, "a")),
            ("c", None, (3, "b")),
        ],
    )
    step(
        "nk",
        [
            ("d", (1, "x"), None),
            ("u", (2, "y"), (2, "yy")),
            ("t", None, None),
            ("c", None, (1, "x")),
            ("c", None, (1, "x")),
            ("c", None, (6, "q")),
        ],
    )
    step("t", [("u", (40, "a"), (40, "z")), ("c", None, (41, "n"))])
    step("nk", [("d", (1, "x"), None), ("c", None, (7, "r")), ("c", None, (7, "r"))])
    keyed = Counter({(3, "b"): 1, (40, "z"): 1, (41, "n"): 1})
    keyless = Counter({(1, "x"): 1, (6, "q"): 1, (7, "r"): 2})
    check("t", keyed)
    check("nk", keyless)
    compact("t", keyed)
    compact("nk", keyless)
    # changes on top of the compacted state: a keyless value's count adds to its compacted one
    step("t", [("d", (3, "b"), None), ("u", (41, "n"), (41, "m")), ("c", None, (50, "n"))])
    step("nk", [("c", None, (1, "x")), ("d", (6, "q"), None), ("u", (7, "r"), (7, "rr"))])
    keyed = Counter({(40, "z"): 1, (41, "m"): 1, (50, "n"): 1})
    keyless = Counter({(1, "x"): 2, (7, "r"): 1, (7, "rr"): 1})
    check("t", keyed)
    check("nk", keyless)
    compact("t", keyed)
    compact("nk", keyless)


def test_a_failed_compaction_is_logged_with_its_traceback_and_reported_with_its_pending_rows(
    spark, local_storage, caplog
):
    """A compaction that fails (here: a tail data file deleted by hand) leaves the batch
    committed, logs a WARNING with the traceback (the cause: issue "Nothing lost" saw a bare
    ``AssertionError:``), and its result, the asset's metadata, says what failed and how many
    rows wait in the tail, so a compaction that fails every time shows as a growing tail."""
    import dataclasses
    import logging
    import os

    from dagster_mysql_cdc.dagster_integration.run_report import state_tail_metadata

    w = LakeWriter(
        spark, local_storage, "srv", compaction=CompactionPolicy(small_state_rows=0, tail_fraction=0.9)
    )
    p = w.paths("db", "t")
    at = BinlogPosition("b.000001", 100)
    write(w, window([("r", None, (i, f"v{i}")) for i in range(1, 11)], "b.000001", 100), at, snapshot=at)
    events = [("u", (1, "v1"), (1, "x")), ("d", (2, "v2"), None), ("c", None, (30, "n"))]
    res = write(w, window(events, "b.000002", 10), BinlogPosition("b.000002", 10))
    os.remove(DeltaTable(p.tail).file_uris()[0])  # one of the window's tail files
    with caplog.at_level(logging.WARNING, logger="dagster_mysql_cdc.sink.lake"):
        out = w.compact_if_due(p, ("id",), force=True)
    assert out["error"].startswith("FileNotFoundError"), out
    assert out["pending"].tail_rows == 3 and out["pending"].state_rows == 10, out
    (rec,) = [r for r in caplog.records if "failed (left for the next batch)" in r.getMessage()]
    assert rec.levelno == logging.WARNING and rec.exc_info is not None
    assert "Traceback" in caplog.text and "read_files" in caplog.text
    md = state_tail_metadata(dataclasses.replace(res, extra={"compaction": out}))
    assert md["state_tail_rows"].value == 3 and "state_behind_seconds" in md
    assert md["compaction"].value["error"] == out["error"]


def test_vacuum_is_due_after_the_interval_and_deletes_only_what_the_retention_lets_go(spark, storage):
    """Bounded storage (sink/retention.py): a never-vacuumed table counts its interval from its
    creation and takes no commit for it; a due vacuum deletes the files a compaction removed
    (retention 0 h) and records itself; the next one waits for the interval again."""
    import time as _time

    from dagster_mysql_cdc.sink.retention import VACUUMED_AT, RetentionPolicy, vacuum_if_due

    w = LakeWriter(spark, storage, "srv", compaction=CompactionPolicy(small_state_rows=0, tail_fraction=0.99))
    p = w.paths("db", "t")
    at = BinlogPosition("b.000001", 100)
    write(w, window([("r", None, (i, f"v{i}")) for i in range(1, 21)], "b.000001", 100), at, snapshot=at)
    for k in range(3):
        events = [("u", (k + 1, f"v{k + 1}"), (k + 1, f"w{k}"))]
        write(w, window(events, "b.000002", 1000 * (k + 1)), BinlogPosition("b.000002", 1000 * (k + 1)))
    opts = storage.delta_storage_options()
    tail_v = DeltaTable(p.tail, storage_options=opts).version()
    policy = RetentionPolicy(retention_hours=0, interval_hours=1)
    now = _time.time()
    assert vacuum_if_due(storage, p.tail, policy, now=now) == {}  # younger than the interval
    assert DeltaTable(p.tail, storage_options=opts).version() == tail_v  # and no commit for that
    w.compaction = CompactionPolicy(small_state_rows=0, in_process_rows=10**9)
    m = compact_table(w, p, ["id"], force=True)
    assert m["files_removed"] >= 3, m
    fs = storage.pyarrow_filesystem()

    def files_on_disk(uri: str) -> int:
        from pyarrow import fs as pafs

        sel = pafs.FileSelector(storage.fs_path(uri), recursive=True)
        return sum(  # data files (a log checkpoint is Parquet too)
            1 for i in fs.get_file_info(sel) if i.path.endswith(".parquet") and "/_delta_log/" not in i.path
        )

    before = files_on_disk(p.tail)
    assert before >= 3
    done = vacuum_if_due(storage, p.tail, policy, now=now + 2 * 3600)
    assert done["files_deleted"] == before, done  # every tail file was removed by the compaction
    assert files_on_disk(p.tail) == 0
    assert (
        DeltaTable(p.tail, storage_options=opts).metadata().configuration[VACUUMED_AT] == f"{now + 7200:.0f}"
    )
    assert vacuum_if_due(storage, p.tail, policy, now=now + 2 * 3600 + 60) == {}  # recorded: not due
    expect = {i: f"v{i}" for i in range(1, 21)} | {k + 1: f"w{k}" for k in range(3)}
    assert live(read_current(storage, p)) == expect


def test_the_live_count_is_carried_by_the_tail_commits_and_never_trusted_past_a_foreign_change(
    spark, storage, monkeypatch
):
    """A window's live-row count is the last tail commit's count plus its ``c - d``
    (:mod:`dagster_mysql_cdc.sink.live_rows`): no read of the state, through compactions; counted
    exactly again after what the ops do not say (snapshot reads, a cut) or a commit it does not
    know (a DELETE on the tail)."""
    from dagster_mysql_cdc.sink import row_counts as read_mod
    from dagster_mysql_cdc.sink.live_rows import LIVE_ROWS

    w = LakeWriter(spark, storage, "srv", compaction=CompactionPolicy(small_state_rows=0, tail_fraction=0.5))
    p = w.paths("db", "t")
    opts = storage.delta_storage_options()
    at = BinlogPosition("b.000001", 100)
    write(w, window([("r", None, (i, f"v{i}")) for i in range(1, 101)], "b.000001", 100), at, snapshot=at)
    # the first snapshot made the (empty) tail, recording its 100 live rows against the state
    first = DeltaTable(p.tail, storage_options=opts)
    assert first.get_add_actions(flatten=True).num_rows == 0
    assert json.loads(first.metadata().configuration[KEY_PROPERTY]) == ["id"]
    assert recorded_live_rows(first, DeltaTable(p.state, storage_options=opts)) == 100
    expect = {i: f"v{i}" for i in range(1, 101)}
    exact_counts = []
    real = read_mod.live_count

    def counting(*a, **k):
        exact_counts.append(1)
        return real(*a, **k)

    monkeypatch.setattr(read_mod, "live_count", counting)
    pos = 10_000

    def step(events, file="b.000002"):
        nonlocal pos
        res = write(w, window(events, file, pos), BinlogPosition(file, pos))
        pos += 1000
        return res

    for k in range(6):
        res = step(
            [
                ("u", (k + 1, f"v{k + 1}"), (k + 1, f"w{k}")),
                ("d", (50 + k, None), None),
                ("c", None, (200 + k, "n")),
                ("c", None, (300 + k, "n")),
            ]
        )
        expect[k + 1] = f"w{k}"
        expect.pop(50 + k)
        expect[200 + k] = expect[300 + k] = "n"
        assert res.extra["live_rows"] == len(expect) == len(live(read_current(storage, p)))
        if k == 2:  # a compaction moves the tail into the state: the count holds
            assert compact_table(w, p, ["id"], force=True)["files_removed"] > 0
    # the snapshot's recorded count seeded the first window: no exact count
    assert len(exact_counts) == 0
    assert LIVE_ROWS in DeltaTable(p.tail, storage_options=opts).history(1)[0]
    # snapshot reads: the ops do not say whether the keys were live -> counted exactly
    res = step([("r", None, (1, "x")), ("r", None, (77, "x"))])
    expect[1] = "x"
    expect[77] = "x"
    assert res.extra["live_rows"] == len(expect)
    assert LIVE_ROWS not in DeltaTable(p.tail, storage_options=opts).history(1)[0]
    n = len(exact_counts)
    res = step([("d", (2, None), None)])  # re-seeded by one exact count, recorded again
    expect.pop(2)
    assert res.extra["live_rows"] == len(expect) and len(exact_counts) == n + 1
    assert LIVE_ROWS in DeltaTable(p.tail, storage_options=opts).history(1)[0]
    # a commit this library does not know (rows deleted from the tail by hand): never trusted
    DeltaTable(p.tail, storage_options=opts).delete("id = 205")
    res = step([("c", None, (900, "n"))])
    expect.pop(205)
    expect[900] = "n"
    assert live(read_current(storage, p)) == expect
    assert res.extra["live_rows"] == len(expect) and len(exact_counts) == n + 2


def test_a_windows_keys_are_read_from_its_own_tail_files_until_a_compaction_folds_them(spark, storage):
    """``read_window_rows``: the current rows of the keys a window changed, from that window's
    tail files alone, equal the full current read's; after a compaction it answers ``None`` (the
    caller reads the current state)."""
    from dagster_mysql_cdc.sink.read import read_window_rows

    w = LakeWriter(spark, storage, "srv", compaction=CompactionPolicy(small_state_rows=0, tail_fraction=0.5))
    p = w.paths("db", "t")
    at = BinlogPosition("b.000001", 100)
    write(w, window([("r", None, (i, f"v{i}")) for i in range(1, 51)], "b.000001", 100), at, snapshot=at)
    write(
        w,
        window([("u", (1, "v1"), (1, "old")), ("d", (2, "v2"), None)], "b.000002", 10),
        BinlogPosition("b.000002", 10),
    )
    events = [
        ("u", (1, "old"), (1, "new")),
        ("d", (3, "v3"), None),
        ("c", None, (99, "n")),
        ("u", (4, "v4"), (4, "x")),
        ("d", (4, "x"), None),
    ]
    res = write(w, window(events, "b.000002", 1000), BinlogPosition("b.000002", 1000))
    files = res.extra["tail_files"]
    keys = [(1,), (3,), (99,), (4,)]
    got = read_window_rows(storage, p, files, columns=["id", "v"], keys=(["id"], keys))
    assert got is not None
    full = read_current(storage, p, live=True, columns=["id", "v"], keys=(["id"], keys))
    as_dict = lambda t: dict(zip(t.column("id").to_pylist(), t.column("v").to_pylist()))  # noqa: E731
    assert as_dict(got) == as_dict(full) == {1: "new", 99: "n"}
    compact_table(w, p, ["id"], force=True)
    assert read_window_rows(storage, p, files, columns=["id", "v"], keys=(["id"], keys)) is None


def test_a_vacuum_keeps_the_delta_log_as_long_as_the_files_and_batch_identities_survive(spark, storage):
    """The log retention follows the file retention (sink/retention.py): after a vacuum with
    retention 0 the log holds only the newest checkpoint and the commits after it (a log kept for
    Delta's 30 days grows by every window), the current state is unchanged, and a batch committed
    before the cleanup is still recognised when retried (its identity is in the checkpoint)."""
    from dagster_mysql_cdc.sink.retention import LOG_RETENTION, RetentionPolicy, vacuum_if_due

    w = LakeWriter(spark, storage, "srv", compaction=CompactionPolicy(small_state_rows=0, tail_fraction=0.99))
    p = w.paths("db", "t")
    opts = storage.delta_storage_options()
    at = BinlogPosition("b.000001", 100)
    write(w, window([("r", None, (i, f"v{i}")) for i in range(1, 21)], "b.000001", 100), at, snapshot=at)
    expect = {i: f"v{i}" for i in range(1, 21)}
    first = None
    for k in range(24):  # past two checkpoints of the tail (delta.checkpointInterval = 10)
        pos = BinlogPosition("b.000002", 1000 * (k + 1))
        batch = window([("c", None, (100 + k, "n"))], "b.000002", pos.pos)
        write(w, batch, pos)
        first = first or (batch, pos)
        expect[100 + k] = "n"

    assert len(delta_log_versions(storage, p.tail)[0]) >= 24
    assert CHECKPOINTS.drain(60)  # the windows' checkpoints, written beside them (sink/checkpoints.py)
    done = vacuum_if_due(storage, p.tail, RetentionPolicy(retention_hours=0, interval_hours=1e-9))
    assert "error" not in done, done
    dt = DeltaTable(p.tail, storage_options=opts)
    assert dt.metadata().configuration[LOG_RETENTION] == "interval 0 hours"
    jsons, checkpoints = delta_log_versions(storage, p.tail)
    assert checkpoints and min(jsons) >= max(checkpoints) - 1, (jsons, checkpoints)  # older entries gone
    assert len(jsons) <= 12
    assert live(read_current(storage, p)) == expect
    # a retry of a batch from before the cleanup is skipped (nothing written twice)
    batch, pos = first
    res = write(w, batch, pos)
    assert not res.state.committed
    assert live(read_current(storage, p)) == expect


def test_window_commits_leave_the_expired_log_entries_to_the_vacuum(spark, storage):
    """A window's commits do not run delta-rs's expired-log cleanup (sink/delta.py COMMIT_HOOKS):
    that cleanup lists the whole ``_delta_log`` after every commit, so a commit's cost grew with
    the table's history. With a log retention of 0 hours, entries behind a checkpoint are expired
    at once: 24 windows later every entry is still there (delta-rs's default hooks would have
    deleted them on the way), and the next due vacuum removes them, the state unchanged."""
    from dagster_mysql_cdc.sink.retention import RetentionPolicy, vacuum_if_due

    w = LakeWriter(spark, storage, "srv", compaction=CompactionPolicy(small_state_rows=0, tail_fraction=0.99))
    p = w.paths("db", "t")
    at = BinlogPosition("b.000001", 100)
    write(w, window([("r", None, (i, f"v{i}")) for i in range(1, 21)], "b.000001", 100), at, snapshot=at)
    policy = RetentionPolicy(retention_hours=0, interval_hours=1e-9)
    assert "error" not in vacuum_if_due(storage, p.tail, policy)  # sets the log retention to 0 hours
    expect = {i: f"v{i}" for i in range(1, 21)}

    first = delta_log_versions(storage, p.tail)[0][0]
    for k in range(24):  # past two checkpoints of the tail (delta.checkpointInterval = 10)
        pos = BinlogPosition("b.000002", 1000 * (k + 1))
        write(w, window([("c", None, (100 + k, "n"))], "b.000002", pos.pos), pos)
        expect[100 + k] = "n"
    assert CHECKPOINTS.drain(60)  # the windows' checkpoints, written beside them (sink/checkpoints.py)
    jsons, checkpoints = delta_log_versions(storage, p.tail)
    assert len(checkpoints) >= 2 and jsons[0] == first, (jsons, checkpoints)  # nothing cleaned up
    assert jsons[-1] - jsons[0] + 1 == len(jsons) >= 24
    done = vacuum_if_due(storage, p.tail, policy)
    assert "error" not in done, done
    jsons, checkpoints = delta_log_versions(storage, p.tail)
    assert min(jsons) >= max(checkpoints) - 1 and len(jsons) <= 12, (jsons, checkpoints)
    assert live(read_current(storage, p)) == expect


def test_keyless_counts_never_go_below_zero_on_every_path(spark, storage):
    """A keyless table captured without its rows (``snapshot_mode=no_data``): a change of a copy
    the lake never had removes nothing, and a copy inserted afterwards is never lost. The current
    read (Arrow and Spark SQL), both compactions and the live-row count carried by the tail
    commits apply the changes in order, never below zero."""
    from collections import Counter

    w = LakeWriter(
        spark, storage, "srv", compaction=CompactionPolicy(small_state_rows=0, max_tail_age_seconds=0)
    )
    p = w.paths("db", "t")
    pos = 10_000

    def step(events):
        nonlocal pos
        b = ChangeEventBuilder(VALUES, (), server_name="srv", database="db", table="t")
        for i, (op, before, after) in enumerate(events):
            b.add(
                op,
                before,
                after,
                file="b.000002",
                pos=pos + 10 * i,
                row=0,
                ts_ms=1,
                source_ts_ms=1,
                server_id=1,
            )
        res = w.write_table_batch(
            "db", "t", [b.to_record_batch()], value_schema=VALUES, primary_key=(), app_id="app", version=pos
        )
        pos += 1000
        return res

    def multiset(t) -> Counter:
        return Counter((r["id"], r["v"]) for r in live_multiset(t).to_pylist())

    def spark_multiset() -> Counter:
        rows = current_frame(w, p).filter("NOT __deleted").select("id", "v", "__count").collect()
        assert all(r["__count"] > 0 for r in rows)
        return Counter({(r["id"], r["v"]): r["__count"] for r in rows})

    # (1, 'a') and two copies of (2, 'p') were in the source before the capture
    res = step(
        [("u", (1, "a"), (1, "b")), ("d", (1, "b"), None), ("c", None, (1, "a")), ("d", (2, "p"), None)]
    )
    expect = Counter({(1, "a"): 1})
    assert multiset(read_current(storage, p)) == expect == spark_multiset()
    assert res.extra["live_rows"] == 1
    assert min(r["__count"] for r in read_current(storage, p).to_pylist()) == 0
    res = step([("c", None, (2, "p")), ("d", (3, "z"), None)])  # inserted after the capture: kept
    expect[(2, "p")] = 1
    assert multiset(read_current(storage, p)) == expect == spark_multiset()
    assert res.extra["live_rows"] == 2
    # a compaction by Spark tasks: the state table holds the counts, none below zero
    w.compaction = CompactionPolicy(small_state_rows=0, in_process_rows=0, max_tail_age_seconds=0)
    assert compact_table(w, p, [], force=True)["mode"] == "spark"
    compacted = DeltaTable(p.state, storage_options=storage.delta_storage_options()).to_pyarrow_table()
    assert multiset(compacted) == expect and min(compacted.column("__count").to_pylist()) == 0
    # later windows over the compacted state: the unknown copy of (3, 'z') is updated away twice,
    # (2, 'p') loses its known copy and then an unknown one
    res = step(
        [("u", (3, "z"), (3, "y")), ("d", (2, "p"), None), ("d", (2, "p"), None), ("c", None, (3, "z"))]
    )
    expect = Counter({(1, "a"): 1, (3, "y"): 1, (3, "z"): 1})
    assert multiset(read_current(storage, p)) == expect == spark_multiset()
    assert res.extra["live_rows"] == 3
    # the in-process compaction gives the same
    w.compaction = CompactionPolicy(small_state_rows=0, max_tail_age_seconds=0)
    assert compact_table(w, p, [], force=True)["mode"] == "in_process"
    compacted = DeltaTable(p.state, storage_options=storage.delta_storage_options()).to_pyarrow_table()
    assert multiset(compacted) == expect and min(compacted.column("__count").to_pylist()) == 0
    res = step([("d", (1, "a"), None), ("d", (1, "a"), None), ("c", None, (1, "a"))])
    expect[(1, "a")] = 1
    assert multiset(read_current(storage, p)) == expect == spark_multiset()
    assert res.extra["live_rows"] == 3


def test_a_current_read_that_a_compaction_interleaves_loses_no_change(spark, local_storage, monkeypatch):
    """A current read opens the tail, then the state: a compaction that commits between the two
    opens leaves its rows in both (applied again harmlessly). Opened the other way round, the
    read got the state before the compaction and the tail after it, without the tail's changes."""
    import dagster_mysql_cdc.sink.read as read_mod

    w = LakeWriter(spark, local_storage, "srv", compaction=CompactionPolicy(max_tail_age_seconds=0))
    p = w.paths("db", "t")
    at = BinlogPosition("b.000001", 100)
    write(w, window([("r", None, (i, f"v{i}")) for i in range(1, 4)], "b.000001", 100), at, snapshot=at)
    compact_table(w, p, ["id"], force=True)
    write(w, window([("u", (1, "v1"), (1, "new"))], "b.000002", 4), BinlogPosition("b.000002", 4))
    expect = {1: "new", 2: "v2", 3: "v3"}
    opened = []
    real_open = read_mod.open_table

    def open_then_compact(storage, uri):
        if len(opened) == 1:  # between the read's two opens
            assert compact_table(w, p, ["id"], force=True)["mode"] == "in_process"
        opened.append(uri)
        return real_open(storage, uri)

    monkeypatch.setattr(read_mod, "open_table", open_then_compact)
    assert live(read_current(local_storage, p)) == expect
    assert len(opened) == 2
