"""liveness: the heartbeat a capture run writes and the sensor's verdict on a run's worker."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
from types import SimpleNamespace

from dagster_mysql_cdc.dagster_integration.liveness import (
    DEAD_AFTER_SECONDS,
    ORPHAN_GRACE_SECONDS,
    START_TIMEOUT_SECONDS,
    WorkerBeat,
    add_run_tags,
    dead_worker_reason,
    worker_heartbeat,
)
from dagster_mysql_cdc.dagster_integration.protocol import WORKER_TAG


def _run(tags):
    return SimpleNamespace(tags=tags, run_id="0123456789abcdef")


def test_a_beat_round_trips_and_bad_tags_read_as_none():
    beat = WorkerBeat.now()
    assert beat.pid == os.getpid() and beat.host == socket.gethostname()
    assert WorkerBeat.from_tags({WORKER_TAG: beat.to_json()}) == WorkerBeat(
        beat.host, beat.pid, beat.started, round(beat.beat, 3)
    )
    for bad in (None, {}, {WORKER_TAG: ""}, {WORKER_TAG: "{"}, {WORKER_TAG: '{"host": "h"}'}):
        assert WorkerBeat.from_tags(bad) is None


def test_a_live_worker_on_this_host_is_alive_and_a_gone_one_dead():
    now = time.time()
    assert dead_worker_reason(_run({WORKER_TAG: WorkerBeat.now().to_json()}), now - 5, now) is None
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()  # its pid is free now (reuse is told apart by the start time)
    gone = WorkerBeat(socket.gethostname(), child.pid, "1", now)
    reason = dead_worker_reason(_run({WORKER_TAG: gone.to_json()}), now - 5, now)
    assert reason is not None and f"pid {child.pid}" in reason and "is gone" in reason
    # this process under another start time: a reused pid, not the worker
    reused = WorkerBeat(socket.gethostname(), os.getpid(), "no-such-start", now)
    assert "is gone" in (dead_worker_reason(_run({WORKER_TAG: reused.to_json()}), now - 5, now) or "")


def test_a_worker_of_another_host_is_judged_by_its_beat_age():
    now = time.time()
    fresh = WorkerBeat("another-host", 1, None, now - DEAD_AFTER_SECONDS + 5)
    assert dead_worker_reason(_run({WORKER_TAG: fresh.to_json()}), now - 600, now) is None
    stale = WorkerBeat("another-host", 1, None, now - DEAD_AFTER_SECONDS - 5)
    reason = dead_worker_reason(_run({WORKER_TAG: stale.to_json()}), now - 600, now)
    assert reason is not None and "no heartbeat for" in reason


def test_a_run_that_never_beat(tmp_path):
    now = time.time()
    listening = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listening.bind(str(tmp_path / "server.sock"))
    listening.listen(1)
    stale = tmp_path / "stale.sock"  # a SIGKILLed server's socket file: nobody listens on it
    dead_server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    dead_server.bind(str(stale))
    dead_server.close()
    assert stale.exists()

    def info(path):
        return {".dagster/grpc_info": json.dumps({"host": "localhost", "socket": str(path)})}

    alive = info(tmp_path / "server.sock")
    # its launcher's socket is removed, or left behind by a dead server: dead after the grace time
    for gone in (info(tmp_path / "gone.sock"), info(stale)):
        assert dead_worker_reason(_run(gone), now - ORPHAN_GRACE_SECONDS + 5, now) is None
        assert "code server" in (dead_worker_reason(_run(gone), now - ORPHAN_GRACE_SECONDS - 5, now) or "")
    # its launcher is alive, or cannot be told (a TCP port): only the start timeout
    port = {".dagster/grpc_info": json.dumps({"host": "localhost", "port": 4000})}
    for tags in (alive, port, {}):
        assert dead_worker_reason(_run(tags), now - ORPHAN_GRACE_SECONDS - 5, now) is None
        late = dead_worker_reason(_run(tags), now - START_TIMEOUT_SECONDS - 5, now)
        assert late is not None and "did not start the capture" in late
    listening.close()


def test_the_heartbeat_beats_until_the_run_is_finished():
    """Beats from the step's start; after the step (the block) they go on while Dagster ends the
    run in the worker, and stop once the run is finished (or ``after`` seconds past the step)."""
    beats: list[str] = []
    finished = {"run": False}

    class Run:
        @property
        def is_finished(self):
            return finished["run"]

    class Instance:
        def add_run_tags(self, run_id, tags):
            if len(beats) == 2:
                beats.append("refused")
                raise RuntimeError("run storage busy")  # skipped: the next beat tries again
            beats.append(tags[WORKER_TAG])

        def get_run_by_id(self, run_id):
            if len(beats) == 6:
                raise RuntimeError("run storage busy")  # not known: beats on
            return Run()

    with worker_heartbeat(Instance(), "0123456789abcdef", every=0.05):
        assert len(beats) == 1  # the first beat comes before the block runs
        time.sleep(0.3)
    n = len(beats)
    assert n >= 4 and "refused" in beats
    time.sleep(0.4)
    assert len(beats) >= n + 4  # the step ended, the run did not: still beating
    finished["run"] = True
    time.sleep(0.15)
    m = len(beats)
    time.sleep(0.3)
    assert len(beats) == m  # stopped once the run is finished
    assert all(WorkerBeat.from_tags({WORKER_TAG: b}) for b in beats if b != "refused")


class _RunGoingOn:
    """An instance whose run never finishes; it records the beats (``beats``)."""

    def __init__(self, is_ephemeral: bool = False):
        self.is_ephemeral = is_ephemeral
        self.beats: list[str] = []

    def add_run_tags(self, run_id, tags):
        self.beats.append(tags[WORKER_TAG])

    def get_run_by_id(self, run_id):
        class Going:
            is_finished = False

        return Going()


def test_the_heartbeat_stops_after_its_bound_past_the_step():
    instance = _RunGoingOn()
    beats = instance.beats
    with worker_heartbeat(instance, "0123456789abcdef", every=0.05, after=0.3):
        pass
    time.sleep(0.6)
    n = len(beats)
    assert 3 <= n <= 9
    time.sleep(0.3)
    assert len(beats) == n


def test_a_launch_that_died_of_a_signal_is_a_killed_run_not_a_failing_window():
    from dagster._utils.error import SerializableErrorInfo

    from dagster_mysql_cdc.dagster_integration.capture_runs import killed_by_signal

    def err(message, cause=None):
        return SerializableErrorInfo(message, [], "DagsterLaunchFailedError", cause)

    sigkill = "GRPC server: Subprocess for 6b21e896 terminated unexpectedly with exit code -9"
    assert killed_by_signal(err(sigkill))
    assert killed_by_signal(err("Caught an error dequeuing run", cause=err(sigkill)))
    assert not killed_by_signal(err("Subprocess terminated unexpectedly with exit code 1"))
    assert not killed_by_signal(err("DagsterImportError: cannot import definitions.py"))


def test_a_tick_waiting_for_a_run_whose_worker_is_gone_does_not_wait_its_whole_budget():
    """``wait_for_run`` with the settlement's dead-worker check (``run_settlement``): a run left
    ``STARTED`` by a worker that was SIGKILLed is marked failed within a few seconds of the
    wait, not after ``run_wait_seconds`` (a crash campaign's tick took 16 s to find such a run)."""
    import dagster as dg

    from dagster_mysql_cdc.dagster_integration.capture_runs import wait_for_run
    from dagster_mysql_cdc.dagster_integration.run_settlement import _dead_marked_failed

    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    gone = WorkerBeat(socket.gethostname(), child.pid, "1", time.time())
    with dg.instance_for_test() as instance:
        run = instance.add_run(
            dg.DagsterRun(
                job_name="cdc", status=dg.DagsterRunStatus.STARTED, tags={WORKER_TAG: gone.to_json()}
            )
        )
        notes: list[str] = []
        t0 = time.monotonic()
        out = wait_for_run(
            instance, run, 60.0, poll=0.05, check=lambda r: _dead_marked_failed(instance, r, notes)
        )
        waited = time.monotonic() - t0
        assert out.status == dg.DagsterRunStatus.FAILURE, out.status
        assert waited < 30.0, waited  # judged within check_every, not after the 60 s budget
        assert len(notes) == 1 and "is gone" in notes[0] and "marked failed" in notes[0]
        # a live worker's run is waited for as before
        live = instance.add_run(
            dg.DagsterRun(
                job_name="cdc",
                status=dg.DagsterRunStatus.STARTED,
                tags={WORKER_TAG: WorkerBeat.now().to_json()},
            )
        )
        out = wait_for_run(
            instance, live, 2.5, poll=0.05, check=lambda r: _dead_marked_failed(instance, r, notes)
        )
        assert out.status == dg.DagsterRunStatus.STARTED and len(notes) == 1


def test_an_in_memory_instance_gets_no_beat_after_the_step():
    """``DagsterInstance.ephemeral()`` (runs in the sensor's process, watched by nobody else): the
    beats stop with the step, so none races the run's own end events on its SQLite tables."""
    instance = _RunGoingOn(is_ephemeral=True)
    beats = instance.beats
    with worker_heartbeat(instance, "0123456789abcdef", every=0.05):
        time.sleep(0.2)
    n = len(beats)
    assert n >= 2  # beats during the step
    time.sleep(0.3)
    assert len(beats) == n  # none after the block (a beat under way finished within it)


def test_on_an_in_memory_instance_no_tag_write_overlaps_a_beat():
    """Dagster's in-memory run storage refuses a write while another connection writes: the
    run thread's tag writes (``add_run_tags``, e.g. ``record_progress``) and the beats take turns,
    and the block ends only once a beat being written is done."""

    class Slow(_RunGoingOn):
        def __init__(self):
            super().__init__(is_ephemeral=True)
            self.active = 0
            self.most = 0
            self.writes = 0

        def add_run_tags(self, run_id, tags):
            self.active += 1
            self.most = max(self.most, self.active)
            time.sleep(0.01)  # a write that takes a while: another one would overlap it
            if WORKER_TAG in tags:
                self.beats.append(tags[WORKER_TAG])
            else:
                self.writes += 1
            self.active -= 1

    instance = Slow()
    with worker_heartbeat(instance, "0123456789abcdef", every=0.005):
        for i in range(40):
            add_run_tags(instance, "0123456789abcdef", {"progress": str(i)})
    assert instance.active == 0  # no beat still being written when the step ended
    n = len(instance.beats)
    time.sleep(0.1)
    assert len(instance.beats) == n and instance.writes == 40
    assert n >= 3 and instance.most == 1, (n, instance.most)


def _heartbeat_threads(run_id: str = "0123456789abcdef") -> list:
    return [t for t in threading.enumerate() if t.name == f"cdc-heartbeat-{run_id[:8]}" and t.is_alive()]


def _wait_gone(seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while _heartbeat_threads() and time.monotonic() < deadline:
        time.sleep(0.02)
    return not _heartbeat_threads()


def test_the_heartbeat_thread_ends_with_its_run_not_a_beat_later():
    """After the step the thread asks every second whether the run is finished, woken at the
    step's end (not after the 10 s between beats): a process running many captures keeps no
    threads of runs that are over."""
    assert _wait_gone(15.0)  # none left by the tests above

    class Instance(_RunGoingOn):
        finished = False

        def get_run_by_id(self, run_id):
            return SimpleNamespace(is_finished=self.finished)

    instance = Instance()
    with worker_heartbeat(instance, "0123456789abcdef"):  # the default 10 s between beats
        assert len(_heartbeat_threads()) == 1
    time.sleep(0.3)
    assert len(_heartbeat_threads()) == 1  # the step ended, the run did not: still watching it
    instance.finished = True
    assert _wait_gone(2.5)
    assert len(instance.beats) == 1  # the first beat only: none was due


def test_a_heartbeat_whose_run_storage_is_gone_after_the_step_gives_up():
    """A test's instance deleted right after its run: every question fails, and the thread ends
    after ``give_up`` seconds of failures instead of beating on for ``after`` (600 s)."""
    assert _wait_gone(15.0)

    class Gone(_RunGoingOn):
        def get_run_by_id(self, run_id):
            raise RuntimeError("unable to open database file")

    with worker_heartbeat(Gone(), "0123456789abcdef", every=0.05, give_up=0.3):
        pass
    time.sleep(0.1)
    assert len(_heartbeat_threads()) == 1  # failing for 0.1 s: not yet given up
    assert _wait_gone(1.5)


def test_an_in_memory_instance_heartbeat_thread_ends_with_the_step():
    assert _wait_gone(15.0)
    with worker_heartbeat(_RunGoingOn(is_ephemeral=True), "0123456789abcdef"):
        pass
    assert _wait_gone(0.5)
