"""``MySqlCdcComponent``: a MySQL/MariaDB CDC connector declared in a ``defs.yaml``.

The YAML counterpart of ``definitions.py`` + ``assets/inventory.py``: one component is one Debezium
connector (one source server). The ``mysql`` and ``lake`` sections are the configuration of
:class:`MySqlCdcResource` and :class:`CdcLakeResource` themselves: their YAML schema is derived from
the resources' fields (names, types, defaults, descriptions), the way dagster-sling's
``SlingReplicationCollectionComponent`` takes its ``SlingResource``, so a new resource setting is
one edit in ``resources.py`` (``lake_resource.py`` for the lake). Only the component's own settings (tables, sensor, op, resource keys,
translation) are declared here. The component discovers the captured tables and builds the
``@mysql_cdc_assets`` multi-asset (one asset per table plus the server's binlog asset) and the
binlog sensor::

    type: dagster_mysql_cdc.MySqlCdcComponent
    attributes:
      mysql:                       # MySqlCdcResource fields
        host: 127.0.0.1
        port: 3307
        user: cdc
        password: "{{ env.CDC_MYSQL_PASSWORD }}"
        server_name: dbserver1
        database_include_list: [inventory]
      lake:                        # CdcLakeResource fields, plus spark_config
        base_uri: s3://lake/cdc
        s3_endpoint_url: http://127.0.0.1:8333
        s3_access_key_id: "{{ env.AWS_ACCESS_KEY_ID }}"
        s3_secret_access_key: "{{ env.AWS_SECRET_ACCESS_KEY }}"
      sensor:
        minimum_interval_seconds: 15
      translation:
        group_name: "{{ database_name }}_cdc"

Secrets: a secret field (marked ``json_schema_extra=SECRET``, :mod:`.resource_fields`: ``mysql.password``,
``mysql.ssl_*``, ``mysql.column_mask_hash_salt``, ``lake.s3_access_key_id``,
``lake.s3_secret_access_key``) whose whole value is ``{{ env.NAME }}`` (or ``{{ env('NAME') }}``)
becomes ``dg.EnvVar("NAME")`` instead of the rendered value, so the secret is read from the
environment when a resource is initialized and never appears in the definitions snapshot or the UI.

The earlier flat shape (a ``connection`` section and the capture settings at the top level) still
loads, with a ``DeprecationWarning``: its keys are moved into ``mysql``.

Scaffold one with ``dg scaffold defs dagster_mysql_cdc.MySqlCdcComponent <path>``; list it with
``dg list components --package dagster_mysql_cdc``.

No ``from __future__ import annotations`` here: the Resolvable framework reads the dataclass field
types at runtime to derive the YAML schema.
"""

import dataclasses
import inspect
import logging
import re
import typing
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import UnionType
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
from dagster.components.resolved.model import Model
from dagster.components.utils.translation import TranslationFn, TranslationFnResolver
from dagster_pyspark import LazyPySparkResource
from pydantic import BaseModel, Field, create_model, model_validator
from pydantic.fields import FieldInfo

from ..engine.gaps import GAP_HANDLING_MODES
from ..errors import FAILURE_HANDLING_MODES, ConfigurationError, SourceConnectionError
from ..source.columns import HASH_VERSIONS
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
from .resources import DEFAULT_SPARK_CONFIG, SECRET, SNAPSHOT_MODES, CdcLakeResource, MySqlCdcResource
from .sensor import build_mysql_cdc_sensor
from .translator import DagsterMySqlCdcTranslator, MySqlCdcTableProps, dagster_name

log = logging.getLogger(__name__)

#: ``MySqlCdcResource`` fields with a fixed set of values -> the values (the library's own lists);
#: checked when the code location loads rather than in the first run.
MYSQL_CHOICES: Mapping[str, tuple[str, ...]] = {
    "ssl_mode": typing.get_args(SslMode),
    "snapshot_mode": SNAPSHOT_MODES,
    "snapshot_locking_mode": LOCKING_MODES,
    "decimal_handling_mode": typing.get_args(DecimalHandlingMode),
    "time_precision_mode": typing.get_args(TimePrecisionMode),
    "bigint_unsigned_handling_mode": typing.get_args(BigintUnsignedHandlingMode),
    "binary_handling_mode": typing.get_args(BinaryHandlingMode),
    "column_mask_hash_version": HASH_VERSIONS,
    "event_processing_failure_handling_mode": FAILURE_HANDLING_MODES,
    "binlog_gap_handling": GAP_HANDLING_MODES,
}


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


def is_secret_field(info: FieldInfo) -> bool:
    """Whether a resource field is marked secret (``json_schema_extra=resources.SECRET``)."""
    extra = info.json_schema_extra
    return isinstance(extra, dict) and all(extra.get(k) == v for k, v in SECRET.items())


def _is_str_field(info: FieldInfo) -> bool:
    """``str`` or ``str | None``: Jinja native rendering would turn ``"12345"`` into an int."""
    annotation = info.annotation
    if annotation is str:
        return True
    return typing.get_origin(annotation) in (typing.Union, UnionType) and set(
        typing.get_args(annotation)
    ) == {
        str,
        type(None),
    }


def _is_nested_resource(annotation: Any) -> bool:
    return isinstance(annotation, type) and issubclass(annotation, BaseModel)


# -- resource sections: YAML schema derived from the resource classes ------------------------------
def resource_attributes_model(
    resource_cls: type[dg.ConfigurableResource],
    *,
    choices: Mapping[str, tuple[str, ...]] | None = None,
    extra_fields: Mapping[str, tuple[Any, Any]] | None = None,
) -> type[BaseModel]:
    """The pydantic model of a resource's YAML section: one field per config field of ``resource_cls``.

    Each field keeps the resource field's name, default and description; its type also accepts a
    template string (``"{{ env('CDC_MYSQL_PORT', '3306') }}"``), rendered when the section is
    resolved. Nested resources (``CdcLakeResource.pyspark``) are left out: ``extra_fields`` adds
    the component's own keys for them. Unknown keys are rejected.

    Args:
        resource_cls: a ``dg.ConfigurableResource`` subclass.
        choices: ``{field: allowed values}``: shown as a ``Literal`` in the schema.
        extra_fields: ``{name: (type, FieldInfo)}`` added after the resource's fields.
    """
    fields: dict[str, Any] = {}
    for name, info in resource_cls.model_fields.items():
        annotation: Any = info.annotation
        if _is_nested_resource(annotation):
            continue
        if choices and name in choices:
            annotation = Literal[choices[name]]
        description = info.description or ""
        if is_secret_field(info):
            description += " Secret: write `{{ env.NAME }}` to read it from the environment at run time."
        default = info.get_default(call_default_factory=True)
        fields[name] = (
            annotation if annotation is str else annotation | str,
            Field(default, description=description),
        )
    fields.update(extra_fields or {})
    return create_model(f"{resource_cls.__name__}Attributes", __base__=Model, **fields)


def _resolve_setting(context: ResolutionContext, info: FieldInfo | None, raw: Any) -> Any:
    """One YAML value of a resource section: a secret ``{{ env.NAME }}`` -> ``dg.EnvVar("NAME")``;
    anything else rendered now (string settings stay strings)."""
    if info is not None and is_secret_field(info):
        name = env_var_of_template(raw)
        if name is not None:
            return dg.EnvVar(name)
    value = context.resolve_value(raw)
    if info is not None and value is not None and _is_str_field(info):
        value = str(value)
    return value


def resolve_resource_section(
    context: ResolutionContext,
    value: Any,
    resource_cls: type[dg.ConfigurableResource],
    section_model: type[BaseModel],
) -> dict[str, Any]:
    """The keyword arguments of ``resource_cls`` from its YAML section (only the keys written:
    the others keep the resource's defaults)."""
    if isinstance(value, str):  # the whole section as a template
        value = context.resolve_value(value)
    if isinstance(value, Mapping):
        value = section_model.model_validate(value)
    if value is None:
        return {}
    return {
        name: _resolve_setting(context.at_path(name), resource_cls.model_fields.get(name), raw)
        for name, raw in value.model_dump(exclude_unset=True).items()
    }


MySqlCdcAttributes = resource_attributes_model(MySqlCdcResource, choices=MYSQL_CHOICES)
CdcLakeAttributes = resource_attributes_model(
    CdcLakeResource,
    extra_fields={
        "spark_config": (
            dict[str, Any] | str,
            Field(
                default_factory=dict,
                description="Spark properties merged over the library defaults (local[2], UTC session "
                "time zone, Arrow on ...), e.g. {spark.master: 'spark://host:7077', "
                "spark.driver.memory: 4g}: the `spark_config` of the nested LazyPySparkResource.",
            ),
        )
    },
)


def _resolve_mysql(context: ResolutionContext, value: Any) -> MySqlCdcResource:
    return MySqlCdcResource(**resolve_resource_section(context, value, MySqlCdcResource, MySqlCdcAttributes))


def _resolve_lake(context: ResolutionContext, value: Any) -> CdcLakeResource:
    kwargs = resolve_resource_section(context, value, CdcLakeResource, CdcLakeAttributes)
    spark_config = kwargs.pop("spark_config", None) or {}
    return CdcLakeResource(
        **kwargs, pyspark=LazyPySparkResource(spark_config={**DEFAULT_SPARK_CONFIG, **spark_config})
    )


def _doc(description: str, examples: list[Any] | None = None) -> Resolver:
    return Resolver.default(description=description, examples=examples)


def _resource_section(resolve: Any, section_model: type[BaseModel], description: str) -> Resolver:
    """The resolver of a resource's YAML section: ``section_model`` (:func:`resource_attributes_model`)
    is its schema, ``resolve(context, value)`` builds the resource from it."""
    return Resolver(
        resolve, model_field_type=section_model, inject_before_resolve=False, description=description
    )


# -- component-only sections ------------------------------------------------------------------------
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
    table_freshness: Annotated[
        bool,
        _doc(
            "Give every table the freshness policy derived from the interval (quiet tables get "
            "runless heartbeats with their checks carried forward)."
        ),
    ] = True
    table_heartbeat_seconds: Annotated[
        float | None,
        _doc("Seconds between heartbeats of a quiet table (default: half its warn window)."),
    ] = None
    retry_backoff_seconds: Annotated[
        float,
        _doc(
            "A window that failed by itself is retried at once, then after this many seconds, doubling "
            "(0: every tick); a killed run is always retried at once."
        ),
    ] = 10.0
    retry_backoff_max_seconds: Annotated[
        float, _doc("The longest wait between two retries of a failed window.")
    ] = 600.0
    table_retry_backoff_seconds: Annotated[
        float,
        _doc(
            "A table whose capture stopped alone is caught up by the first window after this many "
            "seconds, doubling after each failed attempt (0: every window)."
        ),
    ] = 60.0
    table_retry_backoff_max_seconds: Annotated[
        float, _doc("The longest wait between two catch-up attempts of a stopped table.")
    ] = 3600.0
    standby: Annotated[
        bool | None,
        _doc(
            "Keep a standby run waiting for the next change while the capture is caught up (the "
            "first change after a quiet period reaches the lake and the UI in about a second). "
            "null: on when the resource follows (stream_follow_seconds > 0)."
        ),
    ] = None
    verification_rows: Annotated[
        int,
        _doc(
            "Rotating verification (a second sensor, `<sensor name>_verification`, with the same "
            "default status): source rows compared with the lake per tick, one primary-key range of "
            "one table at a time, round every table; a confirmed difference is repaired by a targeted "
            "re-read. 0: no verification sensor."
        ),
    ] = 50_000
    verification_interval_seconds: Annotated[
        int, _doc("Seconds between two verification ticks (a 1M-row table: 20 ticks).")
    ] = 30

    def sensor_status(self) -> dg.DefaultSensorStatus:
        """:attr:`default_status` as Dagster's ``DefaultSensorStatus`` (the binlog sensor's and the
        verification sensor's)."""
        if self.default_status == "running":
            return dg.DefaultSensorStatus.RUNNING
        return dg.DefaultSensorStatus.STOPPED


@dataclass
class CdcOpArgs(Resolvable):
    """The multi-asset op."""

    name: Annotated[str | None, _doc("Op name (default `<server_name>_cdc`).")] = None
    tags: Annotated[dict[str, str] | None, _doc("Op tags.")] = None
    pool: Annotated[str | None, _doc("Concurrency pool, e.g. to serialise snapshots of one server.")] = None


def _table_template_vars(props: MySqlCdcTableProps) -> Mapping[str, Any]:
    """``database``/``table``: the real names; ``database_name``/``table_name``: their Dagster
    names (:func:`.translator.dagster_name`, valid in keys and group names whatever the real name)."""
    return {
        "props": props,
        "database": props.database,
        "table": props.table,
        "database_name": dagster_name(props.database),
        "table_name": dagster_name(props.table),
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
        "mysql": {
            "host": p.host,
            "port": p.port,
            "user": p.user,
            "password": f"{{{{ env.{p.password_env_var} }}}}",
            "server_name": p.server_name,
            "server_id": p.server_id,
            "database_include_list": [p.database] if p.database else [],
            "table_exclude_list": [],
            "snapshot_mode": "initial",
        },
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


# -- the earlier flat shape -------------------------------------------------------------------------
def flat_attributes_to_sections(data: Any, component_fields: set[str]) -> Any:
    """The earlier flat ``attributes`` (``connection:`` plus the capture settings at the top level)
    rewritten with those keys under ``mysql:`` (a ``DeprecationWarning`` says so); other data as is.

    ``lake:`` needs no rewrite: its keys were already the ``CdcLakeResource`` fields + ``spark_config``.
    """
    if not isinstance(data, Mapping):
        return data
    moved = [
        k
        for k in data
        if k == "connection" or (k in MySqlCdcResource.model_fields and k not in component_fields)
    ]
    if not moved or ("connection" in moved and not isinstance(data["connection"], Mapping | None)):
        return data
    warnings.warn(
        "MySqlCdcComponent: `connection:` and the capture settings at the top level of `attributes` "
        f"({', '.join(moved)}) are deprecated; write them under `mysql:` (the MySqlCdcResource fields).",
        DeprecationWarning,
        stacklevel=2,
    )
    mysql = dict(data.get("mysql") or {})
    mysql.update(data.get("connection") or {})
    mysql.update({k: data[k] for k in moved if k != "connection"})
    return {**{k: v for k, v in data.items() if k not in moved}, "mysql": mysql}


_MODELS: dict[type, type[BaseModel]] = {}


# -- the component --------------------------------------------------------------------------------
@scaffold_with(MySqlCdcComponentScaffolder)
@dataclass
class MySqlCdcComponent(Component, Resolvable):
    """Debezium-style change data capture of a MySQL/MariaDB server into a Delta lake.

    One asset per captured table (key server_name / database / table) plus the server's binlog
    asset (key server_name / binlog), one multi-asset materializing them (a snapshot from the UI,
    binlog windows when requested by the sensor), the binlog sensor, and the `mysql` and `lake`
    resources, configured by the ``mysql`` / ``lake`` sections (the resources' own fields).

    Tables are read from the server when the code location loads (column schema and comments in
    the UI). If it cannot be reached, the explicitly listed ``tables`` are used as bare names.

    Raises (when loaded):
        ConfigurationError: a choice setting (``mysql.snapshot_mode`` ...) or
            ``sensor.default_status`` is not one of its values.
    """

    mysql: Annotated[
        MySqlCdcResource,
        _resource_section(
            _resolve_mysql,
            MySqlCdcAttributes,
            "The captured server and how it is captured: the MySqlCdcResource fields "
            "(host, port, user, password, server_name, server_id, include/exclude lists, snapshot_mode ...).",
        ),
    ] = field(default_factory=MySqlCdcResource)
    lake: Annotated[
        CdcLakeResource,
        _resource_section(
            _resolve_lake,
            CdcLakeAttributes,
            "The lake: the CdcLakeResource fields (storage location, S3 settings, Spark) "
            "and spark_config (merged over the library's Spark defaults).",
        ),
    ] = field(default_factory=CdcLakeResource)
    tables: Annotated[
        list[str] | None,
        _doc(
            "Explicit 'database.table' names to capture (each must exist and pass mysql's include/exclude "
            "lists). Also the fallback when the server is unreachable at load time.",
            [["inventory.customers", "inventory.orders"]],
        ),
    ] = None
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
        # A choice setting also accepts a template string, so the schema cannot enforce it: check
        # it here, when the code location loads, not in the first run.
        for name, allowed in MYSQL_CHOICES.items():
            value = getattr(self.mysql, name)
            if not isinstance(value, dg.EnvVar) and value not in allowed:
                raise ConfigurationError(
                    f"MySqlCdcComponent: mysql.{name}={value!r} is not valid; use one of {', '.join(allowed)}"
                )
        if self.sensor.default_status not in ("running", "stopped"):
            raise ConfigurationError(
                f"MySqlCdcComponent: sensor.default_status={self.sensor.default_status!r} is not "
                "valid; use running or stopped"
            )

    @classmethod
    def model(cls) -> type[BaseModel]:
        """The derived attributes model, also accepting the earlier flat shape (deprecated)."""
        if cls not in _MODELS:
            derived = super().model()
            component_fields = {f.name for f in dataclasses.fields(cls)}

            def sections(data: Any) -> Any:
                return flat_attributes_to_sections(data, component_fields)

            validators: dict[str, Any] = {"_flat_to_sections": model_validator(mode="before")(sections)}
            _MODELS[cls] = create_model(derived.__name__, __base__=derived, __validators__=validators)
        return _MODELS[cls]

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
        return self.mysql.server_name

    def build_mysql_resource(self) -> MySqlCdcResource:
        """The ``mysql`` resource (the ``mysql`` section)."""
        return self.mysql

    def build_lake_resource(self) -> CdcLakeResource:
        """The ``lake`` resource (the ``lake`` section)."""
        return self.lake

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
            stream_follow_seconds=float(self.mysql.stream_follow_seconds),
            table_freshness_policy=True if self.sensor.table_freshness else None,
        )(cdc)

    def build_sensor(self, assets_def: dg.AssetsDefinition) -> dg.SensorDefinition:
        s = self.sensor
        return build_mysql_cdc_sensor(
            assets_def,
            name=s.name,
            minimum_interval_seconds=s.minimum_interval_seconds,
            retention_margin_files=s.retention_margin_files,
            default_status=s.sensor_status(),
            mysql_resource_key=self.mysql_resource_key,
            lake_resource_key=self.lake_resource_key,
            table_heartbeat_seconds=s.table_heartbeat_seconds,
            retry_backoff_seconds=s.retry_backoff_seconds,
            retry_backoff_max_seconds=s.retry_backoff_max_seconds,
            table_retry_backoff_seconds=s.table_retry_backoff_seconds,
            table_retry_backoff_max_seconds=s.table_retry_backoff_max_seconds,
            standby=s.standby,
        )

    def build_verification_sensor(
        self, assets_def: dg.AssetsDefinition, binlog_sensor: str
    ) -> dg.SensorDefinition:
        """The rotating verification sensor (:mod:`.rotation`) of the binlog sensor ``binlog_sensor``."""
        from .rotation import build_verification_sensor, verification_sensor_name

        s = self.sensor
        return build_verification_sensor(
            assets_def,
            name=verification_sensor_name(binlog_sensor),
            minimum_interval_seconds=s.verification_interval_seconds,
            rows=s.verification_rows,
            default_status=s.sensor_status(),
            mysql_resource_key=self.mysql_resource_key,
            lake_resource_key=self.lake_resource_key,
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
        if self.sensor.enabled and self.sensor.verification_rows > 0:
            sensors.append(self.build_verification_sensor(assets_def, sensors[0].name))
        return dg.Definitions(
            assets=[assets_def],
            sensors=sensors,
            resources={self.mysql_resource_key: mysql, self.lake_resource_key: lake},
        )


__all__ = [
    "BinlogSensorArgs",
    "CdcLakeAttributes",
    "CdcOpArgs",
    "MYSQL_CHOICES",
    "MySqlCdcAttributes",
    "MySqlCdcComponent",
    "MySqlCdcComponentScaffolder",
    "MySqlCdcScaffoldParams",
    "env_var_of_template",
    "flat_attributes_to_sections",
    "resource_attributes_model",
]
