"""Ranged and filtered re-snapshots tombstone what the source no longer has (issue 12).

Rows are deleted behind the binlog's back (``SET sql_log_bin=0`` as root: the binlog carries no
event, like a foreign-key cascade or statement-based DML). A ``pk_ranges`` partition backfill, and
an incremental snapshot with ``additional-conditions`` (signal table), must emit ``op=d`` events
(``source.snapshot=incremental``, header ``dagster_mysql_cdc.reason=absent-from-source``) for the
lake rows of their key ranges, so the lake state converges to the source.
"""

import json

import dagster as dg
import pytest
from deltalake import DeltaTable
from sensor_harness import SensorDriven, capture_resource, scratch_database

from dagster_mysql_cdc import build_pk_range_assets
from dagster_mysql_cdc.sink.read import read_current

pytestmark = [pytest.mark.integration, pytest.mark.spark]


def lake_live(storage, db: str) -> list[tuple]:
    st = read_current(storage, storage.uri(db, db, "t", "state")).to_pylist()
    return sorted((r["id"], r["v"], r["n"]) for r in st if not r["__deleted"])


def source(conn, db: str) -> list[tuple]:
    with conn.cursor() as cur:
        cur.execute(f"SELECT id, v, n FROM {db}.t ORDER BY id")
        return [tuple(r) for r in cur.fetchall()]


def behind_the_binlog(conn, *statements: str) -> None:
    with conn.cursor() as cur:
        cur.execute("SET SESSION sql_log_bin = 0")
        for s in statements:
            cur.execute(s)
        cur.execute("SET SESSION sql_log_bin = 1")


def absent_deletes(storage, db: str) -> list[int]:
    log = (
        DeltaTable(storage.uri(db, db, "t", "changelog"))
        .to_pyarrow_table(columns=["op", "before", "source", "headers"])
        .to_pylist()
    )
    return sorted(
        e["before"]["id"]
        for e in log
        if e["op"] == "d"
        and e["source"]["snapshot"] == "incremental"
        and ("dagster_mysql_cdc.reason", "absent-from-source") in (e["headers"] or [])
    )


def make_table(conn, db: str) -> None:
    with conn.cursor() as cur:
        cur.execute(f"USE {db}")
        cur.execute("CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(20), n INT)")
        cur.execute("INSERT INTO t SELECT seq, CONCAT('v', seq), seq FROM seq_1_to_4000")


def test_range_backfill_tombstones_rows_the_source_lost(local_storage):
    with scratch_database("rngdel") as (db, conn):
        make_table(conn, db)
        # "warn": the window's failed checks (the lake has 5 rows the source lost) only warn, so
        # the range backfill is what tombstones them (with "repair" they queue their own repair,
        # tests/test_checks.py)
        mysql = capture_resource(db, pk_range_rows=1000, binlog_gap_handling="warn")
        mysql.create_signal_table()
        tables = mysql.discover_tables(tables=[f"{db}.t"])
        cdc = SensorDriven(mysql, local_storage.base_uri, tables)
        cdc.ticks()
        behind_the_binlog(conn, f"DELETE FROM {db}.t WHERE id IN (5, 500, 1500, 3500, 3999)")
        with conn.cursor() as cur:  # binlog changes meanwhile: inserted/updated rows stay
            cur.execute(f"INSERT INTO {db}.t VALUES (4001, 'new', 1), (4002, 'new', 2)")
            cur.execute(f"UPDATE {db}.t SET n = -n WHERE id IN (6, 3501)")
        cdc.ticks()
        (ranges,) = build_pk_range_assets(tables, server_name=db)
        deleted = {}
        for key in ("r000000", "r000003"):
            res = dg.materialize(
                [cdc.cdc, ranges],
                resources=cdc.resources,
                instance=cdc.instance,
                selection=[ranges.key],
                partition_key=key,
            )
            md = res.get_asset_materialization_events()[0].event_specific_data.materialization.metadata
            deleted[key] = md["rows_deleted_absent_from_source"].value
        assert deleted == {"r000000": 2, "r000003": 2}
        live = {r[0] for r in lake_live(local_storage, db)}
        assert not live & {5, 500, 3500, 3999} and 1500 in live  # r000001 was not re-snapshotted
        assert absent_deletes(local_storage, db) == [5, 500, 3500, 3999]
        dg.materialize(
            [cdc.cdc, ranges],
            resources=cdc.resources,
            instance=cdc.instance,
            selection=[ranges.key],
            partition_key="r000001",
        )
        cdc.ticks()
        assert lake_live(local_storage, db) == source(conn, db)


@pytest.mark.parametrize("split_reads", [False, True], ids=["chunk_by_chunk", "split_reads"])
def test_filtered_incremental_snapshot_tombstones_rows_the_source_lost(local_storage, split_reads):
    with scratch_database("fltdel") as (db, conn):
        make_table(conn, db)
        mysql = capture_resource(db, incremental_snapshot_chunk_size=40, snapshot_split_reads=split_reads)
        mysql.create_signal_table()
        cdc = SensorDriven(mysql, local_storage.base_uri, mysql.discover_tables(tables=[f"{db}.t"]))
        cdc.ticks()
        behind_the_binlog(
            conn,
            f"DELETE FROM {db}.t WHERE id IN (10, 20, 95, 3000)",  # 3000 is outside the filter
            f"UPDATE {db}.t SET v = 'hidden' WHERE id IN (30, 31)",
        )

        def signal(sid: str, flt: str) -> None:
            data = {
                "data-collections": [f"{db}.t"],
                "type": "incremental",
                "additional-conditions": [{"data-collection": f"{db}.t", "filter": flt}],
            }
            with conn.cursor() as cur:
                cur.execute(
                    f"INSERT INTO {db}.debezium_signal (id, type, data) VALUES (%s, 'execute-snapshot', %s)",
                    (sid, json.dumps(data)),
                )

        signal("repair-1", "n < 100")
        cdc.ticks()
        # the rows of the filter are re-read, every lake row the source lost is deleted (also
        # outside the filter: the chunks' key ranges cover the table), nothing else is touched
        assert lake_live(local_storage, db) == source(conn, db)
        assert absent_deletes(local_storage, db) == [10, 20, 95, 3000]
        # a filter that matches nothing still tombstones what the source lost
        behind_the_binlog(conn, f"DELETE FROM {db}.t WHERE id IN (7, 3333)")
        signal("repair-2", "n = -1")
        cdc.ticks()
        assert lake_live(local_storage, db) == source(conn, db)
        assert absent_deletes(local_storage, db) == [7, 10, 20, 95, 3000, 3333]
        # an unfiltered snapshot (split reads: the staged rows give the source's keys)
        behind_the_binlog(conn, f"DELETE FROM {db}.t WHERE id IN (5, 3999)")
        data = {"data-collections": [f"{db}.t"], "type": "incremental"}
        with conn.cursor() as cur:
            cur.execute(
                f"INSERT INTO {db}.debezium_signal (id, type, data) VALUES ('full-1', 'execute-snapshot', %s)",
                (json.dumps(data),),
            )
        cdc.ticks()
        assert lake_live(local_storage, db) == source(conn, db)
        assert absent_deletes(local_storage, db) == [5, 7, 10, 20, 95, 3000, 3333, 3999]


def test_split_reads_keep_rows_inserted_above_the_maximum_key(local_storage):
    """The last group of an incremental snapshot with split reads reads up to the maximum key found
    at its start; rows inserted above it later (and already in the lake) are the source's, not
    rows it lost: no delete for them."""
    from dagster_mysql_cdc.dagster_integration.cursor import StreamCursor

    with scratch_database("abovemax") as (db, conn):
        make_table(conn, db)
        mysql = capture_resource(
            db,
            incremental_snapshot_chunk_size=200,
            incremental_snapshot_max_chunks_per_run=4,
            snapshot_split_reads=True,
        )
        mysql.create_signal_table()
        cdc = SensorDriven(mysql, local_storage.base_uri, mysql.discover_tables(tables=[f"{db}.t"]))
        cdc.ticks()
        with conn.cursor() as cur:
            cur.execute(
                f"INSERT INTO {db}.debezium_signal (id, type, data) VALUES ('s1', 'execute-snapshot', %s)",
                (json.dumps({"data-collections": [f"{db}.t"]}),),
            )
        for _ in range(10):  # until the first chunk has found the maximum key (4000)
            cdc.ticks(max_ticks=1, until_caught_up=False)
            inc = StreamCursor.parse(cdc.cursor).incremental
            if inc and inc["tables"] and inc["tables"][0].get("max_key"):
                break
        else:
            raise AssertionError(f"no maximum key: {cdc.cursor}")
        with conn.cursor() as cur:
            cur.execute(f"INSERT INTO {db}.t VALUES (5000, 'new', 1), (5001, 'new', 2)")
        cdc.ticks()  # the stream lands the inserts, the snapshot's later groups run, its last one too
        assert lake_live(local_storage, db) == source(conn, db)
        assert (5000, "new", 1) in lake_live(local_storage, db)
        assert absent_deletes(local_storage, db) == []
