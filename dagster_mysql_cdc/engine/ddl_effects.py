"""What a DDL statement does to a captured table's *rows*, beyond its schema: the policy of
docs/ddl.md ("What each DDL does to the lake").

The schema history follows every DDL (:mod:`..source.ddl`); the change log and state follow the
columns (added columns, dropped ones null from then on, types widened: :mod:`..sink.evolution`).
Some statements also change rows without writing a single row event, and a CDC lake that only
replays row events would silently diverge (Debezium's sinks do). Each such statement gets one of
three effects here:

``cut``
    The table's rows end at the statement: ``DROP TABLE``, ``DROP DATABASE``, a ``RENAME`` away,
    ``CREATE OR REPLACE TABLE``. The change log gets a ``t`` event (as for ``TRUNCATE``) with the
    statement as ``source.query`` and a ``dagster_mysql_cdc.reason`` header; the state marks every
    older row deleted.
``resnapshot``
    The rows the table holds after the statement are not in the binlog: a table renamed *to* this
    name (its rows came with it), a new or changed primary key (rows keyed another way; a new key
    column filled by the server), or a keyless table whose column set changed (its rows are
    identified by every column). The table is snapshotted again at the end of the window (a
    blocking snapshot, Debezium's ``execute-snapshot`` with ``type=blocking``), which replaces its
    state.
``repair``
    The values of existing rows changed without row events: the server rewrote them (a column
    added with values for existing rows: ``NOT NULL``, a non-NULL ``DEFAULT``,
    ``AUTO_INCREMENT``, generated; a type change that does not keep every value: narrowing,
    rounding, another family, another character set, ``NOT NULL`` on a nullable column), moved
    them (``RENAME COLUMN``, ``CHANGE old new``: the values are under the new name), dropped them
    (``DROP COLUMN``: the state would keep them on every row not changed since) or they read
    differently (a ``TIMESTAMP``'s fractional-second digits). The keys are unchanged, so the rows
    are re-read by a targeted incremental snapshot (:mod:`.gaps`, DBLog) when the capture has a
    signal table, else by a blocking snapshot: after it the current state equals the source.

Pure functions of the schemas before and after the statement (no I/O).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from ..source.ddl import TableChange
from ..source.schema import ColumnSchema, TableSchema

#: Change-log header of the ``t`` event a ``cut`` writes: why the table's rows ended.
REASON_HEADER = "dagster_mysql_cdc.reason"

Kind = Literal["cut", "resnapshot", "repair"]

_INT_WIDTH = {"tinyint": 1, "smallint": 2, "mediumint": 3, "int": 4, "bigint": 8}
_TEXT_ORDER = {"tinytext": 1, "text": 2, "mediumtext": 3, "longtext": 4}
_BLOB_ORDER = {"tinyblob": 1, "blob": 2, "mediumblob": 3, "longblob": 4}
_TEXTUAL = {"char", "varchar", *_TEXT_ORDER}
_BINARY = {"varbinary", *_BLOB_ORDER}


@dataclass(frozen=True)
class DdlEffect:
    """What one DDL statement does to one table's rows.

    Attributes:
        kind: ``cut``, ``resnapshot`` or ``repair`` (see the module docs).
        table: ``(database, table)`` the effect applies to.
        reason: for people (logs, the change log's header, the binlog asset's metadata).
    """

    kind: Kind
    table: tuple[str, str]
    reason: str


def _keys(schema: TableSchema) -> tuple[str, ...]:
    return tuple(k.lower() for k in schema.primary_key)


def value_preserving(old: ColumnSchema, new: ColumnSchema) -> bool:
    """Whether changing a column from ``old`` to ``new`` keeps every stored value as it was (the
    server converts no value): a wider integer of the same signedness (or unsigned into a wider
    signed), a decimal with at least as many integer digits and decimals, FLOAT to DOUBLE, a
    longer string or text type in the same character set, a longer VARBINARY/BLOB, more
    fractional-second digits, ENUM/SET members only added, the same type with other
    attributes (comment, default, position), NULL allowed where it was not.

    MySQL reference manual, "ALTER TABLE" ("Changing the data type of a column ... may result in
    data loss ... values are converted"), "Data type storage requirements"."""
    if old.nullable and not new.nullable:
        return False  # NULLs become the type's implicit default
    a, b = old.data_type, new.data_type
    if a == b and old.column_type == new.column_type and old.charset == new.charset:
        return True
    if a in _INT_WIDTH and b in _INT_WIDTH:
        if old.unsigned == new.unsigned:
            return _INT_WIDTH[b] >= _INT_WIDTH[a]
        return old.unsigned and not new.unsigned and _INT_WIDTH[b] > _INT_WIDTH[a]
    if a == b == "decimal":
        op, os_ = old.precision or 10, old.scale or 0
        np_, ns = new.precision or 10, new.scale or 0
        return (np_ - ns) >= (op - os_) and ns >= os_ and (new.unsigned or not old.unsigned)
    if (a, b) == ("float", "double") or (a == b and a in ("float", "double")):
        return not (new.unsigned and not old.unsigned) and new.scale is None and old.scale is None
    if a in _TEXTUAL and b in _TEXTUAL:
        if b == "char" and a != "char":
            return False  # CHAR drops trailing spaces
        return _charset_keeps(old.charset, new.charset) and _text_capacity(new) >= _text_capacity(old)
    if a in _BINARY and b in _BINARY:
        return _binary_capacity(new) >= _binary_capacity(old)
    if a == b and a in ("datetime", "timestamp", "time"):
        return (new.precision or 0) >= (old.precision or 0)
    if a == b and a in ("enum", "set"):
        return set(old.enum_values) <= set(new.enum_values) and (
            a == "enum" or list(new.enum_values[: len(old.enum_values)]) == list(old.enum_values)
        )
    if a == b == "bit":
        return ((new.length or 1) + 7) // 8 == ((old.length or 1) + 7) // 8 and (new.length or 1) >= (
            old.length or 1
        )
    if {a, b} <= {"json", "longtext"}:
        return True  # MariaDB's JSON is LONGTEXT
    return a == b and a in ("year", "date", "json", "geometry") or a == b and a.endswith("point")


#: Character sets that hold every character of the ones listed (conversion loses nothing).
_SUPERSETS = {
    "utf8mb4": {"utf8mb3", "utf8", "latin1", "ascii", "ucs2", "utf16", "utf32"},
    "utf8mb3": {"utf8", "latin1", "ascii", "ucs2"},
    "utf8": {"utf8mb3", "latin1", "ascii", "ucs2"},
}


def _charset_keeps(old: str | None, new: str | None) -> bool:
    """Whether converting text from charset ``old`` to ``new`` keeps every character (``None``:
    not derivable from the DDL: the table's default, taken as unchanged)."""
    if old is None or new is None or old == new:
        return True
    return old in _SUPERSETS.get(new, set())


def _text_capacity(c: ColumnSchema) -> int:
    if c.data_type in _TEXT_ORDER:
        return 1_000_000_000 * _TEXT_ORDER[c.data_type]
    if c.data_type == "char":
        return -1 if c.length is None else c.length  # CHAR(n) -> VARCHAR(n): trailing spaces kept
    return c.length or 0


def _binary_capacity(c: ColumnSchema) -> int:
    if c.data_type in _BLOB_ORDER:
        return 1_000_000_000 * _BLOB_ORDER[c.data_type]
    return c.length or 0


def rendering_kept(old: ColumnSchema, new: ColumnSchema) -> bool:
    """Whether the lake's value of a column the server kept as it was stays the same after a
    change from ``old`` to ``new`` (:func:`value_preserving`). Not for a ``TIMESTAMP`` whose
    fractional-second digits change: its ``io.debezium.time.ZonedTimestamp`` text carries the
    column's digits (``2024-01-02T03:04:05Z`` in ``TIMESTAMP``, ``...05.000000Z`` in
    ``TIMESTAMP(6)``, Debezium's ``ZonedTimestamp.toIsoString`` with the column's fsp). The
    other temporal types keep their unit or change it with the lake type (``DATETIME(3)`` ->
    ``DATETIME(6)``: milliseconds -> microseconds, converted by the lake's rewrite,
    :mod:`..sink.evolution`)."""
    if old.data_type == new.data_type == "timestamp":
        return (old.precision or 0) == (new.precision or 0)
    return True


def _changed_values(old: TableSchema, new: TableSchema, change: TableChange) -> list[str]:
    """Columns whose values in the lake the statement changed without row events: added with
    values, renamed (the values move to the new name), dropped (the lake would keep them), or
    converted (see :func:`value_preserving`, :func:`rendering_kept`)."""
    before = {c.name.lower(): c for c in old.columns}
    after = {c.name.lower() for c in new.columns}
    out = [f"{c} (added with values)" for c in change.filled_columns]
    renamed = {o.lower(): n for o, n in change.renamed_columns}
    out += [f"{n} (renamed from {o})" for o, n in change.renamed_columns]
    dropped = {d.lower() for d in change.dropped_columns}
    # a column gone from the table that the statement does not name as renamed: dropped
    dropped |= {k for k in before if k not in after and k not in renamed}
    out += [f"{before[d].name} (dropped)" for d in sorted(dropped) if d in before]
    for c in new.columns:
        low = c.name.lower()
        o = before.get(low) if low not in dropped else None
        if o is None:  # renamed: the column it was
            o = next((before[k] for k, n in renamed.items() if n.lower() == low and k in before), None)
        if o is not None and not (value_preserving(o, c) and rendering_kept(o, c)):
            out.append(f"{c.name} ({o.column_type} -> {c.column_type})")
    return out


def ddl_effects(
    change: TableChange, before: dict[tuple[str, str], TableSchema], statement_kind: str = ""
) -> list[DdlEffect]:
    """The effects of one ``tableChanges`` entry on the rows of the tables it names.

    Args:
        change: the entry (:class:`~..source.ddl.TableChange`).
        before: the catalog before the statement (``{(db, table): schema}``).
        statement_kind: unused hint for messages.

    Returns:
        zero or more effects (a rename yields a ``cut`` of the old name and a ``resnapshot`` of
        the new one).
    """
    name = (change.database, change.table)
    old = before.get(name)
    if change.type == "DROP":
        return [DdlEffect("cut", name, "table dropped")]
    if change.type == "CREATE":
        if old is not None:  # CREATE OR REPLACE (a plain CREATE of an existing name fails on the server)
            return [DdlEffect("cut", name, "table replaced (CREATE OR REPLACE)")]
        return []
    assert change.schema is not None
    new = change.schema
    if change.previous_name is not None and change.previous_name != name:
        prev = change.previous_name
        return [
            DdlEffect("cut", prev, f"table renamed to {change.database}.{change.table}"),
            DdlEffect("resnapshot", name, f"table renamed from {prev[0]}.{prev[1]} (its rows came with it)"),
        ]
    if old is None:
        return []
    if _keys(old) != _keys(new):
        old_k = ", ".join(old.primary_key) or "none"
        new_k = ", ".join(new.primary_key) or "none"
        return [DdlEffect("resnapshot", name, f"primary key changed from ({old_k}) to ({new_k})")]
    changed = _changed_values(old, new, change)
    if not new.primary_key:
        old_cols = [c.name.lower() for c in old.columns]
        new_cols = [c.name.lower() for c in new.columns]
        appended_nullable = new_cols[: len(old_cols)] == old_cols and not changed
        if new_cols != old_cols and not appended_nullable:
            return [
                DdlEffect(
                    "resnapshot",
                    name,
                    "the column set of a table without a primary key changed (its rows are identified "
                    "by every column)",
                )
            ]
    if changed:
        return [
            DdlEffect(
                "repair", name, "values of existing rows changed without row events: " + ", ".join(changed)
            )
        ]
    return []
