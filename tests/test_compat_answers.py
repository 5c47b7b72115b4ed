"""The answers the compatible classes keep (proflake.smdebug.store_view): asked again while nothing
changed, a fetch returns what it returned before without a query; anything that changes the data
(a new or rewritten file in the source, another ingest into the store) is seen at the next refresh."""

from __future__ import annotations

import os

from helpers.profiles import JobBuilder, assert_same_pstats, pstats_of
from proflake import ingest
from proflake.modes import PythonProfileModes
from proflake.smdebug.compat import cProfileAnalysis

TRAIN, EVAL = PythonProfileModes.TRAIN, PythonProfileModes.EVAL


def _functions(stats) -> set[str]:
    return {key[2] for key in stats.ps.stats}


def _queries(analysis, monkeypatch) -> list[str]:
    """The named queries the analysis's view runs from now on."""
    ran: list[str] = []
    real = type(analysis.profiles)._run

    def counting(self, name, params):
        ran.append(name)
        return real(self, name, params)

    monkeypatch.setattr(type(analysis.profiles), "_run", counting)
    return ran


def test_an_unchanged_question_is_answered_without_a_query(tmp_path, monkeypatch):
    job = JobBuilder(tmp_path / "job")
    job.cprofile("algo-1", "train-1-stepstart-1000_train-1-stepend-2000", "a")
    analysis = cProfileAnalysis(str(job.base), store=tmp_path / "store")
    first = analysis.fetch_profile_stats_by_step(1)
    ran = _queries(analysis, monkeypatch)
    again = cProfileAnalysis(str(job.base), store=tmp_path / "store").fetch_profile_stats_by_step(1)
    assert ran == [] and again.ps.stats == first.ps.stats
    # Each caller gets its own pstats.Stats: sorting or adding to one leaves the next answer as it was.
    first.ps.sort_stats("tottime")
    first.ps.stats.clear()
    assert analysis.fetch_profile_stats_by_step(1).ps.stats == again.ps.stats
    assert again.ps.files == [str(next((job.base).rglob("python_stats")).resolve())]


def test_a_rewritten_file_is_seen_at_the_next_refresh(tmp_path):
    job = JobBuilder(tmp_path / "job")
    path = job.cprofile("algo-1", "train-1-stepstart-1000_train-1-stepend-2000", "a")
    analysis = cProfileAnalysis(str(job.base), store=tmp_path / "store")
    before = _functions(analysis.fetch_profile_stats_by_step(1))
    stat = path.stat()
    job.cprofile("algo-1", "train-1-stepstart-1000_train-1-stepend-2000", "b")  # same path, other workload
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))  # whatever the clock's grain
    assert _functions(analysis.fetch_profile_stats_by_step(1, refresh_stats=False)) == before
    after = _functions(analysis.fetch_profile_stats_by_step(1))
    assert after != before


def test_without_a_source_an_ingest_elsewhere_is_seen_and_nothing_else_reopens(tmp_path, monkeypatch):
    job = JobBuilder(tmp_path / "job")
    job.cprofile("algo-1", "train-1-stepstart-1000_train-1-stepend-2000", "a")
    store = tmp_path / "store"
    ingest(str(job.base), str(store))
    analysis = cProfileAnalysis(store=store)
    assert analysis.fetch_profile_stats_by_step(2) is None
    connection = analysis.profiles.connection()
    assert analysis.fetch_profile_stats_by_step(1) is not None
    assert analysis.profiles.connection() is connection  # the store did not move: the view stays open
    job.cprofile("algo-1", "train-2-stepstart-3000_train-2-stepend-4000", "b")
    ingest(str(job.base), str(store))  # another notebook, or the CLI
    assert analysis.fetch_profile_stats_by_step(2, refresh_stats=False) is None
    assert analysis.fetch_profile_stats_by_step(2) is not None


def _two_mode_job(base):
    job = JobBuilder(base)
    train = [job.cprofile(node, "train-1-stepstart-1000_train-1-stepend-2000", "a") for node in ("algo-1", "algo-2")]
    evals = [job.cprofile(node, "eval-1-stepstart-3000_eval-1-stepend-4000", "b") for node in ("algo-1", "algo-2")]
    return job, train, evals


def test_the_roll_ups_of_a_folder_of_whole_jobs(tmp_path):
    job, train, evals = _two_mode_job(tmp_path / "job")
    analysis = cProfileAnalysis(str(job.base), store=tmp_path / "store")
    phases = analysis.fetch_profile_stats_by_training_phase(node_id=None)
    assert_same_pstats(phases[(TRAIN, TRAIN)].ps.stats, pstats_of(train))
    assert_same_pstats(phases[(EVAL, EVAL)].ps.stats, pstats_of(evals))
    by_phase = analysis.fetch_profile_stats_by_job_phase()  # node "any": the first node's
    assert_same_pstats(by_phase["training_loop"].ps.stats, pstats_of([train[0], evals[0]]))


def test_a_folder_holding_part_of_a_job_sums_its_own_files(tmp_path):
    job, train, evals = _two_mode_job(tmp_path / "job")
    ingest(str(job.base), str(tmp_path / "store"))  # the whole job is in the store, phase roll-ups built
    analysis = cProfileAnalysis(str(train[0].parent), store=tmp_path / "store")  # one interval's folder
    phases = analysis.fetch_profile_stats_by_training_phase()
    assert list(phases) == [(TRAIN, TRAIN)]
    assert_same_pstats(phases[(TRAIN, TRAIN)].ps.stats, pstats_of(train[:1]))


def test_the_local_probe_sees_what_the_source_lists(tmp_path):
    # The probe walks a local folder itself (proflake.ingestion.probe): the same stats files, with the
    # same uri, parts, size, version and problem as LocalSource.list gives them.
    from proflake.ingestion.probe import Probe, _local_stats_files, probe
    from proflake.sources import open_source

    job = JobBuilder(tmp_path / "job")
    job.cprofile("algo-1", "train-1-stepstart-1000_train-1-stepend-2000")
    job.pyinstrument("algo-2", "train-1-stepstart-1000_train-1-stepend-2000")
    misnamed = job.base / "framework" / "pytorch" / "cprofile" / "algo-1" / "not-an-interval"
    misnamed.mkdir()
    (misnamed / "python_stats").write_bytes(b"x")
    (job.base / "notes.txt").write_text("x")
    os.symlink(misnamed / "python_stats", job.base / "framework" / "python_stats")  # a link to a file
    os.symlink(misnamed, job.base / "linked-folder")  # never walked into
    src = open_source(str(job.base))

    def rows(objects):
        return sorted((o.uri, o.parts, o.size, o.version, o.problem is not None) for o in objects)

    names = ("python_stats", "python_stats.json")
    listed = [o for o in src.list() if o.parts[-1] in names]
    counted = Probe()
    assert rows(_local_stats_files(src, counted)) == rows(listed) and len(listed) == 4
    assert counted.files_seen + len(listed) == sum(1 for _ in src.list())
    known = {o.uri: (o.size, o.version) for o in listed}
    assert probe(src, known).unchanged
    # Nothing known: all four are new (the misnamed folder's and the link too: the ingest reports them).
    assert sorted(probe(src, {}, stop_at_first=False).new) == sorted(o.uri for o in listed)
