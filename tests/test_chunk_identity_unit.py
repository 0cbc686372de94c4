"""Unit tests of how a read-only incremental snapshot's windows are told apart on an idle
binlog, where they all start at one position (``engine.incremental.state_tag``, the saved chunk
plans, chunk-only follow-on windows and their commit identity): pure logic, local files."""

import pytest

from dagster_mysql_cdc.engine.follow import FollowWindow, load_follow_window, save_follow_window
from dagster_mysql_cdc.engine.incremental import (
    ChunkPlan,
    IncrementalState,
    PlannedChunk,
    TableProgress,
    load_plan,
    save_plan,
    state_tag,
)
from dagster_mysql_cdc.events import BinlogPosition
from dagster_mysql_cdc.sink.storage import StorageSettings

X = BinlogPosition("mysql-bin.000001", 4000, "0-1-7")
Y = BinlogPosition("mysql-bin.000001", 9000, "0-1-9")


@pytest.fixture
def storage(tmp_path) -> StorageSettings:
    return StorageSettings(base_uri=str(tmp_path / "lake"))


def _state(chunk_seq: int, last_key: int | None = None, snapshot_id: str = "s1") -> IncrementalState:
    return IncrementalState(
        snapshot_id,
        [TableProgress("db.t", last_key=[last_key] if last_key else None, chunks=chunk_seq)],
        chunk_seq=chunk_seq,
    )


def _plan(state: IncrementalState, chunks: int) -> ChunkPlan:
    after = state.copy()
    planned = []
    for _ in range(chunks):
        after.chunk_seq += 1
        cid = f"{after.snapshot_id}-{after.chunk_seq}"
        planned.append(PlannedChunk(cid, "db.t", 20, f"/stash/{cid}.parquet", f"{cid}-o", f"{cid}-c"))
    return ChunkPlan(X, X, planned, after.to_dict())


def test_the_tag_follows_the_state_and_survives_the_cursor_round_trip():
    s = _state(2, 40)
    assert state_tag(s) == state_tag(s.to_dict()) == state_tag(IncrementalState.from_dict(s.copy().to_dict()))
    assert state_tag(s) != state_tag(_state(4, 80)) != state_tag(_state(2, 40, snapshot_id="s2"))
    assert state_tag(None) is None and state_tag(IncrementalState("s1")) is None  # no table left


def test_a_plan_is_found_for_its_own_state_only(storage):
    s2, s4 = _state(2, 40), _state(4, 80)
    saved = save_plan(storage, "srv", _plan(s2, 2), s2)
    assert load_plan(storage, "srv", X, s2) == saved  # a retry of the window
    assert load_plan(storage, "srv", X, s4) is None  # the next window from the same position
    assert save_plan(storage, "srv", _plan(s4, 2), s4).state_after["chunk_seq"] == 6
    # first writer wins for one state
    assert save_plan(storage, "srv", _plan(s2, 5), s2).state_after["chunk_seq"] == 4


def test_a_plan_saved_before_the_tag_is_taken_when_it_continues_the_state(storage):
    """A window in flight across the upgrade reuses its plan (a new plan could cover other keys
    than the tables it already committed); an older plan at the position is not taken."""
    legacy = _plan(_state(2, 40), 2)
    storage.first_write(
        storage.uri("_staging", "srv", "incremental", f"plan-{X.version_tag()}.json"),
        legacy.to_json().encode(),
    )
    assert load_plan(storage, "srv", X, _state(2, 40)) == legacy
    assert load_plan(storage, "srv", X, _state(4, 80)) is None


def test_chunk_only_follow_windows_are_saved_under_the_state(storage):
    empty = FollowWindow(X, X, X)
    assert empty.chunks_only and not FollowWindow(X, X, Y).chunks_only
    save_follow_window(storage, "srv", empty, "aaaa")
    assert load_follow_window(storage, "srv", X, "aaaa") == empty  # a retry
    assert load_follow_window(storage, "srv", X, "bbbb") is None  # the next chunks' window
    # a window that reads the binlog is saved under its position alone, found whatever the state
    save_follow_window(storage, "srv", FollowWindow(X, X, Y), "bbbb")
    assert load_follow_window(storage, "srv", X, "bbbb") == FollowWindow(X, X, Y)
    assert load_follow_window(storage, "srv", X) == FollowWindow(X, X, Y)


def test_an_untagged_chunk_only_window_is_passed_over_while_a_snapshot_runs(storage):
    """Saved before the tag existed: it belonged to some state of the snapshot, not this one."""
    storage.first_write(
        storage.uri("_staging", "srv", "follow", f"window-after-{X.version_tag()}.json"),
        FollowWindow(X, X, X).to_json().encode(),
    )
    assert load_follow_window(storage, "srv", X, "aaaa") is None
    assert load_follow_window(storage, "srv", X) == FollowWindow(X, X, X)
