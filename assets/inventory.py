"""Debezium's tutorial database ``inventory``, captured as Dagster assets.

Settings come from the environment that ``infra/env.sh`` exports (MariaDB on 127.0.0.1:3307,
SeaweedFS S3 on 127.0.0.1:8333), with the same defaults embedded here so ``dagster dev -f
definitions.py`` works after ``make infra`` without sourcing anything.

``CDC_LAKE_URI`` selects the lake: a local path (default ``.lake`` in the working directory) or
``s3://<bucket>/<prefix>``, which then uses ``CDC_S3_ENDPOINT`` and the ``AWS_*`` credentials.
"""

import logging
import os

import dagster as dg

from dagster_mysql_cdc import (
    CdcLakeResource,
    MySqlCdcResource,
    SourceConnectionError,
    build_pk_range_assets,
    mysql_cdc_assets,
)

log = logging.getLogger(__name__)

#: Logical server name, as in the Debezium tutorial (``topic.prefix=dbserver1``).
SERVER_NAME = "dbserver1"
#: Seconds between binlog sensor ticks (the sensor and the freshness policy derived from it).
SENSOR_INTERVAL_SECONDS = 5
#: Replication client id of this example's binlog reads (``server_id``; it also uses ``+3``,
#: ``+11`` .. ``+19`` and ``+101`` .. ``+116``). Each capture of one server needs its own: two
#: binlog dumps with one id disconnect each other, so ``make ui`` (this code location), ``make
#: demo`` (:data:`assets.demo.DEMO_SERVER_ID`) and the test suite (the default 184054) can run
#: side by side on the same MariaDB. ``CDC_SERVER_ID`` overrides it.
EXAMPLE_SERVER_ID = 5400
#: Tables of the inventory sample, used when the server cannot be reached at load time.
INVENTORY_TABLES = [
    "inventory.addresses",
    "inventory.customers",
    "inventory.geom",
    "inventory.orders",
    "inventory.products",
    "inventory.products_on_hand",
]

# Local demo password of infra/env.sh; a real deployment sets CDC_MYSQL_PASSWORD itself.
os.environ.setdefault("CDC_MYSQL_PASSWORD", "cdc-secret")


def mysql_resource(**options) -> MySqlCdcResource:
    """The capture of ``inventory`` as the ``cdc`` user (``options``: more resource fields)."""
    return MySqlCdcResource(
        host=os.environ.get("CDC_MYSQL_HOST", "127.0.0.1"),
        port=int(os.environ.get("CDC_MYSQL_PORT", "3307")),
        user=os.environ.get("CDC_MYSQL_USER", "cdc"),
        password=dg.EnvVar("CDC_MYSQL_PASSWORD"),
        server_name=SERVER_NAME,
        database_include_list=["inventory"],
        **{"server_id": int(os.environ.get("CDC_SERVER_ID", EXAMPLE_SERVER_ID)), **options},
    )


def lake_resource(base_uri: str | None = None) -> CdcLakeResource:
    """The lake: ``CDC_LAKE_URI`` (or ``base_uri``), written through the Spark Connect server of
    ``infra/spark_connect.sh`` when ``CDC_SPARK_REMOTE`` names one (``make infra`` exports it),
    else by a local Spark each run starts."""
    uri = base_uri or os.environ.get("CDC_LAKE_URI", ".lake")
    remote = os.environ.get("CDC_SPARK_REMOTE") or None
    if uri.startswith("s3://"):
        return CdcLakeResource(
            base_uri=uri,
            s3_endpoint_url=os.environ.get("CDC_S3_ENDPOINT", "http://127.0.0.1:8333"),
            s3_access_key_id=dg.EnvVar("AWS_ACCESS_KEY_ID"),
            s3_secret_access_key=dg.EnvVar("AWS_SECRET_ACCESS_KEY"),
            s3_region=os.environ.get("AWS_REGION", "us-east-1"),
            spark_remote=remote,
        )
    return CdcLakeResource(base_uri=uri, spark_remote=remote)


def captured_tables(mysql: MySqlCdcResource):
    """Schemas from the server (column types and comments in the UI), or bare names if it is down."""
    try:
        return mysql.discover_tables()
    except SourceConnectionError as e:
        log.warning("%s; building inventory assets from table names only", e)
        return INVENTORY_TABLES


def build_inventory_assets(mysql: MySqlCdcResource) -> dg.AssetsDefinition:
    @mysql_cdc_assets(
        tables=captured_tables(mysql),
        server_name=SERVER_NAME,
        sensor_interval_seconds=SENSOR_INTERVAL_SECONDS,
        stream_follow_seconds=mysql.stream_follow_seconds,
    )
    def inventory_cdc(context: dg.AssetExecutionContext, mysql: MySqlCdcResource, lake: CdcLakeResource):
        yield from mysql.sync(context=context, lake=lake)

    return inventory_cdc


def build_inventory_range_assets(mysql: MySqlCdcResource) -> list[dg.AssetsDefinition]:
    """Per-table primary-key-range partitioned assets: backfills re-snapshot chosen key ranges."""
    return build_pk_range_assets(captured_tables(mysql), server_name=SERVER_NAME)
