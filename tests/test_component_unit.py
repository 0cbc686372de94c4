"""``MySqlCdcComponent`` without services: the YAML shape, its schema, secrets, validation, specs.

In the style of dagster-sling's component tests: a ``defs.yaml`` is written into a sandbox dg
project and loaded into ``Definitions`` like ``dg``/``dagster dev`` do. No server is needed: the
``mysql`` section points at a closed local port, so table discovery fails at once and the
component builds its specs from the listed ``tables`` (bare names, no column schema).
"""

import socket
import warnings

import dagster as dg
import pytest
import yaml
from component_helpers import all_keys, load_yaml, the_assets_def

from dagster_mysql_cdc import CdcLakeResource, MySqlCdcComponent, MySqlCdcResource, SourceConnectionError
from dagster_mysql_cdc.dagster_integration.component import (
    MYSQL_CHOICES,
    CdcLakeAttributes,
    MySqlCdcAttributes,
    MySqlCdcScaffoldParams,
    env_var_of_template,
    is_secret_field,
    starter_attributes,
)
from dagster_mysql_cdc.dagster_integration.protocol import BINLOG_METADATA_KEY, TABLE_METADATA_KEY
from dagster_mysql_cdc.dagster_integration.resources import DEFAULT_SPARK_CONFIG

SERVER = "unit1"
TABLES = ["shop.customers", "shop.orders"]


def closed_port() -> int:
    """A local port nothing listens on (connections are refused at once)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(autouse=True)
def secrets_env(monkeypatch):
    monkeypatch.setenv("UNIT_MYSQL_PASSWORD", "pw-from-env")
    monkeypatch.setenv("UNIT_S3_KEY", "key-from-env")
    monkeypatch.setenv("UNIT_S3_SECRET", "secret-from-env")
    monkeypatch.setenv("UNIT_S3_ENDPOINT", "http://127.0.0.1:9")


def attributes(mysql: dict | None = None, lake: dict | None = None, **component) -> dict:
    """Attributes in the current shape: ``mysql`` / ``lake`` are merged into the base sections."""
    return {
        "mysql": {
            "host": "127.0.0.1",
            "port": closed_port(),
            "user": "cdc",
            "password": "{{ env.UNIT_MYSQL_PASSWORD }}",
            "server_name": SERVER,
            "server_id": 7001,
            "connect_timeout": 1,
            "database_include_list": ["shop"],
            **(mysql or {}),
        },
        "lake": {
            "base_uri": "s3://lake/unit",
            "s3_endpoint_url": "{{ env.UNIT_S3_ENDPOINT }}",
            "s3_access_key_id": "{{ env.UNIT_S3_KEY }}",
            "s3_secret_access_key": "{{ env('UNIT_S3_SECRET') }}",
            "spark_config": {"spark.driver.memory": "1g"},
            **(lake or {}),
        },
        "tables": TABLES,
        "sensor": {"minimum_interval_seconds": 15},
        **component,
    }


def error_chain(e: BaseException | None) -> str:
    out = []
    while e is not None:
        out.append(str(e))
        e = e.__cause__ or e.__context__
    return "\n".join(out)


# -- the schema comes from the resources ------------------------------------------------------------
def test_mysql_section_is_every_resource_field_with_its_default_and_description():
    section = MySqlCdcAttributes.model_fields
    assert list(section) == list(MySqlCdcResource.model_fields)
    for name, info in MySqlCdcResource.model_fields.items():
        assert section[name].get_default(call_default_factory=True) == info.get_default(
            call_default_factory=True
        ), name
        assert section[name].description.startswith(info.description), name
    # the choice settings show their values in the schema
    schema = MySqlCdcAttributes.model_json_schema()["properties"]["snapshot_mode"]
    assert {"enum": list(MYSQL_CHOICES["snapshot_mode"]), "type": "string"} in schema["anyOf"]


def test_lake_section_is_every_plain_resource_field_plus_spark_config():
    plain = [n for n in CdcLakeResource.model_fields if n != "pyspark"]  # the nested resource
    assert list(CdcLakeAttributes.model_fields) == [*plain, "spark_config"]


def test_the_component_mirrors_no_resource_field():
    top = set(MySqlCdcComponent.model().model_fields)
    assert top == {
        "mysql",
        "lake",
        "tables",
        "sensor",
        "op",
        "mysql_resource_key",
        "lake_resource_key",
        "translation",
        "binlog_translation",
    }
    assert not top & (set(MySqlCdcResource.model_fields) | set(CdcLakeResource.model_fields))


def test_secret_fields_are_marked_on_the_resources():
    secrets = {n for n, i in MySqlCdcResource.model_fields.items() if is_secret_field(i)}
    assert secrets == {"password", "ssl_ca", "ssl_cert", "ssl_key", "column_mask_hash_salt"}
    secrets = {n for n, i in CdcLakeResource.model_fields.items() if is_secret_field(i)}
    assert secrets == {"s3_access_key_id", "s3_secret_access_key"}


# -- loading a defs.yaml ----------------------------------------------------------------------------
def test_yaml_builds_specs_from_the_listed_tables_without_a_server():
    component, defs = load_yaml(attributes())
    assert isinstance(component, MySqlCdcComponent)
    keys = all_keys(defs)
    assert keys == {
        dg.AssetKey([SERVER, "shop", "customers"]),
        dg.AssetKey([SERVER, "shop", "orders"]),
        dg.AssetKey([SERVER, "binlog"]),
    }
    ad = the_assets_def(defs)
    assert ad.node_def.name == "unit1_cdc" and ad.can_subset
    assert {"mysql", "lake"} <= set(ad.required_resource_keys)
    tables = {s.metadata.get(TABLE_METADATA_KEY) for s in ad.specs} - {None}
    assert tables == set(TABLES)
    assert all("dagster/column_schema" not in s.metadata for s in ad.specs)  # bare names
    assert [s.key for s in ad.specs if BINLOG_METADATA_KEY in s.metadata] == [dg.AssetKey([SERVER, "binlog"])]
    assert ad.check_specs  # the reconciliation checks are attached
    sensor, verification = defs.sensors
    assert (sensor.name, sensor.minimum_interval_seconds) == ("unit1_cdc_binlog_sensor", 15)
    assert sensor.default_status == dg.DefaultSensorStatus.STOPPED
    assert (verification.name, verification.minimum_interval_seconds) == (
        "unit1_cdc_binlog_sensor_verification",
        30,
    )


def test_resource_sections_reach_the_resources_with_secrets_as_env_vars():
    attrs = attributes(
        mysql={
            "snapshot_mode": "when_needed",
            "snapshot_fetch_size": 500,
            "table_exclude_list": ["shop\\.x"],
        },
        lake={"rows_per_file": 1000, "spark_remote": "sc://127.0.0.1:15002"},
    )
    _, defs = load_yaml(attrs)
    mysql, lake = defs.resources["mysql"], defs.resources["lake"]
    assert isinstance(mysql, MySqlCdcResource) and isinstance(lake, CdcLakeResource)
    assert (mysql.host, mysql.user, mysql.server_name, mysql.server_id) == ("127.0.0.1", "cdc", SERVER, 7001)
    assert (mysql.snapshot_mode, mysql.snapshot_fetch_size) == ("when_needed", 500)
    assert mysql.table_exclude_list == ["shop\\.x"] and mysql.database_include_list == ["shop"]
    assert mysql.incremental_snapshot_chunk_size == 1024  # unset: the resource default
    assert isinstance(mysql.password, dg.EnvVar) and mysql.password.env_var_name == "UNIT_MYSQL_PASSWORD"
    assert mysql.process_config_and_initialize().password == "pw-from-env"
    assert (
        isinstance(lake.s3_access_key_id, dg.EnvVar) and lake.s3_access_key_id.env_var_name == "UNIT_S3_KEY"
    )
    assert isinstance(lake.s3_secret_access_key, dg.EnvVar)
    assert lake.s3_secret_access_key.env_var_name == "UNIT_S3_SECRET"
    assert lake.s3_endpoint_url == "http://127.0.0.1:9"  # not a secret: rendered at load time
    assert (lake.base_uri, lake.rows_per_file, lake.spark_remote) == (
        "s3://lake/unit",
        1000,
        "sc://127.0.0.1:15002",
    )
    assert lake.pyspark.spark_config == {**DEFAULT_SPARK_CONFIG, "spark.driver.memory": "1g"}


def test_templates_render_to_the_field_types(monkeypatch):
    monkeypatch.setenv("UNIT_SERVER_ID", "7002")
    attrs = attributes(
        mysql={"server_id": "{{ env.UNIT_SERVER_ID }}", "user": "12345", "stream_follow_seconds": "2.5"}
    )
    component = MySqlCdcComponent.from_attributes_dict(attributes=attrs)
    m = component.build_mysql_resource()
    assert m.server_id == 7002  # not a secret: rendered, then an int
    assert m.user == "12345"  # string settings stay strings
    assert m.stream_follow_seconds == 2.5


def test_literal_numeric_password_stays_a_string():
    c = MySqlCdcComponent.from_attributes_dict(attributes=attributes(mysql={"password": "12345"}))
    assert c.build_mysql_resource().password == "12345"


def test_missing_sections_keep_the_resource_defaults():
    c = MySqlCdcComponent.from_attributes_dict(attributes={"tables": ["db.t"]})
    assert c.mysql.server_name == MySqlCdcResource().server_name
    assert c.lake.base_uri == ".lake"
    assert c.lake.pyspark.spark_config == DEFAULT_SPARK_CONFIG


def test_python_construction_takes_the_resources():
    c = MySqlCdcComponent(
        mysql=MySqlCdcResource(server_name=SERVER, port=closed_port(), connect_timeout=1),
        lake=CdcLakeResource(base_uri="/tmp/lake"),
        tables=["shop.orders"],
        mysql_resource_key="src",
        lake_resource_key="dst",
    )
    defs = c.build_defs(None)  # type: ignore[arg-type]
    assert dg.AssetKey([SERVER, "shop", "orders"]) in all_keys(defs)
    assert defs.resources["src"] is c.mysql and defs.resources["dst"] is c.lake


def test_custom_resource_keys_and_no_sensor():
    _, defs = load_yaml(
        attributes(mysql_resource_key="shop_mysql", lake_resource_key="shop_lake", sensor={"enabled": False})
    )
    assert set(defs.resources) == {"shop_mysql", "shop_lake"}
    assert {"shop_mysql", "shop_lake"} <= set(the_assets_def(defs).required_resource_keys)
    assert not defs.sensors


def test_table_freshness_from_the_sensor_section():
    from dagster_mysql_cdc import freshness_policy_for_interval

    _, defs = load_yaml(attributes())
    policies = {s.key.path[-1]: s.freshness_policy for s in the_assets_def(defs).specs}
    # following runs by default (stream_follow_seconds=300): a run materializes at its end
    assert policies["customers"] == freshness_policy_for_interval(15, 300) == policies["binlog"]
    _, defs = load_yaml(attributes(sensor={"minimum_interval_seconds": 15, "table_freshness": False}))
    policies = {s.key.path[-1]: s.freshness_policy for s in the_assets_def(defs).specs}
    assert policies["customers"] is None and policies["binlog"] is not None


def test_translation_applies_to_the_listed_tables():
    attrs = attributes(
        translation={"group_name": "{{ database }}_raw", "key_prefix": "lake", "tags": {"t": "{{ table }}"}},
        binlog_translation={"group_name": "{{ server_name }}_stream"},
        op={"name": "shop_capture", "tags": {"team": "data"}, "pool": "snapshots"},
    )
    _, defs = load_yaml(attrs)
    ad = the_assets_def(defs)
    assert ad.node_def.name == "shop_capture" and ad.op.pool == "snapshots"
    for spec in ad.specs:
        if BINLOG_METADATA_KEY in spec.metadata:
            assert spec.group_name == "unit1_stream" and spec.key == dg.AssetKey([SERVER, "binlog"])
        else:
            db, table = spec.metadata[TABLE_METADATA_KEY].split(".")
            assert spec.key == dg.AssetKey(["lake", SERVER, db, table])
            assert spec.group_name == "shop_raw" and spec.tags["t"] == table


def test_unreachable_server_without_tables_names_the_fix():
    attrs = attributes()
    del attrs["tables"]
    c = MySqlCdcComponent.from_attributes_dict(attributes=attrs)
    with pytest.raises(SourceConnectionError, match="tables:"):
        c.build_defs(None)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "override, message",
    [
        ({"mysql": {"snapshot_mode": "sometimes"}}, "snapshot_mode='sometimes' is not valid"),
        ({"mysql": {"decimal_handling_mode": "exact"}}, "decimal_handling_mode='exact' is not valid"),
        ({"mysql": {"ssl_mode": "on"}}, "ssl_mode='on' is not valid"),
        ({"mysql": {"column_mask_hash_version": "v9"}}, "column_mask_hash_version='v9' is not valid"),
        ({"mysql": {"event_processing_failure_handling_mode": "ignore"}}, "event_processing_failure"),
        ({"mysql": {"binlog_gap_handling": "ignore"}}, "binlog_gap_handling='ignore' is not valid"),
        ({"mysql": {"snapshot_fetch_size": [1]}}, "snapshot_fetch_size"),
        ({"mysql": {"port": "not-a-port"}}, "port\n  Input should be a valid integer"),
        ({"mysql": {"no_such_option": 1}}, "no_such_option"),
        ({"lake": {"no_such_lake_option": 1}}, "no_such_lake_option"),
        ({"sensor": {"default_status": "paused"}}, "default_status"),
        ({"no_such_option": 1}, "no_such_option"),
    ],
)
def test_invalid_option_is_rejected_at_load(override, message):
    attrs = attributes()
    for k, v in override.items():
        attrs[k] = {**attrs[k], **v} if isinstance(attrs.get(k), dict) else v
    with pytest.raises(Exception) as excinfo:
        load_yaml(attrs)
    assert message in error_chain(excinfo.value)


# -- the earlier flat shape --------------------------------------------------------------------------
def test_flat_shape_still_loads_with_a_deprecation_warning():
    new = attributes(mysql={"snapshot_mode": "when_needed", "retention_margin_files": 3})
    mysql = new.pop("mysql")
    connection_keys = ("host", "port", "user", "password", "server_name", "server_id", "connect_timeout")
    flat = {
        "connection": {k: mysql.pop(k) for k in connection_keys},
        **mysql,  # database_include_list, snapshot_mode, retention_margin_files at the top level
        **new,
    }
    with pytest.warns(DeprecationWarning, match="under `mysql:`"):
        _, defs = load_yaml(flat)
    m = defs.resources["mysql"]
    assert (m.server_name, m.server_id, m.snapshot_mode, m.retention_margin_files) == (
        SERVER,
        7001,
        "when_needed",
        3,
    )
    assert m.database_include_list == ["shop"]
    assert isinstance(m.password, dg.EnvVar) and m.password.env_var_name == "UNIT_MYSQL_PASSWORD"
    assert dg.AssetKey([SERVER, "shop", "orders"]) in all_keys(defs)


def test_current_shape_loads_without_a_warning():
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)
        MySqlCdcComponent.model().model_validate(attributes())


# -- scaffolding and templates ----------------------------------------------------------------------
def test_scaffolded_attributes_are_the_current_shape():
    params = MySqlCdcScaffoldParams(database="shop", lake_base_uri="s3://lake/x", password_env_var="PW")
    attrs = starter_attributes(params)
    assert attrs["mysql"]["password"] == "{{ env.PW }}"
    assert attrs["mysql"]["database_include_list"] == ["shop"]
    assert attrs["lake"]["s3_secret_access_key"] == "{{ env.AWS_SECRET_ACCESS_KEY }}"
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)
        c = MySqlCdcComponent.from_attributes_dict(attributes=yaml.safe_load(yaml.safe_dump(attrs)))
    assert isinstance(c.mysql.password, dg.EnvVar) and c.mysql.database_include_list == ["shop"]


def test_env_var_template_detection():
    assert env_var_of_template("{{ env.CDC_MYSQL_PASSWORD }}") == "CDC_MYSQL_PASSWORD"
    assert env_var_of_template("{{env.X1}}") == "X1"
    assert env_var_of_template(" {{ env('AWS_SECRET') }} ") == "AWS_SECRET"
    assert env_var_of_template('{{ env("AWS_SECRET") }}') == "AWS_SECRET"
    assert env_var_of_template("{{ env('X', 'default') }}") is None  # rendered at load time
    assert env_var_of_template("pre-{{ env.X }}") is None
    assert env_var_of_template("literal") is None
    assert env_var_of_template(None) is None
