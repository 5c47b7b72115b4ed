"""`proflake ingest FILE_OR_FOLDER --job J --node N`: stats files outside smdebug's layout, and the
empty-source error that points at it."""

from __future__ import annotations

import json
import os
import shutil

import pytest
from click.testing import CliRunner
from helpers.profiles import FORMAT_SAMPLES, LEGACY, assert_same_pstats, pstats_of
from proflake import Profiles
from proflake.cli import cli
from proflake.errors import ExitCode

PY313 = FORMAT_SAMPLES / "cprofile-py3.13.pstats"
PY38 = FORMAT_SAMPLES / "cprofile-py3.8.pstats"
PYI = FORMAT_SAMPLES / "pyinstrument-5.1.3.json"


@pytest.fixture
def runner() -> CliRunner:
    return CliRunner()


def test_a_prof_file_is_one_step_timed_by_its_modification_time(runner, tmp_path):
    prof = tmp_path / "run.prof"
    shutil.copy(PY313, prof)
    os.utime(prof, ns=(1_700_000_000_250_000_000, 1_700_000_000_250_000_000))
    store = str(tmp_path / "store")
    result = runner.invoke(cli, ["ingest", str(prof), "--job", "laptop-run", "--node", "laptop", "--step", "5",
                                 "--store", store])
    assert result.exit_code == 0, result.stderr
    assert f"{prof}: cprofile, node laptop, train step 5, times from its modification time" in result.stderr
    interval = Profiles(store).list_profile_stats().to_pylist()[0]
    assert (interval["job_id"], interval["node_id"], interval["start_step"], interval["end_step"]) == ("laptop-run", "laptop", 5, 5)
    assert interval["start_time_us"] == interval["end_time_us"] == 1_700_000_000_250_000.0
    assert interval["source_uri"] == str(prof)
    # The answer is pstats' own, for the file as it is.
    assert_same_pstats(Profiles(store).by_step(5).to_pstats().stats, pstats_of([prof]))
    by_time = Profiles(store).by_time("2023-11-14T22:13:20Z", "2023-11-14T22:13:21Z")
    assert by_time.intervals.num_rows == 1


def test_a_folder_of_files_becomes_consecutive_steps_per_profiler(runner, tmp_path):
    folder = tmp_path / "profiles"
    (folder / "later").mkdir(parents=True)
    shutil.copy(PY313, folder / "a.prof")
    shutil.copy(PY38, folder / "later" / "b.pstats")
    shutil.copy(PYI, folder / "a.json")
    (folder / "notes.txt").write_text("not a profile")
    store = str(tmp_path / "store")
    result = runner.invoke(cli, ["ingest", str(folder), "--job", "j", "--node", "n", "--mode", "eval", "--store", store])
    assert result.exit_code == 0, result.stderr
    assert "ingested 3 new interval(s)" in result.stderr and "times from its pyinstrument session" in result.stderr
    rows = Profiles(store).list_profile_stats().sort_by("source_uri").to_pylist()
    assert [(r["source_uri"].rsplit("/", 1)[1], r["profiler"], r["start_mode"], r["start_step"]) for r in rows] == [
        ("a.json", "pyinstrument", "eval", 0), ("a.prof", "cprofile", "eval", 0), ("b.pstats", "cprofile", "eval", 1),
    ]
    session = json.loads(PYI.read_text())
    pyi = rows[0]
    assert pyi["start_time_us"] == pytest.approx(session["start_time"] * 1e6)
    assert pyi["end_time_us"] - pyi["start_time_us"] == pytest.approx(session["duration"] * 1e6)
    again = runner.invoke(cli, ["ingest", str(folder), "--job", "j", "--node", "n", "--mode", "eval", "--store", store])
    assert again.exit_code == 0 and "nothing new: 3 stats file(s) already ingested" in again.stderr


def test_plain_file_options_are_checked(runner, tmp_path):
    result = runner.invoke(cli, ["ingest", str(PY313), "--node", "n", "--store", str(tmp_path / "s")])
    assert result.exit_code == ExitCode.USAGE and "plain files need --job ID" in result.stderr
    result = runner.invoke(cli, ["ingest", str(LEGACY), "--step", "3", "--store", str(tmp_path / "s")])
    assert result.exit_code == ExitCode.USAGE and "--step and --mode are for plain files" in result.stderr
    empty = tmp_path / "empty"
    empty.mkdir()
    result = runner.invoke(cli, ["ingest", str(empty), "--job", "j", "--node", "n", "--store", str(tmp_path / "s")])
    assert result.exit_code == ExitCode.FAILURE and "no .prof, .pstats or .json file in" in result.stderr


def test_a_source_without_stats_files_fails_and_says_what_it_holds(runner, tmp_path):
    raw = tmp_path / "raw"
    raw.mkdir()
    shutil.copy(PY313, raw / "run.prof")
    (raw / "README.txt").write_text("x")
    store = tmp_path / "store"
    result = runner.invoke(cli, ["ingest", str(raw), "--store", str(store)])
    assert result.exit_code == ExitCode.FAILURE and result.stdout == ""
    assert result.stderr == (
        f"proflake: error: nothing to ingest under '{raw}': found no python_stats or python_stats.json file "
        "(smdebug's layout); it holds 2 other file(s) (1 .prof, 1 .txt); for cProfile or pyinstrument files "
        "outside smdebug's layout, pass --job J --node N (--allow-empty accepts an empty source)\n"
    )
    assert not store.exists()  # no empty store left behind


def test_swapped_source_and_store_is_named_and_an_empty_source_can_be_allowed(runner, tmp_path):
    store = tmp_path / "store"
    assert runner.invoke(cli, ["ingest", str(LEGACY), "--store", str(store)]).exit_code == 0
    swapped = runner.invoke(cli, ["ingest", str(store), "--store", str(tmp_path / "other")])
    assert swapped.exit_code == ExitCode.FAILURE and "did you swap SOURCE and --store?" in swapped.stderr
    empty = tmp_path / "nightly"
    empty.mkdir()
    assert "it is empty" in runner.invoke(cli, ["ingest", str(empty), "--store", str(store)]).stderr
    allowed = runner.invoke(cli, ["ingest", str(empty), "--store", str(store), "--allow-empty"])
    assert allowed.exit_code == 0, allowed.stderr
    # "nothing new" stays a success
    again = runner.invoke(cli, ["ingest", str(LEGACY), "--store", str(store)])
    assert again.exit_code == 0 and again.stderr.startswith("nothing new")


def test_plain_files_are_named_as_the_layout_reads_them():
    from proflake import layout
    from proflake.sources import plain

    assert (plain.CPROFILE_FILE, plain.PYINSTRUMENT_JSON_FILE) == (layout.CPROFILE_FILE, layout.PYINSTRUMENT_JSON_FILE)
