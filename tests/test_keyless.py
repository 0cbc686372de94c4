"""A table without a primary key: every column is the key (Debezium message.key.columns over all
columns); inserts, updates and deletes still converge in the current state."""

from collections import Counter

import pytest
from deltalake import DeltaTable
from lake_utils import assert_sql_views_equal_current, live_state_rows, source_table
from sensor_harness import SensorDriven, capture_resource, first_materialization_metadata, scratch_database

from dagster_mysql_cdc.dagster_integration.checks import _lake_live_rows
from dagster_mysql_cdc.sink.read import read_current
from dagster_mysql_cdc.source.types import hashable_value

pytestmark = [pytest.mark.integration, pytest.mark.spark]


def test_keyless_table_streams_and_converges(local_storage):
    with scratch_database("nokey") as (db, conn):
        with conn.cursor() as cur:
            cur.execute(f"CREATE TABLE {db}.log (a INT, b VARCHAR(10), c DECIMAL(5,2) NULL)")
            cur.execute(f"INSERT INTO {db}.log VALUES (1,'x',1.5),(2,'y',NULL),(3,'z',3.0)")
        mysql = capture_resource(db)
        tables = mysql.discover_tables()
        assert tables[0].primary_key == ()
        cdc = SensorDriven(mysql, local_storage.base_uri, tables)
        cdc.ticks()
        with conn.cursor() as cur:
            cur.execute(f"UPDATE {db}.log SET b='yy' WHERE a=2")  # NULL in c: null-safe key match
            cur.execute(f"DELETE FROM {db}.log WHERE a=3")
            cur.execute(f"INSERT INTO {db}.log VALUES (4,'w',4.25)")
        cdc.ticks()
        state = read_current(local_storage, local_storage.uri(db, db, "log", "state")).to_pylist()
        live = sorted(
            (r["a"], r["b"], None if r["c"] is None else str(r["c"])) for r in state if not r["__deleted"]
        )
        with conn.cursor() as cur:
            cur.execute(f"SELECT a, b, c FROM {db}.log")
            src = sorted((a, b, None if c is None else str(c)) for a, b, c in cur.fetchall())
        assert live == src
        log = (
            DeltaTable(local_storage.uri(db, db, "log", "changelog"))
            .to_pyarrow_table(columns=["op"])
            .column("op")
            .to_pylist()
        )
        assert sorted(log) == ["c", "d", "r", "r", "r", "u"]


# -- multiplicity: the state of a keyless table is the source as a multiset ------------------------


def lake_multiset(storage, db: str, table: str) -> Counter:
    """Live rows of the lake state (one per copy: ``__count`` expanded) as a multiset of tuples."""
    rows = live_state_rows(storage, storage.uri(db, db, table, "state"), [])
    return Counter(hashable_value(tuple(r.values())) for r in rows)


def source_multiset(db: str, table: str) -> Counter:
    t, _ = source_table(db, table)
    return Counter(hashable_value(tuple(r.values())) for r in t.to_pylist())


def fill_duplicates(conn, db: str, rows: int, distinct: int) -> None:
    with conn.cursor() as cur:
        cur.execute(f"CREATE TABLE {db}.dup (a INT, b VARCHAR(8) NULL)")
        values = [(i % distinct, None if i % distinct == 0 else f"v{i % 3}") for i in range(rows)]
        cur.executemany(f"INSERT INTO {db}.dup VALUES (%s, %s)", values)


def single_copy_changes(conn, db: str) -> None:
    """Deletes and updates of single copies, moves of some copies, new copies, a value emptied."""
    with conn.cursor() as cur:
        for a in (1, 2, 3, 4, 5):
            cur.execute(f"DELETE FROM {db}.dup WHERE a = %s LIMIT 1", (a,))
        cur.execute(f"UPDATE {db}.dup SET b = 'moved' WHERE a = 6 LIMIT 1")
        cur.execute(f"UPDATE {db}.dup SET a = 7 WHERE a = 8 LIMIT 25")  # into an existing value
        cur.execute(f"DELETE FROM {db}.dup WHERE a = 0 LIMIT 1")  # NULL in b: null-safe match
        cur.execute(f"INSERT INTO {db}.dup VALUES (9, 'v0'), (9, 'v0'), (42, NULL)")
        cur.execute(f"DELETE FROM {db}.dup WHERE a = 10")  # every copy of those values
        cur.execute(f"DELETE FROM {db}.dup WHERE a = 11 LIMIT 1000")


def test_keyless_duplicates_keep_their_multiplicity(local_storage):
    """4,000 rows with 12 distinct values: deleting or updating one copy leaves the others, in
    the state table (a ``__count`` per value) and for the reconciliation checks."""
    with scratch_database("dups") as (db, conn):
        fill_duplicates(conn, db, 4000, 12)
        mysql = capture_resource(db)
        cdc = SensorDriven(mysql, local_storage.base_uri)
        cdc.ticks()
        assert lake_multiset(local_storage, db, "dup") == source_multiset(db, "dup")
        single_copy_changes(conn, db)
        cdc.ticks()
        src = source_multiset(db, "dup")
        assert sum(src.values()) < 4000 and max(src.values()) > 100
        assert lake_multiset(local_storage, db, "dup") == src
        state = read_current(local_storage, local_storage.uri(db, db, "dup", "state")).to_pylist()
        by_value = {(r["a"], r["b"]): r for r in state}
        assert len(by_value) == len(state), "one state row per distinct value"
        assert by_value[(10, "v1")]["__deleted"] and by_value[(10, "v1")]["__count"] == 0
        assert not by_value[(1, "v1")]["__deleted"] and by_value[(1, "v1")]["__count"] == src[(1, "v1")]
        # the reconciliation checks see the multiset too
        lake_rows = Counter(
            _lake_live_rows(local_storage, local_storage.uri(db, db, "dup", "state"), ["a", "b"])
        )
        assert lake_rows == src


def test_keyless_counts_are_exactly_once_when_a_window_is_retried(local_storage, monkeypatch):
    """Counts of a keyless table are not idempotent by themselves; the tail and its compaction
    must count every event exactly once whatever fails where: a window run dies after the table's
    change log, tail and compaction were committed (at the schema history's commit), and its retry
    cuts the window into other record batches (as a read deadline would); compactions whose tail
    cleanup does not happen (the compacted rows stay in the tail and are read again)."""
    from dagster_mysql_cdc.sink import compaction as compaction_module
    from dagster_mysql_cdc.sink.schema_history import SchemaHistory

    with scratch_database("dupretry") as (db, conn):
        fill_duplicates(conn, db, 3000, 6)
        # the table is compacted after every window (state_compact_small_rows), as a small table
        # may be: the second half checks compactions whose tail cleanup did not happen
        cdc = SensorDriven(
            capture_resource(db, stream_batch_rows=150),
            local_storage.base_uri,
            state_compact_small_rows=1_000_000,
        )
        cdc.ticks()
        real_append = SchemaHistory.append
        died = {"n": 0}

        def dying_append(self, *args, **kwargs):
            if not died["n"]:
                died["n"] += 1
                raise RuntimeError("run worker died after the table commits (injected)")
            return real_append(self, *args, **kwargs)

        monkeypatch.setattr(SchemaHistory, "append", dying_append)
        with conn.cursor() as cur:
            for _ in range(6):
                for a in range(6):
                    cur.execute(f"DELETE FROM {db}.dup WHERE a = %s LIMIT 12", (a,))
                    cur.execute(f"UPDATE {db}.dup SET a = a + 100 WHERE a = %s LIMIT 5", (a,))
        first = cdc.ticks(raise_on_error=False, until_caught_up=False, max_ticks=1)
        assert not first.runs[0].success and died["n"] == 1
        cdc.resources["mysql"] = capture_resource(db, stream_batch_rows=1000)
        retry = cdc.ticks()
        assert all(r.success for r in retry.runs)
        assert lake_multiset(local_storage, db, "dup") == source_multiset(db, "dup")

        # compactions leave their consumed tail files in place: they are read again, not recounted
        monkeypatch.setattr(compaction_module, "remove_files", lambda dt, actions: 0)
        for n in (7, 3):
            with conn.cursor() as cur:
                cur.execute(f"DELETE FROM {db}.dup WHERE a = 101 LIMIT {n}")
                cur.execute(f"INSERT INTO {db}.dup SELECT a, b FROM {db}.dup WHERE a = 102 LIMIT {n + 4}")
            cdc.ticks()
            assert lake_multiset(local_storage, db, "dup") == source_multiset(db, "dup")
        tail = DeltaTable(local_storage.uri(db, db, "dup", "state_tail"))
        assert len(tail.file_uris()) >= 2  # compacted rows were left in the tail, and not counted twice
        compacted = read_current(local_storage, local_storage.uri(db, db, "dup", "state"))
        live = [r for r in compacted.to_pylist() if not r["__deleted"]]
        assert sum(r["__count"] for r in live) == sum(source_multiset(db, "dup").values())


def test_live_keyless_rows_never_say_deleted(local_storage):
    """Issue 26, point 9: deleting one of several identical copies leaves a live state row; its
    ``__op`` must not be ``d`` (a reader filtering ``__op <> 'd'`` would lose it). A value whose
    last copy is deleted is a tombstone with ``__op = 'd'``. Both merge paths: a value already in
    the state (copies added up) and a value new in the window (inserted twice, deleted once)."""
    with scratch_database("nokeyop") as (db, conn):
        with conn.cursor() as cur:
            cur.execute(f"CREATE TABLE {db}.dup (a INT, b VARCHAR(8))")
            cur.execute(f"INSERT INTO {db}.dup VALUES (1,'x'),(1,'x'),(1,'x'),(2,'y'),(3,'z'),(3,'z')")
        cdc = SensorDriven(capture_resource(db), local_storage.base_uri)
        cdc.ticks()
        with conn.cursor() as cur:
            cur.execute(f"DELETE FROM {db}.dup WHERE a = 1 LIMIT 1")  # 2 copies left
            cur.execute(f"DELETE FROM {db}.dup WHERE a = 2")  # the only copy
            cur.execute(f"INSERT INTO {db}.dup VALUES (4,'w'),(4,'w')")
            cur.execute(f"DELETE FROM {db}.dup WHERE a = 4 LIMIT 1")  # new value: 1 copy left
        cdc.ticks()
        state = read_current(local_storage, local_storage.uri(db, db, "dup", "state")).to_pylist()
        by_a = {r["a"]: r for r in state}
        assert (by_a[1]["__count"], by_a[1]["__deleted"], by_a[1]["__op"]) == (2, False, "u")
        assert (by_a[4]["__count"], by_a[4]["__deleted"], by_a[4]["__op"]) == (1, False, "u")
        assert (by_a[2]["__count"], by_a[2]["__deleted"], by_a[2]["__op"]) == (0, True, "d")
        assert (by_a[3]["__deleted"], by_a[3]["__op"]) == (False, "r")
        live = [r for r in state if r["__op"] != "d"]
        assert sorted(r["a"] for r in live) == sorted(r["a"] for r in state if not r["__deleted"])
        assert lake_multiset(local_storage, db, "dup") == source_multiset(db, "dup")


def test_keyless_table_with_a_spatial_column_is_captured_and_checked(local_storage):
    """Issue 26, point 1: python-mysql-replication's ``test_geometry`` table (``CREATE TABLE test
    (test GEOMETRY)``, no primary key): its rows are the key, and a geometry value is a struct
    (a dict in Python). The full checks failed with ``unhashable type: 'dict'``, which failed every
    capture run of the server. Snapshot, streaming and every check must pass."""
    with scratch_database("nokeygeo") as (db, conn):
        with conn.cursor() as cur:
            cur.execute(f"CREATE TABLE {db}.test (test GEOMETRY)")
            cur.execute(f"INSERT INTO {db}.test VALUES (ST_GeomFromText('POINT(1 1)'))")
            cur.execute(f"INSERT INTO {db}.test VALUES (ST_GeomFromText('POINT(1 1)', 4326)), (NULL)")
        cdc = SensorDriven(capture_resource(db), local_storage.base_uri)
        first = cdc.ticks()
        with conn.cursor() as cur:
            cur.execute(f"INSERT INTO {db}.test VALUES (ST_GeomFromText('LINESTRING(0 0, 1 1)'))")
            cur.execute(f"UPDATE {db}.test SET test = ST_GeomFromText('POINT(2 2)') WHERE test IS NULL")
            cur.execute(f"DELETE FROM {db}.test WHERE ST_SRID(test) = 4326")
        second = cdc.ticks()
        runs = first.runs + second.runs
        assert runs and all(r.success for r in runs)
        checks = [c for r in runs for c in r.get_asset_check_evaluations()]
        failed = [(c.check_name, c.metadata) for c in checks if not c.passed]
        assert checks and not failed, failed
        assert {c.check_name for c in checks} >= {"row_count_matches_source", "checksum_matches_source"}
        rows = live_state_rows(local_storage, local_storage.uri(db, db, "test", "state"), [])
        assert sorted(r["test"]["srid"] or 0 for r in rows) == [0, 0, 0]  # SRID 0 is null
        assert lake_multiset(local_storage, db, "test") == source_multiset(db, "test")


@pytest.mark.parametrize("compacted", [True, False], ids=["compacted", "tail"])
def test_a_no_data_capture_never_loses_a_row_inserted_after_it(local_storage, compacted):
    """Issue "Nothing lost", point 1: with ``snapshot_mode=no_data`` the lake never saw the rows
    the table had before the capture. ('a', 0) existed; UPDATE it, DELETE it, INSERT ('a', 0)
    again: the change log is u, d, c and the current state has the inserted copy (the update's
    -1 on a copy the lake never had removes nothing: counts never go below zero), also in the
    compacted state table (compacted after every window here) and in the live-row count the
    window reports."""
    with scratch_database("nokeynodata") as (db, conn):
        with conn.cursor() as cur:
            cur.execute(f"CREATE TABLE {db}.t (a VARCHAR(4), b INT)")
            cur.execute(f"INSERT INTO {db}.t VALUES ('a', 0), ('p', 1), ('p', 1)")
        cdc = SensorDriven(
            capture_resource(db, snapshot_mode="no_data"),
            local_storage.base_uri,
            **({"state_compact_small_rows": 1_000_000} if compacted else {}),
        )
        cdc.ticks()
        with conn.cursor() as cur:
            cur.execute(f"UPDATE {db}.t SET b = 1 WHERE a = 'a'")
            cur.execute(f"DELETE FROM {db}.t WHERE a = 'a'")
            cur.execute(f"INSERT INTO {db}.t VALUES ('a', 0)")
            cur.execute(f"DELETE FROM {db}.t WHERE a = 'p' LIMIT 1")  # a copy the lake never had
        first = cdc.ticks()
        assert lake_multiset(local_storage, db, "t") == Counter({("a", 0): 1})
        assert_sql_views_equal_current(local_storage, db, [f"{db}.t"])
        with conn.cursor() as cur:
            cur.execute(f"INSERT INTO {db}.t VALUES ('p', 1)")  # after the compaction of that window
        second = cdc.ticks()
        assert all(r.success for r in first.runs + second.runs)
        log = DeltaTable(local_storage.uri(db, db, "t", "changelog")).to_pyarrow_table(
            columns=["op", "source"]
        )
        ops = sorted((r["source"]["file"], r["source"]["pos"], r["op"]) for r in log.to_pylist())
        assert [op for _, _, op in ops] == ["u", "d", "c", "d", "c"]
        assert lake_multiset(local_storage, db, "t") == Counter({("a", 0): 1, ("p", 1): 1})
        state = DeltaTable(local_storage.uri(db, db, "t", "state")).to_pyarrow_table()
        assert all(c >= 0 for c in state.column("__count").to_pylist()), state.to_pylist()
        counts = [
            m["dagster/row_count"].value
            for runs in (first.runs, second.runs)
            for m in [first_materialization_metadata(runs, "t")]
        ]
        assert counts == [1, 2]
        assert_sql_views_equal_current(local_storage, db, [f"{db}.t"])
