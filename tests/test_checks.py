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

    ``logged``: the window selects more tables than ``planned_checks_max_tables`` (0 here):
    the run plans no table check and logs the same results as evaluations, each pointing at the
    table's materialization of this run; a failing one is reported failing the same way."""
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
        if checks == "logged":
            assert planned_tables == {("binlog",)}  # the table checks were logged, not planned
            for table in ("a", "nokey"):
                key = dg.AssetCheckKey(dg.AssetKey([db, db, table]), "checksum_matches_source")
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
