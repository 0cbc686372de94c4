"""``@mysql_cdc_assets``: a multi-asset over captured tables (dagster-sling style)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import dagster as dg

from ..source.schema import TableSchema
from .checks import binlog_check_specs, table_check_specs
from .translator import BINLOG_METADATA_KEY, DagsterMySqlCdcTranslator, build_mysql_cdc_asset_specs


def mysql_cdc_assets(
    *,
    tables: Sequence[TableSchema | str],
    server_name: str,
    translator: DagsterMySqlCdcTranslator | None = None,
    name: str | None = None,
    op_tags: Mapping[str, Any] | None = None,
    pool: str | None = None,
    checks: bool = True,
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
    """
    specs = build_mysql_cdc_asset_specs(tables, server_name=server_name, translator=translator)
    op_name = name or "".join(ch if ch.isalnum() else "_" for ch in server_name) + "_cdc"
    check_specs = []
    if checks:
        for spec in specs:
            if BINLOG_METADATA_KEY in (spec.metadata or {}):
                check_specs += binlog_check_specs(spec.key)
            else:
                check_specs += table_check_specs(spec.key)
    return dg.multi_asset(
        name=op_name,
        specs=specs,
        check_specs=check_specs or None,
        can_subset=True,
        op_tags=op_tags,
        pool=pool,
    )
