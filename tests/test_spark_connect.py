"""The lake written through the Spark Connect server of infra/spark_connect.sh (``make infra``)
equals the lake a local Spark writes: snapshot, inserts, updates and deletes of a keyed and a
keyless table, and a window large enough for several payload chunks. The server is the real one
(no mock); CDC_SPARK_CONNECT=0 (no server) skips these tests. The other Spark paths run on both
kinds of session in their own test files (conftest's ``spark_flavour``)."""

import socket
from collections import Counter

import pytest
from lake_utils import live_state_rows, read_delta, source_rows
from sensor_harness import SensorDriven, capture_resource, scratch_database

from dagster_mysql_cdc.sink.read import read_current
from dagster_mysql_cdc.sink.state_rows import live_multiset
from dagster_mysql_cdc.sink.storage import StorageSettings

pytestmark = [pytest.mark.integration, pytest.mark.spark]


@pytest.fixture(scope="module")
def remote(spark_remote) -> str:
    return spark_remote


def rows(dicts: list[dict]) -> Counter:
    """Rows as a multiset (column order aside)."""
    return Counter(tuple(sorted(d.items())) for d in dicts)


def test_window_through_spark_connect_equals_local_spark(tmp_path, remote):
    with scratch_database("sconn") as (db, conn):
        with conn.cursor() as cur:
            cur.execute(f"CREATE TABLE {db}.k (id INT PRIMARY KEY, v VARCHAR(20), d DECIMAL(8,2))")
            cur.execute(f"CREATE TABLE {db}.nk (a INT, b VARCHAR(10))")
            cur.execute(f"INSERT INTO {db}.k VALUES " + ",".join(f"({i},'v{i}',{i}.25)" for i in range(200)))
            cur.execute(f"INSERT INTO {db}.nk VALUES (1,'x'),(1,'x'),(2,'y')")
        mysql = capture_resource(db)
        tables = mysql.discover_tables()
        lakes = {
            "connect": SensorDriven(mysql, str(tmp_path / "connect"), tables, spark_remote=remote),
            "local": SensorDriven(
                mysql.model_copy(update={"server_id": mysql.server_id + 1}), str(tmp_path / "local"), tables
            ),
        }
        for cdc in lakes.values():
            cdc.ticks()  # initial snapshot
        with conn.cursor() as cur:
            # ~60k rows: several payload chunks per Spark job (staged Arrow files on this host)
            cur.execute(
                f"INSERT INTO {db}.k SELECT seq, CONCAT('w', seq), seq / 4 FROM {db}.seq_1000_to_60999"
            )
            cur.execute(f"UPDATE {db}.k SET v = 'upd' WHERE id < 50")
            cur.execute(f"DELETE FROM {db}.k WHERE id BETWEEN 100 AND 149")
            cur.execute(f"DELETE FROM {db}.nk WHERE a = 1 LIMIT 1")
            cur.execute(f"INSERT INTO {db}.nk VALUES (3,'z')")
        for cdc in lakes.values():
            log = cdc.ticks()
            assert all(r.success for r in log.runs)
        base = {name: StorageSettings(base_uri=str(tmp_path / name)) for name in lakes}
        for table, key in (("k", ["id"]), ("nk", ["a", "b"])):
            expected, _ = source_rows(db, table)
            got = {
                name: live_state_rows(base[name], base[name].uri(db, db, table, "state"), key)
                for name in lakes
            }
            assert got["connect"] == got["local"]
            assert got["connect"] == sorted(expected, key=lambda r: tuple(r[k] for k in key))
            logs = {
                name: read_delta(base[name], base[name].uri(db, db, table, "changelog")) for name in lakes
            }
            assert logs["connect"].num_rows == logs["local"].num_rows
            assert sorted(logs["connect"].column("op").to_pylist()) == sorted(
                logs["local"].column("op").to_pylist()
            )


def test_readme_defaults_compact_by_spark_tasks_on_spark_connect(tmp_path, remote, monkeypatch):
    """Issue "Nothing lost": with the README's defaults (``spark_remote="auto"`` and a server
    running) every compaction by Spark tasks failed (``F.col`` asserted a SparkContext; two tables
    registering the data source at once, ``DATA_SOURCE_ALREADY_EXISTS``), logged and otherwise
    silent, so a large table's tail grew without limit. Here every window's tails are compacted
    by Spark tasks (``state_compact_in_process_rows=0``): the asset metadata says so and the plain
    ``state`` tables equal the source."""
    monkeypatch.setenv("CDC_SPARK_REMOTE", remote)  # what "auto" finds (conftest clears it)
    with scratch_database("sccomp") as (db, conn):
        with conn.cursor() as cur:
            cur.execute(f"CREATE TABLE {db}.k (id INT PRIMARY KEY, v VARCHAR(20))")
            cur.execute(f"CREATE TABLE {db}.nk (a INT, b VARCHAR(10))")
            cur.execute(f"INSERT INTO {db}.k SELECT seq, CONCAT('v', seq) FROM {db}.seq_1_to_300")
            cur.execute(f"INSERT INTO {db}.nk VALUES (1,'x'),(1,'x'),(2,'y')")
        cdc = SensorDriven(
            capture_resource(db),
            str(tmp_path / "lake"),
            state_compact_in_process_rows=0,
            state_compact_small_rows=10**9,
        )
        from dagster_mysql_cdc.sink.spark_files import is_connect_session

        assert cdc.resources["lake"].spark_remote == "auto"
        assert is_connect_session(cdc.resources["lake"].spark_session())
        cdc.ticks()  # initial snapshot
        with conn.cursor() as cur:
            cur.execute(f"UPDATE {db}.k SET v = 'upd' WHERE id < 50")
            cur.execute(f"DELETE FROM {db}.k WHERE id BETWEEN 100 AND 149")
            cur.execute(f"INSERT INTO {db}.k VALUES (1000, 'new')")
            cur.execute(f"DELETE FROM {db}.nk WHERE a = 1 LIMIT 1")
            cur.execute(f"INSERT INTO {db}.nk VALUES (3,'z'),(2,'y')")
        log = cdc.ticks()
        assert log.runs and all(r.success for r in log.runs)
        compactions = {
            e.asset_key.path[-1]: e.event_specific_data.materialization.metadata["compaction"].value
            for r in log.runs
            for e in r.get_asset_materialization_events()
            if e.asset_key.path[-1] in ("k", "nk")
        }
        assert {t: c.get("mode") for t, c in compactions.items()} == {"k": "spark", "nk": "spark"}, (
            compactions
        )
        storage = StorageSettings(base_uri=str(tmp_path / "lake"))
        for table in ("k", "nk"):
            expected, _ = source_rows(db, table)
            # the plain state table (what a Delta reader sees), its tail empty
            plain = read_current(storage, storage.uri(db, db, table, "state"), live=True, with_tail=False)
            assert rows(live_multiset(plain).to_pylist()) == rows(expected), table


_CHILD = """
import json, sys
from dagster_mysql_cdc.sink.spark_session import remote_spark_session
spark = remote_spark_session(sys.argv[1])
print(json.dumps({"session": spark.session_id, "n": spark.range(3).count()}))
"""


def _session_in_new_process(url: str) -> str:
    import json
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-c", _CHILD, url], capture_output=True, text=True, check=True)
    res = json.loads(out.stdout.strip().splitlines()[-1])
    assert res["n"] == 3
    return res["session"]


def test_runs_in_new_processes_share_one_server_side_session(remote):
    """A daemon-launched run is a new process: it must reattach to the session (and its warm Python
    workers) of the previous run, not open a new one."""
    import uuid

    url = f"{remote.rstrip('/')}/;user_id=cdc-test-{uuid.uuid4().hex[:8]}"  # sessions of this test only
    first, second = _session_in_new_process(url), _session_in_new_process(url)
    assert first == second
    # not a random id: the first generation of today's shared id
    from dagster_mysql_cdc.sink.spark_session import shared_session_urls

    assert next(shared_session_urls(url)).endswith(f"session_id={first}")


def test_a_closed_shared_session_is_replaced_by_the_next_generation(remote):
    """stop() (or the server's idle timeout) closes a session for good (INVALID_HANDLE.SESSION_CLOSED
    on its id): the next process continues on the next generation of the id."""
    import uuid

    from dagster_mysql_cdc.sink import spark_session as S

    url = f"{remote.rstrip('/')}/;user_id=cdc-test-{uuid.uuid4().hex[:8]}"
    spark = S.remote_spark_session(url)
    closed = spark.session_id
    spark.stop()  # closes the server-side session under its id
    S._REMOTE_SESSIONS.pop(url, None)
    again = _session_in_new_process(url)
    assert again != closed
    ids = [u.rsplit("session_id=", 1)[1] for u in S.shared_session_urls(url)]
    assert ids.index(closed) == 0 and ids.index(again) == 1
    assert _session_in_new_process(url) == again  # and the processes after it share that one


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_the_fast_path_is_the_default_and_a_missing_server_does_not_hang(tmp_path, monkeypatch, spark):
    """Issue 25 point 10: the README's example set neither spark_remote nor stream_follow_seconds,
    so every run started its own Spark JVM. The defaults are now the fast path (a Spark Connect
    server on this host, following runs); without a server a run falls back to a local Spark at
    once (auto) or fails at once with the fix (an explicit URL), instead of waiting for the gRPC
    client's retries."""
    import time

    from dagster_mysql_cdc import CdcLakeResource, MySqlCdcResource
    from dagster_mysql_cdc.errors import SinkError
    from dagster_mysql_cdc.sink.spark_files import is_connect_session
    from dagster_mysql_cdc.sink.spark_session import DEFAULT_REMOTE_URL, resolve_remote

    lake = CdcLakeResource(base_uri=str(tmp_path / "lake"))
    assert lake.spark_remote == "auto" and MySqlCdcResource().stream_follow_seconds == 300
    monkeypatch.delenv("CDC_SPARK_REMOTE", raising=False)
    assert resolve_remote("auto") == (DEFAULT_REMOTE_URL, True)
    assert resolve_remote(None) == (None, False) and resolve_remote("sc://h:1") == ("sc://h:1", False)
    dead = f"sc://127.0.0.1:{_free_port()}"
    monkeypatch.setenv("CDC_SPARK_REMOTE", dead)
    t0 = time.monotonic()
    session = lake.spark_session()  # auto: no server there, a local Spark (the test's own)
    assert not is_connect_session(session) and time.monotonic() - t0 < 30
    explicit = CdcLakeResource(base_uri=str(tmp_path / "lake"), spark_remote=dead)
    t0 = time.monotonic()
    with pytest.raises(SinkError, match=r"is not running .*infra/spark_connect.sh start.*spark_remote=None"):
        explicit.spark_session()
    assert time.monotonic() - t0 < 10


def test_auto_uses_the_running_server(remote, monkeypatch):
    from dagster_mysql_cdc import CdcLakeResource
    from dagster_mysql_cdc.sink.spark_files import is_connect_session

    monkeypatch.setenv("CDC_SPARK_REMOTE", remote)
    assert is_connect_session(CdcLakeResource().spark_session())


def test_threads_of_one_writer_register_its_data_sources_once(any_spark, tmp_path):
    """A window's tables compact (and split-read) in threads of their own, each registering the
    writer's data sources on first use: a Spark Connect server refused the second of two
    simultaneous registrations (``DATA_SOURCE_ALREADY_EXISTS``), failing that table's compaction."""
    import threading

    from dagster_mysql_cdc.sink.lake import LakeWriter
    from dagster_mysql_cdc.sink.spark_files import LakeFilesDataSource

    def register(w: LakeWriter, start: threading.Barrier, names: list, errors: list) -> None:
        start.wait()
        try:
            names.append(w.register_data_source(LakeFilesDataSource))
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(f"{type(e).__name__}: {e}"[:300])

    for trial in range(8):
        w = LakeWriter(any_spark, StorageSettings(base_uri=str(tmp_path / f"lake{trial}")), "srv")
        start, names, errors = threading.Barrier(4), [], []
        threads = [threading.Thread(target=register, args=(w, start, names, errors)) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert errors == [] and len(names) == 4 and len(set(names)) == 1, (trial, errors)


def test_a_writer_starts_its_session_in_the_background_once(any_spark, tmp_path):
    """A parallel window starts the session (a cold run: the Spark Connect client's import, the
    session, the data source's registration) while its planning pass reads the binlog
    (``LakeWriter.start_spark``): the session is made once and is the one the writer then uses;
    a factory that fails there fails again, with its own error, when the writer uses it."""
    import threading

    from dagster_mysql_cdc.errors import SinkError
    from dagster_mysql_cdc.sink.lake import LakeWriter

    calls: list[str] = []
    made = threading.Event()

    def factory():
        calls.append(threading.current_thread().name)
        made.set()
        return any_spark

    w = LakeWriter(factory, StorageSettings(base_uri=str(tmp_path / "lake")), "srv")
    w.start_spark()
    assert made.wait(60)
    assert w.spark is any_spark and w.spark is any_spark
    assert calls == ["cdc-spark-start"]  # made once, by the background thread
    w.start_spark()  # a session already there: nothing more
    assert len(calls) == 1

    tried: list[str] = []
    first_try = threading.Event()

    def broken():
        tried.append(threading.current_thread().name)
        first_try.set()
        raise SinkError("no Spark here")

    b = LakeWriter(broken, StorageSettings(base_uri=str(tmp_path / "lake2")), "srv")
    b.start_spark()
    assert first_try.wait(60)
    with pytest.raises(SinkError, match="no Spark here"):
        b.spark  # noqa: B018 - the property starts the session
    # the background attempt, then the writer's own
    assert tried == ["cdc-spark-start", threading.current_thread().name]
