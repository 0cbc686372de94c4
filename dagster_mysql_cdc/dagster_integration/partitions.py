"""Per-table primary-key-range partitions: backfills re-snapshot exactly the chosen key ranges.

Dagster gives all assets of one definition a single ``partitions_def``, and the table assets are
one multi-asset with the binlog stream, so each table gets a companion asset
``[server, db, "<table>_pk_ranges"]`` (group ``<db>_pk_ranges``, apart from the tables) with its
own ``DynamicPartitionsDefinition``: one partition
per key range of about ``pk_range_rows`` rows, keys ``r000000, r000001, ...`` in key order. The
ranges are recomputed after every snapshot of the table (:meth:`MySqlCdcResource.snapshot`).
Materializing partitions (a backfill) re-snapshots those ranges with the watermark method
(:mod:`dagster_mysql_cdc.engine.ranges`), safe while the sensor streams; each range's materialization
reports the backfill's progress (ranges done/total, rows, %) on the range asset.

:func:`refresh_pk_range_partitions` recomputes and stores a table's ranges
(:func:`..engine.snapshot_run.refresh_key_ranges`) and registers them as its partition keys.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import dagster as dg

from ..sink.storage import StorageSettings
from ..source.schema import TableSchema
from .translator import dagster_name, table_asset_key


def pk_ranges_partitions_name(server_name: str, database: str, table: str) -> str:
    """Name of the table's dynamic partitions definition (database and table by their
    :func:`~.translator.dagster_name`)."""
    return re.sub(
        r"[^A-Za-z0-9_]", "_", f"{server_name}__{dagster_name(database)}__{dagster_name(table)}__pk_ranges"
    )


def pk_ranges_partitions_def(server_name: str, database: str, table: str) -> dg.DynamicPartitionsDefinition:
    return dg.DynamicPartitionsDefinition(name=pk_ranges_partitions_name(server_name, database, table))


def pk_ranges_asset_key(server_name: str, database: str, table: str) -> dg.AssetKey:
    """Key of a table's range asset: ``[server, db, "<table>_pk_ranges"]`` (named after its table,
    database and table by their :func:`~.translator.dagster_name`)."""
    return dg.AssetKey([server_name, dagster_name(database), f"{dagster_name(table)}_pk_ranges"])


def refresh_pk_range_partitions(
    mysql, instance: dg.DagsterInstance, storage: StorageSettings, tables: Sequence[tuple[str, str]]
) -> dict[str, int]:
    """Recompute the key ranges of ``tables`` (``mysql.pk_range_rows`` rows each), store them in the
    lake (:func:`..engine.snapshot_run.refresh_key_ranges`) and register the partition keys of
    their ``pk_ranges`` assets (:meth:`.resources.MySqlCdcResource.refresh_pk_ranges`). Keyless
    tables are skipped.

    Args:
        mysql: the :class:`~.resources.MySqlCdcResource` (connection, server name, column policy).

    Returns:
        ``{"db.table": number of ranges}``
    """
    from ..engine.snapshot_run import refresh_key_ranges

    out: dict[str, int] = {}
    for (db, t), ranges in refresh_key_ranges(
        mysql.connection_settings(),
        storage,
        mysql.server_name,
        mysql.column_policy(),
        tables,
        mysql.pk_range_rows,
    ):
        name = pk_ranges_partitions_name(mysql.server_name, db, t)
        existing = set(instance.get_dynamic_partitions(name))
        new = [r.key for r in ranges if r.key not in existing]
        if new:
            instance.add_dynamic_partitions(name, new)
        out[f"{db}.{t}"] = len(ranges)
    return out


def build_pk_range_assets(
    tables: Sequence[TableSchema | str],
    *,
    server_name: str,
    mysql_resource_key: str = "mysql",
    lake_resource_key: str = "lake",
) -> list[dg.AssetsDefinition]:
    """One partitioned ``<table>_pk_ranges`` asset per table (tables without a primary key are
    skipped), in the group ``<db>_pk_ranges``.

    Args:
        tables: the captured tables (schemas or ``"db.table"`` names), as for ``mysql_cdc_assets``.
        server_name: logical server name (first key segment).
    """
    out = []
    for t in tables:
        if isinstance(t, TableSchema):
            if not t.primary_key:
                continue
            db, name = t.database, t.table
        else:
            db, _, name = str(t).partition(".")
        out.append(_range_asset(server_name, db, name, mysql_resource_key, lake_resource_key))
    return out


def _range_asset(server_name: str, db: str, table: str, mysql_key: str, lake_key: str) -> dg.AssetsDefinition:
    @dg.asset(
        key=pk_ranges_asset_key(server_name, db, table),
        name=None,
        partitions_def=pk_ranges_partitions_def(server_name, db, table),
        deps=[table_asset_key(server_name, db, table)],
        group_name=f"{dagster_name(db)}_pk_ranges",
        kinds={"mysql", "spark", "delta"},
        required_resource_keys={mysql_key, lake_key},
        description=(
            f"Primary-key ranges of `{db}.{table}`: backfilling partitions re-snapshots exactly those "
            "key ranges (watermark method, safe while streaming). Needs the signal table "
            "(signal_data_collection)."
        ),
    )
    def _pk_ranges(context):
        mysql = getattr(context.resources, mysql_key)
        lake = getattr(context.resources, lake_key)
        return mysql.resnapshot_range(context, lake, db, table)

    return _pk_ranges
