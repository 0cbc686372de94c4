"""What a compaction commits, in the run process or by Spark tasks (:mod:`.compaction`,
:mod:`.compaction_spark`): the commit info of the new compacted state, and the removal of the
tail files it consumed (a second commit, see :mod:`.compaction`'s docs for why two).
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Any

import pyarrow as pa

if TYPE_CHECKING:
    from deltalake import DeltaTable

log = logging.getLogger(__name__)

#: Commit info key of a compaction: the ordering key of the newest change the compacted state holds.
STATE_AS_OF = "dagster_mysql_cdc.state_as_of"
#: Commit info key of a compaction: why it ran (:meth:`.compaction.TableSizes.due`, or ``forced``).
COMPACTION_REASON = "dagster_mysql_cdc.compaction"


def compaction_commit_info(reason: str, as_of: str | None) -> dict[str, str]:
    """The custom commit info of a compaction's state commit: ``reason`` and the newest change it
    holds (``as_of``, ``epoch:file:pos:row`` from :func:`.state_rows.newest_order_key`; ``""``:
    the tail was empty)."""
    return {COMPACTION_REASON: reason, STATE_AS_OF: as_of or ""}


def remove_files(dt: DeltaTable, actions: pa.Table) -> int:
    """Remove the data files listed in ``actions`` (add actions of ``dt``) in one commit: the tail
    files a compaction consumed. Best-effort (rows left in the tail are applied again harmlessly,
    see the module docs)."""
    from deltalake import CommitProperties
    from deltalake.transaction import RemoveAction

    from .delta import COMMIT_HOOKS, wrote
    from .live_rows import COMPACTED

    if actions.num_rows == 0:
        return 0
    now = int(time.time() * 1000)
    removes: list[Any] = [
        RemoveAction(path=p, data_change=True, deletion_timestamp=now, size=int(s), partition_values={})
        for p, s in zip(actions.column("path").to_pylist(), actions.column("size_bytes").to_pylist())
    ]
    try:
        dt.update_incremental()
        dt.create_write_transaction(
            removes,
            mode="append",
            schema=pa.schema(dt.schema().to_arrow()),
            commit_properties=CommitProperties(custom_metadata={COMPACTED: "true"}),
            post_commithook_properties=COMMIT_HOOKS,
        )
        dt.update_incremental()  # the handle reads its own commit (see .delta.handle_cache)
        wrote(dt)
        return len(removes)
    except Exception as e:  # pragma: no cover - concurrent writers
        log.warning(
            "compacted tail files of %s were not removed (applied again harmlessly): %s", dt.table_uri, e
        )
        return 0
