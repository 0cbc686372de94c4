"""Incremental snapshots with watermark windows (Netflix DBLog; Debezium incremental snapshot).

A table is read in primary-key order in chunks while streaming continues, without locks. For each
chunk: write a *low watermark* row to the signal table, ``SELECT`` the chunk, write a *high
watermark* row. While reading the binlog, every key that a row event touches between the chunk's
low and high watermark is dropped from the chunk buffer (the binlog has a version at least as new);
at the high watermark the remaining rows are emitted as ``op=r`` events with
``source.snapshot="incremental"`` at the high watermark's position. Rows therefore order after all
events before the window and before all events after it, and the current state converges.

How it fits the bounded window runs of the binlog sensor:

- the snapshot progress (:class:`IncrementalState`: queued tables, current table, last key, max
  key, chunk counter, paused) travels in the sensor cursor and run tags, and is reported back by
  the run, so it survives restarts: a resumed snapshot continues after the last emitted chunk;
- at the start of a window run, up to ``max_chunks_per_run`` chunks are *planned*: watermarks
  written, chunks read and stored in the lake staging area, the window end extended to just after
  the last high watermark. The plan is saved with a create-if-absent write keyed by the window
  start, so a retried run reuses exactly the same chunks, watermarks and end: the window stays
  deterministic and its idempotent commits stay correct;
- signals (``execute-snapshot``, ``stop-snapshot``, ``pause-snapshot``, ``resume-snapshot``) are
  applied in binlog order while the window is read; a chunk whose table was stopped before its high
  watermark is dropped. Chunk memory is bounded by ``chunk_size`` (one chunk in memory at a time).

Watermark strategies (Debezium ``incremental.snapshot.watermarking.strategy``): ``insert_insert``
writes an open row and a close row; ``insert_delete`` writes the open row and deletes it as the
high watermark (the signal table stays empty).
"""

from __future__ import annotations

import base64
import datetime as _dt
import decimal
import hashlib
import json
import logging
import uuid
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pymysql

from ..errors import CdcError
from ..events import BinlogPosition
from ..sink.layout import LakeLayout
from ..sink.storage import StorageSettings
from ..source.schema import TableSchema
from ..source.signals import validate_filter
from ..source.types import quote_identifier

if TYPE_CHECKING:
    pass

log = logging.getLogger(__name__)


# -- key (de)serialisation: raw pymysql key values <-> JSON ------------------------------------
def encode_key(values: Sequence[Any]) -> list[Any]:
    """JSON-safe form of raw key values (as pymysql returns them), reversible by :func:`decode_key`."""
    out: list[Any] = []
    for v in values:
        if v is None or isinstance(v, (bool, int, float, str)):
            out.append(v)
        elif isinstance(v, decimal.Decimal):
            out.append({"dec": str(v)})
        elif isinstance(v, _dt.datetime):
            out.append({"dt": v.isoformat()})
        elif isinstance(v, _dt.date):
            out.append({"d": v.isoformat()})
        elif isinstance(v, _dt.timedelta):
            out.append({"td": v.total_seconds()})
        elif isinstance(v, (bytes, bytearray)):
            out.append({"b64": base64.b64encode(bytes(v)).decode()})
        else:
            out.append({"s": str(v)})
    return out


def decode_key(values: Sequence[Any]) -> list[Any]:
    """Inverse of :func:`encode_key` (values to bind as SQL parameters)."""
    out: list[Any] = []
    for v in values:
        if not isinstance(v, dict):
            out.append(v)
        elif "dec" in v:
            out.append(decimal.Decimal(v["dec"]))
        elif "dt" in v:
            out.append(_dt.datetime.fromisoformat(v["dt"]))
        elif "d" in v:
            out.append(_dt.date.fromisoformat(v["d"]))
        elif "td" in v:
            out.append(_dt.timedelta(seconds=v["td"]))
        elif "b64" in v:
            out.append(base64.b64decode(v["b64"]))
        else:
            out.append(v.get("s"))
    return out


# -- progress ----------------------------------------------------------------------------------
@dataclass
class TableProgress:
    """Progress of one table of an incremental snapshot."""

    table: str  # "db.table"
    filter: str | None = None  # validated additional condition
    last_key: list | None = None  # encoded raw key of the last planned row
    max_key: list | None = None  # encoded raw key of the last row when the table was started
    chunks: int = 0
    rows: int = 0
    reason: str | None = None  # why a repair re-reads these rows (change-log header, see .gaps)
    # ON UPDATE CASCADE into the key: {"columns": child key columns, "pairs": [[old, new], ...]}
    key_map: dict | None = None
    candidate_keys: list | None = None  # encoded keys to delete when the source no longer has them

    @property
    def key(self) -> tuple[str, str]:
        db, _, t = self.table.partition(".")
        return db, t


_REPAIR_FIELDS = ("reason", "key_map", "candidate_keys")


@dataclass
class IncrementalState:
    """Incremental snapshot progress carried by the sensor cursor (JSON).

    Attributes:
        snapshot_id: id of the ``execute-snapshot`` signal that started it.
        tables: tables still to read; the first is the current one.
        done: tables finished (for reporting).
        paused: ``pause-snapshot`` received.
        chunk_seq: chunks planned so far (chunk ids: :func:`chunk_id_for`).
    """

    snapshot_id: str
    tables: list[TableProgress] = field(default_factory=list)
    done: list[str] = field(default_factory=list)
    paused: bool = False
    chunk_seq: int = 0

    @property
    def active(self) -> bool:
        return bool(self.tables)

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe form; a table's repair fields (``reason``, ``key_map``, ``candidate_keys``)
        appear only when set, so the cursor of a plain incremental snapshot stays as it was."""
        d = asdict(self)
        for t in d["tables"]:
            for k in _REPAIR_FIELDS:
                if t.get(k) is None:
                    t.pop(k, None)
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any] | None) -> IncrementalState | None:
        if not d:
            return None
        return cls(
            snapshot_id=d["snapshot_id"],
            tables=[TableProgress(**t) for t in d.get("tables", [])],
            done=list(d.get("done", [])),
            paused=bool(d.get("paused", False)),
            chunk_seq=int(d.get("chunk_seq", 0)),
        )

    def copy(self) -> IncrementalState:
        return IncrementalState.from_dict(json.loads(json.dumps(self.to_dict())))  # type: ignore[return-value]

    def progress(self) -> dict[str, Any]:
        """Compact progress for Dagster metadata."""
        cur = self.tables[0] if self.tables else None
        return {
            "snapshot_id": self.snapshot_id,
            "paused": self.paused,
            "current_table": cur.table if cur else None,
            "current_chunks": cur.chunks if cur else 0,
            "current_rows": cur.rows if cur else 0,
            "last_key": cur.last_key if cur else None,
            "max_key": cur.max_key if cur else None,
            "queued": [t.table for t in self.tables[1:]],
            "done": self.done,
            "chunks_planned": self.chunk_seq,
        }


@dataclass
class PlannedChunk:
    """One chunk read at the start of a window run."""

    id: str
    table: str
    rows: int
    path: str  # lake URI of the stashed rows (Parquet, the table's value schema)
    open_id: str
    close_id: str
    low: dict | None = None  # read-only mode: binlog position before the SELECT (low watermark)
    high: dict | None = None  # read-only mode: binlog position after the SELECT (high watermark)
    reason: str | None = None  # repair reason (``__cdc.repair`` header of the emitted rows)
    deletes_path: str | None = None  # stashed before-images of keys the source no longer has
    key_lo: list | None = None  # the chunk's key range (key_lo, key_hi], encoded raw keys; None:
    key_hi: list | None = None  # unbounded (first / last chunk of the table)
    absent_path: str | None = None  # lake rows in the range the source no longer has (Parquet)
    absent: int = 0
    files: list[str] | None = None  # a group of splits: every file of its rows (``path`` the first)
    #: the table's chunks and rows planned so far, this chunk included (its progress after it)
    table_chunks: int | None = None
    table_rows: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class ChunkPlan:
    """The chunks of one window and the window's (extended) end; saved create-if-absent."""

    start: BinlogPosition
    end: BinlogPosition | None
    chunks: list[PlannedChunk]
    state_after: dict | None

    def to_json(self) -> str:
        return json.dumps(
            {
                "start": self.start.to_dict(),
                "end": self.end.to_dict() if self.end else None,
                "chunks": [c.to_dict() for c in self.chunks],
                "state_after": self.state_after,
            }
        )

    @classmethod
    def from_json(cls, text: str) -> ChunkPlan:
        d = json.loads(text)
        return cls(
            start=BinlogPosition.from_dict(d["start"]),
            end=BinlogPosition.from_dict(d["end"]) if d.get("end") else None,
            chunks=[PlannedChunk(**c) for c in d["chunks"]],
            state_after=d.get("state_after"),
        )


class IncrementalSnapshotError(CdcError):
    """The incremental snapshot cannot proceed (e.g. a table without primary key)."""


# -- plan persistence (create-if-absent) ---------------------------------------------------------
def state_tag(state: IncrementalState | dict | None) -> str | None:
    """A short fingerprint (12 hex digits) of an incremental snapshot's state, ``None`` when no
    snapshot is active. Saved chunk plans and chunk-only follow-on windows are named by their
    start position *and* this tag: on an idle binlog a read-only snapshot's windows all start at
    the same position (its watermarks are binlog positions, nothing moves them), and a plan
    named by the position alone was found again by the next window, which re-read the same
    chunks forever. A retry starts with the state its first attempt started with (the cursor or
    the run's progress tag), so it finds that attempt's plan."""
    if isinstance(state, dict):
        state = IncrementalState.from_dict(state)
    if state is None or not state.active:
        return None
    text = json.dumps(state.to_dict(), sort_keys=True, separators=(",", ":"))
    return hashlib.blake2b(text.encode(), digest_size=6).hexdigest()


def load_plan(
    storage: StorageSettings, server_name: str, start: BinlogPosition, state: IncrementalState | None = None
) -> ChunkPlan | None:
    """The saved plan of the window starting at ``start`` with the snapshot state ``state`` (at
    the window start), if an earlier attempt made one. A plan saved before plans were tagged
    with the state (:func:`state_tag`) is taken only when it continues ``state`` (same snapshot,
    its chunks numbered from ``state.chunk_seq``)."""
    layout = LakeLayout(storage, server_name)
    tag = state_tag(state)
    data = storage.read_bytes(layout.chunk_plan(start, tag)) if tag else None
    if data is not None:
        return ChunkPlan.from_json(data.decode())
    legacy = storage.read_bytes(layout.chunk_plan(start))
    if legacy is None:
        return None
    plan = ChunkPlan.from_json(legacy.decode())
    return plan if state is None or _continues(plan, state) else None


def _continues(plan: ChunkPlan, state: IncrementalState) -> bool:
    after = IncrementalState.from_dict(plan.state_after)
    return (
        after is not None
        and after.snapshot_id == state.snapshot_id
        and after.chunk_seq - len(plan.chunks) == state.chunk_seq
    )


def save_plan(
    storage: StorageSettings, server_name: str, plan: ChunkPlan, state: IncrementalState | None = None
) -> ChunkPlan:
    """Save ``plan`` (made from the snapshot state ``state``) unless one exists already (then
    return the existing one: first writer wins)."""
    existing = storage.first_write(
        LakeLayout(storage, server_name).chunk_plan(plan.start, state_tag(state)), plan.to_json().encode()
    )
    return plan if existing is None else ChunkPlan.from_json(existing.decode())


def read_chunk(storage: StorageSettings, chunk: PlannedChunk, path: str | None = None) -> pa.Table:
    """The stashed rows of a planned chunk (or its file ``path``, e.g. ``chunk.deletes_path``)."""
    if path is None and chunk.files:
        return pa.concat_tables([storage.read_parquet(f) for f in chunk.files])
    return storage.read_parquet(path or chunk.path)


def read_absent(storage: StorageSettings, chunk: PlannedChunk) -> pa.Table | None:
    """The lake rows in the chunk's key range that the source no longer had (``None``: none)."""
    if not chunk.absent_path:
        return None
    return storage.read_parquet(chunk.absent_path)


# -- planning ----------------------------------------------------------------------------------
def chunk_id_for(snapshot_id: str, seq: int) -> str:
    """Id of a chunk: ``<snapshot id prefix>-<seq>-<random>``, at most 39 characters so that its
    watermark ids (``-o``/``-c`` appended) fit the signal table's ``VARCHAR(42)`` id.

    Unique even when the signal id is long (a 36-character UUID) and when a signal id is reused
    for a later snapshot while the earlier snapshot's watermark rows are still in the table.
    """
    return f"{snapshot_id[:20]}-{seq}-{uuid.uuid4().hex[:8]}"[-39:]


def chunk_key_columns(schema: TableSchema) -> list[str]:
    """The primary-key columns an incremental snapshot reads ``schema``'s table in the order of.

    Raises:
        IncrementalSnapshotError: the table has no primary key (DBLog chunks are key ranges).
    """
    if not schema.primary_key:
        raise IncrementalSnapshotError(
            f"{schema.qualified_name} has no primary key: incremental snapshots read in key order; "
            "add a primary key or use a blocking snapshot."
        )
    return list(schema.primary_key)


def probe_filter(conn: Any, schema: TableSchema, flt: str) -> None:
    """Run a validated filter once on the server (``LIMIT 0``: parsed and prepared, nothing read).

    A filter that is safe but that the server rejects (row-constructor arity, out-of-range
    literal, unsupported CAST type ...) would otherwise fail every window run that reads a chunk.

    Raises:
        UnsafeFilter: the server rejects the filter.
        pymysql.err.MySQLError: a client/connection error (transient: the run fails and is retried).
    """
    from ..source.signals import UnsafeFilter

    tbl = f"{quote_identifier(schema.database)}.{quote_identifier(schema.table)}"
    try:
        with conn.cursor() as cur:
            cur.execute(f"SELECT 1 FROM {tbl} WHERE ({flt}) LIMIT 0")  # no parameters: '%' stays as is
            cur.fetchall()
    except pymysql.err.MySQLError as e:
        code = e.args[0] if e.args else None
        if not isinstance(code, int) or code < 1000 or 2000 <= code < 3000:
            raise  # client-side errors (CR_* 2xxx: lost connection ...): not the filter's fault
        reason = e.args[1] if len(e.args) > 1 else str(e)
        raise UnsafeFilter(
            f"Filter {flt!r} fails on the server for {schema.qualified_name}: ({code}) {reason}"
        ) from None


def start_snapshot(
    state: IncrementalState | None,
    signal_id: str,
    tables: Sequence[tuple[str, str]],
    conditions: dict[str, str],
    schemas: dict[tuple[str, str], TableSchema],
    conn: Any = None,
    reason: str | None = None,
    delete_keys: Sequence[Sequence[Any]] = (),
) -> tuple[IncrementalState, list[str]]:
    """Apply an ``execute-snapshot`` (incremental) signal: queue ``tables`` (skipping ones already
    queued). Filters are validated against each table's columns and, with ``conn``, tried on the
    server (:func:`probe_filter`); an unsafe or failing filter skips the whole signal (raises).
    ``reason`` and ``delete_keys`` (a repair, see :mod:`.gaps`) go to every queued table's
    progress (``delete_keys`` only when one table is queued).

    Returns:
        (new state, log messages)

    Raises:
        UnsafeFilter: a filter is not a safe boolean expression, or the server rejects it.
        IncrementalSnapshotError: a table has no primary key.
    """
    from ..source.signals import matches_collection

    msgs: list[str] = []
    new = state.copy() if state is not None else IncrementalState(snapshot_id=signal_id)
    queued = {t.table for t in new.tables}
    progs = []
    for db, t in tables:
        qualified = f"{db}.{t}"
        schema = schemas[(db, t)]
        chunk_key_columns(schema)
        flt = None
        for pattern, f in conditions.items():
            if matches_collection(pattern, qualified):
                flt = validate_filter(f, schema.column_names)
                if conn is not None:
                    probe_filter(conn, schema, flt)
        if qualified in queued:
            msgs.append(f"{qualified} is already in the incremental snapshot; not queued again")
            continue
        progs.append(
            TableProgress(
                table=qualified,
                filter=flt,
                reason=reason,
                candidate_keys=[list(k) for k in delete_keys] if delete_keys and len(tables) == 1 else None,
            )
        )
    new.tables.extend(progs)
    if state is None or not state.tables:
        new.snapshot_id = signal_id
    msgs.append(f"incremental snapshot {signal_id}: queued {[p.table for p in progs]}")
    return new, msgs


def stop_snapshot(state: IncrementalState | None, tables: Sequence[str]) -> IncrementalState | None:
    """Apply ``stop-snapshot``: all tables (empty list) or the listed names/regexes."""
    from ..source.signals import matches_collection

    if state is None:
        return None
    if not tables:
        return None
    new = state.copy()
    new.tables = [p for p in new.tables if not any(matches_collection(pat, p.table) for pat in tables)]
    return new if new.tables else None


def with_paused(state: IncrementalState | None, paused: bool) -> IncrementalState | None:
    return replace(state.copy(), paused=paused) if state is not None else None
