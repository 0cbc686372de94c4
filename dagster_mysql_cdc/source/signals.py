"""Debezium signals read from the binlog, and safe ``additional-conditions`` filters.

A signal is a row inserted into the *signal table* (Debezium ``signal.data.collection``), by
default ``<db>.debezium_signal (id VARCHAR(42) PRIMARY KEY, type VARCHAR(32) NOT NULL, data
VARCHAR(2048) NULL)``. Signals are read from the binlog (not by polling), in binlog order, so they
are ordered exactly with the data changes around them. Supported types (Debezium "Sending
signals"): ``execute-snapshot``, ``stop-snapshot``, ``pause-snapshot``, ``resume-snapshot``,
``log``; the incremental snapshot's own watermark rows (``snapshot-window-open`` /
``snapshot-window-close``) travel through the same table.

Bad signals never stop capture: :func:`parse_signal` raises :class:`InvalidSignal` with a clear
reason; the caller logs it and skips the signal.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

import sqlglot
from sqlglot import exp

from ..errors import CdcError

SIGNAL_TYPES = ("execute-snapshot", "stop-snapshot", "pause-snapshot", "resume-snapshot", "log")
WATERMARK_TYPES = ("snapshot-window-open", "snapshot-window-close")

SIGNAL_TABLE_DDL = (
    "CREATE TABLE IF NOT EXISTS {table} ("
    "id VARCHAR(42) PRIMARY KEY, type VARCHAR(32) NOT NULL, data VARCHAR(2048) NULL)"
)


class InvalidSignal(CdcError):
    """A signal row that cannot be executed (logged and skipped, capture continues)."""


class UnsafeFilter(InvalidSignal):
    """An ``additional-conditions`` filter that is not a single boolean expression over columns."""


@dataclass(frozen=True)
class Signal:
    """A parsed signal.

    Attributes:
        id: the signal row's id.
        type: one of :data:`SIGNAL_TYPES` or :data:`WATERMARK_TYPES`.
        data_collections: for execute/stop-snapshot: table names or regexes (``db.table``).
        snapshot_type: ``incremental`` (default) or ``blocking``.
        conditions: ``{"db.table": filter SQL}`` from ``additional-conditions`` (validated).
        message: for ``log``.
        raw: the decoded ``data`` object.
        reason: execute-snapshot of a repair (this project's extension, see :mod:`..gaps`): why;
            lands in the ``__cdc.repair`` header of the re-read rows.
        delete_keys: repair extension: primary keys to delete at the chunk's high watermark
            unless the source has them (keys only the lake has).
    """

    id: str
    type: str
    data_collections: tuple[str, ...] = ()
    snapshot_type: str = "incremental"
    conditions: dict[str, str] = field(default_factory=dict)
    message: str | None = None
    raw: dict[str, Any] = field(default_factory=dict)
    reason: str | None = None
    delete_keys: tuple[tuple, ...] = ()


def signal_table_sql(table: str) -> str:
    """``CREATE TABLE IF NOT EXISTS`` statement of a signal table named ``db.table``."""
    db, _, t = table.partition(".")
    if not db or not t:
        raise ValueError(f"Signal table {table!r} must be written as 'database.table'")
    return SIGNAL_TABLE_DDL.format(table=f"`{db}`.`{t}`")


def create_signal_table(conn: Any, table: str) -> None:
    """Create the signal table if it does not exist (needs CREATE on its database)."""
    with conn.cursor() as cur:
        cur.execute(signal_table_sql(table))


def parse_signal(row: dict[str, Any], column_names: list[str] | None = None) -> Signal:
    """Parse one inserted signal-table row (``{"id", "type", "data"}``).

    Raises:
        InvalidSignal: missing id/type, unknown type, malformed JSON ``data``, wrong field types.
        UnsafeFilter: an ``additional-conditions`` filter is not a safe boolean expression.
    """
    sid = row.get("id")
    stype = row.get("type")
    data = row.get("data")
    if isinstance(sid, bytes):
        sid = sid.decode("utf-8", "replace")
    if isinstance(stype, bytes):
        stype = stype.decode("utf-8", "replace")
    if isinstance(data, bytes):
        data = data.decode("utf-8", "replace")
    if not sid or not stype:
        raise InvalidSignal(f"Signal row without id or type: {row!r}; columns must be (id, type, data)")
    stype = str(stype).strip()
    if stype not in SIGNAL_TYPES and stype not in WATERMARK_TYPES:
        raise InvalidSignal(
            f"Signal {sid!r} has unknown type {stype!r}; supported: {', '.join(SIGNAL_TYPES)}"
        )
    if stype in WATERMARK_TYPES:
        return Signal(id=str(sid), type=stype, raw={"data": data})
    obj: dict[str, Any] = {}
    if data not in (None, ""):
        try:
            obj = json.loads(data)
        except json.JSONDecodeError as e:
            raise InvalidSignal(
                f"Signal {sid!r} ({stype}) has malformed JSON data ({e}): {str(data)[:200]!r}"
            ) from None
        if not isinstance(obj, dict):
            raise InvalidSignal(
                f"Signal {sid!r} ({stype}) data must be a JSON object, got {type(obj).__name__}"
            )
    if stype == "log":
        msg = obj.get("message")
        if not isinstance(msg, str):
            raise InvalidSignal(f'Signal {sid!r} (log) needs data {{"message": "..."}}')
        return Signal(id=str(sid), type=stype, message=msg, raw=obj)
    if stype in ("pause-snapshot", "resume-snapshot"):
        return Signal(id=str(sid), type=stype, raw=obj)
    colls = obj.get("data-collections", [])
    if isinstance(colls, str):
        colls = [colls]
    if not isinstance(colls, list) or not all(isinstance(c, str) and c for c in colls):
        raise InvalidSignal(
            f"Signal {sid!r} ({stype}): data-collections must be a list of table names/regexes"
        )
    if stype == "execute-snapshot" and not colls:
        raise InvalidSignal(f"Signal {sid!r} (execute-snapshot) names no data-collections")
    stype_snap = obj.get("type", "incremental")
    if not isinstance(stype_snap, str) or stype_snap.lower() not in ("incremental", "blocking"):
        raise InvalidSignal(
            f"Signal {sid!r}: snapshot type {stype_snap!r} must be 'incremental' or 'blocking'"
        )
    conditions: dict[str, str] = {}
    conds = obj.get("additional-conditions", [])
    if not isinstance(conds, list):
        raise InvalidSignal(
            f"Signal {sid!r}: additional-conditions must be a list of {{data-collection, filter}}"
        )
    for c in conds:
        if (
            not isinstance(c, dict)
            or not isinstance(c.get("data-collection"), str)
            or not isinstance(c.get("filter"), str)
        ):
            raise InvalidSignal(f"Signal {sid!r}: bad additional-conditions entry {c!r}")
        conditions[c["data-collection"]] = c["filter"]
    reason = obj.get("reason")
    if reason is not None and not isinstance(reason, str):
        raise InvalidSignal(f"Signal {sid!r}: reason must be a string")
    delete_keys = obj.get("delete-keys", [])
    if not isinstance(delete_keys, list) or not all(
        isinstance(k, list) and all(isinstance(v, (int, str)) for v in k) for k in delete_keys
    ):
        raise InvalidSignal(f"Signal {sid!r}: delete-keys must be a list of key value lists")
    return Signal(
        reason=reason,
        delete_keys=tuple(tuple(k) for k in delete_keys),
        id=str(sid),
        type=stype,
        data_collections=tuple(colls),
        snapshot_type=stype_snap.lower(),
        conditions=conditions,
        raw=obj,
    )


_ALLOWED = (
    exp.Column,
    exp.Identifier,
    exp.Literal,
    exp.Boolean,
    exp.Null,
    exp.Paren,
    exp.Neg,
    exp.Not,
    exp.And,
    exp.Or,
    exp.EQ,
    exp.NEQ,
    exp.GT,
    exp.GTE,
    exp.LT,
    exp.LTE,
    exp.Is,
    exp.In,
    exp.Between,
    exp.Like,
    exp.ILike,
    exp.Add,
    exp.Sub,
    exp.Mul,
    exp.Div,
    exp.Mod,
    exp.Tuple,
    exp.NullSafeEQ,
    exp.Cast,
    exp.DataType,
    exp.DataTypeParam,
    exp.Var,
)


_ALLOWED_TEXT = (
    "Allowed: the table's columns, literals, comparisons, AND/OR/NOT, IN (list), BETWEEN, LIKE, "
    "IS [NOT] NULL, arithmetic and CAST."
)


def _describe(node: Any) -> str:
    """What a rejected filter element (a sqlglot node) is, in SQL terms (never sqlglot class names)."""
    text = node.sql(dialect="mysql")[:60]
    if isinstance(node, exp.Exists):
        return f"uses EXISTS ({text})"
    if isinstance(node, exp.Case):
        return f"uses a CASE expression ({text})"
    if isinstance(node, exp.HexString):
        return f"uses the hex literal {text}"
    if isinstance(node, exp.Introducer):
        return f"uses the character set introducer {text}"
    if isinstance(node, exp.Func):
        return f"calls function {text}"
    if isinstance(node, exp.Star):
        return "uses *"
    if isinstance(node, (exp.Parameter, exp.Placeholder, exp.SessionParameter)):
        return f"uses variable or parameter {text}"
    if isinstance(node, (exp.Dot, exp.Bracket)):
        return f"uses {text} (qualified names and subscripts)"
    return f"uses {text}"


def validate_filter(sql: str, columns: list[str]) -> str:
    """Check an ``additional-conditions`` filter and return it rendered by sqlglot (MySQL dialect).

    Accepted: one boolean expression over the table's columns with literals, comparisons,
    ``AND``/``OR``/``NOT``, ``IN (literal list)``, ``BETWEEN``, ``LIKE``, ``IS [NOT] NULL``,
    arithmetic and ``CAST``. Rejected (:class:`UnsafeFilter`): several statements, comments,
    subqueries, function calls, unknown columns, anything that is not a predicate.
    """
    try:
        tokens = sqlglot.tokenize(sql, read="mysql")
        if any(t.comments for t in tokens):
            raise UnsafeFilter(f"Filter {sql!r} contains a comment; comments are not allowed")
        parsed = sqlglot.parse(sql, read="mysql")
    except (sqlglot.errors.ParseError, sqlglot.errors.TokenError) as e:
        raise UnsafeFilter(f"Filter {sql!r} is not valid SQL: {str(e).splitlines()[0]}") from None
    parsed = [p for p in parsed if p is not None]
    if len(parsed) != 1:
        raise UnsafeFilter(f"Filter {sql!r} must be a single expression, found {len(parsed)} statements")
    tree = parsed[0]
    if isinstance(
        tree, (exp.Select, exp.Query, exp.Command, exp.Insert, exp.Update, exp.Delete, exp.Drop, exp.Create)
    ) or not isinstance(tree, exp.Condition):
        raise UnsafeFilter(f"Filter {sql!r} is not a boolean expression")
    if not isinstance(tree, (exp.Predicate, exp.Connector, exp.Not, exp.Paren, exp.Boolean)):
        raise UnsafeFilter(f"Filter {sql!r} is not a boolean predicate")
    known = {c.lower() for c in columns}
    for node in tree.walk():
        if isinstance(node, (exp.Select, exp.Subquery, exp.Query)):
            raise UnsafeFilter(f"Filter {sql!r} contains a subquery")
        if not isinstance(node, _ALLOWED):
            raise UnsafeFilter(
                f"Filter {sql!r} {_describe(node)}, which is not allowed in a filter. {_ALLOWED_TEXT}"
            )
        if isinstance(node, exp.In) and not node.expressions and node.args.get("query") is None:
            raise UnsafeFilter(f"Filter {sql!r} has an empty IN list, which MySQL rejects")
        if isinstance(node, exp.Column):
            if node.table:
                raise UnsafeFilter(
                    f"Filter {sql!r}: qualified column {node.sql()} is not allowed; use bare column names"
                )
            if node.name.lower() not in known:
                raise UnsafeFilter(
                    f"Filter {sql!r}: unknown column {node.name!r} (columns: {', '.join(columns)})"
                )
    return tree.sql(dialect="mysql")


def matches_collection(pattern: str, qualified: str) -> bool:
    """Whether a ``data-collections`` entry (name or regex, full match, case-insensitive) names
    ``db.table``."""
    if pattern.lower() == qualified.lower():
        return True
    try:
        return re.fullmatch(pattern, qualified, re.IGNORECASE) is not None
    except re.error:
        return False
