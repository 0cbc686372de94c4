"""One lake prefix, one deployment (``sink/owner.py``): the first run of a Dagster instance claims
``<base_uri>/<server_name>/`` with an owner marker; a run of another instance that would write
the same prefix fails before it writes anything, with a message that names both instances and
the fixes; deleting the marker hands the prefix over. Real MariaDB, real SeaweedFS (S3) and the
local filesystem, real Spark, real Dagster instances on SQLite files."""

import logging
import threading

import dagster as dg
import pytest
from lake_utils import canonical_rows, read_delta, source_rows
from sensor_harness import SensorDriven, capture_resource, scratch_database
from test_faults import assert_unique_binlog_events

from dagster_mysql_cdc import read_current
from dagster_mysql_cdc.sink.owner import (
    LakeOwner,
    LakeOwnerError,
    check_lake_owner,
    claim_lake_prefix,
    owner_marker_uri,
    read_owner,
)
from dagster_mysql_cdc.sink.storage import StorageSettings


def _lake_options(storage: StorageSettings) -> dict:
    if not storage.is_s3:
        return {}
    return {
        "s3_endpoint_url": storage.s3_endpoint_url,
        "s3_access_key_id": storage.s3_access_key_id,
        "s3_secret_access_key": storage.s3_secret_access_key,
    }


def _delete(storage: StorageSettings, uri: str) -> None:
    storage.pyarrow_filesystem().delete_file(storage.fs_path(uri))


def test_claims_are_first_writer_wins_and_name_both_instances(storage):
    """Pure claim logic on the real object store / filesystem: the first claim writes the marker,
    the same instance passes, another instance is refused (the marker unchanged), eight
    concurrent first claims leave exactly one winner, and a malformed marker is refused too."""
    assert read_owner(storage, "srv") is None
    assert claim_lake_prefix(storage, "srv", LakeOwner("instance-a", run_id="run-1")).outcome == "claimed"
    assert claim_lake_prefix(storage, "srv", LakeOwner("instance-a", run_id="run-2")).outcome == "held"
    with pytest.raises(LakeOwnerError) as e:
        claim_lake_prefix(storage, "srv", LakeOwner("instance-b", run_id="run-3"))
    msg = str(e.value)
    uri = owner_marker_uri(storage, "srv")
    assert "instance-a" in msg and "instance-b" in msg and "run-1" in msg and uri in msg
    assert "server_name" in msg and "base_uri" in msg and "Nothing was written" in msg
    assert ("aws s3 rm" in msg) == storage.is_s3
    assert read_owner(storage, "srv")["instance_id"] == "instance-a"

    won: list[str] = []
    refused: list[str] = []

    def claim(i: int) -> None:
        try:
            claim_lake_prefix(storage, "race", LakeOwner(f"instance-{i}"))
            won.append(f"instance-{i}")
        except LakeOwnerError:
            refused.append(f"instance-{i}")

    threads = [threading.Thread(target=claim, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(won) == 1 and len(refused) == 7, (won, refused)
    assert read_owner(storage, "race")["instance_id"] == won[0]

    storage.write_bytes(owner_marker_uri(storage, "bad"), b"not json")
    with pytest.raises(LakeOwnerError, match="not a JSON object"):
        claim_lake_prefix(storage, "bad", LakeOwner("instance-a"))


def test_an_owner_whose_sqlite_storage_on_this_host_is_gone_is_taken_over(storage, tmp_path):
    """A ``dagster dev`` without ``DAGSTER_HOME`` deletes its instance at exit: its marker names a
    run database on this host that no longer exists, so the next instance takes the prefix over.
    An owner whose file exists, or on another host, or on another storage, is refused."""
    runs_db = tmp_path / "home" / "history" / "runs.db"
    runs_db.parent.mkdir(parents=True)
    runs_db.write_bytes(b"")
    old = LakeOwner("instance-old", run_id="run-1", run_storage_file=str(runs_db))
    assert claim_lake_prefix(storage, "srv", old).outcome == "claimed"
    with pytest.raises(LakeOwnerError):  # the old instance's storage still exists
        claim_lake_prefix(storage, "srv", LakeOwner("instance-new"))
    with pytest.raises(LakeOwnerError):  # the sensor's read-only check agrees
        check_lake_owner(storage, "srv", "instance-new")
    check_lake_owner(storage, "srv", "instance-old")
    check_lake_owner(storage, "unclaimed", "instance-new")
    runs_db.unlink()
    check_lake_owner(storage, "srv", "instance-new")  # gone: the tick passes, the run takes over
    assert read_owner(storage, "srv")["instance_id"] == "instance-old", "the check wrote nothing"
    claim = claim_lake_prefix(storage, "srv", LakeOwner("instance-new", run_id="run-2"))
    assert claim.outcome == "took_over" and claim.previous["instance_id"] == "instance-old"
    assert read_owner(storage, "srv")["instance_id"] == "instance-new"
    with pytest.raises(LakeOwnerError):  # the new owner has no SQLite file: never taken over
        claim_lake_prefix(storage, "srv", LakeOwner("instance-old", run_storage_file=str(runs_db)))

    elsewhere = LakeOwner("instance-remote", host="another-host", run_storage_file=str(runs_db))
    assert claim_lake_prefix(storage, "srv2", elsewhere).outcome == "claimed"
    with pytest.raises(LakeOwnerError):  # a missing path on another host proves nothing
        claim_lake_prefix(storage, "srv2", LakeOwner("instance-new"))


@pytest.mark.integration
def test_a_second_deployment_on_one_prefix_is_refused_and_loses_nothing(storage):
    """Two Dagster instances (two deployments: e.g. a staging copy pointed at production's bucket)
    capture one server with one ``server_name`` into one ``base_uri``. The first claims the prefix
    with its initial snapshot and streams; the second's sensor ticks fail and a run of it (the UI's
    Materialize) fails before writing anything while the first goes on; once the first is retired and the marker deleted, the second claims
    the prefix, and the first is refused in turn. The lake equals the source throughout, and no
    change is in the change log twice."""
    with scratch_database("owner") as (db, conn):
        with conn.cursor() as cur:
            cur.execute(f"CREATE TABLE {db}.t (id INT PRIMARY KEY, v INT)")
            cur.execute(f"INSERT INTO {db}.t VALUES (1, 10), (2, 20)")
        with dg.instance_for_test() as first_instance, dg.instance_for_test() as second_instance:
            options = _lake_options(storage)
            first = SensorDriven(capture_resource(db), storage.base_uri, instance=first_instance, **options)
            second = SensorDriven(capture_resource(db), storage.base_uri, instance=second_instance, **options)

            assert all(r.success for r in first.ticks().runs)  # the initial snapshot claims
            owner = read_owner(storage, db)
            assert owner["instance_id"] == first_instance.run_storage.get_run_storage_id()
            with conn.cursor() as cur:
                cur.execute(f"INSERT INTO {db}.t VALUES (3, 30)")
                cur.execute(f"UPDATE {db}.t SET v = 11 WHERE id = 1")
            assert all(r.success for r in first.ticks().runs)

            def lake() -> list[tuple]:
                state = read_current((db, "t"), storage, server=db, metadata=False)
                return sorted(zip(state["id"].to_pylist(), state["v"].to_pylist(), strict=True))

            def source() -> list[tuple]:
                rows, _ = source_rows(db, "t")
                return sorted((r["id"], r["v"]) for r in rows)

            changelog = storage.uri(db, db, "t", "changelog")
            events_before = canonical_rows(read_delta(storage, changelog))
            assert lake() == source()

            # the second deployment: its sensor's ticks fail, and a run launched anyway (the
            # UI's Materialize) fails before writing anything
            with pytest.raises(Exception, match="belongs to another Dagster deployment") as tick_error:
                second.tick_once()
            assert first_instance.run_storage.get_run_storage_id() in str(tick_error.value)
            assert second.cursor is None, "a refused tick moves no cursor"
            run = dg.materialize(
                [second.cdc], resources=second.resources, instance=second_instance, raise_on_error=False
            )
            assert not run.success
            failure = _failure_message(run)
            assert "LakeOwnerError" in failure and "belongs to another Dagster deployment" in failure
            assert first_instance.run_storage.get_run_storage_id() in failure
            assert canonical_rows(read_delta(storage, changelog)) == events_before
            assert read_owner(storage, db) == owner

            # the first goes on streaming
            with conn.cursor() as cur:
                cur.execute(f"DELETE FROM {db}.t WHERE id = 2")
            assert all(r.success for r in first.ticks().runs)
            assert lake() == source()

            # the first deployment is retired; the marker is deleted: the second claims it
            _delete(storage, owner_marker_uri(storage, db))
            second.cursor = None
            assert all(r.success for r in second.ticks().runs)
            assert read_owner(storage, db)["instance_id"] == second_instance.run_storage.get_run_storage_id()
            with conn.cursor() as cur:
                cur.execute(f"INSERT INTO {db}.t VALUES (4, 40)")
            assert all(r.success for r in second.ticks().runs)
            assert lake() == source()
            with conn.cursor() as cur:
                cur.execute(f"INSERT INTO {db}.t VALUES (5, 50)")
            with pytest.raises(Exception, match="belongs to another Dagster deployment"):
                first.tick_once()
            refused = first.launch(dg.RunRequest(asset_selection=[dg.AssetKey([db, db, "t"])]))
            assert not refused.success
            assert "belongs to another Dagster deployment" in _failure_message(refused)
            assert all(r.success for r in second.ticks().runs)
            assert lake() == source()
            assert assert_unique_binlog_events(read_delta(storage, changelog)) == 5  # 3 c, 1 u, 1 d


@pytest.mark.integration
def test_a_restarted_dagster_dev_without_dagster_home_takes_its_prefix_over(local_storage):
    """``dagster dev`` without ``DAGSTER_HOME`` keeps its instance in a temporary folder deleted at
    exit: after a restart the new instance takes the prefix over (a WARNING in the run's log), its
    empty cursor snapshots again, and streaming goes on."""
    with scratch_database("owner_tmp") as (db, conn):
        with conn.cursor() as cur:
            cur.execute(f"CREATE TABLE {db}.t (id INT PRIMARY KEY, v INT)")
            cur.execute(f"INSERT INTO {db}.t VALUES (1, 10)")
        with dg.instance_for_test() as gone:
            cdc = SensorDriven(capture_resource(db), local_storage.base_uri, instance=gone)
            assert all(r.success for r in cdc.ticks().runs)
            gone_id = gone.run_storage.get_run_storage_id()
        assert read_owner(local_storage, db)["instance_id"] == gone_id
        with conn.cursor() as cur:
            cur.execute(f"INSERT INTO {db}.t VALUES (2, 20)")
        with dg.instance_for_test() as restarted:
            cdc = SensorDriven(capture_resource(db), local_storage.base_uri, instance=restarted)
            runs = cdc.ticks().runs
            assert runs and all(r.success for r in runs)
            warnings = [
                e.message
                for e in restarted.all_logs(runs[0].run_id)
                if e.level == logging.WARNING and "Took over the lake prefix" in (e.message or "")
            ]
            assert len(warnings) == 1 and gone_id in warnings[0], warnings
            assert read_owner(local_storage, db)["instance_id"] == restarted.run_storage.get_run_storage_id()
            with conn.cursor() as cur:
                cur.execute(f"INSERT INTO {db}.t VALUES (3, 30)")
            assert all(r.success for r in cdc.ticks().runs)
        state = read_current((db, "t"), local_storage.base_uri, server=db)
        assert sorted(state["id"].to_pylist()) == [1, 2, 3]


@pytest.mark.integration
def test_an_ephemeral_instance_never_claims_and_is_refused_by_a_live_owner(local_storage):
    """``dg.materialize`` and ``DagsterInstance.ephemeral()`` (scripts, notebooks, tests, the
    in-process driver) hold no cursor that outlives their process: they write no marker. But their
    runs plan windows and snapshots of their own, so a prefix a live deployment holds refuses them
    as it refuses another deployment: the tick raises, a run fails before it writes anything. A
    gone owner's marker does not refuse them, and they do not take it over."""
    with scratch_database("owner_eph") as (db, conn):
        with conn.cursor() as cur:
            cur.execute(f"CREATE TABLE {db}.t (id INT PRIMARY KEY, v INT)")
            cur.execute(f"INSERT INTO {db}.t VALUES (1, 10)")
        ephemeral = SensorDriven(capture_resource(db), local_storage.base_uri)
        assert all(r.success for r in ephemeral.ticks().runs)
        assert read_owner(local_storage, db) is None  # an unclaimed prefix: written, not claimed
        with conn.cursor() as cur:
            cur.execute(f"INSERT INTO {db}.t VALUES (2, 20)")
        assert all(r.success for r in ephemeral.ticks().runs)
        changelog = local_storage.uri(db, db, "t", "changelog")

        with dg.instance_for_test() as deployment:
            # the deployment takes the prefix over from nobody: a marker of its own (claimed by
            # its first run), then the ephemeral capture (a script run beside it) is refused
            owned = SensorDriven(capture_resource(db), local_storage.base_uri, instance=deployment)
            assert all(r.success for r in owned.ticks().runs)
            owner = read_owner(local_storage, db)
            assert owner["instance_id"] == deployment.run_storage.get_run_storage_id()
            with conn.cursor() as cur:
                cur.execute(f"INSERT INTO {db}.t VALUES (3, 30)")
            events_before = canonical_rows(read_delta(local_storage, changelog))
            with pytest.raises(
                LakeOwnerError, match="this run's Dagster instance is ephemeral"
            ) as tick_error:
                ephemeral.tick_once()
            assert owner["instance_id"] in str(tick_error.value)
            run = dg.materialize([ephemeral.cdc], resources=ephemeral.resources, raise_on_error=False)
            assert not run.success
            failure = _failure_message(run)
            assert "LakeOwnerError" in failure and "this run's Dagster instance is ephemeral" in failure
            assert canonical_rows(read_delta(local_storage, changelog)) == events_before
            assert read_owner(local_storage, db) == owner
            assert all(r.success for r in owned.ticks().runs)  # the deployment streams the change
            state = read_current((db, "t"), local_storage.base_uri, server=db)
            assert sorted(state["id"].to_pylist()) == [1, 2, 3]

        # the deployment's temporary instance is gone: its marker refuses nobody, and an ephemeral
        # instance still claims nothing (the next persistent instance takes the prefix over)
        with conn.cursor() as cur:
            cur.execute(f"INSERT INTO {db}.t VALUES (4, 40)")
        fresh = SensorDriven(capture_resource(db), local_storage.base_uri)
        fresh.cursor = owned.cursor
        assert all(r.success for r in fresh.ticks().runs)
        assert read_owner(local_storage, db) == owner
        state = read_current((db, "t"), local_storage.base_uri, server=db)
        assert sorted(state["id"].to_pylist()) == [1, 2, 3, 4]


def test_the_demo_leaves_a_deployments_local_lake_alone(tmp_path, monkeypatch, capsys):
    """``make demo`` wipes and rewrites its local lake (``CDC_LAKE_URI``, default ``.lake``, which is
    ``make ui``'s lake too) with a cursor of its own. When a live deployment holds that lake's
    ``dbserver1`` prefix the demo writes ``$CDC_INFRA_DIR/demo-lake`` instead and says why; when
    both are held it stops with the fix; a gone owner's lake is the demo's again."""
    from assets.demo import local_lake

    lake, infra = tmp_path / "lake", tmp_path / "infra"
    monkeypatch.setenv("CDC_LAKE_URI", str(lake))
    monkeypatch.setenv("CDC_INFRA_DIR", str(infra))
    configured = StorageSettings(base_uri=str(lake))
    assert local_lake("dbserver1") == str(lake)  # nobody holds it
    runs_db = tmp_path / "runs.db"
    runs_db.write_bytes(b"")
    claim_lake_prefix(configured, "dbserver1", LakeOwner("make-ui", run_storage_file=str(runs_db)))
    assert local_lake("dbserver1") == str(infra / "demo-lake")
    out = capsys.readouterr().out
    assert "names Dagster instance make-ui" in out and "demo-lake" in out
    claim_lake_prefix(StorageSettings(base_uri=str(infra / "demo-lake")), "dbserver1", LakeOwner("other"))
    with pytest.raises(SystemExit, match="Set CDC_LAKE_URI to another folder"):
        local_lake("dbserver1")
    runs_db.unlink()  # make ui's instance deleted (make clean): the owner is gone
    assert local_lake("dbserver1") == str(lake)


def _failure_message(result: dg.ExecuteInProcessResult) -> str:
    return "\n".join(
        str(e.event_specific_data.error.to_string())
        for e in result.all_events
        if e.event_type == dg.DagsterEventType.STEP_FAILURE
    )
