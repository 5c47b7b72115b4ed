"""Each side of a diff on the command line and in Python: two time windows of one job (the truth known:
a function made 30% slower in the later steps), and each side's steps, phases, modes and job phases.

tests/test_diff.py holds the statistics and the two-job cases; tests/test_diff_report.py the diff page.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from proflake.cli import cli
from proflake.errors import ExitCode, UsageError
from proflake.ingestion.batch import ingest
from proflake.query.diff_options import selection, side_selection
from proflake.query.profiles import Profiles
from test_diff import FUNCTIONS, step_times, write_job

T0 = 1_700_000_000  # write_job's step s starts at T0 + s seconds and lasts 0.5 s

@pytest.fixture(scope="module")
def drift(tmp_path_factory) -> Path:
    """One job, two nodes: steps 0..11 as FUNCTIONS, steps 12..23 with backward 30% slower (a slowdown
    during training), so the window of steps 12..23 against that of steps 0..11 knows the answer."""
    tmp = tmp_path_factory.mktemp("drift")
    rng = np.random.default_rng(11)
    slower = {**FUNCTIONS, "backward": FUNCTIONS["backward"] * 1.3}
    source = tmp / "jobs"
    nodes = ("algo-1", "algo-2")
    write_job(source, "drift", {n: step_times(rng, FUNCTIONS, 12) for n in nodes})
    write_job(source, "drift", {n: step_times(rng, slower, 12) for n in nodes}, first_step=12)
    ingest(str(source), str(tmp / "store"), workers=1)
    return tmp / "store"


def same(a, b) -> bool:
    """Equal, floats to 1e-9 (DuckDB's parallel sums may add in another order from one run to the next)."""
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if isinstance(a, float) and isinstance(b, float):
        return a == pytest.approx(b, rel=1e-9, abs=1e-15)
    return a == b


def by_name(result) -> dict[str, dict]:
    return {row["function_name"]: row for row in result.table.to_pylist()}


# -- two time windows of one job ---------------------------------------------------------------------------
EARLY = {"job": "drift", "method": "by_time", "start_time_s": T0, "end_time_s": T0 + 11.9}
LATE = {"job": "drift", "method": "by_time", "start_time_s": T0 + 12, "end_time_s": T0 + 23.9}


def test_time_windows_of_one_job_find_the_slowdown(drift):
    result = Profiles(drift).diff(EARLY, LATE)
    assert result.base.selection.method == result.head.selection.method == "by_time"
    assert (result.base.samples, result.head.samples) == (24, 24)  # 12 steps x 2 nodes, no step in both
    rows = by_name(result)
    assert [n for n, r in rows.items() if r["status"] == "slower"] == ["backward"]
    backward = rows["backward"]
    truth = 0.3 * FUNCTIONS["backward"]  # the true change of its mean own time per step
    assert backward["self_ci_low"] <= truth <= backward["self_ci_high"]
    assert backward["self_change_ratio"] == pytest.approx(0.3, abs=0.08)
    assert all(r["status"] in ("noise", "minor") for n, r in rows.items() if n != "backward")


def test_time_windows_without_a_change_show_none(drift):
    early = {**EARLY, "end_time_s": T0 + 5.9}
    late = {**EARLY, "start_time_s": T0 + 6}
    result = Profiles(drift).diff(early, late)
    assert (result.base.samples, result.head.samples) == (12, 12)
    assert not any(r["significant"] for r in result.table.to_pylist())
    assert result.gate(total=0.10, function=0.10) == []


def test_a_window_inside_one_interval_selects_it(drift):
    # by_time includes an interval containing the window: one step per node, too few to test, and said so
    inside = {**EARLY, "start_time_s": T0 + 3.1, "end_time_s": T0 + 3.2}
    result = Profiles(drift).diff(inside, LATE)
    assert result.base.intervals == 2 and result.base.samples == 2
    assert any("only 2 samples" in w for w in result.warnings)


def test_cli_time_windows_gate_and_json(drift):
    args = ["diff", "drift", "--store", str(drift), "--base-time", f"{T0}:{T0 + 11.9}",
            "--head-time", f"{T0 + 12}:{T0 + 23.9}", "--fail-on", "function:10%", "--format", "json"]
    done = CliRunner().invoke(cli, args)
    assert done.exit_code == ExitCode.REGRESSION, done.output
    report = json.loads(done.stdout)
    assert report["base"]["method"] == report["head"]["method"] == "by_time"
    assert report["base"]["arguments"] == {"start_time_s": T0, "end_time_s": T0 + 11.9}
    assert report["base"]["samples"] == report["head"]["samples"] == 24
    assert any("backward" in r for r in report["gate"]["reasons"]) and len(report["gate"]["reasons"]) == 1
    # the same windows through the API give the same numbers
    api = Profiles(drift).diff(EARLY, LATE).to_dict(None, 0.10)
    assert same(report["functions"], api["functions"]) and same(report["total"], api["total"])


def test_cli_a_shared_time_window_narrowed_per_side(drift):
    # --time for both, the head's own steps win for the head: a window against a step range
    args = ["diff", "drift", "--store", str(drift), "--time", f"{T0}:{T0 + 11.9}", "--head-steps", "12:23",
            "--format", "json"]
    done = CliRunner().invoke(cli, args)
    assert done.exit_code == 0, done.output
    report = json.loads(done.stdout)
    assert report["base"]["method"] == "by_time" and report["head"]["method"] == "by_step"
    assert report["head"]["samples"] == 24


# -- each side's phases and modes on the command line ---------------------------------------------------------
@pytest.fixture(scope="module")
def sample_store(tmp_path_factory) -> Path:
    from proflake.capture.sample_job import generate_sample_job

    base = tmp_path_factory.mktemp("phases")
    generate_sample_job(base / "job", nodes=2, train_steps=4, eval_steps=2)
    ingest(str(base / "job"), str(base / "store"), workers=1)
    return base / "store"


def run_json(store: Path, *args: str) -> dict:
    done = CliRunner().invoke(cli, ["diff", "job", "--store", str(store), "--format", "json", *args])
    assert done.exit_code == 0, done.output
    return json.loads(done.stdout)


def functions(report: dict, status: str) -> set[str]:
    return {f["function_name"] for f in report["functions"] if f["status"] == status}


def test_cli_job_phases_compare_initialization_with_finalization(sample_store):
    report = run_json(sample_store, "--base-job-phase", "initialization", "--head-job-phase", "finalization")
    assert report["base"]["method"] == "pre_step_zero" and report["head"]["method"] == "post_hook_close"
    assert report["base"]["intervals"] == report["head"]["intervals"] == 2  # one per node
    api = Profiles(sample_store).diff({"job": "job", "method": "pre_step_zero"}, {"job": "job", "method": "post_hook_close"})
    assert same(report["functions"], api.to_dict()["functions"])
    assert "initialize" in functions(report, "removed") and "save_checkpoint" in functions(report, "added")


def test_cli_modes_compare_the_switch_to_evaluation_with_eval_steps(sample_store):
    report = run_json(sample_store, "--base-modes", "train:eval", "--head-mode", "eval")
    assert report["base"]["method"] == "between_modes"
    assert report["base"]["arguments"] == {"start_mode": "train", "end_mode": "eval"}
    assert report["head"]["method"] == "by_step" and report["head"]["arguments"]["mode"] == "eval"
    assert report["head"]["intervals"] == 4  # 2 eval steps x 2 nodes
    assert "prepare_evaluation" in functions(report, "removed")
    assert "eval_step" in functions(report, "added")


def test_cli_step_phases_narrow_the_boundary_steps(sample_store):
    # steps 1..2; the base starts step 1 at its end, so step 1's whole-step interval is not in it
    report = run_json(sample_store, "--steps", "1:2", "--base-start-phase", "stepend")
    assert report["base"]["arguments"]["start_phase"] == "stepend"
    assert report["base"]["intervals"] == 2 and report["head"]["intervals"] == 4
    api = Profiles(sample_store).by_step(1, 2, start_phase="stepend")
    assert api.intervals.num_rows == 2


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--base-steps", "0:1", "--base-time", "1:2"], "--steps/--mode/--start-phase/--end-phase and --time"),
        (["--head-modes", "train", "--head-mode", "eval"], "--modes and --steps/--mode"),
        (["--base-modes", "train"], "START_MODE:END_MODE"),
        (["--job-phase", "training"], "unknown job phase 'training'; expected one of: initialization, finalization"),
        (["--base-modes", "train:evil"], "unknown mode 'evil'"),
        (["--base-start-phase", "stepmiddle"], "unknown phase 'stepmiddle'"),
    ],
)
def test_cli_bad_side_options_are_one_line_and_exit_2(sample_store, args, message):
    done = CliRunner().invoke(cli, ["diff", "job", "--store", str(sample_store), *args])
    assert done.exit_code == ExitCode.USAGE == 2, done.output
    assert done.stdout == ""
    assert message in done.stderr and len(done.stderr.strip().splitlines()) == 1, done.stderr


def test_a_sides_own_kind_drops_the_shared_options_of_other_kinds():
    shared = {"steps": "0:9", "mode": "eval", "node": "algo-1"}
    head = side_selection("j", {"modes": "train:eval"}, shared)
    assert head.method == "between_modes" and head.node == "algo-1"
    base = side_selection("j", {}, shared)
    assert base.method == "by_step" and base.arguments == {"mode": "eval", "start_step": "0", "end_step": "9"}
    assert side_selection("j", {"start_phase": "stepend"}, shared).arguments["mode"] == "eval"
    with pytest.raises(UsageError):
        selection("j", steps="0:1", job_phase="initialization")
