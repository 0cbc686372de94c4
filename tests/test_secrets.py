"""Passwords never appear in logs, run config shown in the UI, metadata or exceptions."""

import logging
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

        instance = dg.DagsterInstance.ephemeral()
        resources = {"mysql": mysql, "lake": lake}
        sensor = build_mysql_cdc_sensor(cdc)
        ticks = run_sensor_ticks(sensor, cdc, resources, instance)
        with conn.cursor() as cur:
            cur.execute(f"INSERT INTO {db}.t VALUES (3,'c')")
        ticks = run_sensor_ticks(sensor, cdc, resources, instance, cursor=ticks.cursor)
        assert len(ticks.runs) == 1 and ticks.runs[0].success

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
        with conn.cursor() as cur:
            cur.execute(f"DROP DATABASE IF EXISTS {db}")
            cur.execute(f"DROP USER IF EXISTS '{user}'@'%'")
        conn.close()
