"""Schema history: every schema change with its binlog position, stored in the lake.

Debezium keeps a *schema history topic* so that after a restart it can rebuild the table schemas
as of the resume position and decode old events with the schema they were written with. Here the
history is a Delta table ``<lake>/<server>/_schema_history`` whose rows are Debezium *schema change
events* (``databaseName``, ``ddl``, ``tableChanges``) plus their position. It is both the internal
history and the user-facing schema-change dataset.

``tableChanges`` is JSON: ``[{"type": "CREATE"|"ALTER"|"DROP", "id": "db.table",
"previousId": "db.old"|null, "table": <TableSchema.to_dict()>|null}]`` — full table definitions,
so replaying the history needs no DDL parsing. Initial snapshots record one ``CREATE`` change per
snapshotted table at the snapshot position (Debezium does the same when it snapshots the schema).

Records order by ``(epoch, file_seq, pos, seq)`` (``epoch``: the offset epoch of the position, see
:class:`~dagster_mysql_cdc.events.BinlogPosition`; NULL in records written before epochs existed,
read as 0); :meth:`SchemaHistory.catalog_at` replays every record at or before a position.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from ..events import BinlogPosition, now_ms
from ..source.ddl import DdlOutcome
from ..source.schema import TableSchema
from .layout import LakeLayout
from .storage import StorageSettings

log = logging.getLogger(__name__)

HISTORY_SCHEMA = pa.schema(
    [
        ("epoch", pa.int64()),
        ("file_seq", pa.int64()),
        ("file", pa.string()),
        ("pos", pa.int64()),
        ("seq", pa.int32()),
        ("gtid", pa.string()),
        ("server_id", pa.int64()),
        ("ts_ms", pa.int64()),
        ("databaseName", pa.string()),
        ("schemaName", pa.string()),
        ("ddl", pa.string()),
        ("tableChanges", pa.string()),
        ("snapshot", pa.bool_()),
    ]
)


@dataclass
class HistoryRecord:
    """One schema change event at a position (``pos`` = end of the DDL event)."""

    position: BinlogPosition
    seq: int
    database: str | None
    ddl: str
    table_changes: list[dict]
    ts_ms: int
    server_id: int = 0
    gtid: str | None = None
    snapshot: bool = False

    def to_row(self) -> dict:
        return {
            "epoch": self.position.epoch,
            "file_seq": self.position.file_seq,
            "file": self.position.file,
            "pos": self.position.pos,
            "seq": self.seq,
            "gtid": self.gtid,
            "server_id": self.server_id,
            "ts_ms": self.ts_ms,
            "databaseName": self.database,
            "schemaName": None,
            "ddl": self.ddl,
            "tableChanges": json.dumps(self.table_changes),
            "snapshot": self.snapshot,
        }


def records_from_outcome(
    outcome: DdlOutcome, position: BinlogPosition, seq: int, ts_ms: int, server_id: int, gtid: str | None
) -> HistoryRecord:
    """A history record for one applied DDL statement."""
    changes = []
    for c in outcome.table_changes:
        changes.append(
            {
                "type": c.type,
                "id": f"{c.database}.{c.table}",
                "previousId": f"{c.previous_name[0]}.{c.previous_name[1]}" if c.previous_name else None,
                "table": c.schema.to_dict() if c.schema is not None else None,
            }
        )
    return HistoryRecord(position, seq, outcome.database, outcome.statement, changes, ts_ms, server_id, gtid)


def snapshot_records(
    position: BinlogPosition, schemas: Sequence[TableSchema], ddl: dict[tuple[str, str], str], server_id: int
) -> list[HistoryRecord]:
    """``CREATE`` records of the tables read by a snapshot at ``position``."""
    ts = now_ms()
    return [
        HistoryRecord(
            position,
            i,
            s.database,
            ddl.get((s.database, s.table), f"-- snapshot of {s.qualified_name}"),
            [{"type": "CREATE", "id": s.qualified_name, "previousId": None, "table": s.to_dict()}],
            ts,
            server_id,
            position.gtid_set,
            snapshot=True,
        )
        for i, s in enumerate(schemas)
    ]


def apply_table_changes(catalog: dict[tuple[str, str], TableSchema], changes: list[dict]) -> None:
    """Apply ``tableChanges`` entries to a ``{(db, table): TableSchema}`` dict in place."""
    for ch in changes:
        db, _, t = ch["id"].partition(".")
        if ch.get("previousId"):
            pdb, _, pt = ch["previousId"].partition(".")
            catalog.pop((pdb, pt), None)
        if ch["type"] == "DROP" or ch.get("table") is None:
            catalog.pop((db, t), None)
        else:
            catalog[(db, t)] = TableSchema.from_dict(ch["table"])


class SchemaHistory:
    """The persisted schema history of one server (see module docs).

    Args:
        storage: lake location.
        server_name: logical server name (path segment).
    """

    def __init__(self, storage: StorageSettings, server_name: str):
        self.storage = storage
        self.uri = LakeLayout(storage, server_name).schema_history()
        #: (Delta version, records as dicts) of the last read; (version, records replayed,
        #: position limit, catalog) of the last :meth:`catalog_at`: a following run's next window
        #: replays only the records after the last one's (none, without DDL)
        self._rows: tuple[int, list[dict]] | None = None
        self._replayed: tuple[int, int, tuple | None, dict] | None = None

    def read(self) -> pa.Table:
        """All records, ordered by position (empty table if there is no history yet)."""
        from .delta import open_table

        return self._read(open_table(self.storage, self.uri))

    def _read(self, dt: Any) -> pa.Table:
        if dt is None:
            return HISTORY_SCHEMA.empty_table()
        t = dt.to_pyarrow_table(filesystem=self.storage.delta_filesystem(self.uri))
        epoch = (
            pc.fill_null(t.column("epoch").cast(pa.int64()), 0)
            if "epoch" in t.column_names
            else pa.chunked_array([pa.repeat(pa.scalar(0, pa.int64()), t.num_rows)], pa.int64())
        )
        if "epoch" in t.column_names:  # NULL: a record written before offset epochs
            t = t.set_column(t.column_names.index("epoch"), "epoch", epoch)
        else:
            t = t.add_column(0, "epoch", epoch)
        return t.sort_by(
            [("epoch", "ascending"), ("file_seq", "ascending"), ("pos", "ascending"), ("seq", "ascending")]
        )

    def catalog_at(self, position: BinlogPosition | None) -> dict[tuple[str, str], TableSchema]:
        """Table schemas in force at ``position`` (every record at or before it replayed).

        The records are read once per Delta version of the history and the replay goes on from
        the previous call's when ``position`` is not before it: the windows of a following run
        each cost what their DDL costs, not the whole history (which grows with every DDL
        the server ever ran)."""
        from .delta import open_table

        dt = open_table(self.storage, self.uri)
        version = int(dt.version()) if dt is not None else -1
        if self._rows is None or self._rows[0] != version:
            self._rows = (version, self._read(dt).to_pylist())
        rows = self._rows[1]
        limit = position.sort_key() if position is not None else None
        catalog: dict[tuple[str, str], TableSchema] = {}
        start = 0
        last = self._replayed
        if (
            last is not None
            and last[0] == version
            and last[2] is not None
            and limit is not None
            and last[2] <= limit
        ):
            start, catalog = last[1], dict(last[3])
        i = start
        for i in range(start, len(rows) + 1):
            if i == len(rows):
                break
            r = rows[i]
            if limit is not None and (r["epoch"], r["file_seq"], r["pos"]) > limit:
                break
            apply_table_changes(catalog, json.loads(r["tableChanges"]))
        self._replayed = (version, i, limit, dict(catalog))
        return catalog

    def append(self, records: Sequence[HistoryRecord], *, app_id: str, version: int) -> bool:
        """Append records in one idempotent commit (skipped if ``(app_id, version)`` is done).

        Returns:
            ``True`` if committed, ``False`` if this batch was already in the history.
        """
        if not records:
            return False
        from .delta import append_rows

        table = pa.Table.from_pylist([r.to_row() for r in records], schema=HISTORY_SCHEMA)
        # add_columns: a history written before offset epochs gets the epoch column
        return append_rows(self.storage, self.uri, table, app_id=app_id, version=version, add_columns=True)
