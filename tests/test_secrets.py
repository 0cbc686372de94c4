"""Passwords never appear in logs, run config shown in the UI, metadata or exceptions."""

import logging
import os
import uuid

import dagster as dg
import pytest
from conftest import MYSQL_HOST, MYSQL_PORT, S3_BUCKET, S3_ENDPOINT, env, root_connect

from dagster_mysql_cdc import (
    CdcLakeResource,
    MySqlCdcResource,
    build_mysql_cdc_sensor,
    mysql_cdc_assets,
    run_sensor_ticks,
)

pytestmark = [pytest.mark.integration, pytest.mark.spark]

DB_PASSWORD = "Pw-" + uuid.uuid4().hex
S3_SECRET = env("AWS_SECRET_ACCESS_KEY", "cdc-secret")  # SeaweedFS checks it: the real one


def test_secrets_stay_out_of_logs_metadata_and_errors(monkeypatch, caplog):
    db = f"sec_{uuid.uuid4().hex[:8]}"
    user = f"u_{uuid.uuid4().hex[:8]}"
    conn = root_connect()
    with conn.cursor() as cur:
        cur.execute(f"CREATE DATABASE {db}")
        cur.execute(f"CREATE TABLE {db}.t (id INT PRIMARY KEY, v VARCHAR(10))")
        cur.execute(f"INSERT INTO {db}.t VALUES (1,'a'),(2,'b')")
        cur.execute(f"CREATE USER '{user}'@'%' IDENTIFIED BY '{DB_PASSWORD}'")
        cur.execute(
            f"GRANT SELECT, RELOAD, LOCK TABLES, REPLICATION SLAVE, BINLOG MONITOR ON *.* TO '{user}'@'%'"
        )
    monkeypatch.setenv("SEC_TEST_DB_PASSWORD", DB_PASSWORD)
    monkeypatch.setenv("SEC_TEST_S3_SECRET", S3_SECRET)
    caplog.set_level(logging.DEBUG)
    instance = dg.DagsterInstance.ephemeral()
    try:
        mysql = MySqlCdcResource(
            stream_follow_seconds=0.0,
            host=MYSQL_HOST,
            port=MYSQL_PORT,
            user=user,
            password=dg.EnvVar("SEC_TEST_DB_PASSWORD"),
            server_name=db,
            database_include_list=[db],
        )
        lake = CdcLakeResource(
            base_uri=f"s3://{S3_BUCKET}/{db}",
            s3_endpoint_url=S3_ENDPOINT,
            s3_access_key_id=env("AWS_ACCESS_KEY_ID", "cdc"),
            s3_secret_access_key=dg.EnvVar("SEC_TEST_S3_SECRET"),
        )

        @mysql_cdc_assets(tables=mysql.discover_tables(), server_name=db)
        def cdc(context: dg.AssetExecutionContext, mysql: MySqlCdcResource, lake: CdcLakeResource):
            yield from mysql.sync(context=context, lake=lake)

        resources = {"mysql": mysql, "lake": lake}
        sensor = build_mysql_cdc_sensor(cdc)
        ticks = run_sensor_ticks(sensor, cdc, resources, instance)
        with conn.cursor() as cur:
            cur.execute(f"INSERT INTO {db}.t VALUES (3,'c')")
        ticks = run_sensor_ticks(sensor, cdc, resources, instance, cursor=ticks.cursor)
        from dagster_mysql_cdc.dagster_integration.health import run_failure_reason

        # (more than one window when other databases of the server are busy)
        assert ticks.runs and all(r.success for r in ticks.runs), [
            run_failure_reason(instance, r.run_id) for r in ticks.runs
        ]

        texts = [ticks.cursor or ""]
        for run in instance.get_runs():
            texts.append(repr(run.run_config))
            texts.append(repr(run.tags))
            for rec in instance.all_logs(run.run_id):
                texts.append(rec.message or "")
                if rec.dagster_event is not None:
                    texts.append(repr(rec.dagster_event.event_specific_data))
        texts += [r.getMessage() for r in caplog.records]
        texts.append(repr(mysql) + repr(lake))
        blob = "\n".join(texts)
        assert DB_PASSWORD not in blob
        assert S3_SECRET not in blob

        # errors: wrong password, unreachable bucket
        bad = MySqlCdcResource(
            host=MYSQL_HOST, port=MYSQL_PORT, user=user, password="wrong-" + DB_PASSWORD, server_name=db
        )
        with pytest.raises(Exception) as e:
            bad.discover_tables()
        assert DB_PASSWORD not in str(e.value) and "Access denied" in str(e.value)
    finally:
        instance.dispose()  # its in-memory storage's connection closed now, not at interpreter exit
        with conn.cursor() as cur:
            cur.execute(f"DROP DATABASE IF EXISTS {db}")
            cur.execute(f"DROP USER IF EXISTS '{user}'@'%'")
        conn.close()


# -- a Spark Connect server whose executors get the secrets as a remote server's do ------------


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def connect_server(tmp_path):
    """``(sc:// URL, directory)`` of a Spark Connect server of its own (infra/spark_connect.sh on a
    free port, master ``local[2]``) whose every file lands under the directory: state and log,
    ``java.io.tmpdir`` (session artifacts), ``spark.local.dir``, the Python workers' ``TMPDIR`` and
    an uncompressed event log (``events/``). Its environment has wrong ``AWS_*`` keys, so its
    tasks write with the keys the run gives them or not at all. Stopped after the test (the event
    log is complete then)."""
    import subprocess

    from conftest import ROOT

    home = tmp_path / "connect-server"
    for d in ("infra", "java-tmp", "local", "py-tmp", "events"):
        (home / d).mkdir(parents=True)
    port = _free_port()
    server_env = {
        **os.environ,
        "CDC_INFRA_DIR": str(home / "infra"),
        "CDC_SPARK_CONNECT": "1",
        "CDC_SPARK_CONNECT_PORT": str(port),
        "CDC_SPARK_CONNECT_DRIVER_MEMORY": "1g",
        "CDC_SPARK_CONNECT_CONF": (
            f"--driver-java-options -Djava.io.tmpdir={home}/java-tmp --conf spark.local.dir={home}/local "
            f"--conf spark.eventLog.enabled=true --conf spark.eventLog.dir=file://{home}/events "
            "--conf spark.eventLog.compress=false"
        ),
        "TMPDIR": str(home / "py-tmp"),
        "AWS_ACCESS_KEY_ID": "not-the-key-id",
        "AWS_SECRET_ACCESS_KEY": "not-the-secret",
    }
    script = str(ROOT / "infra" / "spark_connect.sh")
    subprocess.run(["bash", script, "start"], env=server_env, check=True, capture_output=True)
    try:
        yield f"sc://127.0.0.1:{port}", home
    finally:
        subprocess.run(["bash", script, "stop"], env=server_env, check=False, capture_output=True)


def test_secrets_rest_on_no_disk_of_a_spark_connect_server(monkeypatch, connect_server):
    """Spark Connect with split reads and an S3 lake with keys, the private files shipped as session
    artifacts (as to a server on another host): no file of the server (artifacts, local dirs,
    Python workers' temporary files, log, event log with the Connect statements) holds the
    password, the S3 secret key or a writer's sealing key."""
    import base64
    from pathlib import Path

    from lake_utils import live_state_rows, source_rows
    from sensor_harness import (
        SensorDriven,
        capture_resource,
        capture_user,
        first_materialization_metadata,
        scratch_database,
    )

    import dagster_mysql_cdc.sink.lake as lake_module
    from dagster_mysql_cdc.private_files import PrivateFiles

    url, home = connect_server
    # executors on "another host": payloads inside the tasks, private files shipped as artifacts
    monkeypatch.setattr(lake_module, "payloads_can_be_staged", lambda spark: False)
    keys: list[bytes] = []
    init = PrivateFiles.__init__

    def recording_init(self) -> None:
        init(self)
        keys.append(self._key)

    monkeypatch.setattr(PrivateFiles, "__init__", recording_init)
    monkeypatch.setenv("SEC_TEST_DB_PASSWORD", DB_PASSWORD)
    with scratch_database("secc") as (db, conn):
        with conn.cursor() as cur:
            cur.execute(f"CREATE TABLE {db}.t (id INT PRIMARY KEY, v VARCHAR(20))")
            cur.execute(f"INSERT INTO {db}.t SELECT seq, CONCAT('v', seq) FROM {db}.seq_1_to_3000")
        with capture_user(conn, db, DB_PASSWORD) as user:
            mysql = capture_resource(
                db,
                user=user,
                password=dg.EnvVar("SEC_TEST_DB_PASSWORD"),
                snapshot_split_reads=True,
                snapshot_split_rows=1000,
            )
            cdc = SensorDriven(
                mysql,
                f"s3://{S3_BUCKET}/{db}",
                s3_endpoint_url=S3_ENDPOINT,
                s3_access_key_id=env("AWS_ACCESS_KEY_ID", "cdc"),
                s3_secret_access_key=dg.EnvVar("AWS_SECRET_ACCESS_KEY"),
                spark_remote=url,
            )
            snapshot = cdc.ticks()  # the split snapshot: the executors read the source
            with conn.cursor() as cur:
                cur.execute(f"UPDATE {db}.t SET v = 'u' WHERE id <= 100")
            window = cdc.ticks()  # a stream window written with the S3 keys
            assert snapshot.runs and window.runs and all(r.success for r in snapshot.runs + window.runs)
            md = first_materialization_metadata(snapshot.runs, "t")
            assert md["lock"].value == "none" and md["dagster/row_count"].value == 3000
            expected, key = source_rows(db, "t")
            storage = cdc.resources["lake"].storage_settings()
            assert live_state_rows(storage, storage.uri(db, db, "t", "state"), key) == expected
    secrets = {"password": DB_PASSWORD.encode(), "S3 secret key": S3_SECRET.encode()}
    assert keys
    for i, k in enumerate(keys):
        secrets[f"key {i}"], secrets[f"key {i} (raw)"] = k, base64.urlsafe_b64decode(k)

    def files() -> list[Path]:
        return [p for p in Path(home).rglob("*") if p.is_file() and not p.is_symlink()]

    def leaks() -> dict[str, list[str]]:
        found = files()
        return {name: [str(p) for p in found if value in p.read_bytes()] for name, value in secrets.items()}

    # while the session lives: the private files were shipped as session artifacts (the server's
    # artifacts-*/ and, for its executors, spark-*/userFiles-*/ under java.io.tmpdir), sealed
    shipped = [p.name for p in files() if "java-tmp" in p.parts]
    # (the split tasks' job: engine/split_files.py)
    assert any(n.startswith("cdc-storage-") for n in shipped) and any(
        n.startswith("cdc-split-files-") for n in shipped
    )
    assert leaks() == {name: [] for name in secrets}
    # after the server stopped (Spark deletes its temporary directories; the event log is complete);
    # this process's client first, while the server answers its pending release calls
    import subprocess

    from dagster_mysql_cdc.sink.spark_session import _REMOTE_SESSIONS

    _REMOTE_SESSIONS.pop(url).client.close()

    from conftest import ROOT

    subprocess.run(
        ["bash", str(ROOT / "infra" / "spark_connect.sh"), "stop"],
        env={**os.environ, "CDC_INFRA_DIR": str(home / "infra")},
        check=True,
        capture_output=True,
    )
    log = b"".join(p.read_bytes() for p in files() if "events" in p.parts)
    assert b"SparkListenerConnectOperationStarted" in log and b"mysql_cdc_split_files_" in log  # statements
    assert leaks() == {name: [] for name in secrets}
