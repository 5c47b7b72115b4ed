"""The smdebug-compatible classes (proflake.smdebug.compat) against smdebug's own rules and pstats.Stats.add.

Every cProfile answer is compared with an oracle: the stats files chosen by a plain-Python version of
smdebug's selection rules over the directory names (below, independent of proflake's SQL), aggregated
with pstats.Stats.add as smdebug does.
"""

from __future__ import annotations

import ast
import json
import math
import pstats
import random
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from helpers.profiles import LEGACY, JobBuilder, assert_same_pstats, pstats_of
from proflake.capture.capture import Capture
from proflake.capture.sample_job import generate_sample_job, initialize, train_step
from proflake.errors import ProflakeError, SourceError, UnknownNameError, UsageError
from proflake.smdebug import analysis as analysis_module
from proflake.smdebug.compat import (
    Metrics,
    PyinstrumentAnalysis,
    PyinstrumentStepStats,
    PythonProfileModes,
    StepPhase,
    cProfileAnalysis,
    cProfileFunctionStats,
    cProfileStats,
)

NO_STATS_FOR_INTERVAL = "No stats were found for the requested interval!"


# -- the oracle: smdebug's rules over directory names ------------------------------------------------
_BOUNDARY = r"(?P<{p}mode>[a-z]+)-(?P<{p}step>\*|-?\d+)-(?P<{p}phase>[a-z]+)-(?P<{p}us>\d+(?:\.\d+)?)"
CURRENT_DIR = re.compile("^" + _BOUNDARY.format(p="s_") + "_" + _BOUNDARY.format(p="e_") + "$")
LEGACY_DIR = re.compile(r"^(?P<s_us>\d+(?:\.\d+)?)_(?P<e_us>\d+(?:\.\d+)?)_(?P<node>.+)_(?P<step>-?\d+)$")


@dataclass(frozen=True)
class Interval:
    path: str
    node: str
    start_mode: str
    start_step: int  # -1 for '*'
    start_phase: str
    start_us: float
    end_mode: str
    end_step: float  # inf for '*'
    end_phase: str
    end_us: float


def scan(root: Path, profiler: str = "cprofile") -> list[Interval]:
    """Every stats file of one profiler below root, in smdebug's order: start time, then node."""
    file_name = "python_stats" if profiler == "cprofile" else "python_stats.json"
    found = []
    for path in Path(root).resolve().rglob(file_name):
        name = path.parent.name
        m = CURRENT_DIR.match(name)
        if m:
            found.append(
                Interval(
                    str(path),
                    path.parent.parent.name,
                    m["s_mode"],
                    -1 if m["s_step"] == "*" else int(m["s_step"]),
                    m["s_phase"],
                    float(m["s_us"]),
                    m["e_mode"],
                    math.inf if m["e_step"] == "*" else int(m["e_step"]),
                    m["e_phase"],
                    float(m["e_us"]),
                )
            )
            continue
        m = LEGACY_DIR.match(name)
        assert m, name
        # smdebug's old TensorFlow naming: step -1 is before step 0, any other step is one training step.
        step = int(m["step"])
        start = ("prestepzero", -1, "start") if step == -1 else ("train", step, "stepstart")
        end = ("train", 0, "stepstart") if step == -1 else ("train", step, "stepend")
        found.append(Interval(str(path), m["node"], *start, float(m["s_us"]), *end, float(m["e_us"])))
    return sorted(found, key=lambda i: (i.start_us, i.node))


def on_node(intervals: list[Interval], node_id: str) -> list[Interval]:
    if node_id == "any":  # smdebug: the node of the first stats file
        node_id = intervals[0].node
    return [i for i in intervals if i.node == node_id]


def in_step_interval(i: Interval, start_step, end_step, start_phase: str, end_phase: str) -> bool:
    if start_step < i.start_step and end_step > i.end_step:
        return True
    if start_step > i.start_step or end_step < i.end_step:
        return False
    if (
        start_step == i.start_step
        and start_phase in ("stepend", "forwardpassend")
        and i.start_phase != start_phase
    ):
        return False
    return not (end_step == i.end_step and end_phase == "stepstart" and i.end_phase != end_phase)


def by_step(
    intervals,
    start_step,
    end_step=None,
    mode="train",
    start_phase="stepstart",
    end_phase="stepend",
    node_id="any",
):
    end_step = start_step if end_step is None else (math.inf if end_step == "*" else end_step)
    return [
        i
        for i in on_node(intervals, node_id)
        if i.start_mode == mode
        and i.end_mode == mode
        and in_step_interval(i, start_step, end_step, start_phase, end_phase)
    ]


def by_time(intervals, start_s, end_s, node_id="any"):
    lo, hi = start_s * 1e6, end_s * 1e6
    return [
        i
        for i in on_node(intervals, node_id)
        # smdebug's rule (an end inside the window), plus an interval containing the whole window.
        if lo <= i.start_us <= hi or lo <= i.end_us <= hi or (i.start_us <= lo and i.end_us >= hi)
    ]


def between_modes(intervals, start_mode, end_mode, node_id="any"):
    return [i for i in on_node(intervals, node_id) if i.start_mode == start_mode and i.end_mode == end_mode]


def pre_step_zero(intervals, node_id="any"):
    return [i for i in on_node(intervals, node_id) if i.start_phase == "start"]


def post_hook_close(intervals, node_id="any"):
    return [i for i in on_node(intervals, node_id) if i.end_phase == "end"]


def job_phase(i: Interval) -> str:
    first, last = i.start_phase == "start", i.end_phase == "end"
    if first:
        return "whole_job" if last else "initialization"
    return "finalization" if last else "training_loop"


def check(stats, expected: list[Interval]) -> None:
    """``stats`` is what pstats.Stats.add makes of exactly the expected files."""
    assert expected, "the oracle chose no file; this case would prove nothing"
    assert isinstance(stats, cProfileStats)
    assert sorted(stats.ps.files) == sorted(i.path for i in expected)
    oracle = pstats_of(i.path for i in expected)
    assert oracle, "the expected files hold no functions"
    assert_same_pstats(stats.ps.stats, oracle)
    assert [f.function_name for f in stats.function_stats_list] == [
        pstats.func_std_string(k) for k in stats.ps.stats
    ]


def labels(intervals: list[Interval]) -> set[str]:
    by_name = {name: label for label, (_, name, _) in MIXED.items()}
    return {by_name[Path(i.path).parent.name] for i in intervals}


# -- data -------------------------------------------------------------------------------------------
# A hand-named job (times in microseconds) with every boundary the rules care about. algo-2 starts
# first, so "any" is algo-2 although algo-1 sorts first.
MIXED = {
    "A": ("algo-1", "prestepzero-*-start-1000_train-0-stepstart-2000", "c"),
    "B": ("algo-1", "train-0-stepstart-2000_train-0-stepend-3000", "a"),
    "C": ("algo-1", "train-1-stepstart-3000_train-1-forwardpassend-3500", "b"),
    "D": ("algo-1", "train-1-forwardpassend-3500_train-1-stepend-4000", "a"),
    "E": ("algo-1", "train-1-stepend-4000_train-2-stepstart-4100", "c"),
    "F": ("algo-1", "train-2-stepstart-4100_train-2-stepend-5000", "b"),
    "G": ("algo-1", "train-2-stepend-5000_eval-0-stepstart-5100", "a"),
    "H": ("algo-1", "eval-0-stepstart-5100_eval-0-stepend-6000", "b"),
    "J": ("algo-1", "eval-0-stepend-6000_train-3-stepstart-6100", "c"),
    "K": ("algo-1", "train-3-stepstart-6100_train-3-stepend-6900", "a"),
    "I": ("algo-1", "prestepzero-*-end-7000_posthookclose-*-end-8000", "c"),
    "W": ("algo-1", "prestepzero-*-start-500_posthookclose-*-end-9000", "b"),
    "B2": ("algo-2", "train-0-stepstart-400_train-0-stepend-2950", "b"),
    "F2": ("algo-2", "train-2-stepstart-4150_train-2-stepend-4950", "a"),
}


@pytest.fixture(scope="module")
def root(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("compat").resolve()


@pytest.fixture(scope="module")
def store(root) -> Path:
    return root / "store"


@pytest.fixture(scope="module")
def sample(root):
    return generate_sample_job(root / "jobs" / "sample", nodes=2, train_steps=4, eval_steps=2)


@pytest.fixture(scope="module")
def mixed_dir(root) -> Path:
    job = JobBuilder(root / "jobs" / "mixed")
    for node, name, workload in MIXED.values():
        job.cprofile(node, name, workload)
    return job.base


@pytest.fixture(scope="module")
def cp(sample, store) -> cProfileAnalysis:
    return cProfileAnalysis(sample.base_dir, store=store)


@pytest.fixture(scope="module")
def pyi(sample, store) -> PyinstrumentAnalysis:
    return PyinstrumentAnalysis(local_profile_dir=sample.base_dir, store=store)


@pytest.fixture(scope="module")
def mixed(mixed_dir, store) -> cProfileAnalysis:
    return cProfileAnalysis(mixed_dir, store=store)


@pytest.fixture(scope="module")
def sample_files(sample) -> list[Interval]:
    return scan(sample.base_dir)


@pytest.fixture(scope="module")
def mixed_files(mixed_dir) -> list[Interval]:
    return scan(mixed_dir)


# -- the oracle itself, on hand-worked answers --------------------------------------------------------
def test_oracle_agrees_with_hand_worked_answers(mixed_files):
    assert labels(by_step(mixed_files, 1, node_id="algo-1")) == {"C", "D"}
    assert labels(by_step(mixed_files, 1, start_phase="forwardpassend", node_id="algo-1")) == {"D"}
    assert labels(by_time(mixed_files, 0.0036, 0.0039, node_id="algo-1")) == {"D", "W"}
    assert labels(on_node(mixed_files, "any")) == {"B2", "F2"}
    assert labels(pre_step_zero(mixed_files, "algo-1")) == {"A", "W"}


# -- fetch_profile_stats_by_step ----------------------------------------------------------------------
@pytest.mark.parametrize(
    "args, kwargs, expected",
    [
        ((1,), {}, {"C", "D"}),  # default phases: both halves of step 1
        ((1,), {"start_phase": StepPhase.FORWARD_PASS_END}, {"D"}),  # boundary: the start phase decides
        ((1, 2), {"end_phase": "stepstart"}, {"C", "D", "E"}),  # boundary: F ends at stepend, E at stepstart
        ((1, 2), {}, {"C", "D", "E", "F"}),
        ((0, "*"), {}, {"B", "C", "D", "E", "F", "K"}),  # mode switches (G, J) are not train -> train
        ((0,), {"mode": PythonProfileModes.EVAL}, {"H"}),
        ((0,), {"mode": "eval"}, {"H"}),
    ],
)
def test_by_step_boundaries(mixed, mixed_files, args, kwargs, expected):
    oracle_kwargs = {k: (v.label if hasattr(v, "label") else v) for k, v in kwargs.items()}
    selected = by_step(mixed_files, *args, node_id="algo-1", **oracle_kwargs)
    assert labels(selected) == expected
    check(mixed.fetch_profile_stats_by_step(*args, node_id="algo-1", **kwargs, refresh_stats=False), selected)


def test_by_step_sample_job(cp, sample_files):
    check(cp.fetch_profile_stats_by_step(2), by_step(sample_files, 2))
    selected = by_step(sample_files, 0, 2)
    assert len(selected) == 3
    check(cp.fetch_profile_stats_by_step(0, 2), selected)
    selected = by_step(sample_files, 0, 1, mode="eval")
    assert len(selected) == 2
    check(cp.fetch_profile_stats_by_step(0, 1, mode=PythonProfileModes.EVAL), selected)
    # AWS's documented alias
    check(cp.fetch_python_profile_stats_by_step(0, 2, refresh_stats=False), by_step(sample_files, 0, 2))


def test_nothing_matched_is_none_with_smdebugs_message(cp, capsys):
    assert cp.fetch_profile_stats_by_step(100) is None
    assert NO_STATS_FOR_INTERVAL in capsys.readouterr().out
    assert cp.fetch_profile_stats_between_modes("predict", "predict") is None


# -- fetch_profile_stats_by_time ----------------------------------------------------------------------
def test_by_time_window_over_several_intervals(cp, sample_files):
    algo1 = on_node(sample_files, "any")
    start_s, end_s = algo1[1].start_us / 1e6, (algo1[2].end_us + 1) / 1e6
    selected = by_time(sample_files, start_s, end_s)
    assert len(selected) == 2
    check(cp.fetch_profile_stats_by_time(start_s, end_s, refresh_stats=False), selected)
    check(cp.fetch_python_profile_stats_by_time(start_s, end_s, refresh_stats=False), selected)


def test_by_time_window_inside_one_interval(cp, mixed, sample_files, mixed_files):
    step = by_step(sample_files, 2)[0]
    length = step.end_us - step.start_us
    start_s, end_s = (step.start_us + length / 4) / 1e6, (step.end_us - length / 4) / 1e6
    assert by_time(sample_files, start_s, end_s) == [step]
    check(cp.fetch_profile_stats_by_time(start_s, end_s, refresh_stats=False), [step])
    # Inside D, and inside the whole-job interval W
    selected = by_time(mixed_files, 0.0036, 0.0039, node_id="algo-1")
    check(mixed.fetch_profile_stats_by_time(0.0036, 0.0039, node_id="algo-1", refresh_stats=False), selected)


# -- between modes, pre step zero, post hook close -----------------------------------------------------
def test_between_modes(cp, mixed, sample_files, mixed_files):
    selected = between_modes(sample_files, "train", "eval")
    assert len(selected) == 1
    check(
        cp.fetch_profile_stats_between_modes(
            PythonProfileModes.TRAIN, PythonProfileModes.EVAL, refresh_stats=False
        ),
        selected,
    )
    check(cp.fetch_profile_stats_between_modes("TRAIN", "eval", refresh_stats=False), selected)
    selected = between_modes(mixed_files, "eval", "train", node_id="algo-1")
    assert labels(selected) == {"J"}
    check(
        mixed.fetch_profile_stats_between_modes("eval", "train", node_id="algo-1", refresh_stats=False),
        selected,
    )


def test_pre_step_zero_and_post_hook_close(cp, mixed, sample_files, mixed_files):
    check(cp.fetch_pre_step_zero_profile_stats(refresh_stats=False), pre_step_zero(sample_files))
    check(cp.fetch_post_hook_close_profile_stats(refresh_stats=False), post_hook_close(sample_files))
    check(
        cp.fetch_pre_step_zero_profile_stats(node_id="algo-2", refresh_stats=False),
        pre_step_zero(sample_files, "algo-2"),
    )
    assert labels(post_hook_close(mixed_files, "algo-1")) == {"I", "W"}
    check(
        mixed.fetch_post_hook_close_profile_stats(node_id="algo-1", refresh_stats=False),
        post_hook_close(mixed_files, "algo-1"),
    )
    check(
        mixed.fetch_pre_step_zero_profile_stats(node_id="algo-1", refresh_stats=False),
        pre_step_zero(mixed_files, "algo-1"),
    )


# -- node_id ------------------------------------------------------------------------------------------
def test_node_any_is_the_node_of_the_first_file(cp, mixed, sample_files, mixed_files):
    any_node = cp.fetch_profile_stats_by_step(1, refresh_stats=False)
    check(any_node, by_step(sample_files, 1, node_id="algo-1"))
    algo2 = cp.fetch_profile_stats_by_step(1, node_id="algo-2", refresh_stats=False)
    check(algo2, by_step(sample_files, 1, node_id="algo-2"))
    assert any_node.ps.files != algo2.ps.files
    # In the mixed job algo-2 starts first: "any" is algo-2, although algo-1 sorts first.
    selected = by_step(mixed_files, 0, 2)
    assert labels(selected) == {"B2", "F2"}
    check(mixed.fetch_profile_stats_by_step(0, 2, refresh_stats=False), selected)
    with pytest.raises(UnknownNameError):
        cp.fetch_profile_stats_by_step(1, node_id="algo-9", refresh_stats=False)


def test_node_all_aggregates_every_node(cp, sample_files):
    selected = [i for i in sample_files if i.start_mode == i.end_mode == "train" and i.start_step == 1]
    assert len(selected) == 2
    check(cp.fetch_profile_stats_by_step(1, node_id="all", refresh_stats=False), selected)


# -- by training phase, by job phase --------------------------------------------------------------------
def _pairs(files: list[Interval]) -> list[tuple[PythonProfileModes, PythonProfileModes]]:
    labels_present = {(i.start_mode, i.end_mode) for i in files}
    return [
        (s, e) for s in PythonProfileModes for e in PythonProfileModes if (s.label, e.label) in labels_present
    ]


@pytest.mark.parametrize("job", ["sample", "mixed"])
def test_by_training_phase(job, cp, mixed, sample_files, mixed_files):
    analysis, files, node = (cp, sample_files, "any") if job == "sample" else (mixed, mixed_files, "algo-1")
    result = analysis.fetch_profile_stats_by_training_phase(node_id=node)
    files = on_node(files, node)
    assert list(result) == _pairs(files)  # every pair present, in enum order, keyed by enums
    assert len(result) >= 4
    for (start, end), stats in result.items():
        assert isinstance(start, PythonProfileModes) and isinstance(end, PythonProfileModes)
        check(stats, between_modes(files, start.label, end.label))


def test_by_job_phase_fixes_smdebugs_bugs(mixed, mixed_files):
    result = mixed.fetch_profile_stats_by_job_phase(node_id="algo-1", refresh_stats=False)
    files = on_node(mixed_files, "algo-1")
    assert list(result) == ["initialization", "training_loop", "finalization", "whole_job"]
    for phase, stats in result.items():
        check(stats, [i for i in files if job_phase(i) == phase])
    # Bug 1: every mode pair of the training loop counts, not only the last one.
    loop = {i for i in files if job_phase(i) == "training_loop"}
    assert labels(list(loop)) == {"B", "C", "D", "E", "F", "G", "H", "J", "K"}
    assert len({(i.start_mode, i.end_mode) for i in loop}) == 4
    # Bug 2: the post-hook-close interval (start mode prestepzero) is finalization.
    assert result["finalization"].ps.files == [i.path for i in files if labels([i]) == {"I"}]


def test_by_job_phase_sample_job(cp, sample_files):
    result = cp.fetch_profile_stats_by_job_phase(refresh_stats=False)
    files = on_node(sample_files, "any")
    assert list(result) == ["initialization", "training_loop", "finalization"]
    for phase, stats in result.items():
        check(stats, [i for i in files if job_phase(i) == phase])


def test_by_job_phase_without_training_loop(root, store):
    job = JobBuilder(root / "jobs" / "init-only")
    path = job.cprofile("algo-1", "prestepzero-*-start-1000_train-0-stepstart-2000", "c")
    result = cProfileAnalysis(job.base, store=store).fetch_profile_stats_by_job_phase()
    assert list(result) == ["initialization", "training_loop"]  # no finalization: left out, as in smdebug
    check(result["initialization"], scan(job.base))
    assert str(path.resolve()) in result["initialization"].ps.files
    assert isinstance(result["training_loop"], cProfileStats)
    assert result["training_loop"].ps.stats == {} and result["training_loop"].function_stats_list == []


# -- listings ------------------------------------------------------------------------------------------
def test_list_profile_stats(cp, sample_files):
    df = cp.list_profile_stats()
    assert list(df.columns) == [
        "profiler_name", "framework", "node_id", "start_mode", "start_step", "start_phase",
        "start_time_since_epoch_in_micros", "end_mode", "end_step", "end_phase",
        "end_time_since_epoch_in_micros", "stats_path",
    ]  # fmt: skip
    assert df.shape == (len(sample_files), 12) == (18, 12)
    assert df["stats_path"].tolist() == [i.path for i in sample_files]  # smdebug's order
    assert set(df["profiler_name"]) == {"cprofile"} and set(df["framework"]) == {"pytorch"}
    assert df["node_id"].tolist() == [i.node for i in sample_files]
    assert df["start_mode"].tolist() == [i.start_mode for i in sample_files]
    assert df["start_step"].tolist() == [i.start_step for i in sample_files]
    assert df["end_step"].tolist() == [i.end_step for i in sample_files]
    assert math.inf in df["end_step"].tolist() and -1 in df["start_step"].tolist()
    assert df["start_phase"].tolist() == [StepPhase(i.start_phase) for i in sample_files]
    assert df["end_phase"].tolist() == [StepPhase(i.end_phase) for i in sample_files]
    assert df["start_time_since_epoch_in_micros"].tolist() == [i.start_us for i in sample_files]
    assert df["end_time_since_epoch_in_micros"].tolist() == [i.end_us for i in sample_files]


def test_list_profile_stats_when_there_are_none(root, store, capsys):
    empty = root / "jobs" / "empty"
    empty.mkdir()
    df = cProfileAnalysis(empty, store=store).list_profile_stats()
    assert "No stats were found!" in capsys.readouterr().out
    assert df.empty and len(df.columns) == 12


def test_list_available_node_ids(cp, pyi, mixed):
    assert cp.list_available_node_ids() == ["algo-1", "algo-2"]
    assert pyi.list_available_node_ids(refresh_stats=False) == ["algo-1", "algo-2"]
    assert mixed.list_available_node_ids() == ["algo-1", "algo-2"]


# -- cProfileStats ---------------------------------------------------------------------------------------
def test_print_top_n_functions(cp, capsys):
    stats = cp.fetch_profile_stats_by_step(1, refresh_stats=False)
    capsys.readouterr()
    stats.print_top_n_functions(Metrics.CUMULATIVE_TIME, n=3)
    out = capsys.readouterr().out
    assert "Ordered by: cumulative time" in out
    assert f"List reduced from {len(stats.ps.stats)} to 3 due to restriction <3>" in out
    top = max(stats.ps.stats.items(), key=lambda kv: kv[1][3])[0]
    assert f"({top[2]})" in out
    stats.print_top_n_functions(Metrics.TOTAL_TIME)
    out = capsys.readouterr().out
    assert "Ordered by: internal time" in out and "restriction <10>" in out
    with pytest.raises(AssertionError):
        stats.print_top_n_functions("cumtime")
    with pytest.raises(AssertionError):
        stats.print_top_n_functions(Metrics.TOTAL_CALLS, n="3")


def test_get_function_stats(cp):
    stats = cp.fetch_profile_stats_by_step(1, refresh_stats=False)
    df = stats.get_function_stats()
    assert list(df.columns) == [
        "function name",
        "# of primitive calls",
        "# of total calls",
        "total time",
        "cumulative time",
    ]
    assert len(df) == len(stats.ps.stats) > 10
    rows = {r["function name"]: r for r in df.to_dict("records")}
    for key, (cc, nc, tt, ct, _) in stats.ps.stats.items():
        row = rows[pstats.func_std_string(key)]
        assert (row["# of primitive calls"], row["# of total calls"]) == (cc, nc)
        assert (row["total time"], row["cumulative time"]) == (tt, ct)


def test_function_stats_objects():
    key = ("/x/model.py", 10, "forward")
    caller = ("/x/train.py", 3, "step")
    f = cProfileFunctionStats(
        key, (2, 5, 0.25, 1.5, {caller: (5, 2, 0.25, 1.5), ("~", 0, "<built-in>"): (0, 0, 0, 0)})
    )
    assert f.function_name == "/x/model.py:10(forward)"
    assert (f.prim_calls, f.total_calls, f.total_time, f.cumulative_time) == (2, 5, 0.25, 1.5)
    assert f.callers == ["/x/train.py:3(step)", "{built-in}"]
    assert ast.literal_eval(repr(f)) == {
        "function name": "/x/model.py:10(forward)",
        "# of primitive calls": 2,
        "# of total calls": 5,
        "total time": 0.25,
        "cumulative time": 1.5,
    }


def test_function_stats_list_is_what_it_was_when_the_stats_were_made():
    """function_stats_list is built on first read; it still lists the functions ps held when the
    cProfileStats was made, as smdebug's eagerly built list does, even after ps is added to."""
    first, second = ("/x/a.py", 1, "f"), ("/x/b.py", 2, "g")
    ps = pstats.Stats()
    ps.stats = {first: (1, 1, 0.5, 0.5, {})}
    stats = cProfileStats(ps)
    other = pstats.Stats()
    other.stats = {first: (2, 2, 1.0, 1.0, {}), second: (1, 1, 0.25, 0.25, {})}
    ps.add(other)
    assert [(f.function_name, f.total_calls) for f in stats.function_stats_list] == [("/x/a.py:1(f)", 1)]
    assert stats.function_stats_list is stats.function_stats_list  # built once
    assert repr(stats) == "<cProfileStats: 1 functions from 0 file(s)>"


# -- pyinstrument ----------------------------------------------------------------------------------------
def _frames(frame: dict | None) -> set[tuple[str, float]]:
    found, stack = set(), [frame] if frame else []
    while stack:
        f = stack.pop()
        if f["function"] != "[self]":
            found.add((f["function"], f["time"]))
        stack.extend(f.get("children") or [])
    return found


def _check_pyinstrument(result, expected: list[Interval]) -> None:
    assert expected
    assert isinstance(result, list) and all(isinstance(r, PyinstrumentStepStats) for r in result)
    assert [r.html_file_path for r in result] == [
        str(Path(i.path).with_name("python_stats.html")) for i in expected
    ]
    for r, interval in zip(result, expected):
        assert Path(r.html_file_path).is_file()
        original = json.loads(Path(interval.path).read_text())
        assert _frames(original["root_frame"])  # not vacuous
        assert r.json_stats == original  # the file's own document, field for field


def test_pyinstrument_returns_one_session_per_interval(pyi, sample):
    files = scan(sample.base_dir, "pyinstrument")
    selected = by_step(files, 0, 3)
    assert len(selected) == 4
    _check_pyinstrument(pyi.fetch_profile_stats_by_step(0, 3, refresh_stats=False), selected)
    _check_pyinstrument(
        pyi.fetch_pre_step_zero_profile_stats(node_id="algo-2", refresh_stats=False),
        pre_step_zero(files, "algo-2"),
    )
    _check_pyinstrument(
        pyi.fetch_profile_stats_by_step(0, mode="eval", refresh_stats=False), by_step(files, 0, mode="eval")
    )


def test_pyinstrument_nothing_matched(pyi, capsys):
    assert (
        pyi.fetch_post_hook_close_profile_stats(refresh_stats=False) is None
    )  # the sample job profiles no post-hook-close
    assert NO_STATS_FOR_INTERVAL in capsys.readouterr().out


def test_pyinstrument_by_training_phase(pyi, sample):
    files = on_node(scan(sample.base_dir, "pyinstrument"), "any")
    result = pyi.fetch_profile_stats_by_training_phase(refresh_stats=False)
    assert (
        list(result)
        == _pairs(files)
        == [
            (PythonProfileModes.TRAIN, PythonProfileModes.TRAIN),
            (PythonProfileModes.EVAL, PythonProfileModes.EVAL),
            (PythonProfileModes.PRE_STEP_ZERO, PythonProfileModes.TRAIN),
        ]
    )
    for (start, end), sessions in result.items():
        _check_pyinstrument(sessions, between_modes(files, start.label, end.label))


def test_pyinstrument_by_job_phase(pyi, sample):
    files = on_node(scan(sample.base_dir, "pyinstrument"), "any")
    result = pyi.fetch_profile_stats_by_job_phase(refresh_stats=False)
    assert list(result) == ["initialization", "training_loop"]
    _check_pyinstrument(result["initialization"], [i for i in files if job_phase(i) == "initialization"])
    _check_pyinstrument(result["training_loop"], [i for i in files if job_phase(i) == "training_loop"])


# -- refresh_stats -------------------------------------------------------------------------------------
def test_refresh_stats_picks_up_a_new_interval(tmp_path):
    job = generate_sample_job(tmp_path / "job", nodes=1, train_steps=1, eval_steps=0)
    analysis = cProfileAnalysis(job.base_dir, store=tmp_path / "store")
    assert analysis.fetch_profile_stats_by_step(7) is None
    before = len(analysis.list_profile_stats())

    capture = Capture(job.base_dir, framework="pytorch", profiler="cprofile", node_id="algo-1")
    with capture.step(7):
        train_step(initialize(random.Random(1)), random.Random(2), 7)

    assert analysis.fetch_profile_stats_by_step(7, refresh_stats=False) is None
    assert len(analysis.list_profile_stats(refresh_stats=False)) == before
    check(analysis.fetch_profile_stats_by_step(7), by_step(scan(job.base_dir), 7))
    assert len(analysis.list_profile_stats(refresh_stats=False)) == before + 1


# -- the real legacy TensorFlow files ----------------------------------------------------------------------
def test_legacy_tensorflow_files(tmp_path):
    files = scan(LEGACY)
    assert len(files) == 3
    analysis = cProfileAnalysis(str(LEGACY), store=tmp_path / "store")
    assert analysis.list_available_node_ids() == ["151-algo-1"]
    check(analysis.fetch_profile_stats_by_step(2), by_step(files, 2))
    check(analysis.fetch_profile_stats_by_step(2, 3), by_step(files, 2, 3))
    check(analysis.fetch_pre_step_zero_profile_stats(), pre_step_zero(files))
    assert len(analysis.fetch_pre_step_zero_profile_stats().ps.stats) > 2000


# -- scoping: a notebook sees the files it pointed at, however full the store -----------------------------
def test_each_source_sees_only_its_own_files(tmp_path):
    # Same folder name twice: the second is job "y/job" (a job id never merges two folders); the
    # answers stay apart by source in any case.
    first = JobBuilder(tmp_path / "x" / "job")
    first.cprofile("algo-1", "train-0-stepstart-2000_train-0-stepend-3000", "a")
    second = JobBuilder(tmp_path / "y" / "job")
    second.cprofile("algo-1", "train-0-stepstart-2100_train-0-stepend-2900", "b")
    second.cprofile("algo-1", "train-1-stepstart-3000_train-1-stepend-3900", "c")
    # A sibling whose path starts with the same characters.
    sibling = JobBuilder(tmp_path / "x" / "job0")
    sibling.cprofile("algo-1", "train-0-stepstart-2200_train-0-stepend-2800", "b")
    store = tmp_path / "store"
    a = cProfileAnalysis(first.base, store=store)
    b = cProfileAnalysis(second.base, store=store)
    c = cProfileAnalysis(sibling.base, store=store)
    check(a.fetch_profile_stats_by_step(0), scan(first.base))
    check(b.fetch_profile_stats_by_step(0, 1), scan(second.base))
    check(c.fetch_profile_stats_by_step(0), scan(sibling.base))
    assert len(a.list_profile_stats()) == 1 and len(b.list_profile_stats()) == 2
    check(a.fetch_profile_stats_by_time(0, 1), scan(first.base))
    # The store alone: the first folder is job "job", the second keeps its parent folder's name.
    assert len(cProfileAnalysis(store=store, job="job").list_profile_stats()) == 1
    assert len(cProfileAnalysis(store=store, job="y/job").list_profile_stats()) == 2


def test_store_without_source(cp, mixed, store, sample_files):
    whole = cProfileAnalysis(local_profile_dir=None, store=store)
    with pytest.raises(UsageError, match="jobs"):
        whole.fetch_profile_stats_by_step(1)  # several jobs: which one?
    only_sample = cProfileAnalysis(store=store, job="sample")
    check(only_sample.fetch_profile_stats_by_step(1), by_step(sample_files, 1))


def test_smdebugs_default_folder_is_read_only_without_a_store(tmp_path, monkeypatch, mixed_dir):
    monkeypatch.setattr(analysis_module, "SMDEBUG_LOCAL_PROFILE_DIR", str(mixed_dir))
    monkeypatch.setenv("PROFLAKE_STORE", str(tmp_path / "default-store"))
    assert len(cProfileAnalysis().list_profile_stats()) == len(MIXED)  # like smdebug: reads the default
    other = tmp_path / "other-store"
    cProfileAnalysis(local_profile_dir=None, store=other)  # nothing ingested, nothing to query
    with pytest.raises(ProflakeError, match="no proflake store"):
        cProfileAnalysis(store=other).list_profile_stats()  # store given: the default folder is not read


# -- arguments -------------------------------------------------------------------------------------------
def test_unknown_names_and_missing_sources(cp, tmp_path):
    with pytest.raises(UnknownNameError):
        cp.fetch_profile_stats_by_step(1, mode="training")
    with pytest.raises(ValueError):
        cp.fetch_profile_stats_by_step(1, start_phase="middle")
    with pytest.raises(UnknownNameError):
        cp.fetch_profile_stats_between_modes("train", "testing")
    with pytest.raises(SourceError, match="does not exist"):
        cProfileAnalysis(tmp_path / "nowhere", store=tmp_path / "store")
    with pytest.raises(ProflakeError):
        cProfileAnalysis(s3_path="s3://bucket/job/profiler-output", store=tmp_path / "store")


def test_importing_compat_does_not_import_pandas():
    code = "import sys, proflake.smdebug.compat, proflake; assert 'pandas' not in sys.modules, 'pandas imported'"
    subprocess.run([sys.executable, "-c", code], check=True, cwd=Path(__file__).parent.parent)
