"""Initial snapshot of Debezium's inventory database through Dagster, into a local and an S3 lake."""

import dagster as dg
import pymysql
import pytest
from conftest import CDC_PASSWORD, CDC_USER, MYSQL_HOST, MYSQL_PORT, root_connect
from lake_utils import live_state_rows, read_delta, source_rows

from dagster_mysql_cdc import CdcLakeResource, MySqlCdcResource, mysql_cdc_assets

pytestmark = [pytest.mark.integration, pytest.mark.spark]

SERVER = "dbserver1"


def mysql_resource(**kw) -> MySqlCdcResource:
    base = dict(
        host=MYSQL_HOST,
        port=MYSQL_PORT,
        user=CDC_USER,
        password=CDC_PASSWORD,
        server_name=SERVER,
        stream_follow_seconds=0.0,
    )
    base.update(kw)
    return MySqlCdcResource(**base)


def lake_resource(storage, **options) -> CdcLakeResource:
    return CdcLakeResource(
        base_uri=storage.base_uri,
        s3_endpoint_url=storage.s3_endpoint_url,
        s3_access_key_id=storage.s3_access_key_id,
        s3_secret_access_key=storage.s3_secret_access_key,
        s3_region=storage.s3_region,
        **options,
    )


def materialize(mysql: MySqlCdcResource, storage, tables=None, selection=None, **lake_options):
    tables = tables or mysql.discover_tables()

    @mysql_cdc_assets(tables=tables, server_name=SERVER)
    def cdc(context: dg.AssetExecutionContext, mysql: MySqlCdcResource, lake: CdcLakeResource):
        yield from mysql.sync(context=context, lake=lake)

    result = dg.materialize(
        [cdc], resources={"mysql": mysql, "lake": lake_resource(storage, **lake_options)}, selection=selection
    )
    assert result.success
    mats = [e.event_specific_data.materialization for e in result.get_asset_materialization_events()]
    # table assets only ([server, db, table]); the [server, "binlog"] asset is checked separately
    return {tuple(m.asset_key.path): m.metadata for m in mats if len(m.asset_key.path) == 3}


def test_inventory_snapshot_equals_source(inventory_db, storage):
    mysql = mysql_resource(database_include_list=["inventory"])
    metas = materialize(mysql, storage)
    tables = sorted(t for (_, _, t) in metas)
    assert tables == ["addresses", "customers", "geom", "orders", "products", "products_on_hand"]
    positions = {(m["binlog_file"].value, m["binlog_pos"].value) for m in metas.values()}
    assert len(positions) == 1, "all tables of one snapshot share one binlog position"
    for (_, db, table), meta in metas.items():
        expected, key = source_rows(db, table)
        lake = live_state_rows(storage, meta["state_uri"].value, key)
        assert lake == expected, f"{db}.{table}: lake state differs from source"
        assert meta["dagster/row_count"].value == len(expected)
        log = read_delta(storage, meta["changelog_uri"].value).to_pylist()
        assert len(log) == len(expected)
        assert {e["op"] for e in log} == {"r"}
        assert all(e["before"] is None for e in log)
        assert sorted((e["after"] for e in log), key=lambda r: tuple(r[k] for k in key)) == expected
        assert {(e["source"]["file"], e["source"]["pos"]) for e in log} == positions
        assert all(e["source"]["db"] == db and e["source"]["table"] == table for e in log)
        assert all(e["source"]["name"] == SERVER and e["source"]["connector"] == "mysql" for e in log)
        assert all(e["key"] == {k: e["after"][k] for k in key} for e in log)
        flags = [e["source"]["snapshot"] for e in log]
        assert flags.count("true") == len(flags) - (2 if len(flags) > 1 else 1)


def test_inventory_values_follow_debezium_mapping(inventory_db, local_storage):
    """Values Debezium's tutorial shows for the same rows."""
    mysql = mysql_resource(table_include_list=["inventory\\.(customers|orders|addresses)"])
    metas = materialize(mysql, local_storage)
    by_table = {k[2]: m for k, m in metas.items()}
    customers = {
        r["id"]: r for r in live_state_rows(local_storage, by_table["customers"]["state_uri"].value, ["id"])
    }
    assert customers[1004] == {
        "id": 1004,
        "first_name": "Anne",
        "last_name": "Kretchmar",
        "email": "annek@noanswer.org",
    }
    orders = {
        r["order_number"]: r
        for r in live_state_rows(local_storage, by_table["orders"]["state_uri"].value, ["order_number"])
    }
    # DATE -> io.debezium.time.Date, days since epoch (2016-01-16 is day 16816, as in the tutorial)
    assert orders[10001] == {
        "order_number": 10001,
        "order_date": 16816,
        "purchaser": 1001,
        "quantity": 1,
        "product_id": 102,
    }
    addresses = live_state_rows(local_storage, by_table["addresses"]["state_uri"].value, ["id"])
    assert {a["type"] for a in addresses} == {"SHIPPING", "BILLING", "LIVING"}
    state = read_delta(local_storage, by_table["orders"]["state_uri"].value)
    assert state.schema.field("order_date").metadata[b"debezium.name"] == b"io.debezium.time.Date"


def test_rerun_same_position_is_idempotent(inventory_db, storage):
    mysql = mysql_resource(table_include_list=["inventory\\.customers"])
    first = materialize(mysql, storage)[(SERVER, "inventory", "customers")]
    second = materialize(mysql, storage)[(SERVER, "inventory", "customers")]
    assert first["committed"].value is True
    same_position = (first["binlog_file"].value, first["binlog_pos"].value) == (
        second["binlog_file"].value,
        second["binlog_pos"].value,
    )
    # a snapshot's identity is its binlog position: the same position is the same batch
    assert second["committed"].value is (not same_position)
    if same_position:
        assert second["changelog_delta_version"].value == first["changelog_delta_version"].value
    assert len(read_delta(storage, first["changelog_uri"].value)) == (4 if same_position else 8)
    assert len(read_delta(storage, first["state_uri"].value)) == 4


def test_same_batch_written_twice_leaves_one_copy(spark, storage):
    """Re-running a batch with the same identity (a retried run) commits nothing the second time."""
    import pyarrow as pa

    from dagster_mysql_cdc.events import BinlogPosition, snapshot_events
    from dagster_mysql_cdc.sink.lake import LakeWriter

    value_schema = pa.schema([("id", pa.int32()), ("v", pa.string())])
    after = pa.RecordBatch.from_pylist([{"id": i, "v": f"v{i}"} for i in range(100)], schema=value_schema)
    pos = BinlogPosition("mysql-bin.000007", 1234, "0-1-9")

    def batches():
        yield snapshot_events(
            after,
            primary_key=("id",),
            server_name="s",
            server_id=1,
            database="d",
            table="t",
            position=pos,
            snapshot_flags=pa.array(["true"] * 100),
        )

    writer = LakeWriter(spark, storage, "s")
    results = [
        writer.write_table_batch(
            "d",
            "t",
            batches(),
            value_schema=value_schema,
            primary_key=("id",),
            app_id="test/snapshot",
            version=pos.as_version(),
            snapshot_position=pos,
        )
        for _ in range(2)
    ]
    assert [r.changelog.committed for r in results] == [True, False]
    assert [r.state.committed for r in results] == [True, False]
    assert len(read_delta(storage, results[0].paths.changelog)) == 100
    assert len(read_delta(storage, results[0].paths.state)) == 100


def test_resnapshot_after_change_replaces_state(inventory_db, local_storage, root_conn):
    with root_conn.cursor() as cur:
        cur.execute("DROP TABLE IF EXISTS inventory.scratch_snap")
        cur.execute(
            "CREATE TABLE inventory.scratch_snap (id INT PRIMARY KEY, v VARCHAR(20)) COMMENT 'scratch table'"
        )
        cur.execute("INSERT INTO inventory.scratch_snap VALUES (1,'a'),(2,'b')")
    mysql = mysql_resource(table_include_list=["inventory\\.scratch_snap"])
    tables = mysql.discover_tables()
    assert tables[0].comment == "scratch table"
    m1 = materialize(mysql, local_storage, tables)[(SERVER, "inventory", "scratch_snap")]
    with root_conn.cursor() as cur:
        cur.execute("DELETE FROM inventory.scratch_snap WHERE id=1")
        cur.execute("INSERT INTO inventory.scratch_snap VALUES (3,'c')")
    m2 = materialize(mysql, local_storage, tables)[(SERVER, "inventory", "scratch_snap")]
    assert m2["committed"].value is True
    assert (m2["binlog_file"].value, m2["binlog_pos"].value) != (
        m1["binlog_file"].value,
        m1["binlog_pos"].value,
    )
    assert live_state_rows(local_storage, m2["state_uri"].value, ["id"]) == [
        {"id": 2, "v": "b"},
        {"id": 3, "v": "c"},
    ]
    assert len(read_delta(local_storage, m2["changelog_uri"].value)) == 4  # two snapshots appended
    with root_conn.cursor() as cur:
        cur.execute("DROP TABLE inventory.scratch_snap")


def test_subset_materialization_snapshots_only_selected(inventory_db, local_storage):
    mysql = mysql_resource(database_include_list=["inventory"])
    metas = materialize(mysql, local_storage, selection=[dg.AssetKey([SERVER, "inventory", "products"])])
    assert list(metas) == [(SERVER, "inventory", "products")]
    assert metas[(SERVER, "inventory", "products")]["dagster/row_count"].value == 9


def test_a_snapshot_yields_outputs_only_to_a_downstream_step_of_its_run(inventory_db, local_storage):
    """A capture-only snapshot run logs each table's materialization alone (no STEP_OUTPUT event
    per table: Dagster stores one for every output); a run that also materializes an asset
    downstream of a table yields the tables' outputs, so Dagster does not skip that step."""
    mysql = mysql_resource(table_include_list=["inventory\\.(customers|products)"])
    customers = dg.AssetKey([SERVER, "inventory", "customers"])

    @mysql_cdc_assets(tables=mysql.discover_tables(), server_name=SERVER)
    def cdc(context: dg.AssetExecutionContext, mysql: MySqlCdcResource, lake: CdcLakeResource):
        yield from mysql.sync(context=context, lake=lake)

    @dg.asset(deps=[customers])
    def customer_report() -> int:
        return 1

    resources = {"mysql": mysql, "lake": lake_resource(local_storage)}

    def table_outputs(result) -> list[str]:  # the tables' outputs (not the checks' nor the binlog's)
        names = {f"{SERVER}__inventory__customers", f"{SERVER}__inventory__products"}
        return [
            e.step_output_data.output_name
            for e in result.all_events
            if e.event_type_value == "STEP_OUTPUT" and e.step_output_data.output_name in names
        ]

    alone = dg.materialize([cdc], resources=resources)
    assert alone.success
    mats = {tuple(e.asset_key.path) for e in alone.get_asset_materialization_events()}
    assert {(SERVER, "inventory", "customers"), (SERVER, "inventory", "products")} <= mats
    assert table_outputs(alone) == []

    both = dg.materialize([cdc, customer_report], resources=resources)
    assert both.success
    steps = {
        e.step_key: e.event_type_value for e in both.all_events if e.is_step_success or e.is_step_skipped
    }
    assert steps["customer_report"] == "STEP_SUCCESS", steps
    assert len(table_outputs(both)) == 2


def test_no_data_mode_writes_schema_and_position_only(inventory_db, local_storage):
    mysql = mysql_resource(table_include_list=["inventory\\.products"], snapshot_mode="no_data")
    meta = materialize(mysql, local_storage)[(SERVER, "inventory", "products")]
    assert meta["dagster/row_count"].value == 0
    state = read_delta(local_storage, meta["state_uri"].value)
    assert state.num_rows == 0
    assert state.schema.names[:4] == ["id", "name", "description", "weight"]
    assert meta["binlog_file"].value.startswith("mysql-bin.")


def test_table_lock_fallback_without_reload(inventory_db, local_storage, root_conn):
    """Without RELOAD the snapshot uses LOCK TABLES ... READ (Debezium's fallback)."""
    with root_conn.cursor() as cur:
        cur.execute("DROP USER IF EXISTS 'cdc_noreload'@'%'")
        cur.execute("CREATE USER 'cdc_noreload'@'%' IDENTIFIED BY 'pw-noreload'")
        cur.execute(
            "GRANT SELECT, LOCK TABLES, REPLICATION SLAVE, BINLOG MONITOR ON *.* TO 'cdc_noreload'@'%'"
        )
    try:
        mysql = mysql_resource(
            user="cdc_noreload", password="pw-noreload", table_include_list=["inventory\\.customers"]
        )
        meta = materialize(mysql, local_storage)[(SERVER, "inventory", "customers")]
        assert meta["lock"].value == "tables"
        assert meta["dagster/row_count"].value == 4
    finally:
        with root_conn.cursor() as cur:
            cur.execute("DROP USER IF EXISTS 'cdc_noreload'@'%'")


def test_lockless_mariadb_snapshot_uses_consistent_snapshot_position(inventory_db, local_storage):
    mysql = mysql_resource(table_include_list=["inventory\\.customers"], snapshot_locking_mode="none")
    meta = materialize(mysql, local_storage)[(SERVER, "inventory", "customers")]
    assert meta["lock"].value == "none"
    assert meta["dagster/row_count"].value == 4
    conn = root_connect()
    with conn.cursor(pymysql.cursors.DictCursor) as cur:
        cur.execute("SHOW MASTER STATUS")
        now = cur.fetchone()
    conn.close()
    assert (meta["binlog_file"].value, meta["binlog_pos"].value) <= (now["File"], now["Position"])


def test_a_large_tables_first_batch_is_written_while_the_next_is_read(spark, local_storage, monkeypatch):
    """The locked snapshot hands a large table's first record batch to the sink thread before it
    reads the second: the Spark jobs overlap the scan from its first batch on. It used to read two
    batches first (to tell a small table, one batch of at most ``SMALL_TABLE_ROWS``, from a large
    one), so the writing started a batch late and the snapshot ended that much later. A small
    table (its batch at most that size) is still written with the other small ones."""
    from conftest import cdc_settings
    from sensor_harness import scratch_database

    from dagster_mysql_cdc.engine.initial_snapshot import SMALL_TABLE_ROWS, run_snapshot
    from dagster_mysql_cdc.sink.lake import LakeWriter
    from dagster_mysql_cdc.source import snapshot as source_snapshot
    from dagster_mysql_cdc.source.snapshot import SnapshotOptions
    from dagster_mysql_cdc.source.types import TypeOptions

    batch = SMALL_TABLE_ROWS + 5_000
    read = {"batches": 0}
    scan = source_snapshot.ConsistentSnapshot.scan

    def counted(self, key):
        for b in scan(self, key):
            read["batches"] += 1
            yield b

    monkeypatch.setattr(source_snapshot.ConsistentSnapshot, "scan", counted)
    submitted: list[int] = []  # batches read when each record batch was handed to the sink

    class Recording(LakeWriter):
        def submit(self, tb, b):
            submitted.append(read["batches"])
            return super().submit(tb, b)

    with scratch_database("firstbatch") as (db, conn):
        with conn.cursor() as cur:
            cur.execute(f"CREATE TABLE {db}.big (id INT PRIMARY KEY, v VARCHAR(20))")
            cur.execute(f"INSERT INTO {db}.big SELECT seq, CONCAT('v', seq) FROM {db}.seq_1_to_{3 * batch}")
        [result] = run_snapshot(
            cdc_settings(),
            [(db, "big")],
            Recording(spark, local_storage, "s"),
            type_options=TypeOptions(),
            options=SnapshotOptions(batch_rows=batch),
            server_name="s",
        )
        assert submitted == [1, 2, 3]  # each batch written as soon as it is read (was [2, 2, 3])
        expected, key = source_rows(db, "big")
        assert live_state_rows(local_storage, result.write.paths.state, key) == expected
        assert len(read_delta(local_storage, result.write.paths.changelog)) == 3 * batch
