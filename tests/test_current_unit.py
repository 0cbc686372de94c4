"""The current state, merge-on-read (sink/tail.py, sink/current.py): applying the tail to the
compacted state equals replaying every event one by one, however the events are split between
compactions, when a compacted tail file is applied again (its cleanup did not happen), and across
cut markers (TRUNCATE, full snapshots). Pure Arrow, no services."""

from __future__ import annotations

import random
from collections import Counter

import pyarrow as pa
import pytest

from dagster_mysql_cdc.events import SOURCE_TYPE, state_schema
from dagster_mysql_cdc.sink.current import resolve
from dagster_mysql_cdc.sink.state_rows import live_multiset
from dagster_mysql_cdc.sink.tail import cut_markers, tail_rows, tail_schema

VALUES = pa.schema([pa.field("id", pa.int32()), pa.field("v", pa.string())])
ROW = pa.struct(list(VALUES))


def envelopes(events: list[tuple]) -> pa.Table:
    """Change-log rows of ``(op, before, after, pos, row)`` events (binlog file ``b.000001``)."""
    src = [
        {"file": "b.000001", "pos": pos, "row": row, "ts_ms": 1, "snapshot": "false", "gtid": None}
        for (_, _, _, pos, row) in events
    ]
    return pa.table(
        {
            "before": pa.array([e[1] for e in events], ROW),
            "after": pa.array([e[2] for e in events], ROW),
            "source": pa.array(src, SOURCE_TYPE),
            "op": pa.array([e[0] for e in events], pa.string()),
            "ts_ms": pa.array([1] * len(events), pa.int64()),
        }
    )


def random_events(rng: random.Random, n: int, keyless: bool, start: Counter | None = None) -> list[tuple]:
    """A consistent random history (inserts, updates, deletes, truncates) over a few keys, of a
    source table holding the multiset ``start`` (keyless) before it (empty: none)."""
    live: Counter = Counter(start or {})
    out = []
    pos = 100
    for _ in range(n):
        pos += rng.randint(1, 3) * 10
        r = rng.random()
        if r < 0.03:
            out.append(("t", None, None, pos, 0))
            live.clear()
            continue
        k = rng.randint(1, 6)
        img = {"id": k, "v": rng.choice(["a", "b", None])}
        mine = [x for x in live.elements() if x[0] == k]
        if keyless:
            if r < 0.55 or not live:
                out.append(("c", None, img, pos, 0))
                live[(k, img["v"])] += 1
            elif r < 0.8:
                old = rng.choice(list(live.elements()))
                live[old] -= 1
                new = (old[0], rng.choice(["a", "b", None]))
                live[new] += 1
                out.append(("u", {"id": old[0], "v": old[1]}, {"id": new[0], "v": new[1]}, pos, 0))
            else:
                old = rng.choice(list(live.elements()))
                live[old] -= 1
                out.append(("d", {"id": old[0], "v": old[1]}, None, pos, 0))
        elif not mine:
            out.append(("c", None, img, pos, 0))
            live[(k, img["v"])] = 1
        elif r < 0.7:
            live = Counter({x: c for x, c in live.items() if x[0] != k})
            live[(k, img["v"])] = 1
            out.append(("u", {"id": k, "v": mine[0][1]}, img, pos, 0))
        else:
            live = Counter({x: c for x, c in live.items() if x[0] != k})
            out.append(("d", {"id": k, "v": mine[0][1]}, None, pos, 0))
        live = +live
    return out


def replay(events: list[tuple], keyless: bool) -> Counter:
    """The source table after the events, as a multiset of (id, v)."""
    live: Counter = Counter()
    for op, b, a, _, _ in events:
        if op == "t":
            live.clear()
            continue
        if b is not None:
            if keyless:
                live[(b["id"], b["v"])] -= 1
            else:
                live = Counter({x: c for x, c in live.items() if x[0] != b["id"]})
        if a is not None:
            live[(a["id"], a["v"])] += 1
    return +live


def as_multiset(state: pa.Table) -> Counter:
    return Counter((r["id"], r["v"]) for r in live_multiset(state).to_pylist())


@pytest.mark.parametrize("keyless", [False, True])
@pytest.mark.parametrize("seed", range(12))
def test_tail_over_state_equals_replay(keyless, seed):
    rng = random.Random(seed)
    events = random_events(rng, 60, keyless)
    key = [] if keyless else ["id"]
    schema = tail_schema(state_schema(VALUES, keyless=keyless), keyless=keyless)
    st = state_schema(VALUES, keyless=keyless)
    state = None
    pending: list[pa.Table] = []
    cuts = sorted(rng.sample(range(1, len(events)), 4))
    chunks = [events[a:b] for a, b in zip([0, *cuts], [*cuts, len(events)])]
    for i, chunk in enumerate(chunks):
        rows = tail_rows(envelopes(chunk), VALUES.names, keyless=keyless).cast(schema)
        pending.append(rows)
        # the current read at every window: compacted state + every tail file present
        current = resolve(state, pa.concat_tables(pending), key=key, schema=st)
        assert as_multiset(current) == replay(events[: sum(len(c) for c in chunks[: i + 1])], keyless)
        if rng.random() < 0.5:  # a compaction; sometimes its tail cleanup does not happen
            state = current
            if rng.random() < 0.6:
                pending = []
    assert as_multiset(
        resolve(state, pa.concat_tables(pending) if pending else None, key=key, schema=st)
    ) == replay(events, keyless)


def test_a_snapshot_cut_deletes_what_it_did_not_read_and_keeps_newer_rows():
    st = state_schema(VALUES)
    schema = tail_schema(st, keyless=False)
    old = tail_rows(
        envelopes([("c", None, {"id": 1, "v": "a"}, 100, 0), ("c", None, {"id": 2, "v": "b"}, 110, 0)]),
        VALUES.names,
        keyless=False,
    ).cast(schema)
    state = resolve(None, old, key=["id"], schema=st)
    # a full snapshot at 200 read only key 2; a stream event at 300 inserted key 3
    snap = envelopes([("r", None, {"id": 2, "v": "B"}, 200, -1)])
    snap_rows = tail_rows(snap, VALUES.names, keyless=False).cast(schema)
    snap_rows = snap_rows.set_column(
        snap_rows.column_names.index("__binlog_row"),
        "__binlog_row",
        pa.chunked_array([pa.array([-1], pa.int32())]),
    )
    cut = cut_markers(
        files=pa.array(["b.000001"]),
        positions=pa.array([200], pa.int64()),
        row=-1,
        op="r",
        epoch=0,
        like=schema,
    )
    later = tail_rows(
        envelopes([("c", None, {"id": 3, "v": "c"}, 300, 0)]), VALUES.names, keyless=False
    ).cast(schema)
    out = resolve(state, pa.concat_tables([later, snap_rows, cut]), key=["id"], schema=st)
    assert as_multiset(out) == Counter({(2, "B"): 1, (3, "c"): 1})
    gone = [r for r in out.to_pylist() if r["id"] == 1]
    assert gone[0]["__deleted"] and gone[0]["__op"] == "r" and gone[0]["__binlog_pos"] == 200


def test_a_tail_row_older_than_the_compacted_row_loses():
    st = state_schema(VALUES)
    schema = tail_schema(st, keyless=False)
    new = tail_rows(
        envelopes([("u", {"id": 1, "v": "a"}, {"id": 1, "v": "new"}, 500, 0)]), VALUES.names, keyless=False
    ).cast(schema)
    state = resolve(None, new, key=["id"], schema=st)
    late = tail_rows(
        envelopes([("u", {"id": 1, "v": "x"}, {"id": 1, "v": "old"}, 400, 0)]), VALUES.names, keyless=False
    ).cast(schema)
    assert as_multiset(resolve(state, late, key=["id"], schema=st)) == Counter({(1, "new"): 1})


VALUES2 = pa.schema([pa.field("g", pa.string()), pa.field("id", pa.int32()), pa.field("v", pa.string())])


def composite(events: list[tuple]) -> pa.Table:
    """``envelopes`` of ``events`` with a composite key ``(g, id)`` (``g`` derived from ``id``)."""

    def img(r):
        return None if r is None else {"g": f"g{r['id'] % 3}", "id": r["id"], "v": r["v"]}

    t = envelopes(events)
    row2 = pa.struct(list(VALUES2))
    before = pa.array([img(e[1]) for e in events], row2)
    after = pa.array([img(e[2]) for e in events], row2)
    return t.set_column(0, "before", before).set_column(1, "after", after)


@pytest.mark.parametrize("seed", range(8))
def test_composite_key_tail_over_state_equals_replay(seed):
    """The composite-key path of the merge (first key column narrows, a join decides)."""
    rng = random.Random(100 + seed)
    events = random_events(rng, 60, keyless=False)
    key = ["g", "id"]
    st = state_schema(VALUES2)
    schema = tail_schema(st, keyless=False)
    state, pending = None, []
    for i in range(0, len(events), 7):
        pending.append(tail_rows(composite(events[i : i + 7]), VALUES2.names, keyless=False).cast(schema))
        current = resolve(state, pa.concat_tables(pending), key=key, schema=st)
        got = Counter((r["id"], r["v"]) for r in live_multiset(current).to_pylist())
        assert got == replay(events[: i + 7], keyless=False)
        assert all(r["g"] == f"g{r['id'] % 3}" for r in live_multiset(current).to_pylist())
        if rng.random() < 0.5:
            state = current
            if rng.random() < 0.6:
                pending = []


GEO = pa.struct([pa.field("wkb", pa.binary()), pa.field("srid", pa.int32())])
VALUES3 = pa.schema([pa.field("id", pa.int32()), pa.field("v", pa.string()), pa.field("geo", GEO)])


def with_geometry(events: list[tuple]) -> pa.Table:
    """``envelopes`` of ``events`` with a nested (geometry-like) column beside the key."""

    def img(r):
        return None if r is None else {**r, "geo": {"wkb": f"{r['id']}:{r['v']}".encode(), "srid": 4326}}

    t = envelopes(events)
    row3 = pa.struct(list(VALUES3))
    before = pa.array([img(e[1]) for e in events], row3)
    after = pa.array([img(e[2]) for e in events], row3)
    return t.set_column(0, "before", before).set_column(1, "after", after)


@pytest.mark.parametrize("seed", range(6))
def test_a_nested_column_beside_the_key_resolves(seed):
    """Peer suites' geometry tables: the merge compares keys and ordering columns only (Arrow's
    hash join takes no nested non-key column)."""
    rng = random.Random(200 + seed)
    events = random_events(rng, 50, keyless=False)
    st = state_schema(VALUES3)
    schema = tail_schema(st, keyless=False)
    state, pending = None, []
    for i in range(0, len(events), 6):
        pending.append(tail_rows(with_geometry(events[i : i + 6]), VALUES3.names, keyless=False).cast(schema))
        current = resolve(state, pa.concat_tables(pending), key=["id"], schema=st)
        rows = live_multiset(current).to_pylist()
        assert Counter((r["id"], r["v"]) for r in rows) == replay(events[: i + 6], keyless=False)
        assert all(r["geo"]["wkb"] == f"{r['id']}:{r['v']}".encode() for r in rows)
        if rng.random() < 0.6:
            state, pending = current, []


# -- a keyless table captured without its rows (snapshot_mode=no_data) ------------------------------


def lake_replay(events: list[tuple]) -> Counter:
    """What a keyless lake can know of the source after ``events`` when it never saw the rows the
    source had before them: each value's copies changed one event at a time, never below zero
    (a delete of a copy the lake never had removes nothing)."""
    live: Counter = Counter()
    for op, b, a, _, _ in events:
        if op == "t":
            live.clear()
            continue
        if b is not None:
            live[(b["id"], b["v"])] = max(0, live[(b["id"], b["v"])] - 1)
        if a is not None:
            live[(a["id"], a["v"])] += 1
    return +live


def test_a_keyless_copy_the_lake_never_had_is_not_removed():
    """The issue's case: ('a', 0) existed before the capture (no_data); UPDATE it, DELETE it,
    INSERT ('a', 0) again: one live copy of ('a', 0), whether a compaction came between the events
    or not, and no count below zero."""
    st = state_schema(VALUES, keyless=True)
    schema = tail_schema(st, keyless=True)
    events = [
        ("u", {"id": 1, "v": "a"}, {"id": 1, "v": "b"}, 100, 0),
        ("d", {"id": 1, "v": "b"}, None, 200, 0),
        ("c", None, {"id": 1, "v": "a"}, 300, 0),
    ]
    rows = [tail_rows(envelopes([e]), VALUES.names, keyless=True).cast(schema) for e in events]
    at_once = resolve(None, pa.concat_tables(rows), key=[], schema=st)
    assert as_multiset(at_once) == Counter({(1, "a"): 1})
    assert min(r["__count"] for r in at_once.to_pylist()) == 0
    for split in (1, 2):  # a compaction after the first events (its tail cleanup done or not)
        state = resolve(None, pa.concat_tables(rows[:split]), key=[], schema=st)
        assert min(r["__count"] for r in state.to_pylist()) >= 0
        for tail in (rows[split:], rows):
            assert as_multiset(resolve(state, pa.concat_tables(tail), key=[], schema=st)) == Counter(
                {(1, "a"): 1}
            )
    # an update that changes nothing of a row the lake never had: its -1 applies first, then its +1
    same = tail_rows(
        envelopes([("u", {"id": 2, "v": "x"}, {"id": 2, "v": "x"}, 400, 0)]), VALUES.names, keyless=True
    ).cast(schema)
    assert as_multiset(resolve(None, same, key=[], schema=st)) == Counter({(2, "x"): 1})


@pytest.mark.parametrize("seed", range(12))
def test_keyless_tail_over_state_without_the_rows_before_the_capture(seed):
    """A source with rows before the capture that the lake never saw: applying the tail to the
    compacted state equals the lake's replay (counts changed in order, never below zero), however
    the events are split between compactions and when a compacted tail file is applied again."""
    rng = random.Random(300 + seed)
    before = Counter({(rng.randint(1, 6), rng.choice(["a", "b", None])): rng.randint(1, 3) for _ in range(5)})
    events = random_events(rng, 60, keyless=True, start=before)
    st = state_schema(VALUES, keyless=True)
    schema = tail_schema(st, keyless=True)
    state = None
    pending: list[pa.Table] = []
    cuts = sorted(rng.sample(range(1, len(events)), 5))
    chunks = [events[a:b] for a, b in zip([0, *cuts], [*cuts, len(events)])]
    for i, chunk in enumerate(chunks):
        pending.append(tail_rows(envelopes(chunk), VALUES.names, keyless=True).cast(schema))
        current = resolve(state, pa.concat_tables(pending), key=[], schema=st)
        assert as_multiset(current) == lake_replay(events[: sum(len(c) for c in chunks[: i + 1])])
        assert all(r["__count"] >= 0 for r in current.to_pylist())
        if rng.random() < 0.5:
            state = current
            if rng.random() < 0.6:
                pending = []
