"""One lake prefix, one deployment: the owner marker of ``<base_uri>/<server_name>/``.

Every stream window is committed exactly once per Delta ``txn`` identity (the window's start
position, :mod:`.delta`), and a window that starts at or before a table's last committed one is
skipped for that table as a retry. That holds for the one capture whose sensor cursor planned
those windows. Two deployments that stream the same server into the same prefix (the same
``server_name`` and ``base_uri`` in two Dagster instances: a staging copy pointed at the
production bucket, a migrated instance left running) each plan their own windows: each change is
written twice, and a window of one can be skipped because the other committed a later start for
the table, which loses the changes between. Debezium has the same hazard (a ``topic.prefix`` used
by two connectors) and leaves it to the operator.

So the first run that writes a prefix records its owner, the Dagster instance, in
``<base_uri>/<server_name>/_owner.json`` (an atomic create-if-absent,
:meth:`.storage.StorageSettings.first_write`), and every later run compares its own instance with
it before it writes anything; another instance's run fails with :class:`LakeOwnerError`, which
names both and the two fixes. The Dagster instance is the unit because it holds the sensor cursor
(the replication offset): runs and sensors of one instance share it, on any number of hosts.

One case is decided without the operator: an owner whose storage was a SQLite file on this same
host that no longer exists (a ``dagster dev`` without ``DAGSTER_HOME`` keeps its instance in a
temporary folder that it deletes at exit; ``make clean``; a test's temporary instance) can never
write again, so the prefix is taken over (the marker replaced, a warning logged).

An instance without an identity (ephemeral: ``dg.materialize``, ``DagsterInstance.ephemeral()``,
a script or the in-process driver) never claims, since its cursor ends with its process, but it
is refused by a live owner's marker like any other instance: its runs would plan windows of their
own beside the owner's, which is the hazard above.
"""

from __future__ import annotations

import json
import os
import socket
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from typing import Literal

from ..errors import ConfigurationError
from .storage import StorageSettings

#: the marker's name below ``<base_uri>/<server_name>/`` (a leading ``_``, as ``_schema_history``
#: and Delta's ``_delta_log``: readers that list the prefix for tables pass over it)
OWNER_MARKER = "_owner.json"


class LakeOwnerError(ConfigurationError):
    """The lake prefix of this capture was claimed by another Dagster instance (its owner marker
    names another instance id): two deployments would write one prefix. Nothing was written.

    Attributes:
        marker_uri: the owner marker's URI.
        owner: the marker's content (``instance_id``, ``claimed_at``, ``run_id``, ``host``).
    """

    def __init__(self, message: str, marker_uri: str, owner: dict):
        super().__init__(message)
        self.marker_uri = marker_uri
        self.owner = owner


@dataclass(frozen=True)
class LakeOwner:
    """Who writes a lake prefix.

    Attributes:
        instance_id: the Dagster instance's identity (its run storage id: a UUID stored in the
            instance's database, the same for every process and host that shares the storage).
        run_id: the run that claims (informational).
        host: the claiming process's host name (informational).
        claimed_at: ISO-8601 UTC time of the claim (informational).
        run_storage_file: the absolute path of the instance's SQLite run database on ``host``, or
            ``None`` (another storage: PostgreSQL, MySQL). When it is gone, so is the instance.
    """

    instance_id: str
    run_id: str = ""
    host: str = field(default_factory=socket.gethostname)
    claimed_at: str = field(default_factory=lambda: datetime.now(UTC).isoformat(timespec="seconds"))
    run_storage_file: str | None = None

    def to_json(self) -> bytes:
        """The marker's body: ``{"instance_id", "run_id", "host", "claimed_at", "run_storage_file"}``
        as UTF-8 JSON."""
        return json.dumps(asdict(self), indent=1).encode()


@dataclass(frozen=True)
class Claim:
    """What :func:`claim_lake_prefix` did.

    Attributes:
        outcome: ``claimed`` (this call wrote the first marker), ``held`` (the instance owned the
            prefix already) or ``took_over`` (the previous owner's SQLite storage on this host is
            gone; its marker was replaced).
        previous: the replaced marker's content (``took_over`` only).
    """

    outcome: Literal["claimed", "held", "took_over"]
    previous: dict | None = None


def owner_marker_uri(storage: StorageSettings, server_name: str) -> str:
    """``<base_uri>/<server_name>/_owner.json`` in ``storage``'s scheme."""
    return storage.uri(server_name, OWNER_MARKER)


def read_owner(storage: StorageSettings, server_name: str) -> dict | None:
    """The owner marker of ``server_name``'s prefix as a dict, or ``None`` when there is none.

    Raises:
        LakeOwnerError: the marker exists but is not a JSON object with an ``instance_id``.
    """
    uri = owner_marker_uri(storage, server_name)
    body = storage.read_bytes(uri)
    return None if body is None else _parse(uri, body)


def claim_lake_prefix(storage: StorageSettings, server_name: str, owner: LakeOwner) -> Claim:
    """Claim ``<base_uri>/<server_name>/`` for ``owner.instance_id``, or check that it owns it.

    One read when the marker exists (every run after the first); a create-if-absent and a read
    back when it does not, so of two first claims exactly one wins (S3 ``If-None-Match: *``, a
    local hard link). A marker of an instance that is provably gone (:func:`owner_is_gone`) is
    deleted and claimed the same way.

    Returns:
        the :class:`Claim`.
    Raises:
        LakeOwnerError: another instance holds the prefix (or the marker is unreadable).
        OSError / botocore ClientError: the lake cannot be read or written.
    """
    uri = owner_marker_uri(storage, server_name)
    body = storage.read_bytes(uri)
    if body is None:
        body = storage.first_write(uri, owner.to_json())
        if body is None:
            return Claim("claimed")
    held = _parse(uri, body)
    if held["instance_id"] == owner.instance_id:
        return Claim("held")
    if owner_is_gone(held):
        storage.pyarrow_filesystem().delete_file(storage.fs_path(uri))
        body = storage.first_write(uri, owner.to_json())
        if body is None:
            return Claim("took_over", held)
        held = _parse(uri, body)  # another claimant replaced it first
        if held["instance_id"] == owner.instance_id:
            return Claim("held")
    raise LakeOwnerError(_refusal(storage, server_name, uri, held, owner.instance_id), uri, held)


def check_lake_owner(storage: StorageSettings, server_name: str, instance_id: str | None) -> None:
    """Read-only :func:`claim_lake_prefix` (the sensor's check at each tick, and the whole check of
    a run of an ephemeral instance, ``instance_id=None``, which never claims): nothing is written.

    Passes when there is no marker (or it cannot be read: a lake outage is the runs' to report),
    when it names ``instance_id``, or when its owner is gone (:func:`owner_is_gone`: the next run
    of a persistent instance takes the prefix over).

    Raises:
        LakeOwnerError: another instance holds the prefix (or the marker is malformed).
    """
    held = read_owner(storage, server_name)
    if held is not None and held["instance_id"] != instance_id and not owner_is_gone(held):
        uri = owner_marker_uri(storage, server_name)
        raise LakeOwnerError(_refusal(storage, server_name, uri, held, instance_id), uri, held)


def owner_is_gone(held: dict) -> bool:
    """Whether the marker ``held`` names an instance that can no longer write: its storage was a
    SQLite file on this host (``run_storage_file``, ``host``) and the file does not exist."""
    path = held.get("run_storage_file")
    return isinstance(path, str) and held.get("host") == socket.gethostname() and not os.path.exists(path)


def _parse(uri: str, body: bytes) -> dict:
    try:
        held = json.loads(body)
    except ValueError:
        held = None
    if not isinstance(held, dict) or not isinstance(held.get("instance_id"), str):
        raise LakeOwnerError(
            f"The lake's owner marker {uri} is not a JSON object with an `instance_id` "
            f"({body[:200]!r}). Nothing was written. Delete it; the next run of the deployment "
            "that should write this prefix claims it again.",
            uri,
            {},
        )
    return held


def _refusal(
    storage: StorageSettings, server_name: str, uri: str, held: dict, instance_id: str | None
) -> str:
    prefix = storage.uri(server_name)
    delete = f"aws s3 rm {uri}" if storage.is_s3 else f"rm {storage.fs_path(uri)}"
    if storage.is_s3 and storage.s3_endpoint_url:
        delete += f" --endpoint-url {storage.s3_endpoint_url}"
    owner = (
        f"The lake prefix {prefix} belongs to another Dagster deployment: its owner marker {uri} "
        f"names Dagster instance {held['instance_id']} (claimed {held.get('claimed_at', '?')} by run "
        f"{held.get('run_id') or '?'} on host {held.get('host', '?')})"
    )
    other_prefix = (
        "another `server_name` on MySqlCdcResource and mysql_cdc_assets, or another `base_uri` on "
        "CdcLakeResource; a new prefix starts with a snapshot"
    )
    if instance_id is None:
        return (
            f"{owner}, and this run's Dagster instance is ephemeral (`dg.materialize`, "
            "`DagsterInstance.ephemeral()`: a script, a notebook, a test or the in-process driver "
            "`run_sensor_ticks`), with a cursor of its own that ends with its process. Nothing was "
            "written. Its windows and snapshots would land beside the deployment's: every change "
            "twice, and windows of the deployment skipped as retries (lost changes). Either run it "
            "in that deployment (Materialize in its UI, or `dagster asset materialize` with its "
            f"DAGSTER_HOME), or give it a prefix of its own ({other_prefix}), or, if that deployment "
            f"is retired for good, delete the marker (`{delete}`)."
        )
    return (
        f"{owner}, and this deployment's instance is "
        f"{instance_id}. Nothing was written. Two deployments that stream one server into one "
        "prefix write every change twice and skip each other's windows (lost changes). Either give "
        f"this capture a prefix of its own ({other_prefix}), or, when this deployment replaces the one that claimed the prefix (a new Dagster "
        "instance for the same capture), stop the other deployment's sensor and runs, move its "
        f"sensor cursor over if you want to keep streaming from its offset, and delete the marker "
        f"(`{delete}`): the next run claims the prefix for this instance."
    )
