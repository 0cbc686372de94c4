"""Debezium transaction metadata (``provide.transaction.metadata``): the per-event orders and the
``BEGIN``/``END`` records of the ``<server>/_transactions`` table."""

from __future__ import annotations

import pyarrow as pa

from ..sink.layout import LakeLayout
from ..source.binlog import RowsBatch, TransactionCommit
from .table_events import TableEvents


def transaction_orders(
    tx: dict | None, te: TableEvents, ev: RowsBatch, n: int
) -> list[tuple[str, int, int]] | None:
    """Debezium transaction metadata of the next ``n`` events of ``te``'s table in event ``ev``:
    ``(id, total_order, data_collection_order)`` each (1-based orders), advancing ``tx``
    (``None``: no transaction metadata)."""
    if tx is None:
        return None
    if tx["id"] is None:
        tx["id"] = ev.gtid or f"{ev.file}:{ev.pos}"
    key = te.schema.qualified_name
    t0, c0 = tx["total"], tx["per_table"].get(key, 0)
    tx["total"] = t0 + n
    tx["per_table"][key] = c0 + n
    tid = tx["id"]
    return [(tid, t0 + j, c0 + j) for j in range(1, n + 1)]


TRANSACTIONS_SCHEMA = pa.schema(
    [
        ("status", pa.string()),
        ("id", pa.string()),
        ("event_count", pa.int64()),
        (
            "data_collections",
            pa.list_(pa.struct([("data_collection", pa.string()), ("event_count", pa.int64())])),
        ),
        ("ts_ms", pa.int64()),
        ("file", pa.string()),
        ("pos", pa.int64()),
    ]
)


def transaction_records(tx: dict, commit: TransactionCommit) -> list[dict]:
    """Debezium transaction metadata events (``BEGIN`` and ``END`` with per-table event counts)."""
    base = {"id": tx["id"], "ts_ms": commit.ts_ms, "file": commit.end.file, "pos": commit.end.pos}
    return [
        {**base, "status": "BEGIN", "event_count": None, "data_collections": None},
        {
            **base,
            "status": "END",
            "event_count": tx["total"],
            "data_collections": [
                {"data_collection": k, "event_count": v} for k, v in tx["per_table"].items()
            ],
        },
    ]


def append_transactions(storage, server_name: str, rows: list[dict], app_id: str, version: int) -> None:
    """Append to ``<server>/_transactions`` (Debezium's transaction topic), idempotent per window
    (``(app_id, version)``: the window's per-epoch app id and start version)."""
    from ..sink.delta import append_rows

    table = pa.Table.from_pylist(rows, schema=TRANSACTIONS_SCHEMA)
    append_rows(
        storage, LakeLayout(storage, server_name).transactions(), table, app_id=app_id, version=version
    )
