"""The lake resource: where and how captured tables are written (object storage + a Spark session).

:class:`CdcLakeResource` holds the lake's config fields and turns them into the sink's settings
(:class:`~..sink.storage.StorageSettings`), its Spark session (Spark Connect or the nested
dagster-pyspark resource) and a :class:`~..sink.lake.LakeWriter`. It is importable from
:mod:`.resources` too, beside :class:`~.resources.MySqlCdcResource`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import dagster as dg
from dagster_pyspark import LazyPySparkResource
from pydantic import Field

from ..sink.spark_session import quiet_spark, remote_spark_session, use_this_python_for_local_spark
from ..sink.storage import StorageSettings
from .resource_fields import SECRET, resolve

if TYPE_CHECKING:
    import pyarrow as pa

    from ..downstream.changes import ChangeBatch
    from ..sink.lake import LakeWriter
    from .change_feed import IncrementalChanges

DEFAULT_SPARK_CONFIG: dict[str, Any] = {
    "spark.master": "local[2]",
    "spark.app.name": "dagster-mysql-cdc",
    "spark.ui.enabled": "false",
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.shuffle.partitions": "4",
    "spark.driver.memory": "2g",
    "spark.sql.execution.arrow.pyspark.enabled": "true",
    # no stage progress bars in the run's console (dagster dev prints the run workers' stderr)
    "spark.ui.showConsoleProgress": "false",
}


class CdcLakeResource(dg.ConfigurableResource):
    """Where and how captured tables are written: object storage + a Spark session.

    ``base_uri`` is a local path (default ``.lake``) or ``s3://bucket/prefix`` with the
    ``s3_*`` settings for any S3 API endpoint. Spark is, in this order of preference:

    - ``spark_remote``: a long-lived **Spark Connect** server (``sc://host:port``, e.g. the one
      ``infra/spark_connect.sh`` starts). A run then pays a gRPC session (~0.1-2 s) instead of a JVM
      start (~15-20 s); the server's Python workers stay warm across runs. The server must see the
      same local disk as the runs (same host): payload chunks and job manifests are exchanged as
      local files (an ``s3://`` lake is still written from the server's executors).
    - the nested dagster-pyspark ``LazyPySparkResource`` (``local[2]`` by default; set
      ``spark.master`` and friends in its ``spark_config`` for a cluster).

    Either way the session starts only when a run writes data: a window with nothing to write
    never starts or connects to Spark.
    """

    base_uri: str = Field(
        default=".lake", description="Lake root: local path, file:// or s3://bucket/prefix."
    )
    s3_endpoint_url: str | None = Field(
        default=None, description="S3 API endpoint, e.g. http://127.0.0.1:8333."
    )
    s3_access_key_id: str | None = Field(
        default=None, description="S3 access key (use EnvVar).", json_schema_extra=SECRET
    )
    s3_secret_access_key: str | None = Field(
        default=None, description="S3 secret key (use EnvVar).", json_schema_extra=SECRET
    )
    s3_region: str = Field(default="us-east-1", description="S3 region.")
    s3_conditional_put: str | None = Field(
        default="etag", description="'etag' for atomic Delta commits via conditional PUT; null to disable."
    )
    rows_per_file: int = Field(default=1_000_000, description="Maximum rows per Parquet data file.")
    compact_min_files: int = Field(
        default=64,
        description="Compact (Delta OPTIMIZE) a change log or state table once it has this many files; 0 = never.",
    )
    state_compact_tail_fraction: float = Field(
        default=0.1,
        description="Merge-on-read: a window appends its changes to the table's state_tail; the "
        "compacted `state` table is rewritten when the tail holds this fraction of its rows (so a "
        "window costs what it changes, and compaction is amortized over that many changes).",
    )
    state_compact_min_tail_rows: int = Field(
        default=1_000,
        description="... and when the tail holds at least this many rows (a small table is not "
        "rewritten for a handful of changes; a window that changes hundreds of tables pays no "
        "compaction for each).",
    )
    state_compact_small_rows: int = Field(
        default=0,
        description="A state below this many rows is compacted after every window, so plain Delta "
        "readers of `state` see every window (costs a compaction per table per window); 0 = none. "
        "The current read (state + tail) is always exact.",
    )
    state_compact_max_age_seconds: float = Field(
        default=900.0,
        description="Compact when the oldest change in the tail is older than this (how far behind "
        "the change log a plain reader of `state` may be, plus a sensor tick and a run; a table no "
        "window writes any more is compacted by the capture's next window, or by an empty window "
        "when it is idle); 0 = only by size.",
    )
    state_compact_in_process_rows: int = Field(
        default=2_000_000,
        description="State + tail rows up to this are compacted in the run process; a larger table by "
        "Spark tasks (in parallel on a cluster).",
    )
    vacuum_retention_hours: float = Field(
        default=168.0,
        description="Files a table no longer uses are deleted after this many hours (Delta's VACUUM "
        "retention; time travel reaches back as far).",
    )
    vacuum_interval_hours: float = Field(
        default=24.0,
        description="Vacuum each table (and clean up its Delta log: the library's commits do not) at "
        "most this often, after a window writes it; 0 = never (run VACUUM and the log clean-up, "
        "cleanup_metadata(), yourself).",
    )
    sink_pipeline_depth: int = Field(
        default=2,
        description="Record batches queued for the sink thread while the next ones are read (reading "
        "overlaps writing; memory grows with it); 0 = read and write in turn.",
    )
    sink_switch_interval_ms: float = Field(
        default=0.5,
        description="The run process's GIL switch interval (sys.setswitchinterval) while its sink thread "
        "writes beside the reader, so the sink's Spark calls are not starved by the CPU-bound reader "
        "(Python's default is 5 ms); 0 = leave the interpreter's.",
    )
    spark_remote: str | None = Field(
        default="auto",
        description="Spark Connect URL (sc://host:port) of a long-lived Spark Connect server on the "
        "runs' host (a run fails with a clear error when it is down); 'auto' (default) = "
        "$CDC_SPARK_REMOTE when set, else sc://127.0.0.1:15002, falling back to a local Spark (with a "
        "WARNING) when no server runs there; empty/null = the nested `pyspark` resource's own Spark "
        "(local or cluster master).",
    )
    spark_log_level: str = Field(
        default="ERROR",
        description="Log level of a classic Spark session's JVM (SparkContext.setLogLevel): at ERROR, "
        "Spark's WARN lines stay out of the run's console. Spark Connect servers log to their own log.",
    )
    pyspark: LazyPySparkResource = Field(
        default_factory=lambda: LazyPySparkResource(spark_config=DEFAULT_SPARK_CONFIG),
        description="dagster-pyspark resource providing the Spark session when spark_remote is not set.",
    )

    def storage_settings(self) -> StorageSettings:
        """Lake settings; ``EnvVar`` fields are resolved (also outside a run)."""
        return StorageSettings(
            base_uri=resolve(self.base_uri),
            s3_endpoint_url=resolve(self.s3_endpoint_url),
            s3_access_key_id=resolve(self.s3_access_key_id),
            s3_secret_access_key=resolve(self.s3_secret_access_key),
            s3_region=resolve(self.s3_region),
            s3_conditional_put=resolve(self.s3_conditional_put),
        )

    def spark_session(self):
        """The Spark session runs write with: Spark Connect on :attr:`spark_remote`, else the nested
        ``pyspark`` resource's session (starts the JVM on first use, then sets
        :attr:`spark_log_level`).

        ``spark_remote="auto"`` (default) uses a Spark Connect server on this host when one
        accepts connections (:func:`~..sink.spark_session.resolve_remote`) and otherwise starts a
        local Spark with a WARNING naming the fix, instead of waiting minutes for the gRPC client's
        retries.

        Raises:
            SinkError: an explicitly configured Spark Connect server is not running.
            pyspark / grpc errors: the Spark Connect server fails after accepting the connection.
        """
        from ..errors import SinkError
        from ..sink.spark_session import remote_unreachable, resolve_remote

        url, may_fall_back = resolve_remote(resolve(self.spark_remote))
        if url:
            why = remote_unreachable(url)
            if why is None:
                return remote_spark_session(url)
            if not may_fall_back:
                raise SinkError(
                    f"The Spark Connect server {url} (CdcLakeResource.spark_remote) is not running ({why}). "
                    "Start it (`bash infra/spark_connect.sh start`, or pyspark's sbin/start-connect-server.sh) "
                    "or set spark_remote=None to let each run start its own local Spark."
                )
            dg.get_dagster_logger().warning(  # in the run's log (and dagster dev's output)
                f"No Spark Connect server at {url} ({why}): this run starts its own local Spark "
                "(~15-20 s per run). Start one on this host (`bash infra/spark_connect.sh start`, or "
                "pyspark's sbin/start-connect-server.sh) for runs that connect in ~1 s, or set "
                "spark_remote=None to silence this."
            )
        use_this_python_for_local_spark(dict(self.pyspark.spark_config or {}))
        spark = self.pyspark.spark_session
        quiet_spark(spark, self.spark_log_level)
        return spark

    # -- downstream reads (dagster_mysql_cdc/downstream/; docs/output-layout.md) ----------------
    def read_current(self, table: Any, **kwargs: Any) -> pa.Table:
        """The current state of a captured table of this lake as an Arrow table
        (:func:`dagster_mysql_cdc.read_current`: ``table`` is ``"db.table"`` or its asset key;
        ``server``, ``columns``, ``filter``, ``tombstones``, ``metadata``). No Spark is started."""
        from ..downstream.current import read_current

        return read_current(table, self, **kwargs)

    def read_current_polars(self, table: Any, **kwargs: Any) -> Any:
        """:meth:`read_current` as a ``polars.DataFrame`` (the ``polars`` extra)."""
        from ..downstream.current import read_current_polars

        return read_current_polars(table, self, **kwargs)

    def read_current_spark(self, table: Any, **kwargs: Any) -> Any:
        """:meth:`read_current` as a Spark DataFrame on :meth:`spark_session`, read by the executors
        (:func:`dagster_mysql_cdc.read_current_spark`)."""
        from ..downstream.current import read_current_spark

        return read_current_spark(self.spark_session(), table, self, **kwargs)

    def read_changes(self, table: Any, **kwargs: Any) -> ChangeBatch:
        """The change events of a captured table after a position
        (:func:`dagster_mysql_cdc.read_changes`: ``since``, ``max_rows``, ``format`` ...)."""
        from ..downstream.changes import read_changes

        return read_changes(table, self, **kwargs)

    def incremental_changes(self, context: Any, table: Any, **kwargs: Any) -> IncrementalChanges:
        """The changes of a captured table the calling asset has not processed yet, from the
        position its last materialization recorded (:func:`dagster_mysql_cdc.incremental_changes`);
        record ``.metadata`` in the asset's ``MaterializeResult``."""
        from .change_feed import incremental_changes

        return incremental_changes(context, table, self, **kwargs)

    def get_writer(self, server_name: str) -> LakeWriter:
        """A :class:`LakeWriter` on this resource's Spark session; the session is started (or
        connected to) when the writer first writes data files, not before."""
        from ..sink.compaction import CompactionPolicy
        from ..sink.lake import LakeWriter
        from ..sink.retention import RetentionPolicy

        return LakeWriter(
            self.spark_session,
            self.storage_settings(),
            server_name,
            rows_per_file=self.rows_per_file,
            compact_min_files=self.compact_min_files,
            pipeline_depth=self.sink_pipeline_depth,
            switch_interval_s=self.sink_switch_interval_ms / 1000.0,
            compaction=CompactionPolicy(
                tail_fraction=self.state_compact_tail_fraction,
                min_tail_rows=self.state_compact_min_tail_rows,
                small_state_rows=self.state_compact_small_rows,
                max_tail_age_seconds=self.state_compact_max_age_seconds,
                in_process_rows=self.state_compact_in_process_rows,
            ),
            retention=RetentionPolicy(
                retention_hours=self.vacuum_retention_hours, interval_hours=self.vacuum_interval_hours
            ),
        )


__all__ = ["CdcLakeResource", "DEFAULT_SPARK_CONFIG"]
