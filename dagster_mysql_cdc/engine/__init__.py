"""The capture engine, between the source/sink layers and the Dagster glue.

What a run does: a stream run (:mod:`.stream_run`: the coordinator of its windows, stopped
tables' catch-ups, follow-on windows and blocking snapshot) and a snapshot run
(:mod:`.snapshot_run`), reporting to the run's log through :class:`.run_log.RunLog`. What they
run: an initial snapshot (:mod:`.initial_snapshot`, :mod:`.split_snapshot`), a binlog window
(:mod:`.window_run`: the window's coordinator, over the binlog reader of :mod:`.stream` (its
per-table batches in :mod:`.table_events`, row events in :mod:`.row_events`, transaction metadata
in :mod:`.transactions`, the result in :mod:`.window_result`), the window's incremental snapshot
source in :mod:`.incremental_source` and its signal processor in :mod:`.signals`; a backlog's
window is read by :mod:`.parallel_catchup` instead, a second driver of the same reader; the gaps
are settled by :mod:`.window_gaps`; follow-on windows are saved by :mod:`.follow`), an incremental
snapshot's progress and signals (:mod:`.incremental`) and chunks (:mod:`.incremental_chunks`),
a primary-key range re-snapshot (:mod:`.ranges`), deletes of rows gone
from the source (:mod:`.absent_rows`) and the repairs of changes the binlog does not carry
(:mod:`.gaps`). :mod:`.watermark` is the DBLog watermark window they share with the asset checks.

Imports go one way: source → events → sink → engine → ``dagster_integration``; nothing here
imports Dagster.
"""
