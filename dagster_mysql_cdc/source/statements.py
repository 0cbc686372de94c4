"""Statement-based DML found in the binlog: which tables a QUERY event wrote.

With ``binlog_format=STATEMENT`` (set globally, or by one session with ``SET SESSION
binlog_format``), or ``MIXED`` deciding a statement is safe, the server writes a data change as a
QUERY event carrying the SQL text instead of row events. A row-based reader (Debezium MySQL
connector, and this project) cannot turn SQL text into row images: the change is missing from the
change stream. :func:`dml_target_tables` recognises such statements (``INSERT``, ``UPDATE``,
``DELETE``, ``REPLACE``, ``LOAD DATA``; multi-table ``UPDATE``/``DELETE`` included) with sqlglot
and names the tables they may have written, so the gap can be reported and repaired.
"""

from __future__ import annotations

import sqlglot
from sqlglot import exp
from sqlglot.tokens import TokenType

#: First keywords of statements that change table data.
DML_KEYWORDS = ("INSERT", "UPDATE", "DELETE", "REPLACE", "LOAD")


def _first_keyword(sql: str) -> str:
    """First keyword of ``sql`` (comments skipped by sqlglot's tokenizer), upper-case, or ``""``."""
    try:
        tokens = sqlglot.tokenize(sql[:200], read="mysql")
    except (sqlglot.errors.TokenError, sqlglot.errors.ParseError):
        return ""
    return tokens[0].text.upper() if tokens else ""


def is_dml(sql: str) -> bool:
    """Whether a QUERY event's statement changes table data (see :data:`DML_KEYWORDS`)."""
    return _first_keyword(sql) in DML_KEYWORDS


#: Trigger events, in the order :func:`trigger_events` lists them.
TRIGGER_EVENTS = ("INSERT", "UPDATE", "DELETE")


def trigger_events(sql: str) -> tuple[str, ...]:
    """The trigger events (``INSERT``/``UPDATE``/``DELETE``) a DML statement may fire on the
    tables it writes (MySQL/MariaDB "Using Triggers", "REPLACE", "INSERT ... ON DUPLICATE KEY
    UPDATE"): ``INSERT`` and ``LOAD DATA`` fire ``INSERT`` triggers, and ``UPDATE`` triggers too
    with ``ON DUPLICATE KEY UPDATE``; ``REPLACE`` (and ``LOAD DATA ... REPLACE``) fire ``INSERT``
    and ``DELETE`` triggers; ``UPDATE`` and ``DELETE`` their own. All three when the statement
    cannot be read. Foreign-key actions fire no triggers.
    """
    keyword = _first_keyword(sql)
    try:
        words = {t.text.upper() for t in sqlglot.tokenize(sql, read="mysql")}
    except (sqlglot.errors.TokenError, sqlglot.errors.ParseError):
        return TRIGGER_EVENTS
    if keyword == "INSERT":
        return ("INSERT", "UPDATE") if "DUPLICATE" in words else ("INSERT",)
    if keyword == "REPLACE":
        return ("INSERT", "DELETE")
    if keyword == "LOAD":
        return ("INSERT", "DELETE") if "REPLACE" in words else ("INSERT",)
    if keyword in ("UPDATE", "DELETE"):
        return (keyword,)
    return TRIGGER_EVENTS


def updated_columns(sql: str) -> frozenset[str] | None:
    """The (lower-case) names of the columns an ``UPDATE`` (also multi-table) or the ``ON
    DUPLICATE KEY UPDATE`` part of an ``INSERT`` assigns, qualifiers dropped; ``None`` when the
    statement cannot be read that way (the caller then assumes any column changed). Other
    statements assign none (``frozenset()``)."""
    keyword = _first_keyword(sql)
    if keyword not in ("UPDATE", "INSERT"):
        return frozenset()
    try:
        tree = sqlglot.parse_one(sql, read="mysql")
    except (sqlglot.errors.ParseError, sqlglot.errors.TokenError):
        return None
    if isinstance(tree, exp.Update):
        assignments = tree.expressions
    elif isinstance(tree, exp.Insert):
        conflict = tree.args.get("conflict")
        assignments = conflict.expressions if conflict is not None else []
    else:
        return None
    names = set()
    for a in assignments:
        if not isinstance(a, exp.EQ) or not isinstance(a.this, exp.Column):
            return None
        names.add(a.this.name.lower())
    return frozenset(names)


def _table(node: exp.Table, default_db: str | None) -> tuple[str, str] | None:
    name = node.name
    db = node.db or default_db
    if not name or not db:
        return None
    return db, name


def _load_data_table(sql: str, default_db: str | None) -> list[tuple[str, str]]:
    """``LOAD DATA ... INTO TABLE [db.]t`` (sqlglot's parser does not know LOAD DATA; its
    tokenizer does): the identifier(s) after ``INTO TABLE``."""
    tokens = sqlglot.tokenize(sql, read="mysql")
    for i in range(len(tokens) - 2):
        if tokens[i].token_type == TokenType.INTO and tokens[i + 1].text.upper() == "TABLE":
            parts = [tokens[i + 2].text]
            if i + 4 < len(tokens) and tokens[i + 3].token_type == TokenType.DOT:
                parts.append(tokens[i + 4].text)
            if len(parts) == 2:
                return [(parts[0], parts[1])]
            return [(default_db, parts[0])] if default_db else []
    return []


def dml_target_tables(sql: str, default_db: str | None) -> list[tuple[str, str]] | None:
    """The ``(database, table)`` pairs a DML statement may have written.

    Args:
        sql: the statement text of a binlog QUERY event.
        default_db: the event's default database (``USE db`` of the session), for unqualified names.

    Returns:
        ``None`` when ``sql`` is not DML; else the written tables, conservatively: the target of
        ``INSERT``/``REPLACE``/``LOAD DATA``, every table of a (multi-table) ``UPDATE``, the deleted
        tables of a multi-table ``DELETE`` (or its single table). Tables only read (an ``INSERT ...
        SELECT`` source, a subquery) are not listed. An empty list: DML whose tables could not be
        named (unparseable statement); the caller reports it without a table.
    """
    keyword = _first_keyword(sql)
    if keyword not in DML_KEYWORDS:
        return None
    if keyword == "LOAD":
        return _load_data_table(sql, default_db)
    text = sql
    if keyword == "REPLACE":  # same grammar as INSERT; sqlglot parses REPLACE only as a Command
        start = sql.upper().find("REPLACE")
        text = sql[:start] + "INSERT" + sql[start + len("REPLACE") :]
    try:
        tree = sqlglot.parse_one(text, read="mysql")
    except (sqlglot.errors.ParseError, sqlglot.errors.TokenError):
        return []
    out: list[tuple[str, str]] = []

    def add(node: exp.Expression | None) -> None:
        if isinstance(node, exp.Table):
            t = _table(node, default_db)
            if t is not None and t not in out:
                out.append(t)

    if isinstance(tree, exp.Insert):
        target = tree.this
        add(target.this if isinstance(target, exp.Schema) else target)
    elif isinstance(tree, exp.Update):
        target = tree.this
        add(target)
        for j in target.args.get("joins") or []:
            add(j.this)
        from_ = tree.args.get("from") or tree.args.get("from_")
        if from_ is not None:
            add(from_.this)
    elif isinstance(tree, exp.Delete):
        deleted = tree.args.get("tables")
        if deleted:
            aliases = {}
            for src in [tree.this, *(tree.args.get("using") or [])]:
                if isinstance(src, exp.Table):
                    for t in [src, *[j.this for j in src.args.get("joins") or []]]:
                        if isinstance(t, exp.Table) and t.alias:
                            aliases[t.alias.lower()] = t
            for t in deleted:
                add(aliases.get(t.name.lower(), t) if not t.db else t)
        else:
            add(tree.this)
    return out


#: Columns of an ``INSERT`` into the signal table without a column list (Debezium's layout).
SIGNAL_COLUMNS = ("id", "type", "data")


class UnreadableSignalStatement(ValueError):
    """A statement-based write to the signal table whose rows cannot be read from its SQL text."""


def _literal(node: exp.Expression) -> str | None:
    if isinstance(node, exp.Null):
        return None
    if isinstance(node, exp.Literal):
        return str(node.this)
    raise UnreadableSignalStatement(f"{node.sql(dialect='mysql')[:80]!r} is not a literal")


def signal_statement_rows(
    sql: str, default_db: str | None, signal: tuple[str, str]
) -> tuple[str, list[dict]] | None:
    """The signal-table rows a statement-based write carries, as a rows event would.

    With ``binlog_format=STATEMENT`` (or ``MIXED``, which logs a literal ``INSERT`` as a statement)
    the watermark rows of incremental snapshots and the signals people insert reach the binlog as
    QUERY events, not row events. Debezium's source signal channel reads row events only, so such
    signals are lost; here the statement text is read instead: ``INSERT``/``REPLACE ... VALUES``
    with literal values (pymysql interpolates parameters client-side, so the watermark rows'
    statements are literal) and ``DELETE ... WHERE id = <literal>`` / ``id IN (<literals>)``
    (the ``insert_delete`` watermark strategy's high watermark).

    Args:
        sql: the QUERY event's statement.
        default_db: the event's default database.
        signal: ``(database, table)`` of the signal table.

    Returns:
        ``None`` when the statement does not write the signal table; else ``("c", rows)`` or
        ``("d", rows)`` with python-mysql-replication style row dicts (``{"values": {...}}``).

    Raises:
        UnreadableSignalStatement: it writes the signal table, but not in a form read here
            (``INSERT ... SELECT``, expressions instead of literals, ``UPDATE``, another ``WHERE``).
    """
    targets = dml_target_tables(sql, default_db)
    if not targets or tuple(signal) not in [(d, t) for d, t in targets]:
        return None
    keyword = _first_keyword(sql)
    text = sql
    if keyword == "REPLACE":
        start = sql.upper().find("REPLACE")
        text = sql[:start] + "INSERT" + sql[start + len("REPLACE") :]
    try:
        tree = sqlglot.parse_one(text, read="mysql")
    except (sqlglot.errors.ParseError, sqlglot.errors.TokenError) as e:
        raise UnreadableSignalStatement(f"the statement cannot be parsed ({e})") from None
    if isinstance(tree, exp.Insert):
        target = tree.this
        columns = (
            [c.name for c in target.expressions]
            if isinstance(target, exp.Schema) and target.expressions
            else list(SIGNAL_COLUMNS)
        )
        values = tree.expression
        if not isinstance(values, exp.Values):
            raise UnreadableSignalStatement("INSERT without a VALUES list (INSERT ... SELECT)")
        rows = []
        for tup in values.expressions:
            items = tup.expressions if isinstance(tup, exp.Tuple) else [tup]
            if len(items) != len(columns):
                raise UnreadableSignalStatement(f"{len(items)} values for columns {columns}")
            rows.append({"values": dict(zip(columns, (_literal(v) for v in items)))})
        return "c", rows
    if isinstance(tree, exp.Delete):
        where = tree.args.get("where")
        cond = where.this if where is not None else None
        if isinstance(cond, exp.EQ) and isinstance(cond.this, exp.Column) and cond.this.name.lower() == "id":
            ids = [_literal(cond.expression)]
        elif (
            isinstance(cond, exp.In) and isinstance(cond.this, exp.Column) and cond.this.name.lower() == "id"
        ):
            ids = [_literal(v) for v in cond.expressions]
        else:
            raise UnreadableSignalStatement("DELETE not by id = <literal>")
        return "d", [{"values": {"id": i}} for i in ids]
    raise UnreadableSignalStatement(f"{keyword} of the signal table")
