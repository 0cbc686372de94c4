"""Command line: ``python -m dagster_mysql_cdc status --sensor <name>`` and
``python -m dagster_mysql_cdc sql-views --engine duckdb|spark|trino``.

``sql-views`` prints one SQL view per captured table giving its exact current state
(dagster_mysql_cdc/downstream/views.py; docs/output-layout.md), or with ``--create FILE``
(DuckDB) creates them in a DuckDB database file. The lake is ``--lake`` (default ``.lake``); an S3
lake takes ``--s3-endpoint`` (default ``CDC_S3_ENDPOINT`` / ``AWS_ENDPOINT_URL``) and the
credentials of ``AWS_ACCESS_KEY_ID`` / ``AWS_SECRET_ACCESS_KEY``.

Prints the capture's state and health: first the verdict, ``HEALTHY: <sensor>`` or
``UNHEALTHY: <sensor>: <cause>`` (the most urgent problem, e.g. the error the sensor's ticks
fail with), then one short line per concern (committed position and lag, whether the sensor
ticks, the last tick error, the last run failure, the retry, stopped tables, failing checks, the
run in flight, repairs and incremental snapshots, skipped signals), from the sensor's cursor,
ticks, runs, materializations and check results in the Dagster instance at ``DAGSTER_HOME``;
``--json`` prints the same as JSON (with ``healthy`` and ``problems``).

Exit status (for monitoring): 0 healthy, 1 unhealthy (a problem found: the first line names it),
2 bad usage or the state cannot be read (``DAGSTER_HOME`` unset, unknown sensor, the instance
cannot be opened).
The lag needs the source server: by default the address the cursor recorded for its offset
(the server the sensor read), else ``--host``/``--port`` (defaults ``CDC_MYSQL_HOST``,
``CDC_MYSQL_PORT``); ``--user`` (``CDC_MYSQL_USER``), password from ``CDC_MYSQL_PASSWORD``, TLS with
``--ssl-mode``/``--ssl-ca`` (``CDC_MYSQL_SSL_MODE``, ``CDC_MYSQL_SSL_CA``); ``--no-server`` skips it.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any


def main(argv: list[str] | None = None) -> int:
    """Run the command line; returns the exit status: 0 healthy, 1 unhealthy, 2 bad usage or the
    state cannot be read (:data:`.dagster_integration.status.EXIT_HEALTHY` and the others)."""
    parser = argparse.ArgumentParser(prog="python -m dagster_mysql_cdc")
    sub = parser.add_subparsers(dest="command", required=True)
    _add_status_parser(sub)
    _add_sql_views_parser(sub)
    args = parser.parse_args(argv)
    if args.command == "sql-views":
        return _sql_views(args)
    return _status(args)


def _add_status_parser(sub: Any) -> None:
    """The ``status`` command's arguments (module docs)."""
    st = sub.add_parser("status", help="the capture's state and health, read from the Dagster instance")
    st.add_argument("--sensor", required=True, help="binlog sensor name, e.g. dbserver1_cdc_binlog_sensor")
    st.add_argument(
        "--host", help="source server (default: the address recorded in the cursor, else CDC_MYSQL_HOST)"
    )
    st.add_argument(
        "--port", type=int, help="source port (default: the recorded address's, else CDC_MYSQL_PORT or 3306)"
    )
    st.add_argument("--user", default=os.environ.get("CDC_MYSQL_USER", "cdc"))
    st.add_argument(
        "--ssl-mode",
        default=os.environ.get("CDC_MYSQL_SSL_MODE", "preferred"),
        help="TLS to the source (database.ssl.mode): disabled, preferred, required, verify_ca, verify_identity",
    )
    st.add_argument(
        "--ssl-ca", default=os.environ.get("CDC_MYSQL_SSL_CA"), help="CA certificate (path or PEM)"
    )
    st.add_argument("--no-server", action="store_true", help="do not connect to the source (no lag)")
    st.add_argument("--json", action="store_true", help="print JSON instead of lines")
    st.add_argument(
        "--stale-after",
        type=float,
        default=None,
        help="report the sensor as not ticking after this many seconds without a tick "
        "(default: 4 intervals, at least 60 s)",
    )
    st.add_argument(
        "--signals-within",
        type=float,
        default=3600.0,
        help="report signals the capture skipped in the last this many seconds; they make the "
        "status unhealthy (default: 3600)",
    )


def _add_sql_views_parser(sub: Any) -> None:
    """The ``sql-views`` command's arguments (module docs)."""
    sv = sub.add_parser("sql-views", help="SQL views of the captured tables' exact current state")
    sv.add_argument("--engine", required=True, help="duckdb, spark or trino")
    sv.add_argument("--lake", default=".lake", help="the lake's base URI (.lake, s3://bucket/prefix)")
    sv.add_argument("--server", help="the logical server (default: the lake's only one)")
    sv.add_argument("--table", action="append", help="db.table (repeat; default: every captured table)")
    sv.add_argument("--catalog", default="delta", help="Trino: the delta_lake connector's catalog")
    sv.add_argument("--create", metavar="FILE", help="DuckDB: create the views in this database file")
    sv.add_argument(
        "--no-create-missing",
        action="store_true",
        help="skip tables lacking a state or state_tail (instead of creating it empty)",
    )
    sv.add_argument(
        "--s3-endpoint", default=os.environ.get("CDC_S3_ENDPOINT") or os.environ.get("AWS_ENDPOINT_URL")
    )
    sv.add_argument("--s3-region", default=os.environ.get("AWS_REGION", "us-east-1"))


def _status(args: argparse.Namespace) -> int:
    """The ``status`` command: prints the capture's status (:func:`.dagster_integration.status.read_status`)
    and returns its exit status."""
    import dagster as dg

    from .dagster_integration.status import EXIT_UNKNOWN, read_status
    from .source.connection import ConnectionSettings

    if not os.environ.get("DAGSTER_HOME"):
        print(
            "DAGSTER_HOME is not set: point it at the Dagster instance whose daemon runs the sensor",
            file=sys.stderr,
        )
        return EXIT_UNKNOWN
    settings = (
        None
        if args.no_server
        else ConnectionSettings(
            host=args.host or os.environ.get("CDC_MYSQL_HOST", "127.0.0.1"),
            port=args.port or int(os.environ.get("CDC_MYSQL_PORT", "3306")),
            user=args.user,
            password=os.environ.get("CDC_MYSQL_PASSWORD", ""),
            ssl_mode=args.ssl_mode,
            ssl_ca=args.ssl_ca,
        )
    )
    try:
        with dg.DagsterInstance.get() as instance:
            status = read_status(
                instance,
                args.sensor,
                settings=settings,
                use_recorded_address=args.host is None and args.port is None,
                stale_seconds=args.stale_after,
                signals_within=args.signals_within,
            )
    except LookupError as e:
        print(str(e).strip("'\""), file=sys.stderr)
        return EXIT_UNKNOWN
    except Exception as e:  # noqa: BLE001 - the instance cannot be read: say why, exit "unknown"
        print(
            f"Cannot read the capture's state from the Dagster instance at {os.environ['DAGSTER_HOME']}: "
            f"{type(e).__name__}: {e}",
            file=sys.stderr,
        )
        return EXIT_UNKNOWN
    print(status.to_json() if args.json else status.line())
    return status.exit_code


def _sql_views(args: argparse.Namespace) -> int:
    from .downstream.views import (
        ENGINES,
        create_duckdb_views,
        duckdb_connection,
        render_script,
        view_statements,
    )
    from .errors import CdcError
    from .sink.storage import StorageSettings

    if args.engine not in ENGINES:
        print(f"--engine {args.engine!r}: one of {', '.join(ENGINES)}", file=sys.stderr)
        return 2
    if args.create and args.engine != "duckdb":
        print("--create makes DuckDB views (Spark: dagster_mysql_cdc.create_spark_views)", file=sys.stderr)
        return 2
    try:
        storage = StorageSettings(
            base_uri=args.lake,
            s3_endpoint_url=args.s3_endpoint,
            s3_access_key_id=os.environ.get("AWS_ACCESS_KEY_ID"),
            s3_secret_access_key=os.environ.get("AWS_SECRET_ACCESS_KEY"),
            s3_region=args.s3_region,
        )
        if args.create:
            con = create_duckdb_views(
                storage, duckdb_connection(storage, args.create), server=args.server, tables=args.table
            )
            con.close()
            print(f"created the views in {args.create}")
            return 0
        views = view_statements(
            args.engine,
            storage,
            server=args.server,
            tables=args.table,
            catalog=args.catalog,
            create_missing=not args.no_create_missing,
        )
    except CdcError as e:
        print(str(e), file=sys.stderr)
        return 1
    print(render_script(views, args.engine, storage), end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
