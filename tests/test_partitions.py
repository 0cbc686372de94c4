"""Primary-key-range partitions: a backfill of two non-adjacent partitions during streaming
re-snapshots exactly those ranges, and the lake converges to the source."""

import random
import threading
import time
import uuid
from pathlib import Path

import dagster as dg
import pymysql
import pytest
from conftest import CDC_PASSWORD, CDC_USER, MYSQL_HOST, MYSQL_PORT, root_connect, root_settings
from deltalake import DeltaTable

from dagster_mysql_cdc import (
    CdcLakeResource,
    MySqlCdcResource,
    build_mysql_cdc_sensor,
    build_pk_range_assets,
    mysql_cdc_assets,
    run_sensor_ticks,
)
from dagster_mysql_cdc.sink.read import read_current

pytestmark = [pytest.mark.integration, pytest.mark.spark]


@pytest.mark.parametrize("split_reads", [False, True], ids=["driver_reads", "split_reads"])
def test_backfill_of_two_ranges_during_streaming_converges(local_storage, split_reads):
    db = f"rng_{uuid.uuid4().hex[:8]}"
    conn = root_connect()
    with conn.cursor() as cur:
        cur.execute(f"CREATE DATABASE {db}")
        cur.execute(f"USE {db}")
        cur.execute("CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(20), n INT)")
        cur.execute("INSERT INTO t SELECT seq, CONCAT('v', seq), seq FROM seq_1_to_4000")
    try:
        mysql = MySqlCdcResource(
            stream_follow_seconds=0.0,
            host=MYSQL_HOST,
            port=MYSQL_PORT,
            user=CDC_USER,
            password=CDC_PASSWORD,
            server_name=db,
            database_include_list=[db],
            pk_range_rows=1000,
            snapshot_split_reads=split_reads,
        )
        mysql.create_signal_table()
        tables = mysql.discover_tables(tables=[f"{db}.t"])

        @mysql_cdc_assets(tables=tables, server_name=db)
        def cdc(context: dg.AssetExecutionContext, mysql: MySqlCdcResource, lake: CdcLakeResource):
            yield from mysql.sync(context=context, lake=lake)

        ranges = build_pk_range_assets(tables, server_name=db)
        assert [a.key.path for a in ranges] == [[db, db, "t_pk_ranges"]]  # named after its table
        assert ranges[0].group_names_by_key[ranges[0].key] == f"{db}_pk_ranges"  # apart from the tables
        resources = {"mysql": mysql, "lake": CdcLakeResource(base_uri=local_storage.base_uri)}
        instance = dg.DagsterInstance.ephemeral()
        sensor = build_mysql_cdc_sensor(cdc)
        ticks = run_sensor_ticks(sensor, cdc, resources, instance)
        pdef = ranges[0].partitions_def
        assert instance.get_dynamic_partitions(pdef.name) == [
            "r000000",
            "r000001",
            "r000002",
            "r000003",
            "r000004",
        ]

        # corrupt two non-adjacent ranges in the lake, then backfill them while a writer runs
        state_uri = local_storage.uri(db, db, "t", "state")
        DeltaTable(state_uri).update(
            updates={"v": "'bad'"}, predicate="(id > 0 AND id <= 1000) OR (id > 2000 AND id <= 3000)"
        )
        stop = threading.Event()

        def writer():
            w = pymysql.connect(**root_settings().pymysql_kwargs())
            rnd = random.Random(7)
            with w.cursor() as cur:
                while not stop.is_set():
                    k = rnd.randint(1, 4500)
                    op = rnd.random()
                    if op < 0.4:
                        cur.execute(f"REPLACE INTO {db}.t VALUES (%s, 'w', %s)", (k, k))
                    elif op < 0.8:
                        cur.execute(f"UPDATE {db}.t SET n = n + 1 WHERE id = %s", (k,))
                    else:
                        cur.execute(f"DELETE FROM {db}.t WHERE id = %s", (k,))
                    time.sleep(0.003)
            w.close()

        th = threading.Thread(target=writer)
        th.start()
        try:
            for key in ("r000000", "r000002"):
                res = dg.materialize(
                    [cdc, *ranges],
                    resources=resources,
                    instance=instance,
                    selection=[ranges[0].key],
                    partition_key=key,
                )
                md = res.get_asset_materialization_events()[0].event_specific_data.materialization.metadata
                assert md["rows_read"].value >= md["rows_emitted"].value > 500
                assert md["backfill_progress"].value["ranges_total"] == 5
                # the table asset shows the backfill's progress too
                obs = instance.fetch_observations(dg.AssetKey([db, db, "t"]), limit=1).records
                assert obs and "pk_ranges_backfill" in obs[0].asset_observation.metadata
                ticks = run_sensor_ticks(
                    sensor, cdc, resources, instance, cursor=ticks.cursor, until_caught_up=False, max_ticks=2
                )
        finally:
            stop.set()
            th.join()
        ticks = run_sensor_ticks(sensor, cdc, resources, instance, cursor=ticks.cursor)
        st = read_current(local_storage, state_uri).to_pylist()
        lake_rows = sorted((r["id"], r["v"], r["n"]) for r in st if not r["__deleted"])
        with conn.cursor() as cur:
            cur.execute(f"SELECT id, v, n FROM {db}.t ORDER BY id")
            src = [tuple(r) for r in cur.fetchall()]
        assert lake_rows == src
        assert not any(v == "bad" for _, v, _ in lake_rows)
        # the changelog carries the range rows as incremental read events
        log = (
            DeltaTable(local_storage.uri(db, db, "t", "changelog"))
            .to_pyarrow_table(columns=["op", "source"])
            .to_pylist()
        )
        assert sum(1 for e in log if e["op"] == "r" and e["source"]["snapshot"] == "incremental") > 1000
        # split reads: the executors staged each range's rows (read inside its watermark window)
        staged = list(Path(local_storage.base_uri, "_staging", db, "incremental").glob("range-*/*.parquet"))
        assert bool(staged) == split_reads, staged
    finally:
        with conn.cursor() as cur:
            cur.execute(f"DROP DATABASE IF EXISTS {db}")
        conn.close()


def test_unknown_partition_explains_the_fix(local_storage):
    db = f"rng_{uuid.uuid4().hex[:8]}"
    conn = root_connect()
    with conn.cursor() as cur:
        cur.execute(f"CREATE DATABASE {db}")
        cur.execute(f"CREATE TABLE {db}.t (id INT PRIMARY KEY)")
    try:
        mysql = MySqlCdcResource(
            stream_follow_seconds=0.0,
            host=MYSQL_HOST,
            port=MYSQL_PORT,
            user=CDC_USER,
            password=CDC_PASSWORD,
            server_name=db,
            database_include_list=[db],
        )
        ranges = build_pk_range_assets([f"{db}.t"], server_name=db)
        instance = dg.DagsterInstance.ephemeral()
        instance.add_dynamic_partitions(ranges[0].partitions_def.name, ["r000009"])
        with pytest.raises(Exception, match="materialize the table asset"):
            dg.materialize(
                ranges,
                resources={"mysql": mysql, "lake": CdcLakeResource(base_uri=local_storage.base_uri)},
                instance=instance,
                partition_key="r000009",
            )
    finally:
        with conn.cursor() as cur:
            cur.execute(f"DROP DATABASE IF EXISTS {db}")
        conn.close()


def test_missing_signal_table_is_explained_or_created(local_storage):
    """A range backfill without the signal table fails with the SQL to create it, or creates it when
    ``create_missing_signal_table=True``."""
    db = f"rng_{uuid.uuid4().hex[:8]}"
    conn = root_connect()
    with conn.cursor() as cur:
        cur.execute(f"CREATE DATABASE {db}")
        cur.execute(f"CREATE TABLE {db}.t (id INT PRIMARY KEY)")
        cur.execute(f"INSERT INTO {db}.t VALUES (1), (2), (3)")
    try:

        def resources(**kw):
            mysql = MySqlCdcResource(
                stream_follow_seconds=0.0,
                host=MYSQL_HOST,
                port=MYSQL_PORT,
                user=CDC_USER,
                password=CDC_PASSWORD,
                server_name=db,
                database_include_list=[db],
                pk_range_rows=2,
                **kw,
            )
            return {"mysql": mysql, "lake": CdcLakeResource(base_uri=local_storage.base_uri)}

        @mysql_cdc_assets(tables=[f"{db}.t"], server_name=db)
        def cdc(context: dg.AssetExecutionContext, mysql: MySqlCdcResource, lake: CdcLakeResource):
            yield from mysql.sync(context=context, lake=lake)

        ranges = build_pk_range_assets([f"{db}.t"], server_name=db)
        instance = dg.DagsterInstance.ephemeral()
        dg.materialize([cdc], resources=resources(), instance=instance)  # snapshot: computes the ranges
        with pytest.raises(
            Exception, match=r"CREATE TABLE IF NOT EXISTS `[a-z0-9_]+`.`debezium_signal`"
        ) as e:
            dg.materialize(ranges, resources=resources(), instance=instance, partition_key="r000000")
        assert "GRANT SELECT, INSERT, DELETE" in str(e.value) and "1146" not in str(e.value)
        res = dg.materialize(
            ranges,
            resources=resources(create_missing_signal_table=True),
            instance=instance,
            partition_key="r000000",
        )
        assert res.success
        with conn.cursor() as cur:
            cur.execute(f"SHOW TABLES FROM {db} LIKE 'debezium_signal'")
            assert cur.fetchone() is not None
    finally:
        with conn.cursor() as cur:
            cur.execute(f"DROP DATABASE IF EXISTS {db}")
        conn.close()
