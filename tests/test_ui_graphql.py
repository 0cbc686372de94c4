"""The Dagster UI serves the example code locations: a real ``dagster-webserver`` on loopback,
queried through its GraphQL API (what the UI itself uses).

Two code locations: the repo's ``definitions.py`` (Python API) and ``examples/component_project``
(``MySqlCdcComponent`` in a ``defs.yaml``). Each test starts its own webserver with a temporary
``DAGSTER_HOME``, waits (bounded) for the code location to load, and always terminates it.
"""

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from contextlib import contextmanager
from pathlib import Path

import pytest
from conftest import CDC_PASSWORD, ROOT, SERVICE_ENV, root_connect

pytestmark = pytest.mark.integration

SERVER = "dbserver1"
INVENTORY_TABLES = ["addresses", "customers", "geom", "orders", "products", "products_on_hand"]
SENSOR = "dbserver1_cdc_binlog_sensor"
STARTUP_TIMEOUT_S = 240  # a loaded 2-core machine needs > 90 s to start the webserver and its code server


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def graphql(url: str, query: str, variables: dict | None = None, timeout: float = 30) -> dict:
    body = json.dumps({"query": query, "variables": variables or {}}).encode()
    req = urllib.request.Request(f"{url}/graphql", data=body, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=timeout) as resp:
        payload = json.loads(resp.read())
    assert "errors" not in payload, payload["errors"]
    return payload["data"]


WORKSPACE_QUERY = """
query {
  workspaceOrError {
    __typename
    ... on Workspace {
      locationEntries {
        name
        loadStatus
        locationOrLoadError {
          __typename
          ... on PythonError { message stack }
        }
      }
    }
  }
}
"""

REPOSITORIES_QUERY = """
query {
  repositoriesOrError {
    __typename
    ... on PythonError { message }
    ... on RepositoryConnection {
      nodes {
        name
        location { name }
        assetNodes { assetKey { path } groupName isExecutable opNames isPartitioned
          assetChecksOrError { __typename ... on AssetChecks { checks { name } } } }
        sensors { name minIntervalSeconds sensorState { status } targets { pipelineName } }
      }
    }
  }
}
"""

RESOURCES_QUERY = """
query Resources($selector: RepositorySelector!) {
  allTopLevelResourceDetailsOrError(repositorySelector: $selector) {
    __typename
    ... on PythonError { message }
    ... on ResourceDetailsList {
      results { name resourceType configuredValues { key value type } }
    }
  }
  utilizedEnvVarsOrError(repositorySelector: $selector) {
    __typename
    ... on EnvVarWithConsumersList { results { envVarName } }
  }
}
"""


def wait_until_loaded(url: str, proc: subprocess.Popen, log_path: Path) -> str:
    """Poll until the webserver answers and its single code location is LOADED; returns its name."""
    deadline = time.monotonic() + STARTUP_TIMEOUT_S
    last = "no answer yet"
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"webserver exited with {proc.returncode}:\n{log_path.read_text()[-4000:]}")
        try:
            data = graphql(url, WORKSPACE_QUERY, timeout=5)
        except (urllib.error.URLError, ConnectionError, TimeoutError, OSError) as e:
            last = repr(e)
            time.sleep(0.5)
            continue
        entries = data["workspaceOrError"].get("locationEntries") or []
        if entries and all(e["loadStatus"] == "LOADED" for e in entries):
            (entry,) = entries
            loc = entry["locationOrLoadError"]
            assert loc["__typename"] == "RepositoryLocation", f"code location failed to load: {loc}"
            return entry["name"]
        last = json.dumps(entries)
        time.sleep(0.5)
    pytest.fail(f"webserver not ready within {STARTUP_TIMEOUT_S}s ({last}):\n{log_path.read_text()[-4000:]}")


@contextmanager
def webserver(args: list[str], cwd: Path, tmp_path: Path):
    """``dagster-webserver <args>`` on a free loopback port; yields (url, location name)."""
    home = tmp_path / "dagster_home"  # may hold runs made in process before (same instance)
    home.mkdir(exist_ok=True)
    (home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    port = free_port()
    env = {
        **os.environ,
        "DAGSTER_HOME": str(home),
        **SERVICE_ENV,
        "CDC_LAKE_URI": str(tmp_path / "lake"),
    }
    log_path = tmp_path / "webserver.log"
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "dagster_webserver", *args, "-h", "127.0.0.1", "-p", str(port)],
            cwd=cwd,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    url = f"http://127.0.0.1:{port}"
    try:
        yield url, wait_until_loaded(url, proc, log_path)
    finally:
        stop(proc)


def stop(proc: subprocess.Popen) -> None:
    """SIGTERM the webserver (it stops its code server), then SIGKILL its own process group."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            pass
    try:
        os.killpg(proc.pid, signal.SIGKILL)  # the session started for this webserver only
    except ProcessLookupError:
        pass
    if proc.poll() is None:
        proc.wait(timeout=10)


def check_served(url: str, location: str, interval: int) -> dict:
    """Assert the CDC assets, the binlog sensor (ticking every ``interval`` s) and the resources
    the UI lists; returns the repo node."""
    data = graphql(url, REPOSITORIES_QUERY)["repositoriesOrError"]
    assert data["__typename"] == "RepositoryConnection", data
    (repo,) = data["nodes"]
    assert repo["location"]["name"] == location

    assets = {tuple(a["assetKey"]["path"]): a for a in repo["assetNodes"]}
    for t in INVENTORY_TABLES:
        node = assets[(SERVER, "inventory", t)]
        assert node["isExecutable"] and node["opNames"] == ["dbserver1_cdc"]
    binlog = assets[(SERVER, "binlog")]
    assert binlog["isExecutable"] and binlog["groupName"] == "dbserver1_cdc"
    checks = {n: {c["name"] for c in a["assetChecksOrError"].get("checks", [])} for n, a in assets.items()}
    assert checks[(SERVER, "inventory", "orders")] == {
        "row_count_matches_source",
        "checksum_matches_source",
        "schema_matches_source",
    }
    assert checks[(SERVER, "binlog")] == {"binlog_retention", "changes_in_binlog"}

    sensors = {s["name"]: s for s in repo["sensors"]}
    assert SENSOR in sensors, sorted(sensors)
    assert sensors[SENSOR]["sensorState"]["status"] == "STOPPED"  # opt-in streaming
    assert sensors[SENSOR]["minIntervalSeconds"] == interval

    selector = {"repositoryName": repo["name"], "repositoryLocationName": location}
    res = graphql(url, RESOURCES_QUERY, {"selector": selector})
    details = res["allTopLevelResourceDetailsOrError"]
    assert details["__typename"] == "ResourceDetailsList", details
    resources = {r["name"]: r for r in details["results"]}
    assert {"mysql", "lake"} <= set(resources)
    assert resources["mysql"]["resourceType"].endswith("MySqlCdcResource")
    values = {v["key"]: v for v in resources["mysql"]["configuredValues"]}
    assert values["password"]["type"] == "ENV_VAR" and values["password"]["value"] == "CDC_MYSQL_PASSWORD"
    assert values["server_name"]["value"].strip('"') == SERVER
    env_vars = {e["envVarName"] for e in res["utilizedEnvVarsOrError"]["results"]}
    assert "CDC_MYSQL_PASSWORD" in env_vars
    # The secret itself is never served to the UI.
    assert CDC_PASSWORD not in json.dumps(res)
    return repo


def test_ui_serves_definitions_py(tmp_path):
    with webserver(["-f", "definitions.py"], ROOT, tmp_path) as (url, location):
        assert location == "definitions.py"
        repo = check_served(url, location, 5)
        ranges = {
            tuple(a["assetKey"]["path"]): a
            for a in repo["assetNodes"]
            if a["assetKey"]["path"][-1].endswith("_pk_ranges")
        }
        assert set(ranges) >= {(SERVER, "inventory", f"{t}_pk_ranges") for t in INVENTORY_TABLES}
        assert {a["groupName"] for a in ranges.values()} == {"inventory_pk_ranges"}
        assert all(a["isPartitioned"] for a in ranges.values())


def test_ui_serves_the_component_project(tmp_path):
    project = ROOT / "examples" / "component_project"
    with webserver([], project, tmp_path) as (url, location):
        assert location == "inventory_cdc"
        repo = check_served(url, location, 15)
        # the component's translation (group_name/tags) is what the UI shows
        groups = {tuple(a["assetKey"]["path"]): a["groupName"] for a in repo["assetNodes"]}
        assert groups[(SERVER, "inventory", "orders")] == "inventory"
        res = graphql(
            url,
            RESOURCES_QUERY,
            {"selector": {"repositoryName": repo["name"], "repositoryLocationName": location}},
        )
        lake = {r["name"]: r for r in res["allTopLevelResourceDetailsOrError"]["results"]}["lake"]
        lake_values = {v["key"]: v for v in lake["configuredValues"]}
        assert lake_values["s3_secret_access_key"]["type"] == "ENV_VAR"
        assert lake_values["s3_access_key_id"]["value"] == "AWS_ACCESS_KEY_ID"


# -- after a snapshot and a stream run: what the asset pages show ---------------------------------

ASSET_STATE_QUERY = """
query Asset($key: AssetKeyInput!) {
  assetNodeOrError(assetKey: $key) {
    __typename
    ... on AssetNode {
      groupName
      internalFreshnessPolicy { __typename ... on TimeWindowFreshnessPolicy { failWindowSeconds warnWindowSeconds } }
      assetChecksOrError {
        __typename
        ... on AssetChecks {
          checks { name executionForLatestMaterialization { status runId evaluation { success } } }
        }
      }
      assetMaterializations(limit: 1) {
        runId
        metadataEntries {
          label
          __typename
          ... on IntMetadataEntry { intValue }
          ... on FloatMetadataEntry { floatValue }
          ... on PathMetadataEntry { path }
          ... on TextMetadataEntry { text }
        }
      }
    }
  }
}
"""


def asset_state(url: str, path: list[str]) -> dict:
    node = graphql(url, ASSET_STATE_QUERY, {"key": {"path": path}})["assetNodeOrError"]
    assert node["__typename"] == "AssetNode", node
    return node


@pytest.mark.parametrize("checks", ["planned", "logged"])
def test_ui_shows_checks_row_count_and_lag_after_a_stream_run(tmp_path, monkeypatch, inventory_db, checks):
    """Snapshot, then a stream window that changes one customer row and changes it back, driven by
    the binlog sensor in process on the webserver's instance; then, through the webserver's GraphQL
    API (``dagster-webserver`` in the repository root without ``-f``: [tool.dagster]): every check of
    every table has a passing result for its latest materialization, only the changed table was
    materialized by the stream run, and its page carries row count, URI, lag and backlog.

    ``logged``: ``planned_checks_max_tables=0`` (the default), so the snapshot and the window log
    their checks instead of planning them; the UI shows each result as its table's latest one the
    same. ``planned``: ``planned_checks_max_tables=20``, above the example's table count."""
    import runpy

    import dagster as dg

    from dagster_mysql_cdc import run_sensor_ticks

    home = tmp_path / "dagster_home"
    home.mkdir()
    (home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    for k, v in {**SERVICE_ENV, "CDC_LAKE_URI": str(tmp_path / "lake"), "DAGSTER_HOME": str(home)}.items():
        monkeypatch.setenv(k, v)
    ns = runpy.run_path(str(ROOT / "definitions.py"))
    defs: dg.Definitions = ns["defs"]
    cdc = ns["inventory_cdc"]
    sensor = defs.get_sensor_def(SENSOR)
    mysql = ns["mysql"]
    # every field as configured (the password stays a dg.EnvVar), one changed
    fields = {k: getattr(mysql, k) for k in type(mysql).model_fields}
    mysql = type(mysql)(**{**fields, "planned_checks_max_tables": 0 if checks == "logged" else 20})
    resources = {"mysql": mysql, "lake": defs.resources["lake"]}
    with dg.DagsterInstance.get() as instance:
        log = run_sensor_ticks(sensor, cdc, resources, instance, run_log_level="WARNING")
        assert any(r.dagster_run.tags.get("dagster_mysql_cdc/mode") == "snapshot" for r in log.runs)
        tagged = {r.dagster_run.tags.get("dagster_mysql_cdc/table_checks") for r in log.runs}
        assert tagged == ({"logged"} if checks == "logged" else {None})
        conn = root_connect()
        try:
            with conn.cursor() as cur:
                cur.execute("SELECT email FROM inventory.customers WHERE id = 1001")
                (email,) = cur.fetchone()
                cur.execute("UPDATE inventory.customers SET email = 'ui-test@example.com' WHERE id = 1001")
                cur.execute("UPDATE inventory.customers SET email = %s WHERE id = 1001", (email,))
        finally:
            conn.close()
        log = run_sensor_ticks(sensor, cdc, resources, instance, cursor=log.cursor, run_log_level="WARNING")
        stream_runs = [r for r in log.runs if r.dagster_run.tags.get("dagster_mysql_cdc/mode") == "stream"]
        assert stream_runs and all(r.success for r in stream_runs), log.skip_reasons
        stream_run_ids = {r.run_id for r in stream_runs}
        if checks == "logged":
            assert all(
                r.dagster_run.tags.get("dagster_mysql_cdc/table_checks") == "logged" for r in stream_runs
            )

    with webserver([], ROOT, tmp_path) as (url, location):
        assert location == "definitions.py"  # [tool.dagster] code_location_name
        changed = asset_state(url, [SERVER, "inventory", "customers"])
        (mat,) = changed["assetMaterializations"]
        assert mat["runId"] in stream_run_ids  # the stream run materialized it
        md = {e["label"]: e for e in mat["metadataEntries"]}
        assert md["dagster/row_count"]["intValue"] == 4
        assert md["dagster/uri"]["path"].endswith("customers/state")
        assert md["lag_seconds"]["floatValue"] >= 0
        assert md["behind_head_bytes"]["intValue"] >= 0
        for t in INVENTORY_TABLES:
            node = asset_state(url, [SERVER, "inventory", t])
            checks = node["assetChecksOrError"]["checks"]
            assert {c["name"] for c in checks} == {
                "row_count_matches_source",
                "checksum_matches_source",
                "schema_matches_source",
            }
            for c in checks:
                ex = c["executionForLatestMaterialization"]
                assert ex is not None, (t, c["name"], "not evaluated")
                assert ex["status"] == "SUCCEEDED" and ex["evaluation"]["success"], (t, c)
            if t != "customers":  # unchanged: still the snapshot's materialization
                (m,) = node["assetMaterializations"]
                assert m["runId"] not in stream_run_ids, t
                assert any(e["label"] == "dagster/row_count" for e in m["metadataEntries"])
        binlog = asset_state(url, [SERVER, "binlog"])
        policy = binlog["internalFreshnessPolicy"]
        assert policy["__typename"] == "TimeWindowFreshnessPolicy"
        # 5 s interval, following runs of up to 300 s (definitions.py)
        assert policy["failWindowSeconds"] == 900 and policy["warnWindowSeconds"] == 420
        for t in INVENTORY_TABLES:  # every table: the same policy (quiet ones kept by heartbeats)
            assert asset_state(url, [SERVER, "inventory", t])["internalFreshnessPolicy"] == policy, t
        ranges = asset_state(url, [SERVER, "inventory", "customers_pk_ranges"])
        assert ranges["groupName"] == "inventory_pk_ranges"
