"""The main job: capture Debezium's ``inventory`` database into the lake through Dagster.

Run with ``make demo`` (starts MariaDB + SeaweedFS, loads inventory, then runs this module). For
each lake — the SeaweedFS S3 bucket and the embedded local filesystem (``.lake/``, or
``.infra/demo-lake/`` while a deployment such as ``make ui`` holds ``.lake/dbserver1``) — it:

1. drives the binlog sensor in-process: its first tick requests the initial snapshot of every
   inventory table, the run materializes the table assets;
2. applies a scripted workload to ``inventory`` (inserts, updates including a primary-key change,
   deletes, ``ALTER TABLE ... ADD COLUMN``, ``TRUNCATE`` of a scratch table);
3. ticks the sensor until it is caught up (each tick requests one binlog window run);
4. prints per table the source row count next to the lake's, the change-log events by op, a few
   change events in Debezium's envelope, the schema history, and checks that the lake state equals
   the source row for row.

The console shows progress and the comparison; Dagster's full event stream (DEBUG) goes to
``$CDC_INFRA_DIR/demo-dagster.log`` (``--verbose`` prints it on the console as well).
"""

import contextlib
import json
import os
import shutil
import sys
import time
import uuid

import dagster as dg
import pymysql
from deltalake import DeltaTable

from assets.inventory import build_inventory_assets, lake_resource, mysql_resource
from dagster_mysql_cdc import build_mysql_cdc_sensor, run_sensor_ticks
from dagster_mysql_cdc.sink.owner import owner_is_gone, owner_marker_uri, read_owner
from dagster_mysql_cdc.source.catalog import read_table_schemas
from dagster_mysql_cdc.source.types import TableConverter, TypeOptions

SCRATCH = "inventory.demo_scratch"


def root_conn():
    return pymysql.connect(
        host=os.environ.get("CDC_MYSQL_HOST", "127.0.0.1"),
        port=int(os.environ.get("CDC_MYSQL_PORT", "3307")),
        user="root",
        password=os.environ.get("CDC_MYSQL_ROOT_PASSWORD", "root-secret"),
        autocommit=True,
        init_command="SET time_zone='+00:00'",
    )


def prepare_scratch() -> None:
    with root_conn() as c, c.cursor() as cur:
        cur.execute(f"DROP TABLE IF EXISTS {SCRATCH}")
        cur.execute(
            f"CREATE TABLE {SCRATCH} (id INT PRIMARY KEY, note VARCHAR(40)) COMMENT 'scratch table of the demo'"
        )
        cur.execute(f"INSERT INTO {SCRATCH} VALUES (1,'one'),(2,'two'),(3,'three')")


WORKLOAD = [
    "INSERT INTO inventory.customers VALUES (default,'Sarah','Thompson','kitt@acme.com')",
    "INSERT INTO inventory.products VALUES (default,'robot','Toy robot',1.25),(default,'kite','Red kite',0.4)",
    "UPDATE inventory.customers SET first_name='Anne Marie' WHERE id=1004",
    "UPDATE inventory.products SET id=120 WHERE name='kite'",  # primary-key change: d + c
    "DELETE FROM inventory.orders WHERE order_number=10004",
    "ALTER TABLE inventory.customers ADD COLUMN phone VARCHAR(20) NULL",
    "UPDATE inventory.customers SET phone='+1-555-0100' WHERE id=1001",
    "INSERT INTO inventory.customers VALUES (default,'Edward','Smith','edsmith@example.com','+1-555-0101')",
    f"TRUNCATE TABLE {SCRATCH}",
    f"INSERT INTO {SCRATCH} VALUES (10,'after truncate')",
    "UPDATE inventory.products_on_hand SET quantity=quantity+1 WHERE product_id IN (101,102)",
]


def apply_workload() -> None:
    with root_conn() as c, c.cursor() as cur:
        for sql in WORKLOAD:
            cur.execute(sql)
            print(f"  mysql> {sql}")


def source_rows(db: str, table: str) -> tuple[list[dict], list[str]]:
    with root_conn() as c:
        schema = read_table_schemas(c, [(db, table)])[(db, table)]
        with c.cursor() as cur:
            cur.execute(f"SELECT * FROM `{db}`.`{table}`")
            rows = (
                TableConverter(schema, TypeOptions(), "pymysql")
                .to_record_batch(list(cur.fetchall()))
                .to_pylist()
            )
    key = list(schema.primary_key)
    return sorted(rows, key=lambda r: tuple(r[k] for k in key)), key


def lake_rows(storage, uri: str, key: list[str], columns: list[str]) -> list[dict]:
    """The live rows of a table's current state (its state table with the tail applied)."""
    from dagster_mysql_cdc.sink.read import read_current

    t = read_current(storage, uri, live=True)
    rows = t.to_pylist() if t is not None else []
    rows = [{c: r.get(c) for c in columns} for r in rows]
    return sorted(rows, key=lambda r: tuple(r[k] for k in key))


def report(storage, server: str, tables: list[str]) -> bool:
    ok = True
    opts = storage.delta_storage_options()
    print(f"\n{'table':<18}{'source':>8}{'lake':>7}  change log by op              state table")
    for table in tables:
        expected, key = source_rows("inventory", table)
        base = storage.uri(server, "inventory", table)
        cols = list(expected[0]) if expected else key
        live = lake_rows(storage, f"{base}/state", key, cols)
        log = DeltaTable(f"{base}/changelog", storage_options=opts).to_pyarrow_table(
            columns=["op"], filesystem=storage.delta_filesystem(f"{base}/changelog")
        )
        ops = dict(
            sorted(zip(*[log.column("op").value_counts().field(f).to_pylist() for f in ("values", "counts")]))
        )
        same = live == expected
        ok &= same
        print(
            f"{table:<18}{len(expected):>8}{len(live):>7}  {json.dumps(ops):<29} {base}/state{'' if same else '   <-- MISMATCH'}"
        )
    return ok


def show_events(storage, server: str) -> None:
    uri = storage.uri(server, "inventory", "customers", "changelog")
    t = DeltaTable(uri, storage_options=storage.delta_storage_options()).to_pyarrow_table(
        filesystem=storage.delta_filesystem(uri)
    )
    events = [e for e in t.to_pylist() if e["op"] != "r"]
    events.sort(key=lambda e: (e["source"]["file"], e["source"]["pos"], e["source"]["row"]))
    print("\ncustomers change events (Debezium envelope, streamed):")
    for e in events:
        src = e["source"]
        print(
            json.dumps(
                {
                    "op": e["op"],
                    "before": e["before"],
                    "after": e["after"],
                    "source": {
                        k: src[k]
                        for k in ("file", "pos", "row", "gtid", "server_id", "db", "table", "snapshot")
                    },
                },
                default=str,
            )
        )
    hist_uri = storage.uri(server, "_schema_history")
    hist = DeltaTable(hist_uri, storage_options=storage.delta_storage_options())
    print("\nschema history (DDL with binlog position):")
    for r in (
        hist.to_pyarrow_table(filesystem=storage.delta_filesystem(hist_uri))
        .sort_by([("file_seq", "ascending"), ("pos", "ascending")])
        .to_pylist()
    ):
        ddl = " ".join(r["ddl"].split())
        print(f"  {r['file']}:{r['pos']:<8} {ddl[:90]}")


def write_event_log(instances: list[dg.DagsterInstance], path: str) -> None:
    """Writes every event of every run of ``instances`` to ``path``, one line each, oldest run first."""
    with open(path, "w", encoding="utf-8") as f:
        for instance in instances:
            for run in reversed(instance.get_runs()):
                for e in instance.all_logs(run.run_id):
                    kind = e.dagster_event.event_type_value if e.dagster_event else "LOG"
                    ts = time.strftime("%H:%M:%S", time.localtime(e.timestamp))
                    f.write(f"{ts} {run.run_id[:8]} {e.step_key or '-'} {kind} {e.user_message}\n")


def main() -> int:
    """Run the demo; the in-memory Dagster instances are disposed at the end (none left for the
    interpreter's exit to finalize)."""
    with contextlib.ExitStack() as instances:
        return _demo(instances)


def local_lake(server_name: str) -> str:
    """The demo's second lake: ``CDC_LAKE_URI`` (default ``.lake``, the lake of ``make ui`` too),
    unless a Dagster deployment holds its ``server_name`` prefix (its owner marker names a live
    instance, e.g. ``make ui``'s in ``.infra/dagster-home``): the demo wipes and rewrites its local
    lake with a cursor of its own, which would lose that deployment's changes, so it writes
    ``$CDC_INFRA_DIR/demo-lake`` instead and says so.

    Raises:
        SystemExit: the fallback lake is held by a deployment as well.
    """
    configured = os.environ.get("CDC_LAKE_URI", ".lake")
    fallback = os.path.join(os.environ.get("CDC_INFRA_DIR", ".infra"), "demo-lake")
    markers = []
    for uri in (configured, fallback):
        storage = lake_resource(uri).storage_settings()
        held = read_owner(storage, server_name)
        if held is None or owner_is_gone(held):
            if markers:
                print(
                    f"\n.. {markers[0]}: the lake of a Dagster deployment (`make ui`?), which the demo "
                    f"leaves alone; the demo's local lake is {uri} instead",
                    flush=True,
                )
            return uri
        markers.append(
            f"{owner_marker_uri(storage, server_name)} names Dagster instance {held['instance_id']}"
        )
    raise SystemExit(
        f"The demo's local lakes belong to Dagster deployments ({'; '.join(markers)}): the demo "
        "wipes its local lake first, so it writes neither. Set CDC_LAKE_URI to another folder."
    )


#: The demo's replication client id: not the one of ``make ui``'s deployment
#: (:data:`assets.inventory.EXAMPLE_SERVER_ID`), which may be streaming from the same server (two
#: binlog dumps with one id disconnect each other).
DEMO_SERVER_ID = 5700


def _demo(instances: contextlib.ExitStack) -> int:
    verbose = "--verbose" in sys.argv[1:]
    log_level = "DEBUG" if verbose else "WARNING"
    event_log = os.path.join(os.environ.get("CDC_INFRA_DIR", ".infra"), "demo-dagster.log")
    os.makedirs(os.path.dirname(event_log), exist_ok=True)
    prepare_scratch()
    mysql = mysql_resource(server_id=DEMO_SERVER_ID)
    assets_def = build_inventory_assets(mysql)
    sensor = build_mysql_cdc_sensor(assets_def)
    tables = sorted(k.path[2] for k in assets_def.keys if len(k.path) == 3)
    bucket = os.environ.get("CDC_S3_BUCKET", "lake")
    lakes = [
        f"s3://{bucket}/demo-{time.strftime('%Y%m%d-%H%M%S')}-{uuid.uuid4().hex[:6]}",
        local_lake(mysql.server_name),
    ]
    runs = []
    for uri in lakes:
        lake = lake_resource(uri)
        storage = lake.storage_settings()
        if not storage.is_s3:
            shutil.rmtree(storage.uri(mysql.server_name), ignore_errors=True)
        instance = instances.enter_context(dg.DagsterInstance.ephemeral())
        resources = {"mysql": mysql, "lake": lake}
        print(
            f"\n.. initial snapshot of {len(tables)} tables into {storage.root} (the first run starts Spark)",
            flush=True,
        )
        t0 = time.monotonic()
        ticks = run_sensor_ticks(sensor, assets_def, resources, instance, run_log_level=log_level)
        print(
            f"\n== initial snapshot into {storage.root}: {ticks.ticks} sensor ticks, "
            f"{len(ticks.runs)} run(s), {time.monotonic() - t0:.1f}s (incl. Spark start)"
        )
        print("   sensor:", " | ".join(ticks.skip_reasons))
        runs.append((uri, lake, storage, instance, resources, ticks.cursor))
    print("\n== workload on inventory")
    apply_workload()
    ok = True
    for _uri, _lake, storage, instance, resources, cursor in runs:
        print(f"\n.. streaming the binlog into {storage.root}", flush=True)
        t0 = time.monotonic()
        ticks = run_sensor_ticks(
            sensor, assets_def, resources, instance, cursor=cursor, run_log_level=log_level
        )
        print(
            f"\n== streaming into {storage.root}: {ticks.ticks} ticks, {len(ticks.runs)} window run(s), "
            f"{time.monotonic() - t0:.1f}s"
        )
        print("   sensor:", " | ".join(ticks.skip_reasons))
        print("   cursor:", ticks.cursor)
        ok &= report(storage, mysql.server_name, tables)
    show_events(runs[0][2], mysql.server_name)
    write_event_log([r[3] for r in runs], event_log)
    print(f"\nDagster event log of every run: {event_log}")
    print(
        "\nlake state equals source, row for row, in every lake"
        if ok
        else "\nMISMATCH between lake and source"
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
