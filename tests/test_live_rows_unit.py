"""The live-row count's pure rules (sink/live_rows.py): what a batch's ops say about the count,
and which Delta commits keep the current state's rows."""

import pytest

from dagster_mysql_cdc.sink.live_rows import COMPACTED, EVOLVED, keeps_rows, window_delta


def test_a_batch_changes_the_count_by_its_inserts_minus_its_deletes():
    assert window_delta({"c": 5, "u": 7, "d": 2}) == 3
    assert window_delta({"u": 4}) == 0
    assert window_delta({"d": 3}) == -3
    assert window_delta({}) == 0


def test_snapshot_reads_and_cuts_do_not_say_the_change():
    assert window_delta({"c": 1, "r": 2}) is None  # a read key may or may not be live already
    assert window_delta({"t": 1}) is None  # a cut drops every older row
    assert window_delta({"c": 1, "r": 0}) == 1  # an op with no rows says nothing


def test_only_commits_that_keep_the_rows_are_passed_over():
    for op in (
        "OPTIMIZE",
        "VACUUM START",
        "VACUUM END",
        "SET TBLPROPERTIES",
        "ADD COLUMN",
        "UPDATE FIELD METADATA",
    ):
        assert keeps_rows({"operation": op})
    assert keeps_rows({"operation": "WRITE", COMPACTED: "true"})
    assert keeps_rows({"operation": "WRITE", EVOLVED: "add columns"})
    assert keeps_rows({"operation": "WRITE", "dagster_mysql_cdc.compaction": "tail of ..."})
    assert keeps_rows({"operation": "WRITE", "dagster_mysql_cdc.rewrite": "int -> bigint"})
    for op in ("WRITE", "DELETE", "MERGE", "UPDATE", "RESTORE", "CREATE TABLE"):
        assert not keeps_rows({"operation": op})


def test_a_count_read_before_another_writers_commit_is_not_trusted(tmp_path):
    """A recorded count holds only when the commit recording it follows the tail version the
    writer read it at: a commit by another writer in between (a snapshot run beside the stream)
    is missing from it. Real Delta tables (delta-rs, local filesystem)."""
    import pyarrow as pa
    from deltalake import CommitProperties, DeltaTable, write_deltalake

    from dagster_mysql_cdc.sink.live_rows import LIVE_ROWS, LIVE_STATE_VERSION, LIVE_TAIL_VERSION, recorded

    tail = str(tmp_path / "tail")
    rows = pa.table({"id": pa.array([1], pa.int64())})

    def commit(meta: dict[str, str] | None = None) -> None:
        write_deltalake(tail, rows, mode="append", commit_properties=CommitProperties(custom_metadata=meta))

    def count(n: int, read_at: int | None) -> dict[str, str]:
        meta = {LIVE_ROWS: str(n), LIVE_STATE_VERSION: "-1"}
        return meta if read_at is None else {**meta, LIVE_TAIL_VERSION: str(read_at)}

    commit(count(5, -1))  # version 0, read before the tail existed
    assert recorded(DeltaTable(tail), None) == 5
    commit(count(6, 0))  # version 1, read at 0: adjacent
    assert recorded(DeltaTable(tail), None) == 6
    commit()  # version 2: another writer's rows
    commit(count(7, 1))  # version 3, read at 1: version 2 is missing from it
    assert recorded(DeltaTable(tail), None) is None
    commit(count(9, 3))  # counted exactly again, at 3
    assert recorded(DeltaTable(tail), None) == 9
    commit(count(10, None))  # recorded by an older library version: trusted as before
    assert recorded(DeltaTable(tail), None) == 10


def test_a_recorded_count_is_read_once_per_pair_of_versions(tmp_path, monkeypatch):
    """recorded() is a function of the tail's and the state's versions: kept on the tail's handle
    for them (remember(): a writer's own commit seeds it), read again once either moves."""
    import pyarrow as pa
    from deltalake import CommitProperties, DeltaTable, write_deltalake

    from dagster_mysql_cdc.sink.live_rows import (
        LIVE_ROWS,
        LIVE_STATE_VERSION,
        LIVE_TAIL_VERSION,
        recorded,
        remember,
    )

    tail = str(tmp_path / "tail")
    rows = pa.table({"id": pa.array([1], pa.int64())})

    def commit(n: int, read_at: int) -> None:
        meta = {LIVE_ROWS: str(n), LIVE_STATE_VERSION: "-1", LIVE_TAIL_VERSION: str(read_at)}
        write_deltalake(tail, rows, mode="append", commit_properties=CommitProperties(custom_metadata=meta))

    commit(5, -1)
    dt = DeltaTable(tail)
    assert recorded(dt, None) == 5
    history = []
    real = DeltaTable.history
    monkeypatch.setattr(DeltaTable, "history", lambda self, *a: history.append(a) or real(self, *a))
    assert recorded(dt, None) == 5 and history == []  # kept for (0, -1)
    commit(7, 0)
    dt.update_incremental()
    assert recorded(dt, None) == 7 and history  # the tail moved: read again
    history.clear()
    commit(9, 1)
    dt.update_incremental()
    remember(dt, -1, 9)  # the writer's own commit: nothing to read
    assert recorded(dt, None) == 9 and history == []
    assert recorded(DeltaTable(tail), None) == 9  # what a fresh handle reads agrees


def test_a_standby_run_reads_its_tables_commit_facts_ahead(tmp_path, monkeypatch):
    """LakeWriter.warm_table_facts (a standby run, after preloading its handles): each table's
    recorded live-row count and its state's and tail's sizes are read on the cached handles, so
    what a window's commit asks of them first reads no log, and answers what a fresh handle
    reads. Tables the cache does not hold are skipped. Real Delta tables (delta-rs, local)."""
    import pyarrow as pa
    from deltalake import CommitProperties, DeltaTable, write_deltalake

    from dagster_mysql_cdc.sink.compaction import table_sizes
    from dagster_mysql_cdc.sink.delta import handle_cache, open_table, preload
    from dagster_mysql_cdc.sink.lake import LakeWriter
    from dagster_mysql_cdc.sink.live_rows import LIVE_ROWS, LIVE_STATE_VERSION, LIVE_TAIL_VERSION, recorded
    from dagster_mysql_cdc.sink.storage import StorageSettings

    storage = StorageSettings(base_uri=str(tmp_path))
    writer = LakeWriter(lambda: pytest.fail("no Spark is needed"), storage, "srv")
    rows = pa.table({"id": pa.array([1, 2, 3], pa.int64())})
    for t in ("a", "b"):
        p = writer.paths("d", t)
        write_deltalake(p.state, rows)
        meta = {LIVE_ROWS: "3", LIVE_STATE_VERSION: "0", LIVE_TAIL_VERSION: "-1"}
        write_deltalake(p.tail, rows.slice(0, 1), commit_properties=CommitProperties(custom_metadata=meta))
    uris = [u for t in ("a", "b") for u in writer.paths("d", t).delta_tables()]
    with handle_cache():
        preload(storage, uris)
        assert writer.warm_table_facts([("d", "a"), ("d", "b"), ("d", "absent")]) == 2
        log_reads: list[str] = []
        real_history, real_actions = DeltaTable.history, DeltaTable.get_add_actions
        monkeypatch.setattr(
            DeltaTable, "history", lambda s, *a: log_reads.append("history") or real_history(s, *a)
        )
        monkeypatch.setattr(
            DeltaTable,
            "get_add_actions",
            lambda s, *a, **k: log_reads.append("files") or real_actions(s, *a, **k),
        )
        sizes = {}
        for t in ("a", "b"):
            p = writer.paths("d", t)
            tail, state = open_table(storage, p.tail), open_table(storage, p.state)
            assert recorded(tail, state) == 3
            sizes[t] = table_sizes(state, tail)
            assert (sizes[t].state_rows, sizes[t].tail_rows, sizes[t].tail_files) == (3, 1, 1)
        assert log_reads == []
    monkeypatch.undo()
    for t in ("a", "b"):
        fresh = writer.paths("d", t)
        assert recorded(DeltaTable(fresh.tail), DeltaTable(fresh.state)) == 3
        assert table_sizes(DeltaTable(fresh.state), DeltaTable(fresh.tail)) == sizes[t]
