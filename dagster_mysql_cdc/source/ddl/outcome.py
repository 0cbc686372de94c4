"""What applying a DDL statement produces: :class:`DdlOutcome`, :class:`TableChange`, and the
errors (:class:`UnparseableDdlError`, Debezium's ``ParsingException``; ``DdlFailure``, its internal form)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from ..schema import TableSchema

_MAX_STATEMENT_IN_MESSAGE = 300


# ----------------------------------------------------------------------------------------------
# Public types
# ----------------------------------------------------------------------------------------------


def truncate_statement(text: str, limit: int = _MAX_STATEMENT_IN_MESSAGE) -> str:
    """A statement for a message: whitespace runs collapsed, cut to ``limit`` characters with
    ``...``."""
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


class UnparseableDdlError(ValueError):
    """A DDL statement could not be parsed or applied to the schema catalog.

    Debezium's ``ParsingException``. Attributes ``statement`` (full text) and ``reason``. The
    message names the statement (truncated to ~300 characters), the reason, and the fix.
    """

    def __init__(self, statement: str, reason: str):
        self.statement = statement
        self.reason = reason
        super().__init__(
            f"Cannot parse/apply DDL statement {truncate_statement(statement)!r}: {reason}. "
            "The schema history cannot follow this statement. If it does not change a captured "
            "table, set the option skip_unparseable_ddl=True (Debezium "
            "`schema.history.internal.skip.unparseable.ddl`) to log a warning and skip it; "
            "otherwise re-snapshot the affected tables after fixing the statement support."
        )


@dataclass(frozen=True)
class TableChange:
    """One entry of a Debezium schema change event's ``tableChanges`` array.

    ``type`` is ``CREATE``, ``ALTER`` (also for renames, with ``previous_name`` = ``(db, old)``,
    Debezium's ``previousId``) or ``DROP``; ``schema`` is the table after the change (``None`` for
    ``DROP``). ``filled_columns``: columns an ``ALTER`` added whose existing rows the server fills
    with values (``NOT NULL``, a non-NULL ``DEFAULT``, ``AUTO_INCREMENT``, a generated column):
    the binlog carries no row events for them. ``renamed_columns``: ``(old, new)`` names of the
    columns an ``ALTER`` renamed (``RENAME COLUMN``, ``CHANGE``): their values moved to the new
    name without row events. ``dropped_columns``: columns of the table before an ``ALTER`` whose
    values it dropped (``DROP COLUMN``, also when a column of that name is added again). None of
    the three is part of the schema history record.
    """

    type: Literal["CREATE", "ALTER", "DROP"]
    database: str
    table: str
    schema: TableSchema | None
    previous_name: tuple[str, str] | None = None
    filled_columns: tuple[str, ...] = ()
    renamed_columns: tuple[tuple[str, str], ...] = ()
    dropped_columns: tuple[str, ...] = ()


@dataclass(frozen=True)
class DdlOutcome:
    """Result of applying one statement.

    Attributes:
        statement: the statement text (executable comments resolved; the whole event text when
            the event holds a single statement).
        database: ``databaseName`` of the schema change event: the database the statement acted
            on (qualified name, created/dropped database), else the event's default database.
        table_changes: Debezium ``tableChanges``.
        truncated: ``(db, table)`` for ``TRUNCATE TABLE``.
        created_databases / dropped_databases: for ``CREATE``/``DROP DATABASE``.
        ignored: the statement has no schema effect (non-table DDL, DCL, ``SET``, views,
            routines, temporary tables, ``CREATE TABLE IF NOT EXISTS`` of an existing table,
            ALTER of an unknown table, or an unparseable statement skipped on request).
    """

    statement: str
    database: str | None
    table_changes: tuple[TableChange, ...]
    truncated: tuple[tuple[str, str], ...] = ()
    created_databases: tuple[str, ...] = ()
    dropped_databases: tuple[str, ...] = ()
    ignored: bool = False


class DdlFailure(Exception):
    """A statement cannot be parsed or applied; the message says why. Raised by the parse helpers
    and appliers, caught by :class:`~.catalog.SchemaCatalog`, which raises
    :class:`UnparseableDdlError` or (``skip_unparseable``) logs and skips the statement."""
