"""The capture engine, between the source/sink layers and the Dagster glue.

What a run does: a stream run (:mod:`.stream_run`: the coordinator of its windows, stopped
tables' catch-ups, follow-on windows and blocking snapshot) and a snapshot run
(:mod:`.snapshot_run`), reporting to the run's log through :class:`.run_log.RunLog`. What they
run: an initial snapshot (:mod:`.initial_snapshot`, :mod:`.split_snapshot`), a binlog window
(:mod:`.stream`: the window's coordinator and the streaming source, with the window's incremental
snapshot source in :mod:`.incremental_source`, its signal processor in :mod:`.signals`; follow-on
windows are saved by :mod:`.follow`), an incremental snapshot's chunk planning and progress
(:mod:`.incremental`), a primary-key range re-snapshot (:mod:`.ranges`), deletes of rows gone
from the source (:mod:`.absent_rows`) and the repairs of changes the binlog does not carry
(:mod:`.gaps`). :mod:`.watermark` is the DBLog watermark window they share with the asset checks.

Imports go one way: source → events → sink → engine → ``dagster_integration``; nothing here
imports Dagster.
"""
