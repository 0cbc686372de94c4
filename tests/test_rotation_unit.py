"""Pure logic of the rotating verification: its cursor, key ranges, the status line, file pruning."""

import datetime as dt
from decimal import Decimal

import pyarrow as pa
from deltalake import DeltaTable, write_deltalake

from dagster_mysql_cdc.dagster_integration.range_comparison import _key_where
from dagster_mysql_cdc.dagster_integration.rotation import (
    RotationState,
    TableRotation,
    _decode_key,
    _encode_key,
    status_line,
)
from dagster_mysql_cdc.dagster_integration.status import CaptureStatus
from dagster_mysql_cdc.sink.read import _files_in_range, read_current
from dagster_mysql_cdc.sink.storage import StorageSettings


def test_cursor_round_trips_keys_of_every_type():
    key = (7, "a", dt.datetime(2024, 1, 2, 3, 4, 5, 6), dt.date(2024, 1, 2), Decimal("1.50"), b"\x00\xff")
    state = RotationState(tables={"db.t": TableRotation(after=_encode_key(key), rows_done=5)}, current="db.t")
    again = RotationState.parse(state.to_json())
    assert _decode_key(again.tables["db.t"].after) == key
    assert again.current == "db.t" and again.tables["db.t"].rows_done == 5
    assert RotationState.parse(None).tables == {}


def test_key_where_is_an_exclusive_start_and_inclusive_end():
    where, params = _key_where(["a", "b"], (1, "x"), (5, "y"))
    assert where == (
        "((`a` > %s) OR (`a` = %s AND `b` > %s)) AND "
        "((`a` < %s) OR (`a` = %s AND `b` < %s) OR (`a` = %s AND `b` = %s))"
    )
    assert params == [1, 1, "x", 5, 5, "y", 5, "y"]
    assert _key_where(["id"], None, None) == ("1=1", [])


def test_status_line_shows_age_progress_and_a_differing_range():
    now = 10_000.0
    state = RotationState(
        tables={
            "db.a": TableRotation(
                last_full_pass=now - 240, rows_total=100, rows_done=40, pass_started=now - 10, passes=1
            ),
            "db.b": TableRotation(rows_done=150),
            "db.k": TableRotation(skipped="no primary key"),
        },
        suspect={"table": "db.b", "differing": 2},
    )
    line = status_line(state.to_json(), now=now)
    assert line == (
        "verification: db.a verified 4 min ago, 40 % of next pass; db.b first pass 150 rows; "
        "db.k skipped (no primary key) | differing: db.b 2 key(s)"
    )
    assert status_line(None) == "verification: not started"
    lines = CaptureStatus(sensor="s", committed=None, server=None, verification=line).lines()
    assert lines[-1] == line


def test_key_range_reads_only_the_state_files_that_may_hold_it(tmp_path):
    uri = str(tmp_path / "state")
    for lo in (0, 100, 200):  # three files of disjoint key ranges
        ids = list(range(lo, lo + 100))
        write_deltalake(
            uri,
            pa.table({"id": ids, "v": ids, "__deleted": [False] * 100}),
            mode="append",
            configuration={"delta.dataSkippingNumIndexedCols": "32"},
        )
    storage = StorageSettings(base_uri=str(tmp_path))
    whole = read_current(storage, uri, live=True, with_tail=False)
    assert whole is not None and whole.num_rows == 300
    part = read_current(storage, uri, live=True, with_tail=False, key_range=("id", 150, 160))
    assert part is not None and sorted(part.column("id").to_pylist()) == list(range(150, 161))
    dtable = DeltaTable(uri)
    files = pa.table(dtable.get_add_actions(flatten=True)).column("path").to_pylist()
    assert len(_files_in_range(dtable, files, ("id", 150, 160))) == 1
    assert len(_files_in_range(dtable, files, ("id", 99, 100))) == 2
    assert len(_files_in_range(dtable, files, ("id", None, None))) == 3
    open_end = read_current(storage, uri, live=True, with_tail=False, key_range=("id", 290, None))
    assert open_end is not None and sorted(open_end.column("id").to_pylist()) == list(range(290, 300))


def _capture(committed_pos: int, incremental=None, stopped=()):
    import dagster as dg

    from dagster_mysql_cdc.dagster_integration.rotation import CaptureTables
    from dagster_mysql_cdc.events import BinlogPosition

    return CaptureTables(
        tables={
            "db.a": (dg.AssetKey(["s", "db", "a"]), "uri-a"),
            "db.b": (dg.AssetKey(["s", "db", "b"]), "uri-b"),
        },
        committed=BinlogPosition("mysql-bin.000001", committed_pos),
        incremental_state=incremental,
        stopped=set(stopped),
    )


def test_tick_state_machine_confirms_before_repairing_and_waits_for_the_repair():
    """The order of a tick's decisions, the comparisons given: a difference is compared again
    before its repair is queued; the repair is awaited (the capture past its signal) before the
    range is compared a third time; stopped tables are passed over."""
    from dagster_mysql_cdc.dagster_integration.range_comparison import RangeResult
    from dagster_mysql_cdc.dagster_integration.rotation import RotationOptions, verify_tick
    from dagster_mysql_cdc.events import BinlogPosition
    from dagster_mysql_cdc.source.schema import ColumnSchema, TableSchema

    schema = TableSchema("db", "a", (ColumnSchema(name="id", data_type="int", position=1),), ("id",))
    calls, repairs = [], []
    answers = [
        RangeResult(rows=10, hi=(10,), hi_converted=(10,)),  # a: 1..10 equal
        RangeResult(rows=5, end=True, differing=[(12,)], schema=schema),  # a: the rest, 12 differs
        RangeResult(rows=5, differing=[(12,)], schema=schema),  # the same range again: confirmed
        RangeResult(rows=5, schema=schema),  # after the repair: equal
    ]

    def compare(**kw):
        calls.append((kw["table"], kw["lo"], kw["hi"]))
        return answers[len(calls) - 1]

    def queue(schema, differing, lake_only, committed):
        repairs.append(differing)
        return "Repair queued: signal"

    opts = RotationOptions(rows=10)
    kw = dict(
        compare=compare, queue_repair=queue, server_position=lambda: BinlogPosition("mysql-bin.000001", 500)
    )
    state = RotationState()
    state, _, out = verify_tick(state, _capture(100, stopped=["db.b"]), options=opts, now=1.0, **kw)
    assert out.startswith("db.a: 0 key(s) equal") and calls == [("a", None, None)]
    state, _, out = verify_tick(state, _capture(100, stopped=["db.b"]), options=opts, now=2.0, **kw)
    assert "compared again next tick" in out and "full pass done" in out
    assert state.tables["db.a"].last_full_pass == 2.0 and state.suspect["table"] == "db.a"
    state, _, out = verify_tick(state, _capture(100, stopped=["db.b"]), options=opts, now=3.0, **kw)
    assert "confirmed differing" in out and repairs == [[(12,)]]
    assert calls[-1] == ("a", (10,), None)  # the same range compared again
    state, obs, out = verify_tick(state, _capture(400, stopped=["db.b"]), options=opts, now=4.0, **kw)
    assert "waiting for the repair" in out and len(calls) == 3  # the capture is not past the signal
    pending = {"snapshot_id": "x", "tables": [{"table": "db.a", "reason": "checksum_mismatch"}]}
    state, _, out = verify_tick(state, _capture(600, pending), options=opts, now=5.0, **kw)
    assert "waiting for the repair" in out and len(calls) == 3  # its incremental snapshot runs
    state, _, out = verify_tick(state, _capture(700, stopped=["db.b"]), options=opts, now=6.0, **kw)
    assert "repaired" in out and state.suspect is None and len(repairs) == 1
    state, obs, out = verify_tick(state, _capture(700, stopped=["db.b"]), options=opts, now=7.0, **kw)
    assert out == "db.b: not compared now: its capture is stopped" and len(calls) == 4


def test_status_reads_the_verification_sensors_cursor(tmp_path):
    """``status`` of a binlog sensor prints the line of its verification sensor
    (``<sensor>_verification``) when that sensor has state in the instance, and none without."""
    import dagster as dg
    from dagster._core.definitions.run_request import InstigatorType
    from dagster._core.remote_origin import (
        InProcessCodeLocationOrigin,
        RemoteInstigatorOrigin,
        RemoteRepositoryOrigin,
    )
    from dagster._core.scheduler.instigation import InstigatorState, InstigatorStatus, SensorInstigatorData
    from dagster._core.types.loadable_target_origin import LoadableTargetOrigin

    from dagster_mysql_cdc.dagster_integration.status import read_status

    location = InProcessCodeLocationOrigin(loadable_target_origin=LoadableTargetOrigin(python_file=__file__))
    repo = RemoteRepositoryOrigin(location, "__repository__")

    def add(instance, name: str, cursor: str) -> None:
        instance.add_instigator_state(
            InstigatorState(
                RemoteInstigatorOrigin(repo, name),
                InstigatorType.SENSOR,
                InstigatorStatus.RUNNING,
                SensorInstigatorData(cursor=cursor),
            )
        )

    with dg.instance_for_test(temp_dir=str(tmp_path)) as instance:
        add(instance, "cap_binlog_sensor", "")
        assert read_status(instance, "cap_binlog_sensor").verification is None
        state = RotationState(tables={"db.t": TableRotation(rows_done=7)})
        add(instance, "cap_binlog_sensor_verification", state.to_json())
        status = read_status(instance, "cap_binlog_sensor")
        assert status.verification == "verification: db.t first pass 7 rows"
        assert status.verification in status.lines()
