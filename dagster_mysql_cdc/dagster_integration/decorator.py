"""``@mysql_cdc_assets``: a multi-asset over captured tables (dagster-sling style)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import dagster as dg

from ..source.schema import TableSchema
from .translator import DagsterMySqlCdcTranslator, build_mysql_cdc_asset_specs


def mysql_cdc_assets(
    *,
    tables: Sequence[TableSchema | str],
    server_name: str,
    translator: DagsterMySqlCdcTranslator | None = None,
    name: str | None = None,
    op_tags: Mapping[str, Any] | None = None,
    pool: str | None = None,
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
    """
    specs = build_mysql_cdc_asset_specs(tables, server_name=server_name, translator=translator)
    op_name = name or "".join(ch if ch.isalnum() else "_" for ch in server_name) + "_cdc"
    return dg.multi_asset(
        name=op_name,
        specs=specs,
        can_subset=True,
        op_tags=op_tags,
        pool=pool,
    )
