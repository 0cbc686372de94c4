"""Changes the binlog does not carry (issue 12): statement-based DML and foreign-key cascades are
detected while streaming, reported (WARNING, ``binlog_gaps`` metadata, failed
``changes_in_binlog`` check) and repaired without a person by a targeted incremental snapshot,
with the default settings; afterwards the lake state equals the source row for row.

Real MariaDB, local Spark, the sensor driven in process (tests/sensor_harness.py).
"""

import time

import dagster as dg
import pytest
from conftest import root_connect
from deltalake import DeltaTable
from lake_utils import live_state_rows, source_rows
from sensor_harness import SensorDriven, capture_resource, scratch_database

from dagster_mysql_cdc.dagster_integration.checks import GAPS
from dagster_mysql_cdc.engine.gaps import REPAIR_HEADER
from dagster_mysql_cdc.sink.read import read_current
from dagster_mysql_cdc.sink.storage import StorageSettings

pytestmark = [pytest.mark.integration, pytest.mark.spark]


def _repair_until_done(cdc: SensorDriven, max_rounds: int = 10) -> tuple[list, float]:
    """Drive the sensor until no incremental snapshot is left; (runs, seconds)."""
    t0 = time.monotonic()
    runs = []
    for _ in range(max_rounds):
        runs += cdc.ticks().runs
        if '"incremental": null' in cdc.cursor:
            return runs, time.monotonic() - t0
    raise AssertionError(f"repair not finished after {max_rounds} rounds: {cdc.cursor}")


def _gap_reports(cdc: SensorDriven, runs) -> tuple[list[dict], list, list[str]]:
    """(binlog_gaps metadata entries, changes_in_binlog check evaluations, WARNING messages)."""
    gaps, checks, warnings = [], [], []
    for res in runs:
        for ev in res.get_asset_materialization_events():
            md = ev.materialization.metadata
            if "binlog_gaps" in md:
                gaps += md["binlog_gaps"].value
        checks += [c for c in res.get_asset_check_evaluations() if c.check_name == GAPS and not c.passed]
        for rec in cdc.instance.all_logs(res.run_id):
            if rec.level >= 30 and rec.user_message.startswith("Change not carried by the binlog"):
                warnings.append(rec.user_message)
    return gaps, checks, warnings


def _assert_lake_equals_source(storage: StorageSettings, server: str, db: str, table: str) -> None:
    src, key = source_rows(db, table)
    lake = live_state_rows(storage, storage.uri(server, db, table, "state"), key)
    assert lake == src, f"{db}.{table}: lake differs from source"


def _repaired_events(storage: StorageSettings, server: str, db: str, table: str) -> list[dict]:
    log = DeltaTable(storage.uri(server, db, table, "changelog")).to_pyarrow_table().to_pylist()
    return [e for e in log if e["headers"] and REPAIR_HEADER in dict(e["headers"])]


def test_statement_dml_is_detected_and_repaired(local_storage):
    with scratch_database("gapsdml") as (db, conn):
        with conn.cursor() as cur:
            cur.execute(f"USE {db}")
            cur.execute("CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(20), n INT)")
            cur.execute("INSERT INTO t SELECT seq, CONCAT('v', seq), seq FROM seq_1_to_3000")
            cur.execute("CREATE TABLE other (id INT PRIMARY KEY, v INT)")
        mysql = capture_resource(db)  # default settings: binlog_gap_handling="repair"
        mysql.create_signal_table()
        cdc = SensorDriven(mysql, local_storage.base_uri)
        cdc.ticks()  # initial snapshot, caught up
        with conn.cursor() as cur:
            cur.execute("SET SESSION binlog_format = 'STATEMENT'")
            cur.execute(f"INSERT INTO {db}.t VALUES (5001, 'stmt', 1)")
            cur.execute("UPDATE t SET v = 'stmt-upd', n = n + 1 WHERE id <= 10")
            cur.execute(f"REPLACE INTO {db}.t VALUES (20, 'replaced', 0)")
            cur.execute("SET SESSION binlog_format = 'ROW'")
            cur.execute("INSERT INTO other VALUES (1, 1)")  # row-based: no gap
        t0 = time.monotonic()
        first = cdc.ticks(until_caught_up=False, max_ticks=2)  # the window that sees the statements
        gaps, checks, warnings = _gap_reports(cdc, first.runs)
        assert [(g["kind"], g["table"]) for g in gaps] == [("statement_dml", f"{db}.t")]
        assert gaps[0]["repair"].startswith("Repair queued")
        assert checks and f"statement_dml on {db}.t at {gaps[0]['position']}" in str(checks[0].metadata)
        assert warnings and f"statement_dml on {db}.t at" in warnings[0]
        runs, _ = _repair_until_done(cdc)
        seconds = time.monotonic() - t0
        _assert_lake_equals_source(local_storage, db, db, "t")
        _assert_lake_equals_source(local_storage, db, db, "other")
        repaired = _repaired_events(local_storage, db, db, "t")
        assert {e["op"] for e in repaired} == {"r"}
        assert {e["source"]["snapshot"] for e in repaired} == {"incremental"}
        assert {e["after"]["id"] for e in repaired} >= {5001, 20, *range(1, 11)}
        assert "statement_dml" in dict(repaired[0]["headers"])[REPAIR_HEADER]
        print(f"\nstatement DML: {warnings[0]}\nrepaired in {seconds:.1f} s")


def test_fk_cascades_are_detected_and_repaired(local_storage):
    with scratch_database("gapsfk") as (db, conn):
        with conn.cursor() as cur:
            cur.execute(f"USE {db}")
            cur.execute("CREATE TABLE parent (id INT PRIMARY KEY, name VARCHAR(20))")
            cur.execute(
                "CREATE TABLE child (id INT PRIMARY KEY, parent_id INT, note VARCHAR(20), "
                "CONSTRAINT fk_child FOREIGN KEY (parent_id) REFERENCES parent (id) "
                "ON UPDATE CASCADE ON DELETE SET NULL)"
            )
            cur.execute(
                "CREATE TABLE link (parent_id INT, n INT, w INT, PRIMARY KEY (parent_id, n), "
                "CONSTRAINT fk_link FOREIGN KEY (parent_id) REFERENCES parent (id) "
                "ON UPDATE CASCADE ON DELETE CASCADE)"
            )
            cur.execute("INSERT INTO parent SELECT seq, CONCAT('p', seq) FROM seq_1_to_50")
            cur.execute("INSERT INTO child SELECT seq, 1 + seq % 50, 'c' FROM seq_1_to_2000")
            cur.execute("INSERT INTO link SELECT 1 + seq % 10, seq, seq FROM seq_1_to_500")
        mysql = capture_resource(db)
        mysql.create_signal_table()
        cdc = SensorDriven(mysql, local_storage.base_uri)
        cdc.ticks()
        with conn.cursor() as cur:
            cur.execute("UPDATE parent SET id = 1001 WHERE id = 1")  # cascades to child and link keys
            cur.execute("UPDATE parent SET id = 1002 WHERE id = 2")
            cur.execute("DELETE FROM parent WHERE id = 30")  # child.parent_id SET NULL; no link rows
            cur.execute("UPDATE parent SET name = 'renamed' WHERE id = 3")  # key unchanged: no cascade
        t0 = time.monotonic()
        first = cdc.ticks(until_caught_up=False, max_ticks=2)
        gaps, checks, warnings = _gap_reports(cdc, first.runs)
        assert sorted((g["table"], g["filter"]) for g in gaps) == [
            (f"{db}.child", "`parent_id` IN (1, 1001, 1002, 2)"),
            (f"{db}.child", "`parent_id` IN (30) OR `parent_id` IS NULL"),  # ON DELETE SET NULL
            (f"{db}.link", "`parent_id` IN (1, 1001, 1002, 2)"),
            (f"{db}.link", "`parent_id` IN (30)"),
        ]
        assert {g["kind"] for g in gaps} == {"fk_cascade"}
        assert checks and warnings
        runs, _ = _repair_until_done(cdc)
        seconds = time.monotonic() - t0
        for t in ("parent", "child", "link"):
            _assert_lake_equals_source(local_storage, db, db, t)
        deleted = [e for e in _repaired_events(local_storage, db, db, "link") if e["op"] == "d"]
        assert {(e["before"]["parent_id"], e["before"]["n"]) for e in deleted} == {
            (p, n) for n in range(1, 501) for p in (1 + n % 10,) if p in (1, 2)
        }
        print(f"\nFK cascade: {warnings[0]}\nrepaired in {seconds:.1f} s")


def test_a_foreign_key_added_while_streaming_cascades_are_repaired(local_storage):
    """The windows of one process keep the foreign keys they read until a window reads DDL
    (engine/stream.py, read_foreign_keys): a key added by ``ALTER TABLE`` after earlier windows
    read none is used for the parent deletes that follow it, in the same window and in later ones."""
    with scratch_database("gapsfknew") as (db, conn):
        with conn.cursor() as cur:
            cur.execute(f"USE {db}")
            cur.execute("CREATE TABLE parent (id INT PRIMARY KEY)")
            cur.execute("CREATE TABLE child (id INT PRIMARY KEY, parent_id INT, KEY (parent_id))")
            cur.execute("INSERT INTO parent SELECT seq FROM seq_1_to_20")
            cur.execute("INSERT INTO child SELECT seq, 1 + seq % 20 FROM seq_1_to_200")
        mysql = capture_resource(db)
        mysql.create_signal_table()
        cdc = SensorDriven(mysql, local_storage.base_uri)
        cdc.ticks()
        with conn.cursor() as cur:
            cur.execute("INSERT INTO parent VALUES (21)")  # a window that reads (and keeps) no key
        cdc.ticks()
        with conn.cursor() as cur:
            cur.execute(
                "ALTER TABLE child ADD CONSTRAINT fk_new FOREIGN KEY (parent_id) REFERENCES parent (id) "
                "ON DELETE CASCADE"
            )
            cur.execute("DELETE FROM parent WHERE id = 5")  # same window as the DDL
        first = cdc.ticks(until_caught_up=False, max_ticks=2)
        gaps, _, _ = _gap_reports(cdc, first.runs)
        assert [(g["kind"], g["table"], g["filter"]) for g in gaps] == [
            ("fk_cascade", f"{db}.child", "`parent_id` IN (5)")
        ]
        _repair_until_done(cdc)
        with conn.cursor() as cur:
            cur.execute("DELETE FROM parent WHERE id = 6")  # a later window, no DDL in it
        later = cdc.ticks(until_caught_up=False, max_ticks=2)
        gaps, _, _ = _gap_reports(cdc, later.runs)
        assert [(g["table"], g["filter"]) for g in gaps] == [(f"{db}.child", "`parent_id` IN (6)")]
        _repair_until_done(cdc)
        for t in ("parent", "child"):
            _assert_lake_equals_source(local_storage, db, db, t)


def test_sakila_actor_key_update_cascades_to_film_actor(local_storage, sakila_db):
    """The issue's case: UPDATE actor SET actor_id=5001 WHERE actor_id=1 cascades (ON UPDATE
    CASCADE) to 19 film_actor rows that the binlog does not show."""
    with scratch_database("gapsakila") as (db, conn):
        with conn.cursor() as cur:
            cur.execute(f"USE {db}")
            for t in ("actor", "film_actor"):
                cur.execute(f"CREATE TABLE {t} LIKE {sakila_db}.{t}")
                cur.execute(f"INSERT INTO {t} SELECT * FROM {sakila_db}.{t}")
            cur.execute(
                "ALTER TABLE film_actor ADD CONSTRAINT fk_film_actor_actor FOREIGN KEY (actor_id) "
                "REFERENCES actor (actor_id) ON DELETE RESTRICT ON UPDATE CASCADE"
            )
        mysql = capture_resource(db)
        mysql.create_signal_table()
        cdc = SensorDriven(mysql, local_storage.base_uri)
        cdc.ticks()
        with conn.cursor() as cur:
            cur.execute("UPDATE actor SET actor_id = 5001 WHERE actor_id = 1")
            cascaded = cur.execute("SELECT * FROM film_actor WHERE actor_id = 5001")
        t0 = time.monotonic()
        first = cdc.ticks(until_caught_up=False, max_ticks=2)
        gaps, checks, warnings = _gap_reports(cdc, first.runs)
        assert [(g["kind"], g["table"], g["filter"]) for g in gaps] == [
            ("fk_cascade", f"{db}.film_actor", "`actor_id` IN (1, 5001)")
        ]
        assert checks and warnings
        runs, _ = _repair_until_done(cdc)
        seconds = time.monotonic() - t0
        _assert_lake_equals_source(local_storage, db, db, "actor")
        _assert_lake_equals_source(local_storage, db, db, "film_actor")
        repaired = _repaired_events(local_storage, db, db, "film_actor")
        assert sum(e["op"] == "r" for e in repaired) == cascaded == 19
        assert sum(e["op"] == "d" for e in repaired) == 19
        print(f"\nSakila cascade: {warnings[0]}\nrepaired in {seconds:.1f} s")


def test_failed_checksum_queues_a_repair_of_the_differing_key_ranges(local_storage):
    """Changes made with sql_log_bin=0 never reach the binlog: the checksum check fails, names the
    table and position, and writes an execute-snapshot signal for the differing key ranges; the
    next windows re-read them (and delete the key only the lake still has)."""
    with scratch_database("gapsck") as (db, conn):
        with conn.cursor() as cur:
            cur.execute(f"USE {db}")
            cur.execute("CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(20))")
            cur.execute("INSERT INTO t SELECT seq, CONCAT('v', seq) FROM seq_1_to_5000")
        mysql = capture_resource(db)
        mysql.create_signal_table()
        cdc = SensorDriven(mysql, local_storage.base_uri)
        cdc.ticks()
        with conn.cursor() as cur:
            cur.execute("SET SESSION sql_log_bin = 0")
            cur.execute("UPDATE t SET v = 'hidden' WHERE id IN (7, 8, 4000)")
            cur.execute("DELETE FROM t WHERE id = 2500")
            cur.execute("INSERT INTO t VALUES (9001, 'hidden-new')")
            cur.execute("SET SESSION sql_log_bin = 1")
        t_key = dg.AssetKey([db, db, "t"])
        t0 = time.monotonic()
        res = dg.materialize(
            [cdc.cdc],
            resources=cdc.resources,
            instance=cdc.instance,
            selection=dg.AssetSelection.checks(dg.AssetCheckKey(t_key, "checksum_matches_source")),
        )
        (ev,) = [e for e in res.get_asset_check_evaluations() if e.check_name == "checksum_matches_source"]
        assert not ev.passed
        repair = ev.metadata["repair"].value
        assert repair.startswith("Repair queued: execute-snapshot signal repair-"), repair
        assert '"delete-keys":[[2500]]' in repair
        warnings = [
            r.user_message
            for r in cdc.instance.all_logs(res.run_id)
            if r.level >= 30 and "checksum_mismatch" in r.user_message
        ]
        assert warnings and f"checksum_mismatch on {db}.t at mysql-bin." in warnings[0]
        runs, _ = _repair_until_done(cdc)
        seconds = time.monotonic() - t0
        _assert_lake_equals_source(local_storage, db, db, "t")
        repaired = _repaired_events(local_storage, db, db, "t")
        assert {(e["op"], (e["after"] or e["before"])["id"]) for e in repaired} >= {
            ("r", 7),
            ("r", 8),
            ("r", 4000),
            ("r", 9001),
            ("d", 2500),
        }
        assert all("checksum_mismatch" in dict(e["headers"])[REPAIR_HEADER] for e in repaired)
        print(f"\nchecksum: {warnings[0]}\nrepaired in {seconds:.1f} s")


def test_statement_dml_with_binlog_format_statement_globally_is_repaired(local_storage):
    """Issue 25 point 1: with ``binlog_format=STATEMENT`` set globally, the repair's own watermark
    INSERTs (the capture user may not ``SET SESSION binlog_format``) are logged as statements too;
    the next window never saw them, dropped the repair without a word and the sensor said "caught
    up" with 13 wrong rows. The watermarks are now read from the statements' text."""
    with scratch_database("gapsglobal") as (db, conn):
        with conn.cursor() as cur:
            cur.execute(f"USE {db}")
            cur.execute("CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(20), n INT)")
            cur.execute("INSERT INTO t SELECT seq, CONCAT('v', seq), seq FROM seq_1_to_3000")
        mysql = capture_resource(db, incremental_snapshot_chunk_size=1000)
        mysql.create_signal_table()
        cdc = SensorDriven(mysql, local_storage.base_uri)
        cdc.ticks()  # initial snapshot, caught up
        with conn.cursor() as cur:
            cur.execute("SET GLOBAL binlog_format = 'STATEMENT'")
        try:
            writer = root_connect(database=db)  # a new session: STATEMENT
            with writer.cursor() as cur:
                cur.execute("SELECT @@SESSION.binlog_format")
                assert cur.fetchone()[0] == "STATEMENT"
                cur.execute("UPDATE t SET v = 'stmt', n = -n WHERE id <= 13")
                cur.execute("DELETE FROM t WHERE id BETWEEN 2001 AND 2005")
                cur.execute("INSERT INTO t VALUES (5001, 'new', 1)")
            writer.close()
            first = cdc.ticks(until_caught_up=False, max_ticks=2)
            gaps, _, _ = _gap_reports(cdc, first.runs)
            assert [(g["kind"], g["table"]) for g in gaps] == [("statement_dml", f"{db}.t")]
            _repair_until_done(cdc)
            cdc.ticks()
        finally:
            with conn.cursor() as cur:
                cur.execute("SET GLOBAL binlog_format = 'ROW'")
        _assert_lake_equals_source(local_storage, db, db, "t")
        repaired = _repaired_events(local_storage, db, db, "t")
        assert {e["after"]["id"] for e in repaired if e["op"] == "r"} >= {*range(1, 14), 5001}
        log = DeltaTable(local_storage.uri(db, db, "t", "changelog")).to_pyarrow_table().to_pylist()
        deleted = [e["before"]["id"] for e in log if e["op"] == "d"]
        assert sorted(deleted) == list(range(2001, 2006))  # each once (absent from the source)


def test_repairs_delete_each_key_once(local_storage):
    """Issue 25 point 4: after cascade repairs the change logs held repeated deletes of keys already
    deleted (Sakila film_category x3, film_actor x2), one table being queued twice in one repair
    (whole and filtered). Here a child with two cascading foreign keys loses rows through both
    parents and a statement-based DELETE in one window: each lost key gets one delete."""
    with scratch_database("gapsonce") as (db, conn):
        with conn.cursor() as cur:
            cur.execute(f"USE {db}")
            cur.execute("CREATE TABLE pa (id INT PRIMARY KEY)")
            cur.execute("CREATE TABLE pb (id INT PRIMARY KEY)")
            cur.execute(
                "CREATE TABLE c (id INT PRIMARY KEY, a INT, b INT, v INT, "
                "FOREIGN KEY (a) REFERENCES pa (id) ON DELETE CASCADE, "
                "FOREIGN KEY (b) REFERENCES pb (id) ON DELETE CASCADE)"
            )
            cur.execute("INSERT INTO pa SELECT seq FROM seq_1_to_20")
            cur.execute("INSERT INTO pb SELECT seq FROM seq_1_to_20")
            cur.execute("INSERT INTO c SELECT seq, 1 + seq % 20, 1 + seq % 7, seq FROM seq_1_to_2000")
        mysql = capture_resource(db)
        mysql.create_signal_table()
        cdc = SensorDriven(mysql, local_storage.base_uri)
        cdc.ticks()
        with conn.cursor() as cur:
            cur.execute("DELETE FROM pa WHERE id IN (3, 4)")  # cascades to c
            cur.execute("DELETE FROM pb WHERE id = 5")  # cascades to c, some rows overlap
            cur.execute("SET SESSION binlog_format = 'STATEMENT'")
            cur.execute("DELETE FROM c WHERE id BETWEEN 100 AND 120")  # whole-table repair of c
            cur.execute("SET SESSION binlog_format = 'ROW'")
            cur.execute("SELECT id FROM c")
            kept = {r[0] for r in cur.fetchall()}
        first = cdc.ticks(until_caught_up=False, max_ticks=2)
        gaps, _, _ = _gap_reports(cdc, first.runs)
        assert {g["table"] for g in gaps} == {f"{db}.c"} and len(gaps) == 3
        _repair_until_done(cdc)
        _assert_lake_equals_source(local_storage, db, db, "c")
        log = DeltaTable(local_storage.uri(db, db, "c", "changelog")).to_pyarrow_table().to_pylist()
        deleted = [e["before"]["id"] for e in log if e["op"] == "d"]
        assert sorted(deleted) == sorted(set(range(1, 2001)) - kept), "each lost key deleted once"


@pytest.mark.parametrize("image", ["MINIMAL", "NOBLOB"])
def test_partial_row_images_are_detected_and_repaired(local_storage, image):
    """Issue 25 point 2: ``binlog_row_image=MINIMAL`` set while streaming gave no message at all:
    updates were decoded as key changes (rows deleted from the lake, a live row with a NULL key).
    Partial images are now found by the events' columns-present bitmaps, reported, and their
    keys re-read by a targeted repair; deletes with the key in the image are applied."""
    with scratch_database("gapsimage") as (db, conn):
        with conn.cursor() as cur:
            cur.execute(f"USE {db}")
            cur.execute("CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(20), n INT DEFAULT 7, doc TEXT)")
            cur.execute("INSERT INTO t SELECT seq, CONCAT('v', seq), seq, REPEAT('d', seq) FROM seq_1_to_500")
        mysql = capture_resource(db)
        mysql.create_signal_table()
        cdc = SensorDriven(mysql, local_storage.base_uri)
        cdc.ticks()
        with conn.cursor() as cur:
            cur.execute(f"SET SESSION binlog_row_image = '{image}'")
            cur.execute("UPDATE t SET v = 'minimal' WHERE id IN (3, 4)")
            cur.execute("UPDATE t SET id = 1003 WHERE id = 5")  # a key change
            cur.execute("INSERT INTO t (id, v) VALUES (2001, 'partial insert')")
            cur.execute("DELETE FROM t WHERE id = 6")
            cur.execute("UPDATE t SET doc = 'new doc' WHERE id = 7")
            cur.execute("SET SESSION binlog_row_image = 'FULL'")
        first = cdc.ticks(until_caught_up=False, max_ticks=2)
        gaps, checks, warnings = _gap_reports(cdc, first.runs)
        assert [(g["kind"], g["table"]) for g in gaps] == [("partial_row_image", f"{db}.t")]
        assert gaps[0]["repair"].startswith("Repair queued"), gaps[0]
        assert checks and warnings
        _repair_until_done(cdc)
        _assert_lake_equals_source(local_storage, db, db, "t")
        state = read_current(local_storage, local_storage.uri(db, db, "t", "state")).to_pylist()
        assert all(r["id"] is not None for r in state)
        log = DeltaTable(local_storage.uri(db, db, "t", "changelog")).to_pyarrow_table().to_pylist()
        assert sorted(e["before"]["id"] for e in log if e["op"] == "d") == [5, 6]


def test_trigger_writes_of_statement_dml_are_repaired(local_storage, sakila_db):
    """Issue 25 point 3: statement DML on Sakila's film fires its triggers, which write film_text;
    the binlog has only the statement, so film_text diverged while its checks passed (carried
    forward). The triggers' target tables are now flagged and repaired too: named from the
    trigger body with the TRIGGER privilege, else every captured table of the database."""
    from conftest import CDC_USER

    with scratch_database("gapstrg") as (db, conn):
        with conn.cursor() as cur:
            cur.execute(f"USE {db}")
            for t in ("film", "film_text"):
                cur.execute(f"CREATE TABLE {t} LIKE {sakila_db}.{t}")
                cur.execute(f"INSERT INTO {t} SELECT * FROM {sakila_db}.{t}")
            cur.execute("CREATE TABLE other (id INT PRIMARY KEY)")
            cur.execute(
                "CREATE TRIGGER ins_film AFTER INSERT ON film FOR EACH ROW BEGIN INSERT INTO film_text "
                "(film_id, title, description) VALUES (new.film_id, new.title, new.description); END"
            )
            cur.execute(
                "CREATE TRIGGER upd_film AFTER UPDATE ON film FOR EACH ROW BEGIN IF (old.title != new.title) "
                "THEN UPDATE film_text SET title = new.title WHERE film_id = old.film_id; END IF; END"
            )
        mysql = capture_resource(db)
        mysql.create_signal_table()
        cdc = SensorDriven(mysql, local_storage.base_uri)
        cdc.ticks()

        def statement_dml(*sql):
            with conn.cursor() as cur:
                cur.execute("SET SESSION binlog_format = 'STATEMENT'")
                for s in sql:
                    cur.execute(s)
                cur.execute("SET SESSION binlog_format = 'ROW'")
            first = cdc.ticks(until_caught_up=False, max_ticks=2)
            gaps, _, _ = _gap_reports(cdc, first.runs)
            _repair_until_done(cdc)
            for t in ("film", "film_text", "other"):
                _assert_lake_equals_source(local_storage, db, db, t)
            return {(g["kind"], g["table"]) for g in gaps}

        # without the TRIGGER privilege the bodies are hidden: every captured table is re-read
        found = statement_dml(f"UPDATE {db}.film SET title = CONCAT(title, '!') WHERE film_id <= 5")
        assert found == {
            ("statement_dml", f"{db}.film"),
            ("trigger", f"{db}.film_text"),
            ("trigger", f"{db}.other"),
        }
        with conn.cursor() as cur:
            cur.execute(f"GRANT TRIGGER ON {db}.* TO '{CDC_USER}'@'%'")
        try:
            found = statement_dml(
                f"INSERT INTO {db}.film (film_id, title, language_id) VALUES (5001, 'NEW FILM', 1)",
                f"UPDATE {db}.film SET title = 'RENAMED' WHERE film_id = 7",
            )
        finally:
            with conn.cursor() as cur:
                cur.execute(f"REVOKE TRIGGER ON {db}.* FROM '{CDC_USER}'@'%'")
        assert found == {("statement_dml", f"{db}.film"), ("trigger", f"{db}.film_text")}


def test_an_unrepaired_gap_fails_the_tables_checks_in_the_window_run(local_storage):
    """Issue 25 (never "caught up" with a wrong lake, silently): a gap that is reported but not
    repaired (here binlog_gap_handling="warn") left the table's stream-run checks passing (the
    window's keys do not include rows changed without row events), and the heartbeats then
    carried the pass forward. Such a table now gets its full checks in the window run."""
    with scratch_database("gapswarn") as (db, conn):
        with conn.cursor() as cur:
            cur.execute(f"USE {db}")
            cur.execute("CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(20))")
            cur.execute("INSERT INTO t SELECT seq, CONCAT('v', seq) FROM seq_1_to_200")
        cdc = SensorDriven(capture_resource(db, binlog_gap_handling="warn"), local_storage.base_uri)
        cdc.ticks()
        with conn.cursor() as cur:
            cur.execute("SET SESSION binlog_format = 'STATEMENT'")
            cur.execute("UPDATE t SET v = 'stmt' WHERE id <= 5")
            cur.execute("SET SESSION binlog_format = 'ROW'")
        log = cdc.ticks()
        evals = [
            e
            for r in log.runs
            for e in r.get_asset_check_evaluations()
            if e.asset_key.path[-1] == "t" and e.check_name == "checksum_matches_source"
        ]
        assert evals and not evals[-1].passed, [e.metadata for e in evals]
