"""``MySqlCdcComponent``: a MySQL/MariaDB CDC connector declared in a ``defs.yaml``.

The YAML counterpart of ``definitions.py`` + ``assets/inventory.py``: one component is one Debezium
connector (one source server). It builds the :class:`MySqlCdcResource` and
:class:`CdcLakeResource`, discovers the captured tables, creates the ``@mysql_cdc_assets``
multi-asset (one asset per table plus the server's binlog asset) and the binlog sensor::

    type: dagster_mysql_cdc.MySqlCdcComponent
    attributes:
      connection:
        host: 127.0.0.1
        port: 3307
        user: cdc
        password: "{{ env.CDC_MYSQL_PASSWORD }}"
        server_name: dbserver1
      database_include_list: [inventory]
      lake:
        base_uri: s3://lake/cdc
        s3_endpoint_url: http://127.0.0.1:8333
        s3_access_key_id: "{{ env.AWS_ACCESS_KEY_ID }}"
        s3_secret_access_key: "{{ env.AWS_SECRET_ACCESS_KEY }}"
      sensor:
        minimum_interval_seconds: 15
      translation:
        group_name: "{{ database }}_cdc"

Secrets: a secret field (``connection.password``, ``lake.s3_access_key_id``,
``lake.s3_secret_access_key``) whose whole value is ``{{ env.NAME }}`` (or ``{{ env('NAME') }}``)
becomes ``dg.EnvVar("NAME")`` instead of the rendered value, so the secret is read from the
environment when a resource is initialized and never appears in the definitions snapshot or the UI.

Scaffold one with ``dg scaffold defs dagster_mysql_cdc.MySqlCdcComponent <path>``; list it with
``dg list components --package dagster_mysql_cdc``.

No ``from __future__ import annotations`` here: the Resolvable framework reads the dataclass field
types at runtime to derive the YAML schema.
"""

import inspect
import logging
import re
import typing
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal

import dagster as dg
from dagster.components import (
    Component,
    ComponentLoadContext,
    ComponentTypeSpec,
    ResolutionContext,
    Resolvable,
    Resolver,
    Scaffolder,
    ScaffoldRequest,
    scaffold_with,
)
from dagster.components.component_scaffolding import scaffold_component
from dagster.components.utils.translation import TranslationFn, TranslationFnResolver
from pydantic import BaseModel

from ..errors import ConfigurationError, SourceConnectionError
from ..source.schema import TableSchema
from ..source.snapshot import LOCKING_MODES
from ..source.tls import SslMode
from ..source.types import (
    BigintUnsignedHandlingMode,
    BinaryHandlingMode,
    DecimalHandlingMode,
    TimePrecisionMode,
)
from .decorator import mysql_cdc_assets
from .resources import DEFAULT_SPARK_CONFIG, SNAPSHOT_MODES, CdcLakeResource, MySqlCdcResource
from .sensor import build_mysql_cdc_sensor
from .translator import DagsterMySqlCdcTranslator, MySqlCdcTableProps

log = logging.getLogger(__name__)

SnapshotMode = Literal[SNAPSHOT_MODES]  # type: ignore[valid-type]
SnapshotLockingMode = Literal[LOCKING_MODES]  # type: ignore[valid-type]
BinlogGapHandling = Literal["repair", "warn", "fail"]  # gaps.GAP_HANDLING_MODES
ColumnMaskHashVersion = Literal["v1", "v2"]  # source.columns.HASH_VERSIONS
FailureHandlingMode = Literal["fail", "warn", "skip"]  # stream.FAILURE_HANDLING_MODES


def _resource_default(name: str) -> Any:
    """The default of a ``MySqlCdcResource`` field (one source of truth for the defaults)."""
    return MySqlCdcResource.model_fields[name].default


def _lake_default(name: str) -> Any:
    return CdcLakeResource.model_fields[name].default


# -- secrets ------------------------------------------------------------------------------------
_ENV_TEMPLATE = re.compile(
    r"""^\s*\{\{\s*env(?:\.(?P<attr>[A-Za-z_][A-Za-z0-9_]*)|\(\s*(?P<q>['"])(?P<call>[A-Za-z_][A-Za-z0-9_]*)(?P=q)\s*\))\s*\}\}\s*$"""
)


def env_var_of_template(value: Any) -> str | None:
    """``NAME`` when ``value`` is exactly ``{{ env.NAME }}`` or ``{{ env('NAME') }}``, else ``None``."""
    if not isinstance(value, str):
        return None
    m = _ENV_TEMPLATE.match(value)
    if not m:
        return None
    return m.group("attr") or m.group("call")


def _resolve_secret(context: ResolutionContext, value: Any) -> str | None:
    """``{{ env.NAME }}`` -> ``dg.EnvVar("NAME")`` (resolved lazily, hidden in the UI); any other
    template is rendered now; literal values pass through (as strings)."""
    name = env_var_of_template(value)
    if name is not None:
        return dg.EnvVar(name)
    resolved = context.resolve_value(value)
    return None if resolved is None else str(resolved)


def _resolve_str(context: ResolutionContext, value: Any) -> str | None:
    # Jinja native rendering turns "12345" into an int: keep string settings strings.
    resolved = context.resolve_value(value)
    return None if resolved is None else str(resolved)


SecretStr = Annotated[
    str,
    Resolver(
        _resolve_secret,
        model_field_type=str,
        inject_before_resolve=False,
        description="Secret: write `{{ env.NAME }}` to read it from the environment at run time.",
    ),
]
OptionalSecretStr = Annotated[
    str | None,
    Resolver(
        _resolve_secret,
        model_field_type=str | None,
        inject_before_resolve=False,
        description="Secret: write `{{ env.NAME }}` to read it from the environment at run time.",
    ),
]


def _str_field(description: str, examples: list[Any] | None = None, *, optional: bool = False) -> Resolver:
    return Resolver(
        _resolve_str,
        model_field_type=str | None if optional else str,
        inject_before_resolve=False,
        description=description,
        examples=examples,
    )


def _doc(description: str, examples: list[Any] | None = None) -> Resolver:
    return Resolver.default(description=description, examples=examples)


# -- attribute sections ---------------------------------------------------------------------------
@dataclass
class MySqlConnectionArgs(Resolvable):
    """The captured server (Debezium ``database.*`` properties and ``topic.prefix``)."""

    host: Annotated[str, _str_field("Server host (database.hostname).", ["127.0.0.1"])] = _resource_default(
        "host"
    )
    port: Annotated[int, _doc("Server port (database.port).", [3306])] = _resource_default("port")
    user: Annotated[str, _str_field("Capture user (database.user).", ["cdc"])] = _resource_default("user")
    password: SecretStr = ""
    server_name: Annotated[
        str,
        _str_field(
            "Logical server name (topic.prefix): first segment of asset keys and lake paths.",
            ["dbserver1"],
        ),
    ] = _resource_default("server_name")
    server_id: Annotated[
        int, _doc("Replication client id for the binlog dump (database.server.id); unique per server.")
    ] = _resource_default("server_id")
    connect_timeout: Annotated[int, _doc("Seconds to wait for a connection (connect.timeout.ms / 1000).")] = (
        _resource_default("connect_timeout")
    )
    ssl_mode: Annotated[
        SslMode,
        _doc(
            "TLS to the server (database.ssl.mode): disabled, preferred, required, verify_ca, verify_identity."
        ),
    ] = _resource_default("ssl_mode")
    ssl_ca: OptionalSecretStr = None
    ssl_cert: OptionalSecretStr = None
    ssl_key: OptionalSecretStr = None


@dataclass
class CdcLakeArgs(Resolvable):
    """Where captured tables are written (object storage + Spark)."""

    base_uri: Annotated[
        str, _str_field("Lake root: local path, file:// or s3://bucket/prefix.", ["s3://lake/cdc", ".lake"])
    ] = _lake_default("base_uri")
    s3_endpoint_url: Annotated[
        str | None, _str_field("S3 API endpoint, e.g. http://127.0.0.1:8333 (null: AWS).", optional=True)
    ] = None
    s3_access_key_id: OptionalSecretStr = None
    s3_secret_access_key: OptionalSecretStr = None
    s3_region: Annotated[str, _str_field("S3 region.")] = _lake_default("s3_region")
    s3_conditional_put: Annotated[
        str | None,
        _str_field("'etag' for atomic Delta commits via conditional PUT; null to disable.", optional=True),
    ] = _lake_default("s3_conditional_put")
    rows_per_file: Annotated[int, _doc("Maximum rows per Parquet data file.")] = _lake_default(
        "rows_per_file"
    )
    compact_min_files: Annotated[int, _doc("Compact a table once it has this many files (0 = never).")] = (
        _lake_default("compact_min_files")
    )
    sink_pipeline_depth: Annotated[
        int, _doc("Record batches queued for the sink thread while the next ones are read (0 = in turn).")
    ] = _lake_default("sink_pipeline_depth")
    spark_config: Annotated[
        dict[str, Any],
        _doc(
            "Spark properties merged over the library defaults (local[2], UTC session time zone, "
            "Arrow on ...), e.g. {spark.master: 'spark://host:7077', spark.driver.memory: 4g}.",
        ),
    ] = field(default_factory=dict)
    spark_remote: Annotated[
        str | None,
        _str_field(
            "Spark Connect URL of a long-lived server on the runs' host (e.g. sc://127.0.0.1:15002, "
            "infra/spark_connect.sh); null/empty: each run starts its own Spark from spark_config.",
            optional=True,
        ),
    ] = None
    spark_log_level: Annotated[
        str, _doc("Log level of a run's own Spark JVM (WARN lines stay out of the run log at ERROR).")
    ] = _lake_default("spark_log_level")


@dataclass
class BinlogSensorArgs(Resolvable):
    """The binlog sensor that streams changes (one run per binlog window)."""

    enabled: Annotated[bool, _doc("Build the binlog sensor.")] = True
    name: Annotated[str | None, _doc("Sensor name (default `<op name>_binlog_sensor`).")] = None
    default_status: Annotated[
        Literal["running", "stopped"], _doc("Whether the sensor runs as soon as the code location loads.")
    ] = "stopped"
    minimum_interval_seconds: Annotated[int, _doc("Seconds between ticks (the streaming latency floor).")] = (
        30
    )
    retention_margin_files: Annotated[
        int, _doc("Warn when the committed offset is in one of this many oldest binlog files.")
    ] = 1


@dataclass
class CdcOpArgs(Resolvable):
    """The multi-asset op."""

    name: Annotated[str | None, _doc("Op name (default `<server_name>_cdc`).")] = None
    tags: Annotated[dict[str, str] | None, _doc("Op tags.")] = None
    pool: Annotated[str | None, _doc("Concurrency pool, e.g. to serialise snapshots of one server.")] = None


def _table_template_vars(props: MySqlCdcTableProps) -> Mapping[str, Any]:
    return {
        "props": props,
        "database": props.database,
        "table": props.table,
        "server_name": props.server_name,
    }


def _binlog_template_vars(server_name: str) -> Mapping[str, Any]:
    return {"server_name": server_name}


class _ComponentTranslator(DagsterMySqlCdcTranslator):
    """Delegates to the component's ``get_asset_spec`` / ``get_binlog_asset_spec``."""

    def __init__(self, component: "MySqlCdcComponent"):
        self.component = component

    def get_asset_spec(self, props: MySqlCdcTableProps) -> dg.AssetSpec:
        return self.component.get_asset_spec(props)

    def get_binlog_asset_spec(self, server_name: str) -> dg.AssetSpec:
        return self.component.get_binlog_asset_spec(server_name)


# -- scaffolding ----------------------------------------------------------------------------------
class MySqlCdcScaffoldParams(BaseModel):
    """Parameters of ``dg scaffold defs dagster_mysql_cdc.MySqlCdcComponent <path>``."""

    host: str = "127.0.0.1"
    port: int = 3306
    user: str = "cdc"
    password_env_var: str = "CDC_MYSQL_PASSWORD"
    server_name: str = "dbserver1"
    server_id: int = 184054
    database: str | None = None
    lake_base_uri: str = ".lake"
    s3_endpoint_url: str | None = None


class MySqlCdcComponentScaffolder(Scaffolder[MySqlCdcScaffoldParams]):
    """Writes a starter ``defs.yaml`` (secrets as ``{{ env.X }}`` templates)."""

    @classmethod
    def get_scaffold_params(cls) -> type[MySqlCdcScaffoldParams]:
        return MySqlCdcScaffoldParams

    def scaffold(self, request: ScaffoldRequest[MySqlCdcScaffoldParams]) -> None:
        p = request.params if request.params is not None else MySqlCdcScaffoldParams()
        scaffold_component(request, starter_attributes(p))


def starter_attributes(p: MySqlCdcScaffoldParams) -> dict[str, Any]:
    """The ``attributes`` of a scaffolded ``defs.yaml``."""
    attrs: dict[str, Any] = {
        "connection": {
            "host": p.host,
            "port": p.port,
            "user": p.user,
            "password": f"{{{{ env.{p.password_env_var} }}}}",
            "server_name": p.server_name,
            "server_id": p.server_id,
        },
        "database_include_list": [p.database] if p.database else [],
        "table_exclude_list": [],
        "snapshot_mode": "initial",
        "lake": {"base_uri": p.lake_base_uri},
        "sensor": {"default_status": "stopped", "minimum_interval_seconds": 30},
    }
    if p.lake_base_uri.startswith("s3://"):
        attrs["lake"].update(
            {
                "s3_endpoint_url": p.s3_endpoint_url or "{{ env.CDC_S3_ENDPOINT }}",
                "s3_access_key_id": "{{ env.AWS_ACCESS_KEY_ID }}",
                "s3_secret_access_key": "{{ env.AWS_SECRET_ACCESS_KEY }}",
            }
        )
    return attrs


# -- the component --------------------------------------------------------------------------------
#: Fields whose values are a Literal choice (validated when the component is loaded).
_CHOICE_FIELDS = (
    "snapshot_mode",
    "snapshot_locking_mode",
    "decimal_handling_mode",
    "time_precision_mode",
    "bigint_unsigned_handling_mode",
    "binary_handling_mode",
    "column_mask_hash_version",
    "event_processing_failure_handling_mode",
)


@scaffold_with(MySqlCdcComponentScaffolder)
@dataclass
class MySqlCdcComponent(Component, Resolvable):
    """Debezium-style change data capture of a MySQL/MariaDB server into a Delta lake.

    One asset per captured table (key server_name / database / table) plus the server's binlog
    asset (key server_name / binlog), one multi-asset materializing them (a snapshot from the UI,
    binlog windows when requested by the sensor), the binlog sensor, and the `mysql` and `lake`
    resources.

    Tables are read from the server when the code location loads (column schema and comments in
    the UI). If it cannot be reached, the explicitly listed ``tables`` are used as bare names.
    """

    connection: Annotated[
        MySqlConnectionArgs, _doc("The captured server (host, port, user, password, server_name, server_id).")
    ] = field(default_factory=MySqlConnectionArgs)
    tables: Annotated[
        list[str] | None,
        _doc(
            "Explicit 'database.table' names to capture (each must exist and pass the lists below). "
            "Also the fallback when the server is unreachable at load time.",
            [["inventory.customers", "inventory.orders"]],
        ),
    ] = None
    database_include_list: Annotated[list[str], _doc("Regexes of captured databases.", [["inventory"]])] = (
        field(default_factory=list)
    )
    database_exclude_list: Annotated[list[str], _doc("Regexes of excluded databases.")] = field(
        default_factory=list
    )
    table_include_list: Annotated[list[str], _doc("Regexes of captured 'db.table' names.")] = field(
        default_factory=list
    )
    table_exclude_list: Annotated[list[str], _doc("Regexes of excluded 'db.table' names.")] = field(
        default_factory=list
    )
    column_include_list: Annotated[
        list[str], _doc("Regexes of captured 'db.table.column' names (column.include.list).")
    ] = field(default_factory=list)
    column_exclude_list: Annotated[
        list[str],
        _doc(
            "Regexes of 'db.table.column' names left out (column.exclude.list).",
            [["inventory\\.customers\\.ssn"]],
        ),
    ] = field(default_factory=list)
    column_truncate_to_chars: Annotated[
        dict[str, int],
        _doc("{'db.table.column' regex: n}: values cut to n characters (column.truncate.to.<n>.chars)."),
    ] = field(default_factory=dict)
    column_mask_with_chars: Annotated[
        dict[str, int],
        _doc("{'db.table.column' regex: n}: values replaced by n '*' (column.mask.with.<n>.chars)."),
    ] = field(default_factory=dict)
    column_mask_hash: Annotated[
        dict[str, str],
        _doc(
            "{'db.table.column' regex: algorithm}: values replaced by the salted hex digest "
            "(column.mask.hash.<algorithm>.with.salt.<salt>).",
            [{"inventory\\.customers\\.email": "SHA-256"}],
        ),
    ] = field(default_factory=dict)
    column_mask_hash_salt: OptionalSecretStr = None
    message_key_columns: Annotated[
        dict[str, list[str]],
        _doc(
            "{'db.table' regex: [columns]}: key of keyless tables or primary-key override (message.key.columns).",
            [{"inventory\\.orders_log": ["order_number"]}],
        ),
    ] = field(default_factory=dict)
    column_mask_hash_version: Annotated[
        ColumnMaskHashVersion, _doc("v1 (column.mask.hash.) or v2 (column.mask.hash.v2.).")
    ] = _resource_default("column_mask_hash_version")
    event_processing_failure_handling_mode: Annotated[
        FailureHandlingMode,
        _doc(
            "A row event that cannot be decoded: fail, warn or skip (event.processing.failure.handling.mode)."
        ),
    ] = _resource_default("event_processing_failure_handling_mode")
    include_query: Annotated[
        bool, _doc("Fill source.query with each row change's statement (include.query; MySQL only).")
    ] = _resource_default("include_query")
    snapshot_mode: Annotated[SnapshotMode, _doc("Debezium snapshot.mode.")] = _resource_default(
        "snapshot_mode"
    )
    snapshot_locking_mode: Annotated[SnapshotLockingMode, _doc("Debezium snapshot.locking.mode.")] = (
        _resource_default("snapshot_locking_mode")
    )
    snapshot_fetch_size: Annotated[int, _doc("Rows per round trip while scanning (snapshot.fetch.size).")] = (
        _resource_default("snapshot_fetch_size")
    )
    snapshot_batch_rows: Annotated[int, _doc("Rows per Arrow batch / Spark job while snapshotting.")] = (
        _resource_default("snapshot_batch_rows")
    )
    snapshot_select_statement_overrides: Annotated[
        dict[str, str],
        _doc(
            "{'db.table': 'SELECT * FROM db.table WHERE <condition>'}: rows an initial snapshot reads "
            "(snapshot.select.statement.overrides); the condition is validated like a signal filter.",
            [{"inventory.orders": "SELECT * FROM inventory.orders WHERE order_date >= '2016-02-01'"}],
        ),
    ] = field(default_factory=dict)
    decimal_handling_mode: Annotated[DecimalHandlingMode, _doc("Debezium decimal.handling.mode.")] = (
        _resource_default("decimal_handling_mode")
    )
    time_precision_mode: Annotated[TimePrecisionMode, _doc("Debezium time.precision.mode.")] = (
        _resource_default("time_precision_mode")
    )
    bigint_unsigned_handling_mode: Annotated[
        BigintUnsignedHandlingMode, _doc("Debezium bigint.unsigned.handling.mode.")
    ] = _resource_default("bigint_unsigned_handling_mode")
    binary_handling_mode: Annotated[BinaryHandlingMode, _doc("Debezium binary.handling.mode.")] = (
        _resource_default("binary_handling_mode")
    )
    skip_unparseable_ddl: Annotated[
        bool, _doc("Log and skip DDL that cannot be parsed (schema.history.internal.skip.unparseable.ddl).")
    ] = _resource_default("skip_unparseable_ddl")
    provide_transaction_metadata: Annotated[
        bool, _doc("Fill the `transaction` struct of change events (provide.transaction.metadata).")
    ] = _resource_default("provide_transaction_metadata")
    stream_batch_rows: Annotated[int, _doc("Events per Arrow batch / Spark job while streaming.")] = (
        _resource_default("stream_batch_rows")
    )
    binlog_read_timeout: Annotated[
        int, _doc("Seconds a streaming run may spend reading its binlog window before it fails.")
    ] = _resource_default("binlog_read_timeout")
    stream_follow_seconds: Annotated[
        float,
        _doc(
            "After its window a stream run keeps reading follow-on windows this long while changes keep "
            "coming (0 = one window per run)."
        ),
    ] = _resource_default("stream_follow_seconds")
    stream_follow_idle_seconds: Annotated[
        float, _doc("A following run ends once the binlog had nothing new for this long.")
    ] = _resource_default("stream_follow_idle_seconds")
    binlog_gap_handling: Annotated[
        BinlogGapHandling,
        _doc(
            "Changes the binlog does not carry (statement DML, foreign-key cascades, failed checksum): "
            "repair (targeted incremental snapshot), warn or fail."
        ),
    ] = _resource_default("binlog_gap_handling")
    signal_data_collection: Annotated[
        str | None,
        _str_field(
            "Signal table 'db.table' (signal.data.collection); default '<db>.debezium_signal' for one included database.",
            optional=True,
        ),
    ] = _resource_default("signal_data_collection")
    incremental_snapshot_chunk_size: Annotated[
        int, _doc("Rows per chunk (incremental.snapshot.chunk.size).")
    ] = _resource_default("incremental_snapshot_chunk_size")
    incremental_snapshot_max_chunks_per_run: Annotated[int, _doc("Chunks one window run reads.")] = (
        _resource_default("incremental_snapshot_max_chunks_per_run")
    )
    incremental_snapshot_watermarking_strategy: Annotated[
        str, _doc("insert_insert or insert_delete (incremental.snapshot.watermarking.strategy).")
    ] = _resource_default("incremental_snapshot_watermarking_strategy")
    incremental_snapshot_read_only: Annotated[
        bool,
        _doc(
            "Read-only incremental snapshots: binlog positions as watermarks, nothing written to the source."
        ),
    ] = _resource_default("incremental_snapshot_read_only")
    pk_range_rows: Annotated[int, _doc("Rows per primary-key-range partition (0 = off).")] = (
        _resource_default("pk_range_rows")
    )
    checksum_sample_chunks: Annotated[int, _doc("Checksum check: 0 = whole table, N = N key chunks.")] = (
        _resource_default("checksum_sample_chunks")
    )
    check_chunk_rows: Annotated[int, _doc("Rows per source read of the reconciliation checks.")] = (
        _resource_default("check_chunk_rows")
    )
    retention_margin_files: Annotated[
        int, _doc("binlog_retention check: warn within this many oldest files.")
    ] = _resource_default("retention_margin_files")
    stream_check_max_keys: Annotated[
        int, _doc("Stream runs: checksum_matches_source compares at most this many changed keys per table.")
    ] = _resource_default("stream_check_max_keys")
    stream_materialize_unchanged: Annotated[
        bool, _doc("Stream runs select every table instead of only the tables the window changed.")
    ] = _resource_default("stream_materialize_unchanged")
    stream_lookahead_max_bytes: Annotated[
        int, _doc("Largest window the sensor reads ahead to select the changed tables (bytes).")
    ] = _resource_default("stream_lookahead_max_bytes")
    create_missing_signal_table: Annotated[
        bool, _doc("Create the signal table when a range backfill needs it and it is missing.")
    ] = _resource_default("create_missing_signal_table")
    lake: Annotated[CdcLakeArgs, _doc("The lake: storage location, S3 settings, Spark properties.")] = field(
        default_factory=CdcLakeArgs
    )
    sensor: Annotated[BinlogSensorArgs, _doc("The binlog sensor.")] = field(default_factory=BinlogSensorArgs)
    op: Annotated[CdcOpArgs | None, _doc("Op name / tags / pool of the multi-asset.")] = None
    mysql_resource_key: Annotated[
        str, _doc("Resource key of the source resource (change it when a project has several servers).")
    ] = "mysql"
    lake_resource_key: Annotated[str, _doc("Resource key of the lake resource.")] = "lake"
    translation: (
        Annotated[
            TranslationFn[MySqlCdcTableProps],
            TranslationFnResolver[MySqlCdcTableProps](_table_template_vars),
        ]
        | None
    ) = None
    binlog_translation: (
        Annotated[
            TranslationFn[str],
            TranslationFnResolver[str](_binlog_template_vars),
        ]
        | None
    ) = None

    def __post_init__(self) -> None:
        # Every YAML field also accepts a template string, so the schema cannot enforce the
        # Literal choices: check them here, when the code location loads, not in the first run.
        hints = typing.get_type_hints(type(self), include_extras=True)
        for name in _CHOICE_FIELDS:
            allowed = typing.get_args(typing.get_args(hints[name])[0])
            value = getattr(self, name)
            if value not in allowed:
                raise ConfigurationError(
                    f"MySqlCdcComponent: {name}={value!r} is not valid; use one of {', '.join(allowed)}"
                )
        if self.sensor.default_status not in ("running", "stopped"):
            raise ConfigurationError(
                f"MySqlCdcComponent: sensor.default_status={self.sensor.default_status!r} is not "
                "valid; use running or stopped"
            )

    # -- type metadata for dg ---------------------------------------------------------------------
    @classmethod
    def get_spec(cls) -> ComponentTypeSpec:
        return ComponentTypeSpec(
            description=(
                "Debezium-style MySQL/MariaDB change data capture: one asset per captured table "
                "plus the binlog asset, a binlog-streaming sensor, PySpark/Delta lake resources."
            ),
            tags=["mysql", "mariadb", "cdc", "debezium", "delta", "spark"],
            produces=["asset", "sensor", "resource"],
        )

    # -- resources --------------------------------------------------------------------------------
    @property
    def server_name(self) -> str:
        return self.connection.server_name

    def build_mysql_resource(self) -> MySqlCdcResource:
        c = self.connection
        return MySqlCdcResource(
            host=c.host,
            port=c.port,
            user=c.user,
            password=c.password,
            server_name=c.server_name,
            server_id=c.server_id,
            connect_timeout=c.connect_timeout,
            ssl_mode=c.ssl_mode,
            ssl_ca=c.ssl_ca,
            ssl_cert=c.ssl_cert,
            ssl_key=c.ssl_key,
            database_include_list=list(self.database_include_list),
            database_exclude_list=list(self.database_exclude_list),
            table_include_list=list(self.table_include_list),
            table_exclude_list=list(self.table_exclude_list),
            column_include_list=list(self.column_include_list),
            column_exclude_list=list(self.column_exclude_list),
            column_truncate_to_chars=dict(self.column_truncate_to_chars),
            column_mask_with_chars=dict(self.column_mask_with_chars),
            column_mask_hash=dict(self.column_mask_hash),
            column_mask_hash_salt=self.column_mask_hash_salt,
            column_mask_hash_version=self.column_mask_hash_version,
            message_key_columns={k: list(v) for k, v in self.message_key_columns.items()},
            include_query=self.include_query,
            event_processing_failure_handling_mode=self.event_processing_failure_handling_mode,
            snapshot_mode=self.snapshot_mode,
            snapshot_locking_mode=self.snapshot_locking_mode,
            snapshot_fetch_size=self.snapshot_fetch_size,
            snapshot_batch_rows=self.snapshot_batch_rows,
            snapshot_select_statement_overrides=dict(self.snapshot_select_statement_overrides),
            decimal_handling_mode=self.decimal_handling_mode,
            time_precision_mode=self.time_precision_mode,
            bigint_unsigned_handling_mode=self.bigint_unsigned_handling_mode,
            binary_handling_mode=self.binary_handling_mode,
            skip_unparseable_ddl=self.skip_unparseable_ddl,
            provide_transaction_metadata=self.provide_transaction_metadata,
            stream_batch_rows=self.stream_batch_rows,
            binlog_read_timeout=self.binlog_read_timeout,
            stream_follow_seconds=self.stream_follow_seconds,
            stream_follow_idle_seconds=self.stream_follow_idle_seconds,
            binlog_gap_handling=self.binlog_gap_handling,
            signal_data_collection=self.signal_data_collection,
            incremental_snapshot_chunk_size=self.incremental_snapshot_chunk_size,
            incremental_snapshot_max_chunks_per_run=self.incremental_snapshot_max_chunks_per_run,
            incremental_snapshot_watermarking_strategy=self.incremental_snapshot_watermarking_strategy,
            incremental_snapshot_read_only=self.incremental_snapshot_read_only,
            pk_range_rows=self.pk_range_rows,
            checksum_sample_chunks=self.checksum_sample_chunks,
            check_chunk_rows=self.check_chunk_rows,
            retention_margin_files=self.retention_margin_files,
            stream_check_max_keys=self.stream_check_max_keys,
            stream_materialize_unchanged=self.stream_materialize_unchanged,
            stream_lookahead_max_bytes=self.stream_lookahead_max_bytes,
            create_missing_signal_table=self.create_missing_signal_table,
        )

    def build_lake_resource(self) -> CdcLakeResource:
        from dagster_pyspark import LazyPySparkResource

        lk = self.lake
        return CdcLakeResource(
            base_uri=lk.base_uri,
            s3_endpoint_url=lk.s3_endpoint_url,
            s3_access_key_id=lk.s3_access_key_id,
            s3_secret_access_key=lk.s3_secret_access_key,
            s3_region=lk.s3_region,
            s3_conditional_put=lk.s3_conditional_put,
            rows_per_file=lk.rows_per_file,
            compact_min_files=lk.compact_min_files,
            sink_pipeline_depth=lk.sink_pipeline_depth,
            spark_remote=lk.spark_remote or None,
            spark_log_level=lk.spark_log_level,
            pyspark=LazyPySparkResource(spark_config={**DEFAULT_SPARK_CONFIG, **(lk.spark_config or {})}),
        )

    # -- specs ------------------------------------------------------------------------------------
    def get_asset_spec(self, props: MySqlCdcTableProps) -> dg.AssetSpec:
        """Spec of one captured table: the default translator's, then ``translation``.

        Override in a subclass for Python-level control (call ``super().get_asset_spec(props)``).
        """
        spec = DagsterMySqlCdcTranslator().get_asset_spec(props)
        return self.translation(spec, props) if self.translation else spec

    def get_binlog_asset_spec(self, server_name: str) -> dg.AssetSpec:
        """Spec of the server's binlog asset: the default, then ``binlog_translation``."""
        spec = DagsterMySqlCdcTranslator().get_binlog_asset_spec(server_name)
        return self.binlog_translation(spec, server_name) if self.binlog_translation else spec

    # -- discovery --------------------------------------------------------------------------------
    def discover_tables(self, mysql: MySqlCdcResource) -> Sequence[TableSchema | str]:
        """Schemas read from the server, or the explicit ``tables`` when it cannot be reached.

        Raises:
            SourceConnectionError: the server is unreachable and no ``tables`` are listed.
            UnknownTableError / ConfigurationError: a listed table does not exist or is excluded.
        """
        try:
            return mysql.discover_tables(self.tables or None)
        except SourceConnectionError as e:
            if self.tables:
                log.warning("%s; building %s assets from the listed table names only", e, self.server_name)
                return list(self.tables)
            raise SourceConnectionError(
                f"{e}. MySqlCdcComponent '{self.server_name}' discovers its tables when the code "
                "location loads: start the server, or list the captured tables under `tables:` "
                "('database.table') so the component also loads while the server is down."
            ) from e
        except dg.DagsterInvalidConfigError as e:  # e.g. the password's env var is not set at load time
            if self.tables:
                log.warning("%s; building %s assets from the listed table names only", e, self.server_name)
                return list(self.tables)
            raise

    # -- definitions ------------------------------------------------------------------------------
    def build_assets(self, tables: Sequence[TableSchema | str]) -> dg.AssetsDefinition:
        op = self.op or CdcOpArgs()
        mysql_key, lake_key = self.mysql_resource_key, self.lake_resource_key

        def cdc(context: dg.AssetExecutionContext, **resources: Any):
            mysql: MySqlCdcResource = resources[mysql_key]
            lake: CdcLakeResource = resources[lake_key]
            yield from mysql.sync(context=context, lake=lake)

        # Resource parameters are named after the configured resource keys.
        cdc.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
            [
                inspect.Parameter(
                    "context", inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=dg.AssetExecutionContext
                ),
                inspect.Parameter(mysql_key, inspect.Parameter.KEYWORD_ONLY, annotation=MySqlCdcResource),
                inspect.Parameter(lake_key, inspect.Parameter.KEYWORD_ONLY, annotation=CdcLakeResource),
            ]
        )
        return mysql_cdc_assets(
            tables=tables,
            server_name=self.server_name,
            translator=_ComponentTranslator(self),
            name=op.name,
            op_tags=op.tags,
            pool=op.pool,
            sensor_interval_seconds=self.sensor.minimum_interval_seconds,
            stream_follow_seconds=float(self.stream_follow_seconds),
        )(cdc)

    def build_sensor(self, assets_def: dg.AssetsDefinition) -> dg.SensorDefinition:
        s = self.sensor
        return build_mysql_cdc_sensor(
            assets_def,
            name=s.name,
            minimum_interval_seconds=s.minimum_interval_seconds,
            retention_margin_files=s.retention_margin_files,
            default_status=(
                dg.DefaultSensorStatus.RUNNING
                if s.default_status == "running"
                else dg.DefaultSensorStatus.STOPPED
            ),
            mysql_resource_key=self.mysql_resource_key,
        )

    def build_defs(self, context: ComponentLoadContext) -> dg.Definitions:
        if self.mysql_resource_key == self.lake_resource_key:
            raise dg.DagsterInvalidDefinitionError(
                f"mysql_resource_key and lake_resource_key are both {self.mysql_resource_key!r}; use two keys"
            )
        mysql = self.build_mysql_resource()
        lake = self.build_lake_resource()
        assets_def = self.build_assets(self.discover_tables(mysql))
        sensors = [self.build_sensor(assets_def)] if self.sensor.enabled else []
        return dg.Definitions(
            assets=[assets_def],
            sensors=sensors,
            resources={self.mysql_resource_key: mysql, self.lake_resource_key: lake},
        )


__all__ = [
    "BinlogSensorArgs",
    "CdcLakeArgs",
    "CdcOpArgs",
    "MySqlCdcComponent",
    "MySqlCdcComponentScaffolder",
    "MySqlCdcScaffoldParams",
    "MySqlConnectionArgs",
    "env_var_of_template",
]
