"""Change events in the Debezium envelope, as Arrow record batches.

A change event is one row of a table's *change log* dataset with the columns of Debezium's MySQL
connector message (Debezium docs, "MySQL connector: data change events"):

``key``
    struct of the primary-key columns (Debezium's message key); absent for keyless tables.
``before`` / ``after``
    struct of all columns, the row image before/after the change (``null`` where Debezium sends null).
``source``
    struct: ``version, connector, name, ts_ms, snapshot, db, sequence, table, server_id, gtid, file,
    pos, row, thread, query``.
``op``
    ``c`` create, ``u`` update, ``d`` delete, ``r`` read (snapshot), ``t`` truncate.
``ts_ms``
    when the connector processed the event (epoch milliseconds).
``transaction``
    struct ``id, total_order, data_collection_order`` or null (Debezium transaction metadata).

Events are kept column-oriented (Arrow) end to end: no per-row Python dicts on the hot path.

The *current state* dataset of a table holds the ``after`` columns of the newest event per key plus
the metadata columns of :data:`STATE_META_FIELDS`, named as Debezium's ``ExtractNewRecordState``
transformation names them with ``add.fields`` / ``delete.handling.mode=rewrite``.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

CONNECTOR_NAME = "mysql"
CONNECTOR_VERSION = "dagster-mysql-cdc-0.1.0"

SOURCE_TYPE = pa.struct(
    [
        ("version", pa.string()),
        ("connector", pa.string()),
        ("name", pa.string()),
        ("ts_ms", pa.int64()),
        ("snapshot", pa.string()),
        ("db", pa.string()),
        ("sequence", pa.string()),
        ("table", pa.string()),
        ("server_id", pa.int64()),
        ("gtid", pa.string()),
        ("file", pa.string()),
        ("pos", pa.int64()),
        ("row", pa.int32()),
        ("thread", pa.int64()),
        ("query", pa.string()),
    ]
)
TRANSACTION_TYPE = pa.struct(
    [("id", pa.string()), ("total_order", pa.int64()), ("data_collection_order", pa.int64())]
)

#: Kafka-header equivalents (Debezium puts ``__debezium.oldkey`` on the create event and
#: ``__debezium.newkey`` on the delete event of a primary-key change); values are key JSON.
HEADERS_TYPE = pa.map_(pa.string(), pa.string())

#: Metadata columns of the current-state dataset, after the table's own columns.
STATE_META_FIELDS = (
    pa.field("__op", pa.string()),
    pa.field("__deleted", pa.bool_()),
    pa.field("__ts_ms", pa.int64()),
    pa.field("__source_ts_ms", pa.int64()),
    pa.field("__snapshot", pa.string()),
    pa.field("__binlog_file", pa.string()),
    pa.field("__binlog_pos", pa.int64()),
    pa.field("__binlog_row", pa.int32()),
    pa.field("__gtid", pa.string()),
)
STATE_META_NAMES = tuple(f.name for f in STATE_META_FIELDS)

_BINLOG_SEQ = re.compile(r"\.(\d+)$")


@dataclass(frozen=True, order=False)
class BinlogPosition:
    """A point in the source server's binary log.

    Attributes:
        file: binlog file name, e.g. ``mysql-bin.000003``.
        pos: byte offset in that file of the next event to read.
        gtid_set: executed GTID set at this point, in the server's own format (MySQL
            ``3E11FA47-71CA-11E1-9E33-C80AA9429562:1-5``, MariaDB ``0-1-42``), or ``None``.
    """

    file: str
    pos: int
    gtid_set: str | None = None

    @property
    def file_seq(self) -> int:
        """The numeric suffix of the file name (``mysql-bin.000003`` → 3)."""
        m = _BINLOG_SEQ.search(self.file)
        if not m:
            raise ValueError(f"Binlog file name {self.file!r} has no numeric suffix")
        return int(m.group(1))

    def sort_key(self) -> tuple[int, int]:
        """Total order of positions on one server: (file sequence, byte offset)."""
        return (self.file_seq, self.pos)

    def as_version(self) -> int:
        """Monotonic 63-bit integer for this position (file sequence × 10¹², offset).

        Used as the Delta ``txn`` version of the batch that ends/starts here, so a retried batch
        is recognised as already committed. Binlog files are at most 1 GiB (``max_binlog_size``),
        far below 10¹² bytes.
        """
        return self.file_seq * 10**12 + self.pos

    def to_dict(self) -> dict[str, Any]:
        return {"file": self.file, "pos": self.pos, "gtid_set": self.gtid_set}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> BinlogPosition:
        """Inverse of :meth:`to_dict`.

        Raises:
            ValueError: ``d`` lacks ``file``/``pos`` or they have the wrong type.
        """
        try:
            return cls(file=str(d["file"]), pos=int(d["pos"]), gtid_set=d.get("gtid_set"))
        except (KeyError, TypeError, ValueError) as e:
            raise ValueError(f"Not a binlog position: {d!r} ({e})") from None

    def __str__(self) -> str:
        g = f" gtid={self.gtid_set}" if self.gtid_set else ""
        return f"{self.file}:{self.pos}{g}"


def now_ms() -> int:
    """Current wall-clock time in epoch milliseconds."""
    return time.time_ns() // 1_000_000


def key_type(value_schema: pa.Schema, primary_key: tuple[str, ...]) -> pa.StructType | None:
    """Struct type of the message key (primary-key columns), ``None`` for keyless tables."""
    if not primary_key:
        return None
    lower = {f.name.lower(): f for f in value_schema}
    return pa.struct([lower[k.lower()] for k in primary_key])


def change_log_schema(value_schema: pa.Schema, primary_key: tuple[str, ...]) -> pa.Schema:
    """Arrow schema of a table's change-log dataset.

    Args:
        value_schema: the table's columns (``types.arrow_schema``), used for ``before``/``after``.
        primary_key: key column names; gives the ``key`` struct (omitted when empty).
    """
    value = pa.struct(list(value_schema))
    fields = []
    kt = key_type(value_schema, primary_key)
    if kt is not None:
        fields.append(pa.field("key", kt))
    fields += [
        pa.field("before", value),
        pa.field("after", value),
        pa.field("source", SOURCE_TYPE),
        pa.field("op", pa.string()),
        pa.field("ts_ms", pa.int64()),
        pa.field("transaction", TRANSACTION_TYPE),
        pa.field("headers", HEADERS_TYPE),
    ]
    return pa.schema(fields)


def state_schema(value_schema: pa.Schema) -> pa.Schema:
    """Arrow schema of a table's current-state dataset: its columns + :data:`STATE_META_FIELDS`."""
    clash = [f.name for f in value_schema if f.name in STATE_META_NAMES]
    if clash:
        raise ValueError(
            f"Column(s) {clash} collide with the state table's metadata columns; rename them "
            "or exclude the table."
        )
    return pa.schema(list(value_schema) + list(STATE_META_FIELDS))


def _const(value: Any, typ: pa.DataType, n: int) -> pa.Array:
    return pa.repeat(pa.scalar(value, type=typ), n)


def snapshot_events(
    after: pa.RecordBatch,
    *,
    primary_key: tuple[str, ...],
    server_name: str,
    server_id: int,
    database: str,
    table: str,
    position: BinlogPosition,
    snapshot_flags: pa.Array,
    ts_ms: int | None = None,
    snapshot_ts_ms: int | None = None,
) -> pa.RecordBatch:
    """Build ``op=r`` read events for rows of an initial snapshot.

    Debezium MySQL connector, snapshot step 8: each scanned row becomes a read event whose
    ``source`` carries the snapshot's binlog position (file, pos, gtid), ``row=0``,
    ``snapshot`` in ``first|first_in_data_collection|true|last_in_data_collection|last``.

    Args:
        after: converted rows (schema = the table's value schema).
        snapshot_flags: string array, one flag per row.
        ts_ms: processing time; defaults to now.
        snapshot_ts_ms: ``source.ts_ms`` (when the snapshot's transaction started).
    """
    n = after.num_rows
    ts = now_ms() if ts_ms is None else ts_ms
    value_type = pa.struct(list(after.schema))
    after_arr = pa.StructArray.from_arrays(after.columns, fields=list(after.schema))
    source = pa.StructArray.from_arrays(
        [
            _const(CONNECTOR_VERSION, pa.string(), n),
            _const(CONNECTOR_NAME, pa.string(), n),
            _const(server_name, pa.string(), n),
            _const(snapshot_ts_ms if snapshot_ts_ms is not None else ts, pa.int64(), n),
            snapshot_flags,
            _const(database, pa.string(), n),
            pa.nulls(n, pa.string()),
            _const(table, pa.string(), n),
            _const(server_id, pa.int64(), n),
            _const(position.gtid_set, pa.string(), n),
            _const(position.file, pa.string(), n),
            _const(position.pos, pa.int64(), n),
            _const(0, pa.int32(), n),
            pa.nulls(n, pa.int64()),
            pa.nulls(n, pa.string()),
        ],
        fields=list(SOURCE_TYPE),
    )
    arrays = []
    names = []
    kt = key_type(after.schema, primary_key)
    if kt is not None:
        idx = {f.name.lower(): i for i, f in enumerate(after.schema)}
        arrays.append(
            pa.StructArray.from_arrays(
                [after.column(idx[k.lower()]) for k in primary_key], fields=list(kt)
            )
        )
        names.append("key")
    arrays += [
        pa.nulls(n, value_type),
        after_arr,
        source,
        _const("r", pa.string(), n),
        _const(ts, pa.int64(), n),
        pa.nulls(n, TRANSACTION_TYPE),
        pa.nulls(n, HEADERS_TYPE),
    ]
    names += ["before", "after", "source", "op", "ts_ms", "transaction", "headers"]
    return pa.RecordBatch.from_arrays(arrays, names=names).cast(
        change_log_schema(after.schema, primary_key)
    )


class ChangeEventBuilder:
    """Accumulates streamed change events of one table (one schema version) column-wise.

    Rows arrive already converted to Debezium values (tuples in column order, ``None`` for an
    absent image); :meth:`to_record_batch` builds the change-log batch without per-row dicts.

    Args:
        value_schema: Arrow schema of the table's columns (``types.arrow_schema``).
        primary_key: key column names (empty: keyless table, no ``key`` column).
        server_name / database / table: the ``source`` identity fields.
    """

    def __init__(self, value_schema: pa.Schema, primary_key: tuple[str, ...], *, server_name: str, database: str, table: str):
        self.value_schema = value_schema
        self.primary_key = primary_key
        self.server_name = server_name
        self.database = database
        self.table = table
        names = [f.name.lower() for f in value_schema]
        self._key_idx = [names.index(k.lower()) for k in primary_key]
        self.before: list[tuple | None] = []
        self.after: list[tuple | None] = []
        self.op: list[str] = []
        self.ts_ms: list[int] = []
        self.src_ts: list[int] = []
        self.server_id: list[int] = []
        self.gtid: list[str | None] = []
        self.file: list[str] = []
        self.pos: list[int] = []
        self.row: list[int] = []
        self.thread: list[int | None] = []
        self.query: list[str | None] = []
        self.snapshot: list[str] = []
        self.tx_id: list[str | None] = []
        self.tx_total: list[int | None] = []
        self.tx_coll: list[int | None] = []
        self.headers: list[list[tuple[str, str]] | None] = []

    def __len__(self) -> int:
        return len(self.op)

    def key_of(self, image: tuple) -> tuple:
        return tuple(image[i] for i in self._key_idx)

    def add(
        self, op: str, before: tuple | None, after: tuple | None, *, file: str, pos: int, row: int,
        ts_ms: int, source_ts_ms: int, server_id: int, gtid: str | None = None,
        thread: int | None = None, query: str | None = None, snapshot: str = "false",
        tx: tuple[str, int, int] | None = None, headers: dict[str, str] | None = None,
    ) -> None:
        """Append one event (Debezium op ``c|u|d|r|t``)."""
        self.op.append(op)
        self.headers.append(list(headers.items()) if headers else None)
        self.before.append(before)
        self.after.append(after)
        self.ts_ms.append(ts_ms)
        self.src_ts.append(source_ts_ms)
        self.server_id.append(server_id)
        self.gtid.append(gtid)
        self.file.append(file)
        self.pos.append(pos)
        self.row.append(row)
        self.thread.append(thread)
        self.query.append(query)
        self.snapshot.append(snapshot)
        if tx is None:
            self.tx_id.append(None)
            self.tx_total.append(None)
            self.tx_coll.append(None)
        else:
            self.tx_id.append(tx[0])
            self.tx_total.append(tx[1])
            self.tx_coll.append(tx[2])

    def _images(self, images: list[tuple | None], fields: list[pa.Field]) -> pa.Array:
        n = len(images)
        mask = pa.array([img is None for img in images], pa.bool_())
        width = len(fields)
        filled = [img if img is not None else (None,) * width for img in images]
        cols = list(zip(*filled)) if n else [()] * width
        arrays = [pa.array(list(c), type=f.type) for c, f in zip(cols, fields)]
        return pa.StructArray.from_arrays(arrays, fields=fields, mask=mask)

    def to_record_batch(self) -> pa.RecordBatch:
        """The accumulated events as a change-log batch (:func:`change_log_schema`)."""
        fields = list(self.value_schema)
        n = len(self.op)
        arrays: list[pa.Array] = []
        names: list[str] = []
        kt = key_type(self.value_schema, self.primary_key)
        if kt is not None:
            keys = [
                self.key_of(a if a is not None else b) if (a is not None or b is not None) else None
                for a, b in zip(self.after, self.before)
            ]
            arrays.append(self._images(keys, list(kt)))
            names.append("key")
        has_tx = any(t is not None for t in self.tx_id)
        arrays += [
            self._images(self.before, fields),
            self._images(self.after, fields),
            pa.StructArray.from_arrays(
                [
                    _const(CONNECTOR_VERSION, pa.string(), n),
                    _const(CONNECTOR_NAME, pa.string(), n),
                    _const(self.server_name, pa.string(), n),
                    pa.array(self.src_ts, pa.int64()),
                    pa.array(self.snapshot, pa.string()),
                    _const(self.database, pa.string(), n),
                    pa.nulls(n, pa.string()),
                    _const(self.table, pa.string(), n),
                    pa.array(self.server_id, pa.int64()),
                    pa.array(self.gtid, pa.string()),
                    pa.array(self.file, pa.string()),
                    pa.array(self.pos, pa.int64()),
                    pa.array(self.row, pa.int32()),
                    pa.array(self.thread, pa.int64()),
                    pa.array(self.query, pa.string()),
                ],
                fields=list(SOURCE_TYPE),
            ),
            pa.array(self.op, pa.string()),
            pa.array(self.ts_ms, pa.int64()),
            pa.StructArray.from_arrays(
                [pa.array(self.tx_id, pa.string()), pa.array(self.tx_total, pa.int64()), pa.array(self.tx_coll, pa.int64())],
                fields=list(TRANSACTION_TYPE),
                mask=pa.array([t is None for t in self.tx_id], pa.bool_()),
            )
            if has_tx
            else pa.nulls(n, TRANSACTION_TYPE),
            pa.array(self.headers, HEADERS_TYPE),
        ]
        names += ["before", "after", "source", "op", "ts_ms", "transaction", "headers"]
        return pa.RecordBatch.from_arrays(arrays, schema=change_log_schema(self.value_schema, self.primary_key))
