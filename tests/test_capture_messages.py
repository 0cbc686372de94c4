"""Clear messages (issue 12): the capture's state from the command line, a missing REPLICATION
SLAVE privilege while streaming, a table_include_list entry that matches nothing, rejected
signals as WARNING in SQL terms. Real MariaDB (and local Spark for the sensor-driven part)."""

import json
import os
import re
import subprocess
import sys
import uuid

import pytest
from conftest import CDC_PASSWORD, CDC_USER, MYSQL_HOST, MYSQL_PORT, ROOT, master_position, root_connect
from sensor_harness import SensorDriven, capture_resource, scratch_database

from dagster_mysql_cdc.errors import MissingPrivilegeError
from dagster_mysql_cdc.source.binlog import BinlogReader
from dagster_mysql_cdc.source.connection import GRANT_ADVICE, ConnectionSettings

pytestmark = [pytest.mark.integration]

SENSOR = "cdc_status_sensor"

# a code location with a sensor of that name, so `dagster sensor cursor --set` can store a cursor
DEFS = f"""
import dagster as dg

@dg.asset
def placeholder():
    return 1

@dg.sensor(name="{SENSOR}", target=[placeholder])
def status_sensor(context):
    return dg.SkipReason("only holds a cursor")

defs = dg.Definitions(assets=[placeholder], sensors=[status_sensor])
"""


def _cli(*args: str, home, extra_env=None) -> subprocess.CompletedProcess:
    env = {
        **os.environ,
        "DAGSTER_HOME": str(home),
        "CDC_MYSQL_PASSWORD": CDC_PASSWORD,
        "PYTHONPATH": str(ROOT),
        **(extra_env or {}),
    }
    return subprocess.run(
        [sys.executable, *args], cwd=home, env=env, capture_output=True, text=True, timeout=300
    )


@pytest.mark.spark
def test_status_command_reads_the_sensor_cursor_and_rejected_signals_warn(local_storage, tmp_path):
    with scratch_database("status") as (db, conn):
        with conn.cursor() as cur:
            cur.execute(f"USE {db}")
            cur.execute("CREATE TABLE t (id INT PRIMARY KEY, v INT)")
            cur.execute("INSERT INTO t SELECT seq, seq FROM seq_1_to_100")
        mysql = capture_resource(db)
        mysql.create_signal_table()
        cdc = SensorDriven(mysql, local_storage.base_uri)
        cdc.ticks()
        with conn.cursor() as cur:
            cur.execute(
                f"INSERT INTO {db}.debezium_signal VALUES ('bad-1', 'execute-snapshot', "
                f'\'{{"data-collections": ["{db}.t"], "additional-conditions": '
                f'[{{"data-collection": "{db}.t", "filter": "id > SLEEP(5)"}}]}}\')'
            )
        ticks = cdc.ticks()
        logs = [r for res in ticks.runs for r in cdc.instance.all_logs(res.run_id)]
        rejected = [r for r in logs if "bad-1" in r.user_message]
        assert rejected and all(r.level == 30 for r in rejected), [
            (r.level, r.user_message) for r in rejected
        ]
        assert "calls function SLEEP(5), which is not allowed in a filter" in rejected[0].user_message
        assert "Anonymous" not in rejected[0].user_message
        committed = json.loads(cdc.cursor)["committed"]
        with conn.cursor() as cur:  # changes after the committed position: the capture lags
            cur.execute(f"UPDATE {db}.t SET v = v + 1")
        now = master_position()

    home = tmp_path / "dagster_home"
    home.mkdir()
    (home / "defs.py").write_text(DEFS)
    set_cursor = _cli(
        "-m", "dagster", "sensor", "cursor", SENSOR, "--set", cdc.cursor, "-f", "defs.py", home=home
    )
    assert set_cursor.returncode == 0, set_cursor.stderr
    server = ["--host", MYSQL_HOST, "--port", str(MYSQL_PORT), "--user", CDC_USER]
    line = _cli("-m", "dagster_mysql_cdc", "status", "--sensor", SENSOR, *server, home=home)
    # the sensor holds a cursor but is not started: unhealthy (exit 1), the first line says why
    assert line.returncode == 1, line.stderr
    out = line.stdout.strip()
    assert out.splitlines()[0] == (
        f"UNHEALTHY: {SENSOR}: the sensor is STOPPED, nothing is captured: dagster sensor start {SENSOR}"
    ), out
    assert out.splitlines()[1].startswith(f"{SENSOR}: committed {committed['file']}:{committed['pos']}"), out
    assert "\nin flight: none" in out and "\nrepairs / incremental snapshot: none" in out
    assert "\nlast run failure: none" in out and "\nlast tick error: none" in out
    as_json = _cli("-m", "dagster_mysql_cdc", "status", "--sensor", SENSOR, "--json", *server, home=home)
    st = json.loads(as_json.stdout)
    assert now.file == committed["file"]
    assert st["lag_bytes"] >= now.pos - committed["pos"] > 0  # the server may have moved on since
    assert 0 <= st["lag_seconds"] < 300
    assert re.search(rf" \| lag \d+ bytes, \d+\.\d s \(server {MYSQL_HOST}:{MYSQL_PORT}\)\n", out), out
    assert all(len(line) <= 400 for line in out.splitlines())
    # issue 25 point 9: the address recorded in the cursor, not CDC_MYSQL_PORT (or 3306)
    recorded = _cli(
        "-m", "dagster_mysql_cdc", "status", "--sensor", SENSOR, "--user", CDC_USER, home=home,
        extra_env={"CDC_MYSQL_PORT": "1", "CDC_MYSQL_HOST": "192.0.2.1"},
    )  # fmt: skip
    assert recorded.returncode == 1 and f"(server {MYSQL_HOST}:{MYSQL_PORT})" in recorded.stdout, (
        recorded.stdout
    )
    offline = _cli("-m", "dagster_mysql_cdc", "status", "--sensor", SENSOR, "--no-server", home=home)
    assert "lag not computed (--no-server)" in offline.stdout and "not reachable" not in offline.stdout
    # a purged binlog: the sensor's message, not pymysql's (1236, ...); with a GTID position of
    # many domains its line is too long: cut on whole words, keeping the fix at its end (it was cut
    # at 400 characters, in a word, the fix lost)
    gone = json.loads(cdc.cursor)
    many_domains = ",".join(f"{d}-{d + 1}-{1000 + d}" for d in range(14))
    gone["committed"] = {**gone["committed"], "file": "mysql-bin.000000", "pos": 4, "gtid_set": many_domains}
    purged = _cli(
        "-m", "dagster", "sensor", "cursor", SENSOR, "--set", json.dumps(gone), "-f", "defs.py", home=home
    )
    assert purged.returncode == 0, purged.stderr
    line = _cli("-m", "dagster_mysql_cdc", "status", "--sensor", SENSOR, *server, home=home).stdout
    assert (
        "lag unknown: The committed offset mysql-bin.000000:4" in line and "was purged (oldest is" in line
    ), line
    assert "1236" not in line
    (lag_line,) = [x for x in line.splitlines() if "lag unknown: " in x]
    assert len(lag_line) <= 400 and lag_line.endswith("(binlog_expire_logs_seconds)."), lag_line
    full = json.loads(
        _cli("-m", "dagster_mysql_cdc", "status", "--sensor", SENSOR, "--json", *server, home=home).stdout
    )
    assert full["server_error"].endswith("(binlog_expire_logs_seconds).") and not full["healthy"]
    whole_words = set(
        f"{SENSOR}: committed {full['committed']} | lag unknown: {full['server_error']}".split()
    )
    for word in set(lag_line.split()) - {"…"}:  # whole words; a GTID set keeps its ends
        head, cut, tail = word.partition("…")
        assert (
            (word in whole_words)
            if not cut
            else any(w.startswith(head) and w.endswith(tail) for w in whole_words)
        ), (word, lag_line)
    assert "was purged (oldest is" in lag_line, lag_line
    unknown = _cli("-m", "dagster_mysql_cdc", "status", "--sensor", "nope", "--no-server", home=home)
    assert unknown.returncode == 2
    assert "No sensor named 'nope'" in unknown.stderr and SENSOR in unknown.stderr


def test_streaming_without_replication_slave_gives_the_grant_advice():
    user = f"norepl_{uuid.uuid4().hex[:6]}"
    conn = root_connect()
    try:
        with conn.cursor() as cur:
            cur.execute(f"CREATE USER '{user}'@'%' IDENTIFIED BY 'pw'")
            cur.execute(f"GRANT SELECT, REPLICATION CLIENT ON *.* TO '{user}'@'%'")
        settings = ConnectionSettings(host=MYSQL_HOST, port=MYSQL_PORT, user=user, password="pw")
        start = master_position()
        with pytest.raises(MissingPrivilegeError) as e:
            list(BinlogReader(settings, 991177, start, None, is_mariadb=True, deadline_s=30))
        msg = str(e.value)
        assert f"User {user!r} lacks a privilege for reading the binlog" in msg
        assert "1227" in msg and GRANT_ADVICE in msg
        assert "pw" not in msg.replace(user, "")
    finally:
        with conn.cursor() as cur:
            cur.execute(f"DROP USER IF EXISTS '{user}'@'%'")
        conn.close()


def test_table_include_list_entry_matching_nothing_is_reported():
    with scratch_database("incl") as (db, conn):
        with conn.cursor() as cur:
            cur.execute(f"CREATE TABLE {db}.orders (id INT PRIMARY KEY)")
        mysql = capture_resource(db, table_include_list=[f"{db}.orders", f"{db}.ordres", f"{db}.cust.*"])
        warnings = mysql.include_list_warnings()
        assert len(warnings) == 2
        assert warnings[0].startswith(f"table_include_list entry '{db}.ordres' matches no table on")
        assert f"'{db}.cust.*'" in warnings[1]
        assert capture_resource(db, table_include_list=[f"{db}.ord.*"]).include_list_warnings() == []


def test_include_list_entry_matching_nothing_is_reported_at_definitions_load():
    """Issue 25 point 13: the warning was only in the snapshot run's log; ``discover_tables()``
    (the code location's load) says it too."""
    with scratch_database("inclload") as (db, conn):
        with conn.cursor() as cur:
            cur.execute(f"CREATE TABLE {db}.orders (id INT PRIMARY KEY)")
        mysql = capture_resource(db, table_include_list=[f"{db}.orders", f"{db}.ordres"])
        with pytest.warns(UserWarning, match=rf"table_include_list entry '{db}\.ordres' matches no table"):
            tables = mysql.discover_tables()
        assert [t.table for t in tables] == ["orders"]


def test_signal_table_is_not_a_captured_asset():
    """Issue 25 point 5: the signal table matched the include lists and became an asset whose rows
    never reach the lake (they are signals and watermarks), so its checks failed forever."""
    from dagster_mysql_cdc.errors import ConfigurationError

    with scratch_database("sigasset") as (db, conn):
        with conn.cursor() as cur:
            cur.execute(f"CREATE TABLE {db}.orders (id INT PRIMARY KEY)")
        mysql = capture_resource(db)
        mysql.create_signal_table()
        assert [t.table for t in mysql.discover_tables()] == ["orders"]
        with pytest.raises(ConfigurationError, match="is the signal table"):
            mysql.discover_tables([f"{db}.orders", f"{db}.debezium_signal"])


def _health(cdc: SensorDriven) -> dict:
    """The metadata of the binlog asset's latest health observation (reported by the sensor)."""
    from dagster_mysql_cdc.dagster_integration.protocol import binlog_asset_key

    key = binlog_asset_key(cdc.cdc.specs)
    records = cdc.instance.fetch_observations(key, limit=1).records
    assert records, "the sensor reported no health on the binlog asset"
    return {k: v.value for k, v in records[0].asset_observation.metadata.items()}


def test_include_list_that_matches_no_table_requests_no_run_and_says_why(local_storage):
    """Issue 39: a typo in ``table_include_list`` (the only entry) left the code location with
    the binlog asset alone, and the sensor requested a snapshot of no table again and again (6 green
    runs in 5 minutes, each "succeeded but reported no position"); the warning went to the
    terminal only. Now no run is requested, and the tick and the binlog asset's health name the
    entry and the fix."""
    with scratch_database("incltypo") as (db, conn):
        with conn.cursor() as cur:
            cur.execute(f"CREATE TABLE {db}.customers (id INT PRIMARY KEY)")
            cur.execute(f"INSERT INTO {db}.customers VALUES (1)")
        mysql = capture_resource(db, table_include_list=[f"{db}.custmers"])
        with pytest.warns(UserWarning, match="matches no table"):
            cdc = SensorDriven(mysql, local_storage.base_uri)
        assert [k.path[-1] for k in cdc.cdc.keys] == ["binlog"]  # the binlog asset alone
        log = cdc.ticks(until_caught_up=False, max_ticks=4)
        assert log.runs == [] and cdc.instance.get_runs() == []
        assert len(log.skip_reasons) == 4
        for reason in log.skip_reasons:
            assert f"table_include_list entry '{db}.custmers' matches no table" in reason, reason
            assert reason.endswith("then reload the code location"), reason
        health = _health(cdc)
        assert f"'{db}.custmers' matches no table" in health["health"]
        assert "check the spelling or remove it" in health["health"]
        assert health["selection_problems"] and "reload the code location" in health["selection_problems"][0]


@pytest.mark.spark
def test_include_list_entry_that_matches_no_table_among_others_is_named_and_the_others_captured(
    local_storage,
):
    """Issue 39: one entry of several matches no table: the others are captured as usual and the
    entry is named in the tick's message and the binlog asset's health."""
    from lake_utils import live_state_rows, source_rows

    with scratch_database("inclsome") as (db, conn):
        with conn.cursor() as cur:
            cur.execute(f"CREATE TABLE {db}.customers (id INT PRIMARY KEY, v INT)")
            cur.execute(f"INSERT INTO {db}.customers VALUES (1, 1)")
        mysql = capture_resource(db, table_include_list=[f"{db}.customers", f"{db}.ordrs"])
        with pytest.warns(UserWarning, match="matches no table"):
            cdc = SensorDriven(mysql, local_storage.base_uri)
        log = cdc.ticks()
        assert log.runs and all(r.success for r in log.runs)
        with conn.cursor() as cur:
            cur.execute(f"UPDATE {db}.customers SET v = 2")
        log = cdc.ticks()
        assert log.runs and all(r.success for r in log.runs)
        expected, key = source_rows(db, "customers")
        uri = local_storage.uri(db, db, "customers", "state")
        assert live_state_rows(local_storage, uri, key) == expected == [{"id": 1, "v": 2}]
        last = log.skip_reasons[-1]
        assert "caught up at" in last, last
        assert f"table_include_list entry '{db}.ordrs' matches no table" in last
        assert last.endswith("check the spelling or remove it"), last
        assert f"'{db}.customers'" not in last
        health = _health(cdc)
        assert f"'{db}.ordrs' matches no table" in health["health"]
        assert len(health["selection_problems"]) == 1
