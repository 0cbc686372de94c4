"""Reading the captured tables downstream: the current state (Arrow, Polars, DuckDB, Spark), SQL
views for other engines, change feeds consumed exactly once, and Dagster inputs.

Everything here is exported by the package (``from dagster_mysql_cdc import read_current``);
docs/output-layout.md describes the layouts, README.md shows the patterns.
"""
