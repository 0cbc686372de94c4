"""bench/lake_watch.py: a table is read only after its Delta log moved, at the versions a poll
saw, and a change counts as visible from the first poll whose versions show it (real local Delta
tables written with deltalake; the "visible" read is a Delta time-travel read)."""

from __future__ import annotations

import threading
import time

import pyarrow as pa
from deltalake import DeltaTable, write_deltalake

from bench.lake_watch import LakeWatch, newest_version


def _write(path: str, v: str) -> None:
    write_deltalake(path, pa.table({"id": [1], "v": [v]}), mode="overwrite")


def _shows(path: str, version: int | None, v: str) -> bool:
    if version is None:
        return False
    return DeltaTable(path, version=version).to_pyarrow_table().column("v").to_pylist() == [v]


def test_newest_version_reads_the_log_names(tmp_path):
    path = str(tmp_path / "t")
    assert newest_version(path) is None
    _write(path, "a")
    _write(path, "b")
    assert newest_version(path) == 1 == DeltaTable(path).version()


def test_each_table_is_read_once_per_commit_and_timed_at_its_poll(tmp_path):
    paths = {k: str(tmp_path / k) for k in ("x", "y")}
    for p in paths.values():
        _write(p, "old")
    watch = LakeWatch(
        {k: (p,) for k, p in paths.items()}, lambda k, vs: _shows(paths[k], vs[0], "new"), poll=0.02
    )
    writes: dict[str, float] = {}

    def writer() -> None:
        time.sleep(0.2)
        _write(paths["x"], "new")
        writes["x"] = time.monotonic()
        time.sleep(0.3)
        _write(paths["y"], "new")
        writes["y"] = time.monotonic()

    th = threading.Thread(target=writer)
    th.start()
    seen = watch.wait(10)
    th.join()
    assert set(seen) == {"x", "y"}
    for k in ("x", "y"):  # at most a poll (and a scan) after the commit, never before it
        assert writes[k] - 0.05 <= seen[k] <= writes[k] + 0.5, (k, seen[k] - writes[k])
    # (timed by the commit entry, not by the poll)
    # each table read once, after its commit, at the version the poll saw
    assert watch.reads == 2


def test_a_table_that_never_shows_the_change_times_out(tmp_path):
    path = str(tmp_path / "t")
    _write(path, "old")
    watch = LakeWatch({"t": (path,)}, lambda k, vs: _shows(path, vs[0], "new"), poll=0.02)
    t0 = time.monotonic()
    assert watch.wait(0.3) == {}
    assert 0.3 <= time.monotonic() - t0 < 2
    assert watch.reads == 0  # the log did not move: nothing to read


def test_a_commit_that_does_not_show_the_change_is_watched_on(tmp_path):
    path = str(tmp_path / "t")
    _write(path, "old")
    watch = LakeWatch({"t": (path,)}, lambda k, vs: _shows(path, vs[0], "new"), poll=0.02)
    done: dict[str, float] = {}

    def writer() -> None:
        time.sleep(0.1)
        _write(path, "other")  # a commit of something else first
        time.sleep(0.3)
        _write(path, "new")
        done["new"] = time.monotonic()

    th = threading.Thread(target=writer)
    th.start()
    seen = watch.wait(10)
    th.join()
    assert done["new"] - 0.05 <= seen["t"] <= done["new"] + 0.5
    assert watch.reads == 2  # the first new version (no), then the second (yes)


def test_a_change_is_timed_by_its_commit_not_by_the_poll_that_saw_it(tmp_path):
    """A slow poll (2 s) does not add its interval: the time is the commit entry's."""
    path = str(tmp_path / "t")
    _write(path, "old")
    watch = LakeWatch({"t": (path,)}, lambda k, vs: _shows(path, vs[0], "new"), poll=2.0)
    done: dict[str, float] = {}

    def writer() -> None:
        time.sleep(0.3)
        _write(path, "new")
        done["t"] = time.monotonic()

    th = threading.Thread(target=writer)
    th.start()
    seen = watch.wait(10)
    th.join()
    assert abs(seen["t"] - done["t"]) < 0.1, seen["t"] - done["t"]
