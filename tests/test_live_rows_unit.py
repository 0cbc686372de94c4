"""The live-row count's pure rules (sink/live_rows.py): what a batch's ops say about the count,
and which Delta commits keep the current state's rows."""

from dagster_mysql_cdc.sink.live_rows import COMPACTED, EVOLVED, keeps_rows, window_delta


def test_a_batch_changes_the_count_by_its_inserts_minus_its_deletes():
    assert window_delta({"c": 5, "u": 7, "d": 2}) == 3
    assert window_delta({"u": 4}) == 0
    assert window_delta({"d": 3}) == -3
    assert window_delta({}) == 0


def test_snapshot_reads_and_cuts_do_not_say_the_change():
    assert window_delta({"c": 1, "r": 2}) is None  # a read key may or may not be live already
    assert window_delta({"t": 1}) is None  # a cut drops every older row
    assert window_delta({"c": 1, "r": 0}) == 1  # an op with no rows says nothing


def test_only_commits_that_keep_the_rows_are_passed_over():
    for op in (
        "OPTIMIZE",
        "VACUUM START",
        "VACUUM END",
        "SET TBLPROPERTIES",
        "ADD COLUMN",
        "UPDATE FIELD METADATA",
    ):
        assert keeps_rows({"operation": op})
    assert keeps_rows({"operation": "WRITE", COMPACTED: "true"})
    assert keeps_rows({"operation": "WRITE", EVOLVED: "add columns"})
    assert keeps_rows({"operation": "WRITE", "dagster_mysql_cdc.compaction": "tail of ..."})
    assert keeps_rows({"operation": "WRITE", "dagster_mysql_cdc.rewrite": "int -> bigint"})
    for op in ("WRITE", "DELETE", "MERGE", "UPDATE", "RESTORE", "CREATE TABLE"):
        assert not keeps_rows({"operation": op})
