"""Static checks run with the tests: ruff (configured in pyproject.toml) over the package, tests and bench."""

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
