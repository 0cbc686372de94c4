"""Example code location: Debezium's ``inventory`` database captured into a Delta lake.

    make infra && bash infra/load_dataset.sh inventory
    dagster dev -f definitions.py        # then open http://127.0.0.1:3000 and materialize
"""

import dagster as dg

from assets.inventory import build_inventory_assets, lake_resource, mysql_resource

mysql = mysql_resource()

defs = dg.Definitions(
    assets=[build_inventory_assets(mysql)],
    resources={"mysql": mysql, "lake": lake_resource()},
)
