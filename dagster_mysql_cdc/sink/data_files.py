"""Reading a Delta table's data files in one schema (the run process's reads of the lake).

A table's files were written over time in the schemas it had then: a column added later is
missing from older files, a widened column has its older type there, a renamed column its older
name (:mod:`.evolution`). :func:`read_files` and :func:`read_file_parts` read the files a Delta
table's add actions list, each relabelled and converted into the one schema asked for (missing
columns null), with pyarrow on the lake's filesystem (local or S3, :mod:`.storage`). The
compaction (:mod:`.compaction`, :mod:`.compaction_spark`), the current read (:mod:`.read`,
:mod:`.live_count`) and the downstream reads use them.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pyarrow as pa

from .evolution import conform_table, relabel
from .storage import StorageSettings


def read_files(
    storage: StorageSettings,
    table_uri: str,
    paths: list[str],
    schema: pa.Schema,
    *,
    row_filter: Any = None,
) -> pa.Table:
    """The rows of data files ``paths`` (relative to ``table_uri``) in ``schema`` (each file's
    columns relabelled with the table's fields and converted, missing ones null; only ``schema``'s
    columns are read). ``row_filter(batch) -> mask`` keeps some rows (read batch by batch)."""
    parts = [
        t for part in read_file_parts(storage, table_uri, paths, schema, row_filter=row_filter) for t in part
    ]
    return pa.concat_tables(parts) if parts else schema.empty_table()


def read_file_parts(
    storage: StorageSettings,
    table_uri: str,
    paths: list[str],
    schema: pa.Schema,
    *,
    row_filter: Any = None,
) -> Iterator[list[pa.Table]]:
    """:func:`read_files` one data file at a time: yields, per file of ``paths``, its rows as a
    list of tables (record batches of up to 262,144 rows, in ``schema``), read when the consumer
    asks for them (a consumer that keeps only part of each file never holds the whole table)."""
    import pyarrow.parquet as pq

    fs = storage.pyarrow_filesystem()
    base = storage.fs_path(table_uri)
    for rel in paths:
        parts = []
        with fs.open_input_file(f"{base}/{rel}") as fh:
            pf = pq.ParquetFile(fh)
            cols = [n for n in pf.schema_arrow.names if n in schema.names]
            for b in pf.iter_batches(batch_size=262_144, columns=cols):
                t = relabel(pa.Table.from_batches([b]), schema)
                t = conform_table(t, schema)
                if row_filter is not None:
                    t = t.filter(row_filter(t))
                parts.append(t)
        yield parts
