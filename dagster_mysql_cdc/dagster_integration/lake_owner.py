"""The run side of the lake's owner marker (:mod:`..sink.owner`): which Dagster instance a run
belongs to, and the claim every capture run makes before it writes the lake."""

from __future__ import annotations

import os

import dagster as dg

from ..sink.owner import LakeOwner, check_lake_owner, claim_lake_prefix, owner_marker_uri
from ..sink.storage import StorageSettings


def instance_id(instance: dg.DagsterInstance) -> str | None:
    """The identity of ``instance`` for the owner marker: its run storage id (a UUID kept in the
    instance's database, Dagster's own instance identity for telemetry), or ``None`` for an
    ephemeral instance (``dg.materialize``, ``DagsterInstance.ephemeral()``: it holds no sensor
    cursor that outlives the process, so it claims nothing, but another instance's marker refuses
    it) and for a run storage that has no such id."""
    if instance.is_ephemeral:
        return None
    # the SQL run storages have it (SQLite, PostgreSQL, MySQL)
    get_id = getattr(instance.run_storage, "get_run_storage_id", None)
    if get_id is None:
        return None
    try:
        return str(get_id())
    except NotImplementedError:
        return None


def claim_for_run(context: dg.AssetExecutionContext, storage: StorageSettings, server_name: str) -> None:
    """Claim ``server_name``'s lake prefix for the run's Dagster instance, or check that the
    instance holds it (:func:`..sink.owner.claim_lake_prefix`), before the run writes anything.
    A run of an ephemeral instance claims nothing; it is only checked
    (:func:`..sink.owner.check_lake_owner`): it may write a prefix that no live instance holds.

    Raises:
        LakeOwnerError: another Dagster instance holds the prefix; nothing was written.
        LakeUnavailableError / ConfigurationError: the lake cannot be reached (as any run's
            first lake access, :meth:`..sink.storage.StorageSettings.ensure_root`).
    """
    owner_id = instance_id(context.instance)
    if owner_id is None:
        check_lake_owner(storage, server_name, None)
        return
    storage.ensure_root()
    owner = LakeOwner(
        owner_id, run_id=context.run.run_id, run_storage_file=sqlite_run_storage_file(context.instance)
    )
    claim = claim_lake_prefix(storage, server_name, owner)
    marker = owner_marker_uri(storage, server_name)
    if claim.outcome == "claimed":
        context.log.info(
            f"Claimed the lake prefix {storage.uri(server_name)} for this Dagster instance ({owner_id}): {marker}"
        )
    elif claim.outcome == "took_over":
        previous = claim.previous or {}
        context.log.warning(
            f"Took over the lake prefix {storage.uri(server_name)} from Dagster instance "
            f"{previous.get('instance_id')}, whose run storage {previous.get('run_storage_file')} on this "
            f"host no longer exists (a `dagster dev` without DAGSTER_HOME deletes its instance at exit); "
            f"{marker} now names this instance ({owner_id}). Its sensor cursor went with it: the sensor "
            "starts again from its own cursor (an empty one snapshots first)."
        )


def sqlite_run_storage_file(instance: dg.DagsterInstance) -> str | None:
    """The absolute path of ``instance``'s SQLite run database (``<DAGSTER_HOME>/history/runs.db``
    by default), or ``None`` for any other run storage."""
    conn = getattr(instance.run_storage, "_conn_string", None)  # SqliteRunStorage's own
    if isinstance(conn, str) and conn.startswith("sqlite:///"):
        return os.path.abspath(conn[len("sqlite:///") :])  # sqlite:////abs/path or sqlite:///rel/path
    return None


def check_for_tick(context: dg.SensorEvaluationContext, lake: object, server_name: str) -> None:
    """The binlog sensor's check of the lake's owner marker at each tick (one small read, nothing
    written): a deployment whose prefix belongs to another Dagster instance fails its ticks (red on
    the sensor's page, ``status``'s ``last tick error``) instead of requesting runs that would be
    refused. No check without a lake resource in the sensor's context. An ephemeral instance (the
    in-process driver ``run_sensor_ticks``) is refused by any live owner's marker.

    Raises:
        LakeOwnerError: another instance holds the prefix (:func:`..sink.owner.check_lake_owner`).
    """
    storage_settings = getattr(lake, "storage_settings", None)
    if storage_settings is None:
        return
    try:
        instance = context.instance
    except Exception:  # noqa: BLE001 - a context built without an instance (tests, previews)
        return
    check_lake_owner(storage_settings(), server_name, instance_id(instance))
