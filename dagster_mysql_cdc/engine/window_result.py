"""What one binlog window read and committed (:class:`WindowResult`), and how the results of
consecutive windows or of a table's parts add up."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from ..events import BinlogPosition, now_ms
from ..sink.lake import TableWriteResult
from .gaps import (
    BinlogGap,
)


@dataclass
class WindowResult:
    """What one window read and committed."""

    start: BinlogPosition
    end: BinlogPosition
    tables: dict[tuple[str, str], TableWriteResult] = field(default_factory=dict)
    ddl_statements: int = 0
    events_read: int = 0
    transactions: int = 0
    last_event_ts_ms: int | None = None
    seconds: float = 0.0
    signal_log: list[str] = field(default_factory=list)
    signals_rejected: list[str] = field(default_factory=list)  # lines of signal_log that are WARNINGs
    chunks: list[dict] = field(default_factory=list)
    incremental_state: dict | None = None
    #: the window's end after its incremental-snapshot chunk plan (:meth:`.incremental_source.
    #: IncrementalSnapshotSource.plan`): the requested end, or just after the last chunk's high
    #: watermark when the chunks extended the window (``None``: not planned, e.g. a backlog
    #: decoded by parallel segments, whose end is the requested one). A window that stopped
    #: before it (a blocking snapshot's pause point) was cut short.
    planned_end: BinlogPosition | None = None
    blocking_tables: list[tuple[str, str]] = field(default_factory=list)
    gaps: list[BinlogGap] = field(default_factory=list)
    #: events skipped by event.processing.failure.handling.mode=warn|skip (the first 100) and
    #: how many there were: {"table", "position", "reason"} each
    events_skipped: list[dict] = field(default_factory=list)
    events_skipped_count: int = 0
    #: what DDL did to captured tables' rows (lines for people, see .ddl_effects)
    ddl_effects: list[str] = field(default_factory=list)
    #: DDL statements of databases the capture rules out that the schema catalog could not
    #: follow and the window passed over (one line each, the run logs them as WARNING; see
    #: ``BinlogStreamingSource._apply_ddl``)
    ddl_passed_over: list[str] = field(default_factory=list)
    #: ``db.table`` -> ``{"error", "since"}`` (``since``: the window start, a position's dict) of
    #: the tables whose events of the window could not be written: they stop alone (nothing of
    #: theirs committed by this window), the others are committed (see .isolation)
    failed_tables: dict[str, dict] = field(default_factory=dict)
    #: how windows of at least ``StreamOptions.parallel.min_bytes`` were decoded: ``{"mode":
    #: "parallel" | "single", "reason", "segments", ...}`` each (see .parallel_catchup)
    decode: list[dict] = field(default_factory=list)

    @property
    def rows(self) -> int:
        return sum(t.rows for t in self.tables.values())

    @property
    def lag_ms(self) -> int | None:
        """Milliseconds between the newest event's commit on the source and now (Debezium's
        ``MilliSecondsBehindSource``)."""
        return None if self.last_event_ts_ms is None else max(0, now_ms() - self.last_event_ts_ms)


def combined_write_results(a: TableWriteResult, b: TableWriteResult) -> TableWriteResult:
    """One table's two results in one window (parts, see :class:`TableEvents`) or in two windows
    of a following run: counts added up, ``b``'s commit outcomes (the newer), and the tail files
    of both commits (``extra["tail_files"]``: the run's checks read the rows of every key the
    run changed from them, not only the last commit's keys; dropped when one commit's files are
    unknown, so the checks read the current state instead)."""
    by_op = dict(a.rows_by_op)
    for op, n in b.rows_by_op.items():
        by_op[op] = by_op.get(op, 0) + n
    extra = dict(b.extra)
    files_a, files_b = a.extra.get("tail_files"), b.extra.get("tail_files")
    if files_a and files_b:
        extra["tail_files"] = list(dict.fromkeys([*files_a, *files_b]))
    else:
        extra.pop("tail_files", None)
    return replace(
        b,
        rows=a.rows + b.rows,
        rows_by_op=by_op,
        seconds=a.seconds + b.seconds,
        spark_jobs=a.spark_jobs + b.spark_jobs,
        extra=extra,
    )


def merge_window_results(a: WindowResult, b: WindowResult) -> WindowResult:
    """One result for window ``a`` followed by window ``b`` (``b.start`` is where ``a`` ended):
    counts added up, per-table results combined (rows summed, the newer commit outcomes kept), the
    newest event time, ``b``'s end and incremental state; a table that failed in both keeps
    ``a``'s failure (its stop position is the earlier window's start)."""
    return WindowResult(
        start=a.start,
        end=b.end,
        tables=_combined_tables(a, b),
        ddl_statements=a.ddl_statements + b.ddl_statements,
        events_read=a.events_read + b.events_read,
        transactions=a.transactions + b.transactions,
        last_event_ts_ms=b.last_event_ts_ms if b.last_event_ts_ms is not None else a.last_event_ts_ms,
        seconds=a.seconds + b.seconds,
        signal_log=a.signal_log + b.signal_log,
        signals_rejected=a.signals_rejected + b.signals_rejected,
        chunks=a.chunks + b.chunks,
        incremental_state=b.incremental_state,
        planned_end=b.planned_end,
        blocking_tables=b.blocking_tables,
        gaps=a.gaps + b.gaps,
        events_skipped=(a.events_skipped + b.events_skipped)[:100],
        events_skipped_count=a.events_skipped_count + b.events_skipped_count,
        ddl_effects=a.ddl_effects + b.ddl_effects,
        ddl_passed_over=a.ddl_passed_over + b.ddl_passed_over,
        failed_tables={**b.failed_tables, **a.failed_tables},  # a table stops at its first failure
        decode=a.decode + b.decode,
    )


def with_catch_ups(caught: list[WindowResult], result: WindowResult) -> WindowResult:
    """The requested window's ``result`` with what the catch-up windows ``caught`` wrote
    (:meth:`.stream_run.StreamRun.catch_up_stopped`): their tables' writes come first (a table
    the window changed too is combined, :func:`combined_write_results`: counts added, the
    window's commit the newer), and the events they left out
    (``event_processing_failure_handling_mode``) are listed with the window's. The window's
    positions, counts and outcome are unchanged. A table caught up is then materialized by the
    run, as one the window changed (its rows reached the lake: a downstream asset keyed on its
    materializations or data version must see them)."""
    if not caught:
        return result
    results = [*caught, result]
    skipped = [e for r in results for e in r.events_skipped][:100]
    return replace(
        result,
        tables=_combined_tables(*results),
        events_skipped=skipped,
        events_skipped_count=sum(r.events_skipped_count for r in results),
    )


def _combined_tables(*results: WindowResult) -> dict[tuple[str, str], TableWriteResult]:
    """The per-table writes of consecutive ``results``, oldest first: a table written by several
    is :func:`combined_write_results` (rows summed, the newer commit outcome kept)."""
    tables: dict[tuple[str, str], TableWriteResult] = {}
    for r in results:
        for k, w in r.tables.items():
            tables[k] = w if k not in tables else combined_write_results(tables[k], w)
    return tables


def reached_planned_end(result: WindowResult, end: BinlogPosition) -> bool:
    """Whether a window requested up to ``end`` was read to its end: ``end``, or the later end
    its incremental-snapshot chunks extended it to (:attr:`.window_result.WindowResult.planned_end`);
    ``False`` when it stopped before (a blocking snapshot's pause point)."""
    planned = result.planned_end if result.planned_end is not None else end
    if planned.sort_key() < end.sort_key():
        planned = end
    return (result.end.file, result.end.pos) == (planned.file, planned.pos)


def reached_offset(start: BinlogPosition, end: BinlogPosition, result: WindowResult) -> BinlogPosition:
    """The offset a stream run reached, which the sensor commits.

    The requested ``end`` (with the server's GTID set) when the reader stopped exactly there,
    else where it really stopped: the start of the next file for a window bounded to its file's
    end (that requested end has no GTID set), after the requested end when incremental-snapshot
    chunks extended the window, before it when a blocking snapshot paused streaming. With GTIDs,
    the set is the one the reader tracked from the start's (exact), not the sensor's reading of
    the server's end (which may include a transaction committed just after that position).
    """
    reached = end if (result.end.file, result.end.pos) == (end.file, end.pos) else result.end
    if reached is end and start.gtid_set and result.end.gtid_set:
        reached = replace(end, gtid_set=result.end.gtid_set)
    return reached
