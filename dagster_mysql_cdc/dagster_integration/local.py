"""Drive the binlog sensor in-process (demo, tests, notebooks) without a Dagster daemon.

:func:`run_sensor_ticks` evaluates the sensor, executes each run it requests with ``materialize``
on the same instance (with the request's tags and asset selection, exactly what the daemon would
launch), and repeats until the sensor reports it is caught up. A tick that requests a standby
run (the sensor's way of being caught up under a daemon: a run that waits for the next change,
see :func:`.sensor.build_mysql_cdc_sensor`) counts as caught up here: its run is not executed (it
would block this process for ``stream_follow_seconds``) and the cursor keeps what the tick
committed but not the standby run, so the next call plans from the committed offset.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import dagster as dg

from .cursor import StreamCursor
from .protocol import STANDBY_TAG


@dataclass
class TickLog:
    """What happened while driving the sensor."""

    ticks: int = 0
    runs: list[dg.ExecuteInProcessResult] = field(default_factory=list)
    skip_reasons: list[str] = field(default_factory=list)
    cursor: str | None = None


def run_sensor_ticks(
    sensor: dg.SensorDefinition,
    assets_def: dg.AssetsDefinition,
    resources: Mapping[str, Any],
    instance: dg.DagsterInstance,
    *,
    cursor: str | None = None,
    max_ticks: int = 50,
    until_caught_up: bool = True,
    raise_on_error: bool = True,
    run_log_level: str = "DEBUG",
    max_backoff_wait_seconds: float = 60.0,
) -> TickLog:
    """Evaluate ``sensor`` repeatedly, running what it requests, until it is caught up.

    Args:
        run_log_level: level of the runs' console logger (Dagster's ``loggers.console.config.log_level``;
            ``"DEBUG"`` prints every event, as ``dagster job execute`` does). The instance keeps
            every event whatever the level.
        max_backoff_wait_seconds: a tick that finds a failed window waiting for its retry (the
            sensor's backoff, ``retry_at`` in the cursor) is followed by a wait until then, at
            most this long (the daemon would tick meanwhile and do nothing).

    Returns:
        the ticks' log; ``log.cursor`` is the final cursor.
    """
    out = TickLog(cursor=cursor)
    for _ in range(max_ticks):
        with dg.build_sensor_context(instance=instance, cursor=out.cursor, resources=resources) as ctx:
            result = sensor.evaluate_tick(ctx)
        out.ticks += 1
        reqs = result.run_requests or []
        if reqs and all((r.tags or {}).get(STANDBY_TAG) == "true" for r in reqs):
            # what the tick committed stays; the standby run it would wait for is not in flight
            if result.cursor is not None:
                out.cursor = replace(StreamCursor.parse(result.cursor), inflight=None).to_json()
            committed = json.loads(out.cursor or "{}").get("committed") or {}
            out.skip_reasons.append(
                f"caught up at {committed.get('file')}:{committed.get('pos')} (standby run not started)"
            )
            for event in getattr(result, "asset_events", None) or []:
                instance.report_runless_asset_event(event)
            if until_caught_up:
                break
            continue
        for event in getattr(result, "asset_events", None) or []:  # runless events (heartbeat)
            instance.report_runless_asset_event(event)
        out.cursor = result.cursor if result.cursor is not None else out.cursor
        if result.skip_message:
            out.skip_reasons.append(result.skip_message)
        for req in result.run_requests or []:
            selection: dg.AssetSelection
            if req.asset_check_keys is None:  # as the daemon: every check of the selected assets
                selection = dg.AssetSelection.assets(*(req.asset_selection or []))
            else:
                selection = dg.AssetSelection.assets(*(req.asset_selection or [])).without_checks()
                if req.asset_check_keys:
                    selection = selection | dg.AssetSelection.checks(*req.asset_check_keys)
            res = dg.materialize(
                [assets_def],
                resources=dict(resources),
                instance=instance,
                selection=selection,
                tags=dict(req.tags),
                raise_on_error=raise_on_error,
                run_config={"loggers": {"console": {"config": {"log_level": run_log_level}}}},
            )
            out.runs.append(res)
        if until_caught_up and not result.run_requests and "caught up at" in (result.skip_message or ""):
            break
        if (
            not result.run_requests
        ):  # a failed window waiting for its retry (backoff): wait as the daemon would
            retry_at = json.loads(out.cursor or "{}").get("retry_at")
            if retry_at is not None:
                time.sleep(min(max(0.0, retry_at - time.time()), max_backoff_wait_seconds))
    return out
