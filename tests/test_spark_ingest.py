"""Ingest on Spark (issue 25): parsing in Spark tasks on a local[2,2] Spark, committed by the same batch.

A store ingested through the Spark executor answers every fetch method as the native ingest's does; a
damaged file and a segfaulting one are quarantined from inside an executor; a driver killed after a
commit is repaired by the next run; with an S3 source and an S3 store the executors read the objects
and upload the fact files themselves; below ``--spark-min-files`` the local pool parses; a task whose
first attempt failed after writing its files leaves nothing doubled. The tests share
the run's one SparkSession (the ``spark`` fixture, tests/helpers/sparkenv.py).
"""

from __future__ import annotations

import contextlib
import secrets
import signal
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pytest
from helpers.profiles import SEMANTIC_INTERVALS, JobBuilder
from helpers.same_answers import FETCH_CASES, assert_same_table
from helpers.spark_drivers import attached_driver, spark_submit, wait_until_idle
from proflake import Profiles, ingest
from proflake.store.store import FACT_TABLES, Store, raw_view

pytestmark = pytest.mark.integration


def build_jobs(base: Path) -> Path:
    """Two jobs' worth of both profilers on two nodes, and one damaged stats file."""
    jobs = base / "jobs"
    job = JobBuilder(jobs / "semantic")
    for node, name, workload in SEMANTIC_INTERVALS.values():
        job.cprofile(node, name, workload)
    for node, name in (("algo-1", "train-1-stepstart-3000_train-1-stepend-4000"),
                       ("algo-2", "train-2-stepstart-4150_train-2-stepend-4950")):
        job.pyinstrument(node, name)
    other = JobBuilder(jobs / "other")
    for step in range(6):
        other.cprofile("algo-1", f"train-{step}-stepstart-{10_000 + step * 1000}_train-{step}-stepend-{10_900 + step * 1000}",
                       "abc"[step % 3], repeat=1 + step % 2)
    damaged = job.stats_dir("cprofile", "algo-2", "train-3-stepstart-6000_train-3-stepend-7000")
    damaged.mkdir(parents=True)
    (damaged / "python_stats").write_bytes(b"\x00not marshal")
    return jobs


def snapshot(store: str) -> dict[str, list]:
    """What a reader sees, less what differs between equivalent runs (batch and interval ids, times)."""
    con = Store(store).connect()
    try:
        out = {"intervals": con.sql("SELECT * EXCLUDE (batch_id, interval_id, ingested_at) FROM intervals ORDER BY ALL").fetchall()}
        for name in FACT_TABLES:
            out[name] = con.sql(f"SELECT i.source_uri, f.* EXCLUDE (batch_id, interval_id) FROM {name} f "
                                "JOIN intervals i USING (interval_id) ORDER BY ALL").fetchall()
            out[f"{name}:hidden"] = con.sql(f"SELECT count(*) FROM {raw_view(name)}").fetchall()[0][0] - len(out[name])
        out["errors"] = con.sql("SELECT source_uri, error_kind FROM ingest_errors ORDER BY ALL").fetchall()
    finally:
        con.close()
    return out


@pytest.fixture(scope="module")
def jobs(tmp_path_factory) -> Path:
    return build_jobs(tmp_path_factory.mktemp("spark-ingest"))


@pytest.fixture(scope="module")
def native(jobs, tmp_path_factory):
    store = tmp_path_factory.mktemp("native") / "store"
    report = ingest(str(jobs), str(store))
    return Profiles(str(store)), report, store


@pytest.fixture(scope="module")
def on_spark(jobs, spark, tmp_path_factory):
    from proflake.spark import SparkPool

    store = tmp_path_factory.mktemp("on-spark") / "store"
    # Slices of 4 files: several Spark tasks, run two at a time.
    pool = SparkPool(spark, min_files=0, slice_files=4)
    said: list[str] = []
    report = ingest(str(jobs), str(store), executor=pool, log=said.append)
    return Profiles(str(store)), report, store, pool, said


def test_the_spark_ingest_stores_what_the_native_one_stores(native, on_spark):
    _, expected, native_store = native
    _, report, store, pool, said = on_spark
    assert pool.stats.jobs == 1 and pool.stats.slices == -(-report.intervals_seen // 4) > 2
    assert not any("local pool" in line for line in said)
    assert (report.new_intervals, len(report.failed)) == (expected.new_intervals, 1)
    assert report.bytes_read == expected.bytes_read and report.rows == expected.rows
    assert snapshot(str(store)) == snapshot(str(native_store))
    # Nothing left behind: the spool is gone and every file in a table folder is committed.
    assert not (store / "_proflake" / "spool").exists()
    for name in FACT_TABLES:
        assert {p.name for p in (store / name).glob("*.parquet")} == {
            Path(u).name for u in Store(str(store)).delta(name).file_uris()}


@pytest.mark.parametrize("profiler", ["cprofile", "pyinstrument"])
@pytest.mark.parametrize("method, arguments", FETCH_CASES)
def test_every_fetch_method_answers_as_after_a_native_ingest(native, on_spark, method, arguments, profiler):
    for scope in ({"node": "all", "all_jobs": True}, {"node": "algo-1", "job": "semantic", "per_node": True, "top": 3, "sort": "tottime"}):
        expected = native[0].fetch(method, profiler=profiler, **scope, **arguments)
        actual = on_spark[0].fetch(method, profiler=profiler, **scope, **arguments)
        assert actual.intervals["source_uri"].to_pylist() == expected.intervals["source_uri"].to_pylist()
        assert actual.group_by == expected.group_by and actual.groups() == expected.groups()
        assert_same_table(actual.table, expected.table)
        if profiler == "cprofile":
            assert_same_table(actual.callers(), expected.callers(), ordered=False)
        else:
            assert_same_table(actual.call_tree(), expected.call_tree())


def test_a_segfaulting_file_is_quarantined_from_inside_an_executor(spark, tmp_path):
    from proflake.spark import SparkPool

    jobs = build_jobs(tmp_path)
    crashing = JobBuilder(jobs / "semantic").stats_dir("cprofile", "algo-1", "train-7-stepstart-9000_train-7-stepend-9500")
    crashing.mkdir(parents=True)
    (crashing / "python_stats").write_bytes(b"segfault")
    pool = SparkPool(spark, min_files=0, slice_files=5, parse="helpers.crashy_reader:parse")
    report = ingest(str(jobs), str(tmp_path / "store"), executor=pool)
    kinds = {Path(f.uri).parent.name: (f.kind, f.message) for f in report.failed}
    assert kinds["train-7-stepstart-9000_train-7-stepend-9500"][0] == "crash"
    assert "signal 11" in kinds["train-7-stepstart-9000_train-7-stepend-9500"][1]
    assert kinds["train-3-stepstart-6000_train-3-stepend-7000"][0] == "cprofile"  # the damaged file
    assert len(report.failed) == 2 and pool.stats.jobs == 1
    # Every other file of the crashed worker's slice was parsed again and stored.
    reference = tmp_path / "reference"
    ingest(str(jobs), str(reference), executor="local")  # proflake's own parser: a format error there
    ours, theirs = snapshot(str(tmp_path / "store")), snapshot(str(reference))
    assert ours.pop("errors") != theirs.pop("errors") and ours == theirs


def test_below_spark_min_files_the_local_pool_parses(spark, tmp_path):
    from proflake.spark import SparkPool

    jobs = build_jobs(tmp_path)
    pool = SparkPool(spark, min_files=1_000)
    said: list[str] = []
    report = ingest(str(jobs), str(tmp_path / "store"), executor=pool, log=said.append)
    assert pool.stats.jobs == 0 and report.new_intervals > 0
    assert any("on the local pool: fewer than the 1000 a Spark job is started for" in line for line in said)
    # At the threshold, Spark parses.
    more = tmp_path / "more"
    JobBuilder(more / "jobs" / "next").cprofile("algo-1", "train-0-stepstart-2000_train-0-stepend-3000")
    pool = SparkPool(spark, min_files=1)
    assert ingest(str(more / "jobs"), str(tmp_path / "store"), executor=pool).new_intervals == 1
    assert pool.stats.jobs == 1


def test_executor_names_and_the_cli_default():
    from proflake.cli import cli
    from proflake.errors import ProflakeError
    from proflake.spark import DEFAULT_SPARK_MIN_FILES, SparkPool
    from proflake.workers.executor import make_executor
    from proflake.workers.pool import ParsePool

    assert isinstance(make_executor("local"), ParsePool) and isinstance(make_executor(None), ParsePool)
    assert not make_executor("local").inline and make_executor("inline").inline
    assert isinstance(make_executor("spark"), SparkPool)
    assert make_executor("spark", spark_min_files=7).min_files == 7
    with pytest.raises(ProflakeError, match="unknown executor 'yarn'; expected one of: local, inline, spark"):
        make_executor("yarn")
    import click

    ingest_command = cli.get_command(click.Context(cli), "ingest")  # commands load when asked for
    options = {p.name: p for p in ingest_command.params}
    assert options["spark_min_files"].default == DEFAULT_SPARK_MIN_FILES


def test_a_session_object_is_an_executor(spark, tmp_path):
    """A notebook passes its SparkSession: ingest runs on it (min files as given)."""
    jobs = build_jobs(tmp_path)
    report = ingest(str(jobs), str(tmp_path / "store"), executor=spark, spark_min_files=0)
    assert report.new_intervals > 0 and len(report.failed) == 1


# -- S3: executors read the objects and upload the fact files ---------------------------------------------
# The S3 server is conftest's, one per test session: moto bootstraps only one per process (a second one
# here failed its CreateUser once another module had started the first).


@contextlib.contextmanager
def executor_environment(spark, values: dict[str, str]) -> Iterator[None]:
    """``values`` in the environment of the Spark tasks started inside the block (spark.executorEnv.*
    on a cluster); Spark starts Python workers for each distinct environment."""
    environment = spark.sparkContext.environment
    before = dict(environment)
    environment.update(values)
    try:
        yield
    finally:
        environment.clear()
        environment.update(before)


def python_daemons(spark) -> set[int]:
    """The pids of the Python daemons Spark's JVM runs (one per worker environment in use)."""
    import psutil
    from pyspark import SparkContext

    assert spark.sparkContext is SparkContext._active_spark_context
    jvm = psutil.Process(SparkContext._gateway.proc.pid)
    daemons = set()
    for child in jvm.children():
        try:
            if "pyspark.daemon" in child.cmdline():
                daemons.add(child.pid)
        except psutil.Error:  # ended (a zombie not yet reaped, or gone) since it was listed: not a daemon
            continue
    return daemons


@pytest.fixture
def executor_credentials(s3, spark, monkeypatch):
    """The credentials of the test's S3 user for the driver (environment) and for Spark's Python
    workers, as spark.executorEnv.* gives them on a cluster (an instance profile does on EMR)."""
    values = {"AWS_ACCESS_KEY_ID": s3.access_key, "AWS_SECRET_ACCESS_KEY": s3.secret_key, "AWS_DEFAULT_REGION": "us-east-1"}
    for name, value in values.items():
        monkeypatch.setenv(name, value)
    with executor_environment(spark, values):
        yield


def test_s3_source_and_store_with_the_executors_doing_the_io(s3, spark, executor_credentials, tmp_path, monkeypatch):
    from proflake.ingestion.commit import FactCommitter
    from proflake.sources.settings import S3Config
    from proflake.spark import SparkPool
    from proflake.store.compact import compact

    bucket = f"bucket-{secrets.token_hex(4)}"
    s3.client().create_bucket(Bucket=bucket)
    jobs = build_jobs(tmp_path)
    s3.upload_tree(jobs, bucket, "jobs")
    config = S3Config(endpoint_url=s3.endpoint)
    store = f"s3://{bucket}/store"
    # The driver never reads an object nor uploads a fact file: the executors do both.
    monkeypatch.setattr("proflake.sources.s3.S3Source.read", lambda self, obj: pytest.fail(f"the driver read {obj.uri}"))
    upload = FactCommitter._upload

    def driver_upload(self, f):
        assert f.table == "intervals", f"the driver uploaded a {f.table} file"  # its own rows: intervals only
        upload(self, f)

    monkeypatch.setattr(FactCommitter, "_upload", driver_upload)
    pool = SparkPool(spark, min_files=0, slice_files=5, s3=config)
    report = ingest(f"s3://{bucket}/jobs", store, s3=config, executor=pool)
    assert pool.stats.jobs == 1 and report.new_intervals > 0 and [f.kind for f in report.failed] == ["cprofile"]
    reference = tmp_path / "reference"
    assert ingest(str(jobs), str(reference)).bytes_read == report.bytes_read
    ours, theirs = Profiles(Store(store, s3=config)), Profiles(str(reference))
    for method, arguments in FETCH_CASES:
        for profiler in ("cprofile", "pyinstrument"):
            expected = theirs.fetch(method, profiler=profiler, all_jobs=True, **arguments)
            actual = ours.fetch(method, profiler=profiler, all_jobs=True, **arguments)
            assert [u.split("/jobs/", 1)[1] for u in actual.intervals["source_uri"].to_pylist()] == [
                u.split("/jobs/", 1)[1] for u in expected.intervals["source_uri"].to_pylist()]
            assert_same_table(actual.table, expected.table)
    # The fact files in the tables' prefixes are exactly the committed ones (the tasks ran once each).
    client = s3.client()
    for name in FACT_TABLES:
        listed = {o["Key"].rsplit("/", 1)[1] for o in client.list_objects_v2(Bucket=bucket, Prefix=f"store/{name}/").get("Contents", [])
                  if o["Key"].endswith(".parquet")}
        assert listed == {u.rsplit("/", 1)[1] for u in Store(store, s3=config).delta(name).file_uris()}
    # What a task attempt whose answer Spark dropped leaves: an unreferenced file, which vacuum removes.
    orphan = "store/function_stats/part-dropped-attempt.zstd.parquet"
    client.put_object(Bucket=bucket, Key=orphan, Body=b"PAR1")
    before = snapshot_s3(ours)
    report = compact(Store(store, s3=config), retention_hours=0)
    assert report.tables["function_stats"]["files_vacuumed"] >= 1
    assert "Contents" not in client.list_objects_v2(Bucket=bucket, Prefix=orphan)
    assert_same_table(snapshot_s3(Profiles(Store(store, s3=config))), before)  # the same, up to summation order


def snapshot_s3(profiles: Profiles) -> pa.Table:
    return profiles.by_step("*", "*", all_jobs=True).table


def test_an_executor_applies_the_s3_rules_itself(s3, executor_credentials):
    """A key with '..' segments and an object grown past the limit since listing are not read."""
    from proflake.sources.settings import S3Config
    from proflake.workers.protocol import FactSink
    from proflake.workers.sparkpool import _Reader, _Slice

    bucket = f"bucket-{secrets.token_hex(4)}"
    client = s3.client()
    client.create_bucket(Bucket=bucket)
    client.put_object(Bucket=bucket, Key="jobs/big", Body=b"x" * 2048)
    client.put_object(Bucket=bucket, Key="jobs/small", Body=b"y" * 10)
    job = _Slice(0, [], FactSink({}, "b", 1, {}), 512, 1.0, "x:y", 1024, S3Config(endpoint_url=s3.endpoint))
    reader = _Reader(job)
    assert reader.read(f"s3://{bucket}/jobs/small") == b"y" * 10
    assert reader.read(f"s3://{bucket}/jobs/big").kind == "too_large"
    assert reader.read(f"s3://{bucket}/jobs/../etc/passwd").kind == "unsafe_path"
    missing = reader.read(f"s3://{bucket}/jobs/gone")
    assert missing.kind == "read" and f"s3://{bucket}/jobs/gone" in missing.message


# -- a driver killed after a commit -----------------------------------------------------------------------
# 2-attached, in the default tier: the driver is a Python process of its own on the run's Spark JVM
# (helpers/spark_drivers.py), SIGKILLed after its 2nd commit: fact files committed, no intervals, the state
# only a driver dying mid-batch leaves. Only that Python process dies; the JVM and any task of its job live
# on, so the test waits for them. A spark-submit JVM of its own cost 8.4-8.9 s of the test's CPU; attached,
# 1.1 s, and this module 27.1 -> 21.3 and 29.3 -> 22.2 s in all (two alternated pairs, the JVM included).
# 5-spark-submit, in the slow tier: spark-submit's driver, SIGKILLed after its 5th commit (intervals
# committed, the clean-up undone), its JVM and tasks ending with it, as a cluster's driver does; the native
# kill sweeps (tests/test_batches.py) cross that commit point on every run.
@pytest.mark.parametrize("after_commits, driver", [(2, "attached"), pytest.param(5, "spark-submit", marks=pytest.mark.slow)],
                         ids=["2-attached", "5-spark-submit"])
def test_a_driver_killed_after_a_commit_is_repaired_by_the_next_run(native, jobs, spark, tmp_path, after_commits, driver):
    """``proflake ingest --executor spark`` kills itself after its k-th Delta commit: 2 leaves fact files
    committed with no intervals (the driver a Python process attached to the run's JVM, SIGKILLed alone),
    5 the intervals committed with the clean-up undone (spark-submit's driver, whose JVM dies with it).
    The next run, on the Spark executor too, ends where a clean ingest ends."""
    from proflake.spark import SparkPool

    store = tmp_path / "store"
    args = ("ingest", str(jobs), "--store", str(store), "--executor", "spark", "--spark-min-files", "0")
    env = {"PROFLAKE_KILL_AFTER_COMMITS": str(after_commits)}
    if driver == "attached":
        tracker = spark.sparkContext.statusTracker()
        jobs_before = set(tracker.getJobIdsForGroup())
        process = attached_driver(spark, *args, env=env)
        _, stderr = process.communicate(timeout=600)
        assert process.returncode == -signal.SIGKILL, stderr[-2000:]
        assert set(tracker.getJobIdsForGroup()) - jobs_before, "the driver parsed on a job of the run's JVM"
        wait_until_idle(spark)
    else:
        script = tmp_path / "driver.py"
        script.write_text("from proflake.cli import main\nmain()\n")
        process = spark_submit(script, *args, env=env)
        _, stderr = process.communicate(timeout=600)
        assert process.returncode != 0, stderr[-2000:]
    con = Store(str(store)).connect()
    unfinished = con.sql("SELECT count(*) FROM batches GROUP BY batch_id HAVING bool_and(event = 'started')").fetchall()
    intervals = con.sql("SELECT count(*) FROM intervals").fetchall()[0][0]
    facts = con.sql(f"SELECT count(*) FROM {raw_view('function_stats')}").fetchall()[0][0]
    con.close()
    assert unfinished, "the kill landed inside the batch"
    assert facts > 0 and (intervals > 0) == (after_commits == 5)
    said: list[str] = []
    report = ingest(str(jobs), str(store), executor=SparkPool(spark, min_files=0, slice_files=6), log=said.append)
    assert report.repaired and any("repaired an interrupted run" in line for line in said)
    assert snapshot(str(store)) == snapshot(str(native[2]))


def test_a_retried_task_leaves_nothing_doubled_and_its_first_attempt_s_files_are_cleared(native, jobs, spark, tmp_path):
    """The session's ``local[2,2]`` lets Spark run a failed task twice; every slice's first attempt fails
    after writing its fact files (PROFLAKE_FAIL_SPARK_TASKS, in the tasks' environment). The driver commits
    only the files the kept attempt returned: the store equals a native ingest, every row once, and the
    spool is gone when the run ends."""
    from deltalake import DeltaTable
    from proflake.spark import SparkPool

    store, attempts = tmp_path / "store", tmp_path / "attempts"
    attempts.mkdir()
    before = python_daemons(spark)
    with executor_environment(spark, {"PROFLAKE_FAIL_SPARK_TASKS": str(attempts)}):  # a new environment: its own daemon
        report = ingest(str(jobs), str(store), executor=SparkPool(spark, min_files=0))
    # The slices reach Spark as Arrow: mapInArrow's tasks are its only Python ones (a list of rows went
    # through an RDD whose Python tasks started a second daemon and its workers).
    assert len(python_daemons(spark) - before) == 1
    assert [f.kind for f in report.failed] == ["cprofile"]  # the damaged file, quarantined; nothing else failed
    assert sorted(p.name for p in attempts.iterdir()) == ["slice-0"], "the slice's first attempt failed"
    assert snapshot(str(store)) == snapshot(str(native[2]))
    for name in FACT_TABLES:
        on_disk = {p.name for p in (store / name).glob("*.parquet")}
        committed = {Path(u).name for u in DeltaTable(str(store / name)).file_uris()}
        assert on_disk == committed, name
    assert not (store / "_proflake" / "spool").exists() or not any((store / "_proflake" / "spool").iterdir())
