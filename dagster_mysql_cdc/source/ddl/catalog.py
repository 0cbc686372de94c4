"""The schema catalog: Debezium's in-memory ``Tables`` model plus its DDL parser entry point."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from ..schema import TableSchema
from .applier import DdlApplier
from .charsets import normalize_charset
from .comments import resolve_executable_comments, version_number
from .outcome import DdlFailure, DdlOutcome, UnparseableDdlError, truncate_statement
from .state import CatalogState, ServerRules
from .tokens import split_statements

# the logger of the former single module: warnings keep their logger name
_log = logging.getLogger("dagster_mysql_cdc.source.ddl")


class SchemaCatalog:
    """Mutable ``{(db, table): TableSchema}``; :meth:`apply` returns the outcome.

    Debezium's in-memory ``Tables`` model plus its DDL parser. Seed it with the snapshot's
    schemas (``catalog.read_table_schemas``), then feed it every binlog ``QueryEvent``.

    Args:
        tables: initial schemas, e.g. from the snapshot.
        server_version: ``SELECT VERSION()`` of the source; selects MariaDB vs MySQL rules
            (``/*M!`` comments, JSON charset) and enables version gating of ``/*!NNNNN`` comments
            for statement text the server has not executed. ``None``: MariaDB rules, no gating
            (right for binlog text, see docs/ddl.md "Comments").
        explicit_defaults_for_timestamp: the server variable (ON in MySQL 8 and MariaDB >= 10.10).
        database_charsets: known default charsets of databases (``SCHEMATA``), used for tables
            created later without an explicit charset.
        table_charsets: known default charsets of the seeded tables (``TABLES.TABLE_COLLATION``
            mapped to its charset), used for columns added later without an explicit charset.
    """

    def __init__(
        self,
        tables: Mapping[tuple[str, str], TableSchema] | None = None,
        *,
        server_version: str | None = None,
        explicit_defaults_for_timestamp: bool = True,
        database_charsets: Mapping[str, str | None] | None = None,
        table_charsets: Mapping[tuple[str, str], str | None] | None = None,
    ):
        self._state = CatalogState(
            dict(tables or {}),
            {k: normalize_charset(v) for k, v in (table_charsets or {}).items()},
            {k: normalize_charset(v) for k, v in (database_charsets or {}).items()},
            {},
        )
        self._server = ServerRules(
            mariadb=server_version is None or "mariadb" in server_version.lower(),
            explicit_defaults_for_timestamp=explicit_defaults_for_timestamp,
        )
        self._version = version_number(server_version) if server_version else None

    # -- reading --------------------------------------------------------------------------------

    def get(self, database: str, table: str) -> TableSchema | None:
        """Schema of ``database.table`` (exact name, else unique case-insensitive match)."""
        key = self._state.find(database, table)
        return self._state.tables[key] if key else None

    def put(self, schema: TableSchema) -> None:
        """Add or replace one table's schema (e.g. read from information_schema when the
        history has none for a captured table)."""
        self._state.tables[(schema.database, schema.table)] = schema

    def tables(self) -> dict[tuple[str, str], TableSchema]:
        """A copy of ``{(db, table): TableSchema}``."""
        return dict(self._state.tables)

    # -- applying -------------------------------------------------------------------------------

    def apply(
        self,
        sql: str,
        default_database: str | bytes | None,
        *,
        skip_unparseable: bool = False,
        logger: Any = None,
    ) -> list[DdlOutcome]:
        """Apply the statement(s) of one binlog ``QueryEvent``.

        Args:
            sql: ``QueryEvent.query``. Several statements separated by ``;`` are applied in order
                (MySQL/MariaDB log one per event; stored-program bodies are never split).
            default_database: ``QueryEvent.schema`` (str or bytes; empty means none), used for
                unqualified names.
            skip_unparseable: Debezium ``schema.history.internal.skip.unparseable.ddl``: log a
                warning and skip statements that cannot be parsed/applied instead of raising.
            logger: where the warnings go (default: the ``dagster_mysql_cdc.source.ddl`` logger).

        Returns:
            One :class:`DdlOutcome` per statement (empty list for empty/comment-only text).

        Raises:
            UnparseableDdlError: a statement could not be parsed or applied (and
                ``skip_unparseable`` is false). The catalog is then unchanged.
        """
        log = logger or _log
        if isinstance(default_database, (bytes, bytearray)):
            default_database = bytes(default_database).decode("utf-8", "replace")
        default_db = default_database or None
        text = resolve_executable_comments(sql, self._version, self._server.mariadb)
        try:
            statements = split_statements(text)
        except DdlFailure as e:
            if not skip_unparseable:
                raise UnparseableDdlError(sql, str(e)) from None
            self._warn_skip(log, sql, str(e))
            return [DdlOutcome(sql.strip(), default_db, (), ignored=True)]

        state = self._state.copy()
        outcomes: list[DdlOutcome] = []
        for stmt in statements:
            work = state.copy()
            try:
                applier = DdlApplier(self._server, work, stmt, default_db, log)
                outcome = applier.run()
            except DdlFailure as e:
                if not skip_unparseable:
                    raise UnparseableDdlError(stmt, str(e)) from None
                self._warn_skip(log, stmt, str(e))
                outcome = DdlOutcome(stmt, default_db, (), ignored=True)
            else:
                state = work
                default_db = applier.default_db
            outcomes.append(outcome)
        self._state = state
        return outcomes

    @staticmethod
    def _warn_skip(log: Any, statement: str, reason: str) -> None:
        log.warning(
            "Skipping unparseable DDL statement (skip_unparseable_ddl=True, Debezium "
            "schema.history.internal.skip.unparseable.ddl): %r: %s",
            truncate_statement(statement, 2000),
            reason,
        )
