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


#: A code location of one captured table ``t`` and its ``pk_ranges`` asset (no sensor), for the
#: daemon of the backfill test; configured by the environment (BACKFILL_DB, BACKFILL_LAKE, CDC_*).
BACKFILL_LOCATION = """
import os

import dagster as dg

from dagster_mysql_cdc import CdcLakeResource, MySqlCdcResource, build_pk_range_assets, mysql_cdc_assets

DB = os.environ["BACKFILL_DB"]


@mysql_cdc_assets(tables=[f"{DB}.t"], server_name=DB)
def cdc(context: dg.AssetExecutionContext, mysql: MySqlCdcResource, lake: CdcLakeResource):
    yield from mysql.sync(context=context, lake=lake)


defs = dg.Definitions(
    assets=[cdc, *build_pk_range_assets([f"{DB}.t"], server_name=DB)],
    resources={
        "mysql": MySqlCdcResource(
            host=os.environ["CDC_MYSQL_HOST"],
            port=int(os.environ["CDC_MYSQL_PORT"]),
            user=os.environ["CDC_MYSQL_USER"],
            password=dg.EnvVar("CDC_MYSQL_PASSWORD"),
            server_name=DB,
            database_include_list=[DB],
            pk_range_rows=1000,
            stream_follow_seconds=0.0,
        ),
        "lake": CdcLakeResource(base_uri=os.environ["BACKFILL_LAKE"]),
    },
)
"""


def test_backfill_progress_is_the_backfills_own(tmp_path):
    """Issue "status that says why": after a finished backfill of 2 of a table's 7 key ranges, the
    range asset's page showed ``backfill_percent 28.6`` (2 of the table's 7 ranges), as if the
    backfill were stuck. The progress is now the backfill's: 50 % after its first range, 100 %
    after its second, with the table's ranges (8 here) beside it. The backfill is a real one: added to
    the instance as the UI's "Launch backfill" does, its runs launched by ``dagster-daemon``."""
    import importlib.util
    import os
    import signal
    import subprocess
    import sys

    from conftest import ROOT, SERVICE_ENV, SPARK_REMOTE
    from dagster._core.execution.backfill import BulkActionStatus, PartitionBackfill
    from dagster._core.storage.tags import BACKFILL_ID_TAG

    db = f"rng_{uuid.uuid4().hex[:8]}"
    conn = root_connect()
    with conn.cursor() as cur:
        cur.execute(f"CREATE DATABASE {db}")
        cur.execute(f"CREATE TABLE {db}.t (id INT PRIMARY KEY, v VARCHAR(20))")
        cur.execute(f"INSERT INTO {db}.t SELECT seq, CONCAT('v', seq) FROM {db}.seq_1_to_7000")
    home = tmp_path / "home"
    home.mkdir()
    (home / "dagster.yaml").write_text(
        "telemetry:\n  enabled: false\nrun_queue:\n  dequeue_interval_seconds: 1\n  max_concurrent_runs: 1\n"
    )
    location = tmp_path / "backfill_location.py"
    location.write_text(BACKFILL_LOCATION)
    lake = tmp_path / "lake"
    env = {
        **os.environ,
        **SERVICE_ENV,
        "DAGSTER_HOME": str(home),
        "BACKFILL_DB": db,
        "BACKFILL_LAKE": str(lake),
        "CDC_SPARK_REMOTE": SPARK_REMOTE,
        "PYTHONPATH": str(ROOT),
    }
    daemon = None
    try:
        os.environ.update({"BACKFILL_DB": db, "BACKFILL_LAKE": str(lake)})
        spec = importlib.util.spec_from_file_location("backfill_location", location)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        defs = module.defs
        module.defs.resources["mysql"].create_signal_table()
        instance = dg.DagsterInstance.from_config(str(home))
        table_key, range_key = dg.AssetKey([db, db, "t"]), dg.AssetKey([db, db, "t_pk_ranges"])
        snap = dg.materialize(
            [module.cdc], resources=defs.resources, instance=instance, selection=[table_key]
        )
        assert snap.success
        pdef = defs.resolve_assets_def(range_key).partitions_def
        keys = instance.get_dynamic_partitions(pdef.name)
        assert keys == [f"r{i:06d}" for i in range(len(keys))] and len(keys) >= 7, keys

        backfill_id = "rangebf1"
        instance.add_backfill(
            PartitionBackfill.from_asset_partitions(
                backfill_id=backfill_id,
                asset_graph=defs.resolve_asset_graph(),
                partition_names=["r000001", "r000004"],
                asset_selection=[range_key],
                backfill_timestamp=time.time(),
                tags={},
                dynamic_partitions_store=instance,
                all_partitions=False,
                title=None,
                description=None,
                run_config=None,
            )
        )
        log = open(tmp_path / "daemon.log", "w")
        daemon = subprocess.Popen(
            [os.path.join(os.path.dirname(sys.executable), "dagster-daemon"), "run", "-f", str(location)],
            cwd=tmp_path, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip
        deadline = time.monotonic() + 420
        while time.monotonic() < deadline:
            status = instance.get_backfill(backfill_id).status
            if status not in (BulkActionStatus.REQUESTED,):
                break
            time.sleep(3)
        assert instance.get_backfill(backfill_id).status == BulkActionStatus.COMPLETED_SUCCESS, (
            instance.get_backfill(backfill_id).status,
            (tmp_path / "daemon.log").read_text()[-3000:],
        )
        records = instance.fetch_materializations(range_key, limit=10, ascending=True).records
        assert [r.partition_key for r in records] in (["r000001", "r000004"], ["r000004", "r000001"])
        progress = [r.asset_materialization.metadata["backfill_progress"].value for r in records]
        percents = [r.asset_materialization.metadata["backfill_percent"].value for r in records]
        assert percents == [50.0, 100.0], progress  # was 1 and 2 of the table's ranges: [12.5, 25.0]
        assert progress[-1]["ranges_done"] == progress[-1]["backfill_ranges"] == 2, progress
        assert progress[-1]["ranges_total"] == len(keys) and progress[-1]["backfill_id"] == backfill_id
        run = instance.get_run_by_id(records[-1].run_id)
        assert run.tags.get(BACKFILL_ID_TAG) == backfill_id  # launched by the daemon for the backfill
        seen = instance.fetch_observations(table_key, limit=1).records[0].asset_observation
        assert seen.metadata["pk_ranges_backfill"].value["percent"] == 100.0
        assert f"2 of the 2 range(s) of backfill {backfill_id}" in seen.description, seen.description
    finally:
        if daemon is not None:
            os.killpg(daemon.pid, signal.SIGKILL)
            daemon.wait()
        for name in ("BACKFILL_DB", "BACKFILL_LAKE"):
            os.environ.pop(name, None)
        with conn.cursor() as cur:
            cur.execute(f"DROP DATABASE IF EXISTS {db}")
        conn.close()
