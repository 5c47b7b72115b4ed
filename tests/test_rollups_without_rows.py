"""Phase roll-ups of jobs whose facts hold no rows for a phase table (etl/proflake/store/rollups.py,
fresh_and_unproven): nothing there carries a fingerprint, so the facts decide whether the job is fresh."""

from __future__ import annotations

import cProfile
import marshal
import pstats

import pytest
from helpers.profiles import JobBuilder, assert_same_pstats
from helpers.same_answers import assert_same_table
from proflake import Profiles, ingest
from proflake.ingestion.check import check
from proflake.store import rollups
from proflake.store.rollups import CHECKED_FILE, PHASE_TABLES
from proflake.store.store import Store
from test_rollups import answers_like_the_facts, build_jobs
from test_s3 import bucket  # noqa: F401 (a fixture; the S3 server itself is conftest's)

INTERVAL = "train-0-stepstart-1000_train-0-stepend-2000"


def build_store(tmp_path):
    """job-1: real profiles; job-empty: one empty step (cProfile records only its own disable(), called
    from outside the profile: no caller edge); job-void: a dump taken before the profiler ran (no function)."""
    empty = JobBuilder(tmp_path / "src" / "job-empty").stats_dir("cprofile", "algo-1", INTERVAL)
    empty.mkdir(parents=True)
    profile = cProfile.Profile()
    profile.enable()
    profile.disable()
    pstats.Stats(profile).dump_stats(str(empty / "python_stats"))
    void = JobBuilder(tmp_path / "src" / "job-void").stats_dir("cprofile", "algo-1", INTERVAL)
    void.mkdir(parents=True)
    (void / "python_stats").write_bytes(marshal.dumps({}))
    build_jobs(tmp_path / "src", jobs=("job-1",), nodes=1, steps=2)
    store = tmp_path / "store"
    ingest(str(tmp_path / "src"), str(store))
    return store


def test_jobs_whose_facts_hold_no_rows_have_fresh_rollups(tmp_path, monkeypatch):
    """Fresh: answered from the roll-ups, sound to check, not rebuilt by the next ingest; and the facts are
    asked only about the jobs a question covers (and whose intervals cannot tell), once."""
    store = build_store(tmp_path)
    every = {"job-1", "job-empty", "job-void"}
    assert Profiles(str(store))._phase_rollup_state() == (every, every)
    asked: list[frozenset] = []
    real = rollups.fresh_without_rows
    monkeypatch.setattr(rollups, "fresh_without_rows", lambda con, jobs, built: asked.append(jobs) or real(con, jobs, built))
    profiles = Profiles(str(store))
    profiles.by_job_phase(job="job-1")
    profiles.by_job_phase(all_jobs=True)
    profiles.by_training_phase(all_jobs=True)
    assert asked == [{"job-empty"}]  # job-void: its intervals say it recorded no function
    assert not check(Store(str(store))).findings
    (store / CHECKED_FILE).unlink()  # no shortcut: the next run checks freshness, and finds nothing stale
    said: list[str] = []
    ingest(str(tmp_path / "src"), str(store), log=said.append)
    assert not any("roll-ups" in message for message in said), said
    answers_like_the_facts(store, sorted(every))


@pytest.mark.parametrize("lost", list(PHASE_TABLES))
def test_a_job_that_lost_its_rows_in_one_phase_table_is_stale_and_repaired(tmp_path, lost):
    """Its rows elsewhere are fresh, but its facts hold rows for the table where it has none: stale."""
    store = build_store(tmp_path)
    Store(str(store)).replace_jobs(lost, None, ["job-1"], "test")
    assert Profiles(str(store))._phase_rollup_state()[0] == {"job-empty", "job-void"}
    assert [f.kind for f in check(Store(str(store))).findings] == ["stale_rollups"]
    assert [f.kind for f in check(Store(str(store)), repair_damage=True).findings] == ["stale_rollups"]
    assert Profiles(str(store))._phase_rollup_state()[0] == {"job-1", "job-empty", "job-void"}
    assert not check(Store(str(store))).findings
    answers_like_the_facts(store, ["job-1", "job-empty", "job-void"])


def write_dump(folder, kind: str) -> None:
    """A python_stats file: "real" (a small workload), "empty" (an empty step) or "void" (no function)."""
    folder.mkdir(parents=True, exist_ok=True)
    if kind == "real":
        from helpers.profiles import write_cprofile

        write_cprofile(folder, "b")
    elif kind == "empty":
        profile = cProfile.Profile()
        profile.enable()
        profile.disable()
        pstats.Stats(profile).dump_stats(str(folder / "python_stats"))
    else:
        (folder / "python_stats").write_bytes(marshal.dumps({}))


def test_after_every_ingest_of_a_changing_source_the_rollups_are_fresh_and_sound(tmp_path):
    """Jobs moving between real, empty-step and function-less dumps, file by file: after each ingest
    (adds merged, replacements rebuilt), every job answers from its roll-ups and check finds nothing."""
    source, store = tmp_path / "src", tmp_path / "store"
    a1, a2 = (JobBuilder(source / "job-a").stats_dir("cprofile", "algo-1", f"train-{s}-stepstart-{s}000_train-{s}-stepend-{s}900") for s in (1, 2))
    b1 = JobBuilder(source / "job-b").stats_dir("cprofile", "algo-2", INTERVAL)
    steps = [[(a1, "real"), (b1, "void")], [(b1, "empty")], [(b1, "real")], [(a1, "void")], [(a2, "empty")], [(a1, "real"), (b1, "void")]]
    for number, changes in enumerate(steps):
        for folder, kind in changes:
            write_dump(folder, kind)
        ingest(str(source), str(store), executor="inline")
        profiles = Profiles(str(store))
        assert profiles._phase_rollup_state() == ({"job-a", "job-b"}, {"job-a", "job-b"}), number
        assert not check(Store(str(store))).findings, number
        # A source prefix keeps a question off the roll-ups: the same question answered from the facts.
        from_facts = Profiles(str(store), source_prefix=str(source)).by_training_phase(all_jobs=True, node="all", per_node=True)
        from_rollups = profiles.by_training_phase(all_jobs=True, node="all", per_node=True)
        assert from_rollups.groups() == from_facts.groups(), number
        for group in from_facts.groups():
            assert_same_pstats(from_rollups.to_pstats(group).stats, from_facts.to_pstats(group).stats)


def test_on_s3_too_such_jobs_answer_from_their_rollups_and_check_finds_nothing(s3, bucket, tmp_path, monkeypatch):  # noqa: F811
    """An S3 store checks freshness on every run (no local note to skip it): the same rules, over S3."""
    from helpers.cli import run_cli

    local = build_store(tmp_path)
    store = f"s3://{bucket}/store"
    assert run_cli(["ingest", str(tmp_path / "src"), "--store", store], s3.env()).returncode == 0
    for name, value in s3.env().items():
        if name.startswith("AWS_"):
            monkeypatch.setenv(name, value)
    every = {"job-1", "job-empty", "job-void"}
    assert Profiles(store)._phase_rollup_state() == (every, every)
    done = run_cli(["check", "--store", store], s3.env())
    assert done.returncode == 0, done.stdout + done.stderr
    said: list[str] = []
    ingest(str(tmp_path / "src"), store, log=said.append)  # nothing new: no roll-up rebuilt
    assert not any("roll-ups" in message for message in said), said
    assert_same_table(Profiles(store).by_job_phase(all_jobs=True).table, Profiles(str(local)).by_job_phase(all_jobs=True).table)
