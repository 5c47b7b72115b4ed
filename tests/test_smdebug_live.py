"""smdebug 1.0.34 itself, from PyPI, in a venv of its own: fresh files, smdebug's answers, then the port.

Slow tier (installing smdebug and its dependencies took 4 minutes on the development machine):
``bin/test -m slow tests/test_smdebug_live.py``. bin/test makes ``.venv-smdebug`` for it first
(bin/setup-test --smdebug, through tests/smdebug/make_venv.sh); the test writes new files with smdebug's profiler classes (tests/smdebug/make_profiles.py), records smdebug's
analysis answers on them (tests/smdebug/smdebug_answers.py), then runs the port of smdebug's test and
the parity tests on those files instead of the committed ones.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).parent
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def smdebug_python() -> str:
    venv = HERE.parent / ".venv-smdebug"
    if not (venv / ".smdebug-installed").exists():
        pytest.fail("smdebug's venv is missing: run bin/setup-test --smdebug (bin/test -m slow does) and re-run", pytrace=False)
    return str(venv / "bin" / "python")


@pytest.fixture(scope="module")
def fresh(smdebug_python, tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("smdebug-live")
    subprocess.run([smdebug_python, str(HERE / "smdebug" / "make_profiles.py"), str(root), "analysis", "scenarios"],
                   check=True, capture_output=True)
    subprocess.run([smdebug_python, str(HERE / "smdebug" / "smdebug_answers.py"), str(root), str(root / "smdebug-answers.json")],
                   check=True, capture_output=True)
    return root


def test_smdebug_writes_the_files_the_committed_ones_are(fresh):
    committed = HERE / "data" / "smdebug-1.0.34"

    def kinds(root: Path) -> list[tuple[str, ...]]:  # (case, framework, profiler, file name): times and pids differ
        return sorted(p.relative_to(root).parts[:1] + p.relative_to(root).parts[2:4] + (p.name,) for p in root.rglob("python_stats*"))

    assert kinds(fresh) == kinds(committed)


@pytest.mark.parametrize("tests", ["tests/test_smdebug_port.py", "tests/test_compat_parity.py"])
def test_port_and_parity_pass_on_fresh_smdebug_files(fresh, tests):
    env = {**os.environ, "PROFLAKE_SMDEBUG_FILES": str(fresh)}
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", tests],
                          cwd=HERE.parent, env=env, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stdout[-4000:]
