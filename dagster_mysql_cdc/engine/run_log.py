"""The run's log as the engine sees it: anything with ``info(str)`` and ``warning(str)``.

The run coordinators (:mod:`.stream_run`, :mod:`.snapshot_run`) report what a run did to the
people watching it (a table stopped, a follow-on window read, rows left out of a snapshot)
through a :class:`RunLog`. In a Dagster run it is the op's ``context.log`` (its
``DagsterLogManager`` has these methods), so the lines appear in the run's event log; elsewhere a
:class:`logging.Logger` does. The engine never imports Dagster (imports go one way: engine →
``dagster_integration``).
"""

from __future__ import annotations

from typing import Protocol


class RunLog(Protocol):
    """Where a run's INFO and WARNING lines go (Dagster's ``context.log``, a ``logging.Logger``)."""

    def info(self, msg: str) -> None:
        """Log ``msg`` at INFO."""

    def warning(self, msg: str) -> None:
        """Log ``msg`` at WARNING."""
