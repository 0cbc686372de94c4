"""The capture engine: what runs a snapshot, a binlog window, an incremental snapshot and a
primary-key range re-snapshot, between the source/sink layers and the Dagster glue.

So far it holds :mod:`.watermark` (the DBLog watermark window shared by incremental snapshots,
PK-range backfills and the asset checks); the other engine modules (``pipeline``, ``stream``,
``incremental``, ``ranges``) still sit at the package's top level (issue 14).
"""
