"""Which tables are captured: Debezium's include/exclude list semantics.

``database.include.list`` / ``database.exclude.list`` are comma-separated regular expressions
matched against the whole database name; ``table.include.list`` / ``table.exclude.list`` against
the whole fully-qualified ``database.table`` name (Debezium MySQL connector properties). An include
and an exclude list of the same level cannot both be set.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from ..errors import ConfigurationError


def _compile(patterns: Sequence[str] | None, what: str) -> list[re.Pattern] | None:
    if not patterns:
        return None
    out = []
    for p in patterns:
        try:
            out.append(re.compile(p.strip(), re.IGNORECASE))
        except re.error as e:
            raise ConfigurationError(f"{what} entry {p!r} is not a valid regular expression: {e}") from None
    return out


@dataclass(frozen=True)
class TableFilter:
    """Include/exclude lists (regexes, full match, case-insensitive).

    Raises:
        ConfigurationError: invalid regex, or include and exclude lists given for the same level.
    """

    database_include_list: tuple[str, ...] = ()
    database_exclude_list: tuple[str, ...] = ()
    table_include_list: tuple[str, ...] = ()
    table_exclude_list: tuple[str, ...] = ()
    #: exact ``(database, table)`` names left out on top of the lists (stopped tables, see
    #: ``engine/isolation.py``), and, when not ``None``, the only names captured (a catch-up)
    skipped: frozenset[tuple[str, str]] = frozenset()
    only: frozenset[tuple[str, str]] | None = None
    # compiled lists (None = no list), set in __post_init__
    _dbi: list[re.Pattern] | None = field(default=None, init=False, repr=False, compare=False)
    _dbx: list[re.Pattern] | None = field(default=None, init=False, repr=False, compare=False)
    _ti: list[re.Pattern] | None = field(default=None, init=False, repr=False, compare=False)
    _tx: list[re.Pattern] | None = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.database_include_list and self.database_exclude_list:
            raise ConfigurationError(
                "database_include_list and database_exclude_list cannot both be set (Debezium rule); keep one"
            )
        if self.table_include_list and self.table_exclude_list:
            raise ConfigurationError(
                "table_include_list and table_exclude_list cannot both be set (Debezium rule); keep one"
            )
        object.__setattr__(self, "_dbi", _compile(self.database_include_list, "database_include_list"))
        object.__setattr__(self, "_dbx", _compile(self.database_exclude_list, "database_exclude_list"))
        object.__setattr__(self, "_ti", _compile(self.table_include_list, "table_include_list"))
        object.__setattr__(self, "_tx", _compile(self.table_exclude_list, "table_exclude_list"))

    def matches(self, database: str, table: str) -> bool:
        """Whether ``database.table`` is captured."""
        if (database, table) in self.skipped or (
            self.only is not None and (database, table) not in self.only
        ):
            return False
        qualified = f"{database}.{table}"
        if self._dbi is not None and not any(p.fullmatch(database) for p in self._dbi):
            return False
        if self._dbx is not None and any(p.fullmatch(database) for p in self._dbx):
            return False
        if self._ti is not None and not any(p.fullmatch(qualified) for p in self._ti):
            return False
        if self._tx is not None and any(p.fullmatch(qualified) for p in self._tx):
            return False
        return True

    def may_capture_in(self, database: str) -> bool:
        """Whether a table of ``database`` could be captured, now or once created: ``False`` only
        when the lists rule the whole database out (the database lists, the exact ``only``
        names, or table include patterns that each start with another literal database name and an
        escaped dot).
        A DDL statement that names only such databases cannot change a captured table."""
        if self.only is not None:
            return any(d.lower() == database.lower() for d, _ in self.only)
        if self._dbi is not None and not any(p.fullmatch(database) for p in self._dbi):
            return False
        if self._dbx is not None and any(p.fullmatch(database) for p in self._dbx):
            return False
        if self.table_include_list:
            for raw in self.table_include_list:
                # only ``literal\.rest`` rules a database out: an unescaped dot matches any
                # character, so ``cap.x\.t`` also matches database ``capXx``
                m = re.match(r"([A-Za-z0-9_$]+)\\\.", raw.strip())
                if m is None or m.group(1).lower() == database.lower():
                    return True  # a pattern that may match a table of the database
            return False
        return True

    def ddl_may_change_captured(self, databases: set[str] | None, signal_database: str | None = None) -> bool:
        """Whether a DDL statement that names ``databases`` (:func:`..source.ddl.scope.ddl_databases`;
        ``None``: it cannot be judged) may change a captured table or the signal table (in
        ``signal_database``): ``False`` only when every database it names is ruled out
        (:meth:`may_capture_in`) and is not the signal table's (compared case-insensitively)."""
        if databases is None:
            return True
        sig = signal_database.lower() if signal_database is not None else None
        return any(self.may_capture_in(d) or d.lower() == sig for d in databases)

    def without(self, tables: Sequence[tuple[str, str]]) -> TableFilter:
        """This filter without the exact names ``tables``."""
        return replace(self, skipped=self.skipped | frozenset(tables))

    def restricted_to(self, tables: Sequence[tuple[str, str]]) -> TableFilter:
        """This filter, capturing only the exact names ``tables`` (those it matches)."""
        return replace(self, only=frozenset(tables))

    def literal_databases(self) -> list[str] | None:
        """Database names when every database include pattern is a plain name (for narrow queries)."""
        if not self.database_include_list:
            return None
        if all(re.fullmatch(r"[A-Za-z0-9_$]+", p.strip()) for p in self.database_include_list):
            return [p.strip() for p in self.database_include_list]
        return None

    def unmatched_include_patterns(self, tables: Sequence[tuple[str, str]]) -> list[str]:
        """``table_include_list`` entries that match none of ``tables`` (the server's base tables
        in the included databases): usually a typo, which Debezium also skips silently."""
        out = []
        for raw, pat in zip(self.table_include_list, self._ti or []):
            if not any(pat.fullmatch(f"{d}.{t}") for d, t in tables):
                out.append(raw)
        return out
