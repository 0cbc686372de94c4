"""Every identifier MySQL accepts is capturable (issue 26, point 2): database and table names
map to Dagster names (asset key parts, group names) deterministically and without collisions,
and to lake path segments; the real names stay in the metadata, the paths where they can and the
change events. Service-free."""

import re

import dagster as dg
import pytest

from dagster_mysql_cdc import build_pk_range_assets, mysql_cdc_assets
from dagster_mysql_cdc.dagster_integration.protocol import (
    DATABASE_NAME_METADATA_KEY,
    TABLE_METADATA_KEY,
    TABLE_NAME_METADATA_KEY,
)
from dagster_mysql_cdc.dagster_integration.translator import (
    build_mysql_cdc_asset_specs,
    dagster_name,
    table_asset_key,
    table_of_spec,
)
from dagster_mysql_cdc.sink.layout import LakeLayout, path_segment
from dagster_mysql_cdc.sink.storage import StorageSettings
from dagster_mysql_cdc.source.schema import ColumnSchema, TableSchema

# the names of the issue: Debezium's special_characters_test.sql, python-mysql-replication's
# test_read_query_event_with_unicode, and names MySQL accepts that Dagster does not
WEIRD = [
    "special\"[`]$'",
    "Ünïcode",
    "tbl space",
    "testÈ",
    "a-b",
    "a.b",
    "a b",
    "a/b",
    "..",
    "产品",
    "😀",
    "$",
]
DAGSTER_NAME = re.compile(r"^[A-Za-z0-9_]+$")


@pytest.mark.parametrize("name", ["orders", "Orders", "t_1", "_x", "123"])
def test_dagster_names_keep_valid_names(name):
    assert dagster_name(name) == name


def test_dagster_names_of_other_names_are_valid_readable_and_distinct():
    mapped = {n: dagster_name(n) for n in [*WEIRD, "a_b", "peer-dash", "peer_dash"]}
    assert all(DAGSTER_NAME.match(m) for m in mapped.values()), mapped
    assert len(set(mapped.values())) == len(mapped), "collision"
    assert mapped["a_b"] == "a_b" and mapped["a-b"].startswith("a_b_") and mapped["a.b"] != mapped["a-b"]
    assert mapped["Ünïcode"].startswith("Unicode_") and mapped["tbl space"].startswith("tbl_space_")
    assert mapped["special\"[`]$'"].startswith("special_")
    assert {n: dagster_name(n) for n in mapped} == mapped  # deterministic


def schema(db: str, table: str) -> TableSchema:
    cols = (ColumnSchema("special\"[`$]'_id", "int", 1, nullable=False), ColumnSchema("value", "int", 2))
    return TableSchema(db, table, cols, primary_key=("special\"[`$]'_id",))


def test_a_multi_asset_of_every_weird_name_loads_with_the_real_names_in_its_metadata():
    tables = [schema("peer-dash", t) for t in WEIRD] + [schema("peer-dash", "a_b"), schema("peer.dot", "x")]

    @mysql_cdc_assets(tables=tables, server_name="srv")
    def cdc(context: dg.AssetExecutionContext):
        yield from ()

    specs = [s for s in cdc.specs if TABLE_METADATA_KEY in (s.metadata or {})]
    assert len(specs) == len(tables)
    for s, t in zip(specs, tables):
        assert s.key == table_asset_key("srv", t.database, t.table)
        assert all(DAGSTER_NAME.match(p) for p in s.key.path)
        assert DAGSTER_NAME.match(s.group_name) and s.group_name == dagster_name(t.database)
        assert s.metadata[DATABASE_NAME_METADATA_KEY] == t.database
        assert s.metadata[TABLE_NAME_METADATA_KEY] == t.table
        assert s.metadata["dagster/table_name"] == f"srv.{t.database}.{t.table}"
        assert table_of_spec(s) == (t.database, t.table)  # a dot in the database name too
    resources = {
        "mysql": dg.ResourceDefinition.none_resource(),
        "lake": dg.ResourceDefinition.none_resource(),
    }
    defs = dg.Definitions(
        assets=[cdc, *build_pk_range_assets(tables, server_name="srv")], resources=resources
    )
    defs.resolve_asset_graph()
    defs.resolve_implicit_global_asset_job_def()


def test_valid_names_keep_their_keys_and_groups():
    (spec,) = build_mysql_cdc_asset_specs(["shop.orders"], server_name="srv", include_binlog=False)
    assert spec.key.path == ["srv", "shop", "orders"] and spec.group_name == "shop"


def test_two_tables_with_one_key_are_refused_with_the_fix():
    class SameKey:
        def get_asset_spec(self, props):
            return dg.AssetSpec(
                dg.AssetKey(["srv", "t"]), metadata={TABLE_METADATA_KEY: props.qualified_name}
            )

        def get_binlog_asset_spec(self, server_name):
            return dg.AssetSpec(dg.AssetKey([server_name, "binlog"]))

    with pytest.raises(ValueError, match="same asset key.*shop.a.*shop.b.*DagsterMySqlCdcTranslator"):
        build_mysql_cdc_asset_specs(["shop.a", "shop.b"], server_name="srv", translator=SameKey())


@pytest.mark.parametrize("name", ["orders", "order-items", "a.b", "v1_2", "tbl space", "Ünïcode", "产品"])
def test_path_segments_keep_names_a_path_can_carry(name):
    assert path_segment(name) == name


def test_path_segments_encode_what_a_path_or_url_cannot_carry():
    assert path_segment("special\"[`]$'") == "special@0022@005b@0060@005d@0024@0027"
    assert path_segment("a/b") == "a@002fb" and path_segment("a\\b") == "a@005cb"
    assert path_segment("..") == "@002e@002e" and path_segment(".") == "@002e"
    assert path_segment("a%20b") == "a@002520b" and path_segment("a@002520b") == "a@0040002520b"
    assert path_segment("😀") == "@d83d@de00"
    names = [*WEIRD, "a@002fb", "a_b", "a@b"]
    assert len({path_segment(n) for n in names}) == len(names)  # collision-free
    assert all("/" not in path_segment(n) and path_segment(n) not in (".", "..") for n in names)


def test_lake_layout_uses_the_path_segments(tmp_path):
    layout = LakeLayout(StorageSettings(base_uri=str(tmp_path)), "srv")
    paths = layout.table("peer-dash", "special\"[`]$'")
    assert paths.state == f"{tmp_path}/srv/peer-dash/special@0022@005b@0060@005d@0024@0027/state"
    assert layout.state("shop", "orders") == f"{tmp_path}/srv/shop/orders/state"  # unchanged
