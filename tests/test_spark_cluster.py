"""A real Spark standalone cluster, not only ``local[...]`` (issue 15): the lake resource on
``spark.master=spark://...`` with ``snapshot_split_reads`` runs an initial snapshot and an
incremental snapshot with concurrent changes; the lake equals the source row for row, and the
tasks that read the source and wrote the files ran on the cluster's executor, not the driver.
Then a backlog (a bulk load in several transactions, above ``stream_parallel_min_bytes``) is
decoded by segment tasks on the executor, each reaching MariaDB itself (issue 29).
Secrets never rest on the executors' disks nor show in the logs (issue 30): the capture user has a
random password, the lake is on S3 (SeaweedFS) with keys in ``CdcLakeResource``, the cluster's
processes have no ``AWS_*`` variables (the executors must use the keys the run gives them), and
afterwards every file under the worker's directory, the Spark event log, the driver UI's REST
pages and the Dagster instance (event log, run storage, compute logs) is searched for the password
and the S3 secret key.

The fixture starts a master and one worker (1 core, 1 GiB) on loopback from the installed pyspark
(``bin/spark-class``; ``SPARK_HOME`` is the pyspark package directory) and kills their process
groups afterwards. The lake is an S3 prefix in the SeaweedFS bucket, which the driver and the
executor reach on loopback. The executors run this interpreter (``PYSPARK_PYTHON``), i.e. the venv
with the package.

The Spark driver is a child process (``python tests/test_spark_cluster.py <json>``, the run worker
of a deployment): a process has one SparkContext, and the suite's own local Spark (the session
``spark`` fixture, the local sessions of other tests) must not be replaced by the cluster's. The
child drives the binlog sensor, makes the concurrent changes and reports the application's
executors from the driver's REST API; this process checks the lake against the source and
searches the files for the secrets.
"""

import base64
import json
import os
import random
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
import uuid
from pathlib import Path

import pytest

pytestmark = [pytest.mark.integration, pytest.mark.spark]

ROWS = 3000
PARALLEL_MIN_BYTES = 300_000  # the backlog below is ~1 MB of binlog; the other windows are far smaller
BACKLOG_ROWS = 24_000


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _get_json(url: str, patience: float = 120.0):
    """GET ``url`` as JSON, patiently: the Spark driver's and master's REST endpoints answer late
    when the machine is loaded (a fresh-clone ``make test`` timed out once after 5 s while the
    product worked), so each attempt may take 30 s and failed attempts are repeated for up to
    ``patience`` seconds."""
    import time

    deadline = time.monotonic() + patience
    while True:
        try:
            with urllib.request.urlopen(url, timeout=30) as resp:
                return json.loads(resp.read())
        except (OSError, ValueError):  # timeouts, refused/reset connections, a partial body
            if time.monotonic() >= deadline:
                raise
            time.sleep(2)


def _spark_env(tmp: Path) -> dict[str, str]:
    import pyspark

    home = os.path.dirname(pyspark.__file__)
    env = dict(os.environ)
    env.update(
        SPARK_HOME=home,
        PYSPARK_PYTHON=sys.executable,  # the executors' Python: this venv, with the package
        SPARK_LOCAL_IP="127.0.0.1",
        SPARK_LOG_DIR=str(tmp / "logs"),
        SPARK_WORKER_DIR=str(tmp / "work"),
        SPARK_NO_DAEMONIZE="1",
        SPARK_DAEMON_MEMORY="256m",  # the master's and worker's own JVMs (2 cores, shared CI host)
    )
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "CDC_MYSQL_PASSWORD"):
        env.pop(name, None)  # the executors get credentials only from the run, never from their environment
    return env


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """``(master URL, master web UI port, worker directory)`` of a running standalone master with
    one ALIVE worker."""
    tmp = tmp_path_factory.mktemp("spark-cluster")
    env = _spark_env(tmp)
    spark_class = os.path.join(env["SPARK_HOME"], "bin", "spark-class")
    port, web = _free_port(), _free_port()
    master = f"spark://127.0.0.1:{port}"
    procs: list[subprocess.Popen] = []

    def start(name: str, *args: str) -> None:
        log = open(tmp / f"{name}.log", "wb")  # noqa: SIM115 - closed with the process
        procs.append(
            subprocess.Popen(
                [spark_class, *args], env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
            )
        )

    def stop() -> None:
        for p in reversed(procs):
            for sig in (signal.SIGTERM, signal.SIGKILL):
                try:
                    os.killpg(p.pid, sig)  # spark-class execs java; kill its whole group
                except ProcessLookupError:
                    break
                try:
                    p.wait(timeout=10)
                    break
                except subprocess.TimeoutExpired:
                    continue

    try:
        start(
            "master",
            "org.apache.spark.deploy.master.Master",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--webui-port",
            str(web),
        )
        start(
            "worker",
            "org.apache.spark.deploy.worker.Worker",
            master,
            "--host",
            "127.0.0.1",
            "--cores",
            "1",
            "--memory",
            "1g",
            "--webui-port",
            str(_free_port()),
        )
        deadline = time.monotonic() + 90
        while True:
            try:
                state = _get_json(f"http://127.0.0.1:{web}/json")
                if any(w.get("state") == "ALIVE" for w in state.get("workers", [])):
                    break
            except OSError:
                pass
            if time.monotonic() > deadline or any(p.poll() is not None for p in procs):
                logs = "\n".join(
                    (tmp / f"{n}.log").read_text(errors="replace")[-2000:] for n in ("master", "worker")
                )
                pytest.fail(f"the Spark standalone cluster did not come up:\n{logs}")
            time.sleep(1)
        yield master, web, tmp / "work"
    finally:
        stop()


def _files_containing(roots: list[Path], secrets: dict[str, bytes]) -> dict[str, list[str]]:
    """Per secret name, the files under ``roots`` whose bytes contain it (every file, any size)."""
    found: dict[str, list[str]] = {name: [] for name in secrets}
    for root in roots:
        for path in sorted(root.rglob("*")):
            if path.is_file() and not path.is_symlink():
                data = path.read_bytes()
                for name, value in secrets.items():
                    if value in data:
                        found[name].append(str(path))
    return found


def test_snapshots_on_a_standalone_cluster_run_on_its_executor(tmp_path, cluster):
    from conftest import env, s3_settings
    from lake_utils import live_state_rows, source_rows
    from sensor_harness import capture_user, scratch_database

    master, web, work = cluster
    password = "Pw-" + uuid.uuid4().hex  # the capture user's: found nowhere but in MariaDB
    with scratch_database("scl") as (db, conn):
        with conn.cursor() as cur:
            cur.execute(f"USE {db}")
            cur.execute("CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(30), n INT, d DECIMAL(10,2))")
            cur.execute(f"INSERT INTO t SELECT seq, CONCAT('v', seq), seq * 3, seq / 8 FROM seq_1_to_{ROWS}")
        with capture_user(conn, db, password) as user:
            args = {
                "db": db,
                "user": user,
                "master": master,
                "master_web": web,
                "ui_port": _free_port(),
                "out": str(tmp_path),
            }
            t0 = time.monotonic()
            out = subprocess.run(
                [sys.executable, __file__, json.dumps(args)],
                capture_output=True,
                text=True,
                timeout=300,
                env={**os.environ, "PYSPARK_PYTHON": sys.executable, "SCL_MYSQL_PASSWORD": password},
            )
            elapsed = time.monotonic() - t0
        assert out.returncode == 0, f"driver failed:\n{out.stdout[-4000:]}\n{out.stderr[-6000:]}"
        report = json.loads(out.stdout.strip().splitlines()[-1])

        # (1) the lake's live state equals the source, row for row, every column
        storage = s3_settings(db)
        expected, key = source_rows(db, "t")
        got = live_state_rows(storage, storage.uri(db, db, "t", "state"), key)
        assert len(got) == len(expected) and got == expected
        assert report["changes"] > 0  # the incremental snapshot raced real changes
        assert report["incremental_runs"] >= 2
        # (1b) the backlog was decoded by parallel segment tasks (engine/parallel_catchup.py)
        modes = [d.get("mode") for ds in report["decodes"] for d in ds]
        assert "parallel" in modes, report["decodes"]

    # (2) the writes ran on the cluster's executor, not in the driver
    assert report["master"] == master
    executors = {e["id"]: e for e in report["executors"]}
    workers = [e for i, e in executors.items() if i != "driver"]
    assert workers and sum(e["totalTasks"] for e in workers) > 0, report["executors"]
    assert executors.get("driver", {}).get("totalTasks", 0) == 0
    apps = [a for a in report["master_apps"] if a["id"] == report["app_id"]]
    assert apps and apps[0]["cores"] >= 1
    # the storage settings file reached the executor through SparkContext.addFile (a cluster's
    # executors do not share the driver's temporary directory); on one host the executor could
    # also open the driver's path, so this shows the shipping, not that the executor used the copy
    app_dir = work / report["app_id"]
    assert list(app_dir.glob("*/cdc-storage-*.json"))
    # split reads: the initial snapshot took no lock and its rows were read by the tasks (the
    # driver ran none); each split job's private file (connection settings, splits) was shipped
    assert report["snapshot_lock"] == "none" and report["snapshot_rows"] == ROWS
    assert len(list(app_dir.glob("*/cdc-splits-*.pkl"))) >= 2

    # (3) no secret rests on the worker's disk or shows in Spark's event log and UI or in Dagster's
    # event log: every file of the worker's directory (shipped files, executor logs), the event
    # log, the UI's REST pages and the Dagster instance, searched byte for byte
    events, ui, dagster = tmp_path / "spark-events", tmp_path / "spark-ui", tmp_path / "dagster"
    assert list(events.iterdir()) and list(ui.iterdir()) and list(dagster.rglob("*.db"))
    log = b"".join(f.read_bytes() for f in events.rglob("*") if f.is_file())
    # the event log holds the jobs' plans and files (uncompressed: the search reads what they show)
    assert b"AppendData mysql_cdc_delta_files" in log and b"BatchScan mysql_cdc_splits" in log
    assert b"cdc-storage-" in log and b"SparkListenerSQLExecutionStart" in log
    secrets = {
        "password": password.encode(),
        "S3 secret key": env("AWS_SECRET_ACCESS_KEY", "cdc-secret").encode(),
    }
    # nor the keys that sealed the shipped files (as text and as raw bytes)
    assert report["file_keys"]
    for i, key in enumerate(report["file_keys"]):
        secrets[f"file key {i}"] = key.encode()
        secrets[f"file key {i} (raw)"] = base64.urlsafe_b64decode(key)
    leaks = _files_containing([work, events, ui, dagster], secrets)
    assert leaks == {name: [] for name in secrets}, leaks
    print(
        f"cluster run: {elapsed:.1f}s, {report['changes']} concurrent changes, "
        f"{report['incremental_runs']} incremental runs, executors {report['executors']}"
    )


# -- the driver (run worker) process -----------------------------------------------------------


def _drive(db: str, user: str, master: str, master_web: int, ui_port: int, out: str) -> dict:
    """Initial snapshot, then an incremental snapshot raced by concurrent changes, on ``master``,
    into an S3 lake with keys; the Spark event log, the UI's REST pages and the Dagster instance
    are left under ``out`` (``spark-events``, ``spark-ui``, ``dagster``)."""
    import dagster as dg
    from conftest import S3_BUCKET, S3_ENDPOINT, master_position, root_connect
    from dagster_pyspark import LazyPySparkResource
    from pyspark import SparkContext
    from sensor_harness import SensorDriven, capture_resource, first_materialization_metadata

    from dagster_mysql_cdc import DEFAULT_SPARK_CONFIG
    from dagster_mysql_cdc.dagster_integration.cursor import StreamCursor
    from dagster_mysql_cdc.private_files import PrivateFiles

    file_keys: list[str] = []  # every writer's sealing key, for the parent's search
    private_files_init = PrivateFiles.__init__

    def recording_init(self) -> None:
        private_files_init(self)
        file_keys.append(self._key.decode())

    PrivateFiles.__init__ = recording_init  # type: ignore[method-assign]

    spark_config = {
        **DEFAULT_SPARK_CONFIG,
        "spark.master": master,
        "spark.driver.host": "127.0.0.1",
        "spark.driver.bindAddress": "127.0.0.1",
        "spark.driver.memory": "1g",
        "spark.executor.memory": "1g",
        "spark.executor.cores": "1",
        "spark.cores.max": "1",
        "spark.ui.enabled": "true",  # the executors' task counts, through the driver's REST API
        "spark.ui.port": str(ui_port),
        "spark.port.maxRetries": "0",
        "spark.eventLog.enabled": "true",  # searched for secrets afterwards
        "spark.eventLog.dir": f"file://{out}/spark-events",
        "spark.eventLog.compress": "false",  # JSON lines the search reads (Spark 4 compresses with zstd)
    }
    os.makedirs(f"{out}/spark-events")
    # split reads: the executors read the source themselves (initial and incremental snapshot)
    mysql = capture_resource(
        db,
        user=user,
        password=dg.EnvVar("SCL_MYSQL_PASSWORD"),
        incremental_snapshot_chunk_size=500,
        snapshot_split_reads=True,
        snapshot_split_rows=1000,
        # a backlog of at least this much binlog is decoded by segment tasks on the executor
        stream_parallel_min_bytes=PARALLEL_MIN_BYTES,
        stream_parallel_max_tasks=2,
    )
    signals = mysql.create_signal_table()
    cdc = SensorDriven(
        mysql,
        f"s3://{S3_BUCKET}/{db}",
        mysql.discover_tables(),
        s3_endpoint_url=S3_ENDPOINT,
        s3_access_key_id=dg.EnvVar("AWS_ACCESS_KEY_ID"),
        s3_secret_access_key=dg.EnvVar("AWS_SECRET_ACCESS_KEY"),
        spark_remote="",
        pyspark=LazyPySparkResource(spark_config=spark_config),
    )
    # a Dagster instance on disk: its event log, run storage and compute logs are searched
    os.makedirs(f"{out}/dagster")
    cdc.instance = dg.DagsterInstance.local_temp(tempdir=f"{out}/dagster")
    log = cdc.ticks()  # initial snapshot, then caught up
    assert all(r.success for r in log.runs), "initial snapshot failed"
    snapshot_md = first_materialization_metadata(log.runs, "t")

    done = threading.Event()
    changes = [0]
    errors: list[BaseException] = []

    def writer() -> None:
        rnd = random.Random(15)
        try:
            conn = root_connect()
            with conn.cursor() as cur:
                cur.execute(f"USE {db}")
                while not done.is_set():
                    k = rnd.randint(1, ROWS + 500)
                    op = rnd.random()
                    if op < 0.5:
                        cur.execute("UPDATE t SET v = %s, n = n + 1 WHERE id = %s", (f"u{changes[0]}", k))
                    elif op < 0.75:
                        cur.execute("DELETE FROM t WHERE id = %s", (k,))
                    else:
                        cur.execute(
                            "INSERT INTO t VALUES (%s, %s, %s, %s) ON DUPLICATE KEY UPDATE v = VALUES(v)",
                            (k, f"i{changes[0]}", k, k / 4),
                        )
                    changes[0] += 1
                    time.sleep(0.01)
            conn.close()
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    root = root_connect()
    with root.cursor() as cur:
        cur.execute(
            f"INSERT INTO {signals} (id, type, data) VALUES (%s, %s, %s)",
            (
                "cluster-1",
                "execute-snapshot",
                json.dumps({"data-collections": [f"{db}.t"], "type": "incremental"}),
            ),
        )
    root.close()
    thread = threading.Thread(target=writer, daemon=True)
    thread.start()
    started = finished = False
    incremental_runs = 0
    try:
        for _ in range(30):
            log = cdc.ticks(max_ticks=1, until_caught_up=False)
            assert all(r.success for r in log.runs), "a window run failed"
            incremental_runs += len(log.runs)  # the runs from the signal to the last chunk
            inc = StreamCursor.parse(cdc.cursor).incremental
            if inc is not None:
                started = True
            elif started:
                finished = True
                break
    finally:
        done.set()
        thread.join(timeout=30)
    assert not errors, errors
    assert finished, f"incremental snapshot not finished: {cdc.cursor}"
    target = master_position()
    for _ in range(20):  # then stream until the offset passes the last change
        log = cdc.ticks(max_ticks=1, until_caught_up=False)
        assert all(r.success for r in log.runs), "a window run failed"
        committed = StreamCursor.parse(cdc.cursor).committed
        if committed is not None and committed.sort_key() >= target.sort_key():
            break
    else:
        raise AssertionError(f"not caught up: {cdc.cursor}")
    # a backlog (a bulk load in several transactions): its window is decoded by segment tasks
    root = root_connect()
    with root.cursor() as cur:
        cur.execute(f"USE {db}")  # the sequence tables seq_M_to_N are resolved in a database
        for lo in range(1, BACKLOG_ROWS, BACKLOG_ROWS // 8):
            hi = lo + BACKLOG_ROWS // 8 - 1
            cur.execute(
                f"INSERT INTO {db}.t SELECT seq, CONCAT('bulk', seq), seq, seq / 4 "
                f"FROM seq_{100000 + lo}_to_{100000 + hi}"
            )
            cur.execute(f"UPDATE {db}.t SET n = n + 1 WHERE id BETWEEN {100000 + lo} AND {100000 + lo + 99}")
    root.close()
    log = cdc.ticks()
    assert log.runs and all(r.success for r in log.runs), "the backlog's window run failed"
    decodes = [
        m.materialization.metadata["decode"].value
        for r in log.runs
        for m in r.get_asset_materialization_events()
        if m.asset_key.path[-1] == "binlog" and "decode" in m.materialization.metadata
    ]

    sc = SparkContext._active_spark_context
    assert sc is not None
    app = sc.applicationId
    api = f"http://127.0.0.1:{ui_port}/api/v1/applications/{app}"
    executors = _get_json(f"{api}/executors")
    os.makedirs(f"{out}/spark-ui")
    for page in ("environment", "jobs", "stages?details=true", "sql?details=true&planDescription=true"):
        with urllib.request.urlopen(f"{api}/{page}", timeout=30) as resp:
            Path(f"{out}/spark-ui/{page.split('?')[0]}.json").write_bytes(resp.read())
    report = {
        "master": sc.master,
        "app_id": app,
        "executors": [{"id": e["id"], "totalTasks": e["totalTasks"]} for e in executors],
        "master_apps": [
            {"id": a["id"], "cores": a["cores"]}
            for a in _get_json(f"http://127.0.0.1:{master_web}/json")["activeapps"]
        ],
        "changes": changes[0],
        "incremental_runs": incremental_runs,
        "snapshot_lock": snapshot_md["lock"].value,
        "snapshot_rows": snapshot_md["dagster/row_count"].value,
        "file_keys": file_keys,
        "decodes": decodes,
    }
    cdc.instance.dispose()
    sc.stop()  # completes the event log (its last events are flushed when the application ends)
    return report


if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    print(json.dumps(_drive(**json.loads(sys.argv[1]))))
