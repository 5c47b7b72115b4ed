"""proflake on Apache Spark (the ``proflake[spark]`` extra; docs/spark.md).

- ``register(spark, store)``: the store's committed snapshot as Spark temporary views, with the convenience
  views, under the names the DuckDB side uses.
- ``SparkProfiles(spark, store)``: every fetch method answered on Spark, equal to ``Profiles``'s answers.
- ``SparkPool``: the parse executor that runs ingest's parsing in Spark tasks
  (``ingest(..., executor="spark")``; etl/proflake/workers/sparkpool.py).
- ``proflake.spark.sqlgen``: generates queries/spark/*.sql from queries/*.sql (needs sqlglot).

pyspark is imported only by what runs on Spark, never by ``import proflake``.
"""

from __future__ import annotations

from proflake.spark.profiles import SparkProfiles
from proflake.spark.tables import register, spark_query_text
from proflake.workers.sparkpool import DEFAULT_SPARK_MIN_FILES, SparkPool

__all__ = ["DEFAULT_SPARK_MIN_FILES", "SparkPool", "SparkProfiles", "register", "spark_query_text"]
