"""COMMIT -> a table's materialization visible in the Dagster UI (the webserver's GraphQL API).

A change is visible in the UI once the latest materialization of its table covers the change's
binlog position: the materialization's window end (``window_end_file`` / ``window_end_pos``,
written by ``position_metadata("window_end", reached)`` in
``dagster_mysql_cdc/dagster_integration/run_report.py``; the table heartbeats of
``dagster_integration/heartbeat.py`` carry the same keys) is at or after the position the server
reported right after the change's COMMIT (``SHOW MASTER STATUS`` on the writer's connection: the
end of the COMMIT's event, i.e. the next event to read, which is what a window end is).

:class:`UiWatch` polls the webserver (a thread, every ``poll`` seconds) with the query the asset
graph's live data runs (``assetNodes(assetKeys) { assetMaterializations(limit: 1) }``, answered
from the assets' records in one storage read), only for the tables with a change not yet covered;
a materialization's metadata is fetched once, when it first shows. It records, per expected
change, the poll that first saw it covered and that materialization (its event timestamp: when
the run logged it; its run id; its ``kind``).
"""

from __future__ import annotations

import json
import re
import threading
import time
import urllib.request
from collections.abc import Hashable, Iterable
from dataclasses import dataclass

_SEQ = re.compile(r"\.(\d+)$")

WORKSPACE = """
query { workspaceOrError { ... on Workspace { locationEntries { name loadStatus
  locationOrLoadError { __typename ... on PythonError { message } } } } } }
"""
LATEST = """
query($keys: [AssetKeyInput!]) { assetNodes(assetKeys: $keys) { assetKey { path }
  assetMaterializations(limit: 1) { timestamp runId } } }
"""
LATEST_METADATA = """
query($keys: [AssetKeyInput!]) { assetNodes(assetKeys: $keys) { assetKey { path }
  assetMaterializations(limit: 1) { timestamp runId metadataEntries { label
    ... on TextMetadataEntry { text } ... on IntMetadataEntry { intRepr } } } } }
"""


def graphql(url: str, query: str, variables: dict | None = None, timeout: float = 60) -> dict:
    """``data`` of a GraphQL query to the webserver at ``url``.

    Raises:
        OSError: the webserver does not answer. RuntimeError: the query returned ``errors``.
    """
    body = json.dumps({"query": query, "variables": variables or {}}).encode()
    req = urllib.request.Request(f"{url}/graphql", data=body, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=timeout) as resp:
        payload = json.loads(resp.read())
    if "errors" in payload:
        raise RuntimeError(payload["errors"])
    return payload["data"]


def wait_location(url: str, timeout: float) -> str:
    """Waits until the webserver at ``url`` answers and its (first) code location is loaded;
    returns the location's name.

    Raises:
        RuntimeError: the location failed to load, or not within ``timeout`` seconds.
    """
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            entries = graphql(url, WORKSPACE, timeout=10)["workspaceOrError"]["locationEntries"]
        except (OSError, RuntimeError):
            time.sleep(0.5)
            continue
        if entries and entries[0]["loadStatus"] == "LOADED":
            err = entries[0]["locationOrLoadError"] or {}
            if err.get("__typename") == "PythonError":
                raise RuntimeError(f"the code location failed to load: {err['message']}")
            return entries[0]["name"]
        time.sleep(0.5)
    raise RuntimeError(f"the webserver at {url} did not load the code location within {timeout:.0f} s")


def server_position(cur) -> tuple[str, int]:
    """``(file, pos)`` the server reports now (``SHOW MASTER STATUS``; MySQL 8.4 calls it
    ``SHOW BINARY LOG STATUS``): run right after a COMMIT on the same connection, the end of that
    COMMIT's event."""
    try:
        cur.execute("SHOW MASTER STATUS")
    except Exception:  # noqa: BLE001 - MySQL >= 8.4
        cur.execute("SHOW BINARY LOG STATUS")
    row = cur.fetchone()
    if row is None:
        raise SystemExit("SHOW MASTER STATUS returned nothing: the server's binary log is off")
    return str(row[0]), int(row[1])


def position_key(file: str, pos: int) -> tuple[int, int]:
    """``(file sequence, offset)``: the order of binlog positions of one server (epoch 0)."""
    m = _SEQ.search(file)
    if m is None:
        raise ValueError(f"binlog file name {file!r} has no numeric suffix")
    return int(m.group(1)), int(pos)


@dataclass(frozen=True)
class Materialization:
    """The latest materialization of an asset as the webserver returned it."""

    timestamp: float  # epoch seconds: when the run (or the sensor, for a runless one) logged it
    run_id: str  # "" for a runless materialization (a heartbeat reported by the sensor)
    end: tuple[int, int] | None  # window_end as position_key, None without window_end metadata
    kind: str  # the ``kind`` metadata (heartbeat, ...), else "window" (a run's) / "runless"
    epoch: int = 0

    @classmethod
    def from_graphql(cls, m: dict) -> Materialization:
        md: dict[str, str] = {}
        for e in m.get("metadataEntries") or []:
            v = e.get("text", e.get("intRepr"))
            if v is not None:
                md[e["label"]] = str(v)
        end = None
        if "window_end_file" in md and "window_end_pos" in md:
            end = position_key(md["window_end_file"], int(md["window_end_pos"]))
        kind = md.get("kind") or ("window" if m["runId"] else "runless")
        return cls(float(m["timestamp"]) / 1000, m["runId"], end, kind, int(md.get("window_end_epoch", "0")))


@dataclass
class Seen:
    """When a poll first found an expected change covered, and by which materialization."""

    at: float  # epoch seconds at which that poll's answer arrived
    mat: Materialization


@dataclass(frozen=True)
class _Expected:
    key: tuple[str, ...]
    pos: tuple[int, int]


class UiWatch(threading.Thread):
    """Polls the webserver at ``url`` every ``poll`` seconds for the latest materialization of the
    tables with an expected change not yet covered (see the module docstring); :attr:`seen` maps
    each expected change's id to :class:`Seen`. Errors of a poll (the webserver busy or
    restarting) are counted in :attr:`errors` and the poll is retried."""

    def __init__(self, url: str, poll: float = 0.25):
        super().__init__(daemon=True)
        self.url, self.poll = url, poll
        self.expected: dict[Hashable, _Expected] = {}
        self.seen: dict[Hashable, Seen] = {}
        self.latest: dict[tuple[str, ...], Materialization] = {}
        self._light: dict[tuple[str, ...], tuple[str, str]] = {}
        self.polls = 0
        self.poll_seconds = 0.0
        self.errors: list[str] = []
        self.stop_event = threading.Event()
        self._lock = threading.Lock()

    def expect(self, ident: Hashable, key: Iterable[str], file: str, pos: int) -> None:
        """Watch for ``key``'s latest materialization to cover ``(file, pos)``."""
        with self._lock:
            self.expected[ident] = _Expected(tuple(key), position_key(file, pos))

    def pending(self) -> list[Hashable]:
        with self._lock:
            return [i for i in self.expected if i not in self.seen]

    def wait(self, idents: Iterable[Hashable], timeout: float) -> bool:
        """Waits (at most ``timeout`` s) until every change of ``idents`` was seen covered."""
        idents = list(idents)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if all(i in self.seen for i in idents):
                return True
            time.sleep(0.1)
        return all(i in self.seen for i in idents)

    def run(self) -> None:
        while not self.stop_event.is_set():
            t0 = time.monotonic()
            try:
                self.poll_once()
            except (OSError, RuntimeError, ValueError, KeyError) as e:
                self.errors.append(f"{type(e).__name__}: {str(e)[:200]}")
            time.sleep(max(0.0, self.poll - (time.monotonic() - t0)))

    def poll_once(self) -> None:
        with self._lock:
            todo = {i: e for i, e in self.expected.items() if i not in self.seen}
        keys = sorted({e.key for e in todo.values()})
        if not keys:
            return
        t0 = time.monotonic()
        nodes = graphql(self.url, LATEST, {"keys": [{"path": list(k)} for k in keys]})["assetNodes"]
        changed = []
        for n in nodes:
            mats = n["assetMaterializations"]
            if not mats:
                continue
            k, light = tuple(n["assetKey"]["path"]), (mats[0]["timestamp"], mats[0]["runId"])
            if self._light.get(k) != light:
                changed.append(k)
        if changed:
            full = graphql(self.url, LATEST_METADATA, {"keys": [{"path": list(k)} for k in changed]})
            for n in full["assetNodes"]:
                mats = n["assetMaterializations"]
                if mats:
                    k = tuple(n["assetKey"]["path"])
                    self.latest[k] = Materialization.from_graphql(mats[0])
                    self._light[k] = (mats[0]["timestamp"], mats[0]["runId"])
        self.polls += 1
        self.poll_seconds += time.monotonic() - t0
        # seen once the answer arrived: a query the webserver held (e.g. while a run wrote its
        # events to SQLite) can return a materialization logged after the query was sent
        at = time.time()
        with self._lock:
            for ident, e in todo.items():
                m = self.latest.get(e.key)
                if m is not None and m.end is not None and m.end >= e.pos and m.epoch == 0:
                    self.seen[ident] = Seen(at, m)
