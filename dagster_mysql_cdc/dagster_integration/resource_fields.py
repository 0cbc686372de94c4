"""What the two resources' config fields share (:mod:`.resources`, :mod:`.lake_resource`).

A field holding a secret is marked :data:`SECRET`; :func:`resolve` reads a field that is still an
unresolved ``dg.EnvVar`` (a resource used outside a run, e.g. at definitions load).
"""

from __future__ import annotations

from typing import Any

import dagster as dg

#: ``json_schema_extra`` of a secret field: ``MySqlCdcComponent`` turns a YAML value written
#: ``{{ env.NAME }}`` into ``dg.EnvVar("NAME")`` (read at run time, never shown in the UI).
SECRET: dict[str, Any] = {"secret": True}


def resolve(value: Any) -> Any:
    """The value of an unresolved ``dg.EnvVar`` field (a resource used outside a run)."""
    return value.get_value() if isinstance(value, dg.EnvVar) else value
