"""The Dagster UI with hundreds of captured tables (issue 28: "the UI stays usable with 1,000 tables").

A real ``dagster-webserver`` on loopback serves the code location of ``bench/daemon_location.py``
capturing ``N`` tables (given by name: loading the location opens no MySQL connection, so no
database is needed), on a fresh ``DAGSTER_HOME``. For each ``N`` of ``--tables`` (default 300 and
1,000), printed side by side:

- webserver start -> code location LOADED (the code server loads the definitions: ``N`` assets
  and ``3 N + 2`` checks);
- the GraphQL queries behind the pages a user opens, each timed as the median of ``--repeat``
  calls: the asset graph (every asset node with its group, dependencies and checks), the asset
  catalog (every asset key), one database's asset group (the graph a user opens from the group),
  one table's asset page (its checks), and the sensor's page.

    python -m bench.ui_many_tables                      # 300 and 1,000 tables
    python -m bench.ui_many_tables --tables 100 2000

Prints the machine load (1-minute average) beside the figures: the machine is shared.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DB = "bench_ui"

ASSET_GRAPH = """
query { assetNodes { id assetKey { path } groupName dependencyKeys { path }
  assetChecksOrError { ... on AssetChecks { checks { name } } } } }
"""
CATALOG = "query { assetsOrError { ... on AssetConnection { nodes { key { path } } } } }"
GROUP = """
query($sel: AssetGroupSelector!) { assetNodes(group: $sel) { id assetKey { path } dependencyKeys { path } } }
"""
TABLE_PAGE = """
query($key: AssetKeyInput!) { assetNodeOrError(assetKey: $key) { ... on AssetNode { id groupName
  assetChecksOrError { ... on AssetChecks { checks { name } } } } } }
"""
SENSOR = """
query($sel: SensorSelector!) { sensorOrError(sensorSelector: $sel) { ... on Sensor { name
  sensorState { status ticks(limit: 20) { status } } } } }
"""
WORKSPACE = """
query { workspaceOrError { ... on Workspace { locationEntries { name loadStatus
  locationOrLoadError { __typename ... on PythonError { message } }
  } } } }
"""
SENSORS = """
query($sel: RepositorySelector!) { sensorsOrError(repositorySelector: $sel) { ... on Sensors { results { name } } } }
"""


def graphql(url: str, query: str, variables: dict | None = None, timeout: float = 120) -> dict:
    body = json.dumps({"query": query, "variables": variables or {}}).encode()
    req = urllib.request.Request(f"{url}/graphql", data=body, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=timeout) as resp:
        payload = json.loads(resp.read())
    if "errors" in payload:
        raise RuntimeError(payload["errors"])
    return payload["data"]


def load() -> float:
    return os.getloadavg()[0]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def timed(fn, repeat: int) -> tuple[float, object]:
    """Median seconds of ``repeat`` calls of ``fn`` and its last result."""
    secs, out = [], None
    for _ in range(repeat):
        t0 = time.monotonic()
        out = fn()
        secs.append(time.monotonic() - t0)
    return statistics.median(secs), out


def measure(n: int, repeat: int, timeout: float) -> dict[str, float]:
    """Start the webserver on ``n`` tables, wait for the location, time the pages' queries."""
    home = Path(tempfile.mkdtemp(prefix="bench-ui-"))
    (home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    env = {
        **os.environ,
        "DAGSTER_HOME": str(home),
        "BENCH_DAEMON_DB": DB,
        "BENCH_DAEMON_TABLES": ",".join(f"t{i:04d}" for i in range(n)),
        "BENCH_DAEMON_LAKE": str(home / "lake"),
        "CDC_MYSQL_PASSWORD": os.environ.get("CDC_MYSQL_PASSWORD", "cdc"),
    }
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    log = open(home / "webserver.log", "w")
    t0 = time.monotonic()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "dagster_webserver",
            "-f",
            "bench/daemon_location.py",
            "-h",
            "127.0.0.1",
            "-p",
            str(port),
        ],
        cwd=ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    out: dict[str, float] = {}
    try:
        location = None
        while time.monotonic() - t0 < timeout:
            if proc.poll() is not None:
                raise RuntimeError(f"webserver exited: {(home / 'webserver.log').read_text()[-3000:]}")
            try:
                entries = graphql(url, WORKSPACE, timeout=10)["workspaceOrError"]["locationEntries"]
            except OSError:
                time.sleep(0.2)
                continue
            if entries and entries[0]["loadStatus"] == "LOADED":
                err = entries[0]["locationOrLoadError"]
                if err.get("__typename") == "PythonError":
                    raise RuntimeError(err["message"])
                location = entries[0]["name"]
                break
            time.sleep(0.2)
        if location is None:
            raise RuntimeError(f"location not loaded in {timeout} s")
        out["webserver start -> location loaded (s)"] = time.monotonic() - t0
        secs, data = timed(lambda: graphql(url, ASSET_GRAPH), repeat)
        nodes = data["assetNodes"]  # type: ignore[index]
        checks = sum(len(a["assetChecksOrError"].get("checks", [])) for a in nodes)
        assert len(nodes) == n + 1, (len(nodes), n)
        out["asset graph query (s)"] = secs
        out["catalog query (s)"], _ = timed(lambda: graphql(url, CATALOG), repeat)
        out["one database's asset group (s)"], group = timed(
            lambda: graphql(
                url,
                GROUP,
                {
                    "sel": {
                        "groupName": DB,
                        "repositoryLocationName": location,
                        "repositoryName": "__repository__",
                    }
                },
            ),
            repeat,
        )
        assert len(group["assetNodes"]) == n, len(group["assetNodes"])  # type: ignore[index]
        out["one table's asset page (s)"], page = timed(
            lambda: graphql(url, TABLE_PAGE, {"key": {"path": [DB, DB, "t0000"]}}), repeat
        )
        assert len(page["assetNodeOrError"]["assetChecksOrError"]["checks"]) == 3, page  # type: ignore[index]
        repo = {"repositoryLocationName": location, "repositoryName": "__repository__"}
        (sensor,) = graphql(url, SENSORS, {"sel": repo})["sensorsOrError"]["results"]
        out["sensor page (s)"], _ = timed(
            lambda: graphql(url, SENSOR, {"sel": {**repo, "sensorName": sensor["name"]}}), repeat
        )
        print(f"{n} tables: {len(nodes)} asset nodes, {checks} checks (load {load():.1f})", flush=True)
    finally:
        # the whole process group: the webserver's code server too (SIGTERM to the webserver
        # alone left it running until its heartbeat timed out)
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            pass
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        log.close()
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tables", type=int, nargs="+", default=[300, 1000])
    ap.add_argument("--repeat", type=int, default=3, help="calls per query (the median is printed)")
    ap.add_argument("--timeout", type=float, default=600)
    args = ap.parse_args(argv)
    results = {n: measure(n, args.repeat, args.timeout) for n in args.tables}
    names = list(next(iter(results.values())))
    print()
    print("| figure | " + " | ".join(f"{n} tables" for n in results) + " |")
    print("|---|" + "---|" * len(results))
    for name in names:
        print(f"| {name} | " + " | ".join(f"{results[n][name]:.2f}" for n in results) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
