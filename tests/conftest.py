"""Shared fixtures. Helpers live in tests/helpers/ and are imported from there, never from this file."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers.profiles import SEMANTIC_INTERVALS, JobBuilder


@pytest.fixture
def semantic_job(tmp_path: Path) -> dict[str, Path]:
    """A hand-named job exercising every boundary smdebug's rules care about; label -> python_stats path."""
    job = JobBuilder(tmp_path / "jobs" / "semantic")
    return {label: job.cprofile(node, name, workload) for label, (node, name, workload) in SEMANTIC_INTERVALS.items()}


@pytest.fixture
def store_path(tmp_path: Path) -> Path:
    return tmp_path / "store"
