"""Source connection settings, server introspection and preflight checks.

Preflight follows the Debezium MySQL connector's setup requirements ("Setting up MySQL": enable the
binlog, ``binlog_format=ROW``, ``binlog_row_image=FULL``, user privileges SELECT, RELOAD, SHOW
DATABASES, REPLICATION SLAVE, REPLICATION CLIENT, LOCK TABLES) plus what python-mysql-replication
needs to name columns (``binlog_row_metadata=FULL``) and refuses MySQL 8.0.20+ binlog transaction
compression, whose payload events the library silently drops.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import pymysql

from ..errors import (
    MissingPrivilegeError,
    PreflightError,
    SourceConnectionError,
    SourceUnreachableError,
    UnknownTableError,
)
from ..events import BinlogPosition
from .catalog import list_tables
from .tls import check_ssl_mode, preferred_context, ssl_context
from .tls import describe as describe_tls

#: The grant that gives the capture user every privilege it needs (Debezium MySQL connector, "Creating a user").
GRANT_ADVICE = (
    "GRANT SELECT, RELOAD, SHOW DATABASES, REPLICATION SLAVE, REPLICATION CLIENT, "
    "LOCK TABLES ON *.* TO <user>; (or the least-privilege grants of your mode, "
    "docs/operations.md 'Least-privilege grants')"
)

#: Server errors meaning "this user may not do that": ER_SPECIFIC_ACCESS_DENIED_ERROR (1227),
#: ER_DBACCESS_DENIED_ERROR (1044), ER_TABLEACCESS_DENIED_ERROR (1142).
_PRIVILEGE_ERRORS = (1227, 1044, 1142)


def raise_for_missing_privilege(error: BaseException, user: str, doing: str, conn: Any = None) -> None:
    """Turn a server's access-denied error into :class:`MissingPrivilegeError` with the ``GRANT``
    the preflight advises; return (so the caller re-raises) for any other error.

    Args:
        error: the exception caught (pymysql's errors carry ``(code, message)``).
        user: the capture user, named in the message.
        doing: what was attempted, e.g. ``"reading the binlog (REPLICATION SLAVE)"``.
        conn: the session that was refused, if still open: roles granted to the user but not
            enabled in it are named, with the ``SET DEFAULT ROLE`` that enables them
            (:func:`role_hint`).

    Raises:
        MissingPrivilegeError: ``error`` is an access-denied error.
    """
    args = getattr(error, "args", ())
    if isinstance(error, pymysql.err.MySQLError) and args and args[0] in _PRIVILEGE_ERRORS:
        reason = args[1] if len(args) > 1 else str(error)
        raise MissingPrivilegeError(
            f"User {user!r} lacks a privilege for {doing}: the server said ({args[0]}) {reason}. "
            f"Grant the capture privileges as root: {GRANT_ADVICE}{role_hint(conn) if conn is not None else ''}"
        ) from None


# Privileges the connector needs, with the MariaDB 10.5+ names that imply them.
_PRIV_ALIASES = {
    "REPLICATION SLAVE": {"REPLICATION SLAVE", "REPLICATION REPLICA"},
    "REPLICATION CLIENT": {"REPLICATION CLIENT", "BINLOG MONITOR"},
    "SELECT": {"SELECT"},
    "RELOAD": {"RELOAD"},
    "LOCK TABLES": {"LOCK TABLES"},
}


@dataclass(frozen=True)
class ConnectionSettings:
    """How to reach the source server.

    Attributes:
        host: server host name or IP.
        port: TCP port (MySQL default 3306).
        user: account used for snapshot queries and the binlog dump.
        password: its password; hidden from ``repr`` and from every error message.
        connect_timeout: seconds to wait for the TCP connection and handshake.
        read_timeout: seconds a single read may block (``None``: no limit); snapshots of large
            tables stream, so this bounds a stalled server, not a long query.
        ssl_mode: Debezium ``database.ssl.mode``: ``disabled``, ``preferred`` (default: TLS when
            the server offers it), ``required``, ``verify_ca``, ``verify_identity`` (see
            :mod:`dagster_mysql_cdc.source.tls`). Applies to every connection: snapshot, binlog
            stream, signals and watermarks, checks.
        ssl_ca: CA certificate(s) to verify the server with (path or PEM text).
        ssl_cert, ssl_key: client certificate and key (paths or PEM text); hidden from ``repr``.
    """

    host: str = "127.0.0.1"
    port: int = 3306
    user: str = "root"
    password: str = field(default="", repr=False)
    connect_timeout: int = 10
    read_timeout: int | None = None
    ssl_mode: str = "preferred"
    ssl_ca: str | None = field(default=None, repr=False)
    ssl_cert: str | None = field(default=None, repr=False)
    ssl_key: str | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        check_ssl_mode(self.ssl_mode)

    def _tls_kwargs(self) -> dict[str, Any]:
        """pymysql's TLS arguments for ``ssl_mode`` (pymysql's own default is ``preferred``)."""
        if self.ssl_mode == "disabled":
            return {"ssl_disabled": True}
        if self.ssl_mode == "preferred" and not self.ssl_cert:
            return {}
        # an SSLContext makes pymysql require TLS: "SSL is required but the server doesn't support it"
        return {"ssl": ssl_context(self.ssl_mode, self.ssl_ca, self.ssl_cert, self.ssl_key)}

    def pymysql_kwargs(self) -> dict[str, Any]:
        """Keyword arguments for :func:`pymysql.connect` (UTC session, utf8mb4, autocommit)."""
        kw: dict[str, Any] = dict(
            host=self.host,
            port=int(self.port),
            user=self.user,
            password=self.password,
            charset="utf8mb4",
            autocommit=True,
            connect_timeout=self.connect_timeout,
            init_command="SET time_zone = '+00:00'",
        )
        if self.read_timeout:
            kw["read_timeout"] = self.read_timeout
        kw.update(self._tls_kwargs())
        return kw

    def replication_settings(self) -> dict[str, Any]:
        """``connection_settings`` for ``pymysqlreplication.BinLogStreamReader``."""
        return {
            "host": self.host,
            "port": int(self.port),
            "user": self.user,
            "passwd": self.password,
            "connect_timeout": self.connect_timeout,
            **self._tls_kwargs(),
        }

    def describe(self) -> str:
        """``user@host:port`` (no password), for messages."""
        return f"{self.user}@{self.host}:{self.port}"

    def describe_tls(self) -> str:
        """``ssl_mode=...`` and the CA's source (never key material), for messages."""
        return describe_tls(self.ssl_mode, self.ssl_ca)


class Connection(pymysql.connections.Connection):
    """pymysql's connection, with the TLS context of ``ssl_mode=preferred`` (pymysql's default:
    no TLS options) built once per process (:func:`.tls.preferred_context`); pymysql builds one
    per connection, loading the system's CA bundle, which was a quarter of a run's time when a
    run connected once per table."""

    def _create_ssl_ctx(self, sslp: Any) -> Any:
        if isinstance(sslp, dict) and not sslp:
            return preferred_context()
        return super()._create_ssl_ctx(sslp)  # type: ignore[misc]


#: client error codes of a server that does not answer (can't connect, unknown host, gone away,
#: lost during a query): :class:`~..errors.SourceUnreachableError`
UNREACHABLE_CODES = (2003, 2005, 2006, 2013)


def connect(settings: ConnectionSettings, **overrides: Any) -> pymysql.connections.Connection:
    """Open a pymysql connection with the session in UTC.

    Raises:
        SourceConnectionError: the server is unreachable or rejects the credentials; the message
            names the account and what to check, never the password.
    """
    kw = settings.pymysql_kwargs()
    kw.update(overrides)
    try:
        return Connection(**kw)
    except pymysql.err.OperationalError as e:
        code = e.args[0] if e.args else None
        tls_problem = _tls_error(settings, code, str(e.args[-1]) if e.args else "")
        if tls_problem:
            raise SourceConnectionError(tls_problem) from None
        if code == 1045:
            hint = ""
            if settings.ssl_mode == "disabled":
                # MariaDB answers a plaintext login to a require_secure_transport=ON server with 1045
                hint = (
                    " If the password is right, the server may require TLS (require_secure_transport=ON): "
                    "the connection is plaintext because ssl_mode=disabled; set ssl_mode to required, "
                    "verify_ca or verify_identity."
                )
            raise SourceConnectionError(
                f"Access denied for {settings.describe()}: the user name or password is wrong. "
                "Fix the `user`/`password` of the MySQL CDC resource (password usually comes from "
                f"an environment variable, e.g. EnvVar('CDC_MYSQL_PASSWORD')).{hint}"
            ) from None
        if code in UNREACHABLE_CODES:
            raise SourceUnreachableError(
                f"Cannot reach the MySQL/MariaDB server at {settings.host}:{settings.port} "
                f"({_scrub(str(e.args[-1]), settings)}). Check `host`/`port` and that the server "
                "is running (locally: `make infra`)."
            ) from None
        raise SourceConnectionError(
            f"Connecting to {settings.describe()} failed: {_scrub(str(e), settings)}"
        ) from None


def _tls_error(settings: ConnectionSettings, code: Any, text: str) -> str | None:
    """A clear message for a TLS failure (what failed, which setting, the fix), else ``None``."""
    where = f"{settings.host}:{settings.port} ({settings.describe_tls()})"
    if code == 3159 or "insecure transport" in text:  # MySQL: require_secure_transport=ON
        return (
            f"The server at {where} requires TLS (require_secure_transport=ON) but ssl_mode="
            f"{settings.ssl_mode} connected in plaintext: set ssl_mode to required, verify_ca or verify_identity."
        )
    if "SSL is required but the server doesn't support it" in text:
        return (
            f"ssl_mode={settings.ssl_mode} requires TLS, but the server at {settings.host}:{settings.port} "
            "does not offer it: enable TLS on the server (ssl_cert/ssl_key in its my.cnf) or lower "
            "ssl_mode to preferred/disabled."
        )
    if "CERTIFICATE_VERIFY_FAILED" in text or "certificate verify failed" in text:
        reason = text.split("certificate verify failed:", 1)[-1].split("(_ssl.c")[0].strip(" :)")
        if "mismatch" in reason.lower():
            return (
                f"TLS host name check failed for {where}: {reason}. The server's certificate is not "
                f"issued for '{settings.host}': set `host` to a name the certificate lists, or use "
                "ssl_mode=verify_ca to check the CA only."
            )
        return (
            f"TLS certificate verification failed for {where}: {reason}. Set ssl_ca to the CA "
            "certificate that signed the server's certificate (path or PEM text)."
        )
    if "[SSL" in text or "SSLError" in text or "WRONG_VERSION_NUMBER" in text:
        return f"TLS handshake with {where} failed: {text}"
    return None


def _scrub(text: str, settings: ConnectionSettings) -> str:
    return text.replace(settings.password, "***") if settings.password else text


@dataclass(frozen=True)
class ServerInfo:
    """Facts about the source server read once per connection.

    Attributes:
        version: ``SELECT VERSION()``.
        is_mariadb: MariaDB (GTID ``domain-server-seq``) rather than MySQL (``uuid:1-N``).
        server_id: the server's ``@@server_id`` (Debezium ``source.server_id`` of snapshot events).
        variables: the replication-related global variables, lower-cased names.
    """

    version: str
    is_mariadb: bool
    server_id: int
    variables: dict[str, str]

    @property
    def gtid_enabled(self) -> bool:
        if self.is_mariadb:
            return True  # MariaDB always writes GTID events
        return self.variables.get("gtid_mode", "OFF").upper() == "ON"


_VARS = (
    "log_bin",
    "binlog_format",
    "binlog_row_image",
    "binlog_row_metadata",
    "binlog_transaction_compression",
    "gtid_mode",
    "server_id",
    "binlog_annotate_row_events",
    "binlog_rows_query_log_events",
    "expire_logs_days",
    "binlog_expire_logs_seconds",
)


def server_info(conn: Any) -> ServerInfo:
    """Read version, flavour and replication variables of the connected server."""
    with conn.cursor() as cur:
        cur.execute("SELECT VERSION(), @@server_id")
        version, server_id = cur.fetchone()
        ph = ",".join(["%s"] * len(_VARS))
        cur.execute(f"SHOW GLOBAL VARIABLES WHERE Variable_name IN ({ph})", _VARS)
        variables = {str(k).lower(): str(v) for k, v in cur.fetchall()}
    return ServerInfo(
        version=str(version),
        is_mariadb="mariadb" in str(version).lower(),
        server_id=int(server_id),
        variables=variables,
    )


def current_position(conn: Any, info: ServerInfo) -> BinlogPosition:
    """The server's current binlog position and executed GTID set.

    Uses ``SHOW BINARY LOG STATUS`` (MySQL 8.2+) or ``SHOW MASTER STATUS`` (MySQL < 8.2, MariaDB),
    and ``@@gtid_binlog_pos`` (MariaDB) / ``Executed_Gtid_Set`` (MySQL) for the GTID set
    (Debezium MySQL connector, snapshot step 4 "read the current binlog position").

    Raises:
        PreflightError: binary logging is off (the status statement returns no row).
    """
    with conn.cursor(pymysql.cursors.DictCursor) as cur:
        row = None
        for stmt in ("SHOW MASTER STATUS", "SHOW BINARY LOG STATUS"):
            try:
                cur.execute(stmt)
                row = cur.fetchone()
                break
            except pymysql.err.ProgrammingError:
                continue  # MySQL 8.4 removed SHOW MASTER STATUS
            except pymysql.err.MySQLError as e:
                raise_for_missing_privilege(
                    e,
                    conn.user.decode() if isinstance(conn.user, bytes) else str(conn.user),
                    "reading the binlog position (REPLICATION CLIENT, BINLOG MONITOR on MariaDB)",
                    conn,
                )
                raise
        if not row:
            raise PreflightError(
                [
                    "Binary logging is disabled (log_bin=OFF): start the server with "
                    "`log_bin=<basename>` (and server_id) so changes can be captured."
                ]
            )
        gtid: str | None
        if info.is_mariadb:
            cur.execute("SELECT @@GLOBAL.gtid_binlog_pos AS g")
            gtid = (cur.fetchone() or {}).get("g") or None
        else:
            gtid = (row.get("Executed_Gtid_Set") or "").replace("\n", "") or None
    return BinlogPosition(file=row["File"], pos=int(row["Position"]), gtid_set=gtid)


def binlog_files(conn: Any) -> list[tuple[str, int]]:
    """``SHOW BINARY LOGS``: ``[(file name, size in bytes)]`` oldest first.

    Raises:
        MissingPrivilegeError: the user lacks REPLICATION CLIENT (BINLOG MONITOR on MariaDB).
    """
    with conn.cursor() as cur:
        try:
            cur.execute("SHOW BINARY LOGS")
        except pymysql.err.MySQLError as e:
            raise_for_missing_privilege(
                e,
                conn.user.decode() if isinstance(conn.user, bytes) else str(conn.user),
                "listing the binlog files (REPLICATION CLIENT, BINLOG MONITOR on MariaDB)",
                conn,
            )
            raise
        return [(r[0], int(r[1])) for r in cur.fetchall()]


def _grant_lines(conn: Any) -> list[str]:
    """The current session's GRANT lines, its enabled roles' included.

    MariaDB: ``SHOW GRANTS`` without ``FOR`` lists the user's grants and those of the enabled
    role and the roles granted to it (``SHOW GRANTS FOR CURRENT_USER()`` lists only the
    ``GRANT <role> TO`` line). MySQL 8: ``SHOW GRANTS FOR CURRENT_USER() USING <the active
    roles>`` (``CURRENT_ROLE()``), since plain ``SHOW GRANTS`` leaves role privileges out. A
    server that refuses the role query gets the user's own grants (MySQL 5.7 has no roles).
    """
    with conn.cursor() as cur:
        server = str(conn.get_server_info() or "")
        try:
            if "mariadb" in server.lower():
                cur.execute("SHOW GRANTS")
            else:
                cur.execute("SELECT CURRENT_ROLE()")
                row = cur.fetchone()
                active = str(row[0]) if row and row[0] else "NONE"
                if active.upper() == "NONE":
                    cur.execute("SHOW GRANTS FOR CURRENT_USER()")
                else:
                    cur.execute(f"SHOW GRANTS FOR CURRENT_USER() USING {active}")
        except pymysql.err.MySQLError:
            cur.execute("SHOW GRANTS FOR CURRENT_USER()")
        return [str(r[0]) for r in cur.fetchall()]


#: ``GRANT `role`[@`host`], ... TO ...`` (a role granted, no privilege: no `` ON ``).
_ROLE_GRANT = re.compile(r"^GRANT ((?:`[^`]+`(?:@`[^`]*`)?(?:,\s*)?)+) TO ", re.IGNORECASE)


def _granted_privileges(conn: Any) -> tuple[set[str], dict[str, set[str]]]:
    """(global privileges, {database: privileges}) of the current session from its GRANT lines
    (:func:`_grant_lines`: the user's and its enabled roles').

    SHOW GRANTS text is server output (``GRANT a, b ON `db`.* TO ...``), read per line.
    """
    glob: set[str] = set()
    per_db: dict[str, set[str]] = {}
    pat = re.compile(r"^GRANT (.+?) ON (.+?) TO ", re.IGNORECASE)
    for line in _grant_lines(conn):
        m = pat.match(line)
        if not m:
            continue
        privs = {p.strip().upper() for p in m.group(1).split(",")}
        if "ALL PRIVILEGES" in privs or "ALL" in privs:
            privs |= {a for names in _PRIV_ALIASES.values() for a in names}
        obj = m.group(2).strip()
        if obj in ("*.*",):
            glob |= privs
        else:
            db = obj.split(".")[0].strip("`")
            per_db.setdefault(db.replace("\\_", "_"), set()).update(privs)
    return glob, per_db


def role_hint(conn: Any) -> str:
    """A sentence naming the roles granted to the session's user that are not enabled in it,
    with the statement that enables the first as its default role (``""``: none)."""
    roles = _roles_not_enabled(conn)
    if not roles:
        return ""
    try:
        name, _, host = info_user(conn).rpartition("@")
    except pymysql.err.MySQLError:
        return ""
    return (
        f" Roles granted to it are not enabled in its sessions ({', '.join(roles)}): "
        f"SET DEFAULT ROLE {roles[0]} FOR '{name}'@'{host}'; (a role's privileges count only when enabled)."
    )


def _roles_not_enabled(conn: Any) -> list[str]:
    """Roles granted to the current user that give this session nothing: none is enabled
    (MariaDB ``CURRENT_ROLE()`` NULL, MySQL ``NONE``). Best effort: ``[]`` on any error."""
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT CURRENT_ROLE()")
            row = cur.fetchone()
            if row and row[0] and str(row[0]).upper() != "NONE":
                return []
            cur.execute("SHOW GRANTS FOR CURRENT_USER()")
            lines = [str(r[0]) for r in cur.fetchall()]
    except pymysql.err.MySQLError:
        return []
    roles: list[str] = []
    for line in lines:
        m = _ROLE_GRANT.match(line)
        if m and " ON " not in line.upper():
            roles += [r.strip() for r in m.group(1).split(",") if r.strip()]
    return roles


def binlog_setting_problems(info: ServerInfo) -> tuple[list[str], list[str]]:
    """The server's binlog settings that a capture cannot stream with (:func:`preflight`'s binlog
    checks, over the variables :func:`server_info` read: no query).

    Returns:
        ``(problems, warnings)``: one line per setting to change, each naming the setting, its
        value and the fix; warnings that do not block capture.
    """
    problems: list[str] = []
    warnings: list[str] = []
    v = info.variables
    if v.get("log_bin", "OFF").upper() not in ("ON", "1"):
        problems.append(
            "log_bin is OFF: binary logging is disabled. Start the server with "
            "`log_bin=<basename>` and a `server_id` (it cannot be changed at runtime)."
        )
    if v.get("binlog_format", "").upper() != "ROW":
        problems.append(
            f"binlog_format is {v.get('binlog_format', 'unknown')!r}, must be 'ROW': "
            "SET GLOBAL binlog_format = 'ROW' (and binlog_format=ROW in my.cnf)."
        )
    if v.get("binlog_row_image", "").upper() != "FULL":
        problems.append(
            f"binlog_row_image is {v.get('binlog_row_image', 'unknown')!r}, must be 'FULL' "
            "(before/after images need every column): SET GLOBAL binlog_row_image = 'FULL'."
        )
    if "binlog_row_metadata" in v:
        if v["binlog_row_metadata"].upper() != "FULL":
            problems.append(
                f"binlog_row_metadata is {v['binlog_row_metadata']!r}, must be 'FULL' "
                "(column names and types in the binlog): SET GLOBAL binlog_row_metadata = 'FULL'."
            )
    else:
        warnings.append(
            "The server has no binlog_row_metadata variable (MySQL < 8.0.1 / MariaDB < 10.5): "
            "column names come from the schema history only."
        )
    if v.get("binlog_transaction_compression", "OFF").upper() in ("ON", "1"):
        problems.append(
            "binlog_transaction_compression is ON: compressed transaction payloads cannot be "
            "decoded by python-mysql-replication and would be lost. "
            "SET GLOBAL binlog_transaction_compression = OFF."
        )
    return problems, warnings


def preflight(
    conn: Any,
    info: ServerInfo,
    tables: Sequence[tuple[str, str]] = (),
    *,
    need_streaming: bool = True,
    need_lock: bool = True,
) -> list[str]:
    """Check that the server and user can run a Debezium-style capture.

    Args:
        conn: open connection as the capture user.
        info: :func:`server_info` of that connection.
        tables: ``(database, table)`` pairs that must exist.
        need_streaming: also check the binlog settings (False for a plain ``initial_only``
            snapshot, which reads no binlog; the position is still recorded if available).
        need_lock: the snapshot takes a read lock (``snapshot.locking.mode`` ``minimal`` or
            ``extended``): RELOAD, or LOCK TABLES on the tables' databases, is required. ``False``
            for ``snapshot.locking.mode=none``, which needs neither.

    Returns:
        Warnings that do not block capture (e.g. variables the server does not have).

    Raises:
        PreflightError: listing every failed check, each with the setting to change and how.
        UnknownTableError: a requested table does not exist.
    """
    problems, warnings = binlog_setting_problems(info) if need_streaming else ([], [])
    glob, per_db = _granted_privileges(conn)
    dbs = sorted({db for db, _ in tables})

    def has(priv: str, db: str | None = None) -> bool:
        names = _PRIV_ALIASES[priv]
        if glob & names:
            return True
        return db is not None and bool(per_db.get(db, set()) & names)

    missing: list[str] = []
    if need_streaming:
        for p in ("REPLICATION SLAVE", "REPLICATION CLIENT"):
            if not has(p):
                missing.append(p + (" (BINLOG MONITOR on MariaDB)" if p == "REPLICATION CLIENT" else ""))
    for db in dbs:
        if not has("SELECT", db):
            missing.append(f"SELECT on `{db}`")
    if need_lock and not (has("RELOAD") or all(has("LOCK TABLES", db) for db in dbs)):
        missing.append("RELOAD or LOCK TABLES (needed for the snapshot's read lock)")
    if missing:
        problems.append(
            f"User {info_user(conn)} lacks privileges: {', '.join(missing)}. {GRANT_ADVICE}{role_hint(conn)}"
        )
    if problems:
        raise PreflightError(problems)
    check_tables_exist(conn, tables)
    return warnings


def info_user(conn: Any) -> str:
    with conn.cursor() as cur:
        cur.execute("SELECT CURRENT_USER()")
        return str(cur.fetchone()[0])


def check_tables_exist(conn: Any, tables: Iterable[tuple[str, str]]) -> None:
    """Raise :class:`UnknownTableError` naming every requested table that does not exist."""
    tables = list(tables)
    if not tables:
        return
    existing = set(list_tables(conn, sorted({db for db, _ in tables})))
    missing = [f"{db}.{t}" for db, t in tables if (db, t) not in existing]
    if missing:
        raise UnknownTableError(
            f"Table(s) not found on the source server: {', '.join(missing)}. Check the spelling "
            "(names are case-sensitive on Linux) or remove them from `tables`."
        )


def read_server_info(settings: ConnectionSettings, wait_seconds: float = 0.0) -> ServerInfo:
    """:func:`server_info` of the server ``settings`` name, over one short connection of its own.

    ``wait_seconds``: while the server does not answer (a restart or a failover takes seconds),
    try again every second for up to this long before raising.

    Raises:
        SourceUnreachableError: the server did not answer (within ``wait_seconds``).
        SourceConnectionError: the server refuses the credentials (:func:`connect`).
    """
    deadline = time.monotonic() + max(0.0, wait_seconds)
    while True:
        try:
            conn = connect(settings)
            try:
                return server_info(conn)
            except pymysql.err.OperationalError as e:
                if not (e.args and e.args[0] in UNREACHABLE_CODES):
                    raise
                raise SourceUnreachableError(
                    f"The MySQL/MariaDB server at {settings.host}:{settings.port} went away "
                    f"({_scrub(str(e.args[-1]), settings)})."
                ) from None
            finally:
                conn.close()
        except SourceUnreachableError:
            if time.monotonic() >= deadline:
                raise
            time.sleep(1.0)
