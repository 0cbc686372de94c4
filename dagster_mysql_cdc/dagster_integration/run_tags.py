"""What a run reads of the sensor ↔ run protocol (:mod:`.protocol`): its run tags, decoded.

The binlog sensor requests a stream run with its window (:data:`.protocol.WINDOW_START_TAG`,
:data:`.protocol.WINDOW_END_TAG`), the stopped tables, the incremental snapshot state and the
server identity in the run's tags; a run decodes them here, and a bad tag is a
``ConfigurationError`` naming it. A run without a window (a snapshot, a checks-only run) takes the
position the ``binlog`` asset last reported instead (:func:`last_committed`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import dagster as dg

from ..engine.incremental import IncrementalState
from ..errors import ConfigurationError
from ..events import BinlogPosition
from ..source.failover import ServerIdentity
from .liveness import add_run_tags
from .protocol import (
    CAUGHT_UP_TAG,
    COMPACT_TAG,
    EPOCH_TAG,
    IDENTITY_TAG,
    INCREMENTAL_TAG,
    MODE_TAG,
    PROGRESS_TAG,
    STOPPED_TAG,
    WINDOW_END_TAG,
    WINDOW_START_TAG,
    binlog_asset_key,
    position_from_metadata,
    position_from_tag,
)


def window_tags(tags: Any) -> tuple[BinlogPosition, BinlogPosition]:
    """``(start, end)`` of the binlog window a stream run's tags name.

    Raises:
        ConfigurationError: the tags do not name a valid window.
    """
    try:
        start = position_from_tag(tags, WINDOW_START_TAG)
        end = position_from_tag(tags, WINDOW_END_TAG)
    except (KeyError, ValueError) as e:
        raise ConfigurationError(
            f"Streaming run without a valid binlog window in its tags ({e}); stream runs are "
            "requested by the binlog sensor (build_mysql_cdc_sensor)."
        ) from None
    return start, end


def window_start_tag(tags: Any) -> BinlogPosition | None:
    """The start of the run's binlog window (stream runs), else ``None`` (also when the tag is
    not a position)."""
    if tags.get(MODE_TAG) != "stream" or not tags.get(WINDOW_START_TAG):
        return None
    try:
        return position_from_tag(tags, WINDOW_START_TAG)
    except (ValueError, KeyError, TypeError):
        return None


def stopped_tag(tags: Any) -> dict[str, dict]:
    """The stopped tables a stream run's tags carry (:data:`STOPPED_TAG`; ``{}``: none).

    Raises:
        ConfigurationError: the tag is not valid.
    """
    raw = tags.get(STOPPED_TAG)
    if not raw:
        return {}
    try:
        out = json.loads(raw)
        for v in out.values():
            BinlogPosition.from_dict(v["since"])
        return out
    except (ValueError, KeyError, TypeError, AttributeError) as e:
        raise ConfigurationError(f"Run tag {STOPPED_TAG} is not valid ({e}): {raw[:200]!r}") from None


def compact_tag(tags: Any) -> list[tuple[str, str]]:
    """The ``(database, table)`` s whose stale ``state`` a stream run compacts after its window
    (:data:`COMPACT_TAG`; ``[]``: none).

    Raises:
        ConfigurationError: the tag is not valid.
    """
    raw = tags.get(COMPACT_TAG)
    if not raw:
        return []
    try:
        names = json.loads(raw)
        out = []
        for n in names:
            db, table = str(n).split(".", 1)
            out.append((db, table))
        return out
    except (ValueError, TypeError) as e:
        raise ConfigurationError(f"Run tag {COMPACT_TAG} is not valid ({e}): {raw[:200]!r}") from None


def incremental_tag(tags: Any) -> IncrementalState | None:
    """The incremental snapshot state a stream run's tags carry (``None``: none).

    Raises:
        ConfigurationError: the tag is not a valid state.
    """
    try:
        return (
            IncrementalState.from_dict(json.loads(tags[INCREMENTAL_TAG]))
            if tags.get(INCREMENTAL_TAG)
            else None
        )
    except (ValueError, KeyError, TypeError) as e:
        raise ConfigurationError(
            f"Run tag {INCREMENTAL_TAG} is not a valid incremental snapshot state ({e})"
        ) from None


def identity_tag(tags: Any) -> ServerIdentity | None:
    """The server a stream run's window positions belong to (:data:`IDENTITY_TAG`; ``None``: the
    sensor recorded none).

    Raises:
        ConfigurationError: the tag is not a server identity.
    """
    raw = tags.get(IDENTITY_TAG)
    if not raw:
        return None
    try:
        return ServerIdentity.from_dict(json.loads(raw))
    except ValueError as e:
        raise ConfigurationError(f"Run tag {IDENTITY_TAG} is not a server identity ({e})") from None


def record_caught_up(context: dg.AssetExecutionContext, names: list[str]) -> None:
    """Set the run's :data:`.protocol.CAUGHT_UP_TAG` to ``names`` (``db.table``: the stopped
    tables it caught up at its start).

    Raises:
        whatever the Dagster instance's run storage raises (the run then fails before reading on).
    """
    add_run_tags(context.instance, context.run.run_id, {CAUGHT_UP_TAG: json.dumps(sorted(names))})


def caught_up_tag(tags: Any) -> list[str]:
    """The stopped tables a run caught up at its start (:data:`.protocol.CAUGHT_UP_TAG`, set by
    :func:`record_caught_up`; ``[]``: none, or not readable: only ``status`` reads it)."""
    try:
        return [str(n) for n in json.loads(tags.get(CAUGHT_UP_TAG) or "[]")]
    except (ValueError, TypeError):
        return []


def record_progress(context: dg.AssetExecutionContext, progress: Any) -> None:
    """Set the run's :data:`.protocol.PROGRESS_TAG` to ``progress``
    (:class:`~..engine.stream_run.RunProgress`): the sensor reads it if the run dies.

    Raises:
        whatever the Dagster instance's run storage raises (the run then fails before reading on).
    """
    value = json.dumps(progress.to_dict(), separators=(",", ":"), sort_keys=True)
    add_run_tags(context.instance, context.run.run_id, {PROGRESS_TAG: value})


@dataclass(frozen=True)
class ReportedProgress:
    """A run's :data:`.protocol.PROGRESS_TAG`, decoded (see :class:`~..engine.stream_run.RunProgress`)."""

    reached: BinlogPosition
    windows: int
    stopped: dict[str, dict]
    next_start: BinlogPosition | None = None
    next_end: BinlogPosition | None = None
    #: row changes written so far (``None``: a tag written before the field existed)
    rows: int | None = None
    #: the incremental snapshot state at ``reached`` (``None``: none running, or a tag written
    #: before following runs read chunks, when a following run never had one)
    incremental: dict | None = None


def progress_tag(tags: Any) -> ReportedProgress | None:
    """The progress a stream run recorded in its tags (``None``: none, or not readable: the run
    then counts as having committed nothing)."""
    raw = tags.get(PROGRESS_TAG)
    if not raw:
        return None
    try:
        d = json.loads(raw)
        nxt = d.get("next")
        stopped = d.get("stopped") or {}
        for v in stopped.values():
            BinlogPosition.from_dict(v["since"])
        return ReportedProgress(
            reached=BinlogPosition.from_dict(d["reached"]),
            windows=int(d.get("windows", 0)),
            stopped=stopped,
            next_start=BinlogPosition.from_dict(nxt["start"]) if nxt else None,
            next_end=BinlogPosition.from_dict(nxt["end"]) if nxt else None,
            rows=int(d["rows"]) if d.get("rows") is not None else None,
            incremental=_incremental_of(d.get("incremental")),
        )
    except (ValueError, KeyError, TypeError, AttributeError):
        return None


def _incremental_of(value: Any) -> dict | None:
    """A progress tag's incremental snapshot state, checked to decode
    (:meth:`~..engine.incremental.IncrementalState.from_dict`).

    Raises:
        ValueError: it does not decode (the whole tag then counts as unreadable).
    """
    if value is None:
        return None
    try:
        IncrementalState.from_dict(value)
    except (KeyError, TypeError, AttributeError) as e:
        raise ValueError(f"incremental state in the progress tag does not decode: {e}") from None
    return dict(value)


def snapshot_epoch(context: dg.AssetExecutionContext) -> int:
    """Offset epoch of a snapshot run's position: the run's :data:`EPOCH_TAG` (a re-snapshot the
    sensor started in a new epoch), else the epoch of the last committed position (a UI
    materialization on the server the capture follows; 0 when it cannot be read), else 0.

    Raises:
        ConfigurationError: the tag is not an integer.
    """
    tag = context.run.tags.get(EPOCH_TAG)
    if tag:
        try:
            return int(tag)
        except ValueError:
            raise ConfigurationError(f"Run tag {EPOCH_TAG} is not an integer: {tag!r}") from None
    from .run_report import optional

    last = optional(lambda: last_committed(context), "the last committed position")
    return last.epoch if last is not None else 0


def last_committed(context: dg.AssetExecutionContext) -> BinlogPosition | None:
    """The newest position the binlog asset reported (window end or snapshot), ``None`` when the
    run's assets have no binlog asset or it never materialized."""
    binlog_key = binlog_asset_key(context.assets_def.specs)
    if binlog_key is None:
        return None
    ev = context.instance.get_latest_materialization_event(binlog_key)
    if ev is None or ev.asset_materialization is None:
        return None
    return position_from_metadata(ev.asset_materialization.metadata, "window_end", "snapshot")
