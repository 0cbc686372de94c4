"""Triggers of a table and the tables their bodies write (``information_schema.TRIGGERS``).

With row-based logging the rows a trigger writes are in the binlog as row events of their own.
Statement-based DML (``binlog_format=STATEMENT``/``MIXED``) logs only the statement: a replica
re-runs it and its own triggers, so the trigger's writes (Sakila: ``film`` -> ``film_text``) leave
no trace in the binlog at all. :func:`read_triggers` lists a table's triggers and
:func:`trigger_written_tables` names the tables a trigger body writes, so those can be repaired
too (see :mod:`dagster_mysql_cdc.engine.gaps`).

``ACTION_STATEMENT`` is visible only with the ``TRIGGER`` privilege on the table (MySQL and
MariaDB); without it the trigger's name is listed but its body is ``NULL`` and the tables it
writes cannot be named (the caller then repairs every captured table of the trigger's database).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import sqlglot

from .statements import DML_KEYWORDS, dml_target_tables


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
    """The triggers on ``database.table`` (``information_schema.TRIGGERS``), in name order."""
    with conn.cursor() as cur:
        cur.execute(
            "SELECT TRIGGER_SCHEMA, TRIGGER_NAME, EVENT_OBJECT_TABLE, EVENT_MANIPULATION, ACTION_STATEMENT "
            "FROM information_schema.TRIGGERS WHERE EVENT_OBJECT_SCHEMA = %s AND EVENT_OBJECT_TABLE = %s "
            "ORDER BY TRIGGER_NAME",
            (database, table),
        )
        return [Trigger(s, n, t, e, b) for s, n, t, e, b in cur.fetchall()]


def trigger_written_tables(body: str, default_db: str) -> list[tuple[str, str]]:
    """The ``(database, table)`` pairs the DML statements of a trigger body may write.

    The body (``ACTION_STATEMENT``: one statement, or a ``BEGIN ... END`` block with ``IF``,
    ``CASE``, loops) is cut into ``;``-separated pieces; in each, the text from the first DML
    keyword on is read with :func:`~.statements.dml_target_tables` (``INSERT``/``REPLACE``
    targets, ``UPDATE`` tables, ``DELETE`` tables). Unqualified names are in ``default_db`` (the
    trigger's database). A piece whose DML cannot be parsed is skipped.
    """
    out: list[tuple[str, str]] = []
    try:
        tokens = sqlglot.tokenize(body, read="mysql")
    except (sqlglot.errors.TokenError, sqlglot.errors.ParseError):
        return out
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
            if target not in out:
                out.append(target)
    return out
