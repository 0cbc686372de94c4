"""Which lake rows a ranged/filtered re-snapshot deletes (absent_rows.LakeLiveRows), on a real
local Delta state table: live rows older than the re-snapshot, inside the key range, that the
source does not have."""

import pyarrow as pa
from deltalake import write_deltalake

from dagster_mysql_cdc.engine.absent_rows import LakeLiveRows, unsupported_key_reason
from dagster_mysql_cdc.events import BinlogPosition, state_schema
from dagster_mysql_cdc.sink.layout import LakeLayout
from dagster_mysql_cdc.sink.storage import StorageSettings
from dagster_mysql_cdc.source.schema import ColumnSchema, TableSchema

VALUES = pa.schema([("id", pa.int32()), ("v", pa.string())])


def table(pk=("id",), id_type="int") -> TableSchema:
    return TableSchema(
        database="d",
        table="t",
        columns=(ColumnSchema("id", id_type, 1, nullable=False), ColumnSchema("v", "varchar", 2, length=9)),
        primary_key=pk,
    )


def write_state(storage: StorageSettings, rows: list[tuple]) -> None:
    """rows: (id, v, deleted, binlog file, binlog pos)."""
    schema = state_schema(VALUES)
    data = {f.name: [None] * len(rows) for f in schema}
    data["id"] = [r[0] for r in rows]
    data["v"] = [r[1] for r in rows]
    data["__deleted"] = [r[2] for r in rows]
    data["__binlog_file"] = [r[3] for r in rows]
    data["__binlog_pos"] = [r[4] for r in rows]
    data["__binlog_row"] = [0] * len(rows)
    write_deltalake(LakeLayout(storage, "srv").state("d", "t"), pa.table(data, schema=schema))


def test_absent_rows_are_live_older_in_range_and_not_in_the_source(tmp_path):
    storage = StorageSettings(base_uri=str(tmp_path / "lake"))
    write_state(
        storage,
        [
            (1, "a", False, "mysql-bin.000001", 100),
            (2, "b", False, "mysql-bin.000001", 200),  # gone from the source
            (3, "c", True, "mysql-bin.000001", 300),  # already a tombstone
            (4, "d", False, "mysql-bin.000002", 50),  # written after the re-snapshot started
            (5, "e", False, "mysql-bin.000001", 500),  # gone, but outside (lo, hi]
            (6, "f", False, "mysql-bin.000001", 600),  # gone, in range
        ],
    )
    lake = LakeLiveRows(storage, "srv", table(), VALUES, before=BinlogPosition("mysql-bin.000002", 10))
    assert lake.keys == [(1,), (2,), (5,), (6,)]
    gone = lake.absent(None, (4,), {(1,)})
    assert gone.to_pylist() == [{"id": 2, "v": "b"}]
    assert sorted(lake.absent((4,), None, {(1,)}).column("id").to_pylist()) == [5, 6]
    assert sorted(lake.absent(None, None, set()).column("id").to_pylist()) == [1, 2, 5, 6]
    assert lake.absent((1,), (2,), {(2,)}).num_rows == 0


def test_no_state_table_yet_means_nothing_to_delete(tmp_path):
    storage = StorageSettings(base_uri=str(tmp_path / "lake"))
    lake = LakeLiveRows(storage, "srv", table(), VALUES, before=BinlogPosition("mysql-bin.000002", 10))
    assert lake.keys == [] and lake.absent(None, None, set()).num_rows == 0


def test_only_integer_primary_keys_are_supported():
    assert unsupported_key_reason(table()) is None
    assert "not integers" in (unsupported_key_reason(table(id_type="varchar")) or "")
    assert "no primary key" in (unsupported_key_reason(table(pk=())) or "")


def test_a_full_unfiltered_chunk_gives_its_range_keys_itself():
    """The absent-row check reads the keys of a chunk's range again only where the chunk's rows
    may not be all of them: the table's last chunk (its range is open above the maximum key), a
    filtered chunk, another key than the table's, a FLOAT key (read as DOUBLE by the chunk's
    SELECT); otherwise the chunk's rows are converted as the key SELECT's would be."""
    from dagster_mysql_cdc.engine.absent_rows import chunk_keys
    from dagster_mysql_cdc.engine.incremental import TableProgress
    from dagster_mysql_cdc.engine.incremental_chunks import _ChunkTable, _rows_are_the_range
    from dagster_mysql_cdc.source.types import TableConverter, TypeOptions

    def chunk_table(schema: TableSchema, where: str = "", pk=None) -> _ChunkTable:
        conv = TableConverter(schema, TypeOptions(), "pymysql")
        return _ChunkTable(
            TableProgress("db.t"), schema, conv, list(pk or schema.primary_key), None, "`db`.`t`", where
        )

    rows = [(1, "a"), (2, "b")]
    t = chunk_table(table())
    assert _rows_are_the_range(t, rows, last=False)
    assert not _rows_are_the_range(t, rows, last=True)
    assert not _rows_are_the_range(t, [], last=False)
    assert not _rows_are_the_range(chunk_table(table(), where=" AND (v > 'a')"), rows, last=False)
    assert not _rows_are_the_range(chunk_table(table(), pk=["v"]), rows, last=False)
    assert not _rows_are_the_range(chunk_table(table(id_type="float")), rows, last=False)
    assert chunk_keys(table(), TypeOptions(), rows) == {(1,), (2,)}
