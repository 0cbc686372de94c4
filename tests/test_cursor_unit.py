"""The binlog sensor's cursor and planning step (pure functions, no services)."""

from __future__ import annotations

import json

import pytest

from dagster_mysql_cdc.dagster_integration.cursor import (
    CURSOR_VERSION,
    CorruptCursorError,
    InFlight,
    ServerState,
    StreamCursor,
    normalize,
    plan_stream_window,
    window_key,
)
from dagster_mysql_cdc.errors import ConfigurationError
from dagster_mysql_cdc.events import BinlogPosition

F1, F2, F3 = "mysql-bin.000001", "mysql-bin.000002", "mysql-bin.000003"
FILES = [(F1, 1000), (F2, 2000), (F3, 500)]
CURRENT = BinlogPosition(F3, 500, "0-1-30")


def committed_at(file: str, pos: int, gtid: str | None = "0-1-10", **kw) -> StreamCursor:
    return StreamCursor(committed=BinlogPosition(file, pos, gtid), snapshot_done=True, **kw)


def plan(cursor: StreamCursor, *, mode: str = "initial", files=FILES, current=CURRENT, margin: int = 1):
    return plan_stream_window(
        cursor,
        ServerState(current=current, binlog_files=list(files)),
        snapshot_mode=mode,
        retention_margin_files=margin,
    )


# -- parse / serialise -----------------------------------------------------------------------


@pytest.mark.parametrize("text", [None, ""])
def test_parse_empty_is_initial_state(text):
    c = StreamCursor.parse(text)
    assert c == StreamCursor()
    assert c.committed is None and c.inflight is None and not c.snapshot_done


def test_round_trip_with_inflight():
    start = BinlogPosition(F2, 120, "0-1-5")
    end = BinlogPosition(F2, 2000, None)
    c = StreamCursor(
        committed=start,
        inflight=InFlight("stream", window_key("stream", start, end, 2), 2, start, end),
        snapshot_done=True,
        last_error="run abc FAILURE",
    )
    text = c.to_json()
    assert json.loads(text)["v"] == CURSOR_VERSION
    assert StreamCursor.parse(text) == c


def test_round_trip_snapshot_inflight():
    end = BinlogPosition(F1, 4, "0-1-1")
    c = StreamCursor(
        inflight=InFlight("snapshot", window_key("snapshot", None, end, 1), 1, None, end, "initial")
    )
    assert StreamCursor.parse(c.to_json()) == c


def test_round_trip_with_stopped_tables():
    """The stopped tables (engine/isolation.py) survive the cursor; none: the key is absent."""
    from dagster_mysql_cdc.engine.isolation import StoppedTable

    since = BinlogPosition(F2, 500, "0-1-9")
    st = StoppedTable(since, "SinkError: boom", attempts=2, retry_at=1000.5, stopped_at=900.0)
    c = StreamCursor(committed=BinlogPosition(F2, 900), snapshot_done=True, stopped={"d.t": st.to_dict()})
    back = StreamCursor.parse(c.to_json())
    assert back == c and back.stopped_tables() == {"d.t": st}
    assert "stopped" not in json.loads(StreamCursor(committed=since).to_json())


@pytest.mark.parametrize(
    "text, detail",
    [
        ('{"v": 1, "stopped": {"d.t": {"error": "x"}}}', "not a stopped table"),
        ('{"v": 1, "stopped": {"d.t": "oops"}}', "not a stopped table"),
        ("{not json", "Expecting"),
        ("[1, 2]", "expected an object"),
        ('{"v": 99, "committed": null}', "v=1"),
        ('{"committed": null}', "v=1"),
        ('{"v": 1, "committed": {"file": "mysql-bin.000001", "pos": "abc"}}', "Not a binlog position"),
        ('{"v": 1, "committed": {"pos": 4}}', "Not a binlog position"),
        ('{"v": 1, "inflight": {"run_key": "k"}}', "kind"),
        ('{"v": 1, "inflight": {"kind": "stream", "run_key": "k", "attempt": "x"}}', "invalid literal"),
    ],
)
def test_corrupt_cursor_raises_with_fix(text, detail):
    with pytest.raises(CorruptCursorError) as ei:
        StreamCursor.parse(text, "my_sensor")
    msg = str(ei.value)
    assert "my_sensor" in msg and "corrupt" in msg
    assert detail in msg
    assert "dagster sensor cursor my_sensor --set" in msg
    assert "dagster sensor cursor my_sensor --delete" in msg
    assert isinstance(ei.value, ConfigurationError)


def test_window_key_is_deterministic_and_attempt_specific():
    s, e = BinlogPosition(F1, 4), BinlogPosition(F1, 900)
    assert window_key("stream", s, e, 1) == f"stream:{F1}:4:{F1}:900:a1"
    assert window_key("stream", s, e, 1) == window_key("stream", BinlogPosition(F1, 4, "x"), e, 1)
    assert window_key("stream", s, e, 2) != window_key("stream", s, e, 1)
    assert window_key("snapshot", None, e, 1) == f"snapshot:-:{F1}:900:a1"


# -- normalize ---------------------------------------------------------------------------------


def test_normalize_end_of_file_moves_to_next_file_keeping_gtid():
    assert normalize(BinlogPosition(F1, 1000, "0-1-9"), FILES) == BinlogPosition(F2, 4, "0-1-9")


def test_normalize_leaves_other_positions():
    p = BinlogPosition(F1, 999, "g")
    assert normalize(p, FILES) == p
    assert normalize(BinlogPosition(F3, 500), FILES) == BinlogPosition(F3, 500)  # newest file: stays
    assert normalize(BinlogPosition("mysql-bin.000009", 4), FILES) == BinlogPosition("mysql-bin.000009", 4)
    assert normalize(p, []) == p


# -- planning ----------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["initial", "initial_only", "when_needed", "no_data", "always"])
def test_initial_snapshot_requested_at_current_position(mode):
    p = plan(StreamCursor(), mode=mode)
    assert p.request is not None
    assert p.request.kind == "snapshot"
    assert p.request.end == CURRENT and p.request.start is None
    assert p.request.attempt == 1
    assert p.request.snapshot_mode == mode
    assert p.request.run_key == window_key("snapshot", None, CURRENT, 1)
    assert p.cursor == StreamCursor()  # the sensor sets inflight, the plan does not commit anything


def test_never_starts_at_oldest_binlog_without_snapshot():
    p = plan(StreamCursor(), mode="never")
    assert p.request is None
    assert p.cursor.committed == BinlogPosition(F1, 4, "")
    assert p.cursor.snapshot_done
    assert "never" in p.skip_reason
    # the next tick streams from there, bounded to the first file
    p2 = plan(p.cursor, mode="never")
    assert p2.request.kind == "stream"
    assert (p2.request.start.file, p2.request.start.pos) == (F1, 4)
    assert (p2.request.end.file, p2.request.end.pos) == (F1, 1000)


def test_never_without_binlog_files_skips():
    p = plan(StreamCursor(), mode="never", files=[])
    assert p.request is None and p.cursor.committed is None
    assert "no binlog files" in p.skip_reason


def test_initial_only_does_not_stream():
    p = plan(committed_at(F3, 100), mode="initial_only")
    assert p.request is None
    assert "initial_only" in p.skip_reason
    assert p.cursor == committed_at(F3, 100)


def test_caught_up():
    p = plan(committed_at(F3, 500, "0-1-30"))
    assert p.request is None
    assert p.skip_reason == f"caught up at {BinlogPosition(F3, 500, '0-1-30')}"


def test_caught_up_at_end_of_previous_file_normalizes():
    current = BinlogPosition(F3, 4, "0-1-30")
    p = plan(committed_at(F2, 2000, "0-1-30"), current=current, files=[(F1, 1000), (F2, 2000), (F3, 4)])
    assert p.request is None
    assert p.skip_reason.startswith("caught up at")
    assert p.cursor.committed == BinlogPosition(F3, 4, "0-1-30")


def test_window_in_current_file_ends_at_current_position():
    p = plan(committed_at(F3, 120))
    r = p.request
    assert r.kind == "stream" and r.attempt == 1
    assert r.start == BinlogPosition(F3, 120, "0-1-10")
    assert r.end == CURRENT
    assert r.run_key == window_key("stream", r.start, r.end, 1)
    assert p.cursor.committed == r.start


def test_window_bounded_to_file_end_when_server_moved_to_newer_file():
    p = plan(committed_at(F2, 300))
    r = p.request
    assert r.start == BinlogPosition(F2, 300, "0-1-10")
    assert (r.end.file, r.end.pos) == (F2, 2000), "one window never spans binlog files"
    # the committed offset at the end of F2 moves on to F3 and the next window ends at the server
    p2 = plan(committed_at(F2, 2000))
    assert p2.request.start == BinlogPosition(F3, 4, "0-1-10")
    assert p2.request.end == CURRENT


def test_window_from_end_of_file_into_next_file():
    """End of an old file normalizes to the next file; that window is again bounded to its file."""
    p = plan(committed_at(F1, 1000))
    assert p.request.start == BinlogPosition(F2, 4, "0-1-10")
    assert (p.request.end.file, p.request.end.pos) == (F2, 2000)


def test_purged_committed_file_names_the_file():
    files = [(F2, 2000), (F3, 500)]
    with pytest.raises(ConfigurationError) as ei:
        plan(committed_at(F1, 400), files=files)
    msg = str(ei.value)
    assert F1 in msg and "purged" in msg
    assert f"oldest is {F2}" in msg
    assert "when_needed" in msg


def test_purged_committed_file_when_needed_requests_snapshot():
    files = [(F2, 2000), (F3, 500)]
    cur = committed_at(F1, 400)
    p = plan(cur, mode="when_needed", files=files)
    r = p.request
    assert r is not None and r.kind == "snapshot"
    assert r.snapshot_mode == "when_needed"
    assert r.start == cur.committed and r.end == CURRENT
    assert r.run_key == window_key("resnapshot", cur.committed, CURRENT, 1)
    assert any(F1 in w and "purged" in w for w in p.warnings)
    assert p.cursor == cur


def test_retention_warning_for_committed_offset_in_oldest_file():
    p = plan(committed_at(F1, 400))
    assert p.request is not None and p.request.kind == "stream"
    assert len(p.warnings) == 1 and F1 in p.warnings[0]
    # a larger margin also covers the second-oldest file
    assert plan(committed_at(F2, 400), margin=2).warnings
    assert not plan(committed_at(F2, 400), margin=1).warnings
    # a single binlog file cannot be purged by rotation: no warning
    only = [(F3, 500)]
    assert not plan(committed_at(F3, 100), files=only).warnings


def test_retention_warning_also_when_caught_up():
    files = [(F1, 1000), (F2, 2000)]
    p = plan(committed_at(F1, 1000), files=files, current=BinlogPosition(F2, 4))
    assert p.request is None and p.skip_reason.startswith("caught up")
    assert p.warnings and F1 in p.warnings[0]


def test_planning_requires_no_run_in_flight():
    c = committed_at(F3, 100, inflight=InFlight("stream", "k"))
    with pytest.raises(AssertionError):
        plan(c)
