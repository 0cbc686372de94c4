"""Dagster integration: resources, translator, spec builder and the ``@mysql_cdc_assets`` decorator."""

from .decorator import mysql_cdc_assets
from .resources import DEFAULT_SPARK_CONFIG, SNAPSHOT_MODES, CdcLakeResource, MySqlCdcResource
from .translator import (
    DagsterMySqlCdcTranslator,
    MySqlCdcTableProps,
    build_mysql_cdc_asset_specs,
)

__all__ = [
    "CdcLakeResource",
    "DEFAULT_SPARK_CONFIG",
    "DagsterMySqlCdcTranslator",
    "MySqlCdcResource",
    "MySqlCdcTableProps",
    "SNAPSHOT_MODES",
    "build_mysql_cdc_asset_specs",
    "mysql_cdc_assets",
]
