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
    assert result.exit_code == ExitCode.USAGE and "--step, --mode, --format and --sample-rate are for plain files" in result.stderr
    empty = tmp_path / "empty"
    empty.mkdir()
    result = runner.invoke(cli, ["ingest", str(empty), "--job", "j", "--node", "n", "--store", str(tmp_path / "s")])
    assert result.exit_code == ExitCode.FAILURE and "no .prof, .pstats or .json file, nor any other format proflake reads, in" in result.stderr


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


def test_plain_files_are_filed_under_their_own_layout_and_framework(runner, tmp_path):
    """No smdebug path is made up for them: layout plain, framework plain, the file's own path."""
    store = str(tmp_path / "store")
    assert runner.invoke(cli, ["ingest", str(PY313), "--job", "j", "--node", "n", "--store", store]).exit_code == 0
    (row,) = Profiles(store).list_profile_stats().to_pylist()
    assert (row["layout"], row["framework"], row["source_uri"]) == ("plain", "plain", str(PY313))


# -- deep call trees ---------------------------------------------------------------------------------------
def recursion(sample: str, depth: int, *, root_frame_first: bool = False) -> str:
    """pyinstrument's JSONRenderer output for a function recursing ``depth`` frames deep: the session
    fields and frame fields of the real ``sample`` (tests/data/format-samples), in its order, unless
    ``root_frame_first`` (a file re-written with sorted keys has root_frame before start_time). Built as
    text: json.dumps cannot write it either."""
    session = json.loads((FORMAT_SAMPLES / sample).read_bytes())
    frame = {k: v for k, v in session["root_frame"].items() if k != "children"}
    frame.update(function="recurse", file_path_short="deep.py", file_path="/opt/ml/code/deep.py", line_no=3)
    opening = "".join(
        '{' + ", ".join(f"{json.dumps(k)}: {json.dumps(v)}" for k, v in {**frame, "time": 0.1 * (1 - i / depth)}.items())
        + ', "children": ['
        for i in range(depth)
    )
    tree = opening + "]}" * depth
    fields = [f"{json.dumps(k)}: {json.dumps(v)}" for k, v in session.items() if k != "root_frame"]
    root = f'"root_frame": {tree}'
    return "{" + ", ".join([root, *fields] if root_frame_first else [*fields, root]) + "}"


@pytest.mark.parametrize("sample", ["pyinstrument-4.7.3.json", "pyinstrument-5.1.3.json"])
@pytest.mark.parametrize(("depth", "root_frame_first"), [(900, False), (5_000, False), (5_000, True)])
def test_a_deep_recursion_in_a_loose_pyinstrument_file_ingests_with_its_session_times(
    runner, tmp_path, sample, depth, root_frame_first
):
    """json.load of the file to read its times raised RecursionError from 500 frames deep (two nesting
    levels a frame): 'proflake ingest FILE --job --node' ended in a traceback, where the same file in
    smdebug's layout ingested."""
    path = tmp_path / "deep.json"
    path.write_text(recursion(sample, depth, root_frame_first=root_frame_first))
    with pytest.raises(RecursionError):
        json.loads(path.read_text())
    store = str(tmp_path / "store")
    result = runner.invoke(cli, ["ingest", str(path), "--job", "j", "--node", "n", "--store", store])
    assert result.exit_code == 0, result.stderr
    assert f"{path}: pyinstrument, node n, train step 0, times from its pyinstrument session" in result.stderr
    session = json.loads((FORMAT_SAMPLES / sample).read_bytes())
    (interval,) = Profiles(store).list_profile_stats().to_pylist()
    assert interval["start_time_us"] == pytest.approx(session["start_time"] * 1e6, abs=1)
    assert interval["end_time_us"] == pytest.approx((session["start_time"] + session["duration"]) * 1e6, abs=1)
    (row,) = Profiles(store).by_step(0).table.to_pylist()
    assert (row["function_name"], row["frames"]) == ("recurse", depth)
    assert row["total_time"] == pytest.approx(0.1)  # the recursion counted once


def test_the_session_times_of_any_prefix_of_a_deep_file_are_read_or_left_out(tmp_path):
    """The planner reads the times of whatever it is given without raising: all of a prefix's fields, or
    none (the reader then says what is wrong with the file)."""
    from proflake.formats.sniff import session_times as _pyinstrument_session

    session = json.loads(PYI.read_bytes())
    times = (session["start_time"], session["duration"])
    for root_frame_first in (False, True):
        text = recursion("pyinstrument-5.1.3.json", 2_000, root_frame_first=root_frame_first).encode()
        path = tmp_path / "cut.json"
        for cut in [*range(0, 400, 7), *range(400, len(text), len(text) // 97), len(text) - 1, len(text)]:
            path.write_bytes(text[:cut])
            found = _pyinstrument_session(path)
            # Both fields are read once the number after "duration" is followed by its comma (the tree
            # before it, with root_frame first, skipped without decoding it).
            if cut > text.index(b",", text.index(b'"duration"')):
                assert found == times, cut
            else:
                assert found is None, cut


def test_a_deep_file_the_reader_cannot_read_is_quarantined_in_one_line(runner, tmp_path):
    text = recursion("pyinstrument-5.1.3.json", 5_000)
    cut = tmp_path / "cut.json"
    cut.write_text(text[: len(text) // 2])  # the tree ends 2,500 frames down
    bad = tmp_path / "bad.json"
    # A frame 2,500 down with a negative time, in a session of its own (one second later).
    bad.write_text(text.replace('"time": 0.05,', '"time": -1,', 1).replace('"start_time": 17959922', '"start_time": 17959923', 1))
    assert '"time": -1,' in bad.read_text() and '"start_time": 17959923' in bad.read_text()
    store = str(tmp_path / "store")
    result = runner.invoke(cli, ["ingest", str(tmp_path), "--job", "j", "--node", "n", "--store", store])
    assert result.exit_code == ExitCode.PARTIAL, result.stderr
    assert "Traceback" not in result.stderr and result.stdout == ""
    errors = {r["source_uri"]: r for r in Profiles(store).errors().to_pylist()}
    assert errors[str(cut)]["error_kind"] == "pyinstrument" and "malformed JSON" in errors[str(cut)]["message"]
    assert "frame field 'time' is -1" in errors[str(bad)]["message"]
