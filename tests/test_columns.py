"""Column filters and masks against MariaDB (Debezium column.include.list / column.exclude.list,
column.mask.hash.<algorithm>.with.salt.<salt>, column.mask.with.<n>.chars,
column.truncate.to.<n>.chars): the same captured, masked values on the snapshot, streaming and
incremental-snapshot paths; checks compare the captured columns; a masked or excluded original
value appears nowhere: not in any lake file, log line, run metadata, cursor or run config."""

import logging
import os
import uuid

import dagster as dg
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable
from lake_utils import live_state_rows
from sensor_harness import SensorDriven, capture_resource, scratch_database

from dagster_mysql_cdc.errors import ConfigurationError
from dagster_mysql_cdc.source.columns import hash_mask

pytestmark = [pytest.mark.integration, pytest.mark.spark]

SALT = "Salt-" + uuid.uuid4().hex


def _lake_text(root: str) -> str:
    """Every file under the lake as text: Parquet files decoded (their pages are compressed),
    everything else (Delta logs, plans, manifests) as raw bytes."""
    parts = []
    for d, _, files in os.walk(root):
        for f in files:
            path = os.path.join(d, f)
            if f.endswith(".parquet"):
                parts.append(repr(pq.read_table(path).to_pylist()))
            else:
                with open(path, "rb") as fh:
                    parts.append(fh.read().decode("utf-8", "replace"))
    return "\n".join(parts)


def _run_texts(cdc: SensorDriven) -> str:
    texts = [cdc.cursor or ""]
    for run in cdc.instance.get_runs():
        texts += [repr(run.run_config), repr(run.tags)]
        for rec in cdc.instance.all_logs(run.run_id):
            texts.append(rec.message or "")
            if rec.dagster_event is not None:
                texts.append(repr(rec.dagster_event.event_specific_data))
    return "\n".join(texts)


def test_filtered_and_masked_columns_on_every_path_and_nowhere_else(local_storage, monkeypatch, caplog):
    monkeypatch.setenv("COLTEST_SALT", SALT)
    caplog.set_level(logging.DEBUG)
    tag = uuid.uuid4().hex[:10]
    originals: list[str] = [SALT]

    def person(i: int) -> tuple:
        email, ssn, notes, secret = (
            f"mail{i}-{tag}@example.com",
            f"S{i}-{tag}"[:11],
            f"NOTE-tail{i}-{tag}",
            f"SECRET{i}-{tag}",
        )
        originals.extend([email, ssn, notes[4:], secret])
        return (i, email, ssn, notes, secret, 20 + i)

    with scratch_database("col") as (db, conn):
        with conn.cursor() as cur:
            cur.execute(f"USE {db}")
            cur.execute(
                "CREATE TABLE people (id INT PRIMARY KEY, email VARCHAR(64), ssn CHAR(11), notes TEXT, "
                "secret VARCHAR(40), age INT)"
            )
            cur.execute("CREATE TABLE orders (id INT PRIMARY KEY, buyer_email VARCHAR(64), amount INT)")
            cur.executemany("INSERT INTO people VALUES (%s,%s,%s,%s,%s,%s)", [person(i) for i in (1, 2, 3)])
            cur.execute("INSERT INTO orders VALUES (10, %s, 5)", (f"mail1-{tag}@example.com",))
        mysql = capture_resource(
            db,
            column_exclude_list=[rf"{db}\.people\.secret"],
            column_mask_hash={rf"{db}\.(people\.email|orders\.buyer_email)": "SHA-256"},
            column_mask_hash_salt=dg.EnvVar("COLTEST_SALT"),
            column_mask_with_chars={rf"{db}\.people\.ssn": 5},
            column_truncate_to_chars={rf"{db}\.people\.notes": 4},
        )
        mysql.create_signal_table()
        tables = [t for t in mysql.discover_tables() if t.table != "debezium_signal"]
        people_spec = next(t for t in tables if t.table == "people")
        assert people_spec.column_names == ["id", "email", "ssn", "notes", "age"]  # UI column schema
        cdc = SensorDriven(mysql, local_storage.base_uri, tables=tables)
        cdc.ticks()  # initial snapshot

        with conn.cursor() as cur:  # streaming, across a DDL that adds a column after the excluded one
            cur.execute(f"USE {db}")
            cur.execute("INSERT INTO people VALUES (%s,%s,%s,%s,%s,%s)", person(4))
            p5 = person(5)
            cur.execute("UPDATE people SET email=%s, notes=%s, secret=%s WHERE id=1", (p5[1], p5[3], p5[4]))
            cur.execute("DELETE FROM people WHERE id=2")
            cur.execute("ALTER TABLE people ADD COLUMN nick VARCHAR(20) AFTER secret")
            p6 = person(6)
            cur.execute("INSERT INTO people VALUES (%s,%s,%s,%s,%s,'nick6',%s)", p6[:5] + p6[5:])
            cur.execute("INSERT INTO orders VALUES (11, %s, 7)", (p6[1],))
            # statement-based DML: a gap whose statement text holds an excluded value
            secret7 = f"SECRET7-{tag}"
            originals.append(secret7)
            cur.execute("SET SESSION binlog_format = 'STATEMENT'")
            cur.execute(f"UPDATE people SET secret = '{secret7}' WHERE id = 3")
            cur.execute("SET SESSION binlog_format = 'ROW'")
        gap_ticks = cdc.ticks()
        gaps = [
            g
            for r in gap_ticks.runs
            for m in r.get_asset_materialization_events()
            if m.asset_key.path[-1] == "binlog"
            for g in m.materialization.metadata["binlog_gaps"].value
        ]
        assert gaps and all("statement text withheld" in g["detail"] for g in gaps), gaps

        with conn.cursor() as cur:  # incremental snapshot of both tables
            cur.execute(
                f"INSERT INTO {db}.debezium_signal VALUES ('col-1', 'execute-snapshot', "
                f'\'{{"data-collections": ["{db}.people", "{db}.orders"]}}\')'
            )
        cdc.ticks()

        def h(v: str) -> str:
            return hash_mask("SHA-256", SALT, "v1", 64)(v)

        people = live_state_rows(local_storage, local_storage.uri(db, db, "people", "state"), ["id"])
        assert people == [
            {"id": 1, "email": h(p5[1]), "ssn": "*****", "notes": "NOTE", "age": 21, "nick": None},
            {
                "id": 3,
                "email": h(f"mail3-{tag}@example.com"),
                "ssn": "*****",
                "notes": "NOTE",
                "age": 23,
                "nick": None,
            },
            {
                "id": 4,
                "email": h(f"mail4-{tag}@example.com"),
                "ssn": "*****",
                "notes": "NOTE",
                "age": 24,
                "nick": None,
            },
            {"id": 6, "email": h(p6[1]), "ssn": "*****", "notes": "NOTE", "age": 26, "nick": "nick6"},
        ]
        orders = live_state_rows(local_storage, local_storage.uri(db, db, "orders", "state"), ["id"])
        # hashed columns stay joinable across tables
        assert {o["buyer_email"] for o in orders} <= {p["email"] for p in people} | {
            h(f"mail1-{tag}@example.com")
        }
        assert orders[1]["buyer_email"] == people[3]["email"]
        changelog = DeltaTable(local_storage.uri(db, db, "people", "changelog")).to_pyarrow_table()
        assert "secret" not in changelog.schema.field("after").type.names
        snaps = {e["source"]["snapshot"] for e in changelog.to_pylist()}
        assert {"incremental", "first"} & snaps and "false" in snaps  # every path was taken

        key = dg.AssetKey([db, db, "people"])
        res = dg.materialize(
            [cdc.cdc],
            resources=cdc.resources,
            instance=cdc.instance,
            selection=dg.AssetSelection.checks_for_assets(key, dg.AssetKey([db, db, "orders"])),
        )
        checks = {(e.asset_key, e.check_name): e for e in res.get_asset_check_evaluations()}
        assert checks and all(c.passed for c in checks.values()), {
            k: c.metadata for k, c in checks.items() if not c.passed
        }
        compared = checks[(key, "checksum_matches_source")].metadata["columns_compared"].value
        assert compared == ["id", "email", "ssn", "notes", "nick", "age"]  # source order, no "secret"

        blob = "\n".join(
            [_lake_text(local_storage.base_uri), _run_texts(cdc), *(r.getMessage() for r in caplog.records)]
        )
        blob += repr(mysql) + repr(mysql.type_options())
        leaked = [v for v in originals if v in blob]
        assert not leaked, f"original values found: {leaked}"
        assert h(p5[1]) in blob  # the search does see the lake's values
        assert "Column policy: " in blob and "column_mask_hash_version" in blob  # logged, without the salt


def test_key_columns_cannot_be_left_out_or_masked_into_collisions():
    with scratch_database("colk") as (db, conn):
        with conn.cursor() as cur:
            cur.execute(f"CREATE TABLE {db}.t (code VARCHAR(20) PRIMARY KEY, v INT)")
        with pytest.raises(ConfigurationError, match=rf"{db}\.t\.code"):
            capture_resource(db, column_exclude_list=[r".*\.code"]).discover_tables()
        with pytest.raises(ConfigurationError, match="every key would collide"):
            capture_resource(db, column_mask_with_chars={r".*\.code": 3}).discover_tables()
        with pytest.raises(ConfigurationError, match="only character columns"):
            capture_resource(db, column_truncate_to_chars={rf"{db}\.t\.v": 3}).discover_tables()
        with pytest.raises(ConfigurationError, match="include_query"):
            capture_resource(
                db, include_query=True, column_mask_hash={r".*\.code": "MD5"}, column_mask_hash_salt="s"
            ).stream_options()
        hashed = capture_resource(db, column_mask_hash={r".*\.code": "MD5"}, column_mask_hash_salt="s")
        assert [t.column_names for t in hashed.discover_tables()] == [["code", "v"]]


def test_hashed_primary_key_streams_and_never_leaves_its_raw_value(local_storage, monkeypatch, caplog):
    """A hashed key column keys the state by its hash; incremental snapshots, which would store
    raw key values as chunk bounds in the cursor and run tags, are refused for the table."""
    monkeypatch.setenv("COLTEST_SALT", SALT)
    caplog.set_level(logging.DEBUG)
    tag = uuid.uuid4().hex[:10]
    codes = [f"CODE{i}-{tag}" for i in range(5)]
    with scratch_database("colpk") as (db, conn):
        with conn.cursor() as cur:
            cur.execute(f"CREATE TABLE {db}.acct (code VARCHAR(40) PRIMARY KEY, n INT)")
            cur.executemany(
                f"INSERT INTO {db}.acct VALUES (%s, %s)", [(c, i) for i, c in enumerate(codes[:3])]
            )
        mysql = capture_resource(
            db,
            column_mask_hash={rf"{db}\.acct\.code": "SHA-256"},
            column_mask_hash_salt=dg.EnvVar("COLTEST_SALT"),
        )
        mysql.create_signal_table()
        cdc = SensorDriven(
            mysql, local_storage.base_uri, tables=[t for t in mysql.discover_tables() if t.table == "acct"]
        )
        cdc.ticks()
        with conn.cursor() as cur:
            cur.execute(f"INSERT INTO {db}.acct VALUES (%s, 3), (%s, 4)", (codes[3], codes[4]))
            cur.execute(f"UPDATE {db}.acct SET n = 10 WHERE code = %s", (codes[0],))
            cur.execute(f"DELETE FROM {db}.acct WHERE code = %s", (codes[1],))
            cur.execute(
                f"INSERT INTO {db}.debezium_signal VALUES ('pk-1', 'execute-snapshot', "
                f'\'{{"data-collections": ["{db}.acct"]}}\')'
            )
        ticks = cdc.ticks()
        assert all(r.success for r in ticks.runs)

        def h(v: str) -> str:
            return hash_mask("SHA-256", SALT, "v1", 40)(v)

        rows = live_state_rows(local_storage, local_storage.uri(db, db, "acct", "state"), ["code"])
        want = sorted([(h(codes[0]), 10), (h(codes[2]), 2), (h(codes[3]), 3), (h(codes[4]), 4)])
        assert sorted((r["code"], r["n"]) for r in rows) == want
        logs = _run_texts(cdc)
        assert "have a masked key column" in logs  # the signal was rejected, with a WARNING
        blob = "\n".join(
            [_lake_text(local_storage.base_uri), logs, *(r.getMessage() for r in caplog.records)]
        )
        assert not [c for c in codes if c in blob]
