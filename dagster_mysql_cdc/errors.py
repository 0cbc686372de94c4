"""Exceptions raised by dagster-mysql-cdc.

Every error names the problem and the fix. Secrets (passwords, S3 secret keys) never appear in
messages: they are built from settings objects whose ``repr`` hides them.
"""

from __future__ import annotations

import re

#: Debezium ``event.processing.failure.handling.mode`` values offered (not the silent ``ignore``):
#: what a window does with an event it cannot decode (engine/stream.py; validated at load by the
#: component, which does not import the data path).
FAILURE_HANDLING_MODES = ("fail", "warn", "skip")


class CdcError(Exception):
    """Base class of all dagster-mysql-cdc errors."""


class ConfigurationError(CdcError, ValueError):
    """A setting has an invalid value, or the source server is configured in a way CDC cannot use."""


class PreflightError(ConfigurationError):
    """The source server failed one or more preflight checks (Debezium's connector validation).

    Attributes:
        problems: one human-readable line per failed check, each naming the setting and the fix.
    """

    def __init__(self, problems: list[str]):
        self.problems = list(problems)
        super().__init__(
            "MySQL/MariaDB source is not ready for change data capture:\n"
            + "\n".join(f"  - {p}" for p in self.problems)
        )


class MissingPrivilegeError(ConfigurationError):
    """The capture user lacks a privilege the server asked for (MySQL error 1227 and friends)."""


class SourceConnectionError(CdcError, ConnectionError):
    """The source server could not be reached or refused the credentials."""


class SourceUnreachableError(SourceConnectionError):
    """The source server does not answer (connection refused, lost or timed out): a restart, a
    failover or an outage, not a setting; waiting may cure it, changing the settings does not."""


class UnknownTableError(ConfigurationError):
    """A requested table does not exist on the source server (or is excluded by the filters)."""


class SinkError(CdcError):
    """Writing or committing to the lake failed."""


class LakeUnavailableError(SinkError, ConnectionError):
    """The lake's object store does not answer (connection refused or timed out, HTTP 5xx): an
    outage, not a setting. A run that meets it fails and its window is retried (with backoff);
    nothing committed is lost."""


class ValueConversionError(CdcError, ValueError):
    """A source value cannot be converted to its Debezium representation (e.g. a TIME beyond
    24 h with ``time_precision_mode=connect``), and ``event_processing_failure_handling_mode`` is
    ``fail`` (Debezium ``event.processing.failure.handling.mode``).

    The message names the table, the column and the position (binlog ``file:pos row n`` of a
    change event, or the snapshot position and the row's key), never the value itself (it may be
    sensitive), and the fix.

    Attributes:
        table: ``database.table``.
        column: the column (``before.``/``after.`` prefixed for a change event's image).
        position: where the value is.
    """

    def __init__(self, table: str, column: str, position: str, reason: str):
        self.table, self.column, self.position = table, column, position
        super().__init__(
            f"A value of {table} column {column} at {position} cannot be converted ({reason}). "
            "Change the type mapping option that rejects it (e.g. time_precision_mode), or set "
            "event_processing_failure_handling_mode='warn' or 'skip' to leave such rows out (reported "
            "in the run's metadata), then re-snapshot the table to repair the lake."
        )


#: An error label at the start of a message: ``Class: `` or Python's ``package.module.Class: ``
#: (``traceback.format_exception_only``, which Dagster's ``SerializableErrorInfo.message`` holds).
_LABEL = re.compile(r"^(?:[A-Za-z_]\w*\.)*(?P<cls>[A-Za-z_]\w*(?:Error|Exception|Exit|Interrupt|Failure)):\s")


def error_text(cls_name: str | None, message: str | None) -> str:
    """``"<Class>: <message>"``, labelled once.

    A message that starts with an error label already (a wrapped error's text, e.g.
    ``SinkError("SinkError: ...")``, or Python's ``"package.module.Class: ..."``) keeps that inner
    label (the cause) without the module path, instead of getting a second one
    (``"SinkError: SinkError: ..."``).
    """
    msg = (message or "").strip()
    m = _LABEL.match(msg)
    if m:
        return msg[m.start("cls") :]
    return f"{cls_name}: {msg}" if cls_name else msg


def describe(error: BaseException, limit: int | None = None) -> str:
    """``"<Class>: <message>"`` of ``error`` (:func:`error_text`), cut to ``limit`` characters."""
    text = error_text(type(error).__name__, str(error))
    return text if limit is None else text[:limit]
