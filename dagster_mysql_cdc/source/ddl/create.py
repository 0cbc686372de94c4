"""CREATE TABLE (Debezium: ``CreateTableParserListener``): sqlglot's AST first, the token fallback
for bodies sqlglot cannot parse as a whole; ``LIKE`` copies a catalogued table."""

from __future__ import annotations

from sqlglot import exp
from sqlglot.tokens import TokenType

from .charsets import charset_of_collation, normalize_charset
from .dialect import node_kind, node_name, table_name_of, try_parse_statement
from .elements import TableElements
from .outcome import DdlFailure, DdlOutcome, TableChange
from .state import TableEdit
from .tokens import word_of

_CTAS_WORDS = frozenset({"SELECT", "AS", "IGNORE", "REPLACE", "WITH", "TABLE", "VALUES"})


class CreateTableApplier(TableElements):
    """``CREATE [OR REPLACE] TABLE [IF NOT EXISTS] t (...) | LIKE o``."""

    def create_table(self) -> DdlOutcome:
        t = self.toks
        t.i = 1
        while not t.at_end() and t.word() not in ("TABLE",):
            t.i += 1
        t.i += 1
        if_not_exists = t.accept("IF", "NOT", "EXISTS") or t.accept("IF NOT EXISTS")
        db, name = t.qualified_name()
        db, name = self.qualify(db, name)
        key = (db, name) if (db, name) in self.state.tables else None  # exact: names are case-sensitive
        if key is not None and if_not_exists:
            return self.ignored(db)

        ast = try_parse_statement(self.stmt)
        if isinstance(ast, exp.Create) and str(ast.args.get("kind") or "").upper() == "TABLE":
            edit = self.create_table_from_ast(ast, db, name)
        else:
            edit = self.create_table_from_tokens(db, name)
        if key is not None:
            self.state.remove(key)
        schema = edit.store(self.state)
        return self.outcome(db, [TableChange("CREATE", db, name, schema)])

    def new_table_charset(self, db: str, charset: str | None, collation: str | None) -> str | None:
        if charset is None and collation:
            charset = charset_of_collation(collation)
        if charset == "default":
            charset = None
        if charset is None:
            known = self.state.find_db(db)
            charset = self.state.db_charsets.get(known) if known else None
        return charset

    def like(self, db: str, name: str, src: exp.Expression | tuple[str | None, str]) -> TableEdit:
        sdb, sname = src if isinstance(src, tuple) else table_name_of(src)
        sdb, sname = self.qualify(sdb, sname)
        skey = self.state.find(sdb, sname)
        if skey is None:
            raise DdlFailure(
                f"CREATE TABLE ... LIKE {sdb}.{sname}: the source table is not in the schema catalog"
            )
        edit = TableEdit.of(self.state, skey)
        edit.database, edit.table = db, name
        return edit

    def create_table_from_ast(self, ast: exp.Create, db: str, name: str) -> TableEdit:
        if ast.args.get("expression") is not None:
            raise self.ctas_error()
        props = ast.args.get("properties")
        prop_list = list(props.expressions) if props is not None else []
        target = ast.this
        for p in prop_list:
            if node_kind(p) == "LikeProperty":
                return self.like(db, name, p.this)
        elements = list(target.expressions) if isinstance(target, exp.Schema) else []
        if len(elements) == 1 and node_kind(elements[0]) == "LikeProperty":
            return self.like(db, name, elements[0].this)
        if not isinstance(target, exp.Schema):
            raise DdlFailure("CREATE TABLE without a column list")
        charset = collation = None
        comment = ""
        for p in prop_list:
            pn = node_kind(p)
            if pn == "CharacterSetProperty":
                charset = normalize_charset(node_name(p.this))
            elif pn == "CollateProperty":
                collation = node_name(p.this)
            elif pn == "SchemaCommentProperty":
                comment = node_name(p.this)
        edit = TableEdit(db, name, comment=comment, charset=self.new_table_charset(db, charset, collation))
        self.table_elements(edit, elements)
        return edit

    def ctas_error(self) -> DdlFailure:
        return DdlFailure(
            "CREATE TABLE ... SELECT is not supported: the columns come from the query result. "
            "With binlog_format=ROW the server logs an explicit CREATE TABLE instead (MySQL and "
            "MariaDB), so this form only appears with STATEMENT/MIXED binlog_format, which CDC "
            "does not support"
        )

    def create_table_from_tokens(self, db: str, name: str) -> TableEdit:
        t = self.toks  # positioned after the table name
        if t.accept("LIKE"):
            return self.like(db, name, t.qualified_name())
        tok = t.peek()
        if tok is None or tok.token_type != TokenType.L_PAREN:
            if t.word() in _CTAS_WORDS:
                raise self.ctas_error()
            raise DdlFailure("CREATE TABLE without a column list")
        close = t.matching_paren(t.i)
        body = t.split(t.i + 1, close)
        if len(body) == 1 and word_of(t.toks[body[0][0]]) == "LIKE":
            sub = t.sub(body[0][0] + 1, body[0][1])
            return self.like(db, name, sub.qualified_name())
        if body and word_of(t.toks[body[0][0]]) in ("SELECT", "WITH"):
            raise self.ctas_error()  # CREATE TABLE t (SELECT ...)
        # table options after the body
        opts = t.sub(close + 1, t.end)
        charset = collation = None
        comment = ""
        while not opts.at_end():
            w = opts.word()
            if opts.peek().token_type == TokenType.L_PAREN:  # type: ignore[union-attr]
                if opts.word(1) in ("SELECT", "WITH"):
                    raise self.ctas_error()
                opts.i = opts.matching_paren(opts.i) + 1  # e.g. UNION=(t1, t2)
                continue
            if w == "WITH" and opts.word(1) == "SYSTEM":
                break  # WITH SYSTEM VERSIONING (MariaDB); such tables are not BASE TABLEs
            if w in _CTAS_WORDS:
                raise self.ctas_error()
            if w in ("PARTITION", "PARTITION BY"):
                break
            opts.accept("DEFAULT")
            if opts.accept_any("CHARACTER SET", "CHARSET") or opts.accept("CHARACTER", "SET"):
                charset = normalize_charset(opts.value())
            elif opts.accept("COLLATE"):
                collation = opts.value()
            elif opts.accept("COMMENT"):
                comment = opts.value()
            else:
                opts.i += 1
            opts.accept_type(TokenType.COMMA)
        edit = TableEdit(db, name, comment=comment, charset=self.new_table_charset(db, charset, collation))
        self.table_elements(edit, [self.element_node(t.sub(a, b)) for a, b in body])
        return edit
