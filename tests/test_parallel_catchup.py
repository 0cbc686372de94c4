"""Binlog catch-up that scales out (issue 29, engine/parallel_catchup.py): a large window decoded
by parallel Spark tasks on local Spark (two tests also on Spark Connect), against the real MariaDB.

The oracles: the source itself (the lake's current state equals it row for row), the binlog read
by python-mysql-replication alone (the change logs hold one event per row change it carries), the
single reader over the same window into a copy of the lake (the same change-log events, transaction
records and schema history), and the transaction metadata's own invariants (orders 1..n).
"""

import json
import os
import shutil
from collections import Counter

import pyarrow as pa
import pytest
from conftest import master_position
from deltalake import DeltaTable
from lake_utils import live_state_rows, read_delta, source_rows
from sensor_harness import scratch_database

from dagster_mysql_cdc.engine.initial_snapshot import run_snapshot
from dagster_mysql_cdc.engine.parallel_catchup import SEGMENT_APP_ID
from dagster_mysql_cdc.engine.segments import ParallelOptions
from dagster_mysql_cdc.engine.stream import StreamOptions
from dagster_mysql_cdc.engine.window_result import WindowResult
from dagster_mysql_cdc.engine.window_run import run_window
from dagster_mysql_cdc.sink.lake import LakeWriter
from dagster_mysql_cdc.sink.schema_history import SchemaHistory
from dagster_mysql_cdc.sink.storage import StorageSettings
from dagster_mysql_cdc.source.connection import connect, server_info
from dagster_mysql_cdc.source.filters import TableFilter
from dagster_mysql_cdc.source.snapshot import SnapshotOptions
from dagster_mysql_cdc.source.types import TypeOptions

pytestmark = [pytest.mark.integration, pytest.mark.spark]

SERVER = "par"
SERVER_IDS = tuple(range(7301, 7309))
BIG = (
    "CREATE TABLE {db}.big (id BIGINT NOT NULL PRIMARY KEY, qty INT NOT NULL, name VARCHAR(64) NULL, "
    "price DECIMAL(12,2) NOT NULL, created DATETIME(6) NOT NULL, doc JSON NULL, day DATE NULL)"
)
COMP = "CREATE TABLE {db}.comp (a INT NOT NULL, b VARCHAR(8) NOT NULL, v INT NULL, PRIMARY KEY (a, b))"
BAG = "CREATE TABLE {db}.bag (x INT NULL, y VARCHAR(10) NULL)"
KEYS = {"big": ["id"], "comp": ["a", "b"], "bag": []}


def insert_big(cur, db: str, lo: int, hi: int, extra: bool = False) -> int:
    cols = "id, qty, name, price, created, doc, day" + (", extra" if extra else "")
    cur.execute(
        f"INSERT INTO {db}.big ({cols}) SELECT seq, seq % 1000, IF(seq % 17 = 0, NULL, CONCAT('n-', seq)), "
        "seq / 100 + 0.01, TIMESTAMP'2024-01-01 00:00:00' + INTERVAL seq SECOND + INTERVAL (seq % 999983) "
        "MICROSECOND, IF(seq % 13 = 0, NULL, JSON_OBJECT('k', seq, 't', JSON_ARRAY('a', seq % 7))), "
        "IF(seq % 19 = 0, NULL, DATE'2020-01-01' + INTERVAL (seq % 3000) DAY)"
        + (", IF(seq % 3 = 0, NULL, CONCAT('x', seq))" if extra else "")
        + f" FROM {db}.seq_{lo}_to_{hi}"
    )
    return cur.rowcount


def options(parallel: ParallelOptions | None) -> StreamOptions:
    return StreamOptions(provide_transaction_metadata=True, parallel=parallel)


def parallel(min_bytes: int = 1, tasks: int = 4) -> ParallelOptions:
    return ParallelOptions(min_bytes=min_bytes, server_ids=SERVER_IDS, max_tasks=tasks)


def snapshot_template(spark, db: str, tables: list[str], path: str) -> StorageSettings:
    """An initial snapshot of ``tables`` into a lake at ``path`` (the template of every variant)."""
    storage = StorageSettings(base_uri=path)
    list(
        run_snapshot(
            connect_settings(),
            [(db, t) for t in tables],
            LakeWriter(spark, storage, SERVER),
            type_options=TypeOptions(),
            options=SnapshotOptions(locking_mode="none"),
            server_name=SERVER,
            history=SchemaHistory(storage, SERVER),
        )
    )
    return storage


def connect_settings():
    from conftest import cdc_settings

    return cdc_settings()


def window(spark, storage: StorageSettings, db: str, start, end, opts: StreamOptions, **kw) -> WindowResult:
    settings = connect_settings()
    conn = connect(settings)
    try:
        info = server_info(conn)
    finally:
        conn.close()
    return run_window(
        settings,
        info,
        replica_server_id=7300,
        start=start,
        end=end,
        writer=LakeWriter(spark, storage, SERVER),
        history=SchemaHistory(storage, SERVER),
        table_filter=TableFilter(database_include_list=(db,)),
        type_options=TypeOptions(
            time_precision_mode=kw.pop("time_precision_mode", "adaptive_time_microseconds")
        ),
        options=opts,
        server_name=SERVER,
        **kw,
    )


def copy_lake(template: StorageSettings, path: str) -> StorageSettings:
    shutil.copytree(template.base_uri, path)
    return StorageSettings(base_uri=path)


def changelog(storage: StorageSettings, db: str, table: str) -> pa.Table:
    return read_delta(storage, storage.uri(SERVER, db, table, "changelog"))


def binlog_events(storage: StorageSettings, db: str, table: str) -> list[str]:
    """The table's change-log events of the binlog (not the snapshot's), canonical JSON each,
    without the processing time ``ts_ms``."""
    out = []
    for e in changelog(storage, db, table).to_pylist():
        if e["op"] == "r":
            continue
        e.pop("ts_ms")
        out.append(json.dumps(e, sort_keys=True, default=str))
    return sorted(out)


def binlog_row_counts(start, end) -> Counter:
    """Rows of each table's row events in ``[start, end)``, read by python-mysql-replication alone."""
    from pymysqlreplication import BinLogStreamReader
    from pymysqlreplication.event import QueryEvent, RotateEvent, XidEvent
    from pymysqlreplication.row_event import DeleteRowsEvent, UpdateRowsEvent, WriteRowsEvent

    stream = BinLogStreamReader(
        connection_settings=connect_settings().replication_settings(),
        server_id=7399,
        log_file=start.file,
        log_pos=start.pos,
        resume_stream=True,
        blocking=False,
        only_events=[WriteRowsEvent, UpdateRowsEvent, DeleteRowsEvent, XidEvent, QueryEvent, RotateEvent],
    )
    counts: Counter = Counter()
    file = start.file
    try:
        for ev in stream:
            if isinstance(ev, RotateEvent):
                file = ev.next_binlog
                continue
            if isinstance(ev, (WriteRowsEvent, UpdateRowsEvent, DeleteRowsEvent)):
                counts[(ev.schema, ev.table)] += len(ev.rows)
            elif (int(file.rsplit(".", 1)[1]), ev.packet.log_pos) >= (end.file_seq, end.pos):
                break
    finally:
        stream.close()
    return counts


def change_count(storage: StorageSettings, db: str, table: str) -> int:
    """Row changes in the table's change log: ``c``/``u``/``d`` events, a primary-key update's
    ``d`` + ``c`` pair (same position and row) counted once."""
    events = [e for e in changelog(storage, db, table).to_pylist() if e["op"] in ("c", "u", "d")]
    return len({(e["source"]["file"], e["source"]["pos"], e["source"]["row"]) for e in events})


def assert_matches_source(storage: StorageSettings, db: str, tables: list[str]) -> None:
    for t in tables:
        expected, key = source_rows(db, t)
        got = live_state_rows(storage, storage.uri(SERVER, db, t, "state"), key or list(expected[0]))
        if not key:  # keyless: compare as multisets
            assert sorted(map(repr, got)) == sorted(map(repr, expected)), f"{db}.{t} differs"
        else:
            assert got == expected, f"{db}.{t}: the lake's state differs from the source"


def assert_transaction_orders(storage: StorageSettings, db: str, tables: list[str]) -> int:
    """Every transaction's events carry total_order 1..n and, per table, data_collection_order
    1..m, and its END record counts them. Returns the number of transactions seen."""
    total: dict[str, list[int]] = {}
    per: dict[tuple[str, str], list[int]] = {}
    for t in tables:
        for e in changelog(storage, db, t).to_pylist():
            if e["op"] in ("r", "t"):  # snapshot reads and DDL's TRUNCATE belong to no transaction
                continue
            tx = e["transaction"]
            total.setdefault(tx["id"], []).append(tx["total_order"])
            per.setdefault((tx["id"], f"{db}.{t}"), []).append(tx["data_collection_order"])
    for tid, orders in total.items():
        assert sorted(orders) == list(range(1, len(orders) + 1)), (
            f"transaction {tid}: total orders {sorted(orders)}"
        )
    for (tid, t), orders in per.items():
        assert sorted(orders) == list(range(1, len(orders) + 1)), f"{tid} {t}: orders {sorted(orders)}"
    ends = {
        r["id"]: r
        for r in read_delta(storage, storage.uri(SERVER, "_transactions")).to_pylist()
        if r["status"] == "END"
    }
    for tid, orders in total.items():
        assert ends[tid]["event_count"] == len(orders), tid
    return len(total)


def test_backlog_across_ddl_and_file_rotations_decoded_in_parallel(spark, tmp_path):
    """A backlog crossing ADD COLUMN, a column type change (the change log rewritten to the wider
    type), TRUNCATE of a keyless table, a primary-key update and two binlog file rotations, decoded
    by 4 segments: the lake equals the source row for row, each change log holds exactly the
    binlog's row changes, transaction metadata keeps its orders, and the change logs, transaction
    records and schema history equal the single reader's over the same window."""
    with scratch_database("par") as (db, conn):
        with conn.cursor() as cur:
            for ddl in (BIG, COMP, BAG):
                cur.execute(ddl.format(db=db))
            insert_big(cur, db, 1, 200)
            cur.execute(f"INSERT INTO {db}.comp VALUES (1,'a',1),(2,'b',2)")
            cur.execute(f"INSERT INTO {db}.bag VALUES (1,'x'),(1,'x'),(2,'y')")
        template = snapshot_template(spark, db, ["big", "comp", "bag"], str(tmp_path / "template"))
        start = master_position()
        with conn.cursor() as cur:
            for lo in range(201, 12_001, 1000):
                insert_big(cur, db, lo, lo + 999)
            cur.execute("BEGIN")  # one transaction over three tables
            cur.execute(f"UPDATE {db}.big SET qty = qty + 1 WHERE id <= 700")
            cur.execute(
                f"INSERT INTO {db}.comp SELECT seq, CONCAT('k', seq % 5), seq FROM {db}.seq_10_to_400"
            )
            cur.execute(f"INSERT INTO {db}.bag SELECT seq % 4, 'd' FROM {db}.seq_1_to_60")
            cur.execute("COMMIT")
            cur.execute("FLUSH BINARY LOGS")
            for lo in range(2001, 6001, 1000):
                cur.execute(
                    f"UPDATE {db}.big SET price = price + 1, doc = JSON_SET(COALESCE(doc, '{{}}'), '$.u', id) WHERE id BETWEEN {lo} AND {lo + 999}"
                )
            cur.execute(f"DELETE FROM {db}.big WHERE id BETWEEN 6001 AND 7000")
            cur.execute(f"DELETE FROM {db}.bag WHERE x = 1 LIMIT 1")
            cur.execute(f"ALTER TABLE {db}.big ADD COLUMN extra VARCHAR(20) NULL")
            for lo in range(12_201, 20_201, 1000):
                insert_big(cur, db, lo, lo + 999, extra=True)
            cur.execute(f"UPDATE {db}.big SET extra = 'e' WHERE id % 7 = 0 AND id <= 8000")
            cur.execute("FLUSH BINARY LOGS")
            cur.execute(f"ALTER TABLE {db}.big MODIFY qty BIGINT NOT NULL")
            cur.execute(f"UPDATE {db}.big SET qty = qty + 3000000000 WHERE id BETWEEN 1 AND 3000")
            cur.execute(f"UPDATE {db}.comp SET a = a + 1000 WHERE a < 50")  # key changes: d + c
            cur.execute(f"TRUNCATE TABLE {db}.bag")
            cur.execute(f"INSERT INTO {db}.bag VALUES (5,'z'),(5,'z'),(6,NULL)")
            insert_big(cur, db, 20_201, 24_200, extra=True)
        end = master_position()
        assert end.file_seq == start.file_seq + 2
        par = copy_lake(template, str(tmp_path / "parallel"))
        single = copy_lake(template, str(tmp_path / "single"))
        rp = window(spark, par, db, start, end, options(parallel(tasks=4)))
        rs = window(spark, single, db, start, end, options(None))

        (decision,) = rp.decode
        assert decision["mode"] == "parallel", decision
        segs = decision["segments"]
        assert len(segs) == 4, segs
        files = {s["start"].split(":")[0] for s in segs}
        assert len(files) >= 2, f"the segments start in one binlog file only: {segs}"
        assert rs.decode == []  # the single reader's window: no decision to report (no parallel options)
        # the window's facts are the single reader's
        assert (rp.end, rp.events_read, rp.transactions, rp.ddl_statements) == (
            rs.end,
            rs.events_read,
            rs.transactions,
            rs.ddl_statements,
        )
        assert not rp.failed_tables and not rs.failed_tables
        tables = ["big", "comp", "bag"]
        assert_matches_source(par, db, tables)
        counts = binlog_row_counts(start, end)
        for t in tables:
            assert change_count(par, db, t) == counts[(db, t)], t
            assert binlog_events(par, db, t) == binlog_events(single, db, t), f"{t}: change logs differ"
        bag_ops = Counter(e["op"] for e in changelog(par, db, "bag").to_pylist())
        assert bag_ops["t"] == 1
        n_tx = assert_transaction_orders(par, db, tables)
        assert n_tx > 30
        tx_p = sorted(
            json.dumps(r, sort_keys=True)
            for r in read_delta(par, par.uri(SERVER, "_transactions")).to_pylist()
        )
        tx_s = sorted(
            json.dumps(r, sort_keys=True)
            for r in read_delta(single, single.uri(SERVER, "_transactions")).to_pylist()
        )
        assert tx_p == tx_s
        hist_p = SchemaHistory(par, SERVER).read().drop_columns(["ts_ms"]).to_pylist()
        hist_s = SchemaHistory(single, SERVER).read().drop_columns(["ts_ms"]).to_pylist()
        assert hist_p == hist_s and len(hist_p) == 3 + 3  # the snapshot's CREATEs, ALTER, ALTER, TRUNCATE
        # the change log took the wider type (a rewrite), as with the single reader
        qty = pa.schema(DeltaTable(par.uri(SERVER, db, "big", "changelog")).schema().to_arrow())
        assert qty.field("after").type.field("qty").type == pa.int64()
        # each segment committed with its own identity, in binlog order
        batches = [
            c.get("dagster_mysql_cdc.batch")
            for c in reversed(DeltaTable(par.uri(SERVER, db, "big", "changelog")).history())
            if c.get("dagster_mysql_cdc.batch", "").startswith(SEGMENT_APP_ID)
        ]
        versions = [int(b.rsplit("@", 1)[1]) for b in batches]
        assert len(versions) == 4 and versions == sorted(versions)


def test_windows_the_parallel_path_cannot_keep_in_order_are_read_by_the_run_process(spark, tmp_path):
    """Each reason to read a large window in order, one window each, with the decision and its
    reason reported in ``WindowResult.decode``; the lake stays equal to the source throughout. A
    window below the threshold reports nothing (the steady state costs nothing)."""
    from dagster_mysql_cdc.engine.incremental_source import IncrementalOptions

    with scratch_database("parfb") as (db, conn):
        with conn.cursor() as cur:
            cur.execute(COMP.format(db=db))
            cur.execute(BIG.format(db=db))
            cur.execute(
                f"CREATE TABLE {db}.debezium_signal (id VARCHAR(42) PRIMARY KEY, type VARCHAR(32) NOT NULL, data VARCHAR(2048) NULL)"
            )
            cur.execute(f"INSERT INTO {db}.comp VALUES (1,'a',1),(2,'b',2)")
        storage = snapshot_template(spark, db, ["big", "comp"], str(tmp_path / "lake"))
        inc = IncrementalOptions(signal_table=f"{db}.debezium_signal")
        next_id = iter(range(1000, 10**6, 1000))

        def some_transactions(cur, n: int = 3) -> None:
            for _ in range(n):
                lo = next(next_id)
                insert_big(cur, db, lo, lo + 99)

        def read(par: ParallelOptions, tables=("big", "comp"), **kw) -> WindowResult:
            nonlocal start
            end = master_position()
            r = window(spark, storage, db, start, end, options(par), incremental_options=inc, **kw)
            assert not r.failed_tables
            for _db, t in r.blocking_tables:  # what the resource does next: a blocking snapshot
                snapshot_template(spark, db, [t], storage.base_uri)
            assert_matches_source(storage, db, list(tables))
            start = r.end
            return r

        start = master_position()
        with conn.cursor() as cur:  # below the threshold: the steady state, nothing to report
            some_transactions(cur)
        assert read(parallel(min_bytes=10**9)).decode == []
        with conn.cursor() as cur:  # one transaction cannot be cut
            insert_big(cur, db, 900_001, 903_000)
        (d,) = read(parallel()).decode
        assert d["mode"] == "single" and "one transaction" in d["reason"], d
        with conn.cursor() as cur:  # a signal row: executed in order with the rows around it
            some_transactions(cur)
            cur.execute(
                f"INSERT INTO {db}.debezium_signal VALUES ('log-1', 'log', '{{\"message\": \"at {{}}\"}}')"
            )
            some_transactions(cur)
        r = read(parallel())
        (d,) = r.decode
        assert d["mode"] == "single" and "signal row" in d["reason"], d
        assert any("at " in line for line in r.signal_log), r.signal_log
        with conn.cursor() as cur:  # a DDL changing a captured table's key
            some_transactions(cur)
            cur.execute(f"ALTER TABLE {db}.comp DROP PRIMARY KEY, ADD PRIMARY KEY (a)")
            cur.execute(f"INSERT INTO {db}.comp VALUES (4,'d',4)")
            some_transactions(cur)
        r = read(parallel())
        (d,) = r.decode
        assert d["mode"] == "single" and f"key of {db}.comp" in d["reason"], d
        assert r.blocking_tables == [(db, "comp")]  # a new key: the table is snapshotted again
        with conn.cursor() as cur:  # statement-based DML (a gap) and a new table: both fine in parallel
            some_transactions(cur)
            cur.execute("SET SESSION binlog_format = 'STATEMENT'")
            cur.execute(f"UPDATE {db}.comp SET v = v + 1 WHERE a = 1")
            cur.execute("SET SESSION binlog_format = 'ROW'")
            cur.execute(f"CREATE TABLE {db}.fresh (id INT PRIMARY KEY, s VARCHAR(5))")
            cur.execute(f"INSERT INTO {db}.fresh VALUES (1, 'one'), (2, 'two')")
            some_transactions(cur)
        r = read(parallel(tasks=2), tables=["big", "fresh"])  # comp: the gap, repaired by the next window
        (d,) = r.decode
        assert d["mode"] == "parallel", d
        assert [(g.kind, g.table) for g in r.gaps] == [("statement_dml", f"{db}.comp")]
        assert r.incremental_state is not None  # the gap's repair is queued, as the single reader does
        assert live_state_rows(storage, storage.uri(SERVER, db, "fresh", "state"), ["id"]) == [
            {"id": 1, "s": "one"},
            {"id": 2, "s": "two"},
        ]


def test_catch_up_and_running_incremental_snapshots_stay_in_order(any_spark, tmp_path):
    """The decisions taken before any read: a stopped table's catch-up and a running incremental
    snapshot keep the single reader (``parallel_window`` returns no result and says why)."""
    from dagster_mysql_cdc.engine.incremental import IncrementalState, TableProgress
    from dagster_mysql_cdc.engine.parallel_catchup import parallel_window

    spark = any_spark  # a local Spark, then Spark Connect

    with scratch_database("parfb2") as (db, conn):
        with conn.cursor() as cur:
            cur.execute(BIG.format(db=db))
        storage = snapshot_template(spark, db, ["big"], str(tmp_path / "lake"))
        start = master_position()
        with conn.cursor() as cur:
            insert_big(cur, db, 1, 500)
            insert_big(cur, db, 501, 1000)
        end = master_position()
        settings = connect_settings()
        c = connect(settings)
        info = server_info(c)
        c.close()
        common = dict(
            replica_server_id=7300,
            start=start,
            end=end,
            writer=LakeWriter(spark, storage, SERVER),
            history=SchemaHistory(storage, SERVER),
            table_filter=TableFilter(database_include_list=(db,)),
            type_options=TypeOptions(),
            options=options(parallel()),
            server_name=SERVER,
        )
        running = IncrementalState("s1", tables=[TableProgress(f"{db}.big")])
        for kw, why in (
            ({"catch_up": True}, "stopped tables"),
            ({"incremental": running}, "incremental snapshot is running"),
        ):
            result, (d,) = parallel_window(settings, info, **common, **kw)
            assert result is None and d["mode"] == "single" and why in d["reason"], d
        paused = IncrementalState("s1", tables=[TableProgress(f"{db}.big")], paused=True)
        result, (d,) = parallel_window(settings, info, **common, incremental=paused)
        assert result is not None and d["mode"] == "parallel"  # a paused snapshot is carried through
        assert result.incremental_state == paused.to_dict()
        assert_matches_source(storage, db, ["big"])


TIME_TABLE = "CREATE TABLE {db}.time_table (id INT NOT NULL, A TIME(1) NULL, PRIMARY KEY(id))"


def test_a_table_that_cannot_be_written_stops_alone_in_a_parallel_window(any_spark, tmp_path):
    """A value that cannot be converted in the window's last segment: that table stops alone
    (nothing of its window committed by any segment, ``since`` = the window start), the others
    commit; its catch-up from ``since`` (failure mode ``warn``) then brings every good event
    exactly once."""
    from dagster_mysql_cdc.engine.isolation import catch_up  # noqa: F401  (the resource's catch-up path)

    spark = any_spark  # a local Spark, then Spark Connect

    with scratch_database("pariso") as (db, conn):
        with conn.cursor() as cur:
            cur.execute(TIME_TABLE.format(db=db))
            cur.execute(BIG.format(db=db))
            cur.execute(f"INSERT INTO {db}.time_table VALUES (1, '01:00:00')")
        storage = snapshot_template(spark, db, ["big", "time_table"], str(tmp_path / "lake"))
        start = master_position()
        with conn.cursor() as cur:
            for i, lo in enumerate(range(1, 6001, 1000)):
                insert_big(cur, db, lo, lo + 999)
                cur.execute(f"INSERT INTO {db}.time_table VALUES ({10 + i}, '02:00:0{i}')")
            cur.execute(
                f"INSERT INTO {db}.time_table VALUES (99, '-23:45:56.7')"
            )  # connect mode: no time of day
        end = master_position()
        r = window(spark, storage, db, start, end, options(parallel(tasks=3)), time_precision_mode="connect")
        assert r.decode[0]["mode"] == "parallel" and len(r.decode[0]["segments"]) == 3
        assert list(r.failed_tables) == [f"{db}.time_table"]
        failed = r.failed_tables[f"{db}.time_table"]
        assert "ValueConversionError" in failed["error"] and failed["since"] == start.to_dict()
        assert [
            x["id"] for x in live_state_rows(storage, storage.uri(SERVER, db, "time_table", "state"), ["id"])
        ] == [1]
        assert change_count(storage, db, "time_table") == 0  # nothing of the window, from any segment
        assert change_count(storage, db, "big") == 6000
        # the catch-up (the resource's, engine/isolation.py): the stopped table from `since`, in order
        settings = connect_settings()
        c = connect(settings)
        info = server_info(c)
        c.close()
        run_window(
            settings,
            info,
            replica_server_id=7300,
            start=start,
            end=r.end,
            writer=LakeWriter(spark, storage, SERVER),
            history=SchemaHistory(storage, SERVER),
            table_filter=TableFilter(database_include_list=(db,)).restricted_to([(db, "time_table")]),
            type_options=TypeOptions(time_precision_mode="connect"),
            options=StreamOptions(event_processing_failure_handling_mode="warn", parallel=parallel()),
            server_name=SERVER,
            catch_up=True,
        )
        ids = [
            x["id"] for x in live_state_rows(storage, storage.uri(SERVER, db, "time_table", "state"), ["id"])
        ]
        assert ids == [1, 10, 11, 12, 13, 14, 15]
        assert change_count(storage, db, "time_table") == 6


def _truncate_log(table_uri: str, keep: int) -> None:
    """Forget the Delta commits after version ``keep`` (a writer that died before making them;
    their data files stay behind, uncommitted, as they would)."""
    from dagster_mysql_cdc.sink.checkpoints import CHECKPOINTS

    assert CHECKPOINTS.drain(60)  # (a checkpoint written meanwhile would name a forgotten version)
    log_dir = os.path.join(table_uri, "_delta_log")
    for name in os.listdir(log_dir):
        stem = name.split(".", 1)[0]
        if stem.isdigit() and int(stem) > keep:
            os.remove(os.path.join(log_dir, name))
    last = os.path.join(log_dir, "_last_checkpoint")
    if os.path.exists(last) and json.load(open(last))["version"] > keep:
        os.remove(last)


def _delta_tables(root: str) -> list[str]:
    return sorted(d for d, subdirs, _ in os.walk(root) if "_delta_log" in subdirs)


def test_a_retried_window_skips_the_segments_already_committed(spark, tmp_path):
    """A run that died after its first segment's commits (emulated: the lake's later commits
    removed, their files left behind uncommitted) is retried: the first segment is skipped, the
    others are committed once, and the lake equals the one of an uninterrupted run."""
    with scratch_database("parre") as (db, conn):
        with conn.cursor() as cur:
            cur.execute(BIG.format(db=db))
            cur.execute(BAG.format(db=db))
            cur.execute(f"INSERT INTO {db}.bag VALUES (1,'x'),(1,'x')")
        template = snapshot_template(spark, db, ["big", "bag"], str(tmp_path / "template"))
        start = master_position()
        with conn.cursor() as cur:
            for lo in range(1, 8001, 1000):
                insert_big(cur, db, lo, lo + 999)
                cur.execute(f"INSERT INTO {db}.bag VALUES (1,'x'),(2,'y')")
                cur.execute(f"DELETE FROM {db}.bag WHERE x = 1 LIMIT 1")
            cur.execute(f"UPDATE {db}.big SET qty = qty + 1 WHERE id % 3 = 0")
        end = master_position()
        whole = copy_lake(template, str(tmp_path / "whole"))
        died = copy_lake(template, str(tmp_path / "died"))
        before = {t: DeltaTable(t).version() for t in _delta_tables(died.base_uri)}
        r1 = window(spark, died, db, start, end, options(parallel(tasks=3)))
        first = r1.decode[0]["segments"][0]
        assert len(r1.decode[0]["segments"]) == 3
        # the run dies right after the first segment's commits (history and transactions come last)
        for uri in _delta_tables(died.base_uri):
            dt = DeltaTable(uri)
            keep = before.get(uri, -1)
            seg0 = [
                c["version"]
                for c in dt.history()
                if c.get("dagster_mysql_cdc.batch") == f"{SEGMENT_APP_ID}@{_version(first)}"
            ]
            if seg0:
                keep = max(seg0)
            _truncate_log(uri, keep)
        assert 0 < change_count(died, db, "big") < 8000 + 2666
        r2 = window(spark, died, db, start, end, options(parallel(tasks=3)))
        window(spark, whole, db, start, end, options(parallel(tasks=3)))
        assert r2.decode[0]["mode"] == "parallel"
        for t in ("big", "bag"):
            assert binlog_events(died, db, t) == binlog_events(whole, db, t), t
            seg_commits = {
                lake.base_uri: [
                    c["dagster_mysql_cdc.batch"]
                    for c in DeltaTable(lake.uri(SERVER, db, t, "changelog")).history()
                    if c.get("dagster_mysql_cdc.batch", "").startswith(SEGMENT_APP_ID)
                ]
                for lake in (died, whole)
            }
            got, want = seg_commits[died.base_uri], seg_commits[whole.base_uri]
            assert sorted(got) == sorted(want) and len(set(got)) == len(got) >= 2, seg_commits
        assert_matches_source(died, db, ["big", "bag"])
        assert sorted(map(repr, read_delta(died, died.uri(SERVER, "_transactions")).to_pylist())) == sorted(
            map(repr, read_delta(whole, whole.uri(SERVER, "_transactions")).to_pylist())
        )


def _version(segment: dict) -> int:
    """The Delta ``txn`` version of a segment (its start's :meth:`BinlogPosition.as_version`)."""
    from dagster_mysql_cdc.events import BinlogPosition

    pos, _, _ = segment["start"].partition(" ")
    f, _, p = pos.rpartition(":")
    return BinlogPosition(f, int(p)).as_version()
