"""Changes the binlog does not carry: what was detected, and the targeted repair queued for it.

Row-based capture (Debezium MySQL connector, and this project) sees only row events. Three kinds
of change reach a captured table without them, and are detected here:

- ``statement_dml``: a QUERY event carrying ``INSERT``/``UPDATE``/``DELETE``/``REPLACE``/``LOAD
  DATA`` on a captured table (a session or the server used ``binlog_format=STATEMENT``/``MIXED``);
  ``trigger``: a captured table such a statement's triggers may have written (every captured
  table when the capture user cannot see the triggers, see :mod:`..source.triggers`);
- ``fk_cascade``: a parent row deleted or its referenced key updated (by a row event, or by
  statement-based DML: then the whole child table) while a child table has an ``ON DELETE/UPDATE
  CASCADE`` or ``SET NULL`` foreign key (InnoDB applies it without logging; the foreign keys come
  from ``SHOW CREATE TABLE``, see :mod:`..source.foreign_keys`);
- ``checksum_mismatch``: the ``checksum_matches_source`` check found rows that differ (a change
  made with ``sql_log_bin=0``, by a trigger on a replica, a lake edited by hand ...).

A :class:`BinlogGap` names the table, the binlog position and what may have diverged. With
``binlog_gap_handling="repair"`` (default) it becomes a *targeted incremental snapshot* (Netflix
DBLog through :mod:`.incremental`): the whole table for statement DML, the child rows of the
cascaded keys (an ``additional-conditions`` filter on the foreign-key columns with the parent's
old and new key values), the differing keys of a checksum. Repaired rows arrive as ``op=r`` with
``source.snapshot=incremental`` and a ``__cdc.repair`` header saying why.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

import pymysql
from sqlglot import exp

from ..errors import CdcError, ConfigurationError
from ..source.connection import ConnectionSettings, connect
from ..source.foreign_keys import CascadingForeignKey, cascade_conditions, sql_literal
from ..source.schema import TableSchema
from ..source.signals import UnsafeFilter, validate_filter
from .incremental import IncrementalState, TableProgress, encode_key

if TYPE_CHECKING:
    from ..events import BinlogPosition
    from .run_log import RunLog

#: ``binlog_gap_handling`` values: queue a targeted incremental snapshot, only report, or stop.
GAP_HANDLING_MODES = ("repair", "warn", "fail")

#: Change-log header of repaired rows: why they were re-read.
REPAIR_HEADER = "__cdc.repair"

#: More distinct keys than this in one repair: the whole table is re-read instead of a key list.
MAX_FILTER_KEYS = 1000


class BinlogGapError(CdcError):
    """A change the binlog does not carry was found and ``binlog_gap_handling="fail"``."""


def check_gap_handling(mode: str) -> str:
    """Validate a ``binlog_gap_handling`` value.

    Raises:
        ConfigurationError: not one of :data:`GAP_HANDLING_MODES`.
    """
    if mode not in GAP_HANDLING_MODES:
        raise ConfigurationError(
            f"binlog_gap_handling={mode!r} is not valid; use one of {GAP_HANDLING_MODES} "
            "(repair: re-read what diverged with an incremental snapshot; warn: report only; "
            "fail: stop the run)"
        )
    return mode


@dataclass
class BinlogGap:
    """One detected change that is not in the binlog as row events.

    Attributes:
        kind: ``statement_dml``, ``fk_cascade`` or ``checksum_mismatch``.
        table: ``db.table`` that may differ from the source.
        position: ``file:pos`` of the binlog event that revealed it (the committed position for
            a checksum).
        detail: what happened, for people.
        filter: ``additional-conditions`` filter of the repair (``None``: the whole table).
        key_map: for an ``ON UPDATE CASCADE`` into a child's primary key: ``{"columns": child
            columns, "pairs": [[old values, new values], ...]}`` (encoded raw values), so the
            repair can delete the child rows' old keys.
        repair: what was done: ``queued as incremental snapshot <id>``, or why nothing was.
    """

    kind: str
    table: str
    position: str
    detail: str
    filter: str | None = None
    key_map: dict[str, Any] | None = None
    repair: str = "not repaired"
    candidate_keys: list[list] | None = field(default=None, repr=False)

    def message(self) -> str:
        """The one-line WARNING of the run log."""
        return f"Change not carried by the binlog: {self.kind} on {self.table} at {self.position}: {self.detail}. {self.repair}."

    def reason(self) -> str:
        """The ``__cdc.repair`` header value of the repaired rows."""
        return f"{self.kind} at {self.position}: {self.detail}"[:500]

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d.pop("candidate_keys", None)
        d.pop("key_map", None)
        return d


class CascadeTracker:
    """Collects the parent key values of one window's parent row changes per child foreign key,
    and turns them into one :class:`BinlogGap` per (constraint, parent operation)."""

    def __init__(self, foreign_keys: dict[tuple[str, str], list[CascadingForeignKey]]):
        self.by_parent = foreign_keys
        #: (constraint, op) -> what cascaded: ``{"fk", "action", "position", "pairs", "events"}``
        #: (``pairs``: old and new parent key values; a segment task returns these to be merged)
        self.seen: dict[tuple[str, str], dict[str, Any]] = {}

    def parents(self) -> set[tuple[str, str]]:
        return set(self.by_parent)

    def add(self, parent: tuple[str, str], op: str, rows: list[dict], position: str) -> None:
        """Record a parent rows event (``op`` ``u`` or ``d``; python-mysql-replication row dicts
        keyed by column name)."""
        for fk in self.by_parent.get(parent, []):
            action = fk.acts_on(op)
            if action is None:
                continue
            for r in rows:
                before = r.get("before_values") if op == "u" else r.get("values")
                after = r.get("after_values") if op == "u" else None
                if before is None:
                    continue
                old = tuple(before.get(c) for c in fk.parent_columns)
                new = tuple(after.get(c) for c in fk.parent_columns) if after is not None else None
                if new is not None and new == old:
                    continue  # the referenced key did not change: nothing cascades
                if not all(c in before for c in fk.parent_columns):
                    old = ()  # no column names (binlog_row_metadata=MINIMAL): whole child table
                entry = self.seen.setdefault(
                    (fk.name, op),
                    {"fk": fk, "action": action, "position": position, "pairs": [], "events": 0},
                )
                entry["events"] += 1
                entry["pairs"].append((old, new))

    def merge(self, seen: dict[tuple[str, str], dict[str, Any]]) -> None:
        """Add a later stretch's :attr:`seen` (a segment of a parallel window, in binlog order):
        the first position of each cascade wins, its events and key pairs add up."""
        for k, e in seen.items():
            if k not in self.seen:
                self.seen[k] = {**e, "pairs": list(e["pairs"])}
            else:
                self.seen[k]["events"] += e["events"]
                self.seen[k]["pairs"] += e["pairs"]

    def gaps(self) -> list[BinlogGap]:
        out = []
        for e in self.seen.values():
            action = e["action"]
            fk: CascadingForeignKey = e["fk"]
            pairs = e["pairs"]
            values = sorted({v for o, n in pairs for v in (o, n) if v}, key=repr)  # deterministic filter
            flt = None
            key_map = None
            if all(o for o, _ in pairs) and len(values) <= MAX_FILTER_KEYS:
                flt = cascade_conditions(fk, action, values)
                updates = [(o, n) for o, n in pairs if n is not None]
                if action == "CASCADE" and updates:
                    key_map = {
                        "columns": list(fk.child_columns),
                        "pairs": [[encode_key(o), encode_key(n)] for o, n in updates],
                    }
            child = f"{fk.child[0]}.{fk.child[1]}"
            parent = f"{fk.parent[0]}.{fk.parent[1]}"
            verb = "deleted" if all(n is None for _, n in pairs) else "changed"
            out.append(
                BinlogGap(
                    kind="fk_cascade",
                    table=child,
                    position=e["position"],
                    detail=(
                        f"{len(pairs)} {parent} row(s) {verb} their key; foreign key {fk.name} "
                        f"({', '.join(fk.child_columns)}) ON {'UPDATE' if verb == 'changed' else 'DELETE'} "
                        f"{action} changed {child} rows that the binlog does not show"
                    ),
                    filter=flt,
                    key_map=key_map,
                )
            )
        return out


def queue_repairs(
    state: IncrementalState | None,
    gaps: list[BinlogGap],
    schemas: dict[tuple[str, str], TableSchema],
    repair_id: str,
) -> IncrementalState | None:
    """Queue one targeted incremental snapshot per gap; sets each gap's ``repair`` text.

    A repair identical to one already queued and not started (same table and filter) is not
    queued twice. Tables without a primary key cannot be read in key chunks: their gap says to
    re-snapshot (materialize the asset).

    Args:
        state: the window's incremental snapshot state (``None``: none running).
        schemas: current schemas of the captured tables.
        repair_id: snapshot id used when no incremental snapshot is running (chunk ids derive from it).

    Returns:
        the new state (``state`` itself when nothing was queued).
    """
    new = state.copy() if state is not None else None
    for g in gaps:
        db, _, t = g.table.partition(".")
        schema = schemas.get((db, t))
        if schema is None:
            g.repair = "not repaired: the table is not in the schema catalog"
            continue
        if not schema.primary_key:
            g.repair = (
                "not repaired: incremental snapshots need a primary key; re-snapshot the table "
                "(materialize its asset)"
            )
            continue
        flt = g.filter
        if flt is not None:
            try:
                flt = validate_filter(flt, schema.column_names)
            except UnsafeFilter:
                flt = None  # values we cannot write safely: the whole table
        key_map = g.key_map if g.key_map and set(g.key_map["columns"]) <= set(schema.primary_key) else None
        if new is None:
            new = IncrementalState(snapshot_id=repair_id)
        what = _queue_one(new, g, flt, key_map, schema.column_names)
        g.repair = f"Repair queued: incremental snapshot {new.snapshot_id} of {what}"
    return new if new is not None else state


def _queue_one(
    state: IncrementalState, g: BinlogGap, flt: str | None, key_map: dict | None, columns: list[str]
) -> str:
    """Queue the repair of ``g`` in ``state``, merged with a queued repair of the same table that
    has not started, so a table is re-read (and its absent rows deleted) once: a whole-table
    repair covers any filtered one; two filtered repairs become one with the filters ``OR``-ed,
    the candidate keys and cascade key maps joined. Returns what will be re-read."""
    pending = [p for p in state.tables if p.table == g.table and p.last_key is None and p.chunks == 0]
    whole = next((p for p in pending if p.filter is None), None)
    if whole is not None:  # already re-read whole: keys to check and key maps join it
        _join(whole, g.reason(), g.candidate_keys, key_map)
        return "the whole table"
    if flt is None:
        for p in pending:  # the whole table covers them: one repair instead of several
            state.tables.remove(p)
        merged = TableProgress(
            table=g.table, filter=None, reason=g.reason(), key_map=key_map, candidate_keys=g.candidate_keys
        )
        for p in pending:
            _join(merged, p.reason, p.candidate_keys, p.key_map)
        state.tables.append(merged)
        return "the whole table"
    if pending:
        p = pending[0]
        if p.filter != flt:
            try:
                p.filter = validate_filter(f"({p.filter}) OR ({flt})", columns)
            except UnsafeFilter:
                p.filter = None  # cannot be combined safely: the whole table
        _join(p, g.reason(), g.candidate_keys, key_map)
        return f"rows where {p.filter}" if p.filter else "the whole table"
    state.tables.append(
        TableProgress(
            table=g.table, filter=flt, reason=g.reason(), key_map=key_map, candidate_keys=g.candidate_keys
        )
    )
    return f"rows where {flt}"


def _join(p: TableProgress, reason: str | None, candidates: list | None, key_map: dict | None) -> None:
    """Add another repair's reason, candidate keys and cascade key map to queued repair ``p``."""
    if reason and p.reason and reason not in p.reason:
        p.reason = f"{p.reason}; {reason}"[:1000]
    elif reason and not p.reason:
        p.reason = reason
    if candidates:
        known = {json.dumps(k) for k in p.candidate_keys or []}
        p.candidate_keys = [*(p.candidate_keys or []), *(k for k in candidates if json.dumps(k) not in known)]
    if key_map:
        if p.key_map and p.key_map["columns"] == key_map["columns"]:
            pairs = p.key_map["pairs"] + [x for x in key_map["pairs"] if x not in p.key_map["pairs"]]
            p.key_map = {"columns": p.key_map["columns"], "pairs": pairs}
        elif not p.key_map:
            p.key_map = key_map


#: Room for the JSON ``data`` of a repair signal (the signal table's ``data`` is VARCHAR(2048)).
SIGNAL_DATA_LIMIT = 2000


def key_ranges_filter(columns: Sequence[str], keys: Sequence[tuple], max_ranges: int = 16) -> str | None:
    """A filter covering ``keys`` with at most ``max_ranges`` key ranges (``BETWEEN`` for one
    column, row comparisons for composite keys), ``OR``-ed; ``None`` when a value has no safe
    literal, a key holds ``NULL`` (values of mixed types are ordered by type first), or there are
    no keys.

    The keys are sorted and cut into ``max_ranges`` groups of consecutive keys; each group becomes
    ``[first, last]``, so rows between differing keys are re-read too (harmless: they are equal).
    """
    distinct = {tuple(k) for k in keys}
    if not distinct or any(v is None for k in distinct for v in k):
        return None  # a NULL key (a lake row written from a partial row image) has no range
    ks = sorted(distinct, key=lambda k: tuple((type(v).__name__, v) for v in k))
    step = max(1, -(-len(ks) // max_ranges))
    cols = [exp.column(c, quoted=True) for c in columns]
    parts = []
    for i in range(0, len(ks), step):
        lo, hi = ks[i], ks[min(i + step, len(ks)) - 1]
        lits_lo, lits_hi = [sql_literal(v) for v in lo], [sql_literal(v) for v in hi]
        if any(x is None or isinstance(x, exp.Null) for x in lits_lo + lits_hi):
            return None
        if len(cols) == 1:
            part = exp.Between(this=cols[0], low=lits_lo[0], high=lits_hi[0]).sql(dialect="mysql")
        else:
            row = exp.Tuple(expressions=cols)
            part = exp.and_(
                exp.GTE(this=row.copy(), expression=exp.Tuple(expressions=lits_lo)),
                exp.LTE(this=row.copy(), expression=exp.Tuple(expressions=lits_hi)),
            ).sql(dialect="mysql")
        parts.append(part)
    return " OR ".join(f"({p})" for p in parts) if len(parts) > 1 else parts[0]


def checksum_repair_signal(
    table: str,
    primary_key: Sequence[str],
    differing: Sequence[tuple],
    lake_only: Sequence[tuple],
    reason: str,
) -> tuple[str, str]:
    """``(id, data)`` of the ``execute-snapshot`` signal row that repairs a failed checksum: an
    incremental snapshot of the differing keys' ranges (the whole table when no safe range
    filter fits), carrying ``reason`` and, when they fit in the signal's ``data``, the keys only
    the lake has (``delete-keys``: deleted at the chunk's high watermark unless the source has
    them again).

    ``differing`` and ``lake_only`` hold key values as the checks compare them (integers and
    strings equal their source values; for other key types the whole table is re-read).
    """
    flt = key_ranges_filter(primary_key, differing)
    data: dict[str, Any] = {"data-collections": [table], "reason": reason[:300]}
    if flt is not None:
        data["additional-conditions"] = [{"data-collection": table, "filter": flt}]
    if json.dumps(data).__len__() > SIGNAL_DATA_LIMIT:
        data.pop("additional-conditions", None)
    keys = [list(k) for k in lake_only if all(isinstance(v, (int, str)) for v in k)]
    with_keys = {**data, "delete-keys": keys}
    if keys and len(json.dumps(with_keys)) <= SIGNAL_DATA_LIMIT:
        data = with_keys
    return f"repair-{uuid.uuid4().hex[:16]}", json.dumps(data, separators=(",", ":"))


def queue_checksum_repair(
    settings: ConnectionSettings,
    schema: TableSchema,
    differing: Sequence[tuple],
    lake_only: Sequence[tuple],
    *,
    committed: BinlogPosition,
    gap_handling: str,
    signal_table: str | None,
    read_only: bool,
    log: RunLog,
) -> str:
    """Handle a failed ``checksum_matches_source`` of ``schema``'s table at ``committed``: with
    ``gap_handling="repair"``, a keyed table and a writable signal table, insert the
    ``execute-snapshot`` signal of :func:`checksum_repair_signal` (the next stream run re-reads
    the differing keys' ranges); otherwise say why not. Logs one WARNING naming the table, the
    position, the number of differing keys and the outcome.

    Args:
        differing: keys whose rows differ (or exist on one side only); ``lake_only``: the keys
            only the lake has (deleted by the repair unless the source has them again).
        signal_table: ``db.table`` of the signal table (``None``: signals are off);
            ``read_only``: incremental snapshots write nothing to the source (no signal row).

    Returns:
        the outcome for the check's ``repair`` metadata: ``"Repair queued: ..."`` or
        ``"not repaired: ..."`` with the fix (never raises for a failed insert: the message holds
        the exact ``INSERT`` to run by hand).
    """
    table = schema.qualified_name
    if gap_handling != "repair":
        outcome = f"not repaired (binlog_gap_handling={gap_handling!r}): re-snapshot the table"
    elif not schema.primary_key:
        outcome = "not repaired: incremental snapshots need a primary key; re-snapshot the table (materialize its asset)"
    elif not signal_table or read_only:
        outcome = (
            "not repaired: the repair is an execute-snapshot signal row, which needs a signal table "
            "the capture user may write (signal_data_collection, incremental_snapshot_read_only=False)"
        )
    else:
        reason = f"checksum_mismatch at {committed}: {len(differing)} differing key(s) in {table}"
        sid, data = checksum_repair_signal(table, schema.primary_key, differing, lake_only, reason)
        db, _, t = signal_table.partition(".")
        conn = connect(settings, autocommit=True)
        try:
            with conn.cursor() as cur:
                cur.execute(
                    f"INSERT INTO `{db}`.`{t}` (id, type, data) VALUES (%s, 'execute-snapshot', %s)",
                    (sid, data),
                )
            outcome = f"Repair queued: execute-snapshot signal {sid} ({data})"
        except pymysql.err.MySQLError as e:
            outcome = (
                f"not repaired: writing the repair signal to {signal_table} failed ({e.args[0]}: "
                f"{e.args[-1]}); create the signal table (mysql.create_signal_table()) and grant "
                "the capture user INSERT on it, or insert the signal yourself: "
                f"INSERT INTO {signal_table} VALUES ('{sid}', 'execute-snapshot', '{data}')"
            )
        finally:
            conn.close()
    log.warning(
        f"Change not carried by the binlog: checksum_mismatch on {table} at {committed}: "
        f"{len(differing)} key(s) differ from the source ({len(lake_only)} only in the lake). {outcome}."
    )
    return outcome


#: The ``kind`` of a repair that re-reads rows a check found differing (not a change the binlog
#: did not carry): the lake diverged for a reason nobody logged, and its checks stay failed
#: until the repair completes (see :func:`queued_repairs`).
DIVERGENCE_KIND = "checksum_mismatch"


@dataclass(frozen=True)
class QueuedRepair:
    """A repair queued or in progress for one table, as an incremental snapshot state holds it.

    Attributes:
        table: ``db.table``.
        snapshot_id: the incremental snapshot re-reading it.
        reason: why (:meth:`BinlogGap.reason`, several joined by ``; ``).
        what: the rows re-read (``rows where <filter>`` or ``the whole table``).
        started: a chunk of it was read already.
    """

    table: str
    snapshot_id: str
    reason: str
    what: str
    started: bool

    @property
    def divergence(self) -> bool:
        """The repair re-reads rows a check found differing (:data:`DIVERGENCE_KIND`)."""
        return DIVERGENCE_KIND in self.reason

    def describe(self) -> str:
        """One line for people: the repair, what it re-reads and why."""
        state = "in progress" if self.started else "queued"
        return f"repair {self.snapshot_id} of {self.table} ({self.what}) {state}: {self.reason}"


def queued_repairs(state: IncrementalState | dict | None) -> dict[str, QueuedRepair]:
    """The repairs an incremental snapshot ``state`` (an :class:`.incremental.IncrementalState`
    or its dict) still has to read, by ``db.table``: its tables that carry a repair ``reason``
    (a plain incremental snapshot has none)."""
    if isinstance(state, dict):
        state = IncrementalState.from_dict(state)
    if state is None:
        return {}
    return {
        p.table: QueuedRepair(
            table=p.table,
            snapshot_id=state.snapshot_id,
            reason=p.reason,
            what=f"rows where {p.filter}" if p.filter else "the whole table",
            started=p.chunks > 0 or p.last_key is not None,
        )
        for p in state.tables
        if p.reason
    }


def completed_repairs(chunks: Sequence[dict] | None, state: IncrementalState | dict | None) -> set[str]:
    """The tables (``db.table``) whose repair a stream run completed: it read repair chunks of
    them (``chunks``: the run's ``WindowResult.chunks``, a ``repair`` entry on a repair's) and
    the incremental snapshot ``state`` after the run no longer holds them."""
    if isinstance(state, dict):
        state = IncrementalState.from_dict(state)
    still = {p.table for p in state.tables} if state is not None else set()
    return {c["table"] for c in chunks or [] if c.get("repair") and c.get("table") not in still}
