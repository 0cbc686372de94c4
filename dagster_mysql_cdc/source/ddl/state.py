"""Catalog state: the tables, their default charsets, the databases' default charsets, and the
mutable :class:`TableEdit` a CREATE/ALTER works on before it is stored."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace

from ..schema import ColumnSchema, TableSchema
from .outcome import DdlFailure

#: A catalogued table: ``(database, table)``.
Key = tuple[str, str]


@dataclass(frozen=True)
class ServerRules:
    """The source server's facts that change how a DDL statement reads.

    Attributes:
        mariadb: MariaDB rules (``/*M!`` comments execute, JSON is a LONGTEXT alias with a
            character set) rather than MySQL's.
        explicit_defaults_for_timestamp: the server variable (ON in MySQL 8 and MariaDB >= 10.10):
            when OFF, a TIMESTAMP column without NULL/DEFAULT is NOT NULL (docs/ddl.md).
    """

    mariadb: bool
    explicit_defaults_for_timestamp: bool


@dataclass
class CatalogState:
    """What the catalog knows, copied per statement so a failed statement changes nothing:
    the tables' schemas, their and their databases' default character sets, and each table's
    ``CHECK (json_valid(c))`` columns (lower-case names; MariaDB's JSON columns).
    Keys are ``(database, table)`` as written in the DDL that created them."""

    tables: dict[Key, TableSchema]
    table_charsets: dict[Key, str | None]
    db_charsets: dict[str, str | None]
    json_checks: dict[Key, frozenset[str]]  # table-level CHECK (json_valid(c)) columns, lower

    def copy(self) -> CatalogState:
        return CatalogState(
            dict(self.tables),
            dict(self.table_charsets),
            dict(self.db_charsets),
            dict(self.json_checks),
        )

    def find(self, db: str, table: str) -> Key | None:
        key = (db, table)
        if key in self.tables:
            return key
        matches = [k for k in self.tables if k[0].lower() == db.lower() and k[1].lower() == table.lower()]
        return matches[0] if len(matches) == 1 else None

    def find_db(self, db: str) -> str | None:
        names = {k[0] for k in self.tables} | set(self.db_charsets)
        if db in names:
            return db
        matches = [n for n in names if n.lower() == db.lower()]
        return matches[0] if len(matches) == 1 else None

    def remove(self, key: Key) -> None:
        self.tables.pop(key, None)
        self.table_charsets.pop(key, None)
        self.json_checks.pop(key, None)


class TableEdit:
    """A table being created/altered: mutable columns, PK, comment, default charset."""

    def __init__(
        self,
        database: str,
        table: str,
        columns: Iterable[ColumnSchema] = (),
        primary_key: Iterable[str] = (),
        comment: str = "",
        charset: str | None = None,
        json_checks: Iterable[str] = (),
    ):
        self.database = database
        self.table = table
        self.columns: list[ColumnSchema] = list(columns)
        self.primary_key: list[str] = list(primary_key)
        self.comment = comment
        self.charset = charset
        self.json_checks: set[str] = {c.lower() for c in json_checks}
        #: columns added whose existing rows get a value from the server (see TableChange)
        self.filled: list[str] = []
        #: where each column's values come from: lower-case name -> the name the column had
        #: before the statement, ``None`` for a column the statement added (renames, drops and a
        #: name dropped and added again, see TableChange.renamed_columns / dropped_columns)
        self.origin: dict[str, str | None] = {c.name.lower(): c.name for c in self.columns}

    @classmethod
    def of(cls, state: CatalogState, key: Key) -> TableEdit:
        s = state.tables[key]
        return cls(
            s.database,
            s.table,
            s.columns,
            s.primary_key,
            s.comment,
            state.table_charsets.get(key),
            state.json_checks.get(key, frozenset()),
        )

    @property
    def qualified(self) -> str:
        return f"{self.database}.{self.table}"

    def index(self, name: str) -> int | None:
        low = name.lower()
        for i, c in enumerate(self.columns):
            if c.name.lower() == low:
                return i
        return None

    def require(self, name: str) -> int:
        i = self.index(name)
        if i is None:
            raise DdlFailure(
                f"schema catalog out of sync: column {name!r} does not exist in {self.qualified} "
                f"(known columns: {[c.name for c in self.columns]})"
            )
        return i

    def insert(self, col: ColumnSchema, position: tuple[str, str | None] | None) -> None:
        if position is None:
            self.columns.append(col)
        elif position[0] == "FIRST":
            self.columns.insert(0, col)
        else:
            after = position[1] or ""
            self.columns.insert(self.require(after) + 1, col)

    def moved(self, old: str, new: str) -> None:
        """Column ``old`` is now named ``new`` (RENAME COLUMN, CHANGE): its values go with it."""
        self.origin[new.lower()] = self.origin.pop(old.lower(), None)

    def renamed_columns(self) -> tuple[tuple[str, str], ...]:
        """``(name before, name after)`` of the columns the statement renamed."""
        out = []
        for c in self.columns:
            was = self.origin.get(c.name.lower())
            if was is not None and was != c.name:
                out.append((was, c.name))
        return tuple(out)

    def dropped_columns(self, before: Iterable[ColumnSchema]) -> tuple[str, ...]:
        """Columns of ``before`` (the table before the statement) whose values the statement
        dropped: dropped, or dropped and added again under the same name."""
        kept = {v.lower() for v in self.origin.values() if v is not None}
        return tuple(c.name for c in before if c.name.lower() not in kept)

    def rename_in_keys(self, old: str, new: str) -> None:
        self.primary_key = [new if k.lower() == old.lower() else k for k in self.primary_key]
        if old.lower() in self.json_checks:
            self.json_checks.discard(old.lower())
            self.json_checks.add(new.lower())

    def set_primary_key(self, names: list[str]) -> None:
        resolved = []
        for n in names:
            resolved.append(self.columns[self.require(n)].name)
        self.primary_key = resolved

    def to_schema(self) -> TableSchema:
        pk = {k.lower() for k in self.primary_key}
        cols = []
        for c in self.columns:
            if c.name.lower() in pk and c.nullable:
                c = replace(c, nullable=False)
            if c.name.lower() in self.json_checks and c.data_type != "json":
                c = replace(c, data_type="json", length=None, precision=None, scale=None, enum_values=())
            cols.append(c)
        base = TableSchema(self.database, self.table, (), tuple(self.primary_key), self.comment)
        return base.with_columns(cols)

    def store(self, state: CatalogState) -> TableSchema:
        key = (self.database, self.table)
        schema = self.to_schema()
        state.tables[key] = schema
        state.table_charsets[key] = self.charset
        state.json_checks[key] = frozenset(self.json_checks)
        return schema
