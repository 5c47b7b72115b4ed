"""Real profiles written at test time into hand-named smdebug directories, and the pstats oracle."""

from __future__ import annotations

import cProfile
import json
import pstats
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

DATA = Path(__file__).resolve().parent.parent / "data"
LEGACY = DATA / "smdebug-tf-legacy"
FORMAT_SAMPLES = DATA / "format-samples"


def _work_a(n: int = 200) -> int:
    return sum(i * i for i in range(n))


def _work_b(n: int = 12) -> int:
    return n if n < 2 else _work_b(n - 1) + _work_b(n - 2)


def _work_c() -> str:
    return json.dumps({"x": [_work_a(50) for _ in range(3)]})


WORKLOADS: dict[str, Callable[[], object]] = {"a": _work_a, "b": _work_b, "c": _work_c}


def write_cprofile(stats_dir: Path, workload: str = "a", repeat: int = 1) -> Path:
    """Profile a small real workload with cProfile and dump it to stats_dir/python_stats."""
    stats_dir.mkdir(parents=True, exist_ok=True)
    profile = cProfile.Profile()
    profile.enable()
    for _ in range(repeat):
        WORKLOADS[workload]()
    profile.disable()
    path = stats_dir / "python_stats"
    pstats.Stats(profile).dump_stats(str(path))
    return path


class JobBuilder:
    """Writes intervals of one job: ``job.cprofile("algo-1", "train-0-stepstart-2000_train-0-stepend-3000")``."""

    def __init__(self, base: Path, framework: str = "pytorch") -> None:
        self.base = base
        self.framework = framework

    def stats_dir(self, profiler: str, node: str, name: str) -> Path:
        return self.base / "framework" / self.framework / profiler / node / name

    def cprofile(self, node: str, name: str, workload: str = "a", repeat: int = 1) -> Path:
        return write_cprofile(self.stats_dir("cprofile", node, name), workload, repeat)

    def pyinstrument(self, node: str, name: str, sample: str = "pyinstrument-5.1.3.json") -> Path:
        stats_dir = self.stats_dir("pyinstrument", node, name)
        stats_dir.mkdir(parents=True, exist_ok=True)
        shutil.copy(FORMAT_SAMPLES / sample, stats_dir / "python_stats.json")
        (stats_dir / "python_stats.html").write_text("<html></html>")
        return stats_dir / "python_stats.json"


# One node's life in smdebug's naming, with times in microseconds (label -> directory name).
SEMANTIC_INTERVALS = {
    "A": ("algo-1", "prestepzero-*-start-1000_train-0-stepstart-2000", "c"),
    "B": ("algo-1", "train-0-stepstart-2000_train-0-stepend-3000", "a"),
    "C": ("algo-1", "train-1-stepstart-3000_train-1-forwardpassend-3500", "b"),
    "D": ("algo-1", "train-1-forwardpassend-3500_train-1-stepend-4000", "a"),
    "E": ("algo-1", "train-1-stepend-4000_train-2-stepstart-4100", "c"),
    "F": ("algo-1", "train-2-stepstart-4100_train-2-stepend-5000", "b"),
    "G": ("algo-1", "train-2-stepend-5000_eval-0-stepstart-5100", "a"),
    "H": ("algo-1", "eval-0-stepstart-5100_eval-0-stepend-6000", "b"),
    "I": ("algo-1", "prestepzero-*-end-7000_posthookclose-*-end-8000", "c"),
    "B2": ("algo-2", "train-0-stepstart-2050_train-0-stepend-2950", "b"),
    "F2": ("algo-2", "train-2-stepstart-4150_train-2-stepend-4950", "a"),
}


def assert_same_pstats(actual: dict, expected: dict, rel: float = 1e-9) -> None:
    """Same function keys, equal call counts, times within ``rel``, same callers (values likewise)."""
    assert set(actual) == set(expected)
    for key, (cc, nc, tt, ct, callers) in expected.items():
        a_cc, a_nc, a_tt, a_ct, a_callers = actual[key]
        assert (a_cc, a_nc) == (cc, nc), key
        assert a_tt == pytest.approx(tt, rel=rel, abs=1e-12), key
        assert a_ct == pytest.approx(ct, rel=rel, abs=1e-12), key
        assert set(a_callers) == set(callers), key
        for caller, edge in callers.items():
            a_edge = a_callers[caller]
            assert tuple(a_edge[:2]) == tuple(edge[:2]), (key, caller)
            assert a_edge[2:] == pytest.approx(edge[2:], rel=rel, abs=1e-12), (key, caller)


def pstats_of(paths) -> dict:
    """The oracle: pstats.Stats.add over the files, as smdebug aggregates."""
    stats = pstats.Stats()
    for path in paths:
        stats.add(str(path))
    return stats.stats
