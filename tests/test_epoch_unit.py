"""The offset epoch (issue 17): positions of a later server sort after the earlier server's, in the
cursor, the run tags, the state tables' ordering (Arrow and the Delta merge predicates, including
state tables written before the ``__epoch`` column existed) and the schema history.

Local Delta tables only (delta-rs, no Spark, no MariaDB): the failover against real servers is in
tests/test_failover.py.
"""

import json

import dagster as dg
import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

from dagster_mysql_cdc.dagster_integration.cursor import (
    ServerState,
    StreamCursor,
    plan_stream_window,
    window_key,
)
from dagster_mysql_cdc.dagster_integration.protocol import (
    position_from_metadata,
    position_from_tag,
    position_metadata,
    position_tag,
)
from dagster_mysql_cdc.events import STATE_META_FIELDS, BinlogPosition, state_schema
from dagster_mysql_cdc.sink.compaction import older_than_sql
from dagster_mysql_cdc.sink.current import resolve
from dagster_mysql_cdc.sink.schema_history import HistoryRecord, SchemaHistory
from dagster_mysql_cdc.sink.state_rows import count_per_value, epoch_filled, newest_per_key, older_than
from dagster_mysql_cdc.sink.storage import StorageSettings
from dagster_mysql_cdc.sink.tail import CUT_COL, cut_markers, tail_schema
from dagster_mysql_cdc.source.schema import ColumnSchema, TableSchema

OLD = BinlogPosition("mysql-bin.000007", 1687, "0-1-40")  # the old primary, epoch 0
NEW = BinlogPosition("mysql-bin.000001", 342, "0-1-40", epoch=1)  # the promoted replica


# -- BinlogPosition --------------------------------------------------------------------------------
def test_positions_of_a_later_epoch_sort_after_higher_file_numbers():
    assert NEW.sort_key() > OLD.sort_key()
    assert OLD.sort_key() == (0, 7, 1687)
    assert BinlogPosition("mysql-bin.000002", 4, epoch=1).sort_key() > NEW.sort_key()
    assert BinlogPosition("mysql-bin.000009", 4).sort_key() < NEW.sort_key()
    assert NEW.at("mysql-bin.000003", 99).epoch == 1
    assert NEW.at("mysql-bin.000003", 99, "0-2-3") == BinlogPosition("mysql-bin.000003", 99, "0-2-3", 1)
    assert OLD.with_epoch(2).epoch == 2 and OLD.with_epoch(0) is OLD


def test_dicts_keep_epoch_zero_byte_identical_and_carry_later_epochs():
    assert OLD.to_dict() == {"file": "mysql-bin.000007", "pos": 1687, "gtid_set": "0-1-40"}  # as before
    assert NEW.to_dict()["epoch"] == 1
    assert BinlogPosition.from_dict(NEW.to_dict()) == NEW
    # a dict written before epochs existed
    assert BinlogPosition.from_dict({"file": "mysql-bin.000007", "pos": 1687, "gtid_set": None}).epoch == 0
    with pytest.raises(ValueError, match="Not a binlog position"):
        BinlogPosition.from_dict({"file": "f.1", "pos": 4, "epoch": "x"})
    with pytest.raises(ValueError, match="Not a binlog position"):
        BinlogPosition.from_dict({"file": "f.1", "pos": 4, "epoch": -1})
    assert "epoch=1" in str(NEW) and "epoch" not in str(OLD)


def test_txn_app_ids_and_staging_names_are_per_epoch():
    assert OLD.txn_app("dagster-mysql-cdc/stream") == "dagster-mysql-cdc/stream"
    assert NEW.txn_app("dagster-mysql-cdc/stream") == "dagster-mysql-cdc/stream@epoch1"
    assert NEW.as_version() == 1 * 10**12 + 342  # per epoch: restarts (below OLD's) in the new epoch
    assert OLD.version_tag() == str(OLD.as_version())
    assert NEW.version_tag() == f"e1-{NEW.as_version()}"
    assert window_key("stream", NEW, NEW, 1) != window_key("stream", NEW.with_epoch(0), NEW.with_epoch(0), 1)
    assert window_key("stream", OLD, OLD, 2) == "stream:mysql-bin.000007:1687:mysql-bin.000007:1687:a2"


# -- cursor and run tags --------------------------------------------------------------------------
def test_cursor_round_trip_and_old_cursors():
    c = StreamCursor(committed=NEW, snapshot_done=True)
    assert StreamCursor.parse(c.to_json()).committed == NEW
    old = json.dumps({"v": 1, "committed": {"file": "mysql-bin.000007", "pos": 1687, "gtid_set": "0-1-40"}})
    assert StreamCursor.parse(old).committed == OLD
    # a cursor of epoch 0 is written exactly as before epochs existed
    assert '"epoch"' not in StreamCursor(committed=OLD).to_json()


def test_planning_compares_the_server_in_the_committed_epoch():
    files = [("mysql-bin.000001", 900)]
    server = ServerState(current=BinlogPosition("mysql-bin.000001", 900, "0-1-45"), binlog_files=files)
    plan = plan_stream_window(
        StreamCursor(committed=NEW, snapshot_done=True), server, snapshot_mode="initial"
    )
    assert plan.request is not None, plan.skip_reason  # not "caught up" (epoch 1 > epoch 0)
    assert plan.request.start == NEW and plan.request.end == server.current.with_epoch(1)
    caught = ServerState(current=BinlogPosition("mysql-bin.000001", 342, "0-1-40"), binlog_files=files)
    plan = plan_stream_window(
        StreamCursor(committed=NEW, snapshot_done=True), caught, snapshot_mode="initial"
    )
    assert plan.request is None and "caught up" in (plan.skip_reason or "")
    # a window bounded by the end of its file keeps the epoch
    two = [("mysql-bin.000001", 900), ("mysql-bin.000002", 300)]
    server2 = ServerState(current=BinlogPosition("mysql-bin.000002", 300), binlog_files=two)
    plan = plan_stream_window(
        StreamCursor(committed=NEW, snapshot_done=True), server2, snapshot_mode="initial"
    )
    assert plan.request is not None and plan.request.end == BinlogPosition("mysql-bin.000001", 900, epoch=1)


def test_a_purged_offset_resnapshots_in_its_epoch():
    files = [("mysql-bin.000002", 900)]
    server = ServerState(current=BinlogPosition("mysql-bin.000002", 900), binlog_files=files)
    plan = plan_stream_window(
        StreamCursor(committed=NEW, snapshot_done=True), server, snapshot_mode="when_needed"
    )
    assert plan.request is not None and plan.request.kind == "snapshot"
    assert plan.request.end == server.current.with_epoch(1) and plan.request.run_key.endswith("@e1:a1")


def test_run_tags_and_metadata_carry_the_epoch():
    assert position_from_tag({"k": position_tag(NEW)}, "k") == NEW
    assert position_tag(OLD) == json.dumps({"file": "mysql-bin.000007", "pos": 1687, "gtid_set": "0-1-40"})
    md = position_metadata("window_end", NEW)
    assert md["window_end_epoch"] == dg.MetadataValue.int(1)
    assert "window_end_epoch" not in position_metadata("window_end", OLD)
    as_stored = {k: v if isinstance(v, dg.MetadataValue) else dg.MetadataValue.text(v) for k, v in md.items()}
    assert position_from_metadata(as_stored, "window_end") == NEW
    old = {
        k: v if isinstance(v, dg.MetadataValue) else dg.MetadataValue.text(v)
        for k, v in position_metadata("s", OLD).items()
    }
    assert position_from_metadata(old, "s") == OLD


# -- state rows: Arrow ordering -------------------------------------------------------------------
def _rows(ids, epochs, files, positions, deleted=None) -> pa.Table:
    n = len(ids)
    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "__op": ["u"] * n,
            "__deleted": deleted or [False] * n,
            "__epoch": pa.array(epochs, pa.int64()),
            "__binlog_file": files,
            "__binlog_pos": pa.array(positions, pa.int64()),
            "__binlog_row": pa.array([0] * n, pa.int32()),
        }
    )


def test_newest_per_key_and_counts_order_by_epoch_first():
    rows = _rows(
        [1, 1, 2, 2], [0, 1, None, 1], ["mysql-bin.000007", "mysql-bin.000001"] * 2, [500, 10, 900, 20]
    )
    newest = {r["id"]: (r["__epoch"], r["__binlog_file"]) for r in newest_per_key(rows, ["id"]).to_pylist()}
    assert newest == {1: (1, "mysql-bin.000001"), 2: (1, "mysql-bin.000001")}
    counts = count_per_value(
        _rows([5, 5], [0, 1], ["mysql-bin.000007", "mysql-bin.000001"], [500, 10], [False, True]), ["id"]
    ).to_pylist()
    assert (
        len(counts) == 1 and counts[0]["__count"] == 0 and counts[0]["__deleted"]
    )  # the newest is the delete
    assert epoch_filled(rows).column("__epoch").to_pylist() == [0, 1, 0, 1]
    legacy = rows.drop_columns(["__epoch"])
    assert epoch_filled(legacy).column("__epoch").to_pylist() == [0, 0, 0, 0]
    assert older_than(rows, 1, "mysql-bin.000001", 15).to_pylist() == [True, True, True, False]
    assert older_than(legacy, 1, "mysql-bin.000001", 15).to_pylist() == [True] * 4
    assert older_than(rows, 0, "mysql-bin.000007", 600).to_pylist() == [True, False, False, False]


def test_state_schema_has_the_epoch_column_before_the_position():
    names = [f.name for f in STATE_META_FIELDS]
    assert names.index("__epoch") == names.index("__binlog_file") - 1
    assert state_schema(pa.schema([("id", pa.int64())])).field("__epoch").type == pa.int64()


# -- state rows: Delta merge predicates on a table written before epochs --------------------------
VALUES = pa.schema([("id", pa.int64()), ("v", pa.string())])


def _legacy_state(uri: str) -> None:
    """A keyed state table as written before offset epochs (no ``__epoch`` column), at the old
    primary's mysql-bin.000007."""
    legacy = pa.schema([f for f in state_schema(VALUES) if f.name != "__epoch"])
    rows = [
        {
            "id": i,
            "v": f"old{i}",
            "__op": "c",
            "__deleted": False,
            "__ts_ms": 1,
            "__source_ts_ms": 1,
            "__snapshot": "false",
            "__binlog_file": "mysql-bin.000007",
            "__binlog_pos": 1000 + i,
            "__binlog_row": 0,
            "__gtid": f"0-1-{i}",
        }
        for i in (1, 2, 3)
    ]
    write_deltalake(uri, pa.Table.from_pylist(rows, schema=legacy))


def _new_rows(epoch: int) -> pa.Table:
    st = state_schema(VALUES)
    rows = [
        {"id": 1, "v": "new1", "__op": "u", "__deleted": False, "__epoch": epoch},
        {"id": 2, "v": "old2", "__op": "d", "__deleted": True, "__epoch": epoch},
        {"id": 4, "v": "new4", "__op": "c", "__deleted": False, "__epoch": epoch},
    ]
    for r in rows:
        r.update(
            __ts_ms=2,
            __source_ts_ms=2,
            __snapshot="false",
            __binlog_file="mysql-bin.000001",
            __binlog_pos=300,
            __binlog_row=0,
            __gtid="0-1-9",
        )
    return pa.Table.from_pylist(rows, schema=st)


def _live(uri: str) -> dict:
    t = DeltaTable(uri).to_pyarrow_table().to_pylist()
    return {r["id"]: r["v"] for r in t if not r["__deleted"]}


def _tail_rows(rows: pa.Table, keyless: bool = False) -> pa.Table:
    """State rows as tail rows (``__cut`` false; keyless: ``__count`` +1 / -1)."""
    schema = tail_schema(state_schema(VALUES, keyless=keyless), keyless=keyless)
    t = rows.append_column(CUT_COL, pa.array([False] * rows.num_rows))
    if keyless and "__count" not in t.column_names:
        t = t.append_column(
            "__count", pa.array([-1 if d else 1 for d in rows.column("__deleted").to_pylist()], pa.int64())
        )
    return pa.Table.from_arrays([t.column(f.name).cast(f.type) for f in schema], schema=schema)


@pytest.mark.parametrize("epoch", [1, 0], ids=["epoch1", "without_epoch"])
def test_tail_over_a_legacy_state_table_orders_by_epoch(tmp_path, epoch):
    """A state table written before the ``__epoch`` column (NULL = epoch 0) and tail rows of the
    new server: the new server's changes win in epoch 1, whatever its file numbers."""
    uri = str(tmp_path / "state")
    _legacy_state(uri)
    legacy = DeltaTable(uri).to_pyarrow_table()
    st = state_schema(VALUES)
    out = resolve(legacy, _tail_rows(_new_rows(epoch)), key=["id"], schema=st)
    live = {r["id"]: r["v"] for r in out.to_pylist() if not r["__deleted"]}
    if epoch:
        assert live == {1: "new1", 3: "old3", 4: "new4"}  # the new server's update and delete win
        # a TRUNCATE (or full snapshot) in epoch 1 tombstones every row of epoch 0 / NULL
        cut = cut_markers(
            files=pa.array(["mysql-bin.000001"]),
            positions=pa.array([200], pa.int64()),
            row=0,
            op="t",
            epoch=1,
            like=tail_schema(st, keyless=False),
        )
        again = resolve(out, cut, key=["id"], schema=st)
        assert {r["id"] for r in again.to_pylist() if not r["__deleted"]} == {1, 4}
    else:  # what epochs fix: mysql-bin.000001 sorts below mysql-bin.000007, the old rows stay
        assert live == {1: "old1", 2: "old2", 3: "old3", 4: "new4"}


def test_sql_predicates_read_null_epochs_as_zero():
    sql = older_than_sql(NEW)
    assert sql.startswith('(COALESCE("__epoch", 0) < 1)')


def test_keyless_counts_of_a_new_epoch_apply_after_the_old_ones():
    """A keyless value's copies: the new server's events (lower file numbers, epoch 1) are newer
    than the compacted row of epoch 0, so they count; a tail row already in the compacted count
    (the same ordering key) does not count again."""
    st = state_schema(VALUES, keyless=True)

    def rows(epoch, file, pos, deleted):
        r = {
            "id": 7,
            "v": "x",
            "__op": "d" if deleted else "c",
            "__deleted": deleted,
            "__epoch": epoch,
            "__ts_ms": 1,
            "__source_ts_ms": 1,
            "__snapshot": "false",
            "__binlog_file": file,
            "__binlog_pos": pos,
            "__binlog_row": 0,
            "__gtid": None,
        }
        return _tail_rows(
            pa.Table.from_pylist([r], schema=pa.schema([f for f in st if f.name != "__count"])), True
        )

    old = pa.concat_tables([rows(0, "mysql-bin.000007", 500, False), rows(0, "mysql-bin.000007", 600, False)])
    compacted = resolve(None, old, key=[], schema=st)
    assert compacted.column("__count").to_pylist() == [2]
    new = rows(1, "mysql-bin.000001", 300, True)
    out = resolve(compacted, pa.concat_tables([old, new]), key=[], schema=st)  # old rows still in the tail
    assert out.column("__count").to_pylist() == [1]


# -- schema history -------------------------------------------------------------------------------
def _create(cols: list[str]) -> list[dict]:
    ts = TableSchema("db", "t", tuple(ColumnSchema(c, "int", i + 1) for i, c in enumerate(cols)), ("id",))
    return [{"type": "CREATE", "id": "db.t", "previousId": None, "table": ts.to_dict()}]


def test_schema_history_orders_by_epoch_and_reads_legacy_records(tmp_path):
    storage = StorageSettings(base_uri=str(tmp_path / "lake"))
    h = SchemaHistory(storage, "srv")
    legacy = pa.Table.from_pylist(
        [HistoryRecord(OLD, 0, "db", "CREATE TABLE t", _create(["id"]), 1).to_row()]
    ).drop_columns(["epoch"])
    write_deltalake(h.uri, legacy)  # a history written before epochs: no epoch column
    alter = HistoryRecord(NEW, 0, "db", "ALTER TABLE t ADD c INT", _create(["id", "c"]), 2)
    assert h.append([alter], app_id=NEW.txn_app("stream"), version=NEW.as_version())
    assert h.read().column("epoch").to_pylist() == [0, 1]
    cols = lambda pos: [c.name for c in h.catalog_at(pos)[("db", "t")].columns]  # noqa: E731
    assert cols(NEW) == ["id", "c"]  # epoch 1 at mysql-bin.000001 is after the epoch-0 record at 000007
    assert cols(BinlogPosition("mysql-bin.000009", 4)) == ["id"]  # an epoch-0 position: before the ALTER
    assert cols(None) == ["id", "c"]


def test_catalog_at_replays_on_from_the_previous_position_and_sees_new_records(tmp_path):
    """Issue 42: ``catalog_at`` of a following run's windows replays only the records after the
    previous call's position (the whole history once per Delta version); a position before it,
    or a record appended since, gives what a fresh history object gives."""
    storage = StorageSettings(base_uri=str(tmp_path / "lake"))
    h = SchemaHistory(storage, "srv")
    at = lambda n: BinlogPosition("mysql-bin.000003", n)  # noqa: E731
    for i, cols in enumerate((["id"], ["id", "a"], ["id", "a", "b"])):
        rec = HistoryRecord(at(100 * (i + 1)), 0, "db", f"DDL {i}", _create(cols), i)
        assert h.append([rec], app_id=at(100 * (i + 1)).txn_app("stream"), version=i)

    def cols(history, pos):
        cat = history.catalog_at(pos)
        return [c.name for c in cat[("db", "t")].columns] if ("db", "t") in cat else None

    fresh = lambda pos: cols(SchemaHistory(storage, "srv"), pos)  # noqa: E731
    for pos in (at(50), at(100), at(150), at(250), at(300), at(1000), at(120), at(50), None, at(200)):
        assert cols(h, pos) == fresh(pos), pos
    h.catalog_at(at(1000))  # replayed to the end: a new record must still be seen
    rec = HistoryRecord(at(1100), 0, "db", "DDL 3", _create(["id", "z"]), 3)
    assert h.append([rec], app_id=at(1100).txn_app("stream"), version=3)
    assert cols(h, at(1200)) == ["id", "z"] == fresh(at(1200))
    assert cols(h, at(1050)) == ["id", "a", "b"] == fresh(at(1050))
