"""Merge-on-read against real services (local Spark, local and S3 lakes): a window appends to the
state's tail and leaves the compacted state alone while the tail is small; the current read
(Arrow and Spark) applies the tail exactly; a compaction (in the run process, and by Spark tasks)
gives the same state; nothing is rewritten by a window but what it changed."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from deltalake import DeltaTable

from dagster_mysql_cdc.events import BinlogPosition, ChangeEventBuilder
from dagster_mysql_cdc.sink.compaction import CompactionPolicy, compact_table
from dagster_mysql_cdc.sink.lake import LakeWriter
from dagster_mysql_cdc.sink.read import current_frame, read_current
from dagster_mysql_cdc.sink.state_rows import live_multiset

pytestmark = [pytest.mark.integration, pytest.mark.spark]

VALUES = pa.schema([pa.field("id", pa.int32()), pa.field("v", pa.string())])


def window(builder_rows: list[tuple], file: str, pos0: int) -> pa.RecordBatch:
    """Change-log rows of ``(op, before, after)`` events at increasing positions."""
    b = ChangeEventBuilder(VALUES, ("id",), server_name="srv", database="db", table="t")
    for i, (op, before, after) in enumerate(builder_rows):
        b.add(op, before, after, file=file, pos=pos0 + 10 * i, row=0, ts_ms=1, source_ts_ms=1, server_id=1)
    return b.to_record_batch()


def write(
    w: LakeWriter, batch: pa.RecordBatch, start: BinlogPosition, snapshot: BinlogPosition | None = None
):
    return w.write_table_batch(
        "db",
        "t",
        [batch],
        value_schema=VALUES,
        primary_key=("id",),
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


def test_windows_append_to_the_tail_and_compactions_keep_the_current_state(spark, storage):
    # a big "small table" threshold off: compaction only when asked or by the tail fraction
    w = LakeWriter(spark, storage, "srv", compaction=CompactionPolicy(small_state_rows=0, tail_fraction=0.5))
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
        return sum(1 for i in fs.get_file_info(sel) if i.path.endswith(".parquet"))

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
