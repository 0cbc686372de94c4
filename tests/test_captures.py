"""Two captures of one MariaDB server in one Dagster instance (two code locations, or two
``@mysql_cdc_assets``), each capturing a database of its own: they plan windows with the same
bounds, and each sensor must settle only its own runs.

The issue ("Nothing lost", point 1): run keys were the window alone, and the sensor found "its"
run by the key, so capture A committed a window on the strength of capture B's run: A's window
run had failed, B's run of the same window succeeded, A's sensor logged "committed window ...
(run <B's run>)", never retried, and A's change never reached the lake.
"""

import json

import pytest
from lake_utils import live_state_rows, source_rows
from sensor_harness import SensorDriven, capture_resource, scratch_database

from dagster_mysql_cdc.dagster_integration.cursor import StreamCursor
from dagster_mysql_cdc.dagster_integration.protocol import (
    CAPTURE_TAG,
    REQUEST_TAG,
    WINDOW_END_TAG,
    WINDOW_START_TAG,
)
from dagster_mysql_cdc.events import BinlogPosition
from dagster_mysql_cdc.sink.storage import StorageSettings

pytestmark = [pytest.mark.integration, pytest.mark.spark]


def committed(cdc: SensorDriven):
    return StreamCursor.parse(cdc.cursor).committed


def test_two_captures_of_one_server_settle_only_their_own_runs(tmp_path):
    with scratch_database("capa") as (db_a, conn), scratch_database("capb") as (db_b, _):
        with conn.cursor() as cur:
            for db in (db_a, db_b):
                cur.execute(f"CREATE TABLE {db}.t (id INT PRIMARY KEY, v INT)")
                cur.execute(f"INSERT INTO {db}.t VALUES (1, 1)")
        a = SensorDriven(capture_resource(db_a), str(tmp_path / "lake_a"))
        b = SensorDriven(capture_resource(db_b), str(tmp_path / "lake_b"))
        b.instance = a.instance  # one Dagster instance for both
        for _ in range(5):  # both caught up at the same offset: their next windows are the same
            a.ticks()
            b.ticks()
            if committed(a) == committed(b):
                break
        assert committed(a) == committed(b)
        with conn.cursor() as cur:
            cur.execute(f"UPDATE {db_a}.t SET v = 2 WHERE id = 1")
            cur.execute(f"UPDATE {db_b}.t SET v = 2 WHERE id = 1")
        (req_a,) = a.tick_once().run_requests
        (req_b,) = b.tick_once().run_requests
        window = (req_a.tags[WINDOW_START_TAG], req_a.tags[WINDOW_END_TAG])
        assert window == (req_b.tags[WINDOW_START_TAG], req_b.tags[WINDOW_END_TAG])
        # A's window run fails (its server refuses the password), then B's run of the same
        # window succeeds
        broken = {**a.resources, "mysql": capture_resource(db_a, password="wrong")}
        assert not a.launch(req_a, broken).success
        assert b.launch(req_b).success
        res = a.tick_once()
        start = BinlogPosition.from_dict(json.loads(window[0]))
        assert committed(a) == start, f"A committed B's run: {res.skip_message}"
        (retry,) = res.run_requests  # A retries its own window
        assert (retry.tags[WINDOW_START_TAG], retry.tags[WINDOW_END_TAG]) == window
        assert retry.tags[REQUEST_TAG].endswith(":a2")
        assert a.launch(retry).success
        a.ticks()
        b.ticks()
        for db, cdc in ((db_a, a), (db_b, b)):
            storage = StorageSettings(base_uri=cdc.resources["lake"].base_uri)
            expected, key = source_rows(db, "t")
            assert live_state_rows(storage, storage.uri(db, db, "t", "state"), key) == expected, db
            assert expected == [{"id": 1, "v": 2}]
        # the runs carry their capture: every run key and capture tag of A differs from B's
        runs = a.instance.get_runs()
        keys = {cap: {r.tags[REQUEST_TAG] for r in runs if r.tags.get(CAPTURE_TAG) == cap} for cap in
                {r.tags.get(CAPTURE_TAG) for r in runs}}  # fmt: skip
        assert None not in keys and len(keys) == 2
        ka, kb = keys.values()
        assert not ka & kb
        assert req_a.tags[CAPTURE_TAG] != req_b.tags[CAPTURE_TAG]
        assert json.loads(req_a.tags[WINDOW_END_TAG]) == json.loads(req_b.tags[WINDOW_END_TAG])


def test_a_window_that_changes_none_of_a_captures_tables_runs_nothing_for_it(tmp_path):
    """Issue 39: every window started a run in every capture of the server, each reporting "0
    table(s) changed". A window in which none of a capture's tables changed now moves its offset
    without a run; its own changes and its database's DDL still run (and reach the lake), and
    so does a window while its incremental snapshot is in progress."""
    from dataclasses import replace

    from conftest import master_position

    with scratch_database("idla") as (db_a, conn), scratch_database("idlb") as (db_b, _):
        with conn.cursor() as cur:
            for db in (db_a, db_b):
                cur.execute(f"CREATE TABLE {db}.t (id INT PRIMARY KEY, v INT)")
                cur.execute(f"INSERT INTO {db}.t VALUES (1, 1)")
        a = SensorDriven(capture_resource(db_a), str(tmp_path / "lake_a"))
        b = SensorDriven(capture_resource(db_b), str(tmp_path / "lake_b"))
        b.instance = a.instance  # one Dagster instance for both
        a.ticks()
        b.ticks()
        runs = len(a.instance.get_runs())
        for v in (2, 3):  # windows of B's changes only: no run for A
            with conn.cursor() as cur:
                cur.execute(f"UPDATE {db_b}.t SET v = {v} WHERE id = 1")
            res = a.tick_once()
            assert not res.run_requests, [r.tags for r in res.run_requests]
            assert res.skip_message.startswith("caught up at"), res.skip_message
            assert "committed without a run: none of the captured tables changed in it" in res.skip_message
            head = master_position()
            assert (committed(a).file, committed(a).pos) == (head.file, head.pos)
            assert committed(a).gtid_set == head.gtid_set
            assert len(a.instance.get_runs()) == runs
            (req_b,) = b.tick_once().run_requests  # B's window runs as before
            assert b.launch(req_b).success
            runs += 1
        # A's own change, then DDL of A's database (with a change of B in the same windows) run
        for sql in (f"UPDATE {db_a}.t SET v = 5 WHERE id = 1", f"ALTER TABLE {db_a}.t ADD COLUMN w INT"):
            with conn.cursor() as cur:
                cur.execute(sql)
                cur.execute(f"UPDATE {db_b}.t SET v = v + 1 WHERE id = 1")
            (req,) = a.tick_once().run_requests
            assert a.launch(req).success
            a.ticks()
        with conn.cursor() as cur:
            cur.execute(f"UPDATE {db_a}.t SET w = 7 WHERE id = 1")
        a.ticks()
        b.ticks()
        for db, cdc in ((db_a, a), (db_b, b)):
            storage = StorageSettings(base_uri=cdc.resources["lake"].base_uri)
            expected, key = source_rows(db, "t")
            assert live_state_rows(storage, storage.uri(db, db, "t", "state"), key) == expected, db
        assert source_rows(db_a, "t")[0] == [{"id": 1, "v": 5, "w": 7}]
        # an incremental snapshot in progress reads its chunks in window runs: a window of B's
        # changes is still requested for A (not launched: the state here is a stand-in)
        kept = a.cursor
        a.cursor = replace(
            StreamCursor.parse(kept),
            incremental={"snapshot_id": "s1", "tables": [{"table": f"{db_a}.t"}], "paused": True},
        ).to_json()
        with conn.cursor() as cur:
            cur.execute(f"UPDATE {db_b}.t SET v = v + 1 WHERE id = 1")
        assert len(a.tick_once().run_requests) == 1
