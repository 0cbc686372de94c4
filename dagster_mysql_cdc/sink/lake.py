"""Spark writer of a table's change log and current state (Delta tables on the lake).

Layout below the lake root (``StorageSettings.base_uri``)::

    <server>/<database>/<table>/changelog   Delta table, append-only Debezium envelopes
    <server>/<database>/<table>/state       Delta table, one row per primary key (latest wins)

Data path: Arrow record batches of change events (bounded size) → ``spark.createDataFrame`` → Spark
computes the state rows (``after`` image, or ``before`` for deletes, plus metadata columns) → the
``mysql_cdc_delta_files`` data source writes Parquet from the executors → one Delta commit per
dataset and batch (:mod:`.delta`), idempotent by batch identity.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import tempfile
import time
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Literal

import pyarrow as pa

from ..events import BinlogPosition, state_schema
from .delta import CommitOutcome, commit_files
from .spark_files import FORMAT_NAME, DeltaFilesDataSource, encode_schema
from .storage import StorageSettings

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class TablePaths:
    """Lake URIs of one captured table's datasets."""

    changelog: str
    state: str


@dataclass
class TableWriteResult:
    """What one batch wrote for one table (reported as Dagster metadata)."""

    database: str
    table: str
    rows: int
    rows_by_op: dict[str, int]
    paths: TablePaths
    changelog: CommitOutcome
    state: CommitOutcome
    seconds: float
    spark_jobs: int = 0
    extra: dict = field(default_factory=dict)


def state_columns(value_names: list[str]):
    """Spark column expressions turning change events into current-state rows.

    The row image is ``after`` (``before`` for deletes, so a tombstone keeps its key and last
    values), followed by the ``__op``/``__deleted``/``__ts_ms``/``__source_ts_ms``/``__snapshot``/
    ``__binlog_file``/``__binlog_pos``/``__binlog_row``/``__gtid`` metadata columns.
    """
    from pyspark.sql import functions as F

    img = F.when(F.col("op") == "d", F.col("before")).otherwise(F.col("after"))
    cols = [img.getField(n).alias(n) for n in value_names]
    return cols + [
        F.col("op").alias("__op"),
        (F.col("op") == "d").alias("__deleted"),
        F.col("ts_ms").alias("__ts_ms"),
        F.col("source.ts_ms").alias("__source_ts_ms"),
        F.col("source.snapshot").alias("__snapshot"),
        F.col("source.file").alias("__binlog_file"),
        F.col("source.pos").alias("__binlog_pos"),
        F.col("source.row").alias("__binlog_row"),
        F.col("source.gtid").alias("__gtid"),
    ]


class LakeWriter:
    """Writes change-event batches of captured tables to the lake through Spark.

    Args:
        spark: an active ``SparkSession`` (local or cluster).
        storage: lake location and credentials.
        server_name: logical server name (Debezium ``topic.prefix``), first path segment.
        rows_per_file: upper bound of rows per Parquet data file.
    """

    def __init__(
        self,
        spark,
        storage: StorageSettings,
        server_name: str,
        *,
        rows_per_file: int = 1_000_000,
    ):
        self.spark = spark
        self.storage = storage
        self.server_name = server_name
        self.rows_per_file = rows_per_file
        storage.ensure_root()
        spark.dataSource.register(DeltaFilesDataSource)

    def paths(self, database: str, table: str) -> TablePaths:
        base = self.storage.uri(self.server_name, database, table)
        return TablePaths(changelog=f"{base}/changelog", state=f"{base}/state")

    # -- one Spark job ----------------------------------------------------------------------
    def _write_files(self, df, table_uri: str, schema: pa.Schema, staging: str) -> list[dict]:
        manifest = os.path.join(staging, f"manifest-{uuid.uuid4().hex}.json")
        (
            df.write.format(FORMAT_NAME)
            .mode("append")
            .option("table_uri", table_uri)
            .option("arrow_schema", encode_schema(schema))
            .option("manifest", manifest)
            .option("rows_per_file", str(self.rows_per_file))
            .option("storage_secret", self.storage.to_json())
            .save()
        )
        with open(manifest) as fh:
            return json.load(fh)

    def write_table_batch(
        self,
        database: str,
        table: str,
        batches: Iterable[pa.RecordBatch],
        *,
        change_schema: pa.Schema,
        value_schema: pa.Schema,
        app_id: str,
        version: int,
        state_mode: Literal["overwrite"] = "overwrite",
        position: BinlogPosition | None = None,
    ) -> TableWriteResult:
        """Write a snapshot batch of one table: append to its change log, replace its state.

        ``batches`` is consumed lazily, one Spark job per record batch (memory is bounded by the
        batch size, not the table size). Both datasets are committed only after every batch is
        written, each in one atomic Delta commit tagged ``(app_id, version)``; a retry of the same
        batch identity commits nothing and leaves one copy.

        Raises:
            SinkError: a Delta commit failed (nothing of that dataset was published).
        """
        started = time.monotonic()
        paths = self.paths(database, table)
        st_schema = state_schema(value_schema)
        names = [f.name for f in value_schema]
        staging = tempfile.mkdtemp(prefix="cdc-stage-")
        log_files: list[dict] = []
        state_files: list[dict] = []
        rows_by_op: dict[str, int] = {}
        jobs = 0
        try:
            for batch in batches:
                if batch.num_rows == 0:
                    continue
                ops = batch.column(batch.schema.get_field_index("op"))
                for op, cnt in zip(*_value_counts(ops)):
                    rows_by_op[op] = rows_by_op.get(op, 0) + cnt
                df = self.spark.createDataFrame(pa.Table.from_batches([batch]))
                log_files += self._write_files(df, paths.changelog, change_schema, staging)
                state_df = df.select(*state_columns(names))
                state_files += self._write_files(state_df, paths.state, st_schema, staging)
                jobs += 2
            meta = {"dagster_mysql_cdc.position": str(position)} if position else {}
            log_commit = commit_files(
                self.storage, paths.changelog, change_schema, log_files,
                mode="append", app_id=app_id, version=version, metadata=meta,
            )
            state_commit = commit_files(
                self.storage, paths.state, st_schema, state_files,
                mode=state_mode, app_id=app_id, version=version, metadata=meta,
            )
        finally:
            shutil.rmtree(staging, ignore_errors=True)
        return TableWriteResult(
            database=database,
            table=table,
            rows=sum(rows_by_op.values()),
            rows_by_op=rows_by_op,
            paths=paths,
            changelog=log_commit,
            state=state_commit,
            seconds=time.monotonic() - started,
            spark_jobs=jobs,
        )


def _value_counts(arr: pa.Array) -> tuple[list[str], list[int]]:
    vc = arr.value_counts()
    return vc.field("values").to_pylist(), vc.field("counts").to_pylist()
