"""Which statement the preflight reads the session's grants with (source/connection.py
``_grant_lines``): MySQL 8's active roles need ``USING`` (MariaDB is checked against the real
server in tests/test_grants.py; no MySQL server runs here), and the roles granted but not
enabled that an error names (``_roles_not_enabled``)."""

from dagster_mysql_cdc.source import connection


class _Cursor:
    def __init__(self, conn):
        self.conn = conn
        self.rows: list[tuple] = []

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def execute(self, sql):
        self.conn.executed.append(sql)
        self.rows = self.conn.answers.get(sql, [])

    def fetchone(self):
        return self.rows[0] if self.rows else None

    def fetchall(self):
        return self.rows


class _Conn:
    def __init__(self, server, answers):
        self.server, self.answers, self.executed = server, answers, []

    def get_server_info(self):
        return self.server

    def cursor(self, *a):
        return _Cursor(self)


def test_mysql_reads_the_grants_of_its_active_roles():
    roles = "`cdc_capture`@`%`,`audit`@`%`"
    using = f"SHOW GRANTS FOR CURRENT_USER() USING {roles}"
    conn = _Conn(
        "8.0.36",
        {
            "SELECT CURRENT_ROLE()": [(roles,)],
            using: [("GRANT USAGE ON *.* TO `cdc`@`%`",), ("GRANT SELECT ON `shop`.* TO `cdc`@`%`",)],
        },
    )
    glob, per_db = connection._granted_privileges(conn)
    assert conn.executed == ["SELECT CURRENT_ROLE()", using]
    assert per_db == {"shop": {"SELECT"}}


def test_mysql_without_an_active_role_and_mariadb():
    conn = _Conn("8.0.36", {"SELECT CURRENT_ROLE()": [("NONE",)]})
    connection._grant_lines(conn)
    assert conn.executed == ["SELECT CURRENT_ROLE()", "SHOW GRANTS FOR CURRENT_USER()"]
    conn = _Conn("10.11.6-MariaDB-0+deb12u1", {})
    connection._grant_lines(conn)
    assert conn.executed == ["SHOW GRANTS"]


def test_roles_granted_but_not_enabled_are_named():
    lines = [
        ("GRANT `cdc_capture` TO `cdc`@`%`",),
        ("GRANT `r1`@`%`,`r2`@`%` TO `cdc`@`%`",),
        ("GRANT USAGE ON *.* TO `cdc`@`%`",),
    ]
    conn = _Conn(
        "10.11.6-MariaDB", {"SELECT CURRENT_ROLE()": [(None,)], "SHOW GRANTS FOR CURRENT_USER()": lines}
    )
    assert connection._roles_not_enabled(conn) == ["`cdc_capture`", "`r1`@`%`", "`r2`@`%`"]
    enabled = _Conn("10.11.6-MariaDB", {"SELECT CURRENT_ROLE()": [("cdc_capture",)]})
    assert connection._roles_not_enabled(enabled) == []
