"""``@mysql_cdc_assets``: a multi-asset over captured tables (dagster-sling style)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import dagster as dg

from ..source.schema import TableSchema
from .checks import binlog_check_specs, table_check_specs
from .protocol import BINLOG_METADATA_KEY
from .translator import (
    DagsterMySqlCdcTranslator,
    build_mysql_cdc_asset_specs,
    freshness_policy_for_interval,
)


def mysql_cdc_assets(
    *,
    tables: Sequence[TableSchema | str],
    server_name: str,
    translator: DagsterMySqlCdcTranslator | None = None,
    name: str | None = None,
    op_tags: Mapping[str, Any] | None = None,
    pool: str | None = None,
    checks: bool = True,
    sensor_interval_seconds: int = 30,
    stream_follow_seconds: float = 300.0,
    freshness_policy: dg.FreshnessPolicy | None | bool = True,
    table_freshness_policy: dg.FreshnessPolicy | None | bool = True,
    check_automation_condition: dg.AutomationCondition | None = None,
) -> Callable[[Callable[..., Any]], dg.AssetsDefinition]:
    """Decorate a function that materializes captured tables; one asset per table.

    The multi-asset is subsettable: materializing one table from the UI snapshots only that
    table. The body usually is ``yield from mysql.sync(context=context, lake=lake)``::

        @mysql_cdc_assets(tables=mysql.discover_tables(), server_name=mysql.server_name)
        def inventory(context: dg.AssetExecutionContext, mysql: MySqlCdcResource, lake: CdcLakeResource):
            yield from mysql.sync(context=context, lake=lake)

    Args:
        tables: captured tables, as schemas (preferred: column schema and comments in the UI) or
            ``"database.table"`` names.
        server_name: logical server name (must equal the resource's ``server_name``).
        translator: asset spec hooks.
        name: op name (default ``<server_name>_cdc``; must be a valid Python identifier).
        op_tags / pool: passed to ``dg.multi_asset`` (e.g. a pool to serialise snapshots).
        checks: attach the reconciliation asset checks (:mod:`.checks`) to every table and the
            binlog-retention check to the binlog asset.
        sensor_interval_seconds: the binlog sensor's ``minimum_interval_seconds`` (pass the same
            value to :func:`build_mysql_cdc_sensor`); the default freshness policy derives from it.
        stream_follow_seconds: the resource's ``stream_follow_seconds`` (a following stream run
            materializes once, at its end): added to the default freshness policy's windows.
        freshness_policy: the binlog asset's freshness policy; ``True`` (default) derives it from
            ``sensor_interval_seconds`` (:func:`.translator.freshness_policy_for_interval`),
            ``None``/``False`` sets none. The binlog asset materializes every window and, while the
            server is idle, with the sensor's heartbeat: it is the capture's freshness.
        table_freshness_policy: a freshness policy for every table asset; ``True`` (default)
            derives it from ``sensor_interval_seconds`` like the binlog asset's; ``None``/``False``
            sets none. A table materializes only when a window changes it, so the sensor reports a
            runless heartbeat of each quiet table with a policy (every half warn window, its check
            results carried forward: :func:`.heartbeat.table_heartbeats`). A translator's own
            policy wins.
        check_automation_condition: automation condition of the table checks, e.g.
            ``dg.AutomationCondition.on_cron("0 3 * * *")`` for nightly full checks (a checks-only
            run re-reads the whole table); needs the automation sensor. See also
            :func:`.verify.build_full_checks_schedule`.
    """
    specs = build_mysql_cdc_asset_specs(tables, server_name=server_name, translator=translator)
    derived = freshness_policy_for_interval(sensor_interval_seconds, stream_follow_seconds)
    binlog_policy = derived if freshness_policy is True else (freshness_policy or None)
    table_policy = derived if table_freshness_policy is True else (table_freshness_policy or None)
    specs = [
        s.replace_attributes(freshness_policy=binlog_policy)
        if BINLOG_METADATA_KEY in (s.metadata or {})
        else (
            s.replace_attributes(freshness_policy=table_policy)
            if table_policy is not None and s.freshness_policy is None
            else s
        )
        for s in specs
    ]
    op_name = name or "".join(ch if ch.isalnum() else "_" for ch in server_name) + "_cdc"
    check_specs = []
    if checks:
        for spec in specs:
            if BINLOG_METADATA_KEY in (spec.metadata or {}):
                check_specs += binlog_check_specs(spec.key)
            else:
                check_specs += table_check_specs(spec.key, automation_condition=check_automation_condition)
    return dg.multi_asset(
        name=op_name,
        specs=specs,
        check_specs=check_specs or None,
        can_subset=True,
        op_tags=op_tags,
        pool=pool,
    )
