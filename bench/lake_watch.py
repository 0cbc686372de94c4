"""When each of many tables' changes became visible in a local lake, without loading the run.

``bench/daemon_many_tables.py`` used to wait for a window's tables one after another, each with a
``read_current`` every 0.25 s: once the run had committed the 300 tables, the benchmark still read
them one by one (state + tail, 10-30 ms each on 2 cores), so the figure of the last table included
the benchmark's own reads of the 299 before it, and the reads competed with the run for the CPU.

:class:`LakeWatch` polls each table's Delta logs instead (the newest ``NNNN.json`` entry of its
``state`` and ``state_tail``: a directory scan, microseconds) and notes when each new set of
versions appeared. A Delta commit is visible to every reader once its log entry exists. Only once
every table has moved (or at the timeout) does it read them, each **at the versions noted**
(``visible(key, versions)``, a time-travel read): a table's change was visible from the first poll
that saw versions whose read shows it. The reads happen after the run's commits, not between
them; a table whose new versions do not show the change yet (e.g. a commit that only created its
tail) is watched on.

A change is timed by its commit, not by the poll that saw it: the modification time of the newest
log entry among the versions that show it (the moment the last of them was written, after which
any reader sees the change), converted to :attr:`LakeWatch.clock`. So the watch can poll slowly
(``poll``, 0.5 s by default) without adding its interval to the figure: scanning 600 logs costs
about 50 ms of CPU, and at 20 scans a second (the old 0.05 s) the watch took half of one of the
machine's two cores from the run it was timing.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Hashable, Iterable

Versions = tuple[int | None, ...]


def newest_version(table_dir: str) -> int | None:
    """The newest committed version of the Delta table at ``table_dir`` (its highest
    ``_delta_log/<20 digits>.json``), or ``None`` when it has no log yet."""
    try:
        names = os.listdir(os.path.join(table_dir, "_delta_log"))
    except FileNotFoundError:
        return None
    versions = [int(n[:-5]) for n in names if n.endswith(".json") and n[:-5].isdigit()]
    return max(versions, default=None)


class LakeWatch:
    """Wait until every watched key's change is visible; see the module docs.

    Args:
        tables: per key, the local directories of the Delta tables whose commits can make the
            change visible (e.g. a lake table's ``state`` and ``state_tail``). Their versions when
            the watch is made are the baseline: make it before the change is committed.
        visible: ``visible(key, versions)``: whether a read of the key's tables at ``versions``
            (one per directory, ``None``: no table yet) shows its change.
        poll: seconds between two scans of the logs (they only find the versions to read: a
            change is timed by its commit entry's modification time).
        clock: the time source of the returned times (``time.monotonic``).
    """

    def __init__(
        self,
        tables: dict[Hashable, Iterable[str]],
        visible: Callable[[Hashable, Versions], bool],
        poll: float = 0.5,
        clock: Callable[[], float] = time.monotonic,
    ):
        self.tables = {k: tuple(v) for k, v in tables.items()}
        self.visible = visible
        self.poll = poll
        self.clock = clock
        self.read_seconds = 0.0
        self.reads = 0
        self._last = {k: self.versions(k) for k in self.tables}

    def committed_at(self, key: Hashable, versions: Versions) -> float | None:
        """When the newest log entry of ``versions`` (one per table of ``key``) was written, on
        :attr:`clock` (``None``: an entry cannot be read)."""
        newest = None
        for d, v in zip(self.tables[key], versions):
            if v is None:
                continue
            try:
                m = os.stat(os.path.join(d, "_delta_log", f"{v:020d}.json")).st_mtime
            except OSError:
                return None
            newest = m if newest is None else max(newest, m)
        if newest is None:
            return None
        return self.clock() - (time.time() - newest)

    def versions(self, key: Hashable) -> Versions:
        """The newest version of each of ``key``'s tables."""
        return tuple(newest_version(d) for d in self.tables[key])

    def wait(self, timeout: float) -> dict[Hashable, float]:
        """Poll until every key is visible or ``timeout`` seconds passed; returns, per key seen,
        the :attr:`clock` time of the poll from which it was visible (keys missing: not visible
        in time)."""
        seen: dict[Hashable, float] = {}
        noted: dict[Hashable, list[tuple[float, Versions]]] = {k: [] for k in self.tables}
        deadline = self.clock() + timeout
        while True:
            pending = [k for k in self.tables if k not in seen]
            for key in pending:
                at, now = self.clock(), self.versions(key)
                if now != self._last[key]:
                    noted[key].append((at, now))
                    self._last[key] = now
            timed_out = self.clock() >= deadline
            if timed_out or all(noted[k] for k in pending):
                for key in pending:
                    for at, versions in noted[key]:
                        t0 = time.monotonic()
                        shown = self.visible(key, versions)
                        self.read_seconds += time.monotonic() - t0
                        self.reads += 1
                        if shown:
                            written = self.committed_at(key, versions)
                            seen[key] = at if written is None else min(at, written)
                            break
                    noted[key] = []
                if timed_out or len(seen) == len(self.tables):
                    return seen
            time.sleep(self.poll)
