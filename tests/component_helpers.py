"""Loading ``MySqlCdcComponent`` defs.yaml attributes as ``dg``/``dagster dev`` do, shared by the
component tests (service-free unit tests and the ones against MariaDB)."""

import dagster as dg
from dagster.components.testing import create_defs_folder_sandbox

from dagster_mysql_cdc import MySqlCdcComponent


def load_in_sandbox(attributes: dict, sandbox) -> tuple[MySqlCdcComponent, dg.Definitions]:
    """Write a defs.yaml with ``attributes`` into ``sandbox`` (a dg project) and load it."""
    path = sandbox.scaffold_component(
        component_cls=MySqlCdcComponent,
        defs_yaml_contents={"type": "dagster_mysql_cdc.MySqlCdcComponent", "attributes": attributes},
    )
    with sandbox.load_component_and_build_defs(defs_path=path) as (component, defs):
        return component, defs


def load_yaml(attributes: dict) -> tuple[MySqlCdcComponent, dg.Definitions]:
    """:func:`load_in_sandbox` in a fresh sandbox project."""
    with create_defs_folder_sandbox() as sandbox:
        return load_in_sandbox(attributes, sandbox)


def all_keys(defs: dg.Definitions) -> set[dg.AssetKey]:
    return set(defs.resolve_asset_graph().get_all_asset_keys())


def the_assets_def(defs: dg.Definitions) -> dg.AssetsDefinition:
    (ad,) = [a for a in defs.assets if isinstance(a, dg.AssetsDefinition)]
    return ad
