"""Foreign keys whose referential actions change child rows without row events in the binlog.

InnoDB executes ``ON DELETE/UPDATE CASCADE``, ``SET NULL`` and ``SET DEFAULT`` inside the storage
engine: MySQL and MariaDB write only the parent's row change to the binlog, never the children's
(MySQL reference manual, "FOREIGN KEY Constraints": cascaded actions "are not written to the binary
log"; Debezium MySQL connector has the same gap). :func:`read_cascading_foreign_keys` reads these
constraints from ``information_schema.REFERENTIAL_CONSTRAINTS`` and ``KEY_COLUMN_USAGE`` so a
parent row change can be turned into a repair of the children it cascaded to
(:func:`cascade_conditions`).
"""

from __future__ import annotations

import datetime as _dt
import decimal
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from sqlglot import exp

#: Referential actions that change child rows (``NO ACTION``/``RESTRICT`` never do).
CHANGING_ACTIONS = ("CASCADE", "SET NULL", "SET DEFAULT")


@dataclass(frozen=True)
class CascadingForeignKey:
    """A foreign key whose ``ON DELETE`` or ``ON UPDATE`` action changes child rows.

    Attributes:
        name: constraint name.
        child: ``(database, table)`` of the referencing (child) table.
        child_columns: referencing columns, in constraint order.
        parent: ``(database, table)`` of the referenced (parent) table.
        parent_columns: referenced columns, same order.
        on_delete, on_update: ``CASCADE``, ``SET NULL``, ``SET DEFAULT``, ``RESTRICT`` or ``NO ACTION``.
    """

    name: str
    child: tuple[str, str]
    child_columns: tuple[str, ...]
    parent: tuple[str, str]
    parent_columns: tuple[str, ...]
    on_delete: str
    on_update: str

    def acts_on(self, op: str) -> str | None:
        """The changing action this key takes for a parent event ``op`` (``u`` or ``d``), else ``None``."""
        action = self.on_delete if op == "d" else self.on_update if op == "u" else "NO ACTION"
        return action if action in CHANGING_ACTIONS else None


def read_cascading_foreign_keys(
    conn: Any, databases: Iterable[str] | None = None
) -> dict[tuple[str, str], list[CascadingForeignKey]]:
    """Foreign keys with a changing action, by parent ``(database, table)``.

    Args:
        conn: an open pymysql connection (SELECT on the tables is enough to see their constraints).
        databases: restrict to child tables in these databases (``None``: all).
    """
    sql = (
        "SELECT rc.CONSTRAINT_SCHEMA, rc.CONSTRAINT_NAME, rc.TABLE_NAME, rc.UNIQUE_CONSTRAINT_SCHEMA, "
        "rc.REFERENCED_TABLE_NAME, rc.DELETE_RULE, rc.UPDATE_RULE, k.COLUMN_NAME, "
        "k.REFERENCED_COLUMN_NAME "
        "FROM information_schema.REFERENTIAL_CONSTRAINTS rc "
        "JOIN information_schema.KEY_COLUMN_USAGE k ON k.CONSTRAINT_SCHEMA = rc.CONSTRAINT_SCHEMA "
        "AND k.CONSTRAINT_NAME = rc.CONSTRAINT_NAME AND k.TABLE_NAME = rc.TABLE_NAME "
        "WHERE (rc.DELETE_RULE IN ('CASCADE', 'SET NULL', 'SET DEFAULT') "
        "OR rc.UPDATE_RULE IN ('CASCADE', 'SET NULL', 'SET DEFAULT'))"
    )
    params: list[Any] = []
    dbs = list(databases or [])
    if dbs:
        sql += " AND rc.CONSTRAINT_SCHEMA IN (" + ",".join(["%s"] * len(dbs)) + ")"
        params += dbs
    sql += " ORDER BY rc.CONSTRAINT_SCHEMA, rc.TABLE_NAME, rc.CONSTRAINT_NAME, k.ORDINAL_POSITION"
    grouped: dict[tuple[str, str, str], dict[str, Any]] = {}
    with conn.cursor() as cur:
        cur.execute(sql, params)
        for cdb, name, ctab, pdb, ptab, on_del, on_upd, col, rcol in cur.fetchall():
            g = grouped.setdefault(
                (cdb, ctab, name),
                {"parent": (pdb, ptab), "on_delete": on_del, "on_update": on_upd, "cols": [], "rcols": []},
            )
            g["cols"].append(col)
            g["rcols"].append(rcol)
    out: dict[tuple[str, str], list[CascadingForeignKey]] = {}
    for (cdb, ctab, name), g in grouped.items():
        fk = CascadingForeignKey(
            name=name,
            child=(cdb, ctab),
            child_columns=tuple(g["cols"]),
            parent=g["parent"],
            parent_columns=tuple(g["rcols"]),
            on_delete=str(g["on_delete"]).upper(),
            on_update=str(g["on_update"]).upper(),
        )
        out.setdefault(fk.parent, []).append(fk)
    return out


def sql_literal(value: Any) -> exp.Expression | None:
    """A MySQL literal for a raw key value (int, float, Decimal, str, date/datetime, ``None``),
    rendered by sqlglot; ``None`` for values without a safe literal (bytes, JSON ...)."""
    if value is None:
        return exp.Null()
    if isinstance(value, bool):
        return exp.Literal.number(int(value))
    if isinstance(value, (int, float, decimal.Decimal)):
        return exp.Literal.number(str(value))
    if isinstance(value, str):
        return exp.Literal.string(value)
    if isinstance(value, (_dt.datetime, _dt.date)):
        return exp.Literal.string(
            value.isoformat(sep=" ") if isinstance(value, _dt.datetime) else value.isoformat()
        )
    return None


def key_in_condition(columns: Sequence[str], values: Iterable[tuple]) -> str | None:
    """``col IN (v1, v2)`` (one column) or ``(c1, c2) IN ((..), (..))`` in MySQL syntax, built with
    sqlglot; ``None`` when a value has no safe literal. ``NULL`` values are left out (they never
    match a foreign key)."""
    rows = []
    for v in values:
        if any(x is None for x in v):
            continue
        lits = [sql_literal(x) for x in v]
        if any(x is None for x in lits):
            return None
        rows.append(lits[0] if len(columns) == 1 else exp.Tuple(expressions=lits))
    if not rows:
        return None
    cols = [exp.column(c, quoted=True) for c in columns]
    lhs = cols[0] if len(cols) == 1 else exp.Tuple(expressions=cols)
    return exp.In(this=lhs, expressions=rows).sql(dialect="mysql")


def cascade_conditions(fk: CascadingForeignKey, action: str, values: Iterable[tuple]) -> str | None:
    """The ``additional-conditions`` filter on the child table that covers every child row the
    parent changes with key ``values`` (old and new parent key tuples) may have cascaded to.

    ``SET NULL`` adds ``OR <child columns> IS NULL`` (the children now hold NULL, not the old
    value). Returns ``None`` when no safe filter can be written (the whole child table is then
    repaired).
    """
    cond = key_in_condition(fk.child_columns, values)
    if cond is None:
        return None
    if action == "SET NULL":
        nulls = " OR ".join(
            f"{exp.column(c, quoted=True).sql(dialect='mysql')} IS NULL" for c in fk.child_columns
        )
        cond = f"{cond} OR {nulls}"
    return cond
