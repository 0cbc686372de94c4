"""RENAME TABLE, DROP TABLE, TRUNCATE and DROP INDEX (Debezium: ``RenameTableParserListener``,
``DropTableParserListener``, ``TruncateTableParserListener``, ``DropIndexParserListener``)."""

from __future__ import annotations

from sqlglot import exp
from sqlglot.tokens import TokenType

from .base import StatementApplier
from .dialect import node_kind, node_name, table_name_of, try_parse_statement
from .outcome import DdlFailure, DdlOutcome, TableChange, truncate_statement
from .state import TableEdit


class DropRenameApplier(StatementApplier):
    """``RENAME TABLE``, ``DROP TABLE``, ``TRUNCATE [TABLE]``, ``DROP INDEX `PRIMARY` ON t``."""

    def rename_table(self, idx: int) -> DdlOutcome:
        t = self.toks
        t.i = idx + 1
        t.accept("IF", "EXISTS") or t.accept("IF EXISTS")
        changes: list[TableChange] = []
        first_db: str | None = None
        while not t.at_end():
            odb, oname = self.qualify(*t.qualified_name())
            if t.accept("WAIT"):
                t.i += 1
            else:
                t.accept("NOWAIT")
            if not t.accept("TO"):
                raise DdlFailure("expected TO in RENAME TABLE")
            ndb, nname = t.qualified_name()
            ndb = ndb or self.default_db or odb
            first_db = first_db or ndb
            key = self.state.find(odb, oname)
            if key is None:
                self.warn(
                    "DDL %r renames table %s.%s, which is not in the schema catalog; ignored",
                    truncate_statement(self.stmt),
                    odb,
                    oname,
                )
            else:
                if self.state.find(ndb, nname) is not None:
                    raise DdlFailure(f"schema catalog out of sync: table {ndb}.{nname} already exists")
                edit = TableEdit.of(self.state, key)
                edit.database, edit.table = ndb, nname
                self.state.remove(key)
                schema = edit.store(self.state)
                changes.append(TableChange("ALTER", ndb, nname, schema, key))
            if not t.accept_type(TokenType.COMMA):
                break
        if not t.at_end():
            raise DdlFailure(f"unexpected {t.peek().text!r} in RENAME TABLE")  # type: ignore[union-attr]
        if not changes:
            return self.ignored(first_db)
        return self.outcome(first_db, changes)

    def table_list(self, ast_kind: str) -> tuple[list[tuple[str | None, str]], bool]:
        """Tables of DROP TABLE / TRUNCATE: sqlglot first, tokens as fallback."""
        ast = try_parse_statement(self.stmt)
        if ast_kind == "DROP" and isinstance(ast, exp.Drop) and str(ast.args.get("kind")).upper() == "TABLE":
            return [table_name_of(x) for x in ast.args.get("tables") or []], bool(ast.args.get("exists"))
        if ast_kind == "TRUNCATE" and isinstance(ast, exp.Expression) and node_kind(ast) == "TruncateTable":
            return [table_name_of(x) for x in ast.expressions], False
        t = self.toks
        t.i = 1
        t.accept("TEMPORARY")
        t.accept_any("TABLE", "TABLES")
        exists = t.accept("IF", "EXISTS") or t.accept("IF EXISTS")
        names = []
        while not t.at_end():
            names.append(t.qualified_name())
            if not t.accept_type(TokenType.COMMA):
                break
        if t.accept("WAIT"):
            t.i += 1
        t.accept_any("NOWAIT", "RESTRICT", "CASCADE")
        if not t.at_end() or not names:
            raise DdlFailure(f"cannot parse table list of {ast_kind} statement")
        return names, exists

    def drop_table(self) -> DdlOutcome:
        names, _exists = self.table_list("DROP")
        changes = []
        first_db = None
        for db, name in names:
            db, name = self.qualify(db, name)
            first_db = first_db or db
            key = self.state.find(db, name)
            if key is not None:
                self.state.remove(key)
                changes.append(TableChange("DROP", key[0], key[1], None))
        return self.outcome(first_db, changes)

    def truncate(self) -> DdlOutcome:
        names, _ = self.table_list("TRUNCATE")
        out = []
        for db, name in names:
            key = self.qualify(db, name)
            out.append(self.state.find(*key) or key)
        return self.outcome(out[0][0] if out else None, (), truncated=tuple(out))

    def drop_index(self) -> DdlOutcome:
        ast = try_parse_statement(self.stmt)
        index = table = None
        if isinstance(ast, exp.Drop) and str(ast.args.get("kind")).upper() == "INDEX":
            names = ast.args.get("tables") or []
            on = ast.args.get("cluster")
            if names and on is not None and isinstance(on.this, exp.Table):
                index, table = node_name(names[0]), table_name_of(on.this)
        if index is None:
            t = self.toks
            t.i = 1
            t.accept("ONLINE") or t.accept("OFFLINE")
            t.accept("INDEX")
            t.accept("IF", "EXISTS") or t.accept("IF EXISTS")
            index = t.name("index name")
            if not t.accept("ON"):
                raise DdlFailure("expected ON in DROP INDEX")
            table = t.qualified_name()
        db, name = self.qualify(*table)  # type: ignore[misc]
        if index.upper() != "PRIMARY":
            return self.ignored(db)
        key = self.state.find(db, name)
        if key is None:
            return self.ignored(db)
        edit = TableEdit.of(self.state, key)
        edit.primary_key = []
        schema = edit.store(self.state)
        return self.outcome(key[0], [TableChange("ALTER", key[0], key[1], schema)])
