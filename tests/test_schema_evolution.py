"""Every DDL MySQL accepts keeps the capture running (issue 31): a seeded schema-evolution run.

Tables of every key shape (int, composite, varchar, none) and many types go through DDL of every
kind (type changes that widen, narrow and cross families; ENUM/SET members; columns added with
and without values for existing rows; a keyless table gaining a key; a key dropped and added
again; CREATE OR REPLACE; DROP + CREATE with another key; CHANGE and RENAME in one window; a
table swap; TRUNCATE; CONVERT TO CHARACTER SET; a column renamed and one dropped; temporal
precision up and down, TIMESTAMP digits), several per window, interleaved with random
DML, with a cold restart midway, through the public API (``discover_tables``,
``mysql_cdc_assets``, ``build_mysql_cdc_sensor``, ``run_sensor_ticks``) on the real MariaDB and
local Spark. At the end:

- after every window, the lake state equals the source for every table (keyless tables as
  multisets; every column's values, converted to the lake's column types), no key is live twice,
  the columns the source no longer has are null, and every temporal value of the change log and
  the state is in the unit its column declares;
- no run failed a table check on those equal lakes (only *pending* WARNs while a repair of what a
  DDL changed without row events was queued), and every check's latest result passes;
- tables that no longer exist have no live rows;
- the schema history replayed to the committed position equals ``information_schema``;
- each change log holds as many row events per operation as an independent decode of the binlog
  (``mariadb-binlog --verbose`` against the server) has.
"""

from __future__ import annotations

import os
import random
import re
import subprocess
from collections import Counter

import dagster as dg
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from conftest import MYSQL_HOST, MYSQL_PORT, ROOT_PASSWORD, master_position
from deltalake import DeltaTable
from lake_utils import active_spark, assert_sql_views_equal_current
from sensor_harness import SensorDriven, capture_resource, scratch_database
from test_ddl_mariadb import assert_same_schema

from dagster_mysql_cdc import captured_tables
from dagster_mysql_cdc.sink.evolution import conform_table
from dagster_mysql_cdc.sink.layout import LakeLayout
from dagster_mysql_cdc.sink.read import read_current
from dagster_mysql_cdc.sink.schema_history import SchemaHistory
from dagster_mysql_cdc.sink.state_rows import live_multiset
from dagster_mysql_cdc.sink.storage import StorageSettings
from dagster_mysql_cdc.source.catalog import list_tables, read_table_schemas
from dagster_mysql_cdc.source.signals import create_signal_table
from dagster_mysql_cdc.source.types import TableConverter, TypeOptions

pytestmark = [pytest.mark.integration, pytest.mark.spark]

SEED = int(os.environ.get("CDC_EVOLUTION_SEED", "31"))

TABLES = [
    "CREATE TABLE t_int (id INT PRIMARY KEY, qty INT, price DECIMAL(8,2), name VARCHAR(10), f FLOAT, "
    "dt DATETIME, e ENUM('a','b'), s SET('x','y'), j JSON, b BLOB, tm TIME, y YEAR, bt BIT(3))",
    "CREATE TABLE t_comp (a INT, b VARCHAR(8), v INT, PRIMARY KEY (a, b))",
    "CREATE TABLE t_str (k VARCHAR(20) PRIMARY KEY, v TEXT) DEFAULT CHARSET=latin1",
    "CREATE TABLE t_nokey (a INT, b VARCHAR(10))",
    "CREATE TABLE t_gen (id INT PRIMARY KEY, a INT, g INT AS (a * 2) VIRTUAL)",
    "CREATE TABLE `t sp` (id INT PRIMARY KEY, `col``x` INT)",
    "CREATE TABLE t_swap1 (id INT PRIMARY KEY, v INT)",
    "CREATE TABLE t_swap2 (id INT PRIMARY KEY, v INT)",
    "CREATE TABLE t_replace (id INT PRIMARY KEY, v INT)",
    "CREATE TABLE t_dropme (id INT PRIMARY KEY, v INT)",
]

#: DDL per window (several per window); a cold restart after window 4.
WINDOWS = [
    [
        "ALTER TABLE t_int MODIFY qty BIGINT",
        "ALTER TABLE t_int MODIFY f DOUBLE, MODIFY price DECIMAL(12,4)",
        "ALTER TABLE `t sp` MODIFY `col``x` BIGINT",
    ],
    [
        "ALTER TABLE t_int MODIFY name VARCHAR(200), MODIFY dt DATETIME(6)",
        "ALTER TABLE t_int MODIFY e ENUM('b','c','a')",
        "ALTER TABLE t_nokey ADD c INT",
    ],
    [
        "ALTER TABLE t_comp DROP PRIMARY KEY",
        "ALTER TABLE t_str ADD z INT NOT NULL DEFAULT 5",
        "ALTER TABLE t_int MODIFY qty INT",  # narrowing: the server rewrites values -> repair
        "ALTER TABLE t_int MODIFY dt DATETIME(3)",  # us -> ms: the lake keeps us, values converted up
    ],
    [
        "ALTER IGNORE TABLE t_comp ADD PRIMARY KEY (a, b)",  # drops duplicates: no row events
        "ALTER TABLE t_nokey ADD id INT AUTO_INCREMENT PRIMARY KEY",
        "ALTER TABLE t_int MODIFY name TEXT",
    ],
    [
        "CREATE OR REPLACE TABLE t_replace (id INT PRIMARY KEY, w VARCHAR(5))",
        "DROP TABLE t_dropme",
        "CREATE TABLE t_dropme (k VARCHAR(5) PRIMARY KEY, v INT)",
        "ALTER TABLE t_comp RENAME COLUMN v TO v2",  # values move without row events -> repair
        "ALTER TABLE t_str ADD ts TIMESTAMP NULL",
    ],
    [
        "ALTER TABLE t_int CHANGE tm tm2 TIME(3)",
        "RENAME TABLE t_gen TO t_gen2",
        "RENAME TABLE t_swap1 TO t_tmp, t_swap2 TO t_swap1, t_tmp TO t_swap2",
    ],
    [
        "ALTER TABLE t_int MODIFY s SET('x','y','z'), MODIFY bt BIT(8)",
        "TRUNCATE TABLE t_str",
        "ALTER TABLE t_int MODIFY qty VARCHAR(30)",  # across families -> repair
    ],
    [
        "ALTER TABLE t_str CONVERT TO CHARACTER SET utf8mb4",
        "ALTER TABLE t_nokey DROP COLUMN c",
        "ALTER TABLE t_comp ADD w DOUBLE",
        "ALTER TABLE t_str MODIFY ts TIMESTAMP(6) NULL",  # ZonedTimestamp text gets 6 digits -> repair
        "ALTER TABLE t_int DROP COLUMN f",  # the state keeps no dropped value -> repair
    ],
]


class Writer:
    """Random DML on the tables that exist, driven by a seeded random generator."""

    def __init__(self, conn, db: str, rng: random.Random):
        self.conn, self.db, self.rng = conn, db, rng
        self.next_id = 1000

    def run(self, sql: str, args=()) -> None:
        with self.conn.cursor() as cur:
            cur.execute(f"USE `{self.db}`")
            cur.execute(sql, args)

    def columns(self, table: str) -> list[tuple[str, str, str]]:
        with self.conn.cursor() as cur:
            cur.execute(
                "SELECT COLUMN_NAME, DATA_TYPE, EXTRA FROM information_schema.COLUMNS WHERE TABLE_SCHEMA=%s "
                "AND TABLE_NAME=%s ORDER BY ORDINAL_POSITION",
                (self.db, table),
            )
            return [(n, t, x or "") for n, t, x in cur.fetchall()]

    def tables(self) -> list[str]:
        with self.conn.cursor() as cur:
            cur.execute(
                "SELECT TABLE_NAME FROM information_schema.TABLES WHERE TABLE_SCHEMA=%s AND TABLE_TYPE='BASE TABLE'",
                (self.db,),
            )
            return sorted(n for (n,) in cur.fetchall() if n != "debezium_signal")

    def value(self, data_type: str):
        r = self.rng
        return {
            "int": r.randint(-1000, 1000),
            "bigint": r.randint(-(2 * 10**9), 2 * 10**9),  # fits INT: the table narrows it later
            "tinyint": r.randint(-100, 100),
            "decimal": f"{r.randint(-9999, 9999)}.{r.randint(0, 99):02d}",
            "float": round(r.uniform(-100, 100), 2),
            "double": round(r.uniform(-1000, 1000), 3),
            "varchar": r.choice(["x", "ab,c", "Ünï", "q'uote", ""]) + str(r.randint(0, 99)),
            "char": r.choice(["a", "bb"]),
            "text": r.choice(["long text ", "t"]) * r.randint(1, 3),
            "mediumtext": "m" * r.randint(1, 5),
            "longtext": f'{{"k": {r.randint(0, 9)}}}',
            "datetime": f"2024-0{r.randint(1, 9)}-1{r.randint(0, 9)} 1{r.randint(0, 9)}:0{r.randint(0, 9)}:00",
            "timestamp": f"2024-0{r.randint(1, 9)}-1{r.randint(0, 9)} 0{r.randint(0, 9)}:{r.randint(10, 59)}:01.5",
            "enum": r.choice(["a", "b"]),
            "set": r.choice(["x", "y", "x,y", ""]),
            "blob": bytes(r.randint(0, 255) for _ in range(3)),
            "time": f"{r.randint(-30, 30)}:{r.randint(10, 59)}:0{r.randint(0, 9)}",
            "year": r.randint(1990, 2030),
            "bit": r.randint(0, 7),
        }.get(data_type, r.randint(0, 9))

    def step(self, n: int) -> None:
        for _ in range(n):
            table = self.rng.choice(self.tables())
            cols = self.columns(table)
            writable = [
                (c, t) for c, t, x in cols if "GENERATED" not in x.upper() and "auto_increment" not in x
            ]
            keyed = self._key(table)
            action = self.rng.random()
            names = ", ".join(f"`{c.replace('`', '``')}`" for c, _ in writable)
            marks = ", ".join(["%s"] * len(writable))
            if action < 0.55 or not keyed:
                vals = [self._key_value(t) if c in keyed else self.value(t) for c, t in writable]
                self.run(f"INSERT IGNORE INTO `{table}` ({names}) VALUES ({marks})", vals)
                if not keyed and self.rng.random() < 0.3:  # keyless: duplicate rows and single-copy deletes
                    self.run(f"INSERT IGNORE INTO `{table}` ({names}) VALUES ({marks})", vals)
                    self.run(f"DELETE FROM `{table}` LIMIT 1")
            elif action < 0.85:
                c, t = self.rng.choice([x for x in writable if x[0] not in keyed] or writable)
                if c in keyed and self.rng.random() < 0.5:
                    self.run(
                        f"UPDATE IGNORE `{table}` SET `{c.replace('`', '``')}` = %s ORDER BY RAND({self.rng.randint(0, 9999)}) LIMIT 1",
                        (self._key_value(t),),
                    )  # a key change: d + c in the change log
                else:
                    self.run(
                        f"UPDATE IGNORE `{table}` SET `{c.replace('`', '``')}` = %s ORDER BY RAND({self.rng.randint(0, 9999)}) LIMIT 2",
                        (self.value(t),),
                    )
            else:
                self.run(f"DELETE FROM `{table}` ORDER BY RAND({self.rng.randint(0, 9999)}) LIMIT 1")

    def _key(self, table: str) -> list[str]:
        with self.conn.cursor() as cur:
            cur.execute(
                "SELECT COLUMN_NAME FROM information_schema.KEY_COLUMN_USAGE WHERE TABLE_SCHEMA=%s AND "
                "TABLE_NAME=%s AND CONSTRAINT_NAME='PRIMARY'",
                (self.db, table),
            )
            return [n for (n,) in cur.fetchall()]

    def _key_value(self, data_type: str):
        self.next_id += 1
        if data_type in ("varchar", "char"):
            return f"k{self.next_id}"[:5]
        return self.next_id


def lake_state(storage: StorageSettings, server: str, db: str, table: str) -> pa.Table | None:
    """The table's current state (compacted state + tail), ``None`` when it has neither."""
    return read_current(storage, LakeLayout(storage, server).table(db, table))


def assert_lake_equals_source(storage, server, db, table, conn, options: TypeOptions | None = None) -> None:
    """The table's current state equals the source: every source column's values (converted to
    the lake's column types: a column keeps a supertype after a type change), as a multiset of
    rows, no key live twice, and the lake's columns the source no longer has (dropped, renamed)
    null on every live row."""
    state = lake_state(storage, server, db, table)
    schema = read_table_schemas(conn, [(db, table)])[(db, table)]
    conv = TableConverter(schema, options or TypeOptions(), "pymysql")
    with conn.cursor() as cur:
        cur.execute(f"SELECT * FROM `{db}`.`{table.replace('`', '``')}`")
        source = pa.Table.from_batches([conv.to_record_batch(list(cur.fetchall()))])
    if state is None:
        assert source.num_rows == 0, f"{table}: {source.num_rows} source rows, no lake table"
        return
    live = live_multiset(state)
    common = [n for n in source.column_names if n in live.column_names]
    assert common == source.column_names, (
        f"{table}: lake lacks columns {set(source.column_names) - set(common)}"
    )
    lake_schema = pa.schema([state.schema.field(n) for n in common])
    try:
        src = conform_table(source, lake_schema)  # the source's values in the lake's column types
    except ValueError as e:
        pytest.fail(f"{db}.{table}: the lake's column types do not hold the source's values: {e}")
    want = Counter(tuple(r.values()) for r in src.to_pylist())
    got = Counter(tuple(r.values()) for r in live.select(common).to_pylist())
    assert got == want, (
        f"{db}.{table}: lake {sorted(got.items())[:5]} ... != source {sorted(want.items())[:5]}"
    )
    if schema.primary_key:
        keys = Counter(tuple(r.values()) for r in live.select(list(schema.primary_key)).to_pylist())
        dup = [k for k, n in keys.items() if n > 1]
        assert not dup, f"{table}: keys live twice: {dup[:5]}"
    gone = [n for n in live.column_names if n not in source.column_names]
    for n in gone:  # a column the source no longer has holds no value on any live row
        assert live.column(n).null_count == live.num_rows, (
            f"{db}.{table}: column {n} (not in the source) holds {live.num_rows - live.column(n).null_count} values"
        )


#: Values of each temporal unit the tests write (years 2000-2100; times of at least 8 minutes and
#: at most 838 hours): a value stored in another unit than its column declares falls outside.
_UNIT_RANGE = {
    "datetime_ms": (946_684_800_000, 4_102_444_800_000),
    "datetime_us": (946_684_800_000_000, 4_102_444_800_000_000),
    "time_us": (500_000_000, 838 * 3_600_000_000),
    "time_ms": (500_000, 36 * 3_600_000),  # connect: a time of day
}


def assert_one_unit(storage, server, db, table) -> int:
    """Every temporal value of the table's change log (``before`` and ``after`` of every event)
    and current state is in the unit its lake column declares (``debezium.name``): ms for
    ``Timestamp``, us for ``MicroTimestamp``/``MicroTime``, ms for Kafka Connect ``Time``.
    Returns how many values were checked."""
    from dagster_mysql_cdc.sink.evolution import category

    uri = LakeLayout(storage, server).table(db, table).changelog
    opts = storage.delta_storage_options()
    columns: list[tuple[str, pa.Field, pa.ChunkedArray | pa.Array]] = []
    if DeltaTable.is_deltatable(uri, storage_options=opts):
        log = DeltaTable(uri, storage_options=opts).to_pyarrow_table(columns=["before", "after"])
        for image in ("before", "after"):
            col = log.column(image).combine_chunks()
            for f in log.schema.field(image).type:
                columns.append((f"change log {image}.{f.name}", f, pc.struct_field(col, f.name)))
    state = lake_state(storage, server, db, table)
    if state is not None:
        columns += [(f"state {f.name}", f, state.column(f.name)) for f in state.schema]
    checked = 0
    for where, f, values in columns:
        bounds = _UNIT_RANGE.get(category(f))
        if bounds is None:
            continue
        lo, hi = bounds
        vals = [abs(v) for v in values.to_pylist() if v is not None]
        bad = [v for v in vals if not lo <= v <= hi]
        assert not bad, (
            f"{db}.{table} {where} ({category(f)}): {len(bad)} of {len(vals)} values in another unit: {bad[:3]}"
        )
        checked += len(vals)
    return checked


def assert_no_check_cried_wolf(cdc: SensorDriven, log, existing: set[str], where: str) -> None:
    """Issue "Checks that never cry wolf": the runs of ``log`` (after which each lake equals its
    source) failed no table check, except *pending* ones (WARN: a repair of what a DDL changed
    without row events was queued, the lake was compared once it completed), and the latest
    result of every check of the tables that exist (``existing``) passed."""
    from dagster_mysql_cdc.dagster_integration.heartbeat import latest_check_result

    wolves = [
        (e.asset_key.path[-1], e.check_name, {k: getattr(v, "value", v) for k, v in e.metadata.items()})
        for r in log.runs
        for e in r.get_asset_check_evaluations()
        if e.asset_key.path[-1] != "binlog"
        and not e.passed
        and (e.severity == dg.AssetCheckSeverity.ERROR or "pending" not in e.metadata)
    ]
    assert not wolves, f"{where}: {wolves}"
    for ck in cdc.cdc.check_keys:
        if ck.asset_key.path[-1] in existing:
            rec = latest_check_result(cdc.instance, ck)
            assert rec is not None and rec.evaluation.passed, (where, ck, rec and rec.evaluation.metadata)


def binlog_row_counts(db: str, start, end) -> Counter:
    """``(table, op)`` -> rows of the binlog between two positions, decoded by mariadb-binlog."""
    out = Counter()
    files = [start.file] if start.file == end.file else [start.file, end.file]
    args = [
        "mariadb-binlog",
        "--read-from-remote-server",
        f"--host={MYSQL_HOST}",
        f"--port={MYSQL_PORT}",
        "--user=root",
        f"--password={ROOT_PASSWORD}",
        "--verbose",
        f"--start-position={start.pos}",
        f"--stop-position={end.pos}",
        *files,
    ]
    if len(files) > 1:  # positions apply to the first/last file
        args.insert(-2, "--to-last-log")
    raw = subprocess.run(args, capture_output=True, check=True).stdout
    text = raw.decode("utf-8", errors="replace")  # row values may be binary
    pat = re.compile(r"^### (INSERT INTO|UPDATE|DELETE FROM) `([^`]*)`\.`((?:[^`]|``)*)`", re.M)
    for verb, d, t in pat.findall(text):
        if d == db:
            out[(t.replace("``", "`"), {"INSERT INTO": "c", "UPDATE": "u", "DELETE FROM": "d"}[verb])] += 1
    return out


def changelog_row_counts(storage, server, db, tables) -> Counter:
    """The same counts from the lake's change logs (a key-changing update is a d + c pair)."""
    out = Counter()
    for t in tables:
        uri = LakeLayout(storage, server).table(db, t).changelog
        if not DeltaTable.is_deltatable(uri, storage_options=storage.delta_storage_options()):
            continue
        log = DeltaTable(uri, storage_options=storage.delta_storage_options()).to_pyarrow_table(
            columns=["op", "source", "headers"]
        )
        streamed = log.filter(pc.equal(pc.struct_field(log.column("source"), "snapshot"), "false"))
        for r in streamed.select(["op", "headers"]).to_pylist():
            headers = dict(r["headers"] or [])
            if r["op"] == "u" or (r["op"] == "d" and "__debezium.newkey" in headers):
                out[(t, "u")] += 1
            elif r["op"] == "c" and "__debezium.oldkey" not in headers:
                out[(t, "c")] += 1
            elif r["op"] == "d" and "__debezium.newkey" not in headers:
                out[(t, "d")] += 1
    return out


def test_seeded_schema_evolution(tmp_path):
    rng = random.Random(SEED)
    with scratch_database("evo") as (db, conn):
        with conn.cursor() as cur:
            cur.execute(f"USE `{db}`")
            for ddl in TABLES:
                cur.execute(ddl)
        create_signal_table(conn, f"{db}.debezium_signal")
        writer = Writer(conn, db, rng)
        writer.step(40)
        mysql = capture_resource(db)
        tables = [t for t in mysql.discover_tables() if t.table not in ("debezium_signal", "t sp")]
        lake = str(tmp_path / "lake")
        storage = StorageSettings(base_uri=lake)
        cdc = SensorDriven(mysql, lake, tables)
        cdc.ticks(run_log_level="WARNING")  # initial snapshot
        start = master_position()
        seen = set(writer.tables())
        for i, ddls in enumerate(WINDOWS):
            for ddl in ddls:
                writer.step(rng.randint(2, 8))
                writer.run(ddl)
                seen |= set(writer.tables())
            writer.step(rng.randint(5, 15))
            log = cdc.ticks(max_ticks=30, run_log_level="WARNING")
            for t in set(writer.tables()) - {"t sp"}:  # after every window's DDL, not only at the end
                assert_lake_equals_source(storage, db, db, t, conn)
                assert_one_unit(storage, db, db, t)
            assert_no_check_cried_wolf(cdc, log, set(writer.tables()), f"window {i}")
            if i == 3:  # cold restart: a new code location, instance and resources; the cursor kept
                cursor = cdc.cursor
                cdc = SensorDriven(capture_resource(db), lake, tables)
                cdc.cursor = cursor
        writer.step(10)
        log = cdc.ticks(max_ticks=30, run_log_level="WARNING")
        end = master_position()
        assert_no_check_cried_wolf(cdc, log, set(writer.tables()), "the last window")
        seen |= {"t_tmp"}

        for t in writer.tables():
            assert_lake_equals_source(storage, db, db, t, conn)
        assert sum(assert_one_unit(storage, db, db, t) for t in seen) > 50
        # the SQL views of every table of the lake (dropped ones too) equal read_current
        captured = [(t.database, t.table) for t in captured_tables(storage, db)]
        assert_sql_views_equal_current(storage, db, captured, spark=active_spark())
        for gone in seen - set(writer.tables()):
            state = lake_state(storage, db, db, gone)
            if state is not None:
                assert live_multiset(state).num_rows == 0, f"{gone} no longer exists but has live rows"

        # every check of every table still captured, run as "Execute checks" runs them, passes
        existing = set(writer.tables())
        keys = [k for k in cdc.cdc.keys if k.path[-1] in existing]
        checks = dg.materialize(
            [cdc.cdc],
            selection=dg.AssetSelection.checks_for_assets(*keys),
            resources=cdc.resources,
            instance=cdc.instance,
        )
        evaluations = checks.get_asset_check_evaluations()
        assert len(evaluations) >= 3 * len(keys)
        failed = [(e.asset_key.path[-1], e.check_name, e.metadata) for e in evaluations if not e.passed]
        assert not failed, failed

        committed = SchemaHistory(storage, db).catalog_at(end)
        server = read_table_schemas(conn, list_tables(conn, [db]))
        for key, schema in server.items():
            if key[1] in ("debezium_signal", "t sp"):  # not snapshotted (the signal table; not an asset)
                continue
            assert key in committed, f"{key} is not in the schema history"
            assert_same_schema(committed[key], schema, "the seeded run")

        from_binlog = binlog_row_counts(db, start, end)
        from_lake = changelog_row_counts(storage, db, db, sorted(seen))
        from_binlog = Counter({k: v for k, v in from_binlog.items() if k[0] != "debezium_signal"})
        assert from_lake == from_binlog
        assert sum(from_lake.values()) > 100  # the run wrote enough to mean something


def test_a_type_widened_mid_window_by_the_sink_thread_commits(tmp_path):
    """The record batches of a busy table go to the sink thread as they fill
    (``stream_batch_rows=20``). The first batch after an ``ALTER ... MODIFY`` that widens a column
    rewrites the table's change log and tail through the sink thread's own handles, so the
    table's commit task refreshes the handles the batch was opened with
    (``TableBatch.rewritten``) instead of trusting them: the window commits, the lake equals the
    source and holds the widened values."""
    with scratch_database("widen") as (db, conn):
        with conn.cursor() as cur:
            cur.execute(f"USE `{db}`")
            cur.execute("CREATE TABLE t (id INT PRIMARY KEY, qty INT)")
            cur.executemany("INSERT INTO t VALUES (%s, %s)", [(i, i) for i in range(1, 51)])
        mysql = capture_resource(db, stream_batch_rows=20)
        lake = str(tmp_path / "lake")
        cdc = SensorDriven(mysql, lake, mysql.discover_tables())
        assert all(r.success for r in cdc.ticks(run_log_level="WARNING").runs)  # the snapshot
        with conn.cursor() as cur:
            cur.execute(f"USE `{db}`")
            cur.execute("UPDATE t SET qty = qty + 1")  # 50 events of the narrow type ...
            cur.execute("ALTER TABLE t MODIFY qty BIGINT")
            cur.executemany("INSERT INTO t VALUES (%s, %s)", [(i, 2**40 + i) for i in range(51, 101)])
        ticks = cdc.ticks(max_ticks=30, run_log_level="WARNING")
        assert ticks.runs and all(r.success for r in ticks.runs)
        storage = StorageSettings(base_uri=lake)
        assert_lake_equals_source(storage, db, db, "t", conn)
        qty = lake_state(storage, db, db, "t").column("qty")
        assert pa.types.is_int64(qty.type) and pc.max(qty).as_py() == 2**40 + 100
