"""Failover: capture from a primary, promote its GTID replica, repoint the resource, go on.

Real servers only: the ``main`` MariaDB (primary) and a second instance started by
``infra/mariadb.sh start --instance replica --replica-of <primary port>`` (GTID replication,
``MASTER_USE_GTID=slave_pos``, ``log_slave_updates=ON``, its own ``server_id``/``gtid_domain_id``),
promoted with ``infra/mariadb.sh promote`` (``STOP SLAVE; RESET SLAVE ALL``). The replica's port is
``CDC_MYSQL_REPLICA_PORT`` (default 3312). Each test gets a fresh replica.
"""

import json
import os
import shutil
import subprocess
import time
from collections import Counter
from pathlib import Path

import dagster as dg
import pymysql
import pytest
from conftest import MYSQL_HOST, MYSQL_PORT, ROOT, ROOT_PASSWORD
from deltalake import DeltaTable
from sensor_harness import SensorDriven, capture_resource, scratch_database

from dagster_mysql_cdc import MySqlCdcResource
from dagster_mysql_cdc.dagster_integration.cursor import StreamCursor
from dagster_mysql_cdc.dagster_integration.sensor import evaluate_tick
from dagster_mysql_cdc.sink.read import read_current

pytestmark = [pytest.mark.integration, pytest.mark.spark]

REPLICA_PORT = int(os.environ.get("CDC_MYSQL_REPLICA_PORT", "3312"))
INFRA_DIR = Path(os.environ.get("CDC_INFRA_DIR", ROOT / ".infra"))
MARIADB = ["bash", "infra/mariadb.sh"]


def _stop_and_remove_replica() -> None:
    subprocess.run([*MARIADB, "stop", "--instance", "replica"], cwd=ROOT, check=False)
    shutil.rmtree(INFRA_DIR / "mariadb-replica", ignore_errors=True)


def start_replica(*extra: str) -> int:
    """A fresh GTID replica of the main instance (seeded with the primary's data now); its port.
    ``extra``: more ``infra/mariadb.sh start`` flags (e.g. ``--binlog-start 1``)."""
    _stop_and_remove_replica()
    opts = ["--instance", "replica", "--port", str(REPLICA_PORT), "--server-id", "2", *extra]
    subprocess.run([*MARIADB, "start", *opts, "--replica-of", str(MYSQL_PORT)], cwd=ROOT, check=True)
    return REPLICA_PORT


@pytest.fixture
def replica():
    """A fresh GTID replica of the main instance; yields its port. Stopped and removed afterwards."""
    try:
        yield start_replica()
    finally:
        _stop_and_remove_replica()


def connect_root(port: int) -> pymysql.connections.Connection:
    return pymysql.connect(host=MYSQL_HOST, port=port, user="root", password=ROOT_PASSWORD, autocommit=True)


def scalar(conn, sql: str):
    with conn.cursor() as cur:
        cur.execute(sql)
        return cur.fetchone()[0]


def write(conn, statements: list[str]) -> list[str]:
    """Run each statement as its own transaction; returns their GTIDs (``@@last_gtid``)."""
    out = []
    with conn.cursor() as cur:
        for sql in statements:
            cur.execute(sql)
            cur.execute("SELECT @@SESSION.last_gtid")
            out.append(cur.fetchone()[0])
    return out


def wait_replicated(primary, replica_conn, timeout: float = 60) -> None:
    target = scalar(primary, "SELECT @@GLOBAL.gtid_binlog_pos")
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if scalar(replica_conn, f"SELECT MASTER_GTID_WAIT('{target}', 1)") == 0:
            return
    with replica_conn.cursor(pymysql.cursors.DictCursor) as cur:
        cur.execute("SHOW SLAVE STATUS")
        status = cur.fetchone()
    pytest.fail(f"the replica did not reach {target} within {timeout}s: {status}")


def promote(port: int) -> None:
    subprocess.run([*MARIADB, "promote", "--instance", "replica"], cwd=ROOT, check=True)


def on_port(mysql: MySqlCdcResource, port: int, **kw) -> MySqlCdcResource:
    return MySqlCdcResource(**{**mysql.model_dump(), "port": port, **kw})


def batch(db: str, start: int, n: int) -> list[str]:
    """``n`` transactions touching several rows each: inserts, updates, deletes."""
    out = []
    for i in range(start, start + n):
        out.append(f"INSERT INTO {db}.t (id, v, note) VALUES ({i}, {i}, 'n{i}'), ({i + 1000}, 0, 'pair')")
        out.append(f"UPDATE {db}.t SET v = v + 1, note = CONCAT(note, '+') WHERE id IN ({i}, {i - 1})")
        if i % 3 == 0:
            out.append(f"DELETE FROM {db}.t WHERE id = {i + 1000}")
    return out


def changelog(storage, db: str) -> list[dict]:
    t = DeltaTable(storage.uri(db, db, "t", "changelog"), storage_options=storage.delta_storage_options())
    return t.to_pyarrow_table(columns=["op", "key", "before", "after", "source"]).to_pylist()


def live_state(storage, db: str) -> list[tuple]:
    rows = read_current(storage, storage.uri(db, db, "t", "state")).to_pylist()
    return sorted((r["id"], r["v"], r["note"]) for r in rows if not r["__deleted"])


def source_state(conn, db: str) -> list[tuple]:
    with conn.cursor() as cur:
        cur.execute(f"SELECT id, v, note FROM {db}.t")
        return sorted(cur.fetchall())


def setup_table(conn, db: str) -> None:
    with conn.cursor() as cur:
        cur.execute(f"CREATE TABLE {db}.t (id INT PRIMARY KEY, v INT, note VARCHAR(200))")
        cur.execute(f"INSERT INTO {db}.t VALUES " + ",".join(f"({i}, {i}, 's{i}')" for i in range(-20, 0)))


@pytest.mark.parametrize("identity", ["recorded", "legacy_cursor"])
def test_failover_to_promoted_replica_loses_and_duplicates_nothing(replica, local_storage, capsys, identity):
    """``legacy_cursor``: the issue's case, a cursor without the server's identity (written before
    identities were recorded) whose file/pos is not valid on the promoted replica."""
    rep = connect_root(replica)
    with scratch_database("failover") as (db, primary):
        setup_table(primary, db)
        mysql = capture_resource(db)
        cdc = SensorDriven(mysql, local_storage.base_uri)
        cdc.ticks()  # snapshot
        captured_on_primary = write(primary, batch(db, 1, 10))
        cdc.ticks()
        # written and replicated, not yet captured when the primary "fails"
        pending = write(primary, batch(db, 11, 10))
        wait_replicated(primary, rep)
        promote(replica)
        on_new_primary = write(rep, batch(db, 21, 10))
        before = json.loads(cdc.cursor or "{}")
        assert before["server"]["server_id"] == 1
        if identity == "legacy_cursor":
            del before["server"]
            cdc.cursor = json.dumps(before)
        cdc.resources["mysql"] = on_port(mysql, replica)  # the runbook: repoint host/port
        t0 = time.monotonic()
        log = cdc.ticks()
        seconds = time.monotonic() - t0
        after = json.loads(cdc.cursor or "{}")
        assert after["server"]["server_id"] == 2
        assert after["committed"]["file"].startswith("mysql-bin.00")
        assert after["committed"]["file"] != before["committed"]["file"]
        # more writes on the new primary stream normally
        later = write(rep, batch(db, 31, 5))
        cdc.ticks()

        events = changelog(local_storage, db)
        streamed = [e for e in events if e["op"] != "r"]
        expected = captured_on_primary + pending + on_new_primary + later
        by_gtid = Counter(e["source"]["gtid"] for e in streamed)
        assert set(by_gtid) == set(expected), set(by_gtid) ^ set(expected)
        # each row change once: (gtid, op, key) never repeats
        row_keys = Counter((e["source"]["gtid"], e["op"], e["key"]["id"]) for e in streamed)
        dups = {k: n for k, n in row_keys.items() if n > 1}
        assert not dups
        # and every transaction's events come from one server position only (no replay)
        positions = {
            g: {(e["source"]["file"]) for e in streamed if e["source"]["gtid"] == g} for g in by_gtid
        }
        assert all(len(p) == 1 for p in positions.values())
        assert live_state(local_storage, db) == source_state(rep, db)
        with capsys.disabled():
            print(
                f"\n[failover figures, {identity}] transactions: {len(expected)} "
                f"({len(captured_on_primary)} on the primary, {len(pending)} replicated but not captured "
                f"before the failover, {len(on_new_primary) + len(later)} on the promoted replica); "
                f"change events streamed: {len(streamed)}; GTIDs in the change log: {len(by_gtid)}; "
                f"duplicates: {sum(n - 1 for n in row_keys.values())}; lost GTIDs: "
                f"{len(set(expected) - set(by_gtid))}; failover catch-up: {seconds:.1f}s in "
                f"{len(log.runs)} run(s); resumed at {after['committed']['file']}"
            )
    rep.close()


def binlog_file(conn) -> str:
    with conn.cursor() as cur:
        cur.execute("SHOW MASTER STATUS")
        return cur.fetchone()[0]


def file_number(name: str) -> int:
    return int(name.rsplit(".", 1)[1])


def test_failover_to_a_replica_whose_binlog_numbering_sorts_below(local_storage, capsys):
    """Issue 17's scenario: the promoted replica writes mysql-bin.000001 while the capture's offset
    is in a higher-numbered file of the old primary. The translated position is put in the next
    offset epoch, so the new server's events (updates and deletes of rows captured before the
    failover, a DDL) order after the old server's in the state and the schema history."""
    with scratch_database("epoch") as (db, primary):
        try:
            setup_table(primary, db)
            with primary.cursor() as cur:
                cur.execute("FLUSH BINARY LOGS")  # the primary's file number is > 1
            port = start_replica("--binlog-start", "1")
            rep = connect_root(port)
            assert binlog_file(rep) == "mysql-bin.000001"
            mysql = capture_resource(db)
            cdc = SensorDriven(mysql, local_storage.base_uri)
            cdc.ticks()  # snapshot
            captured_on_primary = write(primary, batch(db, 1, 10))
            cdc.ticks()
            pending = write(primary, batch(db, 11, 6))  # replicated, not captured before the failover
            wait_replicated(primary, rep)
            before = json.loads(cdc.cursor or "{}")
            assert file_number(before["committed"]["file"]) > file_number(binlog_file(rep))
            assert "epoch" not in before["committed"]
            promote(port)
            # the new primary changes and deletes rows captured before the failover
            on_new_primary = write(
                rep,
                [
                    f"UPDATE {db}.t SET v = -1, note = 'upd-on-replica' WHERE id IN (-20, -19, 1, 2)",
                    f"DELETE FROM {db}.t WHERE id IN (-18, 3, 1004)",
                    f"UPDATE {db}.t SET note = CONCAT(note, '#') WHERE id BETWEEN 4 AND 8",
                    f"DELETE FROM {db}.t WHERE id = 12",
                    *batch(db, 41, 4),
                ],
            )
            cdc.resources["mysql"] = on_port(mysql, port)  # the runbook: repoint host/port
            t0 = time.monotonic()
            log = cdc.ticks()
            seconds = time.monotonic() - t0
            after = json.loads(cdc.cursor or "{}")
            assert after["server"]["server_id"] == 2
            assert after["committed"]["epoch"] == 1, after["committed"]
            assert file_number(after["committed"]["file"]) < file_number(before["committed"]["file"])
            # a DDL on the new primary, then rows using the new column
            ddl = write(rep, [f"ALTER TABLE {db}.t ADD COLUMN extra INT"])
            later = write(
                rep,
                [
                    f"UPDATE {db}.t SET extra = id * 10, v = v + 100 WHERE id IN (-17, 4, 5, 13)",
                    f"INSERT INTO {db}.t (id, v, note, extra) VALUES (500, 5, 'after-ddl', 5000)",
                    f"DELETE FROM {db}.t WHERE id IN (-16, 6)",
                ],
            )
            cdc.ticks()
            assert json.loads(cdc.cursor or "{}")["committed"]["epoch"] == 1

            events = changelog(local_storage, db)
            streamed = [e for e in events if e["op"] != "r"]
            expected = captured_on_primary + pending + on_new_primary + later
            by_gtid = Counter(e["source"]["gtid"] for e in streamed)
            assert set(by_gtid) == set(expected), set(by_gtid) ^ set(expected)
            assert not set(ddl) & set(by_gtid)  # the DDL is in the schema history, not the change log
            row_keys = Counter((e["source"]["gtid"], e["op"], e["key"]["id"]) for e in streamed)
            dups = {k: n for k, n in row_keys.items() if n > 1}
            assert not dups
            # the state equals the source, including the rows the new primary changed and deleted
            assert live_state(local_storage, db) == source_state(rep, db)
            st = read_current(local_storage, local_storage.uri(db, db, "t", "state"))
            extra = sorted((r["id"], r["extra"]) for r in st.to_pylist() if not r["__deleted"])
            with rep.cursor() as cur:
                cur.execute(f"SELECT id, extra FROM {db}.t")
                assert extra == sorted(cur.fetchall())
            epochs = Counter(r["__epoch"] for r in st.to_pylist())
            assert epochs[1] > 0 and set(epochs) <= {0, 1}
            hist = DeltaTable(
                local_storage.uri(db, "_schema_history"),
                storage_options=local_storage.delta_storage_options(),
            ).to_pyarrow_table()
            alters = [r for r in hist.to_pylist() if r["ddl"].upper().startswith("ALTER")]
            assert len(alters) == 1 and alters[0]["epoch"] == 1
            with capsys.disabled():
                print(
                    f"\n[failover figures, numbering below] transactions: {len(expected)} "
                    f"({len(captured_on_primary)} captured on the primary, {len(pending)} replicated but "
                    f"not captured before the failover, {len(on_new_primary) + len(later)} on the promoted "
                    f"replica + 1 DDL); change events streamed: {len(streamed)}; GTIDs in the change log: "
                    f"{len(by_gtid)}; duplicates: {sum(n - 1 for n in row_keys.values())}; lost GTIDs: "
                    f"{len(set(expected) - set(by_gtid))}; failover catch-up: {seconds:.1f}s in "
                    f"{len(log.runs)} run(s); offset {before['committed']['file']}:{before['committed']['pos']}"
                    f" -> {after['committed']['file']}:{after['committed']['pos']} epoch "
                    f"{after['committed']['epoch']}"
                )
            rep.close()
        finally:
            _stop_and_remove_replica()


def test_replica_seeded_at_the_captured_position(local_storage):
    """The replica's binlog holds none of the primary's transactions (seeded by a dump at the
    GTID position the capture had reached, gtid_slave_pos): the committed GTIDs are executed there
    all the same, and capture continues with the promoted replica's own transactions."""
    with scratch_database("seeded") as (db, primary):
        try:
            setup_table(primary, db)
            mysql = capture_resource(db)
            cdc = SensorDriven(mysql, local_storage.base_uri)
            cdc.ticks()
            committed = json.loads(cdc.cursor or "{}")["committed"]
            assert committed["gtid_set"] == scalar(primary, "SELECT @@GLOBAL.gtid_binlog_pos")
            port = start_replica()
            rep = connect_root(port)
            assert scalar(rep, "SELECT @@GLOBAL.gtid_slave_pos") == committed["gtid_set"]
            promote(port)
            gtids = write(rep, batch(db, 1, 4))
            assert all(g.startswith("2-2-") for g in gtids)  # the replica's own GTID domain
            cdc.resources["mysql"] = on_port(mysql, port)
            cdc.ticks()
            streamed = [e for e in changelog(local_storage, db) if e["op"] != "r"]
            assert sorted({e["source"]["gtid"] for e in streamed}) == sorted(gtids)
            assert (
                max(Counter((e["source"]["gtid"], e["op"], e["key"]["id"]) for e in streamed).values()) == 1
            )
            assert live_state(local_storage, db) == source_state(rep, db)
            rep.close()
        finally:
            _stop_and_remove_replica()


def test_offset_ahead_of_the_server_is_a_clear_error(local_storage):
    with scratch_database("ahead") as (db, primary):
        setup_table(primary, db)
        mysql = capture_resource(db)
        cdc = SensorDriven(mysql, local_storage.base_uri)
        cdc.ticks()
        cur = json.loads(cdc.cursor or "{}")
        good = cdc.cursor
        cur["committed"]["pos"] += 50_000
        cdc.cursor = json.dumps(cur)
        with pytest.raises(Exception, match=r"ahead of the server's end.*Remedies: point the resource"):
            cdc.ticks()
        # a cursor of the shape (no server identity) whose GTIDs the server never wrote
        cur = json.loads(good or "{}")
        cur.pop("server")
        cur["committed"]["pos"] += 50_000
        domain, server, seq = cur["committed"]["gtid_set"].split(",")[0].split("-")
        cur["committed"]["gtid_set"] = f"{domain}-{server}-{int(seq) + 1000}"
        cdc.cursor = json.dumps(cur)
        with pytest.raises(Exception, match=r"never executed.*errant.*snapshot_mode='when_needed'"):
            cdc.ticks()
        # when_needed re-snapshots; the server's position sorts before the offset's, so the
        # re-snapshot starts a new offset epoch and its rows win over the lake's
        cdc.cursor = json.dumps(cur)
        cdc.resources["mysql"] = on_port(mysql, MYSQL_PORT, snapshot_mode="when_needed")
        log = cdc.ticks()
        assert log.runs and all(r.success for r in log.runs)  # the re-snapshot (and caught up)
        assert json.loads(cdc.cursor or "{}")["committed"]["epoch"] == 1
        assert live_state(local_storage, db) == source_state(primary, db)
        # the untouched cursor still works
        cdc.cursor = good
        cdc.resources["mysql"] = mysql
        assert "caught up" in cdc.ticks().skip_reasons[-1]


def test_errant_transaction_of_the_old_primary(replica, local_storage):
    rep = connect_root(replica)
    with scratch_database("errant") as (db, primary):
        setup_table(primary, db)
        mysql = capture_resource(db)
        cdc = SensorDriven(mysql, local_storage.base_uri)
        cdc.ticks()
        wait_replicated(primary, rep)
        with rep.cursor() as c:
            c.execute("STOP SLAVE")
        # captured from the primary, never replicated: lost in the failover
        errant = write(primary, [f"INSERT INTO {db}.t VALUES (500, 5, 'errant')"])
        cdc.ticks()
        promote(replica)
        write(rep, batch(db, 1, 3))
        cdc.resources["mysql"] = on_port(mysql, replica)
        with pytest.raises(Exception, match=rf"never executed: {errant[0]}.*Remedies"):
            cdc.ticks()
        cdc.resources["mysql"] = on_port(mysql, replica, snapshot_mode="when_needed")
        log = cdc.ticks()
        assert any(r.dagster_run.tags.get("dagster_mysql_cdc/mode") == "snapshot" for r in log.runs)
        assert live_state(local_storage, db) == source_state(rep, db)  # the errant row is gone
        assert json.loads(log.cursor or "{}")["server"]["server_id"] == 2
    rep.close()


def test_run_refuses_another_servers_window(replica, local_storage):
    """A window planned on the primary, run after the resource was repointed: the run reads
    nothing, the sensor re-plans the window by GTID and capture continues."""
    rep = connect_root(replica)
    with scratch_database("runguard") as (db, primary):
        setup_table(primary, db)
        mysql = capture_resource(db)
        cdc = SensorDriven(mysql, local_storage.base_uri)
        cdc.ticks()
        gtids = write(primary, batch(db, 1, 4))
        wait_replicated(primary, rep)
        # one tick plans the window on the primary, but its run is launched after the repoint
        planned = cdc.ticks(until_caught_up=False, max_ticks=1, raise_on_error=False)
        assert planned.runs  # ran on the primary already; plan another one instead
        more = write(primary, batch(db, 5, 3))
        wait_replicated(primary, rep)
        promote(replica)
        plan, requests = evaluate_tick(StreamCursor.parse(cdc.cursor), mysql, cdc.instance, cdc.cdc)
        assert requests and requests[0].tags["dagster_mysql_cdc/mode"] == "stream"
        cdc.cursor = plan.cursor.to_json()
        cdc.resources["mysql"] = on_port(mysql, replica)
        res = dg.materialize(
            [cdc.cdc],
            resources=cdc.resources,
            instance=cdc.instance,
            selection=dg.AssetSelection.assets(*requests[0].asset_selection).without_checks(),
            tags=dict(requests[0].tags),
            raise_on_error=False,
        )
        assert not res.success
        err = str([e for e in res.all_events if e.is_failure])
        assert "another server" in err and "nothing was read" in err
        cdc.ticks()
        streamed = [e for e in changelog(local_storage, db) if e["op"] != "r"]
        assert {e["source"]["gtid"] for e in streamed} == set(gtids + more)
        row_keys = Counter((e["source"]["gtid"], e["op"], e["key"]["id"]) for e in streamed)
        assert max(row_keys.values()) == 1
        assert live_state(local_storage, db) == source_state(rep, db)
    rep.close()


def test_replica_infra_flags_are_validated():
    r = subprocess.run(
        [*MARIADB, "start", "--instance", "replica-bad", "--port", "1", "--replica-of", "x"],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert r.returncode == 2 and "bad --replica-of" in r.stderr


def test_replica_gets_a_free_server_id_and_is_up_only_when_replicating():
    """Issue 25 point 12: ``--replica-of`` without ``--server-id`` gave the replica the primary's
    server_id; replication stopped at once, yet the script printed "up". Now a free id is picked
    (an id in use is refused) and "up" means the replica's IO and SQL threads run."""
    start = [
        *MARIADB,
        "start",
        "--instance",
        "replica",
        "--port",
        str(REPLICA_PORT),
        "--replica-of",
        str(MYSQL_PORT),
    ]
    _stop_and_remove_replica()
    try:
        taken = subprocess.run([*start, "--server-id", "1"], cwd=ROOT, capture_output=True, text=True)
        assert taken.returncode == 2, taken.stdout + taken.stderr
        assert "--server-id 1 is the server_id of the primary" in taken.stderr
        _stop_and_remove_replica()
        r = subprocess.run(start, cwd=ROOT, capture_output=True, text=True)
        assert r.returncode == 0, r.stdout + r.stderr
        assert "no --server-id given: using" in r.stdout and "up on" in r.stdout
        primary, rep = connect_root(MYSQL_PORT), connect_root(REPLICA_PORT)
        with primary.cursor() as p, rep.cursor(pymysql.cursors.DictCursor) as c:
            p.execute("SELECT @@server_id")
            c.execute("SELECT @@server_id AS id")
            assert c.fetchone()["id"] != p.fetchone()[0]
            c.execute("SHOW SLAVE STATUS")
            status = c.fetchone()
            assert (status["Slave_IO_Running"], status["Slave_SQL_Running"]) == ("Yes", "Yes")
        primary.close()
        rep.close()
    finally:
        _stop_and_remove_replica()
