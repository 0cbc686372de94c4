"""Per-row cost breakdown of our Python path (no profiler: plain timers over captured rows).

Used by ``bench.streaming`` and ``bench.snapshot`` after the main table: rows are captured once
(not timed), then each step of our per-row path is timed on its own, and each column's value
converter separately, in microseconds per row change. This is the evidence for where the
conversion part of the b/a gap goes.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import pyarrow as pa


def _t(fn: Callable[[], object], repeat: int = 3) -> float:
    """Best of ``repeat`` wall times of ``fn`` (a noisy 2-core machine: the least disturbed run)."""
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def _print(title: str, rows: list[tuple[str, float]], n: int, base_us: float | None) -> None:
    print(f"\n[breakdown] {title} ({n:,} row changes captured; best of 3; us per row change)")
    for label, s in rows:
        us = 1e6 * s / n
        rel = f"  = {100 * us / base_us:5.1f}% of (a)'s {base_us:.1f} us/row" if base_us else ""
        print(f"  {label:<58} {us:7.2f} us{rel}")


def streaming(
    settings,
    info,
    start,
    end,
    db: str,
    table: str,
    lake_dir: str,
    server_name: str,
    server_id: int,
    base_us: float | None,
    limit: int = 50_000,
    spark=None,
) -> None:
    """Time conversion / event building of captured binlog rows of ``db.table``."""
    from dagster_mysql_cdc.engine.row_events import add_rows as add_row_events
    from dagster_mysql_cdc.engine.table_events import TableEvents
    from dagster_mysql_cdc.sink.schema_history import SchemaHistory
    from dagster_mysql_cdc.sink.storage import StorageSettings
    from dagster_mysql_cdc.source.binlog import BinlogReader, RowsBatch
    from dagster_mysql_cdc.source.types import TableConverter, TypeOptions, value_converter

    items: list[RowsBatch] = []
    n = 0
    it = iter(BinlogReader(settings, server_id, start, end, is_mariadb=info.is_mariadb))
    try:
        for item in it:
            if isinstance(item, RowsBatch) and item.database == db and item.table == table:
                items.append(item)
                n += len(item.rows)
                if n >= limit:
                    break
    finally:
        it.close()  # type: ignore[attr-defined]
    if not n:
        return
    opts = TypeOptions()
    schema = SchemaHistory(StorageSettings(base_uri=lake_dir), server_name).catalog_at(start)[(db, table)]
    conv = TableConverter(schema, opts, "binlog")
    images = []
    for item in items:
        for r in item.rows:
            if item.op == "u":
                images += [r["before_values"], r["after_values"]]
            else:
                images.append(r["values"])

    def all_rows():
        f = conv.convert_row_dict
        for img in images:
            f(img)

    import inspect
    import tempfile

    spill = tempfile.mkdtemp(prefix="bench-spill-")
    params = inspect.signature(TableEvents).parameters
    # the library's TableEvents: (schema, options, server_name, batch_rows, spill_dir | open_sink)
    extra = {"spill_dir": spill} if "spill_dir" in params else {"open_sink": lambda schema: None}

    def add_rows():
        te = TableEvents(schema, opts, server_name, 10**9, **extra)  # never flushes here
        for item in items:
            add_row_events(te, item, None)
        return te

    te = add_rows()

    def flush():
        te.builder.to_record_batch()

    import os
    import shutil

    def spill_roundtrip():
        path = os.path.join(spill, "x.arrow")
        with pa.OSFile(path, "wb") as sink, pa.ipc.new_file(sink, built.schema) as w:
            w.write_batch(built)
        with pa.OSFile(path, "rb") as src:
            pa.ipc.open_file(src).read_all().combine_chunks()

    t_conv = _t(all_rows)
    t_add = _t(add_rows)
    t_flush = _t(flush)
    built = te.builder.to_record_batch()
    spills = "spill_dir" in extra
    t_spill = _t(spill_roundtrip) if spills else 0.0
    shutil.rmtree(spill, ignore_errors=True)
    rows = [
        (f"(reference, not on the path) convert_row_dict per value, {len(images):,} images", t_conv),
        ("_add_rows total (row dicts -> raw columns, key checks, builder)", t_add),
        ("ChangeEventBuilder.to_record_batch (column-wise conversion + envelope)", t_flush),
    ]
    if spills:
        rows.append(("spill batch to Arrow IPC file + read back", t_spill))
    raw_cols = getattr(te.builder, "_cols", None)
    if raw_cols is not None and hasattr(conv, "column_arrays"):
        # what to_record_batch spends per column (both images of every event)
        for k, col in enumerate(conv.columns):
            ac = conv._array_converters[k]
            b_vals, a_vals = raw_cols["before"][k], raw_cols["after"][k]
            rows.append(
                (
                    f"  column {col.name} {col.column_type} (column-wise)",
                    _t(lambda ac=ac, b_vals=b_vals, a_vals=a_vals: (ac(b_vals), ac(a_vals))),
                )
            )
    else:
        for col in conv.columns:
            f = value_converter(col, opts, "binlog")
            vals = [img.get(col.name) for img in images]
            rows.append(
                (f"  column {col.name} {col.column_type}", _t(lambda f=f, vals=vals: [f(v) for v in vals]))
            )
    rows += _alternatives(
        conv, [img.get("doc") for img in images], [img.get("updated") for img in images], built
    )
    _print("streaming: our per-row Python path", rows, n, base_us)
    n_cols = len(conv.columns)
    print(
        f"  (total of our path ~ {1e6 * (t_add + t_flush + t_spill) / n:.1f} us/row change over {n_cols} columns)"
    )
    if spark is not None:
        spark_steps(spark, built, ("id",), base_us)


def _alternatives(conv, docs: list, stamps: list, events: pa.RecordBatch) -> list[tuple[str, float]]:
    """Cheaper ways to do the costliest steps, timed on the same values (evidence for the report)."""
    import datetime as dt
    import json
    import os
    import tempfile

    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    out: list[tuple[str, float]] = []
    docs = [d for d in docs if isinstance(d, str)]
    try:
        import orjson

        same = sum(
            orjson.dumps(orjson.loads(d)).decode()
            == json.dumps(json.loads(d), separators=(",", ":"), ensure_ascii=False)
            for d in docs
        )
        out.append(
            (
                f"ALT doc json via orjson loads+dumps ({same}/{len(docs)} identical here)",
                _t(lambda: [orjson.dumps(orjson.loads(d)).decode() for d in docs]),
            )
        )
    except ImportError:
        pass
    ts = [v for v in stamps if isinstance(v, dt.datetime)]
    if ts:
        out.append(
            (
                "ALT updated timestamp(3): pa.array(datetimes) + pc.strftime",
                _t(lambda: pc.strftime(pa.array(ts, pa.timestamp("ms")), format="%Y-%m-%dT%H:%M:%SZ")),
            )
        )
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "x.parquet")
        out.append(
            (
                "FLOOR change-log batch -> Parquet with pyarrow (driver, snappy)",
                _t(lambda: pq.write_table(pa.Table.from_batches([events]), path, compression="snappy")),
            )
        )
    out.append(
        ("ALT state rows (image + newest per key) in Arrow, no Spark", _t(lambda: _arrow_state(events)))
    )
    print(
        f"  [arrow] change-log batch: {events.nbytes / max(1, events.num_rows):.0f} bytes per event in memory"
    )
    return out


def _arrow_state(events: pa.RecordBatch) -> pa.Table:
    """What the Spark state job computes, in Arrow: the row image (before for d/t, else after) +
    ordering columns, newest event per primary key (``id``)."""
    import pyarrow.compute as pc

    t = pa.Table.from_batches([events])
    is_del = pc.is_in(t.column("op"), value_set=pa.array(["d", "t"]))
    after = t.column("after").combine_chunks()
    before = t.column("before").combine_chunks()
    src = t.column("source").combine_chunks()
    cols = {}
    for i, f in enumerate(after.type):
        cols[f.name] = pc.if_else(is_del, before.field(i), after.field(i))
    cols["__deleted"] = is_del
    cols["__op"] = t.column("op")
    cols["__binlog_file"] = src.field("file")
    cols["__binlog_pos"] = src.field("pos")
    cols["__binlog_row"] = src.field("row")
    st = pa.table(cols)
    order = pc.sort_indices(
        st,
        sort_keys=[
            ("id", "ascending"),
            ("__binlog_file", "descending"),
            ("__binlog_pos", "descending"),
            ("__binlog_row", "descending"),
        ],
    )
    st = st.take(order)
    ids = st.column("id").combine_chunks()
    n = len(ids)
    if n == 0:
        return st
    first = pc.not_equal(ids.slice(1), ids.slice(0, n - 1))
    mask = pa.concat_arrays(
        [pa.array([True]), first.combine_chunks() if hasattr(first, "combine_chunks") else first]
    )
    return st.filter(mask)


def snapshot(
    settings, db: str, table: str, server_name: str, base_us: float | None, limit: int = 100_000
) -> None:
    """Time conversion / event building of ``limit`` scanned rows of ``db.table``."""
    import pymysql

    from dagster_mysql_cdc.events import BinlogPosition, snapshot_events
    from dagster_mysql_cdc.source.catalog import read_table_schemas
    from dagster_mysql_cdc.source.connection import connect
    from dagster_mysql_cdc.source.types import TableConverter, TypeOptions, select_expression, value_converter

    opts = TypeOptions()
    conn = connect(settings)
    sql = None
    try:
        schema = read_table_schemas(conn, [(db, table)])[(db, table)]
        sql = (
            "SELECT "
            + ", ".join(select_expression(c) for c in schema.columns)
            + f" FROM {db}.{table} LIMIT {limit}"
        )

        def fetch() -> list:
            cur = conn.cursor(pymysql.cursors.SSCursor)
            cur.execute(sql)
            out = list(cur.fetchall())
            cur.close()
            return out

        t_fetch_default = _t(fetch, 2)
        rows = fetch()
        text_rows = None
        try:
            from dagster_mysql_cdc.source.types import snapshot_decoders
        except ImportError:  # library before the text read
            snapshot_decoders = None
        if snapshot_decoders is not None:
            saved = conn.decoders
            conn.decoders = snapshot_decoders(saved)
            try:
                t_fetch_text = _t(fetch, 2)
                text_rows = fetch()
            finally:
                conn.decoders = saved
    finally:
        conn.close()
    n = len(rows)
    if not n:
        return
    conv = TableConverter(schema, opts, "pymysql")
    batch = conv.to_record_batch(rows)
    pos = BinlogPosition("mysql-bin.000001", 4)
    flags = pa.array(["true"] * n, pa.string())
    out = [
        ("fetch with pymysql's default decoders (what variant a does)", t_fetch_default),
    ]
    if text_rows is not None:
        assert conv.to_record_batch(text_rows, text_values=True).equals(batch)
        out += [
            ("fetch with snapshot_decoders (numbers/temporals as text; the library)", t_fetch_text),
            (
                "TableConverter.to_record_batch(text_values=True) (the library)",
                _t(lambda: conv.to_record_batch(text_rows, text_values=True)),
            ),
        ]
    out += [
        ("TableConverter.to_record_batch of default-decoded rows", _t(lambda: conv.to_record_batch(rows))),
        ("(reference) convert_columns, Python per value", _t(lambda: conv.convert_columns(rows))),
        (
            "snapshot_events (envelope, Arrow only)",
            _t(
                lambda: snapshot_events(
                    batch,
                    primary_key=schema.primary_key,
                    server_name=server_name,
                    server_id=1,
                    database=db,
                    table=table,
                    position=pos,
                    snapshot_flags=flags,
                )
            ),
        ),
        ("flags list (['true'] * n + pa.array)", _t(lambda: pa.array(["true"] * n, pa.string()))),
    ]
    src = text_rows if text_rows is not None else rows
    for i, col in enumerate(conv.columns):
        vals = [r[i] for r in src]
        if text_rows is not None:
            f = conv._text_array_converters[i]
            out.append(
                (
                    f"  column {col.name} {col.column_type} (column-wise, text)",
                    _t(lambda f=f, vals=vals: f(vals)),
                )
            )
        else:
            f = value_converter(col, opts, "pymysql")
            out.append(
                (f"  column {col.name} {col.column_type}", _t(lambda f=f, vals=vals: [f(v) for v in vals]))
            )
    names = list(conv.names)
    ev = snapshot_events(
        batch,
        primary_key=schema.primary_key,
        server_name=server_name,
        server_id=1,
        database=db,
        table=table,
        position=pos,
        snapshot_flags=flags,
    )
    out += _alternatives(
        conv, [r[names.index("doc")] for r in rows], [r[names.index("updated")] for r in rows], ev
    )
    _print("snapshot: our per-row Python path", out, n, base_us)


def spark_steps(spark, events: pa.RecordBatch, key: tuple[str, ...], base_us: float | None) -> None:
    """Where the Spark part of the sink goes, on one change-log batch: each step timed alone
    (best of 3, µs per event). The library's own data source and state-row functions are used."""
    import os
    import tempfile

    from dagster_mysql_cdc.events import state_schema
    from dagster_mysql_cdc.sink.lake import LakeWriter
    from dagster_mysql_cdc.sink.spark_files import FileOutput
    from dagster_mysql_cdc.sink.state_rows import newest_per_key
    from dagster_mysql_cdc.sink.state_rows import state_rows as arrow_state_rows
    from dagster_mysql_cdc.sink.storage import StorageSettings

    n = events.num_rows
    table = pa.Table.from_batches([events])
    names = [f.name for f in events.schema.field("after").type]
    with tempfile.TemporaryDirectory() as d:
        w = LakeWriter(spark, StorageSettings(base_uri=os.path.join(d, "lake")), "bench")
        manifests = os.path.join(d, "m")
        os.makedirs(manifests)
        counter = iter(range(10**6))

        def df():
            return spark.createDataFrame(table)

        after = {f.name: f for f in events.schema.field("after").type}
        st_schema = state_schema(pa.schema([after[k] for k in names]))
        base = df()
        steps = [
            ("createDataFrame(Arrow table) (driver -> JVM)", lambda: df()),
            ("  + count() (materialise in the JVM)", lambda: df().count()),
            (
                "change log: df.write noop (JVM scan only)",
                lambda: base.write.format("noop").mode("overwrite").save(),
            ),
            (
                "change log: native Spark Parquet writer (file://)",
                lambda: base.write.mode("overwrite").parquet(os.path.join(d, f"native-{next(counter)}")),
            ),
            (
                "change log, the library: Arrow IPC payload -> our Python data source -> Parquet",
                lambda: w.write_files(
                    table, [FileOutput(os.path.join(d, f"ds-{next(counter)}"), events.schema)], manifests
                ),
            ),
            (
                "first snapshot, the library: change log + state files in one payload job",
                lambda: w.write_files(
                    table,
                    [
                        FileOutput(os.path.join(d, f"ds-{next(counter)}"), events.schema),
                        FileOutput(
                            os.path.join(d, f"st-{next(counter)}"),
                            st_schema,
                            kind="state",
                            value_names=tuple(names),
                        ),
                    ],
                    manifests,
                ),
            ),
            (
                "state, the library: state rows + newest per key in Arrow",
                lambda: newest_per_key(arrow_state_rows(table, names), list(key) or names),
            ),
        ]
        timed = []
        for k, f in steps:
            try:
                timed.append((k, _t(f)))
            except Exception as e:  # a sink internal this step calls changed
                print(f"  [spark steps] skipped {k!r}: {type(e).__name__}: {str(e)[:120]}")
        _print("Spark steps of the sink on one change-log batch", timed, n, base_us)
