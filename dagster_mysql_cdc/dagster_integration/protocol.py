"""The sensor ↔ run protocol: run tags, metadata keys and how binlog positions travel in them.

The binlog sensor requests runs with tags that say what to do (mode, window, snapshot mode, the
signal/request, the incremental-snapshot state, the server's identity, the selected tables); the
run reports the position it reached as metadata of the ``binlog`` asset, and the sensor reads that
position back to advance its cursor. Both sides import the names and the encoding from here
(dagster-dlt keeps its equivalents in one ``constants.py``), so a key is spelled once.

Positions in **tags** are JSON of :meth:`BinlogPosition.to_dict`; positions in **metadata** are
three entries ``<prefix>_file``, ``<prefix>_pos``, ``<prefix>_gtid_set`` (prefix ``window_end``
for stream runs, ``snapshot`` for snapshots), readable in the Dagster UI, and a fourth,
``<prefix>_epoch``, once the capture failed over (the offset epoch; absent means 0). Both forms
leave the epoch out while it is 0, so tags and metadata of a capture that never failed over are
unchanged.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

import dagster as dg

if TYPE_CHECKING:  # the translator imports this module at package load: keep it light
    from ..events import BinlogPosition

# -- run tags set by the binlog sensor ------------------------------------------------------------
#: ``stream`` | ``snapshot`` | ``checks`` ...: what the run does.
MODE_TAG = "dagster_mysql_cdc/mode"
#: JSON position: the window's first event (stream runs).
WINDOW_START_TAG = "dagster_mysql_cdc/window_start"
#: JSON position: the window's end (stream runs).
WINDOW_END_TAG = "dagster_mysql_cdc/window_end"
#: Debezium ``snapshot.mode`` the run applies.
SNAPSHOT_MODE_TAG = "dagster_mysql_cdc/snapshot_mode"
#: The signal or request that caused the run.
REQUEST_TAG = "dagster_mysql_cdc/request"
#: JSON incremental-snapshot state carried into the run.
INCREMENTAL_TAG = "dagster_mysql_cdc/incremental"
#: JSON identity of the server the window's positions belong to (failover safety).
IDENTITY_TAG = "dagster_mysql_cdc/server_identity"
#: Offset epoch of a snapshot run's positions (set when it is not 0: a re-snapshot after a
#: failover; stream runs carry the epoch in their window positions).
EPOCH_TAG = "dagster_mysql_cdc/epoch"
#: ``topic.prefix`` (server name) of the capture.
SERVER_TAG = "dagster_mysql_cdc/server"
#: Why a window run selected what it did (the sensor's look-ahead of the tables a window changes).
SELECTION_TAG = "dagster_mysql_cdc/selection"
#: ``logged``: the run (a window or snapshot the sensor requested) evaluates the table checks of
#: every table it materializes and the binlog asset's checks and logs them as
#: ``AssetCheckEvaluation`` events, instead of planning them (it selects more tables than
#: ``planned_checks_max_tables``; see ``.selection``).
TABLE_CHECKS_TAG = "dagster_mysql_cdc/table_checks"
#: ``true``: a standby run (run key :func:`.cursor.standby_window_key`), requested when the capture
#: is caught up: it selects the binlog asset, waits for the next change and reports the tables
#: each window changes as it commits them (``AssetMaterialization`` events, their checks logged).
STANDBY_TAG = "dagster_mysql_cdc/standby"
#: JSON ``{"db.table": {"since", "error", "catch_up"}}``: the stopped tables a window run leaves
#: out, and those (``catch_up: true``) it tries to catch up first (engine/isolation.py).
STOPPED_TAG = "dagster_mysql_cdc/stopped_tables"
#: JSON ``["db.table", ...]``: the stopped tables (:data:`STOPPED_TAG`) the run caught up at its
#: start, set before it reads its windows: ``status`` shows them caught up while it follows.
CAUGHT_UP_TAG = "dagster_mysql_cdc/caught_up"
#: JSON ``["db.table", ...]``: tables whose compacted ``state`` is older than the bound
#: (``state_compact_max_age_seconds``) and that no window wrote since: the stream run compacts them
#: after its window (at most :data:`COMPACT_PER_RUN`; an empty window when the capture is idle).
#: Runs report each table's next due time in the binlog asset's ``state_due`` metadata.
COMPACT_TAG = "dagster_mysql_cdc/compact_state"
#: The most tables one run compacts for :data:`COMPACT_TAG` (the others wait for the next run).
COMPACT_PER_RUN = 64
#: The capture a run belongs to (:func:`capture_id`: the sensor, its binlog asset and the
#: resource's table selection). Several captures of one server in one Dagster instance request
#: windows with the same bounds; the sensor counts a run as its own only with its capture's id
#: (also the first part of the run key).
CAPTURE_TAG = "dagster_mysql_cdc/capture"
#: JSON ``{"reached": position, "windows": n, "stopped": {...}, "next": {"start", "end"}}``, set
#: by a following stream run each time it committed a follow-on window (``next``: the follow-on
#: window it saved and is reading). A run that dies after committing follow-on windows made
#: progress: the sensor commits ``reached`` (and the stopped tables as they were then) and
#: requests ``next`` with its saved bounds, instead of retrying the whole run.
PROGRESS_TAG = "dagster_mysql_cdc/progress"
#: JSON ``{"host", "pid", "started", "beat"}``: the heartbeat of the run's worker, set when the
#: capture starts and every few seconds after (:mod:`.liveness`); the sensor takes a run whose
#: worker is gone, or whose beat is too old, for dead, and retries its window.
WORKER_TAG = "dagster_mysql_cdc/worker"

# -- metadata keys of asset specs -------------------------------------------------------------------
#: On a table asset's spec: ``"database.table"`` it captures (Debezium's data-collection id).
TABLE_METADATA_KEY = "dagster_mysql_cdc/table"
#: On a table asset's spec: the real database name (any character MySQL allows; the asset key
#: and group hold its Dagster name, ``translator.dagster_name``).
DATABASE_NAME_METADATA_KEY = "dagster_mysql_cdc/database"
#: On a table asset's spec: the real table name.
TABLE_NAME_METADATA_KEY = "dagster_mysql_cdc/table_name"
#: On every spec of a capture: the server name (``topic.prefix``).
SERVER_METADATA_KEY = "dagster_mysql_cdc/server"
#: On the ``binlog`` asset's spec: the server name; marks the asset that carries the offset.
BINLOG_METADATA_KEY = "dagster_mysql_cdc/binlog"


def position_tag(pos: BinlogPosition) -> str:
    """A position as a run tag value (JSON of :meth:`BinlogPosition.to_dict`)."""
    return json.dumps(pos.to_dict())


def position_from_tag(tags: Mapping[str, str], key: str) -> BinlogPosition:
    """The position in run tag ``key`` (written by :func:`position_tag`).

    Raises:
        KeyError: no such tag. ValueError / TypeError: the tag is not a position's JSON.
    """
    from ..events import BinlogPosition

    return BinlogPosition.from_dict(json.loads(tags[key]))


def position_metadata(prefix: str, pos: BinlogPosition) -> dict[str, Any]:
    """``<prefix>_file``, ``<prefix>_pos``, ``<prefix>_gtid_set`` metadata entries of ``pos``, and
    ``<prefix>_epoch`` when its offset epoch is not 0."""
    md: dict[str, Any] = {
        f"{prefix}_file": pos.file,
        f"{prefix}_pos": dg.MetadataValue.int(pos.pos),
        f"{prefix}_gtid_set": pos.gtid_set or "",
    }
    if pos.epoch:
        md[f"{prefix}_epoch"] = dg.MetadataValue.int(pos.epoch)
    return md


def position_from_metadata(md: Mapping[str, Any], *prefixes: str) -> BinlogPosition | None:
    """The position written by :func:`position_metadata` under the first of ``prefixes`` present
    in materialization metadata ``md`` (values are Dagster ``MetadataValue``s), else ``None``."""
    from ..events import BinlogPosition

    for prefix in prefixes:
        f, p = md.get(f"{prefix}_file"), md.get(f"{prefix}_pos")
        if f is None or p is None:
            continue
        g, e = md.get(f"{prefix}_gtid_set"), md.get(f"{prefix}_epoch")
        return BinlogPosition(
            str(f.value),
            int(p.value),
            (str(g.value) or None) if g is not None else None,
            int(e.value) if e is not None else 0,
        )
    return None


def capture_id(sensor_name: str, binlog_key: dg.AssetKey, selection: Mapping[str, Any]) -> str:
    """The id of a capture in a Dagster instance: ``cap-`` and 12 hex digits of a digest of the
    sensor's name, its ``binlog`` asset's key and ``selection`` (JSON-able: the resource's
    ``topic.prefix`` and include/exclude lists). Stable across code reloads (tables added or
    removed do not change it); two captures of one server in one instance differ in at least one
    of them (within one code location their sensors and binlog assets must differ)."""
    import hashlib

    ident = json.dumps([sensor_name, binlog_key.to_user_string(), selection], sort_keys=True)
    return "cap-" + hashlib.sha256(ident.encode()).hexdigest()[:12]


def default_sensor_name(assets_def: dg.AssetsDefinition) -> str:
    """The binlog sensor's name unless given: ``<op name>_binlog_sensor`` (the name
    :func:`.sensor.build_mysql_cdc_sensor` and the verification sensor derive theirs from)."""
    return f"{assets_def.node_def.name}_binlog_sensor"


def key_capture(run_key: str) -> str | None:
    """The capture id a run key starts with (:func:`capture_id`), ``None`` for a key requested
    before run keys carried it (``stream:...``, ``snapshot:...``)."""
    head = run_key.split(":", 1)[0]
    return head if head.startswith("cap-") else None


def binlog_asset_key(specs: Iterable[dg.AssetSpec]) -> dg.AssetKey | None:
    """The key of the ``binlog`` asset among ``specs`` (the spec marked with
    :data:`BINLOG_METADATA_KEY`), or ``None``."""
    return next((s.key for s in specs if BINLOG_METADATA_KEY in (s.metadata or {})), None)
