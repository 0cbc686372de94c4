"""Foreign keys whose referential actions change child rows without row events in the binlog.

InnoDB executes ``ON DELETE/UPDATE CASCADE``, ``SET NULL`` and ``SET DEFAULT`` inside the storage
engine: MySQL and MariaDB write only the parent's row change to the binlog, never the children's
(MySQL reference manual, "FOREIGN KEY Constraints": cascaded actions "are not written to the binary
log"; Debezium MySQL connector has the same gap). :func:`read_cascading_foreign_keys` reads these
constraints from ``SHOW CREATE TABLE`` of the captured (child) tables, read with sqlglot's
tokenizer, so a parent row change can be turned into a repair of the children it cascaded to
(:func:`cascade_conditions`).

``SHOW CREATE TABLE`` shows a table's foreign keys to any user with a privilege on the table
(``SELECT`` is enough). ``information_schema.REFERENTIAL_CONSTRAINTS`` is not used: MariaDB lists a
constraint there only to users with a privilege other than ``SELECT`` on the table (10.11: a capture
user with the least-privilege grants sees none of Sakila's 22), which left cascade detection
silently off.
"""

from __future__ import annotations

import datetime as _dt
import decimal
import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import pymysql
import sqlglot
from pymysql.constants import CLIENT
from sqlglot import exp
from sqlglot.tokens import Token, TokenType

log = logging.getLogger(__name__)

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


#: Referential action of a foreign key clause that names none (InnoDB's default).
DEFAULT_ACTION = "RESTRICT"

#: ``SHOW CREATE TABLE`` of a table that no longer exists (dropped after it was listed).
_NO_SUCH_TABLE = 1146


#: Referential actions as ``SHOW CREATE TABLE`` writes them, by their token words.
_ACTIONS = {
    ("CASCADE",): "CASCADE",
    ("SET", "NULL"): "SET NULL",
    ("SET", "DEFAULT"): "SET DEFAULT",
    ("RESTRICT",): "RESTRICT",
    ("NO", "ACTION"): "NO ACTION",
}


class UnreadableForeignKey(ValueError):
    """A ``FOREIGN KEY`` clause of ``SHOW CREATE TABLE`` that cannot be read."""


def _create_table_elements(sql: str) -> list[list[Token]]:
    """The tokens of each column and constraint definition of a ``CREATE TABLE`` statement: the
    top-level ``,``-separated items of its first parenthesised list (sqlglot's MySQL tokenizer, so
    commas inside quoted names, strings and nested parentheses do not split)."""
    out: list[list[Token]] = []
    depth = 0
    for tok in sqlglot.tokenize(sql, read="mysql"):
        if tok.token_type == TokenType.L_PAREN:
            depth += 1
            if depth == 1:
                out.append([])
                continue
        elif tok.token_type == TokenType.R_PAREN:
            depth -= 1
            if depth == 0:
                break
        if depth == 0:
            continue
        if depth == 1 and tok.token_type == TokenType.COMMA:
            out.append([])
        else:
            out[-1].append(tok)
    return [item for item in out if item]


def _read_foreign_key(toks: list[Token], database: str, table: str, n: int) -> CascadingForeignKey:
    """One ``[CONSTRAINT name] FOREIGN KEY [index] (cols) REFERENCES [db.]parent (cols) [ON DELETE
    action] [ON UPDATE action]`` item (tokens), as :func:`foreign_keys_in_create` describes.

    Raises:
        UnreadableForeignKey: the tokens are not such an item.
    """
    i = 0

    def fail(why: str) -> UnreadableForeignKey:
        return UnreadableForeignKey(f"{database}.{table}: {' '.join(t.text for t in toks)!r} ({why})")

    def word(k: int) -> str:
        return toks[k].text.upper() if k < len(toks) and toks[k].token_type != TokenType.IDENTIFIER else ""

    def names() -> tuple[str, ...]:  # ( a, b ) starting at i
        nonlocal i
        if i >= len(toks) or toks[i].token_type != TokenType.L_PAREN:
            raise fail("a column list expected")
        out, i = [], i + 1
        while i < len(toks) and toks[i].token_type != TokenType.R_PAREN:
            if toks[i].token_type != TokenType.COMMA:
                out.append(toks[i].text)
            i += 1
        if i >= len(toks) or not out:
            raise fail("an unterminated or empty column list")
        i += 1
        return tuple(out)

    name = ""
    if word(i) == "CONSTRAINT":
        i += 1
        if toks[i].token_type != TokenType.FOREIGN_KEY:
            name, i = toks[i].text, i + 1
    if i >= len(toks) or toks[i].token_type != TokenType.FOREIGN_KEY:
        raise fail("FOREIGN KEY expected")
    i += 1
    if i < len(toks) and toks[i].token_type != TokenType.L_PAREN:
        i += 1  # FOREIGN KEY index_name (...)
    child_columns = names()
    if word(i) != "REFERENCES":
        raise fail("REFERENCES expected")
    i += 1
    parent = (database, toks[i].text) if i < len(toks) else None
    if i + 2 < len(toks) and toks[i + 1].token_type == TokenType.DOT:
        parent, i = (toks[i].text, toks[i + 2].text), i + 3
    else:
        i += 1
    if parent is None:
        raise fail("no referenced table")
    parent_columns = names()
    actions = {"DELETE": DEFAULT_ACTION, "UPDATE": DEFAULT_ACTION}
    while i < len(toks):
        if word(i) == "ON" and word(i + 1) in actions:
            for words, action in _ACTIONS.items():
                if tuple(word(i + 2 + k) for k in range(len(words))) == words:
                    actions[word(i + 1)] = action
                    i += 2 + len(words)
                    break
            else:
                raise fail(f"unknown action {word(i + 2)}")
        elif word(i) == "MATCH" and word(i + 1):
            i += 2
        else:
            raise fail(f"unexpected {toks[i].text!r}")
    if len(child_columns) != len(parent_columns):
        raise fail("column lists of different lengths")
    return CascadingForeignKey(
        name=name or f"{table}_fk_{n}",  # SHOW CREATE TABLE names them all
        child=(database, table),
        child_columns=child_columns,
        parent=parent,
        parent_columns=parent_columns,
        on_delete=actions["DELETE"],
        on_update=actions["UPDATE"],
    )


def foreign_keys_in_create(sql: str, database: str, table: str) -> list[CascadingForeignKey]:
    """Every foreign key of a ``SHOW CREATE TABLE`` statement of ``database.table``.

    The statement is cut into its column and constraint items with sqlglot's MySQL tokenizer;
    each ``[CONSTRAINT name] FOREIGN KEY (cols) REFERENCES [db.]parent (cols) [ON DELETE action]
    [ON UPDATE action]`` item is read from its tokens (the rest of the definition is not parsed,
    so syntax sqlglot's parser does not know cannot get in the way; a sqlglot ``parse_one`` per
    item costs ten times as much, which a window run with a thousand captured tables would feel).
    An action not written is ``RESTRICT``; a parent without a database is in ``database``.

    Raises:
        UnreadableForeignKey: a ``FOREIGN KEY`` item that is not of that form (named in the message).
    """
    try:
        items = _create_table_elements(sql)
    except sqlglot.errors.TokenError as e:
        raise UnreadableForeignKey(f"{database}.{table}: the statement cannot be tokenized ({e})") from None
    return [
        _read_foreign_key(toks, database, table, n)
        for n, toks in enumerate(items, 1)
        if any(t.token_type == TokenType.FOREIGN_KEY for t in toks)
    ]


#: ``SHOW CREATE TABLE`` statements sent in one round trip on a multi-statement connection.
SHOW_CREATE_BATCH = 100


def _show_create(cur: Any, tables: list[tuple[str, str]]) -> list[tuple[tuple[str, str], str]]:
    """``((db, table), SHOW CREATE TABLE text)`` of ``tables``, sent as one multi-statement query
    (the connection must allow them); tables that no longer exist are left out.

    Raises:
        pymysql.err.MySQLError: another error (the caller retries one table at a time).
    """
    sql = ";".join(
        f"SHOW CREATE TABLE {exp.table_(t, db, quoted=True).sql(dialect='mysql')}" for db, t in tables
    )
    out = []
    try:
        cur.execute(sql)
        for key in tables:
            row = cur.fetchone()
            if row is not None and len(row) >= 2:
                out.append((key, str(row[1])))
            cur.nextset()
    except pymysql.err.MySQLError as e:
        if len(tables) == 1 and e.args and e.args[0] == _NO_SUCH_TABLE:
            return []
        raise
    return out


def read_cascading_foreign_keys(
    conn: Any, tables: Iterable[tuple[str, str]]
) -> dict[tuple[str, str], list[CascadingForeignKey]]:
    """The foreign keys of ``tables`` (the child tables) with a changing action, by parent
    ``(database, table)``, read from each table's ``SHOW CREATE TABLE`` (SELECT on the table is
    enough; see the module docs).

    On a connection opened with ``CLIENT.MULTI_STATEMENTS`` the statements go
    :data:`SHOW_CREATE_BATCH` at a time (one round trip each), else one by one. A table dropped
    since it was listed is skipped. A foreign key that cannot be read is logged as a WARNING
    (cascades through it are then found by the ``checksum_matches_source`` check only) and
    skipped.

    Args:
        conn: an open pymysql connection.
        tables: ``(database, table)`` of the child tables to read (the captured tables).

    Raises:
        pymysql.err.MySQLError: ``SHOW CREATE TABLE`` failed otherwise (e.g. no privilege on the table).
    """
    tables = list(tables)
    step = SHOW_CREATE_BATCH if getattr(conn, "client_flag", 0) & CLIENT.MULTI_STATEMENTS else 1
    statements: list[tuple[tuple[str, str], str]] = []
    with conn.cursor() as cur:
        for i in range(0, len(tables), step):
            batch = tables[i : i + step]
            try:
                statements += _show_create(cur, batch)
            except pymysql.err.MySQLError:
                if len(batch) == 1:
                    raise
                for key in batch:  # a table dropped meanwhile stops the batch: one at a time
                    statements += _show_create(cur, [key])
    out: dict[tuple[str, str], list[CascadingForeignKey]] = {}
    for (db, t), text in statements:
        if "FOREIGN KEY" not in text.upper():
            continue  # a table without foreign keys: nothing to tokenize
        try:
            fks = foreign_keys_in_create(text, db, t)
        except UnreadableForeignKey as e:
            log.warning(
                "Cannot read a foreign key of %s.%s (%s): cascades through it are not detected "
                "while streaming; the checksum_matches_source check finds the rows they change",
                db,
                t,
                e,
            )
            continue
        for fk in fks:
            if fk.acts_on("u") or fk.acts_on("d"):
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
