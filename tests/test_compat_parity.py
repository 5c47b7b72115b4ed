"""The compatible classes against smdebug 1.0.34 itself, one test per defect of issue 20.

The files are smdebug's own (tests/data/smdebug-1.0.34, written by its profiler classes); the expected
answers of smdebug's analysis classes on them were recorded by tests/smdebug/smdebug_answers.py.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
import sys
import warnings
from pathlib import Path

import pytest
from helpers.profiles import FORMAT_SAMPLES, JobBuilder
from proflake import ingest
from proflake.errors import MissingFolderError, UnknownNameError, UnrecognisedFilesWarning
from proflake.modes import PythonProfileModes
from proflake.smdebug.compat import PyinstrumentAnalysis, StepPythonProfileStats, cProfileAnalysis

# tests/test_smdebug_live.py points this at files (and answers) it has just made with smdebug.
DATA = Path(os.environ.get("PROFLAKE_SMDEBUG_FILES") or Path(__file__).parent / "data" / "smdebug-1.0.34")
ANSWERS = json.loads((DATA / "smdebug-answers.json").read_text())
CASES = [
    ("analysis", "tensorflow", "cprofile"),
    ("analysis", "tensorflow", "pyinstrument"),
    ("scenarios", "pytorch", "cprofile"),
    ("scenarios", "pytorch", "pyinstrument"),
]
CLASSES = {"cprofile": cProfileAnalysis, "pyinstrument": PyinstrumentAnalysis}


@pytest.fixture(scope="module")
def copies(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("smdebug-files")
    shutil.copytree(DATA / "analysis", root / "analysis")
    shutil.copytree(DATA / "scenarios", root / "scenarios")
    return root


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("parity") / "store"


def _plain(entry: StepPythonProfileStats, folder: Path) -> dict:
    out = {}
    for key, value in vars(entry).items():
        if key == "stats_path":
            value = str(Path(value).relative_to(folder.resolve()))
        elif hasattr(value, "name"):
            value = value.name
        elif isinstance(value, float) and math.isinf(value):
            value = "inf"
        out[key] = value
    return out


# -- 1 and 2: python_profile_stats, list_profile_stats -------------------------------------------------
@pytest.mark.parametrize("case, framework, profiler", CASES)
def test_python_profile_stats_and_listing_are_smdebugs(copies, store, case, framework, profiler):
    folder = copies / case / "framework" / framework / profiler
    analysis = CLASSES[profiler](local_profile_dir=str(folder), store=store)
    expected = ANSWERS[f"{case}/{profiler}"]
    entries = analysis.python_profile_stats
    assert all(type(e) is StepPythonProfileStats for e in entries)
    # Same attributes in the same order, same values, same order of entries.
    assert [list(vars(e)) for e in entries] == [list(e) for e in expected["python_profile_stats"]]
    assert [_plain(e, folder) for e in entries] == expected["python_profile_stats"]
    assert entries[0].start_mode is PythonProfileModes[expected["python_profile_stats"][0]["start_mode"]]
    df = analysis.list_profile_stats()
    assert list(df.shape) == expected["list_profile_stats"]["shape"]
    assert sorted(df.columns) == sorted(expected["list_profile_stats"]["columns"])
    assert list(df["stats_path"]) == [e.stats_path for e in entries]
    with pytest.raises(AttributeError):
        analysis.python_profile_stats = []
    with pytest.raises(AttributeError):
        entries[0].node_id = "x"


def test_python_profile_stats_is_refreshed_as_smdebug_refreshes_it(tmp_path):
    job = JobBuilder(tmp_path / "job")
    job.cprofile("algo-1", "train-1-stepstart-1000_train-1-stepend-2000")
    folder = job.base / "framework" / "pytorch" / "cprofile"
    analysis = cProfileAnalysis(str(folder), store=tmp_path / "store")
    assert len(analysis.python_profile_stats) == 1
    job.cprofile("algo-1", "train-2-stepstart-3000_train-2-stepend-4000")
    analysis.fetch_profile_stats_by_step(1, refresh_stats=False)
    assert len(analysis.python_profile_stats) == 1  # not refreshed: as smdebug, the old list
    analysis.fetch_profile_stats_by_step(1)
    assert [e.start_step for e in analysis.python_profile_stats] == [1, 2]


# -- 3: json_stats is the file ---------------------------------------------------------------------------
@pytest.mark.parametrize("case, framework", [("analysis", "tensorflow"), ("scenarios", "pytorch")])
def test_json_stats_is_the_files_own_document(copies, store, case, framework):
    folder = copies / case / "framework" / framework / "pyinstrument"
    analysis = PyinstrumentAnalysis(str(folder), store=store)
    found = 0
    for step in range(4):
        for stats in analysis.fetch_profile_stats_by_step(step, refresh_stats=False) or []:
            assert stats.json_stats == json.loads(Path(stats.html_file_path).with_suffix(".json").read_text())
            found += 1
    assert found >= 2
    # smdebug's own failure file ({"root_frame": null}) comes back as written.
    if case == "scenarios":
        [failed] = analysis.fetch_profile_stats_by_step(3, refresh_stats=False)
        assert failed.json_stats == {"root_frame": None}


@pytest.mark.parametrize("sample", ["pyinstrument-3.4.2.json", "pyinstrument-4.7.3.json", "pyinstrument-5.1.3.json"])
def test_json_stats_of_every_pyinstrument_version_is_the_file(tmp_path, sample):
    job = JobBuilder(tmp_path / "job")
    path = job.pyinstrument("algo-1", "train-1-stepstart-1000_train-1-stepend-2000", sample)
    [stats] = PyinstrumentAnalysis(str(job.base), store=tmp_path / "store").fetch_profile_stats_by_step(1)
    assert stats.json_stats == json.loads((FORMAT_SAMPLES / sample).read_text())
    path.unlink()  # gone: rebuilt from the store, and said so
    with pytest.warns(UserWarning, match="rebuilt from the store"):
        [rebuilt] = PyinstrumentAnalysis(store=tmp_path / "store").fetch_profile_stats_by_step(1)
    assert rebuilt.json_stats["root_frame"]["function"] == stats.json_stats["root_frame"]["function"]


# -- 4: a profiler folder outside framework/ -------------------------------------------------------------
def _outside(copies: Path, tmp_path: Path, name: str) -> Path:
    """smdebug's S3 download folder ({local_profile_dir}/python_stats) or an `aws s3 sync` of one profiler."""
    target = tmp_path / "notebook" / name
    shutil.copytree(copies / "analysis" / "framework" / "tensorflow" / "cprofile", target)
    return target


@pytest.mark.parametrize("name", ["python_stats", "cprofile"])
def test_a_profiler_folder_outside_framework_is_read(copies, tmp_path, name):
    folder = _outside(copies, tmp_path, name)
    analysis = cProfileAnalysis(str(folder), store=tmp_path / "store")
    assert len(analysis.list_profile_stats()) == 7
    assert {e.framework for e in analysis.python_profile_stats} == {"notebook"}  # the parent, as smdebug takes it
    stats = analysis.fetch_profile_stats_by_step(1)
    assert any("start_end_step_function" in f.function_name for f in stats.function_stats_list)
    report = ingest(str(folder), str(tmp_path / "store2"))
    assert (report.new_intervals, report.unrecognised) == (7, [])


def test_skipped_files_are_a_warning_in_the_python_api(tmp_path):
    job = JobBuilder(tmp_path / "job")
    job.cprofile("algo-1", "train-1-stepstart-1000_train-1-stepend-2000")
    (job.base / "framework" / "pytorch" / "cprofile" / "algo-1" / "README.txt").write_text("x")
    with pytest.warns(UnrecognisedFilesWarning, match=r"skipped 1 file\(s\) .* e\.g\. .*algo-1/README\.txt"):
        ingest(str(job.base), str(tmp_path / "store"))
    (job.base / "notes.txt").write_text("x")
    with pytest.warns(UnrecognisedFilesWarning, match=r"skipped 2 file\(s\)"):
        cProfileAnalysis(str(job.base), store=tmp_path / "store2")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        cProfileAnalysis(str(job.base), store=tmp_path / "store2").fetch_profile_stats_by_step(1)  # nothing new


# -- 5: integer modes ------------------------------------------------------------------------------------
def test_integer_modes_are_the_enums(copies, store):
    folder = copies / "analysis" / "framework" / "tensorflow" / "cprofile"
    analysis = cProfileAnalysis(str(folder), store=store)
    expected = ANSWERS["analysis/cprofile"]
    by_int = analysis.fetch_profile_stats_by_step(1, mode=1)
    assert sorted(f.function_name for f in by_int.function_stats_list) == expected["by_step_mode_1"]
    between = analysis.fetch_profile_stats_between_modes(1, 2)
    assert sorted(f.function_name for f in between.function_stats_list) == expected["between_modes_1_2"]
    assert by_int.ps.stats == analysis.fetch_profile_stats_by_step(1, mode=PythonProfileModes.TRAIN).ps.stats
    for bad in (True, 0, 7):
        with pytest.raises(UnknownNameError):
            analysis.fetch_profile_stats_by_step(1, mode=bad)


# -- 6: job phases with no intervals are left out --------------------------------------------------------
def test_job_phases_are_smdebugs_keys_and_all_usable(copies, store, capsys):
    for case, framework in (("analysis", "tensorflow"), ("scenarios", "pytorch")):
        folder = copies / case / "framework" / framework / "cprofile"
        analysis = cProfileAnalysis(str(folder), store=store)
        phases = analysis.fetch_profile_stats_by_job_phase()
        assert set(phases) == set(ANSWERS[f"{case}/cprofile"]["by_job_phase"])
        for _phase, stats in phases.items():  # code written for smdebug  # noqa: PERF102
            stats.print_top_n_functions(__import__("proflake").Metrics.CUMULATIVE_TIME, n=3)
        pairs = analysis.fetch_profile_stats_by_training_phase()
        assert [[a.name, b.name] for a, b in pairs] == ANSWERS[f"{case}/cprofile"]["by_training_phase"]


def test_job_phase_without_finalization_leaves_it_out(tmp_path):
    job = JobBuilder(tmp_path / "job")
    job.cprofile("algo-1", "prestepzero-*-start-1000_train-1-stepstart-2000")
    job.cprofile("algo-1", "train-1-stepstart-2000_train-1-stepend-3000")
    phases = cProfileAnalysis(str(job.base), store=tmp_path / "store").fetch_profile_stats_by_job_phase()
    assert list(phases) == ["initialization", "training_loop"]
    assert all(stats is not None for stats in phases.values())


# -- the deliberate differences, decided -------------------------------------------------------------------
def test_a_missing_folder_is_also_an_assertion_error(tmp_path):
    with pytest.raises(AssertionError, match="does not exist"):
        cProfileAnalysis(str(tmp_path / "nowhere"), store=tmp_path / "store")
    with pytest.raises(MissingFolderError):
        PyinstrumentAnalysis(str(tmp_path / "nowhere"), store=tmp_path / "store")


def test_a_reversed_time_window_matches_nothing_as_in_smdebug(copies, store, capsys):
    analysis = cProfileAnalysis(str(copies / "analysis" / "framework" / "tensorflow" / "cprofile"), store=store)
    assert analysis.fetch_profile_stats_by_time(2e9, 1e9) is None
    assert capsys.readouterr().out.strip() == "No stats were found for the requested interval!"


def test_a_reversed_step_range_matches_nothing_as_in_smdebug(copies, store, capsys):
    """smdebug's in_step_interval matches nothing when the range ends before it starts; proflake's
    Profiles.by_step refuses it (a UsageError), but the compatible class answers as smdebug does."""
    analysis = cProfileAnalysis(str(copies / "analysis" / "framework" / "tensorflow" / "cprofile"), store=store)
    assert analysis.fetch_profile_stats_by_step(3, 1) is None
    assert analysis.fetch_python_profile_stats_by_step("*", -5) is None
    assert capsys.readouterr().out.split("\n") == ["No stats were found for the requested interval!"] * 2 + [""]
    assert analysis.fetch_profile_stats_by_step(1, 3) is not None


@pytest.mark.parametrize("cls", [cProfileAnalysis, PyinstrumentAnalysis])
@pytest.mark.parametrize("layout", ["", "framework/pytorch/cprofile/algo-1"])
def test_a_job_with_no_stats_file_yet_gets_smdebugs_empty_answers(tmp_path, capsys, cls, layout):
    """A job that just started has its profile folder and no stats file yet. smdebug 1.0.34 answers
    from an empty list (python_profile_analysis.py): no nodes, no entries, None and its message for
    each fetch. proflake raised StoreError: nothing to ingest, so no store to answer from."""
    folder = tmp_path / "job"
    (folder / layout).mkdir(parents=True)
    store = tmp_path / "store"  # not there yet: the first analysis of the notebook
    analysis = cls(str(folder), store=store)
    assert analysis.python_profile_stats == []
    assert analysis.list_available_node_ids() == []
    assert analysis.list_profile_stats().empty
    assert capsys.readouterr().out == "No stats were found!\n"
    assert analysis.fetch_profile_stats_by_step(1) is None
    assert analysis.fetch_profile_stats_by_time(0, 2e9) is None
    assert analysis.fetch_profile_stats_between_modes("train", "eval") is None
    assert analysis.fetch_pre_step_zero_profile_stats() is None
    assert analysis.fetch_post_hook_close_profile_stats() is None
    assert capsys.readouterr().out == "No stats were found for the requested interval!\n" * 5
    assert analysis.fetch_profile_stats_by_training_phase() == {}
    phases = analysis.fetch_profile_stats_by_job_phase()
    assert list(phases) == ["training_loop"]
    if cls is cProfileAnalysis:  # smdebug: cProfileStats(pstats.Stats()) of nothing
        assert phases["training_loop"].ps.stats == {}
    else:
        assert phases["training_loop"] == []
    # The job writes its first file: the next call with refresh_stats=True answers from it.
    job = JobBuilder(folder)
    job.cprofile("algo-1", "train-1-stepstart-1000_train-1-stepend-2000")
    job.pyinstrument("algo-1", "train-1-stepstart-1000_train-1-stepend-2000")
    assert analysis.list_available_node_ids() == ["algo-1"]
    assert analysis.fetch_profile_stats_by_step(1) is not None


def test_without_a_store_the_rows_go_to_the_users_cache(tmp_path, monkeypatch):
    job = JobBuilder(tmp_path / "job")
    job.cprofile("algo-1", "train-1-stepstart-1000_train-1-stepend-2000")
    monkeypatch.delenv("PROFLAKE_STORE", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.chdir(tmp_path)
    analysis = cProfileAnalysis(str(job.base))
    assert analysis.store.location == str(tmp_path / "cache" / "proflake" / "smdebug-store")
    assert analysis.fetch_profile_stats_by_step(1) is not None
    assert not (tmp_path / "proflake-store").exists()


def test_without_pandas_one_sentence_names_the_extra(tmp_path):
    job = JobBuilder(tmp_path / "job")
    job.cprofile("algo-1", "train-1-stepstart-1000_train-1-stepend-2000")
    code = (
        "import sys; sys.modules['pandas'] = None\n"
        "from proflake import cProfileAnalysis\n"
        f"a = cProfileAnalysis({str(job.base)!r}, store={str(tmp_path / 'store')!r})\n"
        "try:\n    a.list_profile_stats()\n"
        "except ModuleNotFoundError as e:\n    print(e)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == "list_profile_stats returns a pandas DataFrame and pandas is not installed; pip install 'proflake[pandas]'"


# -- the cheap refresh ----------------------------------------------------------------------------------
def test_a_refresh_that_finds_nothing_new_does_not_ingest(tmp_path):
    job = JobBuilder(tmp_path / "job")
    job.cprofile("algo-1", "train-1-stepstart-1000_train-1-stepend-2000")
    bad = job.cprofile("algo-1", "train-2-stepstart-3000_train-2-stepend-4000")
    bad.write_bytes(b"not a profile")  # quarantined once, not re-ingested at every call
    analysis = cProfileAnalysis(str(job.base), store=tmp_path / "store")
    batches = len(analysis.profiles.batches())
    for _ in range(5):
        assert analysis.fetch_profile_stats_by_step(1) is not None
    again = cProfileAnalysis(str(job.base), store=tmp_path / "store")
    again.list_profile_stats()
    assert len(again.profiles.batches()) == batches  # no ingest ran: no batch recorded
    job.cprofile("algo-1", "train-3-stepstart-5000_train-3-stepend-6000")
    assert analysis.fetch_profile_stats_by_step(3) is not None
    assert len(analysis.profiles.batches()) > batches
