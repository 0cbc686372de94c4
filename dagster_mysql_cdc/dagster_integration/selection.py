"""Which assets a streaming window run selects: the tables the window changed, plus the binlog asset.

The sensor plans a window ``[committed, head)``; before requesting its run it reads the window's
events ahead, without decoding any row (python-mysql-replication decodes row images lazily), to
learn which captured tables it changes. The run then selects only those tables (the UI shows only
them as *Materializing*), plus the binlog asset, which carries the heartbeat (it materializes every
window); it evaluates every check of each of them and the binlog asset's own, and logs their
results (or, up to ``planned_checks_max_tables`` tables, plans them: see :func:`window_selection`).

Every table is selected instead (the previous behaviour) when the window cannot be judged cheaply or
safely: larger than ``stream_lookahead_max_bytes``; statements the binlog carries as SQL (DDL,
statement-based DML; a following run's planner passes over DDL that names only databases the
capture's filter rules out, :func:`..source.ddl.scope.ddl_databases`,
:meth:`..source.filters.TableFilter.may_capture_in`); a row in the signal table (a signal may
start a snapshot of any table);
``stream_materialize_unchanged=True``; or the look-ahead fails. A running incremental snapshot adds
the tables it reads.

A following stream run (``stream_follow_seconds``) plans each follow-on window as the sensor
would: the window the sensor would request next (:func:`next_window`, with
:func:`.cursor.plan_stream_window`) and the tables it changes (:func:`changed_tables`); together
the :func:`follow_planner` the engine's :class:`~..engine.stream_run.StreamRun` is given.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any

import dagster as dg

from ..events import BinlogPosition
from ..source.connection import ConnectionSettings, ServerInfo, binlog_files, connect, server_info
from .checks import GAPS, RETENTION, SCHEMA, TABLE_CHECKS
from .protocol import BINLOG_METADATA_KEY, TABLE_METADATA_KEY
from .translator import table_of_spec

if TYPE_CHECKING:
    from ..engine.follow import FollowPlanner, NextWindow

log = logging.getLogger(__name__)

#: Replica id offset of the sensor's look-ahead (the run reads with server_id, checks +7, ranges +3).
LOOKAHEAD_SERVER_ID_OFFSET = 13


@dataclass(frozen=True)
class WindowSelection:
    """Assets and checks a window run selects, and why (the run's ``dagster_mysql_cdc/selection`` tag)."""

    asset_keys: list[dg.AssetKey]
    check_keys: list[dg.AssetCheckKey]
    reason: str
    #: the run logs its checks instead of planning them (:data:`.protocol.TABLE_CHECKS_TAG`)
    logged_checks: bool = False


def window_bytes(files: Sequence[tuple[str, int]], start: BinlogPosition, end: BinlogPosition) -> int | None:
    """Binlog bytes from ``start`` to ``end`` (``None`` when a file is not in ``files``)."""
    if start.file == end.file:
        return max(0, end.pos - start.pos)
    names = [f for f, _ in files]
    sizes = dict(files)
    if start.file not in sizes or end.file not in sizes:
        return None
    i, j = names.index(start.file), names.index(end.file)
    return max(0, sizes[start.file] - start.pos) + sum(sizes[f] for f in names[i + 1 : j]) + end.pos


def changed_tables(
    mysql, start: BinlogPosition, end: BinlogPosition, *, ddl_elsewhere: bool = False
) -> tuple[set[tuple[str, str]] | None, str]:
    """``(tables with row events in [start, end), why)``; ``None`` = select every table.

    Args:
        mysql: the :class:`~.resources.MySqlCdcResource` (connection, filters, limits).
        ddl_elsewhere: DDL that names only databases the filter rules out does not make the
            window unjudgeable (a following run's planner: it reads the window itself, so the
            statement still reaches the schema history). The sensor's look-ahead leaves it
            ``False``: a window it finds no captured change in is committed without a run, and
            a statement no run read would be missing from the schema history (a table created
            elsewhere and later renamed into a captured database).

    Never raises: a failure of the look-ahead selects every table (the reason says why).
    """
    from ..source.binlog import BinlogReader, DdlStatement, RowsBatch, StatementDml
    from ..source.ddl.scope import ddl_databases

    try:
        settings = mysql.connection_settings()
        conn = connect(settings)
        try:
            info = server_info(conn)
            files = binlog_files(conn) if start.file != end.file else []
        finally:
            conn.close()
        size = window_bytes(files, start, end)
        if size is None or size > mysql.stream_lookahead_max_bytes:
            return None, f"window of {size if size is not None else 'unknown'} bytes: every table selected"
        signal = mysql.signal_table()
        sig = tuple(signal.split(".", 1)) if signal else None
        flt = mysql.table_filter()
        tables: set[tuple[str, str]] = set()
        reader = BinlogReader(
            settings,
            mysql.server_id + LOOKAHEAD_SERVER_ID_OFFSET,
            start,
            end,
            is_mariadb=info.is_mariadb,
            deadline_s=20,
            rows_filter=lambda d, t: False,  # names only: no row image is decoded
        )
        for item in reader:
            if isinstance(item, DdlStatement):
                dbs = ddl_databases(item.sql, item.database) if ddl_elsewhere else None
                if flt.ddl_may_change_captured(dbs, sig[0] if sig is not None else None):
                    return None, "the window has DDL: every table selected"
                continue  # DDL of databases the capture rules out: it changes no captured table
            if isinstance(item, StatementDml):
                return None, "the window has statement-based DML: every table selected"
            if isinstance(item, RowsBatch):
                if sig is not None and (item.database, item.table) == sig:
                    return None, "the window has a signal: every table selected"
                if flt.matches(item.database, item.table):
                    tables.add((item.database, item.table))
        return tables, f"{len(tables)} table(s) changed in the window"
    except Exception as e:  # noqa: BLE001 - the look-ahead is an optimisation: fall back to all tables
        log.warning("window look-ahead failed (%s); selecting every table", e)
        return None, f"look-ahead failed ({type(e).__name__}): every table selected"


def window_selection(
    mysql,
    assets_def: dg.AssetsDefinition,
    start: BinlogPosition,
    end: BinlogPosition,
    incremental: dict | None,
    stopped: dict[str, bool] | None = None,
    changed: tuple[set[tuple[str, str]] | None, str] | None = None,
) -> WindowSelection:
    """The assets and checks of the run for window ``[start, end)`` (see module docs).

    Selected tables get every table check (the stream-run variant of the row count and checksum
    checks verifies what the window changed); unselected tables get none, so their last results stay
    current. The binlog asset is always selected, and its checks always run.

    More selected tables than ``mysql.planned_checks_max_tables`` (default 0: any window): no
    check is selected and ``logged_checks`` is set; the run evaluates the same checks of each table
    it materializes and of the binlog asset and logs the results (Dagster stores 1 event per check
    instead of 3: the planned event, the step output and the evaluation; what a window of hundreds
    of tables costs in Dagster, issue 28, and a third of a small window's events, issue 42).
    Otherwise the run plans them all: the selected tables' checks and the binlog asset's.

    ``stopped``: the tables whose capture is stopped (``"db.table"`` -> whether the run catches it
    up): one the run catches up is selected (it materializes once caught up), the others are not
    (the window leaves them out).

    ``changed``: the window's :func:`changed_tables` when the sensor has read it already.
    """
    binlog_keys: list[dg.AssetKey] = []
    table_keys: dict[tuple[str, str], dg.AssetKey] = {}
    for spec in assets_def.specs:
        md = spec.metadata or {}
        if BINLOG_METADATA_KEY in md:
            binlog_keys.append(spec.key)
        elif TABLE_METADATA_KEY in md:
            table_keys[table_of_spec(spec)] = spec.key
    if mysql.stream_materialize_unchanged:
        tables, reason = None, "stream_materialize_unchanged: every table selected"
    elif changed is not None:
        tables, reason = set(changed[0]) if changed[0] is not None else None, changed[1]
    else:
        tables, reason = changed_tables(mysql, start, end)
    if tables is not None:
        for t in (incremental or {}).get("tables", []):
            db, _, name = str(t.get("table", "")).partition(".")
            if (db, name) in table_keys:
                tables.add((db, name))
    selected = (
        set(table_keys.values()) if tables is None else {table_keys[t] for t in tables if t in table_keys}
    )
    for name, catch_up in (stopped or {}).items():
        db, _, t = name.partition(".")
        if (db, t) not in table_keys:
            continue
        if catch_up:
            selected.add(table_keys[(db, t)])
            reason += f"; {name} caught up"
        else:
            selected.discard(table_keys[(db, t)])
    keys = [k for k in assets_def.keys if k in selected or k in binlog_keys]
    logged = len(selected) > mysql.planned_checks_max_tables
    if logged:
        reason += (
            f"; checks logged by the run ({len(selected)} tables > "
            f"planned_checks_max_tables={mysql.planned_checks_max_tables})"
        )
    checks = [
        ck
        for ck in assets_def.check_keys
        if not logged
        and (
            (ck.asset_key in binlog_keys and ck.name in (RETENTION, GAPS))
            or (ck.asset_key in selected and ck.name in (*TABLE_CHECKS, SCHEMA))
        )
    ]
    return WindowSelection(keys, checks, reason, logged)


def follow_planner(mysql, settings: ConnectionSettings, info: ServerInfo) -> FollowPlanner:
    """How a following stream run finds its next window: as the binlog sensor plans it
    (:func:`next_window`) and selects its tables (:func:`changed_tables`).

    Args:
        mysql: the :class:`~.resources.MySqlCdcResource` (``snapshot_mode``, and what
            :func:`changed_tables` reads).
    """
    from ..engine.follow import FollowPlanner

    return FollowPlanner(
        next_window=partial(
            next_window, settings, info, mysql.snapshot_mode, conn=PlannerConnection(settings)
        ),
        changed_tables=partial(changed_tables, mysql, ddl_elsewhere=True),
    )


class PlannerConnection:
    """One MySQL connection a following (or standby) run plans its windows on, opened on first
    use and again after an error: a standby run asks for the server's position every 0.25 s for
    minutes, which would otherwise be four new connections a second."""

    def __init__(self, settings: ConnectionSettings) -> None:
        self.settings = settings
        self.conn: Any = None

    def __call__(self):
        """The open connection (a new one when there is none).

        Raises:
            SourceConnectionError: the server cannot be reached.
        """
        if self.conn is None:
            self.conn = connect(self.settings)
        return self.conn

    def drop(self) -> None:
        """Close and forget the connection (after an error: the next call reconnects)."""
        conn, self.conn = self.conn, None
        if conn is not None:
            try:
                conn.close()
            except Exception:  # noqa: BLE001 - closing a broken connection
                pass


def next_window(
    settings: ConnectionSettings,
    info: ServerInfo,
    snapshot_mode: str,
    after: BinlogPosition,
    conn: PlannerConnection | None = None,
) -> NextWindow:
    """The run the binlog sensor would request once ``after`` is committed
    (:func:`.cursor.plan_stream_window` over the server's current position and binlog files);
    on ``conn`` when given (kept open between calls), else on a connection of its own.

    Raises:
        SourceConnectionError, pymysql errors: the server cannot be read (``conn`` is dropped).
    """
    from ..engine.follow import NextWindow
    from ..source.connection import current_position
    from .cursor import ServerState, StreamCursor, plan_stream_window

    source = conn if conn is not None else PlannerConnection(settings)
    try:
        c = source()
        state = ServerState(current=current_position(c, info), binlog_files=binlog_files(c))
    except Exception:
        source.drop()
        raise
    finally:
        if conn is None:
            source.drop()
    plan = plan_stream_window(
        StreamCursor(committed=after, snapshot_done=True), state, snapshot_mode=snapshot_mode
    )
    req = plan.request
    if req is None:
        return NextWindow(requested=False)
    if req.kind != "stream" or req.start is None or req.end is None:
        return NextWindow(requested=True)
    return NextWindow(requested=True, start=req.start, end=req.end)
