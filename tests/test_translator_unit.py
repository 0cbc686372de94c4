"""Service-free unit tests of the translator, the spec builder and the ``mysql_cdc_assets``
decorator (in the style of dagster-sling's translator tests): what a user's code location gets
before any server is reached."""

import dagster as dg
import pytest

from dagster_mysql_cdc import mysql_cdc_assets
from dagster_mysql_cdc.dagster_integration.protocol import BINLOG_METADATA_KEY, TABLE_METADATA_KEY
from dagster_mysql_cdc.dagster_integration.translator import (
    DagsterMySqlCdcTranslator,
    MySqlCdcTableProps,
    build_mysql_cdc_asset_specs,
    table_of_spec,
)
from dagster_mysql_cdc.source.schema import ColumnSchema, TableSchema

CUSTOMERS = TableSchema(
    "shop",
    "customers",
    (
        ColumnSchema("id", "int", 1, nullable=False),
        ColumnSchema("email", "varchar", 2, length=255, comment="login"),
        ColumnSchema("balance", "decimal", 3, precision=10, scale=2),
    ),
    primary_key=("id",),
    comment="Our customers",
)


def by_key(specs: list[dg.AssetSpec]) -> dict[tuple[str, ...], dg.AssetSpec]:
    return {tuple(s.key.path): s for s in specs}


def test_table_spec_from_a_schema():
    specs = by_key(build_mysql_cdc_asset_specs([CUSTOMERS], server_name="srv"))
    spec = specs[("srv", "shop", "customers")]
    assert spec.group_name == "shop" and spec.kinds == {"mysql", "spark", "delta"}
    assert spec.description == "Our customers" and spec.skippable
    md = spec.metadata
    assert md[TABLE_METADATA_KEY] == "shop.customers" and md["dagster/table_name"] == "srv.shop.customers"
    assert md["primary_key"] == "id"
    cols = {c.name: c for c in md["dagster/column_schema"].columns}
    assert cols["balance"].type == "decimal(10,2)" and cols["email"].description == "login"
    assert not cols["id"].constraints.nullable and cols["email"].constraints.nullable
    assert table_of_spec(spec) == ("shop", "customers")


def test_bare_names_and_the_binlog_asset():
    specs = by_key(build_mysql_cdc_asset_specs(["shop.orders"], server_name="srv"))
    assert set(specs) == {("srv", "shop", "orders"), ("srv", "binlog")}
    orders = specs[("srv", "shop", "orders")]
    assert "dagster/column_schema" not in orders.metadata  # no schema without a server
    assert "shop.orders" in (orders.description or "")
    binlog = specs[("srv", "binlog")]
    assert binlog.metadata[BINLOG_METADATA_KEY] == "srv" and binlog.group_name == "srv_cdc"
    only = build_mysql_cdc_asset_specs(["shop.orders"], server_name="srv", include_binlog=False)
    assert [s.key.path for s in only] == [["srv", "shop", "orders"]]
    with pytest.raises(ValueError, match="not built by dagster-mysql-cdc"):
        table_of_spec(binlog)


@pytest.mark.parametrize("name", ["orders", ".orders", "shop."])
def test_a_name_without_database_is_rejected(name):
    with pytest.raises(ValueError, match="'database.table'"):
        build_mysql_cdc_asset_specs([name], server_name="srv")


class Prefixed(DagsterMySqlCdcTranslator):
    """A user's translator: keys under ``raw/``, one group, its own tag; table metadata dropped."""

    def get_asset_spec(self, props: MySqlCdcTableProps) -> dg.AssetSpec:
        return dg.AssetSpec(
            key=["raw", props.database, props.table], group_name="landing", tags={"tier": "bronze"}
        )


def test_a_custom_translator_keeps_the_table_metadata_the_library_needs():
    specs = by_key(
        build_mysql_cdc_asset_specs([CUSTOMERS, "shop.orders"], server_name="srv", translator=Prefixed())
    )
    assert set(specs) == {("raw", "shop", "customers"), ("raw", "shop", "orders"), ("srv", "binlog")}
    spec = specs[("raw", "shop", "orders")]
    assert spec.group_name == "landing" and spec.tags == {"tier": "bronze"} and spec.skippable
    assert table_of_spec(spec) == ("shop", "orders")  # added back: the runs need it


def test_two_tables_on_one_key_are_rejected():
    class Flat(DagsterMySqlCdcTranslator):
        def get_asset_spec(self, props: MySqlCdcTableProps) -> dg.AssetSpec:
            return dg.AssetSpec(key=["raw", props.table])

    with pytest.raises(ValueError, match="same asset key"):
        build_mysql_cdc_asset_specs(["a.t", "b.t"], server_name="srv", translator=Flat())


def test_decorator_builds_a_subsettable_multi_asset_with_its_checks():
    @mysql_cdc_assets(tables=[CUSTOMERS, "shop.orders"], server_name="my-srv")
    def cdc(context: dg.AssetExecutionContext):
        yield from ()

    assert cdc.node_def.name == "my_srv_cdc" and cdc.can_subset
    checks: dict[tuple[str, ...], set[str]] = {}
    for ck in cdc.check_keys:
        checks.setdefault(tuple(ck.asset_key.path), set()).add(ck.name)
    table_checks = {"row_count_matches_source", "checksum_matches_source", "schema_matches_source"}
    assert checks[("my-srv", "shop", "customers")] == table_checks
    assert checks[("my-srv", "shop", "orders")] == table_checks
    assert checks[("my-srv", "binlog")] == {"binlog_retention", "changes_in_binlog"}

    @mysql_cdc_assets(tables=["shop.orders"], server_name="srv", checks=False, name="custom_op")
    def bare(context: dg.AssetExecutionContext):
        yield from ()

    assert bare.node_def.name == "custom_op" and not list(bare.check_keys)
