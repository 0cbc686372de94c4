"""spark_files.all_or_nothing: a Spark task's output files are kept whole or not at all."""

from __future__ import annotations

import os

import pyarrow as pa
import pyarrow.fs as pafs
import pytest

from dagster_mysql_cdc.sink.spark_files import FileOutput, OutputFiles, all_or_nothing
from dagster_mysql_cdc.sink.storage import StorageSettings

SCHEMA = pa.schema([("id", pa.int64())])


def _outs(tmp_path) -> list[OutputFiles]:
    storage = StorageSettings(base_uri=str(tmp_path))
    fs = pafs.LocalFileSystem()
    return [
        OutputFiles(FileOutput(table_uri=str(tmp_path / name), schema=SCHEMA, kind="rows"), storage, fs, 2)
        for name in ("a", "b")
    ]


def _parquet(tmp_path) -> list[str]:
    return sorted(f for d in ("a", "b") for f in os.listdir(tmp_path / d) if f.endswith(".parquet"))


def test_a_task_that_ends_keeps_every_file_closed_with_its_rows(tmp_path):
    with all_or_nothing(_outs(tmp_path)) as outs:
        for o in outs:
            o.write(pa.table({"id": [1, 2, 3]}))  # 2 rows per file: one full file and an open one
    assert [[f["num_records"] for f in o.files] for o in outs] == [[3], [3]]
    assert all(o.writer is None for o in outs) and len(_parquet(tmp_path)) == 2


def test_a_task_that_fails_leaves_no_file(tmp_path):
    with pytest.raises(RuntimeError, match="source gone"):
        with all_or_nothing(_outs(tmp_path)) as outs:
            for i in range(3):
                for o in outs:
                    o.write(pa.table({"id": [i, i + 10]}))  # closed files and ...
            outs[0].write(pa.table({"id": [99]}))  # ... one still open
            raise RuntimeError("source gone")
    assert _parquet(tmp_path) == []
