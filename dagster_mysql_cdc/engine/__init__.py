"""The capture engine, between the source/sink layers and the Dagster glue: what runs an initial
snapshot (:mod:`.initial_snapshot`), a binlog window (:mod:`.stream`: the coordinator and the
streaming source, with the window's incremental snapshot source in :mod:`.incremental_source`, its
signal processor in :mod:`.signals` and its follow-on windows in :mod:`.follow`), an incremental
snapshot's chunk planning and progress (:mod:`.incremental`), a primary-key range re-snapshot
(:mod:`.ranges`), deletes of rows gone from the source (:mod:`.absent_rows`) and the repairs of
changes the binlog does not carry (:mod:`.gaps`). :mod:`.watermark` is the DBLog watermark window
they share with the asset checks.

Imports go one way: source → events → sink → engine → ``dagster_integration``.
"""
