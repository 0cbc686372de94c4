"""Stream-run verification and the capture's standard metadata (row count, lag, backlog, progress).

A streaming window run materializes only the tables the window changed; each of them gets a result
for every check, cheaply and exactly:

``checksum_matches_source`` (scope ``window``)
    every key the window changed (every window of a following run): the lake's state row equals
    the source's row, read in a consistent-snapshot transaction at ``P`` (keys changed again
    between the committed position and ``P`` are left out, as the full checks do). At most
    ``max_keys`` keys per table are compared (the first ones of the window; ``keys_compared`` /
    ``keys_changed`` says so). Differing keys get their repair queued; a window that left no key
    to compare says so (:data:`.checks.NOT_COMPARED`) instead of passing.
``row_count_matches_source`` (scope ``table``)
    live rows of the state table, counted from the Delta log's per-file statistics (only files that
    mix live rows and tombstones are read, one boolean column), equal ``COUNT(*)`` in the source at
    ``P``, both corrected for the keys changed between the committed position and ``P``.

The full (whole-table) checks run on snapshots and on demand (a checks-only run: *Execute checks*
in the UI, a schedule from :func:`build_full_checks_schedule`, or an automation condition).
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import dagster as dg
import pyarrow as pa

from ..events import STATE_META_NAMES, BinlogPosition
from ..sink.storage import StorageSettings
from ..source.catalog import read_table_schemas
from ..source.connection import ConnectionSettings, ServerInfo, binlog_files, connect, current_position
from ..source.schema import TableSchema
from ..source.types import (
    TableConverter,
    TypeOptions,
    binlog_value_as_parameter,
    quote_identifier,
    select_expression,
)
from .check_source import consistent_source
from .checks import CHECKSUM, ROW_COUNT, TABLE_CHECKS, gone_results, not_compared_results

log = logging.getLogger(__name__)

#: Replica id offset of the verification's binlog reads (the checks use +7, range snapshots +3).
VERIFY_SERVER_ID_OFFSET = 11
_IN_BATCH = 500


# -- lake row counts --------------------------------------------------------------------------
def live_row_count(storage: StorageSettings, state_uri: str) -> int | None:
    """Live rows of a table's current state (its compacted state table ``state_uri`` with the
    tail applied: :func:`..sink.row_counts.live_count`); ``None`` when it has no state yet."""
    from ..sink.row_counts import live_count

    return live_count(storage, state_uri)


# -- backlog ----------------------------------------------------------------------------------
def _mariadb_seqs(gtid_set: str | None) -> dict[str, int]:
    out: dict[str, int] = {}
    for part in (gtid_set or "").split(","):
        bits = part.strip().split("-")
        if len(bits) == 3 and all(b.isdigit() for b in bits):
            out[bits[0]] = int(bits[2])
    return out


def _mysql_counts(gtid_set: str | None) -> dict[str, int]:
    out: dict[str, int] = {}
    for part in re.split(r",\s*", (gtid_set or "").replace("\n", "")):
        uuid, _, intervals = part.strip().partition(":")
        if not intervals:
            continue
        n = 0
        for iv in intervals.split(":"):
            a, _, b = iv.partition("-")
            if a.isdigit():
                n += (int(b) if b.isdigit() else int(a)) - int(a) + 1
        out[uuid.lower()] = out.get(uuid.lower(), 0) + n
    return out


def transactions_between(reached: str | None, head: str | None, is_mariadb: bool) -> int | None:
    """Transactions in GTID set ``head`` that ``reached`` lacks (``None`` without GTIDs).

    MariaDB: per replication domain, the difference of sequence numbers; MySQL: the difference of
    the interval sizes per source UUID.
    """
    if not head:
        return None
    a, b = (
        (_mariadb_seqs(reached), _mariadb_seqs(head))
        if is_mariadb
        else (_mysql_counts(reached), _mysql_counts(head))
    )
    return sum(max(0, n - a.get(k, 0)) for k, n in b.items())


@dataclass(frozen=True)
class Backlog:
    """How far the committed offset is behind the server's head, read right after a commit.

    Attributes:
        head: the server's current position (``SHOW MASTER STATUS`` + GTID set).
        bytes_behind: binlog bytes from the committed offset to the head (across files).
        files_behind: binlog files after the committed offset's file.
        transactions_behind: GTID transactions after the committed offset (``None`` without GTIDs).
    """

    head: BinlogPosition
    bytes_behind: int
    files_behind: int
    transactions_behind: int | None


def backlog(settings: ConnectionSettings, info: ServerInfo, reached: BinlogPosition) -> Backlog:
    """The :class:`Backlog` of ``reached`` (one short connection: two status statements).

    Raises:
        pymysql errors of the connection (the caller decides whether the metadata is optional).
    """
    conn = connect(settings)
    try:
        head = current_position(conn, info)
        files = binlog_files(conn)
    finally:
        conn.close()
    sizes = dict(files)
    names = [f for f, _ in files]
    if reached.file in sizes:
        after = names[names.index(reached.file) + 1 :]
        nbytes = max(0, sizes[reached.file] - reached.pos) + sum(sizes[f] for f in after)
        nfiles = len(after)
    else:  # purged or unknown: everything on the server is ahead of it
        nbytes, nfiles = sum(sizes.values()), len(names)
    if head.file == reached.file:
        nbytes = max(0, head.pos - reached.pos)
    return Backlog(
        head=head,
        bytes_behind=nbytes,
        files_behind=nfiles,
        transactions_behind=transactions_between(reached.gtid_set, head.gtid_set, info.is_mariadb),
    )


def lag_metadata(
    *,
    run_created_at: float | None,
    last_event_ts_ms: int | None,
    behind: Backlog | None,
) -> dict[str, Any]:
    """Lag metadata of a committed window (the same keys on the binlog and table assets).

    ``lag_seconds``: how old the source state the lake now reflects may be: the window's end was the
    server's head when the sensor requested the run, so the lake is at most (commit time - request
    time) behind the source, plus the backlog below. ``behind_head_bytes`` /
    ``behind_head_transactions`` / ``behind_head_files``: what the server wrote after the committed
    offset (0 = caught up at commit). ``last_change_age_seconds``: age of the newest change in the
    window (Debezium's MilliSecondsBehindSource; large on an idle server, which is not lag).
    """
    md: dict[str, Any] = {}
    if run_created_at is not None:
        md["lag_seconds"] = dg.MetadataValue.float(round(max(0.0, time.time() - run_created_at), 1))
    if behind is not None:
        md["behind_head_bytes"] = dg.MetadataValue.int(behind.bytes_behind)
        md["behind_head_files"] = dg.MetadataValue.int(behind.files_behind)
        if behind.transactions_behind is not None:
            md["behind_head_transactions"] = dg.MetadataValue.int(behind.transactions_behind)
        md["server_head"] = str(behind.head)
    if last_event_ts_ms is not None:
        md["last_change_age_seconds"] = dg.MetadataValue.float(
            round(max(0, time.time() * 1000 - last_event_ts_ms) / 1000, 1)
        )
    return md


# -- incremental snapshot progress ------------------------------------------------------------
def incremental_progress_metadata(
    table: str, state: dict | None, chunks: Sequence[dict], estimated_rows: int | None, chunk_size: int
) -> dict[str, Any]:
    """``incremental_snapshot`` metadata of one table: chunks done/total, rows, %, current key range.

    Args:
        table: ``db.table``.
        state: the incremental-snapshot state after the window (``IncrementalState.to_dict()``).
        chunks: the chunks this window emitted (all tables; this table's are picked): the
            binlog asset's ``incremental_chunks`` rows (``read``, ``key_lo``, ``key_hi``, and the
            table's cumulative ``table_chunks`` / ``table_rows`` after the chunk).
        estimated_rows: the source's row estimate (``information_schema.TABLES.TABLE_ROWS``).
        chunk_size: rows per chunk (``incremental_snapshot_chunk_size``).

    Returns:
        ``{}`` when the table is neither being snapshotted nor finished in this window.
    """
    mine = [c for c in chunks if c.get("table") == table]
    st = state or {}
    current = next((t for t in st.get("tables", []) if t.get("table") == table), None)
    done = table in st.get("done", []) or (bool(mine) and current is None)
    if current is None and not mine:
        return {}
    # a finished table is no longer in the state: its totals are those its last chunk carries
    last_totals = next((c for c in reversed(mine) if c.get("table_rows") is not None), None)
    if current is not None:
        chunks_done, rows_done = int(current["chunks"]), int(current["rows"])
    elif last_totals is not None:
        chunks_done, rows_done = int(last_totals["table_chunks"]), int(last_totals["table_rows"])
    else:  # chunks of a plan saved before the totals were recorded: this window's
        chunks_done, rows_done = len(mine), sum(int(c.get("read", c.get("rows", 0)) or 0) for c in mine)
    total_chunks = None
    if estimated_rows is not None and chunk_size > 0:
        total_chunks = max(1, -(-estimated_rows // chunk_size))
    if done:
        pct = 100.0
    elif estimated_rows:
        pct = min(99.9, round(100.0 * rows_done / max(estimated_rows, 1), 1))
    else:
        pct = 0.0
    last = mine[-1] if mine else None
    progress = {
        "status": "done" if done else ("paused" if st.get("paused") else "running"),
        "snapshot_id": st.get("snapshot_id"),
        "chunks_done": chunks_done,
        "chunks_total_estimate": total_chunks,
        "rows_done": rows_done,
        "rows_total_estimate": estimated_rows,
        "percent": pct,
        "chunks_this_window": len(mine),
        "current_key_range": (
            {"after": last.get("key_lo"), "up_to": last.get("key_hi")}
            if last is not None
            else ({"after": current.get("last_key"), "up_to": current.get("max_key")} if current else None)
        ),
    }
    return {
        "incremental_snapshot": dg.MetadataValue.json(progress),
        "incremental_snapshot_percent": dg.MetadataValue.float(float(pct)),
    }


def estimated_rows(settings: ConnectionSettings, tables: Iterable[str]) -> dict[str, int]:
    """``information_schema.TABLES.TABLE_ROWS`` of ``db.table`` names (InnoDB's estimate)."""
    wanted = [t.partition(".")[::2] for t in tables]
    if not wanted:
        return {}
    conn = connect(settings)
    try:
        with conn.cursor() as cur:
            cond = " OR ".join(["(TABLE_SCHEMA = %s AND TABLE_NAME = %s)"] * len(wanted))
            cur.execute(
                f"SELECT TABLE_SCHEMA, TABLE_NAME, TABLE_ROWS FROM information_schema.TABLES WHERE {cond}",
                [v for pair in wanted for v in pair],
            )
            return {f"{d}.{t}": int(n or 0) for d, t, n in cur.fetchall()}
    finally:
        conn.close()


# -- window verification ----------------------------------------------------------------------
@dataclass
class ChangedKeys:
    """Keys of one table seen in the binlog, by phase.

    ``window``: changed by the run's window ``[start, reached)``; ``since``: changed between the
    committed offset and the verification's snapshot position. Both map the Debezium-converted key
    (as the lake stores it) to the raw key (as the source is queried).
    """

    window: dict[tuple, tuple] = field(default_factory=dict)
    since: dict[tuple, tuple] = field(default_factory=dict)
    keys_changed: int = 0
    #: the binlog changed rows with another schema (a DDL): keys cannot be compared by key
    schema_changed: bool = False


def changed_keys(
    settings: ConnectionSettings,
    info: ServerInfo,
    schemas: dict[tuple[str, str], TableSchema],
    start: BinlogPosition,
    reached: BinlogPosition,
    until: BinlogPosition,
    type_options: TypeOptions,
    server_id: int,
    max_keys: int,
) -> dict[tuple[str, str], ChangedKeys]:
    """Read the binlog ``[start, until)`` once: keys each table changed in ``[start, reached)``
    (at most ``max_keys`` kept, all counted) and in ``[reached, until)``."""
    from ..source.binlog import BinlogReader, RowsBatch

    out = {k: ChangedKeys() for k in schemas}
    keys_of = {k: list(s.primary_key) for k, s in schemas.items()}
    # one server's binlog: compare in the window's offset epoch
    reached, until = reached.with_epoch(start.epoch), until.with_epoch(start.epoch)
    if start.sort_key() >= until.sort_key() or not schemas:
        return out
    convs = {k: TableConverter(s, type_options, "binlog") for k, s in schemas.items()}
    key_of = {
        k: c.primary_key_function() for k, c in convs.items()
    }  # only the key: other values may not convert
    key_cols = {k: [s.column(p) for p in s.primary_key] for k, s in schemas.items()}
    reader = BinlogReader(
        settings,
        server_id,
        start,
        until,
        is_mariadb=info.is_mariadb,
        deadline_s=300,
        rows_filter=lambda d, t: (d, t) in schemas,
    )
    end_key = reached.sort_key()
    for item in reader:
        if not isinstance(item, RowsBatch):
            continue
        k = (item.database, item.table)
        if k not in schemas or not item.rows:
            continue
        in_window = start.at(item.file, item.pos).sort_key() < end_key
        ck = out[k]
        if any(n not in item.column_names for n in keys_of[k]):
            ck.schema_changed = True  # images of another schema (a DDL in between): see verify_window
            continue
        for row in item.rows:
            for image in ("values", "before_values", "after_values"):
                if image not in row:
                    continue
                conv_key = key_of[k](row[image])
                raw_key = tuple(binlog_value_as_parameter(c, row[image][c.name]) for c in key_cols[k])
                if in_window:
                    if conv_key not in ck.window:
                        ck.keys_changed += 1
                        if len(ck.window) < max_keys:
                            ck.window[conv_key] = raw_key
                else:
                    ck.since[conv_key] = raw_key
    return out


def _lake_rows_for_keys(
    storage: StorageSettings,
    state_uri: str,
    names: list[str],
    pk: list[str],
    keys: Iterable[tuple],
    window_tail: list[str] | None = None,
) -> dict[tuple, tuple]:
    """Live rows of the table's current state (tuples of ``names``) whose key is in ``keys``
    (converted keys): the compacted state read with a filter on the first key column, the tail
    applied (:func:`..sink.read.read_current`). ``window_tail``: the tail files of the window
    that changed every one of ``keys`` last: while they are in the tail, the rows are read from
    them alone (:func:`..sink.read.read_window_rows`: what the window changed, not the table)."""
    from ..sink.read import read_current, read_window_rows

    wanted = set(keys)
    if not wanted:
        return {}
    t = (
        read_window_rows(storage, state_uri, window_tail, columns=names, keys=(pk, wanted))
        if window_tail
        else None
    )
    if t is None:
        t = read_current(storage, state_uri, live=True, columns=names, keys=(pk, wanted))
    if t is None:
        return {}
    kidx = [names.index(p) for p in pk]
    out: dict[tuple, tuple] = {}
    for row in zip(*[t.column(c).to_pylist() for c in names]):
        out[tuple(row[i] for i in kidx)] = tuple(row)
    return out


def _source_rows_for_keys(
    conn,
    schema: TableSchema,
    conv: TableConverter,
    proj: list[int],
    keys: Sequence[tuple],
    lake: pa.Schema | None = None,
) -> dict[tuple, tuple]:
    """Source rows (converted, projected on ``proj``; in ``lake``'s column types when given: the
    lake keeps a supertype of a column whose type changed) of the given raw keys, keyed by
    converted key."""
    from ..sink.evolution import conform_table

    pk = list(schema.primary_key)
    names = [c.name for c in schema.columns]
    kidx = [names.index(p) for p in pk]
    cols = ", ".join(select_expression(c) for c in schema.columns)
    tbl = f"{quote_identifier(schema.database)}.{quote_identifier(schema.table)}"
    kcols = ", ".join(quote_identifier(p) for p in pk)
    out: dict[tuple, tuple] = {}
    for i in range(0, len(keys), _IN_BATCH):
        part = list(keys[i : i + _IN_BATCH])
        one = "(" + ", ".join(["%s"] * len(pk)) + ")"
        with conn.cursor() as cur:
            cur.execute(
                f"SELECT {cols} FROM {tbl} WHERE ({kcols}) IN ({', '.join([one] * len(part))})",
                [v for k in part for v in k],
            )
            rows = list(cur.fetchall())
        if not rows:
            continue
        batch = conv.to_record_batch(rows)
        ks = zip(*[batch.column(j).to_pylist() for j in kidx])
        rows_out: Iterable[tuple]
        if lake is not None:
            vals = conform_table(batch.select(lake.names), lake)
            rows_out = zip(*[c.to_pylist() for c in vals.columns])
        else:
            rows_out = (tuple(r[j] for j in proj) for r in zip(*[c.to_pylist() for c in batch.columns]))
        for k, r in zip(ks, rows_out):
            out[tuple(k)] = tuple(r)
    return out


def _count(conn, schema: TableSchema) -> int:
    with conn.cursor() as cur:
        cur.execute(
            f"SELECT COUNT(*) FROM {quote_identifier(schema.database)}.{quote_identifier(schema.table)}"
        )
        return int(cur.fetchone()[0])


@dataclass
class WindowVerification:
    """Inputs of :func:`verify_window` for one table: its asset key, state table and selected checks."""

    key: dg.AssetKey
    database: str
    table: str
    state_uri: str
    checks: set[str]
    #: the lake's live rows as the run counted them after its commit (``None``: count them here)
    live_rows: int | None = None
    #: the tail files the run's window committed (relative paths; ``None``: unknown): the rows of
    #: the keys the window changed are read from them alone while they are in the tail
    tail_files: list[str] | None = None


def verify_window(
    *,
    tables: Sequence[WindowVerification],
    settings: ConnectionSettings,
    info: ServerInfo,
    storage: StorageSettings,
    start: BinlogPosition,
    reached: BinlogPosition,
    type_options: TypeOptions,
    server_id: int,
    max_keys: int = 10_000,
    on_checksum_mismatch: Callable[[TableSchema, list[tuple], list[tuple]], str] | None = None,
) -> tuple[list[dg.AssetCheckResult], list[WindowVerification]]:
    """The stream-run variant of ``row_count_matches_source`` / ``checksum_matches_source`` (see
    module docs) for keyed tables, in one consistent-snapshot transaction and one binlog read.

    ``on_checksum_mismatch(schema, differing keys, keys only the lake has)``: called when a
    table's window checksum finds differing keys (converted key values, as the full checks pass
    them) and its row count passed (a wrong count: the caller runs the table's full checks,
    which find and repair every differing key); its text goes to the result's ``repair``
    metadata (the repair the failure queued).

    A table that no longer exists on the source is compared with an empty table
    (:func:`.checks.gone_results`).

    Returns:
        ``(results, not_verified)``: a result per selected check of each keyed table, and the tables
        this cannot verify (keyless: the caller runs the full checks for them).
    """
    results: list[dg.AssetCheckResult] = []
    wanted = [t for t in tables if t.checks & {ROW_COUNT, CHECKSUM}]
    if not wanted:
        return results, []
    conn, pos = consistent_source(settings, info, start.epoch)
    try:
        schemas = read_table_schemas(conn, [(t.database, t.table) for t in wanted])
        keyed = {k: s for k, s in schemas.items() if s.primary_key}
        rest = [t for t in wanted if (t.database, t.table) in schemas and (t.database, t.table) not in keyed]
        for t in wanted:
            if (t.database, t.table) not in schemas:
                lake_live = t.live_rows if t.live_rows is not None else live_row_count(storage, t.state_uri)
                results += gone_results(
                    t.key, t.database, t.table, t.checks & {ROW_COUNT, CHECKSUM}, lake_live
                )
        changed = changed_keys(
            settings,
            info,
            keyed,
            start,
            reached,
            pos,
            type_options,
            server_id + VERIFY_SERVER_ID_OFFSET,
            max_keys,
        )
        for t in wanted:
            k = (t.database, t.table)
            if k not in keyed:
                continue
            if changed[k].schema_changed:  # a DDL in the window: the whole-table checks instead
                rest.append(t)
                continue
            base: dict[str, Any] = {
                "committed_position": str(reached),
                "source_position": str(pos),
                "window_start": str(start),
                "keys_changed_since_committed": len(changed[k].since),
            }
            cmp = _KeyedCompare.of(conn, storage, t, keyed[k], changed[k], type_options, base)
            count = _window_row_count(cmp) if ROW_COUNT in t.checks else None
            if count is not None:
                results.append(count)
            if CHECKSUM in t.checks:
                # a wrong count: the caller's full checks find (and repair) every differing key
                counted = count is None or count.passed
                results.append(_window_checksum(cmp, on_checksum_mismatch if counted else None))
        return results, rest
    finally:
        try:
            conn.rollback()
        finally:
            conn.close()


@dataclass
class _KeyedCompare:
    """One keyed table of :func:`verify_window`: what both sides are compared on."""

    conn: Any  # the consistent-snapshot connection
    storage: StorageSettings
    t: WindowVerification
    schema: TableSchema
    conv: TableConverter
    ck: ChangedKeys
    names: list[str]  # the columns both sides have
    proj: list[int]  # their indexes in the converted source row
    lake: pa.Schema  # their lake fields (the source's values are compared in these types)
    pk: list[str]
    base: dict[str, Any]  # metadata common to both checks

    @classmethod
    def of(
        cls,
        conn: Any,
        storage: StorageSettings,
        t: WindowVerification,
        schema: TableSchema,
        ck: ChangedKeys,
        type_options: TypeOptions,
        base: dict[str, Any],
    ) -> _KeyedCompare:

        conv = TableConverter(schema, type_options, "pymysql")
        from ..sink.read import current_schema

        lake_schema = current_schema(storage, t.state_uri)
        assert lake_schema is not None  # the caller checks the table is captured
        lake_cols = {f.name for f in lake_schema if f.name not in STATE_META_NAMES}
        all_names = conv.arrow_schema.names
        names = [n for n in all_names if n in lake_cols]
        proj = [all_names.index(n) for n in names]
        lake = pa.schema([lake_schema.field(n) for n in names])
        return cls(conn, storage, t, schema, conv, ck, names, proj, lake, list(schema.primary_key), base)


def _window_row_count(c: _KeyedCompare) -> dg.AssetCheckResult:
    """``row_count_matches_source`` of a stream run: the lake's live rows (Delta statistics) against
    ``COUNT(*)``, both without the keys changed since the committed position."""
    lake_live = (
        c.t.live_rows if c.t.live_rows is not None else live_row_count(c.storage, c.t.state_uri)
    ) or 0
    src_count = _count(c.conn, c.schema)
    since = list(c.ck.since.items())
    lake_in = len(_lake_rows_for_keys(c.storage, c.t.state_uri, c.pk, c.pk, c.ck.since))
    src_in = len(
        _source_rows_for_keys(c.conn, c.schema, c.conv, c.proj, lake=c.lake, keys=[raw for _, raw in since])
    )
    passed = lake_live - lake_in == src_count - src_in
    return dg.AssetCheckResult(
        asset_key=c.t.key,
        check_name=ROW_COUNT,
        passed=passed,
        metadata={
            **c.base,
            "scope": "table (stream run: Delta statistics vs COUNT(*))",
            "lake_rows": lake_live,
            "source_rows": src_count,
            "explanation": (
                "live rows in the lake equal COUNT(*) in the source (keys changed since the "
                "committed position left out)"
                if passed
                else f"the lake has {lake_live - lake_in} live rows, the source "
                f"{src_count - src_in} (outside keys changed since the committed position): "
                "run the full checks (Execute checks) to find the keys"
            ),
        },
    )


def _window_checksum(
    c: _KeyedCompare,
    on_mismatch: Callable[[TableSchema, list[tuple], list[tuple]], str] | None = None,
) -> dg.AssetCheckResult:
    """``checksum_matches_source`` of a stream run: the rows of the keys the window changed (not
    changed again since the committed position), lake against source. Differing keys go to
    ``on_mismatch`` (the repair of exactly those keys); a window that left no key to compare
    says so (:data:`.checks.NOT_COMPARED`) instead of passing."""
    ck = c.ck
    cmp_keys = {k: r for k, r in ck.window.items() if k not in ck.since}
    if not cmp_keys:
        why = (
            f"every key the window changed ({ck.keys_changed}) changed again after the committed position"
            if ck.keys_changed
            else "the window changed no row of this table"
        )
        facts = {**c.base, "keys_changed": ck.keys_changed, "keys_compared": 0}
        return not_compared_results(c.t.key, {CHECKSUM}, why, facts)[0]
    lake_rows = _lake_rows_for_keys(c.storage, c.t.state_uri, c.names, c.pk, cmp_keys, c.t.tail_files)
    src_rows = _source_rows_for_keys(
        c.conn, c.schema, c.conv, c.proj, lake=c.lake, keys=list(cmp_keys.values())
    )
    differing = sorted((k for k in cmp_keys if lake_rows.get(k) != src_rows.get(k)), key=repr)
    passed = not differing
    md: dict[str, Any] = {
        **c.base,
        "scope": "keys changed by the window (stream run)",
        "keys_changed": ck.keys_changed,
        "keys_compared": len(cmp_keys),
        "rows_compared": len(cmp_keys),
        "columns_compared": c.names,
        "differing_keys_sample": [str(k) for k in differing[:10]],
        "explanation": (
            "every row the window changed equals the source's row"
            + (
                f" (the first {len(ck.window)} of {ck.keys_changed} changed keys compared)"
                if ck.keys_changed > len(ck.window)
                else ""
            )
            if passed
            else f"{len(differing)} changed key(s) differ from the source; the failure stays until "
            + (
                "their repair (repair) completes or a full check (Execute checks) passes"
                if on_mismatch is not None
                else "a full check (Execute checks, which queues their repair) passes"
            )
        ),
    }
    if differing and on_mismatch is not None:
        lake_only = [k for k in differing if k in lake_rows and k not in src_rows]
        md["repair"] = on_mismatch(c.schema, differing, lake_only)
    return dg.AssetCheckResult(asset_key=c.t.key, check_name=CHECKSUM, passed=passed, metadata=md)


def verification_failed_results(
    tables: Sequence[WindowVerification], error: BaseException
) -> list[dg.AssetCheckResult]:
    """WARN results of every check of ``tables`` when a stream run's verification raised
    ``error`` (the window is committed: the run must not fail, and re-run, for it)."""
    return [
        dg.AssetCheckResult(
            asset_key=t.key,
            check_name=n,
            passed=False,
            severity=dg.AssetCheckSeverity.WARN,
            metadata={
                "error": f"{type(error).__name__}: {error}",
                "explanation": "the window's verification could not run; run the full checks (Execute checks)",
            },
        )
        for t in tables
        for n in sorted(t.checks)
    ]


# -- schedules --------------------------------------------------------------------------------
def build_full_checks_schedule(
    assets_def: dg.AssetsDefinition,
    cron_schedule: str,
    *,
    name: str | None = None,
    default_status: dg.DefaultScheduleStatus = dg.DefaultScheduleStatus.STOPPED,
) -> dg.ScheduleDefinition:
    """A schedule running the full (whole-table) reconciliation checks of every captured table.

    Stream runs verify only what each window changed; this re-reads whole tables (or
    ``checksum_sample_chunks`` key chunks) at the committed position, e.g. nightly
    (``cron_schedule="0 3 * * *"``). No table is materialized: it is a checks-only run.
    """
    keys = [ck for ck in assets_def.check_keys if ck.name in TABLE_CHECKS]
    job = dg.define_asset_job(
        name=name or f"{assets_def.node_def.name}_full_checks",
        selection=dg.AssetSelection.checks(*keys),
        description="Full reconciliation checks of the captured tables (lake vs source).",
    )
    return dg.ScheduleDefinition(
        name=f"{job.name}_schedule",
        job=job,
        cron_schedule=cron_schedule,
        default_status=default_status,
    )


__all__ = [
    "Backlog",
    "backlog",
    "build_full_checks_schedule",
    "incremental_progress_metadata",
    "lag_metadata",
    "live_row_count",
    "transactions_between",
    "verification_failed_results",
    "verify_window",
]
