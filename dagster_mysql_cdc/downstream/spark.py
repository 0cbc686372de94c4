"""A Delta table of the lake as a Spark DataFrame that lists the table's files at each query.

Spark reads Delta natively only with the delta-spark jars (and ``s3a://`` with hadoop-aws), which
a Spark without internet access or a shared Spark Connect server may not have. The
``mysql_cdc_delta_table`` Python data source reads the table's current version instead: its
reader opens the Delta log with deltalake when the query is planned (``partitions``, on the
driver's Python worker), groups the data files into tasks, and the executors read them with
pyarrow (the lake's filesystem, local or S3), as the compaction's reader does
(:class:`~dagster_mysql_cdc.sink.spark_files.LakeFilesReader`). So a temporary view over it stays
current as windows commit. A table that does not exist yet reads as empty.

The lake's credentials travel as the writer's sealed storage file (:mod:`dagster_mysql_cdc.private_files`),
never as options.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

import pyarrow as pa
from pyspark.sql.datasource import DataSource

from ..private_files import SealedDataSource
from ..sink.spark_files import (
    FileGroup,
    LakeFilesReader,
    decode_schema,
    encode_schema,
    file_groups,
    read_storage_ref,
)

if TYPE_CHECKING:
    from .tables import CapturedTable

DELTA_TABLE_FORMAT = "mysql_cdc_delta_table"


class DeltaTableReader(LakeFilesReader):
    """Reads the current version of one Delta table (see the module docs): its files are listed
    when the query is planned; each task reads its files as the compaction's reader does."""

    def __init__(self, options: dict[str, str], key: bytes | None):
        self.key = key
        self.table_uri = options["table_uri"]
        self.schema = decode_schema(options["schema"])
        self.storage_ref = options["storage_ref"]

    def partitions(self):
        from deltalake import DeltaTable
        from deltalake.exceptions import TableNotFoundError

        storage = read_storage_ref(self.storage_ref, self.key)
        try:
            dt = DeltaTable(self.table_uri, storage_options=storage.delta_storage_options())
        except TableNotFoundError:
            return [FileGroup([])]
        actions = pa.table(dt.get_add_actions(flatten=True))
        return [FileGroup(g) for g in file_groups(actions)] or [FileGroup([])]


class DeltaTableDataSource(SealedDataSource, DataSource):
    """Spark data source ``mysql_cdc_delta_table`` (read only): the current version of a Delta
    table of the lake. Options: ``table_uri``, ``schema`` (:func:`encode_schema`: the columns to
    read; a file lacking one reads it as null, older types are converted), ``storage_ref`` (the
    registering writer's sealed storage settings). Register the writer's keyed subclass
    (``LakeWriter.register_data_source``)."""

    library_name = DELTA_TABLE_FORMAT

    def schema(self):
        from pyspark.sql.pandas.types import from_arrow_schema

        return from_arrow_schema(decode_schema(self.options["schema"]))

    def reader(self, schema) -> DeltaTableReader:
        return DeltaTableReader(dict(self.options), type(self).file_key)


def delta_table_frame(writer: Any, table_uri: str, schema: pa.Schema) -> Any:
    """A DataFrame of the Delta table ``table_uri`` in ``schema`` on ``writer``'s session, whose
    files are listed when each query runs (see the module docs)."""
    spark = writer.active_spark()
    name = writer.register_data_source(DeltaTableDataSource)
    return (
        spark.read.format(name)
        .option("table_uri", table_uri)
        .option("schema", encode_schema(schema))
        .option("storage_ref", writer._storage_ref)
        .load()
    )


_READERS: dict[tuple[int, str, str], Any] = {}
_READERS_LOCK = threading.Lock()


def spark_reader(spark: Any, table: CapturedTable) -> Any:
    """A :class:`~..sink.lake.LakeWriter` used for reading on ``spark`` (it registers the sealed
    data sources the executors read the lake's files with; nothing is written). One per session,
    lake and server, kept while the process lives (temporary views built on it need it)."""
    from ..sink.lake import LakeWriter

    key = (id(spark), table.storage.to_json(), table.server)
    with _READERS_LOCK:
        w = _READERS.get(key)
        if w is None or w.spark is not spark:
            w = LakeWriter(spark, table.storage, table.server)
            _READERS[key] = w
        return w
