"""A scratch database captured by ``@mysql_cdc_assets`` and driven by the binlog sensor in process.

For integration tests of one feature (keyless tables, transaction metadata, read-only incremental
snapshots): the same set-up the README shows, against the real MariaDB, local Spark and a local
lake. No ``from __future__ import annotations`` here: Dagster reads the ``context`` annotation of
the asset function.
"""

import uuid
from collections.abc import Iterator
from contextlib import contextmanager

import dagster as dg
import pymysql
from conftest import CDC_PASSWORD, CDC_USER, MYSQL_HOST, MYSQL_PORT, root_connect

from dagster_mysql_cdc import (
    CdcLakeResource,
    MySqlCdcResource,
    build_mysql_cdc_sensor,
    mysql_cdc_assets,
    run_sensor_ticks,
)


@contextmanager
def scratch_database(prefix: str) -> Iterator[tuple[str, pymysql.connections.Connection]]:
    """``(name, root connection)`` of a new empty database ``<prefix>_<random>``; dropped after."""
    db = f"{prefix}_{uuid.uuid4().hex[:8]}"
    conn = root_connect()
    try:
        with conn.cursor() as cur:
            cur.execute(f"CREATE DATABASE {db}")
        yield db, conn
    finally:
        with conn.cursor() as cur:
            cur.execute(f"DROP DATABASE IF EXISTS {db}")
        conn.close()


def capture_resource(db: str, *, user: str = CDC_USER, password=CDC_PASSWORD, **options) -> MySqlCdcResource:
    """The capture resource of database ``db`` (also its ``server_name``) as ``user`` (default the
    ``cdc`` user; ``password`` may be a ``dg.EnvVar``)."""
    return MySqlCdcResource(
        host=MYSQL_HOST,
        port=MYSQL_PORT,
        user=user,
        password=password,
        server_name=db,
        database_include_list=[db],
        **{"stream_follow_seconds": 0.0, **options},  # one window per run unless a test follows
    )


@contextmanager
def capture_user(conn: pymysql.connections.Connection, db: str, password: str) -> Iterator[str]:
    """A capture user of its own with ``password`` (name yielded; dropped after): ``SELECT``,
    ``INSERT`` and ``CREATE`` on ``db`` (signal table, watermarks), ``RELOAD``, ``REPLICATION
    SLAVE`` and ``BINLOG MONITOR`` globally. ``conn``: a root connection."""
    user = f"u_{uuid.uuid4().hex[:8]}"
    with conn.cursor() as cur:
        cur.execute(f"CREATE USER '{user}'@'%' IDENTIFIED BY '{password}'")
        cur.execute(f"GRANT SELECT, INSERT, CREATE ON `{db}`.* TO '{user}'@'%'")
        cur.execute(f"GRANT RELOAD, REPLICATION SLAVE, BINLOG MONITOR ON *.* TO '{user}'@'%'")
    try:
        yield user
    finally:
        with conn.cursor() as cur:
            cur.execute(f"DROP USER IF EXISTS '{user}'@'%'")


class SensorDriven:
    """The tables of ``mysql`` as assets, their binlog sensor and an ephemeral instance (or
    ``instance``); each :meth:`ticks` call continues from the cursor the previous one left."""

    def __init__(
        self,
        mysql: MySqlCdcResource,
        lake_base_uri: str,
        tables=None,
        assets_options=None,
        sensor_options=None,
        instance: dg.DagsterInstance | None = None,
        **lake_options,
    ):
        @mysql_cdc_assets(
            tables=tables if tables is not None else mysql.discover_tables(),
            server_name=mysql.server_name,
            **(assets_options or {}),
        )
        def cdc(context: dg.AssetExecutionContext, mysql: MySqlCdcResource, lake: CdcLakeResource):
            yield from mysql.sync(context=context, lake=lake)

        self.cdc = cdc
        self.sensor = build_mysql_cdc_sensor(cdc, **(sensor_options or {}))
        self.instance = instance if instance is not None else dg.DagsterInstance.ephemeral()
        self.resources = {"mysql": mysql, "lake": CdcLakeResource(base_uri=lake_base_uri, **lake_options)}
        self.cursor: str | None = None

    def ticks(self, **kwargs):
        """:func:`run_sensor_ticks` from the current cursor (``kwargs``: its options)."""
        result = run_sensor_ticks(
            self.sensor, self.cdc, self.resources, self.instance, cursor=self.cursor, **kwargs
        )
        self.cursor = result.cursor
        return result

    def tick_once(self) -> dg.SensorResult:
        """One sensor evaluation, running nothing; the cursor is kept as the daemon keeps it."""
        with dg.build_sensor_context(
            instance=self.instance, cursor=self.cursor, resources=self.resources
        ) as ctx:
            res = self.sensor.evaluate_tick(ctx)
        self.cursor = res.cursor or self.cursor
        return res

    def launch(self, req: dg.RunRequest, resources=None) -> dg.ExecuteInProcessResult:
        """The run of ``req`` as the daemon launches it (its tags, assets and checks), in
        process, with ``resources`` (default: the harness's); a failed run is returned."""
        selection = dg.AssetSelection.assets(*req.asset_selection).without_checks()
        if req.asset_check_keys:
            selection = selection | dg.AssetSelection.checks(*req.asset_check_keys)
        return dg.materialize(
            [self.cdc],
            resources=resources or self.resources,
            instance=self.instance,
            selection=selection,
            tags=dict(req.tags),
            raise_on_error=False,
        )


def first_materialization_metadata(runs, table: str) -> dict:
    """The metadata of the first materialization of the table asset named ``table`` (the last
    part of its key) in ``runs`` (results of in-process runs)."""
    return [
        e.event_specific_data.materialization.metadata
        for r in runs
        for e in r.get_asset_materialization_events()
        if e.asset_key.path[-1] == table
    ][0]
