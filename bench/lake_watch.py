"""When each of many tables' changes became visible in a local lake, without re-reading every table.

``bench/daemon_many_tables.py`` used to wait for a window's tables one after another, each with a
``read_current`` every 0.25 s: once the run had committed the 300 tables, the benchmark still read
them one by one (state + tail, 10-30 ms each on 2 cores), so the figure of the last table included
the benchmark's own reads of the 299 before it, and the reads competed with the run for the CPU.

:class:`LakeWatch` polls each table's Delta logs instead (the newest ``NNNN.json`` entry of its
``state`` and ``state_tail``: a directory scan, microseconds) and reads a table only when one of
its logs has a new entry. A Delta commit is visible to every reader once its log entry exists, so a
table's change is visible from the poll that first saw the versions of a read that shows it. The
time is exact to the poll interval when the read saw the versions the poll saw (the logs did not
move during the read); otherwise the end of the read is taken (an upper bound).
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
            change visible (e.g. a lake table's ``state`` and ``state_tail``).
        visible: ``visible(key)``: whether a read of the lake shows the key's change now.
        poll: seconds between two scans of the logs.
        clock: the time source of the returned times (``time.monotonic``).
    """

    def __init__(
        self,
        tables: dict[Hashable, Iterable[str]],
        visible: Callable[[Hashable], bool],
        poll: float = 0.05,
        clock: Callable[[], float] = time.monotonic,
    ):
        self.tables = {k: tuple(v) for k, v in tables.items()}
        self.visible = visible
        self.poll = poll
        self.clock = clock
        self.read_seconds = 0.0
        self.reads = 0
        #: the versions each key's logs had when the watch started (a read is due at the first poll)
        self._last: dict[Hashable, Versions | None] = dict.fromkeys(self.tables)

    def versions(self, key: Hashable) -> Versions:
        """The newest version of each of ``key``'s tables."""
        return tuple(newest_version(d) for d in self.tables[key])

    def wait(self, timeout: float) -> dict[Hashable, float]:
        """Poll until every key is visible or ``timeout`` seconds passed; returns, per key seen,
        the :attr:`clock` time from which it was visible (keys missing: not visible in time)."""
        seen: dict[Hashable, float] = {}
        deadline = self.clock() + timeout
        while len(seen) < len(self.tables):
            for key in self.tables:
                if key in seen:
                    continue
                at = self.clock()
                now = self.versions(key)
                if now == self._last[key]:
                    continue
                t0 = time.monotonic()
                shown = self.visible(key)
                self.read_seconds += time.monotonic() - t0
                self.reads += 1
                if not shown:
                    self._last[key] = now
                    continue
                seen[key] = at if self.versions(key) == now else self.clock()
            if len(seen) == len(self.tables) or self.clock() >= deadline:
                break
            time.sleep(self.poll)
        return seen
