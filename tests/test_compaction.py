"""Many small batches do not leave many small files: the writer compacts the change log and the
state's tail (Delta OPTIMIZE) while the state waits for a compaction of its own."""

from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable

from dagster_mysql_cdc.events import BinlogPosition, ChangeEventBuilder
from dagster_mysql_cdc.sink.lake import LakeWriter
from dagster_mysql_cdc.sink.read import read_current

pytestmark = [pytest.mark.spark]


def test_small_batches_are_compacted_and_state_is_exact(spark, local_storage):
    value_schema = pa.schema([("id", pa.int32()), ("v", pa.string())])
    writer = LakeWriter(spark, local_storage, "s", compact_min_files=6)
    expected: dict[int, str] = {}
    for i in range(14):
        b = ChangeEventBuilder(value_schema, ("id",), server_name="s", database="d", table="t")
        pos = BinlogPosition("mysql-bin.000001", 1000 + i * 100)
        for k in range(i, i + 5):  # overlapping keys: later batches update earlier rows
            before = (k, expected[k]) if k in expected else None
            b.add(
                "u" if before else "c",
                before,
                (k, f"b{i}"),
                file=pos.file,
                pos=pos.pos,
                row=k - i,
                ts_ms=0,
                source_ts_ms=0,
                server_id=1,
            )
            expected[k] = f"b{i}"
        writer.write_table_batch(
            "d",
            "t",
            [b.to_record_batch()],
            value_schema=value_schema,
            primary_key=("id",),
            app_id="test/stream",
            version=pos.as_version(),
            position=pos,
        )
    paths = writer.paths("d", "t")
    tail = DeltaTable(paths.tail)
    log = DeltaTable(paths.changelog)
    assert len(tail.file_uris()) < 8 and len(log.file_uris()) < 8, "files stay bounded by compaction"
    assert not DeltaTable.is_deltatable(paths.state)  # no compaction was due: 70 changes < min_tail_rows
    # a reader replays at most 9 JSON commits after a checkpoint (2-3 commits per small batch)
    for dt in (tail, log):
        assert dt.metadata().configuration.get("delta.checkpointInterval") == "10"
    from dagster_mysql_cdc.sink.checkpoints import CHECKPOINTS

    assert CHECKPOINTS.drain(60)  # written beside the windows (sink/checkpoints.py)
    cps = sorted(
        int(p.name.split(".")[0]) for p in (Path(paths.tail) / "_delta_log").glob("*.checkpoint.parquet")
    )
    assert cps and tail.version() - cps[-1] <= 10, (tail.version(), cps)
    rows = {r["id"]: r["v"] for r in read_current(local_storage, paths).to_pylist() if not r["__deleted"]}
    assert rows == expected
    assert log.to_pyarrow_table().num_rows == 14 * 5


def test_a_tails_sizes_are_carried_over_an_append_through_its_handle(tmp_path, monkeypatch):
    """compaction.appended: the sizes a window's compaction check reads of a tail (rows, files,
    oldest change) follow an append made through the same handle without listing the tail again,
    and equal what a fresh handle lists. Real Delta tables (delta-rs, local filesystem)."""
    import os
    import time

    import pyarrow as pa
    import pyarrow.parquet as pq
    from deltalake import DeltaTable, write_deltalake

    from dagster_mysql_cdc.sink.compaction import appended, table_sizes
    from dagster_mysql_cdc.sink.delta import TABLE_PROPERTIES, commit_files
    from dagster_mysql_cdc.sink.storage import StorageSettings

    uri = str(tmp_path / "tail")
    rows = pa.table({"id": pa.array([1, 2, 3], pa.int64())})
    write_deltalake(uri, rows, configuration=TABLE_PROPERTIES)
    dt = DeltaTable(uri)
    first = table_sizes(None, dt)
    assert (first.tail_rows, first.tail_files) == (3, 1)
    pq.write_table(rows.slice(0, 2), os.path.join(uri, "part-x.parquet"))
    files = [
        {
            "path": "part-x.parquet",
            "size": os.path.getsize(os.path.join(uri, "part-x.parquet")),
            "num_records": 2,
            "modification_time": int(time.time() * 1000) - 60_000,  # older than the first file
        }
    ]
    before = dt.version()
    commit_files(
        StorageSettings(base_uri=str(tmp_path)), uri, rows.schema, files, mode="append", app_id="a", version=1
    )
    dt.update_incremental()
    assert dt.version() == before + 1
    appended(dt, before, files)
    real = DeltaTable.get_add_actions
    monkeypatch.setattr(DeltaTable, "get_add_actions", lambda *a, **k: pytest.fail("listed the tail again"))
    carried = table_sizes(None, dt)
    monkeypatch.setattr(DeltaTable, "get_add_actions", real)
    assert carried == table_sizes(None, DeltaTable(uri))
    assert (carried.tail_rows, carried.tail_files) == (5, 2)
    assert carried.tail_oldest_ms == files[0]["modification_time"]
