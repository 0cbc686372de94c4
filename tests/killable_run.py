"""Build the CDC assets/resources of a streaming test, and run one requested run in a process.

The streaming tests import :func:`build` (same definitions in the test process and in the child);
``python tests/killable_run.py '<json>'`` executes one run requested by the binlog sensor against
a file-based Dagster instance, so the test can SIGKILL it in the middle of its writes, as a
crashed run worker would die.

No ``from __future__ import annotations`` here: Dagster reads the ``context`` annotation of the
asset function.
"""

import json
import os
import sys
from typing import Any

import dagster as dg

from dagster_mysql_cdc import CdcLakeResource, MySqlCdcResource, mysql_cdc_assets

MYSQL_FIELDS = (
    "host",
    "port",
    "user",
    "password",
    "server_name",
    "server_id",
    "database_include_list",
    "table_include_list",
    "table_exclude_list",
    "snapshot_mode",
    "stream_batch_rows",
    "stream_commit_workers",
    "binlog_read_timeout",
    "stream_parallel_min_bytes",
    "stream_parallel_server_ids",
    "stream_parallel_max_tasks",
    "stream_follow_seconds",
    "stream_follow_idle_seconds",
    "incremental_snapshot_chunk_size",
    "incremental_snapshot_max_chunks_per_run",
    "incremental_snapshot_read_only",
    "time_precision_mode",
    "event_processing_failure_handling_mode",
)
LAKE_FIELDS = (
    "base_uri",
    "s3_endpoint_url",
    "s3_access_key_id",
    "s3_secret_access_key",
    "s3_region",
    "state_compact_small_rows",
)


def mysql_resource(spec: dict[str, Any]) -> MySqlCdcResource:
    fields = {k: spec[k] for k in MYSQL_FIELDS if spec.get(k) is not None}
    return MySqlCdcResource(**{"stream_follow_seconds": 0.0, **fields})  # one window per run


def build(spec: dict[str, Any]) -> tuple[dg.AssetsDefinition, dict[str, Any]]:
    """``(@mysql_cdc_assets definition, resources)`` for a test spec (a JSON-able dict)."""
    mysql = mysql_resource(spec)
    lake = CdcLakeResource(**{k: spec[k] for k in LAKE_FIELDS if spec.get(k) is not None})
    tables = mysql.discover_tables(spec.get("tables"))

    @mysql_cdc_assets(tables=tables, server_name=spec["server_name"])
    def cdc(context: dg.AssetExecutionContext, mysql: MySqlCdcResource, lake: CdcLakeResource):
        yield from mysql.sync(context=context, lake=lake)

    return cdc, {"mysql": mysql, "lake": lake}


def request_selection(asset_keys, check_keys) -> dg.AssetSelection:
    """What the daemon launches for a run request (as ``run_sensor_ticks`` does)."""
    selection = dg.AssetSelection.assets(*asset_keys).without_checks()
    if check_keys:
        selection = selection | dg.AssetSelection.checks(*check_keys)
    return selection


def main(argv: list[str]) -> int:
    spec = json.loads(argv[1])
    assets, resources = build(spec)
    os.environ["DAGSTER_HOME"] = spec["instance_dir"]
    instance = dg.DagsterInstance.get()  # the test's DagsterInstance.local_temp(instance_dir)
    selection = request_selection(
        [dg.AssetKey(k) for k in spec["selection"]],
        [dg.AssetCheckKey(dg.AssetKey(k), n) for k, n in spec.get("checks") or []],
    )
    result = dg.materialize(
        [assets],
        resources=resources,
        instance=instance,
        selection=selection,
        tags=spec["tags"],
        raise_on_error=False,
    )
    return 0 if result.success else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
