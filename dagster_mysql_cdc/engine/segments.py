"""Planning the parallel decode of one large binlog window: the header pass and the segments.

A window whose backlog is large (:attr:`ParallelOptions.min_bytes`) is decoded by several Spark
tasks at once (:mod:`.parallel_catchup`). What they need is planned here, on the run process:

- :func:`read_window_plan` reads the window once **without decoding any row image**
  (python-mysql-replication decodes rows lazily; the sensor's look-ahead,
  ``dagster_integration/selection.py``, reads windows the same way): the transaction boundaries with
  their byte offsets and GTID sets, the captured tables each stretch between two boundaries
  changes, the DDL and statement-based DML in order, and what the parallel path cannot keep in
  binlog order (a signal row, a statement-based write to the signal table). About 4 % of the
  window's decode time (``bench/parallel_catchup.py`` prints it);
- :func:`cut_segments` cuts the window at transaction boundaries into segments of about the same
  number of bytes of captured tables' changes (the decode cost), one per task, each with its own
  replication ``server_id`` from :attr:`ParallelOptions.server_ids` (Flink CDC gives each parallel
  binlog reader its own id from its ``server-id`` range the same way).

A segment starts where a transaction ended, so every transaction (its rows, its transaction
metadata orders) lies in one segment.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

from ..errors import ConfigurationError
from ..events import BinlogPosition
from ..source.binlog import BinlogReader, DdlStatement, RowsBatch, StatementDml, TransactionCommit
from ..source.connection import ConnectionSettings, ServerInfo
from ..source.filters import TableFilter
from ..source.statements import UnreadableSignalStatement, signal_statement_rows

log = logging.getLogger(__name__)

#: Default window size from which a window is decoded in parallel (bytes of binlog).
DEFAULT_MIN_BYTES = 32 * 1024 * 1024
#: Default replication ids of the segment readers: ``server_id`` + this .. + this + 15.
DEFAULT_SERVER_ID_OFFSET = 101
DEFAULT_SERVER_ID_COUNT = 16


@dataclass(frozen=True)
class ParallelOptions:
    """When and how a binlog window is decoded by parallel Spark tasks.

    Attributes:
        min_bytes: a window with at least this many bytes of binlog whose changes are of captured
            tables is decoded in parallel; smaller ones by the run process (steady streaming keeps
            its latency). Positive.
        server_ids: the replication ``server_id`` of each concurrent segment reader (at most this
            many segments are read at once); each must be unique among the server's replicas.
        max_tasks: segments (Spark tasks) a window is cut into: ``0`` one per Spark core (Spark's
            default parallelism); never more than :attr:`server_ids` allows.

    Raises:
        ConfigurationError: ``min_bytes`` not positive, no server id, a negative ``max_tasks``.
    """

    min_bytes: int = DEFAULT_MIN_BYTES
    server_ids: tuple[int, ...] = ()
    max_tasks: int = 0

    def __post_init__(self) -> None:
        if self.min_bytes < 1:
            raise ConfigurationError(
                f"stream_parallel_min_bytes={self.min_bytes}: use a positive number of bytes, or turn "
                "parallel decoding off with None"
            )
        if not self.server_ids:
            raise ConfigurationError(
                "stream_parallel_server_ids names no server id: give a range 'first-last'"
            )
        if self.max_tasks < 0:
            raise ConfigurationError(
                f"stream_parallel_max_tasks={self.max_tasks}: use 0 (one per Spark core) or more"
            )

    @classmethod
    def build(
        cls, min_bytes: int, server_ids: str | None, base_server_id: int, max_tasks: int = 0
    ) -> ParallelOptions:
        """Options from the resource's settings: ``server_ids`` is ``"first-last"`` (inclusive,
        Flink CDC's ``server-id`` range format) or ``None`` for ``base_server_id`` +
        :data:`DEFAULT_SERVER_ID_OFFSET` and the next :data:`DEFAULT_SERVER_ID_COUNT` - 1.

        Raises:
            ConfigurationError: a range that is not ``first-last`` with ``1 <= first <= last <
                2**32``, or another bad option (see the class).
        """
        if server_ids is None or not str(server_ids).strip():
            first = base_server_id + DEFAULT_SERVER_ID_OFFSET
            return cls(min_bytes, tuple(range(first, first + DEFAULT_SERVER_ID_COUNT)), max_tasks)
        return cls(min_bytes, parse_server_id_range(server_ids), max_tasks)


def parse_server_id_range(text: str) -> tuple[int, ...]:
    """``"5400-5408"`` → ``(5400, ..., 5408)``; ``"5400"`` → ``(5400,)``.

    Raises:
        ConfigurationError: not ``first-last`` of integers with ``1 <= first <= last < 2**32``.
    """
    raw = str(text).strip()
    lo, sep, hi = raw.partition("-")
    try:
        first, last = int(lo), int(hi if sep else lo)
    except ValueError:
        first, last = 0, -1
    if not (1 <= first <= last < 2**32):
        raise ConfigurationError(
            f"stream_parallel_server_ids={text!r} is not a range of replication server ids: write "
            "'first-last' (e.g. '5400-5415'), 1 <= first <= last < 2^32, ids no other replica of the "
            "server uses"
        )
    return tuple(range(first, last + 1))


@dataclass(frozen=True)
class Boundary:
    """A transaction boundary of the window (after a COMMIT/XID or a DDL statement).

    Attributes:
        position: the boundary (a valid start of a binlog read), with the GTID set after it.
        offset: bytes from the window start to it (across files).
        weight: cumulative bytes, from the window start, of the stretches between two boundaries
            that change captured tables (the decode cost; stretches of other tables cost little).
        tables: captured tables with row events since the previous boundary.
    """

    position: BinlogPosition
    offset: int
    weight: int
    tables: frozenset[tuple[str, str]] = frozenset()


@dataclass
class WindowPlan:
    """What :func:`read_window_plan` learned about ``[start, end)``.

    Attributes:
        boundaries: every transaction boundary in order (the last is :attr:`end`).
        statements: the window's :class:`DdlStatement` and :class:`StatementDml` items, in order
            (the run process handles them: schema history, gaps).
        tables: captured tables with row events.
        reasons: why the window must be read in order by one reader (empty: it can be split).
        end: the position reached (the GTID set after the last transaction).
        size: bytes of binlog in the window; captured: bytes of the stretches with captured rows.
        events_read, transactions, last_event_ts_ms: as :class:`.stream.WindowResult` counts them.
    """

    start: BinlogPosition
    end: BinlogPosition
    boundaries: list[Boundary] = field(default_factory=list)
    statements: list[DdlStatement | StatementDml] = field(default_factory=list)
    tables: set[tuple[str, str]] = field(default_factory=set)
    reasons: list[str] = field(default_factory=list)
    size: int = 0
    captured: int = 0
    events_read: int = 0
    transactions: int = 0
    last_event_ts_ms: int | None = None
    seconds: float = 0.0


def file_offsets(files: Sequence[tuple[str, int]], start: BinlogPosition) -> dict[str, int]:
    """``{file: bytes from start's file's offset 0 to that file's offset 0}`` for ``start``'s file
    and the files after it (``files``: ``SHOW BINARY LOGS``, oldest first)."""
    out: dict[str, int] = {}
    acc = 0
    seen = False
    for name, size in files:
        if name == start.file:
            seen = True
        if seen:
            out[name] = acc
            acc += int(size)
    return out or {start.file: 0}


def read_window_plan(
    settings: ConnectionSettings,
    info: ServerInfo,
    *,
    start: BinlogPosition,
    end: BinlogPosition,
    server_id: int,
    files: Sequence[tuple[str, int]],
    table_filter: TableFilter,
    signal_table: str | None,
    deadline_s: float | None = None,
) -> WindowPlan:
    """Read ``[start, end)`` without decoding row images (see the module docs).

    Args:
        server_id: the replication id of this read (the run's own: it reads before the window).
        files: ``SHOW BINARY LOGS`` at planning time (sizes give offsets across files).
        table_filter: the captured tables; signal_table: ``db.table`` of the signal table.

    Raises:
        BinlogReadError (and subclasses) as :class:`~..source.binlog.BinlogReader` raises them.
    """
    t0 = time.monotonic()
    db, _, name = (signal_table or "").partition(".")
    sig = (db, name) if signal_table else None
    base = file_offsets(files, start)
    plan = WindowPlan(start=start, end=start)
    reader = BinlogReader(
        settings,
        server_id,
        start,
        end,
        is_mariadb=info.is_mariadb,
        deadline_s=deadline_s,
        rows_filter=lambda d, t: False,  # names only: no row image is decoded
    )
    captured: dict[tuple[str, str], bool] = {}
    open_tables: set[tuple[str, str]] = set()
    last_offset = 0
    weight = 0

    def offset_of(p: BinlogPosition) -> int:
        return base.get(p.file, max(base.values())) + p.pos - start.pos

    def boundary(p: BinlogPosition) -> None:
        nonlocal last_offset, weight, open_tables
        off = offset_of(p)
        if open_tables:
            weight += max(0, off - last_offset)
        plan.boundaries.append(Boundary(p, off, weight, frozenset(open_tables)))
        last_offset = off
        open_tables = set()

    for item in reader:
        if isinstance(item, RowsBatch):
            key = (item.database, item.table)
            if key == sig:
                if not plan.reasons:
                    plan.reasons.append(
                        f"a signal row at {item.file}:{item.pos} (signals and incremental-snapshot "
                        "watermarks are executed in binlog order)"
                    )
                continue
            ok = captured.get(key)
            if ok is None:
                ok = captured[key] = table_filter.matches(*key)
            if ok:
                open_tables.add(key)
                plan.tables.add(key)
                plan.last_event_ts_ms = item.ts_ms
        elif isinstance(item, TransactionCommit):
            plan.transactions += 1
            boundary(item.end)
        elif isinstance(item, DdlStatement):
            plan.statements.append(item)
            plan.last_event_ts_ms = item.ts_ms
            boundary(item.end)
        elif isinstance(item, StatementDml):
            if sig is not None and _writes_signal_table(item, sig):
                plan.reasons.append(
                    f"a statement-based write to the signal table at {item.file}:{item.pos} "
                    "(signals are executed in binlog order)"
                )
            plan.statements.append(item)
    plan.end = reader.position
    plan.events_read = reader.events_read
    last = offset_of(plan.end)
    if not plan.boundaries or plan.boundaries[-1].position.sort_key() != plan.end.sort_key():
        if open_tables:
            weight += max(0, last - last_offset)
        plan.boundaries.append(Boundary(plan.end, last, weight, frozenset(open_tables)))
    plan.size = last
    plan.captured = weight
    plan.seconds = time.monotonic() - t0
    return plan


def _writes_signal_table(item: StatementDml, sig: tuple[str, str]) -> bool:
    try:
        return signal_statement_rows(item.sql, item.database, sig) is not None
    except UnreadableSignalStatement:
        return True


@dataclass(frozen=True)
class Segment:
    """One part of a window, decoded by one Spark task.

    Attributes:
        index: 0-based, in binlog order.
        start, end: transaction boundaries (``start`` carries no GTID set of its own use: the
            task's reader only needs the position).
        tables: captured tables with row events in it.
        weight: bytes of captured tables' changes in it.
        server_id: the replication id its reader uses.
    """

    index: int
    start: BinlogPosition
    end: BinlogPosition
    tables: frozenset[tuple[str, str]]
    weight: int
    server_id: int


def cut_segments(plan: WindowPlan, n: int, server_ids: Sequence[int]) -> list[Segment]:
    """Cut ``plan``'s window into at most ``n`` segments at transaction boundaries, each with about
    ``plan.captured / n`` bytes of captured tables' changes (fewer when the window has fewer
    boundaries; empty stretches never make a segment of their own).

    Raises:
        ValueError: ``n < 1`` or fewer server ids than segments asked for.
    """
    if n < 1:
        raise ValueError("at least one segment")
    if len(server_ids) < n:
        raise ValueError(f"{n} segments need {n} server ids, {len(server_ids)} given")
    bounds = plan.boundaries
    total = plan.captured
    cuts: list[int] = []  # indices into bounds where a segment ends (the last: the window end)
    if total > 0:
        i = 0
        for k in range(1, n):
            target = total * k / n
            # the first boundary at or past the target, or the one before it when nearer
            while i < len(bounds) - 1 and bounds[i].weight < target:
                i += 1
            j = i
            if j > 0 and (target - bounds[j - 1].weight) < (bounds[j].weight - target):
                j -= 1
            if j >= len(bounds) - 1 or (cuts and j <= cuts[-1]) or not 0 < bounds[j].weight < total:
                continue
            cuts.append(j)
    cuts.append(len(bounds) - 1)
    segments: list[Segment] = []
    prev_pos, prev_i, prev_w = plan.start, -1, 0
    for j in cuts:
        tables: set[tuple[str, str]] = set()
        for b in bounds[prev_i + 1 : j + 1]:
            tables |= b.tables
        b = bounds[j]
        segments.append(
            Segment(
                index=len(segments),
                start=prev_pos,
                end=b.position,
                tables=frozenset(tables),
                weight=b.weight - prev_w,
                server_id=server_ids[len(segments)],
            )
        )
        prev_pos, prev_i, prev_w = b.position, j, b.weight
    return segments
