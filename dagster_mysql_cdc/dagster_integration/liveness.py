"""Whether a capture run's worker is still alive: the run's heartbeat and the sensor's verdict.

Dagster's default run launcher does not check run workers' health (``check_run_worker_health``
is not implemented there, so run monitoring cannot tell a dead worker from a slow one): a run
whose worker died with the process that launched it (``dagster dev`` or ``dagster-daemon`` and its
code server SIGKILLed, a lost machine) stays ``STARTING``/``STARTED`` forever, and a sensor that
waits for its run would wait forever (Dagster issues #8312, #17448). So every capture run keeps a
heartbeat in its run tags, and the binlog sensor judges the run it waits for:

- the run writes :data:`.protocol.WORKER_TAG` (its host, pid, the process's start time and the
  time of the beat) when its step starts and every :data:`HEARTBEAT_SECONDS` after
  (:func:`worker_heartbeat`, a thread of its own: beats go on while the run reads or writes, and
  after its step until the run is finished, up to :data:`AFTER_STEP_SECONDS`);
- the sensor (:func:`dead_worker_reason`) calls the run dead when its worker's process is gone
  from this host (same host name: the pid is checked, with its start time against pid reuse),
  when the beat is older than :data:`DEAD_AFTER_SECONDS` (another host, or a worker that hangs),
  or, before any beat, when the code server that launched it is gone from this host (nobody listens
  on its socket) or no beat came for :data:`START_TIMEOUT_SECONDS`;
- a dead run is reported failed (``UNEXPECTED_TERMINATION``, like run monitoring) and the sensor
  retries its window at once (a killed run is not a failing window, see ``capture_runs.run_died``).

Nothing is lost or duplicated if the verdict is wrong (a live worker taken for dead): the retry
writes with the same Delta transaction identities, so whichever commits second skips.
"""

from __future__ import annotations

import json
import os
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass
from typing import Any

from .protocol import WORKER_TAG

#: Seconds between a run's heartbeats.
HEARTBEAT_SECONDS = 10.0
#: A beat older than this: the worker is dead (or hangs).
DEAD_AFTER_SECONDS = 60.0
#: How long a run's beats go on after its step ended while Dagster ends the run in the worker.
AFTER_STEP_SECONDS = 600.0
#: After the step, how often the heartbeat thread asks whether its run is finished (it ends then).
AFTER_STEP_POLL_SECONDS = 1.0
#: A run that never beat this long after it was launched: its worker never got to run the capture.
START_TIMEOUT_SECONDS = 300.0
#: A run that never beat, launched by a code server gone from this host, is dead after this long
#: (the worker process starts, imports and loads the code location before its first beat).
ORPHAN_GRACE_SECONDS = 30.0


def _process_start(pid: int) -> str | None:
    """The start time of process ``pid`` (Linux ``/proc/<pid>/stat`` field 22, clock ticks since
    boot), ``None`` where there is no ``/proc``."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            stat = fh.read().decode(errors="replace")
    except OSError:
        return None
    # the command name (field 2) is in parentheses and may contain spaces: split after it
    return stat.rsplit(")", 1)[-1].split()[19]


def _alive(pid: int, started: str | None) -> bool:
    """Whether process ``pid`` runs on this host and is the one that started at ``started``."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # it exists (another user's)
    return started is None or _process_start(pid) in (None, started)


@dataclass(frozen=True)
class WorkerBeat:
    """A run's :data:`.protocol.WORKER_TAG`: ``host`` (``socket.gethostname()``), ``pid``,
    ``started`` (the process's start time, see :func:`_process_start`; ``None`` off Linux) and
    ``beat`` (Unix seconds of the last heartbeat)."""

    host: str
    pid: int
    started: str | None
    beat: float

    def to_json(self) -> str:
        return json.dumps(
            {"host": self.host, "pid": self.pid, "started": self.started, "beat": round(self.beat, 3)},
            separators=(",", ":"),
            sort_keys=True,
        )

    @classmethod
    def from_tags(cls, tags: Any) -> WorkerBeat | None:
        """The beat in a run's tags (``None``: none, or unreadable)."""
        raw = (tags or {}).get(WORKER_TAG)
        if not raw:
            return None
        try:
            d = json.loads(raw)
            return cls(str(d["host"]), int(d["pid"]), d.get("started"), float(d["beat"]))
        except (ValueError, KeyError, TypeError):
            return None

    @classmethod
    def now(cls) -> WorkerBeat:
        """This process's beat, now."""
        pid = os.getpid()
        return cls(socket.gethostname(), pid, _process_start(pid), time.time())


#: Serialises this process's run-tag writes on an in-memory instance (see :func:`add_run_tags`).
_IN_MEMORY_TAGS_LOCK = threading.Lock()


def _in_memory(instance: Any) -> bool:
    """Whether ``instance`` is an in-memory one (``DagsterInstance.ephemeral()``)."""
    return getattr(instance, "is_ephemeral", False) is True


def _tag_writes(instance: Any) -> AbstractContextManager[Any]:
    """The lock run-tag writes on ``instance`` take (:func:`add_run_tags`): none on a persistent
    instance."""
    return _IN_MEMORY_TAGS_LOCK if _in_memory(instance) else nullcontext()


def add_run_tags(instance: Any, run_id: str, tags: dict[str, str]) -> None:
    """``instance.add_run_tags(run_id, tags)``; on an in-memory instance serialised with this
    process's other run-tag writes (the heartbeat thread's and the run thread's): Dagster's
    in-memory run storage vends a connection per call to one shared-cache SQLite database, which
    refuses a write while another connection writes ("database table is locked") instead of
    waiting, so a beat colliding with the run's ``record_progress`` would fail the run.

    Raises:
        whatever the run storage raises.
    """
    with _tag_writes(instance):
        instance.add_run_tags(run_id, tags)


@contextmanager
def worker_heartbeat(
    instance: Any,
    run_id: str,
    every: float = HEARTBEAT_SECONDS,
    after: float = AFTER_STEP_SECONDS,
    give_up: float = DEAD_AFTER_SECONDS,
) -> Iterator[None]:
    """Beat in run ``run_id``'s tags while the block runs: once at once, then every ``every``
    seconds from a daemon thread. A beat the run storage refuses is skipped (the next one tries
    again); the first one raises (the run cannot be watched).

    The beats go on after the block (the step) ends, until the run is finished, for up to
    ``after`` seconds: Dagster still has the run's end to do in the worker (the compute logs
    captured and, with a remote compute log manager, uploaded; the run's end events), and a
    worker alive there is not dead. A run whose end took 60 s in Dagster's compute-log clean-up
    was marked failed by the sensor after its step had succeeded (a test run in a thread of
    pytest's process). From the block's end the thread asks every
    :data:`AFTER_STEP_POLL_SECONDS` (or ``every``, if shorter) whether the run is finished and
    ends within that of it, and it ends when the run storage has answered no question for
    ``give_up`` seconds after the block (seconds; default :data:`DEAD_AFTER_SECONDS`, past which
    the sensor would call the worker dead anyway: e.g. a test's instance deleted after its run),
    so a process that runs many captures (tests, ``execute_in_process`` in a script) keeps no
    heartbeat threads of runs that are over. A daemon-launched run's thread dies with its process.

    Not after the block on an in-memory instance (``DagsterInstance.ephemeral()``, as
    :func:`.local.run_sensor_ticks` runs captures in process): no other process watches it, and
    its SQLite tables refuse a reader while another connection writes ("database table is
    locked"), so a beat there could fail the run's own end events. There the block's end also
    waits for a beat being written (:func:`add_run_tags`' lock), so none is in flight when
    Dagster ends the step and the run, and the thread ends at once."""
    in_memory = _in_memory(instance)
    if in_memory:
        after = 0.0
    add_run_tags(instance, run_id, {WORKER_TAG: WorkerBeat.now().to_json()})
    step_ended: list[float] = []
    ended = threading.Event()  # set with step_ended: the thread's wait ends at once
    poll = min(every, AFTER_STEP_POLL_SECONDS)

    def beat() -> None:
        last = time.monotonic()
        failing_since: float | None = None  # after the step: since when the run storage fails
        while True:
            if step_ended:
                time.sleep(poll)
            else:
                ended.wait(every)
            if step_ended:  # end with the run, past ``after``, or after ``give_up`` s of failures
                if in_memory or time.time() - step_ended[0] > after:
                    return
                try:
                    run = instance.get_run_by_id(run_id)
                except Exception:  # noqa: BLE001 - a busy run storage: beat on, ask again next time
                    failing_since = time.monotonic() if failing_since is None else failing_since
                    if time.monotonic() - failing_since > give_up:
                        return
                else:
                    failing_since = None
                    if run is None or run.is_finished:
                        return
                if time.monotonic() - last < every:
                    continue
            try:
                with _tag_writes(instance):
                    if in_memory and step_ended:  # the step ended while this beat waited for the lock
                        return
                    instance.add_run_tags(run_id, {WORKER_TAG: WorkerBeat.now().to_json()})
                last = time.monotonic()
            except Exception:  # a busy or restarting run storage: the next beat tries again
                continue

    thread = threading.Thread(target=beat, name=f"cdc-heartbeat-{run_id[:8]}", daemon=True)
    thread.start()
    try:
        yield
    finally:
        with _tag_writes(instance):  # in memory: a beat being written finishes first; none starts after
            step_ended.append(time.time())
            ended.set()


def _launcher_socket_gone(tags: Any) -> bool:
    """Whether the code server that launched the run (Dagster's ``.dagster/grpc_info`` tag: a
    Unix socket of this host) is gone: its socket file removed, or nobody listens on it (a
    SIGKILLed server leaves the file). ``False`` when it cannot be told (a TCP port, another
    host, no tag, a probe that times out)."""
    raw = (tags or {}).get(".dagster/grpc_info")
    try:
        info = json.loads(raw) if raw else {}
    except ValueError:
        return False
    path = info.get("socket")
    host = info.get("host")
    if not path or host not in (None, "localhost", "127.0.0.1", socket.gethostname()):
        return False
    # a SIGKILLed server leaves its socket file behind: gone is "nobody listens on it"
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    probe.settimeout(2.0)
    try:
        probe.connect(path)
    except (FileNotFoundError, ConnectionRefusedError):
        return True
    except OSError:  # a timeout, a full backlog, no permission: cannot be told
        return False
    finally:
        probe.close()
    return False


def dead_worker_reason(run: Any, launched: float, now: float | None = None) -> str | None:
    """Why the worker of ``run`` (a ``DagsterRun`` in ``STARTING``/``STARTED``, launched at Unix
    time ``launched``: its start time, or when it left the run queue) is dead, or ``None`` while
    it may be alive (see the module docs)."""
    now = time.time() if now is None else now
    beat = WorkerBeat.from_tags(run.tags)
    if beat is not None:
        if beat.host == socket.gethostname() and not _alive(beat.pid, beat.started):
            return f"its worker (pid {beat.pid} on {beat.host}) is gone"
        if now - beat.beat > DEAD_AFTER_SECONDS:
            return f"its worker (pid {beat.pid} on {beat.host}) sent no heartbeat for {now - beat.beat:.0f} s"
        return None
    if now - launched > ORPHAN_GRACE_SECONDS and _launcher_socket_gone(run.tags):
        return "the code server that launched it is gone and its worker never started the capture"
    if now - launched > START_TIMEOUT_SECONDS:
        return f"its worker did not start the capture within {START_TIMEOUT_SECONDS:.0f} s"
    return None


def mark_dead(instance: Any, run: Any, reason: str) -> Any:
    """Report ``run`` failed because its worker is dead (``UNEXPECTED_TERMINATION``, as Dagster's
    run monitoring does), unless it finished meanwhile; returns the run as stored now."""
    from dagster._core.events import JobFailureData, RunFailureReason

    current = instance.get_run_by_id(run.run_id) or run
    if current.is_finished:
        return current
    instance.report_run_failed(
        current,
        message=f"dagster-mysql-cdc: the binlog sensor marked this run failed: {reason}.",
        job_failure_data=JobFailureData(error=None, failure_reason=RunFailureReason.UNEXPECTED_TERMINATION),
    )
    return instance.get_run_by_id(run.run_id) or current
