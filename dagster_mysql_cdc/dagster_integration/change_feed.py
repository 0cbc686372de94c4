"""Incremental change feeds consumed exactly once by Dagster assets downstream of captured tables
(the Dagster side of :mod:`..downstream.changes`; :mod:`.input_manager` hands an asset a captured
table's current state).

**Incremental assets** (dbt's incremental models, dlt's incremental cursors, for a change feed):
:func:`incremental_changes` reads the position the asset recorded in its last materialization's
metadata (``dagster_mysql_cdc/changes/<server>.<db>.<table>``), reads the table's change events
after it (:func:`..downstream.changes.read_changes`), and gives back the position to record with this
materialization (:attr:`IncrementalChanges.metadata`). The position advances only when a
materialization is recorded, so a run that fails or is killed (SIGKILL) leaves it where it was and
the next run reads the same changes again: the asset must write its output idempotently per
position (e.g. rewrite its table from the version the previous materialization recorded, as
``assets/downstream.py`` does, never on top of an unrecorded write). A cut (a re-snapshot, a
TRUNCATE), an expired position or the first run say :attr:`IncrementalChanges.rebuild`: compute
from :meth:`IncrementalChanges.read_current` instead, which also moves the position to match it.
"""

from __future__ import annotations

from typing import Any

import dagster as dg
import pyarrow as pa

from ..downstream.changes import ChangeBatch, ChangePosition, read_changes
from ..downstream.tables import TableLike, captured_table
from ..errors import ConfigurationError

#: Metadata key prefix of the recorded change-feed positions (one key per table consumed).
POSITION_KEY = "dagster_mysql_cdc/changes"


def position_key(qualified_name: str) -> str:
    """The metadata key of the position in the feed of ``server.db.table``."""
    return f"{POSITION_KEY}/{qualified_name}"


def _value(v: Any) -> Any:
    return getattr(v, "value", v)


def recorded_metadata(instance: dg.DagsterInstance, asset_key: dg.AssetKey) -> dict[str, Any]:
    """The metadata of ``asset_key``'s latest materialization, values unwrapped (``{}``: none)."""
    entry = instance.get_latest_materialization_event(asset_key)
    mat = entry.asset_materialization if entry is not None else None
    if mat is None:
        return {}
    return {k: _value(v) for k, v in (mat.metadata or {}).items()}


class IncrementalChanges:
    """The changes an incremental asset processes in this run (see :func:`incremental_changes`).

    Attributes:
        batch: the :class:`..downstream.changes.ChangeBatch` read.
        previous: the metadata of the asset's last recorded materialization (values unwrapped),
            e.g. the version of its own output it wrote then.
    """

    def __init__(self, batch: ChangeBatch, previous: dict[str, Any]):
        self.batch = batch
        self.previous = previous

    @property
    def rebuild(self) -> str | None:
        """Why the asset must recompute from the current state (``None``: apply :attr:`events`)."""
        return self.batch.rebuild

    @property
    def events(self) -> pa.Table | None:
        """The change events (``None`` when :attr:`rebuild`); see :class:`..downstream.changes.ChangeBatch`."""
        return self.batch.events

    @property
    def more(self) -> bool:
        """Changes were left for the next run (the row or commit budget)."""
        return self.batch.more

    def read_current(self, **kwargs: Any) -> pa.Table:
        """The table's current state (:func:`..downstream.current.read_current`'s arguments and layout) and
        the position that matches it (recorded by :attr:`metadata`)."""
        return self.batch.read_current(**kwargs)

    @property
    def metadata(self) -> dict[str, Any]:
        """Materialization metadata recording the position reached (merge it into the asset's
        ``MaterializeResult(metadata=...)``).

        Raises:
            ConfigurationError: a rebuild was due and :meth:`read_current` was not called.
        """
        b = self.batch
        if b.rebuild and not b.rebuilt:
            raise ConfigurationError(
                f"the change feed of {b.table} says rebuild ({b.rebuild}): compute from "
                "read_current() (which moves the position), then record this metadata"
            )
        return {
            position_key(b.table.qualified_name): dg.MetadataValue.json(json_position(b.end)),
            f"{POSITION_KEY}/{b.table.qualified_name}/events": dg.MetadataValue.int(
                0 if b.events is None else b.events.num_rows
            ),
            f"{POSITION_KEY}/{b.table.qualified_name}/rebuilt": dg.MetadataValue.bool(bool(b.rebuild)),
        }


def json_position(p: ChangePosition) -> dict[str, Any]:
    import json

    return json.loads(p.to_json())


def incremental_changes(
    context: Any,
    table: TableLike,
    lake: Any,
    *,
    asset_key: dg.AssetKey | None = None,
    server: str | None = None,
    max_rows: int | None = None,
    max_commits: int | None = None,
    format: str = "envelope",
) -> IncrementalChanges:
    """The change events of ``table`` that the asset has not processed yet.

    Args:
        context: the asset's execution context (its instance holds the recorded position).
        table: the captured table (``"db.table"``, tuple or asset key).
        lake: the ``CdcLakeResource`` (or a lake URI / ``StorageSettings``).
        asset_key: the asset recording the position (default: ``context.asset_key``; pass it in a
            multi-asset).
        max_rows / max_commits / format: see :func:`..downstream.changes.read_changes`.

    Returns:
        an :class:`IncrementalChanges`; return its :attr:`~IncrementalChanges.metadata` in the
        asset's ``MaterializeResult``.

    Raises:
        UnknownTableError / ConfigurationError: as :func:`..downstream.changes.read_changes`.
    """
    key = asset_key or context.asset_key
    previous = recorded_metadata(context.instance, key)
    ref = captured_table(table, lake, server)
    raw = previous.get(position_key(ref.qualified_name))
    since = ChangePosition.from_json(raw) if raw is not None else None
    batch = read_changes(
        ref, ref.storage, since=since, max_rows=max_rows, max_commits=max_commits, format=format
    )
    log = getattr(context, "log", None)
    if log is not None:
        if batch.rebuild:
            log.info(f"{ref.name}: rebuild from the current state ({batch.rebuild})")
        else:
            log.info(
                f"{ref.name}: {batch.events.num_rows if batch.events is not None else 0} change(s) of "
                f"{len(batch.commits)} commit(s) after {since}"
            )
    return IncrementalChanges(batch, previous)
