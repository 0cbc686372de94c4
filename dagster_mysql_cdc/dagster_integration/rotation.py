"""Rotating verification: every captured table compared with the source, a bounded slice at a time.

A divergence the binlog does not carry (a write with ``SET SESSION sql_log_bin=0``, a restored
backup, a bug) is invisible to the window checks (they compare the keys a window changed). The
verification sensor (:func:`build_verification_sensor`, on by default in the component) finds it
without an operator: each tick compares one primary-key range (a *slice*) of one table, lake
against source, going round the captured tables, and so verifies every row of every table in
turn:

1. ``C``: the committed position (the binlog asset's latest materialization), read first; then
   the lake's live rows of the slice (:func:`..sink.read.read_current`: the state with the tail
   applied, by ``deltalake``/Arrow, no Spark: the same with Spark Connect and classic Spark);
2. the source's next at most ``rows`` rows after the slice's start key (``ORDER BY`` the primary
   key, stopping after ``seconds``), in a consistent-snapshot transaction at ``P ≥ C``; the keys
   the binlog changed in ``[C, P)`` are left out on both sides (:func:`.check_source.touched_keys`, as
   the full checks do), so rows changed while the capture streams never differ;
3. rows compared as the full checks compare them (Debezium-converted values, in the lake's types);
   lake rows between the slice's first and last key count too when the key is integer (a row
   deleted behind the binlog's back is found);
4. a differing slice is compared again on the next tick (the same key range, a new ``C`` and
   ``P``): only a confirmed difference queues the existing targeted re-read of the differing keys'
   ranges (:func:`..engine.gaps.queue_checksum_repair`: an ``execute-snapshot`` signal, carried out
   by the binlog sensor's next window run). Once the capture has passed the signal and no repair of
   the table is pending, the range is compared a third time: equal is *repaired*; a difference
   that survives :data:`MAX_REPAIR_ATTEMPTS` repairs is reported (WARNING) and left to the operator.

The progress (table, next key, when each table was last fully verified, suspects and repairs) is
the sensor's cursor (:class:`RotationState`); each tick reports an ``AssetObservation`` of the
table it compared (``verification_last_full_pass``, ``verification_progress_pct``) and
``python -m dagster_mysql_cdc status`` prints one line of it (:func:`status_line`).

Cost (docs/operations.md, "Rotating verification"): per tick, on the source, a probe for the
slice's last key (``LIMIT 1 OFFSET rows-1`` on the primary key) and one indexed range read of
``rows`` rows; on the Dagster side the state files whose key statistics overlap the slice (integer
keys; the whole state otherwise), the tail, and the slice's rows decoded and compared.
"""

from __future__ import annotations

import datetime as _dt
import json
import logging
import time
from collections.abc import Callable, Collection, Sequence
from dataclasses import asdict, dataclass, field
from decimal import Decimal
from typing import Any

import dagster as dg

from ..events import BinlogPosition
from ..sink.storage import StorageSettings
from ..source.connection import connect, current_position, read_server_info
from ..source.schema import TableSchema
from .range_comparison import RangeComparison, RangeResult

log = logging.getLogger(__name__)

#: Replica id offset of the rotation's binlog reads (ranges +3, checks +7, window verification +11,
#: the sensor's look-ahead +13, segment readers +101..+116).
ROTATION_SERVER_ID_OFFSET = 17
#: A range still differing after this many repairs is reported and no longer repaired.
MAX_REPAIR_ATTEMPTS = 3
#: Repairs and findings kept in the cursor (the newest).
_KEEP_EVENTS = 20


@dataclass(frozen=True)
class RotationOptions:
    """Bounds of one verification slice.

    Attributes:
        rows: source rows compared per slice (one indexed range read); ``0`` turns the rotation off.
        seconds: a slice stops reading the source after this many seconds (its range ends at the
            last row read), so a slow source is read for a bounded time per tick.
        max_binlog_scan_bytes: a slice is skipped while the lake is more than this many binlog
            bytes behind (the keys changed since the committed position are read from the binlog).
    """

    rows: int = 50_000
    seconds: float = 10.0
    max_binlog_scan_bytes: int = 64 * 1024 * 1024


# -- key values in the cursor (JSON) ------------------------------------------------------------
def _encode(v: Any) -> Any:
    """A source key value as JSON (datetimes, dates, decimals and bytes tagged)."""
    if isinstance(v, _dt.datetime):
        return {"dt": v.isoformat()}
    if isinstance(v, _dt.date):
        return {"d": v.isoformat()}
    if isinstance(v, _dt.timedelta):
        return {"td": v.total_seconds()}
    if isinstance(v, Decimal):
        return {"dec": str(v)}
    if isinstance(v, (bytes, bytearray)):
        return {"hex": bytes(v).hex()}
    return v


def _decode(v: Any) -> Any:
    """The value :func:`_encode` encoded."""
    if isinstance(v, dict):
        if "dt" in v:
            return _dt.datetime.fromisoformat(v["dt"])
        if "d" in v:
            return _dt.date.fromisoformat(v["d"])
        if "td" in v:
            return _dt.timedelta(seconds=v["td"])
        if "dec" in v:
            return Decimal(v["dec"])
        if "hex" in v:
            return bytes.fromhex(v["hex"])
    return v


def _encode_key(k: Sequence[Any] | None) -> list | None:
    return None if k is None else [_encode(v) for v in k]


def _decode_key(k: Sequence[Any] | None) -> tuple | None:
    return None if k is None else tuple(_decode(v) for v in k)


# -- state --------------------------------------------------------------------------------------
@dataclass
class TableRotation:
    """One table's verification progress.

    Attributes:
        after: the source key the next slice starts after (``None``: the table's start).
        after_converted: the same key as the lake holds it (Debezium-converted; JSON).
        rows_done: rows compared in the current pass; ``rows_total``: in the last full pass.
        pass_started: when the current pass began (epoch seconds).
        last_full_pass: when the last full pass ended (epoch seconds; ``None``: never).
        last_full_pass_started: when that pass began (every row was verified at or after it).
        skipped: why the table is not verified (no primary key, not captured yet ...).
    """

    after: list | None = None
    after_converted: list | None = None
    rows_done: int = 0
    rows_total: int | None = None
    pass_started: float | None = None
    last_full_pass: float | None = None
    last_full_pass_started: float | None = None
    passes: int = 0
    skipped: str | None = None

    def progress_pct(self) -> float | None:
        """Share of the table verified in the current pass (from the last pass's row count)."""
        if not self.rows_total:
            return None
        return min(100.0, 100.0 * self.rows_done / self.rows_total)


@dataclass
class RotationState:
    """The verification sensor's cursor (JSON).

    Attributes:
        tables: ``db.table`` -> :class:`TableRotation`.
        current: the table the next slice compares.
        suspect: a differing range waiting for its confirmation or repair: ``table``, ``lo``/``hi``
            (source keys, ``None``: open), ``lo_c``/``hi_c`` (converted), ``found_at``,
            ``attempts`` (repairs queued), ``queued_at`` (server position after the last repair's
            signal), ``keys`` (a sample).
        events: the newest findings and repairs (``at``, ``table``, ``what``).
        last_slice: what the last tick did (``at``, ``table``, ``rows``, ``seconds``, ``outcome``).
    """

    tables: dict[str, TableRotation] = field(default_factory=dict)
    current: str | None = None
    suspect: dict | None = None
    events: list[dict] = field(default_factory=list)
    last_slice: dict | None = None

    @classmethod
    def parse(cls, text: str | None) -> RotationState:
        """The state in a cursor (``None``/empty: a new one)."""
        if not text:
            return cls()
        d = json.loads(text)
        return cls(
            tables={k: TableRotation(**v) for k, v in (d.get("tables") or {}).items()},
            current=d.get("current"),
            suspect=d.get("suspect"),
            events=list(d.get("events") or []),
            last_slice=d.get("last_slice"),
        )

    def to_json(self) -> str:
        return json.dumps(
            {
                "tables": {k: asdict(v) for k, v in self.tables.items()},
                "current": self.current,
                "suspect": self.suspect,
                "events": self.events[-_KEEP_EVENTS:],
                "last_slice": self.last_slice,
            },
            default=str,
        )

    def note(self, table: str, what: str, now: float) -> None:
        """Add a finding or repair of ``table`` to ``events`` (the newest :data:`_KEEP_EVENTS` kept)."""
        self.events = [*self.events, {"at": now, "table": table, "what": what}][-_KEEP_EVENTS:]

    def track(self, tables: Collection[str]) -> list[str]:
        """The captured ``tables``, sorted (the round's order), with the progress of the tables no
        longer captured dropped and a new one started for the tables not seen yet."""
        names = sorted(tables)
        for gone in set(self.tables) - set(names):
            del self.tables[gone]
        for t in names:
            self.tables.setdefault(t, TableRotation())
        return names

    def record_slice(self, table: str, outcome: str, now: float, rows: int = 0, seconds: float = 0.0) -> str:
        """Record what this tick did (``last_slice``: when, which table, the source rows read,
        the seconds it took, the outcome line); returns ``outcome``."""
        self.last_slice = {
            "at": now,
            "table": table,
            "rows": rows,
            "seconds": round(seconds, 3),
            "outcome": outcome,
        }
        return outcome


# -- one tick ------------------------------------------------------------------------------------
@dataclass
class CaptureTables:
    """What a tick needs of the capture: its tables (``db.table`` -> ``(asset key, state URI)``),
    the committed position, the incremental snapshot state (repairs) and the stopped tables the
    binlog asset reported."""

    tables: dict[str, tuple[dg.AssetKey, str]]
    committed: BinlogPosition | None
    incremental_state: dict | None
    #: tables whose capture is stopped (the lake holds them as of their stop: not compared)
    stopped: set[str] = field(default_factory=set)


def _pending(incremental_state: dict | None, table: str) -> bool:
    from ..engine.gaps import queued_repairs

    return table in queued_repairs(incremental_state)


#: What a tick returns: the new state, ``[(asset key, observation metadata)]``, its outcome line.
TickReport = tuple[RotationState, list[tuple[dg.AssetKey, dict[str, Any]]], str]


def verify_tick(
    state: RotationState,
    capture: CaptureTables,
    *,
    compare: Callable[..., RangeResult],
    queue_repair: Callable[[TableSchema, list[tuple], list[tuple], BinlogPosition], str],
    server_position: Callable[[], BinlogPosition],
    options: RotationOptions,
    now: float | None = None,
) -> TickReport:
    """One tick of the rotation: confirm (or repair, or re-check) the suspect range when there is
    one, else compare the current table's next slice.

    Args:
        compare: :meth:`.range_comparison.RangeComparison.compare` with the connection, lake and
            key options bound (called with ``database``, ``table``, ``state_uri``, ``committed``,
            ``lo``, ``lo_converted``, ``hi``, ``hi_converted``, ``rows``, ``seconds``).
        queue_repair: queues the targeted re-read of ``(schema, differing, lake_only, committed)``
            and returns the outcome text (:func:`..engine.gaps.queue_checksum_repair`).
        server_position: the server's current binlog position (after a repair's signal).

    Returns:
        ``(new state, [(asset key, observation metadata)], one line saying what the tick did)``.
    """
    now = time.time() if now is None else now
    if options.rows <= 0:
        return state, [], "rotating verification is off (verification_rows=0)"
    if capture.committed is None:
        return state, [], "nothing committed yet: the verification starts after the snapshot"
    names = state.track(capture.tables)
    if not names:
        return state, [], "no table captured"
    tick = _RotationTick(state, capture, compare, queue_repair, server_position, options, now)
    if state.suspect is not None and state.suspect.get("table") in capture.tables:
        return tick.recheck_suspect()
    state.suspect = None
    return tick.next_slice(names)


@dataclass
class _RotationTick:
    """One tick of :func:`verify_tick` (its arguments): the state it updates, the capture it
    verifies, how it compares a range, queues a repair and reads the server's position."""

    state: RotationState
    capture: CaptureTables
    compare: Callable[..., RangeResult]
    queue_repair: Callable[[TableSchema, list[tuple], list[tuple], BinlogPosition], str]
    server_position: Callable[[], BinlogPosition]
    options: RotationOptions
    now: float
    t0: float = field(default_factory=time.monotonic)

    def compared(
        self, table: str, lo: list | None, lo_c: list | None, hi: list | None, hi_c: list | None
    ) -> RangeResult:
        """The comparison of ``table``'s range ``(lo, hi]`` (cursor-encoded keys; ``hi=None``:
        the next slice of at most ``options.rows`` rows)."""
        db, _, tname = table.partition(".")
        return self.compare(
            database=db,
            table=tname,
            state_uri=self.capture.tables[table][1],
            committed=self.capture.committed,
            lo=_decode_key(lo),
            lo_converted=_decode_key(lo_c),
            hi=_decode_key(hi),
            hi_converted=_decode_key(hi_c),
            rows=self.options.rows,
            seconds=self.options.seconds,
        )

    def report(self, table: str, outcome: str, rows: int = 0, timed: bool = True) -> TickReport:
        """The tick's report on ``table``: its slice recorded, its observation."""
        seconds = time.monotonic() - self.t0 if timed else 0.0
        self.state.record_slice(table, outcome, self.now, rows=rows, seconds=seconds)
        metadata = observation_metadata(table, self.state.tables[table], self.state, self.now)
        return self.state, [(self.capture.tables[table][0], metadata)], outcome

    def next_slice(self, names: list[str]) -> TickReport:
        """Compare the current table's next slice (a table whose lake lags the source on
        purpose, stopped or being repaired, is passed over)."""
        state, capture, now = self.state, self.capture, self.now
        table = state.current if state.current in capture.tables else names[0]
        tr = state.tables[table]
        busy = (
            "its capture is stopped"
            if table in capture.stopped
            else "a repair or incremental snapshot of it is in progress"
            if _pending(capture.incremental_state, table)
            else None
        )
        if busy is not None:  # the lake lags the source there on purpose: compared on a later round
            tr.skipped = busy
            state.current = _next_table(names, table)
            return self.report(table, f"{table}: not compared now: {busy}", timed=False)
        if tr.pass_started is None:
            tr.pass_started, tr.rows_done = now, 0
        res = self.compared(table, tr.after, tr.after_converted, None, None)
        if res.not_compared is not None:
            tr.skipped = res.not_compared
            outcome = f"{table}: not compared: {res.not_compared}"
            # a table that cannot be compared is passed over (the next tick tries the next table)
            state.current = _next_table(names, table)
        else:
            outcome = _slice_compared(state, table, res, names, now)
        return self.report(table, outcome, rows=res.rows)

    def recheck_suspect(self) -> TickReport:
        """Compare the suspect range again, once no repair of its table is pending: equal is
        resolved (repaired), a confirmed difference queues a repair, one that survives
        :data:`MAX_REPAIR_ATTEMPTS` repairs is reported and left to the operator."""
        state, capture, now = self.state, self.capture, self.now
        s = state.suspect
        assert s is not None and capture.committed is not None
        table = s["table"]
        queued = s.get("queued_at")
        if queued is not None:
            signal = BinlogPosition.from_dict(queued)
            if capture.committed.sort_key() < signal.sort_key() or _pending(capture.incremental_state, table):
                outcome = f"{table}: waiting for the repair queued at {signal} to complete"
                return state, [], state.record_slice(table, outcome, now)
        elif _pending(capture.incremental_state, table):
            outcome = (
                f"{table}: waiting for the repair in progress before comparing the differing range again"
            )
            return state, [], state.record_slice(table, outcome, now)
        res = self.compared(table, s.get("lo"), s.get("lo_c"), s.get("hi"), s.get("hi_c"))
        if res.not_compared is not None:
            outcome = f"{table}: the differing range could not be compared again: {res.not_compared}"
        elif not res.differing:
            what = "repaired" if queued is not None else "equal again (it had been changed meanwhile)"
            state.note(table, f"the differing range is {what}", now)
            outcome = f"{table}: the differing range is {what} ({res.compared} key(s) compared)"
            state.suspect = None
        elif s.get("attempts", 0) >= MAX_REPAIR_ATTEMPTS:
            outcome = (
                f"{table}: {len(res.differing)} key(s) still differ after {s['attempts']} repairs "
                f"(e.g. {res.differing[:3]}): run Execute checks and re-snapshot the table"
            )
            log.warning(outcome)
            state.note(table, outcome, now)
            state.suspect = None
        else:
            outcome = self._repair(s, table, res)
        return self.report(table, outcome, rows=res.rows)

    def _repair(self, s: dict, table: str, res: RangeResult) -> str:
        """Queue the repair of the confirmed difference ``res`` of suspect range ``s``; returns
        the outcome (a difference that cannot be repaired here is reported, the rotation goes on)."""
        assert res.schema is not None and self.capture.committed is not None
        repair = self.queue_repair(res.schema, res.differing, res.lake_only, self.capture.committed)
        s["attempts"] = int(s.get("attempts", 0)) + 1
        s["keys"] = [str(k) for k in res.differing[:10]]
        s["differing"] = len(res.differing)
        s["repair"] = repair[:500]
        if repair.startswith("Repair queued"):
            s["queued_at"] = self.server_position().to_dict()
        else:
            self.state.suspect = None  # not repairable here: reported, the rotation goes on
        self.state.note(table, f"{len(res.differing)} key(s) confirmed differing: {repair[:300]}", self.now)
        return f"{table}: {len(res.differing)} key(s) confirmed differing: {repair[:300]}"


def _next_table(names: list[str], table: str) -> str:
    """The table after ``table`` in the round of ``names`` (sorted)."""
    return names[(names.index(table) + 1) % len(names)]


def _slice_compared(state: RotationState, table: str, res: RangeResult, names: list[str], now: float) -> str:
    """``state`` after a slice of ``table`` was compared (``res``): a difference becomes the
    suspect range (compared again next tick), the pass moves on past the slice (or ends at the
    table's end, and the round goes to the next table). Returns the tick's outcome."""
    tr = state.tables[table]
    tr.skipped = None
    lo, lo_c = tr.after, tr.after_converted
    tr.rows_done += res.rows
    if res.differing:
        state.suspect = {
            "table": table,
            "lo": lo,
            "lo_c": lo_c,
            "hi": None if res.end else _encode_key(res.hi),
            "hi_c": None if res.end else _encode_key(res.hi_converted),
            "found_at": now,
            "attempts": 0,
            "queued_at": None,
            "keys": [str(k) for k in res.differing[:10]],
            "differing": len(res.differing),
        }
        state.note(table, f"{len(res.differing)} key(s) differ (to be confirmed)", now)
        outcome = f"{table}: {len(res.differing)} key(s) differ from the source; compared again next tick"
    else:
        outcome = f"{table}: {res.compared} key(s) equal ({res.touched} changed since the committed position)"
    if not res.end:
        tr.after, tr.after_converted = _encode_key(res.hi), _encode_key(res.hi_converted)
        state.current = table
        return outcome
    tr.after = tr.after_converted = None
    tr.rows_total = tr.rows_done
    tr.last_full_pass, tr.last_full_pass_started = now, tr.pass_started
    tr.pass_started = None
    tr.passes += 1
    state.current = _next_table(names, table)
    return outcome + "; full pass done"


def observation_metadata(table: str, tr: TableRotation, state: RotationState, now: float) -> dict[str, Any]:
    """The metadata of a table's verification observation (shown on the asset in the UI)."""
    md: dict[str, Any] = {
        "verification_progress_pct": dg.MetadataValue.float(round(tr.progress_pct() or 0.0, 1)),
        "verification_rows_done": tr.rows_done,
        "verification_passes": tr.passes,
    }
    if tr.last_full_pass is not None:
        md["verification_last_full_pass"] = dg.MetadataValue.timestamp(tr.last_full_pass)
        md["verification_age_seconds"] = dg.MetadataValue.float(round(now - tr.last_full_pass, 1))
    if tr.skipped:
        md["verification_skipped"] = tr.skipped
    if state.suspect is not None and state.suspect.get("table") == table:
        md["verification_suspect"] = dg.MetadataValue.json(state.suspect)
    if state.last_slice is not None:
        md["verification_last_slice"] = dg.MetadataValue.text(str(state.last_slice.get("outcome", ""))[:1000])
    return md


def status_line(cursor_text: str | None, now: float | None = None) -> str:
    """One line for ``status``: per table the time since its last full pass (or the progress of
    its first), the suspect range, the last slice."""
    now = time.time() if now is None else now
    try:
        state = RotationState.parse(cursor_text)
    except (ValueError, TypeError) as e:
        return f"verification: cursor unreadable ({e})"
    if not state.tables:
        return "verification: not started"
    parts = []
    for t, tr in sorted(state.tables.items()):
        if tr.skipped:
            parts.append(f"{t} skipped ({tr.skipped[:60]})")
        elif tr.last_full_pass is None:
            parts.append(f"{t} first pass {tr.rows_done} rows")
        else:
            pct = tr.progress_pct()
            parts.append(
                f"{t} verified {_ago(now - tr.last_full_pass)} ago"
                + (f", {pct:.0f} % of next pass" if pct is not None and tr.pass_started is not None else "")
            )
    line = "verification: " + "; ".join(parts[:8]) + (f"; +{len(parts) - 8} more" if len(parts) > 8 else "")
    if state.suspect is not None:
        line += f" | differing: {state.suspect['table']} {state.suspect.get('differing')} key(s)"
    return line


def _ago(s: float) -> str:
    if s < 120:
        return f"{s:.0f} s"
    if s < 7200:
        return f"{s / 60:.0f} min"
    return f"{s / 3600:.1f} h"


# -- the sensor ----------------------------------------------------------------------------------
def verification_sensor_name(binlog_sensor_name: str) -> str:
    """The verification sensor's name for the binlog sensor ``binlog_sensor_name``."""
    return f"{binlog_sensor_name}_verification"


def capture_tables(
    instance: Any, assets_def: dg.AssetsDefinition, storage: StorageSettings, server_name: str
) -> CaptureTables:
    """The tables of ``assets_def`` with their state URIs, and the committed position and
    incremental state the binlog asset's latest materialization reported."""
    from ..sink.layout import LakeLayout
    from .protocol import BINLOG_METADATA_KEY, binlog_asset_key, position_from_metadata
    from .translator import table_of_spec

    layout = LakeLayout(storage, server_name)
    tables: dict[str, tuple[dg.AssetKey, str]] = {}
    for spec in assets_def.specs:
        if BINLOG_METADATA_KEY in (spec.metadata or {}):
            continue
        db, t = table_of_spec(spec)
        tables[f"{db}.{t}"] = (spec.key, layout.table(db, t).state)
    committed, inc, stopped = None, None, set()
    bkey = binlog_asset_key(assets_def.specs)
    ev = instance.get_latest_materialization_event(bkey) if bkey is not None else None
    mat = ev.asset_materialization if ev is not None else None
    if mat is not None:
        committed = position_from_metadata(mat.metadata, "window_end", "snapshot")
        value = getattr(mat.metadata.get("incremental_state"), "value", None)
        inc = value if isinstance(value, dict) and value else None
        stopped_md = getattr(mat.metadata.get("stopped_tables"), "value", None)
        stopped = set(stopped_md) if isinstance(stopped_md, dict) else set()
    return CaptureTables(tables=tables, committed=committed, incremental_state=inc, stopped=stopped)


def build_verification_sensor(
    assets_def: dg.AssetsDefinition,
    *,
    name: str | None = None,
    minimum_interval_seconds: int = 30,
    rows: int = RotationOptions.rows,
    seconds: float = RotationOptions.seconds,
    default_status: dg.DefaultSensorStatus = dg.DefaultSensorStatus.STOPPED,
    mysql_resource_key: str = "mysql",
    lake_resource_key: str = "lake",
) -> dg.SensorDefinition:
    """The rotating verification sensor of a ``@mysql_cdc_assets`` definition (module docs).

    Args:
        name: default ``<binlog sensor name>_verification``.
        minimum_interval_seconds: seconds between slices.
        rows: source rows per slice (``0``: off); with ``minimum_interval_seconds`` it sets how
            long a pass takes: a table of ``N`` rows is verified every ``N / rows`` ticks (the
            tables one after another). Defaults: 50 000 rows every 30 s, a 1M-row table in 10 min.
        seconds: a slice reads the source for at most this long.
        default_status: ``DefaultSensorStatus.RUNNING`` to turn it on with the binlog sensor.

    The sensor requests no run: it reads a slice of the source and the lake, queues a repair
    through the signal table when a difference is confirmed, and reports observations.
    """
    from .protocol import default_sensor_name

    sensor_name = name or verification_sensor_name(default_sensor_name(assets_def))
    options = RotationOptions(rows=rows, seconds=seconds)

    @dg.sensor(
        name=sensor_name,
        minimum_interval_seconds=minimum_interval_seconds,
        default_status=default_status,
        required_resource_keys={mysql_resource_key, lake_resource_key},
        description=(
            "Rotating verification: compares one primary-key range of one captured table with the "
            "source per tick, round the tables, and queues the targeted re-read of a confirmed difference."
        ),
    )
    def _sensor(context: dg.SensorEvaluationContext):
        from ..engine.gaps import queue_checksum_repair
        from .resources import MySqlCdcResource

        mysql: MySqlCdcResource = getattr(context.resources, mysql_resource_key)
        lake = getattr(context.resources, lake_resource_key)
        state = RotationState.parse(context.cursor)
        storage = lake.storage_settings()
        capture = capture_tables(context.instance, assets_def, storage, mysql.server_name)
        settings = mysql.connection_settings()
        info = read_server_info(settings)
        comparison = RangeComparison(
            settings=settings,
            info=info,
            storage=storage,
            type_options=mysql.type_options(),
            server_id=mysql.server_id + ROTATION_SERVER_ID_OFFSET,
        )

        def repair(schema: TableSchema, differing: list, lake_only: list, committed: BinlogPosition) -> str:
            return queue_checksum_repair(
                settings,
                schema,
                differing,
                lake_only,
                committed=committed,
                gap_handling=mysql.binlog_gap_handling,
                signal_table=mysql.signal_table(),
                read_only=mysql.incremental_snapshot_read_only,
                log=context.log,
            )

        def position() -> BinlogPosition:
            conn = connect(settings)
            try:
                return current_position(conn, info)
            finally:
                conn.close()

        state, observations, outcome = verify_tick(
            state,
            capture,
            compare=comparison.compare,
            queue_repair=repair,
            server_position=position,
            options=options,
        )
        context.log.info(outcome)
        events = [dg.AssetObservation(asset_key=k, metadata=md) for k, md in observations]
        return dg.SensorResult(skip_reason=outcome, cursor=state.to_json(), asset_events=events or None)

    return _sensor


__all__ = [
    "RotationOptions",
    "RotationState",
    "build_verification_sensor",
    "status_line",
    "verification_sensor_name",
    "verify_tick",
]
