"""dagster-mysql-cdc: Debezium-style MySQL/MariaDB change data capture as Dagster assets.

Captured tables are software-defined assets keyed ``[server, database, table]``; PySpark writes
each table's change log (Debezium envelopes) and current state as Delta tables on the local
filesystem or any S3 API endpoint.
"""

from typing import TYPE_CHECKING

from ._version import __version__ as __version__
from .errors import (
    CdcError,
    ConfigurationError,
    LakeUnavailableError,
    PreflightError,
    SinkError,
    SourceConnectionError,
    SourceUnreachableError,
    UnknownTableError,
)
from .events import BinlogPosition

# The Dagster integration is imported on first use (PEP 562): Spark's Python workers import
# ``dagster_mysql_cdc.sink`` for every write job, and must not pay for importing Dagster.
_DAGSTER_NAMES = (
    "DEFAULT_SPARK_CONFIG",
    "SNAPSHOT_MODES",
    "CdcInputManager",
    "CdcLakeResource",
    "DagsterMySqlCdcTranslator",
    "IncrementalChanges",
    "MySqlCdcComponent",
    "MySqlCdcResource",
    "MySqlCdcTableProps",
    "build_full_checks_schedule",
    "build_mysql_cdc_asset_specs",
    "build_mysql_cdc_sensor",
    "build_pk_range_assets",
    "build_verification_sensor",
    "freshness_policy_for_interval",
    "incremental_changes",
    "mysql_cdc_assets",
    "run_sensor_ticks",
)

# The downstream read API (dagster_mysql_cdc/downstream/): plain functions for code inside or
# outside Dagster, imported on first use too (pyarrow, deltalake).
_DOWNSTREAM_NAMES = {
    "read_current": "current",
    "read_current_polars": "current",
    "read_current_duckdb": "current",
    "read_current_spark": "current",
    "read_changes": "changes",
    "ChangeBatch": "changes",
    "ChangePosition": "changes",
    "create_duckdb_views": "views",
    "create_spark_views": "views",
    "duckdb_connection": "views",
    "view_statements": "views",
    "captured_tables": "tables",
    "CapturedTable": "tables",
}

if TYPE_CHECKING:
    from .dagster_integration import (
        DEFAULT_SPARK_CONFIG,
        SNAPSHOT_MODES,
        CdcInputManager,
        CdcLakeResource,
        DagsterMySqlCdcTranslator,
        IncrementalChanges,
        MySqlCdcComponent,
        MySqlCdcResource,
        MySqlCdcTableProps,
        build_full_checks_schedule,
        build_mysql_cdc_asset_specs,
        build_mysql_cdc_sensor,
        build_pk_range_assets,
        build_verification_sensor,
        freshness_policy_for_interval,
        incremental_changes,
        mysql_cdc_assets,
        run_sensor_ticks,
    )
    from .downstream.changes import ChangeBatch, ChangePosition, read_changes
    from .downstream.current import read_current, read_current_duckdb, read_current_polars, read_current_spark
    from .downstream.tables import CapturedTable, captured_tables
    from .downstream.views import create_duckdb_views, create_spark_views, duckdb_connection, view_statements


def __getattr__(name: str):
    if name in _DAGSTER_NAMES:
        from . import dagster_integration

        value = getattr(dagster_integration, name)
        globals()[name] = value
        return value
    if name in _DOWNSTREAM_NAMES:
        import importlib

        value = getattr(importlib.import_module(f".downstream.{_DOWNSTREAM_NAMES[name]}", __name__), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_DAGSTER_NAMES) | set(_DOWNSTREAM_NAMES))


__all__ = [
    "build_full_checks_schedule",
    "freshness_policy_for_interval",
    "BinlogPosition",
    "CdcError",
    "CdcLakeResource",
    "ConfigurationError",
    "DEFAULT_SPARK_CONFIG",
    "DagsterMySqlCdcTranslator",
    "LakeUnavailableError",
    "MySqlCdcComponent",
    "MySqlCdcResource",
    "MySqlCdcTableProps",
    "PreflightError",
    "SNAPSHOT_MODES",
    "SinkError",
    "SourceConnectionError",
    "SourceUnreachableError",
    "UnknownTableError",
    "build_mysql_cdc_asset_specs",
    "build_mysql_cdc_sensor",
    "build_pk_range_assets",
    "build_verification_sensor",
    "run_sensor_ticks",
    "mysql_cdc_assets",
    "read_current",
    "read_current_polars",
    "read_current_duckdb",
    "read_current_spark",
    "read_changes",
    "ChangeBatch",
    "ChangePosition",
    "create_duckdb_views",
    "create_spark_views",
    "duckdb_connection",
    "view_statements",
    "captured_tables",
    "CapturedTable",
    "incremental_changes",
    "IncrementalChanges",
    "CdcInputManager",
]
