"""The capture engine, between the source/sink layers and the Dagster glue: what runs an initial
snapshot (:mod:`.initial_snapshot`), a binlog window (:mod:`.stream`, with its follow-on windows in
:mod:`.follow`), an incremental snapshot (:mod:`.incremental`), a primary-key range re-snapshot
(:mod:`.ranges`), deletes of rows gone from the source (:mod:`.absent_rows`) and the repairs of
changes the binlog does not carry (:mod:`.gaps`). :mod:`.watermark` is the DBLog watermark window
they share with the asset checks.

Imports go one way: source → events → sink → engine → ``dagster_integration``.
"""
