"""Reconciliation asset checks: the lake against the source, at the committed position.

A check compares the lake (which is complete up to the committed binlog position ``C``) with the
source read in a consistent-snapshot transaction at position ``P ≥ C``. Rows whose key changed in
the binlog between ``C`` and ``P`` are legitimately different, so the binlog ``(C, P]`` is read
first and those keys are left out of the comparison: the checks are exact, lock-free, and safe
while the sensor streams. That source side (the consistent snapshot, the keys changed since ``C``,
source rows converted as the lake holds them) is :mod:`.check_source`.

Checks per table asset:

``row_count_matches_source``
    live rows in the state table == ``COUNT(*)`` in the source (untouched keys); a keyless table's
    state row counts ``__count`` times (its copies), so duplicates are compared as a multiset.
``checksum_matches_source``
    order-independent checksum (sum of 64-bit hashes of the Debezium-converted rows, primary key
    + all columns) over the whole table or a sample of primary-key chunks; chunked reads, no locks.
``schema_matches_source``
    the source's columns (and their Debezium/Arrow types) all exist in the lake state table.

A check that fails while the binlog ``(C, P]`` holds a DDL of the table's database (a column added
or the table dropped and created again just after ``C``: the source is read at ``P``) is *not
compared* (WARN) instead: the difference may be the DDL the capture has not read yet. Once the
capture passes the DDL, a difference that remains fails as an ERROR.

Check on the binlog asset:

``binlog_retention``
    the committed offset's binlog file still exists and is not among the ``margin`` oldest files
    (WARN before it is purged, ERROR once it is gone).

Every failure explains itself in the check metadata (counts, differing keys sample, missing columns).
"""

from __future__ import annotations

import hashlib
import logging
import struct
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import dagster as dg
import pyarrow as pa

from ..events import STATE_META_NAMES, BinlogPosition
from ..sink.storage import StorageSettings
from ..source.catalog import read_table_schemas
from ..source.connection import ConnectionSettings, ServerInfo, binlog_files, connect
from ..source.schema import TableSchema
from ..source.types import TableConverter, TypeOptions
from .check_source import (
    SCHEMA_CHANGED,
    SharedSource,
    consistent_source,
    ddl_since,
    hashable_rows,
    source_rows,
    struct_positions,
    touched_keys,
)

log = logging.getLogger(__name__)

ROW_COUNT = "row_count_matches_source"
CHECKSUM = "checksum_matches_source"
SCHEMA = "schema_matches_source"
RETENTION = "binlog_retention"
GAPS = "changes_in_binlog"
TABLE_CHECKS = (ROW_COUNT, CHECKSUM, SCHEMA)


def table_check_specs(
    key: dg.AssetKey, automation_condition: dg.AutomationCondition | None = None
) -> list[dg.AssetCheckSpec]:
    """The reconciliation checks of one table asset (``automation_condition``: of each check, e.g. a
    cron for nightly full checks)."""
    specs = [  # each: name, asset, description (+ automation_condition)
        dg.AssetCheckSpec(
            ROW_COUNT,
            asset=key,
            description=(
                "Live rows in the lake state equal the source's row count at the committed position "
                "(stream runs: Delta statistics vs COUNT(*); full runs: row by row)."
            ),
        ),
        dg.AssetCheckSpec(
            CHECKSUM,
            asset=key,
            description=(
                "Lake rows equal the source's: on stream runs every row the window changed, on "
                "snapshots and checks-only runs an order-independent checksum of key + all columns "
                "(whole table or a sample of key chunks)."
            ),
        ),
        dg.AssetCheckSpec(
            SCHEMA,
            asset=key,
            description="Every source column exists in the lake state with the same Debezium type.",
        ),
    ]
    if automation_condition is not None:
        specs = [
            dg.AssetCheckSpec(
                s.name, asset=key, description=s.description, automation_condition=automation_condition
            )
            for s in specs
        ]
    return specs


def binlog_check_specs(key: dg.AssetKey) -> list[dg.AssetCheckSpec]:
    """The checks of the binlog asset: retention and changes the binlog does not carry."""
    return [
        dg.AssetCheckSpec(
            RETENTION,
            asset=key,
            description="The committed binlog offset is still on the server, outside the retention margin.",
        ),
        dg.AssetCheckSpec(
            GAPS,
            asset=key,
            description=(
                "Every change to a captured table in the window reached the binlog as row events "
                "(no statement-based DML, no foreign-key cascade); fails naming the table and "
                "binlog position, with the repair queued."
            ),
        ),
    ]


def gaps_check(key: dg.AssetKey, gaps: list[dict] | None, handling: str) -> dg.AssetCheckResult:
    """``changes_in_binlog``: the gaps one window run found (``None``: no window was read).

    Fails with severity WARN when every gap was queued for repair, ERROR otherwise.
    """
    if gaps is None:
        return dg.AssetCheckResult(
            asset_key=key,
            check_name=GAPS,
            passed=True,
            metadata={"explanation": "no binlog window was read in this run"},
        )
    repaired = all(g["repair"].startswith("Repair queued") for g in gaps)
    return dg.AssetCheckResult(
        asset_key=key,
        check_name=GAPS,
        passed=not gaps,
        severity=dg.AssetCheckSeverity.WARN if repaired else dg.AssetCheckSeverity.ERROR,
        metadata={
            "binlog_gap_handling": handling,
            "gaps": dg.MetadataValue.json(gaps),
            "explanation": (
                "every change of the window is in the binlog as row events"
                if not gaps
                else "; ".join(f"{g['kind']} on {g['table']} at {g['position']}" for g in gaps)
            ),
        },
    )


@dataclass(frozen=True)
class CheckOptions:
    """Options of the reconciliation checks.

    Attributes:
        checksum_sample_chunks: ``0`` checksums the whole table; ``N`` checksums N evenly spread
            primary-key chunks of ``chunk_rows`` rows.
        chunk_rows: rows per source read.
        retention_margin_files: WARN when the committed file is among this many oldest files.
        max_binlog_scan_bytes: refuse (skip with an explanation) when reconciling would need to
            read more binlog than this between the committed position and now.
    """

    checksum_sample_chunks: int = 0
    chunk_rows: int = 10_000
    retention_margin_files: int = 1
    max_binlog_scan_bytes: int = 512 * 1024 * 1024


def row_hash(values: Sequence) -> int:
    """64-bit hash of one converted row (stable across processes: blake2b of its repr)."""
    return struct.unpack("<Q", hashlib.blake2b(repr(tuple(values)).encode(), digest_size=8).digest())[0]


def _checksum(rows: Iterable[Sequence]) -> tuple[int, int]:
    total, n = 0, 0
    for r in rows:
        total = (total + row_hash(r)) & 0xFFFFFFFFFFFFFFFF
        n += 1
    return total, n


def _lake_live_rows(storage: StorageSettings, state_uri: str, columns: list[str]) -> Iterable[tuple]:
    """The live rows of a table's current state (its state table with the tail applied,
    :func:`..sink.read.read_current`) as tuples of ``columns``; a keyless table's row value once
    per copy (its ``__count``), so the lake is compared with the source as a multiset."""
    from ..sink.read import read_current

    t = read_current(storage, state_uri, live=True, columns=columns)
    if t is None:
        return
    structs = struct_positions(t.schema, columns)
    rows = hashable_rows(zip(*[t.column(c).to_pylist() for c in columns]), structs)
    if "__count" not in t.column_names:
        yield from rows
        return
    for row, n in zip(rows, t.column("__count").to_pylist()):
        yield from [row] * (1 if n is None else n)


def _alike_results(
    key: dg.AssetKey,
    names: set[str],
    *,
    passed: bool,
    metadata: dict[str, Any],
    severity: dg.AssetCheckSeverity = dg.AssetCheckSeverity.ERROR,
) -> list[dg.AssetCheckResult]:
    """One result per check of ``names`` (in name order), all with the same outcome: ``passed``,
    ``severity`` (Dagster's default: ERROR) and ``metadata``."""
    return [
        dg.AssetCheckResult(
            asset_key=key, check_name=n, passed=passed, severity=severity, metadata=dict(metadata)
        )
        for n in sorted(names)
    ]


def not_captured_results(key: dg.AssetKey, names: set[str]) -> list[dg.AssetCheckResult]:
    """Failed results of the table checks ``names`` of a table the lake does not have yet."""
    return _alike_results(
        key,
        names,
        passed=False,
        metadata={"reason": "the table has not been captured yet: materialize it first"},
    )


#: How the explanation of a stopped table's failed checks starts (:func:`stopped_results`):
#: ``status`` does not count them as problems of their own (the stop is one, or the table is
#: caught up and its checks are evaluated again when the run that caught it up logs them).
STOPPED_EXPLANATION = "the capture of this table is stopped at "


def stopped_results(key: dg.AssetKey, names: set[str], stopped: dict) -> list[dg.AssetCheckResult]:
    """Failed results of the checks ``names`` of a table whose capture is stopped
    (:mod:`..engine.isolation`; ``stopped``: ``{"since", "error"}``): the lake holds it as of
    ``since`` only, which is the divergence to report, with its cause and the way back."""
    since = stopped.get("since") or {}
    return _alike_results(
        key,
        names,
        passed=False,
        metadata={
            "explanation": (
                f"{STOPPED_EXPLANATION}{since.get('file')}:{since.get('pos')}: its "
                "changes from there on could not be written; the lake holds it as of that position. "
                "It is caught up automatically (backoff) or at once after the cause is fixed and the "
                "table is materialized (docs/operations.md, 'A table stopped')"
            ),
            "error": dg.MetadataValue.text(str(stopped.get("error") or "")[:2000]),
        },
    )


def no_data_skipped_results(key: dg.AssetKey, names: set[str]) -> list[dg.AssetCheckResult]:
    """Passed, skipped results of the checks ``names`` whose rows are not comparable with the
    whole source (``snapshot_mode=no_data``: the lake holds only the rows changed since)."""
    return _alike_results(
        key,
        names,
        passed=True,
        metadata={
            "skipped": "snapshot_mode=no_data: the lake holds only rows changed since the "
            "snapshot (or read by incremental snapshots), so it is not compared with the "
            "whole source here; run Execute checks after an incremental snapshot of the table"
        },
    )


#: Metadata key of a row count or checksum result that compared nothing (its text says why):
#: :func:`.check_run.run_checks` reports the check's last comparison instead (carried forward),
#: so a check that looked at no row never reads as a new pass.
NOT_COMPARED = "not_compared"


def not_compared_results(
    key: dg.AssetKey, names: set[str], why: str, metadata: dict[str, Any] | None = None
) -> list[dg.AssetCheckResult]:
    """Results of the checks ``names`` that could compare nothing (``why``; ``metadata``: more
    facts): failed with severity WARN and :data:`NOT_COMPARED` metadata (never a pass: nothing
    was verified). The run's checks replace each with the check's last comparison when there is
    one (:func:`.check_run.run_checks`)."""
    return _alike_results(
        key,
        names,
        passed=False,
        severity=dg.AssetCheckSeverity.WARN,
        metadata={**(metadata or {}), NOT_COMPARED: why, "explanation": f"not compared: {why}"},
    )


def pending_results(key: dg.AssetKey, names: set[str], repair: str) -> list[dg.AssetCheckResult]:
    """Results of the checks ``names`` of a table whose rows a queued (or running) repair or
    re-snapshot re-reads (``repair``: which, what and why, :meth:`..engine.gaps.QueuedRepair.describe`):
    the lake is known to lag the source there until it completes, which is the capture's own
    doing (a DDL or a statement the binlog does not carry as rows), not a divergence. Failed with
    severity WARN (*pending*: never a pass, never an ERROR); the run that completes the repair
    runs the full checks of the table."""
    return _alike_results(
        key,
        names,
        passed=False,
        severity=dg.AssetCheckSeverity.WARN,
        metadata={
            "pending": dg.MetadataValue.text(repair[:2000]),
            "explanation": (
                f"pending: {repair[:500]}. The lake is compared with the source when the "
                "repair completes (its run runs the full checks of the table)"
            ),
        },
    )


def gone_results(
    key: dg.AssetKey, database: str, table: str, names: set[str], lake_rows: int | None
) -> list[dg.AssetCheckResult]:
    """Results of the checks ``names`` of a table that no longer exists on the source (dropped,
    or renamed away): the source holds no row of it, so the lake must hold none either (a
    ``DROP``/``RENAME`` cuts its rows, docs/ddl.md). Row count and checksum pass when the lake
    has no live row (``lake_rows``, ``None``: no state) and fail naming the count otherwise; the
    schema check passes (no source column to miss)."""
    live = lake_rows or 0
    out = []
    for n in sorted(names):
        if n == SCHEMA:
            passed, why = True, "the source has no column of it to miss"
        elif live == 0:
            passed, why = True, "the lake has no live row of it either (its rows were cut)"
        else:
            passed, why = False, f"the lake still has {live} live row(s) of it"
        out.append(
            dg.AssetCheckResult(
                asset_key=key,
                check_name=n,
                passed=passed,
                metadata={
                    "reason": f"{database}.{table} no longer exists on the source",
                    "lake_rows": live,
                    "source_rows": 0,
                    "explanation": f"{database}.{table} no longer exists on the source (dropped or renamed): {why}",
                },
            )
        )
    return out


@dataclass(frozen=True)
class CheckedTable:
    """One table asset as its checks see it.

    Attributes:
        key: the table's asset key.
        database: its source database.
        table: its source table name.
        state_uri: the URI of its lake state table (:class:`..sink.layout.LakeLayout`).
    """

    key: dg.AssetKey
    database: str
    table: str
    state_uri: str


def run_table_checks(
    *,
    target: CheckedTable,
    selected: set[str],
    settings: ConnectionSettings,
    info: ServerInfo,
    storage: StorageSettings,
    committed: BinlogPosition,
    type_options: TypeOptions,
    options: CheckOptions,
    server_id: int,
    on_checksum_mismatch: Callable[[TableSchema, list[tuple], list[tuple]], str] | None = None,
    shared: SharedSource | None = None,
) -> list[dg.AssetCheckResult]:
    """Run the selected table checks (see module docs); one ``AssetCheckResult`` each.

    ``shared``: the run's :class:`SharedSource` (many tables checked at one source position: one
    connection, one schema query and one binlog read for all of them); ``None``: this table's own.

    ``on_checksum_mismatch(schema, differing keys, keys only the lake has)`` is called when the
    checksum fails (keys as compared: Debezium-converted values); its return text goes to the
    check's ``repair`` metadata (see :mod:`dagster_mysql_cdc.engine.gaps`).
    """
    key, database, table, state_uri = target.key, target.database, target.table, target.state_uri
    results: list[dg.AssetCheckResult] = []
    if not selected & set(TABLE_CHECKS):
        return results
    if shared is not None:
        conn, pos = shared.source()
    else:
        conn, pos = consistent_source(settings, info, committed.epoch)
    try:
        schema = (
            shared.schemas.get((database, table))
            if shared is not None
            else read_table_schemas(conn, [(database, table)]).get((database, table))
        )
        far_behind = (
            pos.sort_key() > committed.sort_key()
            and pos.file == committed.file
            and pos.pos - committed.pos > options.max_binlog_scan_bytes
        )
        skipped = f"the lake is more than {options.max_binlog_scan_bytes} binlog bytes behind; reconcile after it catches up"

        def ahead(got: list[dg.AssetCheckResult]) -> list[dg.AssetCheckResult]:
            return _explained_by_ddl(
                got,
                committed,
                pos,
                skipped if far_behind else None,
                lambda: (
                    shared.ddl_since(database)
                    if shared is not None
                    else ddl_since(settings, info, database, committed, pos, server_id + 7)
                ),
            )

        if schema is None:
            from ..sink.row_counts import live_count

            rows = live_count(storage, state_uri) if selected & {ROW_COUNT, CHECKSUM} else 0
            return ahead(gone_results(key, database, table, selected & set(TABLE_CHECKS), rows))
        conv = TableConverter(schema, type_options, "pymysql")
        schema = conv.table  # the captured columns: checks compare only what is captured

        from ..sink.read import current_schema

        lake_schema = current_schema(storage, state_uri)
        assert lake_schema is not None  # the caller checks the table is captured
        lake_cols = {f.name: f for f in lake_schema if f.name not in STATE_META_NAMES}
        if SCHEMA in selected:
            results += ahead([_schema_result(key, conv, lake_cols)])
        compared = selected & {ROW_COUNT, CHECKSUM}
        if not compared:
            return results
        if far_behind:
            return results + not_compared_results(key, compared, skipped)
        touched = (
            shared.touched(schema)
            if shared is not None
            else touched_keys(settings, info, schema, committed, pos, type_options, server_id + 7)
        )
        if SCHEMA_CHANGED in touched:
            return results + not_compared_results(
                key,
                compared,
                "a DDL changed the table since the committed position; compared after the capture passes it",
            )
        comparison = RowComparison(key, conv, lake_cols, touched, options)
        base_md = {"committed_position": str(committed), "source_position": str(pos)}
        return results + ahead(
            comparison.results(compared, conn, storage, state_uri, base_md, on_checksum_mismatch)
        )
    finally:
        if shared is None:
            try:
                conn.rollback()
            finally:
                conn.close()


def _explained_by_ddl(
    got: list[dg.AssetCheckResult],
    committed: BinlogPosition,
    pos: BinlogPosition,
    far_behind: str | None,
    ddl_since: Callable[[], bool],
) -> list[dg.AssetCheckResult]:
    """``got`` (results against the source read at ``pos``), each failed one made *not compared*
    (WARN) when the lake is ``far_behind`` (the reason) or a DDL since ``committed`` may explain
    it (``ddl_since()``, read only when a result failed): a column added, the table dropped, or
    dropped and created again after the lake's position (its rows went without row events).
    Without such a DDL a failure stands."""
    if all(r.passed for r in got) or pos.sort_key() <= committed.sort_key():
        return got
    if far_behind is not None:
        why = far_behind
    elif ddl_since():
        why = (
            "a DDL of the table's database is in the binlog since the committed position "
            f"{committed} (the source was read at {pos}); compared after the capture passes it"
        )
    else:
        return got
    return [
        r
        if r.passed or r.asset_key is None or r.check_name is None
        else not_compared_results(r.asset_key, {r.check_name}, why, dict(r.metadata))[0]
        for r in got
    ]


class RowComparison:
    """The row count and checksum of one table: its live lake rows against its source rows, both
    as tuples of the columns both sides have, in the lake's column types (a column whose type
    changed keeps a supertype in the lake; schema drift is the schema check's business), the keys
    changed since the committed position (``touched``) left out.

    Args:
        key: the table's asset key.
        conv: the source table's converter (its captured columns).
        lake_cols: the lake state's data columns by name.
        touched: the converted keys the binlog changed since the committed position.
        options: the checks' options.
    """

    def __init__(
        self,
        key: dg.AssetKey,
        conv: TableConverter,
        lake_cols: dict[str, pa.Field],
        touched: set[tuple],
        options: CheckOptions,
    ) -> None:
        self.key, self.conv, self.touched, self.options = key, conv, touched, options
        self.names = [n for n in conv.arrow_schema.names if n in lake_cols]
        self.lake_types = pa.schema([lake_cols[n] for n in self.names])
        self.pk = list(conv.table.primary_key) or self.names

    def results(
        self,
        compared: set[str],
        conn: Any,
        storage: StorageSettings,
        state_uri: str,
        positions: dict[str, Any],
        on_checksum_mismatch: Callable[[TableSchema, list[tuple], list[tuple]], str] | None,
    ) -> list[dg.AssetCheckResult]:
        """The results of the checks ``compared`` (row count, checksum): the source's rows are
        read on ``conn`` (in its consistent snapshot), the lake's from ``state_uri``;
        ``positions``: the positions compared at, the first metadata of each result."""
        missing = [k for k in self.pk if k not in self.names]
        if missing:
            return [
                dg.AssetCheckResult(
                    asset_key=self.key,
                    check_name=name,
                    passed=False,
                    metadata={"reason": f"the lake has no column {missing} of the table's primary key yet"},
                )
                for name in sorted(compared)
            ]
        kidx = [self.names.index(k) for k in self.pk]
        lake_rows = [
            r
            for r in _lake_live_rows(storage, state_uri, self.names)
            if tuple(r[i] for i in kidx) not in self.touched
        ]
        unconvertible = [0]
        src_rows = [
            p
            for p in source_rows(
                conn, self.conv.table, self.conv, self.options.chunk_rows, self.lake_types, unconvertible
            )
            if tuple(p[i] for i in kidx) not in self.touched
        ]
        base_md: dict[str, Any] = {
            **positions,
            "keys_changed_since_committed": len(self.touched),
            "columns_compared": self.names,
        }
        if unconvertible[0]:
            # rows the capture leaves out (event_processing_failure_handling_mode warn|skip): they
            # count, and can never match a lake row, so the checks show the lake misses them
            base_md["source_rows_not_convertible"] = unconvertible[0]
        results: list[dg.AssetCheckResult] = []
        if ROW_COUNT in compared:
            results.append(
                dg.AssetCheckResult(
                    asset_key=self.key,
                    check_name=ROW_COUNT,
                    passed=len(lake_rows) == len(src_rows),
                    metadata={
                        **base_md,
                        "lake_rows": len(lake_rows),
                        "source_rows": len(src_rows),
                        "explanation": "counts compared over keys not changed since the committed position",
                    },
                )
            )
        if CHECKSUM in compared:
            results.append(
                _checksum_result(
                    self.key,
                    self.conv.table,
                    lake_rows,
                    src_rows,
                    kidx,
                    base_md,
                    self.options,
                    on_checksum_mismatch,
                )
            )
        return results


def _schema_result(
    key: dg.AssetKey, conv: TableConverter, lake_cols: dict[str, pa.Field]
) -> dg.AssetCheckResult:
    """The ``schema_matches_source`` check: every captured source column is in the lake with a type
    that holds its values (the same, or the supertype the lake keeps after a type change:
    ``sink/evolution.py``; lake-only columns, e.g. dropped at the source, are allowed)."""
    from ..sink.evolution import supertype

    missing = [c for c in conv.arrow_schema.names if c not in lake_cols]
    mismatched = [
        f"{f.name}: source {f.type} vs lake {lake_cols[f.name].type}"
        for f in conv.arrow_schema
        if f.name in lake_cols and supertype(lake_cols[f.name], f) is not lake_cols[f.name]
    ]
    extra = [c for c in lake_cols if c not in conv.arrow_schema.names]
    return dg.AssetCheckResult(
        asset_key=key,
        check_name=SCHEMA,
        passed=not missing and not mismatched,
        metadata={
            "missing_in_lake": missing,
            "type_mismatches": mismatched,
            "lake_only_columns": extra,
            "explanation": (
                "source columns missing from the lake: the schema change is not captured yet or was skipped"
                if missing
                else "lake columns cover the source"
                + (" (dropped source columns are kept in the lake)" if extra else "")
            ),
        },
    )


def _checksum_result(
    key: dg.AssetKey,
    schema: TableSchema,
    lake_rows: list[tuple],
    src_rows: list[tuple],
    kidx: list[int],
    base_md: dict[str, Any],
    options: CheckOptions,
    on_checksum_mismatch: Callable[[TableSchema, list[tuple], list[tuple]], str] | None,
) -> dg.AssetCheckResult:
    """The ``checksum_matches_source`` check over the compared rows (``kidx``: key column indexes),
    the whole table or ``options.checksum_sample_chunks`` key chunks; on a mismatch a sample of
    the differing keys and the ``on_checksum_mismatch`` repair text."""
    if options.checksum_sample_chunks > 0 and schema.primary_key:
        sample_keys = _sample_keys(src_rows, kidx, options.checksum_sample_chunks, options.chunk_rows)
        lake_sample = [r for r in lake_rows if tuple(r[i] for i in kidx) in sample_keys]
        src_sample = [r for r in src_rows if tuple(r[i] for i in kidx) in sample_keys]
    else:
        lake_sample, src_sample = lake_rows, src_rows
    lsum, ln = _checksum(lake_sample)
    ssum, sn = _checksum(src_sample)
    md: dict[str, Any] = {
        **base_md,
        "lake_checksum": f"{lsum:016x}",
        "source_checksum": f"{ssum:016x}",
        "rows_compared": sn,
        "scope": "whole table"
        if lake_sample is lake_rows
        else f"{options.checksum_sample_chunks} key chunks",
    }
    if lsum != ssum or ln != sn:
        lset = {tuple(r) for r in lake_sample}
        sset = {tuple(r) for r in src_sample}
        md["differing_keys_sample"] = [str(tuple(r[i] for i in kidx)) for r in list(lset ^ sset)[:10]]
        if on_checksum_mismatch is not None:
            lake_keys = {tuple(r[i] for i in kidx) for r in lset - sset}
            src_keys = {tuple(r[i] for i in kidx) for r in sset - lset}
            md["repair"] = on_checksum_mismatch(
                schema, sorted(lake_keys | src_keys, key=repr), sorted(lake_keys - src_keys, key=repr)
            )
    return dg.AssetCheckResult(
        asset_key=key, check_name=CHECKSUM, passed=lsum == ssum and ln == sn, metadata=md
    )


def _sample_keys(rows: list[tuple], kidx: list[int], chunks: int, chunk_rows: int) -> set[tuple]:
    keys = sorted((tuple(r[i] for i in kidx) for r in rows), key=repr)
    if not keys:
        return set()
    step = max(1, len(keys) // chunks)
    out: set[tuple] = set()
    for start in range(0, len(keys), step):
        out.update(keys[start : start + min(chunk_rows, step)])
        if len(out) >= chunks * chunk_rows:
            break
    return out


def retention_check(
    key: dg.AssetKey, settings: ConnectionSettings, committed: BinlogPosition | None, margin_files: int
) -> dg.AssetCheckResult:
    """``binlog_retention``: is the committed offset still (safely) on the server?"""
    conn = connect(settings)
    try:
        files = binlog_files(conn)
    finally:
        conn.close()
    names = [f for f, _ in files]
    md = {
        "committed_file": committed.file if committed else None,
        "oldest_file": names[0] if names else None,
        "binlog_files": len(names),
        "margin_files": margin_files,
    }
    if committed is None:
        return dg.AssetCheckResult(
            asset_key=key,
            check_name=RETENTION,
            passed=True,
            metadata={**md, "explanation": "nothing committed yet"},
        )
    if committed.file not in names:
        return dg.AssetCheckResult(
            asset_key=key,
            check_name=RETENTION,
            passed=False,
            metadata={
                **md,
                "explanation": f"{committed.file} was purged: streaming cannot resume; re-snapshot (snapshot_mode=when_needed)",
            },
        )
    at_risk = committed.file in names[:margin_files] and len(names) > 1
    return dg.AssetCheckResult(
        asset_key=key,
        check_name=RETENTION,
        passed=not at_risk,
        severity=dg.AssetCheckSeverity.WARN,
        metadata={
            **md,
            "explanation": (
                f"{committed.file} is among the {margin_files} oldest binlog files: it may be purged before streaming catches up"
                if at_risk
                else "committed offset is safely within retention"
            ),
        },
    )
