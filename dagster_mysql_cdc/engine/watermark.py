"""DBLog watermark windows: write the low/high watermark rows, and find what the binlog changed.

A watermark window (Netflix DBLog, "Watermark-based Chunk Selection"; Debezium's incremental
snapshot) brackets a chunk ``SELECT``: a *low watermark* row is written to the signal table, the
chunk is read, a *high watermark* row is written. In the binlog, every row event of the captured
table between the two watermark events changed a key whose chunk row may be stale: the chunk
drops those keys and the binlog's version wins. Used by

- incremental snapshots (:mod:`dagster_mysql_cdc.engine.incremental`: the watermark rows; the window's
  binlog side is applied while streaming, in :mod:`dagster_mysql_cdc.engine.incremental_source`),
- PK-range re-snapshots (:mod:`dagster_mysql_cdc.engine.ranges`: both sides, right after the SELECT),
- the asset checks (:mod:`dagster_mysql_cdc.dagster_integration.checks`: the keys changed between
  two positions, left out of a comparison).

Watermark rows are ``INSERT INTO <signal table> (id, type, data)`` with type
``snapshot-window-open`` / ``snapshot-window-close`` (Debezium's names) and ``data`` the window id.
Strategies (Debezium ``incremental.snapshot.watermarking.strategy``): ``insert_insert`` writes both
rows; ``insert_delete`` closes the window by deleting the open row (the signal table stays empty).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from ..source.signals import WATERMARK_TYPES

OPEN_TYPE, CLOSE_TYPE = WATERMARK_TYPES
#: Debezium ``incremental.snapshot.watermarking.strategy`` values.
WATERMARK_STRATEGIES = ("insert_insert", "insert_delete")

_INSERT = "INSERT INTO {table} (id, type, data) VALUES (%s, %s, %s)"


def log_rows(conn: Any) -> bool:
    """Ask the server to log this session's writes (the watermark rows) as row events when its
    ``binlog_format`` is ``STATEMENT``/``MIXED`` (``SET SESSION binlog_format = 'ROW'``).

    Setting it needs ``SUPER`` or ``BINLOG ADMIN`` (MariaDB 10.5.2+) / ``SESSION_VARIABLES_ADMIN``
    (MySQL 8), which the capture user usually lacks: then nothing changes, and the watermark rows
    are read from the statements' text instead (:func:`~..source.statements.signal_statement_rows`).

    Returns:
        whether the session logs rows now.
    """
    import pymysql

    with conn.cursor() as cur:
        cur.execute("SELECT @@SESSION.binlog_format")
        row = cur.fetchone()
        if row is None or str(row[0]).upper() == "ROW":
            return True
        try:
            cur.execute("SET SESSION binlog_format = 'ROW'")
        except pymysql.err.MySQLError:
            return False
    return True


def open_window(cur: Any, signal_table: str, watermark_id: str, data: str) -> None:
    """Write the low watermark row ``(watermark_id, 'snapshot-window-open', data)``.

    Args:
        cur: a pymysql cursor on an autocommit connection (the row must reach the binlog before
            the chunk ``SELECT``).
        signal_table: the quoted ``` `db`.`table` ``` of the signal table.
    """
    cur.execute(_INSERT.format(table=signal_table), (watermark_id, OPEN_TYPE, data))


def close_window(
    cur: Any, signal_table: str, open_id: str, close_id: str, data: str, strategy: str = "insert_insert"
) -> str:
    """Write the high watermark: a ``snapshot-window-close`` row ``close_id`` (``insert_insert``),
    or delete the open row (``insert_delete``).

    Returns:
        The id of the row whose binlog event is the high watermark (``close_id``, or ``open_id``
        for ``insert_delete``: its DELETE event).
    Raises:
        ValueError: unknown strategy.
    """
    if strategy == "insert_insert":
        cur.execute(_INSERT.format(table=signal_table), (close_id, CLOSE_TYPE, data))
        return close_id
    if strategy == "insert_delete":
        cur.execute(f"DELETE FROM {signal_table} WHERE id = %s", (open_id,))
        return open_id
    raise ValueError(f"watermark strategy {strategy!r} is not one of {WATERMARK_STRATEGIES}")


@dataclass
class WatermarkEvent:
    """The binlog event of a high watermark: where the window's snapshot rows are placed."""

    file: str
    pos: int
    ts_ms: int
    server_id: int


def keys_touched(
    items: Iterable[Any],
    table: tuple[str, str],
    key_of: Callable[[dict], tuple],
    *,
    signal: tuple[str, str] | None = None,
    open_id: str | None = None,
    close_id: str | None = None,
) -> tuple[set[tuple], WatermarkEvent | None]:
    """Keys of ``table``'s rows changed by the binlog ``items`` (a :class:`BinlogReader`'s output).

    Args:
        items: binlog reader items; only ``RowsBatch`` items count (others are skipped).
        table: ``(database, table)`` whose keys are collected.
        key_of: converted key of one row image (a ``values``/``before_values``/``after_values`` dict).
        signal / open_id / close_id: with a watermark window, only rows between the event of the
            signal-table row ``open_id`` and that of ``close_id`` count, and the close event is
            returned; without, every row of ``table`` counts.

    Returns:
        (keys, the high watermark's event or ``None``).
    """
    from ..source.binlog import RowsBatch, StatementDml  # imported when a window is read
    from ..source.statements import UnreadableSignalStatement, signal_statement_rows

    keys: set[tuple] = set()
    high: WatermarkEvent | None = None
    inside = signal is None
    opened = False
    for item in items:
        if isinstance(item, StatementDml) and signal is not None:
            # binlog_format=STATEMENT/MIXED: the watermark rows are in the statement's text
            try:
                parsed = signal_statement_rows(item.sql, item.database, signal)
            except UnreadableSignalStatement:
                parsed = None
            if parsed is not None:
                item = RowsBatch(
                    **item.origin(),
                    database=signal[0],
                    table=signal[1],
                    op=parsed[0],
                    rows=parsed[1],
                    query=None,
                    column_names=[],
                )
        if not isinstance(item, RowsBatch):
            continue
        here = (item.database, item.table)
        if signal is not None and here == signal:
            for row in item.rows:
                rid = str((row.get("values") or row.get("before_values") or {}).get("id"))
                if rid == open_id and not opened:  # (insert_delete: the open row's INSERT ...)
                    inside = opened = True
                elif rid == close_id and opened:  # (... and its DELETE close the window)
                    inside = False
                    high = WatermarkEvent(item.file, item.pos, item.ts_ms, item.server_id)
            continue
        if inside and here == table:
            for row in item.rows:
                for image in ("values", "before_values", "after_values"):
                    if image in row:
                        keys.add(key_of(row[image]))
    return keys, high


def without_keys(batch: pa.RecordBatch, pk: Sequence[str], keys: set) -> pa.RecordBatch:
    """``batch`` (converted rows) without the rows whose primary key is in ``keys`` (the keys the
    binlog touched inside the watermark window: its version wins, DBLog's chunk deduplication)."""
    key_cols = [batch.column(batch.schema.get_field_index(k)).to_pylist() for k in pk]
    return batch.filter(pa.array([tuple(k) not in keys for k in zip(*key_cols)], pa.bool_()))
