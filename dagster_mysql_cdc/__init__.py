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
    UnknownTableError,
)
from .events import BinlogPosition

# The Dagster integration is imported on first use (PEP 562): Spark's Python workers import
# ``dagster_mysql_cdc.sink`` for every write job, and must not pay for importing Dagster.
_DAGSTER_NAMES = (
    "DEFAULT_SPARK_CONFIG",
    "SNAPSHOT_MODES",
    "CdcLakeResource",
    "DagsterMySqlCdcTranslator",
    "MySqlCdcComponent",
    "MySqlCdcResource",
    "MySqlCdcTableProps",
    "build_full_checks_schedule",
    "build_mysql_cdc_asset_specs",
    "build_mysql_cdc_sensor",
    "build_pk_range_assets",
    "freshness_policy_for_interval",
    "mysql_cdc_assets",
    "run_sensor_ticks",
)

if TYPE_CHECKING:
    from .dagster_integration import (
        DEFAULT_SPARK_CONFIG,
        SNAPSHOT_MODES,
        CdcLakeResource,
        DagsterMySqlCdcTranslator,
        MySqlCdcComponent,
        MySqlCdcResource,
        MySqlCdcTableProps,
        build_full_checks_schedule,
        build_mysql_cdc_asset_specs,
        build_mysql_cdc_sensor,
        build_pk_range_assets,
        freshness_policy_for_interval,
        mysql_cdc_assets,
        run_sensor_ticks,
    )


def __getattr__(name: str):
    if name in _DAGSTER_NAMES:
        from . import dagster_integration

        value = getattr(dagster_integration, name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_DAGSTER_NAMES))


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
    "UnknownTableError",
    "build_mysql_cdc_asset_specs",
    "build_mysql_cdc_sensor",
    "build_pk_range_assets",
    "run_sensor_ticks",
    "mysql_cdc_assets",
]
