"""Segments of a parallel window (engine/segments.py): options, offsets across files, and where a
window is cut (pure logic, no services)."""

import pytest

from dagster_mysql_cdc.engine.segments import (
    DEFAULT_SERVER_ID_COUNT,
    DEFAULT_SERVER_ID_OFFSET,
    Boundary,
    ParallelOptions,
    WindowPlan,
    cut_segments,
    file_offsets,
    parse_server_id_range,
)
from dagster_mysql_cdc.errors import ConfigurationError
from dagster_mysql_cdc.events import BinlogPosition

START = BinlogPosition("mysql-bin.000007", 1000, "0-1-10")


def plan_of(stretches: list[tuple[int, set]], start: BinlogPosition = START) -> WindowPlan:
    """A plan whose boundaries end stretches of ``(bytes, captured tables)`` one after the other."""
    plan = WindowPlan(start=start, end=start)
    offset = weight = 0
    for size, tables in stretches:
        offset += size
        if tables:
            weight += size
        pos = start.at(start.file, start.pos + offset)
        plan.boundaries.append(Boundary(pos, offset, weight, frozenset(tables)))
        plan.tables |= tables
    plan.end = plan.boundaries[-1].position
    plan.size, plan.captured = offset, weight
    return plan


A, B = ("db", "a"), ("db", "b")
IDS = tuple(range(100, 116))


def test_server_id_ranges():
    assert parse_server_id_range("5400-5403") == (5400, 5401, 5402, 5403)
    assert parse_server_id_range(" 7 ") == (7,)
    for bad in ("", "a-b", "5-4", "0-3", f"1-{2**32}", "3-"):
        with pytest.raises(ConfigurationError, match="stream_parallel_server_ids"):
            parse_server_id_range(bad)
    opts = ParallelOptions.build(1024, None, 184054)
    assert opts.server_ids[0] == 184054 + DEFAULT_SERVER_ID_OFFSET
    assert len(opts.server_ids) == DEFAULT_SERVER_ID_COUNT
    assert ParallelOptions.build(1024, "9-10", 184054, max_tasks=1).server_ids == (9, 10)


def test_bad_options_name_the_setting():
    with pytest.raises(ConfigurationError, match="stream_parallel_min_bytes"):
        ParallelOptions(min_bytes=0, server_ids=(1,))
    with pytest.raises(ConfigurationError, match="stream_parallel_max_tasks"):
        ParallelOptions(min_bytes=1, server_ids=(1,), max_tasks=-1)


def test_file_offsets_span_rotations():
    files = [
        ("mysql-bin.000006", 500),
        ("mysql-bin.000007", 4000),
        ("mysql-bin.000008", 300),
        ("mysql-bin.000009", 9),
    ]
    assert file_offsets(files, START) == {
        "mysql-bin.000007": 0,
        "mysql-bin.000008": 4000,
        "mysql-bin.000009": 4300,
    }
    assert file_offsets([], START) == {"mysql-bin.000007": 0}


def test_segments_are_balanced_by_captured_bytes_and_start_at_boundaries():
    plan = plan_of([(100, {A})] * 8)
    segs = cut_segments(plan, 4, IDS)
    assert [s.weight for s in segs] == [200, 200, 200, 200]
    assert segs[0].start == START and segs[-1].end == plan.end
    assert all(a.end == b.start for a, b in zip(segs, segs[1:]))
    bounds = {b.position for b in plan.boundaries}
    assert all(s.end in bounds for s in segs)
    assert [s.server_id for s in segs] == list(IDS[:4])
    assert all(s.tables == {A} for s in segs)


def test_stretches_of_other_tables_weigh_nothing():
    # a long stretch without captured rows in the middle is cheap to read: it does not make a segment
    plan = plan_of([(100, {A}), (100, {A}), (10_000, set()), (100, {B}), (100, {B})])
    segs = cut_segments(plan, 2, IDS)
    assert [s.weight for s in segs] == [200, 200]
    assert segs[0].tables == {A} and segs[1].tables == {B}


def test_fewer_segments_when_the_window_cannot_be_cut_finer():
    one = plan_of([(5000, {A})])  # one transaction
    assert [(s.start, s.end) for s in cut_segments(one, 4, IDS)] == [(START, one.end)]
    two = plan_of([(100, {A}), (100, {B})])
    assert len(cut_segments(two, 8, IDS)) == 2
    # a window whose captured rows all come first: no empty trailing segment
    tail = plan_of([(100, {A}), (100, {A}), (100, set()), (100, set())])
    segs = cut_segments(tail, 4, IDS)
    assert segs[-1].end == tail.end and all(s.weight > 0 for s in segs)


def test_a_segment_per_server_id_at_most():
    plan = plan_of([(100, {A})] * 8)
    with pytest.raises(ValueError, match="server ids"):
        cut_segments(plan, 4, IDS[:3])
    with pytest.raises(ValueError):
        cut_segments(plan, 0, IDS)
