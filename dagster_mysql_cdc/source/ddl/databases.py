"""CREATE/ALTER/DROP DATABASE (Debezium: ``CreateDatabaseParserListener``,
``AlterDatabaseParserListener``, ``DropDatabaseParserListener``): read from the tokens (a fixed,
simple grammar); dropping a database drops its catalogued tables."""

from __future__ import annotations

from .base import StatementApplier
from .charsets import charset_of_collation, normalize_charset
from .outcome import DdlFailure, DdlOutcome, TableChange
from .tokens import TokenCursor, is_name


class DatabaseApplier(StatementApplier):
    """``CREATE/ALTER/DROP DATABASE|SCHEMA``."""

    def db_options(self, t: TokenCursor) -> tuple[str | None, str | None]:
        charset = collation = None
        while not t.at_end():
            t.accept("DEFAULT")
            if t.accept_any("CHARACTER SET", "CHARSET") or t.accept("CHARACTER", "SET"):
                charset = normalize_charset(t.value())
            elif t.accept("COLLATE"):
                collation = t.value()
            else:
                t.i += 1
        return charset, collation

    def create_database(self) -> DdlOutcome:
        t = self.toks
        t.i = 1
        or_replace = t.accept("OR", "REPLACE")
        t.accept_any("DATABASE", "SCHEMA")
        if_not_exists = t.accept("IF", "NOT", "EXISTS") or t.accept("IF NOT EXISTS")
        name = t.name("database name")
        charset, collation = self.db_options(t)
        charset = charset or charset_of_collation(collation)
        known = self.state.find_db(name)
        changes: list[TableChange] = []
        if known is not None and if_not_exists:
            return self.ignored(name)
        if known is not None and or_replace:
            changes = self._drop_db_tables(known)
        self.state.db_charsets[name] = charset
        return self.outcome(name, changes, created_databases=(name,))

    def _drop_db_tables(self, db: str) -> list[TableChange]:
        changes = []
        for key in sorted(k for k in self.state.tables if k[0] == db):
            self.state.remove(key)
            changes.append(TableChange("DROP", key[0], key[1], None))
        self.state.db_charsets.pop(db, None)
        return changes

    def drop_database(self) -> DdlOutcome:
        t = self.toks
        t.i = 1
        t.accept_any("DATABASE", "SCHEMA")
        t.accept("IF", "EXISTS") or t.accept("IF EXISTS")
        name = t.name("database name")
        if not t.at_end():
            raise DdlFailure(f"unexpected {t.peek().text!r} in DROP DATABASE")  # type: ignore[union-attr]
        known = self.state.find_db(name)
        changes = self._drop_db_tables(known) if known else []
        return self.outcome(name, changes, dropped_databases=(name,))

    def alter_database(self, idx: int) -> DdlOutcome:
        t = self.toks
        t.i = idx + 1
        name = self.default_db
        if is_name(t.peek()) and t.word() not in (
            "DEFAULT",
            "CHARACTER SET",
            "CHARSET",
            "CHARACTER",
            "COLLATE",
            "COMMENT",
            "UPGRADE",
            "READ",
            "ENCRYPTION",
        ):
            name = t.name("database name")
        charset, collation = self.db_options(t)
        charset = charset or charset_of_collation(collation)
        if name and charset:
            self.state.db_charsets[self.state.find_db(name) or name] = charset
        return self.ignored(name)
