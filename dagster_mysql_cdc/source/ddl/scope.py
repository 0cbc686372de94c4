"""Which databases a DDL statement can change, read without applying it.

The binlog sensor's look-ahead and a following run's planner (``dagster_integration/selection.py``,
``changed_tables``) cannot tell which captured tables a DDL statement changes without replaying
the schema history, so a window carrying DDL selects every table and ends a following run. A
statement that names only databases the capture rules out (another application's migration, a
benchmark dropping its own database on a shared server) cannot change a captured table: this
module names those databases so the planner can pass over it (issue 42: a DDL elsewhere on the
server used to make the next change wait for a new run, 20 s under the daemon).
"""

from __future__ import annotations

from sqlglot import exp

from .comments import resolve_executable_comments
from .dialect import try_parse_statement


def ddl_databases(sql: str, default_database: str | None) -> set[str] | None:
    """The databases ``sql`` names: the database of ``CREATE``/``DROP DATABASE`` (``SCHEMA``), else
    every table name's database (an unqualified name: ``default_database``, the binlog event's
    session database). Executable comments count whatever the server (every name one may hold).

    Returns:
        the names; ``None`` when the statement cannot be judged (sqlglot cannot parse it, it names
        no table, a three-part name, or an unqualified name without a session database): the
        caller treats it as changing any table.
    """
    # every executable comment kept (MySQL and MariaDB ones, any version): a superset of the names
    tree = try_parse_statement(resolve_executable_comments(sql, None, True))
    if tree is None:
        return None
    kind = str(tree.args.get("kind") or "").upper()
    if isinstance(tree, (exp.Create, exp.Drop)) and kind in ("DATABASE", "SCHEMA"):
        node = tree.find(exp.Table)  # (DROP keeps it among its expressions, CREATE as ``this``)
        name = (node.name or node.text("db")) if node is not None else ""
        return {name} if name else None
    out: set[str] = set()
    for table in tree.find_all(exp.Table):
        if table.text("catalog"):
            return None
        db = table.text("db") or default_database
        if not db:
            return None
        out.add(db)
    return out or None
