"""Asset specs for captured tables: translator (one hook) and spec builder.

Modelled on dagster-sling / dagster-dlt: a translator class whose single hook
:meth:`DagsterMySqlCdcTranslator.get_asset_spec` turns one captured table into an ``AssetSpec``;
subclass it and call ``super().get_asset_spec(props).replace_attributes(...)`` to change keys,
groups, owners, automation conditions, ...
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta

import dagster as dg

from ..sink.layout import dagster_name
from ..source.schema import TableSchema
from .protocol import (
    BINLOG_METADATA_KEY,
    DATABASE_NAME_METADATA_KEY,
    SERVER_METADATA_KEY,
    TABLE_METADATA_KEY,
    TABLE_NAME_METADATA_KEY,
)


def table_asset_key(server_name: str, database: str, table: str) -> dg.AssetKey:
    """The default key of a captured table's asset: ``[server, db, table]`` with the database
    and table names mapped by :func:`dagster_name` (``["dbserver1", "inventory", "orders"]``)."""
    return dg.AssetKey([server_name, dagster_name(database), dagster_name(table)])


@dataclass(frozen=True)
class MySqlCdcTableProps:
    """What the translator knows about one captured table.

    Attributes:
        server_name: logical server name (Debezium ``topic.prefix``).
        database: database (schema) name.
        table: table name.
        schema: columns/keys read from the server at definition time, or ``None`` when the
            server was unreachable and the table was named explicitly.
    """

    server_name: str
    database: str
    table: str
    schema: TableSchema | None = None

    @property
    def qualified_name(self) -> str:
        return f"{self.database}.{self.table}"


class DagsterMySqlCdcTranslator:
    """Default mapping of captured tables to asset specs.

    Key ``[server, database, table]``, group = database, kinds ``mysql``/``spark``/``delta``,
    description = the table comment, column schema = the source columns (MySQL types).
    """

    def get_asset_spec(self, props: MySqlCdcTableProps) -> dg.AssetSpec:
        """Key :func:`table_asset_key`, group :func:`dagster_name` of the database; the real
        database and table names in the metadata."""
        metadata: dict = {
            TABLE_METADATA_KEY: props.qualified_name,
            DATABASE_NAME_METADATA_KEY: props.database,
            TABLE_NAME_METADATA_KEY: props.table,
            SERVER_METADATA_KEY: props.server_name,
            # Dagster's standard table name: the lake table, named like its folder <server>/<db>/<table>
            "dagster/table_name": f"{props.server_name}.{props.qualified_name}",
        }
        description = f"Change data capture of MySQL table `{props.qualified_name}` ({props.server_name})."
        if props.schema is not None:
            if props.schema.comment:
                description = props.schema.comment
            metadata["dagster/column_schema"] = dg.TableSchema(
                columns=[
                    dg.TableColumn(
                        name=c.name,
                        type=c.column_type,
                        description=c.comment or None,
                        constraints=dg.TableColumnConstraints(nullable=c.nullable),
                    )
                    for c in props.schema.columns
                ]
            )
            if props.schema.primary_key:
                metadata["primary_key"] = ", ".join(props.schema.primary_key)
        return dg.AssetSpec(
            key=table_asset_key(props.server_name, props.database, props.table),
            description=description,
            group_name=dagster_name(props.database),
            kinds={"mysql", "spark", "delta"},
            metadata=metadata,
        )

    def get_binlog_asset_spec(self, server_name: str) -> dg.AssetSpec:
        """The server's binlog-stream asset: committed position, lag and schema history.

        Materialized by every streaming window (Debezium's heartbeat: it advances even when no
        captured table changed) and by snapshots (the schema history records they add).
        """
        return dg.AssetSpec(
            key=dg.AssetKey([server_name, "binlog"]),
            description=(
                f"Binlog stream of MySQL server `{server_name}`: each materialization is a committed "
                "window of the binlog (position, GTID set, lag) and its schema-history records."
            ),
            group_name=re.sub(r"[^A-Za-z0-9_]", "_", f"{server_name}_cdc"),
            kinds={"mysql", "delta"},
            metadata={BINLOG_METADATA_KEY: server_name, SERVER_METADATA_KEY: server_name},
        )


def build_mysql_cdc_asset_specs(
    tables: Sequence[TableSchema | str],
    *,
    server_name: str,
    translator: DagsterMySqlCdcTranslator | None = None,
    include_binlog: bool = True,
) -> list[dg.AssetSpec]:
    """One ``AssetSpec`` per captured table (skippable: a streaming window only materializes the
    tables it changed), plus the server's binlog-stream asset.

    Args:
        tables: schemas read from the server (``MySqlCdcResource.discover_tables()``) or bare
            ``"database.table"`` names.
        server_name: logical server name, first asset key segment.
        translator: mapping hooks (default :class:`DagsterMySqlCdcTranslator`).

    Raises:
        ValueError: a table name is not ``database.table``, or two tables map to the same key.
    """
    translator = translator or DagsterMySqlCdcTranslator()
    specs = []
    for t in tables:
        if isinstance(t, TableSchema):
            props = MySqlCdcTableProps(server_name, t.database, t.table, t)
        else:
            db, sep, name = str(t).partition(".")
            if not sep or not db or not name:
                raise ValueError(f"Table {t!r} must be written as 'database.table'")
            props = MySqlCdcTableProps(server_name, db, name, None)
        spec = translator.get_asset_spec(props)
        md = spec.metadata or {}
        missing = {
            k: v
            for k, v in (
                (TABLE_METADATA_KEY, props.qualified_name),
                (DATABASE_NAME_METADATA_KEY, props.database),
                (TABLE_NAME_METADATA_KEY, props.table),
            )
            if k not in md
        }
        if missing:
            spec = spec.merge_attributes(metadata=missing)
        specs.append(spec.replace_attributes(skippable=True))
    if include_binlog:
        specs.append(translator.get_binlog_asset_spec(server_name))
    _refuse_clashes(specs)
    return specs


def _refuse_clashes(specs: Sequence[dg.AssetSpec]) -> None:
    """Two specs with one asset key, or with keys Dagster names one op output after
    (``AssetKey.to_python_identifier``: ``-`` and ``.`` read as ``_``), cannot be in one multi-asset.

    Raises:
        ValueError: naming the tables of each clash and the fix (a translator's keys).
    """
    by_output: dict[str, list[dg.AssetSpec]] = {}
    for s in specs:
        by_output.setdefault(s.key.to_python_identifier(), []).append(s)
    clashes = [group for group in by_output.values() if len(group) > 1]
    if clashes:
        described = "; ".join(
            " and ".join(
                f"{s.key.to_user_string()} ({(s.metadata or {}).get(TABLE_METADATA_KEY, 'binlog')})"
                for s in group
            )
            for group in clashes
        )
        raise ValueError(
            f"Several tables map to the same asset key (or to keys Dagster cannot tell apart): {described}. "
            "Give them distinct keys with a DagsterMySqlCdcTranslator subclass (get_asset_spec) or "
            "the component's translation."
        )


def table_of_spec(spec: dg.AssetSpec) -> tuple[str, str]:
    """``(database, table)`` a spec was built for: the real names in its metadata
    (``dagster_mysql_cdc/database`` and ``/table_name``; specs without them: their
    ``dagster_mysql_cdc/table`` ``"db.table"`` split at the first dot)."""
    md = spec.metadata or {}
    db, table = md.get(DATABASE_NAME_METADATA_KEY), md.get(TABLE_NAME_METADATA_KEY)
    if db is not None and table is not None:
        return _text(db), _text(table)
    qualified = md.get(TABLE_METADATA_KEY)
    if not qualified:
        raise ValueError(f"Asset {spec.key} was not built by dagster-mysql-cdc (no table metadata)")
    db, _, table = _text(qualified).partition(".")
    return db, table


def _text(v: object) -> str:
    """A metadata entry's string (a plain ``str``, or a ``TextMetadataValue`` once normalized)."""
    return str(getattr(v, "value", v))


def freshness_policy_for_interval(
    sensor_interval_seconds: int, run_seconds: float = 0.0
) -> dg.FreshnessPolicy:
    """The capture's freshness policy for a binlog sensor ticking every ``sensor_interval_seconds``.

    WARN when the last materialization is older than ``max(120, 10 × interval) + run_seconds``
    seconds, FAIL after ``max(600, 40 × interval) + run_seconds``: a window run every tick (plus
    its run time) keeps it PASS; a stopped sensor, a failing window or an unreachable server turns
    it WARN, then FAIL. While the server is idle the sensor reports a heartbeat materialization of
    the binlog asset (see :func:`.heartbeat.idle_heartbeat`), so quiet is not stale.

    Args:
        sensor_interval_seconds: the sensor's ``minimum_interval_seconds``.
        run_seconds: how long a stream run may go without materializing: the resource's
            ``stream_follow_seconds`` (a following run reports once, at its end).
    """
    interval = max(1, int(sensor_interval_seconds))
    extra = max(0, int(run_seconds))
    return dg.FreshnessPolicy.time_window(
        fail_window=timedelta(seconds=max(600, 40 * interval) + extra),
        warn_window=timedelta(seconds=max(120, 10 * interval) + extra),
    )
