"""Which databases a DDL statement names (source/ddl/scope.py) and which databases a capture's
filter rules out (TableFilter.may_capture_in): what lets a window carrying DDL elsewhere on the
server be judged (dagster_integration/selection.py ``changed_tables``)."""

from __future__ import annotations

import pytest

from dagster_mysql_cdc.source.ddl.scope import ddl_databases
from dagster_mysql_cdc.source.filters import TableFilter


@pytest.mark.parametrize(
    ("sql", "default", "expected"),
    [
        ("DROP DATABASE other", None, {"other"}),
        ("DROP DATABASE IF EXISTS `other`", "cap", {"other"}),
        ("CREATE SCHEMA other", None, {"other"}),
        ("CREATE TABLE other.t (id INT PRIMARY KEY)", "cap", {"other"}),
        ("CREATE TABLE t (id INT)", "other", {"other"}),
        ("DROP TABLE IF EXISTS a.t, b.u", None, {"a", "b"}),
        ("ALTER TABLE t RENAME TO cap.t2", "other", {"other", "cap"}),
        ("CREATE TABLE cap.x LIKE other.y", None, {"cap", "other"}),
        ("TRUNCATE TABLE other.t", None, {"other"}),
        ("CREATE INDEX i ON other.t (c)", None, {"other"}),
        ("CREATE VIEW other.v AS SELECT * FROM cap.t", None, {"other", "cap"}),
        ("CREATE TABLE other.t (id INT) /*!40101 ENGINE=InnoDB */", None, {"other"}),
        ("CREATE TABLE other.t (id INT) /*!50100 PARTITION BY HASH (id) */", None, None),  # not parsed
        ("DROP TABLE other.t /*M!, cap.u */", None, {"other", "cap"}),  # a MariaDB-only name counts
        ("CREATE TABLE t (id INT)", None, None),  # no session database: cannot be judged
        ("RENAME TABLE other.t TO cap.t", None, None),  # not parsed by sqlglot: cannot be judged
        ("GRANT SELECT ON other.* TO u", None, None),
        ("ALTER DATABASE other CHARACTER SET utf8mb4", None, None),
    ],
)
def test_the_databases_a_statement_names(sql, default, expected):
    assert ddl_databases(sql, default) == expected


def test_a_filter_rules_a_database_out_only_when_no_table_of_it_can_match():
    assert TableFilter().may_capture_in("anything")
    by_db = TableFilter(database_include_list=("cap", "inv.*"))
    assert by_db.may_capture_in("cap") and by_db.may_capture_in("CAP") and by_db.may_capture_in("inventory")
    assert not by_db.may_capture_in("other")
    assert not TableFilter(database_exclude_list=("other",)).may_capture_in("other")
    escaped = TableFilter(table_include_list=(r"cap\.orders", r"cap\.items"))
    assert escaped.may_capture_in("cap") and not escaped.may_capture_in("other")
    # an unescaped dot matches any character: cap.x\.t matches database "capXx" too
    assert TableFilter(table_include_list=(r"cap.x\.t",)).may_capture_in("capXx")
    assert TableFilter(table_include_list=("cap_.*",)).may_capture_in("cap_x")
    only = TableFilter().restricted_to([("cap", "t")])
    assert only.may_capture_in("cap") and not only.may_capture_in("other")
