"""One binlog window run: the coordinator of its sources (Debezium's
``ChangeEventSourceCoordinator``, for one bounded window).

:func:`run_window` hands a backlog's window to the parallel catch-up (:mod:`.parallel_catchup`)
and reads every other window in the run process (:class:`WindowCoordinator`): the binlog reader
(:class:`~.stream.BinlogStreamingSource`), the incremental snapshot source
(:class:`~.incremental_source.IncrementalSnapshotSource`) and the signal processor
(:class:`~.signals.SignalProcessor`), then settles the window's gaps (:mod:`.window_gaps`) and
commits."""

from __future__ import annotations

import logging
import time
from typing import Any

from ..events import BinlogPosition
from ..source.connection import ConnectionSettings, ServerInfo
from .incremental_source import IncrementalSnapshotSource
from .parallel_catchup import decode_in_parallel
from .signals import SignalProcessor
from .stream import BinlogStreamingSource, StreamWindow
from .window_gaps import settle_window
from .window_result import WindowResult

log = logging.getLogger(__name__)


def run_window(settings: ConnectionSettings, info: ServerInfo, **window: Any) -> WindowResult:
    """Read ``[start, end)`` of the binlog and commit its changes to the lake.

    ``window``: the other fields of :class:`~.stream.StreamWindow`, as keywords:
    ``replica_server_id``, ``start``, ``end``, ``writer``, ``history``, ``table_filter``,
    ``type_options``, ``options``, ``server_name``, and optionally ``incremental``,
    ``incremental_options``, ``catch_up`` and ``resume_at``.

    ``catch_up``: the window re-reads positions whose schema history (and transaction metadata)
    an earlier window committed, for tables that were stopped (:mod:`.isolation`): only their
    tables are written.

    ``resume_at``: tables whose row events before a position are skipped (a stopped table
    snapshotted again at that position after ``start``: the snapshot holds them; see
    :mod:`.isolation`).

    With ``incremental_options.signal_table`` set, signal rows in the binlog are executed in
    order and an active incremental snapshot reads its next chunks (see :mod:`.incremental`): the
    window then extends to just after the last chunk's high watermark (``result.end``). A
    ``blocking`` execute-snapshot ends the window after its transaction and is reported in
    ``result.blocking_tables`` for the caller to snapshot.

    :class:`WindowCoordinator` coordinates the window's three parts (Debezium's
    ``ChangeEventSourceCoordinator``): the :class:`~.stream.BinlogStreamingSource`, the :class:`~.incremental_source.IncrementalSnapshotSource`
    and the :class:`~.signals.SignalProcessor`.

    Raises:
        BinlogReadError (and subclasses): see :mod:`.source.binlog`.
        UnparseableDdlError: a DDL could not be parsed (unless ``skip_unparseable_ddl``).
        SchemaMismatchError: an event's columns differ from the schema history.
        SinkError: a commit failed.
        TypeError: a keyword is not a field of :class:`~.stream.StreamWindow`, or one is missing.
    """
    return read_window(StreamWindow(settings, info, **window))


def read_window(window: StreamWindow) -> WindowResult:
    """:func:`run_window` of ``window``: a backlog's window decoded by parallel Spark tasks when it
    can be (:func:`~.parallel_catchup.decode_in_parallel`), else read by :class:`WindowCoordinator`."""
    t0 = time.monotonic()
    decode: list[dict] = []
    if (
        window.options.parallel is not None
    ):  # a backlog is decoded by parallel Spark tasks (.parallel_catchup)
        done, decode = decode_in_parallel(window)
        if done is not None:
            return done
    result = WindowCoordinator(window, WindowResult(start=window.start, end=window.end, decode=decode)).run()
    for line in result.signal_log:
        log.log(logging.WARNING if line in result.signals_rejected else logging.INFO, line)
    result.seconds = time.monotonic() - t0
    return result


class WindowCoordinator:
    """The run process's read of one window: its three sources made in order (the binlog
    reader, then the incremental snapshot source, which plans the window's chunks and may extend
    its end, then the signal processor), the binlog streamed through them, the window settled and
    committed (or every open table batch dropped when anything raises).

    Raises (from :meth:`run`): see :func:`run_window`.
    """

    def __init__(self, window: StreamWindow, result: WindowResult):
        self.window = window
        self.result = result
        self.source = BinlogStreamingSource.of_window(window, result)
        # the incremental snapshot: this window's chunks are planned (reused on retry)
        self.snapshot = IncrementalSnapshotSource(
            window.settings,
            window.info,
            storage=window.writer.storage,
            server_name=window.server_name,
            options=window.incremental_options,
            type_options=window.type_options,
            result=result,
            table_events=self.source.table_events,
            state=window.incremental,
            writer=window.writer,
        )
        self.signals = SignalProcessor(
            result=result,
            snapshot=self.snapshot,
            captured_tables=self.source.captured_tables,
            type_options=window.type_options,
            connection=self.source.connection,
        )

    def run(self) -> WindowResult:
        """Read the window, settle it and commit; returns its result."""
        source, snapshot = self.source, self.snapshot
        end = snapshot.plan(self.window.start, self.window.end)
        self.result.planned_end = end
        before = snapshot.state_before
        if snapshot.planned and before is not None and end.sort_key() == self.window.start.sort_key():
            source.identify_as_chunks(before.snapshot_id, before.chunk_seq)  # (a chunk-only window)
        reader = source.reader(self.window.replica_server_id, end)
        try:
            source.stream(reader, snapshot, self.signals)
            self._close_chunks(reader.position)
            self.result.events_read = reader.events_read
            snapshot.state = settle_window(source, snapshot.state, self.window.incremental_options)
            self.result.incremental_state = snapshot.final_state()
            source.commit(self.result.end)
        except BaseException:
            source.abort()
            raise
        finally:
            source.close()
        return self.result

    def _close_chunks(self, position: BinlogPosition) -> None:
        """The window ends at ``position``: positional high watermarks at its very end, then the
        chunks re-planned after a blocking snapshot's pause point, or those whose watermarks
        never came read again (not dropped)."""
        snapshot, signals, result = self.snapshot, self.signals, self.result
        if snapshot.positional and not signals.blocking:
            snapshot.flush_positional(position)
        result.end = position
        if signals.blocking:
            # the planned chunks lie after the pause point: they are re-planned later
            snapshot.resume_before_blocking()
            result.blocking_tables = list(dict.fromkeys(signals.blocking))
        else:
            snapshot.requeue_unclosed(result.end)
