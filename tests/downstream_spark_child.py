"""Run in a fresh process by the downstream tests: read a lake with Spark Connect (a process that
also holds a classic session cannot build Connect columns: pyspark decides per process).

``python tests/downstream_spark_child.py <sc://url> <lake> <table,...>`` prints JSON: per table
the rows of ``read_current_spark`` and of the ``create_spark_views`` view (one view per table)."""

import json
import sys


def main(url: str, lake: str, tables: list[str]) -> None:
    import dagster_mysql_cdc as cdc
    from dagster_mysql_cdc.sink.spark_session import remote_spark_session

    spark = remote_spark_session(url)
    out = {}
    names = cdc.create_spark_views(spark, lake, tables=[f"db.{t}" for t in tables])
    for i, (t, view) in enumerate(zip(tables, names)):
        out[t] = {"view": [r.asDict() for r in spark.sql(f"SELECT * FROM `{view}`").collect()]}
        if i < 2:  # read_current_spark runs the views' query too: two tables suffice
            out[t]["read"] = [r.asDict() for r in cdc.read_current_spark(spark, f"db.{t}", lake).collect()]
    print(json.dumps(out, default=str))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3].split(","))
