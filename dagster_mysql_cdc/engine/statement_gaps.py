"""Gaps of statement-based DML (``binlog_format=STATEMENT``/``MIXED``): the captured tables a
statement writes, and those the triggers it fires and the cascading foreign keys it acts on change
besides, none of which have row images (see :mod:`.gaps` for how gaps are repaired)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from ..source.binlog import StatementDml
from ..source.connection import ServerInfo
from ..source.filters import TableFilter
from ..source.foreign_keys import CascadingForeignKey
from ..source.schema import TableSchema
from ..source.statements import dml_target_tables, trigger_events, updated_columns
from ..source.triggers import (
    HIDDEN,
    TriggerVisibility,
    read_trigger_visibility,
    read_triggers,
    trigger_writes,
)
from .gaps import BinlogGap


class StatementGaps:
    """The gaps of one window's statement-based DML, by table (``dml_gaps``: the first per
    table; the binlog reader adds its DDL gaps to the same dict).

    Args:
        info: the server (MariaDB and MySQL show triggers to different grants).
        table_filter, signal_key: the captured tables, and the signal table (never captured).
        catalog_tables: the schema catalog's tables at the current position.
        foreign_keys: the cascading foreign keys by parent table now (a DDL may change them).
        connection: the window's look-up connection (triggers are read on first need).
        hides_values: column filters/masks are configured (statement texts are withheld).
    """

    def __init__(
        self,
        info: ServerInfo,
        table_filter: TableFilter,
        signal_key: tuple[str, ...] | None,
        catalog_tables: Callable[[], dict[tuple[str, str], TableSchema]],
        foreign_keys: Callable[[], dict[tuple[str, str], list[CascadingForeignKey]]],
        connection: Callable[[], Any],
        hides_values: bool,
    ):
        self.info = info
        self.table_filter = table_filter
        self.sig_key = signal_key
        self.catalog_tables = catalog_tables
        self.foreign_keys = foreign_keys
        self.connection = connection
        self.hides_values = hides_values
        self.dml_gaps: dict[str, BinlogGap] = {}
        self.triggers: dict[tuple[str, str], list] = {}  # (db, table) -> its triggers (read once)
        #: what the capture user sees of triggers (read when statement DML first needs it)
        self.trigger_visibility: TriggerVisibility | None = None

    def _captured(self, db: str, t: str) -> bool:
        return self.table_filter.matches(db, t) and (db, t) != self.sig_key

    def _captured_tables_of(self) -> list[tuple[str, str]]:
        return [k for k in self.catalog_tables() if self._captured(*k)]

    def add(self, item: StatementDml) -> None:
        """Statement-based DML ``item``: a gap of each captured table it writes (the first per
        table), then of those it changed besides (:meth:`_side_effect_gaps`)."""
        targets = dml_target_tables(item.sql, item.database)
        if not targets and (
            item.database is None or any(d == item.database for d, _ in self._captured_tables_of())
        ):
            targets = [(item.database or "?", "?")]  # tables not named: reported, not repaired
        for db, t in targets or []:
            if t != "?" and (not self.table_filter.matches(db, t) or (db, t) == self.sig_key):
                continue
            name = f"{db}.{t}"
            if name not in self.dml_gaps:
                self.dml_gaps[name] = BinlogGap(
                    kind="statement_dml",
                    table=name,
                    position=f"{item.file}:{item.pos}",
                    detail=(
                        f"statement-based DML (binlog_format=STATEMENT or MIXED, thread "
                        f"{item.thread}) has no row images: "
                        + (
                            # the statement may hold values the column policy masks or leaves out
                            "statement text withheld (column filters/masks are configured)"
                            if self.hides_values
                            else repr(item.sql[:200])
                        )
                    ),
                )
        written = [(db, t) for db, t in targets or [] if t != "?"]
        self._side_effect_gaps(item, written, trigger_events(item.sql), updated_columns(item.sql))

    def _side_effect_gaps(
        self,
        item: StatementDml,
        written: list[tuple[str, str]],
        events: Sequence[str],
        columns: frozenset[str] | None,
    ) -> None:
        """Gaps of the captured tables that statement-based DML changed besides the ``written``
        ones, transitively: the rows the triggers it fired (``events`` on each written table) wrote,
        and the child rows of cascading foreign keys of the tables it (or a trigger) updated or
        deleted from (an ``UPDATE`` only when it assigns a referenced column: ``columns``, the
        lower-case names it assigns, ``None``: unknown). None of them has row events.

        Triggers are read as :class:`~.source.triggers.TriggerVisibility` allows: with their
        bodies, the tables they write are repaired; when a fired trigger's body is hidden
        (MariaDB without ``TRIGGER``), or the user sees no triggers at all of a table of a
        captured database (``SELECT`` only), a trigger may have written anything, so every
        captured table is repaired (whole), and the gap says which ``GRANT`` narrows it. Tables of
        other databases the user cannot see the triggers of are not assumed to have any (a tool
        such as pt-table-checksum writes its own database statement-based all day).
        Child rows of a statement's cascades are repaired whole (the parent keys are unknown)."""
        position = f"{item.file}:{item.pos}"
        todo: list[tuple[tuple[str, str], tuple[str, ...], frozenset[str] | None]] = [
            (k, tuple(events), columns) for k in written
        ]
        seen: set[tuple[tuple[str, str], str, frozenset[str] | None]] = set()
        while todo:
            (db, t), evs, cols = todo.pop(0)
            evs = tuple(e for e in evs if ((db, t), e, cols) not in seen)
            if not evs:
                continue
            seen.update(((db, t), e, cols) for e in evs)
            self._statement_cascade_gaps(item, (db, t), evs, cols)
            if self.trigger_visibility is None:
                self.trigger_visibility = read_trigger_visibility(self.connection(), self.info.is_mariadb)
            vis = self.trigger_visibility
            grant = f"GRANT TRIGGER ON `{db}`.* TO {vis.user}"
            if vis.of(db, t) == HIDDEN:
                if not self._captured_database(db):
                    continue
                self._every_captured_table_gap(
                    position,
                    f"statement-based DML (thread {item.thread}) on {db}.{t} may have fired triggers, "
                    f"whose writes have no row images; the capture user cannot see the triggers of "
                    f"{db}.{t} (information_schema.TRIGGERS lists them only with the TRIGGER "
                    f"privilege; MariaDB also with INSERT, UPDATE or DELETE), so every captured "
                    f"table is re-read ({grant} narrows it to the tables its triggers write)",
                )
                return
            if (db, t) not in self.triggers:
                self.triggers[(db, t)] = read_triggers(self.connection(), db, t)
            for trg in self.triggers[(db, t)]:
                if trg.event.upper() not in evs:
                    continue
                ran = (
                    f"trigger {trg.schema}.{trg.name} ({trg.event} on {db}.{t}) ran for "
                    f"statement-based DML (thread {item.thread}), whose trigger writes have no row images"
                )
                if trg.body is None:
                    self._every_captured_table_gap(
                        position,
                        f"{ran}; its body is hidden (the capture user lacks the TRIGGER privilege), "
                        f"so every captured table is re-read ({grant} narrows it to the tables it writes)",
                    )
                    return
                for target, target_events in trigger_writes(trg.body, trg.schema):
                    todo.append((target, target_events, None))
                    if self._captured(*target):
                        self.dml_gaps.setdefault(
                            f"{target[0]}.{target[1]}",
                            BinlogGap(
                                kind="trigger",
                                table=f"{target[0]}.{target[1]}",
                                position=position,
                                detail=f"{ran}; it writes this table",
                            ),
                        )

    def _captured_database(self, db: str) -> bool:
        """Whether a captured table of the current catalog is in database ``db``."""
        return any(d == db and self._captured(d, t) for d, t in self.catalog_tables())

    def _every_captured_table_gap(self, position: str, detail: str) -> None:
        """A ``trigger`` gap (whole-table repair) of every captured table that has none yet."""
        for db, t in self.catalog_tables():
            if self._captured(db, t):
                self.dml_gaps.setdefault(
                    f"{db}.{t}",
                    BinlogGap(kind="trigger", table=f"{db}.{t}", position=position, detail=detail),
                )

    def _statement_cascade_gaps(
        self,
        item: StatementDml,
        parent: tuple[str, str],
        events: Sequence[str],
        columns: frozenset[str] | None,
    ) -> None:
        """``fk_cascade`` gaps (whole child table) of the captured children of ``parent`` whose
        foreign key acts on the ``UPDATE``/``DELETE`` among ``events`` of statement-based DML (the
        statement names no keys, so every child row may have changed); an ``UPDATE`` that
        assigns none of the referenced columns (``columns``) cascades nothing."""
        for fk in self.foreign_keys().get(parent, []):
            for event, op in (("UPDATE", "u"), ("DELETE", "d")):
                action = fk.acts_on(op) if event in events else None
                if action is None:
                    continue
                if op == "u" and columns is not None and not {c.lower() for c in fk.parent_columns} & columns:
                    continue  # the referenced key is not assigned: nothing cascades
                child = f"{fk.child[0]}.{fk.child[1]}"
                self.dml_gaps.setdefault(
                    child,
                    BinlogGap(
                        kind="fk_cascade",
                        table=child,
                        position=f"{item.file}:{item.pos}",
                        detail=(
                            f"statement-based DML (thread {item.thread}) on {parent[0]}.{parent[1]} may "
                            f"have changed referenced keys; foreign key {fk.name} "
                            f"({', '.join(fk.child_columns)}) ON {event} {action} changed {child} rows "
                            "that the binlog does not show (keys unknown: the whole table is re-read)"
                        ),
                    ),
                )
