"""dagster-mysql-cdc: Debezium-style MySQL/MariaDB change data capture as Dagster assets.

Captured tables are software-defined assets keyed ``[server, database, table]``; PySpark writes
each table's change log (Debezium envelopes) and current state as Delta tables on the local
filesystem or any S3 API endpoint.
"""

from .dagster_integration import (
    DEFAULT_SPARK_CONFIG,
    SNAPSHOT_MODES,
    CdcLakeResource,
    DagsterMySqlCdcTranslator,
    MySqlCdcComponent,
    MySqlCdcResource,
    MySqlCdcTableProps,
    build_mysql_cdc_asset_specs,
    build_mysql_cdc_sensor,
    build_pk_range_assets,
    mysql_cdc_assets,
    run_sensor_ticks,
)
from .errors import (
    CdcError,
    ConfigurationError,
    PreflightError,
    SinkError,
    SourceConnectionError,
    UnknownTableError,
)
from .events import BinlogPosition

__version__ = "0.1.0"

__all__ = [
    "BinlogPosition",
    "CdcError",
    "CdcLakeResource",
    "ConfigurationError",
    "DEFAULT_SPARK_CONFIG",
    "DagsterMySqlCdcTranslator",
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
