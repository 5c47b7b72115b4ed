"""proflake on Spark: the generated Spark SQL is current, and every fetch method, listing and convenience
view answered on a local[2] Spark equals DuckDB's answer over the same store.

The Spark tests share one SparkSession (the ``spark`` fixture, tests/helpers/sparkenv.py) and one store, built
once per module: a job with both profilers, two nodes and a damaged file.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
from helpers.profiles import SEMANTIC_INTERVALS, JobBuilder
from helpers.same_answers import FETCH_CASES, assert_same_table
from proflake import Profiles, ingest
from proflake.query.profiles import FETCH_METHODS
from proflake.spark import sqlgen
from proflake.views import VIEWS


# -- the generated SQL ------------------------------------------------------------------------------------
def test_generated_spark_sql_is_current():
    """Regenerates every queries/spark/*.sql from its DuckDB source: a change to a DuckDB query that was
    not regenerated (python -m proflake.spark.sqlgen) fails here."""
    pytest.importorskip("sqlglot")
    folder = sqlgen.spark_folder()
    fresh = sqlgen.generated()
    assert sorted(p.stem for p in folder.glob("*.sql")) == sorted(fresh)
    for name, text in fresh.items():
        assert (folder / f"{name}.sql").read_text(encoding="utf-8") == text, f"queries/spark/{name}.sql is stale"


def test_every_fetch_query_has_a_spark_version():
    needed = {*FETCH_METHODS, "scope", "list_jobs", "list_node_ids", "list_profile_stats", "list_errors",
              "list_batches", "rollup_cprofile", "rollup_callers", "rollup_pyinstrument", "call_tree", "views"}
    assert needed <= set(sqlgen.SPARK_QUERIES)


def test_rules_rewrite_what_spark_lacks():
    """No DuckDB-only construct survives in the generated files."""
    for path in sqlgen.spark_folder().glob("*.sql"):
        body = "\n".join(line for line in path.read_text().splitlines() if not line.startswith("--")).upper()
        for construct in (r"\$", r"\bROWID\b", r"\bLIST_POSITION\(", r"\bQUALIFY\b", r"\bIN_SCOPE\(", r"\bSTEP_END\(",
                          r"\bSORT_VALUE\(", r"\bMODE_RANK\(", r"\b_\w+_IN\(", r"\bLISTAGG\b", r"\bSTRING_AGG\b",
                          r"\bEPOCH\(", r"\bEPOCH_US\(", r"\bUNIX_TIMESTAMP\("):
            assert not re.search(construct, body), (path.name, construct)


# -- the same answers on Spark --------------------------------------------------------------------------
@pytest.fixture(scope="module")
def stores(tmp_path_factory) -> tuple[Profiles, Path]:
    base = tmp_path_factory.mktemp("spark-corpus")
    job = JobBuilder(base / "jobs" / "semantic")
    for node, name, workload in SEMANTIC_INTERVALS.values():
        job.cprofile(node, name, workload)
    for node, name in (("algo-1", "train-1-stepstart-3000_train-1-stepend-4000"),
                       ("algo-2", "train-2-stepstart-4150_train-2-stepend-4950")):
        job.pyinstrument(node, name)
    damaged = job.stats_dir("cprofile", "algo-2", "train-3-stepstart-6000_train-3-stepend-7000")
    damaged.mkdir(parents=True)
    (damaged / "python_stats").write_bytes(b"\x00not marshal")
    store = base / "store"
    report = ingest(str(base / "jobs"), str(store))
    assert report.new_intervals == len(SEMANTIC_INTERVALS) + 2 and len(report.failed) == 1
    return Profiles(str(store)), store


@pytest.fixture(scope="module")
def spark_profiles(stores, spark):
    from proflake.spark import SparkProfiles

    return SparkProfiles(spark, str(stores[1]))


CASES = FETCH_CASES
PROFILERS = ("cprofile", "pyinstrument")
# Every case on Spark runs ~6 queries (~1 s of the JVM's CPU). The default tier runs each case once, the
# profilers taking turns, so every fetch method and both profilers' roll-ups, callers and call trees run on
# Spark; the slow tier runs the whole matrix (every case with both profilers).
MATRIX = [
    pytest.param(method, arguments, profiler, marks=() if (index + turn) % 2 == 0 else pytest.mark.slow,
                 id=f"{method}-{index}-{profiler}")
    for index, (method, arguments) in enumerate(CASES)
    for turn, profiler in enumerate(PROFILERS)
]


@pytest.mark.integration
def test_cases_cover_every_fetch_method():
    assert {method for method, _ in CASES} == set(FETCH_METHODS)
    default = [p.values for p in MATRIX if not p.marks]
    assert {method for method, _, _ in default} == set(FETCH_METHODS)  # every method in the default tier
    assert {profiler for _, _, profiler in default} == set(PROFILERS)
    assert len(MATRIX) == len(CASES) * len(PROFILERS)  # and every pair in the slow tier


@pytest.mark.integration
@pytest.mark.parametrize("method, arguments, profiler", MATRIX)
def test_every_fetch_method_equals_duckdb(stores, spark_profiles, method, arguments, profiler):
    native = stores[0]
    for scope in ({"node": "all"}, {"node": "algo-1", "per_node": True, "top": 3, "sort": "tottime"}):
        expected = native.fetch(method, profiler=profiler, **scope, **arguments)
        actual = spark_profiles.fetch(method, profiler=profiler, **scope, **arguments)
        assert actual.intervals["interval_id"].to_pylist() == expected.intervals["interval_id"].to_pylist()
        assert actual.group_by == expected.group_by and actual.groups() == expected.groups()
        assert_same_table(actual.table, expected.table)
        if profiler == "cprofile":
            assert_same_table(actual.callers(), expected.callers(), ordered=False)
            assert len(actual.to_pstats().stats) == len(expected.to_pstats().stats)
        else:
            assert_same_table(actual.call_tree(), expected.call_tree())


@pytest.mark.integration
def test_listings_equal_duckdb(stores, spark_profiles):
    native = stores[0]
    assert_same_table(spark_profiles.jobs(), native.jobs())
    assert_same_table(spark_profiles.jobs("pyinstrument"), native.jobs("pyinstrument"))
    assert spark_profiles.nodes() == native.nodes()
    assert_same_table(spark_profiles.list_profile_stats(), native.list_profile_stats())
    assert_same_table(spark_profiles.errors(), native.errors())
    assert spark_profiles.errors().num_rows == 1
    assert_same_table(spark_profiles.batches(), native.batches())


@pytest.mark.integration
@pytest.mark.parametrize("view", [v.name for v in VIEWS if not v.catalog_only])
def test_views_equal_duckdb(stores, spark_profiles, view):
    native, _ = stores
    expected = native.sql(f"SELECT * FROM {view}")
    actual = spark_profiles.sql(f"SELECT * FROM {view}")
    assert expected.num_rows > 0, view
    assert_same_table(actual, expected, ordered=False)


# Two nodes start step 0 at real epoch times 123,455 us apart: as seconds since the epoch (doubles near
# 1.7e9, a unit in the last place of 0.24 us) their difference is 0.12345504760742188, not 0.123455.
SPREAD_STARTS_US = {"algo-1": 1_700_000_000_000_001, "algo-2": 1_700_000_000_123_456}


@pytest.fixture(scope="module")
def epoch_store(tmp_path_factory) -> Path:
    base = tmp_path_factory.mktemp("epoch-times")
    job = JobBuilder(base / "job")
    for node, start in SPREAD_STARTS_US.items():
        job.cprofile(node, f"train-0-stepstart-{start}_train-0-stepend-{start + 2_000_000}")
    ingest(str(base / "job"), str(base / "store"))
    return base / "store"


def _spread_and_skew(profiles) -> tuple[float, float]:
    (row,) = profiles.sql("SELECT start_spread_seconds, skew_seconds FROM step_node_skew WHERE step = 0").to_pylist()
    return row["start_spread_seconds"], row["skew_seconds"]


def test_start_spread_is_computed_from_integer_microseconds(epoch_store):
    """start_spread_seconds was epoch(max) - epoch(min): two doubles near 1.7e9 s, 0.05 us off here
    (relative 4e-7, beyond the 1e-12 within which Spark must equal DuckDB)."""
    spread, skew = _spread_and_skew(Profiles(str(epoch_store)))
    exact = (SPREAD_STARTS_US["algo-2"] - SPREAD_STARTS_US["algo-1"]) / 1e6
    assert exact == 0.123455 != SPREAD_STARTS_US["algo-2"] / 1e6 - SPREAD_STARTS_US["algo-1"] / 1e6
    assert spread == exact
    assert skew == 0.0


@pytest.mark.integration
def test_start_spread_is_the_same_double_on_spark(epoch_store, spark):
    from proflake.spark import SparkProfiles

    assert _spread_and_skew(SparkProfiles(spark, str(epoch_store))) == _spread_and_skew(Profiles(str(epoch_store)))


@pytest.mark.integration
def test_a_store_with_deletion_vectors_is_refused(stores, tmp_path):
    """The file list is the table only without deletion vectors: such a table is refused, not misread."""
    from deltalake import DeltaTable, TableFeatures
    from proflake.errors import StoreError
    from proflake.spark.tables import committed_files
    from proflake.store.store import Store

    copy = tmp_path / "store"
    shutil.copytree(stores[1], copy)
    DeltaTable(str(copy / "batches")).alter.add_feature(TableFeatures.DeletionVectors, allow_protocol_versions_increase=True)
    with pytest.raises(StoreError, match="deletion vectors"):
        committed_files(Store(str(copy)), "batches")
    assert committed_files(Store(str(copy)), "intervals")



def test_a_store_written_with_byte_stream_split_times_still_reads(tmp_path, monkeypatch):
    """Stores written before the time columns became PLAIN hold BYTE_STREAM_SPLIT files: a store that
    mixes both answers like pstats (and `proflake compact` rewrites the old files PLAIN)."""
    import pyarrow.parquet as pq
    from deltalake import ColumnProperties, WriterProperties
    from helpers.profiles import assert_same_pstats, pstats_of
    from proflake.ingestion import batch
    from proflake.store import store as store_module

    current = store_module.writer_properties()
    old = WriterProperties(
        compression="ZSTD",
        compression_level=3,
        max_row_group_size=current.max_row_group_size,
        write_batch_size=current.write_batch_size,
        column_properties={
            c: ColumnProperties(encoding="BYTE_STREAM_SPLIT", dictionary_enabled=False) for c in current.column_properties
        },
    )
    job = JobBuilder(tmp_path / "jobs" / "semantic")
    first = job.cprofile("algo-1", "train-0-stepstart-2000_train-0-stepend-3000", "a")
    with monkeypatch.context() as patch:
        patch.setattr(batch, "writer_properties", lambda: old)
        patch.setattr(store_module, "writer_properties", lambda: old)
        ingest(str(tmp_path / "jobs"), str(tmp_path / "store"))
    second = job.cprofile("algo-1", "train-1-stepstart-3000_train-1-stepend-4000", "b")
    ingest(str(tmp_path / "jobs"), str(tmp_path / "store"))
    encodings = {
        enc
        for path in (tmp_path / "store" / "function_stats").glob("*.parquet")
        for enc in pq.read_metadata(path).row_group(0).column(pq.read_schema(path).get_field_index("tottime")).encodings
    }
    assert {"BYTE_STREAM_SPLIT", "PLAIN"} <= encodings
    result = Profiles(str(tmp_path / "store")).by_step(0, 1)
    assert_same_pstats(result.to_pstats().stats, pstats_of([first, second]))


@pytest.mark.integration
def test_a_store_written_before_closed_at_answers_errors_on_spark(stores, spark, tmp_path):
    """A quarantine an older proflake wrote has no closed_at: Spark reads it as NULL (the declared schema
    is given to the reader), as DuckDB does, so errors() and the views answer the same."""
    from deltalake import write_deltalake
    from proflake.spark import SparkProfiles
    from proflake.store.store import Store

    copy = tmp_path / "store"
    shutil.copytree(stores[1], copy)
    old = Store(str(copy)).delta("ingest_errors").to_pyarrow_table().drop_columns(["closed_at"])
    write_deltalake(Store(str(copy)).table_uri("ingest_errors"), old, mode="overwrite", schema_mode="overwrite")
    assert "closed_at" not in Store(str(copy)).delta("ingest_errors").schema().to_arrow().names
    native = Profiles(str(copy))
    on_spark = SparkProfiles(spark, str(copy))
    assert native.errors().num_rows == 1
    assert on_spark.errors()["closed_at"].to_pylist() == [None]
    assert_same_table(on_spark.errors(), native.errors())
    assert_same_table(on_spark.errors(include_closed=True), native.errors(include_closed=True))


@pytest.mark.integration
def test_the_store_of_the_release_before_schema_versions_reads_on_spark_as_on_duckdb(spark, tmp_path):
    """tests/data/stores/v1 (not migrated: its intervals files lack source_format and time_unit) reads on
    Spark with the values the DuckDB views give them (docs/store.md#schema-versions-and-migrations)."""
    from proflake.spark import SparkProfiles

    copy = tmp_path / "store"
    shutil.copytree(Path(__file__).resolve().parent / "data" / "stores" / "v1", copy)
    query = "SELECT interval_id, profiler, source_format, time_unit, sample_rate_hz FROM intervals ORDER BY interval_id"
    native = Profiles(str(copy)).sql(query)
    assert native.num_rows == 10 and native["source_format"].to_pylist() == native["profiler"].to_pylist()
    assert_same_table(SparkProfiles(spark, str(copy)).sql(query), native)
