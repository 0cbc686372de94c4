"""Which captured table a downstream reader means: a lake, a server and a table named as a user
names it (``"inventory.orders"``, ``("inventory", "orders")``, the table asset's key).

Every public read (:mod:`.current`, :mod:`.changes`, :mod:`.views`) starts here, so a table is
named the same way everywhere and a wrong name fails with one clear error that lists what the lake
holds. Nothing here starts Spark or imports Dagster (an asset key is read by its ``path``).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import ConfigurationError, UnknownTableError
from ..sink.layout import LakeLayout, TablePaths, dagster_name, path_segment
from ..sink.storage import StorageSettings

#: What names a lake: a path or URI (``.lake``, ``s3://bucket/prefix``), :class:`StorageSettings`,
#: or anything with ``storage_settings()`` (``CdcLakeResource``).
LakeLike = Any
#: What names a table: ``"db.table"``, ``(db, table)``, ``(server, db, table)`` or an asset key.
TableLike = Any

_SEGMENT_ESCAPE = re.compile(r"(?:@[0-9a-f]{4})+")


def segment_name(segment: str) -> str:
    """The database or table name a lake path segment stands for (the inverse of
    :func:`~..sink.layout.path_segment`: ``@`` + 4 hex digits is one UTF-16 code unit)."""

    def decode(m: re.Match) -> str:
        units = bytes.fromhex(m.group(0).replace("@", ""))
        return units.decode("utf-16-be", errors="surrogatepass")

    return _SEGMENT_ESCAPE.sub(decode, segment)


def lake_storage(lake: LakeLike) -> StorageSettings:
    """The :class:`StorageSettings` of ``lake`` (a base URI, settings, or a lake resource).

    Raises:
        ConfigurationError: ``lake`` is none of these.
    """
    if isinstance(lake, StorageSettings):
        return lake
    if isinstance(lake, str):
        return StorageSettings(base_uri=lake)
    settings = getattr(lake, "storage_settings", None)
    if callable(settings):
        return settings()
    raise ConfigurationError(
        f"lake={lake!r}: pass the lake's base URI ('.lake', 's3://bucket/prefix'), a StorageSettings "
        "or the CdcLakeResource"
    )


@dataclass(frozen=True)
class CapturedTable:
    """One captured table of a lake.

    Attributes:
        storage: the lake.
        server: the logical server name (Debezium ``topic.prefix``; the asset key's first part).
        database / table: the source names (as MySQL spells them).
        paths: the table's Delta tables (``changelog``, ``state``, ``state_tail``).
    """

    storage: StorageSettings
    server: str
    database: str
    table: str

    @property
    def paths(self) -> TablePaths:
        return LakeLayout(self.storage, self.server).table(self.database, self.table)

    @property
    def name(self) -> str:
        """``db.table`` (Debezium's data collection name)."""
        return f"{self.database}.{self.table}"

    @property
    def qualified_name(self) -> str:
        """``server.db.table``: the name positions and metadata keys use."""
        return f"{self.server}.{self.database}.{self.table}"

    def __str__(self) -> str:
        return self.qualified_name


def _children(storage: StorageSettings, uri: str) -> list[str]:
    from pyarrow import fs

    try:
        infos = storage.pyarrow_filesystem().get_file_info(fs.FileSelector(storage.fs_path(uri)))
    except (FileNotFoundError, OSError):
        return []
    return sorted(i.base_name for i in infos if i.type == fs.FileType.Directory)


def servers(lake: LakeLike) -> list[str]:
    """The logical servers a lake holds: the folders below its root with a ``_schema_history``
    or a captured table (``<server>/<db>/<table>/state`` ...)."""
    storage = lake_storage(lake)

    def is_server(s: str) -> bool:
        below = _children(storage, storage.uri(s))
        if "_schema_history" in below:
            return True
        return any(
            d in _TABLE_DATASETS
            for db in below
            if not db.startswith("_")
            for t in _children(storage, storage.uri(s, db))
            for d in _children(storage, storage.uri(s, db, t))
        )

    return [s for s in _children(storage, storage.root) if not s.startswith("_") and is_server(s)]


def _resolve_server(storage: StorageSettings, server: str | None) -> str:
    if server:
        return server
    found = servers(storage)
    if len(found) == 1:
        return found[0]
    if not found:
        raise UnknownTableError(
            f"the lake at {storage.root} ({storage.location()}) holds no captured table yet: check "
            "the lake URI, or snapshot the tables first"
        )
    raise ConfigurationError(
        f"the lake at {storage.root} holds several servers ({', '.join(found)}): pass server=... "
        "(or name the table by its asset key [server, database, table])"
    )


_TABLE_DATASETS = ("state", "state_tail", "changelog")


def captured_tables(lake: LakeLike, server: str | None = None) -> list[CapturedTable]:
    """Every table of ``server`` that the lake holds (a ``state``, ``state_tail`` or
    ``changelog``), sorted by database and table.

    Raises:
        ConfigurationError: ``server`` is not given and the lake holds several servers.
    """
    storage = lake_storage(lake)
    srv = _resolve_server(storage, server)
    out = []
    for db_seg in _children(storage, storage.uri(srv)):
        if db_seg.startswith("_"):
            continue
        for t_seg in _children(storage, storage.uri(srv, db_seg)):
            if any(d in _TABLE_DATASETS for d in _children(storage, storage.uri(srv, db_seg, t_seg))):
                out.append(CapturedTable(storage, srv, segment_name(db_seg), segment_name(t_seg)))
    return out


def _parts(table: TableLike) -> tuple[str | None, str, str, bool]:
    """``(server or None, database, table, given as an asset key)``."""
    path = getattr(table, "path", None)
    if path is not None and not isinstance(table, str):  # an AssetKey
        parts = list(path)
        if len(parts) < 3:
            raise ConfigurationError(
                f"asset key {parts} is not a captured table's key ([server, database, table]); "
                "name the table as 'db.table' with server=..."
            )
        return parts[-3], parts[-2], parts[-1], True
    if isinstance(table, str):
        db, dot, name = table.partition(".")
        if not dot or not db or not name or "." in name:
            raise ConfigurationError(
                f"table {table!r}: name it 'database.table' (one dot), or pass (database, table) "
                "when a name holds a dot"
            )
        return None, db, name, False
    if isinstance(table, Sequence) and len(table) in (2, 3) and all(isinstance(p, str) for p in table):
        return (None, *table, False) if len(table) == 2 else (*table, False)
    raise ConfigurationError(
        f"table {table!r}: pass 'database.table', (database, table), (server, database, table) or "
        "the table asset's key"
    )


def captured_table(table: TableLike, lake: LakeLike, server: str | None = None) -> CapturedTable:
    """The captured table ``table`` names in ``lake``.

    An asset key ``[server, database, table]`` (the default translator's, Dagster names of the
    database and table) is matched against the lake's tables; ``"db.table"`` and tuples take the
    source names. ``server`` defaults to the key's, else to the lake's only server.

    Raises:
        UnknownTableError: the lake holds no such table (the message lists those it holds).
        ConfigurationError: the name is malformed, or the server is ambiguous.
    """
    if isinstance(table, CapturedTable):
        return table
    storage = lake_storage(lake)
    srv, db, name, is_key = _parts(table)
    srv = _resolve_server(storage, server or srv)
    ref = CapturedTable(storage, srv, db, name)
    if _exists(ref):
        return ref
    known = captured_tables(storage, srv)
    if is_key:
        hits = [t for t in known if dagster_name(t.database) == db and dagster_name(t.table) == name]
        if len(hits) == 1:
            return hits[0]
    listed = ", ".join(t.name for t in known[:20]) + (" ..." if len(known) > 20 else "")
    raise UnknownTableError(
        f"{srv}.{db}.{name} is not in the lake at {storage.root}: it holds "
        f"{listed or 'no table of this server yet'}. Materialize (snapshot) the table first, or fix "
        "the name / server"
    )


def _exists(ref: CapturedTable) -> bool:
    s = ref.storage
    base = s.uri(ref.server, path_segment(ref.database), path_segment(ref.table))
    return any(d in _TABLE_DATASETS for d in _children(s, base))
