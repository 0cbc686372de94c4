"""How a window's Delta commit grows with the table's history (the ``_delta_log`` entries).

A table streamed by windows gets a commit per window (change log, state tail), and Delta keeps
every commit in ``_delta_log`` for the log retention (the vacuum sets it to
``vacuum_retention_hours``, 168 by default): at one window a second that is 600,000 entries a
table. Anything that lists the whole log on every commit makes a window's cost grow with the
table's age instead of with its changes.

For each storage (the local filesystem; SeaweedFS S3 when ``CDC_S3_ENDPOINT`` answers) and each
log size (``--sizes``, default 100 and 10,000 entries), the benchmark builds a table whose log
holds that many entries behind a checkpoint (old commits as the log retention keeps them:
``commitInfo`` entries written directly, then a checkpoint), and then commits one small Parquet
file at a time, alternating, side by side in one run:

- **library**: ``sink.delta.commit_files``, the commit every window makes (``create_write_transaction``
  with the library's post-commit hooks, :data:`dagster_mysql_cdc.sink.delta.COMMIT_HOOKS`, and the
  handle's read-back);
- **delta-rs defaults**: the same commit with delta-rs's default post-commit hooks (the expired-log
  cleanup after every commit), and the same read-back;

and prints the median and the maximum (a commit that writes a checkpoint, one in 10) of
``--rounds`` commits of each, a fresh open of the table, and how each
grows from the smallest to the largest log (ratio). Then (``--tombstones``, default 0 and
100,000) the same commit of the library on tables whose files were removed (a compaction's remove
actions, which Delta keeps in every checkpoint for ``delta.deletedFileRetentionDuration``, 7 days
by default): a checkpoint, and an open, grow with them. There the library's commit (whose
checkpoint a background thread writes, ``sink/checkpoints.py``) runs side by side with the same
commit writing the checkpoint inside every tenth commit (delta-rs's hook: the library before), each
on its own table, and the background checkpoints' count and mean time are printed. Timings are
printed, never asserted.

    python -m bench.log_growth
    python -m bench.log_growth --sizes 100 10000 100000 --no-s3
"""

from __future__ import annotations

import argparse
import io
import json
import os
import statistics
import time
import uuid
from concurrent.futures import ThreadPoolExecutor

import pyarrow as pa
import pyarrow.parquet as pq


def _storages(use_s3: bool, tmp: str):
    from dagster_mysql_cdc.sink.storage import StorageSettings

    yield "local", StorageSettings(base_uri=tmp)
    if not use_s3:
        return
    endpoint = os.environ.get("CDC_S3_ENDPOINT", "http://127.0.0.1:8333")
    s3 = StorageSettings(
        base_uri=f"s3://{os.environ.get('CDC_S3_BUCKET', 'lake')}/bench-log-growth-{uuid.uuid4().hex[:8]}",
        s3_endpoint_url=endpoint,
        s3_access_key_id=os.environ.get("AWS_ACCESS_KEY_ID", "cdc"),
        s3_secret_access_key=os.environ.get("AWS_SECRET_ACCESS_KEY", "cdc-secret"),
    )
    try:
        s3.boto3_client().list_objects_v2(Bucket=s3.base_uri[5:].split("/")[0], MaxKeys=1)
    except Exception as e:  # noqa: BLE001 - no S3 endpoint: local only
        print(f"(S3 skipped: {type(e).__name__}: {e})")
        return
    yield "s3", s3


class _Table:
    """One Delta table under ``storage`` whose log is grown to a given size."""

    def __init__(self, storage, name: str) -> None:
        from deltalake import write_deltalake

        self.storage = storage
        self.uri = f"{storage.base_uri.rstrip('/')}/{name}"
        self.fs = storage.pyarrow_filesystem()
        self.base = storage.fs_path(self.uri)
        from dagster_mysql_cdc.sink.delta import TABLE_PROPERTIES

        write_deltalake(  # as the library creates its tables: a checkpoint every 10 commits
            self.uri,
            pa.table({"a": [0]}),
            storage_options=storage.delta_storage_options(),
            configuration=TABLE_PROPERTIES,
        )
        self.version = 0
        self.batch = 0

    def put(self, rel: str, body: bytes) -> None:
        with self.fs.open_output_stream(f"{self.base}/{rel}") as fh:
            fh.write(body)

    def grow_log(self, entries: int) -> None:
        """Old commits up to version ``entries`` (as the log retention keeps them), then a checkpoint."""
        from deltalake import DeltaTable

        body = (json.dumps({"commitInfo": {"timestamp": 1, "operation": "WRITE"}}) + "\n").encode()
        todo = range(self.version + 1, entries + 1)
        with ThreadPoolExecutor(16) as ex:
            list(ex.map(lambda v: self.put(f"_delta_log/{v:020d}.json", body), todo))
        dt = DeltaTable(self.uri, storage_options=self.storage.delta_storage_options())
        dt.create_checkpoint()
        self.version = dt.version()

    def add_tombstones(self, count: int) -> None:
        """``count`` files added and removed again (as compactions leave them: Delta keeps their
        remove actions in every checkpoint for ``delta.deletedFileRetentionDuration``, 7 days), in two
        commits through the library's hooks; the files themselves are never written."""
        from deltalake.transaction import AddAction, RemoveAction

        from dagster_mysql_cdc.sink import delta

        now = int(time.time() * 1000)
        paths = [f"gone-{i}.parquet" for i in range(count)]
        dt = delta.open_table(self.storage, self.uri)
        assert dt is not None
        adds: list[AddAction | RemoveAction] = [
            AddAction(
                path=p, size=100, partition_values={}, modification_time=now, data_change=True, stats="{}"
            )
            for p in paths
        ]
        removes: list[AddAction | RemoveAction] = [
            RemoveAction(path=p, data_change=True, deletion_timestamp=now, size=100, partition_values={})
            for p in paths
        ]
        for actions in (adds, removes):
            dt.create_write_transaction(
                actions, mode="append", schema=dt.schema(), post_commithook_properties=delta.COMMIT_HOOKS
            )
            dt.update_incremental()
            delta.wrote(dt, checkpointed=True)
        dt.create_checkpoint()  # the removed files in a checkpoint, as a week of windows leaves them

    def data_file(self) -> dict:
        buf = io.BytesIO()
        pq.write_table(pa.table({"a": [1]}), buf)
        name = f"part-{uuid.uuid4().hex}.parquet"
        self.put(name, buf.getvalue())
        return {
            "path": name,
            "size": len(buf.getvalue()),
            "num_records": 1,
            "modification_time": int(time.time() * 1000),
        }

    def commit_library(self) -> float:
        from dagster_mysql_cdc.sink import delta

        f = self.data_file()
        self.batch += 1
        t0 = time.perf_counter()
        delta.commit_files(
            self.storage,
            self.uri,
            pa.schema([("a", pa.int64())]),
            [f],
            mode="append",
            app_id="bench",
            version=self.batch,
        )
        return time.perf_counter() - t0

    def commit_defaults(self) -> float:
        """The same commit with delta-rs's default post-commit hooks (and the same read-back)."""
        return self._commit_direct(None)

    def commit_inline(self) -> float:
        """The library's commit as it was before ``sink/checkpoints.py``: delta-rs writes the
        checkpoint inside every tenth commit (no expired-log cleanup), and the same read-back."""
        from deltalake import PostCommitHookProperties

        return self._commit_direct(
            PostCommitHookProperties(create_checkpoint=True, cleanup_expired_logs=False)
        )

    def _commit_direct(self, hooks) -> float:
        """One small file committed through the table's handle with ``hooks`` (``None``: delta-rs's
        defaults), the handle read back as the library does."""
        from deltalake import CommitProperties, Transaction
        from deltalake.transaction import AddAction, RemoveAction

        from dagster_mysql_cdc.sink import delta

        f = self.data_file()
        self.batch += 1
        t0 = time.perf_counter()
        dt = delta.open_table(self.storage, self.uri)
        assert dt is not None
        actions: list[AddAction | RemoveAction] = list(delta.file_actions([f]))
        dt.create_write_transaction(
            actions,
            mode="append",
            schema=dt.schema(),
            commit_properties=CommitProperties(
                app_transactions=[Transaction(app_id="bench", version=self.batch)]
            ),
            post_commithook_properties=hooks,
        )
        dt.update_incremental()
        delta.wrote(dt, checkpointed=True)
        return time.perf_counter() - t0

    def open_seconds(self) -> float:
        from deltalake import DeltaTable

        t0 = time.perf_counter()
        DeltaTable(self.uri, storage_options=self.storage.delta_storage_options())
        return time.perf_counter() - t0


def _tombstone_rows(storage, kind: str, counts: list[int], rounds: int) -> None:
    """The library's commit (its checkpoint written beside it, ``sink/checkpoints.py``) against the
    same commit with the checkpoint inside it (delta-rs's hook, the library before), alternating,
    each on its own table with ``counts`` removed files (10 log entries): median / max, what the
    background checkpoints took, and a fresh open."""
    from dagster_mysql_cdc.sink.checkpoints import CHECKPOINTS
    from dagster_mysql_cdc.sink.delta import handle_cache

    print(
        f"\n{kind}: a commit with removed files in the table, median / max of {rounds} (ms; "
        "inline: the checkpoint inside every tenth commit)"
    )
    print(
        f"{'removed files':>14} | {'library':>15} | {'inline checkpoint':>17} | {'background checkpoints':>22} | {'open':>7}"
    )
    out = []
    for n in counts:
        lib_t, inl_t = _Table(storage, f"tomb{n}"), _Table(storage, f"tomb{n}-inline")
        for t in (lib_t, inl_t):
            t.grow_log(10)
            if n:
                t.add_tombstones(n)
        lib, inl = [], []
        with handle_cache():
            lib_t.commit_library()  # each table's handle loaded first, as a running capture has it
            inl_t.commit_inline()
            CHECKPOINTS.drain()
            w0, s0 = CHECKPOINTS.written, CHECKPOINTS.seconds
            for _ in range(rounds):
                lib.append(lib_t.commit_library())
                inl.append(inl_t.commit_inline())
        CHECKPOINTS.drain()
        written, secs = CHECKPOINTS.written - w0, CHECKPOINTS.seconds - s0
        op = lib_t.open_seconds()
        out.append((statistics.median(lib), max(lib), max(inl), op))
        bg = f"{written} x {secs / max(written, 1) * 1000:.0f} ms"
        print(f"{n:>14,} | {_ms(lib):>15} | {_ms(inl):>17} | {bg:>22} | {op * 1000:>7.1f}")
    (m0, x0, i0, o0), (m1, x1, i1, o1) = out[0], out[-1]
    print(
        f"growth {counts[0]:,} -> {counts[-1]:,} removed files: library median {m1 / m0:.2f}x, "
        f"max {x1 / x0:.2f}x; inline checkpoint commit {i1 / i0:.2f}x; open {o1 / o0:.2f}x"
    )


def _ms(xs: list[float]) -> str:
    return f"{statistics.median(xs) * 1000:.1f} / {max(xs) * 1000:.1f}"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--sizes", type=int, nargs="+", default=[100, 10_000], help="log entries (ascending)")
    p.add_argument("--rounds", type=int, default=20, help="commits of each variant per size")
    p.add_argument("--no-s3", action="store_true", help="local filesystem only")
    p.add_argument(
        "--tombstones",
        type=int,
        nargs="*",
        default=[0, 100_000],
        help="then: the library's commit on a table with this many removed files (ascending; none: skip)",
    )
    args = p.parse_args(argv)
    import tempfile

    from dagster_mysql_cdc.sink.delta import handle_cache

    print(f"load (1 min): {os.getloadavg()[0]:.2f}")
    with tempfile.TemporaryDirectory(prefix="log-growth-") as tmp:
        for kind, storage in _storages(not args.no_s3, tmp):
            rows = []
            for size in sorted(args.sizes):
                t = _Table(storage, f"t{size}")
                g0 = time.monotonic()
                t.grow_log(size)
                grown = time.monotonic() - g0
                lib, dflt = [], []
                with handle_cache():  # as a window commits: one handle per table, read back after each commit
                    for _ in range(args.rounds):
                        lib.append(t.commit_library())
                        dflt.append(t.commit_defaults())
                rows.append((size, lib, dflt, t.open_seconds(), grown))
            print(
                f"\n{kind}: a commit of one small file, median / max of {args.rounds} (ms; max: a checkpoint commit)"
            )
            print(
                f"{'log entries':>12} | {'library':>15} | {'delta-rs defaults':>17} | {'open':>7} | log built in"
            )
            for size, lib, dflt, op, grown in rows:
                print(f"{size:>12,} | {_ms(lib):>15} | {_ms(dflt):>17} | {op * 1000:>7.1f} | {grown:.0f} s")
            (s0, l0, d0, o0, _), (s1, l1, d1, o1, _) = (
                (r[0], statistics.median(r[1]), statistics.median(r[2]), r[3], r[4])
                for r in (rows[0], rows[-1])
            )
            print(
                f"growth {s0:,} -> {s1:,} entries (medians): library {l1 / l0:.2f}x, "
                f"delta-rs defaults {d1 / d0:.2f}x, open {o1 / o0:.2f}x"
            )
            if args.tombstones:
                _tombstone_rows(storage, kind, sorted(args.tombstones), args.rounds)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
