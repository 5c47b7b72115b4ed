"""``proflake check [--repair]`` (etl/proflake/ingestion/check.py): each kind of damage is one line with its
remedy, ingest refuses a damaged store instead of recreating a table empty, and --repair restores what it
claims to (the store then equals a clean ingest)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from helpers.cli import run_cli
from helpers.prepared import PreparedFolder
from helpers.recovery import environment
from proflake import Profiles, ingest
from proflake.store.store import Store
from test_batches import build_corpus, snapshot
from test_s3 import bucket  # noqa: F401 (a fixture; the S3 server itself is conftest's)


def _cli(*args: str) -> subprocess.CompletedProcess:
    return run_cli(args)


def _setup(tmp_path: Path) -> tuple[Path, Path, dict]:
    src, store = tmp_path / "src", tmp_path / "store"
    build_corpus(src, nodes=2, steps=3, pyinstrument_every=2)
    ingest(str(src), str(store))
    ingest(str(src), str(tmp_path / "reference"))
    return src, store, snapshot(str(tmp_path / "reference"))


@pytest.fixture(scope="module")
def prepared(tmp_path_factory) -> PreparedFolder:
    """``_setup``'s corpus, store and clean snapshot, built once for the module (helpers/prepared.py)."""
    return PreparedFolder(tmp_path_factory.mktemp("check"), _setup)


def _fresh(prepared: PreparedFolder) -> tuple[Path, Path, dict]:
    folder = prepared.fresh()
    return folder / "src", folder / "store", prepared.built[2]


def _phases(store: Path) -> list:
    return sorted(Profiles(str(store)).by_job_phase(all_jobs=True).table.to_pylist(), key=str)


def test_a_deleted_fact_table_is_named_by_ingest_and_check_and_repaired_from_its_source(prepared):
    src, store, clean = _fresh(prepared)
    assert _cli("check", "--store", str(store)).returncode == 0
    shutil.rmtree(store / "function_stats")
    refused = _cli("ingest", str(src), "--store", str(store))
    assert refused.returncode == 1 and "Traceback" not in refused.stderr
    assert refused.stderr.strip().splitlines()[-1].endswith(
        f"is damaged: table(s) function_stats are missing; run 'proflake check --store {store}' (and --repair to rebuild what can be)"
    )
    found = _cli("check", "--store", str(store))
    assert found.returncode == 1 and "Traceback" not in found.stderr
    assert "damage: missing_table: table 'function_stats' is missing; 'proflake check --repair" in found.stdout
    repaired = _cli("check", "--repair", "--store", str(store))
    assert repaired.returncode == 0, repaired.stdout + repaired.stderr
    assert "repaired: interval_without_facts:" in repaired.stdout and f"parsed the lost files of {src}" in repaired.stderr
    assert snapshot(str(store)) == clean
    assert _cli("check", "--store", str(store)).returncode == 0


def test_a_truncated_fact_file_and_a_lost_rollup_file_are_found_and_rebuilt(prepared):
    _, store, clean = _fresh(prepared)
    phases = _phases(store)
    victim = Path(Store(store).delta("function_callers").file_uris()[0])
    victim.write_bytes(victim.read_bytes()[:100])
    Path(Store(store).delta("phase_function_stats").file_uris()[0]).unlink()
    found = _cli("check", "--store", str(store))
    assert found.returncode == 1
    lines = found.stdout.strip().splitlines()
    assert any(line.startswith("damage: bad_file: table 'function_callers': data file") and "does not read as Parquet" in line for line in lines)
    assert any(line.startswith("damage: bad_file: table 'phase_function_stats': data file") and "is missing" in line for line in lines)
    repaired = _cli("check", "--repair", "--store", str(store))
    assert repaired.returncode == 0, repaired.stdout + repaired.stderr
    assert snapshot(str(store)) == clean
    assert _phases(store) == phases
    assert _cli("check", "--store", str(store)).returncode == 0


def test_a_truncated_or_deleted_data_file_is_one_line_pointing_at_check_from_every_reading_command(prepared, tmp_path):
    _, store, _ = _fresh(prepared)
    victim = Path(Store(store).delta("function_stats").file_uris()[0])
    data = victim.read_bytes()
    readers = (["fetch", "by-step", "1", "--all-jobs"], ["sql", "SELECT sum(total_calls) FROM function_stats"],
               ["report", "job", "--all-jobs", "--out", str(tmp_path / "page.html")])
    # A deleted file: "missing" when the reader found it so in a fresh snapshot; "gone" when a command read
    # it mid-query (it cannot tell a vacuum from damage there, and says both).
    for damage, expected in (("truncated", ("does not read as Parquet",)), ("deleted", ("current log names is missing", "are gone"))):
        if damage == "truncated":
            victim.write_bytes(data[:100])
        else:
            victim.unlink()
        for args in readers:
            done = _cli(*args, "--store", str(store))
            assert done.returncode == 1 and "Traceback" not in done.stderr, (damage, args, done.stderr)
            last = done.stderr.strip().splitlines()[-1]
            assert last.startswith("proflake: error: ") and any(e in last for e in expected), (damage, args, last)
            assert "proflake check" in last, (damage, args, last)
    assert _cli("check", "--repair", "--store", str(store)).returncode == 0
    assert _cli("fetch", "by-step", "1", "--all-jobs", "--store", str(store)).returncode == 0


def test_check_finds_rewritten_truncated_and_missing_objects_on_an_s3_store_and_repairs_them(s3, bucket, tmp_path):  # noqa: F811
    """Every commit to an S3 table records its new objects' sizes and ETags (one listing); check compares
    them with one listing per table. Three objects damaged three ways at once (one rewritten with its
    size kept, one truncated, one deleted) are each named, and one --repair restores every row: one
    store and one repair on the S3 server, not one per kind of damage (each is ~15 s of CPU there)."""
    src = tmp_path / "src"
    build_corpus(src, nodes=1, steps=3)
    ingest(str(src), str(tmp_path / "reference"))
    clean = snapshot(str(tmp_path / "reference"))
    store = f"s3://{bucket}/store"
    # In this process, with the S3 settings in the environment it is given: each run makes its own S3Config,
    # so its own boto3 clients (nothing is cached from an earlier run), and the parse workers never reach
    # S3 (they write to a local spool the run uploads from; they are kept per environment, proflake.workers.pool).
    run = lambda *args: run_cli([*args, "--store", store], s3.env())  # noqa: E731
    assert run("ingest", str(src)).returncode == 0
    assert run("check").returncode == 0
    client = s3.client()

    def parquet_keys(table: str) -> list[str]:
        listed = client.list_objects_v2(Bucket=bucket, Prefix=f"store/{table}/")["Contents"]
        return sorted(o["Key"] for o in listed if o["Key"].endswith(".parquet"))

    registry = json.loads(client.get_object(Bucket=bucket, Key="store/_proflake/checksums/function_callers.json")["Body"].read())
    assert sorted("store/function_callers/" + path for path in registry["files"]) == parquet_keys("function_callers")
    flipped = parquet_keys("function_callers")[0]
    body = bytearray(client.get_object(Bucket=bucket, Key=flipped)["Body"].read())
    body[len(body) // 2] ^= 0xFF  # one byte flipped: the same size, the footer intact
    client.put_object(Bucket=bucket, Key=flipped, Body=bytes(body))
    truncated = parquet_keys("function_stats")[0]
    whole = client.get_object(Bucket=bucket, Key=truncated)["Body"].read()
    client.put_object(Bucket=bucket, Key=truncated, Body=whole[:100])
    client.delete_object(Bucket=bucket, Key=parquet_keys("phase_function_stats")[0])

    found = run("check")
    assert found.returncode == 1 and "Traceback" not in found.stderr
    lines = found.stdout.splitlines()
    assert f"table 'function_callers': data file s3://{bucket}/{flipped} changed after its commit" in found.stdout, lines
    assert any("table 'function_stats': data file" in line and f"(it has 100 bytes, its log says {len(whole):,})" in line
               for line in lines), lines
    assert any("table 'phase_function_stats': data file" in line and "is missing" in line for line in lines), lines
    # --repair in a process of its own: deltalake's DeltaTable.repair (1.6.6), which it calls on each damaged
    # table, holds the GIL while it waits on S3, so the S3 server's threads in this process could not answer
    # it (the run hung until object_store gave up, 3 minutes later, "cannot reach the S3 endpoint").
    repaired = subprocess.run([sys.executable, "-m", "proflake.cli", "check", "--repair", "--store", store],
                              capture_output=True, text=True, env=s3.env(), check=False)
    assert repaired.returncode == 0, repaired.stdout + repaired.stderr
    assert run("check").returncode == 0
    with environment({k: v for k, v in s3.env().items() if k.startswith("AWS_")}):
        assert snapshot(store) == clean
    local = Profiles(str(tmp_path / "reference")).by_job_phase(all_jobs=True).table.to_pylist()
    done = run("fetch", "by-job-phase", "--all-jobs", "--format", "json")
    assert done.returncode == 0, done.stderr
    assert len(json.loads(done.stdout)) == len(local)


def test_a_repair_of_a_table_commits_inside_the_writer_lock_s_fence(prepared, monkeypatch):
    """Removing a bad file from a table's log is a commit like any other: it happens only after the lock
    is checked (Store.committing, the fence), never around it."""
    import contextlib

    from deltalake import DeltaTable

    _, store, clean = _fresh(prepared)
    victim = Path(Store(store).delta("function_callers").file_uris()[0])
    victim.write_bytes(victim.read_bytes()[:100])
    fenced: list[str] = []
    repairs: list[tuple[str, list[str]]] = []
    committing = Store.committing

    @contextlib.contextmanager
    def recording(self, table=None):
        with committing(self, table):
            fenced.append(table)
            try:
                yield
            finally:
                fenced.pop()

    real_repair = DeltaTable.repair

    def repair(self, *args, **kwargs):
        repairs.append((Path(self.table_uri).name, list(fenced)))
        return real_repair(self, *args, **kwargs)

    monkeypatch.setattr(Store, "committing", recording)
    monkeypatch.setattr(DeltaTable, "repair", repair)
    repaired = _cli("check", "--repair", "--store", str(store))
    assert repaired.returncode == 0, repaired.stdout + repaired.stderr
    assert repairs == [("function_callers", ["function_callers"])]
    assert snapshot(str(store)) == clean


def test_check_opens_each_table_once_and_a_commit_between_its_steps_is_not_misreported(prepared, monkeypatch):
    """Plain check runs without the writer lock and opens each table once, handing it from step to step
    (etl/proflake/ingestion/opened.py). Another run's commits after those opens (a full refresh: every table
    written, files taken out of the logs) leave what check reads a sound store, and check says so."""
    from collections import Counter

    from helpers.table_opens import counted_opens
    from proflake.ingestion.opened import OpenedTables
    from proflake.schema import ALL_TABLES

    src, store, _ = _fresh(prepared)
    opens = counted_opens(monkeypatch)
    assert _cli("check", "--store", str(store)).returncode == 0
    assert Counter(opens) == Counter(ALL_TABLES), opens

    open_all = OpenedTables.open_all
    versions = {}

    def then_another_run_commits(self):
        damaged = open_all(self)
        versions.update({name: self.get(name).version() for name in ALL_TABLES})
        report = ingest(str(src), str(store), full_refresh=True)
        assert report.files_seen and not report.failed
        return damaged

    monkeypatch.setattr(OpenedTables, "open_all", then_another_run_commits)
    found = _cli("check", "--store", str(store), "--json")
    assert found.returncode == 0, found.stdout + found.stderr
    assert json.loads(found.stdout[found.stdout.index("{"):])["findings"] == []
    assert all(Store(store).delta(name).version() > versions[name] for name in ("intervals", "function_stats", "batches")), versions
