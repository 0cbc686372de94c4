"""The least-privilege GRANTs of docs/operations.md ("Least-privilege grants"), checked against
MariaDB: a user with exactly the documented privileges of each mode snapshots, streams, runs
incremental snapshots and the checks; with one privilege less the preflight names it."""

import threading
import time
import uuid

import dagster as dg
import pytest
from conftest import MYSQL_HOST, MYSQL_PORT, root_connect
from lake_utils import live_state_rows, source_rows
from sensor_harness import SensorDriven, scratch_database

from dagster_mysql_cdc import MySqlCdcResource
from dagster_mysql_cdc.errors import ConfigurationError

pytestmark = [pytest.mark.integration, pytest.mark.spark]

BINLOG = "REPLICATION SLAVE, BINLOG MONITOR"  # MySQL: REPLICATION SLAVE, REPLICATION CLIENT

#: mode -> (resource options, GRANT statements; {db} and {u} are filled in)
MODES = {
    "locked snapshot": (
        {},
        ["GRANT SELECT ON `{db}`.* TO {u}", f"GRANT RELOAD, {BINLOG} ON *.* TO {{u}}"],
    ),
    "table-locked snapshot (no RELOAD)": (
        {},
        ["GRANT SELECT, LOCK TABLES ON `{db}`.* TO {u}", f"GRANT {BINLOG} ON *.* TO {{u}}"],
    ),
    "lock-free snapshot, read-only incremental snapshots, checks": (
        {"snapshot_locking_mode": "none", "incremental_snapshot_read_only": True},
        ["GRANT SELECT ON `{db}`.* TO {u}", f"GRANT {BINLOG} ON *.* TO {{u}}"],
    ),
    "incremental snapshots with watermark rows": (
        {"snapshot_locking_mode": "none"},
        [
            "GRANT SELECT ON `{db}`.* TO {u}",
            "GRANT INSERT ON `{db}`.`debezium_signal` TO {u}",
            f"GRANT {BINLOG} ON *.* TO {{u}}",
        ],
    ),
}


def _user(conn, db: str, grants: list[str]) -> tuple[str, str]:
    name, pw = f"g_{uuid.uuid4().hex[:10]}", "Pw-" + uuid.uuid4().hex
    u = f"'{name}'@'%'"
    with conn.cursor() as cur:
        cur.execute(f"CREATE USER {u} IDENTIFIED BY '{pw}'")
        for g in grants:
            cur.execute(g.format(db=db, u=u))
    return name, pw


@pytest.mark.parametrize("mode", list(MODES))
def test_documented_grants_are_enough(mode, local_storage):
    options, grants = MODES[mode]
    with scratch_database("grant") as (db, conn):
        with conn.cursor() as cur:
            cur.execute(f"USE {db}")
            cur.execute("CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(20))")
            cur.execute("INSERT INTO t SELECT seq, CONCAT('v', seq) FROM seq_1_to_50")
            cur.execute(
                "CREATE TABLE debezium_signal (id VARCHAR(42) PRIMARY KEY, type VARCHAR(32) NOT NULL, data VARCHAR(2048) NULL)"
            )
        user, pw = _user(conn, db, grants)
        try:
            mysql = MySqlCdcResource(
                stream_follow_seconds=0.0,
                host=MYSQL_HOST,
                port=MYSQL_PORT,
                user=user,
                password=pw,
                server_name=db,
                database_include_list=[db],
                incremental_snapshot_chunk_size=20,
                **options,
            )
            tables = [t for t in mysql.discover_tables() if t.table == "t"]
            cdc = SensorDriven(mysql, local_storage.base_uri, tables=tables)
            cdc.ticks()  # initial snapshot
            with conn.cursor() as cur:
                cur.execute(f"UPDATE {db}.t SET v = 'streamed' WHERE id <= 5")
                if "incremental" in mode:  # the other modes leave incremental snapshots off
                    cur.execute(
                        f"INSERT INTO {db}.debezium_signal VALUES ('g1', 'execute-snapshot', '{{\"data-collections\": [\"{db}.t\"]}}')"
                    )
            ticks = cdc.ticks()  # streaming (+ an incremental snapshot)
            assert ticks.runs and all(r.success for r in ticks.runs)
            src, key = source_rows(db, "t")
            assert live_state_rows(local_storage, local_storage.uri(db, db, "t", "state"), key) == src
            res = dg.materialize(
                [cdc.cdc],
                resources=cdc.resources,
                instance=cdc.instance,
                selection=dg.AssetSelection.checks_for_assets(
                    dg.AssetKey([db, db, "t"]), dg.AssetKey([db, "binlog"])
                ),
            )
            evals = res.get_asset_check_evaluations()
            assert evals and all(e.passed for e in evals), [
                (e.check_name, e.metadata) for e in evals if not e.passed
            ]
        finally:
            with conn.cursor() as cur:
                cur.execute(f"DROP USER '{user}'@'%'")


@pytest.mark.parametrize("mode", [m for m in MODES if "incremental" in m])
def test_a_following_run_reads_an_incremental_snapshot_with_the_documented_grants(mode, local_storage):
    """The README default (following stream runs) with exactly the documented grants: one run
    reads an incremental snapshot chunk after chunk, window after window (watermark rows
    inserted with only ``INSERT`` on the signal table, or read-only without them), under a
    concurrent writer, and the lake equals the source."""
    options, grants = MODES[mode]
    with scratch_database("grantf") as (db, conn):
        with conn.cursor() as cur:
            cur.execute(f"USE {db}")
            cur.execute("CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(20))")
            cur.execute("INSERT INTO t SELECT seq, CONCAT('v', seq) FROM seq_1_to_600")
            cur.execute(
                "CREATE TABLE debezium_signal (id VARCHAR(42) PRIMARY KEY, type VARCHAR(32) NOT NULL, data VARCHAR(2048) NULL)"
            )
        user, pw = _user(conn, db, grants)
        stop, writes = threading.Event(), [0]

        def writer() -> None:  # the source's own traffic while the snapshot reads its chunks
            w = root_connect()
            with w.cursor() as cur:
                while not stop.is_set():
                    k = writes[0] * 37 % 640 + 1  # updates, and inserts past the table's end
                    cur.execute(f"REPLACE INTO {db}.t VALUES (%s, %s)", (k, f"w{writes[0]}"))
                    writes[0] += 1
                    time.sleep(0.01)
            w.close()

        try:
            mysql = MySqlCdcResource(
                host=MYSQL_HOST, port=MYSQL_PORT, user=user, password=pw, server_name=db,
                database_include_list=[db], incremental_snapshot_chunk_size=20,
                incremental_snapshot_max_chunks_per_run=2, stream_follow_seconds=120.0,
                stream_follow_idle_seconds=1.0, **options,
            )  # fmt: skip
            cdc = SensorDriven(mysql, local_storage.base_uri, tables=mysql.discover_tables())
            cdc.ticks()  # initial snapshot, caught up
            thread = threading.Thread(target=writer, daemon=True)
            thread.start()
            threading.Timer(4.0, stop.set).start()  # a busy binlog, then an idle one
            with conn.cursor() as cur:
                cur.execute(
                    f"INSERT INTO {db}.debezium_signal VALUES ('f1', 'execute-snapshot', '{{\"data-collections\": [\"{db}.t\"]}}')"
                )
            ticks = cdc.ticks(max_ticks=10)
            stop.set()
            thread.join(timeout=30)
            assert writes[0] > 20, "the writer ran during the snapshot"
            assert ticks.runs and all(r.success for r in ticks.runs)
            assert '"incremental": null' in cdc.cursor, cdc.cursor
            chunks = [
                len(ev.materialization.metadata["incremental_chunks"].value)
                for r in ticks.runs
                for ev in r.get_asset_materialization_events()
                if ev.asset_key.path[-1] == "binlog" and "incremental_chunks" in ev.materialization.metadata
            ]
            assert max(chunks) >= 15, f"one run read chunk after chunk (2 per window): {chunks}"
            cdc.ticks()  # the writer's last changes
            src, key = source_rows(db, "t")
            assert live_state_rows(local_storage, local_storage.uri(db, db, "t", "state"), key) == src
        finally:
            stop.set()
            with conn.cursor() as cur:
                cur.execute(f"DROP USER '{user}'@'%'")


def test_create_signal_table_needs_no_create_grant_when_the_table_exists():
    """``make ui`` (and a user's set-up script) call ``create_signal_table()`` every time: with
    the documented grants (an administrator created the table) it returns the table, and when
    the table is missing it says how to create it instead of a raw "CREATE command denied"."""
    options, grants = MODES["incremental snapshots with watermark rows"]
    with scratch_database("grantc") as (db, conn):
        user, pw = _user(conn, db, [g for g in grants if "debezium_signal" not in g])
        try:
            mysql = MySqlCdcResource(
                host=MYSQL_HOST, port=MYSQL_PORT, user=user, password=pw, server_name=db,
                database_include_list=[db], **options,
            )  # fmt: skip
            with pytest.raises(ConfigurationError) as missing:
                mysql.create_signal_table()
            assert "CREATE command denied" in str(missing.value)
            assert f"CREATE TABLE IF NOT EXISTS `{db}`.`debezium_signal`" in str(missing.value)
            with conn.cursor() as cur:
                cur.execute(
                    f"CREATE TABLE {db}.debezium_signal (id VARCHAR(42) PRIMARY KEY, type VARCHAR(32) NOT NULL, data VARCHAR(2048) NULL)"
                )
                for g in grants:
                    if "debezium_signal" in g:
                        cur.execute(g.format(db=db, u=f"'{user}'@'%'"))
            assert mysql.create_signal_table() == f"{db}.debezium_signal"
        finally:
            _drop_user(conn, user)


def test_one_privilege_less_is_named_by_the_preflight(local_storage):
    with scratch_database("grant") as (db, conn):
        with conn.cursor() as cur:
            cur.execute(f"CREATE TABLE {db}.t (id INT PRIMARY KEY)")
        user, pw = _user(
            conn, db, ["GRANT SELECT ON `{db}`.* TO {u}", "GRANT REPLICATION SLAVE ON *.* TO {u}"]
        )
        try:
            mysql = MySqlCdcResource(
                host=MYSQL_HOST, port=MYSQL_PORT, user=user, password=pw, server_name=db,
                database_include_list=[db], snapshot_locking_mode="none", stream_follow_seconds=0.0,
            )  # fmt: skip
            cdc = SensorDriven(mysql, local_storage.base_uri)
            with pytest.raises(Exception) as excinfo:  # the first tick reads the binlog position
                cdc.ticks(max_ticks=1)
            chain, e = [], excinfo.value
            while e is not None:
                chain.append(str(e))
                e = e.__cause__ or e.__context__
            assert "BINLOG MONITOR" in "\n".join(chain)
        finally:
            with conn.cursor() as cur:
                cur.execute(f"DROP USER '{user}'@'%'")


# -- changes the binlog does not carry, with exactly the documented grants -----------------------
# Issue "Nothing lost" point 6: MariaDB 10.11 hides foreign keys (information_schema.
# REFERENTIAL_CONSTRAINTS) and triggers (information_schema.TRIGGERS) from a user with only SELECT,
# so cascade and trigger detection were silently off with these grants.

#: The documented grants under which gaps are repaired (repairs are incremental snapshots).
REPAIR_MODE = "incremental snapshots with watermark rows"


def _documented_capture(conn, db: str, lake_base_uri: str) -> tuple[SensorDriven, str]:
    """The signal table (created by root, as the docs say), a user with exactly the documented
    grants of :data:`REPAIR_MODE`, and the sensor of ``db`` as that user after the initial
    snapshot into ``lake_base_uri``. Returns (sensor, user name)."""
    options, grants = MODES[REPAIR_MODE]
    with conn.cursor() as cur:
        cur.execute(
            f"CREATE TABLE `{db}`.debezium_signal (id VARCHAR(42) PRIMARY KEY, type VARCHAR(32) NOT NULL, "
            "data VARCHAR(2048) NULL)"
        )
    user, pw = _user(conn, db, grants)
    mysql = MySqlCdcResource(
        stream_follow_seconds=0.0, host=MYSQL_HOST, port=MYSQL_PORT, user=user, password=pw,
        server_name=db, database_include_list=[db], signal_data_collection=f"{db}.debezium_signal",
        **options,
    )  # fmt: skip
    cdc = SensorDriven(mysql, lake_base_uri)
    cdc.ticks()  # initial snapshot, caught up
    return cdc, user


def _until_repaired(cdc: SensorDriven, max_rounds: int = 12) -> tuple[list[dict], list[str]]:
    """Drive the sensor until no repair is left; (binlog_gaps metadata, WARNING messages)."""
    gaps, warnings = [], []
    for _ in range(max_rounds):
        ticks = cdc.ticks()
        assert all(r.success for r in ticks.runs)
        for res in ticks.runs:
            for ev in res.get_asset_materialization_events():
                if "binlog_gaps" in ev.materialization.metadata:
                    gaps += ev.materialization.metadata["binlog_gaps"].value
            warnings += [
                rec.user_message
                for rec in cdc.instance.all_logs(res.run_id)
                if rec.level >= 30 and rec.user_message.startswith("Change not carried by the binlog")
            ]
        if '"incremental": null' in cdc.cursor:
            return gaps, warnings
    raise AssertionError(f"repairs not finished after {max_rounds} rounds: {cdc.cursor}")


def _assert_equal(storage, db: str, tables) -> None:
    differ = []
    for t in tables:
        src, key = source_rows(db, t)
        if live_state_rows(storage, storage.uri(db, db, t, "state"), key) != src:
            differ.append(t)
    assert not differ, f"lake differs from the source: {differ}"


def _drop_user(conn, user: str) -> None:
    with conn.cursor() as cur:
        cur.execute(f"DROP USER IF EXISTS '{user}'@'%'")


def test_fk_cascades_are_repaired_with_the_documented_grants(local_storage):
    """ON UPDATE CASCADE / ON DELETE SET NULL / CASCADE children of a parent key change (row and
    statement based) are repaired with only SELECT on the tables: the foreign keys come from
    SHOW CREATE TABLE."""
    with scratch_database("grantfk") as (db, conn):
        with conn.cursor() as cur:
            cur.execute(f"USE {db}")
            cur.execute("CREATE TABLE parent (id INT PRIMARY KEY, name VARCHAR(20))")
            cur.execute(
                "CREATE TABLE child (id INT PRIMARY KEY, parent_id INT, KEY (parent_id), CONSTRAINT fk_child "
                "FOREIGN KEY (parent_id) REFERENCES parent (id) ON UPDATE CASCADE ON DELETE SET NULL)"
            )
            cur.execute(  # the foreign key in the primary key, as Sakila's film_actor
                "CREATE TABLE link (parent_id INT, n INT, PRIMARY KEY (parent_id, n), CONSTRAINT fk_link "
                "FOREIGN KEY (parent_id) REFERENCES parent (id) ON UPDATE CASCADE ON DELETE CASCADE)"
            )
            cur.execute("CREATE TABLE other (id INT PRIMARY KEY)")
            cur.execute("INSERT INTO parent SELECT seq, CONCAT('p', seq) FROM seq_1_to_40")
            cur.execute("INSERT INTO child SELECT seq, 1 + seq % 40 FROM seq_1_to_400")
            cur.execute("INSERT INTO link SELECT 1 + seq % 10, seq FROM seq_1_to_200")
            cur.execute("INSERT INTO other SELECT seq FROM seq_1_to_10")
        cdc, user = _documented_capture(conn, db, local_storage.base_uri)
        try:
            with conn.cursor() as cur:
                cur.execute("UPDATE parent SET id = 9001 WHERE id = 1")  # row based
                cur.execute("DELETE FROM parent WHERE id = 30")
                cur.execute("SET SESSION binlog_format = 'STATEMENT'")
                cur.execute("UPDATE parent SET id = id + 5000 WHERE id = 2")
                cur.execute("SET SESSION binlog_format = 'ROW'")
            gaps, warnings = _until_repaired(cdc)
            _assert_equal(local_storage, db, ("parent", "child", "link", "other"))
            assert {(g["kind"], g["table"]) for g in gaps} >= {
                ("fk_cascade", f"{db}.child"),
                ("fk_cascade", f"{db}.link"),
            }
            assert f"{db}.other" not in {g["table"] for g in gaps if g["kind"] == "fk_cascade"}
            assert any("fk_child" in w for w in warnings) and any("fk_link" in w for w in warnings)
        finally:
            _drop_user(conn, user)


def test_trigger_writes_are_repaired_with_the_documented_grants(local_storage):
    """Statement-based DML on a table whose triggers insert into and update other captured
    tables. With the documented optional GRANT TRIGGER: only the tables the fired trigger writes,
    the gap naming that trigger (an UPDATE named the DELETE trigger, the first by name, as
    Sakila's del_film for upd_film). With the documented grants alone the triggers are invisible:
    every captured table is re-read, and the gap says so and names the GRANT."""
    with scratch_database("granttrg") as (db, conn):
        with conn.cursor() as cur:
            cur.execute(f"USE {db}")
            cur.execute("CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(20))")
            cur.execute("CREATE TABLE log (id INT AUTO_INCREMENT PRIMARY KEY, t_id INT, what VARCHAR(10))")
            cur.execute("CREATE TABLE stats (id INT PRIMARY KEY, n INT)")
            cur.execute("CREATE TABLE other (id INT PRIMARY KEY, v INT)")
            cur.execute("INSERT INTO t SELECT seq, CONCAT('v', seq) FROM seq_1_to_50")
            cur.execute("INSERT INTO stats SELECT seq, 0 FROM seq_1_to_200")
            cur.execute("INSERT INTO other SELECT seq, seq FROM seq_1_to_10")
            # as Sakila's film: del_, ins_ and upd_ triggers (in name order)
            cur.execute(
                "CREATE TRIGGER del_t AFTER DELETE ON t FOR EACH ROW DELETE FROM stats WHERE id = old.id"
            )
            cur.execute(
                "CREATE TRIGGER ins_t AFTER INSERT ON t FOR EACH ROW "
                "INSERT INTO log (t_id, what) VALUES (new.id, 'ins')"
            )
            cur.execute(
                "CREATE TRIGGER upd_t AFTER UPDATE ON t FOR EACH ROW BEGIN "
                "UPDATE stats SET n = n + 1 WHERE id = new.id; END"
            )
        cdc, user = _documented_capture(conn, db, local_storage.base_uri)
        tables = ("t", "log", "stats", "other")
        try:
            with scratch_database("grantoth") as (other_db, _), conn.cursor() as cur:
                cur.execute(f"GRANT TRIGGER ON `{db}`.* TO '{user}'@'%'")
                cur.execute(f"CREATE TABLE {other_db}.x (id INT PRIMARY KEY)")
                cur.execute("SET SESSION binlog_format = 'STATEMENT'")
                cur.execute("UPDATE t SET v = 'upd' WHERE id <= 3")  # 3 stats rows
                # a database not captured, whose triggers the user cannot see (pt-table-checksum
                # writes its own this way): not assumed to write the captured tables
                cur.execute(f"INSERT INTO {other_db}.x VALUES (1)")
                cur.execute("SET SESSION binlog_format = 'ROW'")
                gaps, _ = _until_repaired(cdc)
            _assert_equal(local_storage, db, tables)
            details = [g["detail"] for g in gaps if g["kind"] == "trigger"]
            assert details and details[0].startswith(f"trigger {db}.upd_t (UPDATE on {db}.t) ran"), details
            assert {(g["kind"], g["table"]) for g in gaps} == {
                ("statement_dml", f"{db}.t"),
                ("trigger", f"{db}.stats"),
            }

            with conn.cursor() as cur:  # exactly the documented grants
                cur.execute(f"REVOKE TRIGGER ON `{db}`.* FROM '{user}'@'%'")
                cur.execute("SET SESSION binlog_format = 'STATEMENT'")
                cur.execute("INSERT INTO t SELECT seq, 'new' FROM seq_101_to_106")  # 6 log rows
                cur.execute("UPDATE t SET v = 'again' WHERE id BETWEEN 10 AND 12")  # 3 stats rows
                cur.execute("SET SESSION binlog_format = 'ROW'")
            gaps, warnings = _until_repaired(cdc)
            _assert_equal(local_storage, db, tables)
            assert {(g["kind"], g["table"]) for g in gaps} == {
                ("statement_dml", f"{db}.t"),
                *(("trigger", f"{db}.{t}") for t in ("log", "stats", "other")),
            }
            assert any(f"GRANT TRIGGER ON `{db}`.* TO '{user}'@'%'" in w for w in warnings), warnings
        finally:
            _drop_user(conn, user)


def test_sakila_converges_with_the_documented_grants(local_storage, sakila_db):
    """The issue's run: Sakila (foreign keys ON UPDATE CASCADE, film's triggers writing film_text)
    captured with exactly the documented grants; actor and staff keys changed (row based) and
    film updated and inserted statement based: all 16 tables equal the source without an
    operator."""
    from conftest import sakila_copy

    with scratch_database("grantsak") as (db, conn):
        tables = sakila_copy(conn, sakila_db, db)
        assert len(tables) == 16
        cdc, user = _documented_capture(conn, db, local_storage.base_uri)
        try:
            with conn.cursor() as cur:
                cur.execute(f"USE {db}")
                cur.execute("SELECT COUNT(*) FROM film_actor WHERE actor_id = 1")
                assert cur.fetchone()[0] > 0
                cur.execute("UPDATE actor SET actor_id = 9001 WHERE actor_id = 1")  # -> film_actor
                cur.execute("UPDATE staff SET staff_id = 250 WHERE staff_id = 2")  # -> store, payment, rental
                cur.execute("SET SESSION binlog_format = 'STATEMENT'")
                cur.execute("UPDATE film SET title = CONCAT(title, ' II') WHERE film_id <= 4")  # -> film_text
                cur.execute(
                    "INSERT INTO film (film_id, title, language_id) VALUES (5001, 'NEW FILM', 1)"
                )  # -> film_text
                cur.execute("SET SESSION binlog_format = 'ROW'")
            t0 = time.monotonic()
            _until_repaired(cdc)
            print(f"\nSakila repaired in {time.monotonic() - t0:.1f} s")
            _assert_equal(local_storage, db, tables)
        finally:
            _drop_user(conn, user)


# -- privileges granted through a role ------------------------------------------------------------


def _role_user(conn, db: str, default_role: bool) -> tuple[str, str, str]:
    """A user holding the "locked snapshot" grants through a role (its default role or not)."""
    role = f"r_{uuid.uuid4().hex[:10]}"
    name, pw = _user(conn, db, [])
    with conn.cursor() as cur:
        cur.execute(f"CREATE ROLE {role}")
        for g in MODES["locked snapshot"][1]:
            cur.execute(g.format(db=db, u=role))
        cur.execute(f"GRANT {role} TO '{name}'@'%'")
        if default_role:
            cur.execute(f"SET DEFAULT ROLE {role} FOR '{name}'@'%'")
    return name, pw, role


def _role_capture(db: str, user: str, pw: str, lake_base_uri: str) -> SensorDriven:
    mysql = MySqlCdcResource(
        host=MYSQL_HOST, port=MYSQL_PORT, user=user, password=pw, server_name=db,
        database_include_list=[db], stream_follow_seconds=0.0,
    )  # fmt: skip
    return SensorDriven(mysql, lake_base_uri)


def test_the_documented_grants_through_a_default_role_are_enough(local_storage):
    """The preflight counts the privileges of the session's enabled role (and the roles granted
    to it), as the server does: a user whose grants come from its default role captures."""
    with scratch_database("grant") as (db, conn):
        with conn.cursor() as cur:
            cur.execute(f"CREATE TABLE {db}.t (id INT PRIMARY KEY, v VARCHAR(20))")
            cur.execute(f"INSERT INTO {db}.t VALUES (1, 'a'), (2, 'b')")
        user, pw, role = _role_user(conn, db, default_role=True)
        try:
            cdc = _role_capture(db, user, pw, local_storage.base_uri)
            ticks = cdc.ticks()  # initial snapshot (preflight, read lock with RELOAD)
            assert ticks.runs and all(r.success for r in ticks.runs)
            with conn.cursor() as cur:
                cur.execute(f"UPDATE {db}.t SET v = 'streamed' WHERE id = 2")
            ticks = cdc.ticks()
            assert ticks.runs and all(r.success for r in ticks.runs)
            src, key = source_rows(db, "t")
            assert live_state_rows(local_storage, local_storage.uri(db, db, "t", "state"), key) == src
        finally:
            _drop_user(conn, user)
            with conn.cursor() as cur:
                cur.execute(f"DROP ROLE IF EXISTS {role}")


def test_a_granted_role_that_is_not_enabled_is_named_by_the_preflight():
    """A role granted but not enabled gives the sessions nothing: the preflight lists what is
    missing and names the role with the statement that enables it."""
    from dagster_mysql_cdc import PreflightError
    from dagster_mysql_cdc.source.connection import ConnectionSettings, connect, preflight, server_info

    with scratch_database("grant") as (db, conn):
        with conn.cursor() as cur:
            cur.execute(f"CREATE TABLE {db}.t (id INT PRIMARY KEY)")
        user, pw, role = _role_user(conn, db, default_role=False)
        try:
            session = connect(ConnectionSettings(host=MYSQL_HOST, port=MYSQL_PORT, user=user, password=pw))
            try:
                with pytest.raises(PreflightError) as excinfo:
                    preflight(session, server_info(session), [(db, "t")])
            finally:
                session.close()
            text = str(excinfo.value)
            assert "REPLICATION SLAVE" in text and f"SELECT on `{db}`" in text, text
            assert f"SET DEFAULT ROLE `{role}` FOR '{user}'@'%'" in text, text
        finally:
            _drop_user(conn, user)
            with conn.cursor() as cur:
                cur.execute(f"DROP ROLE IF EXISTS {role}")
