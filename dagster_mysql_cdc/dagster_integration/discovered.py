"""The discovered tables of a code location, read from the server once per load of the code
location and reused by every run it launches.

``@mysql_cdc_assets(tables=mysql.discover_tables())`` (and the component) reads the captured
tables from the server when the module is imported. Dagster imports a code location in its code
server (the UI, the sensor daemon: they plan runs and select assets with those definitions) and
imports it again in every run worker. Read from the server in each run worker, the tables would
be the server's tables at the run's start, not the code location's: after a ``RENAME TABLE`` or
``DROP TABLE`` of a captured table, a run the sensor requested for the old table failed before
its first step (``DagsterInvalidSubsetError: AssetKey(s) [...] were selected, but no
AssetsDefinition objects supply these keys``), and so did every retry of that window: the capture
stalled until someone reloaded the code location (found under ``dagster dev``, 2026-12-02).

Dagster's mechanism for definitions built from external state is the code location's
*reconstruction metadata* (``DefinitionsLoadContext``; what its own integrations' state-backed
definitions use): what the code location stored while it initialized is saved with each run (its
execution plan snapshot's ``repository_load_data``) and handed to the run worker, whatever the run
launcher. :func:`discovered_once` stores the schemas there at initialization and returns them,
without asking the server, when a run worker reconstructs the code location. A reload of the code
location (UI: Deployment -> Reload, or a restart) reads the server again: that is when a renamed,
new or dropped table changes the assets, as in "Adding a table" (docs/operations.md).
"""

from __future__ import annotations

import hashlib
import json
import logging
import warnings
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ..errors import ConfigurationError, UnknownTableError
from ..source.catalog import list_tables, read_table_schemas
from ..source.connection import connect
from ..source.schema import TableSchema

log = logging.getLogger(__name__)

#: Prefix of the reconstruction metadata keys (one per distinct discovery in the code location).
METADATA_PREFIX = "dagster_mysql_cdc/discovered_tables/"


def metadata_key(identity: Mapping[str, Any]) -> str:
    """The reconstruction metadata key of one discovery: ``identity`` (JSON-able: the server,
    the filters and the explicit tables asked for) hashed, so two resources or two calls with
    other arguments in one code location keep their own tables."""
    text = json.dumps(identity, sort_keys=True, default=str)
    return METADATA_PREFIX + hashlib.sha256(text.encode()).hexdigest()[:20]


def discovered_once(identity: Mapping[str, Any], fetch: Callable[[], list[TableSchema]]) -> list[TableSchema]:
    """``fetch()`` once per initialization of the code location; its result again, not fetched,
    when a run worker reconstructs it.

    Args:
        identity: what the discovery depends on (see :func:`metadata_key`).
        fetch: reads the schemas from the server (``MySqlCdcResource.discover_tables``'s reading).

    Returns:
        The schemas: fetched now, or, in a run worker of a code location that stored them at
        its initialization, the stored ones (the tables the code server and the sensor see).
        Outside a Dagster load (a script, ``dg.materialize``, a test) they are fetched each time.

    Raises:
        whatever ``fetch`` raises (it is only called when nothing is stored).
    """
    from dagster._core.definitions.definitions_load_context import (
        DefinitionsLoadContext,
        DefinitionsLoadType,
    )

    context = DefinitionsLoadContext.get() if DefinitionsLoadContext.is_set() else None
    key = metadata_key(identity)
    if context is not None and context.load_type == DefinitionsLoadType.RECONSTRUCTION:
        stored = context.reconstruction_metadata.get(key)
        if isinstance(stored, str):
            return [TableSchema.from_dict(d) for d in json.loads(stored)]
    schemas = fetch()
    if context is not None:
        context.add_to_pending_reconstruction_metadata(key, json.dumps([s.to_dict() for s in schemas]))
    return schemas


def read_tables(resource: Any, tables: Sequence[str] | None) -> list[TableSchema]:
    """The schemas ``MySqlCdcResource.discover_tables`` returns, read from the server now (its
    arguments, errors and warnings are that method's; ``resource`` is the ``MySqlCdcResource``,
    not imported here: resources.py imports this module)."""
    # Outside a run, EnvVar fields are still unresolved: resolve them first.
    me = resource.process_config_and_initialize()
    flt = me.table_filter()
    signal = me.signal_table()
    conn = connect(me.connection_settings())
    try:
        if not tables:
            listed = list_tables(conn, flt.literal_databases())
            for message in me._unmatched_include_messages(listed):
                log.warning(message)
                warnings.warn(message, UserWarning, stacklevel=5)  # the caller of discover_tables
        if tables:
            wanted = []
            for t in tables:
                db, sep, name = t.partition(".")
                if not sep:
                    raise ConfigurationError(f"Table {t!r} must be written as 'database.table'")
                wanted.append((db, name))
            excluded = [f"{d}.{t}" for d, t in wanted if not flt.matches(d, t)]
            if excluded:
                raise UnknownTableError(
                    f"Table(s) {excluded} are excluded by the include/exclude lists; "
                    "remove them from `tables` or adjust the lists."
                )
            if signal in [f"{d}.{t}" for d, t in wanted]:
                raise ConfigurationError(
                    f"Table {signal} is the signal table (signal_data_collection): its rows are "
                    "signals and watermarks, not captured data; remove it from `tables`."
                )
        else:
            wanted = [k for k in listed if flt.matches(*k) and f"{k[0]}.{k[1]}" != signal]
        schemas = read_table_schemas(conn, wanted)
    finally:
        conn.close()
    missing = [f"{d}.{t}" for d, t in wanted if (d, t) not in schemas]
    if missing:
        raise UnknownTableError(
            f"Table(s) not found on {me.host}:{me.port}: {', '.join(missing)}. "
            "Check the names (case-sensitive) or remove them."
        )
    # the captured columns (column_include_list/column_exclude_list): what the lake will hold;
    # a policy that cannot apply (a key column left out, an unmaskable column) fails here, early
    return [me.column_policy().checked(schemas[k]) for k in wanted]
