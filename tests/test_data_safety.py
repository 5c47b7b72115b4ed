"""Nothing lost, nothing doubled (docs/data-safety.md): full refreshes killed at every commit and at random
moments while readers ask the same questions in a loop, a lost intervals log entry, a full refresh scoped
to its source. Real processes, killed with SIGKILL and SIGTERM."""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path

from helpers.cli import run_cli
from helpers.forked import INLINE, ForkedProcess, Zygote
from helpers.profiles import JobBuilder, write_cprofile
from helpers.recovery import recover
from helpers.safety_reader import answer
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from proflake import Profiles, ingest
from proflake.sources.local import LocalSource
from proflake.store.store import Store
from test_batches import build_corpus, run_ingest, snapshot

HERE = Path(__file__).resolve().parent


@contextmanager
def readers(store: Path, tmp_path: Path, count: int = 1, zygote: Zygote | None = None):
    """Reader processes asking the store the same questions in a loop (new interpreters, or children
    forked from ``zygote``: helpers/forked.py); yields the list their answers fill once they stop."""
    stop = tmp_path / "stop-readers"
    outs = [tmp_path / f"reader-{i}.jsonl" for i in range(count)]
    procs = [
        zygote.call("helpers.safety_reader:main", [str(store), str(out), str(stop)]) if zygote is not None
        else subprocess.Popen([sys.executable, str(HERE / "helpers" / "safety_reader.py"), str(store), str(out), str(stop)])
        for out in outs
    ]
    answers: list[dict] = []
    try:
        yield answers
    finally:
        stop.touch()
        for proc in procs:
            assert proc.wait(timeout=120) == 0, "a reader failed: its answers stop where it did"
        for out in outs:
            if out.exists():
                answers.extend(json.loads(line) for line in out.read_text().splitlines() if line.strip())
        stop.unlink()


def _wait(proc: ForkedProcess) -> int:
    proc.communicate(timeout=300)
    return proc.returncode


def test_full_refresh_killed_after_every_commit_and_at_random_never_shows_two_generations(tmp_path):
    """Every run is a real process killed by a real signal, forked (as is the reader) from one interpreter
    that has imported proflake (helpers/forked.py, which names the tests that start new interpreters);
    the run after each kill repairs in this process (helpers/recovery.py)."""
    src, store, reference = tmp_path / "src", tmp_path / "store", tmp_path / "reference"
    build_corpus(src, nodes=2, steps=3, pyinstrument_every=2)
    ingest(str(src), str(reference))
    expected, clean = answer(str(reference)), snapshot(str(reference))
    assert expected["by_step_calls"] > 0 and expected["frames"] > 0
    shutil.copytree(reference, store)  # the same store a second ingest would write
    outcomes = []
    with Zygote() as zygote, readers(store, tmp_path, zygote=zygote) as answers:
        commit = 0
        while True:  # SIGKILL right after each commit of the full refresh, until a run gets through
            commit += 1
            started = time.monotonic()
            # Parsing on the killed run's own threads (INLINE): its commits are what is killed here; the
            # signals at random moments below find real parse workers.
            run = run_ingest(src, store, "--full-refresh", *INLINE, env={"PROFLAKE_KILL_AFTER_COMMITS": str(commit)},
                             zygote=zygote)
            rc = _wait(run)
            outcomes.append((commit, rc))
            if rc == 0:
                duration = time.monotonic() - started  # a whole full refresh, its exit included
                break
            assert rc == -signal.SIGKILL, outcomes
            assert answer(str(store)) == expected, f"after a kill at commit {commit}"
            recover(src, store)  # the next nightly run repairs
            assert snapshot(str(store)) == clean, f"recovered after a kill at commit {commit}"
        assert commit > 6, outcomes  # the kills reached past the intervals commit, into the clean-up
        rng = random.Random(18)
        for sig in (signal.SIGKILL, signal.SIGTERM, signal.SIGKILL):
            proc = run_ingest(src, store, "--full-refresh", zygote=zygote)
            # A random moment of the run (the property under test): its last ~third is the exit, after
            # the batch is recorded, where a signal finds nothing left to interrupt.
            time.sleep(duration * rng.uniform(0.1, 0.7))
            proc.send_signal(sig)
            rc = _wait(proc)
            outcomes.append((sig.name, rc))
            assert answer(str(store)) == expected
            recover(src, store)
            assert snapshot(str(store)) == clean
    assert answers, "the readers never answered"
    wrong = [a for a in answers if a != expected]
    assert not wrong, (len(wrong), len(answers), wrong[:3], expected)


def test_a_lost_intervals_log_entry_rolls_back_and_the_next_run_does_not_double(tmp_path):
    src, store, reference = tmp_path / "src", tmp_path / "store", tmp_path / "reference"
    build_corpus(src, nodes=1, steps=3)
    ingest(str(src), str(store))
    first = answer(str(store))
    build_corpus(tmp_path / "more", nodes=2, steps=3)
    shutil.copytree(tmp_path / "more" / "job-1" / "framework" / "pytorch" / "cprofile" / "algo-2",
                    src / "job-1" / "framework" / "pytorch" / "cprofile" / "algo-2")
    assert ingest(str(src), str(store)).new_intervals > 0
    log = store / "intervals" / "_delta_log"
    latest = max(log.glob("*.json"))
    latest.unlink()  # the intervals commit of the second batch is lost
    assert answer(str(store)) == first  # rolled back, whole
    again = ingest(str(src), str(store))
    assert again.new_intervals > 0
    ingest(str(src), str(reference))
    assert snapshot(str(store)) == snapshot(str(reference))  # no second generation, visible or hidden


def _two_sources(tmp_path: Path) -> tuple[Path, Path]:
    one, two = tmp_path / "team-a", tmp_path / "team-b"
    build_corpus(one, nodes=1, steps=2)
    build_corpus(two, nodes=2, steps=2)
    (two / "job-1").rename(two / "job-2")
    return one, two


def test_full_refresh_replaces_only_what_its_source_covers(tmp_path):
    one, two = _two_sources(tmp_path)
    store, reference = tmp_path / "store", tmp_path / "reference"
    for source in (one, two):
        ingest(str(source), str(store))
        ingest(str(source), str(reference))
    covered = Store(store).connect().sql(
        f"SELECT count(*) FROM intervals WHERE starts_with(source_uri, '{one}/')"
    ).fetchall()[0][0]
    proc = run_cli(["ingest", str(one), "--store", str(store), "--full-refresh", "--json"])
    assert proc.returncode == 0, proc.stderr
    summary = json.loads(proc.stdout)
    assert summary["removed_intervals"] == covered == summary["new_intervals"] > 0
    assert f"{covered} interval(s) ingested from it before were removed" in proc.stderr
    jobs = {row[0] for row in Store(store).connect().sql("SELECT DISTINCT job_id FROM intervals").fetchall()}
    assert jobs == {"job-1", "job-2"}
    assert snapshot(str(store)) == snapshot(str(reference))
    # Files gone from the source go with a full refresh; the other source's stay.
    shutil.rmtree(one / "job-1" / "framework" / "pytorch" / "pyinstrument")
    os.environ.pop("PROFLAKE_KILL_AFTER_COMMITS", None)
    report = ingest(str(one), str(store), full_refresh=True)
    assert report.removed_intervals == covered and report.new_intervals < covered
    assert {row[0] for row in Store(store).connect().sql("SELECT DISTINCT job_id FROM intervals").fetchall()} == jobs


def test_rebuild_says_what_it_deletes_and_does_it_only_with_yes(tmp_path):
    one, two = _two_sources(tmp_path)
    store, reference = tmp_path / "store", tmp_path / "reference"
    for source in (one, two):
        ingest(str(source), str(store))
    ingest(str(one), str(reference))
    before = snapshot(str(store))
    elsewhere = Store(store).connect().sql(
        f"SELECT count(*) FROM intervals WHERE NOT starts_with(source_uri, '{one}/')"
    ).fetchall()[0][0]
    rebuild = ["rebuild", str(one), "--store", str(store), "--json"]
    dry = run_cli(rebuild)
    assert dry.returncode == 0, dry.stderr
    assert json.loads(dry.stdout)["deleted_intervals"] == {"job-2": elsewhere} and elsewhere > 0
    assert f"  job-2: {elsewhere} interval(s)" in dry.stderr and "nothing changed: pass --yes" in dry.stderr
    assert snapshot(str(store)) == before
    done = run_cli([*rebuild, "--yes"])
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert summary["whole_store"] and summary["removed_intervals"] == len(before["intervals"])
    assert "whole store rebuilt from" in done.stderr
    assert snapshot(str(store)) == snapshot(str(reference))  # exactly what the source holds, nothing else


def test_demo_refuses_a_store_holding_another_job_and_replaces_only_its_own(tmp_path):
    build_corpus(tmp_path / "src", nodes=1, steps=2)
    real = tmp_path / "real-store"
    ingest(str(tmp_path / "src"), str(real))
    before = snapshot(str(real))
    demo = ["demo", "--out", str(tmp_path / "sample")]
    refused = run_cli([*demo, "--store", str(real)])
    assert refused.returncode == 1, refused.stderr
    assert "holds data the demo did not write (jobs: job-1)" in refused.stderr and "Traceback" not in refused.stderr
    assert snapshot(str(real)) == before
    # Its own store: a second demo replaces the sample job, under the lock, in one commit.
    own = tmp_path / "demo-store"
    for _ in range(2):
        done = run_cli([*demo, "--store", str(own)])
        assert done.returncode == 0, done.stderr
    assert Store(own).connect().sql("SELECT job_id, count(*) FROM intervals GROUP BY ALL").fetchall() == [("sample", 30)]


def test_intervals_differing_only_in_mode_are_two_intervals(tmp_path):
    job = JobBuilder(tmp_path / "src" / "job-1")
    job.cprofile("algo-1", "train-4-stepend-5000_eval-0-stepstart-5000", "a")
    job.cprofile("algo-1", "train-4-stepend-5000_train-5-stepstart-5000", "b")
    report = ingest(str(tmp_path / "src"), str(tmp_path / "store"))
    assert (report.new_intervals, report.failed) == (2, [])


def test_two_teams_run_7_are_never_merged_into_one_job(tmp_path):
    for team in ("team-a", "team-b"):
        JobBuilder(tmp_path / team / "run-7").cprofile("algo-1", "train-0-stepstart-1000_train-0-stepend-2000", "a")
    store = str(tmp_path / "store")
    assert ingest(str(tmp_path / "team-a"), store).new_intervals == 1
    refused = ingest(str(tmp_path / "team-b"), store)
    assert refused.new_intervals == 0 and [f.kind for f in refused.failed] == ["job_conflict"]
    assert "job id 'run-7' is taken by the job in" in refused.failed[0].message and "--job" in refused.failed[0].message
    named = ingest(str(tmp_path / "team-b"), store, job_id="team-b/run-7")
    assert named.new_intervals == 1 and not named.failed
    jobs = Store(store).connect().sql("SELECT job_id, count(*) FROM intervals GROUP BY ALL ORDER BY ALL").fetchall()
    assert jobs == [("run-7", 1), ("team-b/run-7", 1)]


def test_qualify_jobs_keeps_parent_folders_until_the_job_id_is_free(tmp_path):
    # What the smdebug-compatible classes ask for: never refused, never merged, the same id every run.
    for team in ("a/team", "b/team", "c/team"):
        JobBuilder(tmp_path / team / "run-7").cprofile("algo-1", "train-0-stepstart-1000_train-0-stepend-2000", "a")
    store = str(tmp_path / "store")
    for team in ("a/team", "b/team", "c/team", "b/team"):
        report = ingest(str(tmp_path / team), store, qualify_jobs=True)
        assert not report.failed
    JobBuilder(tmp_path / "b/team/run-7").cprofile("algo-1", "train-1-stepstart-3000_train-1-stepend-4000", "b")
    assert ingest(str(tmp_path / "b/team"), store, qualify_jobs=True).new_intervals == 1
    jobs = Store(store).connect().sql("SELECT job_id, count(*) FROM intervals GROUP BY ALL ORDER BY ALL").fetchall()
    assert jobs == [("c/team/run-7", 1), ("run-7", 1), ("team/run-7", 2)]


# Hostile folder names and metadata beside good files: huge, negative, NaN-like times and steps, names
# that are not UTF-8, folders that vanish while the source is walked.
_TIMES = st.sampled_from(["1000", "99999999999999999999999", "1e400", "nan", "-5", "1000.5", "0"])
_STEPS = st.sampled_from(["1", "-1", "*", str(2**63), str(2**63 - 1), str(-(2**63) - 1), "99999999999999999999"])


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    start=_TIMES, end=_TIMES, step=_STEPS, mode=st.sampled_from(["train", "eval", "bogus"]),
    raw_name=st.binary(min_size=1, max_size=6).filter(lambda b: b"/" not in b and b"\x00" not in b and b not in (b".", b"..")),
    vanish=st.booleans(),
)
def test_hostile_folder_names_quarantine_their_files_and_the_good_files_land(tmp_path_factory, start, end, step, mode, raw_name, vanish):
    root = tmp_path_factory.mktemp("hostile")
    src = root / "src"
    job = JobBuilder(src / "job-1")
    good = [job.cprofile("algo-1", f"train-{s}-stepstart-{1000 + 100 * s}_train-{s}-stepend-{1050 + 100 * s}", "a") for s in range(3)]
    hostile = job.stats_dir("cprofile", "algo-1", f"{mode}-{step}-stepstart-{start}_{mode}-{step}-stepend-{end}")
    write_cprofile(hostile, "b")
    node = os.fsencode(job.stats_dir("cprofile", "algo-2", "x").parent)
    odd = os.path.join(node, raw_name)  # a node folder whose name is any bytes
    os.makedirs(os.path.join(odd, b"train-0-stepstart-10_train-0-stepend-20"))
    shutil.copy(good[0], os.path.join(odd, b"train-0-stepstart-10_train-0-stepend-20", b"python_stats"))
    # The CLI in this process (helpers/cli.py): its exit code, its one-line errors and its JSON are what
    # is tested, not its process; the vanishing folder is a patch of the walk, undone after each example.
    target = os.fsdecode(os.path.join(node, raw_name)) if vanish else None
    original = LocalSource._files_of

    def vanishing(self, folder, parts):
        if folder == target:
            shutil.rmtree(folder)
        return (yield from original(self, folder, parts))

    LocalSource._files_of = vanishing
    try:
        done = run_cli(["ingest", str(src), "--store", str(root / "store"), "--json"])
    finally:
        LocalSource._files_of = original
    assert "Traceback" not in done.stderr, done.stderr
    assert done.returncode in (0, 3), done.stderr
    report = json.loads(done.stdout)
    landed = {row[0] for row in Store(root / "store").connect().sql("SELECT source_uri FROM intervals").fetchall()}
    assert {str(p) for p in good} <= landed
    assert all(isinstance(f["message"], str) and f["kind"] for f in report["failed"])


def test_steps_compare_as_integers_at_the_top_of_their_range(tmp_path):
    job = JobBuilder(tmp_path / "src" / "job-1")
    for step, start in ((2**63 - 2, 1000), (2**63 - 1, 2000)):
        job.cprofile("algo-1", f"train-{step}-stepstart-{start}_train-{step}-stepend-{start + 500}", "a")
    store = str(tmp_path / "store")
    assert ingest(str(tmp_path / "src"), store).new_intervals == 2
    picked = Profiles(store).by_step(2**63 - 1, all_jobs=True).intervals
    assert [row["start_step"] for row in picked.to_pylist()] == [2**63 - 1]
