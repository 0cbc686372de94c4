"""Rotating verification (issue "Verification that runs by itself"): the verification sensor
compares every captured table with the source a slice at a time and repairs a confirmed
difference the binlog never carried, with no operator action."""

import json

import dagster as dg
from lake_utils import live_state_rows, source_rows

from dagster_mysql_cdc.dagster_integration.rotation import (
    RotationState,
    build_verification_sensor,
    status_line,
)
from dagster_mysql_cdc.sink.storage import StorageSettings


def _lake_equals_source(lake: str, db: str, table: str) -> bool:
    storage = StorageSettings(base_uri=lake)
    expected, key = source_rows(db, table)
    return live_state_rows(storage, storage.uri(db, db, table, "state"), key) == expected


class _Verifier:
    """The verification sensor of a :class:`sensor_harness.SensorDriven` capture, ticked as the
    daemon ticks it (its cursor kept, its observations reported to the instance)."""

    def __init__(self, cdc, **options):
        self.cdc = cdc
        self.sensor = build_verification_sensor(cdc.cdc, **options)
        self.cursor = None
        self.outcomes: list[str] = []

    def tick(self) -> RotationState:
        with dg.build_sensor_context(
            instance=self.cdc.instance, cursor=self.cursor, resources=self.cdc.resources
        ) as ctx:
            res = self.sensor.evaluate_tick(ctx)
        self.cursor = res.cursor
        for e in res.asset_events or []:
            self.cdc.instance.report_runless_asset_event(e)
        self.outcomes.append(res.skip_message or "")
        return RotationState.parse(self.cursor)


def _observation(instance, key: dg.AssetKey) -> dict:
    records = instance.get_event_records(
        dg.EventRecordsFilter(event_type=dg.DagsterEventType.ASSET_OBSERVATION, asset_key=key),
        limit=1,
        ascending=False,
    )
    assert records, key
    return records[0].event_log_entry.asset_observation.metadata


def _repair_signals(conn, db: str) -> int:
    with conn.cursor() as cur:
        cur.execute(f"SELECT COUNT(*) FROM {db}.debezium_signal WHERE id LIKE 'repair-%%'")
        return cur.fetchone()[0]


def _rotate_until_repaired(v: _Verifier, cdc, lake: str, db: str, table: str) -> None:
    """Verification ticks, the binlog sensor's ticks in between (as the daemon runs both), until
    the rotation has seen ``table``'s differing range repaired; at most 30 ticks."""
    seen = len(v.outcomes)
    for _ in range(30):
        v.tick()
        cdc.ticks()
        if any(o.startswith(f"{db}.{table}: the differing range is repaired") for o in v.outcomes[seen:]):
            break
    assert any(o.startswith(f"{db}.{table}: the differing range is repaired") for o in v.outcomes[seen:]), (
        v.outcomes[seen:]
    )
    assert _lake_equals_source(lake, db, table)


def _setup(conn, db: str):
    from dagster_mysql_cdc.source.signals import create_signal_table

    with conn.cursor() as cur:
        cur.execute(f"USE {db}")
        cur.execute("CREATE TABLE x (id INT PRIMARY KEY, v INT, s VARCHAR(20))")
        cur.execute("CREATE TABLE y (a INT, b VARCHAR(10), v INT, PRIMARY KEY (a, b))")
        cur.execute("INSERT INTO x SELECT seq, seq, CONCAT('r', seq) FROM seq_1_to_100")
        cur.execute("INSERT INTO y SELECT seq % 7, CONCAT('k', seq), seq FROM seq_1_to_30")
    create_signal_table(conn, f"{db}.debezium_signal")


def test_a_change_behind_the_binlogs_back_is_found_and_repaired_by_the_rotation(tmp_path):
    """Rows changed, deleted and inserted with ``sql_log_bin=0`` (the binlog never carries them)
    in two tables (an integer key, a composite key) are found by the verification sensor's slices,
    confirmed on the next tick, repaired by the targeted re-read the binlog sensor's runs carry
    out, and seen repaired, with no check run by anyone. Progress and the last full pass are on
    each table's observations and in the status line."""
    from sensor_harness import SensorDriven, capture_resource, scratch_database

    with scratch_database("rot") as (db, conn):
        _setup(conn, db)
        lake = str(tmp_path / "lake")
        mysql = capture_resource(db)
        cdc = SensorDriven(mysql, lake, [t for t in mysql.discover_tables() if t.table != "debezium_signal"])
        cdc.ticks()  # the initial snapshot
        v = _Verifier(cdc, rows=40)
        state = v.tick()  # x: ids 1..40, equal
        assert state.suspect is None and state.tables[f"{db}.x"].after == [40], v.outcomes
        with conn.cursor() as cur:
            cur.execute("SET SESSION sql_log_bin = 0")
            cur.execute("UPDATE x SET v = -2 WHERE id = 75")
            cur.execute("DELETE FROM x WHERE id = 70")  # the lake keeps it
            cur.execute("SET SESSION sql_log_bin = 1")
        assert not _lake_equals_source(lake, db, "x")
        _rotate_until_repaired(v, cdc, lake, db, "x")
        found = [o for o in v.outcomes if o.startswith(f"{db}.x: 2 key(s)")]
        assert found and "compared again next tick" in found[0], v.outcomes
        assert "confirmed differing: Repair queued" in found[1], v.outcomes

        with conn.cursor() as cur:  # then a row the lake misses, in a table with a composite key
            cur.execute("SET SESSION sql_log_bin = 0")
            cur.execute("INSERT INTO y VALUES (3, 'new', 1)")
            cur.execute("SET SESSION sql_log_bin = 1")
        assert not _lake_equals_source(lake, db, "y")
        _rotate_until_repaired(v, cdc, lake, db, "y")
        assert any(o.startswith(f"{db}.y: 1 key(s) confirmed differing: Repair queued") for o in v.outcomes)
        confirmed = [o for o in v.outcomes if "confirmed differing" in o]
        assert len(confirmed) == 2, v.outcomes  # one repair per table, no false one
        assert _repair_signals(conn, db) >= 2
        assert not any("still differ after" in o for o in v.outcomes), v.outcomes

        x = _observation(cdc.instance, dg.AssetKey([db, db, "x"]))
        assert x["verification_passes"].value >= 1, x
        assert "verification_last_full_pass" in x and "verification_progress_pct" in x
        line = status_line(v.cursor)
        assert f"{db}.x verified" in line and f"{db}.y verified" in line, line


def test_an_equal_lake_under_writes_gives_no_false_repair(tmp_path):
    """Logged writes all along (between slices, while the lake lags and while it catches up): the
    rows changed since the committed position are left out, so no slice differs, nothing is
    repaired, and the passes complete (every key compared)."""
    from sensor_harness import SensorDriven, capture_resource, scratch_database

    with scratch_database("rotw") as (db, conn):
        _setup(conn, db)
        lake = str(tmp_path / "lake")
        mysql = capture_resource(db)
        cdc = SensorDriven(mysql, lake, [t for t in mysql.discover_tables() if t.table != "debezium_signal"])
        cdc.ticks()
        v = _Verifier(cdc, rows=25)
        for i in range(24):
            with conn.cursor() as cur:
                cur.execute(f"UPDATE x SET v = v + 1 WHERE id % 10 = {i % 10}")
                cur.execute(f"DELETE FROM x WHERE id = {i + 1}")
                cur.execute(f"INSERT INTO x VALUES ({1000 + i}, {i}, 'n')")
                cur.execute(f"UPDATE y SET v = v + 1 WHERE a = {i % 7}")
            state = v.tick()  # the lake lags the writes just made
            assert state.suspect is None, v.outcomes
            if i % 3 == 0:
                cdc.ticks()
        assert _repair_signals(conn, db) == 0
        assert not any("differ" in o for o in v.outcomes), v.outcomes
        assert all(t.passes >= 1 for t in state.tables.values()), json.loads(v.cursor)
        assert any("changed since the committed position" in o and "(0 changed" not in o for o in v.outcomes)
