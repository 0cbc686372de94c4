"""Binlog row events -> Debezium change events of one table: column checks, key changes, partial
row images."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from ..errors import (
    CdcError,
)
from ..events import now_ms
from ..source.binlog import RowsBatch
from .gaps import (
    MAX_FILTER_KEYS,
    BinlogGap,
)
from .incremental import encode_key
from .table_events import TableEvents, remap_unknown_columns
from .transactions import transaction_orders


class SchemaMismatchError(CdcError):
    """A binlog row event does not match the schema history at its position."""


#: python-mysql-replication's ``none_sources`` value of a column absent from a row image.
NOT_IN_IMAGE = "cols bitmap"


class PartialImages:
    """Row events logged with partial row images (``binlog_row_image=MINIMAL`` or ``NOBLOB``,
    set on the server or in one session): an update's before image holds only the key columns and
    its after image only the changed ones (NOBLOB: blob columns left out). Decoding them as rows
    would turn missing columns into NULLs and an absent key into a key change (rows deleted from
    the lake, a row with a NULL key). Debezium requires ``binlog_row_image=FULL`` and does not
    check it while streaming.

    Inserts and updates with a partial image are not emitted; their keys (before and after
    images) are recorded and repaired: a targeted incremental snapshot re-reads them (filter
    ``key IN (...)``, the keys the source no longer has are deleted). Deletes are emitted when
    their image has the key (the tombstone is exact; ``before`` holds only the logged columns).
    An image without the key columns makes the whole table's repair.
    """

    def __init__(self) -> None:
        self.tables: dict[str, dict[str, Any]] = {}

    def add(self, te: TableEvents, ev: RowsBatch, touched: set | None) -> bool:
        """Record rows event ``ev`` of ``te``'s table. Returns ``True`` when its events must not be
        emitted (an insert or update), ``False`` for a delete whose images carry the key.

        Raises:
            SchemaMismatchError: the event's columns differ from the schema history.
        """
        pk = list(te.conv.table.primary_key)
        remap = check_columns(te, ev)
        keys: list[tuple | None] = []
        images = []
        for r in ev.rows:
            if ev.op == "u":
                images.append((r["before_values"], r.get("before_none_sources") or {}))
                images.append((r["after_values"], r.get("after_none_sources") or {}))
            else:
                images.append((r["values"], r.get("none_sources") or {}))
        for values, ns in images:
            if remap:
                values = remap_unknown_columns(values, te.names)
                ns = remap_unknown_columns(ns, te.names)
            if not pk or any(c not in values or ns.get(c) == NOT_IN_IMAGE for c in pk):
                keys.append(None)
                continue
            keys.append(tuple(values[c] for c in pk))
            if touched is not None:  # an open chunk window drops these keys (the binlog changed them)
                touched.add(te.conv.primary_key_function()(values, ns))
        if ev.op == "d" and all(k is not None for k in keys):
            return False
        if ev.op == "u":  # an after image without the key columns: the key did not change
            keys = [k if k is not None or i % 2 == 0 else keys[i - 1] for i, k in enumerate(keys)]
        name = te.schema.qualified_name
        entry = self.tables.setdefault(
            name,
            {
                "pk": pk,
                "position": f"{ev.file}:{ev.pos}",
                "keys": {},
                "rows": 0,
                "images": set(),
                "whole": False,
            },
        )
        entry["rows"] += len(ev.rows)
        entry["images"].update(ev.partial)
        for k in keys:
            if k is None:
                entry["whole"] = True
            else:
                entry["keys"][k] = None
        return True

    def merge(self, tables: dict[str, dict[str, Any]]) -> None:
        """Add a later stretch's :attr:`tables` (a segment of a parallel window, in binlog order):
        the first position of each table wins, its keys, rows and image kinds add up."""
        for name, e in tables.items():
            cur = self.tables.get(name)
            if cur is None:
                self.tables[name] = {**e, "keys": dict(e["keys"]), "images": set(e["images"])}
            else:
                cur["keys"].update(e["keys"])
                cur["rows"] += e["rows"]
                cur["images"] |= e["images"]
                cur["whole"] = cur["whole"] or e["whole"]

    def gaps(self) -> list[BinlogGap]:
        """One gap per table, repairing its recorded keys (or the whole table)."""
        from ..source.foreign_keys import key_in_condition

        out = []
        for name, e in self.tables.items():
            keys = list(e["keys"])
            flt = None
            if not e["whole"] and keys and len(keys) <= MAX_FILTER_KEYS:
                flt = key_in_condition(e["pk"], keys)
            gap = BinlogGap(
                kind="partial_row_image",
                table=name,
                position=e["position"],
                detail=(
                    f"{e['rows']} row change(s) logged with partial row images ({', '.join(sorted(e['images']))}): "
                    "binlog_row_image is MINIMAL or NOBLOB, so their other column values are not in the "
                    "binlog; inserts and updates were not applied from them"
                ),
                filter=flt,
            )
            if flt is not None:
                gap.candidate_keys = [encode_key(k) for k in keys]
            out.append(gap)
        return out


def add_rows(
    te: TableEvents, ev: RowsBatch, tx: dict | None, touched: set | None = None, include_query: bool = True
) -> None:
    """Add one rows event's change events to the table's builder; record touched keys of an open
    chunk window. ``include_query``: fill ``source.query`` with the statement the server annotated
    the rows event with (Debezium ``include.query``).

    The row images stay raw and are converted column-wise when the builder is flushed
    (``ChangeEventBuilder.add_raw``); only the primary-key values of updates (to detect a key
    change) and, inside a chunk window, of every image are converted here, per row. A key change
    becomes a delete of the old key + a create of the new key with ``__debezium.newkey`` /
    ``__debezium.oldkey`` headers, as Debezium emits it.
    """
    names = te.names
    remap = check_columns(te, ev)
    rows = ev.rows
    if not rows:
        return
    conv = te.conv
    pk = te.conv.table.primary_key
    common: dict[str, Any] = dict(
        file=ev.file,
        pos=ev.pos,
        ts_ms=now_ms(),
        source_ts_ms=ev.ts_ms,
        server_id=ev.server_id,
        gtid=ev.gtid,
        thread=ev.thread,
        query=ev.query if include_query else None,
    )

    keyf = conv.primary_key_function() if pk and (ev.op == "u" or touched is not None) else None
    if touched is not None and not pk:
        touched.add(())
    if ev.op == "u":
        before = [r["before_values"] for r in rows]
        after = [r["after_values"] for r in rows]
        if remap:
            before, after = (
                [remap_unknown_columns(v, names) for v in before],
                [remap_unknown_columns(v, names) for v in after],
            )
        bns = [r.get("before_none_sources") for r in rows]
        ans = [r.get("after_none_sources") for r in rows]
        ops: str | list[str] = "u"
        rownos: list[int] | None = None
        headers: dict[int, dict[str, str]] | None = None
        if keyf is not None and touched is None and conv.primary_keys_unchanged(before, after):
            keyf = None  # no key changed (equal raw values convert to equal key values)
        if keyf is not None:
            bk = [keyf(v, ns) for v, ns in zip(before, bns)]
            ak = [keyf(v, ns) for v, ns in zip(after, ans)]
            if touched is not None:
                touched.update(bk)
                touched.update(ak)
            if bk != ak:
                ops, rownos, headers, before, after, bns, ans = split_key_changes(
                    pk, before, after, bns, ans, bk, ak
                )
        te.builder.add_raw(
            conv,
            ops,
            before,
            after,
            before_none_sources=bns,
            after_none_sources=ans,
            rows=rownos,
            tx=transaction_orders(tx, te, ev, len(before)),
            headers=headers,
            **common,
        )
        return
    values = [r["values"] for r in rows]
    if remap:
        values = [remap_unknown_columns(v, names) for v in values]
    nss = [r.get("none_sources") for r in rows]
    if keyf is not None and touched is not None:
        touched.update(keyf(v, ns) for v, ns in zip(values, nss))
    orders = transaction_orders(tx, te, ev, len(values))
    if ev.op == "c":
        te.builder.add_raw(conv, "c", None, values, after_none_sources=nss, tx=orders, **common)
    else:
        te.builder.add_raw(conv, "d", values, None, before_none_sources=nss, tx=orders, **common)


def check_columns(te: TableEvents, ev: RowsBatch) -> bool:
    """Check a rows event's columns against the table's schema at its position.

    Returns:
        Whether the row dicts are keyed ``UNKNOWN_COL<i>`` (no ``binlog_row_metadata``: remap them).
    Raises:
        SchemaMismatchError: the columns (names, or their number) differ from the schema history.
    """
    names = te.names
    if ev.column_names and ev.column_names[0].startswith("UNKNOWN_COL"):
        if len(ev.column_names) != len(names):
            raise SchemaMismatchError(
                f"Row event for {te.schema.qualified_name} at {ev.file}:{ev.pos} has "
                f"{len(ev.column_names)} columns, the schema history has {len(names)}: the history "
                "is out of sync; re-snapshot the table."
            )
        return True
    if ev.column_names != names:
        raise SchemaMismatchError(
            f"Row event for {te.schema.qualified_name} at {ev.file}:{ev.pos} has columns "
            f"{ev.column_names}, but the schema history at that position has {names}. The history "
            "is out of sync with the server (a DDL was missed or skipped); re-snapshot the table."
        )
    return False


def split_key_changes(
    pk: Sequence[str], before: list, after: list, bns: list, ans: list, bk: list, ak: list
) -> tuple[list[str], list[int], dict[int, dict[str, str]], list, list, list, list]:
    """Update rows whose key changed (``bk[i] != ak[i]``) as Debezium emits them: a delete of the
    old key + a create of the new key, linked by ``__debezium.newkey`` / ``__debezium.oldkey``
    headers; other rows stay updates.

    Returns:
        (ops, source row number of each event, headers by event index, before images, after
        images, before none-sources, after none-sources), one entry per event.
    """
    ops: list[str] = []
    rownos: list[int] = []
    headers: dict[int, dict[str, str]] = {}
    b2: list = []
    a2: list = []
    bns2: list = []
    ans2: list = []

    def emit(op: str, bv: Any, av: Any, bn: Any, an: Any, i: int) -> None:
        ops.append(op)
        b2.append(bv)
        a2.append(av)
        bns2.append(bn)
        ans2.append(an)
        rownos.append(i)

    for i, (bv, av, bn, an, k0, k1) in enumerate(zip(before, after, bns, ans, bk, ak)):
        if k0 == k1:
            emit("u", bv, av, bn, an, i)
            continue
        headers[len(ops)] = {"__debezium.newkey": key_json(pk, k1)}
        emit("d", bv, None, bn, None, i)
        headers[len(ops)] = {"__debezium.oldkey": key_json(pk, k0)}
        emit("c", None, av, None, an, i)
    return ops, rownos, headers, b2, a2, bns2, ans2


def key_json(columns: Sequence[str], values: tuple) -> str:
    return json.dumps(dict(zip(columns, values)), default=str, separators=(",", ":"))
