"""The peer suites ported (tests/peer_suites/: python-mysql-replication's data-type tests and
Debezium's MySQL test DDL with the values its *IT tests state), run as one capture through the
public API against MariaDB: every case's tables in two databases (one named ``peer-dash-...``,
whose name Dagster does not accept as is), an initial snapshot, then the same values streamed
(an update of every row, a delete of every row, the rows inserted again) in one window, compared

* with an independent reading of the source (tests/peer_suites/source_reading.py) at each step,
* snapshot against stream (the same value read both ways must be the same Debezium value),
* with the values and field metadata the peer tests state (``Case.stated``/``stated_types``),
* and every reconciliation check of every table must pass.

One capture of every table (module fixture), so the suite costs one snapshot run and one window.
"""

from __future__ import annotations

import re
import uuid
from collections import Counter
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pytest
from conftest import CDC_PASSWORD, CDC_USER, MYSQL_HOST, MYSQL_PORT, root_connect
from deltalake import DeltaTable
from peer_suites.cases import CASES, DASHED, Case
from peer_suites.source_reading import SourceColumn, q, read_rows, source_columns
from sensor_harness import SensorDriven

from dagster_mysql_cdc import MySqlCdcResource
from dagster_mysql_cdc.dagster_integration.protocol import DATABASE_NAME_METADATA_KEY, TABLE_NAME_METADATA_KEY
from dagster_mysql_cdc.dagster_integration.translator import dagster_name
from dagster_mysql_cdc.sink.layout import LakeLayout
from dagster_mysql_cdc.sink.read import read_current
from dagster_mysql_cdc.sink.state_rows import live_multiset
from dagster_mysql_cdc.sink.storage import StorageSettings
from dagster_mysql_cdc.source.types import hashable_value

pytestmark = [pytest.mark.integration, pytest.mark.spark]

REV = "peer_rev"  # added to every table: the update of every row sets it


@dataclass
class Table:
    case: Case
    db: str
    columns: list[SourceColumn]
    initial: list[tuple]  # the independent reading before the snapshot
    updated: list[tuple]  # after the update of every row (= after the rows are inserted again)


@dataclass
class Peer:
    tables: list[Table]
    storage: StorageSettings
    server: str
    cdc: SensorDriven
    snapshot_runs: list
    stream_runs: list


def _multiset(rows) -> Counter:
    return Counter(hashable_value(tuple(r)) for r in rows)


@pytest.fixture(scope="module")
def peer(tmp_path_factory):
    tag = uuid.uuid4().hex[:6]
    dbs = {"main": f"peer_{tag}", DASHED: f"peer-dash-{tag}"}
    copy_db = f"peercopy_{tag}"
    conn = root_connect(autocommit=True)
    try:
        with conn.cursor() as cur:
            for d in (*dbs.values(), copy_db):
                cur.execute(f"CREATE DATABASE {q(d)} CHARACTER SET utf8mb4")
            for c in CASES:
                cur.execute(f"USE {q(dbs[c.database])}")
                cur.execute("SET SESSION sql_mode = ''")
                for st in c.statements:
                    try:
                        cur.execute(st.replace("{t}", q(c.table)))
                    except Exception as e:
                        raise AssertionError(f"{c.source} {c.table}: {st[:200]}: {e}") from e
            for c in CASES:
                cur.execute(
                    f"ALTER TABLE {q(dbs[c.database])}.{q(c.table)} ADD COLUMN {REV} INT NOT NULL DEFAULT 0"
                )
        tables = []
        for c in CASES:
            cols = source_columns(conn, dbs[c.database], c.table)
            tables.append(
                Table(c, dbs[c.database], cols, read_rows(conn, dbs[c.database], c.table, cols), [])
            )
        server = f"peer_{tag}"
        mysql = MySqlCdcResource(
            host=MYSQL_HOST,
            port=MYSQL_PORT,
            user=CDC_USER,
            password=CDC_PASSWORD,
            server_name=server,
            database_include_list=[re.escape(d) for d in dbs.values()],
        )
        storage = StorageSettings(base_uri=str(tmp_path_factory.mktemp("peer") / "lake"))
        cdc = SensorDriven(mysql, storage.base_uri, mysql.discover_tables())
        snapshot = cdc.ticks()
        # the same values streamed: every row updated, deleted, inserted again (one window)
        with conn.cursor() as cur:
            cur.execute("SET SESSION sql_mode = ''")
            for t in tables:
                cur.execute(f"UPDATE {q(t.db)}.{q(t.case.table)} SET {REV} = 1")
            for t in tables:
                t.updated = read_rows(conn, t.db, t.case.table, t.columns)
            for i, t in enumerate(tables):
                src = f"{q(t.db)}.{q(t.case.table)}"
                cur.execute(f"CREATE TABLE {q(copy_db)}.c{i} AS SELECT * FROM {src}")
                cur.execute(f"DELETE FROM {src}")
                cur.execute(f"INSERT INTO {src} SELECT * FROM {q(copy_db)}.c{i}")
        stream = cdc.ticks()
        yield Peer(tables, storage, server, cdc, snapshot.runs, stream.runs)
    finally:
        with conn.cursor() as cur:
            for d in (*dbs.values(), copy_db):
                cur.execute(f"DROP DATABASE IF EXISTS {q(d)}")
        conn.close()


def _paths(peer: Peer, t: Table):
    return LakeLayout(peer.storage, peer.server).table(t.db, t.case.table)


def _state_rows(peer: Peer, t: Table) -> list[tuple]:
    state = live_multiset(read_current(peer.storage, _paths(peer, t))).to_pylist()
    return [tuple(r[c.name] for c in t.columns) for r in state]


def _changes(peer: Peer, t: Table) -> dict[str, list[tuple]]:
    """``{"r": after images, "u-": before, "u+": after, "d": before, "c": after}`` of the change log."""
    log = (
        DeltaTable(_paths(peer, t).changelog).to_pyarrow_table(columns=["op", "before", "after"]).to_pylist()
    )
    out: dict[str, list[tuple]] = {k: [] for k in ("r", "u-", "u+", "d", "c")}
    for e in log:
        for key, image in {"r": "after", "u-": "before", "u+": "after", "d": "before", "c": "after"}.items():
            if e["op"] == key[0]:
                out[key].append(tuple(e[image][c.name] for c in t.columns))
    return out


def _ids(t: Table) -> str:
    return f"{t.case.table}"


def test_every_run_succeeds_and_every_check_passes(peer):
    runs = peer.snapshot_runs + peer.stream_runs
    assert peer.snapshot_runs and peer.stream_runs and all(r.success for r in runs)
    evaluations = [e for r in runs for e in r.get_asset_check_evaluations()]
    failed = [
        (
            e.asset_key.to_user_string(),
            e.check_name,
            {k: getattr(v, "value", v) for k, v in e.metadata.items()},
        )
        for e in evaluations
        if not e.passed
    ]
    assert evaluations and not failed, failed
    checked = {e.asset_key for e in evaluations if e.check_name == "checksum_matches_source"}
    assert len(checked) == len(peer.tables), "the full checks ran on every table"


def test_snapshot_equals_the_independent_reading_of_the_source(peer):
    problems = []
    for t in peer.tables:
        changes = _changes(peer, t)
        if _multiset(changes["r"]) != _multiset(t.initial):
            problems.append(
                (t.case.source, t.case.table, sorted(map(repr, changes["r"])), sorted(map(repr, t.initial)))
            )
    assert not problems, "\n".join(map(str, problems))


def test_streamed_values_equal_the_source_and_the_snapshot(peer):
    """Each value is read twice (snapshot and binlog: update before/after, delete, insert) and
    must be the same Debezium value; the state ends as the source."""
    problems, pairs = [], 0
    for t in peer.tables:
        ch = _changes(peer, t)
        expected = {"u-": t.initial, "u+": t.updated, "d": t.updated, "c": t.updated}
        for key, rows in expected.items():
            if _multiset(ch[key]) != _multiset(rows):
                problems.append((t.case.table, key, sorted(map(repr, ch[key])), sorted(map(repr, rows))))
        # the value before the update was streamed (u-) as the snapshot read it (r)
        snapshot_vs_stream = _multiset(ch["r"]) == _multiset(ch["u-"])
        if not snapshot_vs_stream:
            problems.append((t.case.table, "snapshot vs stream", ch["r"], ch["u-"]))
        pairs += len(ch["r"]) * len(t.columns)
        if _multiset(_state_rows(peer, t)) != _multiset(t.updated):
            problems.append((t.case.table, "state", _state_rows(peer, t), t.updated))
    assert not problems, "\n".join(map(str, problems))
    assert pairs > 800  # snapshot-vs-stream value pairs compared


def _matches(row: dict[str, Any], match: dict[str, Any]) -> bool:
    return all(hashable_value(row[k]) == hashable_value(v) for k, v in match.items())


def test_values_the_peer_tests_state(peer):
    """Debezium's *IT assertions (and python-mysql-replication's, as Debezium values), on the
    snapshot's rows and on the rows streamed back in."""
    problems, checked = [], 0
    for t in peer.tables:
        names = [c.name for c in t.columns]
        ch = _changes(peer, t)
        for label, rows in (("snapshot", ch["r"]), ("stream", ch["c"])):
            dicts = [dict(zip(names, r)) for r in rows]
            for match, values in t.case.stated:
                hits = [r for r in dicts if _matches(r, match)]
                if not hits:
                    problems.append((t.case.source, t.case.table, label, "no row", match))
                for r in hits:
                    for k, v in values.items():
                        checked += 1
                        if hashable_value(r[k]) != hashable_value(v) or type(r[k]) is not type(v):
                            problems.append((t.case.source, t.case.table, label, k, r[k], v))
    assert not problems, "\n".join(map(str, problems))
    assert checked > 300


def test_field_metadata_the_peer_tests_state(peer):
    import json

    problems = []
    for t in peer.tables:
        if not t.case.stated_types:
            continue
        schema = pa.schema(DeltaTable(_paths(peer, t).state).schema().to_arrow())
        for name, (dbz_type, params) in t.case.stated_types.items():
            md = schema.field(name).metadata or {}
            got_type = md.get(b"debezium.type", b"").decode()
            got_params = json.loads(md.get(b"debezium.parameters", b"{}"))
            if got_type != dbz_type or got_params != params:
                problems.append((t.case.table, name, got_type, got_params, dbz_type, params))
            if dbz_type.startswith("float"):
                expected_arrow = "float" if dbz_type == "float32" else "double"
                if str(schema.field(name).type) != expected_arrow:
                    problems.append((t.case.table, name, str(schema.field(name).type), expected_arrow))
    assert not problems, "\n".join(map(str, problems))
    hist = DeltaTable(peer.storage.uri(peer.server, "_schema_history")).to_pyarrow_table().to_pylist()
    dbz3865 = [
        c
        for r in hist
        for ch in json.loads(r["tableChanges"])
        if ch.get("table") and ch["table"]["table"] == "DBZ3865"
        for c in ch["table"]["columns"]
        if c["name"] == "f2"
    ]
    assert dbz3865 and all((c["precision"], c["scale"]) == (10, 2) for c in dbz3865), dbz3865


def test_real_names_stay_in_metadata_paths_and_events(peer):
    """Issue 26, point 2: Dagster names for keys and groups, the real names everywhere else."""
    specs = {
        (s.metadata[DATABASE_NAME_METADATA_KEY], s.metadata[TABLE_NAME_METADATA_KEY]): s
        for s in peer.cdc.cdc.specs
        if DATABASE_NAME_METADATA_KEY in (s.metadata or {})
    }
    for t in peer.tables:
        spec = specs[(t.db, t.case.table)]
        assert spec.key.path == [peer.server, dagster_name(t.db), dagster_name(t.case.table)]
        assert spec.group_name == dagster_name(t.db)
        sources = DeltaTable(_paths(peer, t).changelog).to_pyarrow_table(columns=["source"]).to_pylist()
        assert {(s["source"]["db"], s["source"]["table"]) for s in sources} == {(t.db, t.case.table)}
    dashed = [t for t in peer.tables if t.case.database == DASHED]
    assert any("/" in t.case.table for t in dashed) and all(t.db.startswith("peer-dash-") for t in dashed)
