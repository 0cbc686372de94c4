"""Where everything lives in the lake: one object names every path below the lake root.

Layout below ``StorageSettings.base_uri`` (docs/output-layout.md)::

    <server>/<database>/<table>/changelog       Delta table, append-only Debezium envelopes
    <server>/<database>/<table>/state           Delta table, one row per key (latest wins), compacted
    <server>/<database>/<table>/state_tail      Delta table, the state rows of the changes since
                                                the last compaction (merge-on-read, sink/tail.py);
                                                created empty by a keyed table's first snapshot
    <server>/<database>/<table>/pk_ranges.json  primary-key ranges of the table's partitions
    <server>/_schema_history                    Delta table, schema change events
    <server>/_transactions                      Delta table, transaction metadata (BEGIN/END)
    <server>/_owner.json                        the Dagster instance that writes the prefix (sink/owner.py)
    _staging/<server>/incremental/              incremental-snapshot chunk plans and chunk files
    _staging/<server>/follow/                   follow-on windows of a following stream run

Staging file names that depend on a binlog position use :meth:`BinlogPosition.version_tag`
(the offset epoch is part of it after a failover).

``<database>`` and ``<table>`` are the real names, except for the characters a path or an object
store URL cannot carry as they are (:func:`path_segment`). The same names as Dagster names (asset
key parts, group names: :func:`dagster_name`) are here too, beside the lake's: the translator
names assets by them and the downstream reads find a table by its asset key with them.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
import uuid
from dataclasses import dataclass

from ..events import BinlogPosition
from .storage import StorageSettings

#: Characters a lake path keeps as they are, besides letters and digits (any script).
_PATH_SAFE = frozenset("_-. ")


def path_segment(name: str) -> str:
    """The lake path segment of a database or table name: the name itself when every character
    is a letter or digit (any script: ``Ünïcode``), ``_``, ``-``, ``.`` or a space, and it is not
    ``.`` or ``..``; otherwise each other character is written ``@`` + the 4 hex digits of its
    UTF-16 code unit(s), as MySQL names its own files (``special"[`]$'`` ->
    ``special@0022@005b@0060@005d@0024@0027``, ``a/b`` -> ``a@002fb``, ``..`` -> ``@002e@002e``).

    Deterministic and collision-free (``@`` itself is always encoded, so a segment decodes to one
    name), and the identity for every name that has ever been capturable (``[A-Za-z0-9_.-]``):
    existing lakes keep their paths. Encoded are ``/`` and ``\\`` (path separators), ``%``, ``?``,
    ``#`` and the other URL-special characters (delta-rs reads table locations as URLs: ``a%20b``
    or ``a[b`` break there), quotes, control characters and ``@``.
    """
    if name not in ("", ".", "..") and all(c.isalnum() or c in _PATH_SAFE for c in name):
        return name
    out = []
    for c in name:
        if (c.isalnum() or c in _PATH_SAFE) and name not in (".", ".."):
            out.append(c)
            continue
        units = c.encode("utf-16-be")
        out.extend(f"@{units[i]:02x}{units[i + 1]:02x}" for i in range(0, len(units), 2))
    return "".join(out)


_DAGSTER_NAME = re.compile(r"[A-Za-z0-9_]+")


def dagster_name(identifier: str) -> str:
    """The Dagster name of a MySQL database or table name: an asset key part and a group name.

    Dagster names must match ``^[A-Za-z0-9_]+$`` (the op outputs of a multi-asset are named after
    the asset keys, groups are names); MySQL accepts any character but U+0000 in a quoted
    identifier (``peer-dash``, ``tbl space``, ``Ünïcode``, ``special"[`]$'``). The mapping is
    deterministic and collision-free:

    * a name that already is a Dagster name is kept as it is (existing asset keys do not change);
    * any other name becomes its readable ASCII part (accents dropped, every run of other
      characters ``_``) followed by ``_`` and the first 8 hex digits of the SHA-256 of the real
      name (UTF-8): ``tbl space`` -> ``tbl_space_<8 hex>``; so two names that differ only in the
      characters Dagster does not allow (``a-b``, ``a.b``, ``a b``) get different Dagster names,
      and none of them is ``a_b``. (:func:`~..dagster_integration.translator.build_mysql_cdc_asset_specs` still refuses any two
      tables that end up with one key.)

    The real name stays everywhere else: the asset's metadata (``dagster/table_name``,
    ``dagster_mysql_cdc/database``, ``dagster_mysql_cdc/table_name``), the lake path (see
    :func:`path_segment`) and the change events' ``source.db``/``source.table``.
    """
    if _DAGSTER_NAME.fullmatch(identifier):
        return identifier
    ascii_part = unicodedata.normalize("NFKD", identifier).encode("ascii", "ignore").decode("ascii")
    readable = "_".join(p for p in re.split(r"[^A-Za-z0-9]+", ascii_part) if p)
    digest = hashlib.sha256(identifier.encode("utf-8")).hexdigest()[:8]
    return f"{readable}_{digest}" if readable else f"n_{digest}"


@dataclass(frozen=True)
class TablePaths:
    """Lake URIs of one captured table's datasets."""

    changelog: str
    state: str
    #: the state's tail: state rows of the changes since the last compaction (merge-on-read,
    #: :mod:`.tail`); ``""``: the path next to ``state``
    tail: str = ""

    def __post_init__(self) -> None:
        if not self.tail and self.state:
            object.__setattr__(self, "tail", f"{self.state}_tail")

    def delta_tables(self) -> tuple[str, str, str]:
        """The URIs of the table's three Delta tables: ``state``, ``tail``, ``changelog``."""
        return (self.state, self.tail, self.changelog)


@dataclass(frozen=True)
class LakeLayout:
    """The lake paths of one logical server (``server_name``, Debezium's ``topic.prefix``).

    Every method returns a URI in ``storage``'s scheme (``file://``-less local path or
    ``s3://bucket/...``), as :meth:`StorageSettings.uri` builds it; nothing is created.
    """

    storage: StorageSettings
    server_name: str

    def table(self, database: str, table: str) -> TablePaths:
        """Change log and state of ``database.table`` (names by :func:`path_segment`)."""
        base = self.storage.uri(self.server_name, path_segment(database), path_segment(table))
        return TablePaths(changelog=f"{base}/changelog", state=f"{base}/state")

    def state(self, database: str, table: str) -> str:
        """The current-state Delta table of ``database.table``."""
        return self.table(database, table).state

    def pk_ranges(self, database: str, table: str) -> str:
        """The JSON file of ``database.table``'s primary-key range partitions."""
        return self.storage.uri(
            self.server_name, path_segment(database), path_segment(table), "pk_ranges.json"
        )

    def schema_history(self) -> str:
        """The server's schema history Delta table."""
        return self.storage.uri(self.server_name, "_schema_history")

    def transactions(self) -> str:
        """The server's transaction metadata Delta table (``provide.transaction.metadata``)."""
        return self.storage.uri(self.server_name, "_transactions")

    def chunk_plan(self, start: BinlogPosition, state_tag: str | None = None) -> str:
        """The incremental-snapshot chunk plan of the window starting at ``start`` with the
        snapshot state tagged ``state_tag`` (``engine.incremental.state_tag``; ``None``: the
        name plans had before the tag, read for windows in flight across an upgrade)."""
        tag = f"-s{state_tag}" if state_tag else ""
        return self._staging("incremental", f"plan-{start.version_tag()}{tag}.json")

    def chunk_file(self, chunk_id: str) -> str:
        """A new (unique) Parquet file for the rows of incremental-snapshot chunk ``chunk_id``."""
        return self._staging("incremental", f"{chunk_id}-{uuid.uuid4().hex[:8]}.parquet")

    def follow_window(self, after: BinlogPosition, state_tag: str | None = None) -> str:
        """The follow-on window that starts where the window ending at ``after`` ended;
        ``state_tag``: of an empty window that only reads incremental-snapshot chunks (on an
        idle binlog every such window starts at the same position: the snapshot state tells
        them apart)."""
        tag = f"-s{state_tag}" if state_tag else ""
        return self._staging("follow", f"window-after-{after.version_tag()}{tag}.json")

    def _staging(self, kind: str, name: str) -> str:
        return self.storage.uri("_staging", self.server_name, kind, name)
