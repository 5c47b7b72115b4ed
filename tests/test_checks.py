"""Static checks run with the tests: ruff over the package, tests and bench, and mypy over the package
(strict on the public API); both configured in pyproject.toml."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_ruff_finds_nothing():
    ruff = shutil.which("ruff", path=str(Path(sys.executable).parent)) or shutil.which("ruff")
    assert ruff, "ruff is not installed: it is in the test extra (pip install -e '.[test]')"
    done = subprocess.run([ruff, "check", "etl", "tests", "bench"], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr


def test_mypy_finds_nothing():
    mypy = shutil.which("mypy", path=str(Path(sys.executable).parent)) or shutil.which("mypy")
    assert mypy, "mypy is not installed: it is in the test extra (pip install -e '.[test]')"
    # Incremental: .mypy_cache (which ignores itself in git) makes a second run take seconds, not ~17 s of CPU.
    done = subprocess.run([mypy, "--config-file", "pyproject.toml"], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
