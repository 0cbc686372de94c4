"""The lake written through the Spark Connect server of infra/spark_connect.sh (``make infra``)
equals the lake a local Spark writes: snapshot, inserts, updates and deletes of a keyed and a
keyless table, and a window large enough for several payload chunks. The server is the real one
(no mock); CDC_SPARK_CONNECT=0 (no server) skips these tests."""

import socket

import pytest
from conftest import SPARK_REMOTE
from lake_utils import live_state_rows, read_delta, source_rows
from sensor_harness import SensorDriven, capture_resource, scratch_database

from dagster_mysql_cdc.sink.storage import StorageSettings

pytestmark = [pytest.mark.integration, pytest.mark.spark]


def _server_up() -> bool:
    if not SPARK_REMOTE:
        return False
    host, _, port = SPARK_REMOTE[len("sc://") :].split("/")[0].partition(":")
    try:
        socket.create_connection((host, int(port or 15002)), timeout=2).close()
        return True
    except OSError:
        return False


@pytest.fixture(scope="module")
def remote() -> str:
    if not _server_up():
        pytest.skip("no Spark Connect server (CDC_SPARK_CONNECT=0 or infra/spark_connect.sh not started)")
    return SPARK_REMOTE


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
