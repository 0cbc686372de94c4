"""A lake of every kind of captured table, written through the sink (LakeWriter, local Spark), with
an independent model of each table's current rows: the fixture of the downstream read tests
(tests/test_read_api.py, test_sql_views.py, test_change_feed.py).

Tables of ``db`` (server ``srv``):

- ``keyed``: snapshot, updates, deletes, inserts, a primary-key change (d + c), a compaction in
  the middle, then more windows (state and tail both hold rows);
- ``keyless``: no key, duplicate rows; copies inserted, one copy deleted, one updated;
- ``truncated``: changes, a TRUNCATE (cut marker), inserts after it;
- ``resnap``: changes, a full re-snapshot that lacks some keys (cut marker at its position), a
  stream window committed after it holding events older than it, changes after;
- ``evolved``: a column added, and a column widened INT -> BIGINT (change log and tail rewritten,
  the compacted state still INT);
- ``composite``: a two-column key;
- ``snapped``: only a first snapshot (a state, no tail yet).

The model replays the events (keyed: latest wins per key, a cut empties the table; keyless: a
multiset), independently of ``sink/current.py``.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pytest

from dagster_mysql_cdc.engine.initial_snapshot import SNAPSHOT_APP_ID
from dagster_mysql_cdc.engine.stream import STREAM_APP_ID
from dagster_mysql_cdc.events import BinlogPosition, ChangeEventBuilder
from dagster_mysql_cdc.sink.compaction import CompactionPolicy, compact_table
from dagster_mysql_cdc.sink.lake import LakeWriter
from dagster_mysql_cdc.sink.storage import StorageSettings

SERVER = "srv"
DB = "db"

I32, I64, S = pa.int32(), pa.int64(), pa.string()


def schema(*cols: tuple[str, pa.DataType]) -> pa.Schema:
    return pa.schema([pa.field(n, t) for n, t in cols])


@dataclass
class Model:
    """A table's rows as the events say (keyed: key -> row dict; keyless: Counter of tuples)."""

    values: pa.Schema
    key: tuple[str, ...]
    rows: dict = field(default_factory=dict)
    copies: Counter = field(default_factory=Counter)

    def apply(self, op: str, before: tuple | None, after: tuple | None) -> None:
        names = self.values.names
        if op == "t":
            self.rows.clear()
            self.copies.clear()
            return
        if not self.key:
            if before is not None and op in ("u", "d"):
                self.copies[before] -= 1
                if self.copies[before] <= 0:
                    del self.copies[before]
            if after is not None:
                self.copies[after] += 1
            return
        idx = [names.index(k) for k in self.key]
        if op == "d":
            self.rows.pop(tuple(before[i] for i in idx), None)  # type: ignore[index]
        else:
            self.rows[tuple(after[i] for i in idx)] = dict(zip(names, after))  # type: ignore[arg-type]

    def live(self) -> list[tuple]:
        """The live rows as sorted tuples of the model's columns (keyless: one per copy)."""
        if self.key:
            return sorted(tuple(r.get(n) for n in self.values.names) for r in self.rows.values())
        return sorted(v for v, n in self.copies.items() for _ in range(n))


class DownstreamLake:
    """Writes windows of change events into a lake through the sink and keeps the models."""

    def __init__(self, spark: Any, storage: StorageSettings, **policy: Any):
        self.storage = storage
        self.writer = LakeWriter(
            spark,
            storage,
            SERVER,
            compaction=CompactionPolicy(**{"tail_fraction": 0.9, "max_tail_age_seconds": 0, **policy}),
        )
        self.models: dict[str, Model] = {}
        self.pos = 1000

    def next_position(self) -> BinlogPosition:
        self.pos += 1000
        return BinlogPosition("b.000002", self.pos)

    def window(
        self,
        table: str,
        events: list[tuple[str, tuple | None, tuple | None]],
        *,
        values: pa.Schema | None = None,
        key: tuple[str, ...] | None = None,
        snapshot: bool = False,
        at: BinlogPosition | None = None,
        model: bool = True,
    ):
        """Commit one batch of ``events`` for ``table`` (a full snapshot when ``snapshot``: the
        model is emptied first, as the cut does); returns the sink's write result."""
        m = self.models.get(table)
        if m is None:
            m = self.models[table] = Model(values or schema(), key or ())
        if values is not None:
            m.values = values
        at = at or self.next_position()
        b = ChangeEventBuilder(m.values, m.key, server_name=SERVER, database=DB, table=table)
        for i, (op, before, after) in enumerate(events):
            b.add(
                op,
                before,
                after,
                file=at.file,
                pos=at.pos if snapshot else at.pos + 10 * i,
                row=0,
                ts_ms=1,
                source_ts_ms=1,
                server_id=1,
                snapshot=("true" if 0 < i < len(events) - 1 else "first" if i == 0 else "last")
                if snapshot
                else "false",
            )
        if model:
            if snapshot:
                m.rows.clear()
                m.copies.clear()
            for op, before, after in events:
                m.apply(op, before, after)
        return self.writer.write_table_batch(
            DB,
            table,
            [b.to_record_batch()],
            value_schema=m.values,
            primary_key=m.key,
            app_id=SNAPSHOT_APP_ID if snapshot else STREAM_APP_ID,
            version=at.as_version(),
            position=at,
            snapshot_position=at if snapshot else None,
        )

    def compact(self, table: str) -> dict:
        return compact_table(
            self.writer, self.writer.paths(DB, table), list(self.models[table].key), force=True
        )


def build(lake: DownstreamLake) -> DownstreamLake:
    """Write the tables of the module docs."""
    kv = schema(("id", I32), ("v", S), ("n", I32))
    lake.window(
        "keyed", [("r", None, (i, f"v{i}", i)) for i in range(1, 41)], values=kv, key=("id",), snapshot=True
    )
    for k in range(3):
        lake.window(
            "keyed",
            [
                ("u", (k + 1, f"v{k + 1}", k + 1), (k + 1, f"w{k}", 100 + k)),
                ("d", (20 + k, f"v{20 + k}", 20 + k), None),
                ("c", None, (100 + k, "new", k)),
            ],
        )
    lake.compact("keyed")
    lake.window("keyed", [("d", (30, "v30", 30), None), ("c", None, (31_000, "v30", 30))])  # a key change
    lake.window("keyed", [("u", (1, "w0", 100), (1, "x", 7)), ("c", None, (20, "back", 1))])

    ab = schema(("a", S), ("b", I32))
    lake.window(
        "keyless",
        [("r", None, v) for v in [("x", 1), ("x", 1), ("y", 2), ("z", None)]],
        values=ab,
        snapshot=True,
    )
    lake.window("keyless", [("c", None, ("x", 1)), ("c", None, ("w", 5)), ("d", ("y", 2), None)])
    lake.window("keyless", [("u", ("x", 1), ("x", 9)), ("c", None, ("z", None))])

    lake.window(
        "truncated",
        [("r", None, (i, f"t{i}", i)) for i in range(1, 11)],
        values=kv,
        key=("id",),
        snapshot=True,
    )
    lake.window("truncated", [("u", (1, "t1", 1), (1, "t1b", 1))])
    lake.window("truncated", [("t", None, None), ("c", None, (50, "after", 5))])

    lake.window(
        "resnap", [("r", None, (i, f"r{i}", i)) for i in range(1, 11)], values=kv, key=("id",), snapshot=True
    )
    lake.window("resnap", [("u", (2, "r2", 2), (2, "r2b", 2))])
    behind = lake.next_position()  # a stream window that started before the re-snapshot ...
    snap_at = lake.next_position()
    lake.window(
        "resnap", [("r", None, (i, f"s{i}", i)) for i in range(3, 9)], snapshot=True, at=snap_at
    )  # ... keys 1, 2, 9, 10 gone
    # ... and commits after it: its events are older than the snapshot and change nothing
    lake.window(
        "resnap",
        [("u", (5, "r5", 5), (5, "stale", 5)), ("c", None, (77, "stale", 7))],
        at=behind,
        model=False,
    )
    lake.window("resnap", [("c", None, (11, "r11", 11))])

    kv2 = schema(("id", I32), ("v", S), ("n", I32), ("extra", I64))
    lake.window(
        "evolved", [("r", None, (i, f"e{i}", i)) for i in range(1, 6)], values=kv, key=("id",), snapshot=True
    )
    lake.window(
        "evolved", [("c", None, (6, "e6", 6, 60)), ("u", (1, "e1", 1, None), (1, "e1b", 1, 10))], values=kv2
    )
    kv3 = schema(("id", I32), ("v", S), ("n", I64), ("extra", I64))
    lake.window("evolved", [("u", (2, "e2", 2, None), (2, "big", 2**40, 20))], values=kv3)

    comp = schema(("a", I32), ("b", S), ("v", I32))
    lake.window(
        "composite",
        [("r", None, (i % 3, f"k{i}", i)) for i in range(9)],
        values=comp,
        key=("a", "b"),
        snapshot=True,
    )
    lake.window(
        "composite",
        [("u", (0, "k0", 0), (0, "k0", 100)), ("d", (1, "k1", 1), None), ("c", None, (0, "k1", 5))],
    )

    lake.window(
        "snapped", [("r", None, (i, f"p{i}", i)) for i in range(1, 6)], values=kv, key=("id",), snapshot=True
    )
    return lake


TABLES = ("keyed", "keyless", "truncated", "resnap", "evolved", "composite", "snapped")


@pytest.fixture(scope="session")
def downstream_lake(spark, tmp_path_factory) -> DownstreamLake:
    """The lake of the module docs (local filesystem), built once per session. Tests that write
    more windows use tables of their own."""
    storage = StorageSettings(base_uri=str(tmp_path_factory.mktemp("downstream") / "lake"))
    return build(DownstreamLake(spark, storage))
