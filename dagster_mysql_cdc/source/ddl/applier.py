"""The applier of one statement: dispatch on the statement kind read from the first tokens to the
per-kind appliers (Debezium: ``MySqlAntlrDdlParserListener`` delegating to its sub-listeners)."""

from __future__ import annotations

from .alter import AlterTableApplier
from .create import CreateTableApplier
from .databases import DatabaseApplier
from .drop_rename import DropRenameApplier
from .outcome import DdlOutcome
from .tokens import object_kind, word_of


class DdlApplier(CreateTableApplier, AlterTableApplier, DropRenameApplier, DatabaseApplier):
    """Applies one statement to a working copy of the catalog state."""

    def run(self) -> DdlOutcome:
        toks = self.toks.toks
        if not toks:
            return self.ignored()
        first = word_of(toks[0])
        if first == "CREATE":
            kind, _, temporary = object_kind(toks)
            if kind == "TABLE":
                return self.ignored() if temporary else self.create_table()
            if kind in ("DATABASE", "SCHEMA"):
                return self.create_database()
            return self.ignored()
        if first == "ALTER":
            kind, idx, _ = object_kind(toks)
            if kind == "TABLE":
                return self.alter_table(idx)
            if kind in ("DATABASE", "SCHEMA"):
                return self.alter_database(idx)
            return self.ignored()
        if first == "DROP":
            kind, _, temporary = object_kind(toks)
            if kind == "TABLE":
                return self.ignored() if temporary else self.drop_table()
            if kind in ("DATABASE", "SCHEMA"):
                return self.drop_database()
            if kind == "INDEX":
                return self.drop_index()
            return self.ignored()
        if first == "RENAME":
            kind, idx, _ = object_kind(toks, limit=3)
            return self.rename_table(idx) if kind == "TABLE" else self.ignored()
        if first == "TRUNCATE":
            return self.truncate()
        if first == "USE" and len(toks) >= 2:
            self.default_db = toks[1].text
            return self.ignored(self.default_db)
        return self.ignored()
