"""Throughput benchmarks of dagster-mysql-cdc against the libraries it is built on.

``python -m bench`` (both), ``python -m bench.streaming``, ``python -m bench.snapshot``; ``--quick``
for a one-minute sanity run. Results and analysis: docs/benchmarks.md.
"""
