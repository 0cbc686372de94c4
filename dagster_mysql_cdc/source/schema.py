"""Table schema model shared by the snapshot reader, the binlog decoder and the schema history.

A :class:`TableSchema` is what Debezium calls a *table change* ``table`` object: the columns of one
table in ordinal order plus its primary key. It is built either from ``information_schema`` (initial
snapshot, Debezium MySQL connector snapshot step 5 "read the schema of the captured tables") or from
DDL parsed with sqlglot (schema history, :mod:`dagster_mysql_cdc.source.ddl`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from typing import Any

_PARAMS = re.compile(r"\(([^)]*)\)")


@dataclass(frozen=True)
class ColumnSchema:
    """One column of a MySQL/MariaDB table.

    Attributes:
        name: column name as stored by the server (case preserved).
        data_type: lower-case base type name, e.g. ``"int"``, ``"varchar"``, ``"decimal"``,
            ``"datetime"``, ``"enum"`` (``information_schema.COLUMNS.DATA_TYPE``).
        position: 1-based ordinal position in the table.
        nullable: whether NULL is allowed.
        unsigned: ``UNSIGNED`` integer/decimal/float.
        length: character length for CHAR/VARCHAR/BINARY/VARBINARY, bit width for BIT, display
            width for YEAR; ``None`` when not applicable.
        precision: numeric precision for DECIMAL and for FLOAT(M,D)/DOUBLE(M,D) (M); fractional-
            seconds precision (0-6) for DATETIME/TIMESTAMP/TIME; ``None`` otherwise.
        scale: numeric scale for DECIMAL and for FLOAT(M,D)/DOUBLE(M,D) (D); ``None`` otherwise (a
            FLOAT or DOUBLE declared without ``(M,D)`` has no scale).
        enum_values: the allowed values of ENUM and SET columns, in declaration order.
        charset: character set name for character columns, ``None`` for binary/other columns.
        comment: column comment (may be empty).
    """

    name: str
    data_type: str
    position: int
    nullable: bool = True
    unsigned: bool = False
    length: int | None = None
    precision: int | None = None
    scale: int | None = None
    enum_values: tuple[str, ...] = ()
    charset: str | None = None
    comment: str = ""

    @property
    def column_type(self) -> str:
        """The column type rendered back in MySQL syntax, e.g. ``decimal(10,2) unsigned``."""
        t = self.data_type
        if self.enum_values:
            quoted = ",".join("'" + v.replace("'", "''") + "'" for v in self.enum_values)
            t = f"{t}({quoted})"
        elif self.data_type == "decimal" and self.precision is not None:
            t = f"{t}({self.precision},{self.scale or 0})"
        elif self.data_type in ("float", "double") and self.precision is not None and self.scale is not None:
            t = f"{t}({self.precision},{self.scale})"
        elif self.data_type in ("datetime", "timestamp", "time") and self.precision:
            t = f"{t}({self.precision})"
        elif self.length is not None and self.data_type in ("char", "varchar", "binary", "varbinary", "bit"):
            t = f"{t}({self.length})"
        if self.unsigned:
            t += " unsigned"
        return t

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict (used by the schema history and Debezium ``tableChanges``)."""
        return {
            "name": self.name,
            "data_type": self.data_type,
            "position": self.position,
            "nullable": self.nullable,
            "unsigned": self.unsigned,
            "length": self.length,
            "precision": self.precision,
            "scale": self.scale,
            "enum_values": list(self.enum_values),
            "charset": self.charset,
            "comment": self.comment,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> ColumnSchema:
        """Inverse of :meth:`to_dict`."""
        d = dict(d)
        d["enum_values"] = tuple(d.get("enum_values") or ())
        return cls(**d)


@dataclass(frozen=True)
class TableSchema:
    """Columns and primary key of one table at one point in the binlog.

    Attributes:
        database: schema (database) name.
        table: table name.
        columns: columns in ordinal order.
        primary_key: primary-key column names in key order; empty for keyless tables.
        comment: table comment (used as the Dagster asset description).
    """

    database: str
    table: str
    columns: tuple[ColumnSchema, ...]
    primary_key: tuple[str, ...] = ()
    comment: str = ""
    _by_name: dict[str, ColumnSchema] = field(default=None, compare=False, repr=False)  # type: ignore[arg-type]

    def __post_init__(self) -> None:
        object.__setattr__(self, "_by_name", {c.name.lower(): c for c in self.columns})

    @property
    def qualified_name(self) -> str:
        """``database.table``, Debezium's data-collection identifier."""
        return f"{self.database}.{self.table}"

    @property
    def column_names(self) -> list[str]:
        return [c.name for c in self.columns]

    def column(self, name: str) -> ColumnSchema:
        """Column by case-insensitive name.

        Raises:
            KeyError: the table has no such column.
        """
        try:
            return self._by_name[name.lower()]
        except KeyError:
            raise KeyError(
                f"Column {name!r} does not exist in {self.qualified_name}; columns are {self.column_names}"
            ) from None

    def has_column(self, name: str) -> bool:
        return name.lower() in self._by_name

    def with_columns(self, columns: list[ColumnSchema] | tuple[ColumnSchema, ...]) -> TableSchema:
        """Copy with ``columns`` renumbered 1..n in the given order."""
        cols = tuple(replace(c, position=i + 1) for i, c in enumerate(columns))
        keep = {c.name.lower() for c in cols}
        pk = tuple(k for k in self.primary_key if k.lower() in keep)
        return replace(self, columns=cols, primary_key=pk)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict (schema history record body)."""
        return {
            "database": self.database,
            "table": self.table,
            "columns": [c.to_dict() for c in self.columns],
            "primary_key": list(self.primary_key),
            "comment": self.comment,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> TableSchema:
        """Inverse of :meth:`to_dict`."""
        return cls(
            database=d["database"],
            table=d["table"],
            columns=tuple(ColumnSchema.from_dict(c) for c in d["columns"]),
            primary_key=tuple(d.get("primary_key") or ()),
            comment=d.get("comment", ""),
        )


def parse_enum_values(column_type: str) -> tuple[str, ...]:
    """Values of an ``enum('a','b')`` / ``set('x','y')`` COLUMN_TYPE string, unquoted.

    Handles doubled quotes (``'it''s'``) and commas inside values.
    """
    start = column_type.find("(")
    end = column_type.rfind(")")
    if start < 0 or end < start:
        return ()
    body = column_type[start + 1 : end]
    values: list[str] = []
    i = 0
    while i < len(body):
        if body[i] == "'":
            j = i + 1
            buf = []
            while j < len(body):
                if body[j] == "'" and j + 1 < len(body) and body[j + 1] == "'":
                    buf.append("'")
                    j += 2
                    continue
                if body[j] == "\\" and j + 1 < len(body):
                    buf.append(body[j + 1])
                    j += 2
                    continue
                if body[j] == "'":
                    break
                buf.append(body[j])
                j += 1
            values.append("".join(buf))
            i = j + 1
        else:
            i += 1
    return tuple(values)
