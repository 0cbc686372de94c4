"""Pure helpers of the stream-run verification and window selection (no services)."""

from dagster_mysql_cdc.dagster_integration.selection import window_bytes
from dagster_mysql_cdc.dagster_integration.verify import incremental_progress_metadata, transactions_between
from dagster_mysql_cdc.events import BinlogPosition


def test_transactions_between_mariadb_and_mysql_gtid_sets():
    assert transactions_between("0-1-10", "0-1-15", is_mariadb=True) == 5
    assert transactions_between("0-1-10,1-2-3", "0-1-10,1-2-7", is_mariadb=True) == 4
    assert transactions_between(None, None, is_mariadb=True) is None
    uuid = "3e11fa47-71ca-11e1-9e33-c80aa9429562"
    assert transactions_between(f"{uuid}:1-5", f"{uuid}:1-9", is_mariadb=False) == 4
    assert transactions_between(f"{uuid}:1-5", f"{uuid}:1-5:7-8", is_mariadb=False) == 2


def test_window_bytes_across_files():
    files = [("b.000001", 1000), ("b.000002", 500), ("b.000003", 200)]
    assert window_bytes(files, BinlogPosition("b.000001", 900), BinlogPosition("b.000001", 950)) == 50
    assert (
        window_bytes(files, BinlogPosition("b.000001", 900), BinlogPosition("b.000003", 40)) == 100 + 500 + 40
    )
    assert window_bytes(files, BinlogPosition("b.000000", 4), BinlogPosition("b.000003", 40)) is None


def test_incremental_progress_of_a_running_and_a_finished_table():
    state = {
        "snapshot_id": "s1",
        "tables": [{"table": "db.t", "chunks": 3, "rows": 3000, "last_key": [3000], "max_key": [10000]}],
        "done": [],
    }
    chunks = [{"table": "db.t", "rows": 1000, "key_lo": [2000], "key_hi": [3000]}]
    p = incremental_progress_metadata("db.t", state, chunks, 10_000, 1000)["incremental_snapshot"].value
    assert p["status"] == "running" and p["chunks_done"] == 3 and p["chunks_total_estimate"] == 10
    assert p["percent"] == 30.0 and p["current_key_range"] == {"after": [2000], "up_to": [3000]}
    done = incremental_progress_metadata(
        "db.t", {"snapshot_id": "s1", "tables": [], "done": ["db.t"]}, chunks, 10_000, 1000
    )
    assert (
        done["incremental_snapshot"].value["status"] == "done"
        and done["incremental_snapshot_percent"].value == 100.0
    )
    assert incremental_progress_metadata("db.other", state, chunks, None, 1000) == {}


def test_incremental_progress_of_the_window_that_finishes_the_table():
    """The chunk lines a window reports (engine/incremental_source.py) name the rows ``read`` and
    carry the table's totals after each chunk: the finishing window's progress is the table's
    whole count, not 0 (they have no ``rows`` key) nor only its own chunks."""
    line = {"chunk": "s1-6", "table": "db.t", "read": 100, "emitted": 100, "dropped": 0}
    last = {**line, "key_lo": [2500], "key_hi": None, "table_chunks": 6, "table_rows": 2600}
    done = incremental_progress_metadata("db.t", None, [last], 2600, 500)["incremental_snapshot"].value
    assert done["status"] == "done" and done["percent"] == 100.0
    assert (done["rows_done"], done["chunks_done"]) == (2600, 6)
    assert done["current_key_range"] == {"after": [2500], "up_to": None}
    # a plan saved before the totals were recorded: this window's own chunks
    old = incremental_progress_metadata("db.t", None, [line, line], 2600, 500)["incremental_snapshot"].value
    assert (old["rows_done"], old["chunks_done"]) == (200, 2)


def test_freshness_policy_allows_a_following_run_to_report_at_its_end():
    from dagster_mysql_cdc import freshness_policy_for_interval

    plain = freshness_policy_for_interval(5)
    assert (
        plain.warn_window.to_timedelta().total_seconds(),
        plain.fail_window.to_timedelta().total_seconds(),
    ) == (120, 600)
    following = freshness_policy_for_interval(5, 300.0)
    assert (
        following.warn_window.to_timedelta().total_seconds(),
        following.fail_window.to_timedelta().total_seconds(),
    ) == (420, 900)
    slow = freshness_policy_for_interval(60)
    assert (
        slow.warn_window.to_timedelta().total_seconds(),
        slow.fail_window.to_timedelta().total_seconds(),
    ) == (600, 2400)


def test_table_freshness_policy_derives_from_the_sensor_interval_by_default():
    import dagster as dg

    from dagster_mysql_cdc import freshness_policy_for_interval, mysql_cdc_assets
    from dagster_mysql_cdc.dagster_integration.protocol import BINLOG_METADATA_KEY

    def policies(**kw):
        @mysql_cdc_assets(
            tables=["db.a", "db.b"],
            server_name="srv",
            sensor_interval_seconds=5,
            **{"stream_follow_seconds": 0, **kw},
        )
        def cdc(context: dg.AssetExecutionContext):
            yield from ()

        return {
            ("binlog" if BINLOG_METADATA_KEY in (s.metadata or {}) else s.key.path[-1]): s.freshness_policy
            for s in cdc.specs
        }

    derived = freshness_policy_for_interval(5)
    on = policies()  # default: every table gets the derived policy (kept fresh by heartbeats)
    assert on["a"] == derived and on["b"] == derived and on["binlog"] == derived
    off = policies(table_freshness_policy=None)
    assert off["binlog"] == derived and off["a"] is None and off["b"] is None
    from datetime import timedelta

    mine = dg.FreshnessPolicy.time_window(fail_window=timedelta(hours=1))
    given = policies(table_freshness_policy=mine)
    assert given["a"] == mine and given["binlog"] == derived


def test_check_results_without_a_comparison():
    import dagster as dg

    from dagster_mysql_cdc.dagster_integration.checks import (
        CHECKSUM,
        ROW_COUNT,
        no_data_skipped_results,
        not_captured_results,
    )
    from dagster_mysql_cdc.dagster_integration.verify import WindowVerification, verification_failed_results

    key = dg.AssetKey(["srv", "db", "t"])
    r = not_captured_results(key, {CHECKSUM, ROW_COUNT})
    assert [x.check_name for x in r] == sorted([CHECKSUM, ROW_COUNT]) and not any(x.passed for x in r)
    assert "materialize it first" in r[0].metadata["reason"].value
    r = no_data_skipped_results(key, {ROW_COUNT})
    assert [(x.check_name, x.passed) for x in r] == [(ROW_COUNT, True)]
    assert "snapshot_mode=no_data" in r[0].metadata["skipped"].value
    r = verification_failed_results(
        [WindowVerification(key, "db", "t", "uri", {CHECKSUM, ROW_COUNT})], RuntimeError("boom")
    )
    assert [x.check_name for x in r] == sorted([CHECKSUM, ROW_COUNT])
    assert all(not x.passed and x.severity == dg.AssetCheckSeverity.WARN for x in r)
    assert r[0].metadata["error"].value == "RuntimeError: boom"


def test_results_of_a_table_gone_pending_or_not_compared():
    """Issue "Checks that never cry wolf": a table dropped or renamed away is compared with an
    empty table; a queued repair is *pending* (WARN, never a pass); a check that compared nothing
    says so (WARN, never a pass, carried over by the run's earlier result when there is one)."""
    import dagster as dg

    from dagster_mysql_cdc.dagster_integration.checks import (
        CHECKSUM,
        NOT_COMPARED,
        ROW_COUNT,
        SCHEMA,
        gone_results,
        not_compared_results,
        pending_results,
    )

    key = dg.AssetKey(["srv", "db", "t"])
    empty = gone_results(key, "db", "t", {ROW_COUNT, CHECKSUM, SCHEMA}, 0)
    assert [(r.check_name, r.passed) for r in empty] == [(CHECKSUM, True), (ROW_COUNT, True), (SCHEMA, True)]
    assert "no longer exists on the source" in empty[0].metadata["explanation"].value
    left = gone_results(key, "db", "t", {ROW_COUNT, SCHEMA}, 3)
    assert [(r.check_name, r.passed) for r in left] == [(ROW_COUNT, False), (SCHEMA, True)]
    assert left[0].metadata["lake_rows"].value == 3 and left[0].severity == dg.AssetCheckSeverity.ERROR
    pending = pending_results(key, {ROW_COUNT, CHECKSUM}, "repair r-1 of db.t (the whole table) queued: ddl")
    assert all(not r.passed and r.severity == dg.AssetCheckSeverity.WARN for r in pending)
    assert pending[0].metadata["explanation"].value.startswith("pending: repair r-1 of db.t")
    (nc,) = not_compared_results(
        key, {CHECKSUM}, "the window changed no row of this table", {"keys_compared": 0}
    )
    assert not nc.passed and nc.severity == dg.AssetCheckSeverity.WARN
    assert nc.metadata[NOT_COMPARED].value == "the window changed no row of this table"
    assert nc.metadata["keys_compared"].value == 0


def test_a_following_run_keeps_the_tail_files_of_every_window():
    """Issue "Checks that never cry wolf": a following run's checks read the rows of every key
    it changed from the tail files its windows committed; merging the windows' results kept the
    last window's files only, so keys changed earlier read as missing ("68 changed key(s)
    differ"). Files of both are kept; when one commit's are unknown, none (the current state is
    read instead)."""
    from dagster_mysql_cdc.engine.window_result import WindowResult, merge_window_results
    from dagster_mysql_cdc.sink.delta import CommitOutcome
    from dagster_mysql_cdc.sink.layout import TablePaths
    from dagster_mysql_cdc.sink.table_batch import TableWriteResult

    def window(start: int, extra: dict) -> WindowResult:
        w = TableWriteResult(
            "d",
            "t",
            1,
            {"u": 1},
            TablePaths("cl", "st"),
            CommitOutcome(True, 1, 1, 1),
            CommitOutcome(True, 1, 1, 1),
            0.1,
            extra=extra,
        )
        return WindowResult(
            BinlogPosition("b.1", start), BinlogPosition("b.1", start + 10), tables={("d", "t"): w}
        )

    both = merge_window_results(
        window(4, {"tail_files": ["p1"], "live_rows": 5}), window(14, {"tail_files": ["p2"], "live_rows": 6})
    )
    extra = both.tables[("d", "t")].extra
    assert extra["tail_files"] == ["p1", "p2"] and extra["live_rows"] == 6
    unknown = merge_window_results(window(4, {"tail_files": ["p1"]}), window(14, {"live_rows": 6}))
    assert "tail_files" not in unknown.tables[("d", "t")].extra


def test_a_failure_stays_until_a_whole_table_comparison_and_nothing_compared_never_passes():
    """Issue "Checks that never cry wolf": what a run reports for its row count / checksum
    results given the check's latest evaluated result in the instance (``_Earlier.settle``).
    A window's checksum that passes over other keys, or compares nothing, must not replace a
    divergence found before (it is carried forward, naming the queued repair); one that compares
    nothing, with no earlier comparison, is left to the full check (``None``); a whole-table
    comparison decides; an earlier failure that found no differing row (a stopped table, an
    error) is not carried."""
    from types import SimpleNamespace

    import dagster as dg
    from dagster._core.storage.asset_check_execution_record import AssetCheckExecutionRecordStatus

    from dagster_mysql_cdc.dagster_integration.check_run import _Earlier
    from dagster_mysql_cdc.dagster_integration.checks import (
        CHECKSUM,
        NOT_COMPARED,
        ROW_COUNT,
        not_compared_results,
    )
    from dagster_mysql_cdc.engine.gaps import QueuedRepair

    key = dg.AssetKey(["srv", "db", "t"])
    ERROR, WARN = dg.AssetCheckSeverity.ERROR, dg.AssetCheckSeverity.WARN

    def evaluation(name: str, passed: bool, **metadata) -> dg.AssetCheckEvaluation:
        return dg.AssetCheckEvaluation(
            asset_key=key,
            check_name=name,
            passed=passed,
            metadata=metadata,
            severity=ERROR,
        )

    def earlier(latest: dict, pending: dict | None = None) -> _Earlier:
        """An ``_Earlier`` over an instance holding ``latest[check name]`` (an evaluation)."""

        def record(ck: dg.AssetCheckKey):
            ev = latest.get(ck.name)
            if ev is None:
                return None
            event = SimpleNamespace(timestamp=1_800_000_000.0)
            return SimpleNamespace(
                status=AssetCheckExecutionRecordStatus.SUCCEEDED
                if ev.passed
                else AssetCheckExecutionRecordStatus.FAILED,
                evaluation=ev,
                event=event,
                run_id="abcdef0123456789",
                create_timestamp=event.timestamp,
            )

        def latest_by_key(cks):
            return {ck: rec for ck in cks if (rec := record(ck)) is not None}

        warned: list[str] = []
        storage = SimpleNamespace(get_latest_asset_check_execution_by_key=latest_by_key)
        context = SimpleNamespace(
            instance=SimpleNamespace(event_log_storage=storage), log=SimpleNamespace(warning=warned.append)
        )
        return _Earlier(context, pending)

    def result(name: str, passed: bool, **metadata) -> dg.AssetCheckResult:
        return dg.AssetCheckResult(asset_key=key, check_name=name, passed=passed, metadata=metadata)

    window_pass = result(
        CHECKSUM,
        True,
        scope="keys changed by the window (stream run)",
        explanation="every row the window changed equals the source's row",
    )
    (nothing,) = not_compared_results(key, {CHECKSUM}, "the window changed no row of this table")
    divergence = evaluation(CHECKSUM, False, differing_keys_sample=["(5,)"], repair="Repair queued")
    repair = QueuedRepair(
        "db.t", "r-1", "checksum_mismatch at f:2: 1 differing key(s)", "rows where `id` = 5", False
    )

    # a divergence found before stays: a window's pass over other keys, or one that compared nothing
    e = earlier({CHECKSUM: divergence}, {"db.t": repair})
    for r, seen in ((window_pass, "every row the window changed equals"), (nothing, "not compared")):
        out = e.settle(r, window=True)
        assert out is not None and not out.passed and out.severity == ERROR, out
        assert out.metadata["differing_keys_sample"].value == ["(5,)"]
        note = out.metadata["carried_forward"].value
        assert "the divergence found by run abcdef01" in note and seen in note, note
        assert "repaired (repair r-1 of db.t (rows where `id` = 5) queued" in note, note
    # ... and a whole-table comparison decides: a full pass replaces it, a full failure is reported as is
    full_pass = result(CHECKSUM, True, scope="whole table")
    assert e.full(full_pass) is full_pass
    # a new divergence found by the window is reported as is
    now = dg.AssetCheckResult(
        asset_key=key, check_name=CHECKSUM, passed=False, metadata={"differing_keys_sample": ["(6,)"]}
    )
    assert e.settle(now, window=True) is now
    # the row count (a whole-table count even on a stream run) is never carried
    count = result(ROW_COUNT, True, scope="table (stream run)")
    assert (
        earlier({ROW_COUNT: evaluation(ROW_COUNT, False, differing_keys_sample=["(5,)"])}).settle(
            count, window=True
        )
        is count
    )

    # compared nothing: the last comparison's pass stands, named as such; none: left to the full check
    out = earlier({CHECKSUM: evaluation(CHECKSUM, True, scope="whole table")}).settle(nothing, window=True)
    assert out is not None and out.passed and "passed and stands" in out.metadata["carried_forward"].value
    assert "not compared: the window changed no row" in out.metadata["carried_forward"].value
    assert earlier({}).settle(nothing, window=True) is None
    # a full check that compared nothing with no earlier result says so: WARN, never a pass
    out = earlier({}).full(nothing)
    assert not out.passed and out.severity == WARN and NOT_COMPARED in out.metadata
    # a window's pass after an earlier pass, or after a failure that found no differing row (a
    # stopped table, an error: the next comparison decides those), is this run's pass
    assert earlier({CHECKSUM: evaluation(CHECKSUM, True)}).settle(window_pass, window=True) is window_pass
    stopped = evaluation(CHECKSUM, False, explanation="the capture of this table is stopped")
    assert earlier({CHECKSUM: stopped}).settle(window_pass, window=True) is window_pass


def test_a_windows_checks_read_their_earlier_results_in_one_query():
    """A window of many tables settles each table's checksum against the check's earlier result:
    one event log query for all of them (``_Earlier.prefetch``), not one per table; a check whose
    latest record is only planned (a run that failed before evaluating it) falls back to its
    latest evaluated record; a read that fails leaves the run's results standing, with a
    WARNING."""
    from types import SimpleNamespace

    import dagster as dg
    from dagster._core.storage.asset_check_execution_record import AssetCheckExecutionRecordStatus as S

    from dagster_mysql_cdc.dagster_integration.check_run import _Earlier
    from dagster_mysql_cdc.dagster_integration.checks import CHECKSUM, ROW_COUNT

    keys = [dg.AssetCheckKey(dg.AssetKey(["srv", "db", f"t{i}"]), CHECKSUM) for i in range(300)]
    planned = keys[7]

    def rec(ck, status=S.SUCCEEDED):
        ev = dg.AssetCheckEvaluation(asset_key=ck.asset_key, check_name=ck.name, passed=True)
        return SimpleNamespace(status=status, evaluation=ev, run_id="r", create_timestamp=1.0, event=None)

    queries: list[list] = []

    def latest_by_key(cks):
        queries.append(list(cks))
        return {ck: rec(ck, S.PLANNED if ck == planned else S.SUCCEEDED) for ck in cks if ck != keys[0]}

    histories: list = []

    def history(ck, limit, status):
        histories.append(ck)
        assert limit == 1 and S.SUCCEEDED in status and S.PLANNED not in status
        return [rec(ck)]

    storage = SimpleNamespace(
        get_latest_asset_check_execution_by_key=latest_by_key, get_asset_check_execution_history=history
    )
    warned: list[str] = []
    context = SimpleNamespace(
        instance=SimpleNamespace(event_log_storage=storage), log=SimpleNamespace(warning=warned.append)
    )
    e = _Earlier(context)
    e.prefetch([*keys, keys[1]])
    assert len(queries) == 1 and len(queries[0]) == 300
    assert histories == [planned]  # only the check whose latest record is not evaluated
    assert e.latest(keys[0]) is None and e.latest(keys[1]) is not None
    assert e.latest(planned)[1].passed  # type: ignore[index]
    assert len(queries) == 1, "a prefetched check was read again"
    e.prefetch(keys)  # nothing new to read
    assert len(queries) == 1
    # which results settle against an earlier one: a window's checksum that found no new divergence
    pass_ = dg.AssetCheckResult(asset_key=keys[0].asset_key, check_name=CHECKSUM, passed=True)
    new = dg.AssetCheckResult(asset_key=keys[0].asset_key, check_name=CHECKSUM, passed=False)
    count = dg.AssetCheckResult(asset_key=keys[0].asset_key, check_name=ROW_COUNT, passed=True)
    assert _Earlier.reads(pass_, window=True) and not _Earlier.reads(pass_, window=False)
    assert not _Earlier.reads(new, window=True) and not _Earlier.reads(count, window=True)

    def broken(cks):
        raise OSError("database is locked")

    failing = _Earlier(
        SimpleNamespace(
            instance=SimpleNamespace(
                event_log_storage=SimpleNamespace(get_latest_asset_check_execution_by_key=broken)
            ),
            log=SimpleNamespace(warning=warned.append),
        )
    )
    assert failing.settle(pass_, window=True) is pass_
    assert len(warned) == 1 and "could not be read: database is locked" in warned[0], warned
