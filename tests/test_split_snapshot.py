"""Lock-free initial snapshots read in primary-key splits by the Spark executors
(``snapshot_split_reads``): planning, reading, and convergence under concurrent writes."""

import random
import threading
import time
from collections import Counter
from dataclasses import replace

import pyarrow as pa
import pytest
from conftest import cdc_settings, root_connect
from lake_utils import live_state_rows, read_delta, source_rows, source_table
from sensor_harness import SensorDriven, capture_resource, scratch_database
from test_snapshot import materialize, mysql_resource

from dagster_mysql_cdc.engine.split_snapshot import _check_no_ddl
from dagster_mysql_cdc.errors import ConfigurationError
from dagster_mysql_cdc.events import BinlogPosition
from dagster_mysql_cdc.source.catalog import read_table_schemas
from dagster_mysql_cdc.source.connection import connect
from dagster_mysql_cdc.source.snapshot import create_statements
from dagster_mysql_cdc.source.split_reader import group_splits, merge_splits
from dagster_mysql_cdc.source.splits import KeySplit, SplitScan, plan_splits, read_split
from dagster_mysql_cdc.source.types import TypeOptions

pytestmark = [pytest.mark.integration]


# -- pure logic ----------------------------------------------------------------------------------


def test_the_split_tasks_files_are_committed_per_output_in_key_order():
    """Each task of a split snapshot writes its own files (``engine/split_files.py``): the run
    process commits them per output (change log, state) in the tasks' key order, and refuses a
    job whose tasks did not each report once."""
    from dagster_mysql_cdc.engine.split_files import merged_files

    def task(g: int) -> dict:
        return {
            "group": g,
            "rows": 1,
            "files": [[{"path": f"log{g}"}], [{"path": f"st{g}a"}, {"path": f"st{g}b"}]],
        }

    merged = merged_files([task(2), task(0), task(1)], outputs=2, tasks=3)
    assert [[f["path"] for f in out] for out in merged] == [
        ["log0", "log1", "log2"],
        ["st0a", "st0b", "st1a", "st1b", "st2a", "st2b"],
    ]
    with pytest.raises(RuntimeError, match="2 summaries for 3 tasks"):
        merged_files([task(0), task(2)], outputs=2, tasks=3)
    with pytest.raises(RuntimeError, match="3 summaries for 2 tasks"):
        merged_files([task(0), task(1), task(1)], outputs=2, tasks=2)


def test_group_splits_caps_the_tasks_and_keeps_key_order():
    splits = [KeySplit(i, (i,), (i + 1,)) for i in range(7)]
    assert group_splits(splits, 0) == tuple((s,) for s in splits)
    assert group_splits(splits, 10) == tuple((s,) for s in splits)
    groups = group_splits(splits, 3)
    assert [len(g) for g in groups] == [3, 2, 2]
    assert [s for g in groups for s in g] == splits


def test_merge_splits_gives_one_contiguous_range_per_task():
    splits = [KeySplit(0, None, (10,)), *[KeySplit(i, (i * 10,), (i * 10 + 10,)) for i in range(1, 5)]]
    splits.append(KeySplit(5, (50,), None))
    merged = merge_splits(splits, 2)
    assert merged == ((KeySplit(0, None, (30,)),), (KeySplit(1, (30,), None),))
    assert merge_splits(splits, 0) == ((KeySplit(0, None, None),),), "at least one task"
    assert len(merge_splits(splits, 10)) == 6


def test_key_split_conditions():
    assert KeySplit(0, None, None).where(["id"]) == ("", [])
    assert KeySplit(0, None, (5,)).where(["id"]) == ("(`id`) <= (%s)", [5])
    sql, params = KeySplit(1, ("a", 2), ("b", 1)).where(["k", "n"])
    assert sql == "(`k`, `n`) > (%s, %s) AND (`k`, `n`) <= (%s, %s)"
    assert params == ["a", 2, "b", 1]


# -- against MariaDB (no Spark) --------------------------------------------------------------------


def _read_all(db: str, table: str, splits: list[KeySplit], condition: str | None = None) -> list[dict]:
    conn = connect(cdc_settings())
    try:
        schema = read_table_schemas(conn, [(db, table)])[(db, table)]
        position = BinlogPosition("mysql-bin.000001", 4)
        scan = SplitScan(schema, TypeOptions(), "srv", 1, True, position, len(splits), condition=condition)
        rows = []
        for s in splits:
            for batch in read_split(conn, scan, s):
                rows += [e["after"] for e in batch.to_pylist()]
                assert {e["op"] for e in batch.to_pylist()} == {"r"}
    finally:
        conn.close()
    return rows


@pytest.mark.parametrize("kind", ["integer", "composite"])
def test_splits_cover_the_table_once(kind):
    with scratch_database("splits") as (db, conn):
        with conn.cursor() as cur:
            cur.execute(f"USE {db}")
            if kind == "integer":
                cur.execute(f"CREATE TABLE {db}.t (id BIGINT PRIMARY KEY, v VARCHAR(20))")
                cur.execute(f"INSERT INTO {db}.t SELECT seq * 3, CONCAT('v', seq) FROM seq_1_to_5000")
            else:
                cur.execute(f"CREATE TABLE {db}.t (k VARCHAR(10), n INT, v VARCHAR(20), PRIMARY KEY (k, n))")
                cur.execute(f"INSERT INTO {db}.t SELECT CONCAT('k', seq % 37), seq, 'x%y' FROM seq_1_to_5000")
            cur.execute(f"ANALYZE TABLE {db}.t")
        c = connect(cdc_settings())
        try:
            schema = read_table_schemas(c, [(db, "t")])[(db, "t")]
            splits = plan_splits(c, schema, split_rows=700, min_splits=2)
        finally:
            c.close()
        assert 6 <= len(splits) <= 10, splits
        assert splits[0].lo is None and splits[-1].hi is None
        assert all(a.hi == b.lo for a, b in zip(splits, splits[1:])), "contiguous ranges"
        rows = _read_all(db, "t", splits)
        expected, key = source_rows(db, "t")
        assert sorted(rows, key=lambda r: tuple(r[k] for k in key)) == expected, "every row exactly once"
        if kind == "composite":  # an override condition with a '%' next to bound parameters
            filtered = _read_all(db, "t", splits, condition="v LIKE 'x%' AND n <= 100")
            assert len(filtered) == 100


def test_a_table_altered_while_read_is_refused():
    with scratch_database("splitddl") as (db, conn):
        with conn.cursor() as cur:
            cur.execute(f"CREATE TABLE {db}.t (id INT AUTO_INCREMENT PRIMARY KEY, v INT)")
        c = connect(cdc_settings())
        try:
            before = create_statements(c, [(db, "t")])[(db, "t")]
            with conn.cursor() as cur:
                cur.execute(f"INSERT INTO {db}.t (v) VALUES (1), (2)")  # AUTO_INCREMENT moves: not a DDL
            _check_no_ddl(c, (db, "t"), before)
            with conn.cursor() as cur:
                cur.execute(f"ALTER TABLE {db}.t ADD COLUMN w INT")
            with pytest.raises(ConfigurationError, match="altered while its splits were read"):
                _check_no_ddl(c, (db, "t"), before)
        finally:
            c.close()


# -- through Dagster and Spark ---------------------------------------------------------------------


@pytest.mark.spark
def test_split_snapshot_of_inventory_equals_source(inventory_db, storage, spark_lake_options):
    """On a local Spark and on Spark Connect, on a local and an S3 lake."""
    mysql = mysql_resource(
        database_include_list=["inventory"], snapshot_split_reads=True, snapshot_split_rows=3
    )
    metas = materialize(mysql, storage, **spark_lake_options)
    assert len(metas) == 6
    positions = {(m["binlog_file"].value, m["binlog_pos"].value) for m in metas.values()}
    assert len(positions) == 1, "one offset for the whole snapshot"
    tasks = {table: meta["split_tasks"].value for (_, _, table), meta in metas.items()}
    assert tasks["products"] >= 2 and tasks["geom"] == 0, "9 rows: Spark tasks; 3 rows: read by the run"
    for (_, db, table), meta in metas.items():
        assert meta["lock"].value == "none"
        expected, key = source_rows(db, table)
        assert live_state_rows(storage, meta["state_uri"].value, key) == expected, table
        log = read_delta(storage, meta["changelog_uri"].value).to_pylist()
        assert len(log) == len(expected) and {e["op"] for e in log} == {"r"}
        flags = Counter(e["source"]["snapshot"] for e in log)
        assert flags["last"] + flags["last_in_data_collection"] == 1, (table, flags)


class Writer(threading.Thread):
    """Random inserts, updates and deletes on the three tables until stopped."""

    def __init__(self, db: str):
        super().__init__(daemon=True)
        self.db, self.rnd, self.ops, self.error = db, random.Random(11), 0, None
        self.done = threading.Event()

    def run(self) -> None:
        try:
            conn = root_connect()
            with conn.cursor() as cur:
                cur.execute(f"USE `{self.db}`")
                while not self.done.is_set():
                    self.step(cur)
                    self.ops += 1
                    time.sleep(0.001)
            conn.close()
        except BaseException as e:  # noqa: BLE001 - re-raised by finish()
            self.error = e

    def step(self, cur) -> None:
        r, k = self.rnd.random(), self.rnd.randint(1, 45_000)
        if r < 0.3:
            cur.execute("UPDATE big SET v = CONCAT('u', %s), n = n + 1 WHERE id = %s", (self.ops, k))
        elif r < 0.45:
            cur.execute("DELETE FROM big WHERE id = %s", (k,))
        elif r < 0.6:
            cur.execute("REPLACE INTO big VALUES (%s, 'ins', 0)", (k,))
        elif r < 0.75:
            cur.execute("UPDATE comp SET v = v + 1 WHERE k = %s AND n = %s", (f"k{k % 23}", k % 6000))
        elif r < 0.85:
            cur.execute("DELETE FROM comp WHERE k = %s AND n = %s", (f"k{k % 23}", k % 6000))
        elif r < 0.93:
            cur.execute("INSERT INTO nokey VALUES (%s, 'w')", (k % 50,))
        else:
            cur.execute("DELETE FROM nokey WHERE a = %s LIMIT 1", (k % 50,))

    def finish(self) -> int:
        self.done.set()
        self.join(timeout=60)
        if self.error is not None:
            raise self.error
        return self.ops


@pytest.mark.spark
def test_split_snapshot_under_concurrent_writes_converges(local_storage):
    with scratch_database("splitw") as (db, conn):
        with conn.cursor() as cur:
            cur.execute(f"USE {db}")
            cur.execute(f"CREATE TABLE {db}.big (id INT PRIMARY KEY, v VARCHAR(20), n INT)")
            cur.execute(f"INSERT INTO {db}.big SELECT seq, CONCAT('v', seq), 0 FROM seq_1_to_40000")
            cur.execute(f"CREATE TABLE {db}.comp (k VARCHAR(8), n INT, v INT, PRIMARY KEY (k, n))")
            cur.execute(f"INSERT INTO {db}.comp SELECT CONCAT('k', seq % 23), seq, 0 FROM seq_1_to_6000")
            cur.execute(f"CREATE TABLE {db}.nokey (a INT, b VARCHAR(4))")
            cur.execute(f"INSERT INTO {db}.nokey SELECT seq % 50, 'w' FROM seq_1_to_2000")
            cur.execute(f"ANALYZE TABLE {db}.big")
        mysql = capture_resource(db, snapshot_split_reads=True, snapshot_split_rows=2500)
        cdc = SensorDriven(mysql, local_storage.base_uri)
        writer = Writer(db)
        writer.start()
        try:
            time.sleep(0.5)
            cdc.ticks(max_ticks=1, until_caught_up=False)  # the snapshot run, while the writer writes
        finally:
            ops = writer.finish()
        cdc.ticks()  # streaming from the snapshot's offset catches up
        assert ops > 100, "the writer ran during the snapshot"
        for table in ("big", "comp"):
            expected, key = source_rows(db, table)
            lake = live_state_rows(local_storage, local_storage.uri(db, db, table, "state"), key)
            assert lake == expected, f"{table}: lake state differs from the source"
        src, _ = source_table(db, "nokey")
        lake_rows = live_state_rows(local_storage, local_storage.uri(db, db, "nokey", "state"), [])
        assert Counter(tuple(r.values()) for r in lake_rows) == Counter(
            tuple(r.values()) for r in src.to_pylist()
        )
        log = read_delta(local_storage, local_storage.uri(db, db, "big", "changelog")).to_pylist()
        reads = [e for e in log if e["op"] == "r"]
        assert 30_000 < len(reads) <= 45_000
        at = {(e["source"]["file"], e["source"]["pos"]) for e in reads}
        assert len(at) > 1, "each split carries its own consistent-snapshot position"


@pytest.mark.spark
def test_executors_that_cannot_reach_the_source_get_a_clear_error(any_spark, tmp_path):
    """A task's connection error names the executors' needs and the way back (nothing committed),
    on a local Spark and on Spark Connect (its errors arrive as gRPC exceptions)."""
    from dagster_mysql_cdc.engine.split_snapshot import split_frame
    from dagster_mysql_cdc.errors import SourceConnectionError
    from dagster_mysql_cdc.sink.lake import LakeWriter
    from dagster_mysql_cdc.sink.storage import StorageSettings
    from dagster_mysql_cdc.source.schema import ColumnSchema, TableSchema
    from dagster_mysql_cdc.source.split_reader import SplitJob

    schema = TableSchema("nowhere", "t", (ColumnSchema("id", "int", 1, nullable=False),), ("id",))
    scan = SplitScan(schema, TypeOptions(), "srv", 1, True, BinlogPosition("f", 4), 1, values_only=True)
    unreachable = replace(cdc_settings(), port=1, connect_timeout=2)
    writer = LakeWriter(any_spark, StorageSettings(base_uri=str(tmp_path / "lake")), "srv")
    with pytest.raises(SourceConnectionError, match="executor hosts need network access") as err:
        with split_frame(writer, SplitJob(unreachable, scan, ((KeySplit(0, None, None),),))) as frame:
            writer.write_frame_files(frame, str(tmp_path / "stage"), pa.schema([("id", pa.int32())]))
    assert "127.0.0.1:1" in str(err.value) and unreachable.password not in str(err.value)
    assert not list((tmp_path / "stage").glob("*.parquet"))


@pytest.mark.spark
def test_split_tasks_that_cannot_reach_the_source_write_nothing_and_say_why(any_spark, tmp_path):
    """The tasks of a split snapshot read the source and write the table's files themselves: a
    task that cannot connect fails the job with the error that names the executors' needs, and
    the table gets no commit (on a local Spark and on Spark Connect)."""
    from dagster_mysql_cdc.engine.split_snapshot import _TableWrite
    from dagster_mysql_cdc.errors import SourceConnectionError
    from dagster_mysql_cdc.sink.delta import open_table
    from dagster_mysql_cdc.sink.lake import LakeWriter
    from dagster_mysql_cdc.sink.storage import StorageSettings
    from dagster_mysql_cdc.source.schema import ColumnSchema, TableSchema
    from dagster_mysql_cdc.source.split_reader import SplitJob
    from dagster_mysql_cdc.source.types import TableConverter

    schema = TableSchema("nowhere", "t", (ColumnSchema("id", "int", 1, nullable=False),), ("id",))
    pos = BinlogPosition("mysql-bin.000001", 4)
    scan = SplitScan(schema, TypeOptions(), "srv", 1, True, pos, 2)
    unreachable = replace(cdc_settings(), port=1, connect_timeout=2)
    storage = StorageSettings(base_uri=str(tmp_path / "lake"))
    writer = LakeWriter(any_spark, storage, "srv")
    job = SplitJob(unreachable, scan, ((KeySplit(0, None, 10),), (KeySplit(1, 10, None),)))
    table = _TableWrite(
        writer, ("nowhere", "t"), job, TableConverter(schema, TypeOptions(), "pymysql"), pos, 0
    )
    with pytest.raises(SourceConnectionError, match="executor hosts need network access") as err:
        table.by_spark()
    assert "127.0.0.1:1" in str(err.value) and unreachable.password not in str(err.value)
    paths = writer.paths("nowhere", "t")
    for uri in (paths.changelog, paths.state):
        dt = open_table(storage, uri)
        assert dt is None or dt.version() <= 0 and not dt.file_uris(), uri
