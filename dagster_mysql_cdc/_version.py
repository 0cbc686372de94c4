"""The package version, defined once: pyproject.toml reads it (setuptools dynamic version), the
package exports it as ``dagster_mysql_cdc.__version__`` and change events carry it in
``source.version`` (Debezium's connector version field)."""

__version__ = "0.1.0"
