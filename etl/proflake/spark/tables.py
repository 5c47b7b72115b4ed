"""A store's committed snapshot as Spark tables, and the generated Spark SQL run over them.

    >>> from proflake.spark import register
    >>> register(spark, "s3://bucket/proflake-store")      # temp views: intervals, function_stats, ...
    >>> spark.sql("SELECT * FROM top_functions WHERE rank <= 10").show()

Spark reads the Parquet files the Delta log lists for the current version (``DeltaTable.file_uris()``),
so no delta-spark jar is needed (it is fetched from Maven at run time, which offline clusters cannot do).
That file list is the table exactly while the table has no deletion vectors, which proflake never writes
(deltalake's deletes rewrite files); a table that has them is refused rather than read wrong.

The views are registered only on a session whose time zone is UTC (``require_utc``): Spark's date_trunc,
its casts of text to TIMESTAMP and its Arrow results follow ``spark.sql.session.timeZone``, so the same SQL
would answer differently elsewhere. ``SparkProfiles`` runs its own queries ``in_utc`` instead.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from proflake.errors import QueryError, StoreError, UsageError
from proflake.resources import resource_dir
from proflake.schema import ALL_TABLES, table_spec
from proflake.store.migrations import added_columns, refuse_newer
from proflake.store.store import FACT_TABLES, Store, raw_view
from proflake.views import VIEWS

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

# schemas/*.json types in Spark SQL (the same lossless set every Delta reader maps; schema.py).
SPARK_TYPES = {"string": "STRING", "int64": "BIGINT", "float64": "DOUBLE", "bool": "BOOLEAN", "timestamp": "TIMESTAMP"}
_PARAMETER = re.compile(r"(?<![\w:'])[:]([A-Za-z_][A-Za-z0-9_]*)")
_STATEMENT_END = re.compile(r";\n(?=\n|$)")
TIME_ZONE = "spark.sql.session.timeZone"
# Zone ids Spark accepts that are UTC under another name (Databricks sets Etc/UTC), compared in lower case.
_UTC_NAMES = {"utc", "etc/utc", "gmt", "etc/gmt", "z", "+00:00", "uct", "etc/uct", "universal", "etc/universal",
              "zulu", "etc/zulu"}
_ZONE_GUARD = threading.Lock()
_borrowed: dict[int, list[Any]] = {}  # id(session) -> [proflake queries running, the zone to restore or None]


def is_utc(zone: str | None) -> bool:
    return zone is not None and zone.strip().lower() in _UTC_NAMES


def require_utc(spark: SparkSession) -> None:
    """Refuse (UsageError) a session whose time zone is not UTC, saying how to set it."""
    zone = spark.conf.get(TIME_ZONE)
    if not is_utc(zone):
        raise UsageError(
            f"proflake's Spark views need {TIME_ZONE}=UTC, and this session's is {zone!r}: run "
            f"spark.conf.set({TIME_ZONE!r}, 'UTC') first (or start Spark with --conf {TIME_ZONE}=UTC)"
        )


@contextmanager
def in_utc(spark: SparkSession) -> Iterator[None]:
    """Run proflake's own queries on ``spark`` in UTC: the session's time zone is UTC while at least one
    of them runs (from any thread), and what it was once the last one ends."""
    key = id(spark)
    with _ZONE_GUARD:
        entry = _borrowed.get(key)
        if entry is None:
            zone = spark.conf.get(TIME_ZONE)
            entry = _borrowed[key] = [0, None if is_utc(zone) else zone]
            if entry[1] is not None:
                spark.conf.set(TIME_ZONE, "UTC")
        entry[0] += 1
    try:
        yield
    finally:
        with _ZONE_GUARD:
            entry[0] -= 1
            if entry[0] == 0:
                del _borrowed[key]
                if entry[1] is not None:
                    spark.conf.set(TIME_ZONE, entry[1])


def spark_schema(name: str) -> str:
    """The table's declared columns as a Spark DDL schema string."""
    return ", ".join(
        f"`{c.name}` {SPARK_TYPES[c.type_name]}" + ("" if c.nullable else " NOT NULL") for c in table_spec(name).columns
    )


def spark_query_text(name: str) -> str:
    """queries/spark/<name>.sql: the Spark SQL generated from queries/<name>.sql (proflake.spark.sqlgen)."""
    path = resource_dir("queries") / "spark" / f"{name}.sql"
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise QueryError(f"proflake has no Spark version of the query {name!r}") from None


def spark_uri(uri: str, s3_scheme: str) -> str:
    """A file URI as Spark's Hadoop file systems name it: s3:// (EMR, Databricks, Glue) or s3a://."""
    return s3_scheme + uri[len("s3://") :] if uri.startswith("s3://") else uri


def committed_files(store: Store, name: str) -> list[str]:
    """The Parquet files of the table's current version, refusing a table with deletion vectors."""
    try:
        delta = store.delta(name)
    except StoreError:
        if name in ("phase_function_stats", "phase_function_callers"):
            return []  # a store written before the derived tables existed: empty until the next ingest
        raise
    features = delta.protocol().reader_features or []
    if "deletionVectors" in features:
        raise StoreError(
            f"table {name!r} of the store at {store.location!r} uses deletion vectors, which a plain "
            "file list cannot apply; read it with delta-spark, or rewrite it with 'proflake compact'"
        )
    return delta.file_uris()


def register(
    spark: SparkSession,
    store: Store | str,
    *,
    s3_scheme: str = "s3://",
    cache_intervals: bool = True,
) -> dict[str, int]:
    """Register the store's committed snapshot in ``spark`` as temporary views, under the names the
    DuckDB side uses: every table (fact tables as ``function_stats``, live rows only, and
    ``_function_stats_all``, every committed row), ``manifest``, ``batch_runs`` and the convenience
    views of queries/views.sql. Returns table -> number of files read.

    ``s3_scheme``: how the cluster names S3 (``s3://`` on EMR, Glue and Databricks; ``s3a://`` on plain
    Hadoop with hadoop-aws). ``cache_intervals``: keep the intervals table (one row per stats file,
    read by every question) in Spark's memory.

    The session's time zone (``spark.sql.session.timeZone``) must be UTC, or ``register`` refuses
    (UsageError): it decides the day ``date_trunc`` gives and the instant a timestamp written as text means.
    """
    require_utc(spark)
    store = store if isinstance(store, Store) else Store(store)
    store.require()
    refuse_newer(store)  # a later release's store is refused, never misread
    files: dict[str, int] = {}
    for name in ALL_TABLES:
        uris = [spark_uri(u, s3_scheme) for u in committed_files(store, name)]
        files[name] = len(uris)
        frame = _read(spark, name, uris)
        if name == "intervals" and cache_intervals:
            frame = frame.cache()
        frame.createOrReplaceTempView(raw_view(name) if name in FACT_TABLES else name)
    for name in FACT_TABLES:
        spark.sql(
            f"CREATE OR REPLACE TEMPORARY VIEW {name} AS SELECT * FROM {raw_view(name)} "
            "WHERE interval_id IN (SELECT interval_id FROM intervals)"
        )
    spark.sql(
        "CREATE OR REPLACE TEMPORARY VIEW manifest AS SELECT source_uri, source_size, source_version, html_uri, "
        "interval_id, batch_id, ingested_at FROM intervals"
    )
    spark.sql("CREATE OR REPLACE TEMPORARY VIEW batch_runs AS " + _body(spark_query_text("list_batches")))
    for statement in statements(spark_query_text("views")):
        spark.sql(statement)
    return files


def registered_views() -> list[str]:
    """The convenience views ``register`` defines (the view contract of proflake.views)."""
    return [v.name for v in VIEWS]


def _read(spark: SparkSession, name: str, uris: list[str]) -> DataFrame:
    schema = spark_schema(name)
    if not uris:
        return spark.createDataFrame([], schema)
    frame = spark.read.schema(schema).parquet(*uris)
    # A store not migrated yet: its files lack the columns a migration adds, read as the migration says
    # (NULL from the declared schema, else its read_as value), as the DuckDB views read them.
    for column, migration in added_columns(name).items():
        if column in migration.read_as:
            from pyspark.sql import functions

            frame = frame.withColumn(column, functions.expr(f"coalesce(`{column}`, {migration.read_as[column]})"))
    return frame


def statements(text: str) -> list[str]:
    """The statements of a generated file (each ends with ';' at the end of a line, then a blank line)."""
    return [s.strip() for s in _STATEMENT_END.split(_body(text)) if s.strip()]


def _body(text: str) -> str:
    return "\n".join(line for line in text.splitlines() if not line.startswith("--")).strip()


def run(spark: SparkSession, name: str, params: dict[str, Any]) -> pa.Table:
    """Run queries/spark/<name>.sql with exactly the parameters it names, bound by Spark (never pasted)."""
    text = _body(spark_query_text(name))
    wanted = list(dict.fromkeys(_PARAMETER.findall(text)))
    missing = [p for p in wanted if p not in params]
    if missing:
        raise QueryError(f"query needs parameter(s) {', '.join('$' + n for n in missing)}")
    try:
        return spark.sql(text, args={p: params[p] for p in wanted}).toArrow()
    except Exception as e:  # pyspark raises its own AnalysisException etc.; say it in one line
        if type(e).__module__.startswith("pyspark"):
            raise QueryError(f"Spark could not run {name}: {str(e).strip().splitlines()[0]}") from e
        raise
