"""Dagster resources: the MySQL/MariaDB source and the lake (Spark + object storage)."""

from __future__ import annotations

import json
import logging
import time
import warnings
from collections.abc import Callable, Generator, Iterable, Iterator, Sequence
from functools import partial
from typing import TYPE_CHECKING, Any

import dagster as dg
import pymysql
from dagster_pyspark import LazyPySparkResource
from pydantic import Field

from ..engine.gaps import GAP_HANDLING_MODES, check_gap_handling, queue_checksum_repair
from ..engine.incremental import IncrementalState
from ..errors import ConfigurationError, SourceConnectionError, UnknownTableError
from ..events import BinlogPosition
from ..sink.layout import LakeLayout
from ..sink.spark_session import quiet_spark, remote_spark_session, use_this_python_for_local_spark
from ..sink.storage import StorageSettings
from ..source.catalog import list_tables, read_table_schemas
from ..source.columns import ColumnPolicy
from ..source.connection import ConnectionSettings, ServerInfo, connect, server_info
from ..source.failover import ServerIdentity
from ..source.filters import TableFilter
from ..source.schema import TableSchema
from ..source.select_overrides import parse_overrides
from ..source.signals import create_signal_table, signal_table_sql
from ..source.snapshot import SnapshotOptions
from ..source.types import TypeOptions
from .checks import (
    CHECKSUM,
    GAPS,
    RETENTION,
    ROW_COUNT,
    TABLE_CHECKS,
    CheckOptions,
    SharedSource,
    gaps_check,
    no_data_skipped_results,
    not_captured_results,
    retention_check,
    run_table_checks,
    stopped_results,
)
from .protocol import (
    BINLOG_METADATA_KEY,
    EPOCH_TAG,
    IDENTITY_TAG,
    INCREMENTAL_TAG,
    MODE_TAG,
    SNAPSHOT_MODE_TAG,
    STOPPED_TAG,
    TABLE_CHECKS_TAG,
    TABLE_METADATA_KEY,
    WINDOW_END_TAG,
    WINDOW_START_TAG,
    binlog_asset_key,
    position_from_metadata,
    position_from_tag,
    position_metadata,
)
from .translator import table_asset_key, table_of_spec
from .verify import (
    WindowVerification,
    backlog,
    estimated_rows,
    incremental_progress_metadata,
    lag_metadata,
    live_row_count,
    verification_failed_results,
    verify_window,
)

if TYPE_CHECKING:
    from ..engine.initial_snapshot import SnapshotTableResult
    from ..engine.snapshot_run import SnapshotReads
    from ..engine.stream import IncrementalOptions, StreamOptions, WindowResult
    from ..engine.stream_run import FollowPlanner, NextWindow, StreamRunOptions
    from ..sink.lake import LakeWriter
    from ..sink.table_batch import TableWriteResult

# The data path (stream, pipeline, sink: sqlglot, python-mysql-replication, deltalake, pyspark) is
# imported by the methods that run it, so loading a code location (webserver, daemon, sensor ticks)
# does not pay for it; see tests/test_deployment.py.

log = logging.getLogger(__name__)

#: ``json_schema_extra`` of a secret field: ``MySqlCdcComponent`` turns a YAML value written
#: ``{{ env.NAME }}`` into ``dg.EnvVar("NAME")`` (read at run time, never shown in the UI).
SECRET: dict[str, Any] = {"secret": True}

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
    # no stage progress bars in the run's console (dagster dev prints the run workers' stderr)
    "spark.ui.showConsoleProgress": "false",
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
    password: str = Field(
        default="",
        description="Capture user's password (database.password); use EnvVar.",
        json_schema_extra=SECRET,
    )
    server_name: str = Field(
        default="mysql",
        description="Logical server name (topic.prefix): first segment of asset keys and lake paths.",
    )
    server_id: int = Field(
        default=184054,
        description="Replication client id for the binlog dump (database.server.id); unique per server.",
    )
    database_include_list: list[str] = Field(
        default_factory=list, description="Regexes of captured databases."
    )
    database_exclude_list: list[str] = Field(
        default_factory=list, description="Regexes of excluded databases."
    )
    table_include_list: list[str] = Field(
        default_factory=list, description="Regexes of captured 'db.table' names."
    )
    table_exclude_list: list[str] = Field(
        default_factory=list, description="Regexes of excluded 'db.table' names."
    )
    column_include_list: list[str] = Field(
        default_factory=list,
        description="Regexes of captured 'db.table.column' names (column.include.list); other columns are "
        "not read, streamed, written or checked. Primary-key columns must stay captured.",
    )
    column_exclude_list: list[str] = Field(
        default_factory=list,
        description="Regexes of 'db.table.column' names left out of the capture (column.exclude.list).",
    )
    column_truncate_to_chars: dict[str, int] = Field(
        default_factory=dict,
        description="{regex over 'db.table.column': n}: character values cut to n characters "
        "(column.truncate.to.<n>.chars).",
    )
    column_mask_with_chars: dict[str, int] = Field(
        default_factory=dict,
        description="{regex over 'db.table.column': n}: character values replaced by n '*' "
        "(column.mask.with.<n>.chars).",
    )
    column_mask_hash: dict[str, str] = Field(
        default_factory=dict,
        description="{regex over 'db.table.column': algorithm}: character values replaced by the hex "
        "digest (e.g. SHA-256) of salt + value (column.mask.hash.<algorithm>.with.salt.<salt>).",
    )
    column_mask_hash_salt: str | None = Field(
        default=None,
        description="Salt of column_mask_hash (the <salt> of Debezium's property); a secret: use EnvVar.",
        json_schema_extra=SECRET,
    )
    message_key_columns: dict[str, list[str]] = Field(
        default_factory=dict,
        description="{regex over 'db.table': [columns]}: the key of matching tables, for a keyless table or "
        "to override its primary key (message.key.columns); the columns must identify a row.",
    )
    column_mask_hash_version: str = Field(
        default="v1",
        description="v1: hash as Debezium's column.mask.hash. does (Java-serialized value); "
        "v2: as column.mask.hash.v2. (UTF-8 bytes of the value).",
    )
    snapshot_mode: str = Field(default="initial", description=f"snapshot.mode: one of {SNAPSHOT_MODES}.")
    snapshot_locking_mode: str = Field(
        default="minimal", description="snapshot.locking.mode: minimal, extended or none."
    )
    snapshot_split_reads: bool = Field(
        default=False,
        description="Snapshots read by the Spark executors in parallel primary-key splits, each on its own "
        "connection: initial and blocking snapshots without any lock, each split in its own consistent "
        "snapshot (Flink CDC's lock-free snapshot); incremental snapshots read a run's chunks of a table as "
        "splits inside one watermark window. False: the run's process reads (initial snapshots: one locked "
        "consistent scan, snapshot_locking_mode; incremental: chunk by chunk).",
    )
    snapshot_split_rows: int = Field(
        default=100_000,
        description="Rows per split of a split snapshot (scan.incremental.snapshot.chunk.size).",
    )
    snapshot_max_connections: int = Field(
        default=0,
        description="At most this many Spark tasks read the source at once in a split snapshot "
        "(0: one per Spark core).",
    )
    snapshot_fetch_size: int = Field(
        default=10_000, description="Rows per round trip while scanning (snapshot.fetch.size)."
    )
    snapshot_batch_rows: int = Field(
        default=100_000, description="Rows per Arrow batch / Spark job (bounds memory)."
    )
    snapshot_select_statement_overrides: dict[str, str] = Field(
        default_factory=dict,
        description="{'db.table': 'SELECT * FROM db.table WHERE <condition>'}: the rows an initial snapshot "
        "reads (snapshot.select.statement.overrides); the condition is validated like a signal filter.",
    )
    decimal_handling_mode: str = Field(
        default="precise", description="precise, double or string (decimal.handling.mode)."
    )
    time_precision_mode: str = Field(
        default="adaptive_time_microseconds",
        description="adaptive_time_microseconds or connect (time.precision.mode).",
    )
    bigint_unsigned_handling_mode: str = Field(
        default="precise", description="precise or long (bigint.unsigned.handling.mode)."
    )
    binary_handling_mode: str = Field(
        default="bytes", description="bytes, base64, base64-url-safe or hex (binary.handling.mode)."
    )
    enable_time_adjuster: bool = Field(
        default=True,
        description="DATE/DATETIME years below 100 read as two-digit years: 00-69 -> 2000-2069, "
        "70-99 -> 1970-1999 (enable.time.adjuster; Debezium's default). False keeps the stored year.",
    )
    connect_timeout: int = Field(
        default=10, description="Seconds to wait for a connection (connect.timeout.ms / 1000)."
    )
    ssl_mode: str = Field(
        default="preferred",
        description="TLS to the server (database.ssl.mode): disabled, preferred (TLS when offered), "
        "required, verify_ca, verify_identity. Applies to every connection the capture opens.",
    )
    ssl_ca: str | None = Field(
        default=None,
        description="CA certificate to verify the server with (database.ssl.truststore, as PEM): a path or "
        "the PEM text (e.g. EnvVar); default: the system CAs.",
        json_schema_extra=SECRET,
    )
    ssl_cert: str | None = Field(
        default=None,
        description="Client certificate (database.ssl.keystore, as PEM): a path or the PEM text; use EnvVar.",
        json_schema_extra=SECRET,
    )
    ssl_key: str | None = Field(
        default=None,
        description="Client private key (unencrypted PEM): a path or the PEM text; use EnvVar.",
        json_schema_extra=SECRET,
    )
    skip_unparseable_ddl: bool = Field(
        default=False,
        description="Log and skip DDL sqlglot cannot parse (schema.history.internal.skip.unparseable.ddl).",
    )
    provide_transaction_metadata: bool = Field(
        default=False,
        description="Fill the `transaction` struct of change events (provide.transaction.metadata).",
    )
    event_processing_failure_handling_mode: str = Field(
        default="fail",
        description="A row event that cannot be decoded (event.processing.failure.handling.mode): fail the "
        "run, warn (skip it, WARNING with its position) or skip (skip it, one WARNING per window); skipped "
        "events are listed in the binlog asset's events_skipped metadata.",
    )
    include_query: bool = Field(
        default=False,
        description="Fill source.query with the statement of each row change (include.query); needs "
        "MySQL binlog_rows_query_log_events=ON. Refused with column masks (the text holds the values).",
    )
    stream_batch_rows: int = Field(
        default=50_000,
        description="Events per Arrow batch / Spark job while streaming (bounds the run's memory).",
    )
    stream_commit_workers: int = Field(
        default=8,
        description="Tables of a window committed at the same time at its end (Delta commits of many "
        "tables overlap; each table keeps its own transaction identity and commit order). 1 = one "
        "table after another.",
    )
    signal_data_collection: str | None = Field(
        default=None,
        description=(
            "Signal table 'db.table' (signal.data.collection); default '<db>.debezium_signal' when "
            "database_include_list names exactly one database, else signals are off."
        ),
    )
    incremental_snapshot_chunk_size: int = Field(
        default=1024, description="Rows per chunk (incremental.snapshot.chunk.size)."
    )
    incremental_snapshot_max_chunks_per_run: int = Field(
        default=64, description="Chunks one window run reads."
    )
    incremental_snapshot_run_seconds: float = Field(
        default=0.0,
        description="Time budget of one window run's chunk reads: no chunk starts after this many seconds "
        "(0: only incremental_snapshot_max_chunks_per_run bounds a run). With snapshot_split_reads, raise "
        "max_chunks_per_run and let this bound the run.",
    )
    incremental_snapshot_watermarking_strategy: str = Field(
        default="insert_insert",
        description="insert_insert or insert_delete (incremental.snapshot.watermarking.strategy).",
    )
    pk_range_rows: int = Field(
        default=100_000,
        description="Rows per primary-key-range partition of the pk_ranges assets (recomputed after each snapshot; 0 = off).",
    )
    checksum_sample_chunks: int = Field(
        default=0, description="Checksum check: 0 = whole table, N = N evenly spread primary-key chunks."
    )
    check_chunk_rows: int = Field(
        default=10_000, description="Rows per source read of the reconciliation checks."
    )
    stream_check_max_keys: int = Field(
        default=10_000,
        description="Stream runs: checksum_matches_source compares at most this many keys the window changed, per table.",
    )
    stream_materialize_unchanged: bool = Field(
        default=False,
        description="Stream runs select every table (all shown as materializing, checks on all) instead of "
        "only the tables the window changed (the sensor reads the window's table ids ahead).",
    )
    planned_checks_max_tables: int = Field(
        default=20,
        description="A run the binlog sensor requests (a window, a snapshot) that selects more tables than "
        "this does not plan their checks: the run evaluates the same checks of every table it "
        "materializes and logs each result as an AssetCheckEvaluation event (1 Dagster event per "
        "check instead of 3: planned, output, evaluation). 0: always logged; a number above the "
        "table count: always planned. Runs started from the UI plan what they select.",
    )
    stream_lookahead_max_bytes: int = Field(
        default=16 * 1024 * 1024,
        description="Largest window (binlog bytes) the sensor reads ahead to select the changed tables; "
        "larger windows select every table.",
    )
    create_missing_signal_table: bool = Field(
        default=False,
        description="Create the signal table (signal_data_collection) when a range backfill or repair "
        "needs it and it is missing (needs CREATE on its database); otherwise the error shows the SQL.",
    )
    retention_margin_files: int = Field(
        default=1,
        description="binlog_retention check warns when the committed file is among this many oldest files.",
    )
    incremental_snapshot_read_only: bool = Field(
        default=False,
        description="Read-only incremental snapshots (read.only): binlog positions/GTID sets around each chunk SELECT are the watermarks; nothing is written to the source.",
    )
    binlog_read_timeout: int = Field(
        default=3600,
        description="Seconds a streaming run may spend reading its binlog window before it fails (and is retried).",
    )
    stream_follow_seconds: float = Field(
        default=300.0,
        description="After its requested window, a stream run keeps reading follow-on windows this long "
        "while changes keep coming (warm Spark, no new run per window: seconds from COMMIT to the lake "
        "under a daemon); 0 = one window per run. Exactly-once is kept (follow-on windows are saved "
        "create-if-absent in the lake's staging area before they are read).",
    )
    stream_follow_idle_seconds: float = Field(
        default=5.0,
        description="A following run ends once the binlog has had nothing new for this long.",
    )
    stream_parallel_min_bytes: int | None = Field(
        default=64 * 1024 * 1024,
        description="A binlog window with at least this many bytes of captured tables' changes (a backlog: "
        "an outage, a bulk load, an old offset) is decoded by parallel Spark tasks, one segment each, every "
        "task on its own replication connection; smaller windows (steady streaming) are read by the run "
        "process. None = never.",
    )
    stream_parallel_server_ids: str | None = Field(
        default=None,
        description="Replication server ids of the parallel segment readers, 'first-last' (Flink CDC's "
        "server-id range); at most this many segments are read at once, each id must be unique among the "
        "server's replicas. Default: server_id+101 to server_id+116.",
    )
    stream_parallel_max_tasks: int = Field(
        default=0,
        description="Segments (Spark tasks) a parallel window is cut into: 0 = one per Spark core, at most "
        "one per server id of stream_parallel_server_ids.",
    )
    binlog_gap_handling: str = Field(
        default="repair",
        description=(
            f"Changes the binlog does not carry (statement-based DML, foreign-key cascades, a failed "
            f"checksum): one of {GAP_HANDLING_MODES}. repair: re-read what may have diverged with a "
            "targeted incremental snapshot (needs the signal table); warn: report only; fail: stop the run."
        ),
    )

    # -- derived settings ---------------------------------------------------------------------
    def connection_settings(self) -> ConnectionSettings:
        return ConnectionSettings(
            host=self.host,
            port=self.port,
            user=self.user,
            password=self.password,
            connect_timeout=self.connect_timeout,
            ssl_mode=self.ssl_mode,
            ssl_ca=self.ssl_ca,
            ssl_cert=self.ssl_cert,
            ssl_key=self.ssl_key,
        )

    def _server_info(self, settings: ConnectionSettings) -> ServerInfo:
        """Version, flavour and replication settings of the source (one short connection)."""
        conn = connect(settings)
        try:
            return server_info(conn)
        finally:
            conn.close()

    def type_options(self) -> TypeOptions:
        """Raises ConfigurationError/ValueError naming a bad mode value."""
        return TypeOptions(
            decimal_handling_mode=self.decimal_handling_mode,  # type: ignore[arg-type]
            time_precision_mode=self.time_precision_mode,  # type: ignore[arg-type]
            bigint_unsigned_handling_mode=self.bigint_unsigned_handling_mode,  # type: ignore[arg-type]
            binary_handling_mode=self.binary_handling_mode,  # type: ignore[arg-type]
            columns=self.column_policy(),
            enable_time_adjuster=self.enable_time_adjuster,
        )

    def column_policy(self) -> ColumnPolicy:
        """Captured columns and value masks (Debezium ``column.*`` properties, :mod:`..source.columns`).

        Raises:
            ConfigurationError: both column lists set, a bad regex or length, an unknown hash
                algorithm, or hash rules without a salt.
        """
        return ColumnPolicy(
            include_list=tuple(self.column_include_list),
            exclude_list=tuple(self.column_exclude_list),
            truncate=tuple(self.column_truncate_to_chars.items()),
            mask_with_chars=tuple(self.column_mask_with_chars.items()),
            mask_hash=tuple(self.column_mask_hash.items()),
            hash_salt=_resolve(self.column_mask_hash_salt) or "",
            hash_version=self.column_mask_hash_version,  # type: ignore[arg-type]
            message_key_columns=tuple((p, tuple(c)) for p, c in self.message_key_columns.items()),
        )

    def snapshot_options(self, mode: str | None = None) -> SnapshotOptions:
        mode = mode or self.snapshot_mode
        if mode not in SNAPSHOT_MODES:
            raise ConfigurationError(f"snapshot_mode={mode!r} is not valid; use one of {SNAPSHOT_MODES}")
        return SnapshotOptions(
            locking_mode=self.snapshot_locking_mode,  # type: ignore[arg-type]
            fetch_size=self.snapshot_fetch_size,
            batch_rows=self.snapshot_batch_rows,
            include_data=mode != "no_data",
            select_overrides=parse_overrides(self.snapshot_select_statement_overrides),
            event_processing_failure_handling_mode=self.event_processing_failure_handling_mode,
        )

    def table_filter(self) -> TableFilter:
        return TableFilter(
            tuple(self.database_include_list),
            tuple(self.database_exclude_list),
            tuple(self.table_include_list),
            tuple(self.table_exclude_list),
        )

    # -- discovery ----------------------------------------------------------------------------
    def discover_tables(self, tables: Sequence[str] | None = None) -> list[TableSchema]:
        """Schemas of the captured tables (their captured columns only), read from the server.

        The signal table (:meth:`signal_table`) is never one of them: its rows are signals and
        watermarks, read from the binlog, not captured data (as an asset its checks would compare
        a lake table that is never written). ``table_include_list`` entries that match no table
        are reported here, at definitions load, as a ``UserWarning`` and a logged WARNING (a typo
        would otherwise capture nothing, silently).

        Args:
            tables: explicit ``"database.table"`` names (each must exist); ``None`` captures every
                base table that passes the include/exclude lists (system schemas never).

        Raises:
            SourceConnectionError: the server is unreachable / credentials are wrong.
            UnknownTableError: an explicitly named table does not exist or is filtered out.
            ConfigurationError: an explicitly named table is the signal table.
        """
        # Outside a run, EnvVar fields are still unresolved: resolve them first.
        me = self.process_config_and_initialize()
        flt = me.table_filter()
        signal = me.signal_table()
        conn = connect(me.connection_settings())
        try:
            if not tables:
                listed = list_tables(conn, flt.literal_databases())
                for message in me._unmatched_include_messages(listed):
                    log.warning(message)
                    warnings.warn(message, UserWarning, stacklevel=2)
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
                if signal in [f"{d}.{t}" for d, t in wanted]:
                    raise ConfigurationError(
                        f"Table {signal} is the signal table (signal_data_collection): its rows are "
                        "signals and watermarks, not captured data; remove it from `tables`."
                    )
            else:
                wanted = [k for k in listed if flt.matches(*k) and f"{k[0]}.{k[1]}" != signal]
            schemas = read_table_schemas(conn, wanted)
        finally:
            conn.close()
        missing = [f"{d}.{t}" for d, t in wanted if (d, t) not in schemas]
        if missing:
            raise UnknownTableError(
                f"Table(s) not found on {me.host}:{me.port}: {', '.join(missing)}. "
                "Check the names (case-sensitive) or remove them."
            )
        # the captured columns (column_include_list/column_exclude_list): what the lake will hold;
        # a policy that cannot apply (a key column left out, an unmaskable column) fails here, early
        return [me.column_policy().checked(schemas[k]) for k in wanted]

    def include_list_warnings(self) -> list[str]:
        """One message per ``table_include_list`` entry that matches no table on the server
        (checked at snapshot time: a typo would otherwise capture nothing, silently)."""
        if not self.table_include_list:
            return []
        flt = self.table_filter()
        conn = connect(self.connection_settings())
        try:
            tables = list_tables(conn, flt.literal_databases())
        finally:
            conn.close()
        return self._unmatched_include_messages(tables)

    def _unmatched_include_messages(self, tables: Sequence[tuple[str, str]]) -> list[str]:
        """:meth:`include_list_warnings` over the server's tables ``tables``."""
        if not self.table_include_list:
            return []
        return [
            f"table_include_list entry {p!r} matches no table on {self.host}:{self.port} "
            "(patterns are regexes over 'database.table', full match, case-insensitive); check the "
            "spelling or remove it"
            for p in self.table_filter().unmatched_include_patterns(list(tables))
        ]

    # -- materialization ------------------------------------------------------------------------
    def stream_options(self) -> StreamOptions:
        """Raises ConfigurationError: a bad gap handling mode, or ``include_query`` with column masks."""
        from ..engine.segments import ParallelOptions
        from ..engine.stream import StreamOptions

        if self.include_query and self.column_policy().has_masks:
            raise ConfigurationError(
                "include_query copies each statement's text, with the original values of masked columns, "
                "into source.query: turn include_query off or drop the column_mask_*/column_truncate_* rules"
            )
        return StreamOptions(
            include_query=self.include_query,
            event_processing_failure_handling_mode=self.event_processing_failure_handling_mode,
            skip_unparseable_ddl=self.skip_unparseable_ddl,
            provide_transaction_metadata=self.provide_transaction_metadata,
            batch_rows=self.stream_batch_rows,
            commit_workers=max(1, self.stream_commit_workers),
            deadline_s=float(self.binlog_read_timeout),
            gap_handling=check_gap_handling(self.binlog_gap_handling),
            parallel=(
                ParallelOptions.build(
                    self.stream_parallel_min_bytes,
                    self.stream_parallel_server_ids,
                    self.server_id,
                    self.stream_parallel_max_tasks,
                )
                if self.stream_parallel_min_bytes is not None
                else None
            ),
        )

    def signal_table(self) -> str | None:
        """The signal table ``db.table`` in use, or ``None`` when signals are off."""
        if self.signal_data_collection:
            return self.signal_data_collection
        dbs = self.table_filter().literal_databases()
        return f"{dbs[0]}.debezium_signal" if dbs and len(dbs) == 1 else None

    def incremental_options(self) -> IncrementalOptions:
        from ..engine.stream import IncrementalOptions

        return IncrementalOptions(
            signal_table=self.signal_table(),
            chunk_size=self.incremental_snapshot_chunk_size,
            max_chunks_per_run=self.incremental_snapshot_max_chunks_per_run,
            watermark_strategy=self.incremental_snapshot_watermarking_strategy,
            read_only=self.incremental_snapshot_read_only,
            split_reads=self.snapshot_split_reads,
            max_connections=self.snapshot_max_connections,
            split_rows=self.snapshot_split_rows,
            run_seconds=self.incremental_snapshot_run_seconds,
        )

    def snapshot_reads(self) -> SnapshotReads:
        """How snapshots read the source: split reads (``snapshot_split_reads``) or the locked scan."""
        from ..engine.snapshot_run import SnapshotReads

        return SnapshotReads(
            split=self.snapshot_split_reads,
            split_rows=self.snapshot_split_rows,
            max_connections=self.snapshot_max_connections,
        )

    def stream_run_options(self) -> StreamRunOptions:
        """The settings a stream run reads its windows with (:class:`..engine.stream_run.StreamRunOptions`).

        Raises:
            ConfigurationError: as :meth:`stream_options` and :meth:`type_options`.
        """
        from ..engine.stream_run import StreamRunOptions

        return StreamRunOptions(
            server_name=self.server_name,
            server_id=self.server_id,
            table_filter=self.table_filter(),
            type_options=self.type_options(),
            stream=self.stream_options(),
            incremental=self.incremental_options(),
            snapshot=partial(self.snapshot_options, "initial"),
            snapshot_reads=self.snapshot_reads(),
            follow_seconds=float(self.stream_follow_seconds),
            follow_idle_seconds=float(self.stream_follow_idle_seconds),
        )

    def create_signal_table(self) -> str:
        """Create the signal table if absent (needs CREATE on its database); returns its name.

        Raises:
            ConfigurationError: no signal table is configured.
        """
        me = self.process_config_and_initialize()
        table = me.signal_table()
        if not table:
            raise ConfigurationError(
                "No signal table: set signal_data_collection='db.debezium_signal' (or include exactly one database)"
            )
        conn = connect(me.connection_settings())
        try:
            create_signal_table(conn, table)
        finally:
            conn.close()
        return table

    def ensure_signal_table(self, purpose: str) -> str:
        """The signal table, checked to exist; created when ``create_missing_signal_table`` allows.

        Args:
            purpose: why it is needed (goes into the error message).

        Returns:
            its ``db.table`` name.

        Raises:
            ConfigurationError: no signal table is configured, or it is missing (and may not or
                could not be created); the message has the exact SQL to create and grant it.
        """
        table = self.signal_table()
        dbs = self.table_filter().literal_databases()
        example = f"{dbs[0] if dbs else 'mydb'}.debezium_signal"
        if not table:
            raise ConfigurationError(
                f"No signal table is configured, and {purpose}: set signal_data_collection='{example}' on "
                f"MySqlCdcResource and create it:\n  {signal_table_sql(example)};"
            )
        db, _, t = table.partition(".")
        conn = connect(self.connection_settings())
        try:
            with conn.cursor() as cur:
                cur.execute(
                    "SELECT 1 FROM information_schema.TABLES WHERE TABLE_SCHEMA = %s AND TABLE_NAME = %s",
                    (db, t),
                )
                exists = cur.fetchone() is not None
            if exists:
                return table
            if self.create_missing_signal_table:
                try:
                    create_signal_table(conn, table)
                    log.info("created the signal table %s", table)
                    return table
                except pymysql.err.MySQLError as e:
                    why = f"creating it failed ({e.args[0]}: {e.args[-1]})"
            else:
                why = "it does not exist"
        finally:
            conn.close()
        raise ConfigurationError(
            f"Signal table {table} is needed ({purpose}) but {why}. Create it as a user with CREATE on "
            f"`{db}` and let the capture user write to it:\n"
            f"  {signal_table_sql(table)};\n"
            f"  GRANT SELECT, INSERT, DELETE ON `{db}`.`{t}` TO '{self.user}'@'%';\n"
            "or call MySqlCdcResource.create_signal_table(), or set create_missing_signal_table=True "
            "(the capture user then needs CREATE on the database)."
        )

    def sync(
        self, context: dg.AssetExecutionContext, lake: CdcLakeResource
    ) -> Iterator[dg.MaterializeResult | dg.AssetCheckResult]:
        """Materialize the selected assets: a binlog window when the run was requested by the
        binlog sensor (run tags ``dagster_mysql_cdc/mode=stream`` + window), otherwise a consistent
        snapshot of the selected tables (a UI "Materialize" or a backfill).

        Yields:
            one ``MaterializeResult`` per snapshotted or changed table, then one for the server's
            binlog asset when it is selected.
        """
        from ..sink.delta import handle_cache

        with handle_cache():  # the run's Delta handles are loaded once (see handle_cache)
            yield from self._sync(context, lake)

    def _sync(
        self, context: dg.AssetExecutionContext, lake: CdcLakeResource
    ) -> Iterator[dg.MaterializeResult | dg.AssetCheckResult]:
        tags = context.run.tags
        committed: BinlogPosition | None = None
        gaps: list[dict] | None = None
        stopped: dict[str, dict] | None = None
        live_rows: dict[str, int] = {}
        tail_files: dict[str, list[str]] = {}
        policy = self.column_policy()
        if policy:  # what is left out, masked or re-keyed (never the salt)
            context.log.info(f"Column policy: {json.dumps(policy.describe())}")
        if context.selected_asset_keys:
            if tags.get(MODE_TAG) == "stream":
                report: dict[str, Any] = {}
                committed = yield from self.stream(context, lake, report=report)
                gaps = report.get("gaps")
                stopped = report.get("stopped")
                live_rows = report.get("live_rows") or {}
                tail_files = report.get("tail_files") or {}
            else:
                committed = yield from self.snapshot(context, lake)
        logged = _logged_check_keys(context) if tags.get(TABLE_CHECKS_TAG) == "logged" else []
        if context.selected_asset_check_keys or logged:
            from ..sink.delta import handle_cache

            # the checks write nothing to the lake: each table is refreshed once, after the
            # run's commits, then read through that handle (see handle_cache)
            with handle_cache(sole_writer=True):
                results = self.run_checks(
                    context,
                    lake,
                    committed,
                    gaps=gaps,
                    stopped=stopped,
                    live_rows=live_rows,
                    tail_files=tail_files,
                    check_keys=[*context.selected_asset_check_keys, *logged],
                )
                yield from _report_checks(context, results, set(logged))

    def run_checks(
        self,
        context: dg.AssetExecutionContext,
        lake: CdcLakeResource,
        committed: BinlogPosition | None,
        gaps: list[dict] | None = None,
        stopped: dict[str, dict] | None = None,
        live_rows: dict[str, int] | None = None,
        tail_files: dict[str, list[str]] | None = None,
        check_keys: Iterable[dg.AssetCheckKey] | None = None,
    ) -> Iterator[dg.AssetCheckResult]:
        """Run the selected reconciliation checks (:mod:`.checks`) at ``committed``.

        ``check_keys``: the checks to run (default: the run's selected checks; a window run whose
        table checks are logged adds them, see :data:`.protocol.TABLE_CHECKS_TAG`).

        ``committed`` is the position this run just committed; for a checks-only run (UI "Execute
        checks") it is the last committed position reported by the binlog asset. ``gaps``: the
        changes the binlog did not carry in this run's window (``changes_in_binlog``).
        ``live_rows``: the lake's live rows of the tables this run committed (state URI ->
        count), not counted again. ``tail_files``: the tail files each of them committed (state
        URI -> relative paths): the window's keys are read from them alone while they are current.
        ``stopped``: the tables whose capture is stopped after this window (``"db.table"`` ->
        ``{"since", "error"}``): their row count and checksum checks fail saying so (the lake
        holds them as of ``since``), instead of comparing.
        """
        specs = {s.key: s for s in context.assets_def.specs}
        if committed is None:
            committed = self._last_committed(context)
        settings = self.connection_settings()
        info = self._server_info(settings)
        by_asset: dict[dg.AssetKey, set[str]] = {}
        for ck in context.selected_asset_check_keys if check_keys is None else check_keys:
            by_asset.setdefault(ck.asset_key, set()).add(ck.name)
        storage = lake.storage_settings()
        opts = CheckOptions(
            checksum_sample_chunks=self.checksum_sample_chunks,
            chunk_rows=self.check_chunk_rows,
            retention_margin_files=self.retention_margin_files,
        )
        window_start = self._window_start(context) if committed is not None else None
        in_window: list[WindowVerification] = []
        # tables the window may have changed without row events and that no repair re-reads
        # (no signal table, binlog_gap_handling="warn", no primary key ...): the window's keys say
        # nothing about them, so they get the full checks, and a divergence fails (and stays failed)
        unrepaired = {
            g.get("table") for g in gaps or [] if not str(g.get("repair", "")).startswith("Repair queued")
        }

        table_assets = [
            table_of_spec(specs[k]) for k in by_asset if BINLOG_METADATA_KEY not in (specs[k].metadata or {})
        ]
        from ..sink.delta import preload

        layout = LakeLayout(storage, self.server_name)
        preload(  # the checked tables' state and tail, side by side (see handle_cache)
            storage,
            [uri for db, t in table_assets for p in (layout.table(db, t),) for uri in (p.state, p.tail)],
            max(1, self.stream_commit_workers),
        )
        shared: list[SharedSource] = []  # made on the first full check when several tables have them

        def shared_source() -> SharedSource | None:
            if len(table_assets) < 2 or committed is None:
                return None
            if not shared:
                shared.append(
                    SharedSource(settings, info, table_assets, committed, self.type_options(), self.server_id)
                )
            return shared[0]

        def full_checks(key: dg.AssetKey, db: str, table: str, state_uri: str, names: set[str]):
            assert committed is not None
            return run_table_checks(
                shared=shared_source(),
                on_checksum_mismatch=self._checksum_repair(context, settings, committed),
                key=key,
                selected=names,
                settings=settings,
                info=info,
                storage=storage,
                state_uri=state_uri,
                database=db,
                table=table,
                committed=committed,
                type_options=self.type_options(),
                options=opts,
                server_id=self.server_id,
            )

        def isolated(key: dg.AssetKey, names: set[str], produce: Callable[[], Iterable[dg.AssetCheckResult]]):
            """The results of ``produce``; if it raises, a failed result with the error for each
            check of ``names`` it did not report: one table's check error never stops the other
            tables' checks (or fails a committed window's run)."""
            done: set[str] = set()
            try:
                for r in produce():
                    done.add(r.check_name or "")
                    yield r
            except Exception as e:  # noqa: BLE001 - a failed evaluation, not a failed run
                context.log.error(f"checks of {key.to_user_string()} raised {type(e).__name__}: {e}")
                for n in sorted(names - done):
                    yield dg.AssetCheckResult(
                        asset_key=key,
                        check_name=n,
                        passed=False,
                        severity=dg.AssetCheckSeverity.ERROR,
                        metadata={
                            "error": dg.MetadataValue.text(f"{type(e).__name__}: {e}"[:2000]),
                            "explanation": "the check raised an error (above); the other tables' checks ran",
                        },
                    )

        try:
            for asset_key, names in by_asset.items():
                spec = specs[asset_key]
                if BINLOG_METADATA_KEY in (spec.metadata or {}):
                    if RETENTION in names:
                        yield from isolated(
                            asset_key,
                            {RETENTION},
                            partial(
                                _one,
                                retention_check,
                                asset_key,
                                settings,
                                committed,
                                opts.retention_margin_files,
                            ),
                        )
                    if GAPS in names:
                        yield gaps_check(asset_key, gaps, self.binlog_gap_handling)
                    continue
                db, table = table_of_spec(spec)
                state_uri = LakeLayout(storage, self.server_name).state(db, table)
                from ..sink.read import current_schema

                if committed is None or current_schema(storage, state_uri) is None:
                    yield from not_captured_results(asset_key, names)
                    continue
                if stopped and f"{db}.{table}" in stopped:
                    yield from stopped_results(
                        asset_key, names & {ROW_COUNT, CHECKSUM}, stopped[f"{db}.{table}"]
                    )
                    names = names - {ROW_COUNT, CHECKSUM}
                    if not names:
                        continue
                not_comparable = self._rows_not_comparable(context, window_start is not None)
                yield from no_data_skipped_results(asset_key, names & not_comparable)
                names = names - not_comparable
                if (
                    window_start is not None
                    and names & {ROW_COUNT, CHECKSUM}
                    and f"{db}.{table}" not in unrepaired
                ):
                    # stream run: verify what the window changed (all tables at once, below)
                    in_window.append(
                        WindowVerification(
                            asset_key,
                            db,
                            table,
                            state_uri,
                            names & {ROW_COUNT, CHECKSUM},
                            live_rows=(live_rows or {}).get(state_uri),
                            tail_files=(tail_files or {}).get(state_uri),
                        )
                    )
                    names = names - {ROW_COUNT, CHECKSUM}
                if names:
                    yield from isolated(
                        asset_key, names, partial(full_checks, asset_key, db, table, state_uri, names)
                    )
            if in_window and committed is not None and window_start is not None:
                try:
                    results, keyless = verify_window(
                        tables=in_window,
                        settings=settings,
                        info=info,
                        storage=storage,
                        start=window_start,
                        reached=committed,
                        type_options=self.type_options(),
                        server_id=self.server_id,
                        max_keys=self.stream_check_max_keys,
                    )
                except Exception as e:  # noqa: BLE001 - the window is committed: a verification error must not fail (and re-run) it
                    context.log.warning(f"stream-run verification failed: {type(e).__name__}: {e}")
                    results, keyless = verification_failed_results(in_window, e), []
                yield from results
                for t in keyless:  # no key to compare by: the full (multiset) checks
                    yield from isolated(
                        t.key,
                        set(t.checks),
                        partial(full_checks, t.key, t.database, t.table, t.state_uri, t.checks),
                    )
        finally:
            for src in shared:
                src.close()

    def _checksum_repair(
        self, context: dg.AssetExecutionContext, settings: ConnectionSettings, committed: BinlogPosition
    ) -> Callable[[TableSchema, list[tuple], list[tuple]], str]:
        """The ``checksum_matches_source`` failure handler: logs a WARNING naming the table and
        position and, with ``binlog_gap_handling="repair"``, writes an ``execute-snapshot`` signal
        that re-reads the differing keys' ranges (:func:`..engine.gaps.queue_checksum_repair`)."""
        return partial(
            queue_checksum_repair,
            settings,
            committed=committed,
            gap_handling=self.binlog_gap_handling,
            signal_table=self.signal_table(),
            read_only=self.incremental_snapshot_read_only,
            log=context.log,
        )

    def _rows_not_comparable(self, context: dg.AssetExecutionContext, stream: bool) -> set[str]:
        """Checks whose whole-table comparison means nothing with ``snapshot_mode=no_data``: the
        row count on stream runs, row count and checksum on the (schema-only) snapshot runs.
        Checks-only runs (``Execute checks``) always compare."""
        if stream:
            return {ROW_COUNT} if self.snapshot_mode == "no_data" else set()
        if (
            context.selected_asset_keys
            and context.run.tags.get(SNAPSHOT_MODE_TAG, self.snapshot_mode) == "no_data"
        ):
            return {ROW_COUNT, CHECKSUM}
        return set()

    def _window_start(self, context: dg.AssetExecutionContext) -> BinlogPosition | None:
        """The start of the run's binlog window (stream runs), else ``None``."""
        tags = context.run.tags
        if tags.get(MODE_TAG) != "stream" or not tags.get(WINDOW_START_TAG):
            return None
        try:
            return position_from_tag(tags, WINDOW_START_TAG)
        except (ValueError, KeyError, TypeError):
            return None

    def _lag_metadata(
        self,
        context: dg.AssetExecutionContext,
        settings: ConnectionSettings,
        info: ServerInfo,
        reached: BinlogPosition,
        last_event_ts_ms: int | None,
    ) -> dict[str, Any]:
        """Lag and backlog metadata of a committed window (see :func:`.verify.lag_metadata`)."""
        record = _optional(lambda: context.instance.get_run_record_by_id(context.run.run_id), "run record")
        created = getattr(record, "create_timestamp", None)
        return lag_metadata(
            run_created_at=created.timestamp() if created is not None else None,
            last_event_ts_ms=last_event_ts_ms,
            behind=_optional(lambda: backlog(settings, info, reached), "backlog behind the server's head"),
        )

    def _estimated_rows(self, settings: ConnectionSettings, tables: list[str]) -> dict[str, int]:
        return _optional(lambda: estimated_rows(settings, tables), "row estimates") or {}

    def _snapshot_epoch(self, context: dg.AssetExecutionContext) -> int:
        """Offset epoch of a snapshot run's position: the run's :data:`EPOCH_TAG` (a re-snapshot
        the sensor started in a new epoch), else the epoch of the last committed position (a UI
        materialization on the server the capture follows), else 0."""
        tag = context.run.tags.get(EPOCH_TAG)
        if tag:
            try:
                return int(tag)
            except ValueError:
                raise ConfigurationError(f"Run tag {EPOCH_TAG} is not an integer: {tag!r}") from None
        last = _optional(lambda: self._last_committed(context), "the last committed position")
        return last.epoch if last is not None else 0

    def _last_committed(self, context: dg.AssetExecutionContext) -> BinlogPosition | None:
        """The newest position the binlog asset reported (window end or snapshot)."""
        binlog_key = binlog_asset_key(context.assets_def.specs)
        if binlog_key is None:
            return None
        ev = context.instance.get_latest_materialization_event(binlog_key)
        if ev is None or ev.asset_materialization is None:
            return None
        return position_from_metadata(ev.asset_materialization.metadata, "window_end", "snapshot")

    def refresh_pk_ranges(
        self, instance: dg.DagsterInstance, storage: StorageSettings, tables: Sequence[tuple[str, str]]
    ) -> dict[str, int]:
        """Recompute the key ranges of ``tables`` (``pk_range_rows`` rows each), store them in the
        lake (:func:`..engine.snapshot_run.refresh_key_ranges`) and register the partition keys of
        their ``pk_ranges`` assets. Keyless tables are skipped.

        Returns:
            ``{"db.table": number of ranges}``
        """
        from ..engine.snapshot_run import refresh_key_ranges
        from .partitions import pk_ranges_partitions_name

        out: dict[str, int] = {}
        for (db, t), ranges in refresh_key_ranges(
            self.connection_settings(),
            storage,
            self.server_name,
            self.column_policy(),
            tables,
            self.pk_range_rows,
        ):
            name = pk_ranges_partitions_name(self.server_name, db, t)
            existing = set(instance.get_dynamic_partitions(name))
            new = [r.key for r in ranges if r.key not in existing]
            if new:
                instance.add_dynamic_partitions(name, new)
            out[f"{db}.{t}"] = len(ranges)
        return out

    def resnapshot_range(
        self, context: dg.AssetExecutionContext, lake: CdcLakeResource, database: str, table: str
    ) -> dg.MaterializeResult:
        """Re-snapshot the key range of ``context.partition_key``
        (:func:`dagster_mysql_cdc.engine.snapshot_run.resnapshot_key_range`); the table's page gets
        the backfill's progress as an observation.

        Raises:
            ConfigurationError: unknown partition (snapshot the table first), no signal table.
        """
        from ..engine.snapshot_run import find_key_range, resnapshot_key_range

        storage = lake.storage_settings()
        key = context.partition_key
        rng, ranges_total = find_key_range(storage, self.server_name, database, table, key)
        settings = self.connection_settings()
        signal = self.ensure_signal_table("range re-snapshots write their watermarks to it")
        done = resnapshot_key_range(
            settings,
            storage,
            lake.get_writer(self.server_name),
            database=database,
            table=table,
            key=key,
            rng=rng,
            signal_table=signal,
            type_options=self.type_options(),
            server_name=self.server_name,
            server_id=self.server_id,
            reads=self.snapshot_reads(),
            epoch=self._snapshot_epoch(context),
            range_rows=self.pk_range_rows or 100_000,
            log=context.log,
        )
        snap, w = done.snapshot, done.write
        done_keys = set(context.instance.get_materialized_partitions(context.asset_key)) | {key}
        progress = {
            "ranges_done": len(done_keys),
            "ranges_total": ranges_total,
            "percent": round(100.0 * len(done_keys) / max(ranges_total, 1), 1),
            "last_range": key,
            "last_range_keys": {"after": rng.lo, "up_to": rng.hi},
            "last_range_rows": snap.rows_read,
        }
        table_key = table_asset_key(self.server_name, database, table)
        context.log_event(  # the table's page shows the backfill's progress (an observation)
            dg.AssetObservation(
                asset_key=table_key,
                description=f"pk_ranges backfill: range {key} re-snapshotted ({len(done_keys)}/{ranges_total})",
                metadata={"pk_ranges_backfill": dg.MetadataValue.json(progress)},
            )
        )
        return dg.MaterializeResult(
            metadata={
                "dagster/partition_row_count": dg.MetadataValue.int(snap.rows_read),
                "backfill_progress": dg.MetadataValue.json(progress),
                "backfill_percent": dg.MetadataValue.float(progress["percent"]),
                # None = unbounded (the first/last range); MetadataValue.json takes None at run time
                "range_low_exclusive": dg.MetadataValue.json(rng.lo),  # type: ignore[arg-type]
                "range_high_inclusive": dg.MetadataValue.json(rng.hi),  # type: ignore[arg-type]
                "rows_read": dg.MetadataValue.int(snap.rows_read),
                "rows_emitted": dg.MetadataValue.int(snap.rows_emitted),
                "rows_dropped_changed_in_window": dg.MetadataValue.int(snap.rows_read - snap.rows_emitted),
                "rows_deleted_absent_from_source": dg.MetadataValue.int(snap.rows_deleted),
                **position_metadata("low_watermark", snap.low),
                **position_metadata("high_watermark", snap.high),
                "changelog_uri": dg.MetadataValue.path(w.paths.changelog),
                "state_uri": dg.MetadataValue.path(w.paths.state),
            }
        )

    def _selection(self, context: dg.AssetExecutionContext) -> tuple[dict, dg.AssetKey | None]:
        specs = {s.key: s for s in context.assets_def.specs}
        keys_by_table: dict[tuple[str, str], dg.AssetKey] = {}
        binlog_key = None
        for k in context.selected_asset_keys:
            spec = specs.get(k)
            if spec is None:
                continue
            if BINLOG_METADATA_KEY in (spec.metadata or {}):
                binlog_key = k
            else:
                keys_by_table[table_of_spec(spec)] = k
        return keys_by_table, binlog_key

    def snapshot(
        self, context: dg.AssetExecutionContext, lake: CdcLakeResource
    ) -> Generator[dg.MaterializeResult, None, BinlogPosition | None]:
        """Snapshot the selected table assets into the lake, one ``MaterializeResult`` each
        (:func:`dagster_mysql_cdc.engine.snapshot_run.snapshot_tables`).

        Returns (as the generator's value): the snapshot's binlog position, ``None`` if nothing was read.

        All selected tables are read in one consistent snapshot (one binlog position). Metadata per
        table: ``dagster/row_count``, rows by op, binlog file/pos/GTID set of the snapshot, snapshot
        and lock durations, change-log/state URIs and Delta versions, column schema. The schema of
        each table is recorded in the schema history at the snapshot position.
        """
        from ..engine.snapshot_run import snapshot_tables
        from ..sink.schema_history import SchemaHistory

        keys_by_table, binlog_key = self._selection(context)
        tables = sorted(keys_by_table)
        if not tables:
            tables = [
                table_of_spec(s) for s in context.assets_def.specs if TABLE_METADATA_KEY in (s.metadata or {})
            ]
        mode = context.run.tags.get(SNAPSHOT_MODE_TAG, self.snapshot_mode)
        opts = self.snapshot_options(mode)
        for warning in self.include_list_warnings():
            context.log.warning(warning)
        storage = lake.storage_settings()
        history = SchemaHistory(storage, self.server_name)
        reader = "split reads, no lock" if self.snapshot_split_reads else f"locking={opts.locking_mode}"
        context.log.info(
            f"Snapshot of {len(tables)} table(s) from {self.user}@{self.host}:{self.port} "
            f"(snapshot_mode={mode}, {reader}) into {lake.base_uri}"
        )
        last = None
        for r in snapshot_tables(
            self.connection_settings(),
            tables,
            lambda: lake.get_writer(self.server_name),
            reads=self.snapshot_reads(),
            options=opts,
            type_options=self.type_options(),
            server_name=self.server_name,
            history=history,
            epoch=self._snapshot_epoch(context),
            need_streaming=mode != "initial_only",
            log=context.log,
        ):
            last = r
            key = keys_by_table.get((r.schema.database, r.schema.table))
            if key is not None:
                yield dg.MaterializeResult(asset_key=key, metadata=snapshot_metadata(r))
        if last is not None and self.pk_range_rows > 0:
            self.refresh_pk_ranges(context.instance, storage, [k for k in tables])
        if binlog_key is not None and last is not None:
            yield dg.MaterializeResult(
                asset_key=binlog_key,
                metadata={
                    "kind": "snapshot",
                    **position_metadata("snapshot", last.position),
                    "tables": dg.MetadataValue.json([f"{d}.{t}" for d, t in tables]),
                    "schema_history_uri": dg.MetadataValue.path(history.uri),
                },
            )
        return last.position if last is not None else None

    def stream(
        self, context: dg.AssetExecutionContext, lake: CdcLakeResource, report: dict | None = None
    ) -> Generator[dg.MaterializeResult, None, BinlogPosition | None]:
        """Process the binlog window named by the run's tags (requested by the binlog sensor):
        the tags are decoded, the run is coordinated by
        :class:`dagster_mysql_cdc.engine.stream_run.StreamRun`, and its outcome is reported as the
        materializations of the changed (and blocking-snapshotted) tables and of the binlog asset.

        Changes the binlog does not carry (statement DML, foreign-key cascades) are logged as
        WARNING, listed in the binlog asset's ``binlog_gaps`` metadata and, with ``report``, put in
        ``report["gaps"]`` (for the ``changes_in_binlog`` check); ``report`` also gets the tables
        stopped after the run (``"stopped"``), and the live rows (``"live_rows"``) and tail files
        (``"tail_files"``) of the tables it committed, by state URI.

        Returns (as the generator's value): the position the window reached.

        Raises:
            ConfigurationError: the run tags do not name a valid window.
            ServerChangedError: the window's positions belong to another server.
        """
        from ..engine.stream_run import StreamRun, StreamRunRequest
        from ..sink.schema_history import SchemaHistory

        tags = context.run.tags
        start, end = _window_tags(tags)
        keys_by_table, binlog_key = self._selection(context)
        settings = self.connection_settings()
        info = self._server_info(settings)
        request = StreamRunRequest(
            start,
            end,
            identity=_identity_tag(tags),
            incremental=_incremental_tag(tags),
            stopped=_stopped_tag(tags),
            selected=frozenset(keys_by_table),
        )
        storage = lake.storage_settings()
        writer = lake.get_writer(self.server_name)
        outcome = StreamRun(
            settings,
            info,
            writer=writer,
            history=SchemaHistory(storage, self.server_name),
            options=self.stream_run_options(),
            log=context.log,
            planner=self._follow_planner(settings, info),
        ).run(request)
        result, reached = outcome.result, outcome.reached
        if report is not None:
            report["stopped"] = outcome.stopped
            report["gaps"] = outcome.gaps
            report["live_rows"] = outcome.live_rows
            report["tail_files"] = outcome.tail_files
        for r in outcome.snapshots:  # a blocking snapshot: the tables the window did not change
            key = keys_by_table.get((r.schema.database, r.schema.table))
            if key is not None and (r.schema.database, r.schema.table) not in result.tables:
                yield dg.MaterializeResult(asset_key=key, metadata=snapshot_metadata(r))
        lag = self._lag_metadata(context, settings, info, reached, result.last_event_ts_ms)
        yield from self._table_results(
            context, result, settings, storage, keys_by_table, start=start, reached=reached, lag=lag
        )
        if binlog_key is not None:
            yield dg.MaterializeResult(
                asset_key=binlog_key,
                metadata={
                    **_stream_metadata(
                        result, start, reached, lag, outcome.follow_windows, writer.spark_seconds
                    ),
                    "stopped_tables": dg.MetadataValue.json(outcome.stopped),
                },
            )
        return reached

    def _follow_planner(self, settings: ConnectionSettings, info: ServerInfo) -> FollowPlanner:
        """How a following stream run finds its next window: as the binlog sensor plans it
        (:meth:`_next_window`) and selects its tables (:func:`.selection.changed_tables`)."""
        from ..engine.stream_run import FollowPlanner
        from .selection import changed_tables

        return FollowPlanner(
            next_window=partial(self._next_window, settings, info),
            changed_tables=partial(changed_tables, self),
        )

    def _next_window(
        self, settings: ConnectionSettings, info: ServerInfo, after: BinlogPosition
    ) -> NextWindow:
        """The run the binlog sensor would request once ``after`` is committed
        (:func:`.cursor.plan_stream_window` over the server's current position and binlog files)."""
        from ..engine.stream_run import NextWindow
        from ..source.connection import binlog_files, current_position
        from .cursor import ServerState, StreamCursor, plan_stream_window

        conn = connect(settings)
        try:
            state = ServerState(current=current_position(conn, info), binlog_files=binlog_files(conn))
        finally:
            conn.close()
        plan = plan_stream_window(
            StreamCursor(committed=after, snapshot_done=True), state, snapshot_mode=self.snapshot_mode
        )
        req = plan.request
        if req is None:
            return NextWindow(requested=False)
        if req.kind != "stream" or req.start is None or req.end is None:
            return NextWindow(requested=True)
        return NextWindow(requested=True, start=req.start, end=req.end)

    def _table_results(
        self,
        context: dg.AssetExecutionContext,
        result: WindowResult,
        settings: ConnectionSettings,
        storage: StorageSettings,
        keys_by_table: dict,
        *,
        start: BinlogPosition,
        reached: BinlogPosition,
        lag: dict[str, Any],
    ) -> Iterator[dg.MaterializeResult]:
        """The materialization of every changed table the run selected (row count, lag, window,
        incremental snapshot progress, commit facts); changed tables not selected are logged."""
        progress_tables = {c["table"] for c in result.chunks} | {
            t.get("table") for t in (result.incremental_state or {}).get("tables", [])[:1]
        }
        estimates = self._estimated_rows(settings, [x for x in progress_tables if x])
        unselected = []
        for (db, t), w in result.tables.items():
            key = keys_by_table.get((db, t))
            if key is None:
                unselected.append(f"{db}.{t}")
                continue
            rows_now = w.extra.get("live_rows")  # counted by the commit (in parallel)
            if rows_now is None:
                rows_now = _optional(partial(live_row_count, storage, w.paths.state), "row count")
            yield dg.MaterializeResult(
                asset_key=key,
                metadata={
                    **({"dagster/row_count": dg.MetadataValue.int(rows_now)} if rows_now is not None else {}),
                    "dagster/uri": dg.MetadataValue.path(w.paths.state),
                    "rows_by_op": dg.MetadataValue.json(w.rows_by_op),
                    "rows": dg.MetadataValue.int(w.rows),
                    **lag,
                    **position_metadata("window_start", start),
                    **position_metadata("window_end", reached),
                    **incremental_progress_metadata(
                        f"{db}.{t}",
                        result.incremental_state,
                        result.chunks,
                        estimates.get(f"{db}.{t}"),
                        self.incremental_snapshot_chunk_size,
                    ),
                    "incremental_chunks": dg.MetadataValue.json(
                        [c for c in result.chunks if c["table"] == f"{db}.{t}"]
                    ),
                    "changelog_uri": dg.MetadataValue.path(w.paths.changelog),
                    "state_uri": dg.MetadataValue.path(w.paths.state),
                    **state_tail_metadata(w),
                    "changelog_delta_version": dg.MetadataValue.int(w.changelog.table_version),
                    "committed": dg.MetadataValue.bool(w.changelog.committed),
                },
            )
        if unselected:
            context.log.warning(
                f"{', '.join(sorted(unselected))} changed but not selected in this run (no asset in this "
                "code location, or the sensor's look-ahead missed it); the data was written, the asset "
                "materializes with its next change or snapshot"
            )


def _logged_check_keys(context: dg.AssetExecutionContext) -> list[dg.AssetCheckKey]:
    """The table checks a window run with ``TABLE_CHECKS_TAG=logged`` evaluates and logs: those
    of every table asset it materializes (selected), that the run does not plan itself."""
    selected = set(context.selected_asset_keys)
    planned = set(context.selected_asset_check_keys)
    # every check the op defines (the run's subset ``check_keys`` holds only the selected ones)
    specs = getattr(context.assets_def, "node_check_specs_by_output_name", None)
    defined = [s.key for s in specs.values()] if specs else list(context.assets_def.check_keys)
    return [
        ck for ck in defined if ck.asset_key in selected and ck.name in TABLE_CHECKS and ck not in planned
    ]


def _report_checks(
    context: dg.AssetExecutionContext, results: Iterable[dg.AssetCheckResult], logged: set[dg.AssetCheckKey]
) -> Iterator[dg.AssetCheckResult]:
    """Yield ``results`` of the run's planned checks; log those of ``logged`` checks as
    ``AssetCheckEvaluation`` events (what Dagster stores for a planned check's result, pointing
    at the table's materialization the same way: the latest, read once for all tables)."""
    targets: dict[dg.AssetKey, Any] | None = None
    for r in results:
        key = dg.AssetCheckKey(r.asset_key, r.check_name or "") if r.asset_key is not None else None
        if key is None or key not in logged:
            yield r
            continue
        if targets is None:
            targets = _materialization_targets(context, {ck.asset_key for ck in logged})
        context.log_event(
            dg.AssetCheckEvaluation(
                asset_key=key.asset_key,
                check_name=key.name,
                passed=r.passed,
                metadata=r.metadata,
                severity=r.severity,
                description=r.description,
                target_materialization_data=targets.get(key.asset_key),
            )
        )


def _materialization_targets(
    context: dg.AssetExecutionContext, keys: set[dg.AssetKey]
) -> dict[dg.AssetKey, Any]:
    """Per asset of ``keys``, its latest materialization as a check evaluation's target (one
    instance query for all of them); assets never materialized are left out."""
    from dagster._core.definitions.asset_checks.asset_check_evaluation import (
        AssetCheckEvaluationTargetMaterializationData as Target,
    )

    out: dict[dg.AssetKey, Any] = {}
    for rec in context.instance.get_asset_records(list(keys)):
        last = rec.asset_entry.last_materialization_record
        if last is not None:
            out[rec.asset_entry.asset_key] = Target(
                storage_id=last.storage_id, run_id=last.run_id, timestamp=last.timestamp
            )
    return out


def _one(check: Callable[..., dg.AssetCheckResult], *args: Any) -> list[dg.AssetCheckResult]:
    """``[check(*args)]``: a single check as the result list :meth:`MySqlCdcResource.run_checks` isolates."""
    return [check(*args)]


def _window_tags(tags: Any) -> tuple[BinlogPosition, BinlogPosition]:
    """``(start, end)`` of the binlog window a stream run's tags name.

    Raises:
        ConfigurationError: the tags do not name a valid window.
    """
    try:
        start = position_from_tag(tags, WINDOW_START_TAG)
        end = position_from_tag(tags, WINDOW_END_TAG)
    except (KeyError, ValueError) as e:
        raise ConfigurationError(
            f"Streaming run without a valid binlog window in its tags ({e}); stream runs are "
            "requested by the binlog sensor (build_mysql_cdc_sensor)."
        ) from None
    return start, end


def _stopped_tag(tags: Any) -> dict[str, dict]:
    """The stopped tables a stream run's tags carry (:data:`STOPPED_TAG`; ``{}``: none).

    Raises:
        ConfigurationError: the tag is not valid.
    """
    raw = tags.get(STOPPED_TAG)
    if not raw:
        return {}
    try:
        out = json.loads(raw)
        for v in out.values():
            BinlogPosition.from_dict(v["since"])
        return out
    except (ValueError, KeyError, TypeError, AttributeError) as e:
        raise ConfigurationError(f"Run tag {STOPPED_TAG} is not valid ({e}): {raw[:200]!r}") from None


def _incremental_tag(tags: Any) -> IncrementalState | None:
    """The incremental snapshot state a stream run's tags carry (``None``: none).

    Raises:
        ConfigurationError: the tag is not a valid state.
    """
    try:
        return (
            IncrementalState.from_dict(json.loads(tags[INCREMENTAL_TAG]))
            if tags.get(INCREMENTAL_TAG)
            else None
        )
    except (ValueError, KeyError, TypeError) as e:
        raise ConfigurationError(
            f"Run tag {INCREMENTAL_TAG} is not a valid incremental snapshot state ({e})"
        ) from None


def _stream_metadata(
    result: WindowResult,
    start: BinlogPosition,
    reached: BinlogPosition,
    lag: dict[str, Any],
    follow_windows: int,
    spark_seconds: float,
) -> dict[str, Any]:
    """The binlog asset's metadata of a stream run (``kind=stream``)."""
    return {
        "kind": "stream",
        **position_metadata("window_start", start),
        **position_metadata("window_end", reached),
        "events_read": dg.MetadataValue.int(result.events_read),
        "transactions": dg.MetadataValue.int(result.transactions),
        "rows": dg.MetadataValue.int(result.rows),
        "ddl_statements": dg.MetadataValue.int(result.ddl_statements),
        "tables_changed": dg.MetadataValue.json(
            {f"{d}.{t}": w.rows_by_op for (d, t), w in result.tables.items()}
        ),
        **lag,
        "lag_ms": dg.MetadataValue.int(result.lag_ms or 0),
        "seconds": dg.MetadataValue.float(round(result.seconds, 3)),
        **(
            {
                "incremental_snapshot": dg.MetadataValue.json(
                    IncrementalState.from_dict(result.incremental_state).progress()  # type: ignore[union-attr]
                )
            }
            if result.incremental_state
            else {}
        ),
        "incremental_state": dg.MetadataValue.json(result.incremental_state or {}),
        "incremental_chunks": dg.MetadataValue.json(result.chunks),
        "signals": dg.MetadataValue.json(result.signal_log),
        "binlog_gaps": dg.MetadataValue.json([g.to_dict() for g in result.gaps]),
        "events_skipped_count": dg.MetadataValue.int(result.events_skipped_count),
        "events_skipped": dg.MetadataValue.json(result.events_skipped),
        "follow_windows": dg.MetadataValue.int(follow_windows),
        # how each window of at least stream_parallel_min_bytes was decoded (parallel segments or
        # the single reader, with the reason): engine/parallel_catchup.py
        **({"decode": dg.MetadataValue.json(result.decode)} if result.decode else {}),
        "spark_session_seconds": dg.MetadataValue.float(round(spark_seconds, 3)),
    }


def state_tail_metadata(w: TableWriteResult) -> dict[str, Any]:
    """Merge-on-read facts of a table the run wrote (``sink/compaction.py``): the tail's URI and
    pending rows, how far behind the change log the compacted ``state`` table is (``state_as_of``:
    the newest change it holds; ``state_behind_seconds``: age of the oldest change it lacks, 0 when
    the tail is empty), and what a compaction or vacuum in this run did."""
    comp = dict(w.extra.get("compaction") or {})
    pending = comp.pop("pending", None)
    md: dict[str, Any] = {"state_tail_uri": dg.MetadataValue.path(w.paths.tail)}
    if pending is not None:
        md["state_tail_rows"] = dg.MetadataValue.int(pending.tail_rows)
        if pending.tail_oldest_ms is not None:
            behind = max(0.0, (time.time() * 1000 - pending.tail_oldest_ms) / 1000)
            md["state_behind_seconds"] = dg.MetadataValue.float(round(behind, 1))
    elif comp.get("state_as_of") is not None or not comp:
        md["state_tail_rows"] = dg.MetadataValue.int(0)
        md["state_behind_seconds"] = dg.MetadataValue.float(0.0)
    if comp.get("state_as_of"):
        md["state_as_of"] = dg.MetadataValue.text(str(comp["state_as_of"]))
    if comp:
        md["compaction"] = dg.MetadataValue.json({k: v for k, v in comp.items() if k != "state_as_of"})
    if w.extra.get("vacuum"):
        md["vacuum"] = dg.MetadataValue.json(w.extra["vacuum"])
    return md


def _optional(fn: Callable[[], Any], what: str) -> Any:
    """``fn()``, or ``None`` (logged) when it fails: optional metadata never fails a committed run."""
    try:
        return fn()
    except Exception as e:  # noqa: BLE001 - metadata is best effort once the data is committed
        log.warning("could not compute %s: %s", what, e)
        return None


def _identity_tag(tags: Any) -> ServerIdentity | None:
    """The server a stream run's window positions belong to (:data:`IDENTITY_TAG`; ``None``: the
    sensor recorded none).

    Raises:
        ConfigurationError: the tag is not a server identity.
    """
    raw = tags.get(IDENTITY_TAG)
    if not raw:
        return None
    try:
        return ServerIdentity.from_dict(json.loads(raw))
    except ValueError as e:
        raise ConfigurationError(f"Run tag {IDENTITY_TAG} is not a server identity ({e})") from None


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
        "dagster/uri": dg.MetadataValue.path(w.paths.state),
        "changelog_uri": dg.MetadataValue.path(w.paths.changelog),
        "state_uri": dg.MetadataValue.path(w.paths.state),
        "changelog_delta_version": dg.MetadataValue.int(w.changelog.table_version),
        "state_delta_version": dg.MetadataValue.int(w.state.table_version),
        "committed": dg.MetadataValue.bool(w.state.committed),
        **state_tail_metadata(w),
        "dagster/column_schema": dg.TableSchema(
            columns=[dg.TableColumn(name=c.name, type=c.column_type) for c in r.schema.columns]
        ),
        # split reads: the table's splits and the Spark tasks that read them (0: read by the run)
        **(
            {
                "splits": dg.MetadataValue.int(w.extra["splits"]),
                "split_tasks": dg.MetadataValue.int(w.extra["tasks"]),
            }
            if "splits" in w.extra
            else {}
        ),
        # rows left out: a value could not be converted (event_processing_failure_handling_mode)
        **(
            {
                "events_skipped_count": dg.MetadataValue.int(r.rows_skipped_count),
                "events_skipped": dg.MetadataValue.json(r.rows_skipped),
            }
            if r.rows_skipped_count
            else {}
        ),
    }


def _resolve(value: Any) -> Any:
    """The value of an unresolved ``dg.EnvVar`` field (a resource used outside a run)."""
    return value.get_value() if isinstance(value, dg.EnvVar) else value


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
        "the change log a plain reader of `state` may be); 0 = only by size.",
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
        description="Vacuum each table (and clean up its Delta log) at most this often, after a "
        "window writes it; 0 = never (run VACUUM yourself).",
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
            base_uri=_resolve(self.base_uri),
            s3_endpoint_url=_resolve(self.s3_endpoint_url),
            s3_access_key_id=_resolve(self.s3_access_key_id),
            s3_secret_access_key=_resolve(self.s3_secret_access_key),
            s3_region=_resolve(self.s3_region),
            s3_conditional_put=_resolve(self.s3_conditional_put),
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

        url, may_fall_back = resolve_remote(_resolve(self.spark_remote))
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


__all__ = [
    "CdcLakeResource",
    "MySqlCdcResource",
    "DEFAULT_SPARK_CONFIG",
    "SECRET",
    "SNAPSHOT_MODES",
    "SourceConnectionError",
]
