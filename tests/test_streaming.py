"""Binlog streaming end to end: MariaDB → binlog sensor → runs → Delta change log + state.

Every test uses its own scratch database and logical server name (so its own lake paths and
schema history) and its own replication client id, and checks the lake against the source row for
row: the live state rows, and the change log replayed in binlog order.
No ``from __future__ import annotations``: Dagster reads the ``context`` annotation of the asset
functions defined through :mod:`killable_run`.
"""

import json
import os
import random
import signal
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import dagster as dg
import pymysql
import pytest
from conftest import (
    CDC_PASSWORD,
    CDC_USER,
    MYSQL_HOST,
    MYSQL_PORT,
    ROOT,
    cdc_settings,
    master_position,
    root_connect,
    run_infra,
)
from deltalake import DeltaTable
from killable_run import build, mysql_resource, request_selection
from lake_utils import live_state_rows, read_delta, source_rows

from dagster_mysql_cdc import build_mysql_cdc_sensor
from dagster_mysql_cdc.dagster_integration.capture_runs import (
    binlog_key_of,
    binlog_materializations,
    reported_end,
)
from dagster_mysql_cdc.dagster_integration.cursor import StreamCursor
from dagster_mysql_cdc.dagster_integration.liveness import WorkerBeat
from dagster_mysql_cdc.dagster_integration.local import TickLog, run_sensor_ticks
from dagster_mysql_cdc.dagster_integration.protocol import (
    MODE_TAG,
    REQUEST_TAG,
    WINDOW_END_TAG,
    WINDOW_START_TAG,
)
from dagster_mysql_cdc.events import BinlogPosition
from dagster_mysql_cdc.sink.storage import StorageSettings
from dagster_mysql_cdc.source.binlog import BinlogReader, RowsBatch
from dagster_mysql_cdc.source.types import TypeOptions

pytestmark = [pytest.mark.integration, pytest.mark.spark]


# -- source helpers ----------------------------------------------------------------------------


@pytest.fixture
def scratch_db(request):
    """A fresh database only this test writes to (dropped afterwards, even after a restart)."""
    name = (
        "st_"
        + "".join(ch if ch.isalnum() else "_" for ch in request.node.name)[:40]
        + "_"
        + uuid.uuid4().hex[:6]
    )
    conn = root_connect()
    with conn.cursor() as cur:
        cur.execute(f"CREATE DATABASE `{name}`")
    conn.close()
    yield name
    conn = root_connect()
    with conn.cursor() as cur:
        cur.execute(f"DROP DATABASE IF EXISTS `{name}`")
    conn.close()


def sql(*statements: str, params: list | None = None) -> None:
    """Run statements as root, each in autocommit."""
    conn = root_connect()
    try:
        with conn.cursor() as cur:
            for s in statements:
                cur.execute(s, params) if params is not None else cur.execute(s)
    finally:
        conn.close()


def binlog_file_names() -> list[str]:
    conn = root_connect()
    try:
        with conn.cursor() as cur:
            cur.execute("SHOW BINARY LOGS")
            return [r[0] for r in cur.fetchall()]
    finally:
        conn.close()


# -- lake helpers ------------------------------------------------------------------------------


def file_seq(name: str) -> int:
    return int(name.rsplit(".", 1)[1])


def ordering_key(e: dict) -> tuple:
    """Binlog order of change-log events: snapshot reads first at their position; the ``d`` of a
    primary-key update before its ``c`` (same file/pos/row)."""
    s = e["source"]
    return (file_seq(s["file"]), s["pos"], 0 if e["op"] == "r" else 1, s["row"], 0 if e["op"] == "d" else 1)


def replay(events: list[dict], key: list[str]) -> dict[tuple, dict]:
    """Apply a change log in binlog order; every delete must find its row, every create must not.

    A snapshot (``r`` events at a new position) replaces everything before it.
    """
    rows: dict[tuple, dict] = {}
    snap = None
    for e in sorted(events, key=ordering_key):
        op, s = e["op"], e["source"]
        if op == "r":
            if s["snapshot"] != "incremental" and snap != (s["file"], s["pos"]):
                rows, snap = {}, (s["file"], s["pos"])
            rows[tuple(e["after"][k] for k in key)] = e["after"]
        elif op == "c":
            k = tuple(e["after"][c] for c in key)
            assert k not in rows, f"create of existing key {k} at {s['file']}:{s['pos']}#{s['row']}"
            rows[k] = e["after"]
        elif op == "u":
            k = tuple(e["after"][c] for c in key)
            assert tuple(e["before"][c] for c in key) == k
            assert k in rows, f"update of missing key {k} at {s['file']}:{s['pos']}#{s['row']}"
            assert rows[k] == e["before"], f"before image of {k} differs from the replayed row"
            rows[k] = e["after"]
        elif op == "d":
            k = tuple(e["before"][c] for c in key)
            assert k in rows, f"delete of missing key {k} at {s['file']}:{s['pos']}#{s['row']}"
            assert rows[k] == e["before"], f"before image of {k} differs from the replayed row"
            del rows[k]
        elif op == "t":
            rows = {}
        else:  # pragma: no cover
            raise AssertionError(f"unknown op {op!r}")
    return rows


def assert_no_duplicate_events(events: list[dict]) -> None:
    seen: dict[tuple, int] = {}
    for e in events:
        if e["op"] == "r":
            continue
        s = e["source"]
        k = (s["file"], s["pos"], s["row"], e["op"])
        seen[k] = seen.get(k, 0) + 1
    dups = {k: n for k, n in seen.items() if n > 1}
    assert not dups, f"duplicate change events (file, pos, row, op): {dups}"


@dataclass
class Cdc:
    """One CDC deployment under test: assets, resources, sensor, Dagster instance, cursor."""

    spec: dict[str, Any]
    storage: StorageSettings
    instance: dg.DagsterInstance
    assets: dg.AssetsDefinition = None  # type: ignore[assignment]
    resources: dict[str, Any] = field(default_factory=dict)
    sensor: dg.SensorDefinition = None  # type: ignore[assignment]
    cursor: str | None = None

    def __post_init__(self):
        self.assets, self.resources = build(self.spec)
        # dead runs stay STARTED here; a killed or failed window is retried at the next tick (the
        # fault tests kill retries too; the backoff between retries: tests/test_health.py)
        self.sensor = build_mysql_cdc_sensor(self.assets, run_wait_seconds=0, retry_backoff_seconds=0)

    @property
    def server(self) -> str:
        return self.spec["server_name"]

    def ticks(self, target: BinlogPosition | None = None, max_ticks: int = 100) -> TickLog:
        """Tick the sensor (running what it requests, like the daemon + run launcher) until the
        committed offset reaches ``target`` (default: the server's position now).

        "Caught up" is not a usable stop condition: other sessions write to the shared server, so
        new windows keep appearing. The last tick may leave a window in flight whose run already
        succeeded; the next tick commits it.
        """
        target = target or master_position()
        out = TickLog(cursor=self.cursor)
        for _ in range(max_ticks):
            log = run_sensor_ticks(
                self.sensor,
                self.assets,
                self.resources,
                self.instance,
                cursor=self.cursor,
                max_ticks=1,
                until_caught_up=False,
            )
            self.cursor = out.cursor = log.cursor
            out.ticks += 1
            out.runs += log.runs
            out.skip_reasons += log.skip_reasons
            assert all(r.success for r in log.runs)
            c = StreamCursor.parse(self.cursor)
            if c.snapshot_done and c.committed is not None and c.committed.sort_key() >= target.sort_key():
                return out
        raise AssertionError(f"offset did not reach {target} in {max_ticks} ticks: {out.skip_reasons[-5:]}")

    def tick_once(self) -> dg.SensorResult:
        """One sensor evaluation (no run), updating the cursor like the daemon does."""
        with dg.build_sensor_context(
            instance=self.instance, cursor=self.cursor, resources=self.resources
        ) as ctx:
            result = self.sensor.evaluate_tick(ctx)
        if result.cursor is not None:
            self.cursor = result.cursor
        return result

    def run(self, req: dg.RunRequest) -> dg.ExecuteInProcessResult:
        """Execute a run request in process, as the run launcher would."""
        result = dg.materialize(
            [self.assets],
            resources=self.resources,
            instance=self.instance,
            selection=request_selection(req.asset_selection, req.asset_check_keys),
            tags=dict(req.tags),
        )
        assert result.success
        return result

    def run_window(self, start: BinlogPosition, end: BinlogPosition) -> dg.ExecuteInProcessResult:
        """Run one window ``[start, end)`` directly (even across files, which the sensor never
        plans) and commit its end in the cursor, as the sensor does after a successful run."""
        result = self.run(
            dg.RunRequest(
                asset_selection=list(self.assets.keys),
                tags={
                    MODE_TAG: "stream",
                    WINDOW_START_TAG: json.dumps(start.to_dict()),
                    WINDOW_END_TAG: json.dumps(end.to_dict()),
                },
            )
        )
        md = binlog_metadata(result)
        reached = BinlogPosition(
            md["window_end_file"], md["window_end_pos"], md["window_end_gtid_set"] or None
        )
        self.cursor = StreamCursor(committed=reached, snapshot_done=True).to_json()
        return result

    def committed(self) -> BinlogPosition:
        c = StreamCursor.parse(self.cursor)
        assert c.committed is not None
        return c.committed

    def settled(self) -> BinlogPosition:
        """The offset up to which everything is in the lake: the end of the in-flight window
        when its run already succeeded, else the committed offset."""
        c = StreamCursor.parse(self.cursor)
        if c.inflight is None:
            return c.committed
        (run,) = self.instance.get_runs(filters=dg.RunsFilter(tags={REQUEST_TAG: c.inflight.run_key}))
        assert run.status == dg.DagsterRunStatus.SUCCESS and c.inflight.kind == "stream"
        end = reported_end(
            binlog_materializations(self.instance, run.run_id, binlog_key_of(self.assets)), "window_end"
        )
        assert end is not None
        return end

    def uri(self, db: str, table: str, kind: str) -> str:
        return self.storage.uri(self.server, db, table, kind)

    def changelog(self, db: str, table: str) -> list[dict]:
        return read_delta(self.storage, self.uri(db, table, "changelog")).to_pylist()

    def check(self, db: str, tables: list[str], options: TypeOptions | None = None) -> None:
        """Live state == source, and the change log replays to the source, for each table
        (``options``: the capture's type options when not the defaults)."""
        for t in tables:
            expected, key = source_rows(db, t, options)
            got = live_state_rows(self.storage, self.uri(db, t, "state"), key)
            assert got == expected, f"{db}.{t}: lake state differs from source"
            events = self.changelog(db, t)
            assert_no_duplicate_events(events)
            replayed = sorted(replay(events, key).values(), key=lambda r: tuple(r[k] for k in key))
            assert replayed == expected, f"{db}.{t}: the change log does not replay to the source"


def stream_runs(log: TickLog) -> list[dg.ExecuteInProcessResult]:
    return [r for r in log.runs if r.dagster_run.tags.get(MODE_TAG) == "stream"]


def changing_runs(log: TickLog) -> list[dg.ExecuteInProcessResult]:
    """Stream runs that changed a captured table or its schema (the shared server also has other
    writers, whose transactions make windows of their own)."""
    return [r for r in stream_runs(log) if binlog_metadata(r)["rows"] or binlog_metadata(r)["ddl_statements"]]


def binlog_metadata(run: dg.ExecuteInProcessResult) -> dict[str, Any]:
    mats = [e.event_specific_data.materialization for e in run.get_asset_materialization_events()]
    (md,) = [m.metadata for m in mats if m.asset_key.path[-1] == "binlog"]
    return {k: v.value for k, v in md.items()}


def materialized_keys(run: dg.ExecuteInProcessResult) -> set[tuple[str, ...]]:
    return {
        tuple(e.event_specific_data.materialization.asset_key.path)
        for e in run.get_asset_materialization_events()
    }


@pytest.fixture
def make_cdc(spark, tmp_path):
    """``make_cdc(db, storage=None, instance=None, **resource_fields) -> Cdc``."""

    def make(
        db: str, storage: StorageSettings | None = None, instance: dg.DagsterInstance | None = None, **kw
    ) -> Cdc:
        storage = storage or StorageSettings(base_uri=str(tmp_path / "lake"))
        spec = dict(
            host=MYSQL_HOST,
            port=MYSQL_PORT,
            user=CDC_USER,
            password=CDC_PASSWORD,
            server_name=f"srv_{uuid.uuid4().hex[:8]}",
            server_id=random.randint(1_000_000, 2_000_000_000),
            database_include_list=[db],
            base_uri=storage.base_uri,
            s3_endpoint_url=storage.s3_endpoint_url,
            s3_access_key_id=storage.s3_access_key_id,
            s3_secret_access_key=storage.s3_secret_access_key,
            s3_region=storage.s3_region,
        )
        spec.update(kw)
        return Cdc(spec, storage, instance or dg.DagsterInstance.ephemeral())

    return make


# -- 1. random DML ----------------------------------------------------------------------------

RANDOM_TABLES = {
    "comp": "CREATE TABLE comp (a INT NOT NULL, b VARCHAR(8) NOT NULL, v INT NULL, note VARCHAR(40) NULL, PRIMARY KEY (a, b))",
    "strk": "CREATE TABLE strk (k VARCHAR(16) NOT NULL PRIMARY KEY, n BIGINT NULL, txt TEXT NULL)",
    "mixed": (
        "CREATE TABLE mixed (id INT NOT NULL PRIMARY KEY, d DECIMAL(12,3) NULL, ts DATETIME(6) NULL, "
        "j JSON NULL, e ENUM('x','y','z') NULL, bits BIT(10) NULL, f DOUBLE NULL)"
    ),
}
KEYS = {"comp": ("a", "b"), "strk": ("k",), "mixed": ("id",)}


class RandomDml:
    """Seeded random DML on the three tables: single and multi-row inserts/updates/deletes, key
    updates (single and multi-row), delete + re-insert of a key, multi-statement transactions
    (some rolled back)."""

    TEXTS = ["", "plain", "ünïcödé ✓", "quote ' and \" and \\", "x" * 40, "tab\tnewline\n"]

    def __init__(self, db: str, seed: int):
        self.db = db
        self.rng = random.Random(seed)
        self.counter = 0
        self.conn = root_connect()
        self.statements = 0
        with self.conn.cursor() as cur:
            cur.execute(f"USE `{db}`")

    def close(self) -> None:
        self.conn.close()

    def fresh(self) -> int:
        self.counter += 1
        return self.counter

    def maybe(self, v, p: float = 0.15):
        return None if self.rng.random() < p else v

    def values(self, table: str) -> tuple:
        r = self.rng
        if table == "comp":
            return (self.maybe(r.randint(-(10**6), 10**6)), self.maybe(r.choice(self.TEXTS)[:40]))
        if table == "strk":
            return (
                self.maybe(r.randint(-(2**62), 2**62)),
                self.maybe(r.choice(self.TEXTS) * r.randint(1, 3)),
            )
        ts = datetime(2001, 1, 1) + timedelta(seconds=r.randint(0, 10**9), microseconds=r.randint(0, 999_999))
        doc = {"n": r.randint(0, 1000), "s": r.choice(self.TEXTS), "l": [r.random() < 0.5, None, 1.5]}
        return (
            self.maybe(Decimal(r.randint(-(10**8), 10**8)) / 1000),
            self.maybe(ts),
            self.maybe(json.dumps(doc, ensure_ascii=False)),
            self.maybe(r.choice("xyz")),
            self.maybe(r.randint(0, 1023)),
            self.maybe(r.uniform(-1e9, 1e9)),
        )

    def new_key(self, table: str) -> tuple:
        n = self.fresh()
        if table == "comp":
            return (self.rng.randint(1, 20), f"b{n}")
        if table == "strk":
            return (f"k{n:05d}",)
        return (n,)

    def exec(self, q: str, params=None) -> int:
        with self.conn.cursor() as cur:
            n = cur.execute(q, params)
        self.statements += 1
        return n

    def keys(self, table: str) -> list[tuple]:
        cols = ", ".join(KEYS[table])
        with self.conn.cursor() as cur:
            cur.execute(f"SELECT {cols} FROM {table} ORDER BY {cols}")
            return [tuple(r) for r in cur.fetchall()]

    def where(self, table: str, keys: list[tuple]) -> tuple[str, list]:
        cols = KEYS[table]
        if len(cols) == 1:
            return f"{cols[0]} IN ({', '.join(['%s'] * len(keys))})", [k[0] for k in keys]
        tup = "(" + ", ".join(["%s"] * len(cols)) + ")"
        return f"({', '.join(cols)}) IN ({', '.join([tup] * len(keys))})", [v for k in keys for v in k]

    def insert(self, table: str, n: int, keys: list[tuple] | None = None) -> None:
        keys = keys or [self.new_key(table) for _ in range(n)]
        rows = [k + self.values(table) for k in keys]
        width = len(rows[0])
        ph = "(" + ", ".join(["%s"] * width) + ")"
        self.exec(f"INSERT INTO {table} VALUES {', '.join([ph] * len(rows))}", [v for r in rows for v in r])

    def sample(self, table: str, lo: int, hi: int) -> list[tuple]:
        keys = self.keys(table)
        return self.rng.sample(keys, min(len(keys), self.rng.randint(lo, hi)))

    def update_one(self, table: str) -> None:
        for k in self.sample(table, 1, 1):
            cols = {"comp": ("v", "note"), "strk": ("n", "txt"), "mixed": ("d", "ts", "j", "e", "bits", "f")}[
                table
            ]
            w, p = self.where(table, [k])
            self.exec(
                f"UPDATE {table} SET {', '.join(c + ' = %s' for c in cols)} WHERE {w}",
                list(self.values(table)) + p,
            )

    def update_many(self, table: str) -> None:
        keys = self.sample(table, 2, 6)
        if not keys:
            return
        w, p = self.where(table, keys)
        delta = self.rng.randint(1, 999)
        if table == "comp":
            self.exec(
                f"UPDATE comp SET v = COALESCE(v, 0) + %s, note = %s WHERE {w}", [delta, f"bulk {delta}"] + p
            )
        elif table == "strk":
            self.exec(f"UPDATE strk SET n = COALESCE(n, 0) DIV 2 + %s WHERE {w}", [delta] + p)
        else:
            self.exec(
                f"UPDATE mixed SET d = COALESCE(d, 0) + 1.125, ts = TIMESTAMPADD(MICROSECOND, %s, COALESCE(ts, '2020-01-01')), "
                f"e = ELT(1 + %s MOD 3, 'x', 'y', 'z'), bits = %s WHERE {w}",
                [delta, delta, delta] + p,
            )

    def update_key_one(self, table: str) -> None:
        for k in self.sample(table, 1, 1):
            w, p = self.where(table, [k])
            if table == "comp":
                self.exec(
                    f"UPDATE comp SET b = %s, v = %s WHERE {w}",
                    [f"b{self.fresh()}", self.rng.randint(0, 9)] + p,
                )
            elif table == "strk":
                self.exec(f"UPDATE strk SET k = %s WHERE {w}", [f"k{self.fresh():05d}"] + p)
            else:
                self.exec(
                    f"UPDATE mixed SET id = %s, f = %s WHERE {w}", [self.fresh(), self.rng.random()] + p
                )

    def update_key_many(self, table: str) -> None:
        if table == "comp":  # b is unique on its own, so (a + 100, b) is a new key
            keys = self.sample(table, 2, 5)
            if keys:
                w, p = self.where(table, keys)
                self.exec(f"UPDATE comp SET a = a + 100 WHERE {w}", p)
        elif table == "strk":
            keys = [k for k in self.sample(table, 2, 5) if len(k[0]) < 14]
            if keys:
                w, p = self.where(table, keys)
                self.exec(f"UPDATE strk SET k = CONCAT(k, '~'), n = 7 WHERE {w}", p)
        else:
            keys = [k for k in self.sample(table, 2, 5) if k[0] < 1_000_000]
            if keys:
                w, p = self.where(table, keys)
                self.exec(f"UPDATE mixed SET id = id + 1000000 WHERE {w} ORDER BY id DESC", p)

    def delete_one(self, table: str) -> None:
        for k in self.sample(table, 1, 1):
            w, p = self.where(table, [k])
            self.exec(f"DELETE FROM {table} WHERE {w}", p)

    def delete_many(self, table: str) -> None:
        keys = self.sample(table, 2, 4)
        if keys:
            w, p = self.where(table, keys)
            self.exec(f"DELETE FROM {table} WHERE {w}", p)

    def delete_reinsert(self, table: str) -> None:
        for k in self.sample(table, 1, 1):
            w, p = self.where(table, [k])
            self.exec(f"DELETE FROM {table} WHERE {w}", p)
            self.insert(table, 1, [k])

    def one(self) -> None:
        table = self.rng.choice(list(RANDOM_TABLES))
        op = self.rng.choices(
            [
                lambda t: self.insert(t, self.rng.randint(1, 5)),
                self.update_one,
                self.update_many,
                self.update_key_one,
                self.update_key_many,
                self.delete_one,
                self.delete_many,
                self.delete_reinsert,
            ],
            weights=[4, 3, 2, 1, 1, 1, 1, 1],
        )[0]
        op(table)

    def round(self, ops: int) -> None:
        for _ in range(ops):
            if self.rng.random() < 0.2:
                self.conn.begin()
                for _ in range(self.rng.randint(2, 5)):
                    self.one()
                if self.rng.random() < 0.2:
                    self.conn.rollback()
                else:
                    self.conn.commit()
            else:
                self.one()


def test_random_dml_across_ticks_matches_source(scratch_db, make_cdc):
    db = scratch_db
    sql(*(f"{ddl.replace('CREATE TABLE ', f'CREATE TABLE `{db}`.')}" for ddl in RANDOM_TABLES.values()))
    dml = RandomDml(db, seed=20240611)
    try:
        for t in RANDOM_TABLES:
            dml.insert(t, 25)
        cdc = make_cdc(db)
        log = cdc.ticks()
        assert log.runs[0].dagster_run.tags[MODE_TAG] == "snapshot"
        cdc.check(db, list(RANDOM_TABLES))
        windows = 0
        for _ in range(4):
            dml.round(30)
            target = master_position()
            log = cdc.ticks()
            runs = changing_runs(log)
            assert runs, "the round's changes were streamed"
            windows += len(runs)
            assert cdc.committed().sort_key() >= target.sort_key()
            cdc.check(db, list(RANDOM_TABLES))
        assert windows >= 4
        ops = {e["op"] for t in RANDOM_TABLES for e in cdc.changelog(db, t)}
        assert ops == {"r", "c", "u", "d"}
        # multi-row statements: several rows of one binlog event
        assert any(e["source"]["row"] > 0 for e in cdc.changelog(db, "mixed") if e["op"] != "r")
    finally:
        dml.close()


# -- 2. schema changes inside one window ------------------------------------------------------


def test_alter_add_drop_rename_inside_one_window(scratch_db, make_cdc, s3_storage):
    db = scratch_db
    sql(
        f"CREATE TABLE `{db}`.evo (id INT NOT NULL PRIMARY KEY, a INT NOT NULL, b VARCHAR(20) NULL)",
        f"INSERT INTO `{db}`.evo VALUES (1, 10, 'one'), (2, 20, 'two'), (3, 30, 'three'), (4, 40, 'four')",
    )
    cdc = make_cdc(db, storage=s3_storage)
    cdc.ticks()
    e = f"`{db}`.evo"
    sql(
        f"INSERT INTO {e} VALUES (5, 50, 'five')",
        f"UPDATE {e} SET a = 11 WHERE id = 1",
        f"ALTER TABLE {e} ADD COLUMN c INT NOT NULL DEFAULT 7",
        f"INSERT INTO {e} VALUES (6, 60, 'six', 66)",
        f"UPDATE {e} SET c = 22, b = 'TWO' WHERE id = 2",
        f"ALTER TABLE {e} DROP COLUMN b",
        f"INSERT INTO {e} VALUES (7, 70, 77)",
        f"UPDATE {e} SET a = 33 WHERE id = 3",
        f"DELETE FROM {e} WHERE id = 4",
        f"ALTER TABLE {e} RENAME COLUMN a TO a2",
        f"INSERT INTO {e} VALUES (8, 80, 88)",
        f"UPDATE {e} SET a2 = a2 + 1",  # every row gets an image with the final columns
    )
    # one window over all of it (run directly: the sensor would split it at a binlog rotation,
    # which another session on the shared server may cause at any time)
    md = binlog_metadata(cdc.run_window(cdc.settled(), master_position()))
    assert md["ddl_statements"] == 3

    def img(id, a=None, b=None, c=None, a2=None):
        return {"id": id, "a": a, "b": b, "c": c, "a2": a2}

    # a 4-column row image before ADD c, (id, a, b, c) after it, (id, a, c) after DROP b, (id, a2, c) after RENAME
    final = [
        (img(i, c=c, a2=a), img(i, c=c, a2=a + 1))
        for i, a, c in [
            (1, 11, 7),
            (2, 20, 22),
            (3, 33, 7),
            (5, 50, 7),
            (6, 60, 66),
            (7, 70, 77),
            (8, 80, 88),
        ]
    ]
    expected = [
        ("c", None, img(5, 50, "five")),
        ("u", img(1, 10, "one"), img(1, 11, "one")),
        ("c", None, img(6, 60, "six", 66)),
        ("u", img(2, 20, "two", 7), img(2, 20, "TWO", 22)),
        ("c", None, img(7, 70, c=77)),
        ("u", img(3, 30, c=7), img(3, 33, c=7)),
        ("d", img(4, 40, c=7), None),
        ("c", None, img(8, c=88, a2=80)),
        *[("u", b, a) for b, a in final],
    ]
    events = sorted((x for x in cdc.changelog(db, "evo") if x["op"] != "r"), key=ordering_key)
    assert [(x["op"], x["before"], x["after"]) for x in events] == expected
    # the schema history has the three ALTERs at their positions, between the events they split
    hist = read_delta(cdc.storage, cdc.storage.uri(cdc.server, "_schema_history")).to_pylist()
    alters = sorted(
        (h for h in hist if h["ddl"].upper().startswith("ALTER")), key=lambda h: (h["file_seq"], h["pos"])
    )
    assert [h["ddl"].split(".evo ", 1)[1].split()[0] for h in alters] == ["ADD", "DROP", "RENAME"]
    positions = [(file_seq(x["source"]["file"]), x["source"]["pos"]) for x in events]
    cuts = [(h["file_seq"], h["pos"]) for h in alters]
    assert positions[1] < cuts[0] < positions[2]
    assert positions[3] < cuts[1] < positions[4]
    assert positions[6] < cuts[2] < positions[7]
    # final state: the source's columns; columns that no longer exist are null on every live row
    expected_rows, key = source_rows(db, "evo")
    live = live_state_rows(cdc.storage, cdc.uri(db, "evo", "state"), key)
    assert all(r.pop("a") is None and r.pop("b") is None for r in live)
    assert live == expected_rows
    assert expected_rows[0] == {"id": 1, "a2": 12, "c": 7}


# -- 3. SIGKILL of the run process mid-write ---------------------------------------------------


def delta_versions(uri: str) -> int:
    d = Path(uri) / "_delta_log"
    return len(list(d.glob("*.json"))) if d.exists() else 0


def run_in_child_and_kill(
    cdc: Cdc, req: dg.RunRequest, watch: list[str], log_path: Path, timeout: float = 300
) -> str:
    """Run ``req`` in a child process; SIGKILL its process group (Python + Spark JVM) as soon as
    one of the ``watch`` Delta tables gets a new commit. Returns the watched table that moved."""
    before = {u: delta_versions(u) for u in watch}
    spec = {
        **cdc.spec,
        "instance_dir": cdc.instance.root_directory,
        "tags": dict(req.tags),
        "selection": [list(k.path) for k in req.asset_selection],
        "checks": [[list(c.asset_key.path), c.name] for c in req.asset_check_keys or []],
    }
    with open(log_path, "w") as out:
        proc = subprocess.Popen(
            [sys.executable, str(ROOT / "tests" / "killable_run.py"), json.dumps(spec)],
            cwd=ROOT,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    moved = None
    deadline = time.monotonic() + timeout
    try:
        while moved is None:
            for u in watch:
                if delta_versions(u) > before[u]:
                    moved = u
                    break
            else:
                if proc.poll() is not None:
                    raise AssertionError(
                        f"the run finished before it could be killed:\n{log_path.read_text()[-3000:]}"
                    )
                if time.monotonic() > deadline:
                    raise AssertionError(f"no commit within {timeout}s:\n{log_path.read_text()[-3000:]}")
                time.sleep(0.005)
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait()
    return moved


def test_sigkill_mid_write_then_sensor_retry(scratch_db, make_cdc, tmp_path):
    db = scratch_db
    tables = ["t1", "t2", "t3"]
    for t in tables:
        sql(
            f"CREATE TABLE `{db}`.{t} (id INT NOT NULL PRIMARY KEY, v VARCHAR(40), n INT)",
            f"INSERT INTO `{db}`.{t} VALUES " + ", ".join(f"({i}, 'v{i}', {i})" for i in range(1, 41)),
        )
    home = tmp_path / "dagster_home"
    home.mkdir()
    (home / "dagster.yaml").write_text("")
    instance = dg.DagsterInstance.local_temp(str(home))
    # tables committed one after another: the kill below lands between two tables' commits
    cdc = make_cdc(db, instance=instance, stream_commit_workers=1)
    cdc.ticks()
    rng = random.Random(99)
    for t in tables:
        sql(
            f"INSERT INTO `{db}`.{t} VALUES " + ", ".join(f"({i}, 'new{i}', {i})" for i in range(100, 160)),
            f"UPDATE `{db}`.{t} SET v = CONCAT(v, '+'), n = n * 2 WHERE id % 3 = 0",
            f"DELETE FROM `{db}`.{t} WHERE id % 7 = 0",
            f"UPDATE `{db}`.{t} SET id = id + 1000 WHERE id BETWEEN 10 AND 15",
        )
    sql(
        "BEGIN",
        *(
            f"UPDATE `{db}`.{t} SET n = {rng.randint(1, 99)} WHERE id = {rng.randint(100, 159)}"
            for t in tables
        ),
        f"DELETE FROM `{db}`.t2 WHERE id = 1",
        "COMMIT",
    )
    target = master_position()

    res = cdc.tick_once()
    (req,) = res.run_requests
    assert req.tags[MODE_TAG] == "stream" and req.run_key.endswith(":a1")
    window = (req.tags[WINDOW_START_TAG], req.tags[WINDOW_END_TAG])
    changelogs = [cdc.uri(db, t, "changelog") for t in tables]
    states = [cdc.uri(db, t, "state") for t in tables]

    # attempt 1: killed as soon as one table's change log has the window's commit (its state is
    # merged but not marked done, or not merged: the writer's order decides); other tables untouched
    before = {u: delta_versions(u) for u in changelogs + states}
    moved = run_in_child_and_kill(cdc, req, changelogs, tmp_path / "attempt1.log")
    (run1,) = instance.get_runs(filters=dg.RunsFilter(tags={REQUEST_TAG: req.run_key}))
    assert run1.status == dg.DagsterRunStatus.STARTED, "killed before the run finished"
    assert delta_versions(moved) > before[moved]
    assert any(delta_versions(u) == before[u] for u in changelogs), (
        "killed mid-window: a table not yet written"
    )
    res = cdc.tick_once()
    if WorkerBeat.from_tags(run1.tags) is None:  # died before its first heartbeat: waited for
        assert not res.run_requests and "STARTED" in res.skip_message
        # run monitoring would detect the dead worker and fail the run
        instance.report_run_failed(run1)
        res = cdc.tick_once()
    else:  # its heartbeat names a pid gone from this host: the sensor marks it failed itself
        (marked,) = instance.get_runs(filters=dg.RunsFilter(tags={REQUEST_TAG: req.run_key}))
        assert marked.status == dg.DagsterRunStatus.FAILURE
    (req2,) = res.run_requests
    assert req2.run_key.endswith(":a2") and StreamCursor.parse(cdc.cursor).inflight.attempt == 2
    assert (req2.tags[WINDOW_START_TAG], req2.tags[WINDOW_END_TAG]) == window

    # attempt 2 runs (in process) to the end; the sensor then commits the window
    cdc.run(req2)
    cdc.ticks()
    statuses = {
        r.tags[REQUEST_TAG]: r.status
        for r in instance.get_runs()
        if r.tags.get(REQUEST_TAG, "").startswith(req.run_key[:-3])
    }
    assert statuses == {req.run_key: dg.DagsterRunStatus.FAILURE, req2.run_key: dg.DagsterRunStatus.SUCCESS}
    assert cdc.committed().sort_key() >= target.sort_key()
    cdc.check(db, tables)
    for t in tables:
        assert len([e for e in cdc.changelog(db, t) if e["op"] == "r"]) == 40
        # the window's batch was committed exactly once to each dataset, whatever the attempts did
        # (the state's changes go to its tail: merge-on-read)
        for kind in ("changelog", "state_tail"):
            batches = [c.get("dagster_mysql_cdc.batch") for c in DeltaTable(cdc.uri(db, t, kind)).history()]
            assert sum(1 for b in batches if b and b.startswith("dagster-mysql-cdc/stream@")) == 1, (
                t,
                kind,
                batches,
            )


# -- 4. rotation and restart -------------------------------------------------------------------


def test_rotation_and_restart(scratch_db, make_cdc):
    db = scratch_db
    tables = ["r1", "r2"]
    for t in tables:
        sql(
            f"CREATE TABLE `{db}`.{t} (id INT NOT NULL PRIMARY KEY, v VARCHAR(20))",
            f"INSERT INTO `{db}`.{t} VALUES (1, 'a'), (2, 'b'), (3, 'c')",
        )
    cdc = make_cdc(db)
    cdc.ticks()
    r1, r2 = f"`{db}`.r1", f"`{db}`.r2"

    # A: two rotations between statements -> the sensor splits at file ends, three windows
    sql(f"INSERT INTO {r1} VALUES (4, 'd')", f"UPDATE {r2} SET v = 'bb' WHERE id = 2")
    sql("FLUSH BINARY LOGS")
    sql(
        f"UPDATE {r1} SET id = 40 WHERE id = 4",
        "BEGIN",
        f"DELETE FROM {r2} WHERE id = 1",
        f"INSERT INTO {r1} VALUES (5, 'e')",
        "COMMIT",
    )
    sql("FLUSH BINARY LOGS")
    sql(f"INSERT INTO {r2} VALUES (6, 'f'), (7, 'g')")
    target = master_position()
    log = cdc.ticks()
    for run in stream_runs(log):
        window_end = json.loads(run.dagster_run.tags[WINDOW_END_TAG])
        assert binlog_metadata(run)["window_start_file"] == window_end["file"], "one window per binlog file"
        assert binlog_metadata(run)["window_end_gtid_set"], "every committed offset carries the GTID set"
    runs = changing_runs(log)
    assert len({binlog_metadata(r)["window_start_file"] for r in runs}) >= 3, "changes in three files"
    cdc.check(db, tables)
    assert cdc.committed().sort_key() >= target.sort_key()
    assert cdc.committed().gtid_set

    # B: one window that itself crosses a rotation (the reader follows the Rotate event)
    start = cdc.settled()
    sql(f"UPDATE {r1} SET v = 'x' WHERE id = 1", "FLUSH BINARY LOGS", f"DELETE FROM {r2} WHERE id = 7")
    end = master_position()
    assert end.file != start.file
    result = cdc.run_window(start, end)
    assert binlog_metadata(result)["rows"] == 2
    assert cdc.committed() == end
    cdc.check(db, tables)

    # C: a restart between two ticks, after the first planned a window and before its run
    sql(f"INSERT INTO {r1} VALUES (8, 'x')", f"UPDATE {r2} SET v = 'planned' WHERE id = 3")
    (req,) = cdc.tick_once().run_requests
    sql(f"DELETE FROM {r1} WHERE id = 8", f"UPDATE {r2} SET v = 'before restart' WHERE id = 2")
    run_infra("infra/mariadb.sh", "restart")
    sql(f"INSERT INTO {r2} VALUES (9, 'after restart')")
    cdc.run(req)
    target = master_position()
    cdc.ticks()
    cdc.check(db, tables)
    assert cdc.committed().sort_key() >= target.sort_key()


def test_window_may_end_after_data_less_events():
    """A window planned right after a rotation ends after the new file's header events (format
    description, GTID list, binlog checkpoints) with no transaction after them: the reader must
    reach that end exactly (not fail with BinlogEndedEarly, nor run on past it)."""
    sql("FLUSH BINARY LOGS")
    end = master_position()
    reader = BinlogReader(
        cdc_settings(),
        random.randint(1_000_000, 2_000_000_000),
        BinlogPosition(end.file, 4, end.gtid_set),
        end,
        is_mariadb=True,
        deadline_s=30,
    )
    items = list(reader)
    assert (reader.position.file, reader.position.pos) == (end.file, end.pos)
    assert not [i for i in items if isinstance(i, RowsBatch)]


# -- 5. purged binlog --------------------------------------------------------------------------


def error_chain(e: BaseException) -> str:
    parts = []
    while e is not None:
        parts.append(f"{type(e).__name__}: {e}")
        e = getattr(e, "user_exception", None) or e.__cause__ or e.__context__
    return "\n".join(parts)


def test_purged_binlog_fails_then_when_needed_resnapshots(scratch_db, make_cdc):
    db = scratch_db
    sql(
        f"CREATE TABLE `{db}`.p (id INT NOT NULL PRIMARY KEY, v VARCHAR(20))",
        f"INSERT INTO `{db}`.p VALUES (1, 'a'), (2, 'b'), (3, 'c')",
    )
    cdc = make_cdc(db)
    cdc.ticks()
    sql(f"UPDATE `{db}`.p SET v = 'streamed' WHERE id = 1")
    cdc.ticks()
    offset = cdc.settled()  # what the next tick commits before it plans
    # changes the sensor has not seen yet, then the file holding them (and the offset) goes away
    sql(f"DELETE FROM `{db}`.p WHERE id = 2", f"INSERT INTO `{db}`.p VALUES (4, 'lost to streaming')")
    sql("FLUSH BINARY LOGS")
    current = master_position().file
    assert file_seq(current) > file_seq(offset.file)
    deadline = time.monotonic() + 30
    while offset.file in binlog_file_names():
        try:  # only files older than the current one; a file another replica reads is kept
            sql(f"PURGE BINARY LOGS TO '{current}'")
        except pymysql.MySQLError:
            pass
        assert time.monotonic() < deadline, f"{offset.file} could not be purged"
        time.sleep(0.5)
    sql(f"UPDATE `{db}`.p SET v = 'after purge' WHERE id = 3")

    cursor_before = cdc.cursor
    with pytest.raises(Exception) as ei:
        cdc.tick_once()
    chain = error_chain(ei.value)
    assert f"binlog file {offset.file} was purged" in chain, chain
    assert "when_needed" in chain
    assert cdc.cursor == cursor_before

    cdc.spec["snapshot_mode"] = "when_needed"
    cdc.resources["mysql"] = mysql_resource(cdc.spec)
    assert cdc.resources["mysql"].snapshot_mode == "when_needed"
    log = cdc.ticks()
    assert log.runs[0].dagster_run.tags[MODE_TAG] == "snapshot"
    cdc.check(db, ["p"])
    sql(f"INSERT INTO `{db}`.p VALUES (5, 'streaming again')")
    log = cdc.ticks()
    assert len(changing_runs(log)) == 1
    cdc.check(db, ["p"])


# -- 6. heartbeat --------------------------------------------------------------------------------


def test_changes_only_in_uncaptured_tables_advance_the_offset(scratch_db, make_cdc):
    db = scratch_db
    sql(
        f"CREATE TABLE `{db}`.cap (id INT NOT NULL PRIMARY KEY, v INT)",
        f"CREATE TABLE `{db}`.other (id INT NOT NULL PRIMARY KEY, v INT)",
        f"INSERT INTO `{db}`.cap VALUES (1, 1), (2, 2)",
    )
    cdc = make_cdc(db, database_include_list=None, table_include_list=[f"{db}\\.cap"])
    cdc.ticks()
    start = cdc.committed()
    versions = {k: delta_versions(cdc.uri(db, "cap", k)) for k in ("changelog", "state")}
    sql(f"INSERT INTO `{db}`.other VALUES (1, 1), (2, 2)", f"UPDATE `{db}`.other SET v = 5")
    target = master_position()
    log = cdc.ticks()
    # issue 39: a window that changes none of the captured tables is committed without a run
    assert stream_runs(log) == [], log.skip_reasons
    assert any("committed without a run" in r for r in log.skip_reasons), log.skip_reasons
    assert cdc.committed().sort_key() >= target.sort_key() > start.sort_key()
    assert {k: delta_versions(cdc.uri(db, "cap", k)) for k in ("changelog", "state")} == versions
    assert not (Path(cdc.storage.root) / cdc.server / db / "other").exists()
    cdc.check(db, ["cap"])


# -- 7. large backlog: the sensor only plans -----------------------------------------------------


def test_sensor_with_large_backlog_returns_quickly(scratch_db, make_cdc):
    db = scratch_db
    sql(f"CREATE TABLE `{db}`.big (id INT NOT NULL PRIMARY KEY, v INT NOT NULL, s VARCHAR(32))")
    cdc = make_cdc(db, stream_batch_rows=20_000)
    cdc.ticks()
    conn = root_connect()
    with conn.cursor() as cur:
        for b in range(25):
            cur.execute(
                f"INSERT INTO `{db}`.big VALUES "
                + ", ".join(f"({i}, {i}, 'row {i}')" for i in range(b * 1000, (b + 1) * 1000))
            )
        cur.execute(f"UPDATE `{db}`.big SET v = v + 1")
        assert cur.rowcount == 25_000
    conn.close()
    target = master_position()
    t0 = time.monotonic()
    res = cdc.tick_once()
    elapsed = time.monotonic() - t0
    assert elapsed < 10, f"sensor evaluation took {elapsed:.1f}s"
    (req,) = res.run_requests
    assert req.tags[MODE_TAG] == "stream"
    end = BinlogPosition.from_dict(json.loads(req.tags[WINDOW_END_TAG]))
    assert end.sort_key() >= target.sort_key(), "one window covers the whole backlog"
    # the run then processes the 50k changes in several batches
    assert binlog_metadata(cdc.run(req))["rows"] == 50_000
    cdc.ticks()
    cdc.check(db, ["big"])
