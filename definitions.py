"""Example code location: Debezium's ``inventory`` database captured into a Delta lake.

    make infra && bash infra/load_dataset.sh inventory
    dagster dev                          # in the repository root ([tool.dagster] in pyproject.toml),
                                         # or dagster dev -f path/to/definitions.py from anywhere

Materialize the table assets to snapshot them; turn on ``dbserver1_cdc_binlog_sensor`` to stream
the binlog into the lake continuously. ``inventory_order_totals`` (assets/downstream.py) is a
downstream asset recomputed automatically (``AutomationCondition.eager()``) whenever the captured
``orders`` or ``products`` table changes; turn on ``default_automation_condition_sensor`` for it.
"""

import sys
from pathlib import Path

# `dagster dev -f path/to/definitions.py` from another folder: the example's packages (assets/) are
# found next to this file, whatever the working directory.
_HERE = str(Path(__file__).resolve().parent)
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)

import dagster as dg

from assets.downstream import inventory_order_totals
from assets.inventory import (
    SENSOR_INTERVAL_SECONDS,
    build_inventory_assets,
    build_inventory_range_assets,
    lake_resource,
    mysql_resource,
)
from dagster_mysql_cdc import build_full_checks_schedule, build_mysql_cdc_sensor, build_verification_sensor

# Stream runs keep following the binlog for up to 5 minutes while changes keep coming (one warm
# run instead of a new run per window: seconds from COMMIT to the lake under `dagster dev`).
mysql = mysql_resource(stream_follow_seconds=300.0)
inventory_cdc = build_inventory_assets(mysql)

defs = dg.Definitions(
    assets=[inventory_cdc, *build_inventory_range_assets(mysql), inventory_order_totals],
    # the binlog sensor, and the rotating verification: every table compared with the source, a
    # key range per tick, a confirmed difference repaired (docs/operations.md#rotating-verification)
    sensors=[
        build_mysql_cdc_sensor(inventory_cdc, minimum_interval_seconds=SENSOR_INTERVAL_SECONDS),
        build_verification_sensor(inventory_cdc),
    ],
    # stream runs verify what each window changed; the full (whole-table) checks nightly, when
    # switched on under Automation
    schedules=[build_full_checks_schedule(inventory_cdc, "0 3 * * *")],
    resources={"mysql": mysql, "lake": lake_resource()},
)
