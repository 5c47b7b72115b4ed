"""Capture must write what smdebug writes: same directory names, same files, same failure output."""

from __future__ import annotations

import json
import os
import pstats
import re
import socket
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import proflake.capture.capture as capture_module
import pytest
from proflake.capture.capture import (
    Boundary,
    Capture,
    NestedCaptureError,
    default_node_id,
    stats_dir_name,
)
from proflake.capture.sample_job import SampleJob, generate_sample_job
from proflake.errors import UnknownNameError, UsageError
from proflake.modes import PythonProfileModes, StepPhase

# smdebug's naming, written out independently of the code under test.
_MODE = r"(train|eval|predict|global|prestepzero|posthookclose)"
_PHASE = r"(start|stepstart|forwardpassend|stepend|end)"
_LABEL = rf"{_MODE}-(\*|\d+)-{_PHASE}-(\d+\.\d+)"
SMDEBUG_DIR = re.compile(rf"^{_LABEL}_{_LABEL}$")

NODE = "151-algo-1"


def _busy_work(n: int = 20_000) -> int:
    # Long enough (~10-30 ms) that pyinstrument samples it and keeps it after pruning short frames.
    total = 0
    for _ in range(10):
        total += sum(i * i for i in range(n))
    return total


def fixed_clock(*seconds: float):
    """A clock returning the given epoch seconds in order; fails loudly if read more often than expected."""
    values: Iterator[float] = iter(seconds)
    return lambda: next(values)


def relative(path: Path | None, base: Path) -> str:
    assert path is not None
    return path.relative_to(base).as_posix()


def function_names(frame: dict | None) -> set[str]:
    if frame is None:
        return set()
    names = {frame["function"]}
    for child in frame.get("children", []):
        names |= function_names(child)
    return names


# --- directory names ----------------------------------------------------------------------------


def test_stats_dir_name_is_smdebugs_format_with_fractional_microseconds() -> None:
    name = stats_dir_name(
        ("train", 3, "stepstart"), 1596585376012363.8, ("train", 3, "stepend"), 1596585376098765.2
    )
    assert name == "train-3-stepstart-1596585376012363.8_train-3-stepend-1596585376098765.2"


def test_stats_dir_name_keeps_star_steps_and_accepts_any_spelling() -> None:
    expected = "prestepzero-*-end-1596585376500000.0_posthookclose-*-end-1596585377250000.0"
    start, end = ("prestepzero", "*", "end"), ("posthookclose", "*", "end")
    assert stats_dir_name(start, 1596585376500000.0, end, 1596585377250000.0) == expected
    assert (
        stats_dir_name(
            (PythonProfileModes.PRE_STEP_ZERO, "*", StepPhase.END),
            1596585376500000,  # an int time is written the way smdebug's float would be
            ("POST_HOOK_CLOSE", "*", "END"),
            1596585377250000.0,
        )
        == expected
    )


@pytest.mark.parametrize("step", [-1, True, 1.5, "3", None])
def test_bad_steps_are_rejected(step: object) -> None:
    with pytest.raises(UsageError, match="step"):
        stats_dir_name(("train", step, "stepstart"), 1.0, ("train", 0, "stepend"), 2.0)


def test_unknown_mode_or_phase_is_an_unknown_name_error() -> None:
    with pytest.raises(UnknownNameError, match="mode"):
        stats_dir_name(("training", 0, "stepstart"), 1.0, ("train", 0, "stepend"), 2.0)
    with pytest.raises(UnknownNameError, match="phase"):
        stats_dir_name(("train", 0, "begin"), 1.0, ("train", 0, "stepend"), 2.0)


def test_helpers_write_smdebugs_special_intervals_exactly(tmp_path: Path) -> None:
    clock = fixed_clock(
        1596585376.0123637, 1596585376.0987651,  # pre-step-zero
        1596585376.5, 1596585377.25,  # train step 5
        1596585378.0, 1596585378.5,  # train 3 -> eval 0
        1596585379.0, 1596585379.5,  # eval step 0
        1596585380.0, 1596585380.5,  # post-hook-close
    )
    capture = Capture(tmp_path, framework="pytorch", profiler="cprofile", node_id=NODE, clock=clock)
    paths = []
    for interval in (
        capture.pre_step_zero(),
        capture.step(5),
        capture.mode_change("train", 3, "eval"),
        capture.step(0, mode="eval"),
        capture.post_hook_close(),
    ):
        with interval as captured:
            _busy_work(10)
        paths.append(relative(captured.path, tmp_path))

    node = f"framework/pytorch/cprofile/{NODE}"
    assert paths == [
        f"{node}/prestepzero-*-start-1596585376012363.8_train-0-stepstart-1596585376098765.2",
        f"{node}/train-5-stepstart-1596585376500000.0_train-5-stepend-1596585377250000.0",
        f"{node}/train-3-stepend-1596585378000000.0_eval-0-stepstart-1596585378500000.0",
        f"{node}/eval-0-stepstart-1596585379000000.0_eval-0-stepend-1596585379500000.0",
        f"{node}/prestepzero-*-end-1596585380000000.0_posthookclose-*-end-1596585380500000.0",
    ]
    for path in paths:
        assert SMDEBUG_DIR.match(Path(path).name), path
        assert sorted(p.name for p in (tmp_path / path).iterdir()) == ["python_stats"]


def test_interval_accepts_explicit_boundaries_and_reports_them(tmp_path: Path) -> None:
    capture = Capture(
        tmp_path, framework="tensorflow", profiler="pyinstrument", node_id="algo-2",
        clock=fixed_clock(10.0, 11.5),
    )
    with capture.interval(("predict", 7, "forward_pass_end"), ("global", "*", "end")) as captured:
        pass
    assert captured.start == Boundary(PythonProfileModes.PREDICT, 7, StepPhase.FORWARD_PASS_END)
    assert captured.end == Boundary(PythonProfileModes.GLOBAL, "*", StepPhase.END)
    assert (captured.start_time_us, captured.end_time_us) == (10000000.0, 11500000.0)
    assert relative(captured.path, tmp_path) == (
        "framework/tensorflow/pyinstrument/algo-2/predict-7-forwardpassend-10000000.0_global-*-end-11500000.0"
    )


def test_real_clock_names_match_smdebugs_pattern_and_increase(tmp_path: Path) -> None:
    capture = Capture(tmp_path, node_id=NODE)
    with capture.step(0) as first:
        _busy_work(10)
    with capture.step(1) as second:
        _busy_work(10)
    assert first.path is not None and second.path is not None
    for captured in (first, second):
        match = SMDEBUG_DIR.match(captured.path.name)
        assert match, captured.path.name
        assert float(match.group(4)) == captured.start_time_us < float(match.group(8)) == captured.end_time_us
    assert first.end_time_us is not None and first.end_time_us <= second.start_time_us
    assert abs(first.start_time_us / 1e6 - time.time()) < 60


# --- file contents ------------------------------------------------------------------------------


def test_cprofile_stats_load_with_pstats_and_hold_the_profiled_function(tmp_path: Path) -> None:
    capture = Capture(tmp_path, profiler="cprofile", node_id=NODE)
    with capture.step(0) as captured:
        _busy_work(100)
        _busy_work(100)
    assert captured.path is not None
    stats = pstats.Stats(str(captured.path / "python_stats"))
    calls = {name: (cc, nc) for (file, _, name), (cc, nc, *_rest) in stats.stats.items() if file == __file__}
    assert calls["_busy_work"] == (2, 2)
    assert sys.getprofile() is None


def test_pyinstrument_writes_json_with_the_profiled_function_and_html(tmp_path: Path) -> None:
    capture = Capture(tmp_path, profiler="pyinstrument", node_id=NODE, sample_interval=0.0005)
    with capture.step(2) as captured:
        _busy_work()
    assert captured.path is not None
    assert sorted(p.name for p in captured.path.iterdir()) == ["python_stats.html", "python_stats.json"]
    session = json.loads((captured.path / "python_stats.json").read_text())
    assert session["root_frame"] is not None
    assert "_busy_work" in function_names(session["root_frame"])
    assert "<html" in (captured.path / "python_stats.html").read_text().lower()
    assert sys.getprofile() is None


def test_pyinstrument_with_no_samples_still_writes_valid_files(tmp_path: Path) -> None:
    capture = Capture(tmp_path, profiler="pyinstrument", node_id=NODE)
    with capture.post_hook_close() as captured:
        pass
    assert captured.path is not None
    session = json.loads((captured.path / "python_stats.json").read_text())
    assert "root_frame" in session
    assert (captured.path / "python_stats.html").stat().st_size > 0


class _BrokenRenderer:
    def render(self, session: object) -> str:
        raise UnboundLocalError("local variable 'frame' referenced before assignment")


def _broken_output_html(self: object, *args: object, **kwargs: object) -> str:
    raise AssertionError("pyinstrument internal assertion")


@pytest.mark.parametrize("break_it", ["json", "html"])
def test_pyinstrument_render_failure_writes_smdebugs_placeholders(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, break_it: str
) -> None:
    if break_it == "json":
        monkeypatch.setattr(capture_module, "JSONRenderer", _BrokenRenderer)
    else:
        monkeypatch.setattr(capture_module.PyinstrumentProfiler, "output_html", _broken_output_html)
    capture = Capture(tmp_path, profiler="pyinstrument", node_id=NODE)
    with capture.step(0) as captured:
        _busy_work(1000)
    assert captured.path is not None
    assert json.loads((captured.path / "python_stats.json").read_text()) == {"root_frame": None}
    assert (captured.path / "python_stats.html").read_text() == "An error occurred during profiling!"


@pytest.mark.parametrize("profiler", ["cprofile", "pyinstrument"])
def test_raising_block_still_writes_stats_then_reraises(tmp_path: Path, profiler: str) -> None:
    capture = Capture(tmp_path, profiler=profiler, node_id=NODE)
    with pytest.raises(RuntimeError, match="diverged"):
        with capture.step(3) as captured:
            _busy_work(10)
            raise RuntimeError("loss diverged")
    assert sys.getprofile() is None  # the profiler was switched off
    assert captured.path is not None and captured.path.name.startswith("train-3-stepstart-")
    if profiler == "cprofile":
        names = {name for _, _, name in pstats.Stats(str(captured.path / "python_stats")).stats}
        assert "_busy_work" in names
    else:
        assert "root_frame" in json.loads((captured.path / "python_stats.json").read_text())
    # The failed interval released the thread, so profiling can go on.
    with capture.step(4) as after:
        pass
    assert after.path is not None and after.path.is_dir()


# --- misuse ---------------------------------------------------------------------------------------


def test_unknown_profiler_name_is_rejected(tmp_path: Path) -> None:
    with pytest.raises(UnknownNameError, match="yappi"):
        Capture(tmp_path, profiler="yappi", node_id=NODE)
    # smdebug's legacy folder was spelled cProfile; either spelling means the one profiler.
    legacy_spelling = Capture(tmp_path, profiler="cProfile", node_id=NODE)
    assert legacy_spelling.node_dir == tmp_path / f"framework/pytorch/cprofile/{NODE}"


def test_nested_capture_raises_and_outer_interval_is_still_written(tmp_path: Path) -> None:
    capture = Capture(tmp_path, node_id=NODE)
    with capture.step(0) as outer:
        with pytest.raises(NestedCaptureError, match="cannot nest"):
            with capture.step(1):
                pass
    assert outer.path is not None
    assert [p.name for p in outer.path.parent.iterdir()] == [outer.path.name]


def test_overlap_across_captures_on_one_thread_is_rejected(tmp_path: Path) -> None:
    cprofile = Capture(tmp_path, profiler="cprofile", node_id=NODE)
    pyinstrument = Capture(tmp_path, profiler="pyinstrument", node_id=NODE)
    with cprofile.step(0):
        with pytest.raises(UsageError):
            with pyinstrument.step(0):
                pass
    assert not (tmp_path / "framework/pytorch/pyinstrument").exists()


def test_a_clock_that_does_not_move_cannot_overwrite_a_profile(tmp_path: Path) -> None:
    capture = Capture(tmp_path, node_id=NODE, clock=lambda: 1596585376.5)
    with capture.step(0):
        pass
    with pytest.raises(UsageError, match="already exists"):
        with capture.step(0):
            pass


@pytest.mark.parametrize("node_id", ["", "a/b", "..", "."])
def test_node_id_must_be_one_directory_name(tmp_path: Path, node_id: str) -> None:
    with pytest.raises(UsageError, match="node id"):
        Capture(tmp_path, node_id=node_id)


def test_default_node_id(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PROFLAKE_NODE_ID", "7-algo-3")
    assert default_node_id() == "7-algo-3"
    assert Capture(tmp_path).node_id == "7-algo-3"
    monkeypatch.delenv("PROFLAKE_NODE_ID")
    expected = f"{os.getpid()}-{socket.gethostname()}".replace("_", "-")
    assert default_node_id() == expected
    assert "_" not in default_node_id()


# --- sample job -----------------------------------------------------------------------------------


def _shape(path: Path) -> tuple[str, str, str, str, str, str]:
    """The interval a stats directory describes, without its times."""
    match = SMDEBUG_DIR.match(path.name)
    assert match, path.name
    return match.group(1, 2, 3, 5, 6, 7)


def _start_us(path: Path) -> float:
    match = SMDEBUG_DIR.match(path.name)
    assert match, path.name
    return float(match.group(4))


@pytest.fixture(scope="module")
def sample_job(tmp_path_factory: pytest.TempPathFactory) -> tuple[SampleJob, float]:
    # No test asserts how long this takes (a busy two-core machine made a 5 s bound fail): speed is
    # the benchmark's business, measured as ratios in bench/.
    started = time.perf_counter()
    job = generate_sample_job(tmp_path_factory.mktemp("job"), nodes=2, train_steps=4, eval_steps=2)
    return job, time.perf_counter() - started


def test_sample_job_writes_the_expected_intervals_per_node_and_profiler(
    sample_job: tuple[SampleJob, float],
) -> None:
    job, _ = sample_job
    assert job.node_ids == ("algo-1", "algo-2")
    profilers_dir = job.base_dir / "framework" / "pytorch"
    assert sorted(p.name for p in profilers_dir.iterdir()) == ["cprofile", "pyinstrument"]
    expected = {
        "cprofile": [
            ("prestepzero", "*", "start", "train", "0", "stepstart"),
            *[("train", str(s), "stepstart", "train", str(s), "stepend") for s in range(4)],
            ("train", "3", "stepend", "eval", "0", "stepstart"),
            *[("eval", str(s), "stepstart", "eval", str(s), "stepend") for s in range(2)],
            ("prestepzero", "*", "end", "posthookclose", "*", "end"),
        ],
        "pyinstrument": [
            ("prestepzero", "*", "start", "train", "0", "stepstart"),
            *[("train", str(s), "stepstart", "train", str(s), "stepend") for s in range(4)],
            ("eval", "0", "stepstart", "eval", "0", "stepend"),
        ],
    }
    for profiler, shapes in expected.items():
        assert sorted(p.name for p in (profilers_dir / profiler).iterdir()) == ["algo-1", "algo-2"]
        for node in job.node_ids:
            on_disk = sorted((profilers_dir / profiler / node).iterdir(), key=_start_us)
            assert [_shape(p) for p in on_disk] == shapes
            assert list(job.node_stats_dirs(profiler, node)) == on_disk


def test_sample_job_intervals_never_overlap_on_a_node(sample_job: tuple[SampleJob, float]) -> None:
    job, _ = sample_job
    for node in job.node_ids:
        spans = []
        for profiler in ("cprofile", "pyinstrument"):
            for path in job.node_stats_dirs(profiler, node):
                match = SMDEBUG_DIR.match(path.name)
                assert match
                spans.append((float(match.group(4)), float(match.group(8))))
        spans.sort()
        for (start, end), (next_start, _) in zip(spans, spans[1:]):
            assert start < end <= next_start


def test_sample_job_files_are_real_profiles(sample_job: tuple[SampleJob, float]) -> None:
    job, _ = sample_job
    for path in job.stats_dirs["cprofile"]:
        assert [p.name for p in path.iterdir()] == ["python_stats"]
    # Initialisation does far more distinct things than a training step (here train step 1).
    init, _, step, *_ = job.node_stats_dirs("cprofile", "algo-1")
    init_stats = pstats.Stats(str(init / "python_stats"))
    step_stats = pstats.Stats(str(step / "python_stats"))
    assert len(init_stats.stats) > 2 * len(step_stats.stats), (len(init_stats.stats), len(step_stats.stats))
    step_names = {name for _, _, name in step_stats.stats}
    assert {"forward", "backward", "load_batch", "tree_size", "<built-in method time.sleep>"} <= step_names

    for path in job.stats_dirs["pyinstrument"]:
        assert sorted(p.name for p in path.iterdir()) == ["python_stats.html", "python_stats.json"]
        session = json.loads((path / "python_stats.json").read_text())
        if _shape(path)[2] == "stepstart":
            assert session["sample_count"] >= 5, path.name
            assert function_names(session["root_frame"]) & {"train_step", "eval_step"}, path.name


def test_sample_job_options(tmp_path: Path) -> None:
    job = generate_sample_job(tmp_path, nodes=1, train_steps=1, eval_steps=0, framework="tensorflow")
    assert job.node_ids == ("algo-1",)
    assert [_shape(p) for p in job.stats_dirs["cprofile"]] == [
        ("prestepzero", "*", "start", "train", "0", "stepstart"),
        ("train", "0", "stepstart", "train", "0", "stepend"),
        ("prestepzero", "*", "end", "posthookclose", "*", "end"),
    ]
    assert all("framework/tensorflow/" in p.as_posix() for p in job.stats_dirs["pyinstrument"])
    with pytest.raises(UsageError):
        generate_sample_job(tmp_path / "bad", train_steps=0)
