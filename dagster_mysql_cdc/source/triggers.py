"""Triggers of a table, the tables their bodies write, and what the capture user may see of them.

With row-based logging the rows a trigger writes are in the binlog as row events of their own.
Statement-based DML (``binlog_format=STATEMENT``/``MIXED``) logs only the statement: a replica
re-runs it and its own triggers, so the trigger's writes (Sakila: ``film`` -> ``film_text``) leave
no trace in the binlog at all. :func:`read_triggers` lists a table's triggers and
:func:`trigger_writes` names the tables a trigger body writes (and the trigger events those
writes fire in turn), so those can be repaired too (see :mod:`dagster_mysql_cdc.engine.gaps`).

What ``information_schema.TRIGGERS`` (and ``SHOW TRIGGERS``) shows depends on the user's
privileges on the trigger's table (:class:`TriggerVisibility`, measured on MariaDB 10.11; MySQL
reference manual, "The INFORMATION_SCHEMA TRIGGERS Table"):

- ``TRIGGER`` privilege: every trigger with its body (``ACTION_STATEMENT``);
- MariaDB, ``INSERT``, ``UPDATE`` or ``DELETE`` without ``TRIGGER``: every trigger's name and
  event, the body ``NULL``;
- otherwise (``SELECT`` only: the least-privilege grants of docs/operations.md): no row at all.
  "No trigger listed" then does not mean "no trigger": the caller must assume any table may
  have been written.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import pymysql
import sqlglot
from sqlglot.tokens import Token, TokenType

from .statements import DML_KEYWORDS, dml_target_tables, trigger_events

#: :meth:`TriggerVisibility.of`: triggers listed with their bodies (``TRIGGER`` privilege).
WITH_BODIES = "bodies"
#: :meth:`TriggerVisibility.of`: triggers listed, bodies ``NULL`` (MariaDB: INSERT/UPDATE/DELETE).
NAMES_ONLY = "names"
#: :meth:`TriggerVisibility.of`: no trigger of the table is listed, whether it has any or not.
HIDDEN = "hidden"


@dataclass(frozen=True)
class Trigger:
    """One trigger: ``schema``.``name`` on table ``schema``.``table`` for ``event``
    (``INSERT``/``UPDATE``/``DELETE``); ``body`` is ``None`` when the user may not see it."""

    schema: str
    name: str
    table: str
    event: str
    body: str | None


def read_triggers(conn: Any, database: str, table: str) -> list[Trigger]:
    """The triggers on ``database.table`` the user may see (``information_schema.TRIGGERS``), in
    name order; see :class:`TriggerVisibility` for what that is."""
    with conn.cursor() as cur:
        cur.execute(
            "SELECT TRIGGER_SCHEMA, TRIGGER_NAME, EVENT_OBJECT_TABLE, EVENT_MANIPULATION, ACTION_STATEMENT "
            "FROM information_schema.TRIGGERS WHERE EVENT_OBJECT_SCHEMA = %s AND EVENT_OBJECT_TABLE = %s "
            "ORDER BY TRIGGER_NAME",
            (database, table),
        )
        return [Trigger(s, n, t, e, b) for s, n, t, e, b in cur.fetchall()]


def trigger_writes(body: str, default_db: str) -> list[tuple[tuple[str, str], tuple[str, ...]]]:
    """The ``(database, table)`` pairs the DML statements of a trigger body may write, each with
    the trigger events those statements fire on it (:func:`~.statements.trigger_events`).

    The body (``ACTION_STATEMENT``: one statement, or a ``BEGIN ... END`` block with ``IF``,
    ``CASE``, loops) is cut into ``;``-separated pieces; in each, the text from the first DML
    keyword on is read with :func:`~.statements.dml_target_tables` (``INSERT``/``REPLACE``
    targets, ``UPDATE`` tables, ``DELETE`` tables). Unqualified names are in ``default_db`` (the
    trigger's database). A piece whose DML cannot be parsed is skipped.
    """
    out: dict[tuple[str, str], list[str]] = {}
    try:
        tokens = sqlglot.tokenize(body, read="mysql")
    except (sqlglot.errors.TokenError, sqlglot.errors.ParseError):
        return []
    pieces: list[list] = [[]]
    for tok in tokens:
        if tok.text == ";":
            pieces.append([])
        else:
            pieces[-1].append(tok)
    for piece in pieces:
        first = next((t for t in piece if t.text.upper() in DML_KEYWORDS), None)
        if first is None:
            continue
        text = body[first.start : piece[-1].end + 1]
        for target in dml_target_tables(text, default_db) or []:
            events = out.setdefault(target, [])
            events += [e for e in trigger_events(text) if e not in events]
    return [(k, tuple(v)) for k, v in out.items()]


def trigger_written_tables(body: str, default_db: str) -> list[tuple[str, str]]:
    """The ``(database, table)`` pairs a trigger body may write (:func:`trigger_writes`)."""
    return [target for target, _ in trigger_writes(body, default_db)]


def _db_pattern(name: str) -> re.Pattern[str]:
    """A ``GRANT ... ON db.*`` database name as the server matches it: ``%`` and ``_`` are
    wildcards unless escaped with ``\\``."""
    out, escaped = [], False
    for c in name:
        if escaped:
            out.append(re.escape(c))
            escaped = False
        elif c == "\\":
            escaped = True
        elif c == "%":
            out.append(".*")
        elif c == "_":
            out.append(".")
        else:
            out.append(re.escape(c))
    return re.compile("".join(out), re.DOTALL)


def _name(tok: Token) -> str | None:
    """A name token's text (quotes removed by the tokenizer); ``*`` for a star; ``None`` else."""
    if tok.token_type == TokenType.STAR:
        return "*"
    if tok.token_type in (TokenType.STRING, TokenType.L_PAREN, TokenType.R_PAREN, TokenType.COMMA):
        return None
    return tok.text


def parse_grant(line: str) -> tuple[str, frozenset[str], str, str | None] | None:
    """One line of ``SHOW GRANTS``: ``(GRANT|REVOKE, privileges, database, table or None)``, or
    ``None`` for lines that grant nothing on tables (roles, ``PROXY``, routines, unreadable).

    Privileges are upper-case names (``ALL PRIVILEGES``, ``TRIGGER``, ``LOCK TABLES`` ...);
    column-level ones (``UPDATE (a, b)``) are left out (they do not cover whole tables). The
    database is ``*`` for ``ON *.*``; the table ``None`` for a database-level grant (``db.*``).
    """
    try:
        tokens = sqlglot.tokenize(line, read="mysql")
    except (sqlglot.errors.TokenError, sqlglot.errors.ParseError):
        return None
    if not tokens or tokens[0].text.upper() not in ("GRANT", "REVOKE"):
        return None
    verb = tokens[0].text.upper()
    privileges: set[str] = set()
    words: list[str] = []
    column_level = False
    depth, i = 0, 1
    while i < len(tokens):
        tok = tokens[i]
        if tok.token_type == TokenType.L_PAREN:
            depth += 1
            column_level = True
        elif tok.token_type == TokenType.R_PAREN:
            depth -= 1
        elif depth == 0 and tok.token_type in (TokenType.COMMA, TokenType.ON):
            if words and not column_level:
                privileges.add(" ".join(words))
            words, column_level = [], False
            if tok.token_type == TokenType.ON:
                break
        elif depth == 0:
            words.append(tok.text.upper())
        i += 1
    else:
        return None  # no ON: GRANT role TO user
    obj = [t for t in tokens[i + 1 :]]
    end = next((k for k, t in enumerate(obj) if t.text.upper() in ("TO", "FROM")), None)
    if end is None:
        return None
    obj = obj[:end]
    if obj and obj[0].text.upper() == "TABLE":
        obj = obj[1:]
    if len(obj) != 3 or obj[1].token_type != TokenType.DOT:
        return None  # PROCEDURE/FUNCTION/PACKAGE x.y, PROXY ON ''@'%', or not db.table
    db, table = _name(obj[0]), _name(obj[2])
    if db is None or table is None:
        return None
    return verb, frozenset(privileges), db, (None if table == "*" else table)


@dataclass(frozen=True)
class TriggerVisibility:
    """What ``information_schema.TRIGGERS`` shows the capture user of each table's triggers, from
    its grants (see the module docs): :meth:`of` gives :data:`WITH_BODIES`, :data:`NAMES_ONLY` or
    :data:`HIDDEN`.

    Attributes:
        user: the account (``CURRENT_USER()``), for the ``GRANT`` a message advises.
        grants: ``(privileges, database, table or None)`` granted (``database`` ``*``: all).
        revokes: ``(privileges, database)`` partial revokes (MySQL ``partial_revokes``).
        is_mariadb: the server is MariaDB (which lists triggers without bodies to writers).
    """

    user: str
    grants: tuple[tuple[frozenset[str], str, str | None], ...] = ()
    revokes: tuple[tuple[frozenset[str], str], ...] = ()
    is_mariadb: bool = True
    _patterns: dict[str, re.Pattern[str]] = field(default_factory=dict, repr=False, compare=False)

    def _matches(self, pattern: str, db: str) -> bool:
        if pattern == "*":
            return True
        if pattern not in self._patterns:
            self._patterns[pattern] = _db_pattern(pattern)
        return self._patterns[pattern].fullmatch(db) is not None

    def privileges(self, db: str, table: str) -> set[str]:
        """The table privileges the user holds on ``db.table`` (global, database and table grants,
        less partial revokes); ``ALL PRIVILEGES`` stays as such."""
        out: set[str] = set()
        for privs, pattern, t in self.grants:
            if (t is None or t == table) and self._matches(pattern, db):
                out |= privs
        for privs, d in self.revokes:
            if d == db:
                out = set() if privs & {"ALL", "ALL PRIVILEGES"} else out - privs
        return out

    def of(self, db: str, table: str) -> str:
        """:data:`WITH_BODIES`, :data:`NAMES_ONLY` or :data:`HIDDEN` for the triggers of ``db.table``."""
        privs = self.privileges(db, table)
        if privs & {"ALL", "ALL PRIVILEGES", "TRIGGER"}:
            return WITH_BODIES
        if self.is_mariadb and privs & {"INSERT", "UPDATE", "DELETE"}:
            return NAMES_ONLY
        return HIDDEN


def read_trigger_visibility(conn: Any, is_mariadb: bool) -> TriggerVisibility:
    """The capture user's :class:`TriggerVisibility`, from ``SHOW GRANTS`` (the current user and,
    on MariaDB, its current role). When the grants cannot be read, every table is :data:`HIDDEN`
    (the caller then assumes the worst)."""
    lines: Sequence[str] = []
    user = "<capture user>"
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT CURRENT_USER()")
            row = cur.fetchone()
            if row:
                name, _, host = str(row[0]).rpartition("@")
                user = f"'{name}'@'{host}'"
            cur.execute("SHOW GRANTS")
            lines = [str(r[0]) for r in cur.fetchall()]
    except pymysql.err.MySQLError:
        pass
    grants, revokes = [], []
    for line in lines:
        parsed = parse_grant(line)
        if parsed is None:
            continue
        verb, privs, db, table = parsed
        if verb == "GRANT":
            grants.append((privs, db, table))
        elif table is None and db != "*":
            revokes.append((privs, db))
    return TriggerVisibility(user, tuple(grants), tuple(revokes), is_mariadb)
