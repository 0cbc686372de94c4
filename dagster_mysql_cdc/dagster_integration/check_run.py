"""A run's asset checks: which check of which asset runs how, and how its result reaches Dagster.

:func:`run_checks` (behind :meth:`.resources.MySqlCdcResource.run_checks`) orchestrates the
checks a run selected (or logs, :func:`logged_check_keys`) at the position the run committed:

- the ``binlog`` asset's checks: binlog retention (:func:`.checks.retention_check`) and the
  changes the window's binlog did not carry (:func:`.checks.gaps_check`);
- a table that was never captured fails its checks as not captured; a table whose capture is
  stopped fails its row count and checksum checks naming the stop (the lake holds it as of then);
  with ``snapshot_mode=no_data`` the whole-table comparisons that mean nothing are skipped
  (:func:`rows_not_comparable`);
- a table whose rows a repair the capture queued itself re-reads (what a DDL or a statement
  changed without row events: :func:`..engine.gaps.queued_repairs`) is *pending*
  (:func:`.checks.pending_results`: WARN, never a pass) until the run completing the repair;
- on a stream run, the row count and checksum of each table the window changed are verified for
  the window's keys, all tables at once (:func:`.verify.verify_window`); a table with no key to
  compare by, one the window may have changed without row events that no repair re-reads, one
  the run snapshotted again (a blocking snapshot after a DDL) or whose repair it completed, and
  one whose window row count differs get the full checks instead;
- every other check is a full per-table check (:func:`.checks.run_table_checks`), the tables
  sharing one consistent source snapshot (:class:`.check_source.SharedSource`) when there are several;
  a checksum mismatch, full or of a window, goes to :func:`checksum_repair` (a WARNING, and a
  targeted re-read with ``binlog_gap_handling="repair"``);
- a failure stays until repaired (:class:`_Earlier`): Dagster shows the latest result of a
  check, so a result that compared nothing, or a window's pass over other keys, reports the
  check's last divergence again (``carried_forward``) until a whole-table comparison decides it.

One table's check raising an error never stops the other tables' checks, nor fails a committed
window's run: it becomes a failed result carrying the error. :func:`report_checks` yields the
results of planned checks and logs those of logged checks as ``AssetCheckEvaluation`` events.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from functools import partial
from typing import Any

import dagster as dg

from ..engine.gaps import QueuedRepair, completed_repairs, queue_checksum_repair, queued_repairs
from ..events import BinlogPosition
from ..sink.layout import LakeLayout
from ..sink.storage import StorageSettings
from ..source.connection import ConnectionSettings, read_server_info
from ..source.schema import TableSchema
from ..source.types import TypeOptions
from .check_source import SharedSource
from .checks import (
    CHECKSUM,
    GAPS,
    NOT_COMPARED,
    RETENTION,
    ROW_COUNT,
    TABLE_CHECKS,
    CheckedTable,
    CheckOptions,
    gaps_check,
    no_data_skipped_results,
    not_captured_results,
    pending_results,
    retention_check,
    run_table_checks,
    stopped_results,
)
from .protocol import BINLOG_METADATA_KEY, SNAPSHOT_MODE_TAG
from .run_tags import last_committed, window_start_tag
from .translator import table_of_spec
from .verify import WindowVerification, verification_failed_results, verify_window

#: The checks that compare the lake's rows with the source's (a window's keys or the whole table).
ROW_CHECKS = frozenset({ROW_COUNT, CHECKSUM})

#: how long a run's checks wait for a source that does not answer (a restart or a failover takes
#: seconds: the run that committed its windows then succeeds instead of failing on its checks);
#: longer, the run fails with :class:`~..errors.SourceUnreachableError`
SOURCE_WAIT_SECONDS = 30.0


@dataclass(frozen=True)
class CheckSettings:
    """What a run's checks read of the capture's configuration
    (:meth:`.resources.MySqlCdcResource.check_settings` builds it from the resource's fields).

    Attributes:
        connection: the source server's connection settings.
        server_name: the logical server name (``topic.prefix``): the lake's first path segment.
        server_id: the capture's replication client id; the checks' binlog reads use ids above it.
        type_options: how source values are converted (the checks compare converted rows).
        options: the reconciliation checks' own options (sampling, chunk rows, retention margin).
        snapshot_mode: Debezium ``snapshot.mode`` (``no_data`` skips whole-table comparisons).
        gap_handling: ``binlog_gap_handling``: ``repair`` queues a checksum mismatch's re-read.
        signal_table: the ``db.table`` a repair's ``execute-snapshot`` signal goes to (``None``: off).
        read_only: read-only incremental snapshots (the repair writes no watermark rows).
        stream_check_max_keys: a window's checksum compares at most this many keys per table.
        commit_workers: how many tables' lake handles are loaded side by side.
    """

    connection: ConnectionSettings
    server_name: str
    server_id: int
    type_options: TypeOptions
    options: CheckOptions
    snapshot_mode: str = "initial"
    gap_handling: str = "repair"
    signal_table: str | None = None
    read_only: bool = False
    stream_check_max_keys: int = 10_000
    commit_workers: int = 8


@dataclass(frozen=True)
class CheckRequest:
    """What a run asks of its checks (:func:`run_checks`).

    Attributes:
        committed: the position this run just committed; ``None``: the last committed position
            the binlog asset reported (a checks-only run, UI "Execute checks").
        check_keys: the checks to run (``None``: the run's selected checks; a run whose checks
            are logged adds them, see :data:`.protocol.TABLE_CHECKS_TAG`).
        gaps: the changes the binlog did not carry in this run's window (``changes_in_binlog``;
            ``None``: no window was read).
        stopped: the tables whose capture is stopped after this window (``"db.table"`` ->
            ``{"since", "error"}``): their row count and checksum checks fail saying so (the lake
            holds them as of ``since``), instead of comparing.
        live_rows: the lake's live rows of the tables this run committed (state URI -> count),
            not counted again.
        tail_files: the tail files each of them committed (state URI -> relative paths): the
            window's keys are read from them alone while they are current.
        incremental_state: the incremental snapshot state after the run (``None`` on a
            checks-only run: the committed one the binlog asset reported): a table whose repair
            it still holds is *pending* (:func:`.checks.pending_results`) unless the repair
            re-reads rows a check found differing.
        chunks: the incremental-snapshot chunks the run read; a table whose repair they
            completed gets the full checks.
        snapshotted: the tables (``"db.table"``) the run snapshotted again (a blocking snapshot
            after a DDL): they get the full checks.
    """

    committed: BinlogPosition | None
    check_keys: Iterable[dg.AssetCheckKey] | None = None
    gaps: list[dict] | None = None
    stopped: Mapping[str, dict] | None = None
    live_rows: Mapping[str, int] | None = None
    tail_files: Mapping[str, list[str]] | None = None
    incremental_state: dict | None = None
    chunks: list[dict] | None = None
    snapshotted: Iterable[str] | None = None

    @classmethod
    def after_window(
        cls, committed: BinlogPosition, report: Mapping[str, Any], check_keys: Iterable[dg.AssetCheckKey]
    ) -> CheckRequest:
        """The checks of a committed window, from what the window reported
        (:meth:`.resources.MySqlCdcResource.stream`'s ``report``)."""
        return cls(
            committed,
            check_keys=check_keys,
            gaps=report.get("gaps"),
            stopped=report.get("stopped"),
            live_rows=report.get("live_rows") or {},
            tail_files=report.get("tail_files") or {},
            incremental_state=report.get("incremental_state"),
            chunks=report.get("chunks"),
            snapshotted=report.get("snapshotted"),
        )


def run_checks(
    settings: CheckSettings,
    context: dg.AssetExecutionContext,
    storage: StorageSettings,
    request: CheckRequest,
) -> Iterator[dg.AssetCheckResult]:
    """Run the reconciliation checks (:mod:`.checks`) ``request`` asks for of the lake in
    ``storage``, one ``AssetCheckResult`` per check (see the module docstring for which check
    runs how, :class:`CheckRequest` for the inputs). A generator: nothing is read before the
    first result is asked for.

    Raises:
        SourceConnectionError: the source refuses the credentials, or does not answer for
            :data:`SOURCE_WAIT_SECONDS` (one table's check raising an error is a failed result of
            that table instead).
    """
    yield from CheckRun(settings, context, storage, request).results()


class CheckRun:
    """The checks of one run (:func:`run_checks`): what the run committed, selected and left
    pending is decided once, here; each kind of check is a method.

    Args:
        settings: the capture's check settings.
        context: the run's context (its selection, tags and instance).
        storage: the lake's storage.
        request: what the run asks of its checks.
    """

    def __init__(
        self,
        settings: CheckSettings,
        context: dg.AssetExecutionContext,
        storage: StorageSettings,
        request: CheckRequest,
    ) -> None:
        self.settings, self.context, self.storage, self.request = settings, context, storage, request
        self.specs = {s.key: s for s in context.assets_def.specs}
        self.committed = request.committed if request.committed is not None else last_committed(context)
        self.info = read_server_info(settings.connection, wait_seconds=SOURCE_WAIT_SECONDS)
        self.by_asset: dict[dg.AssetKey, set[str]] = {}
        for ck in context.selected_asset_check_keys if request.check_keys is None else request.check_keys:
            self.by_asset.setdefault(ck.asset_key, set()).add(ck.name)
        self.window_start = window_start_tag(context.run.tags) if self.committed is not None else None
        # tables the window may have changed without row events and that no repair re-reads
        # (no signal table, binlog_gap_handling="warn", no primary key ...): the window's keys say
        # nothing about them, so they get the full checks, and a divergence fails (and stays failed)
        unrepaired = {
            g.get("table")
            for g in request.gaps or []
            if not str(g.get("repair", "")).startswith("Repair queued")
        }
        incremental_state = request.incremental_state
        if self.window_start is None and not context.selected_asset_keys and incremental_state is None:
            incremental_state = committed_incremental_state(context)  # a checks-only run
        completed = completed_repairs(request.chunks, incremental_state)
        self.pending = {t: r for t, r in queued_repairs(incremental_state).items() if t not in completed}
        # tables this run re-read whole (a blocking snapshot, a completed repair) or that may differ
        # without a repair: their window's keys say too little, the full checks compare them
        self.full_again = {*(request.snapshotted or ()), *completed, *unrepaired}
        self.earlier = _Earlier(context, self.pending)
        self.layout = LakeLayout(storage, settings.server_name)
        self.table_assets = [
            table_of_spec(self.specs[k])
            for k in self.by_asset
            if BINLOG_METADATA_KEY not in (self.specs[k].metadata or {})
        ]
        self.in_window: list[WindowVerification] = []
        self._shared: SharedSource | None = None  # made on the first full check of several tables

    def results(self) -> Iterator[dg.AssetCheckResult]:
        """Every check's result: the binlog asset's, each table's, then the window's."""
        from ..sink.delta import preload

        preload(  # the checked tables' state and tail, side by side (see handle_cache)
            self.storage,
            [
                uri
                for db, t in self.table_assets
                for p in (self.layout.table(db, t),)
                for uri in (p.state, p.tail)
            ],
            max(1, self.settings.commit_workers),
        )
        try:
            for asset_key, names in self.by_asset.items():
                spec = self.specs[asset_key]
                if BINLOG_METADATA_KEY in (spec.metadata or {}):
                    yield from self._binlog_checks(asset_key, names)
                else:
                    yield from self._table_checks(asset_key, *table_of_spec(spec), names)
            if self.in_window and self.committed is not None and self.window_start is not None:
                yield from self._window_checks(self.committed, self.window_start)
        finally:
            if self._shared is not None:
                self._shared.close()

    def _binlog_checks(self, key: dg.AssetKey, names: set[str]) -> Iterator[dg.AssetCheckResult]:
        """The binlog asset's checks: retention (isolated: it reads the source) and gaps."""
        if RETENTION in names:
            check = partial(
                _one,
                retention_check,
                key,
                self.settings.connection,
                self.committed,
                self.settings.options.retention_margin_files,
            )
            yield from self._isolated(key, {RETENTION}, check)
        if GAPS in names:
            yield gaps_check(key, self.request.gaps, self.settings.gap_handling)

    def _table_checks(
        self, key: dg.AssetKey, db: str, table: str, names: set[str]
    ) -> Iterator[dg.AssetCheckResult]:
        """One table's checks ``names``: not captured, stopped, skipped (``no_data``), pending;
        on a stream run the row checks of a table the window changed wait for the window's
        verification (:attr:`in_window`); the rest are full checks."""
        from ..sink.read import current_schema

        state_uri = self.layout.state(db, table)
        if self.committed is None or current_schema(self.storage, state_uri) is None:
            yield from not_captured_results(key, names)
            return
        stopped = (self.request.stopped or {}).get(f"{db}.{table}")
        if stopped is not None:
            yield from stopped_results(key, names & ROW_CHECKS, stopped)
            names = names - ROW_CHECKS
        not_comparable = rows_not_comparable(
            self.context, self.settings.snapshot_mode, self.window_start is not None
        )
        yield from no_data_skipped_results(key, names & not_comparable)
        names = names - not_comparable
        repair = self.pending.get(f"{db}.{table}")
        if repair is not None and not repair.divergence and names & ROW_CHECKS:
            # the capture's own repair re-reads the rows (a DDL, statement DML): pending
            yield from pending_results(key, names & ROW_CHECKS, repair.describe())
            names = names - ROW_CHECKS
        if self.window_start is not None and names & ROW_CHECKS and f"{db}.{table}" not in self.full_again:
            # stream run: verify what the window changed (all tables at once, _window_checks)
            self.in_window.append(
                WindowVerification(
                    key,
                    db,
                    table,
                    state_uri,
                    names & ROW_CHECKS,
                    live_rows=(self.request.live_rows or {}).get(state_uri),
                    tail_files=(self.request.tail_files or {}).get(state_uri),
                )
            )
            names = names - ROW_CHECKS
        if names:
            yield from self._full(key, db, table, state_uri, names)

    def _window_checks(
        self, committed: BinlogPosition, start: BinlogPosition
    ) -> Iterator[dg.AssetCheckResult]:
        """The row checks of the tables the window changed, verified over the window's keys
        (:func:`.verify.verify_window`); a table counted wrong, one whose window result compared
        nothing, and a keyless table get the full checks instead."""
        try:
            results, keyless = verify_window(
                tables=self.in_window,
                settings=self.settings.connection,
                info=self.info,
                storage=self.storage,
                start=start,
                reached=committed,
                type_options=self.settings.type_options,
                server_id=self.settings.server_id,
                max_keys=self.settings.stream_check_max_keys,
                on_checksum_mismatch=self._checksum_repair(committed),
            )
        except Exception as e:  # noqa: BLE001 - the window is committed: a verification error must not fail (and re-run) it
            self.context.log.warning(f"stream-run verification failed: {type(e).__name__}: {e}")
            results, keyless = verification_failed_results(self.in_window, e), []
        by_table: dict[dg.AssetKey, list[dg.AssetCheckResult]] = {}
        for r in results:
            by_table.setdefault(r.asset_key, []).append(r)  # type: ignore[arg-type]
        self.earlier.prefetch(  # one instance query for the window's tables, not one per table
            dg.AssetCheckKey(r.asset_key, r.check_name)  # type: ignore[arg-type]
            for r in results
            if self.earlier.reads(r, window=True)
        )
        for t in self.in_window:
            yield from self._settle_window(t, by_table.get(t.key, []))
        for t in keyless:  # no key to compare by: the full (multiset) checks
            yield from self._full(t.key, t.database, t.table, t.state_uri, set(t.checks))

    def _settle_window(
        self, t: WindowVerification, mine: list[dg.AssetCheckResult]
    ) -> Iterator[dg.AssetCheckResult]:
        """One table's window results ``mine``, settled against the earlier comparisons
        (:meth:`_Earlier.settle`); the full checks of those that cannot stand."""
        count = next((r for r in mine if r.check_name == ROW_COUNT), None)
        counted_wrong = (
            count is not None
            and not count.passed
            and count.severity == dg.AssetCheckSeverity.ERROR
            and f"{t.database}.{t.table}" not in self.pending
        )
        redo: set[str] = set(t.checks) if counted_wrong else set()
        for r in mine:
            if r.check_name in redo:
                continue
            settled = self.earlier.settle(r, window=True)
            if settled is None:  # compared nothing, and no earlier comparison to stand
                redo.add(r.check_name or "")
            else:
                yield settled
        if not redo:
            return
        full = list(self._full(t.key, t.database, t.table, t.state_uri, redo))
        if counted_wrong:  # the full checks find the keys (and queue their repair)
            # a WARNING only when they confirm a failure: a table renamed or dropped after the
            # committed position, for one, fails the window's count and is settled by them
            failed = any(not r.passed and r.severity == dg.AssetCheckSeverity.ERROR for r in full)
            (self.context.log.warning if failed else self.context.log.info)(
                f"{t.database}.{t.table}: the window's row count differs from the source "
                f"({count.metadata.get('explanation').value}); its full checks "  # type: ignore[union-attr]
                + ("fail" if failed else "settled it (see their results)")
            )
        yield from full

    def _full(
        self, key: dg.AssetKey, db: str, table: str, state_uri: str, names: set[str]
    ) -> Iterator[dg.AssetCheckResult]:
        """The whole-table checks ``names`` of one table (:func:`.checks.run_table_checks`),
        isolated and settled against the earlier comparisons."""
        assert self.committed is not None
        check = partial(
            run_table_checks,
            shared=self._shared_source(),
            on_checksum_mismatch=self._checksum_repair(self.committed),
            target=CheckedTable(key, db, table, state_uri),
            selected=names,
            settings=self.settings.connection,
            info=self.info,
            storage=self.storage,
            committed=self.committed,
            type_options=self.settings.type_options,
            options=self.settings.options,
            server_id=self.settings.server_id,
        )
        for r in self._isolated(key, names, check):
            yield self.earlier.full(r)

    def _shared_source(self) -> SharedSource | None:
        """The run's one source snapshot for the full checks of several tables (``None``: one)."""
        if len(self.table_assets) < 2 or self.committed is None:
            return None
        if self._shared is None:
            self._shared = SharedSource(
                self.settings.connection,
                self.info,
                self.table_assets,
                self.committed,
                self.settings.type_options,
                self.settings.server_id,
            )
        return self._shared

    def _checksum_repair(
        self, committed: BinlogPosition
    ) -> Callable[[TableSchema, list[tuple], list[tuple]], str]:
        return checksum_repair(self.settings, self.context, committed)

    def _isolated(
        self, key: dg.AssetKey, names: set[str], produce: Callable[[], Iterable[dg.AssetCheckResult]]
    ) -> Iterator[dg.AssetCheckResult]:
        """The results of ``produce``; if it raises, a failed result with the error for each
        check of ``names`` it did not report: one table's check error never stops the other
        tables' checks (or fails a committed window's run)."""
        done: set[str] = set()
        try:
            for r in produce():
                done.add(r.check_name or "")
                yield r
        except Exception as e:  # noqa: BLE001 - a failed evaluation, not a failed run
            self.context.log.error(f"checks of {key.to_user_string()} raised {type(e).__name__}: {e}")
            for n in sorted(names - done):
                yield dg.AssetCheckResult(
                    asset_key=key,
                    check_name=n,
                    passed=False,
                    severity=dg.AssetCheckSeverity.ERROR,
                    metadata={
                        "error": dg.MetadataValue.text(f"{type(e).__name__}: {e}"[:2000]),
                        "explanation": "the check raised an error (above); the other tables' checks ran",
                    },
                )


def committed_incremental_state(context: dg.AssetExecutionContext) -> dict | None:
    """The incremental snapshot state (repairs included) the binlog asset's latest
    materialization reported (``incremental_state`` metadata), ``None``: none or unknown."""
    from .protocol import binlog_asset_key

    key = binlog_asset_key(context.assets_def.specs)
    if key is None:
        return None
    ev = context.instance.get_latest_materialization_event(key)
    mat = ev.asset_materialization if ev is not None else None
    value = mat.metadata.get("incremental_state") if mat is not None else None
    state = getattr(value, "value", None)
    return state if isinstance(state, dict) and state else None


def _text(metadata: Mapping[str, Any], key: str) -> str:
    """The text of ``metadata[key]`` (a ``MetadataValue`` or a plain value; ``""`` when absent)."""
    v = metadata.get(key)
    return str(getattr(v, "value", v)) if v is not None else ""


def diverged(evaluation: Any) -> bool:
    """Whether a check evaluation is a failure that found rows differing from the source (a
    checksum's ``differing_keys_sample``, severity ERROR): a divergence that stays failed until
    its repair completes or a full check passes (a stopped table, a missing table or a check
    error are failures of another kind: the next comparison decides them)."""
    return (
        isinstance(evaluation, dg.AssetCheckEvaluation)
        and not evaluation.passed
        and evaluation.severity == dg.AssetCheckSeverity.ERROR
        and "differing_keys_sample" in (evaluation.metadata or {})
    )


class _Earlier:
    """What a run's checks know of their earlier comparisons: the Dagster instance's latest
    evaluated result of a check (read once per check, when needed). Dagster shows the latest
    evaluation of a check, so a result that compared nothing, or a window's pass over other
    keys, must not replace a divergence found before (:meth:`settle`).

    Args:
        context: the run's context (its instance is read).
        pending: the repairs still queued after the run, by ``db.table`` (named in the carried
            results).
    """

    def __init__(self, context: Any, pending: Mapping[str, QueuedRepair] | None = None) -> None:
        self._context = context
        self._pending = pending or {}
        self._seen: dict[dg.AssetCheckKey, tuple[Any, dg.AssetCheckEvaluation] | None] = {}

    def latest(self, ck: dg.AssetCheckKey) -> tuple[Any, dg.AssetCheckEvaluation] | None:
        """``(record, evaluation)`` of ``ck``'s latest evaluated result before this run's."""
        if ck not in self._seen:
            self.prefetch([ck])
        return self._seen.get(ck)

    def prefetch(self, cks: Iterable[dg.AssetCheckKey]) -> None:
        """Read the latest evaluated results of the checks ``cks`` not read yet, in one instance
        query (:func:`.heartbeat.latest_check_results`): a window's checks settle each of its
        tables' checksums. A read that fails leaves this run's results as they are."""
        from .heartbeat import latest_check_results

        wanted = [ck for ck in dict.fromkeys(cks) if ck not in self._seen]
        if not wanted:
            return
        try:
            recs = latest_check_results(self._context.instance, wanted)
        except Exception as e:  # noqa: BLE001 - then this run's results stand as they are
            names = ", ".join(ck.to_user_string() for ck in wanted[:3]) + (", ..." if len(wanted) > 3 else "")
            self._context.log.warning(
                f"the last results of {len(wanted)} check(s) ({names}) could not be read: {e}"
            )
            recs = {}
        for ck in wanted:
            rec = recs.get(ck)
            ev = rec.evaluation if rec is not None else None
            self._seen[ck] = (rec, ev) if isinstance(ev, dg.AssetCheckEvaluation) else None

    @staticmethod
    def reads(r: dg.AssetCheckResult, *, window: bool) -> bool:
        """Whether :meth:`settle` of ``r`` reads the check's earlier result."""
        if r.asset_key is None or r.check_name not in (ROW_COUNT, CHECKSUM):
            return False
        if NOT_COMPARED in (r.metadata or {}):
            return True
        new_divergence = not r.passed and r.severity == dg.AssetCheckSeverity.ERROR
        return window and r.check_name == CHECKSUM and not new_divergence

    def settle(self, r: dg.AssetCheckResult, *, window: bool) -> dg.AssetCheckResult | None:
        """The result to report for ``r``, one of this run's row count or checksum results
        (``window``: compared over the window's keys, not the whole table):

        - ``r`` compared nothing (:data:`.checks.NOT_COMPARED`): the check's last comparison,
          carried forward with what this run saw, when it passed or found a divergence; else
          ``r`` itself (a WARN saying so), or ``None`` for a window's checksum (the caller runs
          the full check instead);
        - a window's checksum that did not fail anew: the divergence the check found before, if
          it has not been repaired since (the full checks and the run completing the repair
          compare the whole table), carried forward with this window's result;
        - anything else is ``r``.
        """
        if not self.reads(r, window=window):
            return r  # another check, a full comparison, or a divergence found now
        assert r.asset_key is not None and r.check_name is not None
        not_compared = NOT_COMPARED in (r.metadata or {})
        found = self.latest(dg.AssetCheckKey(r.asset_key, r.check_name))
        if found is not None:
            rec, ev = found
            if diverged(ev) or (not_compared and ev.passed):
                return self._carried(r, rec, ev)
        if not_compared and window:
            return None
        return r

    def full(self, r: dg.AssetCheckResult) -> dg.AssetCheckResult:
        """:meth:`settle` of a whole-table (full) check's result."""
        out = self.settle(r, window=False)
        assert out is not None  # only a window's result can be left to the full check
        return out

    def _carried(self, r: dg.AssetCheckResult, rec: Any, ev: dg.AssetCheckEvaluation) -> dg.AssetCheckResult:
        from datetime import UTC, datetime

        when = rec.event.timestamp if getattr(rec, "event", None) is not None else rec.create_timestamp
        at = datetime.fromtimestamp(when, UTC).isoformat(timespec="seconds")
        this_run = _text(r.metadata or {}, "explanation") or "compared nothing"
        if ev.passed:
            note = f"this run {this_run}; the last comparison (run {rec.run_id[:8] or 'none'}, {at}) passed and stands"
        else:
            table = (
                "{}.{}".format(*r.asset_key.path[-2:]) if r.asset_key and len(r.asset_key.path) >= 2 else ""
            )
            repair = self._pending.get(table)
            note = (
                f"the divergence found by run {rec.run_id[:8] or 'none'} ({at}) stands until it is "
                + (f"repaired ({repair.describe()})" if repair is not None else "repaired")
                + f" or a full check (Execute checks) passes; this run: {this_run}"
            )
        return dg.AssetCheckResult(
            asset_key=r.asset_key,
            check_name=r.check_name,
            passed=ev.passed,
            severity=ev.severity,
            description=ev.description,
            metadata={**(ev.metadata or {}), "carried_forward": dg.MetadataValue.text(note[:2000])},
        )


def checksum_repair(
    settings: CheckSettings, context: dg.AssetExecutionContext, committed: BinlogPosition
) -> Callable[[TableSchema, list[tuple], list[tuple]], str]:
    """The ``checksum_matches_source`` failure handler: logs a WARNING naming the table and
    position and, with ``binlog_gap_handling="repair"``, writes an ``execute-snapshot`` signal
    that re-reads the differing keys' ranges (:func:`..engine.gaps.queue_checksum_repair`)."""
    return partial(
        queue_checksum_repair,
        settings.connection,
        committed=committed,
        gap_handling=settings.gap_handling,
        signal_table=settings.signal_table,
        read_only=settings.read_only,
        log=context.log,
    )


def rows_not_comparable(context: dg.AssetExecutionContext, snapshot_mode: str, stream: bool) -> set[str]:
    """Checks whose whole-table comparison means nothing with ``snapshot_mode=no_data``: the
    row count on stream runs, row count and checksum on the (schema-only) snapshot runs.
    Checks-only runs (``Execute checks``) always compare."""
    if stream:
        return {ROW_COUNT} if snapshot_mode == "no_data" else set()
    if context.selected_asset_keys and context.run.tags.get(SNAPSHOT_MODE_TAG, snapshot_mode) == "no_data":
        return {ROW_COUNT, CHECKSUM}
    return set()


def logged_check_keys(context: dg.AssetExecutionContext) -> list[dg.AssetCheckKey]:
    """The checks a run with ``TABLE_CHECKS_TAG=logged`` evaluates and logs: the table checks of
    every table asset it materializes (selected) and the binlog asset's (``binlog_retention``,
    ``changes_in_binlog``) when it materializes that, except those the run plans itself (a
    request from before the binlog asset's checks were logged too planned them)."""
    selected = set(context.selected_asset_keys)
    planned = set(context.selected_asset_check_keys)
    # every check the op defines (the run's subset ``check_keys`` holds only the selected ones)
    specs = getattr(context.assets_def, "node_check_specs_by_output_name", None)
    defined = [s.key for s in specs.values()] if specs else list(context.assets_def.check_keys)
    return [
        ck
        for ck in defined
        if ck.asset_key in selected and ck.name in (*TABLE_CHECKS, RETENTION, GAPS) and ck not in planned
    ]


def report_checks(
    context: dg.AssetExecutionContext, results: Iterable[dg.AssetCheckResult], logged: set[dg.AssetCheckKey]
) -> Iterator[dg.AssetCheckResult]:
    """Yield ``results`` of the run's planned checks; log those of ``logged`` checks as
    ``AssetCheckEvaluation`` events (what Dagster stores for a planned check's result, pointing
    at the table's materialization the same way: the latest, read once for all tables)."""
    targets: dict[dg.AssetKey, Any] | None = None
    for r in results:
        key = dg.AssetCheckKey(r.asset_key, r.check_name or "") if r.asset_key is not None else None
        if key is None or key not in logged:
            yield r
            continue
        if targets is None:
            targets = materialization_targets(context, {ck.asset_key for ck in logged})
        context.log_event(check_evaluation(r, targets.get(key.asset_key)))


def check_evaluation(r: dg.AssetCheckResult, target: Any) -> dg.AssetCheckEvaluation:
    """The ``AssetCheckEvaluation`` event Dagster stores for result ``r`` of a planned check,
    pointing at ``target`` (the table's materialization it checks, :func:`materialization_targets`;
    ``None``: none)."""
    assert r.asset_key is not None
    return dg.AssetCheckEvaluation(
        asset_key=r.asset_key,
        check_name=r.check_name or "",
        passed=r.passed,
        metadata=r.metadata,
        severity=r.severity,
        description=r.description,
        target_materialization_data=target,
    )


def materialization_targets(
    context: dg.AssetExecutionContext, keys: set[dg.AssetKey]
) -> dict[dg.AssetKey, Any]:
    """Per asset of ``keys``, its latest materialization as a check evaluation's target (one
    instance query for all of them); assets never materialized are left out."""
    from dagster._core.definitions.asset_checks.asset_check_evaluation import (
        AssetCheckEvaluationTargetMaterializationData as Target,
    )

    out: dict[dg.AssetKey, Any] = {}
    for rec in context.instance.get_asset_records(list(keys)):
        last = rec.asset_entry.last_materialization_record
        if last is not None:
            out[rec.asset_entry.asset_key] = Target(
                storage_id=last.storage_id, run_id=last.run_id, timestamp=last.timestamp
            )
    return out


def _one(check: Callable[..., dg.AssetCheckResult], *args: Any) -> list[dg.AssetCheckResult]:
    """``[check(*args)]``: a single check as the result list :func:`run_checks` isolates."""
    return [check(*args)]


class _DeferredLog:
    """A logger that records ``debug/info/warning/error/exception/critical`` calls and replays
    them, in order, on the run's logger (:meth:`replay`): Dagster's log manager writes events to
    the instance and is used from the run's thread only."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, tuple, dict]] = []

    def _record(self, level: str) -> Callable[..., None]:
        return lambda *args, **kwargs: self.calls.append((level, args, kwargs))

    def __getattr__(self, level: str) -> Callable[..., None]:
        if level not in ("debug", "info", "warning", "warn", "error", "exception", "critical"):
            raise AttributeError(level)
        return self._record(level)

    def replay(self, log: Any) -> None:
        for level, args, kwargs in self.calls:
            getattr(log, level)(*args, **kwargs)
        self.calls.clear()


class _CheckThreadContext:
    """The run's context as the checks thread sees it: everything read from the run's context
    except ``log``, which is deferred to the run's thread (:class:`_DeferredLog`)."""

    def __init__(self, context: dg.AssetExecutionContext, log: _DeferredLog) -> None:
        self._context = context
        self.log = log

    def __getattr__(self, name: str) -> Any:
        return getattr(self._context, name)


class BackgroundChecks:
    """A window run's checks (:func:`run_checks`) evaluated on a thread of their own, started
    as soon as the window is committed, while the run's thread reports the window's
    materializations to Dagster (issue 28: storing a 300-table window's events and checking its
    300 tables no longer add up; the checks read the lake and the source, mostly outside the
    GIL). The run's thread hands its Delta handles over (:func:`..sink.delta.release_handles`),
    so the checks refresh the tables instead of loading them again.

    The results are the same as the checks' on the run's thread and reach Dagster after the
    materializations they check (:meth:`results`); what the checks log is logged then too.
    Nothing of the window depends on them: it is committed before they start.

    Args:
        evaluate: ``evaluate(context) -> results`` (e.g. a ``partial`` of
            :meth:`.resources.MySqlCdcResource.run_checks`, called with a stand-in for
            ``context`` whose ``log`` is deferred).
        context: the run's context.
    """

    def __init__(
        self,
        evaluate: Callable[[Any], Iterable[dg.AssetCheckResult]],
        context: dg.AssetExecutionContext,
    ) -> None:
        import threading

        from ..sink.delta import release_handles

        self._context = context
        self._log = _DeferredLog()
        self._handles = release_handles()
        self._results: list[dg.AssetCheckResult] = []
        self._error: BaseException | None = None
        self._evaluate = evaluate
        self._thread = threading.Thread(target=self._run, name="cdc-checks", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        from ..sink.delta import adopt, handle_cache, release_handles

        try:
            # the checks write nothing to the lake: each table is refreshed once (see handle_cache)
            with handle_cache(sole_writer=True):
                for uri, dt in self._handles.items():
                    adopt(uri, dt)
                self._handles = {}
                try:
                    self._results = list(self._evaluate(_CheckThreadContext(self._context, self._log)))
                finally:
                    self._handles = release_handles()  # back to the run's thread (results())
        except BaseException as e:  # noqa: BLE001 - re-raised on the run's thread by results()
            self._error = e

    def done(self, wait: float = 0.0) -> bool:
        """Whether the checks have finished (:meth:`results` then returns at once), waiting up
        to ``wait`` seconds for them."""
        if wait > 0:
            self._thread.join(wait)
        return not self._thread.is_alive()

    def results(self) -> list[dg.AssetCheckResult]:
        """Wait for the checks; their results, once their log lines are logged on the run. The
        Delta handles the checks used go back to the calling thread's cache
        (:func:`..sink.delta.adopt`: brought up to date at their next open), so a window the
        run reads after them does not load its tables again.

        Raises:
            whatever :func:`run_checks` raised (e.g. the source is unreachable).
        """
        from ..sink.delta import adopt

        self._thread.join()
        handles, self._handles = self._handles, {}
        for uri, dt in handles.items():
            adopt(uri, dt)
        self._log.replay(self._context.log)
        if self._error is not None:
            raise self._error
        return self._results
