"""Shared fixtures. Helpers live in tests/helpers/ and are imported from there, never from this file."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers.profiles import SEMANTIC_INTERVALS, JobBuilder

# Modules whose every test is a whole-system test (see the integration marker in pyproject.toml). A test
# elsewhere can carry @pytest.mark.integration itself.
INTEGRATION_MODULES = {"test_bench", "test_install", "test_s3", "test_s3_faults", "test_signals", "test_decoder_sanitized"}
INTEGRATION_TESTS = {
    "test_killed_runs_leave_nothing_lost_or_doubled",
    "test_queries_and_schemas_ship_inside_the_wheel",
}


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if item.module is not None and item.module.__name__ in INTEGRATION_MODULES or item.originalname in INTEGRATION_TESTS:
            item.add_marker(pytest.mark.integration)


@pytest.fixture
def semantic_job(tmp_path: Path) -> dict[str, Path]:
    """A hand-named job exercising every boundary smdebug's rules care about; label -> python_stats path."""
    job = JobBuilder(tmp_path / "jobs" / "semantic")
    return {label: job.cprofile(node, name, workload) for label, (node, name, workload) in SEMANTIC_INTERVALS.items()}


@pytest.fixture
def store_path(tmp_path: Path) -> Path:
    return tmp_path / "store"


@pytest.fixture(scope="session")
def spark(tmp_path_factory):
    """One local[2] SparkSession shared by every Spark test of the run (tests/helpers/sparkenv.py)."""
    from helpers.sparkenv import start_session

    session = start_session(str(tmp_path_factory.mktemp("spark")))
    yield session
    session.stop()


@pytest.fixture(scope="session")
def s3():
    """The local S3 server (moto), one per test session: moto lets a process bootstrap only one."""
    from helpers import s3server

    server, handle = s3server.start()
    yield server
    handle.stop()
