"""Debezium ``snapshot.select.statement.overrides``: the rows an initial snapshot reads from a table.

Debezium lists the tables in ``snapshot.select.statement.overrides`` and gives each one's statement
in ``snapshot.select.statement.overrides.<database>.<table>``; here both are one mapping
``{"database.table": "SELECT * FROM database.table WHERE ..."}``.

Debezium runs the statement verbatim. Here it is parsed (sqlglot, MySQL dialect) and only its
``WHERE`` condition is used, validated exactly like a signal's ``additional-conditions`` filter
(:func:`.signals.validate_filter`: columns of the table, literals, comparisons, ``AND``/``OR``/
``NOT``, ``IN``, ``BETWEEN``, ``LIKE``, ``IS NULL``, arithmetic, ``CAST``; no function calls,
subqueries or comments). The snapshot still selects the captured columns itself (with the
conversions of :func:`.types.select_expression`), so the statement must be
``SELECT * FROM <that table> [WHERE <condition>]``: anything else (a column list, joins,
``GROUP BY``, ``ORDER BY``, ``LIMIT``, another table) is refused with a message saying so.

Only initial (blocking) snapshots use the overrides, as in Debezium; incremental snapshots take
``additional-conditions`` in their signal. A full re-snapshot with an override tombstones lake
rows outside the condition (they are absent from the snapshot).
"""

from __future__ import annotations

from collections.abc import Mapping

import sqlglot
from sqlglot import exp

from ..errors import ConfigurationError
from .signals import UnsafeFilter, validate_filter

_CLAUSES = {
    "joins": "JOIN",
    "laterals": "LATERAL",
    "group": "GROUP BY",
    "having": "HAVING",
    "order": "ORDER BY",
    "limit": "LIMIT",
    "offset": "OFFSET",
    "with": "WITH",
    "distinct": "DISTINCT",
}


def _fail(table: str, sql: str, why: str) -> ConfigurationError:
    return ConfigurationError(
        f"snapshot_select_statement_overrides[{table!r}] = {sql!r}: {why}. Write it as "
        f"'SELECT * FROM {table} WHERE <condition>' (Debezium snapshot.select.statement.overrides)"
    )


def override_condition(table: str, sql: str) -> str | None:
    """The ``WHERE`` condition of one override statement, unvalidated against columns.

    Args:
        table: ``database.table`` the override is for.
        sql: the statement.

    Returns:
        The condition as written (MySQL syntax), or ``None`` for ``SELECT * FROM table``.

    Raises:
        ConfigurationError: not one plain ``SELECT * FROM <table> [WHERE ...]`` statement.
    """
    db, sep, name = table.partition(".")
    if not sep or not db or not name:
        raise ConfigurationError(
            f"snapshot_select_statement_overrides key {table!r} must be 'database.table'"
        )
    try:
        if any(t.comments for t in sqlglot.tokenize(sql, read="mysql")):
            raise _fail(table, sql, "comments are not allowed")
        parsed = [p for p in sqlglot.parse(sql, read="mysql") if p is not None]
    except (sqlglot.errors.ParseError, sqlglot.errors.TokenError) as e:
        raise _fail(table, sql, f"not valid SQL ({str(e).splitlines()[0]})") from None
    if len(parsed) != 1 or not isinstance(parsed[0], exp.Select):
        raise _fail(table, sql, "it must be one SELECT statement")
    sel = parsed[0]
    if len(sel.expressions) != 1 or not isinstance(sel.expressions[0], exp.Star):
        raise _fail(
            table,
            sql,
            "the projection must be * (the captured columns are chosen by column_include_list/column_exclude_list)",
        )
    for clause, label in _CLAUSES.items():
        if sel.args.get(clause):
            raise _fail(table, sql, f"{label} is not allowed")
    from_ = sel.args.get("from") or sel.args.get("from_")
    src = from_.this if from_ is not None else None
    if not isinstance(src, exp.Table) or src.args.get("joins"):
        raise _fail(table, sql, "it must read one table")
    if src.name.lower() != name.lower() or (src.db and src.db.lower() != db.lower()):
        raise _fail(table, sql, f"it reads {src.sql(dialect='mysql')}, not {table}")
    where = sel.args.get("where")
    return None if where is None else where.this.sql(dialect="mysql")


def parse_overrides(overrides: Mapping[str, str]) -> tuple[tuple[str, str], ...]:
    """``{"db.table": statement}`` → ``(("db.table", condition), ...)`` for the tables whose
    statement has a ``WHERE`` (keys lower-cased; validated against columns later by
    :func:`checked_condition`).

    Raises:
        ConfigurationError: a key or statement is not of the accepted form.
    """
    out = []
    for table, sql in overrides.items():
        cond = override_condition(table, str(sql))
        if cond is not None:
            out.append((table.lower(), cond))
    return tuple(out)


def checked_condition(table: str, condition: str, columns: list[str]) -> str:
    """``condition`` validated against the table's columns (as a signal filter is).

    Raises:
        ConfigurationError: the condition is not a safe filter over ``columns``.
    """
    try:
        return validate_filter(condition, columns)
    except UnsafeFilter as e:
        raise ConfigurationError(
            f"snapshot_select_statement_overrides[{table!r}]: {str(e).rstrip('.')}. Only a condition over the table's "
            "columns with literals and operators is accepted (like an additional-conditions filter)."
        ) from None
