"""A downstream asset of the captured tables: order totals per product, kept up to date automatically.

``inventory_order_totals`` reads the current-state Delta tables of ``inventory.orders`` and
``inventory.products`` straight from the lake with deltalake + pyarrow (no Spark: the tables are
small and the JVM stays in the CDC runs), keeps the live rows (``__deleted = false``), joins and
aggregates them, and writes the result as a Delta table next to the captured ones::

    <lake>/analytics/inventory_order_totals      product_id, product_name, orders, total_quantity,
                                                 total_weight, last_order_date

Automation: :data:`ON_DATA_CHANGE`, Dagster's ``AutomationCondition.eager()`` with its
``newly_updated`` (any new materialization of a parent) replaced by ``data_version_changed``: a
run is requested when the data of ``orders`` or ``products`` changed, i.e. after every snapshot
and every binlog window that changed one of them (the sensor's window runs only materialize the
tables they changed, each with a new data version), and not after the runless heartbeats the
sensor reports for quiet tables (every half warn window: they keep the table's data version, see
``dagster_mysql_cdc/dagster_integration/heartbeat.py``); plain ``eager()`` would recompute after
each of them. Turn on ``default_automation_condition_sensor`` (Automation page) for it to be
evaluated. The freshness policy flags the asset when it has not been recomputed for a day.
"""

import datetime as dt

import dagster as dg
import pyarrow as pa
import pyarrow.compute as pc
from deltalake import DeltaTable, write_deltalake

from assets.inventory import SERVER_NAME
from dagster_mysql_cdc import CdcLakeResource
from dagster_mysql_cdc.sink.read import read_current
from dagster_mysql_cdc.sink.state_rows import live_multiset
from dagster_mysql_cdc.sink.storage import StorageSettings

ORDERS = dg.AssetKey([SERVER_NAME, "inventory", "orders"])
PRODUCTS = dg.AssetKey([SERVER_NAME, "inventory", "products"])

#: ``eager()`` for the parents' data changes: a parent's materialization counts only when its data
#: version changed (a run's does; a capture heartbeat keeps the data version of the table's last
#: materialization, so it does not).
ON_DATA_CHANGE = (
    dg.AutomationCondition.eager()
    .replace("newly_updated", dg.AutomationCondition.data_version_changed())
    .with_label("eager (on data change)")
)

#: Lake path of the result, below the lake root (next to ``<server>/...``).
TOTALS_PATH = ("analytics", "inventory_order_totals")

TOTALS_SCHEMA = pa.schema(
    [
        pa.field("product_id", pa.int32()),
        pa.field("product_name", pa.string()),
        pa.field("orders", pa.int64()),
        pa.field("total_quantity", pa.int64()),
        pa.field("total_weight", pa.float64()),
        pa.field("last_order_date", pa.date32()),
    ]
)


def _dep(asset: dg.AssetKey, *columns: str) -> list[dg.TableColumnDep]:
    return [dg.TableColumnDep(asset_key=asset, column_name=c) for c in columns]


#: Which captured columns each result column derives from (the UI's column lineage).
TOTALS_LINEAGE = dg.TableColumnLineage(
    deps_by_column={
        "product_id": _dep(ORDERS, "product_id"),
        "product_name": _dep(PRODUCTS, "name"),
        "orders": _dep(ORDERS, "order_number"),
        "total_quantity": _dep(ORDERS, "quantity"),
        "total_weight": _dep(ORDERS, "quantity") + _dep(PRODUCTS, "weight"),
        "last_order_date": _dep(ORDERS, "order_date"),
    }
)


def live_rows(storage: StorageSettings, uri: str, columns: list[str]) -> pa.Table:
    """The live rows of a captured table's current state: its ``state`` Delta table with the
    tail of changes since its last compaction applied (``read_current``; tombstones dropped; a
    keyless table's row repeated ``__count`` times, one per copy in the source)."""
    current = read_current(storage, uri, live=True, columns=columns)
    if current is None:
        raise ValueError(f"{uri} has not been captured yet: materialize the captured tables first")
    return live_multiset(current).select(columns)


def order_totals(orders: pa.Table, products: pa.Table) -> pa.Table:
    """Per product with orders: number of orders, units, weight (units x product weight), last order date.

    ``orders``: ``order_number, order_date, quantity, product_id`` (``order_date`` in Debezium's
    ``io.debezium.time.Date``: days since the epoch); ``products``: ``id, name, weight``.
    """
    per_product = orders.group_by("product_id").aggregate(
        [("order_number", "count"), ("quantity", "sum"), ("order_date", "max")]
    )
    joined = per_product.join(products, keys="product_id", right_keys="id", join_type="left outer")
    weight = pc.multiply(
        pc.cast(joined["quantity_sum"], pa.float64()), pc.cast(joined["weight"], pa.float64())
    )
    out = pa.table(
        {
            "product_id": pc.cast(joined["product_id"], pa.int32()),
            "product_name": joined["name"],
            "orders": pc.cast(joined["order_number_count"], pa.int64()),
            "total_quantity": pc.cast(joined["quantity_sum"], pa.int64()),
            "total_weight": pc.round(weight, 3),
            # io.debezium.time.Date is int32 days since 1970-01-01, exactly Arrow's date32
            "last_order_date": pc.cast(pc.cast(joined["order_date_max"], pa.int32()), pa.date32()),
        },
        schema=TOTALS_SCHEMA,
    )
    return out.sort_by("product_id")


@dg.asset(
    key="inventory_order_totals",
    group_name="analytics",
    kinds={"delta", "pyarrow"},
    deps=[ORDERS, PRODUCTS],
    automation_condition=ON_DATA_CHANGE,
    freshness_policy=dg.FreshnessPolicy.time_window(
        fail_window=dt.timedelta(days=1), warn_window=dt.timedelta(hours=12)
    ),
    metadata={
        "dagster/column_schema": dg.TableSchema(
            columns=[dg.TableColumn(f.name, str(f.type)) for f in TOTALS_SCHEMA]
        ),
    },
    description=(
        "Orders, units and shipped weight per product, from the live rows of the captured "
        "`inventory.orders` and `inventory.products` state tables; recomputed whenever either changes."
    ),
)
def inventory_order_totals(context: dg.AssetExecutionContext, lake: CdcLakeResource) -> dg.MaterializeResult:
    storage = lake.storage_settings()  # no Spark: only the lake location and credentials
    opts = storage.delta_storage_options()
    orders = live_rows(
        storage,
        storage.uri(SERVER_NAME, "inventory", "orders", "state"),
        ["order_number", "order_date", "quantity", "product_id"],
    )
    products = live_rows(
        storage, storage.uri(SERVER_NAME, "inventory", "products", "state"), ["id", "name", "weight"]
    )
    totals = order_totals(orders, products)
    uri = storage.uri(*TOTALS_PATH)
    write_deltalake(uri, totals, mode="overwrite", schema_mode="overwrite", storage_options=opts)
    context.log.info(f"{totals.num_rows} product(s), {orders.num_rows} live order(s) -> {uri}")
    return dg.MaterializeResult(
        metadata={
            "dagster/row_count": dg.MetadataValue.int(totals.num_rows),
            "dagster/column_lineage": TOTALS_LINEAGE,
            "dagster/uri": dg.MetadataValue.path(uri),
            "live_orders": dg.MetadataValue.int(orders.num_rows),
            "total_quantity": dg.MetadataValue.int(int(pc.sum(totals["total_quantity"]).as_py() or 0)),
            "uri": dg.MetadataValue.path(uri),
            "delta_version": dg.MetadataValue.int(DeltaTable(uri, storage_options=opts).version()),
            "preview": dg.MetadataValue.md(_markdown(totals)),
        }
    )


def _markdown(t: pa.Table, limit: int = 20) -> str:
    rows = t.slice(0, limit).to_pylist()
    head = "| " + " | ".join(t.column_names) + " |\n|" + "---|" * len(t.column_names) + "\n"
    return head + "".join("| " + " | ".join(str(r[c]) for c in t.column_names) + " |\n" for r in rows)
