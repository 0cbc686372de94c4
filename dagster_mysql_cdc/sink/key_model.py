"""The key model a state (and tail) table records: its key columns, as a Delta table property.

A table batch (:mod:`.table_batch`) records the primary-key columns it wrote the state with
(:data:`KEY_PROPERTY`); a batch keyed otherwise starts the state over, and every reader of the
current state (:mod:`.read`, :mod:`.row_counts`, the downstream reads) resolves the tail by the
key recorded here (a keyless table, ``[]``: every column is the key, rows carry ``__count``).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from deltalake import DeltaTable

#: Table property of a state (and tail) table: the JSON list of its key columns (``[]``: keyless,
#: every column is the key). A batch keyed otherwise starts the state over.
KEY_PROPERTY = "dagster_mysql_cdc.primary_key"


def recorded_key(dt: DeltaTable | None) -> list[str] | None:
    """The key columns a state or tail table records (:data:`KEY_PROPERTY`), ``None``: none."""
    if dt is None:
        return None
    raw = dt.metadata().configuration.get(KEY_PROPERTY)
    return None if raw is None else list(json.loads(raw))


def key_columns_of(state_dt: DeltaTable | None, tail_dt: DeltaTable | None) -> list[str] | None:
    """The primary-key column names recorded in the tail's (else the state's) Delta metadata, or
    ``None`` for a keyless table or when neither table exists yet."""
    key = recorded_key(tail_dt) if tail_dt is not None else None
    if key is None and state_dt is not None:
        key = recorded_key(state_dt)
    return key
