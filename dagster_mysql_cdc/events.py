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

import operator
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any, NotRequired, TypedDict, Unpack

import pyarrow as pa
import pyarrow.compute as pc

from ._version import __version__

CONNECTOR_NAME = "mysql"
CONNECTOR_VERSION = f"dagster-mysql-cdc-{__version__}"

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
    pa.field("__epoch", pa.int64()),
    pa.field("__binlog_file", pa.string()),
    pa.field("__binlog_pos", pa.int64()),
    pa.field("__binlog_row", pa.int32()),
    pa.field("__gtid", pa.string()),
)
#: Multiplicity column of a keyless table's state (one state row per distinct row value; the
#: source holds ``__count`` copies of it; live while ``__count > 0``). Keyed tables have no such
#: column (a key occurs at most once).
COUNT_FIELD = pa.field("__count", pa.int64())
#: Names of every metadata column a state table may have (readers drop them to get the row image).
STATE_META_NAMES = tuple(f.name for f in STATE_META_FIELDS) + (COUNT_FIELD.name,)

_BINLOG_SEQ = re.compile(r"\.(\d+)$")


@dataclass(frozen=True, order=False)
class BinlogPosition:
    """A point in the source server's binary log, in the lake's order.

    Attributes:
        file: binlog file name, e.g. ``mysql-bin.000003``.
        pos: byte offset in that file of the next event to read.
        gtid_set: executed GTID set at this point, in the server's own format (MySQL
            ``3E11FA47-71CA-11E1-9E33-C80AA9429562:1-5``, MariaDB ``0-1-42``), or ``None``.
        epoch: the *offset epoch*: how many times the capture moved to another server (or to a
            binlog whose numbering restarted). A failover resumes by GTID at a position of the new
            server whose file number may sort below the old server's, so the lake orders events by
            ``(epoch, file number, offset, row)``: every position of one epoch sorts after every
            position of the previous one. ``0`` until the first failover (then omitted from
            :meth:`to_dict`, so cursors and run tags of a capture that never failed over are
            unchanged). Positions read from the server inside a window take the window's epoch
            (:meth:`at`).
    """

    file: str
    pos: int
    gtid_set: str | None = None
    epoch: int = 0

    @property
    def file_seq(self) -> int:
        """The numeric suffix of the file name (``mysql-bin.000003`` → 3)."""
        m = _BINLOG_SEQ.search(self.file)
        if not m:
            raise ValueError(f"Binlog file name {self.file!r} has no numeric suffix")
        return int(m.group(1))

    def sort_key(self) -> tuple[int, int, int]:
        """Total order of positions in the lake: (epoch, file sequence, byte offset)."""
        return (self.epoch, self.file_seq, self.pos)

    def at(self, file: str, pos: int, gtid_set: str | None = None) -> BinlogPosition:
        """Another position of the same server and epoch (``file``/``pos`` read from the server
        inside a window take the window's epoch, so they compare correctly with its ends)."""
        return BinlogPosition(file, int(pos), gtid_set, self.epoch)

    def with_epoch(self, epoch: int) -> BinlogPosition:
        """This position in offset epoch ``epoch``."""
        return self if epoch == self.epoch else replace(self, epoch=int(epoch))

    def as_version(self) -> int:
        """Monotonic 63-bit integer for this position *within its epoch* (file sequence × 10¹²,
        offset).

        Used as the Delta ``txn`` version of the batch that ends/starts here, so a retried batch
        is recognised as already committed. Binlog files are at most 1 GiB (``max_binlog_size``),
        far below 10¹² bytes. The epoch does not fit in the 63 bits (file numbers reach 10⁶), so
        every Delta ``txn`` app id that takes this version is made per epoch with
        :meth:`txn_app` (a new epoch starts its own version series); names of staging files
        derived from it use :meth:`version_tag`.
        """
        return self.file_seq * 10**12 + self.pos

    def txn_app(self, app_id: str) -> str:
        """The Delta ``txn`` app id of a batch versioned by :meth:`as_version`: ``app_id`` in
        epoch 0 (unchanged for captures that never failed over), ``app_id@epoch<n>`` after."""
        return app_id if self.epoch == 0 else f"{app_id}@epoch{self.epoch}"

    def version_tag(self) -> str:
        """:meth:`as_version` as a file-name part, ``e<n>-`` prefixed in epoch ``n > 0``."""
        return str(self.as_version()) if self.epoch == 0 else f"e{self.epoch}-{self.as_version()}"

    def to_dict(self) -> dict[str, Any]:
        """``{"file", "pos", "gtid_set"}`` plus ``"epoch"`` when it is not 0."""
        d: dict[str, Any] = {"file": self.file, "pos": self.pos, "gtid_set": self.gtid_set}
        if self.epoch:
            d["epoch"] = self.epoch
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> BinlogPosition:
        """Inverse of :meth:`to_dict` (no ``epoch``: 0, as written before epochs existed).

        Raises:
            ValueError: ``d`` lacks ``file``/``pos`` or they (or ``epoch``) have the wrong type.
        """
        try:
            epoch = int(d.get("epoch") or 0)
            if epoch < 0:
                raise ValueError("negative epoch")
            return cls(file=str(d["file"]), pos=int(d["pos"]), gtid_set=d.get("gtid_set"), epoch=epoch)
        except (KeyError, TypeError, ValueError) as e:
            raise ValueError(f"Not a binlog position: {d!r} ({e})") from None

    def __str__(self) -> str:
        g = f" gtid={self.gtid_set}" if self.gtid_set else ""
        e = f" epoch={self.epoch}" if self.epoch else ""
        return f"{self.file}:{self.pos}{g}{e}"


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


def state_schema(value_schema: pa.Schema, *, keyless: bool = False) -> pa.Schema:
    """Arrow schema of a table's current-state dataset: its columns + :data:`STATE_META_FIELDS`
    (+ :data:`COUNT_FIELD` for a keyless table, whose state is a multiset).

    Raises:
        ValueError: a column of the table has the name of a metadata column.
    """
    clash = [f.name for f in value_schema if f.name in STATE_META_NAMES]
    if clash:
        raise ValueError(
            f"Column(s) {clash} collide with the state table's metadata columns; rename them "
            "or exclude the table."
        )
    return pa.schema(list(value_schema) + list(STATE_META_FIELDS) + ([COUNT_FIELD] if keyless else []))


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
    op: str = "r",
    headers: dict[str, str] | None = None,
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
        op: ``r`` (rows are ``after`` images) or ``d`` (rows are ``before`` images of keys a
            repair found deleted on the source, see :mod:`.gaps`).
        headers: change-log headers of every event (e.g. why a repair re-read the rows).
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
            pa.StructArray.from_arrays([after.column(idx[k.lower()]) for k in primary_key], fields=list(kt))
        )
        names.append("key")
    if op not in ("r", "d"):
        raise ValueError(f"snapshot_events builds op 'r' or 'd' events, not {op!r}")
    images = [pa.nulls(n, value_type), after_arr]
    arrays += [
        *(images if op == "r" else images[::-1]),
        source,
        _const(op, pa.string(), n),
        _const(ts, pa.int64(), n),
        pa.nulls(n, TRANSACTION_TYPE),
        pa.array([list(headers.items())] * n, HEADERS_TYPE) if headers else pa.nulls(n, HEADERS_TYPE),
    ]
    names += ["before", "after", "source", "op", "ts_ms", "transaction", "headers"]
    return pa.RecordBatch.from_arrays(arrays, names=names).cast(change_log_schema(after.schema, primary_key))


class SourceFields(TypedDict):
    """The ``source`` block fields one call of :meth:`ChangeEventBuilder.add` /
    :meth:`~ChangeEventBuilder.add_raw` gives all its events (Debezium MySQL connector,
    ``io.debezium.connector.mysql.Source``).

    Keys:
        file, pos: binlog file and offset of the event (``source.file``/``pos``).
        ts_ms: the envelope's ``ts_ms`` (when the connector processed the event), epoch ms.
        source_ts_ms: ``source.ts_ms`` (when the change was made in the database), epoch ms.
        server_id: ``source.server_id``.
        gtid, thread, query: ``source.gtid``/``thread``/``query`` (default ``None``).
        snapshot: ``source.snapshot``: ``"false"`` (default), ``"true"``, ``"last"``,
            ``"incremental"`` ...
    """

    file: str
    pos: int
    ts_ms: int
    source_ts_ms: int
    server_id: int
    gtid: NotRequired[str | None]
    thread: NotRequired[int | None]
    query: NotRequired[str | None]
    snapshot: NotRequired[str]


def _source_key(source: SourceFields) -> tuple:
    """The builder's grouping key of a ``source`` block (events sharing it share one group)."""
    return (
        source["ts_ms"],
        source["source_ts_ms"],
        source.get("snapshot", "false"),
        source["server_id"],
        source.get("gtid"),
        source["file"],
        source["pos"],
        source.get("thread"),
        source.get("query"),
    )


class ChangeEventBuilder:
    """Accumulates streamed change events of one table (one schema version) column-wise.

    Two ways to add events, not to be mixed with images in one builder:

    * :meth:`add`: one event whose images are tuples of *converted* Debezium values in column order
      (``None`` for an absent image), e.g. rows re-read for an incremental snapshot.
    * :meth:`add_raw`: the rows of one binlog rows event, images as python-mysql-replication's
      row dicts, kept *raw* and converted column by column (Arrow-vectorised where possible) by
      the given :class:`~.source.types.TableConverter` in :meth:`to_record_batch`.

    Storage is per column (present images only, plus the position of each event's image), and
    the ``source`` fields that are constant for a rows event (file, pos, timestamps, server id,
    GTID, thread, query, snapshot flag) are stored once per event group and expanded with an
    Arrow ``take`` at the end: no per-row dicts or tuples.

    Args:
        value_schema: Arrow schema of the table's columns (``types.arrow_schema``).
        primary_key: key column names (empty: keyless table, no ``key`` column).
        server_name / database / table: the ``source`` identity fields.
    """

    def __init__(
        self,
        value_schema: pa.Schema,
        primary_key: tuple[str, ...],
        *,
        server_name: str,
        database: str,
        table: str,
    ):
        self.value_schema = value_schema
        self.primary_key = primary_key
        self.server_name = server_name
        self.database = database
        self.table = table
        names = [f.name.lower() for f in value_schema]
        self._key_idx = [names.index(k.lower()) for k in primary_key]
        width = len(value_schema)
        self._width = width
        self._names = tuple(f.name for f in value_schema)
        self._getter = operator.itemgetter(*self._names) if width else None
        # per side: present images column-wise, each event's index into them (None: absent image),
        # (column, index) of values that are NULL without conversion (raw mode)
        self._cols: dict[str, list[list]] = {
            "before": [[] for _ in range(width)],
            "after": [[] for _ in range(width)],
        }
        self._idx: dict[str, list[int | None]] = {"before": [], "after": []}
        self._force_null: dict[str, list[tuple[int, int]]] = {"before": [], "after": []}
        self._converter = None  # TableConverter of raw images (add_raw); None: converted images
        self._mode: str | None = None  # "converted" | "raw" once an image was added
        self.op: list[str] = []
        self._row: list[int] = []
        self._group: list[int] = []  # per event: index into _groups
        # per event group: (ts_ms, source_ts_ms, snapshot, server_id, gtid, file, pos, thread, query)
        self._groups: list[tuple] = []
        self._tx: list[tuple[str, int, int] | None] | None = None  # created with the first tx
        self._headers: dict[int, list[tuple[str, str]]] = {}

    def __len__(self) -> int:
        return len(self.op)

    def key_of(self, image: tuple) -> tuple:
        """The key values of a converted image (tuple in column order)."""
        return tuple(image[i] for i in self._key_idx)

    # -- adding ------------------------------------------------------------------------------
    def _set_mode(self, mode: str) -> None:
        if self._mode is None:
            self._mode = mode
        elif self._mode != mode:
            raise ValueError("ChangeEventBuilder: converted (add) and raw (add_raw) images cannot be mixed")

    def _group_of(self, key: tuple) -> int:
        if self._groups and self._groups[-1] == key:
            return len(self._groups) - 1
        self._groups.append(key)
        return len(self._groups) - 1

    def _add_tx(self, n: int, tx: list | None) -> None:
        if tx is None:
            if self._tx is not None:
                self._tx.extend([None] * n)
            return
        if self._tx is None:
            self._tx = [None] * (len(self.op) - n)
        self._tx.extend(tx)

    def add(
        self,
        op: str,
        before: tuple | None,
        after: tuple | None,
        *,
        row: int,
        tx: tuple[str, int, int] | None = None,
        headers: dict[str, str] | None = None,
        **source: Unpack[SourceFields],
    ) -> None:
        """Append one event (Debezium op ``c|u|d|r|t``) with converted images (or ``None``);
        ``source``: its ``source`` block (:class:`SourceFields`), ``row``: ``source.row``.

        Raises:
            ValueError: the builder already holds raw images (:meth:`add_raw`).
        """
        for side, image in (("before", before), ("after", after)):
            idx = self._idx[side]
            if image is None:
                idx.append(None)
                continue
            self._set_mode("converted")
            cols = self._cols[side]
            idx.append(len(cols[0]) if cols else 0)
            for c, v in zip(cols, image):
                c.append(v)
        if headers:
            self._headers[len(self.op)] = list(headers.items())
        self.op.append(op)
        self._row.append(row)
        self._group.append(self._group_of(_source_key(source)))
        self._add_tx(1, None if tx is None else [tx])

    def add_raw(
        self,
        converter: Any,
        ops: str | list[str],
        before: list[dict | None] | None,
        after: list[dict | None] | None,
        *,
        before_none_sources: list[dict | None] | None = None,
        after_none_sources: list[dict | None] | None = None,
        rows: list[int] | None = None,
        tx: list[tuple[str, int, int]] | None = None,
        headers: dict[int, dict[str, str]] | None = None,
        **source: Unpack[SourceFields],
    ) -> None:
        """Append the events of one binlog rows event, with raw images.

        Args:
            converter: the table's ``TableConverter`` (source ``"binlog"``); every raw image of
                this builder is converted by it in :meth:`to_record_batch`.
            ops: the op of every event, or one op per event.
            before / after: per event the library's row dict (``{column: raw value}``, keyed by
                the converter's column names) or ``None`` (no image); ``None`` for the whole list:
                no event has that image.
            before_none_sources / after_none_sources: the library's ``none_sources`` per image
                (same length as ``before``/``after``), applied as
                ``TableConverter.convert_row_dict`` does: ``"empty set"`` is the empty SET,
                ``"cols bitmap"``/``"same with before values"`` are NULL without conversion.
            rows: ``source.row`` per event (default ``0..n-1``).
            tx: ``(id, total_order, data_collection_order)`` per event, or ``None``.
            headers: event offset (0-based, within this call) -> headers of that event.
            source: the ``source`` block shared by all events of the call (:class:`SourceFields`).

        Raises:
            ValueError: the builder already holds converted images (:meth:`add`), or a converter
                other than the one of earlier raw images is given.
        """
        n = len(before) if before is not None else len(after) if after is not None else len(ops)
        if not n:
            return
        if before is not None or after is not None:
            self._set_mode("raw")
            if self._converter is None:
                if tuple(converter.names) != self._names:
                    raise ValueError(
                        "ChangeEventBuilder.add_raw: the converter's columns differ from the value schema"
                    )
                self._converter = converter
            elif converter is not self._converter:
                raise ValueError("ChangeEventBuilder.add_raw: one builder converts with one TableConverter")
        for side, images, nss in (
            ("before", before, before_none_sources),
            ("after", after, after_none_sources),
        ):
            idx = self._idx[side]
            if images is None:
                idx.extend([None] * n)
                continue
            self._extend_raw(side, images, nss)
        start = len(self.op)
        if headers:
            for k, h in headers.items():
                self._headers[start + k] = list(h.items())
        self.op.extend([ops] * n if isinstance(ops, str) else ops)
        self._row.extend(range(n) if rows is None else rows)
        g = self._group_of(_source_key(source))
        self._group.extend([g] * n)
        self._add_tx(n, tx)

    def _extend_raw(self, side: str, images: list[dict | None], nss: list[dict | None] | None) -> None:
        cols = self._cols[side]
        idx = self._idx[side]
        width = self._width
        base = len(cols[0]) if width else 0
        if not width:
            idx.extend([None if img is None else 0 for img in images])
            return
        try:
            # an image that is None raises TypeError in the getter: handled below
            getter: Any = self._getter
            columns: list[Sequence[Any]]
            if width == 1:
                columns = [[getter(img) for img in images]]
            else:
                columns = list(zip(*map(getter, images)))
            for c, col in zip(cols, columns):
                c.extend(col)
            idx.extend(range(base, base + len(images)))
        except (KeyError, TypeError):  # absent images, or columns missing from an image
            self._extend_raw_slow(side, images, nss, base)
            return
        if nss is not None and any(nss):
            self._apply_none_sources(side, nss, base)

    def _extend_raw_slow(
        self, side: str, images: list[dict | None], nss: list[dict | None] | None, base: int
    ) -> None:
        cols = self._cols[side]
        idx = self._idx[side]
        names = self._names
        k = base
        for img in images:
            if img is None:
                idx.append(None)
                continue
            lowered = None
            for ci, (name, c) in enumerate(zip(names, cols)):
                v = img.get(name, _MISSING)
                if v is _MISSING:
                    if lowered is None:
                        lowered = {str(key).lower(): val for key, val in img.items()}
                    v = lowered.get(name.lower(), _MISSING)
                    if v is _MISSING:  # e.g. binlog_row_image=MINIMAL: NULL, not converted
                        c.append(None)
                        self._force_null[side].append((ci, k))
                        continue
                c.append(v)
            idx.append(k)
            k += 1
        if nss is not None:
            present = [ns for ns, img in zip(nss, images) if img is not None]
            if any(present):
                self._apply_none_sources(side, present, base)

    def _apply_none_sources(self, side: str, nss: list[dict | None], base: int) -> None:
        cols = self._cols[side]
        pos_of = {name: i for i, name in enumerate(self._names)}
        for k, ns in enumerate(nss, start=base):
            if not ns:
                continue
            for name, reason in ns.items():
                if reason == "null":
                    continue
                ci = pos_of.get(name)
                if ci is None or cols[ci][k] is not None:
                    continue
                if reason == "empty set":
                    cols[ci][k] = ""  # the library's empty SET (python-mysql-replication returns None)
                elif reason in ("cols bitmap", "same with before values"):
                    self._force_null[side].append((ci, k))

    # -- events that cannot be converted (event.processing.failure.handling.mode) -----------
    def event_position(self, i: int) -> str:
        """``file:pos row n`` of event ``i`` (the binlog rows event and the row within it)."""
        g = self._groups[self._group[i]]
        return f"{g[5]}:{g[6]} row {self._row[i]}"

    def unconvertible_events(self) -> dict[int, str]:
        """Events whose raw images hold a value the converter rejects: ``{event index: reason}``,
        the reason ``"<before|after>.<column>: <error>"`` (see :meth:`unconvertible_values`)."""
        return {i: f"{column}: {why}" for i, (column, why) in self.unconvertible_values().items()}

    def unconvertible_values(self) -> dict[int, tuple[str, str]]:
        """Events whose raw images hold a value the converter rejects: ``{event index: (column,
        error)}``, the column as ``before.<name>`` / ``after.<name>`` (the first rejected value of
        the event). The error's text (which may quote the value) is left out for masked columns.
        Empty for converted images (:meth:`add`).
        """
        conv = self._converter
        if conv is None:
            return {}
        masked = set(conv.masked)
        bad: dict[int, tuple[str, str]] = {}
        for side in ("before", "after"):
            owner = {k: i for i, k in enumerate(self._idx[side]) if k is not None}
            for ci, col in enumerate(self._cols[side]):
                name = self._names[ci]
                for k, v in enumerate(col):
                    if v is None or owner.get(k) in bad:
                        continue
                    try:
                        conv.convert_value(ci, v)
                    except (ValueError, TypeError, OverflowError, ArithmeticError) as e:
                        why = type(e).__name__ if name in masked else f"{type(e).__name__}: {e}"
                        bad[owner[k]] = (f"{side}.{name}", why)
        return bad

    def drop_events(self, events: set[int]) -> None:
        """Remove the given events (indices) from the builder."""
        if not events:
            return
        keep = [i for i in range(len(self.op)) if i not in events]
        for side in ("before", "after"):
            idx = self._idx[side]
            kept = [k for k in (idx[i] for i in keep) if k is not None]
            remap = {k: j for j, k in enumerate(kept)}
            self._cols[side] = [[col[k] for k in kept] for col in self._cols[side]]
            self._idx[side] = [None if (k := idx[i]) is None else remap[k] for i in keep]
            self._force_null[side] = [(ci, remap[k]) for ci, k in self._force_null[side] if k in remap]
        new = {i: j for j, i in enumerate(keep)}
        self.op = [self.op[i] for i in keep]
        self._row = [self._row[i] for i in keep]
        self._group = [self._group[i] for i in keep]
        if self._tx is not None:
            self._tx = [self._tx[i] for i in keep]
        self._headers = {new[i]: h for i, h in self._headers.items() if i in new}

    # -- building ----------------------------------------------------------------------------
    def _side(self, side: str, n: int) -> tuple[list[pa.Array], pa.Array]:
        """Children (one array per column, ``n`` events long) and the validity of one image side."""
        fields = list(self.value_schema)
        cols = self._cols[side]
        if self._converter is not None:
            arrays = self._converter.column_arrays(cols)
        else:
            arrays = [pa.array(c, type=f.type, from_pandas=False) for c, f in zip(cols, fields)]
        forced = self._force_null[side]
        if forced:
            for ci in {ci for ci, _ in forced}:
                mask = [False] * len(arrays[ci])
                for cj, k in forced:
                    if cj == ci:
                        mask[k] = True
                arrays[ci] = pc.if_else(
                    pa.array(mask, pa.bool_()), pa.scalar(None, arrays[ci].type), arrays[ci]
                )
        idx = self._idx[side]
        present = len(cols[0]) if cols else 0
        if present == n and (not present or (idx[0] == 0 and idx[-1] == n - 1)) and None not in idx:
            valid = pa.repeat(pa.scalar(True), n)  # every event has this image, in order
            return arrays, valid
        take = pa.array(idx, pa.int64())
        return [a.take(take) for a in arrays], take.is_valid()

    def to_record_batch(self) -> pa.RecordBatch:
        """The accumulated events as a change-log batch (:func:`change_log_schema`).

        Raises:
            ValueError: a raw value cannot be converted (see ``TableConverter.column_arrays``).
        """
        fields = list(self.value_schema)
        n = len(self.op)
        arrays: list[pa.Array] = []
        before, before_valid = self._side("before", n)
        after, after_valid = self._side("after", n)
        kt = key_type(self.value_schema, self.primary_key)
        if kt is not None:
            key_children = [pc.if_else(after_valid, after[i], before[i]) for i in self._key_idx]
            arrays.append(
                pa.StructArray.from_arrays(
                    key_children, fields=list(kt), mask=pc.invert(pc.or_(after_valid, before_valid))
                )
            )
        groups = list(zip(*self._groups)) if self._groups else [()] * 9
        gidx = pa.array(self._group, pa.int32())

        def per_event(i: int, typ: pa.DataType) -> pa.Array:
            return pa.array(groups[i], typ).take(gidx)

        tx = self._tx
        arrays += [
            pa.StructArray.from_arrays(before, fields=fields, mask=pc.invert(before_valid)),
            pa.StructArray.from_arrays(after, fields=fields, mask=pc.invert(after_valid)),
            pa.StructArray.from_arrays(
                [
                    _const(CONNECTOR_VERSION, pa.string(), n),
                    _const(CONNECTOR_NAME, pa.string(), n),
                    _const(self.server_name, pa.string(), n),
                    per_event(1, pa.int64()),  # source ts_ms
                    per_event(2, pa.string()),  # snapshot
                    _const(self.database, pa.string(), n),
                    pa.nulls(n, pa.string()),
                    _const(self.table, pa.string(), n),
                    per_event(3, pa.int64()),  # server_id
                    per_event(4, pa.string()),  # gtid
                    per_event(5, pa.string()),  # file
                    per_event(6, pa.int64()),  # pos
                    pa.array(self._row, pa.int32()),
                    per_event(7, pa.int64()),  # thread
                    per_event(8, pa.string()),  # query
                ],
                fields=list(SOURCE_TYPE),
            ),
            pa.array(self.op, pa.string()),
            per_event(0, pa.int64()),  # ts_ms
            pa.StructArray.from_arrays(
                [
                    pa.array([t and t[0] for t in tx], pa.string()),
                    pa.array([t and t[1] for t in tx], pa.int64()),
                    pa.array([t and t[2] for t in tx], pa.int64()),
                ],
                fields=list(TRANSACTION_TYPE),
                mask=pa.array([t is None for t in tx], pa.bool_()),
            )
            if tx is not None and any(t is not None for t in tx)
            else pa.nulls(n, TRANSACTION_TYPE),
            self._headers_array(n),
        ]
        return pa.RecordBatch.from_arrays(
            arrays, schema=change_log_schema(self.value_schema, self.primary_key)
        )

    def _headers_array(self, n: int) -> pa.Array:
        if not self._headers:
            return pa.nulls(n, HEADERS_TYPE)
        values: list[list[tuple[str, str]] | None] = [None] * n
        for k, h in self._headers.items():
            values[k] = h
        return pa.array(values, HEADERS_TYPE)


_MISSING = object()
