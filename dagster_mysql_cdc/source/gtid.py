"""GTID sets of both flavours, as pure values (no I/O): parse, contain, subtract, format.

Two formats exist (and a server speaks exactly one of them):

- **MariaDB** (``domain-server-seq``, MariaDB KB "Global Transaction ID"): a *position* such as
  ``@@gtid_binlog_pos`` = ``0-1-42,1-2-7`` names the last transaction of each replication domain;
  sequence numbers grow monotonically inside a domain (``gtid_strict_mode``), so a position
  contains every transaction of a domain up to its sequence number, whichever server wrote it. A
  *binlog state* (``@@gtid_binlog_state``, the ``Gtid_list`` event at the start of each binlog
  file) keeps one entry per (domain, server) pair.
- **MySQL** (``uuid:interval[:interval]``, MySQL manual "GTID Format and Storage"): an explicit
  set of transaction numbers per source ``server_uuid``, e.g.
  ``3e11fa47-71ca-11e1-9e33-c80aa9429562:1-5:7,...`` (``@@gtid_executed``, ``Previous_gtids``).

:func:`parse_gtid_set` picks the flavour from the text (or the caller's ``is_mariadb``); both
classes offer the same operations, used to resume streaming by GTID on another server of the
topology (Debezium MySQL connector: on restart it "uses the GTID set to find the position on the
new server" after a failover).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from ..errors import ConfigurationError


class GtidSetError(ConfigurationError):
    """A GTID or GTID set has a malformed text (names the text and the expected format)."""


_MARIADB_GTID = re.compile(r"^\s*(\d+)-(\d+)-(\d+)\s*$")
_UUID = r"[0-9a-fA-F]{8}(?:-[0-9a-fA-F]{4}){3}-[0-9a-fA-F]{12}"
_MYSQL_PART = re.compile(rf"^\s*({_UUID})((?::\d+(?:-\d+)?)+)\s*$")
_MYSQL_GTID = re.compile(rf"^\s*({_UUID}):(\d+)\s*$")


@dataclass(frozen=True, order=True)
class MariaDbGtid:
    """One MariaDB GTID ``domain-server-seq`` (all non-negative integers)."""

    domain: int
    server: int
    seq: int

    @classmethod
    def parse(cls, text: str) -> MariaDbGtid:
        """Parse ``"0-1-42"``.

        Raises:
            GtidSetError: not three dash-separated integers.
        """
        m = _MARIADB_GTID.match(text)
        if not m:
            raise GtidSetError(f"Not a MariaDB GTID: {text!r} (expected domain-server-seq, e.g. 0-1-42)")
        return cls(int(m.group(1)), int(m.group(2)), int(m.group(3)))

    def __str__(self) -> str:
        return f"{self.domain}-{self.server}-{self.seq}"


@dataclass(frozen=True)
class MariaDbGtidSet:
    """A MariaDB GTID position or binlog state: entries ``domain-server-seq``.

    A position has one entry per domain; a binlog state (``Gtid_list``) one per (domain, server).
    As a *set of transactions* both mean: every transaction of domain ``d`` with a sequence number
    up to the domain's highest ``seq`` (:meth:`domains`).
    """

    entries: tuple[MariaDbGtid, ...] = ()

    is_mariadb = True

    @classmethod
    def parse(cls, text: str | None) -> MariaDbGtidSet:
        """Parse ``"0-1-42,1-2-7"`` (also ``Gtid_list`` info ``"[0-1-42,1-2-7]"``); empty → empty set.

        Raises:
            GtidSetError: an entry is not ``domain-server-seq``.
        """
        body = (text or "").strip().strip("[]")
        entries: dict[tuple[int, int], MariaDbGtid] = {}
        for part in body.replace("\n", "").split(","):
            if not part.strip():
                continue
            g = MariaDbGtid.parse(part)
            old = entries.get((g.domain, g.server))
            if old is None or g.seq > old.seq:
                entries[(g.domain, g.server)] = g
        return cls(tuple(sorted(entries.values())))

    def domains(self) -> dict[int, int]:
        """``{domain: highest seq}`` (the transactions the set contains, per domain)."""
        out: dict[int, int] = {}
        for g in self.entries:
            out[g.domain] = max(out.get(g.domain, -1), g.seq)
        return out

    def position(self) -> MariaDbGtidSet:
        """The ``gtid_binlog_pos`` form: the entry with the highest seq of each domain."""
        best: dict[int, MariaDbGtid] = {}
        for g in self.entries:
            if g.domain not in best or g.seq > best[g.domain].seq:
                best[g.domain] = g
        return MariaDbGtidSet(tuple(sorted(best.values())))

    def contains_gtid(self, gtid: str | MariaDbGtid) -> bool:
        """Whether the transaction ``gtid`` is in the set (its domain's highest seq ≥ its seq)."""
        g = gtid if isinstance(gtid, MariaDbGtid) else MariaDbGtid.parse(gtid)
        top = self.domains().get(g.domain)
        return top is not None and top >= g.seq

    def issubset(self, other: MariaDbGtidSet) -> bool:
        """Every transaction of ``self`` is in ``other`` (per domain: seq ≤ other's)."""
        theirs = other.domains()
        return all(d in theirs and theirs[d] >= s for d, s in self.domains().items())

    def missing_from(self, state: MariaDbGtidSet) -> list[str]:
        """The entries of this position a server with binlog state ``state`` does not have.

        An entry ``d-s-n`` is had when the state has (domain ``d``, server ``s``) at seq ≥ ``n``
        (the server logged that writer's transaction ``n`` or a later one). A state that reached
        seq ``n`` in domain ``d`` only through *other* writers has a different transaction ``n``:
        the histories diverged (errant transactions, MariaDB's "GTID not in the master's binlog").
        Returns ``["0-1-501 (server has 0-1-500, 0-11-501)", ...]``; empty when all are had.
        """
        have = {(g.domain, g.server): g.seq for g in state.entries}
        out = []
        for g in self.position().entries:
            if have.get((g.domain, g.server), -1) < g.seq:
                same_domain = ", ".join(str(e) for e in state.entries if e.domain == g.domain) or "nothing"
                out.append(f"{g} (the server has {same_domain} in domain {g.domain})")
        return out

    def advance(self, gtid: str | MariaDbGtid) -> MariaDbGtidSet:
        """The position after transaction ``gtid`` (its domain's entry replaced)."""
        g = gtid if isinstance(gtid, MariaDbGtid) else MariaDbGtid.parse(gtid)
        kept = [e for e in self.position().entries if e.domain != g.domain]
        return MariaDbGtidSet(tuple(sorted([*kept, g])))

    def __str__(self) -> str:
        return ",".join(str(g) for g in self.entries)


def _mysql_gtid(gtid: str) -> tuple[str, int]:
    """``(uuid lower-cased, n)`` of a MySQL GTID ``uuid:n``.

    Raises:
        GtidSetError: ``gtid`` is not ``uuid:n``.
    """
    m = _MYSQL_GTID.match(gtid)
    if not m:
        raise GtidSetError(f"Not a MySQL GTID: {gtid!r} (expected uuid:n)")
    return m.group(1).lower(), int(m.group(2))


@dataclass(frozen=True)
class MySqlGtidSet:
    """A MySQL GTID set: ``{server_uuid (lower case): sorted disjoint closed intervals}``."""

    intervals: dict[str, tuple[tuple[int, int], ...]] = field(default_factory=dict)

    is_mariadb = False

    @classmethod
    def parse(cls, text: str | None) -> MySqlGtidSet:
        """Parse ``"uuid:1-5:7,uuid2:1-3"`` (whitespace/newlines ignored); empty → empty set.

        Raises:
            GtidSetError: a part is not ``uuid:a[-b][:c[-d]...]`` or an interval is reversed.
        """
        out: dict[str, list[tuple[int, int]]] = {}
        for part in (text or "").replace("\n", "").split(","):
            if not part.strip():
                continue
            m = _MYSQL_PART.match(part)
            if not m:
                raise GtidSetError(
                    f"Not a MySQL GTID set part: {part.strip()!r} (expected uuid:1-5[:7-9], e.g. "
                    "3e11fa47-71ca-11e1-9e33-c80aa9429562:1-5)"
                )
            uuid = m.group(1).lower()
            for itv in m.group(2).strip(":").split(":"):
                a, _, b = itv.partition("-")
                lo, hi = int(a), int(b or a)
                if hi < lo:
                    raise GtidSetError(f"Reversed GTID interval {itv!r} in {part.strip()!r}")
                out.setdefault(uuid, []).append((lo, hi))
        return cls({u: _merge(iv) for u, iv in out.items()})

    def contains_gtid(self, gtid: str) -> bool:
        """Whether ``uuid:n`` is in the set.

        Raises:
            GtidSetError: ``gtid`` is not ``uuid:n``.
        """
        uuid, n = _mysql_gtid(gtid)
        return any(lo <= n <= hi for lo, hi in self.intervals.get(uuid, ()))

    def issubset(self, other: MySqlGtidSet) -> bool:
        """Every transaction of ``self`` is in ``other``."""
        return not self.subtract(other).intervals

    def subtract(self, other: MySqlGtidSet) -> MySqlGtidSet:
        """The transactions of ``self`` not in ``other``."""
        out: dict[str, tuple[tuple[int, int], ...]] = {}
        for uuid, mine in self.intervals.items():
            rest = list(mine)
            for olo, ohi in other.intervals.get(uuid, ()):
                nxt = []
                for lo, hi in rest:
                    if ohi < lo or olo > hi:
                        nxt.append((lo, hi))
                        continue
                    if lo < olo:
                        nxt.append((lo, olo - 1))
                    if hi > ohi:
                        nxt.append((ohi + 1, hi))
                rest = nxt
            if rest:
                out[uuid] = tuple(rest)
        return MySqlGtidSet(out)

    def missing_from(self, state: MySqlGtidSet) -> list[str]:
        """The transactions of ``self`` that ``state`` (a server's ``gtid_executed``) lacks, as
        ``["uuid:4-5", ...]``; empty when ``self`` is a subset."""
        diff = self.subtract(state)
        return [f"{u}:{_fmt(iv)}" for u, iv in sorted(diff.intervals.items())]

    def advance(self, gtid: str) -> MySqlGtidSet:
        """The set with transaction ``uuid:n`` added.

        Raises:
            GtidSetError: ``gtid`` is not ``uuid:n``.
        """
        uuid, n = _mysql_gtid(gtid)
        merged = dict(self.intervals)
        merged[uuid] = _merge([*merged.get(uuid, ()), (n, n)])
        return MySqlGtidSet(merged)

    def domains(self) -> dict[str, int]:
        """``{uuid: highest transaction number}`` (for messages)."""
        return {u: iv[-1][1] for u, iv in self.intervals.items() if iv}

    def __str__(self) -> str:
        return ",".join(f"{u}:{_fmt(iv)}" for u, iv in sorted(self.intervals.items()))


GtidSet = MariaDbGtidSet | MySqlGtidSet


def _merge(intervals: list[tuple[int, int]] | tuple[tuple[int, int], ...]) -> tuple[tuple[int, int], ...]:
    out: list[tuple[int, int]] = []
    for lo, hi in sorted(intervals):
        if out and lo <= out[-1][1] + 1:
            out[-1] = (out[-1][0], max(out[-1][1], hi))
        else:
            out.append((lo, hi))
    return tuple(out)


def _fmt(intervals: tuple[tuple[int, int], ...]) -> str:
    return ":".join(str(lo) if lo == hi else f"{lo}-{hi}" for lo, hi in intervals)


def parse_gtid_set(text: str | None, is_mariadb: bool | None = None) -> GtidSet:
    """Parse a GTID set of either flavour.

    Args:
        text: the set (``None``/empty: the empty set).
        is_mariadb: the server's flavour; ``None`` guesses from the text (a ``uuid:`` prefix is
            MySQL, anything else MariaDB).

    Raises:
        GtidSetError: the text is not a GTID set of that flavour.
    """
    if is_mariadb is None:
        is_mariadb = not re.search(_UUID + ":", text or "")
    return MariaDbGtidSet.parse(text) if is_mariadb else MySqlGtidSet.parse(text)
