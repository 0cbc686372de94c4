"""The Spark sessions the lake writer runs on: a shared session on a Spark Connect server, or a
local/cluster session whose Python workers run this interpreter.

**One server-side session shared by every run.** A Spark Connect server keeps the Python workers
of a session (the data source's planner, writer and commit daemons) warm between jobs, but not
between sessions: each session has its own job-artifact id, so a new session starts three fresh
Python daemons and imports the data source again (~4 s on 2 cores, measured in
docs/benchmarks.md). A run launched by the Dagster daemon is a new process and, with a random
session id, a new session. :func:`remote_spark_session` therefore connects with a **stable session
id** (``sc://host:port/;session_id=<uuid>``, a Spark Connect connection-string parameter) derived
from the URL and the UTC date, so consecutive runs reattach to the same server-side session and its
warm workers (first write of a run: ~0.2 s instead of ~4 s).

A session the server has closed (idle past ``spark.connect.session.manager.defaultSessionTimeout``,
60 min by default, or released by a client's ``stop()``) cannot be reopened under its id
(``INVALID_HANDLE.SESSION_CLOSED``): the next *generation* of the id is tried, up to
:data:`SHARED_SESSION_GENERATIONS` per day, then a private session with a random id (the
behaviour without sharing). The date in the id bounds the probing: each day starts again at
generation 0. A URL that names its own ``session_id`` is used as it is.

Sharing is safe for this writer: every job passes its tables, outputs and storage settings as data
source options; the session state it relies on is the same for all runs (the registered data
source, ``spark.sql.session.timeZone=UTC``); Spark Connect runs concurrent operations of one
session in their own threads. Never call ``stop()`` on these sessions: it closes the session for
every process using it.
"""

from __future__ import annotations

import atexit
import datetime as dt
import logging
import os
import sys
import uuid
from collections.abc import Iterator
from typing import Any

log = logging.getLogger(__name__)

#: Generations of the shared session id tried per day before falling back to a private session.
SHARED_SESSION_GENERATIONS = 48

#: Spark Connect sessions of this process, per ``sc://`` URL as configured.
_REMOTE_SESSIONS: dict[str, Any] = {}

#: Every Connect session object this process opened (live and failed probes), closed at exit.
_OPENED: list[Any] = []

_NAMESPACE = uuid.UUID("6f1d7c2e-5b0a-4e53-9d8e-2c1b7a9e4f30")  # fixed: ids stable across processes


def shared_session_urls(url: str, today: dt.date | None = None) -> Iterator[str]:
    """Connection strings to try, in order, for the shared session on the server of ``url``.

    Args:
        url: ``sc://host:port`` with optional ``/;key=value;...`` parameters (Spark Connect
            connection string). A URL that already has ``session_id`` yields just itself.
        today: the UTC date in the derived ids (default: now).

    Yields:
        ``url`` with ``;session_id=<uuid5(url, date, generation)>`` for generations
        0 … :data:`SHARED_SESSION_GENERATIONS` - 1.
    """
    head, sep, params = url.partition("/;")
    if any(p.split("=", 1)[0].strip().lower() == "session_id" for p in params.split(";") if p):
        yield url
        return
    day = (today or dt.datetime.now(dt.UTC).date()).isoformat()
    prefix = f"{head}/;{params}" if sep and params else f"{head.rstrip('/')}/;"
    joiner = "" if prefix.endswith(";") else ";"
    for gen in range(SHARED_SESSION_GENERATIONS):
        sid = uuid.uuid5(_NAMESPACE, f"dagster-mysql-cdc|{url}|{day}|{gen}")
        yield f"{prefix}{joiner}session_id={sid}"


def _session_closed(exc: Exception) -> bool:
    return "SESSION_CLOSED" in str(exc)


def _open(url: str):
    """A Connect session on ``url`` after one round trip (sets the session time zone to UTC)."""
    # the Connect client's own builder: it also works in a process that has a classic session
    # (pyspark.sql.SparkSession.builder.remote refuses that: SESSION_ALREADY_EXIST)
    from pyspark.sql.connect.session import SparkSession

    if not _OPENED:
        atexit.register(_close_channels)
    spark = SparkSession.builder.remote(url).create()
    _OPENED.append(spark)
    spark.conf.set("spark.sql.session.timeZone", "UTC")
    return spark


def _close_channels() -> None:
    """At exit, close the gRPC channels of the sessions opened here while the process's threads
    still run (never releasing the server-side session: other processes share it). Left to the
    sessions' finalizers, a process that opened a failed probe and a live session blocks in
    grpc's channel close during interpreter shutdown."""
    for spark in _OPENED:
        try:
            if not spark.client.is_closed:
                spark.client.close()
        except Exception:  # best effort, as pyspark's own finalizer
            pass


def remote_spark_session(url: str):
    """The (process-wide, cached) shared Spark Connect session on ``url`` (``sc://host:port[/;params]``).

    The session runs on the server's long-lived driver: no JVM starts in this process, and runs of
    other processes reuse the same server-side session and its warm Python workers (see the module
    docs). A session the server has dropped (restart, idle timeout) is replaced on the next call.

    Raises:
        pyspark.errors.PySparkException / grpc errors: the server cannot be reached.
    """
    spark = _REMOTE_SESSIONS.get(url)
    if spark is not None:
        try:
            spark.conf.get("spark.sql.session.timeZone")  # one cheap round trip: still alive?
            return spark
        except Exception:
            _REMOTE_SESSIONS.pop(url, None)
    for candidate in shared_session_urls(url):
        try:
            spark = _open(candidate)
            break
        except Exception as exc:
            if not _session_closed(exc) or candidate == url:
                raise
    else:
        log.warning(
            "Spark Connect: the first %d shared session ids of today on %s are closed; using a private "
            "session (its first write starts the server's Python workers again)",
            SHARED_SESSION_GENERATIONS,
            url,
        )
        spark = _open(url)
    _REMOTE_SESSIONS[url] = spark
    return spark


def quiet_spark(spark, level: str) -> None:
    """Set the log level of a classic Spark session's JVM (``SparkContext.setLogLevel``): WARN
    lines such as ``task of very large size`` stay out of the run's console at ``ERROR``.
    Spark Connect sessions log on their server (its log4j2 configuration): nothing to do."""
    from .spark_files import is_connect_session

    if level and not is_connect_session(spark):
        spark.sparkContext.setLogLevel(level.upper())


def use_this_python_for_local_spark(spark_config: dict[str, Any]) -> None:
    """Makes a local Spark's Python workers run this interpreter (``PYSPARK_PYTHON``).

    Spark starts its Python workers with ``PYSPARK_PYTHON`` or else ``python3`` from ``PATH``,
    which in a virtual environment that is not activated (``.venv/bin/dagster dev``, a daemon's
    run worker) is another Python without pyarrow or this package. Only for ``local[...]``
    masters: on a cluster the executors' Python is the cluster's setting. An explicit
    ``PYSPARK_PYTHON`` or ``spark.pyspark.python`` is left alone. Must run before the session starts.
    """
    master = str(spark_config.get("spark.master", "local"))
    if master.startswith("local") and "spark.pyspark.python" not in spark_config:
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)


#: ``CdcLakeResource.spark_remote`` default: ``$CDC_SPARK_REMOTE`` when set (empty: a local
#: Spark), else a Spark Connect server on the runs' host at Spark Connect's default port; when
#: that server is not running, a run falls back to its own local Spark (with a WARNING).
AUTO_REMOTE = "auto"

#: The Spark Connect server ``auto`` looks for (``start-connect-server.sh``'s default port).
DEFAULT_REMOTE_URL = "sc://127.0.0.1:15002"

#: Seconds a run waits for a TCP connection to the Spark Connect server before deciding it is
#: not running (the Connect client itself retries for minutes).
PROBE_TIMEOUT_SECONDS = 3.0


def resolve_remote(configured: str | None) -> tuple[str | None, bool]:
    """``(url, may fall back)`` for a ``spark_remote`` setting: ``auto`` becomes
    ``$CDC_SPARK_REMOTE`` (empty: ``None``, a local Spark) or :data:`DEFAULT_REMOTE_URL`, and may
    fall back to a local Spark; an explicit URL may not (a run fails with a clear error when its
    server is down); ``None``/empty: a local Spark."""
    if configured is None or not str(configured).strip():
        return None, False
    if str(configured).strip().lower() != AUTO_REMOTE:
        return str(configured).strip(), False
    env = os.environ.get("CDC_SPARK_REMOTE")
    if env is not None:
        return (env.strip() or None), True
    return DEFAULT_REMOTE_URL, True


def remote_unreachable(url: str, timeout: float = PROBE_TIMEOUT_SECONDS) -> str | None:
    """Why no Spark Connect server accepts connections at ``url`` (``sc://host:port[/;...]``), or
    ``None`` when one does (a TCP connection within ``timeout`` seconds; the gRPC client would
    otherwise retry a refused connection for minutes before failing)."""
    import socket
    from urllib.parse import urlparse

    parsed = urlparse(url.split("/;", 1)[0])
    host, port = parsed.hostname or "127.0.0.1", parsed.port or 15002
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return None
    except OSError as e:
        return f"{host}:{port}: {e.strerror or e}"
