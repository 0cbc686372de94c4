"""The least-privilege GRANTs of docs/operations.md ("Least-privilege grants"), checked against
MariaDB: a user with exactly the documented privileges of each mode snapshots, streams, runs
incremental snapshots and the checks; with one privilege less the preflight names it."""

import uuid

import dagster as dg
import pytest
from conftest import MYSQL_HOST, MYSQL_PORT
from lake_utils import live_state_rows, source_rows
from sensor_harness import SensorDriven, scratch_database

from dagster_mysql_cdc import MySqlCdcResource

pytestmark = [pytest.mark.integration, pytest.mark.spark]

BINLOG = "REPLICATION SLAVE, BINLOG MONITOR"  # MySQL: REPLICATION SLAVE, REPLICATION CLIENT

#: mode -> (resource options, GRANT statements; {db} and {u} are filled in)
MODES = {
    "locked snapshot": (
        {},
        ["GRANT SELECT ON `{db}`.* TO {u}", f"GRANT RELOAD, {BINLOG} ON *.* TO {{u}}"],
    ),
    "table-locked snapshot (no RELOAD)": (
        {},
        ["GRANT SELECT, LOCK TABLES ON `{db}`.* TO {u}", f"GRANT {BINLOG} ON *.* TO {{u}}"],
    ),
    "lock-free snapshot, read-only incremental snapshots, checks": (
        {"snapshot_locking_mode": "none", "incremental_snapshot_read_only": True},
        ["GRANT SELECT ON `{db}`.* TO {u}", f"GRANT {BINLOG} ON *.* TO {{u}}"],
    ),
    "incremental snapshots with watermark rows": (
        {"snapshot_locking_mode": "none"},
        [
            "GRANT SELECT ON `{db}`.* TO {u}",
            "GRANT INSERT ON `{db}`.`debezium_signal` TO {u}",
            f"GRANT {BINLOG} ON *.* TO {{u}}",
        ],
    ),
}


def _user(conn, db: str, grants: list[str]) -> tuple[str, str]:
    name, pw = f"g_{uuid.uuid4().hex[:10]}", "Pw-" + uuid.uuid4().hex
    u = f"'{name}'@'%'"
    with conn.cursor() as cur:
        cur.execute(f"CREATE USER {u} IDENTIFIED BY '{pw}'")
        for g in grants:
            cur.execute(g.format(db=db, u=u))
    return name, pw


@pytest.mark.parametrize("mode", list(MODES))
def test_documented_grants_are_enough(mode, local_storage):
    options, grants = MODES[mode]
    with scratch_database("grant") as (db, conn):
        with conn.cursor() as cur:
            cur.execute(f"USE {db}")
            cur.execute("CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(20))")
            cur.execute("INSERT INTO t SELECT seq, CONCAT('v', seq) FROM seq_1_to_50")
            cur.execute(
                "CREATE TABLE debezium_signal (id VARCHAR(42) PRIMARY KEY, type VARCHAR(32) NOT NULL, data VARCHAR(2048) NULL)"
            )
        user, pw = _user(conn, db, grants)
        try:
            mysql = MySqlCdcResource(
                stream_follow_seconds=0.0,
                host=MYSQL_HOST,
                port=MYSQL_PORT,
                user=user,
                password=pw,
                server_name=db,
                database_include_list=[db],
                incremental_snapshot_chunk_size=20,
                **options,
            )
            tables = [t for t in mysql.discover_tables() if t.table == "t"]
            cdc = SensorDriven(mysql, local_storage.base_uri, tables=tables)
            cdc.ticks()  # initial snapshot
            with conn.cursor() as cur:
                cur.execute(f"UPDATE {db}.t SET v = 'streamed' WHERE id <= 5")
                if "incremental" in mode:  # the other modes leave incremental snapshots off
                    cur.execute(
                        f"INSERT INTO {db}.debezium_signal VALUES ('g1', 'execute-snapshot', '{{\"data-collections\": [\"{db}.t\"]}}')"
                    )
            ticks = cdc.ticks()  # streaming (+ an incremental snapshot)
            assert ticks.runs and all(r.success for r in ticks.runs)
            src, key = source_rows(db, "t")
            assert live_state_rows(local_storage, local_storage.uri(db, db, "t", "state"), key) == src
            res = dg.materialize(
                [cdc.cdc],
                resources=cdc.resources,
                instance=cdc.instance,
                selection=dg.AssetSelection.checks_for_assets(
                    dg.AssetKey([db, db, "t"]), dg.AssetKey([db, "binlog"])
                ),
            )
            evals = res.get_asset_check_evaluations()
            assert evals and all(e.passed for e in evals), [
                (e.check_name, e.metadata) for e in evals if not e.passed
            ]
        finally:
            with conn.cursor() as cur:
                cur.execute(f"DROP USER '{user}'@'%'")


def test_one_privilege_less_is_named_by_the_preflight(local_storage):
    with scratch_database("grant") as (db, conn):
        with conn.cursor() as cur:
            cur.execute(f"CREATE TABLE {db}.t (id INT PRIMARY KEY)")
        user, pw = _user(
            conn, db, ["GRANT SELECT ON `{db}`.* TO {u}", "GRANT REPLICATION SLAVE ON *.* TO {u}"]
        )
        try:
            mysql = MySqlCdcResource(
                host=MYSQL_HOST, port=MYSQL_PORT, user=user, password=pw, server_name=db,
                database_include_list=[db], snapshot_locking_mode="none", stream_follow_seconds=0.0,
            )  # fmt: skip
            cdc = SensorDriven(mysql, local_storage.base_uri)
            with pytest.raises(Exception) as excinfo:  # the first tick reads the binlog position
                cdc.ticks(max_ticks=1)
            chain, e = [], excinfo.value
            while e is not None:
                chain.append(str(e))
                e = e.__cause__ or e.__context__
            assert "BINLOG MONITOR" in "\n".join(chain)
        finally:
            with conn.cursor() as cur:
                cur.execute(f"DROP USER '{user}'@'%'")
