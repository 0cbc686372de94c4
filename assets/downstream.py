"""A downstream asset of the captured tables: order totals per product, kept up to date
incrementally from the ``orders`` change feed.

``inventory_order_totals`` processes only the ``inventory.orders`` changes since its last run
(``lake.incremental_changes``: the position is recorded in the asset's materialization metadata,
so each change is processed once across retries and crashes), joins the per-product sums with the
current ``inventory.products`` (a small dimension table, read whole), and writes two Delta tables
next to the captured ones::

    <lake>/analytics/inventory_order_totals         product_id, product_name, orders, total_quantity,
                                                    total_weight, last_order_date
    <lake>/analytics/inventory_order_totals_by_day  product_id, order_date, orders, quantity
                                                    (the running sums the changes are applied to)

Exactly once: a run reads ``by_day`` *at the Delta version the last recorded materialization
wrote* (time travel), applies the changes and writes a new version; a run that dies before its
materialization is recorded leaves its write unreferenced, and the next run starts again from the
recorded version with the same changes. The change feed says ``rebuild`` (first run, a re-snapshot
or TRUNCATE of ``orders``, a position older than the lake's retention): the sums are recomputed
from the current state, as they are when the window holds snapshot reads (``op=r`` events carry
no ``before`` image to subtract).

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

#: Lake paths of the result and of its running sums, below the lake root (next to ``<server>/...``).
TOTALS_PATH = ("analytics", "inventory_order_totals")
BY_DAY_PATH = ("analytics", "inventory_order_totals_by_day")
#: Metadata key: the Delta version of ``by_day`` this materialization wrote.
BY_DAY_VERSION = "by_day_version"

ORDER_COLUMNS = ["order_number", "order_date", "quantity", "product_id"]

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
BY_DAY_SCHEMA = pa.schema(
    [
        pa.field("product_id", pa.int32()),
        pa.field("order_date", pa.int32()),
        pa.field("orders", pa.int64()),
        pa.field("quantity", pa.int64()),
    ]
)


def by_day(orders: pa.Table, sign: int = 1) -> pa.Table:
    """Orders and units per product and day of ``orders`` (``order_date, quantity, product_id``),
    times ``sign``."""
    g = orders.group_by(["product_id", "order_date"]).aggregate([([], "count_all"), ("quantity", "sum")])
    return pa.table(
        {
            "product_id": pc.cast(g["product_id"], pa.int32()),
            "order_date": pc.cast(g["order_date"], pa.int32()),
            "orders": pc.multiply(pc.cast(g["count_all"], pa.int64()), sign),
            "quantity": pc.multiply(pc.cast(pc.fill_null(g["quantity_sum"], 0), pa.int64()), sign),
        },
        schema=BY_DAY_SCHEMA,
    )


def apply_changes(previous: pa.Table, events: pa.Table) -> pa.Table:
    """``previous`` (per product and day) with the change events of ``orders`` applied: an
    event's ``before`` image is subtracted, its ``after`` image added (Debezium envelopes)."""
    parts = [previous]
    for side, sign in (("before", -1), ("after", 1)):
        img = events.column(side)
        present = pc.is_valid(img)
        rows = pa.table(
            {n: pc.struct_field(img, n) for n in ("order_date", "quantity", "product_id")}
        ).filter(present)
        if rows.num_rows:
            parts.append(by_day(rows, sign))
    merged = (
        pa.concat_tables(parts)
        .group_by(["product_id", "order_date"])
        .aggregate([("orders", "sum"), ("quantity", "sum")])
    )
    out = pa.table(
        {
            "product_id": merged["product_id"],
            "order_date": merged["order_date"],
            "orders": merged["orders_sum"],
            "quantity": merged["quantity_sum"],
        },
        schema=BY_DAY_SCHEMA,
    )
    return out.filter(pc.greater(out["orders"], 0))


def order_totals(days: pa.Table, products: pa.Table) -> pa.Table:
    """Per product with orders: number of orders, units, weight (units x product weight), last
    order date, from the per-day sums and ``products`` (``id, name, weight``)."""
    per_product = days.group_by("product_id").aggregate(
        [("orders", "sum"), ("quantity", "sum"), ("order_date", "max")]
    )
    joined = per_product.join(products, keys="product_id", right_keys="id", join_type="left outer")
    weight = pc.multiply(
        pc.cast(joined["quantity_sum"], pa.float64()), pc.cast(joined["weight"], pa.float64())
    )
    out = pa.table(
        {
            "product_id": pc.cast(joined["product_id"], pa.int32()),
            "product_name": joined["name"],
            "orders": pc.cast(joined["orders_sum"], pa.int64()),
            "total_quantity": pc.cast(joined["quantity_sum"], pa.int64()),
            "total_weight": pc.round(weight, 3),
            # io.debezium.time.Date is int32 days since 1970-01-01, exactly Arrow's date32
            "last_order_date": pc.cast(pc.cast(joined["order_date_max"], pa.int32()), pa.date32()),
        },
        schema=TOTALS_SCHEMA,
    )
    return out.sort_by("product_id")


def _dep(asset: dg.AssetKey, *columns: str) -> list[dg.TableColumnDep]:
    return [dg.TableColumnDep(asset_key=asset, column_name=c) for c in columns]


def build_order_totals(
    server: str = SERVER_NAME,
    database: str = "inventory",
    *,
    key: str = "inventory_order_totals",
    output: tuple[str, str] = TOTALS_PATH,
    by_day_output: tuple[str, str] = BY_DAY_PATH,
) -> dg.AssetsDefinition:
    """The order totals asset over ``<database>.orders`` and ``<database>.products`` of
    ``server`` (the example's is :data:`inventory_order_totals`; tests build others)."""
    orders_key = dg.AssetKey([server, database, "orders"])
    products_key = dg.AssetKey([server, database, "products"])
    lineage = dg.TableColumnLineage(
        deps_by_column={
            "product_id": _dep(orders_key, "product_id"),
            "product_name": _dep(products_key, "name"),
            "orders": _dep(orders_key, "order_number"),
            "total_quantity": _dep(orders_key, "quantity"),
            "total_weight": _dep(orders_key, "quantity") + _dep(products_key, "weight"),
            "last_order_date": _dep(orders_key, "order_date"),
        }
    )

    @dg.asset(
        key=key,
        group_name="analytics",
        kinds={"delta", "pyarrow"},
        deps=[orders_key, products_key],
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
            f"Orders, units and shipped weight per product, from the `{database}.orders` change feed "
            f"(incremental, each change once) and the current `{database}.products`."
        ),
    )
    def order_totals_asset(context: dg.AssetExecutionContext, lake: CdcLakeResource) -> dg.MaterializeResult:
        storage = lake.storage_settings()  # no Spark: only the lake location and credentials
        opts = storage.delta_storage_options()
        days_uri = storage.uri(*by_day_output)
        feed = lake.incremental_changes(context, (server, database, "orders"))
        done = feed.previous.get(BY_DAY_VERSION)
        snapshot_reads = feed.events is not None and pc.any(pc.equal(feed.events["op"], "r")).as_py()
        if feed.rebuild or done is None or snapshot_reads:
            orders = feed.read_current(columns=ORDER_COLUMNS, metadata=False)
            days = by_day(orders)
            reason = feed.rebuild or (
                "snapshot reads in the window" if snapshot_reads else "no recorded sums"
            )
            how = f"recomputed from {orders.num_rows} live orders ({reason})"
        else:
            previous = DeltaTable(days_uri, version=int(done), storage_options=opts).to_pyarrow_table(
                filesystem=storage.delta_filesystem(days_uri)
            )
            days = apply_changes(previous, feed.events)
            how = f"{feed.events.num_rows} change(s) applied"
        write_deltalake(days_uri, days, mode="overwrite", schema_mode="overwrite", storage_options=opts)
        written = DeltaTable(days_uri, storage_options=opts).version()
        products = lake.read_current(
            (server, database, "products"), columns=["id", "name", "weight"], metadata=False
        )
        totals = order_totals(days, products)
        uri = storage.uri(*output)
        write_deltalake(uri, totals, mode="overwrite", schema_mode="overwrite", storage_options=opts)
        context.log.info(f"{totals.num_rows} product(s): {how} -> {uri}")
        return dg.MaterializeResult(
            metadata={
                **feed.metadata,  # the change feed position reached (recorded with this materialization)
                BY_DAY_VERSION: dg.MetadataValue.int(written),
                "dagster/row_count": dg.MetadataValue.int(totals.num_rows),
                "dagster/column_lineage": lineage,
                "dagster/uri": dg.MetadataValue.path(uri),
                "total_quantity": dg.MetadataValue.int(int(pc.sum(totals["total_quantity"]).as_py() or 0)),
                "uri": dg.MetadataValue.path(uri),
                "delta_version": dg.MetadataValue.int(DeltaTable(uri, storage_options=opts).version()),
                "preview": dg.MetadataValue.md(_markdown(totals)),
            }
        )

    return order_totals_asset


inventory_order_totals = build_order_totals()


def _markdown(t: pa.Table, limit: int = 20) -> str:
    rows = t.slice(0, limit).to_pylist()
    head = "| " + " | ".join(t.column_names) + " |\n|" + "---|" * len(t.column_names) + "\n"
    return head + "".join("| " + " | ".join(str(r[c]) for c in t.column_names) + " |\n" for r in rows)
