"""The input manager that hands a downstream asset a captured table's current state (Dagster's IO
managers and ``AssetIn``): :class:`CdcInputManager` loads the current state
(:func:`..downstream.current.read_current`) as the input's type annotation asks:
``pyarrow.Table``, ``polars.DataFrame`` or a Spark ``DataFrame``.
"""

from __future__ import annotations

from typing import Any

import dagster as dg
from pydantic import Field

from ..errors import ConfigurationError
from .lake_resource import CdcLakeResource


class CdcInputManager(dg.ConfigurableIOManager):
    """Loads a captured table's current state into a downstream asset's input
    (``AssetIn(key=<the table's asset key>, input_manager_key="cdc_tables")``), as the input's
    annotation asks: ``pyarrow.Table`` (default), ``polars.DataFrame``, or a Spark ``DataFrame``
    (read by the executors on the lake resource's Spark session). ``AssetIn(metadata=...)`` may
    name ``columns`` (list) and ``filter`` (DNF list) and ``tombstones`` (bool).

    Input only: outputs go to the asset's own IO manager."""

    lake: CdcLakeResource = Field(description="The CdcLakeResource of the captured tables.")

    def load_input(self, context: dg.InputContext) -> Any:
        from ..downstream.current import read_current, read_current_spark

        if not context.has_asset_key:
            raise ConfigurationError(
                "CdcInputManager loads captured tables: give the input an AssetIn(key=...)"
            )
        meta = dict(context.definition_metadata or {})
        kwargs = {k: meta[k] for k in ("columns", "filter", "tombstones") if k in meta}
        typ = context.dagster_type.typing_type if context.dagster_type is not None else None
        mod = getattr(typ, "__module__", "") or ""
        if mod.startswith("pyspark"):
            return read_current_spark(self.lake.spark_session(), context.asset_key, self.lake, **kwargs)
        table = read_current(context.asset_key, self.lake, **kwargs)
        context.add_input_metadata({"rows": table.num_rows})
        if mod.startswith("polars"):
            import polars as pl

            return pl.from_arrow(table)
        return table

    def handle_output(self, context: dg.OutputContext, obj: Any) -> None:
        raise ConfigurationError(
            "CdcInputManager only loads captured tables (input_manager_key of an AssetIn); give the "
            "asset's outputs another io_manager_key"
        )
