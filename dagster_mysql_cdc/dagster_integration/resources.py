"""Dagster resources: the MySQL/MariaDB source and the lake (Spark + object storage)."""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from typing import Any

import dagster as dg
from dagster_pyspark import LazyPySparkResource
from pydantic import Field

from ..errors import ConfigurationError, SourceConnectionError, UnknownTableError
from ..pipeline import SnapshotTableResult, run_snapshot
from ..sink.lake import LakeWriter
from ..sink.storage import StorageSettings
from ..source.catalog import list_tables, read_table_schemas
from ..source.connection import ConnectionSettings, connect
from ..source.filters import TableFilter
from ..source.schema import TableSchema
from ..source.snapshot import SnapshotOptions
from ..source.types import TypeOptions
from .translator import table_of_spec

log = logging.getLogger(__name__)

#: Debezium ``snapshot.mode`` values understood here.
SNAPSHOT_MODES = ("initial", "initial_only", "no_data", "when_needed", "always", "never")

DEFAULT_SPARK_CONFIG: dict[str, Any] = {
    "spark.master": "local[2]",
    "spark.app.name": "dagster-mysql-cdc",
    "spark.ui.enabled": "false",
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.shuffle.partitions": "4",
    "spark.driver.memory": "2g",
    "spark.sql.execution.arrow.pyspark.enabled": "true",
}


class MySqlCdcResource(dg.ConfigurableResource):
    """The captured MySQL/MariaDB server and how it is captured.

    Field names follow the Debezium MySQL connector property they correspond to
    (``database.hostname`` → ``host``, ``topic.prefix`` → ``server_name``, ``snapshot.mode`` →
    ``snapshot_mode`` ...). Pass the password with ``dg.EnvVar("CDC_MYSQL_PASSWORD")`` so it never
    appears in run config or the UI.
    """

    host: str = Field(default="127.0.0.1", description="Server host (database.hostname).")
    port: int = Field(default=3306, description="Server port (database.port).")
    user: str = Field(default="root", description="Capture user (database.user).")
    password: str = Field(default="", description="Capture user's password (database.password); use EnvVar.")
    server_name: str = Field(
        default="mysql",
        description="Logical server name (topic.prefix): first segment of asset keys and lake paths.",
    )
    server_id: int = Field(
        default=184054,
        description="Replication client id for the binlog dump (database.server.id); unique per server.",
    )
    database_include_list: list[str] = Field(default_factory=list, description="Regexes of captured databases.")
    database_exclude_list: list[str] = Field(default_factory=list, description="Regexes of excluded databases.")
    table_include_list: list[str] = Field(default_factory=list, description="Regexes of captured 'db.table' names.")
    table_exclude_list: list[str] = Field(default_factory=list, description="Regexes of excluded 'db.table' names.")
    snapshot_mode: str = Field(default="initial", description=f"snapshot.mode: one of {SNAPSHOT_MODES}.")
    snapshot_locking_mode: str = Field(default="minimal", description="snapshot.locking.mode: minimal, extended or none.")
    snapshot_fetch_size: int = Field(default=10_000, description="Rows per round trip while scanning (snapshot.fetch.size).")
    snapshot_batch_rows: int = Field(default=100_000, description="Rows per Arrow batch / Spark job (bounds memory).")
    decimal_handling_mode: str = Field(default="precise", description="precise, double or string (decimal.handling.mode).")
    time_precision_mode: str = Field(
        default="adaptive_time_microseconds", description="adaptive_time_microseconds or connect (time.precision.mode)."
    )
    bigint_unsigned_handling_mode: str = Field(default="precise", description="precise or long (bigint.unsigned.handling.mode).")
    binary_handling_mode: str = Field(default="bytes", description="bytes, base64, base64-url-safe or hex (binary.handling.mode).")
    connect_timeout: int = Field(default=10, description="Seconds to wait for a connection (connect.timeout.ms / 1000).")

    # -- derived settings ---------------------------------------------------------------------
    def connection_settings(self) -> ConnectionSettings:
        return ConnectionSettings(
            host=self.host, port=self.port, user=self.user, password=self.password,
            connect_timeout=self.connect_timeout,
        )

    def type_options(self) -> TypeOptions:
        """Raises ConfigurationError/ValueError naming a bad mode value."""
        return TypeOptions(
            decimal_handling_mode=self.decimal_handling_mode,  # type: ignore[arg-type]
            time_precision_mode=self.time_precision_mode,  # type: ignore[arg-type]
            bigint_unsigned_handling_mode=self.bigint_unsigned_handling_mode,  # type: ignore[arg-type]
            binary_handling_mode=self.binary_handling_mode,  # type: ignore[arg-type]
        )

    def snapshot_options(self) -> SnapshotOptions:
        if self.snapshot_mode not in SNAPSHOT_MODES:
            raise ConfigurationError(
                f"snapshot_mode={self.snapshot_mode!r} is not valid; use one of {SNAPSHOT_MODES}"
            )
        return SnapshotOptions(
            locking_mode=self.snapshot_locking_mode,  # type: ignore[arg-type]
            fetch_size=self.snapshot_fetch_size,
            batch_rows=self.snapshot_batch_rows,
            include_data=self.snapshot_mode != "no_data",
        )

    def table_filter(self) -> TableFilter:
        return TableFilter(
            tuple(self.database_include_list), tuple(self.database_exclude_list),
            tuple(self.table_include_list), tuple(self.table_exclude_list),
        )

    # -- discovery ----------------------------------------------------------------------------
    def discover_tables(self, tables: Sequence[str] | None = None) -> list[TableSchema]:
        """Schemas of the captured tables, read from the server.

        Args:
            tables: explicit ``"database.table"`` names (each must exist); ``None`` captures every
                base table that passes the include/exclude lists (system schemas never).

        Raises:
            SourceConnectionError: the server is unreachable / credentials are wrong.
            UnknownTableError: an explicitly named table does not exist or is filtered out.
        """
        # Outside a run, EnvVar fields are still unresolved: resolve them first.
        me = self.process_config_and_initialize()
        flt = me.table_filter()
        conn = connect(me.connection_settings())
        try:
            if tables:
                wanted = []
                for t in tables:
                    db, sep, name = t.partition(".")
                    if not sep:
                        raise ConfigurationError(f"Table {t!r} must be written as 'database.table'")
                    wanted.append((db, name))
                excluded = [f"{d}.{t}" for d, t in wanted if not flt.matches(d, t)]
                if excluded:
                    raise UnknownTableError(
                        f"Table(s) {excluded} are excluded by the include/exclude lists; "
                        "remove them from `tables` or adjust the lists."
                    )
            else:
                wanted = [k for k in list_tables(conn, flt.literal_databases()) if flt.matches(*k)]
            schemas = read_table_schemas(conn, wanted)
        finally:
            conn.close()
        missing = [f"{d}.{t}" for d, t in wanted if (d, t) not in schemas]
        if missing:
            raise UnknownTableError(
                f"Table(s) not found on {me.host}:{me.port}: {', '.join(missing)}. "
                "Check the names (case-sensitive) or remove them."
            )
        return [schemas[k] for k in wanted]

    # -- materialization ------------------------------------------------------------------------
    def snapshot(
        self, context: dg.AssetExecutionContext, lake: CdcLakeResource
    ) -> Iterator[dg.MaterializeResult]:
        """Snapshot the selected table assets into the lake, one ``MaterializeResult`` each.

        All selected tables are read in one consistent snapshot (one binlog position). Metadata per
        table: ``dagster/row_count``, rows by op, binlog file/pos/GTID set of the snapshot, snapshot
        and lock durations, change-log/state URIs and Delta versions, column schema.
        """
        specs = {s.key: s for s in context.assets_def.specs}
        selected = [specs[k] for k in context.selected_asset_keys if k in specs]
        keys_by_table = {table_of_spec(s): s.key for s in selected}
        tables = sorted(keys_by_table)
        opts = self.snapshot_options()
        context.log.info(
            f"Snapshot of {len(tables)} table(s) from {self.user}@{self.host}:{self.port} "
            f"(snapshot_mode={self.snapshot_mode}, locking={opts.locking_mode}) into {lake.base_uri}"
        )
        for r in run_snapshot(
            self.connection_settings(), tables, lambda: lake.get_writer(self.server_name),
            type_options=self.type_options(), options=opts, server_name=self.server_name,
            need_streaming=self.snapshot_mode != "initial_only",
        ):
            key = keys_by_table[(r.schema.database, r.schema.table)]
            context.log.info(
                f"{r.schema.qualified_name}: {r.write.rows} rows at {r.position} "
                f"({'committed' if r.write.state.committed else 'already committed, skipped'})"
            )
            yield dg.MaterializeResult(asset_key=key, metadata=snapshot_metadata(r))


def snapshot_metadata(r: SnapshotTableResult) -> dict[str, Any]:
    """Dagster metadata of one table's snapshot result."""
    w = r.write
    return {
        "dagster/row_count": dg.MetadataValue.int(w.rows),
        "rows_by_op": dg.MetadataValue.json(w.rows_by_op),
        "binlog_file": r.position.file,
        "binlog_pos": dg.MetadataValue.int(r.position.pos),
        "gtid_set": r.position.gtid_set or "",
        "snapshot_seconds": dg.MetadataValue.float(round(w.seconds, 3)),
        "lock": r.lock_kind,
        "lock_seconds": dg.MetadataValue.float(round(r.lock_seconds, 3)),
        "changelog_uri": dg.MetadataValue.path(w.paths.changelog),
        "state_uri": dg.MetadataValue.path(w.paths.state),
        "changelog_delta_version": dg.MetadataValue.int(w.changelog.table_version),
        "state_delta_version": dg.MetadataValue.int(w.state.table_version),
        "committed": dg.MetadataValue.bool(w.state.committed),
        "dagster/column_schema": dg.TableSchema(
            columns=[dg.TableColumn(name=c.name, type=c.column_type) for c in r.schema.columns]
        ),
    }


class CdcLakeResource(dg.ConfigurableResource):
    """Where and how captured tables are written: object storage + a Spark session.

    ``base_uri`` is a local path (default ``.lake``) or ``s3://bucket/prefix`` with the
    ``s3_*`` settings for any S3 API endpoint. Spark comes from the nested dagster-pyspark
    ``LazyPySparkResource`` (local ``local[2]`` by default; set ``spark.master`` and friends in its
    ``spark_config`` for a cluster); the JVM starts only when a run writes.
    """

    base_uri: str = Field(default=".lake", description="Lake root: local path, file:// or s3://bucket/prefix.")
    s3_endpoint_url: str | None = Field(default=None, description="S3 API endpoint, e.g. http://127.0.0.1:8333.")
    s3_access_key_id: str | None = Field(default=None, description="S3 access key (use EnvVar).")
    s3_secret_access_key: str | None = Field(default=None, description="S3 secret key (use EnvVar).")
    s3_region: str = Field(default="us-east-1", description="S3 region.")
    s3_conditional_put: str | None = Field(
        default="etag", description="'etag' for atomic Delta commits via conditional PUT; null to disable."
    )
    rows_per_file: int = Field(default=1_000_000, description="Maximum rows per Parquet data file.")
    pyspark: LazyPySparkResource = Field(
        default_factory=lambda: LazyPySparkResource(spark_config=DEFAULT_SPARK_CONFIG),
        description="dagster-pyspark resource providing the Spark session.",
    )

    def storage_settings(self) -> StorageSettings:
        return StorageSettings(
            base_uri=self.base_uri,
            s3_endpoint_url=self.s3_endpoint_url,
            s3_access_key_id=self.s3_access_key_id,
            s3_secret_access_key=self.s3_secret_access_key,
            s3_region=self.s3_region,
            s3_conditional_put=self.s3_conditional_put,
        )

    def get_writer(self, server_name: str) -> LakeWriter:
        """A :class:`LakeWriter` on this resource's Spark session (starts the JVM if needed)."""
        return LakeWriter(
            self.pyspark.spark_session, self.storage_settings(), server_name,
            rows_per_file=self.rows_per_file,
        )


__all__ = ["CdcLakeResource", "MySqlCdcResource", "DEFAULT_SPARK_CONFIG", "SNAPSHOT_MODES", "SourceConnectionError"]
