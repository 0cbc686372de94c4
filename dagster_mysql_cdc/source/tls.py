"""TLS to the source server, with the Debezium MySQL connector's ``database.ssl.mode`` semantics.

| ``ssl_mode``        | TLS                               | server certificate checked against | host name checked |
|---------------------|-----------------------------------|------------------------------------|-------------------|
| ``disabled``        | never                             | -                                  | -                 |
| ``preferred``       | when the server offers it         | nothing                            | no                |
| ``required``        | always; refuses a plaintext server | nothing                           | no                |
| ``verify_ca``       | always                            | ``ssl_ca`` (else the system CAs)   | no                |
| ``verify_identity`` | always                            | ``ssl_ca`` (else the system CAs)   | yes               |

Key material (``ssl_ca``, ``ssl_cert``, ``ssl_key``) is a file path or the PEM text itself, so a
``dg.EnvVar`` can carry either. PEM text given for the client certificate or key is written to a
private (0600) temporary file for the duration of :func:`ssl_context`, because Python's ``ssl``
loads client certificates from files only. None of it is ever logged or put in metadata.
"""

from __future__ import annotations

import functools
import os
import ssl
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Literal

from ..errors import ConfigurationError

SslMode = Literal["disabled", "preferred", "required", "verify_ca", "verify_identity"]
#: Debezium ``database.ssl.mode`` values, weakest first.
SSL_MODES: tuple[str, ...] = ("disabled", "preferred", "required", "verify_ca", "verify_identity")
_PEM_MARK = "-----BEGIN"


def check_ssl_mode(mode: str) -> SslMode:
    """Returns ``mode`` if it is a ``database.ssl.mode`` value.

    Raises:
        ConfigurationError: another value, naming the allowed ones.
    """
    if mode not in SSL_MODES:
        raise ConfigurationError(
            f"ssl_mode {mode!r} is not one of {', '.join(SSL_MODES)} (Debezium database.ssl.mode)"
        )
    return mode  # type: ignore[return-value]


def is_pem(value: str) -> bool:
    """Whether ``value`` is PEM text rather than a path."""
    return _PEM_MARK in value


@contextmanager
def _as_file(value: str) -> Iterator[str]:
    if not is_pem(value):
        yield value
        return
    fd, path = tempfile.mkstemp(prefix="cdc-tls-", suffix=".pem")
    try:
        with os.fdopen(fd, "w", encoding="ascii") as f:
            f.write(value)
        yield path
    finally:
        os.unlink(path)


def ssl_context(
    mode: str,
    ca: str | None = None,
    cert: str | None = None,
    key: str | None = None,
) -> ssl.SSLContext | None:
    """The client TLS context for ``mode``; ``None`` for ``disabled``. Built once per process and
    arguments (and files' modification times: a rotated certificate is read again): a context
    loads the system's CA bundle, tens of milliseconds, and every connection of a run would pay it.

    Args:
        mode: a ``database.ssl.mode`` value (see the module table).
        ca: CA certificate(s) that signed the server certificate: path or PEM text
            (``database.ssl.truststore`` in Debezium, as PEM instead of a Java keystore).
        cert, key: client certificate and private key for servers that require X509 accounts
            (``database.ssl.keystore``): paths or PEM text; ``cert`` without ``key`` means the key
            is in the same file.

    Raises:
        ConfigurationError: unknown mode, an unreadable/invalid CA, certificate or key file (the
            message names the setting, never the key's content).
    """
    mode = check_ssl_mode(mode)
    if mode == "disabled":
        return None
    return _cached_context(mode, ca, cert, key, _mtimes(ca, cert, key))


def preferred_context() -> ssl.SSLContext:
    """The TLS context pymysql builds for a connection without TLS options (``ssl_mode=preferred``:
    TLS when the server offers it, nothing verified), built once per process instead of once per
    connection."""
    return _cached_preferred()


@functools.lru_cache(maxsize=1)
def _cached_preferred() -> ssl.SSLContext:
    ctx = ssl.create_default_context()
    ctx.verify_flags &= ~getattr(ssl, "VERIFY_X509_STRICT", 0)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    return ctx


def _mtimes(*values: str | None) -> tuple[float | None, ...]:
    """Modification times of the arguments that are file paths (``None`` for PEM text, unset,
    or a missing file: its error comes from the context's construction)."""
    out: list[float | None] = []
    for v in values:
        try:
            out.append(os.path.getmtime(v) if v and not is_pem(v) else None)
        except OSError:
            out.append(None)
    return tuple(out)


@functools.lru_cache(maxsize=16)
def _cached_context(
    mode: str, ca: str | None, cert: str | None, key: str | None, _mtimes: tuple
) -> ssl.SSLContext:
    verify = mode in ("verify_ca", "verify_identity")
    ctx = ssl.create_default_context(ssl.Purpose.SERVER_AUTH)
    ctx.check_hostname = False
    if verify:
        ctx.verify_mode = ssl.CERT_REQUIRED
        # MySQL/MariaDB's auto-generated CAs often lack extensions that Python 3.13's strict
        # X.509 checks require; the chain is still verified (as pymysql does).
        ctx.verify_flags &= ~getattr(ssl, "VERIFY_X509_STRICT", 0)
        if ca:
            try:
                if is_pem(ca):
                    ctx.load_verify_locations(cadata=ca)
                else:
                    ctx.load_verify_locations(cafile=ca)
            except (OSError, ssl.SSLError) as e:
                where = "the PEM text given" if is_pem(ca) else repr(ca)
                raise ConfigurationError(
                    f"ssl_ca: cannot load the CA certificate from {where}: {e.__class__.__name__}: "
                    f"{e}. Give the path (or PEM text) of the CA that signed the server's certificate."
                ) from None
        ctx.check_hostname = mode == "verify_identity"
    else:
        ctx.verify_mode = ssl.CERT_NONE
    if cert:
        try:
            with _as_file(cert) as cert_file, _as_file(key) if key else _none() as key_file:
                ctx.load_cert_chain(cert_file, key_file)
        except (OSError, ssl.SSLError) as e:
            raise ConfigurationError(
                f"ssl_cert/ssl_key: cannot load the client certificate or key "
                f"({e.__class__.__name__}: {getattr(e, 'strerror', None) or e.args[-1]}). "
                "Give a PEM certificate and its matching unencrypted PEM key (paths or PEM text)."
            ) from None
    elif key:
        raise ConfigurationError("ssl_key is set without ssl_cert: give the client certificate too")
    return ctx


@contextmanager
def _none() -> Iterator[None]:
    yield None


def describe(mode: str, ca: str | None) -> str:
    """``ssl_mode=...`` plus where the CA comes from, for messages (no key material)."""
    if mode in ("verify_ca", "verify_identity"):
        src = "PEM text" if ca and is_pem(ca) else (ca or "the system CAs")
        return f"ssl_mode={mode}, CA {src}"
    return f"ssl_mode={mode}"
