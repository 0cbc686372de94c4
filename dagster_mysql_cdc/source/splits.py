"""Primary-key splits of a table, and the lock-free read of one split.

A *split* is a primary-key range ``(lo, hi]`` of one table (Flink CDC's snapshot split; a DBLog
chunk). A snapshot that reads its tables as splits needs no global read lock and parallelises:
each split is read by its own task (a Spark executor, :mod:`.split_reader`) on its own
connection, in its own ``REPEATABLE READ`` transaction ``WITH CONSISTENT SNAPSHOT``.

Planning (:func:`plan_splits`, on the driver, no locks):

- a single integer key column: ``MIN``/``MAX`` of the key cut into even ranges, as many as the
  table's estimated rows divided by ``split_rows`` (at least ``min_splits``);
- any other key (composite, character, temporal, decimal): boundary keys every ``split_rows`` rows,
  found by keyset stepping over the primary-key index (as the ``pk_ranges`` partitions);
- a keyless table: one split holding the whole table.

Reading (:func:`read_split`, on the executor). The split's rows carry the binlog position their
transaction's snapshot saw:

- **MariaDB**: exact. ``binlog_snapshot_file`` / ``binlog_snapshot_position`` are the binlog
  position matching the consistent snapshot (what ``mariadb-dump --single-transaction`` uses
  without locks), so every split is a consistent snapshot at its own position ``S_i``.
- **MySQL** has no such status: the rows take the position the driver read before any split began
  (``fallback``, Debezium's ``snapshot.locking.mode=none`` reading). Streaming resumes from there, so
  every change after it is replayed and the state's "latest wins" merge converges; the ``op=r``
  event may already reflect a change that follows it in the change log.

The snapshot's offset is the position read before the first split (``P0 <= S_i``): streaming from
it replays every change made while the splits were read, and the state keeps, per key, whichever
of the split row (ordered at ``(S_i, row -1)``) and the binlog events is newest. This is Flink
CDC's incremental snapshot algorithm with the watermark window collapsed to one point by the
server's consistent-snapshot position.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from ..events import BinlogPosition
from .schema import TableSchema
from .snapshot import mariadb_snapshot_position, read_events, text_row_chunks
from .types import TableConverter, TypeOptions, quote_identifier, select_expression

log = logging.getLogger(__name__)

#: Key column types split by MIN/MAX arithmetic.
INTEGER_TYPES = frozenset({"tinyint", "smallint", "mediumint", "int", "integer", "bigint"})


@dataclass(frozen=True)
class KeySplit:
    """Keys in ``(lo, hi]`` of one table: ``lo=None`` from the first key, ``hi=None`` to the last.

    Attributes:
        index: position of the split in the table's key order (0-based).
        lo / hi: raw key tuples (as pymysql returns them), exclusive / inclusive.
    """

    index: int
    lo: tuple | None
    hi: tuple | None

    def where(self, key: Sequence[str]) -> tuple[str, list]:
        """SQL condition (row-value comparison on ``key``) and its parameters; ``("", [])`` for the
        whole table."""
        if not key or (self.lo is None and self.hi is None):
            return "", []
        cols = "(" + ", ".join(quote_identifier(c) for c in key) + ")"
        ph = "(" + ", ".join(["%s"] * len(key)) + ")"
        conds, params = [], []
        if self.lo is not None:
            conds.append(f"{cols} > {ph}")
            params += list(self.lo)
        if self.hi is not None:
            conds.append(f"{cols} <= {ph}")
            params += list(self.hi)
        return " AND ".join(conds), params


def _table_sql(schema: TableSchema) -> str:
    return f"{quote_identifier(schema.database)}.{quote_identifier(schema.table)}"


def estimated_rows(conn: Any, schema: TableSchema) -> int:
    """The server's row estimate of the table (``information_schema.TABLES.TABLE_ROWS``; InnoDB's
    is approximate), 0 when unknown."""
    with conn.cursor() as cur:
        cur.execute(
            "SELECT TABLE_ROWS FROM information_schema.TABLES WHERE TABLE_SCHEMA = %s AND TABLE_NAME = %s",
            (schema.database, schema.table),
        )
        row = cur.fetchone()
    return int(row[0] or 0) if row else 0


def plan_splits(conn: Any, schema: TableSchema, *, split_rows: int, min_splits: int = 1) -> list[KeySplit]:
    """Cut ``schema``'s table into splits of about ``split_rows`` rows (see the module docs).

    Args:
        conn: a pymysql connection to the source.
        schema: the table (its ``primary_key`` is the split key; empty: one split).
        split_rows: rows per split wanted (Flink CDC ``scan.incremental.snapshot.chunk.size``).
        min_splits: for an integer key of a table with more than ``split_rows`` rows, the split
            count is a multiple of this (the Spark cores: every wave of tasks keeps every core
            busy); a smaller table is one split; boundary stepping follows ``split_rows`` only.

    Returns:
        Splits in key order covering the whole key space (the first open below, the last above).

    Raises:
        ValueError: ``split_rows`` or ``min_splits`` below 1.
    """
    if split_rows < 1 or min_splits < 1:
        raise ValueError("split_rows and min_splits must be at least 1")
    key = list(schema.primary_key)
    if not key:
        return [KeySplit(0, None, None)]
    if len(key) == 1 and schema.column(key[0]).data_type in INTEGER_TYPES:
        want = math.ceil(estimated_rows(conn, schema) / split_rows)
        # whole waves of tasks: a multiple of min_splits (the cores), no core idle in the last one
        want = math.ceil(want / min_splits) * min_splits if want > 1 else 1
        return _integer_splits(conn, schema, key[0], want)
    return _boundary_splits(conn, schema, key, split_rows)


def _integer_splits(conn: Any, schema: TableSchema, col: str, want: int) -> list[KeySplit]:
    """``want`` even ranges between the key's MIN and MAX."""
    c = quote_identifier(col)
    with conn.cursor() as cur:
        cur.execute(f"SELECT MIN({c}), MAX({c}) FROM {_table_sql(schema)}")
        lo, hi = cur.fetchone()
    if lo is None or want <= 1 or hi - lo < want:
        return [KeySplit(0, None, None)]
    step = (hi - lo) / want
    bounds = sorted({int(lo + step * i) for i in range(1, want)})
    splits, prev = [], None
    for i, b in enumerate(bounds):
        splits.append(KeySplit(i, prev, (b,)))
        prev = (b,)
    splits.append(KeySplit(len(bounds), prev, None))
    return splits


def _boundary_splits(conn: Any, schema: TableSchema, key: list[str], split_rows: int) -> list[KeySplit]:
    """Boundary keys every ``split_rows`` rows in key order (keyset stepping over the key index)."""
    return step_splits(conn, schema, key, None, None, step=split_rows)


def step_splits(
    conn: Any,
    schema: TableSchema,
    key: Sequence[str],
    lo: tuple | None,
    hi: tuple | None,
    *,
    step: int,
    n: int = 0,
    rest: bool = True,
) -> list[KeySplit]:
    """Splits of about ``step`` rows from ``lo`` (exclusive) towards ``hi`` (inclusive; ``None``:
    open), at most ``n`` of them (0: no limit). ``rest``: the last split takes the rest of the
    range up to ``hi``; otherwise each split holds ``step`` keys and only a split that reaches the
    end of the range ends at ``hi`` (the range is then covered only up to the last split's upper
    bound). Boundaries come from keyset stepping over the key index (``ORDER BY key LIMIT 1
    OFFSET step-1``), no locks.

    Raises:
        ValueError: ``step`` below 1.
    """
    if step < 1:
        raise ValueError("step must be at least 1")
    cols = ", ".join(quote_identifier(c) for c in key)
    # splits that end at a found boundary, at most (None: no limit)
    stepped = None if not n else (n - 1 if rest else n)
    splits: list[KeySplit] = []
    at = lo
    with conn.cursor() as cur:
        while stepped is None or len(splits) < stepped:
            where, params = KeySplit(0, at, hi).where(key)
            cur.execute(
                f"SELECT {cols} FROM {_table_sql(schema)} {'WHERE ' + where if where else ''} "
                f"ORDER BY {cols} LIMIT 1 OFFSET {int(step) - 1}",
                params,
            )
            row = cur.fetchone()
            if row is None or tuple(row) == hi:
                break
            splits.append(KeySplit(len(splits), at, tuple(row)))
            at = tuple(row)
        else:
            if not rest:
                return splits  # n splits of step keys; the range goes on after them
    splits.append(KeySplit(len(splits), at, hi))
    return splits


@dataclass(frozen=True)
class SplitScan:
    """What a task needs to read the splits of one table (pickled to the executors; no secrets
    other than the column-mask salt inside ``type_options``, so it travels in a 0600 file).

    Attributes:
        schema: the table as the server has it (all columns, its own primary key: the split key);
            the captured columns and message key follow from ``type_options``.
        type_options: Debezium type mapping and column policy.
        server_name: Debezium ``topic.prefix``.
        server_id: the source's ``server_id`` (``source.server_id``).
        is_mariadb: read the exact consistent-snapshot position (MariaDB) or use ``fallback``.
        fallback: the position read before the first split (the snapshot's offset).
        n_splits: splits of the table (the last one's last row is marked ``last_in_data_collection``).
        first_table / last_table: the snapshot's first/last table (``first`` / ``last`` markers).
        condition: ``snapshot.select.statement.overrides`` condition, already validated.
        fetch_size: rows per round trip; batch_rows: rows per Arrow batch.
        snapshot_ts_ms: ``source.ts_ms`` of the events (when the snapshot began).
        values_only: yield the converted rows (the table's value schema) instead of change
            events, read in autocommit (a single consistent ``SELECT``): for chunk reads whose
            consistency comes from a DBLog watermark window around the whole job (incremental
            snapshots); ``fallback`` and the snapshot markers are then unused.
        failure_handling: ``event_processing_failure_handling_mode`` for a row holding a value
            that cannot be converted (:func:`.snapshot.convert_snapshot_rows`): ``fail`` raises
            ``ValueConversionError`` naming table, column and row; ``warn``/``skip`` leave the
            row out with a WARNING in the executor's log.
    """

    schema: TableSchema
    type_options: TypeOptions
    server_name: str
    server_id: int
    is_mariadb: bool
    fallback: BinlogPosition
    n_splits: int
    first_table: bool = True
    last_table: bool = True
    condition: str | None = None
    fetch_size: int = 10_000
    batch_rows: int = 100_000
    snapshot_ts_ms: int = 0
    values_only: bool = False
    failure_handling: str = "fail"


def split_position(conn: Any, scan: SplitScan) -> BinlogPosition:
    """Start the split's consistent-snapshot transaction and return the position its rows carry
    (the exact snapshot position on MariaDB, ``scan.fallback`` elsewhere; with its epoch). A split
    whose snapshot is at the offset takes the offset's GTID set (no binlog scan)."""
    with conn.cursor() as cur:
        cur.execute("SET SESSION TRANSACTION ISOLATION LEVEL REPEATABLE READ")
        cur.execute("START TRANSACTION WITH CONSISTENT SNAPSHOT")
        if scan.is_mariadb:
            position = mariadb_snapshot_position(cur, known=scan.fallback)
            if position is not None:
                return position
    return scan.fallback


def read_split(
    conn: Any, scan: SplitScan, split: KeySplit, position: BinlogPosition | None = None
) -> Iterator[pa.RecordBatch]:
    """Read one split in its own consistent snapshot; yield ``op=r`` change-log record batches of at
    most ``scan.batch_rows`` rows (Debezium snapshot step 8 for one key range).

    ``conn`` must be a connection of its own (the transaction is committed at the end). With
    ``position``, the caller already started the transaction (:func:`split_position`). Rows are
    read as the server's text through an unbuffered cursor and converted column-wise by Arrow
    (:func:`.snapshot.text_row_chunks`), as :class:`.snapshot.ConsistentSnapshot` does.

    Raises:
        pymysql.err.MySQLError: the server refused the read (the task fails; Spark retries it).
    """
    conv = TableConverter(scan.schema, scan.type_options, "pymysql")
    if position is None and not scan.values_only:
        position = split_position(conn, scan)
    where, params = split.where(list(scan.schema.primary_key))  # the table's own (indexed) key
    cond = scan.condition
    if cond and params:  # bound parameters: the condition's own '%' must not be a placeholder
        cond = cond.replace("%", "%%")
    conds = [c for c in (where, f"({cond})" if cond else "") if c]
    sql = (
        "SELECT "
        + ", ".join(select_expression(c) for c in conv.columns)
        + f" FROM {_table_sql(scan.schema)}"
        + (" WHERE " + " AND ".join(conds) if conds else "")
    )
    chunks = text_row_chunks(conn, sql, params, scan.fetch_size, scan.batch_rows)
    if scan.values_only:
        for rows in chunks:
            yield conv.to_record_batch(rows, text_values=True)
        conn.commit()
        return
    assert position is not None  # read from the transaction above
    prev: list | None = None
    first = split.index == 0
    for rows in chunks:
        if prev is not None:
            yield _events(scan, conv, prev, position, first, last=False)
            first = False
        prev = rows
    if prev is not None:
        yield _events(scan, conv, prev, position, first, last=split.index == scan.n_splits - 1)
    conn.commit()


def _log_left_out(table: str, position: str, reason: str) -> None:
    log.warning("Left a row of %s at %s out of the snapshot: %s", table, position, reason)


def _events(
    scan: SplitScan, conv: TableConverter, rows: list, position: BinlogPosition, first: bool, *, last: bool
) -> pa.RecordBatch:
    return read_events(
        conv,
        rows,
        server_name=scan.server_name,
        server_id=scan.server_id,
        position=position,
        snapshot_ts_ms=scan.snapshot_ts_ms,
        first=first,
        last=last,
        first_table=scan.first_table,
        last_table=scan.last_table,
        on_failure=None if scan.failure_handling == "fail" else _log_left_out,
    )
