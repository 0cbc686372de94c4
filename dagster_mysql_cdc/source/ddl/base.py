"""The state and helpers shared by the per-statement-kind appliers (Debezium: the
``MySqlAntlrDdlParserListener`` fields its sub-listeners use)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from .outcome import DdlFailure, DdlOutcome, TableChange
from .state import CatalogState, ServerRules
from .tokens import TokenCursor, tokenize


class StatementApplier:
    """Applies one statement to a working copy of the catalog state: what every statement kind's
    applier shares (the statement, its tokens, the working state, the default database)."""

    def __init__(self, server: ServerRules, state: CatalogState, stmt: str, default_db: str | None, log: Any):
        self.server = server
        self.state = state
        self.stmt = stmt
        self.default_db = default_db
        self.log = log
        self.toks = TokenCursor(stmt, tokenize(stmt))

    # -- helpers --------------------------------------------------------------------------------

    def outcome(
        self, database: str | None = None, changes: Iterable[TableChange] = (), **kw: Any
    ) -> DdlOutcome:
        return DdlOutcome(
            self.stmt, database if database is not None else self.default_db, tuple(changes), **kw
        )

    def ignored(self, database: str | None = None) -> DdlOutcome:
        return self.outcome(database, ignored=True)

    def qualify(self, db: str | None, table: str) -> tuple[str, str]:
        """``(db, table)`` as written, the event's default database for unqualified names."""
        if db is None:
            if not self.default_db:
                raise DdlFailure(
                    f"table {table!r} is not qualified with a database and the event has no default database"
                )
            db = self.default_db
        return db, table

    def warn(self, msg: str, *args: Any) -> None:
        self.log.warning(msg, *args)
