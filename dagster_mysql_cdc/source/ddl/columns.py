"""Column definitions (Debezium: ``ColumnDefinitionParserListener``): a sqlglot ``ColumnDef`` ->
:class:`ColumnSchema` as ``information_schema`` reports the column (the "Column rules" of
docs/ddl.md): the data type, its length/precision/scale, ENUM/SET values, charset and nullability."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlglot import exp

from ..schema import ColumnSchema
from .charsets import (
    BLOB_MAX,
    CHAR_TYPES,
    MBMAXLEN,
    TEXT_MAX,
    TEXT_TO_BLOB,
    charset_of_collation,
    normalize_charset,
    smallest_type,
)
from .dialect import FLOAT_UNSIGNED, json_valid_column, node_kind, node_name
from .outcome import DdlFailure

# sqlglot type names that map to one information_schema data type with no parameters used
_SIMPLE_TYPES = {
    "TINYINT": "tinyint",
    "SMALLINT": "smallint",
    "MEDIUMINT": "mediumint",
    "INT": "int",
    "BIGINT": "bigint",
    "UTINYINT": "tinyint",
    "USMALLINT": "smallint",
    "UMEDIUMINT": "mediumint",
    "UINT": "int",
    "UBIGINT": "bigint",
    "BOOLEAN": "tinyint",
    "DOUBLE": "double",
    "UDOUBLE": "double",
    "DATE": "date",
    "TINYTEXT": "tinytext",
    "MEDIUMTEXT": "mediumtext",
    "LONGTEXT": "longtext",
    "TINYBLOB": "tinyblob",
    "MEDIUMBLOB": "mediumblob",
    "LONGBLOB": "longblob",
    "GEOMETRY": "geometry",
    "UUID": "uuid",
    "JSON": "json",
}


@dataclass
class _ColumnAttributes:
    """The attributes of a column definition the model uses (sqlglot column constraints)."""

    explicit_null: bool | None = None  # NULL -> True, NOT NULL -> False, not given -> None
    pk: bool = False
    auto_inc: bool = False
    zerofill: bool = False
    charset: str | None = None
    collation: str | None = None
    comment: str = ""
    json_check: bool = False  # CHECK (json_valid(<this column>))


@dataclass
class _ColumnType:
    """A column's type as ``information_schema`` shows it, before the charset rules.

    ``data_type`` is ``("text", n)`` for ``TEXT(n)`` until the charset is known (the smallest TEXT
    type holding n characters depends on it).
    """

    data_type: str | tuple[str, int]
    unsigned: bool = False
    length: int | None = None
    precision: int | None = None
    scale: int | None = None
    enum_values: tuple[str, ...] = ()
    national: bool = False  # NCHAR / NATIONAL VARCHAR: utf8mb3 unless a charset is given
    serial: bool = False  # SERIAL: bigint unsigned NOT NULL AUTO_INCREMENT


def column_schema(
    cd: exp.Expression,
    table_charset: str | None,
    *,
    mariadb: bool,
    explicit_defaults_for_timestamp: bool,
) -> tuple[ColumnSchema, bool, bool]:
    """ColumnSchema for a sqlglot ``ColumnDef`` -> (column, inline primary key, json check).

    ``table_charset`` is the table's default charset (for character columns without one);
    ``mariadb`` selects the JSON charset (MariaDB: LONGTEXT utf8mb4); ``position`` is left 0.

    Raises:
        DdlFailure: not a column definition, no data type, or type parameters the type does not take.
    """
    if not isinstance(cd, exp.ColumnDef):
        raise DdlFailure(f"expected a column definition, sqlglot produced {node_kind(cd)}")
    name = node_name(cd.this)
    kind = cd.args.get("kind")
    if not isinstance(kind, exp.DataType):
        raise DdlFailure(f"column {name!r} has no data type")
    tname = kind.this.name if hasattr(kind.this, "name") else str(kind.this)
    if tname == "USERDEFINED":
        tname = str(kind.args.get("kind") or "").upper()

    attrs = _column_attributes(cd, name)
    t = _column_type(name, tname, list(kind.expressions or []), attrs.zerofill)
    data_type, charset = _column_charset(t, attrs, table_charset, mariadb)
    if attrs.json_check:
        data_type = "json"
        t.length = t.precision = t.scale = None
        t.enum_values = ()

    if attrs.explicit_null is None:
        nullable = True
        if data_type == "timestamp" and not explicit_defaults_for_timestamp:
            nullable = False
    else:
        nullable = attrs.explicit_null
    if attrs.auto_inc or t.serial or attrs.pk:
        nullable = False

    col = ColumnSchema(
        name=name,
        data_type=data_type,
        position=0,
        nullable=nullable,
        unsigned=t.unsigned,
        length=t.length,
        precision=t.precision,
        scale=t.scale,
        enum_values=t.enum_values,
        charset=charset,
        comment=attrs.comment,
    )
    return col, attrs.pk, attrs.json_check


def _column_attributes(cd: exp.ColumnDef, name: str) -> _ColumnAttributes:
    """``NULL``/``NOT NULL``, ``PRIMARY KEY``, ``AUTO_INCREMENT``, ``ZEROFILL``, ``CHARACTER SET``,
    ``COLLATE``, ``COMMENT`` and ``CHECK (json_valid(name))``; other attributes have no effect."""
    a = _ColumnAttributes()
    for c in cd.constraints:
        k: Any = c.args.get("kind") if isinstance(c, exp.ColumnConstraint) else c
        kn = node_kind(k)
        if kn == "NotNullColumnConstraint":
            a.explicit_null = bool(k.args.get("allow_null"))
        elif kn == "PrimaryKeyColumnConstraint":
            a.pk = True
        elif kn == "AutoIncrementColumnConstraint":
            a.auto_inc = True
        elif kn == "ZeroFillColumnConstraint":
            a.zerofill = True
        elif kn == "CharacterSetColumnConstraint":
            a.charset = normalize_charset(node_name(k.this))
        elif kn == "CollateColumnConstraint":
            a.collation = node_name(k.this)
        elif kn == "CommentColumnConstraint":
            a.comment = node_name(k.this)
        elif kn == "CheckColumnConstraint":
            if (json_valid_column(k) or "").lower() == name.lower():
                a.json_check = True
    return a


def fills_existing_rows(cd: exp.Expression) -> bool:
    """Whether adding column definition ``cd`` to a table gives its existing rows a value other
    than NULL: ``NOT NULL`` (the type's implicit default), a ``DEFAULT`` that is not ``NULL``,
    ``AUTO_INCREMENT``, a generated column (``AS (expr)``), or ``SERIAL``."""
    for c in cd.args.get("constraints") or []:
        k: Any = c.args.get("kind") if isinstance(c, exp.ColumnConstraint) else c
        kn = node_kind(k)
        if kn == "NotNullColumnConstraint" and not k.args.get("allow_null"):
            return True
        if kn == "DefaultColumnConstraint" and not isinstance(k.this, exp.Null):
            return True
        if kn in (
            "AutoIncrementColumnConstraint",
            "ComputedColumnConstraint",
            "GeneratedAsIdentityColumnConstraint",
        ):
            return True
    kind = cd.args.get("kind")
    return kind is not None and "SERIAL" in kind.sql(dialect="mysql").upper()


def _int_params(name: str, raw_params: list[Any]) -> list[int]:
    """Integer type parameters (``DECIMAL(10, 2)`` -> ``[10, 2]``); anything else raises ``DdlFailure``."""
    out = []
    for p in raw_params:
        lit = p.this if isinstance(p, exp.DataTypeParam) else p
        try:
            out.append(int(node_name(lit)))
        except (TypeError, ValueError):
            raise DdlFailure(f"column {name!r}: unexpected type parameter {p.sql()!r}") from None
    return out


def _column_type(name: str, tname: str, raw_params: list[Any], zerofill: bool) -> _ColumnType:
    """The information_schema type of sqlglot type ``tname`` with parameters ``raw_params``.

    ``ZEROFILL`` implies ``UNSIGNED``; ``SERIAL`` is bigint unsigned; unknown names (geometry
    subtypes, INET4/INET6, VECTOR, ...) are the server's name lower-cased.
    """
    t = _ColumnType(data_type="", unsigned=zerofill)
    if tname in _SIMPLE_TYPES:
        t.data_type = _SIMPLE_TYPES[tname]
        if tname.startswith("U") and tname not in ("UUID",):
            t.unsigned = True
        if tname in ("DOUBLE", "UDOUBLE") and len(raw_params) == 2:  # DOUBLE(M,D), as information_schema
            t.precision, t.scale = _int_params(name, raw_params)
    elif tname in ("FLOAT", FLOAT_UNSIGNED):
        p = _int_params(name, raw_params)
        t.data_type = "double" if len(p) == 1 and p[0] > 24 else "float"
        t.unsigned = t.unsigned or tname == FLOAT_UNSIGNED
        if len(p) == 2:  # FLOAT(M,D): Debezium FLOAT64, precision and scale kept in the history
            t.precision, t.scale = p
    elif tname in ("DECIMAL", "UDECIMAL"):
        p = _int_params(name, raw_params)
        t.data_type = "decimal"
        t.precision = p[0] if p else 10
        t.scale = p[1] if len(p) > 1 else 0
        t.unsigned = t.unsigned or tname == "UDECIMAL"
    elif tname in ("CHAR", "NCHAR", "VARCHAR", "NVARCHAR"):
        p = _int_params(name, raw_params)
        t.data_type = "char" if tname in ("CHAR", "NCHAR") else "varchar"
        t.national = tname.startswith("N")
        if not p and t.data_type == "varchar":
            raise DdlFailure(f"column {name!r}: VARCHAR needs a length")
        t.length = p[0] if p else 1
    elif tname in ("BINARY", "VARBINARY"):
        p = _int_params(name, raw_params)
        t.data_type = tname.lower()
        if not p and t.data_type == "varbinary":
            raise DdlFailure(f"column {name!r}: VARBINARY needs a length")
        t.length = p[0] if p else 1
    elif tname == "BIT":
        p = _int_params(name, raw_params)
        t.data_type = "bit"
        t.length = p[0] if p else 1
    elif tname in ("TEXT", "BLOB"):
        p = _int_params(name, raw_params)
        t.data_type = tname.lower()
        if p and tname == "BLOB":
            t.data_type = smallest_type(BLOB_MAX, p[0])
        elif p:
            t.data_type = ("text", p[0])  # resolved with the charset
    elif tname in ("ENUM", "SET"):
        t.data_type = tname.lower()
        t.enum_values = _enum_values(name, tname, raw_params)
    elif tname in ("DATETIME", "TIMESTAMP", "TIMESTAMPTZ", "TIMESTAMPLTZ", "TIME"):
        p = _int_params(name, raw_params)
        t.data_type = "time" if tname == "TIME" else ("datetime" if tname == "DATETIME" else "timestamp")
        t.precision = p[0] if p else 0
    elif tname == "YEAR":
        t.data_type = "year"
        t.length = 4
    elif tname == "SERIAL":
        t.data_type = "bigint"
        t.unsigned = True
        t.serial = True
    else:
        # geometry subtypes, INET4/INET6, VECTOR, ... : the server's name, lower-cased
        t.data_type = tname.lower()
    return t


def _enum_values(name: str, tname: str, raw_params: list[Any]) -> tuple[str, ...]:
    """The string values of ``ENUM(...)``/``SET(...)``; a non-string value raises ``DdlFailure``."""
    vals = []
    for v in raw_params:
        lit = v.this if isinstance(v, exp.DataTypeParam) else v
        if not (isinstance(lit, exp.Literal) and lit.is_string):
            raise DdlFailure(f"column {name!r}: {tname} values must be strings")
        vals.append(str(lit.this))
    return tuple(vals)


def _column_charset(
    t: _ColumnType, attrs: _ColumnAttributes, table_charset: str | None, mariadb: bool
) -> tuple[str, str | None]:
    """``(data_type, charset)``: character types only have a charset -- the column's ``CHARACTER
    SET``, else its ``COLLATE``'s, else utf8mb3 for NCHAR, else the table's; ``TEXT(n)`` becomes the
    smallest TEXT type holding n characters of it; ``CHARACTER SET binary`` turns a character type
    into its binary type (no charset). JSON is utf8mb4 on MariaDB (LONGTEXT underneath)."""
    data_type = t.data_type
    charset = attrs.charset
    if isinstance(data_type, tuple) or data_type in CHAR_TYPES:
        if charset is None and attrs.collation:
            charset = charset_of_collation(attrs.collation)
        if charset is None and t.national:
            charset = "utf8mb3"
        if charset is None:
            charset = table_charset
        if isinstance(data_type, tuple):  # TEXT(n): smallest type holding n characters
            chars = data_type[1]
            data_type = smallest_type(TEXT_MAX, chars * MBMAXLEN.get(charset or "", 1))
        if charset == "binary" and data_type in TEXT_TO_BLOB:
            data_type = TEXT_TO_BLOB[data_type]
            charset = None
        return data_type, charset
    if data_type == "json":
        return data_type, "utf8mb4" if mariadb else None
    return data_type, None
