"""Shared fixtures: the real MariaDB and SeaweedFS started by infra/, and a local Spark session.

Nothing here mocks a service. The integration fixtures fail (not skip) when a service is down:
run the tests with `make test`, which starts them.
"""

from __future__ import annotations

import os
import subprocess
import threading
import time
import uuid
from pathlib import Path

import pymysql
import pytest

from dagster_mysql_cdc.events import BinlogPosition
from dagster_mysql_cdc.sink.storage import StorageSettings
from dagster_mysql_cdc.source.connection import ConnectionSettings

ROOT = Path(__file__).resolve().parents[1]


def _restore_interrupt_signals() -> None:
    """Give SIGINT and SIGTERM their default meaning when the suite was started with them ignored
    (``nohup``, ``cmd &`` in a non-interactive shell, some CI runners). Dagster maps SIGTERM to
    SIGINT's handler (``setup_interrupt_handlers``), so an ignored SIGINT makes SIGTERM ignored
    too, and the processes a run starts inherit that: the ``tail -F`` of each in-process run's
    compute-log capture then ignores Dagster's ``terminate()`` and the run's end waits 2 x 30 s
    for it (a run marked failed by the sensor after its step succeeded, 60 s lost per run)."""
    import signal

    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    if signal.getsignal(signal.SIGTERM) is signal.SIG_IGN:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)


_restore_interrupt_signals()


@pytest.fixture(autouse=True)
def _checkpoints_written():
    """After each test, the Delta checkpoints its commits queued are written
    (``sink/checkpoints.py``: a background thread), so none lands in the next test's lake."""
    yield
    from dagster_mysql_cdc.sink.checkpoints import CHECKPOINTS

    CHECKPOINTS.pause(False)
    CHECKPOINTS.drain(60)


def env(name: str, default: str) -> str:
    return os.environ.get(name, default)


MYSQL_HOST = env("CDC_MYSQL_HOST", "127.0.0.1")
MYSQL_PORT = int(env("CDC_MYSQL_PORT", "3307"))
ROOT_PASSWORD = env("CDC_MYSQL_ROOT_PASSWORD", "root-secret")
CDC_USER = env("CDC_MYSQL_USER", "cdc")
CDC_PASSWORD = env("CDC_MYSQL_PASSWORD", "cdc-secret")
S3_ENDPOINT = env("CDC_S3_ENDPOINT", "http://127.0.0.1:8333")
S3_BUCKET = env("CDC_S3_BUCKET", "lake")
#: The Spark Connect server of infra/spark_connect.sh (make infra), used by tests/test_spark_connect.py.
#: Every other test writes with a local Spark: CDC_SPARK_REMOTE is cleared for this process and the
#: `dg`/`dagster` subprocesses it starts (the inventory code location reads it).
SPARK_REMOTE = os.environ.get("CDC_SPARK_REMOTE") or (
    f"sc://127.0.0.1:{os.environ['CDC_SPARK_CONNECT_PORT']}"
    if os.environ.get("CDC_SPARK_CONNECT", "1") != "0" and os.environ.get("CDC_SPARK_CONNECT_PORT")
    else ""
)
os.environ["CDC_SPARK_REMOTE"] = ""


#: Environment of the `dg` / `dagster` subprocesses (the values infra/env.sh exports).
SERVICE_ENV = {
    "CDC_MYSQL_HOST": MYSQL_HOST,
    "CDC_MYSQL_PORT": str(MYSQL_PORT),
    "CDC_MYSQL_USER": CDC_USER,
    "CDC_MYSQL_PASSWORD": CDC_PASSWORD,
    "CDC_S3_ENDPOINT": S3_ENDPOINT,
    "AWS_ACCESS_KEY_ID": os.environ.get("AWS_ACCESS_KEY_ID", "cdc"),
    "AWS_SECRET_ACCESS_KEY": os.environ.get("AWS_SECRET_ACCESS_KEY", "cdc-secret"),
    "CDC_SPARK_REMOTE": "",
}


def root_settings(port: int = MYSQL_PORT) -> ConnectionSettings:
    return ConnectionSettings(host=MYSQL_HOST, port=port, user="root", password=ROOT_PASSWORD)


def cdc_settings(port: int = MYSQL_PORT) -> ConnectionSettings:
    return ConnectionSettings(host=MYSQL_HOST, port=port, user=CDC_USER, password=CDC_PASSWORD)


def root_connect(port: int = MYSQL_PORT, **kw) -> pymysql.connections.Connection:
    try:
        return pymysql.connect(**{**root_settings(port).pymysql_kwargs(), **kw})
    except pymysql.err.OperationalError as e:
        pytest.fail(
            f"MariaDB at {MYSQL_HOST}:{port} is not reachable ({e}); start it with `make infra`",
            pytrace=False,
        )


def other_application(database: str, stop: threading.Event, every: float = 0.05) -> threading.Thread:
    """Another application on the captured server: a thread that creates ``database`` (not
    captured) and commits one insert into it every ``every`` seconds until ``stop`` is set, then
    drops it (join the thread to wait for that)."""
    c = root_connect()
    with c.cursor() as cur:
        cur.execute(f"CREATE DATABASE {database}")
        cur.execute(f"CREATE TABLE {database}.o (id INT AUTO_INCREMENT PRIMARY KEY, v INT)")

    def write():
        try:
            with c.cursor() as cur:
                while not stop.is_set():
                    cur.execute(f"INSERT INTO {database}.o (v) VALUES (1)")
                    c.commit()
                    time.sleep(every)
        finally:
            try:
                with c.cursor() as cur:
                    cur.execute(f"DROP DATABASE IF EXISTS {database}")
            finally:
                c.close()

    writer = threading.Thread(target=write, daemon=True)
    writer.start()
    return writer


def master_position() -> BinlogPosition:
    """The server's current binlog position (``SHOW MASTER STATUS``) with its GTID position."""
    conn = root_connect()
    try:
        with conn.cursor() as cur:
            cur.execute("SHOW MASTER STATUS")
            f, p = cur.fetchone()[:2]
            cur.execute("SELECT @@GLOBAL.gtid_binlog_pos")
            g = cur.fetchone()[0]
    finally:
        conn.close()
    return BinlogPosition(f, int(p), g or None)


def run_infra(*args: str) -> None:
    subprocess.run(["bash", *args], cwd=ROOT, check=True)


@pytest.fixture
def files_instance():
    """A Dagster instance on SQLite files (a temporary ``DAGSTER_HOME``), as a daemon's. For tests
    that poll the instance while a run writes to it from another thread: an in-memory instance's
    shared-cache SQLite refuses a reader while another connection writes ("database table is
    locked") instead of waiting, which failed the poll or the run's own event write now and then."""
    import dagster as dg

    with dg.instance_for_test() as instance:
        yield instance


@pytest.fixture
def root_conn():
    conn = root_connect()
    yield conn
    conn.close()


@pytest.fixture(scope="session")
def inventory_db():
    """(Re)load Debezium's inventory sample once per session; returns the database name."""
    run_infra("infra/load_dataset.sh", "inventory")
    return "inventory"


@pytest.fixture(scope="session")
def sakila_db():
    """Sakila (infra/datasets), loaded once if absent; returns the database name. Tests copy the
    tables they change into a scratch database (:func:`sakila_copy`)."""
    conn = root_connect()
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA = 'sakila'")
            loaded = cur.fetchone()[0] > 0
    finally:
        conn.close()
    if not loaded:
        run_infra("infra/load_dataset.sh", "sakila")
    return "sakila"


def sakila_copy(conn: pymysql.connections.Connection, sakila: str, db: str) -> list[str]:
    """Copy every base table of ``sakila`` into the empty database ``db`` as it is: the
    ``SHOW CREATE TABLE`` of each (foreign keys included), its rows, then its triggers
    (``SHOW CREATE TRIGGER``). ``conn``: a root connection. Returns the table names."""
    with conn.cursor() as cur:
        cur.execute(
            "SELECT TABLE_NAME FROM information_schema.TABLES WHERE TABLE_SCHEMA = %s "
            "AND TABLE_TYPE = 'BASE TABLE' ORDER BY TABLE_NAME",
            (sakila,),
        )
        tables = [r[0] for r in cur.fetchall()]
        cur.execute(f"USE `{db}`")
        cur.execute("SET SESSION foreign_key_checks = 0")
        for t in tables:
            cur.execute(f"SHOW CREATE TABLE `{sakila}`.`{t}`")
            cur.execute(cur.fetchone()[1])
            cur.execute(f"INSERT INTO `{t}` SELECT * FROM `{sakila}`.`{t}`")
        cur.execute("SET SESSION foreign_key_checks = 1")
        cur.execute(
            "SELECT TRIGGER_NAME FROM information_schema.TRIGGERS WHERE TRIGGER_SCHEMA = %s", (sakila,)
        )
        for (name,) in cur.fetchall():
            cur.execute(f"SHOW CREATE TRIGGER `{sakila}`.`{name}`")
            cur.execute(cur.fetchone()[2])
    return tables


@pytest.fixture(scope="session")
def spark():
    """A local Spark session with the library's default configuration (one JVM per test run)."""
    from dagster_pyspark import LazyPySparkResource

    from dagster_mysql_cdc import DEFAULT_SPARK_CONFIG
    from dagster_mysql_cdc.sink.spark_session import use_this_python_for_local_spark

    use_this_python_for_local_spark(DEFAULT_SPARK_CONFIG)
    res = LazyPySparkResource(spark_config=DEFAULT_SPARK_CONFIG)
    session = res.spark_session
    yield session
    session.stop()


@pytest.fixture(scope="session")
def spark_remote() -> str:
    """The URL of the Spark Connect server of infra/spark_connect.sh (``make infra``). Skips when
    the server is turned off (``CDC_SPARK_CONNECT=0``); fails when it should run and does not."""
    from dagster_mysql_cdc.sink.spark_session import remote_unreachable

    if not SPARK_REMOTE:
        pytest.skip("no Spark Connect server (CDC_SPARK_CONNECT=0)")
    why = remote_unreachable(SPARK_REMOTE, timeout=2)
    if why is not None:
        pytest.fail(
            f"the Spark Connect server {SPARK_REMOTE} is not running ({why}); start it with `make infra` "
            "(infra/spark_connect.sh start), or set CDC_SPARK_CONNECT=0 to skip the Spark Connect tests",
            pytrace=False,
        )
    return SPARK_REMOTE


@pytest.fixture(scope="session")
def connect_spark(spark_remote):
    """The shared Spark Connect session on the test server (one per test run, as a run's)."""
    from dagster_mysql_cdc.sink.spark_session import remote_spark_session

    return remote_spark_session(spark_remote)


#: The two kinds of Spark session every Spark path must work on: a classic local session (a JVM
#: in this process) and a Spark Connect session (the README default, ``spark_remote="auto"``).
SPARK_FLAVOURS = ("local", "connect")


@pytest.fixture(params=SPARK_FLAVOURS, ids=("local_spark", "spark_connect"))
def spark_flavour(request) -> str:
    """Each Spark flavour (:data:`SPARK_FLAVOURS`) in turn."""
    return request.param


@pytest.fixture
def any_spark(spark_flavour, request):
    """A Spark session of each flavour: the local one (``spark``), then the Spark Connect one."""
    return request.getfixturevalue("spark" if spark_flavour == "local" else "connect_spark")


@pytest.fixture
def spark_lake_options(spark_flavour, request) -> dict:
    """``CdcLakeResource`` options of each flavour: a local Spark (``spark_remote=None``), then
    the Spark Connect server (``spark_remote=<its URL>``)."""
    if spark_flavour == "local":
        return {"spark_remote": None}
    return {"spark_remote": request.getfixturevalue("spark_remote")}


@pytest.fixture
def local_storage(tmp_path) -> StorageSettings:
    return StorageSettings(base_uri=str(tmp_path / "lake"))


def s3_settings(prefix: str) -> StorageSettings:
    return StorageSettings(
        base_uri=f"s3://{S3_BUCKET}/{prefix}",
        s3_endpoint_url=S3_ENDPOINT,
        s3_access_key_id=env("AWS_ACCESS_KEY_ID", "cdc"),
        s3_secret_access_key=env("AWS_SECRET_ACCESS_KEY", "cdc-secret"),
        s3_region=env("AWS_REGION", "us-east-1"),
    )


@pytest.fixture
def s3_storage() -> StorageSettings:
    """A fresh prefix in the SeaweedFS bucket (real S3 API on loopback)."""
    st = s3_settings(f"test-{uuid.uuid4().hex[:12]}")
    try:
        st.ensure_root()
    except Exception as e:
        pytest.fail(
            f"SeaweedFS S3 at {S3_ENDPOINT} is not usable ({e}); start it with `make infra`", pytrace=False
        )
    return st


@pytest.fixture(params=["local", "s3"])
def storage(request, tmp_path) -> StorageSettings:
    """Both lake flavours: the embedded local filesystem and the S3 API (SeaweedFS)."""
    if request.param == "local":
        return StorageSettings(base_uri=str(tmp_path / "lake"))
    return request.getfixturevalue("s3_storage")


# the lake of the downstream read tests (session-scoped: built once for the files that use it)
from downstream_lake import downstream_lake  # noqa: E402, F401
