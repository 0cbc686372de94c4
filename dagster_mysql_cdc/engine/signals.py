"""Executing the signal rows of one binlog window (Debezium's signal processor and its actions).

Signal rows are parsed by :func:`dagster_mysql_cdc.source.signals.parse_signal`; here they are
executed in binlog order by :class:`SignalProcessor`: the watermark rows of planned chunks go to the
incremental snapshot source (:class:`~.incremental_source.IncrementalSnapshotSource`), the signals
(``execute-snapshot``, ``stop-snapshot``, ``pause-snapshot``, ``resume-snapshot``, ``log``) change
the snapshot progress or ask the caller for a blocking snapshot. A signal that cannot be executed
is logged as a WARNING and skipped: capture never stops for a bad signal.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..source.binlog import RowsBatch
from ..source.schema import TableSchema
from ..source.signals import InvalidSignal, Signal, matches_collection, parse_signal
from ..source.types import TypeOptions
from .incremental import IncrementalSnapshotError
from .incremental_source import IncrementalSnapshotSource

if TYPE_CHECKING:
    from .window_result import WindowResult


class SignalProcessor:
    """The signal-table rows of one window, executed in binlog order (Debezium ``SignalProcessor``
    with the source channel ``SourceSignalChannel`` and the actions ``ExecuteSnapshot``,
    ``StopSnapshot``, ``PauseIncrementalSnapshot``, ``ResumeIncrementalSnapshot``, ``Log``,
    ``OpenIncrementalSnapshotWindow`` and ``CloseIncrementalSnapshotWindow``).

    Args:
        result: the window's result: executed signals go to ``signal_log``, rejected ones to
            ``signal_log`` and ``signals_rejected`` (the caller logs them as WARNINGs).
        snapshot: the window's incremental snapshot source (watermarks, progress changes).
        captured_tables: ``{(db, table): schema}`` of the captured tables now (keyed by the
            message key columns, as repairs and chunks use them).
        type_options: column policy (a masked key cannot be snapshotted incrementally).
        connection: a source connection (opened on first use), to try ``additional-conditions``.

    Attributes:
        blocking: tables of ``blocking`` execute-snapshots: the window ends after the signal's
            transaction and the caller snapshots them (Debezium's blocking snapshot).
    """

    def __init__(
        self,
        *,
        result: WindowResult,
        snapshot: IncrementalSnapshotSource,
        captured_tables: Callable[[], dict[tuple[str, str], TableSchema]],
        type_options: TypeOptions,
        connection: Callable[[], Any],
    ):
        self.result = result
        self.snapshot = snapshot
        self.captured_tables = captured_tables
        self.type_options = type_options
        self.connection = connection
        self.blocking: list[tuple[str, str]] = []

    def process_rows(self, ev: RowsBatch) -> None:
        """A rows event of the signal table: watermark rows and signals (inserts only; a delete is
        the high watermark of the ``insert_delete`` strategy; updates are ignored)."""
        for row in ev.rows:
            values = row.get("values") or row.get("after_values") or {}
            if ev.op == "d":  # insert_delete strategy: deleting the open row is the high watermark
                self.snapshot.close_window(str(values.get("id")), ev)
                continue
            if ev.op != "c":
                continue
            try:
                sig = parse_signal(values)
            except InvalidSignal as e:
                self.reject(f"signal row at {ev.file}:{ev.pos} skipped: {e}")
                continue
            if sig.type == "snapshot-window-open":
                self.snapshot.open_window(sig.id)
            elif sig.type == "snapshot-window-close":
                self.snapshot.close_window(sig.id, ev)
            else:
                self.execute(sig, ev)

    def reject(self, message: str) -> None:
        """A signal that cannot be executed: logged as WARNING, capture continues."""
        self.result.signal_log.append(message)
        self.result.signals_rejected.append(message)

    def execute(self, sig: Signal, ev: RowsBatch) -> None:
        """Execute one signal read at ``ev``'s position."""
        here = f"{ev.file}:{ev.pos}"
        log = self.result.signal_log
        if sig.type == "log":
            log.append(f"log signal {sig.id}: " + (sig.message or "").replace("{}", here))
        elif sig.type == "pause-snapshot":
            self.snapshot.pause(True)
            log.append(f"incremental snapshot paused by {sig.id} at {here}")
        elif sig.type == "resume-snapshot":
            self.snapshot.pause(False)
            log.append(f"incremental snapshot resumed by {sig.id} at {here}")
        elif sig.type == "stop-snapshot":
            self.snapshot.stop(sig.data_collections)
            log.append(
                f"incremental snapshot stopped by {sig.id} at {here} ({list(sig.data_collections) or 'all tables'})"
            )
        else:
            self._execute_snapshot(sig, here)

    def _execute_snapshot(self, sig: Signal, here: str) -> None:
        """``execute-snapshot``: the captured tables matching its data-collections, blocking (the
        caller snapshots them after this transaction) or incremental (queued)."""
        known = self.captured_tables()
        wanted = sorted(
            {k for k in known for p in sig.data_collections if matches_collection(p, f"{k[0]}.{k[1]}")}
        )
        unknown = [
            p for p in sig.data_collections if not any(matches_collection(p, f"{k[0]}.{k[1]}") for k in known)
        ]
        if unknown:
            self.reject(f"signal {sig.id}: unknown or not captured data-collections {unknown}; ignored")
        if not wanted:
            self.reject(f"signal {sig.id}: no captured table matches {list(sig.data_collections)}; skipped")
            return
        masked = [f"{d}.{t}" for d, t in wanted if self.type_options.columns.masked_key(known[(d, t)])]
        if masked and sig.snapshot_type != "blocking":
            # chunk bounds would carry raw key values into the cursor, run tags and the lake's plan
            self.reject(
                f"signal {sig.id}: {masked} have a masked key column, so they cannot be snapshotted "
                "incrementally (its raw key values would be stored); use a blocking snapshot"
            )
            wanted = [k for k in wanted if f"{k[0]}.{k[1]}" not in masked]
            if not wanted:
                return
        if sig.snapshot_type == "blocking":
            self.blocking.extend(wanted)
            self.result.signal_log.append(
                f"blocking snapshot {sig.id} of {[f'{d}.{t}' for d, t in wanted]}: streaming pauses at {here}"
            )
            return
        try:
            msgs = self.snapshot.add_tables(
                sig.id,
                wanted,
                sig.conditions,
                known,
                # filters are tried on the server once (the connection is only used for them)
                conn=self.connection() if sig.conditions else None,
                reason=sig.reason,
                delete_keys=sig.delete_keys,
            )
        except (InvalidSignal, IncrementalSnapshotError) as e:
            self.reject(f"signal {sig.id} skipped: {e}")
            return
        self.result.signal_log.extend(msgs)
