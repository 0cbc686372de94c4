"""The main job: capture Debezium's ``inventory`` database into the lake through Dagster.

Run with ``make demo`` (starts MariaDB + SeaweedFS, loads inventory, then runs this module).
Materializes every inventory table asset twice, into the embedded local lake (``.lake/``) and
into the SeaweedFS S3 bucket, and prints for each table the source row count next to the lake's
count and where the files are.
"""

from __future__ import annotations

import os
import sys
import time

import dagster as dg
import pymysql
from deltalake import DeltaTable

from assets.inventory import build_inventory_assets, lake_resource, mysql_resource


def lake_targets() -> list[str]:
    bucket = os.environ.get("CDC_S3_BUCKET", "lake")
    return [os.environ.get("CDC_LAKE_URI", ".lake"), f"s3://{bucket}/demo"]


def source_counts(mysql) -> dict[str, int]:
    m = mysql.process_config_and_initialize()
    conn = pymysql.connect(**m.connection_settings().pymysql_kwargs())
    out = {}
    with conn.cursor() as cur:
        for t in m.discover_tables():
            cur.execute(f"SELECT COUNT(*) FROM `{t.database}`.`{t.table}`")
            out[t.table] = cur.fetchone()[0]
    conn.close()
    return out


def main() -> int:
    mysql = mysql_resource()
    assets_def = build_inventory_assets(mysql)
    expected = source_counts(mysql)
    ok = True
    for uri in lake_targets():
        lake = lake_resource(uri)
        t0 = time.monotonic()
        result = dg.materialize([assets_def], resources={"mysql": mysql, "lake": lake})
        if not result.success:
            print(f"materialization into {uri} failed", file=sys.stderr)
            return 1
        storage = lake.process_config_and_initialize().storage_settings()
        print(f"\n== inventory -> {storage.root}  ({time.monotonic() - t0:.1f}s incl. Spark start)")
        print(f"{'table':<18}{'source':>8}{'lake':>8}{'changelog':>11}  state table")
        for ev in result.get_asset_materialization_events():
            md = ev.event_specific_data.materialization.metadata
            table = ev.asset_key.path[-1]
            state = DeltaTable(md["state_uri"].value, storage_options=storage.delta_storage_options())
            live = state.to_pyarrow_table(filters=[("__deleted", "=", False)]).num_rows
            log = DeltaTable(md["changelog_uri"].value, storage_options=storage.delta_storage_options())
            n_log = log.to_pyarrow_table(columns=["op"]).num_rows
            flag = "" if live == expected[table] else "   <-- MISMATCH"
            ok &= live == expected[table]
            print(f"{table:<18}{expected[table]:>8}{live:>8}{n_log:>11}  {md['state_uri'].value}{flag}")
        pos = md["binlog_file"].value, md["binlog_pos"].value
        print(f"snapshot position: {pos[0]}:{pos[1]}  gtid {md['gtid_set'].value}")
    print("\nlake state equals source for every table" if ok else "\nMISMATCH between lake and source")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
