"""What the run of a window or snapshot the binlog sensor requests plans, and what it logs instead
(pure logic, no services): ``planned_checks_max_tables`` (default 0: every check of a sensor's run
logged as one ``AssetCheckEvaluation`` event instead of planned, output and evaluation), for the
tables' checks and the binlog asset's (issue 42)."""

from types import SimpleNamespace

import dagster as dg

from dagster_mysql_cdc import MySqlCdcResource, mysql_cdc_assets
from dagster_mysql_cdc.dagster_integration.check_run import logged_check_keys
from dagster_mysql_cdc.dagster_integration.cursor import InFlight
from dagster_mysql_cdc.dagster_integration.protocol import TABLE_CHECKS_TAG
from dagster_mysql_cdc.dagster_integration.run_requests import run_request
from dagster_mysql_cdc.dagster_integration.selection import window_selection
from dagster_mysql_cdc.events import BinlogPosition

TABLES = ["shop.a", "shop.b", "shop.c"]
BINLOG = dg.AssetKey(["srv", "binlog"])
START, END = BinlogPosition("mysql-bin.000001", 4), BinlogPosition("mysql-bin.000001", 900)


# no `from __future__ import annotations`: Dagster reads the asset function's annotations
@mysql_cdc_assets(tables=TABLES, server_name="srv")
def cdc(context: dg.AssetExecutionContext):
    yield from ()


def table(name: str) -> dg.AssetKey:
    return dg.AssetKey(["srv", "shop", name])


def resource(**options) -> MySqlCdcResource:
    return MySqlCdcResource(host="127.0.0.1", user="cdc", server_name="srv", **options)


def select(mysql: MySqlCdcResource, changed: set[tuple[str, str]]):
    return window_selection(mysql, cdc, START, END, None, changed=(changed, "look-ahead"))


def test_a_window_logs_every_check_by_default():
    sel = select(resource(), {("shop", "a")})
    assert set(sel.asset_keys) == {table("a"), BINLOG}
    assert sel.logged_checks and sel.check_keys == []  # neither the table's nor the binlog asset's
    assert "checks logged by the run (1 tables > planned_checks_max_tables=0)" in sel.reason


def test_a_window_of_at_most_planned_checks_max_tables_plans_every_check():
    sel = select(resource(planned_checks_max_tables=1), {("shop", "a")})
    assert not sel.logged_checks
    assert {(ck.asset_key, ck.name) for ck in sel.check_keys} == {
        (table("a"), "row_count_matches_source"),
        (table("a"), "checksum_matches_source"),
        (table("a"), "schema_matches_source"),
        (BINLOG, "binlog_retention"),
        (BINLOG, "changes_in_binlog"),
    }
    assert select(resource(planned_checks_max_tables=1), {("shop", "a"), ("shop", "b")}).logged_checks


def test_a_snapshot_of_more_tables_than_the_limit_plans_no_check():
    keys = [table("a"), table("b"), BINLOG]
    cheap = [
        ck
        for ck in cdc.check_keys
        if ck.name in ("schema_matches_source", "binlog_retention", "changes_in_binlog")
    ]
    snapshot = InFlight(kind="snapshot", run_key="snapshot:1")
    req = run_request(snapshot, keys, checks=cheap, binlog_key=BINLOG, logged_above=0)
    assert req.tags[TABLE_CHECKS_TAG] == "logged" and req.asset_check_keys == []
    req = run_request(snapshot, keys, checks=cheap, binlog_key=BINLOG, logged_above=2)
    assert TABLE_CHECKS_TAG not in req.tags and req.asset_check_keys is None  # every check planned


def test_a_logged_run_logs_the_checks_of_what_it_materializes_and_does_not_plan():
    def context(assets: set[dg.AssetKey], planned: set[dg.AssetCheckKey]) -> SimpleNamespace:
        return SimpleNamespace(selected_asset_keys=assets, selected_asset_check_keys=planned, assets_def=cdc)

    got = logged_check_keys(context({table("a"), BINLOG}, set()))  # type: ignore[arg-type]
    assert {(ck.asset_key, ck.name) for ck in got} == {
        (table("a"), "row_count_matches_source"),
        (table("a"), "checksum_matches_source"),
        (table("a"), "schema_matches_source"),
        (BINLOG, "binlog_retention"),
        (BINLOG, "changes_in_binlog"),
    }
    # a request from before the binlog asset's checks were logged planned them: logged once only
    planned = {dg.AssetCheckKey(BINLOG, "binlog_retention"), dg.AssetCheckKey(BINLOG, "changes_in_binlog")}
    got = logged_check_keys(context({table("a"), BINLOG}, planned))  # type: ignore[arg-type]
    assert {ck.asset_key for ck in got} == {table("a")}
    got = logged_check_keys(context({table("b")}, set()))  # type: ignore[arg-type]
    assert {(ck.asset_key, ck.name) for ck in got} == {
        (table("b"), "row_count_matches_source"),
        (table("b"), "checksum_matches_source"),
        (table("b"), "schema_matches_source"),
    }
