"""Primary-key ranges of a table: boundaries, and a watermark re-snapshot of one range.

Backs the per-table ``pk_ranges`` partitioned assets (:mod:`.dagster_integration.partitions`):
the table's key space is cut into ranges of about ``rows_per_partition`` rows, in key order
(keyset stepping over the primary key index, no locks), and one range can be re-snapshotted with
the DBLog watermark method while streaming goes on: low watermark, ``SELECT`` the range, high
watermark, then the binlog between the two watermarks is read and every key it touched is
dropped from the range; the rest is emitted as ``op=r`` (``source.snapshot="incremental"``) at the
high watermark, so the current state converges whatever the sensor does meanwhile.
"""

from __future__ import annotations

import json
import logging
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from ..errors import ConfigurationError
from ..events import BinlogPosition, snapshot_events
from ..sink.layout import LakeLayout
from ..sink.storage import StorageSettings
from ..source.binlog import BinlogReader
from ..source.connection import ConnectionSettings, ServerInfo, connect, current_position
from ..source.schema import TableSchema
from ..source.snapshot import convert_snapshot_rows
from ..source.splits import KeySplit, step_splits
from ..source.types import TableConverter, TypeOptions, quote_identifier, select_expression
from .absent_rows import LakeLiveRows, converted_key, delete_events, key_tuples, unsupported_key_reason
from .incremental import decode_key, encode_key
from .split_snapshot import stage_split_rows
from .watermark import close_window, keys_touched, log_rows, open_window, without_keys

if TYPE_CHECKING:
    from ..sink.lake import LakeWriter

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class KeyRange:
    """One partition: keys in ``(lo, hi]`` (``lo=None``: from the first key; ``hi=None``: to the end).
    Bounds are :func:`encode_key` lists of raw key values."""

    key: str
    lo: list | None
    hi: list | None


def partition_key(i: int) -> str:
    """Partition key of the i-th range (zero-padded: lexical order = key order)."""
    return f"r{i:06d}"


def compute_ranges(conn: Any, schema: TableSchema, rows_per_partition: int) -> list[KeyRange]:
    """Cut the table's primary-key space into ranges of ``rows_per_partition`` rows (keyset stepping).

    Raises:
        ConfigurationError: the table has no primary key.
    """
    if not schema.primary_key:
        raise ConfigurationError(
            f"{schema.qualified_name} has no primary key: it cannot be split into key ranges"
        )
    pk = list(schema.primary_key)
    cols = ", ".join(quote_identifier(c) for c in pk)
    tbl = f"{quote_identifier(schema.database)}.{quote_identifier(schema.table)}"
    bounds: list[list] = []
    last = None
    with conn.cursor() as cur:
        while True:
            where = ""
            params: list[Any] = []
            if last is not None:
                where = f"WHERE ({cols}) > ({', '.join(['%s'] * len(pk))})"
                params = decode_key(last)
            cur.execute(
                f"SELECT {cols} FROM {tbl} {where} ORDER BY {cols} LIMIT 1 OFFSET {int(rows_per_partition) - 1}",
                params,
            )
            row = cur.fetchone()
            if row is None:
                break
            last = encode_key(row)
            bounds.append(last)
    ranges = []
    lo = None
    for i, hi in enumerate(bounds):
        ranges.append(KeyRange(partition_key(i), lo, hi))
        lo = hi
    ranges.append(KeyRange(partition_key(len(bounds)), lo, None))
    return ranges


def save_ranges(storage: StorageSettings, uri: str, ranges: list[KeyRange]) -> None:
    """Store a table's key ranges at ``uri`` (:meth:`.LakeLayout.pk_ranges`), replacing earlier ones."""
    storage.write_bytes(uri, json.dumps([r.__dict__ for r in ranges]).encode())


def load_ranges(storage: StorageSettings, uri: str) -> dict[str, KeyRange]:
    """The key ranges stored at ``uri`` by partition key (``{}`` when none are stored)."""
    data = storage.read_bytes(uri)
    return {d["key"]: KeyRange(**d) for d in json.loads(data.decode())} if data is not None else {}


@dataclass
class RangeSnapshot:
    """Result of :func:`snapshot_range`."""

    batch: pa.RecordBatch
    rows_read: int
    rows_emitted: int
    low: BinlogPosition
    high: BinlogPosition
    deletes: pa.RecordBatch | None = None  # op=d of lake rows the source no longer has
    rows_deleted: int = 0


def snapshot_range(
    settings: ConnectionSettings,
    info: ServerInfo,
    schema: TableSchema,
    rng: KeyRange,
    *,
    signal_table: str,
    type_options: TypeOptions,
    server_name: str,
    replica_server_id: int,
    storage: StorageSettings | None = None,
    epoch: int = 0,
    writer: LakeWriter | None = None,
    tasks: int = 0,
    range_rows: int = 100_000,
) -> RangeSnapshot:
    """Re-snapshot one key range with watermarks (see module docs).

    ``epoch``: the offset epoch the capture is in (the watermark positions carry it, so the rows
    order correctly against the lake's).

    ``writer``: read the range on the Spark executors (``snapshot_split_reads``): inside the
    watermark window, one Spark job whose ``tasks`` tasks (0: one per core) each read a part of
    about ``range_rows / tasks`` keys on their own connection and stage the rows in the lake; the
    window's deduplication and the emission are then the same as for a read on this process.

    With ``storage`` (the lake), live lake rows of the range that the source no longer has get a
    delete event at the high watermark (:mod:`.absent_rows`; integer keys only), so the range's
    state converges to the source even after changes the binlog does not carry.

    Raises:
        ConfigurationError: no signal table is configured.
    """
    if not signal_table:
        raise ConfigurationError(
            "Range re-snapshots write watermarks to the signal table: set signal_data_collection "
            "and create it (MySqlCdcResource.create_signal_table())"
        )
    pconv = TableConverter(schema, type_options, "pymysql")
    source_schema = schema
    # captured columns only (column_include_list/column_exclude_list), keyed by message.key.columns
    schema = pconv.table
    pk = list(schema.primary_key)
    sdb, _, st = signal_table.partition(".")
    wid = f"range-{uuid.uuid4().hex[:16]}"
    split = None
    if writer is not None and list(source_schema.primary_key) == pk:
        from ..sink.spark_files import default_parallelism

        n = tasks or default_parallelism(writer.spark)
        split = _RangeSplitRead(writer, source_schema, type_options, max(1, range_rows // n), n)
    batch, low, high, lake = _read_range_in_window(
        settings,
        info,
        schema,
        pconv,
        rng,
        signal=(sdb, st),
        wid=wid,
        storage=storage,
        server_name=server_name,
        epoch=epoch,
        split=split,
    )
    touched, hw = _touched_in_window(
        settings, info, replica_server_id, schema, type_options, (sdb, st), wid, low, high
    )
    high = low.at(hw[0], hw[1])
    kept = without_keys(batch, pk, touched) if touched else batch
    events = snapshot_events(
        kept,
        primary_key=schema.primary_key,
        server_name=server_name,
        server_id=hw[3],
        database=schema.database,
        table=schema.table,
        position=high,
        snapshot_flags=pa.repeat(pa.scalar("incremental"), kept.num_rows),
        snapshot_ts_ms=hw[2],
    )
    deletes = None
    if lake is not None:  # the SELECT read the whole range (no filter): its keys are the source's
        deletes = _range_deletes(
            lake, schema, pconv, rng, batch, type_options, server_name, hw, high=high, touched=touched
        )
    return RangeSnapshot(
        events,
        batch.num_rows,
        kept.num_rows,
        low,
        high,
        deletes=deletes,
        rows_deleted=deletes.num_rows if deletes is not None else 0,
    )


def _touched_in_window(
    settings: ConnectionSettings,
    info: ServerInfo,
    replica_server_id: int,
    schema: TableSchema,
    type_options: TypeOptions,
    signal: tuple[str, str],
    wid: str,
    low: BinlogPosition,
    high: BinlogPosition,
) -> tuple[set, tuple[str, int, int, int]]:
    """The keys of ``schema``'s table the binlog touched between the watermarks of window ``wid``
    (read from ``low`` to ``high``), and the high watermark's ``(file, pos, ts_ms, server_id)``.

    Raises:
        ConfigurationError: the high watermark is not in the binlog between ``low`` and ``high``.
    """
    bconv = TableConverter(schema, type_options, "binlog")
    kidx = [schema.column_names.index(k) for k in schema.primary_key]
    touched, mark = keys_touched(
        BinlogReader(settings, replica_server_id, low, high, is_mariadb=info.is_mariadb, deadline_s=600),
        (schema.database, schema.table),
        lambda image: tuple(bconv.convert_row_dict(image)[i] for i in kidx),
        signal=signal,
        open_id=wid + "-o",
        close_id=wid + "-c",
    )
    if mark is None:
        raise ConfigurationError(f"high watermark {wid} not found in the binlog between {low} and {high}")
    return touched, (mark.file, mark.pos, mark.ts_ms, mark.server_id)


def _read_range_in_window(
    settings: ConnectionSettings,
    info: ServerInfo,
    schema: TableSchema,
    pconv: TableConverter,
    rng: KeyRange,
    *,
    signal: tuple[str, str],
    wid: str,
    storage: StorageSettings | None,
    server_name: str,
    epoch: int = 0,
    split: _RangeSplitRead | None = None,
) -> tuple[pa.RecordBatch, BinlogPosition, BinlogPosition, LakeLiveRows | None]:
    """``SELECT`` the range's rows (captured columns) between an open and a close watermark row
    ``wid-o`` / ``wid-c`` in the signal table ``signal`` (database, table); with ``split``, the
    Spark executors read them (:class:`_RangeSplitRead`).

    Returns:
        (converted rows, position before the open watermark, position after the close watermark,
        the lake's live rows committed before the window: ``None`` without ``storage`` or when the
        key is not supported by :mod:`.absent_rows`).
    """

    pk = list(schema.primary_key)
    cols_pk = ", ".join(quote_identifier(c) for c in pk)
    tbl = f"{quote_identifier(schema.database)}.{quote_identifier(schema.table)}"
    sig = f"{quote_identifier(signal[0])}.{quote_identifier(signal[1])}"
    bounds = KeySplit(
        0,
        tuple(decode_key(rng.lo)) if rng.lo is not None else None,
        tuple(decode_key(rng.hi)) if rng.hi is not None else None,
    )
    cond, params = bounds.where(pk)  # the range (lo, hi] as a row-value comparison
    where = f"WHERE {cond}" if cond else ""
    lake = None
    if storage is not None:
        why = unsupported_key_reason(schema)
        if why:
            log.warning("Range re-snapshot: %s", why)
    conn = connect(settings, autocommit=True)
    try:
        if storage is not None and not why:  # lake rows committed before the low watermark
            lake = LakeLiveRows(
                storage,
                server_name,
                schema,
                pconv.arrow_schema,
                before=current_position(conn, info).with_epoch(epoch),
            )
        log_rows(conn)  # watermarks as row events when the server logs statements and we may
        low = current_position(conn, info).with_epoch(epoch)
        with conn.cursor() as cur:
            open_window(cur, sig, wid + "-o", wid)
            if split is not None:
                batch = split.read(
                    conn, settings, info, rng, LakeLayout(split.writer.storage, server_name), wid
                )
            else:
                cur.execute(
                    f"SELECT {', '.join(select_expression(c) for c in schema.columns)} FROM {tbl} {where} ORDER BY {cols_pk}",
                    params,
                )
                batch = convert_snapshot_rows(
                    pconv, list(cur.fetchall()), f"key-range re-snapshot {wid}", text_values=False
                )
            close_window(cur, sig, wid + "-o", wid + "-c", wid)
        high = current_position(conn, info).with_epoch(epoch)
    finally:
        conn.close()
    return batch, low, high, lake


@dataclass
class _RangeSplitRead:
    """How a range is read on the Spark executors: ``tasks`` parts of about ``step`` keys."""

    writer: LakeWriter
    source_schema: TableSchema  # the table as the server has it (its primary key splits)
    type_options: TypeOptions
    step: int
    tasks: int

    def read(
        self,
        conn: Any,
        settings: ConnectionSettings,
        info: ServerInfo,
        rng: KeyRange,
        layout: LakeLayout,
        wid: str,
    ) -> pa.RecordBatch:
        """One Spark job reading the range's parts (called inside the watermark window); the rows
        staged by the executors, read back as one record batch of the value schema."""
        key = list(self.source_schema.primary_key)
        lo = tuple(decode_key(rng.lo)) if rng.lo is not None else None
        hi = tuple(decode_key(rng.hi)) if rng.hi is not None else None
        parts = step_splits(conn, self.source_schema, key, lo, hi, step=self.step, n=self.tasks)
        value_schema = TableConverter(self.source_schema, self.type_options, "pymysql").arrow_schema
        stage = layout.chunk_file(wid)[: -len(".parquet")]
        files = [
            f
            for f, _ in stage_split_rows(
                self.writer,
                settings,
                info,
                self.source_schema,
                self.type_options,
                tuple((p,) for p in parts),
                stage,
            )
        ]
        storage = self.writer.storage
        table = (
            pa.concat_tables([storage.read_parquet(f) for f in files])
            if files
            else value_schema.empty_table()
        )
        return pa.RecordBatch.from_arrays(
            [table.column(f.name).combine_chunks().cast(f.type) for f in value_schema], schema=value_schema
        )


def _range_deletes(
    lake: LakeLiveRows,
    schema: TableSchema,
    pconv: TableConverter,
    rng: KeyRange,
    batch: pa.RecordBatch,
    type_options: TypeOptions,
    server_name: str,
    hw: tuple[str, int, int, int],
    *,
    high: BinlogPosition,
    touched: set,
) -> pa.RecordBatch | None:
    """``op=d`` events at the high watermark ``hw`` (file, pos, ts_ms, server_id) for the lake's
    live rows of the range whose key the source's rows (``batch``) no longer have (keys the binlog
    touched inside the window left out)."""

    absent = lake.absent(
        converted_key(schema, type_options, rng.lo),
        converted_key(schema, type_options, rng.hi),
        key_tuples(batch, list(schema.primary_key)),
    )
    return delete_events(
        absent,
        schema=schema,
        value_schema=pconv.arrow_schema,
        server_name=server_name,
        server_id=hw[3],
        position=high,
        source_ts_ms=hw[2],
        skip_keys=touched,
    )
