"""How a snapshot run logs its tables' outcomes (engine/snapshot_run.py ``_logged``): one line
per table for a few tables, progress lines and a summary for many (each line is an event Dagster
stores), and the rows left out of a table always."""

from types import SimpleNamespace

import pytest

from dagster_mysql_cdc.engine import snapshot_run


class _Log:
    def __init__(self):
        self.lines: list[tuple[str, str]] = []

    def info(self, msg):
        self.lines.append(("info", msg))

    def warning(self, msg):
        self.lines.append(("warning", msg))


def _result(i: int, committed: bool = True, skipped_rows: int = 0):
    return SimpleNamespace(
        schema=SimpleNamespace(qualified_name=f"db.t{i:03d}"),
        write=SimpleNamespace(rows=10, state=SimpleNamespace(committed=committed)),
        position="mysql-bin.000001:4",
        rows_skipped_count=skipped_rows,
        rows_skipped=[],
    )


def test_a_few_tables_get_one_line_each():
    log = _Log()
    results = [_result(i, committed=i != 2) for i in range(3)]
    assert list(snapshot_run._logged(iter(results), log, "fail", 3)) == results
    assert log.lines == [
        ("info", "db.t000: 10 rows at mysql-bin.000001:4 (committed)"),
        ("info", "db.t001: 10 rows at mysql-bin.000001:4 (committed)"),
        ("info", "db.t002: 10 rows at mysql-bin.000001:4 (already committed, skipped)"),
    ]


def test_many_tables_get_progress_lines_and_a_summary(monkeypatch):
    n = snapshot_run.TABLE_LINES_MAX + 280
    log = _Log()
    results = [_result(i, committed=i >= 5) for i in range(n)]
    assert list(snapshot_run._logged(iter(results), log, "fail", n)) == results
    assert log.lines == [
        (
            "info",
            f"Snapshot: {n - 5} table(s) committed, 5 already committed by an earlier attempt (skipped), "
            f"{10 * n:,} rows at mysql-bin.000001:4 (each table's rows are in its materialization's metadata)",
        )
    ]
    monkeypatch.setattr(snapshot_run, "PROGRESS_SECONDS", 0.0)
    log = _Log()
    list(snapshot_run._logged(iter(results), log, "fail", n))
    progress = [m for _, m in log.lines if " done, " in m]
    assert len(progress) == n
    assert progress[-1] == f"Snapshot: {n} of {n} table(s) done, {10 * n:,} rows so far"


@pytest.mark.parametrize("tables", [3, snapshot_run.TABLE_LINES_MAX + 1])
def test_rows_left_out_are_always_logged(tables):
    log = _Log()
    list(snapshot_run._logged(iter([_result(0, skipped_rows=2)]), log, "skip", tables))
    warnings = [m for level, m in log.lines if level == "warning"]
    assert len(warnings) == 1 and "2 row(s) of db.t000" in warnings[0]
