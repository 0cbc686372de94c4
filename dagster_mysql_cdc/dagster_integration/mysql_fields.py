"""The config fields of :class:`.resources.MySqlCdcResource`, one class per concept (the sections of
docs/configuration.md): where the server is, what is captured, how snapshots, values, streaming,
signals and checks work. The resource inherits them all; each field keeps the name of the Debezium
MySQL connector property it corresponds to (``database.hostname`` -> ``host`` ...), its default and
its description (the Dagster config schema and the component's YAML schema are derived from them).
"""

from __future__ import annotations

import dagster as dg
from pydantic import Field

from ..engine.gaps import GAP_HANDLING_MODES
from .resource_fields import SECRET

#: Debezium ``snapshot.mode`` values understood here.
SNAPSHOT_MODES = ("initial", "initial_only", "no_data", "when_needed", "always", "never")


class ConnectionFields(dg.Config):
    """Where the source server is and how the capture connects to it (Debezium ``database.*``,
    ``topic.prefix``, ``connect.timeout.ms``); docs/configuration.md, "Connection"."""

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


class CapturedTablesFields(dg.Config):
    """Which databases and tables are captured (Debezium ``database.*`` / ``table.*`` include and
    exclude lists: regexes, full match); docs/configuration.md, "What is captured"."""

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


class ColumnFields(dg.Config):
    """Which columns are captured and how their values are masked, truncated or keyed (Debezium
    ``column.*`` and ``message.key.columns``, :mod:`..source.columns`); docs/configuration.md,
    "Columns: filters, masks, truncation"."""

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


class SnapshotFields(dg.Config):
    """How snapshots read the source (Debezium ``snapshot.*``, Flink CDC's split reads);
    docs/configuration.md, "Snapshots"."""

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


class ValueFields(dg.Config):
    """How source values are represented (Debezium's type mapping modes, :mod:`..source.types`);
    docs/configuration.md, "Value representation"."""

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


class StreamingFields(dg.Config):
    """How stream runs read and commit binlog windows, and which tables a window run selects;
    docs/configuration.md, "Streaming"."""

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
    stream_commit_workers: int = Field(
        default=8,
        description="Tables of a window committed at the same time at its end (Delta commits of many "
        "tables overlap; each table keeps its own transaction identity and commit order). 1 = one "
        "table after another.",
    )
    stream_parallel_min_bytes: int | None = Field(
        default=32 * 1024 * 1024,
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
    stream_materialize_unchanged: bool = Field(
        default=False,
        description="Stream runs select every table (all shown as materializing, checks on all) instead of "
        "only the tables the window changed (the sensor reads the window's table ids ahead).",
    )
    planned_checks_max_tables: int = Field(
        default=0,
        description="A run the binlog sensor requests (a window, a snapshot) that selects more tables than "
        "this does not plan its checks: the run evaluates the same checks of every table it "
        "materializes (and of the binlog asset) and logs each result as an AssetCheckEvaluation event "
        "(1 Dagster event per check instead of 3: planned, output, evaluation). 0 (the default): "
        "always logged; a number above the table count: always planned (the run's page then lists "
        "the checks as planned while it runs). Runs started from the UI plan what they select.",
    )
    stream_lookahead_max_bytes: int = Field(
        default=16 * 1024 * 1024,
        description="Largest window (binlog bytes) the sensor reads ahead to select the changed tables; "
        "larger windows select every table.",
    )


class SignalFields(dg.Config):
    """The signal table and the incremental snapshots it drives (Debezium ``signal.*`` and
    ``incremental.snapshot.*``), and the key ranges of the ``pk_ranges`` assets;
    docs/configuration.md, "Signals and incremental snapshots"."""

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
    incremental_snapshot_read_only: bool = Field(
        default=False,
        description="Read-only incremental snapshots (read.only): binlog positions/GTID sets around each chunk SELECT are the watermarks; nothing is written to the source.",
    )
    pk_range_rows: int = Field(
        default=100_000,
        description="Rows per primary-key-range partition of the pk_ranges assets (recomputed after each snapshot; 0 = off).",
    )
    create_missing_signal_table: bool = Field(
        default=False,
        description="Create the signal table (signal_data_collection) when a range backfill or repair "
        "needs it and it is missing (needs CREATE on its database); otherwise the error shows the SQL.",
    )


class CheckFields(dg.Config):
    """How the reconciliation asset checks read the source (:mod:`.checks`); docs/configuration.md,
    "Asset checks"."""

    checksum_sample_chunks: int = Field(
        default=0, description="Checksum check: 0 = whole table, N = N evenly spread primary-key chunks."
    )
    stream_check_max_keys: int = Field(
        default=10_000,
        description="Stream runs: checksum_matches_source compares at most this many keys the window changed, per table.",
    )
    check_chunk_rows: int = Field(
        default=10_000, description="Rows per source read of the reconciliation checks."
    )
    retention_margin_files: int = Field(
        default=1,
        description="binlog_retention check warns when the committed file is among this many oldest files.",
    )
