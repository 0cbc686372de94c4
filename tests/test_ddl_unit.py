"""Unit tests of the DDL parser / schema catalog (no server needed).

Expected values follow what MariaDB 10.11's information_schema reports through
``catalog.read_table_schemas`` (verified by tests/test_ddl_mariadb.py).
"""

from __future__ import annotations

import logging

import pytest

from dagster_mysql_cdc.source.ddl import (
    DdlOutcome,
    SchemaCatalog,
    TableChange,
    UnparseableDdlError,
)
from dagster_mysql_cdc.source.schema import ColumnSchema, TableSchema

DB = "shop"


def cat_with(*statements: str, **kw) -> SchemaCatalog:
    cat = SchemaCatalog(**kw)
    for s in statements:
        cat.apply(s, DB)
    return cat


def one(cat: SchemaCatalog, sql: str, db: str | None = DB, **kw) -> DdlOutcome:
    [outcome] = cat.apply(sql, db, **kw)
    return outcome


def col(cat: SchemaCatalog, table: str, name: str, db: str = DB) -> ColumnSchema:
    return cat.get(db, table).column(name)


def names(cat: SchemaCatalog, table: str, db: str = DB) -> list[str]:
    return cat.get(db, table).column_names


class ListLogger:
    def __init__(self):
        self.warnings: list[str] = []

    def warning(self, msg, *args):
        self.warnings.append(msg % args if args else msg)


# ----------------------------------------------------------------------------------------------
# CREATE TABLE: column types
# ----------------------------------------------------------------------------------------------

TYPE_CASES = [
    # ddl type, data_type, unsigned, length, precision, scale
    ("INT", "int", False, None, None, None),
    ("INTEGER", "int", False, None, None, None),
    ("INT(11) UNSIGNED", "int", True, None, None, None),
    ("INTEGER UNSIGNED ZEROFILL", "int", True, None, None, None),
    ("TINYINT(1)", "tinyint", False, None, None, None),
    ("SMALLINT UNSIGNED", "smallint", True, None, None, None),
    ("MEDIUMINT", "mediumint", False, None, None, None),
    ("MIDDLEINT", "mediumint", False, None, None, None),
    ("BIGINT(20) UNSIGNED ZEROFILL", "bigint", True, None, None, None),
    ("INT1", "tinyint", False, None, None, None),
    ("INT2", "smallint", False, None, None, None),
    ("INT3", "mediumint", False, None, None, None),
    ("INT4", "int", False, None, None, None),
    ("INT8", "bigint", False, None, None, None),
    ("BOOLEAN", "tinyint", False, None, None, None),
    ("BOOL", "tinyint", False, None, None, None),
    ("DECIMAL", "decimal", False, None, 10, 0),
    ("DECIMAL(10,2)", "decimal", False, None, 10, 2),
    ("DECIMAL(10,2) UNSIGNED", "decimal", True, None, 10, 2),
    ("DECIMAL(6,1) ZEROFILL", "decimal", True, None, 6, 1),
    ("NUMERIC(5)", "decimal", False, None, 5, 0),
    ("DEC(6,1)", "decimal", False, None, 6, 1),
    ("FIXED(4,2)", "decimal", False, None, 4, 2),
    ("FLOAT", "float", False, None, None, None),
    ("FLOAT(7,3) UNSIGNED", "float", True, None, 7, 3),  # FLOAT(M,D): Debezium FLOAT64
    ("FLOAT UNSIGNED", "float", True, None, None, None),
    ("FLOAT(24)", "float", False, None, None, None),
    ("FLOAT(30)", "double", False, None, None, None),
    ("FLOAT4", "float", False, None, None, None),
    ("FLOAT8", "double", False, None, None, None),
    ("DOUBLE", "double", False, None, None, None),
    ("DOUBLE(10,2) UNSIGNED", "double", True, None, 10, 2),
    ("DOUBLE PRECISION", "double", False, None, None, None),
    ("REAL", "double", False, None, None, None),
    ("BIT", "bit", False, 1, None, None),
    ("BIT(5)", "bit", False, 5, None, None),
    ("DATE", "date", False, None, None, None),
    ("DATETIME", "datetime", False, None, 0, None),
    ("DATETIME(6)", "datetime", False, None, 6, None),
    ("TIMESTAMP", "timestamp", False, None, 0, None),
    ("TIMESTAMP(3)", "timestamp", False, None, 3, None),
    ("TIME", "time", False, None, 0, None),
    ("TIME(6)", "time", False, None, 6, None),
    ("YEAR", "year", False, 4, None, None),
    ("YEAR(4)", "year", False, 4, None, None),
    ("BINARY", "binary", False, 1, None, None),
    ("BINARY(16)", "binary", False, 16, None, None),
    ("VARBINARY(7)", "varbinary", False, 7, None, None),
    ("TINYBLOB", "tinyblob", False, None, None, None),
    ("BLOB", "blob", False, None, None, None),
    ("BLOB(300)", "blob", False, None, None, None),
    ("BLOB(70000)", "mediumblob", False, None, None, None),
    ("MEDIUMBLOB", "mediumblob", False, None, None, None),
    ("LONGBLOB", "longblob", False, None, None, None),
    ("LONG VARBINARY", "mediumblob", False, None, None, None),
    ("GEOMETRY", "geometry", False, None, None, None),
    ("POINT", "point", False, None, None, None),
    ("LINESTRING", "linestring", False, None, None, None),
    ("POLYGON", "polygon", False, None, None, None),
    ("MULTIPOINT", "multipoint", False, None, None, None),
    ("MULTILINESTRING", "multilinestring", False, None, None, None),
    ("MULTIPOLYGON", "multipolygon", False, None, None, None),
    ("GEOMETRYCOLLECTION", "geometrycollection", False, None, None, None),
    ("UUID", "uuid", False, None, None, None),
    ("INET4", "inet4", False, None, None, None),
    ("INET6", "inet6", False, None, None, None),
]


@pytest.mark.parametrize("ddl_type,data_type,unsigned,length,precision,scale", TYPE_CASES)
def test_column_types(ddl_type, data_type, unsigned, length, precision, scale):
    cat = cat_with(f"CREATE TABLE t (c {ddl_type})")
    assert col(cat, "t", "c") == ColumnSchema(
        name="c",
        data_type=data_type,
        position=1,
        nullable=True,
        unsigned=unsigned,
        length=length,
        precision=precision,
        scale=scale,
        charset=None,
    )


CHAR_CASES = [
    # ddl type (table DEFAULT CHARSET=utf8mb4), data_type, length, charset
    ("CHAR", "char", 1, "utf8mb4"),
    ("CHAR(3)", "char", 3, "utf8mb4"),
    ("CHARACTER(3)", "char", 3, "utf8mb4"),
    ("VARCHAR(10)", "varchar", 10, "utf8mb4"),
    ("CHARACTER VARYING(10)", "varchar", 10, "utf8mb4"),
    ("VARCHAR(10) CHARACTER SET latin1", "varchar", 10, "latin1"),
    ("VARCHAR(10) CHARSET latin1 COLLATE latin1_bin", "varchar", 10, "latin1"),
    ("VARCHAR(10) COLLATE utf8mb3_bin", "varchar", 10, "utf8mb3"),
    ("VARCHAR(10) CHARACTER SET utf8", "varchar", 10, "utf8mb3"),
    ("CHAR(3) BINARY", "char", 3, "utf8mb4"),
    ("CHAR(2) ASCII", "char", 2, "latin1"),
    ("CHAR(2) UNICODE", "char", 2, "ucs2"),
    ("NCHAR(3)", "char", 3, "utf8mb3"),
    ("NATIONAL CHAR(3)", "char", 3, "utf8mb3"),
    ("NVARCHAR(5)", "varchar", 5, "utf8mb3"),
    ("NATIONAL VARCHAR(5)", "varchar", 5, "utf8mb3"),
    ("TINYTEXT", "tinytext", None, "utf8mb4"),
    ("TEXT", "text", None, "utf8mb4"),
    ("TEXT(60)", "tinytext", None, "utf8mb4"),
    ("TEXT(100)", "text", None, "utf8mb4"),
    ("TEXT(100) CHARACTER SET latin1", "tinytext", None, "latin1"),
    ("MEDIUMTEXT", "mediumtext", None, "utf8mb4"),
    ("LONGTEXT", "longtext", None, "utf8mb4"),
    ("LONG", "mediumtext", None, "utf8mb4"),
    ("LONG VARCHAR", "mediumtext", None, "utf8mb4"),
    ("VARCHAR(3) CHARSET binary", "varbinary", 3, None),
    ("TEXT CHARACTER SET binary", "blob", None, None),
]


@pytest.mark.parametrize("ddl_type,data_type,length,charset", CHAR_CASES)
def test_character_types(ddl_type, data_type, length, charset):
    cat = cat_with(f"CREATE TABLE t (c {ddl_type}) DEFAULT CHARSET=utf8mb4")
    c = col(cat, "t", "c")
    assert (c.data_type, c.length, c.charset, c.unsigned) == (data_type, length, charset, False)


def test_enum_and_set_values_with_quotes_and_commas():
    cat = cat_with(
        "CREATE TABLE t (e ENUM('a','it''s','b\\'c','x,y') NOT NULL, s SET('x', 'y') CHARACTER SET latin1)"
        " CHARSET=utf8mb4"
    )
    e, s = col(cat, "t", "e"), col(cat, "t", "s")
    assert (e.data_type, e.enum_values, e.nullable, e.charset) == (
        "enum",
        ("a", "it's", "b'c", "x,y"),
        False,
        "utf8mb4",
    )
    assert (s.data_type, s.enum_values, s.charset) == ("set", ("x", "y"), "latin1")
    assert e.column_type == "enum('a','it''s','b''c','x,y')"


def test_json_mariadb_and_mysql():
    maria = cat_with("CREATE TABLE t (j JSON) CHARSET latin1")
    assert col(maria, "t", "j") == ColumnSchema("j", "json", 1, charset="utf8mb4")
    mysql = cat_with("CREATE TABLE t (j JSON)", server_version="8.0.36")
    assert col(mysql, "t", "j") == ColumnSchema("j", "json", 1, charset=None)


def test_json_valid_check_constraints_make_json_columns():
    # what MariaDB's information_schema (and catalog.py) reports for LONGTEXT + json_valid checks
    cat = cat_with(
        "CREATE TABLE t (a INT, b LONGTEXT CHECK (json_valid(b)), c VARCHAR(10), d TEXT, "
        "CONSTRAINT cc CHECK (json_valid(c)), CHECK (json_valid(`d`)), CHECK (a > 0)) CHARSET utf8mb4"
    )
    assert [col(cat, "t", n).data_type for n in "abcd"] == ["int", "json", "json", "json"]
    assert col(cat, "t", "c").length is None
    one(cat, "ALTER TABLE t MODIFY b LONGTEXT, MODIFY c VARCHAR(20)")
    # a column-level check goes with the column definition, a table-level one stays
    assert col(cat, "t", "b").data_type == "longtext"
    assert col(cat, "t", "c").data_type == "json"


def test_nullability_rules():
    cat = cat_with(
        "CREATE TABLE t (a INT NOT NULL, b INT NULL, c INT, d INT AUTO_INCREMENT, e SERIAL, "
        "f TIMESTAMP, g TIMESTAMP NULL, h INT DEFAULT NULL, KEY (d))"
    )
    assert [c.nullable for c in cat.get(DB, "t").columns] == [
        False,
        True,
        True,
        False,
        False,
        True,
        True,
        True,
    ]
    serial = col(cat, "t", "e")
    assert (serial.data_type, serial.unsigned) == ("bigint", True)
    assert cat.get(DB, "t").primary_key == ()


def test_timestamps_not_null_without_explicit_defaults_for_timestamp():
    cat = cat_with(
        "CREATE TABLE t (a TIMESTAMP, b TIMESTAMP NULL, c DATETIME)",
        explicit_defaults_for_timestamp=False,
    )
    assert [c.nullable for c in cat.get(DB, "t").columns] == [False, True, True]


def test_defaults_comments_and_table_options():
    cat = cat_with(
        "CREATE TABLE `t` (\n"
        "  `id` INT UNSIGNED NOT NULL AUTO_INCREMENT COMMENT 'the id',\n"
        "  name VARCHAR(20) NOT NULL DEFAULT 'x' COMMENT 'it''s a name',\n"
        "  ts TIMESTAMP(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6) ON UPDATE CURRENT_TIMESTAMP(6),\n"
        "  gen INT AS (id + 1) VIRTUAL, inv INT INVISIBLE,\n"
        "  PRIMARY KEY (`id`)\n"
        ") ENGINE=InnoDB AUTO_INCREMENT=10 DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin ROW_FORMAT=DYNAMIC "
        "COMMENT='orders table'"
    )
    t = cat.get(DB, "t")
    assert t.comment == "orders table"
    assert t.column("id").comment == "the id"
    assert t.column("name") == ColumnSchema(
        "name", "varchar", 2, False, length=20, charset="utf8mb4", comment="it's a name"
    )
    assert t.column("ts").precision == 6 and not t.column("ts").nullable
    assert t.column_names == ["id", "name", "ts", "gen", "inv"]


# ----------------------------------------------------------------------------------------------
# CREATE TABLE: keys, names, variants
# ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "ddl,pk",
    [
        ("CREATE TABLE t (a INT PRIMARY KEY, b INT)", ("a",)),
        ("CREATE TABLE t (a INT KEY, b INT)", ("a",)),
        ("CREATE TABLE t (a INT, b INT, PRIMARY KEY (b, a))", ("b", "a")),
        ("CREATE TABLE t (PRIMARY KEY (a), a INT, b INT)", ("a",)),
        ("CREATE TABLE t (a INT, b INT, CONSTRAINT pk PRIMARY KEY (a, b))", ("a", "b")),
        ("CREATE TABLE t (a INT, b INT, PRIMARY KEY (a) USING BTREE)", ("a",)),
        # sqlglot cannot parse these key parts: token fallback
        ("CREATE TABLE t (a INT, b VARCHAR(10), PRIMARY KEY (a, b(5)))", ("a", "b")),
        ("CREATE TABLE t (a INT, b INT, PRIMARY KEY USING BTREE (b))", ("b",)),
        (
            "CREATE TABLE t (a INT, b INT, UNIQUE KEY u (a), KEY k (b), INDEX (a, b), FULLTEXT (b), "
            "SPATIAL KEY s (a), CONSTRAINT fk FOREIGN KEY (a) REFERENCES o (x) ON DELETE CASCADE, "
            "CHECK (a > 0))",
            (),
        ),
        ("CREATE TABLE t (a INT NOT NULL UNIQUE, b INT)", ()),
    ],
)
def test_primary_keys(ddl, pk):
    cat = cat_with(ddl)
    t = cat.get(DB, "t")
    assert t.primary_key == pk
    for k in pk:
        assert not t.column(k).nullable  # PRIMARY KEY implies NOT NULL
    assert set(t.column_names) == {"a", "b"}


def test_sakila_style_create_with_executable_comments_and_keys():
    ddl = """CREATE TABLE address (
      address_id SMALLINT UNSIGNED NOT NULL AUTO_INCREMENT,
      address VARCHAR(50) NOT NULL,
      -- Add GEOMETRY column for MySQL 5.7.5 and higher
      /*!50705 location GEOMETRY */ /*!80003 SRID 0 */ /*!50705 NOT NULL,*/
      last_update TIMESTAMP NOT NULL DEFAULT CURRENT_TIMESTAMP ON UPDATE CURRENT_TIMESTAMP,
      PRIMARY KEY  (address_id),
      KEY idx_fk_city_id (address),
      /*!50705 SPATIAL KEY `idx_location` (location),*/
      CONSTRAINT `fk_address_city` FOREIGN KEY (address) REFERENCES city (city_id) ON DELETE RESTRICT ON UPDATE CASCADE
    ) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4"""
    mariadb = cat_with(ddl, server_version="10.11.6-MariaDB")  # ignores MySQL 5.7+ comments
    assert names(mariadb, "address") == ["address_id", "address", "last_update"]
    mysql57 = cat_with(ddl.replace("/*!80003 SRID 0 */", ""), server_version="5.7.44")
    assert names(mysql57, "address") == ["address_id", "address", "location", "last_update"]
    assert not col(mysql57, "address", "location").nullable
    binlog_text = ddl.replace("/*!50705", "/* 50705").replace("/*!80003", "/* 80003")
    assert names(cat_with(binlog_text), "address") == ["address_id", "address", "last_update"]


def test_mariadb_only_comments():
    ddl = "CREATE TABLE t (a INT /*M!100100 , m INT */ /*!40101 , z INT */)"
    assert names(cat_with(ddl), "t") == ["a", "m", "z"]
    assert names(cat_with(ddl, server_version="8.0.36"), "t") == ["a", "z"]


def test_qualified_backquoted_and_default_database():
    cat = SchemaCatalog()
    o = one(cat, "CREATE TABLE `other db`.`we``ird` (`col 1` INT)", "shop")
    assert o.database == "other db"
    assert o.table_changes[0].type == "CREATE"
    assert cat.get("other db", "we`ird").column_names == ["col 1"]
    o = one(cat, "CREATE TABLE plain (a INT)", b"shop")  # QueryEvent.schema is bytes
    assert o.database == "shop" and cat.get("shop", "plain") is not None
    with pytest.raises(UnparseableDdlError, match="default database"):
        cat.apply("CREATE TABLE nodb (a INT)", "")


def test_create_if_not_exists_and_or_replace():
    cat = cat_with("CREATE TABLE t (a INT)")
    o = one(cat, "CREATE TABLE IF NOT EXISTS t (b INT)")
    assert o.ignored and o.table_changes == () and names(cat, "t") == ["a"]
    o = one(cat, "CREATE OR REPLACE TABLE t (c INT PRIMARY KEY)")
    assert o.table_changes[0].type == "CREATE" and names(cat, "t") == ["c"]
    o = one(cat, "CREATE TABLE IF NOT EXISTS new_t (b INT)")
    assert not o.ignored and names(cat, "new_t") == ["b"]


def test_create_table_like():
    cat = cat_with("CREATE TABLE src (a INT PRIMARY KEY, b VARCHAR(3)) CHARSET latin1 COMMENT 'c'")
    one(cat, "CREATE TABLE copy1 LIKE src")
    one(cat, "CREATE TABLE other.copy2 (LIKE shop.src)")
    for key in [(DB, "copy1"), ("other", "copy2")]:
        t = cat.get(*key)
        assert (t.database, t.table) == key
        assert t.columns == cat.get(DB, "src").columns and t.primary_key == ("a",) and t.comment == "c"
    # the copy keeps the source's default charset for later columns
    one(cat, "ALTER TABLE copy1 ADD c CHAR(2)")
    assert col(cat, "copy1", "c").charset == "latin1"
    with pytest.raises(UnparseableDdlError, match="not in the schema catalog"):
        cat.apply("CREATE TABLE x LIKE nope", DB)


@pytest.mark.parametrize(
    "ddl",
    [
        "CREATE TABLE t2 AS SELECT * FROM t",
        "CREATE TABLE t2 SELECT a FROM t",
        "CREATE TABLE t2 (a INT) SELECT a FROM t",
        "CREATE TABLE t2 (a INT) IGNORE SELECT a FROM t",
    ],
)
def test_create_table_as_select_is_unparseable(ddl):
    cat = cat_with("CREATE TABLE t (a INT)")
    with pytest.raises(UnparseableDdlError) as ei:
        cat.apply(ddl, DB)
    assert "CREATE TABLE ... SELECT is not supported" in str(ei.value)
    assert "binlog_format=ROW" in str(ei.value)
    assert cat.get(DB, "t2") is None


def test_charset_sources():
    cat = SchemaCatalog(database_charsets={"seeded": "latin1"})
    one(cat, "CREATE DATABASE d1 DEFAULT CHARACTER SET = utf8mb4 COLLATE utf8mb4_bin", None)
    one(cat, "CREATE SCHEMA d2 COLLATE latin1_swedish_ci", None)
    one(cat, "CREATE DATABASE d3", None)
    for db in ("d1", "d2", "d3", "seeded"):
        one(cat, "CREATE TABLE t (a VARCHAR(3), b INT, c TEXT)", db)
    assert [col(cat, "t", "a", db).charset for db in ("d1", "d2", "d3", "seeded")] == [
        "utf8mb4",
        "latin1",
        None,
        "latin1",
    ]
    assert col(cat, "t", "b", "d1").charset is None
    one(cat, "CREATE TABLE t2 (a VARCHAR(3)) COLLATE utf8mb3_general_ci", "d1")
    assert col(cat, "t2", "a", "d1").charset == "utf8mb3"
    one(cat, "ALTER DATABASE d3 CHARACTER SET latin2", None)
    one(cat, "CREATE TABLE t3 (a VARCHAR(3))", "d3")
    assert col(cat, "t3", "a", "d3").charset == "latin2"


# ----------------------------------------------------------------------------------------------
# ALTER TABLE
# ----------------------------------------------------------------------------------------------


@pytest.fixture
def cat():
    return cat_with(
        "CREATE TABLE t (id INT NOT NULL, a INT, b VARCHAR(10), PRIMARY KEY (id)) CHARSET utf8mb4"
    )


def test_add_column_positions(cat):
    o = one(
        cat, "ALTER TABLE t ADD COLUMN c INT FIRST, ADD d INT AFTER a, ADD e DATE, ADD COLUMN f BIT AFTER `e`"
    )
    assert names(cat, "t") == ["c", "id", "a", "d", "b", "e", "f"]
    assert [c.position for c in cat.get(DB, "t").columns] == [1, 2, 3, 4, 5, 6, 7]
    [change] = o.table_changes
    assert change == TableChange("ALTER", DB, "t", cat.get(DB, "t"))
    assert not o.ignored and o.database == DB


def test_add_column_list_and_if_not_exists(cat):
    one(cat, "ALTER TABLE t ADD COLUMN (x INT NOT NULL, y VARCHAR(5) CHARACTER SET latin1)")
    assert names(cat, "t")[-2:] == ["x", "y"]
    assert not col(cat, "t", "x").nullable and col(cat, "t", "y").charset == "latin1"
    one(cat, "ALTER TABLE t ADD (z INT)")
    one(cat, "ALTER TABLE t ADD COLUMN IF NOT EXISTS z BIGINT, ADD COLUMN IF NOT EXISTS w INT")
    assert col(cat, "t", "z").data_type == "int" and names(cat, "t")[-1] == "w"
    # new character columns get the table's default charset
    one(cat, "ALTER TABLE t ADD v VARCHAR(3)")
    assert col(cat, "t", "v").charset == "utf8mb4"


def test_drop_columns(cat):
    one(cat, "ALTER TABLE t DROP COLUMN a, DROP b")
    assert names(cat, "t") == ["id"]
    one(cat, "ALTER TABLE t DROP COLUMN IF EXISTS nope")
    assert names(cat, "t") == ["id"]


def test_modify_and_change(cat):
    one(cat, "ALTER TABLE t MODIFY COLUMN b VARCHAR(50) CHARACTER SET latin1 NOT NULL COMMENT 'bee' FIRST")
    assert names(cat, "t") == ["b", "id", "a"]
    assert col(cat, "t", "b") == ColumnSchema(
        "b", "varchar", 1, False, length=50, charset="latin1", comment="bee"
    )
    one(cat, "ALTER TABLE t MODIFY b VARCHAR(60)")  # full redefinition: comment/NOT NULL/charset reset
    assert col(cat, "t", "b") == ColumnSchema("b", "varchar", 1, True, length=60, charset="utf8mb4")
    one(cat, "ALTER TABLE t CHANGE COLUMN a a2 BIGINT UNSIGNED NOT NULL AFTER b, CHANGE id id SMALLINT")
    assert names(cat, "t") == ["b", "a2", "id"]
    assert col(cat, "t", "a2").data_type == "bigint" and col(cat, "t", "a2").unsigned
    assert col(cat, "t", "id").data_type == "smallint" and not col(cat, "t", "id").nullable  # still PK


def test_rename_column_updates_primary_key(cat):
    one(cat, "ALTER TABLE t RENAME COLUMN id TO ident")
    assert names(cat, "t") == ["ident", "a", "b"] and cat.get(DB, "t").primary_key == ("ident",)
    one(cat, "ALTER TABLE t CHANGE ident id2 INT NOT NULL")
    assert cat.get(DB, "t").primary_key == ("id2",)


def test_alter_column_default_has_no_effect(cat):
    before = cat.get(DB, "t")
    o = one(
        cat, "ALTER TABLE t ALTER COLUMN a SET DEFAULT 5, ALTER COLUMN b DROP DEFAULT, ALTER a SET DEFAULT 1"
    )
    assert cat.get(DB, "t") == before and o.table_changes[0].type == "ALTER"


def test_primary_key_changes(cat):
    one(cat, "ALTER TABLE t DROP PRIMARY KEY, ADD PRIMARY KEY (a, b)")
    t = cat.get(DB, "t")
    assert t.primary_key == ("a", "b") and not t.column("a").nullable and not t.column("b").nullable
    assert not t.column("id").nullable  # stays NOT NULL after the PK is dropped
    one(cat, "ALTER TABLE t DROP INDEX `PRIMARY`")
    assert cat.get(DB, "t").primary_key == ()
    one(cat, "ALTER TABLE t ADD CONSTRAINT pk PRIMARY KEY (id)")
    assert cat.get(DB, "t").primary_key == ("id",)
    one(cat, "DROP INDEX `PRIMARY` ON t")
    assert cat.get(DB, "t").primary_key == ()
    one(cat, "ALTER TABLE t ADD PRIMARY KEY USING BTREE (b(3))")  # sqlglot fallback
    assert cat.get(DB, "t").primary_key == ("b",)
    one(cat, "ALTER TABLE t DROP COLUMN b")  # dropping the key column drops the key
    assert cat.get(DB, "t").primary_key == ()
    one(cat, "ALTER TABLE t MODIFY a INT AUTO_INCREMENT PRIMARY KEY")
    assert cat.get(DB, "t").primary_key == ("a",)


@pytest.mark.parametrize("spec", ["RENAME TO t2", "RENAME AS t2", "RENAME t2"])
def test_alter_rename_table(cat, spec):
    before = cat.get(DB, "t")
    o = one(cat, f"ALTER TABLE t {spec}")
    assert cat.get(DB, "t") is None
    after = cat.get(DB, "t2")
    assert after.columns == before.columns and after.primary_key == ("id",)
    assert o.table_changes == (TableChange("ALTER", DB, "t2", after, previous_name=(DB, "t")),)


def test_alter_rename_to_other_database_with_column_change(cat):
    o = one(cat, "ALTER TABLE shop.t ADD c INT, RENAME TO archive.t_old")
    assert cat.get("archive", "t_old").column_names == ["id", "a", "b", "c"]
    assert o.database == "archive" and o.table_changes[0].previous_name == (DB, "t")


def test_table_options_and_index_specs_do_not_change_columns(cat):
    before = cat.get(DB, "t")
    for spec in [
        "ENGINE=InnoDB",
        "AUTO_INCREMENT=100",
        "ROW_FORMAT=DYNAMIC",
        "ALGORITHM=INPLACE, LOCK=NONE",
        "ADD INDEX i (a)",
        "ADD UNIQUE KEY u (b)",
        "ADD FULLTEXT INDEX f (b)",
        "ADD SPATIAL INDEX s (a)",
        "ADD CONSTRAINT fk FOREIGN KEY (a) REFERENCES o (x)",
        "DROP FOREIGN KEY fk",
        "DROP INDEX i",
        "DROP KEY u",
        "ADD CHECK (a > 0)",
        "DROP CONSTRAINT c",
        "DROP CHECK c",
        "RENAME INDEX i TO j",
        "ADD INDEX pre (b(3))",
        "FORCE",
        "ORDER BY a",
        "ALTER INDEX i INVISIBLE",
        "ENGINE InnoDB, FORCE",
    ]:
        o = one(cat, f"ALTER TABLE t {spec}")
        assert cat.get(DB, "t") == before, spec
        assert o.table_changes[0].type == "ALTER" and not o.ignored
    one(cat, "ALTER TABLE t COMMENT='hello'")
    assert cat.get(DB, "t").comment == "hello"
    one(cat, "ALTER TABLE t COMMENT 'again', ENGINE=InnoDB")
    assert cat.get(DB, "t").comment == "again"


def test_table_default_charset_applies_to_later_columns_only(cat):
    one(cat, "ALTER TABLE t DEFAULT CHARSET=latin1, ADD c VARCHAR(3)")
    assert col(cat, "t", "b").charset == "utf8mb4" and col(cat, "t", "c").charset == "latin1"
    one(cat, "ALTER TABLE t CHARACTER SET utf8mb3")
    one(cat, "ALTER TABLE t ADD d CHAR(1)")
    assert col(cat, "t", "d").charset == "utf8mb3"


def test_convert_to_character_set():
    cat = cat_with(
        "CREATE TABLE t (a INT, b TEXT, c VARCHAR(3), e ENUM('x'), tt TINYTEXT, lt LONGTEXT, bl BLOB, "
        "vb VARBINARY(3), j JSON) CHARSET latin1"
    )
    one(cat, "ALTER TABLE t CONVERT TO CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci")
    t = cat.get(DB, "t")
    assert [(c.data_type, c.charset) for c in t.columns] == [
        ("int", None),
        ("mediumtext", "utf8mb4"),
        ("varchar", "utf8mb4"),
        ("enum", "utf8mb4"),
        ("text", "utf8mb4"),
        ("longtext", "utf8mb4"),
        ("blob", None),
        ("varbinary", None),
        ("json", "utf8mb4"),
    ]
    one(cat, "ALTER TABLE t ADD z VARCHAR(2)")
    assert col(cat, "t", "z").charset == "utf8mb4"
    one(cat, "ALTER TABLE t CONVERT TO CHARSET latin1")  # never shrinks the TEXT type
    assert col(cat, "t", "b").data_type == "mediumtext" and col(cat, "t", "b").charset == "latin1"


def test_alter_online_ignore_and_mariadb_extensions(cat):
    one(cat, "ALTER ONLINE TABLE t ADD c INT")
    one(cat, "ALTER IGNORE TABLE t ADD d INT FIRST")
    one(cat, "ALTER TABLE IF EXISTS t ADD e INT")
    o = one(cat, "ALTER TABLE IF EXISTS nope ADD e INT")
    assert o.ignored
    assert names(cat, "t") == ["d", "id", "a", "b", "c", "e"]


def test_alter_unknown_table_is_ignored_with_warning(cat):
    log = ListLogger()
    o = one(cat, "ALTER TABLE elsewhere.x ADD c INT", logger=log)
    assert o.ignored and o.table_changes == () and o.database == "elsewhere"
    assert "not in the schema catalog" in log.warnings[0]


def test_alter_out_of_sync_raises_and_leaves_catalog_unchanged(cat):
    before = cat.tables()
    with pytest.raises(UnparseableDdlError, match="does not exist"):
        cat.apply("ALTER TABLE t ADD c INT, DROP COLUMN nope", DB)
    with pytest.raises(UnparseableDdlError, match="already exists"):
        cat.apply("ALTER TABLE t ADD a INT", DB)
    with pytest.raises(UnparseableDdlError, match="does not exist"):
        cat.apply("ALTER TABLE t ADD c INT AFTER nope", DB)
    assert cat.tables() == before


def test_seeded_catalog_from_snapshot_schema():
    snap = TableSchema(
        "inventory",
        "customers",
        (
            ColumnSchema("id", "int", 1, False),
            ColumnSchema("email", "varchar", 2, False, length=255, charset="utf8mb4"),
        ),
        ("id",),
        "",
    )
    cat = SchemaCatalog(
        {("inventory", "customers"): snap}, table_charsets={("inventory", "customers"): "utf8mb4"}
    )
    one(cat, "ALTER TABLE customers ADD COLUMN phone VARCHAR(20) AFTER id", "inventory")
    t = cat.get("inventory", "customers")
    assert t.column_names == ["id", "phone", "email"]
    assert t.column("phone") == ColumnSchema("phone", "varchar", 2, length=20, charset="utf8mb4")
    assert t.column("email").position == 3
    unseeded = SchemaCatalog({("inventory", "customers"): snap})
    one(unseeded, "ALTER TABLE customers ADD COLUMN phone VARCHAR(20)", "inventory")
    assert unseeded.get("inventory", "customers").column("phone").charset is None  # unknown


def test_mariadb_and_mysql_column_attributes_sqlglot_does_not_know():
    # whole statement fails in sqlglot -> per-element parse without the no-op attributes
    cat = cat_with(
        "CREATE TABLE g (a INT, b INT AS (a * 2) PERSISTENT, d VARCHAR(10) COMPRESSED, "
        "s INT SERIAL DEFAULT VALUE, p POINT REF_SYSTEM_ID=4326, t TEXT COMPRESSED=zlib, "
        "g GEOMETRY NOT NULL SRID 4326, f INT COLUMN_FORMAT FIXED STORAGE DISK, storage INT, "
        "v INT VISIBLE) WITH SYSTEM VERSIONING"
    )
    t = cat.get(DB, "g")
    assert t.column_names == ["a", "b", "d", "s", "p", "t", "g", "f", "storage", "v"]
    assert [c.data_type for c in t.columns] == [
        "int",
        "int",
        "varchar",
        "int",
        "point",
        "text",
        "geometry",
        "int",
        "int",
        "int",
    ]
    assert not t.column("s").nullable and not t.column("g").nullable  # SERIAL DEFAULT VALUE
    one(cat, "ALTER TABLE g ADD COLUMN z TEXT COMPRESSED AFTER a, MODIFY d VARCHAR(20) COMPRESSED NOT NULL")
    assert names(cat, "g")[:3] == ["a", "z", "b"] and col(cat, "g", "d").length == 20


def test_create_table_token_fallback_table_options():
    # COMPRESSED makes sqlglot fail on the whole statement: options are read from the tokens
    cat = cat_with(
        "CREATE TABLE q (a INT COMPRESSED, b VARCHAR(2), PRIMARY KEY (a)) ENGINE=MERGE UNION=(x, y) "
        "COMMENT = 'from tokens' DEFAULT CHARACTER SET = latin1 PARTITION BY HASH (a) PARTITIONS 2"
    )
    t = cat.get(DB, "q")
    assert (t.comment, t.primary_key, t.column("b").charset) == ("from tokens", ("a",), "latin1")


def test_mysql8_ctas_binlog_form():
    # MySQL 8 logs CREATE TABLE ... SELECT as SHOW CREATE TABLE text + START TRANSACTION
    cat = cat_with(
        "CREATE TABLE `ctas` (\n  `id` int NOT NULL,\n"
        "  `b` varchar(3) CHARACTER SET utf8mb4 COLLATE utf8mb4_0900_ai_ci DEFAULT NULL,\n"
        "  `g` geometry NOT NULL /*!80003 SRID 4326 */,\n  `j` json DEFAULT NULL\n) START TRANSACTION",
        server_version="8.0.36",
    )
    t = cat.get(DB, "ctas")
    assert [(c.name, c.data_type, c.nullable, c.charset) for c in t.columns] == [
        ("id", "int", False, None),
        ("b", "varchar", True, "utf8mb4"),
        ("g", "geometry", False, None),
        ("j", "json", True, None),
    ]


def test_executable_comment_version_gating():
    ddl = "CREATE TABLE t (a INT /*M!100500 , m INT */ /*!50100 , o INT */ /*!80099 , n INT */)"
    assert names(cat_with(ddl, server_version="10.4.1-MariaDB"), "t") == ["a", "o"]
    assert names(cat_with(ddl, server_version="10.11.6-MariaDB-log"), "t") == ["a", "m", "o"]
    assert names(cat_with(ddl, server_version="8.0.36"), "t") == ["a", "o"]
    assert names(cat_with(ddl, server_version="8.1.0"), "t") == ["a", "o", "n"]
    assert names(cat_with(ddl), "t") == ["a", "m", "o", "n"]  # binlog text: every /*! ran
    quoted = "CREATE TABLE t (a VARCHAR(9) DEFAULT '/*!50100 x */' COMMENT '/*!', b INT)"
    assert col(cat_with(quoted), "t", "a").comment == "/*!"


def test_mariadb_modify_change_if_exists_and_partitioning(cat):
    one(cat, "ALTER TABLE t MODIFY COLUMN IF EXISTS a BIGINT, CHANGE COLUMN IF EXISTS nope x INT")
    assert col(cat, "t", "a").data_type == "bigint" and names(cat, "t") == ["id", "a", "b"]
    one(cat, "ALTER TABLE t CHANGE COLUMN IF EXISTS a a2 INT FIRST, MODIFY COLUMN IF EXISTS nope INT")
    assert names(cat, "t") == ["a2", "id", "b"]
    before = cat.get(DB, "t")
    for spec in [
        "PARTITION BY HASH(id) PARTITIONS 4",
        "REMOVE PARTITIONING",
        "ADD PARTITION (PARTITION p1 VALUES LESS THAN (10))",
        "DROP PARTITION p1",
        "TRUNCATE PARTITION p0",
        "COALESCE PARTITION 2",
    ]:
        one(cat, f"ALTER TABLE t {spec}")
        assert cat.get(DB, "t") == before, spec


# ----------------------------------------------------------------------------------------------
# RENAME / DROP / TRUNCATE / databases
# ----------------------------------------------------------------------------------------------


def test_rename_table_multiple_and_swap():
    cat = cat_with("CREATE TABLE a (x INT)", "CREATE TABLE b (y INT)", "CREATE TABLE c (z INT)")
    o = one(cat, "RENAME TABLE a TO a2, c TO other.c2")
    assert [ch.type for ch in o.table_changes] == ["ALTER", "ALTER"]
    assert o.table_changes[0].previous_name == (DB, "a") and o.table_changes[1].previous_name == (DB, "c")
    assert cat.get(DB, "a2").column_names == ["x"] and cat.get("other", "c2").column_names == ["z"]
    one(cat, "RENAME TABLE a2 TO tmp, b TO a2, tmp TO b")  # swap
    assert cat.get(DB, "a2").column_names == ["y"] and cat.get(DB, "b").column_names == ["x"]
    assert cat.get(DB, "tmp") is None
    log = ListLogger()
    o = one(cat, "RENAME TABLE nope TO nope2", logger=log)
    assert o.ignored and log.warnings


def test_drop_table():
    cat = cat_with("CREATE TABLE a (x INT)", "CREATE TABLE b (y INT)", "CREATE TABLE c (z INT)")
    o = one(cat, "DROP TABLE IF EXISTS `a`,`nope` /* generated by server */")
    assert o.table_changes == (TableChange("DROP", DB, "a", None),)
    o = one(cat, "DROP TABLE b, shop.c RESTRICT")
    assert [(ch.type, ch.table) for ch in o.table_changes] == [("DROP", "b"), ("DROP", "c")]
    assert cat.tables() == {}
    o = one(cat, "DROP TEMPORARY TABLE IF EXISTS tmp")
    assert o.ignored


@pytest.mark.parametrize("sql", ["TRUNCATE TABLE t", "TRUNCATE t", "TRUNCATE shop.t"])
def test_truncate(sql):
    cat = cat_with("CREATE TABLE t (a INT)")
    before = cat.tables()
    o = one(cat, sql)
    assert o.truncated == ((DB, "t"),) and o.table_changes == () and not o.ignored
    assert cat.tables() == before


def test_create_and_drop_database():
    cat = SchemaCatalog()
    o = one(cat, "CREATE DATABASE IF NOT EXISTS sales CHARACTER SET utf8mb4", None)
    assert o.created_databases == ("sales",) and o.database == "sales"
    one(cat, "CREATE TABLE sales.a (x INT)", None)
    one(cat, "CREATE TABLE sales.b (x INT)", None)
    one(cat, "CREATE TABLE keep (x INT)", "other")
    o = one(cat, "CREATE DATABASE IF NOT EXISTS sales", None)
    assert o.ignored
    o = one(cat, "DROP SCHEMA IF EXISTS sales", "other")
    assert o.dropped_databases == ("sales",) and o.database == "sales"
    assert sorted((c.type, c.table) for c in o.table_changes) == [("DROP", "a"), ("DROP", "b")]
    assert list(cat.tables()) == [("other", "keep")]
    o = one(cat, "DROP DATABASE nothing_here", None)
    assert o.dropped_databases == ("nothing_here",) and o.table_changes == ()


def test_alter_database_is_ignored():
    cat = cat_with("CREATE TABLE t (a INT)")
    before = cat.tables()
    o = one(cat, "ALTER DATABASE shop CHARACTER SET = utf8mb4 COLLATE = utf8mb4_bin")
    assert o.ignored and cat.tables() == before
    assert one(cat, "ALTER SCHEMA DEFAULT CHARACTER SET latin1").ignored


# ----------------------------------------------------------------------------------------------
# Ignored statements, multi-statement events, comments
# ----------------------------------------------------------------------------------------------

IGNORED = [
    "BEGIN",
    "COMMIT",
    "ROLLBACK",
    "XA START 'x'",
    "SET NAMES utf8mb4",
    "SET @a = 1, SESSION sql_mode = ''",
    "GRANT ALL PRIVILEGES ON *.* TO 'u'@'%'",
    "REVOKE SELECT ON shop.t FROM 'u'@'%'",
    "CREATE USER 'u'@'%' IDENTIFIED BY 'p'",
    "DROP USER 'u'@'%'",
    "RENAME USER 'a'@'%' TO 'b'@'%'",
    "FLUSH PRIVILEGES",
    "FLUSH TABLES",
    "ANALYZE TABLE t",
    "OPTIMIZE TABLE t",
    "REPAIR TABLE t",
    "CREATE VIEW v AS SELECT * FROM t",
    "CREATE OR REPLACE ALGORITHM=UNDEFINED DEFINER=`root`@`%` SQL SECURITY DEFINER VIEW v AS SELECT 1",
    "DROP VIEW IF EXISTS v",
    "ALTER VIEW v AS SELECT 2",
    "CREATE INDEX i ON t (a)",
    "CREATE UNIQUE INDEX u ON t (a)",
    "DROP INDEX i ON t",
    "CREATE TEMPORARY TABLE tmp (a INT)",
    "DROP TEMPORARY TABLE tmp",
    "CREATE DEFINER=`root`@`localhost` TRIGGER trg AFTER INSERT ON t FOR EACH ROW BEGIN INSERT INTO log VALUES (1); DROP TABLE t; END",
    "CREATE PROCEDURE p() BEGIN ALTER TABLE t DROP COLUMN a; DROP TABLE t; END",
    "CREATE FUNCTION f(x INT) RETURNS INT DETERMINISTIC BEGIN DECLARE y INT; SET y = x; RETURN y; END",
    "CREATE EVENT e ON SCHEDULE EVERY 1 DAY DO BEGIN TRUNCATE t; END",
    "DROP PROCEDURE IF EXISTS p",
    "DROP FUNCTION f",
    "DROP TRIGGER trg",
    "DROP EVENT e",
    "INSERT INTO t VALUES (1)",
    "UPDATE t SET a = 1",
    "DELETE FROM t",
    "REPLACE INTO t VALUES (1)",
    "CREATE SEQUENCE s",
    "CREATE ROLE r",
    "LOCK TABLES t WRITE",
    "UNLOCK TABLES",
    "/* just a comment */ SELECT 1",
]


@pytest.mark.parametrize("sql", IGNORED)
def test_ignored_statements(sql):
    cat = cat_with("CREATE TABLE t (a INT PRIMARY KEY)")
    before = cat.tables()
    outcomes = cat.apply(sql, DB)
    assert outcomes and all(o.ignored and o.table_changes == () for o in outcomes)
    assert cat.tables() == before


def test_empty_and_comment_only_events():
    cat = SchemaCatalog()
    assert cat.apply("", DB) == []
    assert cat.apply("  -- nothing\n/* at all */ ", DB) == []


def test_multi_statement_event_with_use():
    cat = SchemaCatalog()
    outcomes = cat.apply(
        "CREATE TABLE a (x INT); USE other; CREATE TABLE b (y INT);\n ALTER TABLE b ADD z INT ; ", DB
    )
    assert [o.ignored for o in outcomes] == [False, True, False, False]
    assert outcomes[0].statement == "CREATE TABLE a (x INT)"
    assert cat.get(DB, "a") is not None and cat.get("other", "b").column_names == ["y", "z"]


def test_stored_program_body_is_not_split():
    cat = cat_with("CREATE TABLE t (a INT)")
    outcomes = cat.apply("CREATE PROCEDURE p() BEGIN DROP TABLE t; CREATE TABLE u (b INT); END", DB)
    assert len(outcomes) == 1 and outcomes[0].ignored
    assert set(cat.tables()) == {(DB, "t")}


def test_comments_everywhere():
    cat = SchemaCatalog()
    one(
        cat,
        "/* leading */ CREATE TABLE t ( -- a comment\n a INT, # hash comment\n b INT /* inline */ "
        "COMMENT 'not -- a comment', c VARCHAR(3) DEFAULT '/* nor this */')",
    )
    assert names(cat, "t") == ["a", "b", "c"] and col(cat, "t", "b").comment == "not -- a comment"


# ----------------------------------------------------------------------------------------------
# Unparseable statements
# ----------------------------------------------------------------------------------------------


def test_unparseable_error_message():
    cat = cat_with("CREATE TABLE t (a INT)")
    long_tail = ", ".join(f"c{i} INT" for i in range(200))
    sql = f"CREATE TABLE bad (x INT WIBBLE WOBBLE, {long_tail})"
    with pytest.raises(UnparseableDdlError) as ei:
        cat.apply(sql, DB)
    err = ei.value
    msg = str(err)
    assert isinstance(err, ValueError)
    assert err.statement == sql and "WIBBLE" in msg and "CREATE TABLE bad" in msg
    assert "c199" not in msg and "..." in msg  # statement truncated to ~300 characters
    assert "sqlglot" in err.reason
    assert "skip_unparseable_ddl=True" in msg
    assert "schema.history.internal.skip.unparseable.ddl" in msg
    assert cat.get(DB, "bad") is None


def test_skip_unparseable_logs_warning_and_keeps_catalog(caplog):
    cat = cat_with("CREATE TABLE t (a INT)")
    before = cat.tables()
    log = ListLogger()
    outcomes = cat.apply("ALTER TABLE t ADD b INT WIBBLE WOBBLE", DB, skip_unparseable=True, logger=log)
    assert [o.ignored for o in outcomes] == [True]
    assert cat.tables() == before
    assert len(log.warnings) == 1 and "ALTER TABLE t ADD b INT WIBBLE WOBBLE" in log.warnings[0]
    assert "skip.unparseable.ddl" in log.warnings[0]
    # default logger: this module's
    with caplog.at_level(logging.WARNING, logger="dagster_mysql_cdc.source.ddl"):
        cat.apply("CREATE TABLE x AS SELECT 1", DB, skip_unparseable=True)
    assert "Skipping unparseable DDL statement" in caplog.text


def test_apply_is_atomic_per_event():
    cat = cat_with("CREATE TABLE t (a INT)")
    before = cat.tables()
    with pytest.raises(UnparseableDdlError):
        cat.apply("ALTER TABLE t ADD b INT; ALTER TABLE t DROP COLUMN nope", DB)
    assert cat.tables() == before
    outcomes = cat.apply(
        "ALTER TABLE t ADD b INT; ALTER TABLE t DROP COLUMN nope; ALTER TABLE t ADD c INT",
        DB,
        skip_unparseable=True,
        logger=ListLogger(),
    )
    assert [o.ignored for o in outcomes] == [False, True, False]
    assert names(cat, "t") == ["a", "b", "c"]


def test_unparseable_tokenizer_error():
    cat = SchemaCatalog()
    with pytest.raises(UnparseableDdlError, match="tokenizer"):
        cat.apply("CREATE TABLE t (a VARCHAR(3) DEFAULT 'unterminated)", DB)
