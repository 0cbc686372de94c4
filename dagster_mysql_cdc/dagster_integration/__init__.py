"""Dagster integration: resources, translator, spec builder and the ``@mysql_cdc_assets`` decorator."""

from .change_feed import IncrementalChanges, incremental_changes
from .component import MySqlCdcComponent
from .cursor import CorruptCursorError, StreamCursor
from .decorator import mysql_cdc_assets
from .input_manager import CdcInputManager
from .local import run_sensor_ticks
from .partitions import build_pk_range_assets
from .resources import DEFAULT_SPARK_CONFIG, SNAPSHOT_MODES, CdcLakeResource, MySqlCdcResource
from .rotation import build_verification_sensor
from .sensor import build_mysql_cdc_sensor
from .translator import (
    DagsterMySqlCdcTranslator,
    MySqlCdcTableProps,
    build_mysql_cdc_asset_specs,
    freshness_policy_for_interval,
)
from .verify import build_full_checks_schedule

__all__ = [
    "CdcInputManager",
    "IncrementalChanges",
    "incremental_changes",
    "CorruptCursorError",
    "MySqlCdcComponent",
    "StreamCursor",
    "build_mysql_cdc_sensor",
    "build_pk_range_assets",
    "build_verification_sensor",
    "run_sensor_ticks",
    "CdcLakeResource",
    "DEFAULT_SPARK_CONFIG",
    "DagsterMySqlCdcTranslator",
    "MySqlCdcResource",
    "MySqlCdcTableProps",
    "SNAPSHOT_MODES",
    "build_full_checks_schedule",
    "build_mysql_cdc_asset_specs",
    "freshness_policy_for_interval",
    "mysql_cdc_assets",
]
