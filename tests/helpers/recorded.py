"""Profiles recorded by the real profilers, once per test process: py-spy (``record --format speedscope`` and
``--format raw``) and austin (its collapsed output) sampling a child process, pyinstrument in this one
(``Session.save`` and its JSON renderer). py-spy and austin come from the test extra (pyproject.toml);
both need ptrace of their child, which root has here.
"""

from __future__ import annotations

import functools
import json
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

# A training loop's shape: steps of a forward pass (arithmetic) and a backward pass (more of it).
WORKLOAD = """
import time

def forward(n):
    return sum(i * i for i in range(n))

def backward(n):
    total = 0
    for i in range(n):
        total += i % 7
    return total

def train(seconds):
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        forward(20_000)
        backward(40_000)

train(0.6)
"""


@dataclass(frozen=True)
class Recorded:
    folder: Path
    speedscope: Path  # py-spy record --format speedscope
    pyspy_raw: Path  # py-spy record --format raw (collapsed stacks, a sample count each, 100 Hz)
    austin: Path  # austin -i 1ms (collapsed stacks, microseconds each)
    pyisession: Path  # pyinstrument's Session.save
    pyinstrument_json: Path  # the same session through pyinstrument's JSONRenderer


def _tool(name: str) -> str:
    found = shutil.which(name, path=str(Path(sys.executable).parent)) or shutil.which(name)
    if found is None:
        pytest.fail(f"{name} is missing: run bin/setup-test (it installs the test extra)")
    return found


# A sampler that starts its own child reads the child's memory maps to find the interpreter; on a busy
# machine it can look before the child has mapped it and give up ("PythonProcessInfo::new ... No such
# file or directory (os error 2)", seen once in a clean-clone CI run at load ~4). That is the tool's
# start-up, not what the tests check: a recording is tried again, up to three times in all.
ATTEMPTS = 3


def _record(args: list[str], out: Path) -> None:
    for _ in range(ATTEMPTS):
        out.unlink(missing_ok=True)
        done = subprocess.run(args, capture_output=True, text=True, timeout=60)
        if done.returncode == 0 and out.exists():
            return
    pytest.fail(f"{' '.join(args[:3])} could not record in {ATTEMPTS} attempts (exit {done.returncode}): "
                f"{done.stderr.strip()[-400:]}")


def _pyinstrument(folder: Path) -> tuple[Path, Path]:
    from pyinstrument import Profiler
    from pyinstrument.renderers import JSONRenderer

    namespace: dict = {}
    exec(compile(WORKLOAD.replace("train(0.6)", ""), "workload.py", "exec"), namespace)
    profiler = Profiler(interval=0.001)
    profiler.start()
    namespace["train"](0.15)
    profiler.stop()
    session = profiler.last_session
    assert session is not None
    saved = folder / "run.pyisession"
    session.save(saved)
    rendered = folder / "run.json"
    rendered.write_text(JSONRenderer().render(session))
    return saved, rendered


@functools.cache
def recorded() -> Recorded:
    """The recorded files (in a folder that lives as long as the process)."""
    folder = Path(tempfile.mkdtemp(prefix="proflake-recorded-"))
    script = folder / "workload.py"
    script.write_text(WORKLOAD)
    speedscope, raw, austin = folder / "run.speedscope.json", folder / "run.txt", folder / "run.austin"
    py_spy = _tool("py-spy")
    _record([py_spy, "record", "-o", str(speedscope), "--format", "speedscope", "--", sys.executable, str(script)], speedscope)
    _record([py_spy, "record", "-o", str(raw), "--format", "raw", "--", sys.executable, str(script)], raw)
    # -t: how long austin waits for the child's interpreter to come up (default 100 ms: on a busy machine
    # the child was not yet a Python process, and austin gave up).
    _record([_tool("austin"), "-i", "1ms", "-t", "10s", "-o", str(austin), sys.executable, str(script)], austin)
    pyisession, pyinstrument_json = _pyinstrument(folder)
    return Recorded(folder, speedscope, raw, austin, pyisession, pyinstrument_json)


def collapsed_lines(path: Path) -> list[tuple[str, float]]:
    """(stack, weight) of each line of a collapsed-stacks file, comments left out."""
    out = []
    for line in path.read_bytes().decode("utf-8", errors="replace").split("\n"):  # as proflake reads them (readers/collapsed.py)
        if line.strip() and not line.startswith("#"):
            stack, _, weight = line.rstrip().rpartition(" ")
            out.append((stack, float(weight.split(",")[0])))
    return out


def speedscope_totals(path: Path) -> tuple[float, float]:
    """(sum of every sample's weight, the longest profile's endValue - startValue), in the file's unit."""
    doc = json.loads(path.read_text())
    weights = sum(sum(p["weights"]) for p in doc["profiles"])
    return weights, max(p["endValue"] - p["startValue"] for p in doc["profiles"])


def copy_as(source: Path, target: Path, mtime: float | None = None) -> Path:
    """``source`` copied to ``target`` (folders made), its modification time ``mtime`` (default now)."""
    import os

    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(source, target)
    stamp = time.time() if mtime is None else mtime
    os.utime(target, (stamp, stamp))
    return target
