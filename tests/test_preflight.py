"""Preflight refuses misconfigured sources with a message naming the setting and the fix."""

import dataclasses
import os
import subprocess

import dagster as dg
import pytest
from conftest import CDC_PASSWORD, MYSQL_HOST, MYSQL_PORT, ROOT, cdc_settings, root_connect

from dagster_mysql_cdc import MySqlCdcResource, PreflightError, SourceConnectionError, UnknownTableError
from dagster_mysql_cdc.source.connection import ConnectionSettings, connect, preflight, server_info

pytestmark = pytest.mark.integration

NOLOG_PORT = int(os.environ.get("CDC_MYSQL_NOLOG_PORT", "3310"))


def check(settings: ConnectionSettings, tables=(("inventory", "customers"),), info_override=None):
    conn = connect(settings)
    try:
        info = server_info(conn)
        if info_override:
            info = dataclasses.replace(info, variables={**info.variables, **info_override})
        return preflight(conn, info, list(tables))
    finally:
        conn.close()


def test_healthy_source_passes(inventory_db):
    assert check(cdc_settings()) == []


def test_wrong_password_names_user_and_fix_without_leaking_it():
    bad = dataclasses.replace(cdc_settings(), password="definitely-wrong-pw")
    with pytest.raises(SourceConnectionError) as e:
        connect(bad)
    msg = str(e.value)
    assert "Access denied" in msg and "password" in msg and "cdc@" in msg
    assert "definitely-wrong-pw" not in msg and "definitely-wrong-pw" not in repr(bad)


def test_unreachable_server_names_host_and_port():
    with pytest.raises(SourceConnectionError, match=r"127\.0\.0\.1:1 .*make infra"):
        connect(ConnectionSettings(host="127.0.0.1", port=1, user="x", password="y", connect_timeout=2))


@pytest.mark.parametrize(
    "variable,bad,needle",
    [
        ("binlog_format", "STATEMENT", "binlog_format is 'STATEMENT', must be 'ROW'"),
        ("binlog_format", "MIXED", "SET GLOBAL binlog_format = 'ROW'"),
        ("binlog_row_image", "MINIMAL", "binlog_row_image is 'MINIMAL', must be 'FULL'"),
        ("binlog_row_metadata", "MINIMAL", "binlog_row_metadata is 'MINIMAL', must be 'FULL'"),
    ],
)
def test_binlog_settings_are_checked(inventory_db, variable, bad, needle):
    conn = root_connect()
    with conn.cursor() as cur:
        cur.execute(f"SELECT @@GLOBAL.{variable}")
        original = cur.fetchone()[0]
        cur.execute(f"SET GLOBAL {variable} = %s", (bad,))
    try:
        with pytest.raises(PreflightError) as e:
            check(cdc_settings())
        assert needle in str(e.value)
    finally:
        with conn.cursor() as cur:
            cur.execute(f"SET GLOBAL {variable} = %s", (original,))
        conn.close()


def test_transaction_compression_is_refused(inventory_db):
    # MariaDB has no such variable; MySQL 8.0.20+ does. The check reads the server's variables.
    with pytest.raises(PreflightError, match="binlog_transaction_compression is ON"):
        check(cdc_settings(), info_override={"binlog_transaction_compression": "ON"})


def test_unknown_table(inventory_db):
    with pytest.raises(UnknownTableError, match=r"inventory\.no_such_table"):
        check(cdc_settings(), tables=[("inventory", "customers"), ("inventory", "no_such_table")])


def test_missing_privileges_are_listed(inventory_db):
    conn = root_connect()
    with conn.cursor() as cur:
        cur.execute("DROP USER IF EXISTS 'cdc_weak'@'%'")
        cur.execute("CREATE USER 'cdc_weak'@'%' IDENTIFIED BY 'weak-pw'")
        cur.execute("GRANT SELECT ON inventory.* TO 'cdc_weak'@'%'")
    try:
        weak = ConnectionSettings(host=MYSQL_HOST, port=MYSQL_PORT, user="cdc_weak", password="weak-pw")
        with pytest.raises(PreflightError) as e:
            check(weak)
        msg = str(e.value)
        for needle in ("REPLICATION SLAVE", "REPLICATION CLIENT", "RELOAD or LOCK TABLES", "GRANT "):
            assert needle in msg
        assert "SELECT on" not in msg  # SELECT on inventory is granted
    finally:
        with conn.cursor() as cur:
            cur.execute("DROP USER IF EXISTS 'cdc_weak'@'%'")
        conn.close()


@pytest.fixture(scope="module")
def nolog_server():
    """A second MariaDB started without the binary log."""
    args = ["bash", "infra/mariadb.sh"]
    opts = ["--instance", "nolog", "--port", str(NOLOG_PORT), "--no-log-bin"]
    subprocess.run(args + ["start"] + opts, cwd=ROOT, check=True)
    yield NOLOG_PORT
    subprocess.run(args + ["stop"] + opts, cwd=ROOT, check=False)


def test_binlog_disabled(nolog_server):
    conn = root_connect(port=nolog_server)
    with conn.cursor() as cur:
        cur.execute("CREATE DATABASE IF NOT EXISTS shop")
        cur.execute("CREATE TABLE IF NOT EXISTS shop.t (id INT PRIMARY KEY)")
    conn.close()
    with pytest.raises(PreflightError, match=r"log_bin is OFF.*log_bin=<basename>"):
        check(cdc_settings(port=nolog_server), tables=[("shop", "t")])


def test_materialization_fails_with_the_preflight_message(inventory_db, local_storage):
    from dagster_mysql_cdc import CdcLakeResource, mysql_cdc_assets

    @mysql_cdc_assets(tables=["inventory.no_such_table"], server_name="srv")
    def cdc(context: dg.AssetExecutionContext, mysql: MySqlCdcResource, lake: CdcLakeResource):
        yield from mysql.sync(context=context, lake=lake)

    mysql = MySqlCdcResource(
        host=MYSQL_HOST, port=MYSQL_PORT, user="cdc", password=CDC_PASSWORD, server_name="srv"
    )
    with pytest.raises(UnknownTableError, match="no_such_table"):
        dg.materialize(
            [cdc], resources={"mysql": mysql, "lake": CdcLakeResource(base_uri=local_storage.base_uri)}
        )


def test_sensor_tick_fails_with_the_fix_while_the_binlog_settings_refuse_the_snapshot(tmp_path):
    """Issue 39: with ``binlog_format=MIXED`` (and ``binlog_row_metadata`` not FULL) the snapshot
    run failed with the fix, but the sensor's ticks stayed green (it retried the run with
    backoff) and the message shown was cut before the fix. Now the tick fails with the
    ``PreflightError`` (red in the UI: Dagster's ``SensorExecutionError`` wraps it), no run is
    requested (nor a failed snapshot retried) until the settings are fixed, and the line
    ``status`` shows keeps every problem's fix."""
    from dagster._core.errors import SensorExecutionError, user_code_error_boundary
    from dagster._utils.error import serializable_error_info_from_exc_info
    from sensor_harness import SensorDriven, capture_resource, scratch_database

    from dagster_mysql_cdc.dagster_integration.health import error_line
    from dagster_mysql_cdc.dagster_integration.protocol import MODE_TAG, REQUEST_TAG

    def failing_tick(cdc) -> str:
        """The line ``status`` shows for the tick's error, stored as the daemon stores it (the
        code server's boundary wraps the sensor's error in a ``SensorExecutionError``)."""
        with pytest.raises(SensorExecutionError) as e:
            with user_code_error_boundary(SensorExecutionError, lambda: "Error in evaluation_fn"):
                cdc.tick_once()
        assert isinstance(e.value.__cause__, PreflightError), e.value
        return error_line(serializable_error_info_from_exc_info((e.type, e.value, e.tb)), 300)

    with scratch_database("pfsensor") as (db, conn):
        with conn.cursor() as cur:
            cur.execute(f"CREATE TABLE {db}.t (id INT PRIMARY KEY)")
            cur.execute(f"INSERT INTO {db}.t VALUES (1)")
            cur.execute("SELECT @@GLOBAL.binlog_format, @@GLOBAL.binlog_row_metadata")
            fmt, metadata = cur.fetchone()
        cdc = SensorDriven(capture_resource(db), str(tmp_path / "lake"))
        try:
            with conn.cursor() as cur:
                cur.execute("SET GLOBAL binlog_format = 'MIXED'")
                cur.execute("SET GLOBAL binlog_row_metadata = 'MINIMAL'")
            for _ in range(2):
                line = failing_tick(cdc)
                assert line.startswith("PreflightError:"), line
                assert "binlog_format is 'MIXED'" in line and "SET GLOBAL binlog_format = 'ROW'" in line, line
                assert line.endswith("SET GLOBAL binlog_row_metadata = 'FULL'."), line
            assert cdc.instance.get_runs() == [] and cdc.cursor is None
            with conn.cursor() as cur:
                cur.execute("SET GLOBAL binlog_row_metadata = %s", (metadata,))
                cur.execute("SET GLOBAL binlog_format = %s", (fmt,))
            (snapshot,) = cdc.tick_once().run_requests
            assert snapshot.tags[MODE_TAG] == "snapshot"
            # the setting changes under a requested snapshot: its run fails, and the tick after
            # fails too instead of retrying it
            with conn.cursor() as cur:
                cur.execute("SET GLOBAL binlog_format = 'STATEMENT'")
            assert not cdc.launch(snapshot).success
            for _ in range(2):
                line = failing_tick(cdc)
                assert line.endswith("SET GLOBAL binlog_format = 'ROW' (and binlog_format=ROW in my.cnf)."), (
                    line
                )
            assert len(cdc.instance.get_runs()) == 1
            with conn.cursor() as cur:
                cur.execute("SET GLOBAL binlog_format = %s", (fmt,))
            (retry,) = cdc.tick_once().run_requests
            assert retry.tags[MODE_TAG] == "snapshot" and retry.tags[REQUEST_TAG].endswith(":a2")
        finally:
            with conn.cursor() as cur:
                cur.execute("SET GLOBAL binlog_row_metadata = %s", (metadata,))
                cur.execute("SET GLOBAL binlog_format = %s", (fmt,))
