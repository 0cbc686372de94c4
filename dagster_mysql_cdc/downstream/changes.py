"""The change feed of a captured table: its change events after a consumer's position, each
delivered once (Delta's change data feed, Paimon's and Hudi's incremental reads, for this lake).

A table's ``changelog`` is an append-only Delta table of Debezium envelopes: every window that
changed the table appends one commit (its *batch*, identified by a Delta ``txn``). A consumer's
position (:class:`ChangePosition`) is therefore a Delta version of the change log, as Delta's
change data feed counts (``startingVersion``), plus:

- ``table_id``: the change log's Delta table id (a log created anew is another feed);
- ``offset``: the events of the next commit already consumed, when a row budget split it (a
  commit's events are delivered sorted by their ordering key, a fixed order);
- ``pending``: commits at or below ``version`` still to deliver: a position taken together with a
  current-state read (:meth:`ChangeBatch.read_current`) leaves out the batches whose state the
  read did not include yet (a batch commits its change log first, its ``state_tail`` next);
- ``floor``: the ordering key of the newest cut the consumer rebuilt after; events older than it
  (a window committed after a re-snapshot it overlapped) do not change the current state and
  are not delivered.

What a read returns (:func:`read_changes`) is either events, or ``rebuild``: the consumer
cannot get to the current state by applying events and must start again from it
(:meth:`ChangeBatch.read_current`), when

- it has no position yet (its first run);
- the range holds a **cut**: a full (re-)snapshot of the table, or a ``TRUNCATE`` / a dropped or
  replaced table (``op=t``): rows vanish without per-row events;
- its position is **no longer readable**: the change log's commits after it were removed by the
  log retention, or their data files by ``VACUUM`` (``vacuum_retention_hours``, 7 days: read at
  least that often), or the change log was created anew, or events were removed from it.

It is never silently short: a commit that cannot be read whole is a rebuild. Commits that add no
events are skipped: ``OPTIMIZE`` of small files (``dataChange=false``), the rewrite of the change
log into a widened column type (``dagster_mysql_cdc.rewrite``: the same events, converted),
schema and property changes. Older data files are read in the change log's current schema
(columns added since are null, widened types converted).
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from ..errors import ConfigurationError
from .tables import CapturedTable, LakeLike, TableLike, captured_table

Ordering = tuple[int, str, int, int]

#: Commit info key of a rewrite into widened column types (same events, :func:`..sink.delta.rewrite_table`).
REWRITE = "dagster_mysql_cdc.rewrite"
#: The ``txn`` app id prefix of full snapshots (a cut: the consumer rebuilds).
SNAPSHOT_APP = "dagster-mysql-cdc/snapshot"
_EPOCH = re.compile(r"@epoch(\d+)$")
_POSITION = re.compile(r"^(\S+):(\d+)(?:\s.*?)?(?:\sepoch=(\d+))?$")
#: How far back (change-log commits) a rebuild's position looks for batches its state lacks.
PENDING_LOOKBACK = 64


@dataclass(frozen=True)
class ChangePosition:
    """A consumer's position in a table's change feed (see the module docs). Serialized with
    :meth:`to_json` into the asset's materialization metadata; :meth:`from_json` reads it back."""

    table_id: str
    version: int
    offset: int = 0
    pending: tuple[int, ...] = ()
    floor: Ordering | None = None

    def to_json(self) -> str:
        d: dict[str, Any] = {"table_id": self.table_id, "version": self.version}
        if self.offset:
            d["offset"] = self.offset
        if self.pending:
            d["pending"] = list(self.pending)
        if self.floor is not None:
            d["floor"] = list(self.floor)
        return json.dumps(d, separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str | dict) -> ChangePosition:
        """Raises:
        ConfigurationError: not a position (the message shows it)."""
        try:
            d = json.loads(text) if isinstance(text, str) else dict(text)
            floor = d.get("floor")
            return cls(
                table_id=str(d["table_id"]),
                version=int(d["version"]),
                offset=int(d.get("offset", 0)),
                pending=tuple(int(v) for v in d.get("pending", ())),
                floor=None if floor is None else (int(floor[0]), str(floor[1]), int(floor[2]), int(floor[3])),
            )
        except (KeyError, TypeError, ValueError, IndexError) as e:
            raise ConfigurationError(f"{text!r} is not a change feed position ({e})") from None

    def __str__(self) -> str:
        extra = f"+{self.offset}" if self.offset else ""
        return f"v{self.version}{extra}" + (f" (pending {list(self.pending)})" if self.pending else "")


@dataclass
class _Commit:
    version: int
    timestamp: int
    files: list[tuple[str, int]]  # (path, rows) of the events it added
    app: str | None
    batch_version: int | None
    kind: str  # "events", "skip", "cut", "broken"
    why: str = ""
    cut_at: Ordering | None = None

    @property
    def rows(self) -> int:
        return sum(n for _, n in self.files)

    @property
    def epoch(self) -> int:
        m = _EPOCH.search(self.app or "")
        return int(m.group(1)) if m else 0


@dataclass
class ChangeBatch:
    """What one :func:`read_changes` call returned.

    Attributes:
        table: the captured table.
        start: the position read after (``None``: none was given).
        end: the position to record once the events are processed (after a rebuild: the one
            :meth:`read_current` sets).
        events: the events (``None`` when ``rebuild``): Debezium envelopes (``format="envelope"``:
            ``key, before, after, source, op, ts_ms, transaction, headers``) or flattened rows
            (``format="flat"``: the table's columns, then ``__op``, ``__deleted`` and the ordering
            key ``__epoch, __binlog_file, __binlog_pos, __binlog_row`` as in the state table; a
            keyless table's ``__count`` is the copies' change, ``+1``/``-1``), each with Delta's
            change-data-feed columns ``_commit_version`` and ``_commit_timestamp`` (epoch ms);
            in commit order, each commit's events by ordering key.
        rebuild: why the consumer must start again from the current state (``None``: apply the
            events).
        commits: the change-log versions read.
        rows_read: change events read from the lake.
        more: commits after ``end`` were left for the next read (the row or commit budget).
    """

    table: CapturedTable
    start: ChangePosition | None
    end: ChangePosition
    events: pa.Table | None
    rebuild: str | None = None
    commits: list[int] = field(default_factory=list)
    rows_read: int = 0
    more: bool = False
    _cut_at: Ordering | None = None
    _rebuilt: bool = False

    @property
    def rebuilt(self) -> bool:
        """:meth:`read_current` was called: :attr:`end` is the position matching the state it
        returned (what a consumer told to ``rebuild`` must record)."""
        return self._rebuilt

    def read_current(self, **kwargs: Any) -> pa.Table:
        """The table's current state (:func:`.current.read_current`'s arguments and layout) and,
        in :attr:`end`, the position that matches it: applying the events after :attr:`end` to
        this state gives later states, each event once (see the module docs, ``pending``)."""
        from .current import open_tables, resolved_state, shape

        state_dt, tail_dt = open_tables(self.table)  # before the change log (see current_position)
        out = resolved_state(
            self.table, columns=kwargs.get("columns"), filter=kwargs.get("filter"), opened=(state_dt, tail_dt)
        )
        floor = _max_ordering(
            self._cut_at, self.start.floor if self.start else None, _tail_cut(self.table, tail_dt)
        )
        self.end = current_position(self.table, state_dt, tail_dt, floor=floor)
        self._rebuilt = True
        return shape(
            out,
            tombstones=kwargs.get("tombstones", False),
            metadata=kwargs.get("metadata", True),
            columns=kwargs.get("columns"),
        )


def _max_ordering(*ords: Ordering | None) -> Ordering | None:
    have = [o for o in ords if o is not None]
    return max(have) if have else None


def _tail_cut(table: CapturedTable, tail_dt: Any) -> Ordering | None:
    """The newest cut marker in the tail (a small read of its metadata columns)."""
    from ..sink.current import newest_cut
    from ..sink.data_files import read_files
    from ..sink.state_rows import ORDER_COLS

    if tail_dt is None:
        return None
    schema = pa.schema(tail_dt.schema().to_arrow())
    if "__cut" not in schema.names:
        return None
    files = pa.table(tail_dt.get_add_actions(flatten=True)).column("path").to_pylist()
    if not files:
        return None
    cols = pa.schema([schema.field(c) for c in (*ORDER_COLS, "__op", "__cut") if c in schema.names])
    cut = newest_cut(read_files(table.storage, table.paths.tail, files, cols))
    return None if cut is None else cut[0]


# -- the change log's commits -----------------------------------------------------------------


def _log_path(table: CapturedTable, version: int) -> str:
    return table.storage.fs_path(f"{table.paths.changelog}/_delta_log/{version:020d}.json")


def _read_commit(table: CapturedTable, version: int) -> _Commit | None:
    """Commit ``version`` of the change log classified (``None``: its log entry is gone)."""
    fs = table.storage.pyarrow_filesystem()
    try:
        with fs.open_input_stream(_log_path(table, version)) as fh:
            text = fh.read().decode()
    except (FileNotFoundError, OSError):
        return None
    info: dict = {}
    adds: list[tuple[str, int]] = []
    data_removes = 0
    app, bver = None, None
    for line in text.splitlines():
        if not line.strip():
            continue
        a = json.loads(line)
        if "commitInfo" in a:
            info = a["commitInfo"]
        elif "add" in a and a["add"].get("dataChange", True):
            from urllib.parse import unquote

            stats = a["add"].get("stats")
            rows = json.loads(stats).get("numRecords", -1) if stats else -1
            adds.append((unquote(a["add"]["path"]), int(rows)))
        elif "remove" in a and a["remove"].get("dataChange", True):
            data_removes += 1
        elif "txn" in a:
            app, bver = a["txn"].get("appId"), a["txn"].get("version")
    ts = int(info.get("timestamp") or 0)
    op = str(info.get("operation") or "")
    c = _Commit(version, ts, adds, app, bver, "events")
    if REWRITE in info or op == "OPTIMIZE" or (not adds and not data_removes):
        c.kind, c.files = "skip", []
        return c
    mode = str((info.get("operationParameters") or {}).get("mode") or "")
    if data_removes or mode.lower() == "overwrite":
        c.kind, c.why = (
            "broken",
            f"commit {version} ({op or 'unknown operation'}) removed events from the change log",
        )
        return c
    if app and app.split("@epoch")[0] == SNAPSHOT_APP:
        c.kind = "cut"
        c.why = f"a full snapshot of the table (commit {version})"
        pos = info.get("dagster_mysql_cdc.position")
        m = _POSITION.match(str(pos or ""))
        if m:
            c.cut_at = (int(m.group(3) or c.epoch), m.group(1), int(m.group(2)), -1)
    return c


def _latest(table: CapturedTable) -> Any:
    from ..sink.delta import open_table

    return open_table(table.storage, table.paths.changelog)


def _commits(table: CapturedTable, versions: Sequence[int]) -> dict[int, _Commit | None]:
    if len(versions) <= 2 or not table.storage.is_s3:
        return {v: _read_commit(table, v) for v in versions}
    with ThreadPoolExecutor(max_workers=8) as pool:
        return dict(zip(versions, pool.map(lambda v: _read_commit(table, v), versions)))


def current_position(
    table: CapturedTable, state_dt: Any, tail_dt: Any, *, floor: Ordering | None = None
) -> ChangePosition:
    """The change-feed position matching a current-state read of ``state_dt`` and ``tail_dt``
    (opened *before* this call): the change log's version now, with the batches of its last
    :data:`PENDING_LOOKBACK` commits whose ``txn`` neither the tail nor the state has yet left
    ``pending`` (a batch commits its change log before its tail)."""
    from ..sink.delta import transaction_version

    log_dt = _latest(table)
    if log_dt is None:
        return ChangePosition("", -1, floor=floor)
    w = log_dt.version()
    lo = max(0, w - PENDING_LOOKBACK + 1)
    pending = []
    for v, c in sorted(_commits(table, list(range(lo, w + 1))).items()):
        if c is None or c.kind not in ("events", "cut") or not c.app or c.batch_version is None:
            continue  # (a snapshot's cut not in the state yet stays pending too: read next, it says rebuild)
        done = [transaction_version(dt, c.app) for dt in (tail_dt, state_dt) if dt is not None]
        if not any(d is not None and d >= c.batch_version for d in done):
            pending.append(v)
    return ChangePosition(log_dt.metadata().id, w, 0, tuple(pending), floor)


# -- reading ------------------------------------------------------------------------------------


def _sorted_events(t: pa.Table) -> pa.Table:
    """A commit's events by ordering key ``(source.file, source.pos, source.row)``, a ``d`` before
    the ``c`` of a primary-key change at the same position (Debezium's order)."""
    if t.num_rows <= 1:
        return t
    src = t.column("source")
    rank = pc.if_else(pc.equal(t.column("op"), "d"), 0, 1)
    keys = pa.table(
        {
            "f": pc.struct_field(src, "file"),
            "p": pc.struct_field(src, "pos"),
            "r": pc.struct_field(src, "row"),
            "k": rank,
        }
    )
    return t.take(
        pc.sort_indices(
            keys, sort_keys=[("f", "ascending"), ("p", "ascending"), ("r", "ascending"), ("k", "ascending")]
        )
    )


def _older_than(t: pa.Table, epoch: int, floor: Ordering) -> pa.Array:
    """Mask: events of ``t`` (epoch ``epoch``) ordered below ``floor`` (snapshot reads at row -1)."""
    from ..sink.current import older_than_cut

    src = t.column("source")
    ords = pa.table(
        {
            "__epoch": pa.repeat(pa.scalar(epoch, pa.int64()), t.num_rows),
            "__binlog_file": pc.struct_field(src, "file"),
            "__binlog_pos": pc.cast(pc.struct_field(src, "pos"), pa.int64()),
            "__binlog_row": pc.if_else(
                pc.equal(t.column("op"), "r"),
                pa.scalar(-1, pa.int32()),
                pc.cast(pc.struct_field(src, "row"), pa.int32()),
            ),
        }
    )
    return older_than_cut(ords, floor)


def _flat(events: pa.Table, epoch: int, keyless: bool) -> pa.Table:
    from ..sink.tail import tail_rows

    names = [f.name for f in events.schema.field("after").type]
    rows = tail_rows(events, names, keyless=keyless, epoch=epoch)
    return rows.drop_columns(["__cut"])


def read_changes(
    table: TableLike,
    lake: LakeLike = ".lake",
    *,
    since: ChangePosition | str | None = None,
    server: str | None = None,
    max_rows: int | None = None,
    max_commits: int | None = None,
    until_version: int | None = None,
    format: str = "envelope",
) -> ChangeBatch:
    """The change events of a captured table after ``since`` (see the module docs).

    Args:
        table / lake / server: as :func:`.current.read_current`.
        since: the position the consumer recorded after its last read (``ChangePosition`` or its
            JSON); ``None``: none yet (the batch says ``rebuild``).
        max_rows: stop before the commit that would pass this many events (at least one commit
            is read; a commit larger than the budget is split, its events by ordering key).
        max_commits: at most this many change-log commits (windows).
        until_version: no commit after this change-log version (a bounded window of the feed).
        format: ``"envelope"`` (Debezium's, with ``before`` and ``after``) or ``"flat"``
            (``ExtractNewRecordState`` rows with ``__op`` and the ordering key).

    Returns:
        a :class:`ChangeBatch`: record :attr:`ChangeBatch.end` once its events are processed.

    Raises:
        UnknownTableError / ConfigurationError: an unknown table, a malformed position or
            argument.
    """
    from ..sink.data_files import read_files

    if format not in ("envelope", "flat"):
        raise ConfigurationError(f"format={format!r}: 'envelope' or 'flat'")
    if max_rows is not None and max_rows < 1:
        raise ConfigurationError(f"max_rows={max_rows}: at least 1")
    ref = captured_table(table, lake, server)
    start = ChangePosition.from_json(since) if isinstance(since, str | dict) else since
    log_dt = _latest(ref)
    try:
        if start is None:
            raise _Rebuild("no position recorded yet (first read)")
        if log_dt is None:
            if start.version < 0:
                return ChangeBatch(ref, start, start, pa.table({}))
            raise _Rebuild("the table's change log no longer exists")
        commits = _commits_after(ref, start, log_dt)
        plan = _plan(start, commits, log_dt.version(), max_rows, max_commits, until_version)
        schema = pa.schema(log_dt.schema().to_arrow())
        keyless = "key" not in schema.names
        parts = []
        read_rows = 0
        for c, skip, take in plan.reads:
            try:
                t = read_files(ref.storage, ref.paths.changelog, [p for p, _ in c.files], schema)
            except (FileNotFoundError, OSError) as e:
                raise _Rebuild(
                    f"a data file of the change log's commit {c.version} was removed (VACUUM after "
                    f"vacuum_retention_hours): the recorded position is older than what the change log keeps ({e})"
                ) from None
            read_rows += t.num_rows
            parts.append(_commit_events(c, t, skip, take, start.floor, format, keyless))
    except _Rebuild as r:
        end = start or ChangePosition("", -1)
        return ChangeBatch(ref, start, end, None, rebuild=r.why, _cut_at=r.cut_at)
    if plan.partial is not None:
        pc_commit, skip, take = plan.partial
        end = ChangePosition(log_dt.metadata().id, pc_commit.version - 1, skip + take, (), start.floor)
    else:
        end = ChangePosition(log_dt.metadata().id, plan.last, 0, (), start.floor)
    events = pa.concat_tables(parts, promote_options="permissive") if parts else None
    if events is None:
        empty = _flat(schema.empty_table(), 0, keyless) if format == "flat" else schema.empty_table()
        events = empty.append_column("_commit_version", pa.array([], pa.int64())).append_column(
            "_commit_timestamp", pa.array([], pa.int64())
        )
    return ChangeBatch(
        ref,
        start,
        end,
        events,
        commits=[c.version for c, _, _ in plan.reads],
        rows_read=read_rows,
        more=plan.more,
    )


class _Rebuild(Exception):
    """The consumer must start again from the current state: ``why`` (and the cut it starts
    after, when a cut is the reason)."""

    def __init__(self, why: str, cut_at: Ordering | None = None):
        super().__init__(why)
        self.why, self.cut_at = why, cut_at


def _commits_after(ref: CapturedTable, start: ChangePosition, log_dt: Any) -> dict[int, _Commit | None]:
    """The change log's commits ``start`` has not consumed (its pending ones, then every later
    one), read from the Delta log.

    Raises:
        _Rebuild: the position does not belong to this change log any more, or a commit after it
            is gone (log retention), broken, or a cut.
    """
    if start.version >= 0 and start.table_id != log_dt.metadata().id:
        raise _Rebuild("the change log was created anew since the recorded position")
    w = log_dt.version()
    if start.version > w:
        raise _Rebuild(
            f"the recorded position (version {start.version}) is after the change log's last commit ({w})"
        )
    todo = sorted(set(start.pending)) + list(range(start.version + 1, w + 1))
    commits = _commits(ref, todo)
    for v in todo:
        c = commits[v]
        if c is None:
            raise _Rebuild(
                f"the change log's commit {v} is no longer in its Delta log (log retention): the recorded "
                "position is older than what the change log keeps"
            )
        if c.kind == "broken":
            raise _Rebuild(c.why)
        if c.kind == "cut":
            raise _Rebuild(c.why, c.cut_at)
    return commits


@dataclass
class _Plan:
    """The commits one read takes: ``reads`` as ``(commit, rows to skip, rows to take or None)``,
    the last whole commit, a commit split by the row budget (also the last of ``reads``), and
    whether commits were left for the next read."""

    reads: list[tuple[_Commit, int, int | None]]
    last: int
    partial: tuple[_Commit, int, int] | None
    more: bool


def _plan(
    start: ChangePosition,
    commits: dict[int, _Commit | None],
    w: int,
    max_rows: int | None,
    max_commits: int | None,
    until_version: int | None,
) -> _Plan:
    """The commits of this read: every pending one, then the later ones (up to version ``w``)
    as the budgets allow (see :func:`read_changes`)."""
    chosen: list[_Commit] = [commits[v] for v in start.pending if commits[v] is not None]  # type: ignore[misc]
    rows = sum(c.rows for c in chosen)
    last = start.version
    partial: tuple[_Commit, int, int] | None = None  # (commit, skip, take)
    more = False
    first_offset = start.offset
    n_new = 0
    for v in range(start.version + 1, w + 1):
        c = commits[v]
        assert c is not None
        if until_version is not None and v > until_version:
            more = True
            break
        if max_commits is not None and n_new >= max_commits:
            more = True
            break
        avail = c.rows - (first_offset if v == start.version + 1 else 0)
        if c.kind == "events" and max_rows is not None and rows + avail > max_rows and (rows or n_new):
            more = True
            break
        if c.kind == "events" and max_rows is not None and avail > max_rows and not rows:
            skip = first_offset if v == start.version + 1 else 0
            partial = (c, skip, max_rows)
            more = True
            break
        if c.kind == "events":
            chosen.append(c)
            rows += avail
        last = v
        n_new += 1 if c.kind == "events" else 0
    reads: list[tuple[_Commit, int, int | None]] = [
        (c, first_offset if c.version == start.version + 1 and c.version not in start.pending else 0, None)
        for c in chosen
    ]
    if partial is not None:
        reads.append(partial)
    return _Plan(reads, last, partial, more)


def _commit_events(
    c: _Commit,
    t: pa.Table,
    skip: int,
    take: int | None,
    floor: Ordering | None,
    format: str,
    keyless: bool,
) -> pa.Table:
    """The events of commit ``c`` (its change-log rows ``t``) that the read returns: by ordering
    key, ``skip``/``take`` applied, the rows older than ``floor`` dropped, in ``format``, with the
    change-data-feed columns ``_commit_version`` and ``_commit_timestamp``.

    Raises:
        _Rebuild: the commit holds a cut (a TRUNCATE, a dropped or replaced table, a full snapshot).
    """
    t = _sorted_events(t)
    if skip or take is not None:
        t = t.slice(skip, take)
    ops = t.column("op")
    if pc.any(pc.equal(ops, "t")).as_py():
        i = pc.index(ops, "t").as_py()
        src = t.column("source")[i].as_py()
        raise _Rebuild(
            f"a TRUNCATE, or a dropped or replaced table (commit {c.version})",
            (c.epoch, src["file"], int(src["pos"]), 0),
        )
    snap = pc.struct_field(t.column("source"), "snapshot")
    full = pc.and_(pc.equal(ops, "r"), pc.invert(pc.is_in(snap, pa.array(["incremental", "false"]))))
    if pc.any(pc.fill_null(full, False)).as_py():
        raise _Rebuild(f"a full snapshot of the table (commit {c.version})")
    if floor is not None and t.num_rows:
        t = t.filter(pc.invert(_older_than(t, c.epoch, floor)))
    out = _flat(t, c.epoch, keyless) if format == "flat" else t
    n = out.num_rows
    out = out.append_column("_commit_version", pa.repeat(pa.scalar(c.version, pa.int64()), n))
    return out.append_column("_commit_timestamp", pa.repeat(pa.scalar(c.timestamp, pa.int64()), n))


def with_floor(position: ChangePosition, floor: Ordering | None) -> ChangePosition:
    """``position`` with its floor raised to ``floor``."""
    return replace(position, floor=_max_ordering(position.floor, floor))
