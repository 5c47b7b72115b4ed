"""A disk that fills up exactly at a Delta commit, on a real (tmpfs) file system: one line on stderr naming
the full disk, exit 1, the batch shown as stopped ('failed' when there was room to record it), and once
space is back the next run repairs it and the store equals a clean ingest (docs/operations.md)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from helpers.cli import run_cli
from proflake import Profiles, ingest
from proflake.errors import ExitCode
from test_batches import build_corpus, snapshot

pytestmark = pytest.mark.integration


@pytest.fixture
def small_disk(tmp_path: Path):
    """A 16 MB tmpfs (tests run as root in CI; elsewhere this needs mount rights)."""
    mount = tmp_path / "disk"
    mount.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=16m", "tmpfs", str(mount)], capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here ({done.stderr.strip()}); CI runs this as root")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


@pytest.mark.parametrize("commit", [1, 2, 4])
def test_a_disk_full_at_a_commit_is_one_line_and_the_next_run_recovers(small_disk, tmp_path, commit):
    build_corpus(tmp_path / "src", nodes=2, steps=3)
    ingest(str(tmp_path / "src"), str(tmp_path / "clean"))
    store, filler = small_disk / "store", small_disk / "filler"
    env = {**os.environ, "PROFLAKE_FILL_DISK_AFTER_COMMITS": f"{commit}:{filler}"}
    done = subprocess.run([sys.executable, "-m", "proflake.cli", "ingest", str(tmp_path / "src"), "--store", str(store)],
                          capture_output=True, text=True, env=env, check=False)
    assert done.returncode == ExitCode.FAILURE, done.stderr
    assert "Traceback" not in done.stderr and done.stderr.count("proflake: error:") == 1, done.stderr
    assert "disk" in done.stderr.splitlines()[-1] and "full" in done.stderr.splitlines()[-1], done.stderr
    filler.unlink()
    statuses = Profiles(str(store)).batches()["status"].to_pylist()
    # After the first commit the workers' first write meets the full disk: clearing the spool frees
    # nothing, so 'failed' cannot be written and the batch reads as stopped (no lock held); later, the
    # cleared spool leaves room to record it.
    assert statuses[0] == ("stopped" if commit == 1 else "failed"), statuses
    again = run_cli(["ingest", str(tmp_path / "src"), "--store", str(store)])  # in process: the run that failed was real
    assert again.returncode == 0, again.stderr
    assert snapshot(str(store)) == snapshot(str(tmp_path / "clean"))
    assert Profiles(str(store)).batches()["status"].to_pylist()[1] in ("abandoned", "repaired")
