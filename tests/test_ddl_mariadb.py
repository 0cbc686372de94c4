"""SchemaCatalog (DDL parser) against a real MariaDB: the parsed schemas must equal what
``catalog.read_table_schemas`` reads from ``information_schema`` for the same DDL.

Needs the MariaDB started by ``infra/up.sh`` (env CDC_MYSQL_HOST/CDC_MYSQL_PORT,
CDC_MYSQL_ROOT_PASSWORD). Uses scratch databases ``ddl_test_*`` (dropped at the end).

Comparison rule: a parsed column whose ``charset`` is ``None`` (charset not derivable from the
DDL: no column/table/database charset seen) matches any server charset; everything else must be
equal.
"""

from __future__ import annotations

import os
from pathlib import Path

import pymysql
import pytest

from dagster_mysql_cdc.source.catalog import list_tables, read_table_schemas
from dagster_mysql_cdc.source.ddl import SchemaCatalog
from dagster_mysql_cdc.source.schema import TableSchema

pytestmark = pytest.mark.integration

HOST = os.environ.get("CDC_MYSQL_HOST", "127.0.0.1")
PORT = int(os.environ.get("CDC_MYSQL_PORT", "3307"))
ROOT_PASSWORD = os.environ.get("CDC_MYSQL_ROOT_PASSWORD", "root-secret")
DATASETS = Path(
    os.environ.get("CDC_DATASETS_DIR", Path(__file__).resolve().parent.parent / "infra" / "datasets")
)
BINLOG_SERVER_ID = 4343


def _connect(db: str | None = None) -> pymysql.connections.Connection:
    try:
        return pymysql.connect(
            host=HOST,
            port=PORT,
            user="root",
            password=ROOT_PASSWORD,
            database=db,
            autocommit=True,
            connect_timeout=10,
            charset="utf8mb4",
        )
    except pymysql.err.OperationalError as e:
        pytest.fail(
            f"MariaDB is not reachable at {HOST}:{PORT} as root ({e}). Start it with infra/up.sh "
            "(or set CDC_MYSQL_HOST/CDC_MYSQL_PORT/CDC_MYSQL_ROOT_PASSWORD).",
            pytrace=False,
        )


@pytest.fixture(scope="module")
def server_version() -> str:
    conn = _connect()
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT VERSION()")
            return cur.fetchone()[0]
    finally:
        conn.close()


@pytest.fixture
def scratch_db(request):
    """Name of a fresh scratch database (dropped before and after the test)."""
    name = "ddl_test_" + request.node.name.removeprefix("test_")[:40]
    conn = _connect()
    with conn.cursor() as cur:
        cur.execute(f"DROP DATABASE IF EXISTS `{name}`")
    yield name
    with conn.cursor() as cur:
        cur.execute(f"DROP DATABASE IF EXISTS `{name}`")
    conn.close()


def split_script(text: str) -> list[str]:
    """Statements of a mysql-client script, honouring ``DELIMITER`` (client-side command)."""
    delim = ";"
    out: list[str] = []
    buf: list[str] = []
    for line in text.splitlines(keepends=True):
        s = line.strip()
        only_comments = all(not b.strip() or b.strip().startswith("--") for b in buf)
        if only_comments and s.upper().startswith("DELIMITER "):
            delim = s.split(None, 1)[1]
            buf = []
            continue
        buf.append(line)
        if s.endswith(delim) and not s.startswith("--"):
            stmt = "".join(buf).rstrip()[: -len(delim)]
            code = [ln for ln in stmt.splitlines() if ln.strip() and not ln.strip().startswith("--")]
            if code:
                out.append(stmt.strip())
            buf = []
    return out


def _head(stmt: str) -> str:
    code = " ".join(ln for ln in stmt.splitlines() if not ln.strip().startswith("--"))
    return " ".join(code.split()[:3]).upper()


def assert_same_schema(parsed: TableSchema, server: TableSchema, context: str = "") -> None:
    where = f"{server.qualified_name}{' after ' + context if context else ''}"
    assert parsed.database == server.database and parsed.table == server.table, where
    assert parsed.column_names == server.column_names, f"{where}: column order"
    for p, s in zip(parsed.columns, server.columns):
        expected = (
            s
            if p.charset is not None
            else s.__class__(**{**s.to_dict(), "charset": None, "enum_values": s.enum_values})
        )
        assert p == expected, f"{where}: column {s.name}:\n parsed {p}\n server {s}"
    assert parsed.primary_key == server.primary_key, f"{where}: primary key"
    assert parsed.comment == server.comment, f"{where}: table comment"


def assert_catalog_matches(cat: SchemaCatalog, conn, db: str, context: str = "") -> None:
    server = read_table_schemas(conn, list_tables(conn, [db]))
    parsed = {k: v for k, v in cat.tables().items() if k[0] == db}
    assert sorted(parsed) == sorted(server), f"tables of {db} after {context}"
    for key, schema in server.items():
        assert_same_schema(parsed[key], schema, context)


# ----------------------------------------------------------------------------------------------
# (a) the CREATE TABLEs of the sample databases
# ----------------------------------------------------------------------------------------------


def _load_script(conn, cat: SchemaCatalog, path: Path, db: str, create_db_sql: str) -> list:
    """Run the script's table DDL in ``db`` and feed every statement to the catalog."""
    with conn.cursor() as cur:
        cur.execute(create_db_sql)
        cur.execute(f"USE `{db}`")
    assert cat.apply(create_db_sql, None)[0].created_databases == (db,)
    outcomes = []
    for stmt in split_script(path.read_text()):
        head = _head(stmt)
        if head.startswith(("DROP SCHEMA", "CREATE SCHEMA", "DROP DATABASE", "CREATE DATABASE", "USE ")):
            continue  # the scripts' own fixed database names
        [outcome] = cat.apply(stmt, db)
        outcomes.append((head, outcome))
        if head.startswith(("CREATE TABLE", "ALTER TABLE", "SET ", "/*!50610 SET")):
            with conn.cursor() as cur:
                cur.execute(stmt)
        if head.startswith(("CREATE TABLE", "ALTER TABLE")):
            assert not outcome.ignored and outcome.table_changes, stmt
        elif head.startswith(
            (
                "CREATE VIEW",
                "CREATE TRIGGER",
                "CREATE PROCEDURE",
                "CREATE FUNCTION",
                "CREATE DEFINER",
                "SET ",
                "INSERT INTO",
            )
        ):
            assert outcome.ignored, stmt
    return outcomes


def test_sakila_schema(scratch_db, server_version):
    conn = _connect()
    cat = SchemaCatalog(server_version=server_version)
    outcomes = _load_script(
        conn, cat, DATASETS / "sakila" / "sakila-schema.sql", scratch_db, f"CREATE DATABASE {scratch_db}"
    )
    kinds = {h.split()[1] for h, o in outcomes if h.startswith("CREATE")}
    assert {"TABLE", "VIEW", "TRIGGER", "PROCEDURE", "FUNCTION"} <= kinds | {"DEFINER=CURRENT_USER"}
    assert len([1 for h, _ in outcomes if h.startswith("CREATE TABLE")]) == 16
    assert_catalog_matches(cat, conn, scratch_db, "sakila-schema.sql")
    # MariaDB ignores MySQL-5.7+ executable comments (/*!50705 location GEOMETRY */)
    assert not cat.get(scratch_db, "address").has_column("location")
    assert cat.get(scratch_db, "film_actor").primary_key == ("actor_id", "film_id")
    conn.close()


def test_inventory_schema(scratch_db, server_version):
    conn = _connect()
    cat = SchemaCatalog(server_version=server_version)
    _load_script(
        conn,
        cat,
        DATASETS / "inventory" / "inventory.sql",
        scratch_db,
        f"CREATE DATABASE {scratch_db} CHARACTER SET utf8mb4",
    )
    assert_catalog_matches(cat, conn, scratch_db, "inventory.sql")
    # the database charset was derivable, so every character column has one
    for schema in cat.tables().values():
        for col in schema.columns:
            if col.data_type in ("varchar", "enum"):
                assert col.charset == "utf8mb4"
    conn.close()


# ----------------------------------------------------------------------------------------------
# (b) a sequence of ALTERs applied to MariaDB and to the catalog
# ----------------------------------------------------------------------------------------------

ALTER_STEPS = [
    "CREATE TABLE t1 (id INT NOT NULL, name VARCHAR(20), PRIMARY KEY (id)) COMMENT 'first'",
    "ALTER TABLE t1 ADD COLUMN email VARCHAR(100) NOT NULL DEFAULT '' COMMENT 'mail' AFTER id",
    "ALTER TABLE t1 ADD COLUMN first_col TINYINT(1) FIRST, ADD last_col DATETIME(3)",
    "ALTER TABLE t1 ADD COLUMN (c1 INT, c2 DECIMAL(8,3) UNSIGNED)",
    "ALTER TABLE t1 MODIFY COLUMN name VARCHAR(50) CHARACTER SET latin1 NOT NULL FIRST",
    "ALTER TABLE t1 CHANGE COLUMN c1 c1_renamed BIGINT UNSIGNED AFTER email",
    "ALTER TABLE t1 RENAME COLUMN c2 TO amount",
    "ALTER TABLE t1 DROP COLUMN first_col, DROP last_col",
    "ALTER TABLE t1 ALTER COLUMN amount SET DEFAULT 1.5, ALTER COLUMN email DROP DEFAULT",
    "ALTER TABLE t1 DROP PRIMARY KEY, ADD PRIMARY KEY (id, email)",
    "ALTER TABLE t1 ADD INDEX idx_name (name(10)), ADD UNIQUE KEY uq (c1_renamed), ENGINE=InnoDB, COMMENT='table one'",
    "ALTER TABLE t1 DROP INDEX idx_name, ALGORITHM=COPY",
    "ALTER TABLE t1 MODIFY c1_renamed BIGINT UNSIGNED NOT NULL, CHANGE amount amount DECIMAL(10,2) COMMENT 'money' AFTER id",
    "ALTER TABLE t1 RENAME TO t1_new",
    "RENAME TABLE t1_new TO t1_tmp, t1_tmp TO t1_final",
    "CREATE TABLE t2 (a INT, b TEXT, ts TIMESTAMP, e ENUM('x','y''s') DEFAULT 'x', v VARCHAR(10)) CHARSET latin1",
    "ALTER TABLE t2 CONVERT TO CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci",
    "ALTER TABLE t2 ADD PRIMARY KEY (a)",
    "ALTER TABLE t2 MODIFY a INT AUTO_INCREMENT",
    "ALTER TABLE t2 ADD COLUMN j JSON, ADD COLUMN p POINT, ADD COLUMN bits BIT(4) AFTER a",
    "ALTER TABLE t2 MODIFY a INT NOT NULL",
    "ALTER TABLE t2 DROP INDEX `PRIMARY`",
    "ALTER TABLE t2 RENAME AS t2b",
    "ALTER TABLE t2b ADD CHECK (bits > 0), ADD CONSTRAINT pk PRIMARY KEY USING BTREE (a)",
    "CREATE TABLE t3 LIKE t2b",
    "TRUNCATE TABLE t3",
    "ALTER TABLE t3 DEFAULT CHARSET=latin1, ADD COLUMN l VARCHAR(5), ADD COLUMN ts2 TIMESTAMP(6) NULL",
    "ALTER TABLE t3 ADD COLUMN IF NOT EXISTS l INT, DROP COLUMN IF EXISTS nope, ADD COLUMN m SMALLINT UNSIGNED ZEROFILL FIRST",
    "DROP TABLE IF EXISTS t3, no_such_table",
    "CREATE TABLE t4 (id INT, k VARCHAR(10), PRIMARY KEY (id, k(5)), KEY (k(3)))",
    "CREATE OR REPLACE TABLE t4 (x INT PRIMARY KEY, y YEAR, z SET('a','b''c') NOT NULL)",
    "CREATE TABLE IF NOT EXISTS t4 (other INT)",
    "ALTER TABLE t4 ADD COLUMN s SERIAL, ADD COLUMN n NUMERIC(6,2), ADD COLUMN r REAL, ADD COLUMN f FLOAT(30)",
    "ALTER ONLINE TABLE t4 ADD COLUMN o INT AFTER x",
    "CREATE TABLE t5 (a INT NOT NULL, b LONGTEXT, c VARCHAR(3) CHARSET binary, CONSTRAINT chk CHECK (json_valid(b)))",
    "DROP TABLE t4",
    # MariaDB column attributes sqlglot does not know (token fallback strips them)
    "CREATE TABLE t6 (a INT, b INT AS (a * 2) PERSISTENT, d VARCHAR(10) COMPRESSED, "
    "s INT SERIAL DEFAULT VALUE, p POINT REF_SYSTEM_ID=4326, t TEXT COMPRESSED=zlib)",
    "ALTER TABLE t6 MODIFY COLUMN IF EXISTS a BIGINT NOT NULL, CHANGE COLUMN IF EXISTS nope x INT, "
    "ADD COLUMN c INT AS (a + 1) VIRTUAL AFTER a",
    "ALTER TABLE t6 DROP COLUMN p",  # partitioned tables cannot hold GEOMETRY
    "ALTER TABLE t6 PARTITION BY HASH(s) PARTITIONS 2",
    "ALTER TABLE t6 REMOVE PARTITIONING",
    "ALTER TABLE t6 ADD COLUMN (e INT UNSIGNED, f FLOAT UNSIGNED), ALGORITHM=COPY",
    "DROP TABLE t6",
]


def test_alter_sequence(scratch_db, server_version):
    conn = _connect()
    cat = SchemaCatalog(server_version=server_version)
    create_db = f"CREATE DATABASE {scratch_db} CHARACTER SET utf8mb4"
    with conn.cursor() as cur:
        cur.execute(create_db)
        cur.execute(f"USE {scratch_db}")
    cat.apply(create_db, None)
    for step in ALTER_STEPS:
        with conn.cursor() as cur:
            cur.execute(step)
        cat.apply(step, scratch_db)
        assert_catalog_matches(cat, conn, scratch_db, step)
    assert sorted(t for d, t in cat.tables() if d == scratch_db) == ["t1_final", "t2b", "t5"]
    conn.close()


# ----------------------------------------------------------------------------------------------
# (c) the same kind of DDL read back from the real binlog
# ----------------------------------------------------------------------------------------------


def test_binlog_query_events(scratch_db):
    from pymysqlreplication import BinLogStreamReader
    from pymysqlreplication.event import QueryEvent

    conn = _connect()
    with conn.cursor() as cur:
        cur.execute("SHOW MASTER STATUS")
        row = cur.fetchone()
    assert row, "binary logging is off on the test server (SHOW MASTER STATUS is empty)"
    log_file, log_pos = row[0], row[1]
    steps = [
        f"CREATE DATABASE {scratch_db} CHARACTER SET utf8mb4",
        f"USE {scratch_db}",
        "CREATE TABLE src (id INT PRIMARY KEY, b VARCHAR(3), d DECIMAL(5,1) /*!40101 COMMENT 'dec' */, "
        "  x INT /*!50705 , location GEOMETRY */)",
        "INSERT INTO src VALUES (1, 'x', 1.5, 2)",
        "CREATE TABLE ctas AS SELECT id, b, id + 1 AS c FROM src",  # logged as an explicit CREATE TABLE
        *[s for s in ALTER_STEPS if "t4" not in s],
        f"CREATE TABLE {scratch_db}.qualified (a INT) COMMENT 'q'",
        "CREATE TEMPORARY TABLE tmp (a INT)",
        "DROP TEMPORARY TABLE tmp",
        "DROP TABLE IF EXISTS src",
    ]
    with conn.cursor() as cur:
        for s in steps:
            cur.execute(s)

    cat = SchemaCatalog()  # binlog mode: no server_version needed
    stream = BinLogStreamReader(
        connection_settings={"host": HOST, "port": PORT, "user": "root", "password": ROOT_PASSWORD},
        server_id=BINLOG_SERVER_ID,
        log_file=log_file,
        log_pos=log_pos,
        resume_stream=True,
        blocking=False,
        is_mariadb=False,
        only_events=[QueryEvent],
    )
    seen = []
    try:
        for event in stream:
            schema = event.schema.decode() if isinstance(event.schema, bytes) else event.schema
            if schema != scratch_db and scratch_db not in event.query:
                continue  # other engineers' DDL on the shared server
            seen.append(event.query)
            cat.apply(event.query, event.schema)
    finally:
        stream.close()

    assert any(q.startswith("CREATE TABLE `ctas`") for q in seen), seen
    assert any("/* generated by server */" in q for q in seen), seen
    assert not any("TEMPORARY" in q for q in seen)
    assert_catalog_matches(cat, conn, scratch_db, "replaying the binlog")
    ctas = cat.get(scratch_db, "ctas")
    assert ctas.column_names == ["id", "b", "c"] and ctas.column("c").data_type == "bigint"
    conn.close()
