"""Delta checkpoints written beside the windows (sink/checkpoints.py), on real Delta tables
(delta-rs) on the local filesystem and on SeaweedFS S3."""

from __future__ import annotations

import io
import time
import uuid
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable
from lake_utils import delta_log_versions

from dagster_mysql_cdc.sink import delta
from dagster_mysql_cdc.sink.checkpoints import CHECKPOINTS, Checkpointer, crossed

SCHEMA = pa.schema([("a", pa.int64())])
ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize(
    ("before", "after", "interval", "due"),
    [
        (9, 10, 10, True),  # one commit onto a checkpoint version, as delta-rs decides
        (10, 11, 10, False),
        (8, 12, 10, True),  # another writer's commits in between: the multiple was passed
        (11, 19, 10, False),
        (None, 20, 10, True),  # first commit this process sees: only the version itself counts
        (None, 21, 10, False),
        (None, 0, 10, False),  # a table's creation
        (12, 5, 10, False),  # an older handle reporting late
        (99, 100, 100, True),  # Delta's default interval
    ],
)
def test_a_checkpoint_is_due_when_a_commit_reaches_a_multiple_of_the_interval(before, after, interval, due):
    assert crossed(before, after, interval) is due


def _file(storage, uri: str, value: int) -> dict:
    buf = io.BytesIO()
    pq.write_table(pa.table({"a": [value]}, schema=SCHEMA), buf)
    name = f"part-{uuid.uuid4().hex}.parquet"
    storage.pyarrow_filesystem().create_dir(storage.fs_path(uri), recursive=True)
    with storage.pyarrow_filesystem().open_output_stream(f"{storage.fs_path(uri)}/{name}") as fh:
        fh.write(buf.getvalue())
    return {
        "path": name,
        "size": len(buf.getvalue()),
        "num_records": 1,
        "modification_time": int(time.time() * 1000),
    }


def _checkpoints(storage, uri: str) -> list[int]:
    return delta_log_versions(storage, uri)[1]


def test_window_commits_leave_their_checkpoints_to_the_background(storage):
    """A commit through a handle that reaches a checkpoint version (delta.checkpointInterval = 10)
    returns before the checkpoint is written (delta-rs would write it inside the commit: with a
    week of removed files that is seconds, bench/log_growth.py --tombstones); the checkpoint
    follows on the background thread, and a fresh reader reads the table through it."""
    uri = storage.uri("srv", "db", "t", "changelog")
    CHECKPOINTS.pause(True)
    try:
        for v in range(1, 13):  # versions 0..11: one checkpoint version (10) passed
            out = delta.commit_files(
                storage, uri, SCHEMA, [_file(storage, uri, v)], mode="append", app_id="w", version=v
            )
            assert out.committed
        assert out.table_version == 11
        assert _checkpoints(storage, uri) == []  # nothing written inside the commits
        assert CHECKPOINTS.pending() == 1  # queued once, not once per window
    finally:
        CHECKPOINTS.pause(False)
    assert CHECKPOINTS.drain(60)
    cps = _checkpoints(storage, uri)
    assert cps and 10 <= cps[-1] <= 11, cps
    dt = DeltaTable(uri, storage_options=storage.delta_storage_options())
    assert sorted(dt.to_pyarrow_table().column("a").to_pylist()) == list(range(1, 13))
    # the batch identities survive in the checkpoint: a retried window is still skipped
    again = delta.commit_files(
        storage, uri, SCHEMA, [_file(storage, uri, 5)], mode="append", app_id="w", version=5
    )
    assert not again.committed


def test_a_write_by_path_still_checkpoints_inside_its_commit(storage):
    """``append_rows`` writes by path (no handle reaches sink/checkpoints.py), so delta-rs writes
    its checkpoint inside the commit, as before (delta.PATH_COMMIT_HOOKS), even with the
    background queue held."""
    uri = storage.uri("srv", "_transactions")
    CHECKPOINTS.pause(True)
    try:
        for v in range(1, 12):
            assert delta.append_rows(
                storage, uri, pa.table({"a": [v]}, schema=SCHEMA), app_id="tx", version=v
            )
            if v == 1:
                delta.ensure_table_properties(
                    delta.open_table(storage, uri)
                )  # interval 10, as the library's tables
        assert _checkpoints(storage, uri)  # written inline, the queue held
    finally:
        CHECKPOINTS.pause(False)


def test_a_failed_checkpoint_is_logged_and_left_for_the_next_one(tmp_path, caplog):
    """A checkpoint is an optimisation: one that cannot be written (here the table is gone) is
    logged, counted, and nothing is raised to the window that queued it."""
    from dagster_mysql_cdc.sink.storage import StorageSettings

    queue = Checkpointer(workers=1)
    queue.queue(StorageSettings(base_uri=str(tmp_path)), str(tmp_path / "missing"))
    assert queue.drain(30)
    assert queue.failed == 1 and queue.written == 0
    assert "checkpoint of" in caplog.text and "skipped" in caplog.text


def test_a_forked_child_starts_with_an_empty_queue(tmp_path):
    """A forked child has none of its parent's threads: its queue starts empty (a table queued in
    the parent is not waited for at the child's exit), and what it queues it writes itself."""
    import os

    from dagster_mysql_cdc.sink.storage import StorageSettings

    CHECKPOINTS.pause(True)
    try:
        CHECKPOINTS.queue(StorageSettings(base_uri=str(tmp_path)), str(tmp_path / "parent"))
        pid = os.fork()
        if pid == 0:  # the child: report through the exit status
            ok = CHECKPOINTS.pending() == 0 and not CHECKPOINTS._paused
            CHECKPOINTS.queue(StorageSettings(base_uri=str(tmp_path)), str(tmp_path / "child"))
            ok = ok and CHECKPOINTS.drain(30) and CHECKPOINTS.failed == 1
            os._exit(0 if ok else 1)
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0
        assert CHECKPOINTS.pending() == 1  # the parent's is still queued
    finally:
        CHECKPOINTS.pause(False)
    CHECKPOINTS.drain(30)


def test_a_process_that_exits_after_its_commits_writes_their_checkpoint_first(tmp_path):
    """A run process that ends right after a window's commits (no drain of its own) still leaves
    the checkpoint its commits queued: the queue is drained at exit (sink/checkpoints.py), so a
    table committed once per run still gets a checkpoint every tenth version."""
    import subprocess
    import sys

    script = f"""
import sys
sys.path.insert(0, {str(ROOT / "tests")!r})
from test_checkpoints import SCHEMA, _file
from dagster_mysql_cdc.sink import delta
from dagster_mysql_cdc.sink.storage import StorageSettings
st = StorageSettings(base_uri={str(tmp_path / "lake")!r})
uri = st.uri("srv", "db", "t", "changelog")
for v in range(1, 12):
    delta.commit_files(st, uri, SCHEMA, [_file(st, uri, v)], mode="append", app_id="w", version=v)
"""
    subprocess.run([sys.executable, "-c", script], check=True, cwd=ROOT, timeout=120)
    from dagster_mysql_cdc.sink.storage import StorageSettings

    st = StorageSettings(base_uri=str(tmp_path / "lake"))
    assert _checkpoints(st, st.uri("srv", "db", "t", "changelog")) in ([10], [11])
