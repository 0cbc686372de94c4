"""Cost of the rotating verification (issue "Verification that runs by itself").

Captures one table of ``--rows`` rows (the benchmarks' 10-column mixed-type table) into a local
lake (initial snapshot), changes one row with ``SET SESSION sql_log_bin=0`` (the binlog never
carries it), then evaluates the verification sensor (:mod:`dagster_mysql_cdc.dagster_integration.rotation`)
back to back until a full pass of the table is done and the changed row is confirmed differing.
Per slice it measures the wall time and the CPU seconds of the MariaDB server process
(``/proc/<pid>/stat`` of ``mariadbd``) and of this process, and prints:

- slices per full pass and the time a pass takes with the sensor's interval (``--interval``,
  default the documented 30 s): ``slices x interval``;
- the source's CPU per slice and its average share of one core at that interval
  (``server CPU per slice / interval``), the issue's budget being 5 %;
- the Dagster side's CPU per slice (the lake read and the comparison, in the sensor's process).

    python -m bench.rotation --rows 1000000
    python -m bench.rotation --rows 10000000 --slice-rows 50000

The repair itself is the incremental snapshot the binlog sensor's next run reads (measured by
:mod:`bench.repair_latency`); it is not run here.
"""

import argparse
import os
import shutil
import statistics
import tempfile
import time

import dagster as dg

from dagster_mysql_cdc import CdcLakeResource, MySqlCdcResource, mysql_cdc_assets
from dagster_mysql_cdc.dagster_integration.rotation import RotationState, build_verification_sensor

from ._common import (
    CDC_PASSWORD,
    CDC_USER,
    MYSQL_HOST,
    MYSQL_PORT,
    TABLE_DDL,
    cpu_snapshot,
    insert_select,
    root_connect,
    scratch_database,
)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--slice-rows", type=int, default=50_000, help="the sensor's rows per slice")
    ap.add_argument("--interval", type=float, default=30.0, help="the sensor's seconds between slices")
    ap.add_argument(
        "--max-slices",
        type=int,
        default=0,
        help="stop after this many slices (the per-slice cost of a large table without a whole pass; 0: a pass)",
    )
    args = ap.parse_args(argv)

    with scratch_database("rotation") as (conn, db):
        t0 = time.perf_counter()
        with conn.cursor() as cur:
            cur.execute(TABLE_DDL.format(db=db, table="t"))
            step = 1_000_000
            for first in range(1, args.rows + 1, step):
                cur.execute(insert_select(db, "t", first, min(args.rows, first + step - 1)))
        print(f"loaded {args.rows} rows in {time.perf_counter() - t0:.1f}s", flush=True)
        mysql = MySqlCdcResource(
            host=MYSQL_HOST,
            port=MYSQL_PORT,
            user=CDC_USER,
            password=CDC_PASSWORD,
            server_name=db,
            database_include_list=[db],
            stream_follow_seconds=0.0,
        )

        @mysql_cdc_assets(tables=mysql.discover_tables(), server_name=db)
        def cdc(context: dg.AssetExecutionContext, mysql: MySqlCdcResource, lake: CdcLakeResource):
            yield from mysql.sync(context=context, lake=lake)

        lake_dir = tempfile.mkdtemp(prefix="bench-rotation-lake-")
        resources = {"mysql": mysql, "lake": CdcLakeResource(base_uri=lake_dir)}
        instance = dg.DagsterInstance.ephemeral()
        t0 = time.perf_counter()
        dg.materialize(
            [cdc],
            resources=resources,
            instance=instance,
            selection=dg.AssetSelection.assets(cdc).without_checks(),
        )
        print(f"initial snapshot in {time.perf_counter() - t0:.1f}s (lake {lake_dir})", flush=True)
        changed = max(1, args.rows * 3 // 4)
        with root_connect().cursor() as cur:
            cur.execute("SET SESSION sql_log_bin = 0")
            cur.execute(f"UPDATE {db}.t SET qty = -1 WHERE id = {changed}")
            cur.execute("SET SESSION sql_log_bin = 1")

        sensor = build_verification_sensor(cdc, rows=args.slice_rows, seconds=60.0)
        cursor = None
        walls, servers, clients = [], [], []
        found_at = None
        for i in range(10 * (args.rows // args.slice_rows + 2)):
            before = cpu_snapshot()
            with dg.build_sensor_context(instance=instance, cursor=cursor, resources=resources) as ctx:
                res = sensor.evaluate_tick(ctx)
            after = cpu_snapshot()
            cursor = res.cursor
            walls.append(after.t - before.t)
            servers.append(after.server_s - before.server_s)
            clients.append(after.self_s - before.self_s + after.children_s - before.children_s)
            state = RotationState.parse(cursor)
            msg = res.skip_message or ""
            if "confirmed differing" in msg and found_at is None:
                found_at = i + 1
            tr = state.tables[f"{db}.t"]
            if tr.passes >= 1 and found_at is not None:
                break
            if args.max_slices and i + 1 >= args.max_slices:
                break
        slices = len(walls)
        srv = statistics.mean(servers)
        print(f"\nrotating verification of {args.rows} rows, {args.slice_rows} rows per slice:")
        if found_at is None:
            print(f"  {slices} slices measured (a full pass is {-(-args.rows // args.slice_rows)} slices)")
        else:
            print(
                f"  slices to a full pass + confirmation: {slices} (the changed row confirmed at slice {found_at})"
            )
        print(
            f"  per slice: wall {statistics.mean(walls):.2f}s (max {max(walls):.2f}s), "
            f"source CPU {1000 * srv:.0f} ms (max {1000 * max(servers):.0f} ms), "
            f"Dagster-side CPU {statistics.mean(clients):.2f}s"
        )
        slices = max(slices, -(-args.rows // args.slice_rows))
        print(
            f"  at one slice every {args.interval:.0f}s: full pass in {slices * args.interval / 60:.1f} min, "
            f"average source CPU {100 * srv / args.interval:.2f} % of one core, "
            f"Dagster side {100 * statistics.mean(clients) / args.interval:.1f} % of one core"
        )
        print(
            f"  source CPU per 1M rows verified: {srv / args.slice_rows * 1e6:.2f} s; "
            f"load average {os.getloadavg()[0]:.2f}"
        )
        shutil.rmtree(lake_dir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
