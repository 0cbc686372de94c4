"""Code location of ``bench/daemon_latency.py``: one captured table under a real Dagster daemon.

Configured by the environment the benchmark sets for ``dagster-daemon run -f``:

- ``BENCH_DAEMON_DB``: the captured database (its table ``t``; also the logical server name);
- ``BENCH_DAEMON_LAKE``: the lake root (local path);
- ``BENCH_DAEMON_INTERVAL``: the sensor's ``minimum_interval_seconds`` (default 5);
- ``BENCH_DAEMON_FOLLOW``: the resource's ``stream_follow_seconds`` (default 300; 0 = one window per run);
- ``CDC_SPARK_REMOTE``: the Spark Connect server runs write through (empty: a local Spark per run);
- ``BENCH_DAEMON_TABLES``: the captured tables of that database, comma-separated (default ``t``);
- ``BENCH_DAEMON_README=1``: the resources as the README's example writes them, neither
  ``stream_follow_seconds`` nor ``spark_remote`` set (their defaults: following runs, ``auto``);
- ``BENCH_DAEMON_LAKE_OPTS``: more ``CdcLakeResource`` settings as a JSON object (e.g. lowered
  compaction thresholds, or an S3 lake's ``s3_*`` settings);
- ``BENCH_DAEMON_SNAPSHOT_MODE``: the resource's ``snapshot_mode`` (default: the resource's,
  ``initial``; ``no_data`` for tables read by an incremental snapshot, bench/daemon_incremental.py);
- ``CDC_MYSQL_*``: the MariaDB of infra/ (the capture user).

The table is given by name, so loading the location (the daemon, its code server and every run
worker load it) opens no MySQL connection. The sensor is on by default, as a user would turn it on.
No ``from __future__ import annotations``: Dagster reads the ``context`` annotation.
"""

import json
import os

import dagster as dg

from dagster_mysql_cdc import CdcLakeResource, MySqlCdcResource, build_mysql_cdc_sensor, mysql_cdc_assets

DB = os.environ["BENCH_DAEMON_DB"]

README = os.environ.get("BENCH_DAEMON_README") == "1"
mysql = MySqlCdcResource(
    host=os.environ.get("CDC_MYSQL_HOST", "127.0.0.1"),
    port=int(os.environ.get("CDC_MYSQL_PORT", "3307")),
    user=os.environ.get("CDC_MYSQL_USER", "cdc"),
    password=dg.EnvVar("CDC_MYSQL_PASSWORD"),
    server_name=DB,
    database_include_list=[DB],
    server_id=5802,
    **({"snapshot_mode": m} if (m := os.environ.get("BENCH_DAEMON_SNAPSHOT_MODE")) else {}),
    **({} if README else {"stream_follow_seconds": float(os.environ.get("BENCH_DAEMON_FOLLOW", "300"))}),
)


@mysql_cdc_assets(
    tables=[f"{DB}.{t}" for t in os.environ.get("BENCH_DAEMON_TABLES", "t").split(",")],
    server_name=DB,
    **({} if README else {"stream_follow_seconds": float(os.environ.get("BENCH_DAEMON_FOLLOW", "300"))}),
)
def bench_cdc(context: dg.AssetExecutionContext, mysql: MySqlCdcResource, lake: CdcLakeResource):
    yield from mysql.sync(context=context, lake=lake)


defs = dg.Definitions(
    assets=[bench_cdc],
    sensors=[
        build_mysql_cdc_sensor(
            bench_cdc,
            minimum_interval_seconds=int(os.environ.get("BENCH_DAEMON_INTERVAL", "5")),
            default_status=dg.DefaultSensorStatus.RUNNING,
        )
    ],
    resources={
        "mysql": mysql,
        "lake": CdcLakeResource(
            base_uri=os.environ["BENCH_DAEMON_LAKE"],
            **({} if README else {"spark_remote": os.environ.get("CDC_SPARK_REMOTE") or None}),
            **json.loads(os.environ.get("BENCH_DAEMON_LAKE_OPTS") or "{}"),
        ),
    },
)
