"""sqlglot glue: the MySQL dialect with the MySQL/MariaDB type names sqlglot gets wrong or does not
know (:class:`_CdcMySQL`), a tokenizer without "commands", and the parse/AST helpers the appliers
share (sqlglot's "Falling back to parsing as a 'Command'" warnings are muted while parsing)."""

from __future__ import annotations

import logging
import threading
from typing import Any

from sqlglot import exp
from sqlglot.dialects.mysql import MySQL
from sqlglot.tokens import TokenType

from .outcome import DdlFailure


class _CdcMySQL(MySQL):
    """sqlglot's MySQL dialect with fixes for DDL type names (found while testing against MariaDB).

    * unknown type names (``POINT``, ``LINESTRING``, ``INET6``, ...) parse as user-defined types
      instead of failing (``SUPPORTS_USER_DEFINED_TYPES``);
    * ``REAL`` is DOUBLE (sqlglot: FLOAT), ``INT8`` is BIGINT (sqlglot: TINYINT), ``LONG``/``LONG
      VARCHAR`` are MEDIUMTEXT (sqlglot: BIGINT), ``LONG VARBINARY`` is MEDIUMBLOB,
      ``MIDDLEINT``/``INT3`` are MEDIUMINT, ``NATIONAL [VAR]CHAR[ACTER] [VARYING]``/``NCHAR
      VARCHAR`` are NCHAR/NVARCHAR;
    * ``FLOAT UNSIGNED`` (sqlglot: "Cannot convert FLOAT to unsigned") maps to the otherwise
      unused type UINT128, read back as ``float unsigned``; ``BOOLEAN UNSIGNED`` is tinyint
      unsigned, ``YEAR UNSIGNED`` is YEAR (the server ignores the attribute). The 128/256-bit
      integer keywords (ClickHouse/DuckDB names, not MySQL) are removed so UINT128 cannot
      come from anything else.
    """

    SUPPORTS_USER_DEFINED_TYPES = True

    class Tokenizer(MySQL.Tokenizer):
        KEYWORDS = {
            **{
                k: v
                for k, v in MySQL.Tokenizer.KEYWORDS.items()
                if k not in ("INT128", "UINT128", "INT256", "UINT256", "HUGEINT", "UHUGEINT")
            },
            "REAL": TokenType.DOUBLE,
            "INT8": TokenType.BIGINT,
            "INT4": TokenType.INT,
            "INT3": TokenType.MEDIUMINT,
            "INT2": TokenType.SMALLINT,
            "INT1": TokenType.TINYINT,
            "MIDDLEINT": TokenType.MEDIUMINT,
            "FLOAT4": TokenType.FLOAT,
            "FLOAT8": TokenType.DOUBLE,
            "LONG": TokenType.MEDIUMTEXT,
            "LONG VARCHAR": TokenType.MEDIUMTEXT,
            "LONG VARBINARY": TokenType.MEDIUMBLOB,
            "NATIONAL CHAR": TokenType.NCHAR,
            "NATIONAL CHARACTER": TokenType.NCHAR,
            "NATIONAL VARCHAR": TokenType.NVARCHAR,
            "NATIONAL CHAR VARYING": TokenType.NVARCHAR,
            "NATIONAL CHARACTER VARYING": TokenType.NVARCHAR,
            "NCHAR VARCHAR": TokenType.NVARCHAR,
            "NCHAR VARYING": TokenType.NVARCHAR,
        }

    class Parser(MySQL.Parser):  # type: ignore[valid-type,misc]  # sqlglot builds MySQL.Parser dynamically
        SIGNED_TO_UNSIGNED_TYPE_TOKEN = {
            **MySQL.Parser.SIGNED_TO_UNSIGNED_TYPE_TOKEN,
            TokenType.FLOAT: TokenType.UINT128,
            TokenType.BOOLEAN: TokenType.UTINYINT,
            TokenType.YEAR: TokenType.YEAR,
        }


#: The sqlglot MySQL dialect with the type names MySQL/MariaDB know and sqlglot does not.
DIALECT = _CdcMySQL()


class _RawTokenizer(_CdcMySQL.Tokenizer):
    """The dialect's tokenizer without "commands": sqlglot swallows everything after a leading
    ``RENAME``/``REPLACE``/... into one STRING token, which the token fallback cannot use."""

    COMMANDS: set[TokenType] = set()  # type: ignore[misc]  # an instance-level override is what sqlglot reads


#: The tokenizer of the token fallback (:class:`_RawTokenizer`).
RAW_TOKENIZER = _RawTokenizer(DIALECT)
#: The sqlglot DType name :data:`DIALECT` produces for ``FLOAT UNSIGNED``.
FLOAT_UNSIGNED = "UINT128"


class _QuietCommandFallback(logging.Filter):
    """Drops sqlglot's "Falling back to parsing as a 'Command'" warning while this package parses
    (the fallback is expected and handled here); other threads/callers are unaffected."""

    active = threading.local()

    def filter(self, record: logging.LogRecord) -> bool:
        return not (
            getattr(self.active, "on", False) and "Falling back to parsing as a" in record.getMessage()
        )


_QUIET = _QuietCommandFallback()
logging.getLogger("sqlglot").addFilter(_QUIET)


def parse_statement(text: str) -> exp.Expression:
    """The sqlglot tree of one statement, sqlglot's own warnings silenced.

    Raises:
        DdlFailure: sqlglot cannot parse the text, finds more or less than one statement, or falls
            back to ``exp.Command`` (syntax it does not support).
    """
    _QUIET.active.on = True
    try:
        trees = [t for t in DIALECT.parse(text) if t is not None]
    except Exception as e:  # ParseError, TokenError, ...
        raise DdlFailure(f"sqlglot: {' '.join(str(e).split())}") from None
    finally:
        _QUIET.active.on = False
    if len(trees) != 1:
        raise DdlFailure(f"expected one statement, sqlglot found {len(trees)}")
    if isinstance(trees[0], exp.Command):
        raise DdlFailure("sqlglot does not support this syntax (it fell back to exp.Command)")
    return trees[0]  # type: ignore[return-value]  # sqlglot 30 types it as exp.Expr, the base of exp.Expression


def try_parse_statement(text: str) -> exp.Expression | None:
    """:func:`parse_statement`, or ``None`` where it raises (the caller has a token fallback)."""
    try:
        return parse_statement(text)
    except DdlFailure:
        return None


def node_kind(node: Any) -> str:
    """The class name of a sqlglot node (``"ColumnDef"``, ``"Anonymous"``, ...); sqlglot versions
    differ in which node classes exist, so the appliers compare names."""
    return type(node).__name__


def node_name(node: Any) -> str:
    """Name of an Identifier/Column/Var/Literal/Table/Ordered/ColumnPrefix node."""
    if node is None:
        return ""
    if isinstance(node, str):
        return node
    if isinstance(node, (exp.Ordered, exp.ColumnPrefix)) or node_kind(node) in ("Ordered", "ColumnPrefix"):
        return node_name(node.this)
    if isinstance(node, exp.Literal):
        return str(node.this)
    if isinstance(node, (exp.Identifier, exp.Var)):
        return str(node.this)
    if isinstance(node, (exp.Column, exp.Table)):
        return node.name
    return node.name if hasattr(node, "name") else str(node)


def table_name_of(node: exp.Expression) -> tuple[str | None, str]:
    """``(database or None, table)`` of a sqlglot Table (or the Schema wrapping one).

    Raises:
        DdlFailure: the node is not a table name, or has three parts.
    """
    if isinstance(node, exp.Schema):
        node = node.this
    if not isinstance(node, exp.Table):
        raise DdlFailure(f"expected a table name, sqlglot produced {node_kind(node)}")
    if node.text("catalog"):
        raise DdlFailure("unsupported three-part table name")
    return (node.text("db") or None), node.name


def json_valid_column(check: exp.Expression | None) -> str | None:
    """``col`` for ``CHECK (json_valid(col))`` (the clause ``catalog.py`` maps to JSON)."""
    e = check.this if check is not None and node_kind(check) == "CheckColumnConstraint" else check
    while isinstance(e, exp.Paren):
        e = e.this
    if not isinstance(e, exp.Func):
        return None
    fname = e.name if isinstance(e, exp.Anonymous) else (e.sql_names()[0] if e.sql_names() else "")
    if str(fname).upper() != "JSON_VALID":
        return None
    args = (
        e.expressions
        if isinstance(e, exp.Anonymous)
        else [a for a in e.args.values() if isinstance(a, exp.Expression)]
    )
    if len(args) == 1 and isinstance(args[0], exp.Column) and not args[0].table:
        return args[0].name
    return None
