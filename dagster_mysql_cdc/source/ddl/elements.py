"""Table elements (Debezium: the table-element part of ``CreateTableParserListener``): columns (see
:mod:`.columns`), ``PRIMARY KEY`` and ``CHECK (json_valid(c))`` elements of CREATE TABLE bodies and
ALTER TABLE ADD, and the per-element parse of bodies sqlglot cannot parse as a whole (with the
no-op column attributes sqlglot does not know stripped on a second try)."""

from __future__ import annotations

from sqlglot import exp
from sqlglot.tokens import TokenType

from ..schema import ColumnSchema
from .base import StatementApplier
from .columns import column_schema, fills_existing_rows
from .dialect import json_valid_column, node_kind, node_name, parse_statement, try_parse_statement
from .outcome import DdlFailure
from .state import TableEdit
from .tokens import TokenCursor, word_of

#: First words of a table element that is not a column definition (keys, constraints, LIKE).
TABLE_ELEMENT_WORDS = frozenset(
    {
        "PRIMARY",
        "PRIMARY KEY",
        "KEY",
        "INDEX",
        "UNIQUE",
        "UNIQUE KEY",
        "UNIQUE INDEX",
        "FULLTEXT",
        "SPATIAL",
        "FOREIGN",
        "FOREIGN KEY",
        "CONSTRAINT",
        "CHECK",
        "PERIOD",
        "LIKE",
    }
)


def _strip_noop_column_attributes(sub: TokenCursor, protect_until: int) -> str | None:
    """Column definition text without attributes sqlglot cannot parse and the model ignores.

    Token-level, top-level only, from ``protect_until`` on (the column name is never touched):
    ``PERSISTENT`` (MariaDB for STORED), ``VISIBLE``, ``COMPRESSED[=x]``, ``SRID n``,
    ``REF_SYSTEM_ID[=]n``, ``COLUMN_FORMAT x``, ``STORAGE x``, ``[SECONDARY_]ENGINE_ATTRIBUTE[=]'x'``,
    ``WITH[OUT] SYSTEM VERSIONING``; ``SERIAL DEFAULT VALUE`` becomes ``NOT NULL AUTO_INCREMENT
    UNIQUE`` (its definition). Returns ``None`` when nothing was changed.
    """
    out: list[str] = []
    changed = False
    depth = 0
    k = sub.i
    toks = sub.toks

    def src(j: int) -> str:
        return sub.text[toks[j].start : toks[j].end + 1]

    def skip_value(j: int) -> int:
        if j < sub.end and toks[j].token_type == TokenType.EQ:
            j += 1
        return min(j + 1, sub.end)

    while k < sub.end:
        tt = toks[k].token_type
        w = word_of(toks[k])
        if depth == 0 and k >= protect_until:
            if w in ("PERSISTENT", "VISIBLE"):
                changed, k = True, k + 1
                continue
            if w == "COMPRESSED":
                changed = True
                k += 1
                if k < sub.end and toks[k].token_type == TokenType.EQ:
                    k += 2
                continue
            if w in ("SRID", "COLUMN_FORMAT", "STORAGE"):
                changed, k = True, min(k + 2, sub.end)
                continue
            if w in ("REF_SYSTEM_ID", "ENGINE_ATTRIBUTE", "SECONDARY_ENGINE_ATTRIBUTE"):
                changed, k = True, skip_value(k + 1)
                continue
            if (
                w == "SERIAL"
                and word_of(sub.toks[k + 1] if k + 1 < sub.end else None) == "DEFAULT"
                and word_of(sub.toks[k + 2] if k + 2 < sub.end else None) == "VALUE"
            ):
                out.append("NOT NULL AUTO_INCREMENT UNIQUE")
                changed, k = True, k + 3
                continue
            if w in ("WITH", "WITHOUT") and word_of(toks[k + 1] if k + 1 < sub.end else None) == "SYSTEM":
                changed, k = True, min(k + 3, sub.end)
                continue
        if tt == TokenType.L_PAREN:
            depth += 1
        elif tt == TokenType.R_PAREN:
            depth -= 1
        out.append(src(k))
        k += 1
    return " ".join(out) if changed else None


class TableElements(StatementApplier):
    """Column definitions and table elements, used by the CREATE TABLE and ALTER TABLE appliers."""

    def column(self, cd: exp.Expression, table_charset: str | None) -> tuple[ColumnSchema, bool, bool]:
        """ColumnSchema for a sqlglot ``ColumnDef`` -> (column, inline primary key, json check)."""
        return column_schema(
            cd,
            table_charset,
            mariadb=self.server.mariadb,
            explicit_defaults_for_timestamp=self.server.explicit_defaults_for_timestamp,
        )

    @staticmethod
    def position(cd: exp.Expression) -> tuple[str, str | None] | None:
        pos = cd.args.get("position")
        if pos is None:
            return None
        where = str(pos.args.get("position") or "").upper()
        if where == "FIRST":
            return ("FIRST", None)
        if where == "AFTER":
            return ("AFTER", node_name(pos.this))
        raise DdlFailure(f"unsupported column position {pos.sql()!r}")

    # -- table elements (CREATE TABLE body / ALTER TABLE ADD <element>) -------------------------

    def table_element(self, edit: TableEdit, node: exp.Expression) -> None:
        n = node_kind(node)
        if n == "ColumnDef":
            self.add_column(edit, node, if_not_exists=bool(node.args.get("exists")))
        elif n == "PrimaryKey":
            edit.set_primary_key([node_name(e) for e in node.expressions])
        elif n == "Constraint":
            for sub in node.expressions:
                self.table_element(edit, sub)
        elif n == "CheckColumnConstraint":
            col = json_valid_column(node)
            if col is not None:
                edit.json_checks.add(col.lower())
        # KEY/INDEX/UNIQUE/FULLTEXT/SPATIAL/FOREIGN KEY/PERIOD: no column effect

    def add_column(self, edit: TableEdit, cd: exp.Expression, *, if_not_exists: bool = False) -> None:
        col, pk, _ = self.column(cd, edit.charset)
        if edit.index(col.name) is not None:
            if if_not_exists:
                return
            raise DdlFailure(
                f"schema catalog out of sync: column {col.name!r} already exists in {edit.qualified}"
            )
        edit.insert(col, self.position(cd))
        edit.origin[col.name.lower()] = None  # new values (even under a name dropped just before)
        if fills_existing_rows(cd):
            edit.filled.append(col.name)
        if pk:
            edit.primary_key = [col.name]

    def element_node(self, sub: TokenCursor) -> exp.Expression:
        """One CREATE TABLE body element parsed on its own by sqlglot.

        Index/constraint elements sqlglot cannot parse become an ``exp.PrimaryKey`` read from the
        tokens when they are a primary key, else an ``exp.Anonymous`` placeholder (no effect).
        """
        text = sub.slice(sub.i, sub.end)
        if sub.word() in TABLE_ELEMENT_WORDS:
            if sub.word() == "LIKE":
                raise DdlFailure("LIKE inside a column list is only supported as CREATE TABLE t (LIKE o)")
            node = try_parse_statement(f"CREATE TABLE __cdc_t (__cdc_c INT, {text})")
            if (
                isinstance(node, exp.Create)
                and isinstance(node.this, exp.Schema)
                and len(node.this.expressions) == 2
            ):
                return node.this.expressions[1]
            pk = self.pk_columns_from_tokens(sub)
            if pk is not None:
                return exp.PrimaryKey(expressions=[exp.to_identifier(c) for c in pk])
            return exp.Anonymous(this="ignored_table_element")
        node = self.parse_with_stripping(sub, sub.i + 1, "CREATE TABLE __cdc_t ({})")
        if not (
            isinstance(node, exp.Create)
            and isinstance(node.this, exp.Schema)
            and len(node.this.expressions) == 1
        ):
            raise DdlFailure(f"cannot parse column definition {text!r}")
        return node.this.expressions[0]

    @staticmethod
    def parse_with_stripping(sub: TokenCursor, protect_until: int, template: str) -> exp.Expression:
        """sqlglot parse of ``template.format(element)``; on failure once more without the
        no-op column attributes (:func:`_strip_noop_column_attributes`), else sqlglot's error."""
        text = sub.slice(sub.i, sub.end)
        try:
            return parse_statement(template.format(text))
        except DdlFailure:
            stripped = _strip_noop_column_attributes(sub, protect_until)
            if stripped is None:
                raise
            node = try_parse_statement(template.format(stripped))
            if node is None:
                raise
            return node

    def table_elements(self, edit: TableEdit, elements: list[exp.Expression]) -> None:
        """Columns first, in order; then keys (a table-level key may precede its columns)."""
        for el in elements:
            if node_kind(el) == "ColumnDef":
                self.table_element(edit, el)
        for el in elements:
            if node_kind(el) != "ColumnDef":
                self.table_element(edit, el)

    @staticmethod
    def pk_columns_from_tokens(sub: TokenCursor) -> list[str] | None:
        """Columns of ``[CONSTRAINT [x]] PRIMARY KEY [USING t] (a(10), b DESC) ...``; else None."""
        k = sub.i
        while k < sub.end and word_of(sub.toks[k]) not in ("PRIMARY", "PRIMARY KEY"):
            if word_of(sub.toks[k]) in (
                "UNIQUE",
                "KEY",
                "INDEX",
                "FOREIGN",
                "CHECK",
                "FULLTEXT",
                "SPATIAL",
                "UNIQUE KEY",
                "UNIQUE INDEX",
                "FOREIGN KEY",
            ):
                return None
            k += 1
        while k < sub.end and sub.toks[k].token_type != TokenType.L_PAREN:
            k += 1
        if k >= sub.end:
            return None
        close = sub.matching_paren(k)
        cols = []
        for a, _b in sub.split(k + 1, close):
            t = sub.toks[a]
            if t.token_type == TokenType.L_PAREN:
                raise DdlFailure("functional key parts in a PRIMARY KEY are not supported")
            cols.append(t.text)
        return cols
