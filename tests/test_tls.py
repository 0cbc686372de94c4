"""TLS to the source (Debezium ``database.ssl.mode``) against a real MariaDB that serves TLS only.

The instance is started by ``infra/mariadb.sh start --instance tls --tls``: certificates made by
openssl (a CA, a server certificate for the DNS name ``localhost`` only, a client certificate) and
``require_secure_transport=ON``. Capture works over ``verify_ca`` and ``verify_identity``
(snapshot, binlog stream, checks all open their connections with the same settings); every
misconfiguration fails with a message naming the setting and the fix.
"""

from __future__ import annotations

import dataclasses
import os
import subprocess
from pathlib import Path

import pymysql
import pytest
from conftest import CDC_PASSWORD, CDC_USER, ROOT, ROOT_PASSWORD
from deltalake import DeltaTable
from sensor_harness import SensorDriven

from dagster_mysql_cdc import ConfigurationError, MySqlCdcResource, SourceConnectionError
from dagster_mysql_cdc.sink.read import read_current
from dagster_mysql_cdc.source.binlog import BinlogReader, RowsBatch
from dagster_mysql_cdc.source.connection import ConnectionSettings, connect, current_position, server_info
from dagster_mysql_cdc.source.tls import ssl_context

pytestmark = pytest.mark.integration

TLS_PORT = int(os.environ.get("CDC_MYSQL_TLS_PORT", "3311"))
INFRA_DIR = Path(os.environ.get("CDC_INFRA_DIR", ROOT / ".infra"))
TLS_DIR = INFRA_DIR / "mariadb-tls" / "tls"


@pytest.fixture(scope="module")
def tls_server():
    """The TLS-only instance; yields the directory of its certificates. Stopped afterwards."""
    args = ["bash", "infra/mariadb.sh"]
    opts = ["--instance", "tls", "--port", str(TLS_PORT), "--tls"]
    subprocess.run(args + ["start"] + opts, cwd=ROOT, check=True)
    try:
        yield TLS_DIR
    finally:
        subprocess.run(args + ["stop", "--instance", "tls"], cwd=ROOT, check=False)


def settings(host: str = "localhost", **kw) -> ConnectionSettings:
    return ConnectionSettings(host=host, port=TLS_PORT, user=CDC_USER, password=CDC_PASSWORD, **kw)


def cipher(conn: pymysql.connections.Connection) -> str:
    with conn.cursor() as cur:
        cur.execute("SHOW SESSION STATUS LIKE 'Ssl_cipher'")
        row = cur.fetchone()
    return row[1] if row else ""


def other_ca(tmp_path: Path) -> Path:
    """A CA that did not sign the server's certificate."""
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=other CA",
         "-keyout", str(tmp_path / "k.pem"), "-out", str(tmp_path / "ca.pem")],
        check=True, capture_output=True,
    )  # fmt: skip
    return tmp_path / "ca.pem"


# -- connections ------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "mode,host",
    [
        ("verify_identity", "localhost"),
        ("verify_ca", "127.0.0.1"),
        ("required", "127.0.0.1"),
        ("preferred", "127.0.0.1"),
    ],
)
def test_tls_modes_connect_encrypted(tls_server, mode, host):
    ca = str(tls_server / "ca.pem") if mode.startswith("verify") else None
    conn = connect(settings(host, ssl_mode=mode, ssl_ca=ca))
    try:
        assert cipher(conn), f"{mode}: the connection is not encrypted"
    finally:
        conn.close()


def test_ca_and_client_certificate_as_pem_text(tls_server):
    """Key material can come from an environment variable as PEM text instead of a path."""
    s = settings(
        ssl_mode="verify_identity",
        ssl_ca=(tls_server / "ca.pem").read_text(),
        ssl_cert=(tls_server / "client-cert.pem").read_text(),
        ssl_key=(tls_server / "client-key.pem").read_text(),
    )
    conn = connect(s)
    try:
        assert cipher(conn)
    finally:
        conn.close()
    shown = repr(s)
    assert "BEGIN" not in shown and "PRIVATE" not in shown, "key material must not appear in repr"


def test_disabled_against_a_tls_only_server_names_the_setting(tls_server):
    with pytest.raises(SourceConnectionError) as e:
        connect(settings(ssl_mode="disabled"))
    msg = str(e.value)
    assert "require_secure_transport" in msg and "ssl_mode=disabled" in msg
    assert CDC_PASSWORD not in msg


def test_wrong_ca_fails_clearly(tls_server, tmp_path):
    with pytest.raises(SourceConnectionError) as e:
        connect(settings(ssl_mode="verify_ca", ssl_ca=str(other_ca(tmp_path))))
    msg = str(e.value)
    assert "TLS certificate verification failed" in msg and "ssl_ca" in msg, msg


def test_wrong_host_name_fails_clearly_and_verify_ca_accepts_it(tls_server):
    ca = str(tls_server / "ca.pem")
    with pytest.raises(SourceConnectionError) as e:
        connect(settings("127.0.0.1", ssl_mode="verify_identity", ssl_ca=ca))
    msg = str(e.value)
    assert "host name check failed" in msg and "'127.0.0.1'" in msg and "verify_ca" in msg, msg
    connect(settings("127.0.0.1", ssl_mode="verify_ca", ssl_ca=ca)).close()


def test_required_against_a_server_without_tls_fails_clearly():
    """The main test instance serves no TLS (have_ssl=DISABLED): ``required`` must not fall back."""
    from conftest import MYSQL_HOST, MYSQL_PORT

    s = ConnectionSettings(
        host=MYSQL_HOST, port=MYSQL_PORT, user="root", password=ROOT_PASSWORD, ssl_mode="required"
    )
    with pytest.raises(SourceConnectionError) as e:
        connect(s)
    assert "does not offer it" in str(e.value) and "ssl_mode" in str(e.value)
    # preferred (the default) still connects, in plaintext
    conn = connect(dataclasses.replace(s, ssl_mode="preferred"))
    try:
        assert cipher(conn) == ""
    finally:
        conn.close()


def test_binlog_stream_over_tls(tls_server):
    """python-mysql-replication's dump connection uses the same TLS settings."""
    s = settings(ssl_mode="verify_identity", ssl_ca=str(tls_server / "ca.pem"))
    root = dataclasses.replace(s, user="root", password=ROOT_PASSWORD)
    conn = connect(root)
    try:
        info = server_info(conn)
        start = current_position(conn, info)
        with conn.cursor() as cur:
            cur.execute("DROP DATABASE IF EXISTS tls_probe")
            cur.execute("CREATE DATABASE tls_probe")
            cur.execute("CREATE TABLE tls_probe.t (id INT PRIMARY KEY, v VARCHAR(10))")
            cur.execute("INSERT INTO tls_probe.t VALUES (1, 'over tls')")
        end = current_position(conn, info)
    finally:
        conn.close()
    reader = BinlogReader(s, server_id=4711, start=start, end=end, is_mariadb=info.is_mariadb)
    rows = [e for e in reader if isinstance(e, RowsBatch) and e.table == "t"]
    assert rows and rows[-1].rows[-1]["values"]["v"] == "over tls"


# -- the capture, end to end ------------------------------------------------------------------
@pytest.mark.spark
def test_capture_over_verify_identity(tls_server, local_storage):
    """Snapshot + a streamed window through the sensor, every connection over verified TLS."""
    ca = str(tls_server / "ca.pem")
    root_settings = dataclasses.replace(
        settings(ssl_mode="verify_identity", ssl_ca=ca), user="root", password=ROOT_PASSWORD
    )
    root = connect(root_settings)
    db = "tls_capture"
    try:
        with root.cursor() as cur:
            cur.execute(f"DROP DATABASE IF EXISTS {db}")
            cur.execute(f"CREATE DATABASE {db}")
            cur.execute(f"CREATE TABLE {db}.t (id INT PRIMARY KEY, v VARCHAR(20))")
            cur.execute(f"INSERT INTO {db}.t VALUES (1,'a'),(2,'b')")
        mysql = MySqlCdcResource(
            host="localhost", port=TLS_PORT, user=CDC_USER, password=CDC_PASSWORD, server_name=db,
            database_include_list=[db], ssl_mode="verify_identity", ssl_ca=ca, stream_follow_seconds=0.0,
        )  # fmt: skip
        cdc = SensorDriven(mysql, local_storage.base_uri)
        cdc.ticks()
        with root.cursor() as cur:
            cur.execute(f"UPDATE {db}.t SET v='b2' WHERE id=2")
            cur.execute(f"INSERT INTO {db}.t VALUES (3,'c')")
            cur.execute(f"DELETE FROM {db}.t WHERE id=1")
        ticks = cdc.ticks()
        assert ticks.runs, "no stream window ran"
        state = read_current(local_storage, local_storage.uri(db, db, "t", "state")).to_pylist()
        live = sorted((r["id"], r["v"]) for r in state if not r["__deleted"])
        assert live == [(2, "b2"), (3, "c")]
        ops = DeltaTable(local_storage.uri(db, db, "t", "changelog")).to_pyarrow_table(columns=["op"])
        assert sorted(ops.column("op").to_pylist()) == ["c", "d", "r", "r", "u"]
    finally:
        with root.cursor() as cur:
            cur.execute(f"DROP DATABASE IF EXISTS {db}")
        root.close()


# -- settings ---------------------------------------------------------------------------------
def test_bad_settings_name_the_setting(tmp_path):
    with pytest.raises(ConfigurationError, match="ssl_mode 'verify' is not one of"):
        ConnectionSettings(ssl_mode="verify")
    with pytest.raises(ConfigurationError, match="ssl_ca: cannot load the CA certificate"):
        ssl_context("verify_ca", ca=str(tmp_path / "missing.pem"))
    with pytest.raises(ConfigurationError, match="ssl_key is set without ssl_cert"):
        ssl_context("required", key="-----BEGIN PRIVATE KEY-----\nx\n-----END PRIVATE KEY-----\n")
    with pytest.raises(ConfigurationError, match="ssl_cert/ssl_key: cannot load") as e:
        ssl_context("required", cert="-----BEGIN CERTIFICATE-----\nnot a cert\n-----END CERTIFICATE-----\n")
    assert "not a cert" not in str(e.value)
    assert ssl_context("disabled") is None
