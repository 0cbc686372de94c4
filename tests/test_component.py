"""``MySqlCdcComponent``: YAML loading, translation, scaffolding, ``dg`` registration, example projects.

Against the real MariaDB of infra/ (table discovery at load time); one test materializes a table
through the YAML-built definitions with a local Spark session.
"""

import json
import os
import shutil
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import dagster as dg
import pytest
import yaml
from component_helpers import all_keys, load_in_sandbox, the_assets_def
from conftest import (
    CDC_PASSWORD,
    CDC_USER,
    MYSQL_HOST,
    MYSQL_PORT,
    ROOT,
    S3_ENDPOINT,
    SERVICE_ENV,
    root_connect,
    run_infra,
)
from dagster.components.testing import create_defs_folder_sandbox
from lake_utils import live_state_rows

from dagster_mysql_cdc import CdcLakeResource, MySqlCdcComponent, MySqlCdcResource, SourceConnectionError
from dagster_mysql_cdc.dagster_integration.component import (
    MySqlCdcScaffoldParams,
    starter_attributes,
)
from dagster_mysql_cdc.dagster_integration.protocol import BINLOG_METADATA_KEY, TABLE_METADATA_KEY
from dagster_mysql_cdc.sink.storage import StorageSettings

pytestmark = pytest.mark.integration

SERVER = "dbserver1"
INVENTORY_TABLES = ["addresses", "customers", "geom", "orders", "products", "products_on_hand"]
EXAMPLE_PROJECT = ROOT / "examples" / "component_project"
PASSWORD_ENV = "CDC_TEST_COMPONENT_PASSWORD"


@pytest.fixture(scope="module", autouse=True)
def inventory_loaded():
    """The inventory sample must exist; load it only when missing (other sessions may use it)."""
    conn = root_connect()
    try:
        with conn.cursor() as cur:
            cur.execute(
                "SELECT COUNT(*) FROM information_schema.tables WHERE table_schema='inventory' "
                f"AND table_name IN ({','.join(['%s'] * len(INVENTORY_TABLES))})",
                INVENTORY_TABLES,
            )
            present = cur.fetchone()[0]
    finally:
        conn.close()
    if present != len(INVENTORY_TABLES):
        run_infra("infra/load_dataset.sh", "inventory")


@pytest.fixture(autouse=True)
def secrets_env(monkeypatch):
    monkeypatch.setenv(PASSWORD_ENV, CDC_PASSWORD)
    for k, v in SERVICE_ENV.items():
        monkeypatch.setenv(k, v)


def base_attributes(mysql: dict | None = None, **overrides) -> dict:
    """A component's attributes; ``mysql`` is merged into the ``mysql`` section."""
    attrs = {
        "mysql": {
            "host": MYSQL_HOST,
            "port": MYSQL_PORT,
            "user": CDC_USER,
            "password": f"{{{{ env.{PASSWORD_ENV} }}}}",
            "server_name": SERVER,
            "server_id": 5501,
            "database_include_list": ["inventory"],
            **(mysql or {}),
        },
        "lake": {
            "base_uri": "s3://lake/component-test",
            "s3_endpoint_url": "{{ env.CDC_S3_ENDPOINT }}",
            "s3_access_key_id": "{{ env.AWS_ACCESS_KEY_ID }}",
            "s3_secret_access_key": "{{ env('AWS_SECRET_ACCESS_KEY') }}",
            "spark_config": {"spark.driver.memory": "1g"},
        },
        "sensor": {"minimum_interval_seconds": 15},
    }
    attrs.update(overrides)
    return attrs


def spec_of(ad: dg.AssetsDefinition, table: str) -> dg.AssetSpec:
    (spec,) = [s for s in ad.specs if (s.metadata or {}).get(TABLE_METADATA_KEY) == f"inventory.{table}"]
    return spec


def sensor_targets(sensor: dg.SensorDefinition, defs: dg.Definitions) -> set[dg.AssetKey]:
    """Asset keys the sensor's runs may select (its target is the multi-asset)."""
    (target,) = sensor.targets
    return set(target.resolvable_to_job.selection.resolve(defs.resolve_asset_graph()))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run(cmd: list[str], cwd: Path, timeout: int = 240) -> subprocess.CompletedProcess:
    env = {**os.environ, **SERVICE_ENV, "COLUMNS": "200", "NO_COLOR": "1"}
    env.pop("DAGSTER_HOME", None)
    p = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    assert p.returncode == 0, f"{' '.join(cmd)} failed ({p.returncode}):\n{p.stdout}\n{p.stderr}"
    return p


def dg_exe() -> str:
    exe = shutil.which("dg")
    assert exe, "the `dg` CLI (dagster-dg-cli) is not installed"
    return exe


# -- loading from YAML ----------------------------------------------------------------------------
def test_yaml_component_builds_assets_sensor_and_resources():
    with create_defs_folder_sandbox() as sandbox:
        component, defs = load_in_sandbox(base_attributes(), sandbox)

    assert isinstance(component, MySqlCdcComponent)
    keys = all_keys(defs)
    for t in INVENTORY_TABLES:
        assert dg.AssetKey([SERVER, "inventory", t]) in keys
    assert dg.AssetKey([SERVER, "binlog"]) in keys
    assert all(k.path[0] == SERVER for k in keys)

    ad = the_assets_def(defs)
    assert ad.node_def.name == "dbserver1_cdc"
    assert ad.can_subset
    assert {"mysql", "lake"} <= set(ad.required_resource_keys)
    # discovered from the server: column schema on the specs
    cols = spec_of(ad, "customers").metadata["dagster/column_schema"].columns
    assert [c.name for c in cols][:4] == ["id", "first_name", "last_name", "email"]
    binlog = [s for s in ad.specs if BINLOG_METADATA_KEY in (s.metadata or {})]
    assert [s.key for s in binlog] == [dg.AssetKey([SERVER, "binlog"])]

    sensor, verification = defs.sensors  # the binlog sensor and the rotating verification
    assert sensor.name == "dbserver1_cdc_binlog_sensor"
    assert sensor.minimum_interval_seconds == 15
    assert sensor.default_status == dg.DefaultSensorStatus.STOPPED
    assert verification.name == "dbserver1_cdc_binlog_sensor_verification"
    assert verification.default_status == dg.DefaultSensorStatus.STOPPED
    assert sensor_targets(sensor, defs) == keys

    mysql, lake = defs.resources["mysql"], defs.resources["lake"]
    assert isinstance(mysql, MySqlCdcResource) and isinstance(lake, CdcLakeResource)
    assert (mysql.host, mysql.port, mysql.user, mysql.server_name, mysql.server_id) == (
        MYSQL_HOST,
        MYSQL_PORT,
        CDC_USER,
        SERVER,
        5501,
    )
    assert mysql.database_include_list == ["inventory"]
    # `{{ env.X }}` secrets stay environment variables (never rendered into the definitions)
    assert isinstance(mysql.password, dg.EnvVar) and mysql.password.env_var_name == PASSWORD_ENV
    assert isinstance(lake.s3_access_key_id, dg.EnvVar)
    assert lake.s3_access_key_id.env_var_name == "AWS_ACCESS_KEY_ID"
    assert isinstance(lake.s3_secret_access_key, dg.EnvVar)
    assert lake.s3_endpoint_url == S3_ENDPOINT  # not a secret: rendered at load time
    assert lake.base_uri == "s3://lake/component-test"
    spark = lake.pyspark.spark_config
    assert spark["spark.driver.memory"] == "1g" and spark["spark.sql.session.timeZone"] == "UTC"
    # the resolved password reaches the resource when it is initialized
    assert mysql.process_config_and_initialize().password == CDC_PASSWORD


def test_capture_options_reach_the_resource():
    attrs = base_attributes(
        tables=["inventory.customers", "inventory.orders"],
        mysql={
            "table_exclude_list": ["inventory\\.geom"],
            "snapshot_mode": "when_needed",
            "snapshot_locking_mode": "none",
            "snapshot_fetch_size": 500,
            "decimal_handling_mode": "string",
            "time_precision_mode": "connect",
            "bigint_unsigned_handling_mode": "long",
            "binary_handling_mode": "hex",
            "binlog_read_timeout": 120,
        },
        sensor={
            "enabled": True,
            "name": "inv_stream",
            "default_status": "running",
            "minimum_interval_seconds": 5,
        },
        op={"name": "inventory_capture", "tags": {"team": "data"}, "pool": "mysql_snapshots"},
    )
    with create_defs_folder_sandbox() as sandbox:
        _, defs = load_in_sandbox(attrs, sandbox)
    assert all_keys(defs) == {
        dg.AssetKey([SERVER, "inventory", "customers"]),
        dg.AssetKey([SERVER, "inventory", "orders"]),
        dg.AssetKey([SERVER, "binlog"]),
    }
    m = defs.resources["mysql"]
    assert (m.snapshot_mode, m.snapshot_locking_mode, m.snapshot_fetch_size) == ("when_needed", "none", 500)
    assert (m.decimal_handling_mode, m.time_precision_mode) == ("string", "connect")
    assert (m.bigint_unsigned_handling_mode, m.binary_handling_mode) == ("long", "hex")
    assert m.table_exclude_list == ["inventory\\.geom"] and m.binlog_read_timeout == 120
    m.type_options(), m.snapshot_options()  # valid for the library
    ad = the_assets_def(defs)
    assert ad.node_def.name == "inventory_capture"
    assert ad.op.tags.get("team") == "data" and ad.op.pool == "mysql_snapshots"
    sensor, verification = defs.sensors
    assert (sensor.name, sensor.default_status, sensor.minimum_interval_seconds) == (
        "inv_stream",
        dg.DefaultSensorStatus.RUNNING,
        5,
    )
    assert (verification.name, verification.default_status) == (
        "inv_stream_verification",
        dg.DefaultSensorStatus.RUNNING,
    )


def test_tls_options_reach_the_resource_and_key_material_stays_secret(monkeypatch, tmp_path):
    ca = tmp_path / "ca.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=t",
         "-keyout", str(tmp_path / "k.pem"), "-out", str(ca)],
        check=True, capture_output=True,
    )  # fmt: skip
    monkeypatch.setenv("CDC_TEST_SSL_CA", str(ca))
    monkeypatch.setenv("CDC_TEST_SSL_KEY", (tmp_path / "k.pem").read_text())  # PEM text, not a path
    # the test server has no TLS: the listed tables are used instead of discovering them at load
    attrs = base_attributes(tables=["inventory.customers"])
    attrs["mysql"].update(
        ssl_mode="verify_identity",
        ssl_ca="{{ env.CDC_TEST_SSL_CA }}",
        ssl_cert="{{ env.CDC_TEST_SSL_CA }}",  # the self-signed certificate of the key below
        ssl_key="{{ env.CDC_TEST_SSL_KEY }}",
    )
    with create_defs_folder_sandbox() as sandbox:
        _, defs = load_in_sandbox(attrs, sandbox)
    m = defs.resources["mysql"]
    assert m.ssl_mode == "verify_identity"
    assert isinstance(m.ssl_ca, dg.EnvVar) and m.ssl_ca.env_var_name == "CDC_TEST_SSL_CA"
    assert isinstance(m.ssl_key, dg.EnvVar) and m.ssl_key.env_var_name == "CDC_TEST_SSL_KEY"


def test_column_options_reach_the_resource_and_the_salt_stays_secret(monkeypatch, inventory_db):
    monkeypatch.setenv("CDC_TEST_MASK_SALT", "component-salt-value")
    attrs = base_attributes(
        tables=["inventory.customers"],
        mysql={
            "column_exclude_list": ["inventory\\.customers\\.last_name"],
            "column_mask_hash": {"inventory\\.customers\\.email": "SHA-256"},
            "column_mask_hash_salt": "{{ env.CDC_TEST_MASK_SALT }}",
            "column_mask_hash_version": "v2",
            "column_mask_with_chars": {"inventory\\.customers\\.first_name": 3},
            "message_key_columns": {"inventory\\.customers": ["email"]},
            "snapshot_select_statement_overrides": {
                "inventory.customers": "SELECT * FROM inventory.customers WHERE id > 1001"
            },
            "event_processing_failure_handling_mode": "warn",
            "include_query": False,
        },
    )
    with create_defs_folder_sandbox() as sandbox:
        _, defs = load_in_sandbox(attrs, sandbox)
    m = defs.resources["mysql"]
    assert isinstance(m.column_mask_hash_salt, dg.EnvVar)
    assert m.column_mask_hash_salt.env_var_name == "CDC_TEST_MASK_SALT"
    assert m.column_mask_hash == {"inventory\\.customers\\.email": "SHA-256"}
    policy = m.column_policy()
    assert policy.hash_salt == "component-salt-value" and policy.hash_version == "v2"
    assert dict(policy.mask_with_chars) == {"inventory\\.customers\\.first_name": 3}
    assert m.snapshot_options().select_overrides == (("inventory.customers", "id > 1001"),)
    assert m.stream_options().event_processing_failure_handling_mode == "warn"
    # the asset's column schema (UI) lists the captured columns only
    columns = spec_of(the_assets_def(defs), "customers").metadata["dagster/column_schema"].columns
    assert [c.name for c in columns] == ["id", "first_name", "email"]
    assert spec_of(the_assets_def(defs), "customers").metadata["primary_key"] == "email"  # message key


def test_translation_overrides_apply_to_every_table_spec():
    attrs = base_attributes(
        translation={
            "group_name": "{{ database }}_raw",
            "key_prefix": "lake",
            "tags": {"team": "data", "source_table": "{{ table }}"},
            "kinds": ["mariadb", "delta"],
            "owners": ["team:platform"],
            "description": "CDC of {{ props.qualified_name }} from {{ server_name }}",
            "metadata": {"captured_by": "debezium-style"},
        },
        binlog_translation={"group_name": "{{ server_name }}_stream", "key_prefix": "lake"},
    )
    with create_defs_folder_sandbox() as sandbox:
        _, defs = load_in_sandbox(attrs, sandbox)

    keys = all_keys(defs)
    assert dg.AssetKey(["lake", SERVER, "binlog"]) in keys
    ad = the_assets_def(defs)
    for t in INVENTORY_TABLES:
        assert dg.AssetKey(["lake", SERVER, "inventory", t]) in keys
        spec = spec_of(ad, t)
        assert spec.key == dg.AssetKey(["lake", SERVER, "inventory", t])
        assert spec.group_name == "inventory_raw"
        assert spec.tags["team"] == "data" and spec.tags["source_table"] == t
        assert spec.kinds == {"mariadb", "delta"}
        assert spec.owners == ["team:platform"]
        assert spec.description == f"CDC of inventory.{t} from {SERVER}"
        # merged, not replaced: the table mapping and column schema survive
        assert spec.metadata["captured_by"] == "debezium-style"
        assert spec.metadata[TABLE_METADATA_KEY] == f"inventory.{t}"
        assert "dagster/column_schema" in spec.metadata
        assert spec.skippable
    (binlog,) = [s for s in ad.specs if BINLOG_METADATA_KEY in (s.metadata or {})]
    assert binlog.group_name == "dbserver1_stream"
    assert binlog.kinds == {"mysql", "delta"}  # table translation does not touch the binlog asset
    # the sensor still targets everything, including the renamed binlog asset
    sensor, _ = defs.sensors
    assert sensor_targets(sensor, defs) == keys


def test_python_subclass_can_override_specs():
    class Owned(MySqlCdcComponent):
        def get_asset_spec(self, props):
            return super().get_asset_spec(props).replace_attributes(owners=["team:dba"])

    c = Owned.from_attributes_dict(attributes=base_attributes(tables=["inventory.orders"]))
    defs = c.build_defs(None)  # type: ignore[arg-type]
    assert spec_of(the_assets_def(defs), "orders").owners == ["team:dba"]


def test_custom_resource_keys_and_no_sensor():
    """Two servers in one project need distinct resource keys."""
    attrs = base_attributes(
        mysql_resource_key="inventory_mysql", lake_resource_key="inventory_lake", sensor={"enabled": False}
    )
    with create_defs_folder_sandbox() as sandbox:
        _, defs = load_in_sandbox(attrs, sandbox)
    assert set(defs.resources) == {"inventory_mysql", "inventory_lake"}
    assert {"inventory_mysql", "inventory_lake"} <= set(the_assets_def(defs).required_resource_keys)
    assert not defs.sensors


def test_two_servers_in_one_project():
    other = base_attributes(
        tables=["inventory.orders"], mysql_resource_key="mysql_b", lake_resource_key="lake_b"
    )
    other["mysql"] = {**other["mysql"], "server_name": "dbserver2", "server_id": 5502}
    with create_defs_folder_sandbox() as sandbox:
        for name, attrs in (("server_a", base_attributes()), ("server_b", other)):
            sandbox.scaffold_component(
                component_cls=MySqlCdcComponent,
                defs_path=name,
                defs_yaml_contents={"type": "dagster_mysql_cdc.MySqlCdcComponent", "attributes": attrs},
            )
        with sandbox.build_all_defs() as defs:
            keys = all_keys(defs)
            assert {s.name for s in defs.sensors} == {
                "dbserver1_cdc_binlog_sensor",
                "dbserver2_cdc_binlog_sensor",
                "dbserver1_cdc_binlog_sensor_verification",
                "dbserver2_cdc_binlog_sensor_verification",
            }
            assert {"mysql", "lake", "mysql_b", "lake_b"} <= set(defs.resources)
    assert dg.AssetKey(["dbserver2", "inventory", "orders"]) in keys
    assert dg.AssetKey(["dbserver2", "binlog"]) in keys and dg.AssetKey([SERVER, "binlog"]) in keys


# -- discovery fallbacks ----------------------------------------------------------------------------
def test_unreachable_server_falls_back_to_listed_tables():
    attrs = base_attributes(tables=["inventory.customers", "inventory.orders"])
    attrs["mysql"] = {**attrs["mysql"], "port": free_port(), "connect_timeout": 2}
    c = MySqlCdcComponent.from_attributes_dict(attributes=attrs)
    defs = c.build_defs(None)  # type: ignore[arg-type]
    assert all_keys(defs) == {
        dg.AssetKey([SERVER, "inventory", "customers"]),
        dg.AssetKey([SERVER, "inventory", "orders"]),
        dg.AssetKey([SERVER, "binlog"]),
    }
    assert "dagster/column_schema" not in spec_of(the_assets_def(defs), "orders").metadata
    assert len(defs.sensors) == 2  # the binlog sensor and the rotating verification


def test_unreachable_server_without_tables_names_the_fix():
    attrs = base_attributes()
    attrs["mysql"] = {**attrs["mysql"], "port": free_port(), "connect_timeout": 2}
    c = MySqlCdcComponent.from_attributes_dict(attributes=attrs)
    with pytest.raises(SourceConnectionError, match="tables:"):
        c.build_defs(None)  # type: ignore[arg-type]


def test_unset_password_env_var_falls_back_to_listed_tables(monkeypatch):
    monkeypatch.delenv(PASSWORD_ENV)
    c = MySqlCdcComponent.from_attributes_dict(attributes=base_attributes(tables=["inventory.products"]))
    defs = c.build_defs(None)  # type: ignore[arg-type]
    assert dg.AssetKey([SERVER, "inventory", "products"]) in all_keys(defs)


# -- dg registration and scaffolding ----------------------------------------------------------------
def test_dg_list_components_lists_the_component(tmp_path):
    p = run([dg_exe(), "list", "components", "--json", "--package", "dagster_mysql_cdc"], cwd=tmp_path)
    items = json.loads(p.stdout)["items"]
    assert [i["key"] for i in items] == ["dagster_mysql_cdc.MySqlCdcComponent"]
    assert "MySQL" in items[0]["summary"]


def test_scaffolder_writes_a_loadable_defs_yaml():
    params = {
        "port": MYSQL_PORT,
        "database": "inventory",
        "lake_base_uri": "s3://lake/scaffolded",
        "password_env_var": PASSWORD_ENV,
        "s3_endpoint_url": S3_ENDPOINT,
    }
    with create_defs_folder_sandbox() as sandbox:
        path = sandbox.scaffold_component(component_cls=MySqlCdcComponent, scaffold_params=params)
        doc = yaml.safe_load((path / "defs.yaml").read_text())
        assert doc["type"].endswith(".MySqlCdcComponent")  # the sandbox writes the defining module
        a = doc["attributes"]
        assert a == starter_attributes(MySqlCdcScaffoldParams(**params))
        assert a["mysql"]["password"] == f"{{{{ env.{PASSWORD_ENV} }}}}"
        assert a["lake"]["s3_secret_access_key"] == "{{ env.AWS_SECRET_ACCESS_KEY }}"
        with sandbox.load_component_and_build_defs(defs_path=path) as (component, defs):
            assert isinstance(component, MySqlCdcComponent)
            assert dg.AssetKey([SERVER, "inventory", "customers"]) in all_keys(defs)
            assert isinstance(defs.resources["mysql"].password, dg.EnvVar)


def make_dg_project(root: Path, name: str) -> Path:
    (root / name / "defs").mkdir(parents=True)
    (root / name / "__init__.py").write_text("")
    (root / name / "defs" / "__init__.py").write_text("")
    (root / name / "definitions.py").write_text(
        textwrap.dedent("""\
        from pathlib import Path
        import dagster as dg

        @dg.definitions
        def defs():
            return dg.load_from_defs_folder(path_within_project=Path(__file__).parent)
        """)
    )
    (root / "pyproject.toml").write_text(
        textwrap.dedent(f"""\
        [project]
        name = "{name}"
        version = "0.0.1"

        [tool.dg]
        directory_type = "project"

        [tool.dg.project]
        root_module = "{name}"
        """)
    )
    return root


def test_dg_scaffold_defs_cli_into_a_project(tmp_path):
    proj = make_dg_project(tmp_path / "proj", "cdc_scaffold_proj")
    run(
        [
            dg_exe(),
            "scaffold",
            "defs",
            "dagster_mysql_cdc.MySqlCdcComponent",
            "inventory_cdc",
            "--port",
            str(MYSQL_PORT),
            "--database",
            "inventory",
            "--lake-base-uri",
            str(tmp_path / "lake"),
        ],
        cwd=proj,
    )
    defs_yaml = proj / "cdc_scaffold_proj" / "defs" / "inventory_cdc" / "defs.yaml"
    doc = yaml.safe_load(defs_yaml.read_text())
    assert doc["type"] == "dagster_mysql_cdc.MySqlCdcComponent"
    assert doc["attributes"]["mysql"]["password"] == "{{ env.CDC_MYSQL_PASSWORD }}"
    assert doc["attributes"]["mysql"]["database_include_list"] == ["inventory"]
    listed = json.loads(run([dg_exe(), "list", "defs", "--json"], cwd=proj).stdout)
    keys = {a["asset_key"] for a in listed["assets"]}
    assert {f"{SERVER}/inventory/{t}" for t in INVENTORY_TABLES} | {f"{SERVER}/binlog"} <= keys
    assert [s["name"] for s in listed["sensors"]] == [
        "dbserver1_cdc_binlog_sensor",
        "dbserver1_cdc_binlog_sensor_verification",
    ]
    assert {r["name"] for r in listed["resources"]} == {"mysql", "lake"}


# -- the example code locations ----------------------------------------------------------------------
def test_repo_definitions_py_validates():
    p = run([sys.executable, "-m", "dagster", "definitions", "validate", "-f", "definitions.py"], cwd=ROOT)
    assert "Validation successful" in p.stdout + p.stderr


def test_dg_project_in_the_repository_root():
    """``dg dev`` / ``dg list defs`` in the repository root load definitions.py ([tool.dg])."""
    listed = json.loads(run([dg_exe(), "list", "defs", "--json"], cwd=ROOT).stdout)
    keys = {a["asset_key"] for a in listed["assets"]}
    assert {f"{SERVER}/inventory/{t}" for t in INVENTORY_TABLES} | {f"{SERVER}/binlog"} <= keys
    assert "dbserver1_cdc_binlog_sensor" in {s["name"] for s in listed["sensors"]}


def test_example_component_project_loads():
    p = run([sys.executable, "-m", "dagster", "definitions", "validate"], cwd=EXAMPLE_PROJECT)
    assert "Validation successful for code location inventory_cdc" in p.stdout + p.stderr
    listed = json.loads(run([dg_exe(), "list", "defs", "--json"], cwd=EXAMPLE_PROJECT).stdout)
    keys = {a["asset_key"] for a in listed["assets"]}
    assert keys == {f"{SERVER}/inventory/{t}" for t in INVENTORY_TABLES} | {f"{SERVER}/binlog"}
    groups = {a["asset_key"]: a["group_name"] for a in listed["assets"]}
    assert groups[f"{SERVER}/inventory/orders"] == "inventory"
    assert [s["name"] for s in listed["sensors"]] == [
        "dbserver1_cdc_binlog_sensor",
        "dbserver1_cdc_binlog_sensor_verification",
    ]
    assert {r["name"] for r in listed["resources"]} == {"mysql", "lake"}


# -- a real capture through the YAML-built definitions ------------------------------------------------
@pytest.mark.spark
def test_yaml_component_snapshots_a_table(tmp_path):
    attrs = base_attributes(
        tables=["inventory.customers"],
        lake={"base_uri": str(tmp_path / "lake")},
        mysql_resource_key="src",
        lake_resource_key="dst",
    )
    with create_defs_folder_sandbox() as sandbox:
        _, defs = load_in_sandbox(attrs, sandbox)
    key = dg.AssetKey([SERVER, "inventory", "customers"])
    job = defs.resolve_implicit_global_asset_job_def()
    result = job.execute_in_process(asset_selection=[key], instance=dg.DagsterInstance.ephemeral())
    assert result.success
    (mat,) = [m for m in result.get_asset_materialization_events() if m.asset_key == key]
    conn = root_connect()
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT COUNT(*) FROM inventory.customers")
            expected = cur.fetchone()[0]
    finally:
        conn.close()
    assert mat.materialization.metadata["dagster/row_count"].value == expected
    rows = live_state_rows(
        StorageSettings(base_uri=str(tmp_path / "lake")),
        mat.materialization.metadata["state_uri"].value,
        ["id"],
    )
    assert len(rows) == expected and {"id", "first_name", "last_name", "email"} <= set(rows[0])
