"""Signals, incremental (DBLog watermark) and blocking snapshots end to end: MariaDB → binlog sensor
→ window runs → Delta change log + state, checked against the source row for row.

Every test has its own scratch database, logical server name, replication client id and lake, and
uses ``snapshot_mode="no_data"``: table data reaches the lake only through the snapshot the signal
asks for, plus the binlog. Nothing is mocked; one test injects a failure into our own
``LakeWriter`` to crash a window run after its chunk plan was saved.

No ``from __future__ import annotations``: Dagster reads the ``context`` annotation of the asset
function defined here.
"""

import json
import random
import re
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

import dagster as dg
import pytest
from conftest import CDC_PASSWORD, CDC_USER, MYSQL_HOST, MYSQL_PORT, master_position, root_connect
from lake_utils import live_state_rows, read_delta, source_rows

from dagster_mysql_cdc import CdcLakeResource, MySqlCdcResource, build_mysql_cdc_sensor, mysql_cdc_assets
from dagster_mysql_cdc.dagster_integration.cursor import StreamCursor
from dagster_mysql_cdc.dagster_integration.local import TickLog, run_sensor_ticks
from dagster_mysql_cdc.dagster_integration.protocol import MODE_TAG, REQUEST_TAG
from dagster_mysql_cdc.engine.incremental import IncrementalState, load_plan
from dagster_mysql_cdc.events import BinlogPosition
from dagster_mysql_cdc.sink.schema_history import SchemaHistory
from dagster_mysql_cdc.sink.storage import StorageSettings

pytestmark = [pytest.mark.integration, pytest.mark.spark]

WATERMARK_TYPES = ("snapshot-window-open", "snapshot-window-close")


# -- source helpers ----------------------------------------------------------------------------


@pytest.fixture
def scratch_db(request):
    """A fresh database only this test writes to (dropped afterwards)."""
    name = (
        "inc_"
        + "".join(ch if ch.isalnum() else "_" for ch in request.node.name)[:40]
        + "_"
        + uuid.uuid4().hex[:6]
    )
    sql(None, f"CREATE DATABASE `{name}`")
    yield name
    sql(None, f"DROP DATABASE IF EXISTS `{name}`")


def sql(db: str | None, *statements: str, params: list | None = None) -> None:
    """Run statements as root, each in autocommit (``USE db`` first: MariaDB's ``seq_1_to_N``
    sequence tables resolve in the current database)."""
    conn = root_connect()
    try:
        with conn.cursor() as cur:
            if db:
                cur.execute(f"USE `{db}`")
            for s in statements:
                cur.execute(s, params) if params is not None else cur.execute(s)
    finally:
        conn.close()


def query(statement: str, params: list | None = None) -> list[tuple]:
    conn = root_connect()
    try:
        with conn.cursor() as cur:
            cur.execute(statement, params)
            return [tuple(r) for r in cur.fetchall()]
    finally:
        conn.close()


def signal(db: str, sid: str, type_: str, data: Any = None) -> None:
    """Insert a signal row (``data``: a dict is sent as JSON, a string as is)."""
    body = json.dumps(data) if isinstance(data, (dict, list)) else data
    sql(db, "INSERT INTO debezium_signal (id, type, data) VALUES (%s, %s, %s)", params=[sid, type_, body])


def watermark_rows(db: str) -> int:
    return query(
        f"SELECT COUNT(*) FROM `{db}`.debezium_signal WHERE type IN (%s, %s)", list(WATERMARK_TYPES)
    )[0][0]


class Writer(threading.Thread):
    """Applies random changes until stopped (its own connection, autocommit). ``step(cur, rnd)``
    makes one change; errors are kept and re-raised by :meth:`finish`."""

    def __init__(
        self, db: str, step: Callable[[Any, random.Random], None], seed: int = 7, pause: float = 0.002
    ):
        super().__init__(daemon=True)
        self.db, self.step, self.rnd, self.pause = db, step, random.Random(seed), pause
        self.done = threading.Event()
        self.ops = 0
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            conn = root_connect()
            with conn.cursor() as cur:
                cur.execute(f"USE `{self.db}`")
                while not self.done.is_set():
                    self.step(cur, self.rnd)
                    self.ops += 1
                    time.sleep(self.pause)
            conn.close()
        except BaseException as e:  # noqa: BLE001 - reported by finish()
            self.error = e

    def finish(self) -> int:
        self.done.set()
        self.join(timeout=60)
        assert not self.is_alive(), "writer thread did not stop"
        if self.error is not None:
            raise self.error
        return self.ops


# -- the CDC under test ------------------------------------------------------------------------


def binlog_metadata(run: dg.ExecuteInProcessResult) -> dict[str, Any]:
    mats = [e.event_specific_data.materialization for e in run.get_asset_materialization_events()]
    (md,) = [m.metadata for m in mats if m.asset_key.path[-1] == "binlog"]
    return {k: v.value for k, v in md.items()}


class Cdc:
    """Assets, resources, sensor and instance of one test; ticks the sensor like the daemon and
    collects what the stream runs reported on the binlog asset."""

    def __init__(self, db: str, tmp_path, lake_options: dict | None = None, **resource_fields):
        self.db = db
        self.server = f"inc_{uuid.uuid4().hex[:8]}"
        self.storage = StorageSettings(base_uri=str(tmp_path / "lake"))
        fields = dict(
            host=MYSQL_HOST,
            port=MYSQL_PORT,
            user=CDC_USER,
            password=CDC_PASSWORD,
            server_name=self.server,
            server_id=random.randint(1_000_000, 2_000_000_000),
            database_include_list=[db],
            snapshot_mode="no_data",
            stream_follow_seconds=0.0,  # one window per run: the tests count chunks per run
        )
        fields.update(resource_fields)
        self.mysql = MySqlCdcResource(**fields)
        assert self.mysql.create_signal_table() == f"{db}.debezium_signal"
        self.lake = CdcLakeResource(base_uri=self.storage.base_uri, **(lake_options or {}))
        tables = self.mysql.discover_tables()

        @mysql_cdc_assets(tables=tables, server_name=self.server)
        def cdc(context: dg.AssetExecutionContext, mysql: MySqlCdcResource, lake: CdcLakeResource):
            yield from mysql.sync(context=context, lake=lake)

        self.assets = cdc
        # a killed or failed window is retried at the next tick (the fault tests kill retries too;
        # the sensor's backoff between retries is tested in tests/test_health.py)
        self.sensor = build_mysql_cdc_sensor(cdc, retry_backoff_seconds=0)
        self.instance = dg.DagsterInstance.ephemeral()
        self.resources = {"mysql": self.mysql, "lake": self.lake}
        self.cursor: str | None = None
        self.runs: list[dg.ExecuteInProcessResult] = []
        self.signals: list[str] = []  # "signals" metadata of every successful stream run, in order
        self.chunks: list[dict] = []  # "incremental_chunks" metadata of every successful stream run

    # -- driving ---------------------------------------------------------------------------------
    def tick(self, raise_on_error: bool = True) -> TickLog:
        """One sensor tick, executing the run it requests (as the daemon + run launcher would)."""
        log = run_sensor_ticks(
            self.sensor,
            self.assets,
            self.resources,
            self.instance,
            cursor=self.cursor,
            max_ticks=1,
            until_caught_up=False,
            raise_on_error=raise_on_error,
        )
        self.cursor = log.cursor
        for r in log.runs:
            self.runs.append(r)
            if r.success and r.dagster_run.tags.get(MODE_TAG) == "stream":
                md = binlog_metadata(r)
                self.signals += md["signals"]
                self.chunks += md["incremental_chunks"]
        return log

    def state(self) -> StreamCursor:
        return StreamCursor.parse(self.cursor)

    def incremental(self) -> dict | None:
        return self.state().incremental

    def settle(
        self,
        target: BinlogPosition | None = None,
        until: Callable[["Cdc"], bool] | None = None,
        max_ticks: int = 40,
    ) -> None:
        """Tick until the committed offset reaches ``target`` (default: the server's position
        now) and ``until(self)`` holds. "Caught up" is no stop condition: other sessions write to
        the shared server."""
        target = target or master_position()
        for _ in range(max_ticks):
            self.tick()
            c = self.state()
            if (
                c.snapshot_done
                and c.committed is not None
                and c.committed.sort_key() >= target.sort_key()
                and (until is None or until(self))
            ):
                return
        raise AssertionError(f"not settled in {max_ticks} ticks: cursor {self.cursor}")

    def run_snapshot_to_completion(self, max_ticks: int = 40) -> None:
        """Tick until an incremental snapshot has started and then finished (cursor ``incremental``
        back to null), then until the offset reaches the server's position."""
        started = False
        for _ in range(max_ticks):
            self.tick()
            inc = self.incremental()
            started = started or inc is not None
            if started and inc is None:
                self.settle()
                return
        raise AssertionError(f"incremental snapshot not finished in {max_ticks} ticks: cursor {self.cursor}")

    # -- checking --------------------------------------------------------------------------------
    def uri(self, table: str, kind: str) -> str:
        return self.storage.uri(self.server, self.db, table, kind)

    def lake_rows(self, table: str, key: list[str]) -> list[dict]:
        return live_state_rows(self.storage, self.uri(table, "state"), key)

    def check(self, table: str) -> list[dict]:
        """Lake state == source, row for row, all columns; returns the rows."""
        expected, key = source_rows(self.db, table)
        got = self.lake_rows(table, key)
        if got != expected:
            g = {tuple(r[k] for k in key): r for r in got}
            e = {tuple(r[k] for k in key): r for r in expected}
            missing = sorted(set(e) - set(g))[:5]
            extra = sorted(set(g) - set(e))[:5]
            differ = [(k, g[k], e[k]) for k in sorted(set(g) & set(e)) if g[k] != e[k]][:3]
            pytest.fail(
                f"{self.db}.{table}: lake state differs from source ({len(got)} vs {len(expected)} rows); "
                f"missing {missing}, extra {extra}, differing {differ}"
            )
        return expected

    def incremental_events(self, table: str) -> list[dict]:
        log = read_delta(self.storage, self.uri(table, "changelog")).to_pylist()
        return [e for e in log if e["source"]["snapshot"] == "incremental"]

    def incremental_keys(self, table: str, key: list[str]) -> list[tuple]:
        """Keys of the ``op=r`` incremental-snapshot events, each asserted to be emitted once."""
        events = self.incremental_events(table)
        assert all(e["op"] == "r" and e["before"] is None for e in events)
        keys = [tuple(e["after"][k] for k in key) for e in events]
        dups = sorted({k for k in keys if keys.count(k) > 1})[:5] if len(set(keys)) != len(keys) else []
        assert not dups, f"rows emitted by more than one chunk: {dups}"
        return sorted(keys)

    def emitted_chunks(self, table: str) -> list[dict]:
        chunks = [c for c in self.chunks if c["table"] == f"{self.db}.{table}"]
        ids = [c["chunk"] for c in chunks]
        assert len(ids) == len(set(ids)), f"a chunk was emitted twice: {ids}"
        return chunks


@pytest.fixture
def make_cdc(spark, tmp_path):
    """``make_cdc(db, **resource_fields) -> Cdc`` (the session Spark JVM is started first)."""
    return lambda db, **kw: Cdc(db, tmp_path, **kw)


def big_step(hi: int) -> Callable[[Any, random.Random], None]:
    """Random writes to ``big``: upserts (new and existing keys), updates, deletes, and small
    multi-statement transactions, keys in [1, hi]."""

    def step(cur, rnd: random.Random) -> None:
        k = rnd.randint(1, hi)
        op = rnd.random()
        if op < 0.3:
            cur.execute(
                "REPLACE INTO big (id, v, n, d, ts) VALUES (%s, %s, %s, %s, NOW(3))",
                (k, f"w{rnd.randint(0, 999)}", rnd.randint(-5, 5), f"{rnd.randint(0, 99999)}.25"),
            )
        elif op < 0.65:
            cur.execute("UPDATE big SET n = n + 1, v = CONCAT('u', id) WHERE id = %s", (k,))
        elif op < 0.9:
            cur.execute("DELETE FROM big WHERE id = %s", (k,))
        else:
            cur.execute("BEGIN")
            cur.execute("UPDATE big SET d = d + 1 WHERE id BETWEEN %s AND %s", (k, k + 15))
            cur.execute("DELETE FROM big WHERE id BETWEEN %s AND %s", (k + 16, k + 18))
            cur.execute("INSERT IGNORE INTO big (id, v, n, d, ts) VALUES (%s, 'tx', 0, 0, NOW(3))", (k + 17,))
            cur.execute("COMMIT")

    return step


# -- tests -------------------------------------------------------------------------------------


def test_incremental_snapshot_of_100k_rows_under_concurrent_writes(scratch_db, make_cdc):
    db = scratch_db
    sql(
        db,
        "CREATE TABLE big (id INT PRIMARY KEY, v VARCHAR(32) NOT NULL, n INT, d DECIMAL(12,2), ts DATETIME(3))",
        "INSERT INTO big SELECT seq, CONCAT('v', seq), seq % 1000, seq / 7, "
        "TIMESTAMP '2024-01-01 00:00:00' + INTERVAL seq SECOND FROM seq_1_to_100000",
    )
    cdc = make_cdc(db, incremental_snapshot_chunk_size=2000, incremental_snapshot_max_chunks_per_run=20)
    cdc.settle()  # no_data snapshot: schema and position only
    assert query(f"SELECT COUNT(*) FROM `{db}`.big")[0][0] == 100_000
    assert cdc.lake_rows("big", ["id"]) == []

    writer = Writer(db, big_step(110_000))
    writer.start()
    try:
        # a UUID signal id, as Debezium's documentation uses (chunk ids must stay unique beyond chunk 9)
        sid = str(uuid.uuid4())
        signal(db, sid, "execute-snapshot", {"data-collections": [f"{db}.big"], "type": "incremental"})
        max_key = None
        for _ in range(40):
            cdc.tick()
            inc = cdc.incremental()
            if inc is not None:
                assert inc["snapshot_id"] == sid and [t["table"] for t in inc["tables"]] == [f"{db}.big"]
                max_key = max_key or inc["tables"][0]["max_key"]
            elif max_key is not None:
                break
        else:
            raise AssertionError(f"incremental snapshot not finished: {cdc.cursor}")
    finally:
        ops = writer.finish()
    cdc.settle()
    assert ops > 100, "the writer ran during the snapshot"
    assert f"incremental snapshot {sid}: queued ['{db}.big']" in cdc.signals
    # the table's own materializations show the progress while it runs
    progress = [
        e.event_specific_data.materialization.metadata["incremental_snapshot"].value
        for r in cdc.runs
        if r.success
        for e in r.get_asset_materialization_events()
        if e.asset_key.path[-1] == "big"
        and "incremental_snapshot" in e.event_specific_data.materialization.metadata
    ]
    assert len(progress) >= 2, progress
    running = [p for p in progress if p["status"] == "running" and p["rows_done"] > 0]
    assert running and 0 < running[0]["percent"] < 100 and running[0]["chunks_total_estimate"] >= 40
    assert running[0]["current_key_range"] is not None and running[0]["rows_done"] > 0
    assert progress[-1]["status"] == "done" and progress[-1]["percent"] == 100.0

    rows = cdc.check("big")
    assert len(rows) > 90_000
    chunks = cdc.emitted_chunks("big")
    assert 45 <= len(chunks) <= 50, "about 100000 keys / 2000 per chunk"
    assert sum(c["read"] for c in chunks) > 90_000
    assert all(c["emitted"] + c["dropped"] == c["read"] for c in chunks)
    keys = cdc.incremental_keys("big", ["id"])
    assert sum(c["emitted"] for c in chunks) == len(keys)
    assert max_key is not None and max_key[0] >= 100_000
    assert all(1 <= k <= max_key[0] for (k,) in keys), (
        "rows above the max key at start come from the binlog only"
    )


def test_incremental_snapshot_in_splits_under_concurrent_writes(scratch_db, make_cdc):
    """snapshot_split_reads: a run's chunks of a table are read by the Spark executors as splits
    inside one watermark window; the lake still equals the source under concurrent writes."""
    db = scratch_db
    sql(
        db,
        "CREATE TABLE big (id INT PRIMARY KEY, v VARCHAR(32) NOT NULL, n INT, d DECIMAL(12,2), ts DATETIME(3))",
        "INSERT INTO big SELECT seq, CONCAT('v', seq), seq % 1000, seq / 7, "
        "TIMESTAMP '2024-01-01 00:00:00' + INTERVAL seq SECOND FROM seq_1_to_60000",
    )
    cdc = make_cdc(
        db,
        incremental_snapshot_chunk_size=2000,
        incremental_snapshot_max_chunks_per_run=12,
        snapshot_split_reads=True,
    )
    cdc.settle()
    writer = Writer(db, big_step(66_000))
    writer.start()
    try:
        signal(db, "split-1", "execute-snapshot", {"data-collections": [f"{db}.big"]})
        cdc.run_snapshot_to_completion()
    finally:
        ops = writer.finish()
    cdc.settle()
    assert ops > 100, "the writer ran during the snapshot"
    cdc.check("big")
    chunks = cdc.emitted_chunks("big")
    assert all(c["emitted"] + c["dropped"] == c["read"] for c in chunks)
    assert sum(c["read"] for c in chunks) > 55_000
    groups = [c for c in chunks if c["read"] > 2000]
    assert groups and len(chunks) <= 8, f"a run's chunks are read as one group: {chunks}"
    assert sum(c["dropped"] for c in chunks) > 0, "keys the binlog changed inside a window are dropped"
    keys = cdc.incremental_keys("big", ["id"])
    assert sum(c["emitted"] for c in chunks) == len(keys)


def test_split_groups_are_bounded_and_runs_follow_the_time_budget(scratch_db, make_cdc, spark_lake_options):
    """A group of splits holds at most tasks x snapshot_split_rows rows; with a time budget a run
    stops reading chunks once it is spent, whatever incremental_snapshot_max_chunks_per_run says.
    On a local Spark and on Spark Connect."""
    db = scratch_db
    sql(
        db,
        "CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(16))",
        "INSERT INTO t SELECT seq, CONCAT('v', seq) FROM seq_1_to_20000",
    )
    cdc = make_cdc(
        db,
        incremental_snapshot_chunk_size=1000,
        incremental_snapshot_max_chunks_per_run=1000,
        incremental_snapshot_run_seconds=0.001,
        snapshot_split_reads=True,
        snapshot_split_rows=2000,
        snapshot_max_connections=2,
        lake_options=spark_lake_options,
    )
    cdc.settle()
    signal(db, "budget-1", "execute-snapshot", {"data-collections": [f"{db}.t"]})
    cdc.run_snapshot_to_completion()
    cdc.check("t")
    chunks = cdc.emitted_chunks("t")
    assert chunks[0]["read"] == 1000, "the first chunk is read alone (it finds the key range)"
    assert all(c["read"] <= 2 * 2000 for c in chunks), chunks
    assert len(chunks) >= 5, "one group per run: the time budget ends each run's reads"
    per_run = [
        len(binlog_metadata(r)["incremental_chunks"])
        for r in cdc.runs
        if r.success and r.dagster_run.tags.get(MODE_TAG) == "stream"
    ]
    assert max(per_run) == 1, per_run


def test_a_following_run_reads_the_whole_snapshot_window_after_window(scratch_db, make_cdc):
    """A following stream run (the README default) reads an incremental snapshot's chunks window
    after window for its whole budget, on a busy and then an idle binlog, instead of one
    window's incremental_snapshot_max_chunks_per_run per sensor tick (a 100M-row table took
    about 13 h at the defaults). Each window's chunk plan extends it past its watermarks; the
    next window starts there. Rows stay exact under concurrent writes and every key is emitted
    once."""
    db = scratch_db
    sql(
        db,
        "CREATE TABLE big (id INT PRIMARY KEY, v VARCHAR(32) NOT NULL, n INT, d DECIMAL(12,2), ts DATETIME(3))",
        "INSERT INTO big SELECT seq, CONCAT('v', seq), seq % 1000, seq / 7, "
        "TIMESTAMP '2024-01-01 00:00:00' + INTERVAL seq SECOND FROM seq_1_to_12000",
    )
    cdc = make_cdc(
        db,
        incremental_snapshot_chunk_size=500,
        incremental_snapshot_max_chunks_per_run=3,
        stream_follow_seconds=120.0,
        stream_follow_idle_seconds=1.0,
    )
    cdc.settle()
    writer = Writer(db, big_step(13_000), pause=0.01)
    writer.start()
    stopper = threading.Timer(6.0, writer.done.set)  # busy, then idle: both kinds of windows
    stopper.start()
    try:
        signal(db, "follow-1", "execute-snapshot", {"data-collections": [f"{db}.big"]})
        runs_before = len(cdc.runs)
        for _ in range(6):
            cdc.tick()
            if cdc.incremental() is None and any("follow-1" in s for s in cdc.signals):
                break
        else:
            raise AssertionError(f"incremental snapshot not finished: {cdc.cursor}")
    finally:
        stopper.cancel()
        ops = writer.finish()
    cdc.settle()
    assert ops > 50, "the writer ran during the snapshot"
    stream_runs = [
        r for r in cdc.runs[runs_before:] if r.success and r.dagster_run.tags.get(MODE_TAG) == "stream"
    ]
    per_run = [len(binlog_metadata(r)["incremental_chunks"]) for r in stream_runs]
    assert max(per_run) >= 20, f"one run read chunk after chunk (3 per window): {per_run}"
    windows = [binlog_metadata(r).get("follow_windows") for r in stream_runs]
    rows = cdc.check("big")
    assert len(rows) > 11_000
    chunks = cdc.emitted_chunks("big")
    assert 24 <= len(chunks) <= 27, "about 12000 keys / 500 per chunk"
    assert all(c["emitted"] + c["dropped"] == c["read"] for c in chunks)
    keys = cdc.incremental_keys("big", ["id"])
    assert sum(c["emitted"] for c in chunks) == len(keys)
    print(f"chunks per run {per_run}, follow-on windows {windows}, {ops} concurrent writes")


def test_failed_run_mid_snapshot_retries_with_the_saved_plan(scratch_db, make_cdc, monkeypatch):
    db = scratch_db
    sql(
        db,
        "CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(20), n INT)",
        "INSERT INTO t SELECT seq, CONCAT('v', seq), seq FROM seq_1_to_10000",
    )
    cdc = make_cdc(db, incremental_snapshot_chunk_size=1000, incremental_snapshot_max_chunks_per_run=2)
    cdc.settle()
    signal(db, "snap-crash", "execute-snapshot", {"data-collections": [f"{db}.t"]})
    cdc.settle(until=lambda c: bool(c.incremental()) and c.incremental()["tables"][0]["chunks"] >= 2)
    before = cdc.incremental()["tables"][0]
    assert before["chunks"] < 8, "enough of the table left for the crash window"

    # changes both in the part already read and in the part still to read
    sql(
        db,
        "UPDATE t SET n = -n WHERE id BETWEEN 9000 AND 9010",
        "DELETE FROM t WHERE id BETWEEN 100 AND 110",
        "INSERT INTO t SELECT seq, 'new', 0 FROM seq_20001_to_20010",
    )
    wm_before = watermark_rows(db)

    calls = []

    def crash(self, *args, **kwargs):
        calls.append(args[:2])
        raise RuntimeError("injected crash after the chunk plan was saved")

    # the run dies after the window's tables are written (a table's own write failure would stop
    # that table alone, engine/isolation.py): at the schema history's commit
    with monkeypatch.context() as m:
        m.setattr(SchemaHistory, "append", crash)
        log = cdc.tick(raise_on_error=False)
    (failed,) = log.runs
    assert not failed.success and calls, "the window run failed at its last commit"
    inflight = cdc.state().inflight
    assert inflight is not None and inflight.attempt == 1
    plan = load_plan(cdc.storage, cdc.server, inflight.start, IncrementalState.from_dict(cdc.incremental()))
    assert plan is not None and len(plan.chunks) == 2, "the failed attempt saved its chunk plan"
    wm_after_crash = watermark_rows(db)
    assert wm_after_crash == wm_before + 4, "2 chunks x (open + close) watermarks"

    log = cdc.tick()  # the sensor sees the failure and re-requests the window as attempt 2
    (retry,) = log.runs
    assert retry.success
    assert retry.dagster_run.tags[REQUEST_TAG].endswith(":a2")
    md = binlog_metadata(retry)
    assert "reusing the chunk plan of an earlier attempt (2 chunks)" in md["signals"]
    assert [c["chunk"] for c in md["incremental_chunks"]] == [c.id for c in plan.chunks]
    assert watermark_rows(db) == wm_after_crash, "the retry wrote no new watermarks"
    after = md["incremental_state"]["tables"][0]
    assert after["chunks"] == plan.state_after["tables"][0]["chunks"]
    assert after["last_key"] == plan.state_after["tables"][0]["last_key"]

    cdc.run_snapshot_to_completion()
    cdc.check("t")
    # every row read exactly once: the snapshot went on after the last completed chunk
    assert cdc.incremental_keys("t", ["id"]) == [(i,) for i in range(1, 10_001)]
    assert len(cdc.emitted_chunks("t")) == 10


def test_progress_metadata_counts_every_chunk_up_to_the_finished_snapshot(scratch_db, make_cdc):
    """Issue "status that says why": a finished incremental snapshot showed ``rows_done: 0`` next
    to 100 % (the finishing window counted rows under a key its chunk lines do not have, and only
    its own chunks), and ``current_key_range`` was empty. The table's page now shows the rows and
    chunks read so far in every window, all of them at 100 %, and each window's key range."""
    db = scratch_db
    sql(
        db,
        "CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(20))",
        "INSERT INTO t SELECT seq, CONCAT('v', seq) FROM seq_1_to_2600",
    )
    cdc = make_cdc(db, incremental_snapshot_chunk_size=500, incremental_snapshot_max_chunks_per_run=2)
    cdc.settle()
    signal(db, "progress-1", "execute-snapshot", {"data-collections": [f"{db}.t"]})
    cdc.run_snapshot_to_completion()
    progress = [
        e.event_specific_data.materialization.metadata["incremental_snapshot"].value
        for r in cdc.runs
        if r.success
        for e in r.get_asset_materialization_events()
        if e.asset_key.path[-1] == "t"
        and "incremental_snapshot" in e.event_specific_data.materialization.metadata
    ]
    chunks = cdc.emitted_chunks("t")
    assert len(chunks) == 6 and sum(c["read"] for c in chunks) == 2600  # 5 full chunks and 100 rows
    *running, done = progress
    assert done["status"] == "done" and done["percent"] == 100.0
    assert done["rows_done"] == 2600 and done["chunks_done"] == 6, done
    assert done["current_key_range"] == {"after": [2500], "up_to": None}, done  # the last chunk
    assert running and all(p["status"] == "running" for p in running)
    assert [p["rows_done"] for p in running] == [1000 * (i + 1) for i in range(len(running))], running
    assert running[0]["current_key_range"] == {"after": [500], "up_to": [1000]}, running[0]


def test_pause_resume_stop_and_log_signals(scratch_db, make_cdc):
    db = scratch_db
    table = f"{db}.t"
    sql(
        db,
        "CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(20), n INT)",
        "INSERT INTO t SELECT seq, CONCAT('v', seq), seq FROM seq_1_to_6000",
    )
    cdc = make_cdc(db, incremental_snapshot_chunk_size=500, incremental_snapshot_max_chunks_per_run=2)
    cdc.settle()

    signal(db, "snap-prs", "execute-snapshot", {"data-collections": [table]})
    signal(db, "log-1", "log", {"message": "operator note at {} (before pausing)"})
    cdc.settle(until=lambda c: bool(c.incremental()) and c.incremental()["tables"][0]["chunks"] >= 2)
    logs = [s for s in cdc.signals if s.startswith("log signal log-1: ")]
    assert len(logs) == 1, cdc.signals
    assert re.fullmatch(
        r"log signal log-1: operator note at mysql-bin\.\d+:\d+ \(before pausing\)", logs[0]
    ), logs

    signal(db, "pause-1", "pause-snapshot", {"type": "incremental"})
    cdc.settle()
    inc = cdc.incremental()
    assert inc["paused"] is True and inc["snapshot_id"] == "snap-prs"
    (prog,) = inc["tables"]
    assert prog["table"] == table and prog["chunks"] >= 2
    paused_chunks = prog["chunks"]
    assert prog["last_key"] == [500 * paused_chunks] and prog["max_key"] == [6000]
    assert any(s.startswith("incremental snapshot paused by pause-1 at mysql-bin.") for s in cdc.signals)

    # while paused, streaming goes on and no chunk is read
    emitted_before = len(cdc.emitted_chunks("t"))
    sql(db, "UPDATE t SET v = 'while paused' WHERE id IN (1, 5999)")
    cdc.settle()
    inc = cdc.incremental()
    assert inc["paused"] is True and inc["tables"][0]["chunks"] == paused_chunks
    assert inc["tables"][0]["last_key"] == [500 * paused_chunks]
    assert len(cdc.emitted_chunks("t")) == emitted_before == paused_chunks

    signal(db, "resume-1", "resume-snapshot")
    cdc.settle(until=lambda c: c.incremental()["tables"][0]["chunks"] > paused_chunks)
    inc = cdc.incremental()
    assert inc["paused"] is False and inc["snapshot_id"] == "snap-prs"
    prog = inc["tables"][0]
    assert prog["last_key"] == [500 * prog["chunks"]] and prog["rows"] == 500 * prog["chunks"]
    assert "incremental snapshot resumed by resume-1" in " ".join(cdc.signals)
    last_key_before_stop = prog["last_key"][0]

    signal(db, "stop-1", "stop-snapshot", {"data-collections": [table], "type": "incremental"})
    sql(db, "INSERT INTO t VALUES (7000, 'after stop', 7)")  # capture continues
    cdc.settle()
    assert cdc.incremental() is None, "the only table was stopped"
    assert any(s.startswith("incremental snapshot stopped by stop-1 at mysql-bin.") for s in cdc.signals)
    # the window that read the stop signal had planned chunks of the table: they are dropped
    assert any(
        re.fullmatch(rf"chunk \S+ of stopped table {re.escape(table)} dropped", s) for s in cdc.signals
    ), cdc.signals

    # the lake has exactly a prefix of the table (whole chunks, in key order, each read once) ...
    keys = [k for (k,) in cdc.incremental_keys("t", ["id"])]
    stopped_at = keys[-1]
    assert keys == list(range(1, stopped_at + 1))
    assert stopped_at % 500 == 0 and last_key_before_stop <= stopped_at < 6000
    # ... and otherwise what the binlog brought (row 5999 was updated while paused, 7000 inserted)
    expected, key = source_rows(db, "t")
    assert cdc.lake_rows("t", key) == [
        r for r in expected if r["id"] <= stopped_at or r["id"] in (5999, 7000)
    ]


def test_additional_conditions_filter_and_injection_attempts(scratch_db, make_cdc):
    db = scratch_db
    table = f"{db}.t"
    sql(
        db,
        "CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(20), n INT)",
        "INSERT INTO t SELECT seq, CONCAT('v', seq), seq FROM seq_1_to_3000",
    )
    cdc = make_cdc(db, incremental_snapshot_chunk_size=1000)
    cdc.settle()

    attempts = {
        "inj-1": f"1=1; DROP TABLE {table}",
        "inj-2": f"id IN (SELECT id FROM {table})",
        "inj-3": "id > 0 -- comment",
        "inj-4": "id > 0 /*! OR 1=1 */",
        "inj-5": "id > sleep(5)",
        "inj-6": "(id, n) = 1",  # passes the parser, fails on the server
    }
    for sid, flt in attempts.items():
        signal(
            db,
            sid,
            "execute-snapshot",
            {
                "data-collections": [table],
                "additional-conditions": [{"data-collection": table, "filter": flt}],
            },
        )
    sql(db, "INSERT INTO t VALUES (5001, 'streamed', 5001)")
    # '%' in the filter (modulo, LIKE, a literal) must reach the server untouched
    good = "n % 3 = 0 AND v LIKE 'v%' AND v <> '%s'"
    signal(
        db,
        "good",
        "execute-snapshot",
        {
            "data-collections": [table],
            "additional-conditions": [{"data-collection": table, "filter": good}],
        },
    )
    cdc.run_snapshot_to_completion()

    skipped = {s.split()[1]: s for s in cdc.signals if s.startswith("signal inj-")}
    assert set(skipped) == set(attempts), cdc.signals
    assert "must be a single expression, found 2 statements" in skipped["inj-1"]
    assert "DROP TABLE" in skipped["inj-1"]
    assert "contains a subquery" in skipped["inj-2"]
    assert "contains a comment" in skipped["inj-3"] and "contains a comment" in skipped["inj-4"]
    assert "SLEEP(5)" in skipped["inj-5"] and "not allowed" in skipped["inj-5"]
    assert "fails on the server" in skipped["inj-6"]
    assert all(s.startswith(f"signal {sid} skipped: Filter ") for sid, s in skipped.items())
    assert query(f"SELECT COUNT(*) FROM `{db}`.t")[0][0] == 3001, "the table is intact"

    expected, key = source_rows(db, "t")
    got = cdc.lake_rows("t", key)
    assert got == [r for r in expected if r["n"] % 3 == 0 or r["id"] == 5001]
    assert len(got) == 1001
    assert cdc.incremental_keys("t", key) == [(i,) for i in range(3, 3001, 3)]


def test_malformed_and_unknown_signals_are_skipped(scratch_db, make_cdc):
    db = scratch_db
    sql(
        db,
        "CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(20))",
        "INSERT INTO t SELECT seq, CONCAT('v', seq) FROM seq_1_to_1500",
    )
    cdc = make_cdc(db, incremental_snapshot_chunk_size=1000)
    cdc.settle()

    signal(db, "bad-json", "execute-snapshot", '{"data-collections": ["' + db + '.t"')
    signal(db, "not-obj", "execute-snapshot", '["' + db + '.t"]')
    signal(db, "bad-type", "snapshot-now", "{}")
    signal(db, "unknown-t", "execute-snapshot", {"data-collections": [f"{db}.nope"]})
    signal(db, "half-known", "execute-snapshot", {"data-collections": [f"{db}.nope2", f"{db}.t"]})
    sql(db, "UPDATE t SET v = 'between' WHERE id = 1", "INSERT INTO t VALUES (2000, 'streamed')")
    signal(db, "good", "execute-snapshot", {"data-collections": [f"{db}.t"]})
    cdc.run_snapshot_to_completion()

    text = "\n".join(cdc.signals)
    assert re.search(
        r"signal row at mysql-bin\.\d+:\d+ skipped: Signal 'bad-json' \(execute-snapshot\) has malformed JSON data",
        text,
    ), text
    assert "skipped: Signal 'not-obj' (execute-snapshot) data must be a JSON object, got list" in text
    assert "skipped: Signal 'bad-type' has unknown type 'snapshot-now'" in text
    assert f"signal unknown-t: unknown or not captured data-collections ['{db}.nope']; ignored" in text
    assert f"signal unknown-t: no captured table matches ['{db}.nope']; skipped" in text
    assert f"signal half-known: unknown or not captured data-collections ['{db}.nope2']; ignored" in text
    assert f"incremental snapshot half-known: queued ['{db}.t']" in text
    assert f"{db}.t is already in the incremental snapshot; not queued again" in text
    cdc.check("t")
    assert len(cdc.incremental_keys("t", ["id"])) == 1501, (
        "1..1500 and 2000 (inserted before the snapshot started)"
    )


@pytest.mark.parametrize("split_reads", [False, True], ids=["chunk_by_chunk", "split_reads"])
def test_composite_and_varchar_primary_keys_converge(scratch_db, make_cdc, split_reads):
    db = scratch_db
    sql(
        db,
        "CREATE TABLE comp (a INT, b VARCHAR(10), v INT, note VARCHAR(40), PRIMARY KEY (a, b))",
        "INSERT INTO comp SELECT seq DIV 10, CONCAT('k', seq MOD 10), seq, NULL FROM seq_0_to_4999",
        "CREATE TABLE vpk (k VARCHAR(40) PRIMARY KEY, n INT, note TEXT) DEFAULT CHARSET=utf8mb4",
        "INSERT INTO vpk SELECT CONCAT(MD5(seq), '-é'), seq, REPEAT('x', seq MOD 50) FROM seq_1_to_5000",
    )

    def step(cur, rnd: random.Random) -> None:
        op = rnd.random()
        if op < 0.5:
            a, b = rnd.randint(0, 520), f"k{rnd.randint(0, 11)}"
            c = rnd.random()
            if c < 0.4:
                cur.execute("REPLACE INTO comp VALUES (%s, %s, %s, 'w')", (a, b, rnd.randint(0, 9)))
            elif c < 0.7:
                cur.execute("UPDATE comp SET v = v + 1, note = 'u' WHERE a = %s AND b = %s", (a, b))
            elif c < 0.85:
                cur.execute(
                    "UPDATE comp SET b = CONCAT(b, 'x') WHERE a = %s AND b = %s", (a, b)
                )  # key change
            else:
                cur.execute("DELETE FROM comp WHERE a = %s AND b = %s", (a, b))
        else:
            k = rnd.randint(1, 5300)
            c = rnd.random()
            if c < 0.3:
                cur.execute("REPLACE INTO vpk SELECT CONCAT(MD5(%s), '-é'), %s, 'w'", (k, rnd.randint(0, 9)))
            elif c < 0.7:
                cur.execute("UPDATE vpk SET n = n + 1 WHERE k = CONCAT(MD5(%s), '-é')", (k,))
            else:
                cur.execute("DELETE FROM vpk WHERE k = CONCAT(MD5(%s), '-é')", (k,))

    cdc = make_cdc(
        db,
        incremental_snapshot_chunk_size=700,
        incremental_snapshot_max_chunks_per_run=8,
        snapshot_split_reads=split_reads,
    )
    cdc.settle()
    writer = Writer(db, step, seed=11)
    writer.start()
    try:
        signal(db, "snap-keys", "execute-snapshot", {"data-collections": [f"{db}.comp", f"{db}\\.vp.*"]})
        started = False
        for _ in range(40):
            cdc.tick()
            inc = cdc.incremental()
            started = started or inc is not None
            if started and inc is None:
                break
        else:
            raise AssertionError(f"incremental snapshot not finished: {cdc.cursor}")
    finally:
        ops = writer.finish()
    cdc.settle()
    assert ops > 50
    assert f"incremental snapshot snap-keys: queued ['{db}.comp', '{db}.vpk']" in cdc.signals
    cdc.check("comp")
    cdc.check("vpk")
    assert len(cdc.incremental_keys("comp", ["a", "b"])) > 4000
    assert len(cdc.incremental_keys("vpk", ["k"])) > 4000
    for table in ("comp", "vpk"):
        chunks = cdc.emitted_chunks(table)
        assert all(c["emitted"] + c["dropped"] == c["read"] for c in chunks)
        if split_reads:  # the first chunk alone, then groups of splits read in one window
            assert 2 <= len(chunks) <= 4 and max(c["read"] for c in chunks) > 2 * 700, chunks
        else:
            assert len(chunks) >= 7


def test_insert_delete_watermarks_leave_no_rows(scratch_db, make_cdc):
    db = scratch_db
    sql(
        db,
        "CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(20), n INT)",
        "INSERT INTO t SELECT seq, CONCAT('v', seq), seq FROM seq_1_to_3000",
    )
    cdc = make_cdc(
        db,
        incremental_snapshot_chunk_size=1000,
        incremental_snapshot_max_chunks_per_run=2,
        incremental_snapshot_watermarking_strategy="insert_delete",
    )
    cdc.settle()
    signal(db, "snap-id", "execute-snapshot", {"data-collections": [f"{db}.t"]})
    sql(
        db,
        "UPDATE t SET v = 'upd' WHERE id IN (10, 1500, 2999)",
        "DELETE FROM t WHERE id = 2000",
        "INSERT INTO t VALUES (3001, 'new', 1)",
    )
    cdc.run_snapshot_to_completion()
    cdc.check("t")
    assert len(cdc.emitted_chunks("t")) == 3
    assert cdc.incremental_keys("t", ["id"]) == [(i,) for i in range(1, 3002) if i != 2000]
    assert query(f"SELECT id, type FROM `{db}`.debezium_signal") == [("snap-id", "execute-snapshot")], (
        "insert_delete deletes every open watermark again"
    )


def test_blocking_snapshot_then_streaming_continues(scratch_db, make_cdc):
    db = scratch_db
    sql(
        db,
        "CREATE TABLE t1 (id INT PRIMARY KEY, v VARCHAR(20), n INT)",
        "INSERT INTO t1 SELECT seq, CONCAT('v', seq), seq FROM seq_1_to_2000",
        "CREATE TABLE t2 (id INT PRIMARY KEY, v VARCHAR(20))",
    )
    cdc = make_cdc(db)
    cdc.settle()
    assert cdc.lake_rows("t1", ["id"]) == []

    sql(db, "INSERT INTO t2 VALUES (1, 'before the signal')")
    signal(db, "block-1", "execute-snapshot", {"data-collections": [f"{db}.t1"], "type": "blocking"})
    # changes after the signal, in the same binlog window: streamed after the blocking snapshot
    sql(
        db,
        "INSERT INTO t2 VALUES (2, 'after the signal'), (3, 'after')",
        "UPDATE t1 SET v = 'after' WHERE id = 1",
        "DELETE FROM t1 WHERE id = 2",
        "INSERT INTO t1 VALUES (5000, 'after', 0)",
        "UPDATE t2 SET v = 'updated after' WHERE id = 1",
    )
    cdc.settle()
    assert any(
        re.fullmatch(
            rf"blocking snapshot block-1 of \['{db}\.t1'\]: streaming pauses at mysql-bin\.\d+:\d+", s
        )
        for s in cdc.signals
    ), cdc.signals
    assert any(
        re.fullmatch(rf"blocking snapshot of {db}\.t1: \d+ rows at mysql-bin\.\d+:\d+.*", s)
        for s in cdc.signals
    ), cdc.signals
    assert cdc.incremental() is None
    cdc.check("t1")
    rows = cdc.check("t2")
    assert [r["v"] for r in rows] == ["updated after", "after the signal", "after"]

    sql(db, "UPDATE t1 SET n = -1 WHERE id BETWEEN 100 AND 120", "INSERT INTO t2 VALUES (4, 'later')")
    cdc.settle()
    cdc.check("t1")
    cdc.check("t2")
