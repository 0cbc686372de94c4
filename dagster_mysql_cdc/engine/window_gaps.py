"""What a window leaves to do once its events are read: the tables its DDL requires to snapshot
again, and the changes its binlog does not carry (``binlog_gap_handling``: repairs queued,
warnings, or a failure). Both drivers of the window reader settle a window with
:func:`settle_window`."""

from __future__ import annotations

from ..events import BinlogPosition
from ..source.schema import TableSchema
from ..source.types import TypeOptions
from .gaps import (
    BinlogGap,
    BinlogGapError,
    queue_repairs,
)
from .incremental import IncrementalState
from .incremental_source import IncrementalOptions
from .stream import BinlogStreamingSource, StreamOptions


def settle_window(
    source: BinlogStreamingSource, state: IncrementalState | None, inc: IncrementalOptions
) -> IncrementalState | None:
    """Report what the window's statements did into ``source.result``: the DDL effects
    (``ddl_effects``), the tables to snapshot again (added to ``blocking_tables``), the gaps
    (``gaps``, each handled by :func:`window_gaps`). Returns the incremental state with the
    repairs queued.

    Raises:
        BinlogGapError: ``binlog_gap_handling="fail"`` and the window has gaps (before any commit).
    """
    result = source.result
    result.ddl_effects = list(source.ddl_log)
    if source.resnapshots:  # tables a DDL left with rows the binlog does not carry (.ddl_effects)
        again = [k for k in map(table_key, source.resnapshots) if source.catalog.get(*k) is not None]
        result.blocking_tables = list(dict.fromkeys([*result.blocking_tables, *again]))
    result.gaps = source.gaps()
    if not result.gaps:
        return state
    return window_gaps(
        result.gaps, state, source.options, inc, source.captured_tables(), source.type_options, source.start
    )


def window_gaps(
    gaps: list[BinlogGap],
    state: IncrementalState | None,
    options: StreamOptions,
    inc: IncrementalOptions,
    known: dict[tuple[str, str], TableSchema],
    type_options: TypeOptions,
    start: BinlogPosition,
) -> IncrementalState | None:
    """:func:`handle_gaps` of the window's gaps; with ``repair``, gaps of tables whose key column
    is masked are reported, not repaired (a repair stores raw key values: candidate keys, chunk
    bounds). Returns the incremental state with the repairs queued."""
    handled = gaps
    if options.gap_handling == "repair":
        masked = {id(g) for g in gaps if type_options.columns.masked_key(known.get(table_key(g.table)))}
        for g in gaps:
            if id(g) in masked:
                g.repair = (
                    "Not repaired: its key column is masked and a repair stores raw key values; "
                    "re-snapshot the table (materialize its asset)"
                )
        handled = [g for g in gaps if id(g) not in masked]
    return handle_gaps(handled, state, options, inc, known, start)


def table_key(name: str) -> tuple[str, str]:
    """``(database, table)`` of a ``db.table`` name (a gap's or a DDL effect's table)."""
    db, _, t = name.partition(".")
    return (db, t)


def handle_gaps(
    gaps: list[BinlogGap],
    state: IncrementalState | None,
    options: StreamOptions,
    inc: IncrementalOptions,
    schemas: dict[tuple[str, str], TableSchema],
    start: BinlogPosition,
) -> IncrementalState | None:
    """Apply ``options.gap_handling`` to the window's gaps (sets each gap's ``repair`` text).

    Raises:
        BinlogGapError: ``gap_handling="fail"``.
    """
    if options.gap_handling == "fail":
        raise BinlogGapError(
            "Changes the binlog does not carry (binlog_gap_handling='fail'):\n"
            + "\n".join(f"  - {g.kind} on {g.table} at {g.position}: {g.detail}" for g in gaps)
            + "\nRe-snapshot the tables named (materialize their assets, or send an execute-snapshot "
            "signal), or set binlog_gap_handling='repair' to have them re-read automatically."
        )
    if options.gap_handling == "warn":
        for g in gaps:
            g.repair = "Not repaired (binlog_gap_handling='warn'): re-snapshot the table"
        return state
    if not inc.signal_table:
        for g in gaps:
            g.repair = (
                "Not repaired: repairs are incremental snapshots, which need the signal table "
                "(set signal_data_collection='db.debezium_signal' and create it)"
            )
        return state
    unknown = [g for g in gaps if g.table.endswith(".?")]
    for g in unknown:
        g.repair = (
            "Not repaired: the statement's tables could not be named; re-snapshot the database's tables"
        )
    return queue_repairs(
        state, [g for g in gaps if g not in unknown], schemas, f"repair-{start.version_tag()}"
    )
