"""Runless heartbeat materializations the binlog sensor reports (Debezium's heartbeat, as Dagster
sees it): the capture's freshness while nothing changes.

Dagster evaluates a freshness policy on an asset's last materialization only
(``TimeWindowFreshnessPolicyEvaluator``, Dagster 1.13). A window run materializes the binlog asset
and the tables the window changed; so without a heartbeat an idle server would read as a stalled
capture on the binlog asset, and a quiet table as stale although every change of it is in the lake.

- :func:`idle_heartbeat`: the binlog asset, while the server is idle (caught up).
- :func:`table_heartbeats`: every table asset that has a freshness policy and was not materialized
  for half its warn window, while the capture is current (caught up, or a window run succeeded
  within that time). Its last check results are carried forward with it: a table the binlog did
  not change since its last materialization is still what those checks verified (a change to it
  always materializes it: window runs select every table they change, snapshots and repairs
  materialize what they read), so its checks stay evaluated instead of reading *Not evaluated*.

Both are runless events (``SensorResult.asset_events``): they never show a table as
*Materializing* and start no run. A heartbeat keeps the asset's data version (Dagster's
``dagster/data_version`` tag of its last materialization, :func:`unchanged_data_version`): the
data did not change, so ``AutomationCondition.data_version_changed()`` stays false for it, and a
downstream asset whose automation condition is built on it (``assets/downstream.py``: ``eager()``
with ``newly_updated`` replaced by ``data_version_changed``) runs only when the data changed, and
the UI does not show it as *Unsynced* after a heartbeat.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Collection, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

import dagster as dg
from dagster._core.definitions.data_version import DATA_VERSION_TAG

from ..events import BinlogPosition
from .checks import GAPS, RETENTION, gaps_check, retention_check
from .protocol import (
    BINLOG_METADATA_KEY,
    TABLE_METADATA_KEY,
    binlog_asset_key,
    position_from_metadata,
    position_metadata,
)
from .translator import table_of_spec

log = logging.getLogger(__name__)


def unchanged_data_version(last: dg.EventLogEntry | None) -> dict[str, str]:
    """The tags that give a heartbeat the data version of ``last``, the asset's latest
    materialization (``{}`` when it has none): a heartbeat reports that the data is unchanged,
    so its data version must not change either (Dagster compares the data versions of an asset's
    materializations for ``AutomationCondition.data_version_changed()`` and for staleness)."""
    version = (last.tags or {}).get(DATA_VERSION_TAG) if last is not None else None
    return {DATA_VERSION_TAG: version} if version else {}


#: Metadata of a table's last materialization that a heartbeat repeats (the table did not change).
CARRIED_METADATA = ("dagster/row_count", "dagster/uri", "dagster/table_name")

#: per instance (its root directory: the daemon's code server evaluates each tick with a new
#: ``DagsterInstance`` object of the same instance), binlog asset and set of stopped tables: the
#: earliest time a table's heartbeat can be due, as the last scan found it (a later
#: materialization only moves a table's due time later). Until then a tick reads no table's
#: latest materialization: at 1,000 tables that read is ~0.5 s per tick.
_not_before: dict[tuple, float] = {}


def idle_heartbeat(
    instance: dg.DagsterInstance,
    assets_def: dg.AssetsDefinition,
    committed: BinlogPosition | None,
    reason: str,
    every_seconds: float,
    mysql=None,
    retention_margin_files: int = 1,
) -> list[dg.AssetMaterialization | dg.AssetCheckEvaluation]:
    """The binlog asset's heartbeat while the server is idle (a runless materialization reported by
    the sensor), at most once per ``every_seconds``.

    A window run materializes the binlog asset; with nothing new on the server no run is requested,
    so without a heartbeat its freshness policy would read an idle server as a stalled capture. The
    heartbeat carries the committed position (``window_end_*``, as a window run reports it) and the
    tick's reason, followed by results of the binlog asset's checks for it (``changes_in_binlog``:
    no window was read; ``binlog_retention`` when ``mysql`` is given), so they stay evaluated.
    Returns ``[]`` when not caught up or the last materialization is recent.
    """
    if committed is None or not reason.startswith("caught up"):
        return []
    key = binlog_asset_key(assets_def.specs)
    if key is None:
        return []
    last = instance.get_latest_materialization_event(key)
    if last is not None and time.time() - last.timestamp < every_seconds:
        return []
    beat = [
        dg.AssetMaterialization(
            asset_key=key,
            description=f"Heartbeat: {reason}",
            metadata={
                "kind": "heartbeat",
                **position_metadata("window_end", committed),
                "behind_head_bytes": dg.MetadataValue.int(0),
                "lag_seconds": dg.MetadataValue.float(0.0),
                "sensor": reason,
            },
            tags=unchanged_data_version(last),
        )
    ]
    names = {ck.name for ck in assets_def.check_keys if ck.asset_key == key}
    results: list[dg.AssetCheckResult] = []
    if GAPS in names:
        results.append(gaps_check(key, None, "idle"))
    if RETENTION in names and mysql is not None:
        try:
            results.append(
                retention_check(key, mysql.connection_settings(), committed, retention_margin_files)
            )
        except Exception as e:  # noqa: BLE001 - the heartbeat must not fail the tick
            log.warning("binlog_retention in the heartbeat failed: %s", e)
    return [
        *beat,
        *(
            dg.AssetCheckEvaluation(
                asset_key=key,
                check_name=r.check_name or "",
                passed=r.passed,
                metadata=r.metadata,
                severity=r.severity,
            )
            for r in results
        ),
    ]


def heartbeat_every(policy: dg.FreshnessPolicy | None, default: float) -> float:
    """Seconds between heartbeats of an asset with freshness policy ``policy``: half its warn
    window (else half its fail window) for a time-window policy, ``default`` for any other."""
    warn = getattr(policy, "warn_window", None)
    fail = getattr(policy, "fail_window", None)
    window = warn or fail
    if window is None:
        return default
    return max(1.0, window.to_timedelta().total_seconds() / 2)


def _binlog_progress(
    instance: dg.DagsterInstance, key: dg.AssetKey, caught_up_at: BinlogPosition | None, now: float
) -> tuple[BinlogPosition, float] | None:
    """``(position, as-of epoch seconds)`` the capture is known current to: the committed offset now
    when caught up, else the end of the binlog asset's last materialized window."""
    if caught_up_at is not None:
        return caught_up_at, now
    last = instance.get_latest_materialization_event(key)
    mat = last.asset_materialization if last is not None else None
    if mat is None:
        return None
    try:
        pos = position_from_metadata(mat.metadata, "window_end")
    except (TypeError, ValueError):
        return None
    return (pos, last.timestamp) if pos is not None else None  # type: ignore[union-attr]


def latest_check_result(instance: dg.DagsterInstance, ck: dg.AssetCheckKey):
    """The latest *evaluated* record of check ``ck`` (status ``SUCCEEDED``/``FAILED``), or ``None``
    (:func:`latest_check_results` of ``[ck]``)."""
    return latest_check_results(instance, [ck])[ck]


def latest_check_results(instance: dg.DagsterInstance, cks: Sequence[dg.AssetCheckKey]) -> dict:
    """``{check key: its latest *evaluated* record or None}`` for every key of ``cks``: one query
    of the event log storage for all of them (``get_latest_asset_check_execution_by_key``; a
    window of 300 tables used to read 300 times, 3 s of the run), plus one for each check whose
    latest record is not evaluated.

    The latest record may be a ``PLANNED`` one whose event is an ``AssetCheckEvaluationPlanned``
    (no ``passed``): a run that planned the check and then failed (a preflight error, a crashed
    *Execute checks*) leaves one; the check's latest evaluated record is then read from its
    execution history.
    """
    from dagster._core.storage.asset_check_execution_record import AssetCheckExecutionRecordStatus as S

    done = {S.SUCCEEDED, S.FAILED}
    storage = instance.event_log_storage
    latest = storage.get_latest_asset_check_execution_by_key(list(cks)) if cks else {}
    out = {}
    for ck in cks:
        rec = latest.get(ck)
        if rec is not None and rec.status not in done:
            history = storage.get_asset_check_execution_history(ck, limit=1, status=done)
            rec = history[0] if history else None
        out[ck] = rec
    return out


def _checks_by_asset(assets_def: dg.AssetsDefinition) -> dict[dg.AssetKey, list[dg.AssetCheckKey]]:
    """The checks of each asset of ``assets_def``, by name."""
    out: dict[dg.AssetKey, list[dg.AssetCheckKey]] = {}
    for ck in sorted(assets_def.check_keys, key=lambda c: c.name):
        out.setdefault(ck.asset_key, []).append(ck)
    return out


def _carried_checks(
    records: Mapping[dg.AssetCheckKey, Any],
    checks: Sequence[dg.AssetCheckKey],
    key: dg.AssetKey,
    last: dg.EventLogEntry,
    note: str,
) -> list[dg.AssetCheckEvaluation]:
    """The results of ``key``'s ``checks`` that were current for its last materialization
    ``last``, reported again with ``note`` (checks without such a result are left as they are);
    ``records``: the checks' latest evaluated records (:func:`latest_check_results`)."""
    out = []
    for ck in checks:
        rec = records.get(ck)
        ev = rec.evaluation if rec is not None else None
        if rec is None or not isinstance(ev, dg.AssetCheckEvaluation):
            continue
        same_run = bool(last.run_id) and rec.run_id == last.run_id  # runless events share run id ''
        evaluated_at = rec.event.timestamp if rec.event is not None else rec.create_timestamp
        if not same_run and evaluated_at < last.timestamp:
            continue  # not evaluated for the last materialization: nothing to carry
        out.append(
            dg.AssetCheckEvaluation(
                asset_key=key,
                check_name=ck.name,
                passed=ev.passed,
                metadata={**ev.metadata, "carried_forward": dg.MetadataValue.text(note)},
                severity=ev.severity,
                description=ev.description,
            )
        )
    return out


def _fresh_tables(assets_def: dg.AssetsDefinition, stopped: Collection[str]) -> list[dg.AssetSpec]:
    """The table assets of ``assets_def`` that have a freshness policy, but those of the
    ``stopped`` tables (``"db.table"``)."""
    return [
        s
        for s in assets_def.specs
        if TABLE_METADATA_KEY in (s.metadata or {})
        and BINLOG_METADATA_KEY not in (s.metadata or {})
        and s.freshness_policy is not None
        and (not stopped or "{}.{}".format(*table_of_spec(s)) not in stopped)
    ]


def _table_heartbeat(
    records: Mapping[dg.AssetCheckKey, Any],
    checks: Sequence[dg.AssetCheckKey],
    key: dg.AssetKey,
    last: dg.EventLogEntry,
    mat: dg.AssetMaterialization,
    at: BinlogPosition,
    as_of: float,
    reason: str,
) -> list[dg.AssetMaterialization | dg.AssetCheckEvaluation]:
    """One table's heartbeat: a materialization of ``key`` saying the lake is current to ``at``
    (as of ``as_of``, epoch seconds) with the metadata carried from its last materialization
    ``mat`` (event ``last``), then its check results carried forward (:func:`_carried_checks` of
    ``records``)."""
    since = datetime.fromtimestamp(last.timestamp, UTC).isoformat(timespec="seconds")
    note = f"no change to this table in the binlog since {since} (run {last.run_id[:8] or 'none'})"
    md = {k: mat.metadata[k] for k in CARRIED_METADATA if k in mat.metadata}
    beat: list[dg.AssetMaterialization | dg.AssetCheckEvaluation] = [
        dg.AssetMaterialization(
            asset_key=key,
            description=f"Heartbeat: {note}; the lake is current to {at.file}:{at.pos} ({reason})",
            metadata={
                **md,
                "kind": "heartbeat",
                **position_metadata("window_end", at),
                "current_as_of": dg.MetadataValue.timestamp(as_of),
                "unchanged_since": dg.MetadataValue.timestamp(last.timestamp),
            },
            tags=unchanged_data_version(last),
        )
    ]
    return beat + _carried_checks(records, checks, key, last, note)


def table_heartbeats(
    instance: dg.DagsterInstance,
    assets_def: dg.AssetsDefinition,
    caught_up_at: BinlogPosition | None,
    reason: str,
    *,
    default_every_seconds: float,
    every_seconds: float | None = None,
    now: float | None = None,
    errors: list[str] | None = None,
    stopped: Collection[str] = (),
) -> list[dg.AssetMaterialization | dg.AssetCheckEvaluation]:
    """Heartbeats of the quiet table assets that have a freshness policy (see module docs).

    Args:
        instance: the Dagster instance (latest materializations and check results are read).
        assets_def: the multi-asset of :func:`.decorator.mysql_cdc_assets`.
        caught_up_at: the committed offset when the tick found the capture caught up, else ``None``
            (the capture is then current to the binlog asset's last window end, if that window
            succeeded less than a table's heartbeat interval ago).
        reason: the tick's reason, repeated in each heartbeat's description.
        default_every_seconds: heartbeat interval of tables whose policy has no time window.
        every_seconds: one heartbeat interval for every table instead of half its warn window.
        now: epoch seconds (default: the clock).
        errors: a table whose heartbeat raises is left out (the others still get theirs) and the
            error is appended here (the sensor reports it in the tick's log and in its health).
        stopped: ``"db.table"`` names of the tables whose capture is stopped (the sensor cursor's):
            they get no heartbeat, so their freshness goes stale while they are not captured.

    Returns:
        Per table, one ``AssetMaterialization`` (``kind=heartbeat``, the position the table is
        current to, its carried row count / URI / table name) followed by its carried check
        results; ``[]`` when no table is due. A table never materialized gets none (its freshness
        stays unknown until its snapshot).
    """
    now = time.time() if now is None else now
    binlog_key = binlog_asset_key(assets_def.specs)
    if binlog_key is None:
        return []
    tables = _fresh_tables(assets_def, stopped)
    if not tables:
        return []
    memo = _not_before
    memo_key = (instance.root_directory, binlog_key, frozenset(stopped))
    if now < memo.get(memo_key, float("-inf")):
        return []  # no table can be due yet (see _not_before)
    progress = _binlog_progress(instance, binlog_key, caught_up_at, now)
    if progress is None:
        return []
    at, as_of = progress
    latest = instance.get_latest_materialization_events([s.key for s in tables])
    events: list[dg.AssetMaterialization | dg.AssetCheckEvaluation] = []
    due: list[tuple[dg.AssetSpec, dg.EventLogEntry, dg.AssetMaterialization, float]] = []
    next_due = float("inf")  # the earliest any table can be due after this tick
    stamp = min(now, time.time())  # when a materialization from now on is stamped, at the earliest
    for spec in tables:
        every = every_seconds or heartbeat_every(spec.freshness_policy, default_every_seconds)
        last = latest.get(spec.key)
        mat = last.asset_materialization if last is not None else None
        if last is None or mat is None:
            next_due = min(next_due, stamp + every)  # materialized from now on at the earliest
            continue
        if now - last.timestamp < every:
            next_due = min(next_due, last.timestamp + every)
            continue
        if now - as_of >= every:
            next_due = now  # due, but the lake is not current: look again next tick
            continue
        due.append((spec, last, mat, every))
    try:  # the due tables' check results, in one query (300 tables made 900)
        checks = _checks_by_asset(assets_def)
        records = latest_check_results(instance, [ck for s, *_ in due for ck in checks.get(s.key, [])])
        read_error: Exception | None = None
    except Exception as e:  # noqa: BLE001 - then every due table's heartbeat fails alone, below
        checks, records, read_error = {}, {}, e
    for spec, last, mat, every in due:
        try:
            if read_error is not None:
                raise read_error
            beat = _table_heartbeat(records, checks.get(spec.key, []), spec.key, last, mat, at, as_of, reason)
        except Exception as e:  # noqa: BLE001 - one table's heartbeat never stops the others or the tick
            message = f"heartbeat of {spec.key.to_user_string()} failed: {type(e).__name__}: {e}"
            log.warning(message)
            if errors is not None:
                errors.append(message)
            next_due = now
            continue
        next_due = min(next_due, stamp + every)  # its heartbeat restarts its interval
        events += beat
    memo[memo_key] = next_due
    return events
