"""Dagster resources: the MySQL/MariaDB source and the lake (Spark + object storage).

:class:`MySqlCdcResource` is a thin Dagster facade: its config fields (named after the Debezium
MySQL connector's properties), the option objects derived from them, and short methods a run calls
(:meth:`~MySqlCdcResource.sync`, :meth:`~MySqlCdcResource.snapshot`,
:meth:`~MySqlCdcResource.stream`, :meth:`~MySqlCdcResource.run_checks` ...) that decode the run's
tags, hand the work to the engine and report its outcome. What a run does lives in ``engine/``
(:mod:`..engine.stream_run`, :mod:`..engine.snapshot_run`); how Dagster sees it beside this module:
:mod:`.run_tags` (the run tags decoded), :mod:`.run_report` (the materializations' metadata),
:mod:`.check_run` (the asset checks), :mod:`.lake_resource` (:class:`CdcLakeResource`, re-exported
here).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Generator, Iterable, Iterator, Sequence
from contextlib import ExitStack
from functools import partial
from typing import TYPE_CHECKING, Any

import dagster as dg
import pymysql

from ..engine.gaps import check_gap_handling
from ..errors import ConfigurationError, SourceConnectionError
from ..events import BinlogPosition
from ..sink.storage import StorageSettings
from ..source.catalog import list_tables
from ..source.columns import ColumnPolicy
from ..source.connection import ConnectionSettings, ServerInfo, connect, read_server_info
from ..source.filters import TableFilter
from ..source.schema import TableSchema
from ..source.select_overrides import parse_overrides
from ..source.signals import create_signal_table, signal_table_sql
from ..source.snapshot import SnapshotOptions
from ..source.types import TypeOptions
from . import check_run
from .checks import CheckOptions
from .idle_checks import IdleChecks, idle_checks_for
from .lake_owner import claim_for_run
from .lake_resource import DEFAULT_SPARK_CONFIG, CdcLakeResource
from .mysql_fields import (
    SNAPSHOT_MODES,
    CapturedTablesFields,
    CheckFields,
    ColumnFields,
    ConnectionFields,
    SignalFields,
    SnapshotFields,
    StreamingFields,
    ValueFields,
)
from .partitions import refresh_pk_range_partitions
from .protocol import (
    BINLOG_METADATA_KEY,
    MODE_TAG,
    REQUEST_TAG,
    SNAPSHOT_MODE_TAG,
    STANDBY_TAG,
    TABLE_CHECKS_TAG,
    TABLE_METADATA_KEY,
)
from .resource_fields import SECRET, resolve
from .run_report import (
    logged_materialization,
    outputs_read_in_run,
    range_resnapshot_result,
    snapshot_binlog_metadata,
    snapshot_result,
    state_behind_metadata,
    state_due_report,
    stream_metadata,
    table_results,
    window_lag_metadata,
)
from .run_report import state_tail_metadata as state_tail_metadata  # re-exported (was defined here)
from .run_tags import (
    compact_tag,
    identity_tag,
    incremental_tag,
    record_caught_up,
    record_progress,
    snapshot_epoch,
    stopped_tag,
    window_tags,
)
from .selection import follow_planner
from .translator import table_asset_key, table_of_spec
from .window_report import WindowReporter, standby_checks, table_keys, window_report

if TYPE_CHECKING:
    from ..engine.incremental_source import IncrementalOptions
    from ..engine.snapshot_run import SnapshotReads
    from ..engine.stream import StreamOptions
    from ..engine.stream_run import StreamRunOptions

# The data path (stream, pipeline, sink: sqlglot, python-mysql-replication, deltalake, pyspark) is
# imported by the methods that run it, so loading a code location (webserver, daemon, sensor ticks)
# does not pay for it; see tests/test_deployment.py.

log = logging.getLogger(__name__)


# The config fields come from one class per concept (:mod:`.mysql_fields`), listed last first:
# pydantic collects the fields of the last base first, so the schema reads connection first.
class MySqlCdcResource(
    CheckFields,
    SignalFields,
    StreamingFields,
    ValueFields,
    SnapshotFields,
    ColumnFields,
    CapturedTablesFields,
    ConnectionFields,
    dg.ConfigurableResource,
):
    """The captured MySQL/MariaDB server and how it is captured.

    Field names follow the Debezium MySQL connector property they correspond to
    (``database.hostname`` → ``host``, ``topic.prefix`` → ``server_name``, ``snapshot.mode`` →
    ``snapshot_mode`` ...), grouped by concept in :mod:`.mysql_fields`. Pass the password with
    ``dg.EnvVar("CDC_MYSQL_PASSWORD")`` so it never appears in run config or the UI.
    """

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
        return read_server_info(settings)

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
            hash_salt=resolve(self.column_mask_hash_salt) or "",
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

        Under Dagster the server is read once per load of the code location: a run worker gets
        the tables its code server read (:mod:`.discovered`), so a table renamed or dropped since
        does not make the sensor's runs fail; a reload of the code location reads them again.

        Raises:
            SourceConnectionError: the server is unreachable / credentials are wrong.
            UnknownTableError: an explicitly named table does not exist or is filtered out.
            ConfigurationError: an explicitly named table is the signal table.
        """
        from .discovered import discovered_once, read_tables

        identity = {
            "server_name": self.server_name,
            "address": f"{self.host}:{self.port}",
            "filters": self.table_filter(),
            "signal": self.signal_data_collection,
            "columns": [self.column_include_list, self.column_exclude_list],
            "tables": list(tables or []),
        }
        return discovered_once(identity, lambda: read_tables(self, tables))

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
        from ..engine.incremental_source import IncrementalOptions

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
        """Create the signal table unless it exists; returns its name. Creating it needs CREATE on
        its database; a table an administrator created needs nothing more than the documented
        capture grants (it used to run ``CREATE TABLE IF NOT EXISTS`` either way, which a
        least-privilege user may not).

        Raises:
            ConfigurationError: no signal table is configured, or it is missing and could not be
                created (the message has the SQL to create and grant it).
        """
        me = self.process_config_and_initialize()
        return me.ensure_signal_table("create_signal_table() was called", create=True)

    def ensure_signal_table(self, purpose: str, create: bool | None = None) -> str:
        """The signal table, checked to exist; created when ``create_missing_signal_table`` allows.

        Args:
            purpose: why it is needed (goes into the error message).
            create: create it when missing (default: ``create_missing_signal_table``).

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
            if self.create_missing_signal_table if create is None else create:
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
        Raises:
            LakeOwnerError: the lake prefix ``<base_uri>/<server_name>/`` belongs to another
                Dagster instance (:mod:`..sink.owner`); nothing was written.
        """
        from ..sink.delta import handle_cache
        from .liveness import worker_heartbeat

        claim_for_run(context, lake.storage_settings(), self.server_name)  # before any write
        with ExitStack() as stack:
            if REQUEST_TAG in context.run.tags:  # a run the sensor waits for: it watches its worker
                stack.enter_context(worker_heartbeat(context.instance, context.run.run_id))
            stack.enter_context(handle_cache())  # the run's Delta handles are loaded once (see handle_cache)
            yield from self._sync(context, lake)

    def _sync(
        self, context: dg.AssetExecutionContext, lake: CdcLakeResource
    ) -> Iterator[dg.MaterializeResult | dg.AssetCheckResult]:
        tags = context.run.tags
        committed: BinlogPosition | None = None
        policy = self.column_policy()
        if policy:  # what is left out, masked or re-keyed (never the salt)
            context.log.info(f"Column policy: {json.dumps(policy.describe())}")
        logged = check_run.logged_check_keys(context) if tags.get(TABLE_CHECKS_TAG) == "logged" else []
        check_keys = [*context.selected_asset_check_keys, *logged]
        background: list[check_run.BackgroundChecks] = []
        if context.selected_asset_keys:
            if tags.get(MODE_TAG) == "stream":
                idle = idle_checks_for(context, logged, check_keys, partial(self._window_checks, lake=lake))

                def committed_window(reached: BinlogPosition, report: dict[str, Any]) -> None:
                    # the window is committed: its checks run while its materializations are
                    # reported (see check_run.BackgroundChecks)
                    if tags.get(STANDBY_TAG) == "true":
                        # a standby run selected no table: the checks of those it changed, logged
                        more = standby_checks(context, report.get("changed") or [], check_keys)
                        logged.extend(more)
                        check_keys.extend(more)
                    # those logged while the binlog was idle, for the latest materializations
                    idle.finish()
                    check_keys[:] = [k for k in check_keys if k not in idle.current]
                    if check_keys:
                        background.append(
                            check_run.BackgroundChecks(
                                partial(
                                    self._window_checks,
                                    lake=lake,
                                    committed=reached,
                                    report=report,
                                    keys=check_keys,
                                ),
                                context,
                            )
                        )

                committed = yield from self.stream(context, lake, on_committed=committed_window, idle=idle)
            else:
                committed = yield from self.snapshot(context, lake)
        if background:
            yield from check_run.report_checks(context, background[0].results(), set(logged))
        elif check_keys:
            from ..sink.delta import handle_cache

            # the checks write nothing to the lake: each table is refreshed once, after the
            # run's commits, then read through that handle (see handle_cache)
            with handle_cache(sole_writer=True):
                results = self.run_checks(context, lake, committed, check_keys=check_keys)
                yield from check_run.report_checks(context, results, set(logged))

    def _window_checks(
        self,
        context: dg.AssetExecutionContext,
        *,
        lake: CdcLakeResource,
        committed: BinlogPosition,
        report: dict[str, Any],
        keys: list[dg.AssetCheckKey],
    ) -> Iterator[dg.AssetCheckResult]:
        """The checks of a committed window (:meth:`run_checks` with what the window reported:
        the changes the binlog did not carry, the tables stopped after it, the live rows and tail
        files of the tables it committed, :meth:`.check_run.CheckRequest.after_window`)."""
        request = check_run.CheckRequest.after_window(committed, report, keys)
        yield from check_run.run_checks(self.check_settings(), context, lake.storage_settings(), request)

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
        incremental_state: dict | None = None,
        chunks: list[dict] | None = None,
        snapshotted: Iterable[str] | None = None,
    ) -> Iterator[dg.AssetCheckResult]:
        """Run the selected reconciliation checks (:mod:`.checks`) at ``committed``
        (:func:`.check_run.run_checks`; :class:`.check_run.CheckRequest` documents the
        arguments). A generator: nothing is read before the first result is asked for.

        ``committed`` is the position this run just committed (``None``: the last committed
        position reported by the binlog asset, as for a checks-only run); ``check_keys``: the
        checks to run (default: the run's selected checks).
        """
        request = check_run.CheckRequest(
            committed,
            check_keys=check_keys,
            gaps=gaps,
            stopped=stopped,
            live_rows=live_rows,
            tail_files=tail_files,
            incremental_state=incremental_state,
            chunks=chunks,
            snapshotted=snapshotted,
        )
        yield from check_run.run_checks(self.check_settings(), context, lake.storage_settings(), request)

    def check_settings(self) -> check_run.CheckSettings:
        """What the run's checks read of this configuration (:class:`.check_run.CheckSettings`).

        Raises:
            ConfigurationError: as :meth:`type_options`.
        """
        return check_run.CheckSettings(
            connection=self.connection_settings(),
            server_name=self.server_name,
            server_id=self.server_id,
            type_options=self.type_options(),
            options=CheckOptions(
                checksum_sample_chunks=self.checksum_sample_chunks,
                chunk_rows=self.check_chunk_rows,
                retention_margin_files=self.retention_margin_files,
            ),
            snapshot_mode=self.snapshot_mode,
            gap_handling=self.binlog_gap_handling,
            signal_table=self.signal_table(),
            read_only=self.incremental_snapshot_read_only,
            stream_check_max_keys=self.stream_check_max_keys,
            commit_workers=self.stream_commit_workers,
        )

    def refresh_pk_ranges(
        self, instance: dg.DagsterInstance, storage: StorageSettings, tables: Sequence[tuple[str, str]]
    ) -> dict[str, int]:
        """Recompute the key ranges of ``tables`` (``pk_range_rows`` rows each), store them in the
        lake (:func:`..engine.snapshot_run.refresh_key_ranges`) and register the partition keys of
        their ``pk_ranges`` assets (:func:`.partitions.refresh_pk_range_partitions`). Keyless
        tables are skipped.

        Returns:
            ``{"db.table": number of ranges}``
        """
        return refresh_pk_range_partitions(self, instance, storage, tables)

    def resnapshot_range(
        self, context: dg.AssetExecutionContext, lake: CdcLakeResource, database: str, table: str
    ) -> dg.MaterializeResult:
        """Re-snapshot the key range of ``context.partition_key``
        (:func:`dagster_mysql_cdc.engine.snapshot_run.resnapshot_key_range`); the table's page gets
        the backfill's progress as an observation.

        Raises:
            ConfigurationError: unknown partition (snapshot the table first), no signal table.
            LakeOwnerError: the lake prefix belongs to another Dagster instance.
        """
        from ..engine.snapshot_run import find_key_range, resnapshot_key_range

        storage = lake.storage_settings()
        claim_for_run(context, storage, self.server_name)  # one deployment per lake prefix
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
            epoch=snapshot_epoch(context),
            range_rows=self.pk_range_rows or 100_000,
            log=context.log,
        )
        table_key = table_asset_key(self.server_name, database, table)
        return range_resnapshot_result(
            context, done, key=key, rng=rng, ranges_total=ranges_total, table_key=table_key
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
        written: dict[tuple[str, str], dict] = {}
        outputs = outputs_read_in_run(context)
        for r in snapshot_tables(
            self.connection_settings(),
            tables,
            lambda: lake.get_writer(self.server_name),
            reads=self.snapshot_reads(),
            options=opts,
            type_options=self.type_options(),
            server_name=self.server_name,
            history=history,
            epoch=snapshot_epoch(context),
            need_streaming=mode != "initial_only",
            log=context.log,
        ):
            last = r
            written[(r.schema.database, r.schema.table)] = r.write.extra.get("compaction") or {}
            key = keys_by_table.get((r.schema.database, r.schema.table))
            if key is None:
                continue
            done = snapshot_result(key, r)
            if outputs:
                yield done
            else:  # nothing in the run reads the output: the materialization alone (no STEP_OUTPUT)
                context.log_event(logged_materialization(done))
        if last is not None and self.pk_range_rows > 0:
            self.refresh_pk_ranges(context.instance, storage, [k for k in tables])
        if binlog_key is not None and last is not None:
            yield dg.MaterializeResult(
                asset_key=binlog_key,
                metadata={
                    **snapshot_binlog_metadata(last.position, tables, history.uri),
                    "state_due": dg.MetadataValue.json(
                        state_due_report(written, lake.state_compact_max_age_seconds)
                    ),
                },
            )
        return last.position if last is not None else None

    def stream(
        self,
        context: dg.AssetExecutionContext,
        lake: CdcLakeResource,
        report: dict | None = None,
        on_committed: Callable[[BinlogPosition, dict[str, Any]], None] | None = None,
        idle: IdleChecks | None = None,
    ) -> Generator[dg.MaterializeResult, None, BinlogPosition | None]:
        """Process the binlog window named by the run's tags (requested by the binlog sensor):
        the tags are decoded, the run is coordinated by
        :class:`dagster_mysql_cdc.engine.stream_run.StreamRun`, and its outcome is reported as the
        materializations of the changed (and blocking-snapshotted) tables and of the binlog asset.

        Changes the binlog does not carry (statement DML, foreign-key cascades) are logged as
        WARNING and listed in the binlog asset's ``binlog_gaps`` metadata. ``report`` gets what
        the checks need (:func:`.window_report.window_report`: gaps, stopped tables, live rows,
        tail files, incremental state, chunks, tables snapshotted again). ``on_committed(reached,
        report)`` is called once the window is committed, before its materializations are
        yielded (the run's checks start there, :class:`.check_run.BackgroundChecks`); ``idle``
        logs table checks while the binlog is idle (:class:`.idle_checks.IdleChecks`).

        Returns (as the generator's value): the position the window reached.

        Raises:
            ConfigurationError: the run tags do not name a valid window.
            ServerChangedError: the window's positions belong to another server.
        """
        from ..engine.stream_run import StreamRun, StreamRunRequest
        from ..sink.schema_history import SchemaHistory

        tags = context.run.tags
        start, end = window_tags(tags)
        keys_by_table, binlog_key = self._selection(context)
        every_table = table_keys(context)
        standby = tags.get(STANDBY_TAG) == "true"
        settings = self.connection_settings()
        info = self._server_info(settings)
        request = StreamRunRequest(
            start,
            end,
            identity=identity_tag(tags),
            incremental=incremental_tag(tags),
            stopped=stopped_tag(tags),
            selected=frozenset(every_table if standby else keys_by_table),
            standby=standby,
        )
        storage, writer = lake.storage_settings(), lake.get_writer(self.server_name)
        report_window = WindowReporter(
            context, settings, info, storage, every_table, self.incremental_snapshot_chunk_size, (start, end)
        )
        outcome = StreamRun(
            settings,
            info,
            writer=writer,
            history=SchemaHistory(storage, self.server_name),
            options=self.stream_run_options(),
            log=context.log,
            planner=follow_planner(self, settings, info),
            on_progress=partial(record_progress, context),
            on_window=report_window if idle is None else idle.after(report_window),
            on_table=report_window.table_committed,
            on_idle=idle,
            on_caught_up=partial(record_caught_up, context),
        ).run(request)
        result, reached = outcome.result, outcome.reached
        report = window_report(outcome, report)
        if on_committed is not None:
            on_committed(reached, report)
        state_due = self._compact_stale(context, writer, result.tables)
        for r in outcome.snapshots:  # a blocking snapshot: the tables the window did not change
            key = keys_by_table.get((r.schema.database, r.schema.table))
            if key is not None and (r.schema.database, r.schema.table) not in result.tables:
                yield snapshot_result(key, r)
        lag = window_lag_metadata(context, settings, info, reached, result.last_event_ts_ms)
        # what the windows did not report: the tables a blocking snapshot replaced after them
        again = {(r.schema.database, r.schema.table) for r in outcome.snapshots}
        yield from table_results(
            context,
            result,
            settings,
            storage,
            every_table,
            start=start,
            reached=reached,
            lag=lag,
            chunk_size=self.incremental_snapshot_chunk_size,
            only={t for t in result.tables if t not in report_window.reported or t in again},
        )
        if binlog_key is not None:
            yield dg.MaterializeResult(
                asset_key=binlog_key,
                metadata={
                    **stream_metadata(
                        result, start, reached, lag, outcome.follow_windows, writer.spark_seconds
                    ),
                    "stopped_tables": dg.MetadataValue.json(outcome.stopped),
                    "state_due": dg.MetadataValue.json(state_due),
                },
            )
        return reached

    def _compact_stale(
        self, context: dg.AssetExecutionContext, writer: Any, written: dict[tuple[str, str], Any]
    ) -> dict[str, float | None]:
        """After a window: compact the ``state`` of the stale tables the sensor named in the run's
        tags (:data:`.protocol.COMPACT_TAG`: their oldest uncompacted change is older than
        ``state_compact_max_age_seconds``) that the window did not write, at most
        :data:`.protocol.COMPACT_PER_RUN`; each gets an ``AssetObservation`` with how far
        behind its ``state`` is (``state_behind_seconds``, 0 once compacted). A compaction that
        fails is logged and reported, never raised (the window is committed).

        Returns:
            the binlog asset's ``state_due`` metadata (:func:`.run_report.state_due_report`) of
            the tables the window wrote and those compacted here.
        """
        from .protocol import COMPACT_PER_RUN

        try:
            stale = compact_tag(context.run.tags)
        except ConfigurationError as e:  # the window is committed: a bad tag only skips this upkeep
            context.log.warning(str(e))
            stale = []
        bound = float(writer.compaction.max_tail_age_seconds)
        todo = [t for t in dict.fromkeys(stale) if t not in written][:COMPACT_PER_RUN]
        done: dict[tuple[str, str], dict] = {}
        if todo and bound > 0:
            keys = {
                table_of_spec(spec): spec.key
                for spec in context.assets_def.specs
                if TABLE_METADATA_KEY in (spec.metadata or {})
            }
            context.log.info(
                f"compacting the state of {len(todo)} table(s) no window wrote for "
                f"{bound:g} s or more: {', '.join(f'{d}.{t}' for d, t in todo)}"
            )
            done = writer.compact_stale(todo)
            for (db, table), comp in done.items():
                key = keys.get((db, table))
                if key is not None:
                    context.log_event(
                        dg.AssetObservation(
                            asset_key=key,
                            metadata=state_behind_metadata(comp, writer.paths(db, table).tail),
                        )
                    )
        else:
            done = {t: {} for t in todo}  # the bound is off: nothing to keep due
        compactions = {k: w.extra.get("compaction") or {} for k, w in written.items()}
        return state_due_report({**compactions, **done}, bound)


__all__ = [
    "CdcLakeResource",
    "MySqlCdcResource",
    "DEFAULT_SPARK_CONFIG",
    "SECRET",
    "SNAPSHOT_MODES",
    "SourceConnectionError",
]
