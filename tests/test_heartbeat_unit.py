"""Table heartbeats (dagster_integration/heartbeat.py) on a real ephemeral Dagster instance: which
quiet tables get a runless materialization, what it carries, which check results go with it."""

import time

import dagster as dg
import pytest

from dagster_mysql_cdc import mysql_cdc_assets
from dagster_mysql_cdc.dagster_integration.heartbeat import heartbeat_every, table_heartbeats
from dagster_mysql_cdc.dagster_integration.protocol import binlog_asset_key
from dagster_mysql_cdc.events import BinlogPosition

AT = BinlogPosition("mysql-bin.000004", 1234)


def build(**kw) -> dg.AssetsDefinition:
    @mysql_cdc_assets(
        tables=["db.a", "db.b"],
        server_name="srv",
        sensor_interval_seconds=5,
        **{"stream_follow_seconds": 0, **kw},
    )
    def cdc(context: dg.AssetExecutionContext):
        yield from ()

    return cdc


def key(table: str) -> dg.AssetKey:
    return dg.AssetKey(["srv", "db", table])


def materialize(instance: dg.DagsterInstance, asset: dg.AssetKey, **metadata) -> None:
    instance.report_runless_asset_event(dg.AssetMaterialization(asset_key=asset, metadata=metadata))


def evaluate(instance: dg.DagsterInstance, asset: dg.AssetKey, name: str, passed: bool) -> None:
    instance.report_runless_asset_event(
        dg.AssetCheckEvaluation(asset_key=asset, check_name=name, passed=passed, metadata={"n": 1})
    )


@pytest.fixture
def instance():
    with dg.DagsterInstance.ephemeral() as inst:
        yield inst


def test_interval_is_half_the_warn_window():
    cdc = build()
    policy = next(s.freshness_policy for s in cdc.specs if s.key == key("a"))
    assert heartbeat_every(policy, 7) == 60  # warn window max(120, 10 x 5) s
    assert heartbeat_every(None, 7) == 7


def test_quiet_table_gets_a_heartbeat_with_its_checks_carried(instance):
    cdc = build()
    materialize(instance, key("a"), **{"dagster/row_count": 3, "dagster/uri": "file:///lake/a/state"})
    evaluate(instance, key("a"), "row_count_matches_source", True)
    evaluate(instance, key("a"), "checksum_matches_source", False)
    later = time.time() + 3600
    events = table_heartbeats(instance, cdc, AT, "caught up at x", default_every_seconds=60, now=later)
    mats = [e for e in events if isinstance(e, dg.AssetMaterialization)]
    assert [m.asset_key for m in mats] == [key("a")]  # b was never materialized: no heartbeat
    md = mats[0].metadata
    assert md["kind"].value == "heartbeat" and md["dagster/row_count"] == dg.MetadataValue.int(3)
    assert md["window_end_pos"] == dg.MetadataValue.int(1234)
    checks = {e.check_name: e for e in events if isinstance(e, dg.AssetCheckEvaluation)}
    assert set(checks) == {"row_count_matches_source", "checksum_matches_source"}  # schema: none yet
    assert checks["row_count_matches_source"].passed
    assert not checks["checksum_matches_source"].passed  # a failure is carried as a failure
    assert "no change to this table" in checks["checksum_matches_source"].metadata["carried_forward"].value
    for e in events:
        instance.report_runless_asset_event(e)
    # just beaten: not due again; half the warn window later it is
    assert (
        table_heartbeats(instance, cdc, AT, "caught up", default_every_seconds=60, now=time.time() + 1) == []
    )
    again = table_heartbeats(instance, cdc, AT, "caught up", default_every_seconds=60, now=time.time() + 61)
    assert [e.check_name for e in again if isinstance(e, dg.AssetCheckEvaluation)] == [
        "checksum_matches_source",
        "row_count_matches_source",
    ]


def test_results_older_than_the_last_materialization_are_not_carried(instance):
    cdc = build()
    evaluate(instance, key("a"), "row_count_matches_source", True)
    time.sleep(0.01)
    materialize(instance, key("a"))  # a later materialization whose checks did not run
    events = table_heartbeats(
        instance, cdc, AT, "caught up", default_every_seconds=60, now=time.time() + 3600
    )
    assert [type(e) for e in events] == [dg.AssetMaterialization]


def test_busy_capture_beats_only_while_its_last_window_is_recent(instance):
    cdc = build()
    materialize(instance, key("a"))
    binlog = binlog_asset_key(cdc.specs)
    assert binlog is not None
    materialize(instance, binlog, window_end_file="mysql-bin.000009", window_end_pos=77)
    t = time.time()
    # not caught up (a run is going): current to the binlog asset's last window end
    beats = table_heartbeats(instance, cdc, None, "run x is STARTED", default_every_seconds=60, now=t + 59)
    assert beats == []  # a was materialized less than 60 s ago
    # a is due 120 s later, but the capture's last window is as old: stating it current would lie
    assert table_heartbeats(instance, cdc, None, "run x", default_every_seconds=60, now=t + 120) == []


def test_busy_capture_heartbeat_uses_the_last_window_end(instance):
    cdc = build()
    binlog = binlog_asset_key(cdc.specs)
    assert binlog is not None
    materialize(instance, key("a"))
    time.sleep(1.0)  # the table 1 s older than the last window: due at +59.5 s, the window not stale
    materialize(instance, binlog, window_end_file="mysql-bin.000009", window_end_pos=77)
    # 60 s after a's materialization, the last window 0.05 s older: due and current
    mats = [
        e
        for e in table_heartbeats(
            instance, cdc, None, "run x", default_every_seconds=60, now=time.time() + 59.5
        )
        if isinstance(e, dg.AssetMaterialization)
    ]
    assert [m.asset_key for m in mats] == [key("a")]
    assert mats[0].metadata["window_end_file"] == dg.MetadataValue.text("mysql-bin.000009")


def test_no_policy_no_heartbeat(instance):
    cdc = build(table_freshness_policy=None)
    materialize(instance, key("a"))
    assert (
        table_heartbeats(instance, cdc, AT, "caught up", default_every_seconds=60, now=time.time() + 3600)
        == []
    )


def test_heartbeats_carry_the_offset_epoch(instance):
    """After a failover (epoch 1) a heartbeat's position keeps its epoch, so a snapshot run that
    reads the binlog asset's last position takes the capture's epoch."""
    from dagster_mysql_cdc.dagster_integration.heartbeat import idle_heartbeat
    from dagster_mysql_cdc.dagster_integration.protocol import position_from_metadata

    cdc = build()
    materialize(instance, key("a"))
    time.sleep(1.0)  # the table 1 s older than the last window: due at +59.5 s, the window not stale
    at = BinlogPosition("mysql-bin.000001", 99, "0-2-7", epoch=1)
    (beat,) = [
        e for e in idle_heartbeat(instance, cdc, at, "caught up", 0) if isinstance(e, dg.AssetMaterialization)
    ]
    assert position_from_metadata(beat.metadata, "window_end") == at
    instance.report_runless_asset_event(beat)
    mats = [
        e
        for e in table_heartbeats(
            instance, cdc, None, "run x", default_every_seconds=60, now=time.time() + 59.5
        )
        if isinstance(e, dg.AssetMaterialization)
    ]
    assert [position_from_metadata(m.metadata, "window_end") for m in mats] == [at]


def test_a_stopped_table_gets_no_heartbeat(instance):
    """A table whose capture is stopped (the cursor's ``stopped``) is not current: no heartbeat, so
    its freshness goes stale; the other quiet tables keep theirs."""
    cdc = build()
    materialize(instance, key("a"))
    materialize(instance, key("b"))
    later = time.time() + 3600
    both = table_heartbeats(instance, cdc, AT, "caught up", default_every_seconds=60, now=later)
    assert {e.asset_key for e in both} == {key("a"), key("b")}
    one = table_heartbeats(
        instance, cdc, AT, "caught up", default_every_seconds=60, now=later, stopped={"db.b"}
    )
    assert {e.asset_key for e in one} == {key("a")}


def test_ticks_read_no_materialization_until_a_table_can_be_due(instance, monkeypatch):
    """At 1,000 tables reading every table's latest materialization costs ~0.5 s a tick: after a
    scan, ticks skip it until the earliest time a table can be due (a materialization only moves
    that later), and a table that is due while the lake is not current is looked at again."""
    cdc = build()
    materialize(instance, key("a"))
    reads = []
    real = instance.get_latest_materialization_events

    def counting(keys):
        reads.append(len(keys))
        return real(keys)

    monkeypatch.setattr(instance, "get_latest_materialization_events", counting)
    t = time.time()
    assert table_heartbeats(instance, cdc, AT, "caught up", default_every_seconds=60, now=t + 1) == []
    assert len(reads) == 1  # a is due at +60, b (never materialized) at +60 at the earliest
    assert table_heartbeats(instance, cdc, AT, "caught up", default_every_seconds=60, now=t + 30) == []
    materialize(instance, key("b"))  # b's first materialization: due at +60 or later, never earlier
    assert table_heartbeats(instance, cdc, AT, "caught up", default_every_seconds=60, now=t + 59) == []
    assert len(reads) == 1
    beats = table_heartbeats(instance, cdc, AT, "caught up", default_every_seconds=60, now=t + 61)
    assert len(reads) == 2  # both are due now (b was materialized just after t)
    assert [e.asset_key for e in beats if isinstance(e, dg.AssetMaterialization)] == [key("a"), key("b")]
    # with other tables stopped the scan is another one (the memo is per set of stopped tables)
    table_heartbeats(instance, cdc, AT, "x", default_every_seconds=60, now=t + 62, stopped={"db.a"})
    assert len(reads) == 3


def test_the_skip_holds_for_each_ticks_new_instance_object(tmp_path, monkeypatch):
    """The daemon's code server evaluates every tick with a new DagsterInstance object of the same
    instance: the skip is kept per instance (its root directory), not per object."""
    cdc = build()
    with dg.instance_for_test(temp_dir=str(tmp_path)) as first:
        materialize(first, key("a"))
        t = time.time()
        assert table_heartbeats(first, cdc, AT, "x", default_every_seconds=60, now=t + 1) == []
        with dg.DagsterInstance.from_ref(first.get_ref()) as again:
            reads = []
            monkeypatch.setattr(
                again, "get_latest_materialization_events", lambda keys: reads.append(keys) or {}
            )
            assert table_heartbeats(again, cdc, AT, "x", default_every_seconds=60, now=t + 2) == []
            assert reads == []


def test_the_due_tables_check_results_are_read_at_once_and_a_failed_read_fails_each_heartbeat(
    instance, monkeypatch
):
    """A capture of hundreds of quiet tables reads the check results it carries in one query
    for every due table (it made one per check and table: 900 for 300 tables); if that read
    fails, each due table's heartbeat fails alone, named in ``errors``, and is due again."""
    cdc = build()
    for t in ("a", "b"):
        materialize(instance, key(t))
        evaluate(instance, key(t), "row_count_matches_source", True)
    storage = instance.event_log_storage
    read = storage.get_latest_asset_check_execution_by_key
    calls: list[list] = []

    def spy(cks, *args, **kwargs):
        calls.append(list(cks))
        return read(cks, *args, **kwargs)

    monkeypatch.setattr(storage, "get_latest_asset_check_execution_by_key", spy)
    later = time.time() + 3600
    events = table_heartbeats(instance, cdc, AT, "caught up", default_every_seconds=60, now=later)
    assert len(calls) == 1 and {ck.asset_key for ck in calls[0]} == {key("a"), key("b")}, calls
    carried = [(e.asset_key, e.check_name) for e in events if isinstance(e, dg.AssetCheckEvaluation)]
    assert carried == [(key("a"), "row_count_matches_source"), (key("b"), "row_count_matches_source")]

    def broken(cks, *args, **kwargs):
        raise OSError("database is locked")

    monkeypatch.setattr(storage, "get_latest_asset_check_execution_by_key", broken)
    errors: list[str] = []
    assert (
        table_heartbeats(instance, cdc, AT, "x", default_every_seconds=60, now=later + 1, errors=errors) == []
    )
    assert [e.split(" failed")[0] for e in errors] == ["heartbeat of srv/db/a", "heartbeat of srv/db/b"], (
        errors
    )
    assert all("OSError: database is locked" in e for e in errors)
    monkeypatch.setattr(storage, "get_latest_asset_check_execution_by_key", read)
    assert table_heartbeats(instance, cdc, AT, "x", default_every_seconds=60, now=later + 2), "not due again"
