"""Failover-safe offsets: which server a binlog position belongs to, and resuming by GTID.

A binlog file/pos only means something on the server that wrote it: after a failover (a replica
promoted, the resource repointed) the same file name and offset on the new server are other
transactions, or nothing at all. So every committed offset carries the identity of its server
(:class:`ServerIdentity`: ``@@server_id``, ``@@server_uuid`` on MySQL, the GTID domain on MariaDB
and the GTIDs at the start of the offset's binlog file, MariaDB's ``Gtid_list`` / MySQL's
``Previous_gtids`` event), and :func:`reconcile_offset` checks it against the server before the
position is used:

- same server, valid position: used as is;
- another server (or a position that is not valid there: file missing, offset past the file's end
  or not at an event boundary): the position is translated by GTID, as the Debezium MySQL connector
  does after a failover: the first transaction of the new server's binlog that the committed GTID
  set does not contain is found (the start GTIDs of each binlog file bound the search to one file,
  then ``SHOW BINLOG EVENTS`` finds the transaction) and its position on the new server becomes
  the resume position (:func:`resume_by_gtid`), in the next *offset epoch* (the lake orders
  ``(epoch, file number, offset)``, so it does not matter that a promoted replica's binlog numbering
  sorts below the old server's);
- never silently skip: a position ahead of the server's end, committed transactions the server
  does not have (errant or lost ones), a server change without a GTID set, or a translation that
  cannot be proven to duplicate nothing raise an :class:`OffsetError` naming both sides and the
  remedies (with ``snapshot_mode="when_needed"`` the sensor re-snapshots instead).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, replace
from typing import Any

import pymysql

from ..errors import ConfigurationError
from ..events import BinlogPosition
from .connection import ServerInfo, raise_for_missing_privilege
from .gtid import GtidSet, MariaDbGtid, MariaDbGtidSet, parse_gtid_set

#: ER_ERROR_WHEN_EXECUTING_COMMAND: SHOW BINLOG EVENTS of a missing file or a wrong offset.
_NO_SUCH_EVENT = 1220

#: Events per ``SHOW BINLOG EVENTS`` page while searching a binlog file for a GTID.
SCAN_PAGE_EVENTS = 5000

_MARIADB_GTID_INFO = re.compile(r"GTID (\d+-\d+-\d+)")
_MYSQL_GTID_INFO = re.compile(r"GTID_NEXT\s*=\s*'([^']+)'")

REMEDIES = (
    "Remedies: point the resource (host/port) back at the server the offset came from; or "
    "re-snapshot: set snapshot_mode='when_needed' (the sensor then re-snapshots by itself) or delete "
    "the sensor cursor (`dagster sensor cursor <sensor> --delete`). See docs/operations.md, 'Failover'."
)


class OffsetError(ConfigurationError):
    """The committed offset cannot be used on the connected server without losing or duplicating
    changes (server changed without GTIDs, offset ahead of the server, transactions the server
    lacks, or a translation that cannot be proven safe). The message names both sides and the
    remedies; ``snapshot_mode="when_needed"`` re-snapshots instead of raising."""


class ServerChangedError(OffsetError):
    """A run was planned for one server but connected to another (run-side guard)."""


@dataclass(frozen=True)
class ServerIdentity:
    """Who wrote a binlog position.

    Attributes:
        server_id: ``@@server_id``.
        server_uuid: ``@@server_uuid`` (MySQL; ``None`` on MariaDB).
        gtid_domain_id: ``@@gtid_domain_id`` (MariaDB; ``None`` on MySQL). Informative.
        file: the binlog file whose start GTIDs are recorded (the committed offset's file).
        file_gtids: GTIDs at the start of ``file``: MariaDB's ``Gtid_list`` (``[0-1-5,...]``
            without brackets), MySQL's ``Previous_gtids``; ``None`` when unknown.
        address: ``host:port`` the identity was read through (messages only).
    """

    server_id: int
    server_uuid: str | None = None
    gtid_domain_id: int | None = None
    file: str | None = None
    file_gtids: str | None = None
    address: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "server_id": self.server_id,
            "server_uuid": self.server_uuid,
            "gtid_domain_id": self.gtid_domain_id,
            "file": self.file,
            "file_gtids": self.file_gtids,
            "address": self.address,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> ServerIdentity:
        """Inverse of :meth:`to_dict`.

        Raises:
            ValueError: ``server_id`` is missing or not an integer.
        """
        try:
            dom = d.get("gtid_domain_id")
            return cls(
                server_id=int(d["server_id"]),
                server_uuid=d.get("server_uuid"),
                gtid_domain_id=int(dom) if dom is not None else None,
                file=d.get("file"),
                file_gtids=d.get("file_gtids"),
                address=d.get("address"),
            )
        except (KeyError, TypeError, ValueError) as e:
            raise ValueError(f"Not a server identity: {d!r} ({e})") from None

    def describe(self) -> str:
        parts = [f"server_id={self.server_id}"]
        if self.server_uuid:
            parts.append(f"server_uuid={self.server_uuid}")
        if self.gtid_domain_id is not None:
            parts.append(f"gtid_domain_id={self.gtid_domain_id}")
        if self.file:
            parts.append(f"{self.file} starts at [{self.file_gtids or ''}]")
        at = f" at {self.address}" if self.address else ""
        return f"server{at} ({', '.join(parts)})"


@dataclass(frozen=True)
class Reconciled:
    """Outcome of :func:`reconcile_offset`.

    Attributes:
        position: the offset to stream from on the connected server.
        identity: the connected server's identity for ``position.file`` (to record in the cursor).
        resumed: ``True`` when ``position`` was translated by GTID (the server changed).
        message: what was decided and why (for the tick's log), ``None`` when nothing changed.
    """

    position: BinlogPosition
    identity: ServerIdentity
    resumed: bool = False
    message: str | None = None


# -- reading the server ---------------------------------------------------------------------------
def _scalar(conn: Any, sql: str) -> Any:
    with conn.cursor() as cur:
        cur.execute(sql)
        row = cur.fetchone()
    return row[0] if row else None


def binlog_events(conn: Any, file: str, start: int = 4, limit: int | None = None) -> Iterator[tuple]:
    """``SHOW BINLOG EVENTS IN file FROM start``, paged: ``(Log_name, Pos, Event_type, Server_id,
    End_log_pos, Info)`` rows in order, at most ``limit`` of them.

    Raises:
        pymysql.err.InternalError / OperationalError (1220): the file does not exist or ``start``
            is not an event boundary inside it.
        MissingPrivilegeError: the user may not list binlog events (the preflight's GRANT advice).
    """
    pos, n = start, 0
    while True:
        page = SCAN_PAGE_EVENTS if limit is None else min(SCAN_PAGE_EVENTS, limit - n)
        if page <= 0:
            return
        with conn.cursor() as cur:
            try:
                cur.execute(f"SHOW BINLOG EVENTS IN %s FROM {int(pos)} LIMIT {int(page)}", (file,))
            except pymysql.err.MySQLError as e:
                user = conn.user.decode() if isinstance(conn.user, bytes) else str(conn.user)
                raise_for_missing_privilege(
                    e,
                    user,
                    "listing binlog events (SHOW BINLOG EVENTS: REPLICATION SLAVE, BINLOG MONITOR on MariaDB)",
                )
                raise
            rows = cur.fetchall()
        for r in rows:
            yield tuple(r)
        n += len(rows)
        if len(rows) < page:
            return
        pos = int(rows[-1][4])


def file_start_gtids(conn: Any, file: str) -> str | None:
    """The GTIDs at the start of binlog ``file``: the ``Gtid_list`` (MariaDB, brackets removed) or
    ``Previous_gtids`` (MySQL, newlines removed) event among its first events; ``None`` when the
    file does not exist or has no such event (MySQL without GTIDs).

    Raises:
        MissingPrivilegeError: the user may not list binlog events.
    """
    try:
        for row in binlog_events(conn, file, 4, limit=4):
            if row[2] in ("Gtid_list", "Previous_gtids"):
                return str(row[5] or "").strip().strip("[]").replace("\n", "")
    except pymysql.err.MySQLError as e:
        if e.args and e.args[0] == _NO_SUCH_EVENT:
            return None
        raise
    return None


def at_event_boundary(conn: Any, file: str, pos: int) -> bool:
    """Whether an event of ``file`` starts at byte ``pos`` (or ``pos`` is the file's end).

    Raises:
        MissingPrivilegeError: the user may not list binlog events.
    """
    try:
        list(binlog_events(conn, file, pos, limit=1))
        return True
    except pymysql.err.MySQLError as e:
        if e.args and e.args[0] == _NO_SUCH_EVENT:
            return False
        raise


def read_identity(
    conn: Any, info: ServerInfo, file: str | None, address: str | None = None
) -> ServerIdentity:
    """The connected server's identity, with the start GTIDs of ``file`` (if given)."""
    with conn.cursor() as cur:
        cur.execute(
            "SELECT @@GLOBAL.server_id, @@GLOBAL.gtid_domain_id"
            if info.is_mariadb
            else "SELECT @@GLOBAL.server_id, @@GLOBAL.server_uuid"
        )
        server_id, other = cur.fetchone()
    return ServerIdentity(
        server_id=int(server_id),
        server_uuid=None if info.is_mariadb else (str(other or "") or None),
        gtid_domain_id=int(other) if info.is_mariadb and other is not None else None,
        file=file,
        file_gtids=file_start_gtids(conn, file) if file else None,
        address=address,
    )


def executed_gtids(conn: Any, info: ServerInfo) -> GtidSet:
    """The transactions the server executed: ``@@gtid_binlog_state`` (one entry per domain and
    server) with ``@@gtid_slave_pos`` (a replica seeded at a GTID position has executed it without
    logging it) on MariaDB, ``@@gtid_executed`` on MySQL."""
    if info.is_mariadb:
        text = f"{_scalar(conn, 'SELECT @@GLOBAL.gtid_binlog_state') or ''},{_scalar(conn, 'SELECT @@GLOBAL.gtid_slave_pos') or ''}"
        return parse_gtid_set(text, True)
    return parse_gtid_set(str(_scalar(conn, "SELECT @@GLOBAL.gtid_executed") or ""), False)


def other_server_reason(conn: Any, info: ServerInfo, recorded: ServerIdentity) -> str | None:
    """Why the connected server is not the ``recorded`` one (``None``: it is, as far as can be told).

    Compares ``server_id``, ``server_uuid`` (MySQL) and the start GTIDs of the recorded file when the
    server still has it (two servers never write the same ``Gtid_list``/``Previous_gtids`` for a
    file of the same name unless one is a copy of the other's binlog).
    """
    return _compare(conn, info, recorded)[0]


def _compare(conn: Any, info: ServerInfo, recorded: ServerIdentity) -> tuple[str | None, ServerIdentity]:
    now = read_identity(conn, info, recorded.file)
    if now.server_id != recorded.server_id:
        return f"@@server_id is {now.server_id}, the offset's server had {recorded.server_id}", now
    if recorded.server_uuid and now.server_uuid and recorded.server_uuid != now.server_uuid:
        return f"@@server_uuid is {now.server_uuid}, the offset's server had {recorded.server_uuid}", now
    if recorded.file and recorded.file_gtids is not None and now.file_gtids is not None:
        if now.file_gtids != recorded.file_gtids:
            return (
                f"binlog file {recorded.file} starts at GTIDs [{now.file_gtids}] here, at "
                f"[{recorded.file_gtids}] on the offset's server"
            ), now
    return None, now


def position_problem(
    pos: BinlogPosition, files: list[tuple[str, int]], current: BinlogPosition
) -> str | None:
    """Why ``pos`` is not a readable position of a server with these binlog ``files`` and end
    ``current`` (``None``: it is, up to the event-boundary check). Purged files are not a problem
    here (the planner handles them)."""
    names = [f for f, _ in files]
    if pos.file in names:
        size = files[names.index(pos.file)][1]
        if pos.pos > size:
            if pos.file == current.file:
                return f"it is ahead of the server's end {current.file}:{current.pos}"
            return f"{pos.file} is only {size} bytes long here"
        return None
    if names and pos.file_seq > BinlogPosition(names[-1], 4).file_seq:
        return f"it is ahead of the server's end {current.file}:{current.pos} (no file {pos.file})"
    if names and pos.file_seq >= BinlogPosition(names[0], 4).file_seq:
        return f"binlog file {pos.file} does not exist here (files {names[0]} .. {names[-1]})"
    return None


def _gtid_of(row: tuple, is_mariadb: bool) -> str | None:
    if row[2] != "Gtid":
        return None
    m = (_MARIADB_GTID_INFO if is_mariadb else _MYSQL_GTID_INFO).search(str(row[5] or ""))
    return m.group(1) if m else None


def _key(is_mariadb: bool, gtid: str) -> Any:
    """Domain (MariaDB) or uuid (MySQL) of a GTID and its sequence number."""
    if is_mariadb:
        g = MariaDbGtid.parse(gtid)
        return g.domain, g.seq
    uuid, _, n = gtid.rpartition(":")
    return uuid.lower(), int(n)


def resume_by_gtid(
    conn: Any,
    info: ServerInfo,
    committed_gtids: str,
    files: list[tuple[str, int]],
    current: BinlogPosition,
    *,
    theirs: str = "the committed offset",
) -> tuple[BinlogPosition, str | None]:
    """The position on the connected server of the first transaction ``committed_gtids`` does not
    contain (the server's end when there is none), with the GTID set there (the committed one).

    Reads the server's executed GTIDs, the start GTIDs of every binlog file and ``SHOW BINLOG
    EVENTS`` of the files it must search, then decides with :func:`locate_first_missing`.

    Returns:
        ``(position, first missing GTID or None)``.

    Raises:
        OffsetError: the translation would lose or duplicate transactions (see
            :func:`locate_first_missing`).
        GtidSetError: ``committed_gtids`` is not a GTID set of the server's flavour.
    """
    mdb = info.is_mariadb
    names = [f for f, _ in files]
    if not names:
        raise OffsetError(f"The server has no binlog files: cannot resume {theirs} by GTID. " + REMEDIES)
    return locate_first_missing(
        parse_gtid_set(committed_gtids, mdb),
        executed_gtids(conn, info),
        names,
        [parse_gtid_set(file_start_gtids(conn, f), mdb) for f in names],
        lambda f: binlog_events(conn, f),
        current,
        theirs=theirs,
    )


def locate_first_missing(
    want: GtidSet,
    have: GtidSet,
    names: list[str],
    starts: list[GtidSet],
    events: Callable[[str], Iterable[tuple]],
    current: BinlogPosition,
    *,
    theirs: str = "the committed offset",
) -> tuple[BinlogPosition, str | None]:
    """The first transaction of a server's binlog that ``want`` does not contain (pure logic).

    Args:
        want: the committed GTID set.
        have: the server's executed GTIDs (:func:`executed_gtids`).
        names / starts: the binlog files, oldest first, and the GTIDs at the start of each.
        events: ``SHOW BINLOG EVENTS`` rows ``(Log_name, Pos, Event_type, Server_id, End_log_pos,
            Info)`` of a file, in order (read lazily, only for the files searched).
        current: the server's current position (the answer when nothing is missing).

    Steps: (1) every committed transaction must have been executed by the server, else they are
    errant or lost there; (2) the oldest binlog file must not start after transactions ``want``
    lacks (purged), and on MariaDB a domain the binlog only picks up later (a replica seeded at a
    GTID position) must not have executed transactions outside the binlog that ``want`` lacks;
    (3) the last file whose start GTIDs ``want`` contains holds the first missing transaction;
    (4) after it, no contained transaction may follow (it would be read twice: MariaDB domains
    interleaving around the cut), which is checked until every domain/uuid of ``want`` is past its
    committed point or a file starts past all of ``want``; (5) with nothing missing, the server must
    not have executed transactions beyond ``want`` that its binlog lacks (``log_slave_updates``).

    Returns:
        ``(position with GTID set, first missing GTID)``, or ``(end of the binlog, None)``.

    Raises:
        OffsetError: a check fails; the message names both sides and the remedies.
    """
    mdb = isinstance(want, MariaDbGtidSet)
    lacking = want.missing_from(have)  # type: ignore[arg-type]
    if lacking:
        raise OffsetError(
            f"{theirs} holds transactions this server never executed: {'; '.join(lacking)}. "
            f"Server's GTID state: [{have}]; committed: [{want}]. They are errant transactions of "
            "the old server (written there, never replicated here) or were lost in the failover: "
            "streaming from here would silently diverge from what the lake holds. " + REMEDIES
        )
    if not starts[0].issubset(want):  # type: ignore[arg-type]
        raise OffsetError(
            f"This server's oldest binlog file {names[0]} starts after transactions [{starts[0]}] that "
            f"{theirs} [{want}] does not contain: they were purged here (or predate its binary log) and "
            "can no longer be streamed. " + REMEDIES
        )
    if isinstance(want, MariaDbGtidSet) and isinstance(have, MariaDbGtidSet):
        _check_unlogged_domains(want, have, names, starts, events, theirs)  # type: ignore[arg-type]
    k = max(i for i, s in enumerate(starts) if s.issubset(want))  # type: ignore[arg-type]
    tops = dict(want.domains())
    first: tuple[str, BinlogPosition] | None = None
    last_end: BinlogPosition | None = None
    open_domains = set(tops)  # domains whose committed point is not yet behind the scan
    for i in range(k, len(names)):
        if first is not None and (want.issubset(starts[i]) or not open_domains):  # type: ignore[arg-type]
            break
        for row in events(names[i]):
            last_end = BinlogPosition(names[i], int(row[4]))
            g = _gtid_of(row, mdb)
            if g is None:
                continue
            dom, seq = _key(mdb, g)
            if want.contains_gtid(g):
                if first is not None:
                    raise OffsetError(
                        f"Cannot resume {theirs} [{want}] on this server without reading a transaction "
                        f"twice: {g} (contained in it) follows the first missing transaction {first[0]} "
                        f"at {first[1].file}:{first[1].pos} (GTID domains interleave around the cut). "
                        + REMEDIES
                    )
                continue
            if first is None:
                first = (g, BinlogPosition(names[i], int(row[1])))
            if dom in open_domains and seq > tops.get(dom, -1):
                open_domains.discard(dom)
            if not open_domains:
                break
    if first is not None:
        # every transaction before it is in the committed set and every committed one is before
        # it (checked above): the GTID set there is the committed set
        return replace(first[1], gtid_set=str(want) or None), first[0]
    if not have.issubset(want):  # type: ignore[arg-type]
        raise OffsetError(
            f"This server executed transactions [{have}] beyond {theirs} [{want}] that its binlog "
            "does not hold, so they cannot be streamed. Replicated transactions reach a replica's "
            "binlog only with log_slave_updates=ON (MySQL: log_replica_updates=ON). " + REMEDIES
        )
    end = last_end if last_end is not None and last_end.file == current.file else current
    return BinlogPosition(end.file, end.pos, str(want) or None), None


def _check_unlogged_domains(
    want: MariaDbGtidSet,
    have: MariaDbGtidSet,
    names: list[str],
    starts: list[MariaDbGtidSet],
    events: Callable[[str], Iterable[tuple]],
    theirs: str,
) -> None:
    """A MariaDB domain the oldest binlog file does not know yet starts later in the binlog, or not
    at all (a replica seeded with ``gtid_slave_pos``): the transactions of that domain the server
    executed before its first one in the binlog must all be in ``want``."""
    tops, executed = want.domains(), have.domains()
    for dom in sorted(set(tops) | set(executed)):
        if dom in starts[0].domains():
            continue
        j = next((i for i, s in enumerate(starts) if dom in s.domains()), len(starts))
        first_seq = None
        for row in events(names[j - 1]):
            g = _gtid_of(row, True)
            if g is not None and MariaDbGtid.parse(g).domain == dom:
                first_seq = MariaDbGtid.parse(g).seq
                break
        if first_seq is None and j < len(starts):
            first_seq = starts[j].domains()[dom]
        unlogged_top = first_seq - 1 if first_seq is not None else executed.get(dom, 0)
        if unlogged_top > tops.get(dom, 0):
            where = (
                f"starts GTID domain {dom} at sequence number {first_seq}"
                if first_seq
                else (f"holds no transaction of GTID domain {dom}, executed up to {dom}-*-{unlogged_top}")
            )
            raise OffsetError(
                f"This server's binlog {where}, but {theirs} is at "
                f"{dom}-*-{tops.get(dom, 0)} in that domain: transactions up to {dom}-*-{unlogged_top} "
                "were executed here without being in the binlog (a replica seeded from a later point, "
                "e.g. with gtid_slave_pos) and cannot be streamed. " + REMEDIES
            )


def reconcile_offset(
    conn: Any,
    info: ServerInfo,
    committed: BinlogPosition,
    recorded: ServerIdentity | None,
    *,
    files: list[tuple[str, int]],
    current: BinlogPosition,
    address: str | None = None,
    bound: BinlogPosition | None = None,
) -> Reconciled:
    """Check that ``committed`` belongs to the connected server; translate it by GTID if not.

    Args:
        committed: the committed offset (file/pos/GTID set).
        recorded: the identity of the server it was read from (``None``: unknown, a cursor written
            before identities were recorded; a valid position is then adopted as this server's).
        files / current: the server's ``SHOW BINARY LOGS`` and current position.
        address: ``host:port`` for messages.
        bound: the furthest position the lake may already hold events of (a failed window's end);
            default ``committed``. A translated position is put in the next offset epoch after
            both (``max(epoch) + 1``): the lake orders events by (epoch, file number, offset), so the
            new server's events sort after everything it holds, whatever the new server's binlog
            numbering (a promoted replica usually starts at ``mysql-bin.000001``).

    Returns:
        the position (``committed`` as is on the same server; translated, in epoch
        ``max(committed.epoch, bound.epoch) + 1``, after a server change), the identity to record
        and what was decided.

    Raises:
        OffsetError: ahead of the server's end, not at an event boundary, server changed without
            GTIDs, errant/lost transactions, or an unsafe translation (see module docs).
    """
    here = address or "the connected server"
    names = [f for f, _ in files]
    changed, now = _compare(conn, info, recorded) if recorded is not None else (None, None)
    problem = position_problem(committed, files, current)
    if (
        problem is None
        and committed.file in names
        and not at_event_boundary(conn, committed.file, committed.pos)
    ):
        problem = f"no event starts at byte {committed.pos} of {committed.file} here"
    if problem is None and recorded is None and committed.file not in names and names and committed.gtid_set:
        # without a recorded identity a missing file may be this server's purged one or another
        # server's: the GTID set decides (a purge here fails the translation with its own error)
        problem = (
            f"binlog file {committed.file} is not on this server (purged here, or another server's file)"
        )
    if changed is None and problem is None:
        file = committed.file if committed.file in names else None
        if now is not None and now.file == file:
            ident = replace(now, address=address)
        else:
            ident = read_identity(conn, info, file, address)
        msg = None if recorded is not None else f"recorded the identity of {ident.describe()} with the offset"
        return Reconciled(committed, ident, False, msg)
    if changed is None and recorded is not None:
        raise OffsetError(
            f"The committed offset {committed} is not valid on the server it was read from "
            f"({recorded.describe()}; now at {current}): {problem}. The server's binary log was reset "
            "or restored from an older backup (or the cursor was edited); streaming from its end would "
            "silently skip changes. " + REMEDIES
        )
    why = changed or f"the offset is not valid here: {problem}"
    if not committed.gtid_set:
        raise OffsetError(
            f"The committed offset {committed} came from another server than {here} ({why}) and has "
            "no GTID set, so its position on this server is unknown. Enable GTIDs (MySQL: gtid_mode=ON, "
            "enforce_gtid_consistency=ON) to make failovers resumable. " + REMEDIES
        )
    theirs = f"The committed offset {committed}" + (f" of {recorded.describe()}" if recorded else "")
    pos, first = resume_by_gtid(conn, info, committed.gtid_set, files, current, theirs=theirs)
    # a new offset epoch: the lake orders (epoch, file number, offset), so the new server's
    # positions sort after everything the lake may hold, whatever their file numbers
    epoch = max(committed.epoch, bound.epoch if bound is not None else 0) + 1
    pos = pos.with_epoch(epoch)
    ident = read_identity(conn, info, pos.file, address)
    what = f"first transaction not in the committed set: {first}" if first else "nothing missing"
    return Reconciled(
        pos,
        ident,
        True,
        f"Server changed ({why}): resuming {committed} by GTID [{committed.gtid_set}] at {pos.file}:{pos.pos} "
        f"on {ident.describe()} ({what}); offset epoch {epoch}",
    )
