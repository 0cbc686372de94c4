"""What a window run reported on the binlog asset, as the sensor reads it back
(``capture_runs.binlog_materializations``): among the asset's newest materializations when the run is
recent, from the run's own events otherwise; oldest first either way."""

import dagster as dg

from dagster_mysql_cdc.dagster_integration import capture_runs

BINLOG = dg.AssetKey(["srv", "binlog"])
TABLE = dg.AssetKey(["srv", "db", "t"])


def _run(instance: dg.DagsterInstance, marks: list[str], table: bool = True) -> str:
    """A run materializing the table asset (when ``table``), then the binlog asset once per mark
    (the first as its output, the others as logged events)."""

    @dg.multi_asset(specs=[dg.AssetSpec(TABLE), dg.AssetSpec(BINLOG)], can_subset=True)
    def cdc(context: dg.AssetExecutionContext):
        if TABLE in context.selected_asset_keys:
            yield dg.MaterializeResult(asset_key=TABLE)
        for i, m in enumerate(marks):
            if i == 0:
                yield dg.MaterializeResult(asset_key=BINLOG, metadata={"mark": m})
            else:
                context.log_event(dg.AssetMaterialization(asset_key=BINLOG, metadata={"mark": m}))

    keys = [TABLE, BINLOG] if marks else [TABLE]
    return dg.materialize([cdc], instance=instance, selection=keys).run_id


def _marks(instance, run_id: str) -> list[str]:
    return [m.metadata["mark"].value for m in capture_runs.binlog_materializations(instance, run_id, BINLOG)]


def test_a_recent_run_is_read_among_the_newest_and_an_old_one_from_its_events(monkeypatch):
    monkeypatch.setattr(capture_runs, "RECENT_BINLOG_MATERIALIZATIONS", 3)
    instance = dg.DagsterInstance.ephemeral()
    old = _run(instance, ["o1", "o2"])
    for i in range(4):  # newer binlog materializations of other runs
        _run(instance, [f"x{i}"])
    new = _run(instance, ["n1", "n2"])
    none = _run(instance, [])
    calls: list[str] = []
    real = instance.get_records_for_run

    def counting(*a, **kw):
        calls.append(kw.get("run_id") or a[0])
        return real(*a, **kw)

    monkeypatch.setattr(instance, "get_records_for_run", counting)
    assert _marks(instance, new) == ["n1", "n2"]
    assert _marks(instance, none) == []
    assert calls == []  # both read among the newest
    assert _marks(instance, old) == ["o1", "o2"]
    assert calls == [old]  # not among the newest 3: read from its own events
    mats = capture_runs.binlog_materializations(instance, new, BINLOG)
    assert capture_runs.reported_json(mats, "mark") == "n1"
    assert capture_runs.reported_json(mats, "missing") is None
