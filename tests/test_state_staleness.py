"""A quiet table's compacted ``state`` is never left behind indefinitely (issue 41): a table whose
state tail holds changes older than ``state_compact_max_age_seconds`` is compacted without a new
write to it, by the next window of the capture (another table changed) or, when the capture is
idle, by an empty window the binlog sensor requests for it. Plain Delta readers (deltalake here:
no merge-on-read) of ``state`` then see the source. Keyed and keyless tables."""

import json
import time
from collections import Counter

import pyarrow.compute as pc
import pytest
from deltalake import DeltaTable
from sensor_harness import SensorDriven, capture_resource, scratch_database

from dagster_mysql_cdc.dagster_integration.cursor import (
    InFlight,
    ServerState,
    StreamCursor,
    plan_stream_window,
)
from dagster_mysql_cdc.dagster_integration.protocol import COMPACT_TAG, WINDOW_END_TAG, WINDOW_START_TAG
from dagster_mysql_cdc.events import BinlogPosition
from dagster_mysql_cdc.sink.compaction import TableSizes, state_due_at

#: the staleness bound of the tests (small: the tests wait for it)
BOUND = 12.0


def _plain_state(storage, db: str, table: str) -> Counter:
    """The live rows of ``state`` as a plain Delta reader sees them (no tail applied): ``(id, v)``
    (keyless: ``v`` once per copy)."""
    t = DeltaTable(storage.uri(db, db, table, "state")).to_pyarrow_table()
    t = t.filter(pc.invert(pc.fill_null(t.column("__deleted"), False)))
    out: Counter = Counter()
    for r in t.to_pylist():
        if "id" in r:
            out[(r["id"], r["v"])] += 1
        else:
            out[r["v"]] += int(r["__count"])
    return out


def _source(conn, db: str, table: str) -> Counter:
    with conn.cursor() as cur:
        if table == "bag":
            cur.execute(f"SELECT v FROM {db}.bag")
            return Counter(r[0] for r in cur.fetchall())
        cur.execute(f"SELECT id, v FROM {db}.{table}")
        return Counter((r[0], r[1]) for r in cur.fetchall())


def _setup(conn, db: str) -> None:
    with conn.cursor() as cur:
        cur.execute(f"CREATE TABLE {db}.quiet (id INT PRIMARY KEY, v INT)")
        cur.execute(f"CREATE TABLE {db}.bag (v INT)")  # keyless
        cur.execute(f"CREATE TABLE {db}.busy (id INT PRIMARY KEY, v INT)")
        cur.execute(f"INSERT INTO {db}.quiet VALUES (1, 10), (2, 20)")
        cur.execute(f"INSERT INTO {db}.bag VALUES (5), (5), (6)")
        cur.execute(f"INSERT INTO {db}.busy VALUES (1, 1)")


def _write_quiet_tables_once(conn, db: str) -> None:
    with conn.cursor() as cur:
        cur.execute(f"UPDATE {db}.quiet SET v = 11 WHERE id = 1")
        cur.execute(f"DELETE FROM {db}.quiet WHERE id = 2")
        cur.execute(f"INSERT INTO {db}.quiet VALUES (3, 30)")
        cur.execute(f"DELETE FROM {db}.bag WHERE v = 6")
        cur.execute(f"INSERT INTO {db}.bag VALUES (7)")


def _stale_entries(cdc: SensorDriven) -> dict[str, float]:
    return StreamCursor.parse(cdc.cursor).state_due or {}


@pytest.mark.integration
@pytest.mark.spark
def test_a_quiet_tables_state_is_compacted_by_the_next_window_of_another_table(local_storage):
    with scratch_database("stale") as (db, conn):
        _setup(conn, db)
        cdc = SensorDriven(capture_resource(db), local_storage.base_uri, state_compact_max_age_seconds=BOUND)
        assert all(r.success for r in cdc.ticks().runs)  # the snapshot
        _write_quiet_tables_once(conn, db)
        ticks = cdc.ticks()
        assert all(r.success for r in ticks.runs)
        written_at = time.time()
        # the window's tables stay in the tail (1,000 rows before a compaction by size): due later
        assert {f"{db}.quiet", f"{db}.bag"} <= set(_stale_entries(cdc))
        time.sleep(max(0.0, written_at + BOUND + 1 - time.time()))
        with conn.cursor() as cur:
            cur.execute(f"UPDATE {db}.busy SET v = 2 WHERE id = 1")
        ticks = cdc.ticks()
        run = ticks.runs[0]  # the window of busy's change
        assert run.success
        assert run.dagster_run.tags[WINDOW_START_TAG] != run.dagster_run.tags[WINDOW_END_TAG]
        assert {f"{db}.quiet", f"{db}.bag"} <= set(json.loads(run.dagster_run.tags[COMPACT_TAG]))
        assert {m.asset_key.path[-1] for m in run.get_asset_materialization_events()} == {"busy", "binlog"}
        for table in ("quiet", "bag"):
            assert _plain_state(local_storage, db, table) == _source(conn, db, table), table
            assert f"{db}.{table}" not in _stale_entries(cdc)
        observed = {
            e.asset_key.path[-1]: e.event_specific_data.asset_observation.metadata
            for e in run.all_events
            if e.event_type_value == "ASSET_OBSERVATION" and e.asset_key.path[-1] in ("quiet", "bag")
        }
        assert set(observed) == {"quiet", "bag"}
        for md in observed.values():
            assert md["state_behind_seconds"].value == 0.0 and md["state_tail_rows"].value == 0


@pytest.mark.integration
@pytest.mark.spark
def test_an_idle_captures_stale_state_is_compacted_by_an_empty_window(local_storage, spark_lake_options):
    """... here by Spark tasks (``state_compact_in_process_rows=0``), on each Spark flavour."""
    with scratch_database("stale") as (db, conn):
        _setup(conn, db)
        cdc = SensorDriven(
            capture_resource(db),
            local_storage.base_uri,
            state_compact_max_age_seconds=BOUND,
            state_compact_in_process_rows=0,
            **spark_lake_options,
        )
        assert all(r.success for r in cdc.ticks().runs)  # the snapshot
        _write_quiet_tables_once(conn, db)
        assert all(r.success for r in cdc.ticks().runs)
        written_at = time.time()
        time.sleep(max(0.0, written_at + BOUND + 1 - time.time()))
        # nothing changed since: the capture is idle, the sensor requests an empty window
        ticks = cdc.ticks()
        assert ticks.runs, "no run compacted the stale tables"
        run = ticks.runs[0]
        assert run.success
        assert run.dagster_run.tags[WINDOW_START_TAG] == run.dagster_run.tags[WINDOW_END_TAG]
        assert {f"{db}.quiet", f"{db}.bag"} <= set(json.loads(run.dagster_run.tags[COMPACT_TAG]))
        for table in ("quiet", "bag", "busy"):
            assert _plain_state(local_storage, db, table) == _source(conn, db, table), table
        assert _stale_entries(cdc) == {}
        observed = [
            e.event_specific_data.asset_observation.metadata
            for e in run.all_events
            if e.event_type_value == "ASSET_OBSERVATION" and e.asset_key.path[-1] == "quiet"
        ]
        assert [md["compaction"].value["mode"] for md in observed] == ["spark"]
        # and then nothing more to do: no run while nothing changes
        assert cdc.ticks().runs == []


def test_the_sensor_keeps_the_due_times_runs_report_and_plans_an_empty_window_for_them():
    at = BinlogPosition("mysql-bin.000001", 400)
    server = ServerState(current=at, binlog_files=[("mysql-bin.000001", 400)])
    c = StreamCursor(committed=at, snapshot_done=True)
    assert plan_stream_window(c, server, snapshot_mode="initial", now=1000.0).request is None
    c = c.with_state_due({"d.a": 1100.0, "d.b": 900.0, "d.c": None})
    assert c.state_due == {"d.a": 1100.0, "d.b": 900.0}
    assert StreamCursor.parse(c.to_json()) == c
    assert c.due_states(now=1000.0) == ["d.b"] and c.due_states(now=1200.0) == ["d.b", "d.a"]
    assert c.due_states(now=1200.0, limit=1) == ["d.b"]
    plan = plan_stream_window(c, server, snapshot_mode="initial", now=1000.0)
    assert isinstance(plan.request, InFlight) and plan.request.start == plan.request.end == at
    assert plan_stream_window(c, server, snapshot_mode="initial", now=800.0).request is None
    assert c.with_state_due({"d.a": None, "d.b": None}).state_due is None


def test_a_tables_state_is_due_one_bound_after_its_oldest_uncompacted_change():
    pending = TableSizes(state_rows=10, tail_rows=2, tail_files=1, tail_oldest_ms=1_000_000)
    assert state_due_at({"pending": pending}, 900, now=1500) == 1900.0
    assert state_due_at({"rows_out": 10, "state_as_of": "0:f:4:0"}, 900, now=1500) is None
    assert state_due_at({}, 900, now=1500) is None
    assert state_due_at({"pending": pending}, 0, now=1500) is None  # the bound is off
    # a failed or skipped compaction is tried again one bound later, not at every tick
    assert state_due_at({"error": "x", "pending": pending}, 900, now=1500) == 2400.0
    assert state_due_at({"skipped": "another writer"}, 900, now=1500) == 2400.0


def test_the_status_shows_how_many_states_lack_changes_and_the_longest_overdue():
    from dagster_mysql_cdc.dagster_integration.status import CaptureStatus

    st = CaptureStatus("s", None, state_due={"d.a": 1100.0, "d.b": 900.0})
    assert st._state_line(now=1000.0) == (
        "state: 2 table(s) with changes not compacted into `state` yet, 1 due (the longest for 100 s: d.b)"
    )
    assert st._state_line(now=800.0).endswith(", the next due in 100 s")
    assert any(line.startswith("state: 2 table(s)") for line in st.lines())
    assert not any(line.startswith("state:") for line in CaptureStatus("s", None).lines())
