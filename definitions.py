"""Example code location: Debezium's ``inventory`` database captured into a Delta lake.

    make infra && bash infra/load_dataset.sh inventory
    dagster dev -f definitions.py        # then open http://127.0.0.1:3000

Materialize the table assets to snapshot them; turn on ``dbserver1_cdc_binlog_sensor`` to stream
the binlog into the lake continuously. ``inventory_order_totals`` (assets/downstream.py) is a
downstream asset recomputed automatically (``AutomationCondition.eager()``) whenever the captured
``orders`` or ``products`` table changes; turn on ``default_automation_condition_sensor`` for it.
"""

import dagster as dg

from assets.downstream import inventory_order_totals
from assets.inventory import (
    build_inventory_assets,
    build_inventory_range_assets,
    lake_resource,
    mysql_resource,
)
from dagster_mysql_cdc import build_mysql_cdc_sensor

# Stream runs keep following the binlog for up to 5 minutes while changes keep coming (one warm
# run instead of a new run per window: seconds from COMMIT to the lake under `dagster dev`).
mysql = mysql_resource(stream_follow_seconds=300.0)
inventory_cdc = build_inventory_assets(mysql)

defs = dg.Definitions(
    assets=[inventory_cdc, *build_inventory_range_assets(mysql), inventory_order_totals],
    sensors=[build_mysql_cdc_sensor(inventory_cdc, minimum_interval_seconds=5)],
    resources={"mysql": mysql, "lake": lake_resource()},
)
