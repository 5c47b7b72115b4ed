"""The install builds the compiled cProfile decoder, and without a C compiler installs without it."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def _wheel(tmp_path: Path, **env: str) -> tuple[zipfile.ZipFile, str]:
    """Build a wheel from a copy of the sources holding no compiled module (as a fresh clone)."""
    source = tmp_path / "source"
    for name in ("etl", "queries", "schemas"):
        shutil.copytree(REPO / name, source / name, ignore=shutil.ignore_patterns("*.so", "*.pyd", "__pycache__"))
    for name in ("pyproject.toml", "README.md", "hatch_build.py"):
        shutil.copy(REPO / name, source / name)
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-build-isolation", str(source), "--no-deps", "-w", str(tmp_path / "wheels"), "-v"],
        capture_output=True, text=True, timeout=600, env={**os.environ, **env},
    )
    assert built.returncode == 0, built.stderr[-3000:]
    (wheel,) = (tmp_path / "wheels").glob("*.whl")
    return zipfile.ZipFile(wheel), built.stdout + built.stderr


def test_the_wheel_carries_the_compiled_decoder(tmp_path):
    wheel, _ = _wheel(tmp_path)
    assert any(n.startswith("proflake/readers/_pstats_columns.") and n.endswith((".so", ".pyd")) for n in wheel.namelist())
    assert "Root-Is-Purelib: false" in wheel.read(next(n for n in wheel.namelist() if n.endswith("/WHEEL"))).decode()
    # One top-level package, named proflake: no `etl` to shadow a user's own etl/ package.
    top = {n.split("/")[0] for n in wheel.namelist() if not n.split("/")[0].endswith(".dist-info")}
    assert top == {"proflake"}, top
    assert "proflake/queries/by_step.sql" in wheel.namelist() and "proflake/schemas/intervals.json" in wheel.namelist()


@pytest.mark.skipif(sys.platform == "win32", reason="a compiler that fails is /bin/false here")
def test_without_a_compiler_the_install_warns_and_goes_on(tmp_path):
    wheel, output = _wheel(tmp_path, CC="/bin/false")
    assert not any(n.endswith((".so", ".pyd")) for n in wheel.namelist())
    assert "proflake/readers/cprofile.py" in wheel.namelist()
    assert "proflake: could not compile etl/proflake/readers/_pstats_columns.c" in output
    assert "parsed in Python" in output
