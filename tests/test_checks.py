"""Reconciliation asset checks pass on a faithful lake and fail, with an explanation, when the lake
is corrupted or the source changes behind the binlog's back."""

import time
import uuid

import dagster as dg
import pytest
from conftest import CDC_PASSWORD, CDC_USER, MYSQL_HOST, MYSQL_PORT, root_connect
from deltalake import DeltaTable

from dagster_mysql_cdc import CdcLakeResource, MySqlCdcResource, mysql_cdc_assets

pytestmark = [pytest.mark.integration, pytest.mark.spark]


@pytest.fixture
def scratch_db():
    db = f"chk_{uuid.uuid4().hex[:8]}"
    conn = root_connect()
    with conn.cursor() as cur:
        cur.execute(f"CREATE DATABASE {db}")
        cur.execute(f"USE {db}")
        cur.execute(
            f"CREATE TABLE {db}.items (id INT PRIMARY KEY, name VARCHAR(30), price DECIMAL(8,2), ts DATETIME(6))"
        )
        cur.execute(
            f"INSERT INTO {db}.items SELECT seq, CONCAT('item-', seq), seq * 1.25, "
            f"TIMESTAMP('2024-01-01') + INTERVAL seq SECOND FROM seq_1_to_500"
        )
    yield db, conn
    with conn.cursor() as cur:
        cur.execute(f"DROP DATABASE IF EXISTS {db}")
    conn.close()


def build(db: str, **kw):
    mysql = MySqlCdcResource(
        stream_follow_seconds=0.0,  # one window per run (the suite asserts per-run outcomes)
        host=MYSQL_HOST,
        port=MYSQL_PORT,
        user=CDC_USER,
        password=CDC_PASSWORD,
        server_name=f"srv_{db}",
        database_include_list=[db],
        **kw,
    )

    @mysql_cdc_assets(tables=mysql.discover_tables(), server_name=f"srv_{db}")
    def cdc(context: dg.AssetExecutionContext, mysql: MySqlCdcResource, lake: CdcLakeResource):
        yield from mysql.sync(context=context, lake=lake)

    return mysql, cdc


def check_results(result: dg.ExecuteInProcessResult) -> dict[str, dg.AssetCheckEvaluation]:
    return {e.check_name: e for e in result.get_asset_check_evaluations()}


def test_checks_pass_after_snapshot_and_fail_on_corruption(scratch_db, local_storage):
    db, conn = scratch_db
    mysql, cdc = build(db)
    resources = {"mysql": mysql, "lake": CdcLakeResource(base_uri=local_storage.base_uri)}
    instance = dg.DagsterInstance.ephemeral()
    first = dg.materialize([cdc], resources=resources, instance=instance)
    checks = check_results(first)
    assert {n: c.passed for n, c in checks.items()} == {
        "row_count_matches_source": True,
        "checksum_matches_source": True,
        "schema_matches_source": True,
        "binlog_retention": True,
        "changes_in_binlog": True,  # a snapshot reads no binlog window
    }
    assert checks["row_count_matches_source"].metadata["lake_rows"].value == 500

    # corrupt the lake behind the connector's back: one row lost, one value changed
    state_uri = local_storage.uri(f"srv_{db}", db, "items", "state")
    dt = DeltaTable(state_uri)
    dt.delete("id = 7")
    dt.update(updates={"name": "'tampered'"}, predicate="id = 8")
    key = dg.AssetKey([f"srv_{db}", db, "items"])
    only_checks = dg.AssetSelection.checks_for_assets(key)
    res = dg.materialize([cdc], resources=resources, instance=instance, selection=only_checks)
    checks = check_results(res)
    assert not checks["row_count_matches_source"].passed
    assert checks["row_count_matches_source"].metadata["lake_rows"].value == 499
    assert not checks["checksum_matches_source"].passed
    differing = checks["checksum_matches_source"].metadata["differing_keys_sample"].value
    assert "(7,)" in differing and "(8,)" in differing
    assert checks["schema_matches_source"].passed


def test_checks_ignore_changes_after_committed_position_but_catch_unlogged_ones(scratch_db, local_storage):
    db, conn = scratch_db
    mysql, cdc = build(db)
    resources = {"mysql": mysql, "lake": CdcLakeResource(base_uri=local_storage.base_uri)}
    instance = dg.DagsterInstance.ephemeral()
    dg.materialize([cdc], resources=resources, instance=instance)
    key = dg.AssetKey([f"srv_{db}", db, "items"])
    only_checks = dg.AssetSelection.checks_for_assets(key)
    # logged changes after the committed position: the lake is behind, not wrong
    with conn.cursor() as cur:
        cur.execute(f"UPDATE {db}.items SET name='changed' WHERE id <= 10")
        cur.execute(f"DELETE FROM {db}.items WHERE id = 11")
    checks = check_results(
        dg.materialize([cdc], resources=resources, instance=instance, selection=only_checks)
    )
    assert checks["row_count_matches_source"].passed
    assert checks["checksum_matches_source"].passed
    assert checks["checksum_matches_source"].metadata["keys_changed_since_committed"].value == 11
    # a change that never reaches the binlog (sql_log_bin=0): the lake can never see it
    with conn.cursor() as cur:
        cur.execute("SET SESSION sql_log_bin = 0")
        cur.execute(f"UPDATE {db}.items SET price = 0 WHERE id = 100")
        cur.execute(f"ALTER TABLE {db}.items ADD COLUMN hidden INT NULL")
        cur.execute("SET SESSION sql_log_bin = 1")
    checks = check_results(
        dg.materialize([cdc], resources=resources, instance=instance, selection=only_checks)
    )
    assert not checks["checksum_matches_source"].passed
    assert checks["row_count_matches_source"].passed
    assert not checks["schema_matches_source"].passed
    assert checks["schema_matches_source"].metadata["missing_in_lake"].value == ["hidden"]


@pytest.mark.parametrize("tables", [1, 2], ids=["one_table", "shared_source"])
def test_a_ddl_after_the_committed_position_is_not_a_failed_check(tmp_path, tables):
    """Issue "Checks that never cry wolf", found under `dagster dev`: an ``ALTER TABLE ... ADD
    COLUMN`` committed after the window the checks run for (the source is read at a later
    position than the lake's) failed ``schema_matches_source`` with severity ERROR on a lake equal
    to the source at its position; a ``DROP TABLE`` + ``CREATE TABLE`` (``load_dataset.sh``) there
    failed the row checks the same way (the dropped rows leave no row events). A DDL of the
    table's database in the binlog since the committed position now makes a failed check *not
    compared* (WARN; one table's own binlog read, or the shared read of a run that checks several),
    and once the capture passes the DDL every check passes. A column added without a binlog event
    (``sql_log_bin=0``) still fails the schema check as an ERROR."""
    from sensor_harness import SensorDriven, capture_resource, scratch_database

    with scratch_database("ddlchk") as (db, conn):
        with conn.cursor() as cur:
            cur.execute(f"USE {db}")
            for i in range(tables):
                cur.execute(f"CREATE TABLE {db}.t{i} (id INT PRIMARY KEY, v INT)")
                cur.execute(f"INSERT INTO {db}.t{i} SELECT seq, seq FROM seq_1_to_20")
        lake = str(tmp_path / "lake")
        cdc = SensorDriven(capture_resource(db), lake)
        cdc.db = db
        assert all(r.success for r in cdc.ticks().runs)  # the initial snapshot
        key = dg.AssetKey([db, db, "t0"])
        keys = [dg.AssetKey([db, db, f"t{i}"]) for i in range(tables)]

        def t0_checks() -> dict[str, dg.AssetCheckEvaluation]:
            run = dg.materialize(
                [cdc.cdc],
                resources=cdc.resources,
                instance=cdc.instance,
                selection=dg.AssetSelection.checks_for_assets(*keys),
            )
            return {e.check_name: e for e in run.get_asset_check_evaluations() if e.asset_key == key}

        def assert_no_wolf(checks: dict[str, dg.AssetCheckEvaluation]) -> None:
            assert len(checks) == 3, checks
            for e in checks.values():
                assert e.passed or e.severity == dg.AssetCheckSeverity.WARN, (e.check_name, e.metadata)
                if not e.passed:
                    assert "a DDL of the table's database" in e.metadata["not_compared"].value, e.metadata

        def capture_and_pass() -> None:
            assert all(r.success for r in cdc.ticks().runs)  # the capture passes the DDL
            _assert_lake_equals_source(lake, db, "t0")
            checks = t0_checks()
            assert all(e.passed for e in checks.values()), {n: e.metadata for n, e in checks.items()}

        with conn.cursor() as cur:
            cur.execute(f"ALTER TABLE {db}.t0 ADD COLUMN phone VARCHAR(20) NULL")
            cur.execute(f"UPDATE {db}.t0 SET phone = '+1-555-0100' WHERE id = 1")
        assert_no_wolf(t0_checks())
        capture_and_pass()

        with conn.cursor() as cur:
            cur.execute(f"DROP TABLE {db}.t0")
            cur.execute(f"CREATE TABLE {db}.t0 (id INT PRIMARY KEY, v INT, phone VARCHAR(20) NULL)")
            cur.execute(f"INSERT INTO {db}.t0 (id, v) SELECT seq, -seq FROM seq_1_to_5")
        assert_no_wolf(t0_checks())
        capture_and_pass()

        with conn.cursor() as cur:  # a column the binlog never shows
            cur.execute("SET SESSION sql_log_bin = 0")
            cur.execute(f"ALTER TABLE {db}.t0 ADD COLUMN hidden INT NULL")
            cur.execute("SET SESSION sql_log_bin = 1")
            cur.execute(f"UPDATE {db}.t0 SET v = 0 WHERE id = 2")  # logged rows since the committed position
        hidden = t0_checks()["schema_matches_source"]
        assert not hidden.passed and hidden.severity == dg.AssetCheckSeverity.ERROR, hidden.metadata
        assert hidden.metadata["missing_in_lake"].value == ["hidden"]


def test_retention_check_warns_inside_margin(scratch_db, local_storage):
    db, _ = scratch_db
    mysql, cdc = build(db, retention_margin_files=1000)
    resources = {"mysql": mysql, "lake": CdcLakeResource(base_uri=local_storage.base_uri)}
    res = dg.materialize([cdc], resources=resources)
    ret = check_results(res)["binlog_retention"]
    conn = root_connect()
    with conn.cursor() as cur:
        cur.execute("SHOW BINARY LOGS")
        n_files = len(cur.fetchall())
    conn.close()
    if n_files > 1:
        assert not ret.passed and ret.severity == dg.AssetCheckSeverity.WARN
        assert "oldest binlog files" in ret.metadata["explanation"].value
    else:
        assert ret.passed


def test_quiet_table_heartbeat_keeps_freshness_and_checks(local_storage):
    """A table the stream does not change gets runless heartbeats from the sensor (its freshness
    policy passes) with the check results of its last materialization carried forward, so every
    check still targets its latest materialization; a changed table is materialized by the run."""
    from datetime import timedelta

    from sensor_harness import SensorDriven, capture_resource, scratch_database

    policy = dg.FreshnessPolicy.time_window(fail_window=timedelta(minutes=2))
    with scratch_database("hbt") as (db, conn):
        with conn.cursor() as cur:
            cur.execute(f"USE {db}")
            cur.execute(f"CREATE TABLE {db}.busy (id INT PRIMARY KEY, v INT)")
            cur.execute(f"CREATE TABLE {db}.quiet (id INT PRIMARY KEY, v INT)")
            cur.execute(f"INSERT INTO {db}.quiet SELECT seq, seq FROM seq_1_to_40")
        cdc = SensorDriven(
            capture_resource(db),
            local_storage.base_uri,
            assets_options={"table_freshness_policy": policy},
            sensor_options={"table_heartbeat_seconds": 2},
        )
        cdc.ticks()  # initial snapshot (every check of both tables), then caught up
        quiet = dg.AssetKey([cdc.resources["mysql"].server_name, db, "quiet"])
        first = cdc.instance.get_latest_materialization_event(quiet)
        assert first is not None and first.run_id
        time.sleep(2.2)
        with conn.cursor() as cur:
            cur.execute(f"INSERT INTO {db}.busy VALUES (1, 1)")
        log = cdc.ticks()
        runs = [r for r in log.runs if r.dagster_run.tags.get("dagster_mysql_cdc/mode") == "stream"]
        assert runs and {tuple(m.asset_key.path[1:]) for m in runs[0].get_asset_materialization_events()} == {
            (db, "busy"),
            ("binlog",),
        }
        beat = cdc.instance.get_latest_materialization_event(quiet)
        assert beat is not None and beat.run_id == "" and beat.timestamp > first.timestamp
        md = beat.asset_materialization.metadata
        assert md["kind"].value == "heartbeat" and md["dagster/row_count"].value == 40
        for ck in (k for k in cdc.cdc.check_keys if k.asset_key == quiet):
            rec = cdc.instance.get_latest_asset_check_evaluation_record(ck)
            assert rec is not None and rec.evaluation is not None and rec.evaluation.passed, ck.name
            assert rec.event.timestamp >= beat.timestamp, ck.name  # evaluated for the heartbeat
            assert "carried_forward" in rec.evaluation.metadata
        assert len([k for k in cdc.cdc.check_keys if k.asset_key == quiet]) == 3


# -- stream runs: only the changed tables, every check evaluated ----------------------------------


@pytest.mark.parametrize("checks", ["planned", "logged"])
def test_stream_run_selects_changed_tables_and_evaluates_every_check(local_storage, checks):
    """After a window that changed one table, the run materialized only that table (and the binlog
    heartbeat), and each of its checks has a passing result computed from the window; the row
    count, URI and lag metadata are on the materialization.

    ``logged``: the window selects more tables than ``planned_checks_max_tables`` (0, the
    default): the run plans no check and logs the same results as evaluations (the binlog
    asset's too), each pointing at the asset's materialization of this run; a failing one is
    reported failing the same way."""
    from sensor_harness import SensorDriven, capture_resource, scratch_database

    with scratch_database("stk") as (db, conn):
        with conn.cursor() as cur:
            cur.execute(f"USE {db}")
            cur.execute(f"CREATE TABLE {db}.a (id INT PRIMARY KEY, v VARCHAR(20))")
            cur.execute(f"CREATE TABLE {db}.b (id INT PRIMARY KEY, v VARCHAR(20))")
            cur.execute(f"CREATE TABLE {db}.nokey (x INT, y VARCHAR(5))")
            cur.execute(f"INSERT INTO {db}.a SELECT seq, CONCAT('a', seq) FROM seq_1_to_300")
            cur.execute(f"INSERT INTO {db}.b SELECT seq, CONCAT('b', seq) FROM seq_1_to_50")
            cur.execute(f"INSERT INTO {db}.nokey VALUES (1, 'x'), (1, 'x'), (2, 'y')")
        most = 0 if checks == "logged" else 20
        cdc = SensorDriven(capture_resource(db, planned_checks_max_tables=most), local_storage.base_uri)
        cdc.ticks()  # initial snapshot, then caught up
        with conn.cursor() as cur:
            cur.execute(f"UPDATE {db}.a SET v = 'changed' WHERE id IN (3, 4)")
            cur.execute(f"DELETE FROM {db}.a WHERE id = 5")
            cur.execute(f"INSERT INTO {db}.a VALUES (1000, 'new')")
            cur.execute(f"INSERT INTO {db}.nokey VALUES (1, 'x')")
        log = cdc.ticks()
        stream_runs = [r for r in log.runs if r.dagster_run.tags.get("dagster_mysql_cdc/mode") == "stream"]
        assert stream_runs, log.skip_reasons
        run = stream_runs[0]
        mats = {tuple(m.asset_key.path[1:]): m for m in run.get_asset_materialization_events()}
        assert set(mats) == {(db, "a"), (db, "nokey"), ("binlog",)}
        records = cdc.instance.get_records_for_run(
            run_id=run.run_id, of_type=dg.DagsterEventType.ASSET_MATERIALIZATION_PLANNED
        ).records
        planned = {tuple(r.event_log_entry.dagster_event.asset_key.path[1:]) for r in records}
        assert planned == {(db, "a"), (db, "nokey"), ("binlog",)}  # b unchanged: not materializing
        evals = {(tuple(e.asset_key.path[1:]), e.check_name): e for e in run.get_asset_check_evaluations()}
        for table in ("a", "nokey"):
            for name in ("row_count_matches_source", "checksum_matches_source", "schema_matches_source"):
                assert evals[((db, table), name)].passed, (table, name, evals[((db, table), name)].metadata)
        assert not any(k[0] == (db, "b") for k in evals)
        planned_checks = cdc.instance.get_records_for_run(
            run_id=run.run_id, of_type=dg.DagsterEventType.ASSET_CHECK_EVALUATION_PLANNED
        ).records
        planned_tables = {
            tuple(r.event_log_entry.dagster_event.asset_check_planned_data.asset_key.path[1:])
            for r in planned_checks
        }
        assert run.dagster_run.tags.get("dagster_mysql_cdc/table_checks") == (
            "logged" if checks == "logged" else None
        )
        binlog_checks = {name: e for (asset, name), e in evals.items() if asset == ("binlog",)}
        assert set(binlog_checks) == {"binlog_retention", "changes_in_binlog"}
        assert all(e.passed for e in binlog_checks.values()), binlog_checks
        if checks == "logged":
            assert planned_tables == set()  # the tables' and the binlog asset's checks were logged
            for table in ("a", "nokey", "binlog"):
                path = [db, "binlog"] if table == "binlog" else [db, db, table]
                name = "changes_in_binlog" if table == "binlog" else "checksum_matches_source"
                key = dg.AssetCheckKey(dg.AssetKey(path), name)
                rec = cdc.instance.get_latest_asset_check_evaluation_record(key)
                assert rec is not None and rec.run_id == run.run_id
                target = rec.evaluation.target_materialization_data
                mat = cdc.instance.get_latest_materialization_event(key.asset_key)
                assert target is not None and target.run_id == run.run_id
                assert target.timestamp == mat.timestamp
        else:
            assert planned_tables == {(db, "a"), (db, "nokey"), ("binlog",)}
        checksum = evals[((db, "a"), "checksum_matches_source")].metadata
        assert checksum["keys_compared"].value == 4  # 3, 4, 5, 1000
        assert checksum["scope"].value.startswith("keys changed by the window")
        md = mats[(db, "a")].step_materialization_data.materialization.metadata
        assert md["dagster/row_count"].value == 300
        assert md["dagster/uri"].value.endswith("/state")
        assert md["behind_head_bytes"].value >= 0 and md["lag_seconds"].value >= 0
        nokey_md = mats[(db, "nokey")].step_materialization_data.materialization.metadata
        assert nokey_md["dagster/row_count"].value == 4

        # caught up and idle: the sensor's heartbeat keeps the binlog asset (and its freshness) current
        from dagster_mysql_cdc.dagster_integration.cursor import StreamCursor
        from dagster_mysql_cdc.dagster_integration.heartbeat import idle_heartbeat

        committed = StreamCursor.parse(cdc.cursor).committed
        beat, *evals = idle_heartbeat(
            cdc.instance, cdc.cdc, committed, f"caught up at {committed}", 0, mysql=cdc.resources["mysql"]
        )
        assert beat.metadata["window_end_pos"].value == committed.pos
        assert {e.check_name: e.passed for e in evals} == {
            "changes_in_binlog": True,
            "binlog_retention": True,
        }
        assert idle_heartbeat(cdc.instance, cdc.cdc, committed, "run abc is STARTED", 0) == []

        # the lake drifts behind the binlog's back: the window's verification names the key
        for part in ("state", "state_tail"):  # the current state: the compacted rows and the tail's
            uri = local_storage.uri(db, db, "a", part)
            if DeltaTable.is_deltatable(uri):
                DeltaTable(uri).update(updates={"v": "'tampered'"}, predicate="id = 3")
        with conn.cursor() as cur:
            cur.execute(f"UPDATE {db}.a SET v = 'again' WHERE id = 4")
        run = cdc.ticks().runs[0]
        evals = {(tuple(e.asset_key.path[1:]), e.check_name): e for e in run.get_asset_check_evaluations()}
        assert evals[((db, "a"), "checksum_matches_source")].passed  # id 3 was not in this window
        full = dg.materialize(
            [cdc.cdc],
            resources=cdc.resources,
            instance=cdc.instance,
            selection=dg.AssetSelection.checks_for_assets(dg.AssetKey([db, db, "a"])),
        )
        assert not check_results(full)["checksum_matches_source"].passed  # the full check finds it

        # a row the binlog never carries (sql_log_bin=0): the next window's row count fails
        with conn.cursor() as cur:
            cur.execute("SET SESSION sql_log_bin = 0")
            cur.execute(f"INSERT INTO {db}.a VALUES (2000, 'unlogged')")
            cur.execute("SET SESSION sql_log_bin = 1")
            cur.execute(f"UPDATE {db}.a SET v = 'third' WHERE id = 6")
        run = cdc.ticks().runs[0]
        evals = {(tuple(e.asset_key.path[1:]), e.check_name): e for e in run.get_asset_check_evaluations()}
        count = evals[((db, "a"), "row_count_matches_source")]
        assert not count.passed and count.severity == dg.AssetCheckSeverity.ERROR, count.metadata
        rec = cdc.instance.get_latest_asset_check_evaluation_record(
            dg.AssetCheckKey(dg.AssetKey([db, db, "a"]), "row_count_matches_source")
        )
        assert rec.run_id == run.run_id and not rec.evaluation.passed


# -- checks that never cry wolf: a failure means a difference, and stays until repaired -----------


def _evaluations(runs) -> dict[tuple[str, str], dg.AssetCheckEvaluation]:
    """``(table, check) -> evaluation`` of the table checks of ``runs`` (the last one wins)."""
    return {
        (e.asset_key.path[-1], e.check_name): e
        for r in runs
        for e in r.get_asset_check_evaluations()
        if e.asset_key.path[-1] != "binlog"
    }


def _latest(cdc, table: str, check: str):
    """The latest evaluated result of a table's check in the instance (what the UI and
    ``status`` show)."""
    from dagster_mysql_cdc.dagster_integration.heartbeat import latest_check_result

    key = dg.AssetCheckKey(dg.AssetKey([cdc.resources["mysql"].server_name, cdc.db, table]), check)
    rec = latest_check_result(cdc.instance, key)
    assert rec is not None, key
    return rec.evaluation


def _assert_lake_equals_source(lake: str, db: str, table: str) -> None:
    from lake_utils import live_state_rows, source_rows

    from dagster_mysql_cdc.sink.storage import StorageSettings

    storage = StorageSettings(base_uri=lake)
    expected, key = source_rows(db, table)
    assert live_state_rows(storage, storage.uri(db, db, table, "state"), key) == expected, table


def test_following_run_under_continuous_writes_fails_only_what_differs(tmp_path):
    """Issue "Checks that never cry wolf": one following run of 30+ windows while a writer changes
    three tables all along. The run's checks (once, after its last window) compare every key
    the run changed with the source, those changed after its end left out: the two tables the
    lake holds right pass (they failed with "N changed key(s) differ" when only the last
    window's tail files were read). A row inserted with ``sql_log_bin=0`` in the third table
    fails its row count, whose full checks name the key and queue its repair; the failure
    stays until that repair's run compares the whole table again, which passes."""
    import os
    import random
    import threading

    from sensor_harness import SensorDriven, capture_resource, scratch_database

    from dagster_mysql_cdc.source.signals import create_signal_table

    with scratch_database("cfw") as (db, conn):
        with conn.cursor() as cur:
            cur.execute(f"USE {db}")
            for t in ("a", "b", "c"):
                cur.execute(f"CREATE TABLE {db}.{t} (id INT PRIMARY KEY, v INT)")
                cur.execute(f"INSERT INTO {db}.{t} SELECT seq, seq FROM seq_1_to_300")
        create_signal_table(conn, f"{db}.debezium_signal")
        lake = str(tmp_path / "lake")
        mysql = capture_resource(db, stream_follow_seconds=600.0, stream_follow_idle_seconds=1.5)
        cdc = SensorDriven(mysql, lake)
        cdc.db = db
        cdc.ticks()  # the initial snapshot
        follow_dir = tmp_path / "lake" / "_staging" / db / "follow"
        stop, started = threading.Event(), threading.Event()
        unlogged = 100_000

        def writer() -> None:
            rng = random.Random(7)
            w = root_connect()
            try:
                with w.cursor() as cur:
                    n = 0
                    while not stop.is_set():
                        for t in ("a", "b", "c"):
                            k = rng.randint(1, 400)
                            op = rng.random()
                            if op < 0.6:
                                cur.execute(
                                    f"INSERT INTO {db}.{t} VALUES (%s, %s) ON DUPLICATE KEY UPDATE v = v + 1",
                                    (k, n),
                                )
                            else:
                                cur.execute(f"DELETE FROM {db}.{t} WHERE id = %s", (k,))
                        n += 1
                        started.set()
                        windows = len(os.listdir(follow_dir)) if follow_dir.exists() else 0
                        if windows == 10 and unlogged:  # a change the binlog never carries
                            cur.execute("SET SESSION sql_log_bin = 0")
                            cur.execute(f"INSERT IGNORE INTO {db}.b VALUES ({unlogged}, -1)")
                            cur.execute("SET SESSION sql_log_bin = 1")
                        if windows >= 32 or n > 20_000:
                            return
                        time.sleep(0.05)
            finally:
                w.close()

        th = threading.Thread(target=writer, daemon=True)
        th.start()
        assert started.wait(30)
        time.sleep(0.5)  # every table changed before the first window is planned
        log = cdc.ticks(max_ticks=1)
        stop.set()
        th.join(60)
        stream = [r for r in log.runs if r.dagster_run.tags.get("dagster_mysql_cdc/mode") == "stream"]
        assert len(stream) == 1, log.skip_reasons
        binlog = [m for m in stream[0].get_asset_materialization_events() if m.asset_key.path[-1] == "binlog"]
        md = binlog[0].step_materialization_data.materialization.metadata
        assert md["follow_windows"].value >= 30, md["follow_windows"].value
        evals = _evaluations(stream)
        for t in ("a", "c"):  # equal at the run's end (its keys changed later left out): no failure
            for name in ("row_count_matches_source", "checksum_matches_source"):
                e = evals[(t, name)]
                assert e.passed, (t, name, e.metadata)
            assert evals[(t, "checksum_matches_source")].metadata["keys_compared"].value > 50
        # the unlogged row: a real difference fails, names its key, and queues its repair
        count, checksum = evals[("b", "row_count_matches_source")], evals[("b", "checksum_matches_source")]
        assert not count.passed and count.severity == dg.AssetCheckSeverity.ERROR, count.metadata
        assert not checksum.passed and checksum.severity == dg.AssetCheckSeverity.ERROR, checksum.metadata
        assert f"({unlogged},)" in checksum.metadata["differing_keys_sample"].value
        assert checksum.metadata["repair"].value.startswith("Repair queued"), checksum.metadata["repair"]

        cdc.ticks()  # the repair's runs re-read the key; the one completing it checks the whole table
        for t in ("a", "b", "c"):
            _assert_lake_equals_source(lake, db, t)
        for name in ("row_count_matches_source", "checksum_matches_source"):
            e = _latest(cdc, "b", name)
            assert e.passed, (name, e.metadata)
        assert _latest(cdc, "b", "checksum_matches_source").metadata["scope"].value == "whole table"


#: DDL after which the window checks failed on a lake equal to the source: the tables before,
#: the statements (with DML around them in the same window), the tables after.
CRY_WOLF_DDL = {
    # keyless, then keyed: snapshotted again by the window's run (its window count was stale)
    "keyless_table_gains_a_key": (
        ["CREATE TABLE k (id INT, v VARCHAR(10))", "INSERT INTO k SELECT seq, 'x' FROM seq_1_to_60"],
        [
            "INSERT INTO k VALUES (61, 'y')",
            "ALTER TABLE k ADD PRIMARY KEY (id)",
            "INSERT INTO k VALUES (62, 'z')",
        ],
        ["k"],
    ),
    # each table takes the other's rows: both snapshotted again ("1 vs 40", "0 vs 30")
    "rename_table_swap": (
        [
            "CREATE TABLE s1 (id INT PRIMARY KEY, v INT)",
            "CREATE TABLE s2 (id INT PRIMARY KEY, v INT)",
            "INSERT INTO s1 SELECT seq, 1 FROM seq_1_to_40",
            "INSERT INTO s2 SELECT seq, 2 FROM seq_1_to_30",
        ],
        [
            "UPDATE s1 SET v = 10 WHERE id <= 5",
            "RENAME TABLE s1 TO s_tmp, s2 TO s1, s_tmp TO s2",
            "UPDATE s2 SET v = 11 WHERE id = 6",
        ],
        ["s1", "s2"],
    ),
    # existing rows get the default without row events: re-read by a repair, pending meanwhile
    "add_column_not_null_default": (
        ["CREATE TABLE d (id INT PRIMARY KEY, v INT)", "INSERT INTO d SELECT seq, seq FROM seq_1_to_50"],
        [
            "UPDATE d SET v = -1 WHERE id <= 5",
            "ALTER TABLE d ADD z INT NOT NULL DEFAULT 5",
            "UPDATE d SET v = -2 WHERE id = 40",
        ],
        ["d"],
    ),
}


@pytest.mark.parametrize("case", sorted(CRY_WOLF_DDL))
def test_no_failed_check_on_an_equal_lake_after_ddl(tmp_path, case):
    """Issue "Checks that never cry wolf": after each DDL the runs that capture it (and
    snapshot again or repair what it changed without row events) report no failed ERROR check
    while the lake equals the source: a table whose repair is queued is *pending* (WARN, never a
    pass), a table snapshotted again gets the full checks, and after the repair every check's
    latest result passes. A real difference (a row inserted and one changed with
    ``sql_log_bin=0``) still fails, naming the keys."""
    from sensor_harness import SensorDriven, capture_resource, scratch_database

    from dagster_mysql_cdc.source.signals import create_signal_table

    before, ddl, tables = CRY_WOLF_DDL[case]
    with scratch_database("wolf") as (db, conn):
        with conn.cursor() as cur:
            cur.execute(f"USE {db}")
            for sql in before:
                cur.execute(sql)
        create_signal_table(conn, f"{db}.debezium_signal")
        lake = str(tmp_path / "lake")
        mysql = capture_resource(db)
        cdc = SensorDriven(mysql, lake, [t for t in mysql.discover_tables() if t.table != "debezium_signal"])
        cdc.db = db
        cdc.ticks()  # the initial snapshot
        with conn.cursor() as cur:
            for sql in ddl:
                cur.execute(sql)
        log = cdc.ticks()
        for t in tables:
            _assert_lake_equals_source(lake, db, t)
        evaluations = [e for r in log.runs for e in r.get_asset_check_evaluations()]
        wolves = [
            (e.asset_key.path[-1], e.check_name, e.metadata)
            for e in evaluations
            if not e.passed
            and (e.severity == dg.AssetCheckSeverity.ERROR or "pending" not in e.metadata)
            and e.asset_key.path[-1] != "binlog"
        ]
        assert not wolves, wolves
        assert any(e.asset_key.path[-1] in tables for e in evaluations)
        for t in tables:
            for name in ("row_count_matches_source", "checksum_matches_source", "schema_matches_source"):
                e = _latest(cdc, t, name)
                assert e.passed, (t, name, e.metadata)

        # a real difference still fails: one row inserted, one changed, neither in the binlog
        t = tables[0]
        with conn.cursor() as cur:
            cur.execute("SET SESSION sql_log_bin = 0")
            cur.execute(f"INSERT INTO {t} (id, v) VALUES (1000, 7)")
            cur.execute(f"UPDATE {t} SET v = 8 WHERE id = 20")
            cur.execute("SET SESSION sql_log_bin = 1")
            cur.execute(f"UPDATE {t} SET v = 9 WHERE id = 21")  # a logged change: a window run
        run = cdc.ticks(max_ticks=1).runs[0]
        evals = _evaluations([run])
        count, checksum = evals[(t, "row_count_matches_source")], evals[(t, "checksum_matches_source")]
        assert not count.passed and count.severity == dg.AssetCheckSeverity.ERROR, count.metadata
        assert not checksum.passed and checksum.severity == dg.AssetCheckSeverity.ERROR, checksum.metadata
        differing = checksum.metadata["differing_keys_sample"].value
        assert "(1000,)" in differing and "(20,)" in differing, differing


@pytest.mark.parametrize("gap_handling", ["repair", "warn"])
def test_a_failed_window_checksum_queues_its_repair_and_stays_until_repaired(tmp_path, gap_handling):
    """Issue "Checks that never cry wolf": a window whose changed key differs from the source
    (changed again with ``sql_log_bin=0`` right after) fails its checksum and queues the repair of
    that key. Until the repair completes, no later run replaces the failure with a pass: neither
    a window that compared other keys nor one that compared none (a DDL window selecting every
    table) does; they carry the failure forward. With ``binlog_gap_handling="repair"`` the run
    completing the repair checks the whole table, which passes; with ``"warn"`` nothing repairs
    it and it stays failed (as ``status`` lists it, and as the full checks find it)."""
    from sensor_harness import SensorDriven, capture_resource, scratch_database

    from dagster_mysql_cdc.dagster_integration.health import failing_checks
    from dagster_mysql_cdc.source.signals import create_signal_table

    with scratch_database("stay") as (db, conn):
        with conn.cursor() as cur:
            cur.execute(f"USE {db}")
            cur.execute("CREATE TABLE x (id INT PRIMARY KEY, v INT)")
            cur.execute("CREATE TABLE y (id INT PRIMARY KEY, v INT)")
            cur.execute("INSERT INTO x SELECT seq, seq FROM seq_1_to_100")
            cur.execute("INSERT INTO y SELECT seq, seq FROM seq_1_to_10")
        create_signal_table(conn, f"{db}.debezium_signal")
        lake = str(tmp_path / "lake")
        mysql = capture_resource(db, binlog_gap_handling=gap_handling)
        cdc = SensorDriven(mysql, lake, [t for t in mysql.discover_tables() if t.table != "debezium_signal"])
        cdc.db = db
        cdc.ticks()  # the initial snapshot
        checksum = "checksum_matches_source"
        with conn.cursor() as cur:
            cur.execute("UPDATE x SET v = -1 WHERE id = 5")
            cur.execute("SET SESSION sql_log_bin = 0")
            cur.execute("UPDATE x SET v = -2 WHERE id = 5")  # the lake keeps -1
            cur.execute("SET SESSION sql_log_bin = 1")
        first = _evaluations(cdc.ticks(max_ticks=1).runs)[("x", checksum)]
        assert not first.passed and first.severity == dg.AssetCheckSeverity.ERROR, first.metadata
        assert first.metadata["differing_keys_sample"].value == ["(5,)"]
        repair = first.metadata["repair"].value
        if gap_handling == "repair":
            assert repair.startswith("Repair queued: execute-snapshot signal"), repair
            log = cdc.ticks()  # the repair's runs: the failure stays until the one completing it
            seen = [
                e for r in log.runs for e in r.get_asset_check_evaluations() if e.asset_key.path[-1] == "x"
            ]
            sums = [e for e in seen if e.check_name == checksum]
            assert sums and sums[-1].passed, [(e.passed, e.metadata) for e in sums]
            assert sums[-1].metadata["scope"].value == "whole table"
            assert all(not e.passed for e in sums[:-1]), [(e.passed, e.metadata) for e in sums]
            assert _latest(cdc, "x", checksum).passed
            _assert_lake_equals_source(lake, db, "x")
            return
        assert repair.startswith("not repaired (binlog_gap_handling='warn')"), repair
        with conn.cursor() as cur:  # a window comparing another key of x: equal, the failure stays
            cur.execute("UPDATE x SET v = -3 WHERE id = 6")
        e = _evaluations(cdc.ticks().runs)[("x", checksum)]
        assert not e.passed and e.severity == dg.AssetCheckSeverity.ERROR, e.metadata
        assert "this run: every row the window changed equals" in e.metadata["carried_forward"].value
        with conn.cursor() as cur:  # a DDL window selects every table: x compared nothing
            cur.execute("ALTER TABLE y ADD c INT NULL")
        e = _evaluations(cdc.ticks().runs)[("x", checksum)]
        assert not e.passed and e.severity == dg.AssetCheckSeverity.ERROR, e.metadata
        assert "not compared" in e.metadata["carried_forward"].value
        assert e.metadata["differing_keys_sample"].value == ["(5,)"]
        assert [(f.asset.split("/")[-1], f.check) for f in failing_checks(cdc.instance, db)] == [
            ("x", checksum)
        ]
        full = dg.materialize(
            [cdc.cdc],
            resources=cdc.resources,
            instance=cdc.instance,
            selection=dg.AssetSelection.checks_for_assets(dg.AssetKey([db, db, "x"])),
        )
        assert not check_results(full)[checksum].passed  # the full check finds it too
