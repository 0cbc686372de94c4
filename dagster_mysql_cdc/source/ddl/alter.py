"""ALTER TABLE (Debezium: ``AlterTableParserListener``): specs applied in order, from sqlglot's AST
when it parses the statement, else spec by spec from the tokens (each spec still parsed by sqlglot
where it can be)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from sqlglot import exp
from sqlglot.tokens import TokenType

from .charsets import CHAR_TYPES, MBMAXLEN, TEXT_MAX, charset_of_collation, normalize_charset, smallest_type
from .dialect import DIALECT, node_kind, node_name, table_name_of, try_parse_statement
from .elements import TABLE_ELEMENT_WORDS, TableElements
from .outcome import DdlFailure, DdlOutcome, TableChange, truncate_statement
from .state import TableEdit
from .tokens import TokenCursor, is_name, word_of

_NO_EFFECT_TABLE_OPTIONS = frozenset(
    {
        "ENGINE",
        "AUTO_INCREMENT",
        "AVG_ROW_LENGTH",
        "CHECKSUM",
        "TABLE_CHECKSUM",
        "COMPRESSION",
        "CONNECTION",
        "DATA",
        "INDEX",
        "DELAY_KEY_WRITE",
        "ENCRYPTION",
        "ENCRYPTED",
        "ENCRYPTION_KEY_ID",
        "INSERT_METHOD",
        "KEY_BLOCK_SIZE",
        "MAX_ROWS",
        "MIN_ROWS",
        "PACK_KEYS",
        "PASSWORD",
        "ROW_FORMAT",
        "STATS_AUTO_RECALC",
        "STATS_PERSISTENT",
        "STATS_SAMPLE_PAGES",
        "TABLESPACE",
        "STORAGE",
        "UNION",
        "PAGE_CHECKSUM",
        "PAGE_COMPRESSED",
        "PAGE_COMPRESSION_LEVEL",
        "TRANSACTIONAL",
        "IETF_QUOTES",
        "SEQUENCE",
        "SECONDARY_ENGINE",
        "SECONDARY_ENGINE_ATTRIBUTE",
        "ENGINE_ATTRIBUTE",
        "AUTOEXTEND_SIZE",
        "START TRANSACTION",
    }
)
_NO_EFFECT_SPEC_WORDS = _NO_EFFECT_TABLE_OPTIONS | frozenset(
    {
        "ALGORITHM",
        "LOCK",
        "FORCE",
        "ENABLE",
        "DISABLE",
        "DISCARD",
        "IMPORT",
        "ORDER",
        "PARTITION",
        "PARTITIONS",
        "REMOVE",
        "ANALYZE",
        "CHECK",
        "OPTIMIZE",
        "REBUILD",
        "REPAIR",
        "TRUNCATE",
        "COALESCE",
        "REORGANIZE",
        "EXCHANGE",
        "UPGRADE",
        "SECONDARY_LOAD",
        "SECONDARY_UNLOAD",
        "WITH",
        "WITHOUT",
        "VALIDATION",
        "ORDER BY",
        "PARTITION BY",
    }
)


class AlterTableApplier(TableElements):
    """``ALTER [ONLINE] [IGNORE] TABLE [IF EXISTS] t spec, spec, ...``."""

    def alter_table(self, idx: int) -> DdlOutcome:
        t = self.toks
        t.i = idx + 1
        if_exists = t.accept("IF", "EXISTS") or t.accept("IF EXISTS")
        db, name = t.qualified_name()
        db, name = self.qualify(db, name)
        key = self.state.find(db, name)
        if key is None:
            if not if_exists:
                self.warn(
                    "DDL %r alters table %s.%s, which is not in the schema catalog; ignored",
                    truncate_statement(self.stmt),
                    db,
                    name,
                )
            return self.ignored(db)
        if t.accept("WAIT"):
            t.i += 1
        else:
            t.accept("NOWAIT")
        specs_start = t.i
        edit = TableEdit.of(self.state, key)
        before = self.state.tables[key].columns

        ast = try_parse_statement(self.stmt)
        if isinstance(ast, exp.Alter) and str(ast.args.get("kind") or "TABLE").upper() == "TABLE":
            self.alter_from_ast(edit, ast)
        else:
            for a, b in t.split(specs_start, t.end):
                self.alter_spec_from_tokens(edit, t.sub(a, b))

        self.state.remove(key)
        schema = edit.store(self.state)
        new_key = (edit.database, edit.table)
        prev = key if new_key != key else None
        filled = tuple(c for c in edit.filled if any(x.name == c for x in schema.columns))
        change = TableChange(
            "ALTER",
            edit.database,
            edit.table,
            schema,
            prev,
            filled_columns=filled,
            renamed_columns=edit.renamed_columns(),
            dropped_columns=edit.dropped_columns(before),
        )
        return self.outcome(edit.database, [change])

    def alter_from_ast(self, edit: TableEdit, ast: exp.Expression) -> None:
        options = ast.args.get("options") or []
        for opt in options:  # table default charset first: it applies to columns added below
            self.alter_option(edit, opt)
        for action in ast.args.get("actions") or []:
            self.alter_action(edit, action)

    def alter_option(self, edit: TableEdit, opt: exp.Expression) -> None:
        n = node_kind(opt)
        if n == "CharacterSetProperty":
            edit.charset = normalize_charset(node_name(opt.this))
        elif n == "CollateProperty":
            edit.charset = charset_of_collation(node_name(opt.this)) or edit.charset
        elif n == "SchemaCommentProperty":
            edit.comment = node_name(opt.this)
        # ENGINE, AUTO_INCREMENT, ALGORITHM, LOCK, ROW_FORMAT, ORDER BY, ...: no column effect

    def alter_action(self, edit: TableEdit, a: exp.Expression) -> None:
        n = node_kind(a)
        if n == "ColumnDef":
            self.add_column(edit, a, if_not_exists=bool(a.args.get("exists")))
        elif n == "Drop":
            kind = str(a.args.get("kind") or "").upper()
            names = [node_name(x) for x in a.args.get("tables") or []]
            if kind == "COLUMN":
                for col in names:
                    self.drop_column(edit, col, if_exists=bool(a.args.get("exists")))
            elif kind in ("INDEX", "KEY", "CONSTRAINT"):
                if any(x.upper() == "PRIMARY" for x in names):
                    edit.primary_key = []
            elif kind in ("FOREIGN KEY", "CHECK", "PARTITION"):
                pass
            elif kind in ("PRIMARY KEY",):
                edit.primary_key = []
            else:
                raise DdlFailure(f"unsupported ALTER TABLE DROP {kind}")
        elif n == "DropPrimaryKey":
            edit.primary_key = []
        elif n == "ModifyColumn":
            self.modify_column(edit, a.this, a.args.get("rename_from"))
        elif n == "RenameColumn":
            self.rename_column(
                edit, node_name(a.this), node_name(a.args.get("to")), if_exists=bool(a.args.get("exists"))
            )
        elif n == "AlterColumn":
            changed = [k for k in ("dtype", "collate", "using") if a.args.get(k) is not None]
            if changed:
                raise DdlFailure(f"unsupported ALTER COLUMN form {a.sql(dialect=DIALECT)!r}")
        elif n == "AddConstraint":
            for el in a.expressions:
                self.table_element(edit, el)
        elif n == "AlterRename":
            ndb, nname = table_name_of(a.this)
            ndb = ndb or edit.database
            existing = self.state.find(ndb, nname)
            if existing is not None and existing != (edit.database, edit.table):
                raise DdlFailure(f"schema catalog out of sync: table {ndb}.{nname} already exists")
            edit.database, edit.table = ndb, nname
        elif n in ("RenameIndex", "AlterIndex", "ForceProperty", "AlterSortKey"):
            pass
        elif isinstance(a, exp.Property):
            self.alter_option(edit, a)
        else:
            raise DdlFailure(f"unsupported ALTER TABLE action {n}: {a.sql(dialect=DIALECT)!r}")

    def drop_column(self, edit: TableEdit, name: str, *, if_exists: bool = False) -> None:
        i = edit.index(name)
        if i is None:
            if if_exists:
                return
            edit.require(name)
        col = edit.columns.pop(i)  # type: ignore[arg-type]
        edit.origin.pop(col.name.lower(), None)
        edit.primary_key = [k for k in edit.primary_key if k.lower() != col.name.lower()]
        edit.json_checks.discard(col.name.lower())

    def modify_column(self, edit: TableEdit, cd: exp.Expression, rename_from: Any) -> None:
        old = node_name(rename_from) if rename_from is not None else node_name(cd.this)
        i = edit.require(old)
        col, pk, _ = self.column(cd, edit.charset)
        if col.name.lower() != old.lower() and edit.index(col.name) is not None:
            raise DdlFailure(
                f"schema catalog out of sync: column {col.name!r} already exists in {edit.qualified}"
            )
        old_name = edit.columns[i].name
        pos = self.position(cd)
        if pos is None:
            edit.columns[i] = col
        else:
            edit.columns.pop(i)
            edit.insert(col, pos)
        if old_name != col.name:
            edit.moved(old_name, col.name)
            edit.rename_in_keys(old_name, col.name)
        if pk:
            edit.primary_key = [col.name]

    def rename_column(self, edit: TableEdit, old: str, new: str, *, if_exists: bool = False) -> None:
        i = edit.index(old)
        if i is None and if_exists:
            return
        i = edit.require(old)
        if new.lower() != old.lower() and edit.index(new) is not None:
            raise DdlFailure(f"schema catalog out of sync: column {new!r} already exists in {edit.qualified}")
        old_name = edit.columns[i].name
        edit.columns[i] = replace(edit.columns[i], name=new)
        edit.moved(old_name, new)
        edit.rename_in_keys(old_name, new)

    def convert_to(self, edit: TableEdit, charset: str | None) -> None:
        """``CONVERT TO CHARACTER SET``: all character columns; TEXT types grow as the server does."""
        if charset == "default":
            known = self.state.find_db(edit.database)
            charset = self.state.db_charsets.get(known) if known else None
            if charset is None:
                raise DdlFailure("CONVERT TO CHARACTER SET DEFAULT with an unknown database charset")
        if charset == "binary":
            raise DdlFailure("CONVERT TO CHARACTER SET binary is not supported")
        cols = []
        for c in edit.columns:
            if c.data_type in CHAR_TYPES and c.charset != "binary":
                dt = c.data_type
                if dt in TEXT_MAX and c.charset in MBMAXLEN and charset in MBMAXLEN:
                    chars = TEXT_MAX[dt] // MBMAXLEN[c.charset]
                    grown = smallest_type(TEXT_MAX, chars * MBMAXLEN[charset])
                    if list(TEXT_MAX).index(grown) > list(TEXT_MAX).index(dt):
                        dt = grown
                c = replace(c, charset=charset, data_type=dt)
            cols.append(c)
        edit.columns = cols
        edit.charset = charset

    def alter_spec_from_tokens(self, edit: TableEdit, sub: TokenCursor) -> None:
        """One ALTER TABLE spec, for statements sqlglot could not parse as a whole."""
        text = sub.slice(sub.i, sub.end)
        ast = try_parse_statement(f"ALTER TABLE __cdc_t {text}")
        if isinstance(ast, exp.Alter) and (ast.args.get("actions") or ast.args.get("options")):
            self.alter_from_ast(edit, ast)
            return
        w = sub.word()
        if w == "ADD":
            self.spec_add(edit, sub, text)
        elif w == "DROP":
            self.spec_drop(edit, sub)
        elif w == "CONVERT":
            self.spec_convert(edit, sub, text)
        elif w == "RENAME":
            self.spec_rename(edit, sub, text)
        elif w in ("DEFAULT", "CHARACTER SET", "CHARSET", "CHARACTER", "COLLATE"):
            self.spec_charset(edit, sub)
        elif w == "COMMENT":
            sub.i += 1
            edit.comment = sub.value()
        elif w == "ALTER":
            self.spec_alter_column(sub, text)
        elif w in _NO_EFFECT_SPEC_WORDS:
            return
        elif w in ("MODIFY", "CHANGE"):
            self.spec_modify_change(edit, sub, w, text)
        else:
            raise DdlFailure(f"cannot parse ALTER TABLE spec {text!r}")

    def spec_add(self, edit: TableEdit, sub: TokenCursor, text: str) -> None:
        """``ADD [COLUMN] [IF NOT EXISTS] def | (def, ...)``, ``ADD <table element>``, ``ADD PARTITION``
        (no effect); ``ADD SYSTEM VERSIONING`` raises."""
        sub.i += 1
        if sub.word() in ("PARTITION", "PARTITIONS", "SYSTEM VERSIONING", "SYSTEM"):
            if sub.word() in ("SYSTEM VERSIONING", "SYSTEM"):
                raise DdlFailure("ALTER TABLE ADD SYSTEM VERSIONING is not supported")
            return
        column_kw = sub.accept("COLUMN")
        if_not_exists = sub.accept("IF", "NOT", "EXISTS") or sub.accept("IF NOT EXISTS")
        tok = sub.peek()
        if tok is not None and tok.token_type == TokenType.L_PAREN:
            close = sub.matching_paren(sub.i)
            for a, b in sub.split(sub.i + 1, close):
                node = self.parse_with_stripping(sub.sub(a, b), a + 1, "ALTER TABLE __cdc_t ADD COLUMN {}")
                actions = (node.args.get("actions") or []) if isinstance(node, exp.Alter) else []
                if len(actions) != 1 or node_kind(actions[0]) != "ColumnDef":
                    raise DdlFailure(f"cannot parse column definition {sub.slice(a, b)!r}")
                self.add_column(edit, actions[0], if_not_exists=if_not_exists)
            return
        if not column_kw and sub.word() in TABLE_ELEMENT_WORDS:
            self.table_element(edit, self.element_node(sub.sub(sub.i, sub.end)))
            return
        node = self.parse_with_stripping(
            sub.sub(sub.i, sub.end), sub.i + 1, "ALTER TABLE __cdc_t ADD COLUMN {}"
        )
        actions = (node.args.get("actions") or []) if isinstance(node, exp.Alter) else []
        if len(actions) != 1 or node_kind(actions[0]) != "ColumnDef":
            raise DdlFailure(f"cannot parse ALTER TABLE spec {text!r}")
        self.add_column(edit, actions[0], if_not_exists=if_not_exists)

    def spec_drop(self, edit: TableEdit, sub: TokenCursor) -> None:
        """``DROP [COLUMN] [IF EXISTS] c``, ``DROP PRIMARY KEY``, ``DROP INDEX|KEY|CONSTRAINT `PRIMARY```;
        other DROPs (index, foreign key, check, partition) have no column effect."""
        sub.i += 1
        kw = sub.accept_any("INDEX", "KEY", "CONSTRAINT", "FOREIGN KEY", "CHECK", "PARTITION", "PRIMARY KEY")
        if kw is None and sub.accept("FOREIGN", "KEY"):
            kw = "FOREIGN KEY"
        if kw is None and sub.accept("PRIMARY", "KEY"):
            kw = "PRIMARY KEY"
        if kw == "PRIMARY KEY":
            edit.primary_key = []
            return
        if kw is not None:
            sub.accept("IF", "EXISTS") or sub.accept("IF EXISTS")
            if (
                kw in ("INDEX", "KEY", "CONSTRAINT")
                and not sub.at_end()
                and sub.peek().text.upper() == "PRIMARY"  # type: ignore[union-attr]  # not at_end()
            ):
                edit.primary_key = []
            return
        sub.accept("COLUMN")
        if_exists = sub.accept("IF", "EXISTS") or sub.accept("IF EXISTS")
        col = sub.name("column name")
        self.drop_column(edit, col, if_exists=if_exists)

    def spec_convert(self, edit: TableEdit, sub: TokenCursor, text: str) -> None:
        """``CONVERT TO CHARACTER SET cs [COLLATE co]``."""
        sub.i += 1
        if not sub.accept("TO"):
            raise DdlFailure(f"cannot parse ALTER TABLE spec {text!r}")
        if not (sub.accept_any("CHARACTER SET", "CHARSET") or sub.accept("CHARACTER", "SET")):
            raise DdlFailure(f"cannot parse ALTER TABLE spec {text!r}")
        self.convert_to(edit, normalize_charset(sub.value()))

    def spec_rename(self, edit: TableEdit, sub: TokenCursor, text: str) -> None:
        """``RENAME COLUMN a TO b``, ``RENAME [TO|AS] [db.]t2``; ``RENAME INDEX|KEY`` has no effect."""
        sub.i += 1
        if sub.word() in ("INDEX", "KEY"):
            return
        if sub.accept("COLUMN"):
            old = sub.name("column name")
            if not sub.accept("TO"):
                raise DdlFailure(f"cannot parse ALTER TABLE spec {text!r}")
            self.rename_column(edit, old, sub.name("column name"))
            return
        sub.accept_any("TO", "AS")
        ndb, nname = sub.qualified_name()
        ndb = ndb or edit.database
        existing = self.state.find(ndb, nname)
        if existing is not None and existing != (edit.database, edit.table):
            raise DdlFailure(f"schema catalog out of sync: table {ndb}.{nname} already exists")
        edit.database, edit.table = ndb, nname

    def spec_charset(self, edit: TableEdit, sub: TokenCursor) -> None:
        """``[DEFAULT] CHARACTER SET|CHARSET [=] cs [COLLATE [=] co]``: the table default charset for
        columns added later."""
        sub.accept("DEFAULT")
        if sub.accept_any("CHARACTER SET", "CHARSET") or sub.accept("CHARACTER", "SET"):
            edit.charset = normalize_charset(sub.value())
            sub.accept("DEFAULT")
        if sub.accept("COLLATE"):
            edit.charset = charset_of_collation(sub.value()) or edit.charset

    def spec_alter_column(self, sub: TokenCursor, text: str) -> None:
        """``ALTER [COLUMN] c SET/DROP DEFAULT | [IN]VISIBLE``, ``ALTER INDEX|KEY|CHECK|CONSTRAINT``: no
        column effect; any other ``ALTER`` spec raises."""
        nxt = sub.word(1)
        if nxt in ("INDEX", "KEY", "CHECK", "CONSTRAINT"):
            return
        if nxt == "COLUMN" or is_name(sub.peek(1)):
            rest = [word_of(x) for x in sub.toks[sub.i : sub.end]]
            if any(x in ("SET DEFAULT", "DEFAULT", "DROP", "VISIBLE", "INVISIBLE") for x in rest):
                return
        raise DdlFailure(f"cannot parse ALTER TABLE spec {text!r}")

    def spec_modify_change(self, edit: TableEdit, sub: TokenCursor, w: str, text: str) -> None:
        """``MODIFY [COLUMN] [IF EXISTS] def`` / ``CHANGE [COLUMN] [IF EXISTS] old def`` (``w``); MariaDB
        ``IF EXISTS`` of a missing column has no effect."""
        sub.i += 1
        sub.accept("COLUMN")
        if_exists = sub.accept("IF", "EXISTS") or sub.accept("IF EXISTS")
        target = sub.peek()
        if if_exists and target is not None and edit.index(target.text) is None:
            return  # MariaDB MODIFY/CHANGE COLUMN IF EXISTS of a missing column
        names = 2 if w == "CHANGE" else 1
        node = self.parse_with_stripping(
            sub.sub(sub.i, sub.end), sub.i + names, f"ALTER TABLE __cdc_t {w} COLUMN {{}}"
        )
        actions = (node.args.get("actions") or []) if isinstance(node, exp.Alter) else []
        if len(actions) != 1 or node_kind(actions[0]) != "ModifyColumn":
            raise DdlFailure(f"cannot parse ALTER TABLE spec {text!r}")
        self.alter_action(edit, actions[0])
