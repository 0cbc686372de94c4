"""Parse DDL found in the binlog and apply it to an in-memory catalog of :class:`TableSchema`.

Debezium MySQL connector's *schema history* step (``MySqlStreamingChangeEventSource.handleQueryEvent``
-> ``parseStreamingDdl``): every ``QUERY_EVENT`` that is not ``BEGIN``/``COMMIT``/DML updates the
model of the captured tables, parsed with sqlglot instead of Debezium's ANTLR grammar. What is
parsed, what is ignored, the token fallback, the column rules and the limits: docs/ddl.md.

Modules (one applier per statement kind, as Debezium splits its parser listeners), imported one
way from the top of this list down:

* :mod:`.catalog` -- :class:`SchemaCatalog`, the entry point (``apply`` one binlog QueryEvent);
* :mod:`.applier` -- :class:`~.applier.DdlApplier`, dispatch of one statement to the per-kind
  appliers below;
* :mod:`.create`, :mod:`.alter`, :mod:`.drop_rename`, :mod:`.databases` -- CREATE TABLE,
  ALTER TABLE, RENAME/DROP TABLE/TRUNCATE/DROP INDEX, CREATE/ALTER/DROP DATABASE;
* :mod:`.elements` -- table elements (shared by CREATE and ALTER);
* :mod:`.base` -- :class:`~.base.StatementApplier`, what every applier shares;
* the shared vocabulary: :mod:`.columns` (column definitions -> ``ColumnSchema``), :mod:`.state`
  (the catalog state, a table being edited, the server's rules), :mod:`.dialect`,
  :mod:`.tokens`, :mod:`.comments`, :mod:`.charsets` (sqlglot dialect and parse helpers, token
  cursor and statement split, executable comments, character sets) and :mod:`.outcome`
  (:class:`DdlOutcome`, :class:`TableChange`, :class:`UnparseableDdlError`, and
  :class:`~.outcome.DdlFailure`, raised inside for a statement that cannot be read).
"""

from __future__ import annotations

from .catalog import SchemaCatalog
from .outcome import DdlOutcome, TableChange, UnparseableDdlError

__all__ = ["DdlOutcome", "SchemaCatalog", "TableChange", "UnparseableDdlError"]
