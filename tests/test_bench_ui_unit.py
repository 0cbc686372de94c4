"""bench/dagster_ui.py: the GraphQL queries are valid for the installed dagster-webserver, and a
change counts as visible in the UI exactly when the table's latest materialization's window end
(the metadata ``position_metadata("window_end", ...)`` writes) is at or after its position.

The queries run in process against Dagster's GraphQL schema (the webserver's), on an instance
where a table asset was materialized with the metadata a window run reports.
"""

from __future__ import annotations

import textwrap

import dagster as dg
import pytest

from bench import dagster_ui
from dagster_mysql_cdc.dagster_integration.protocol import position_metadata
from dagster_mysql_cdc.events import BinlogPosition

pytest.importorskip("dagster_graphql")

LOCATION = textwrap.dedent(
    """
    import dagster as dg
    from dagster_mysql_cdc.dagster_integration.protocol import position_metadata
    from dagster_mysql_cdc.events import BinlogPosition

    @dg.asset(key=["srv", "db", "t"])
    def t():
        return dg.MaterializeResult(
            metadata={
                "rows": dg.MetadataValue.int(3),
                **position_metadata("window_start", BinlogPosition("mysql-bin.000006", 4)),
                **position_metadata("window_end", BinlogPosition("mysql-bin.000007", 4242, "0-1-9")),
            }
        )

    @dg.asset(key=["srv", "db", "u"])
    def u():
        return dg.MaterializeResult(metadata={"rows": dg.MetadataValue.int(1)})

    defs = dg.Definitions(assets=[t, u])
    """
)


def test_a_change_is_visible_once_the_latest_window_end_covers_it(tmp_path, monkeypatch):
    from dagster_graphql.test.utils import define_out_of_process_context, execute_dagster_graphql

    path = tmp_path / "location.py"
    path.write_text(LOCATION)
    with dg.instance_for_test() as instance:
        with define_out_of_process_context(str(path), None, instance) as ctx:
            # nothing materialized yet: nothing is seen
            def gql(url, query, variables=None, timeout=60):
                res = execute_dagster_graphql(ctx, query, variables)
                return res.data

            monkeypatch.setattr(dagster_ui, "graphql", gql)
            watch = dagster_ui.UiWatch("http://unused")
            watch.expect("before", ("srv", "db", "t"), "mysql-bin.000007", 4000)
            watch.expect("at", ("srv", "db", "t"), "mysql-bin.000007", 4242)
            watch.expect("after", ("srv", "db", "t"), "mysql-bin.000007", 4243)
            watch.expect("next file", ("srv", "db", "t"), "mysql-bin.000008", 4)
            watch.expect("earlier file", ("srv", "db", "t"), "mysql-bin.000006", 99999)
            watch.expect("no window end", ("srv", "db", "u"), "mysql-bin.000001", 4)
            watch.poll_once()
            assert watch.seen == {}

            from importlib.util import module_from_spec, spec_from_file_location

            spec = spec_from_file_location("bench_ui_location", path)
            assert spec is not None and spec.loader is not None
            mod = module_from_spec(spec)
            spec.loader.exec_module(mod)
            assert dg.materialize([mod.t, mod.u], instance=instance).success
            watch.poll_once()

    assert set(watch.seen) == {"before", "at", "earlier file"}
    mat = watch.seen["at"].mat
    assert mat.end == (7, 4242) and mat.kind == "window" and mat.run_id
    assert watch.latest[("srv", "db", "u")].end is None
    assert watch.pending() == ["after", "next file", "no window end"]


def test_position_key_orders_files_then_offsets():
    assert dagster_ui.position_key("mysql-bin.000009", 10**6) < dagster_ui.position_key("mysql-bin.000010", 4)
    with pytest.raises(ValueError, match="no numeric suffix"):
        dagster_ui.position_key("mysql-bin", 4)
    # the keys the harness reads are the ones the library writes
    md = position_metadata("window_end", BinlogPosition("mysql-bin.000003", 77))
    assert {"window_end_file", "window_end_pos"} <= set(md)
