"""Schema evolution (etl/proflake/store/migrations.py, docs/store.md#schema-versions): the store written by
the release before schema versions (tests/data/stores/v1, made at c1d8011) is read by this release with
the answers that release gave, upgraded by ingesting into it (the migration recorded, old rows back-filled,
new rows carrying the new columns), still answering the same for its old rows; a kill during the
migration leaves a store the next run finishes; a store of a later release is refused."""

from __future__ import annotations

import json
import math
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from helpers.cli import run_cli
from helpers.old_store import JOBS, answers
from helpers.profiles import JobBuilder
from helpers.recovery import environment
from proflake import ingest
from proflake.errors import ExitCode
from proflake.store.migrations import CURRENT_VERSION, RECORD, schema_state
from proflake.store.store import Store
from test_s3 import bucket  # noqa: F401 (a fixture; the S3 server itself is conftest's)

DATA = Path(__file__).resolve().parent / "data" / "stores"
OLD_STORE = DATA / "v1"
OLD_ANSWERS = json.loads((DATA / "v1-answers.json").read_text())
NEW_COLUMNS = ("source_format", "time_unit", "sample_rate_hz")
STEP = "train-0-stepstart-20000_train-0-stepend-21000"


def copy_old_store(tmp: Path) -> Path:
    """The checked-in store, copied (tests never change the fixture)."""
    target = tmp / "store"
    shutil.copytree(OLD_STORE, target)
    return target


def new_job(root: Path, name: str = "run-new") -> Path:
    """A job to ingest into the old store: one cProfile and one pyinstrument interval."""
    job = root / name
    JobBuilder(job).cprofile("algo-1", STEP)
    JobBuilder(job).pyinstrument("algo-1", STEP)
    return job


def assert_same(actual: object, expected: object, where: str = "") -> None:
    """``actual`` holds ``expected`` (floats within 1e-12 relative: sums may be taken in another order);
    a row may carry columns the old release had not (checked by the tests themselves)."""
    if isinstance(expected, dict):
        assert isinstance(actual, dict), where
        for key, value in expected.items():
            assert key in actual, f"{where}.{key}"
            assert_same(actual[key], value, f"{where}.{key}")
    elif isinstance(expected, list):
        assert isinstance(actual, list) and len(actual) == len(expected), where
        for i, (a, e) in enumerate(zip(actual, expected)):
            assert_same(a, e, f"{where}[{i}]")
    elif isinstance(expected, float) and isinstance(actual, float):
        assert actual == pytest.approx(expected, rel=1e-12, abs=1e-15) or (math.isnan(actual) and math.isnan(expected)), where
    else:
        assert actual == expected, (where, actual, expected)


def assert_old_answers(store: Path) -> None:
    """Every answer of the old release on its jobs, batches and quarantine, still given."""
    now = answers(store)
    for job in JOBS:
        assert_same(now[job], OLD_ANSWERS[job], job)
    old_batches = {row["batch_id"] for row in OLD_ANSWERS["batches"]}
    assert_same([row for row in now["batches"] if row["batch_id"] in old_batches], OLD_ANSWERS["batches"], "batches")
    assert_same([row for row in now["jobs"] if row["job_id"] in JOBS], OLD_ANSWERS["jobs"], "jobs")
    assert_same(now["errors"], OLD_ANSWERS["errors"], "errors")


def intervals_rows(store: Path) -> list[dict]:
    con = Store(store).connect(tables=())
    rows = con.sql("SELECT job_id, profiler, source_format, time_unit, sample_rate_hz FROM intervals ORDER BY ALL").fetchall()
    return [dict(zip(("job_id", "profiler", *NEW_COLUMNS), row)) for row in rows]


def parquet_columns(store: Path) -> list[list[str]]:
    """The columns of every live data file of ``intervals``, as its Parquet footer says."""
    return [pq.read_schema(uri).names for uri in Store(store).delta("intervals").file_uris()]


@pytest.fixture(scope="module")
def upgraded(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The old store, copied and upgraded by ingesting a new job into it."""
    tmp = tmp_path_factory.mktemp("upgraded")
    store = copy_old_store(tmp)
    report = ingest(str(new_job(tmp / "src")), str(store), workers=1)
    assert [m["version"] for m in report.migrated] == [2] and report.new_intervals == 2
    return store


def test_the_old_store_is_read_as_the_old_release_answered_with_the_new_columns_as_documented(tmp_path):
    store = copy_old_store(tmp_path)
    assert schema_state(Store(store)).version == 1 and not (store / RECORD).exists()
    assert_old_answers(store)
    for row in answers(store)[JOBS[0]]["list"]:
        assert (row["source_format"], row["time_unit"], row["sample_rate_hz"]) == (row["profiler"], "seconds", None)
    assert not (store / RECORD).exists(), "reading never migrates"
    assert all(not set(NEW_COLUMNS) & set(columns) for columns in parquet_columns(store))


def test_check_reports_the_version_and_the_pending_migration_and_repair_applies_it(tmp_path):
    store = copy_old_store(tmp_path)
    found = run_cli(["check", "--store", str(store), "--json"])
    assert found.returncode == 0, found.stderr
    schema = json.loads(found.stdout)["schema"]
    assert (schema["schema_version"], schema["current_version"], schema["pending"]) == (1, CURRENT_VERSION, [2])
    assert "schema version 1; this release's is 2: migration(s) 2 pending" in found.stderr
    repaired = run_cli(["check", "--repair", "--store", str(store)])
    assert repaired.returncode == 0 and repaired.stdout == "", repaired.stdout + repaired.stderr
    assert "schema version 2, this release's (migrated by this run: 2)" in repaired.stderr
    assert [(e["version"], e["step"], e["rows"]) for e in schema_state(Store(store)).history] == [(2, "migrated", 10)]
    assert_old_answers(store)
    again = run_cli(["check", "--store", str(store)])
    assert again.returncode == 0 and again.stdout == "" and "schema version 2, this release's" in again.stderr


def test_ingesting_into_the_old_store_migrates_it_first_and_old_rows_answer_as_before(upgraded):
    state = schema_state(Store(upgraded))
    assert state.version == CURRENT_VERSION == 2
    (entry,) = state.history
    assert (entry["version"], entry["step"], entry["rows"]) == (2, "migrated", 10)
    assert entry["by"].startswith("proflake ") and entry["at"] and "source_format" in entry["change"]
    # Back-filled in the table itself, so every Delta reader sees it: every file has the columns.
    assert all(set(NEW_COLUMNS) <= set(columns) for columns in parquet_columns(upgraded))
    raw = Store(upgraded).delta("intervals").to_pyarrow_table(columns=["job_id", "profiler", *NEW_COLUMNS]).to_pylist()
    assert len(raw) == 12 and all(r["source_format"] == r["profiler"] and r["time_unit"] == "seconds" for r in raw)
    assert {(r["job_id"], r["source_format"]) for r in intervals_rows(upgraded) if r["job_id"] == "run-new"} == {
        ("run-new", "cprofile"), ("run-new", "pyinstrument")}
    assert all(r["sample_rate_hz"] is None for r in raw)
    assert_old_answers(upgraded)
    checked = run_cli(["check", "--store", str(upgraded)])
    assert checked.returncode == 0 and checked.stdout == "", checked.stdout


def test_a_second_ingest_does_not_migrate_again(upgraded, tmp_path):
    store = tmp_path / "store"
    shutil.copytree(upgraded, store)
    version = Store(store).delta("intervals").version()
    report = ingest(str(new_job(tmp_path / "src", "run-newer")), str(store), workers=1)
    assert report.new_intervals == 2 and report.migrated == [] and len(schema_state(Store(store)).history) == 1
    assert Store(store).delta("intervals").version() == version + 1  # the batch's own commit only


def test_a_new_store_records_the_current_version_as_created(tmp_path):
    ingest(str(new_job(tmp_path / "src")), str(tmp_path / "store"), workers=1)
    state = schema_state(Store(tmp_path / "store"))
    assert state.version == CURRENT_VERSION and [e["step"] for e in state.history] == ["created"]


def _killed_ingest(source: Path, store: Path, env: dict[str, str]) -> int:
    done = subprocess.run(
        [sys.executable, "-m", "proflake.cli", "ingest", str(source), "--store", str(store), "--workers", "1"],
        capture_output=True, text=True, timeout=300, env={**os.environ, **env},
    )
    return done.returncode


@pytest.mark.integration
@pytest.mark.parametrize(
    ("env", "migrated"),
    [
        ({"PROFLAKE_KILL_AT": "migration-rewrite"}, False),  # half-way through the rewrite: nothing committed
        ({"PROFLAKE_KILL_AFTER_COMMITS": "1"}, True),  # the rewrite committed, the record not yet written
    ],
    ids=["during-the-rewrite", "between-the-commit-and-the-record"],
)
def test_a_kill_during_the_migration_is_finished_by_the_next_run_with_nothing_lost_or_doubled(tmp_path, env, migrated):
    store = copy_old_store(tmp_path)
    source = new_job(tmp_path / "src")
    assert _killed_ingest(source, store, env) == -signal.SIGKILL
    assert not (store / RECORD).exists()
    assert all((set(NEW_COLUMNS) <= set(c)) == migrated for c in parquet_columns(store))  # before, or after: never half
    assert_old_answers(store)  # the killed run changed no answer
    report = ingest(str(source), str(store), workers=1)  # the next run
    (entry,) = schema_state(Store(store)).history
    assert entry["step"] == ("found applied" if migrated else "migrated") and [m["version"] for m in report.migrated] == [2]
    assert all(set(NEW_COLUMNS) <= set(c) for c in parquet_columns(store))
    assert_old_answers(store)
    assert len(intervals_rows(store)) == 12  # ten old intervals once each, and the new job's two
    assert run_cli(["check", "--store", str(store)]).returncode == 0


def test_a_store_of_a_later_release_is_refused_by_readers_writers_and_check(tmp_path):
    store = copy_old_store(tmp_path)
    (store / RECORD).parent.mkdir(exist_ok=True)
    (store / RECORD).write_text(json.dumps({"schema_version": CURRENT_VERSION + 1, "history": []}))
    before = sorted(p.relative_to(store) for p in store.rglob("*"))
    source = new_job(tmp_path / "src")
    for args in (["jobs"], ["fetch", "by-step", "0", "--job", JOBS[0]], ["ingest", str(source)], ["check"], ["check", "--repair"]):
        refused = run_cli([*args, "--store", str(store)])
        assert refused.returncode == ExitCode.NEWER_STORE, (args, refused.stderr)
        assert refused.stdout == ""
        assert refused.stderr.strip() == (
            f"proflake: error: the store at {str(store)!r} has schema version {CURRENT_VERSION + 1}, written by a later "
            f"proflake; this release reads and writes up to version {CURRENT_VERSION}: upgrade proflake to use it"
        ), args
    assert sorted(p.relative_to(store) for p in store.rglob("*")) == before


def test_an_unreadable_schema_record_is_a_finding_that_repair_rewrites_from_the_columns(upgraded, tmp_path):
    store = tmp_path / "store"
    shutil.copytree(upgraded, store)
    (store / RECORD).write_text("{not json")
    found = run_cli(["check", "--store", str(store)])
    assert found.returncode == 1 and found.stdout.startswith("damage: schema_record: _proflake/schema.json is not"), found.stdout
    assert run_cli(["jobs", "--store", str(store)]).returncode == 1
    repaired = run_cli(["check", "--repair", "--store", str(store)])
    assert repaired.returncode == 0, repaired.stdout + repaired.stderr
    state = schema_state(Store(store))
    assert state.version == 2 and [e["step"] for e in state.history] == ["recovered"]
    assert_old_answers(store)



def test_compaction_migrates_first_and_the_catalog_of_an_old_store_reads_as_the_views(tmp_path):
    import duckdb

    store = copy_old_store(tmp_path)
    catalog = tmp_path / "old.duckdb"
    assert run_cli(["catalog", "--store", str(store), "--out", str(catalog)]).returncode == 0
    query = "SELECT interval_id, source_format, time_unit, sample_rate_hz FROM intervals ORDER BY ALL"
    with duckdb.connect(str(catalog), read_only=True) as con:
        in_catalog = con.sql(query).fetchall()
    assert in_catalog == Store(store).connect(tables=()).sql(query).fetchall()
    assert {row[1:] for row in in_catalog} == {("cprofile", "seconds", None), ("pyinstrument", "seconds", None)}
    compacted = run_cli(["compact", "--store", str(store)])
    assert compacted.returncode == 0, compacted.stderr
    assert [e["step"] for e in schema_state(Store(store)).history] == ["migrated"]
    assert_old_answers(store)


def test_an_old_store_on_s3_is_read_and_upgraded_by_an_ingest(s3, bucket, tmp_path):  # noqa: F811
    s3.upload_tree(OLD_STORE, bucket, "store")
    store = f"s3://{bucket}/store"
    query = "SELECT profiler, source_format, time_unit FROM intervals ORDER BY ALL"
    with environment({"AWS_ENDPOINT_URL": s3.endpoint}):
        before = Store(store).connect(tables=()).sql(query).fetchall()
        assert len(before) == 10 and all(row[1] == row[0] and row[2] == "seconds" for row in before)
        assert schema_state(Store(store)).version == 1
        report = ingest(str(new_job(tmp_path / "src")), store, workers=1)
        assert [m["step"] for m in report.migrated] == ["migrated"]
        assert schema_state(Store(store)).version == 2
        after = Store(store).connect(tables=()).sql(query).fetchall()
    assert sorted(after) == sorted([*before, ("cprofile", "cprofile", "seconds"), ("pyinstrument", "pyinstrument", "seconds")])
    record = json.loads(s3.client().get_object(Bucket=bucket, Key=f"store/{RECORD}")["Body"].read())
    assert record["schema_version"] == 2 and record["history"][0]["rows"] == 10


def test_files_an_older_release_wrote_into_a_migrated_store_are_found_and_back_filled(upgraded, tmp_path):
    """The c1d8011 release does not read the record: its full refresh of the migrated store would commit
    intervals files without the new columns. check names them; --repair rewrites the table back-filled."""
    import os
    import time

    from deltalake.transaction import AddAction

    store = tmp_path / "store"
    shutil.copytree(upgraded, store)
    table = Store(store).delta("intervals")
    adds = []
    for old in sorted((OLD_STORE / "intervals").glob("*.parquet")):  # the old release's own files
        shutil.copy(old, store / "intervals" / old.name)
        stats = json.dumps({"numRecords": pq.read_metadata(old).num_rows})
        adds.append(AddAction(old.name, os.path.getsize(old), {}, int(time.time() * 1000), True, stats))
    table.create_write_transaction(adds, mode="overwrite", schema=table.schema())  # as its commit_data_files did
    found = run_cli(["check", "--store", str(store)])
    assert found.returncode == 1, found.stdout + found.stderr
    assert found.stdout.startswith("damage: old_release_files: table 'intervals': 2 data file(s) lack column(s) "
                                   "source_format, time_unit, sample_rate_hz of schema version 2"), found.stdout
    repaired = run_cli(["check", "--repair", "--store", str(store)])
    assert repaired.returncode == 0 and repaired.stdout.startswith("repaired: old_release_files:"), repaired.stdout
    assert all(set(NEW_COLUMNS) <= set(columns) for columns in parquet_columns(store))
    assert_old_answers(store)
    assert run_cli(["check", "--store", str(store)]).returncode == 0


@pytest.mark.integration
def test_readers_see_the_same_answers_while_the_migration_is_killed_and_finished(tmp_path):
    """A reader process asks the old store the data-safety questions after every change of its logs while
    `check --repair` migrates it, killed half-way through the rewrite, killed after the commit, then run
    through: every answer equals the one before the migration."""
    from helpers.safety_reader import answer
    from test_data_safety import readers

    store = copy_old_store(tmp_path)
    expected = answer(str(store))
    assert expected["intervals"] == 10 and expected["by_step_calls"] > 0

    def repair(env: dict[str, str]) -> int:
        return subprocess.run([sys.executable, "-m", "proflake.cli", "check", "--repair", "--store", str(store)],
                              capture_output=True, text=True, timeout=300, env={**os.environ, **env}).returncode

    with readers(store, tmp_path) as seen:
        assert repair({"PROFLAKE_KILL_AT": "migration-rewrite"}) == -signal.SIGKILL
        assert repair({"PROFLAKE_KILL_AFTER_COMMITS": "1"}) == -signal.SIGKILL
        assert not (store / RECORD).exists()
        assert repair({}) == 0
    assert [e["step"] for e in schema_state(Store(store)).history] == ["found applied"]
    assert seen and all(a == expected for a in seen), [a for a in seen if a != expected][:3]
    assert answer(str(store)) == expected
