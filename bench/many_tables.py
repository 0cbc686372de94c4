"""Hundreds of tables in one capture (issue 28): what a window, a snapshot, a definitions load and
an idle sensor tick cost as the number of tables grows.

One database of ``--tables`` keyed tables of ``--rows`` rows each is captured through the public
API as a user does (``discover_tables``, ``mysql_cdc_assets``, ``build_mysql_cdc_sensor``,
``run_sensor_ticks``; the default resources, local Spark or the Spark Connect server of
``CDC_SPARK_REMOTE``), into a local lake or SeaweedFS (``--s3``). Printed, side by side in one run:

- definitions load (``discover_tables`` + the assets and their checks + the sensor);
- the initial snapshot of every table (the run, and the whole tick loop);
- a window whose one transaction updates a row of 3 tables, then one that updates a row of every
  table (the first window after the snapshot: each table's state tail is created), then another
  one (the steady state), then a 3-table window again (the steady state of the small window: the
  first one after the snapshot also creates its tables' tails and pays the first heartbeat scan);
  the marginal cost per touched table, ``(t_all - t_3) / (tables - 3)``;
- the same run's events stored by Dagster alone (a multi-asset with the same selection yielding
  the same materializations and check results with the same metadata, planned or logged as the
  run's were, nothing else), beside the
  3-table windows and beside the last all-table window: the part of a window no library change removes;
- an idle sensor tick (caught up).

    python -m bench.many_tables --tables 300
    python -m bench.many_tables --tables 300 --s3
    python -m bench.many_tables --tables 1000 --skip-snapshot-window   # load and idle tick only

Targets (issue 28): a 300-table window <= 10 s local, <= 20 s S3; the 3-table window no slower
than before; snapshot of 300 small tables <= 20 s; at 1,000 tables: load <= 5 s, idle tick <= 2 s,
a 100-table window <= 10 s.
"""

import argparse
import os
import shutil
import tempfile
import time
import uuid

import dagster as dg

from dagster_mysql_cdc import (
    CdcLakeResource,
    MySqlCdcResource,
    build_mysql_cdc_sensor,
    mysql_cdc_assets,
    run_sensor_ticks,
)

from ._common import root_connect

# no `from __future__ import annotations`: Dagster reads the asset function's annotations


def _create(db: str, tables: int, rows: int) -> None:
    conn = root_connect()
    try:
        with conn.cursor() as cur:
            cur.execute(f"CREATE DATABASE {db}")
            for i in range(tables):
                cur.execute(f"CREATE TABLE {db}.t{i:04d} (id INT PRIMARY KEY, v VARCHAR(32), n INT)")
                values = ",".join(f"({k}, 'row {k}', {k * 7})" for k in range(1, rows + 1))
                cur.execute(f"INSERT INTO {db}.t{i:04d} VALUES {values}")
        conn.commit()
    finally:
        conn.close()


def window_rounds(n_big: int) -> list[tuple[str, list[int]]]:
    """The measured windows, in order: ``(label, indexes of the tables one transaction updates)``:
    3 tables, ``n_big`` tables twice (the first after the snapshot creates the tails), 3 again."""
    return [
        ("3 tables", [0, 1, 2]),
        (f"{n_big} tables", list(range(n_big))),
        (f"{n_big} tables again", list(range(n_big))),
        ("3 tables again", [0, 1, 2]),
    ]


def _touch(db: str, tables: list[int], round_: int) -> tuple[str, int]:
    """One transaction updating row 1 of each table of ``tables``; returns the server's binlog
    position right after its COMMIT (``(file, pos)``, bench/dagster_ui.py)."""
    from .dagster_ui import server_position

    conn = root_connect()
    try:
        with conn.cursor() as cur:
            cur.execute("BEGIN")
            for i in tables:
                cur.execute(f"UPDATE {db}.t{i:04d} SET n = n + 1, v = 'round {round_}' WHERE id = 1")
            cur.execute("COMMIT")
            return server_position(cur)
    finally:
        conn.close()


def _dagster_floor(cdc: dg.AssetsDefinition, instance: dg.DagsterInstance, res) -> float:
    """Seconds Dagster alone takes for a run like ``res`` (an executed window): the same asset
    and check selection, in the same instance, yielding the same materializations and check
    results with the same metadata (the checks the run logged logged the same way), and doing
    nothing else. What is left of the window's time
    is the library's (reading, writing, committing, checking) plus the sensor tick."""
    mats = {e.asset_key: e.materialization.metadata for e in res.get_asset_materialization_events()}
    checks = {(c.asset_key, c.check_name): c for c in res.get_asset_check_evaluations()}
    assert mats and checks, "the window reported nothing"
    # as the run: the checks it planned are yielded, the others (a window's table checks over
    # planned_checks_max_tables) logged as evaluations
    planned = set(res.dagster_run.asset_check_selection or ())

    @dg.multi_asset(specs=list(cdc.specs), check_specs=list(cdc.check_specs), can_subset=True, name="floor")
    def floor(context: dg.AssetExecutionContext):
        for key in context.selected_asset_keys:
            if key in mats:
                yield dg.MaterializeResult(asset_key=key, metadata=mats[key])
        for (key, name), c in checks.items():
            if dg.AssetCheckKey(key, name) in context.selected_asset_check_keys:
                yield dg.AssetCheckResult(
                    asset_key=key, check_name=name, passed=c.passed, metadata=c.metadata
                )
            else:
                context.log_event(
                    dg.AssetCheckEvaluation(
                        asset_key=key, check_name=name, passed=c.passed, metadata=c.metadata
                    )
                )

    selection = dg.AssetSelection.assets(*mats).without_checks() | dg.AssetSelection.checks(*planned)
    t0 = time.monotonic()
    out = dg.materialize(
        [floor],
        instance=instance,
        selection=selection,
        run_config={"loggers": {"console": {"config": {"log_level": "WARNING"}}}},
    )
    secs = time.monotonic() - t0
    assert len(out.get_asset_materialization_events()) == len(mats)
    assert len(out.get_asset_check_evaluations()) == len(checks)
    return secs


def _remove_s3_lake(storage) -> None:
    """Delete every object under the S3 lake's root (the benchmark's own prefix)."""
    client = storage.boto3_client()
    bucket, _, prefix = storage.root.removeprefix("s3://").partition("/")
    for page in client.get_paginator("list_objects_v2").paginate(
        Bucket=bucket, Prefix=prefix.rstrip("/") + "/"
    ):
        keys = [{"Key": o["Key"]} for o in page.get("Contents", [])]
        for i in range(0, len(keys), 1000):
            client.delete_objects(Bucket=bucket, Delete={"Objects": keys[i : i + 1000]})


def _drop(db: str) -> None:
    conn = root_connect()
    try:
        with conn.cursor() as cur:
            cur.execute(f"DROP DATABASE IF EXISTS {db}")
    finally:
        conn.close()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tables", type=int, default=300)
    ap.add_argument("--rows", type=int, default=10)
    ap.add_argument("--touch", type=int, default=None, help="tables of the large window (default: all)")
    ap.add_argument("--s3", action="store_true", help="lake on SeaweedFS (CDC_S3_ENDPOINT) instead of local")
    ap.add_argument("--skip-snapshot-window", action="store_true", help="only definitions load and idle tick")
    ap.add_argument("--keep", action="store_true", help="keep the database and the local lake")
    ap.add_argument(
        "--pause-before-windows", type=float, default=0, help="seconds to wait after the snapshot"
    )
    args = ap.parse_args(argv)

    db = f"bench_many_{uuid.uuid4().hex[:6]}"
    print(f"creating {args.tables} tables of {args.rows} rows in {db} ...", flush=True)
    t0 = time.monotonic()
    _create(db, args.tables, args.rows)
    print(f"  created in {time.monotonic() - t0:.1f} s")
    lake_dir = tempfile.mkdtemp(prefix="bench-many-")
    figures: dict[str, float] = {}
    lake: CdcLakeResource | None = None
    try:
        mysql = MySqlCdcResource(
            host=os.environ.get("CDC_MYSQL_HOST", "127.0.0.1"),
            port=int(os.environ.get("CDC_MYSQL_PORT", "3307")),
            user=os.environ.get("CDC_MYSQL_USER", "cdc"),
            password=os.environ.get("CDC_MYSQL_PASSWORD", "cdc-secret"),
            server_name=db,
            database_include_list=[db],
            stream_follow_seconds=0.0,
        )
        if args.s3:
            lake = CdcLakeResource(
                base_uri=f"s3://{os.environ.get('CDC_S3_BUCKET', 'lake')}/{db}",
                s3_endpoint_url=os.environ.get("CDC_S3_ENDPOINT", "http://127.0.0.1:8333"),
                s3_access_key_id=os.environ.get("AWS_ACCESS_KEY_ID", "cdc"),
                s3_secret_access_key=os.environ.get("AWS_SECRET_ACCESS_KEY", "cdc-secret"),
            )
        else:
            lake = CdcLakeResource(base_uri=lake_dir)
        t0 = time.monotonic()
        tables = mysql.discover_tables()

        @mysql_cdc_assets(tables=tables, server_name=db)
        def cdc(context: dg.AssetExecutionContext, mysql: MySqlCdcResource, lake: CdcLakeResource):
            yield from mysql.sync(context=context, lake=lake)

        sensor = build_mysql_cdc_sensor(cdc)
        dg.Definitions(assets=[cdc], sensors=[sensor], resources={"mysql": mysql, "lake": lake})
        figures["definitions load (s)"] = time.monotonic() - t0
        print(f"definitions load: {figures['definitions load (s)']:.2f} s ({len(tables)} tables, "
              f"{len(list(cdc.check_keys))} checks)", flush=True)  # fmt: skip
        instance = dg.DagsterInstance.ephemeral()
        resources = {"mysql": mysql, "lake": lake}
        t0 = time.monotonic()
        ticks = run_sensor_ticks(sensor, cdc, resources, instance, run_log_level="WARNING")
        figures["snapshot, tick loop (s)"] = time.monotonic() - t0
        assert all(r.success for r in ticks.runs), "snapshot failed"
        print(
            f"initial snapshot of {args.tables} tables: {figures['snapshot, tick loop (s)']:.1f} s",
            flush=True,
        )
        cursor = ticks.cursor
        if args.pause_before_windows:  # e.g. to attach a profiler to the windows only
            print(f"pid {os.getpid()}: windows in {args.pause_before_windows} s", flush=True)
            time.sleep(args.pause_before_windows)
        if not args.skip_snapshot_window:
            n_big = args.touch or args.tables
            for round_, (label, which) in enumerate(window_rounds(n_big), 1):
                _touch(db, which, round_)
                t0 = time.monotonic()
                ticks = run_sensor_ticks(
                    sensor, cdc, resources, instance, cursor=cursor, run_log_level="WARNING"
                )
                secs = time.monotonic() - t0
                cursor = ticks.cursor
                assert ticks.runs and all(r.success for r in ticks.runs), "window failed"
                figures[f"window touching {label} (s)"] = secs
                print(f"window touching {label}: {secs:.2f} s ({len(ticks.runs)} run(s))", flush=True)
                if label.endswith("again") or label == "3 tables":  # each window size's last one
                    floor = _dagster_floor(cdc, instance, ticks.runs[-1])
                    figures[f"Dagster alone, the same run's events (window touching {label}) (s)"] = floor
                    print(
                        f"  Dagster alone (the same selection and events, no work): {floor:.2f} s; "
                        f"the library and the sensor tick: {secs - floor:.2f} s",
                        flush=True,
                    )
            t3, tn = figures["window touching 3 tables (s)"], figures[f"window touching {n_big} tables (s)"]
            again = figures[f"window touching {n_big} tables again (s)"]
            figures["marginal cost per touched table (s)"] = (tn - t3) / max(1, n_big - 3)
            figures["marginal cost per touched table, again (s)"] = (again - t3) / max(1, n_big - 3)
            print(
                "marginal cost per touched table: "
                f"{figures['marginal cost per touched table (s)']:.3f} s first window after the snapshot "
                f"(creates each table's tail), {figures['marginal cost per touched table, again (s)']:.3f} s after"
            )
        with dg.build_sensor_context(instance=instance, cursor=cursor, resources=resources) as ctx:
            t0 = time.monotonic()
            sensor.evaluate_tick(ctx)
            figures["idle sensor tick (s)"] = time.monotonic() - t0
        print(f"idle sensor tick: {figures['idle sensor tick (s)']:.2f} s")
        print()
        print(f"| figure ({args.tables} tables, {'S3' if args.s3 else 'local'} lake) | value |")
        print("|---|---|")
        for k, v in figures.items():
            print(f"| {k} | {v:.3f} |")
    finally:
        if not args.keep:
            _drop(db)
            shutil.rmtree(lake_dir, ignore_errors=True)
            if args.s3 and lake is not None:
                _remove_s3_lake(lake.storage_settings())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
