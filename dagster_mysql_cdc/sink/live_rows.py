"""The live-row count of a table's current state, carried in the tail's commits.

A window that appends change events to the tail (:mod:`.tail`) changes the number of live rows by
what its events say: ``+1`` per ``c`` (a key that was not live), ``-1`` per ``d``, nothing per
``u`` (a primary-key change is a ``d`` and a ``c``, as Debezium emits it; a keyless update's old
and new images cancel). So each tail commit records the count after it in its commit info
(``dagster_mysql_cdc.live_rows``), as the previous recorded count plus the window's ``c - d``: the
count costs what the window changed, not a read of the state (at 20M rows, a filtered scan of the
state's key column is seconds per window). A keyless table's window that deletes or updates copies
is the exception: a ``-1`` on a value the lake has no copy of (a row older than a
``snapshot_mode=no_data`` capture) changes nothing (:mod:`.current`: counts never go below zero),
so its change is the current counts of the values it touches with and without its tail rows
(:func:`.row_counts.keyless_live_change`: a read of the state's rows of those values and of the tail).

The previous count is trusted only when it was read at the version just before the commit that
recorded it (another writer's commit in between, e.g. a snapshot run beside the stream, would be
missing from it) and nothing that changes the count happened since it was recorded: the tail's later commits and the state's commits after the state version recorded with
it must all keep the current state's rows (a compaction moves rows from the tail into the state;
``OPTIMIZE``, ``VACUUM``, table properties and type rewrites keep them). A snapshot's state files,
a replacement, a cut (``TRUNCATE``, a full snapshot), snapshot reads (``r``: their keys may or may
not be live) or any commit this module does not know make the writer count exactly once more
(:func:`.row_counts.live_count`, a read of the state's key column) and record that.

A count made this way equals the exact count as long as every ``c`` creates and every ``d``
removes a live row, which is what the binlog says of the source. An event applied twice or lost
would make it differ from ``COUNT(*)`` of the source, which is what the row-count asset check
looks for; the exact count is taken again by the full checks ("Execute checks").
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

from deltalake import DeltaTable

log = logging.getLogger(__name__)

LIVE_ROWS = "dagster_mysql_cdc.live_rows"
#: the state table's version the count was recorded against (-1: no state table)
LIVE_STATE_VERSION = "dagster_mysql_cdc.live_rows_state_version"
#: the tail's version the writer read the previous count at (-1: no tail yet): the count holds only
#: when the commit recording it is the next version (no other writer's commit in between)
LIVE_TAIL_VERSION = "dagster_mysql_cdc.live_rows_tail_version"
#: commit info of the commit removing the tail files a compaction folded into the state
COMPACTED = "dagster_mysql_cdc.compacted"
#: commit info of a schema-only commit (columns added; no rows)
EVOLVED = "dagster_mysql_cdc.evolved"

_KEEPING_OPERATIONS = frozenset(
    {
        "OPTIMIZE",
        "VACUUM START",
        "VACUUM END",
        "SET TBLPROPERTIES",
        "ADD COLUMN",
        "CHANGE COLUMN",
        "UPDATE FIELD METADATA",
        "UPDATE TABLE METADATA",
    }
)
_KEEPING_KEYS = ("dagster_mysql_cdc.compaction", "dagster_mysql_cdc.rewrite", COMPACTED, EVOLVED)
#: how many commits back a recorded count is looked for
HISTORY_DEPTH = 20


def keeps_rows(commit: Mapping) -> bool:
    """Whether a Delta commit (an entry of ``DeltaTable.history()``) keeps the rows of the current
    state: maintenance (``OPTIMIZE``, ``VACUUM``), metadata, a compaction or a type rewrite."""
    return commit.get("operation") in _KEEPING_OPERATIONS or any(k in commit for k in _KEEPING_KEYS)


def window_delta(rows_by_op: Mapping[str, int]) -> int | None:
    """The change of the live-row count a batch of change events makes, from its ``op`` counts;
    ``None`` when the ops do not say it (``r`` snapshot reads, ``t`` cuts, unknown ops). A keyless
    batch with ``d`` or ``u`` events may change it less (see the module docs)."""
    if any(op not in ("c", "u", "d") for op, n in rows_by_op.items() if n):
        return None
    return int(rows_by_op.get("c", 0)) - int(rows_by_op.get("d", 0))


def recorded(tail: DeltaTable | None, state: DeltaTable | None) -> int | None:
    """The live-row count recorded by the newest tail commit, when no commit since changed the
    count (see the module docs); ``None`` otherwise (the caller counts exactly).

    A function of the two handles' versions (a Delta version's history never changes), so the
    answer is kept on the tail's handle for those versions (:func:`remember`): a window asks it
    of each table, and ``DeltaTable.history`` reads the log (about 10 % of a 300-table window's
    commit work before)."""
    if tail is None:
        return None
    key = (tail.version(), state.version() if state is not None else -1)
    memo = tail.__dict__.get("_cdc_live_rows")
    if memo is not None and memo[0] == key:
        return memo[1]
    out = _recorded(tail, state)
    tail.__dict__["_cdc_live_rows"] = (key, out)
    return out


def remember(tail: DeltaTable, state_version: int, count: int) -> None:
    """Keep on the tail's handle what :func:`recorded` answers for its current version and the
    state at ``state_version``: ``count``. For the writer whose commit through ``tail`` just
    recorded ``count`` against ``state_version`` as the version after the one it read the
    previous count at (so the commit is the newest and :func:`recorded` would read it back)."""
    tail.__dict__["_cdc_live_rows"] = ((tail.version(), state_version), count)


def _recorded(tail: DeltaTable, state: DeltaTable | None) -> int | None:
    found = _newest_count(tail, 2) or _newest_count(tail, HISTORY_DEPTH)  # mostly the last commit
    if found is None or found[0] is None:
        return None
    count, state_version = found
    now = state.version() if state is not None else -1
    if now == state_version:
        return count
    if state is None or state_version < -1 or now < state_version or now - state_version > HISTORY_DEPTH:
        return None
    for c in state.history(now - state_version):
        if int(c.get("version", -1)) > state_version and not keeps_rows(c):
            return None
    return count


def _newest_count(tail: DeltaTable, depth: int) -> tuple[int | None, int] | None:
    """``(count, state version)`` of the newest of the last ``depth`` tail commits recording a
    count, when every commit after it keeps the rows; ``(None, -2)``: a commit after it changed
    them (or its record is unreadable); ``None``: none recorded in ``depth`` commits."""
    for c in tail.history(depth):
        if LIVE_ROWS in c:
            try:
                if LIVE_TAIL_VERSION in c and int(c["version"]) != int(c[LIVE_TAIL_VERSION]) + 1:
                    return None, -2  # another commit came between the read and this one
                return int(c[LIVE_ROWS]), int(c.get(LIVE_STATE_VERSION, -2))
            except (KeyError, TypeError, ValueError):
                return None, -2
        if not keeps_rows(c):
            return None, -2
    return None
