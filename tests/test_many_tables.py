"""Hundreds of tables in one capture (issue 28), end to end through the binlog sensor: a snapshot
of 150 small tables (written together: one Spark job for the small ones, concurrent commits), a
window whose one transaction changes every table (the last record batches of all tables in one
Spark job, the tables committed concurrently, the checks of all tables from one source
connection), and two faults mid-window with all those tables in flight:

- one table's commit fails while the others commit: it stops alone, the others are committed,
  and it is caught up afterwards from where it stopped;
- the window fails after every table committed, before the schema history and the cursor: the
  retried window skips every table's commit (Delta transaction identity), nothing is written twice.

After each step the lake equals the source table by table, and every change log holds each binlog
change exactly once.
"""

import json
from collections import Counter

import pytest
from lake_utils import live_state_rows, read_delta, source_rows
from sensor_harness import SensorDriven, capture_resource, scratch_database

from dagster_mysql_cdc.dagster_integration.cursor import StreamCursor
from dagster_mysql_cdc.sink import table_batch
from dagster_mysql_cdc.sink.schema_history import SchemaHistory

pytestmark = [pytest.mark.integration, pytest.mark.spark]

TABLES = 150
ROWS = 6


def _name(i: int) -> str:
    return f"t{i:03d}"


def _create(conn, db: str) -> None:
    with conn.cursor() as cur:
        for i in range(TABLES):
            cur.execute(f"CREATE TABLE {db}.{_name(i)} (id INT PRIMARY KEY, v VARCHAR(32), n INT)")
            values = ",".join(f"({k}, 'row {k}', {k * i})" for k in range(1, ROWS + 1))
            cur.execute(f"INSERT INTO {db}.{_name(i)} VALUES {values}")


def _touch_all(conn, db: str, round_: int) -> None:
    """One transaction: in every table an update, an insert, and (odd tables) a delete."""
    with conn.cursor() as cur:
        cur.execute("BEGIN")
        for i in range(TABLES):
            t = f"{db}.{_name(i)}"
            cur.execute(f"UPDATE {t} SET n = n + 1, v = 'round {round_}' WHERE id = 1")
            cur.execute(f"INSERT INTO {t} VALUES ({100 + round_}, 'new {round_}', {round_})")
            if i % 2:
                cur.execute(f"DELETE FROM {t} WHERE id = {2 + round_}")
        cur.execute("COMMIT")


def _assert_lake_equals_source(storage, db: str) -> None:
    differ = []
    for i in range(TABLES):
        expected, key = source_rows(db, _name(i))
        got = live_state_rows(storage, storage.uri(db, db, _name(i), "state"), key)
        if got != expected:
            differ.append(_name(i))
    assert not differ, f"{len(differ)} table(s) differ from the source: {differ[:10]}"


def _assert_each_change_once(storage, db: str, rounds: int) -> None:
    """Every change log: the snapshot's rows, then per round exactly one u, one c (and on odd
    tables one d), no event twice."""
    for i in range(TABLES):
        log = read_delta(storage, storage.uri(db, db, _name(i), "changelog")).to_pylist()
        positions = Counter(
            (e["op"], e["source"]["file"], e["source"]["pos"], e["source"]["row"])
            for e in log
            if e["op"] != "r"
        )
        twice = [p for p, k in positions.items() if k > 1]
        assert not twice, f"{_name(i)}: events written twice: {twice[:3]}"
        ops = Counter(e["op"] for e in log)
        want = {"r": ROWS, "u": rounds, "c": rounds}
        if i % 2:
            want["d"] = rounds
        assert dict(ops) == want, f"{_name(i)}: {dict(ops)} != {want}"


def test_windows_that_change_every_table_of_a_large_capture(local_storage, monkeypatch):
    with scratch_database("many") as (db, conn):
        _create(conn, db)
        cdc = SensorDriven(
            capture_resource(db),
            local_storage.base_uri,
            sensor_options={"table_retry_backoff_seconds": 3600},
        )
        assert len(cdc.cdc.keys) == TABLES + 1  # the tables and the binlog asset
        ticks = cdc.ticks()
        assert ticks.runs and all(r.success for r in ticks.runs)  # the snapshot
        _assert_lake_equals_source(local_storage, db)
        # more tables than planned_checks_max_tables: the snapshot's every table check is logged
        snap = ticks.runs[0]
        assert snap.dagster_run.tags.get("dagster_mysql_cdc/table_checks") == "logged"
        evaluations = snap.get_asset_check_evaluations()
        assert len({(tuple(e.asset_key.path), e.check_name) for e in evaluations}) == 3 * TABLES + 2
        assert [e for e in evaluations if not e.passed] == []
        # each table's materialization logged alone (no STEP_OUTPUT per table), one summary
        # line instead of a line per table
        assert len(snap.get_asset_materialization_events()) == TABLES + 1
        outputs = [
            e.step_output_data.output_name for e in snap.all_events if e.event_type_value == "STEP_OUTPUT"
        ]
        assert [o for o in outputs if "binlog" not in o] == []
        lines = [e.user_message for e in cdc.instance.all_logs(snap.run_id) if not e.is_dagster_event]
        assert [
            m
            for m in lines
            if m.startswith(f"Snapshot: {TABLES} table(s) committed, {TABLES * ROWS} rows at")
        ]
        assert [m for m in lines if " rows at " in m and not m.startswith("Snapshot: ")] == []

        # 1. one transaction changes every table: one window
        _touch_all(conn, db, 1)
        runs = cdc.ticks().runs
        assert runs and all(r.success for r in runs), [r.dagster_run.tags for r in runs]
        run = runs[0]
        evaluations = run.get_asset_check_evaluations()
        failed = [(e.asset_key.path[-1], e.check_name) for e in evaluations if not e.passed]
        assert failed == [], failed[:5]
        # more tables than planned_checks_max_tables: every table's 3 checks and the binlog
        # asset's 2 logged by the run, none left out
        assert run.dagster_run.tags.get("dagster_mysql_cdc/table_checks") == "logged"
        assert len({(tuple(e.asset_key.path), e.check_name) for e in evaluations}) == 3 * TABLES + 2
        _assert_lake_equals_source(local_storage, db)
        _assert_each_change_once(local_storage, db, 1)

        # 2. one table's commit fails mid-window: it stops alone, the others are committed
        real_commit = table_batch.TableBatch.commit
        victim = _name(77)

        def failing_commit(self, *a, **kw):
            if self.table == victim:
                raise OSError("injected: the object store refused the commit")
            return real_commit(self, *a, **kw)

        monkeypatch.setattr(table_batch.TableBatch, "commit", failing_commit)
        _touch_all(conn, db, 2)
        (run,) = cdc.ticks().runs
        assert run.success
        stopped = StreamCursor.parse(cdc.cursor).stopped_tables()
        assert [t.split(".")[-1] for t in stopped] == [victim]
        expected, key = source_rows(db, victim)
        assert live_state_rows(local_storage, local_storage.uri(db, db, victim, "state"), key) != expected
        monkeypatch.setattr(table_batch.TableBatch, "commit", real_commit)
        # the backoff has run out (the cursor's retry time moved to now): the stopped table is
        # caught up from where it stopped, though the source is idle
        cursor = json.loads(cdc.cursor)
        for st in cursor["stopped"].values():
            st["retry_at"] = 0
        cdc.cursor = json.dumps(cursor)
        ticks = cdc.ticks()
        assert ticks.runs and all(r.success for r in ticks.runs)
        assert not StreamCursor.parse(cdc.cursor).stopped_tables()
        _assert_lake_equals_source(local_storage, db)
        _assert_each_change_once(local_storage, db, 2)

        # 3. the window fails after every table committed (before the schema history and the
        #    cursor): the retry skips every table's commit
        real_append = SchemaHistory.append
        calls = {"n": 0}

        def failing_append(self, records, *, app_id, version):
            calls["n"] += 1
            if calls["n"] == 1:
                raise OSError("injected: the run died after the tables' commits")
            return real_append(self, records, app_id=app_id, version=version)

        monkeypatch.setattr(SchemaHistory, "append", failing_append)
        _touch_all(conn, db, 3)
        ticks = cdc.ticks(raise_on_error=False)  # the window fails, then its retry (the backoff)
        assert len(ticks.runs) >= 2, sorted({r[:300] for r in ticks.skip_reasons})
        assert not ticks.runs[0].success and ticks.runs[-1].success
        assert calls["n"] >= 2
        assert StreamCursor.parse(cdc.cursor).committed is not None
        _assert_lake_equals_source(local_storage, db)
        _assert_each_change_once(local_storage, db, 3)
