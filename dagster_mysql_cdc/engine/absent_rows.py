"""Lake rows a re-snapshot finds gone from the source: delete events for a key range.

A filtered or ranged re-snapshot (an incremental snapshot chunk, a ``pk_ranges`` partition) emits
``op=r`` for the rows it reads. Rows the lake state still holds but the source lost without a
binlog event (``SET sql_log_bin=0``, a foreign-key cascade, statement-based DML) would stay live,
so the re-snapshot also emits a **delete** for them: ``op=d`` with ``before`` = the lake's row
image and ``source.snapshot="incremental"`` at the chunk's high watermark (where its ``op=r``
events are), header ``dagster_mysql_cdc.reason=absent-from-source``. The sink applies it like any
delete (latest ordering key wins), so the state converges to the source.

Which rows (DBLog window semantics kept):

1. the lake's live state rows whose primary key lies in the re-snapshot's key range
   ``(lo, hi]`` (``None``: unbounded), written before the re-snapshot started (ordering key below
   ``before``);
2. minus the keys the source has in that range, read between the low and high watermarks
   *without* the snapshot's filter (a row outside an ``additional-conditions`` filter is not
   re-read, but it is not gone either);
3. minus the keys a binlog event touched between the watermarks (dropped by the caller, as the
   chunk's own ``op=r`` rows are): the binlog's version of them is newer.

A row inserted by the binlog after the chunk orders after the high watermark and wins over the
delete; a row deleted by the binlog inside the window is a delete either way.

Key ranges are compared in the lake, so this is done for tables whose primary key columns are
all integers (their order in the lake is MySQL's order). Other keys (strings under a collation,
temporal, decimal) are left alone and reported (:func:`unsupported_key_reason`).
"""

from __future__ import annotations

import bisect
import logging
from collections.abc import Sequence
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from ..events import BinlogPosition, ChangeEventBuilder, now_ms
from ..sink.layout import LakeLayout
from ..sink.state_rows import older_than
from ..sink.storage import StorageSettings
from ..source.schema import TableSchema
from ..source.types import TableConverter, TypeOptions, quote_identifier
from .incremental import decode_key

log = logging.getLogger(__name__)

#: Header of the delete events this module builds (Debezium headers are ``(key, value)`` strings).
REASON_HEADER = {"dagster_mysql_cdc.reason": "absent-from-source"}

_INTEGER_TYPES = {"tinyint", "smallint", "mediumint", "int", "integer", "bigint"}


def unsupported_key_reason(schema: TableSchema) -> str | None:
    """Why :func:`absent_rows` cannot be used for ``schema`` (``None``: it can).

    Only primary keys made of integer columns are supported: the key range is compared in the
    lake, and only integers order the same there and in MySQL (collations, time zones and
    precision rule the others out).
    """
    if not schema.primary_key:
        return f"{schema.qualified_name} has no primary key"
    by_name = {c.name.lower(): c for c in schema.columns}
    bad = [k for k in schema.primary_key if by_name[k.lower()].data_type not in _INTEGER_TYPES]
    if bad:
        return (
            f"{schema.qualified_name}: primary key column(s) {bad} are not integers, so rows the source "
            "lost are not tombstoned by a ranged/filtered re-snapshot (use a full snapshot)"
        )
    return None


class LakeLiveRows:
    """The primary keys of a table's live lake state rows written before position ``before``
    (converted values, sorted), and their images on demand.

    Reads only the key and ordering columns of the table's current state (the compacted state
    with its tail applied, :func:`..sink.read.read_current`; one read per re-snapshot or window);
    the images of the few rows found absent are read with a filter on the first key column.

    Args:
        storage: the lake.
        server_name: logical server name (first path segment).
        schema: the table's current schema (its primary key must pass :func:`unsupported_key_reason`).
        value_schema: the table's Arrow value schema (:attr:`TableConverter.arrow_schema`).
        before: only rows whose ordering key is older than this position.
    """

    def __init__(
        self,
        storage: StorageSettings,
        server_name: str,
        schema: TableSchema,
        value_schema: pa.Schema,
        before: BinlogPosition,
    ):
        from ..sink.read import read_current

        self.value_schema = value_schema
        self.pk = list(schema.primary_key)
        self.before = before
        self.storage = storage
        self.keys: list[tuple] = []
        self.paths = LakeLayout(storage, server_name).table(schema.database, schema.table)
        t = read_current(storage, self.paths, columns=self.pk)
        if t is None:
            self.present = False
            return
        self.present = True
        t = t.filter(self._older_live(t))
        self.keys = sorted(zip(*(t.column(k).to_pylist() for k in self.pk)))

    def _older_live(self, t: pa.Table) -> pa.ChunkedArray:
        b = self.before
        older = older_than(t, b.epoch, b.file, b.pos)  # (__epoch, file, pos) below `before`
        return pc.and_(pc.invert(pc.fill_null(t.column("__deleted"), True)), pc.fill_null(older, False))

    def absent(self, lo: tuple | None, hi: tuple | None, source_keys: set[tuple]) -> pa.Table:
        """Lake rows (value schema) with a key in ``(lo, hi]`` that is not in ``source_keys``
        (converted keys, the source's keys of that range)."""
        a = 0 if lo is None else bisect.bisect_right(self.keys, lo)
        b = len(self.keys) if hi is None else bisect.bisect_right(self.keys, hi)
        gone = {k for k in self.keys[a:b] if k not in source_keys}
        empty = pa.table([pa.array([], f.type) for f in self.value_schema], schema=self.value_schema)
        if not gone or not self.present:
            return empty
        from ..sink.read import read_current

        t = read_current(self.storage, self.paths, keys=(self.pk, gone))
        if t is None:
            return empty
        t = t.filter(self._older_live(t))
        have = set(t.column_names)
        return pa.table(
            [
                t.column(f.name).cast(f.type) if f.name in have else pa.nulls(t.num_rows, f.type)
                for f in self.value_schema
            ],
            schema=self.value_schema,
        )


def converted_key(schema: TableSchema, type_options: TypeOptions, encoded: list | None) -> tuple | None:
    """An :func:`~.incremental.encode_key` key (raw values) as the lake holds it (converted)."""
    if encoded is None:
        return None
    conv = TableConverter(schema, type_options, "pymysql")
    return conv.primary_key_function()(dict(zip(schema.primary_key, decode_key(encoded))))


def source_keys_in_range(
    cur: Any, schema: TableSchema, type_options: TypeOptions, lo: list | None, hi: list | None
) -> set[tuple]:
    """The converted primary keys the source has in ``(lo, hi]`` (encoded raw bounds), read with
    ``cur`` (inside the caller's watermark window), no filter."""
    pk = list(schema.primary_key)
    cols = ", ".join(quote_identifier(c) for c in pk)
    ph = ", ".join(["%s"] * len(pk))
    conds, params = [], []
    if lo is not None:
        conds.append(f"({cols}) > ({ph})")
        params += decode_key(lo)
    if hi is not None:
        conds.append(f"({cols}) <= ({ph})")
        params += decode_key(hi)
    where = ("WHERE " + " AND ".join(conds)) if conds else ""
    cur.execute(
        f"SELECT {cols} FROM {quote_identifier(schema.database)}.{quote_identifier(schema.table)} {where}",
        params,
    )
    keyf = TableConverter(schema, type_options, "pymysql").primary_key_function()
    return {keyf(dict(zip(pk, row))) for row in cur.fetchall()}


def chunk_keys(schema: TableSchema, type_options: TypeOptions, rows: list[tuple]) -> set[tuple]:
    """The converted primary keys of chunk ``rows`` (tuples of ``schema.columns`` as pymysql
    returned them), as :func:`source_keys_in_range` converts the keys it reads."""
    names = schema.column_names
    keyf = TableConverter(schema, type_options, "pymysql").primary_key_function()
    return {keyf(dict(zip(names, row))) for row in rows}


def delete_events(
    rows: pa.Table,
    *,
    schema: TableSchema,
    value_schema: pa.Schema,
    server_name: str,
    server_id: int,
    position: BinlogPosition,
    source_ts_ms: int,
    skip_keys: set[tuple] | None = None,
) -> pa.RecordBatch:
    """``op=d`` events (``source.snapshot="incremental"``, :data:`REASON_HEADER`) at ``position``
    for lake rows the source no longer has; rows whose key is in ``skip_keys`` (touched by the
    binlog between the watermarks) are left out."""
    builder = ChangeEventBuilder(
        value_schema,
        schema.primary_key,
        server_name=server_name,
        database=schema.database,
        table=schema.table,
    )
    now = now_ms()
    for tup in zip(*(c.to_pylist() for c in rows.columns)):
        if skip_keys and builder.key_of(tup) in skip_keys:
            continue
        builder.add(
            "d",
            tup,
            None,
            file=position.file,
            pos=position.pos,
            row=0,
            ts_ms=now,
            source_ts_ms=source_ts_ms,
            server_id=server_id,
            snapshot="incremental",
            headers=REASON_HEADER,
        )
    return builder.to_record_batch()


def key_tuples(batch: pa.RecordBatch | pa.Table, primary_key: Sequence[str]) -> set[tuple]:
    """The primary keys of converted rows."""
    return set(zip(*(batch.column(k).to_pylist() for k in primary_key)))
