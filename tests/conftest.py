"""Shared fixtures. Helpers live in tests/helpers/ and are imported from there, never from this file."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from helpers.profiles import SEMANTIC_INTERVALS, JobBuilder
from hypothesis import settings

# Hypothesis: the default tier's profile is bounded and derandomized (the same 100 inputs per property
# on every run, so a failure reproduces and no run is luckier than another); HYPOTHESIS_PROFILE=long
# draws 2,000 fresh ones per property, as the slow tier does (tests/test_hostile.py::test_properties_hold_on_the_long_profile).
settings.register_profile("bounded", max_examples=100, deadline=None, derandomize=True, database=None)
settings.register_profile("long", max_examples=2000, deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "bounded"))

# Modules whose every test is a whole-system test (see the integration marker in pyproject.toml). A test
# elsewhere can carry @pytest.mark.integration itself.
INTEGRATION_MODULES = {"test_bench", "test_install", "test_s3", "test_s3_faults", "test_signals", "test_decoder_sanitized"}
# Modules that use the session's Spark: scheduled on one xdist worker, so the run starts one JVM.
SPARK_MODULES = {"test_spark", "test_spark_ingest", "test_time_zones"}
# Modules that use the session's chromium (the browser fixture): on one xdist worker, one browser a run
# (each launch with playwright's driver is ~0.9 s of CPU).
BROWSER_MODULES = {"test_report_browser", "test_diff_browser", "test_trend_browser", "test_page_numbers_browser"}
# Tests elsewhere that kill or pause real ingest processes; any test on the S3 server or Spark (the s3 and
# spark fixtures) is integration too.
INTEGRATION_TESTS = {
    "test_killed_runs_leave_nothing_lost_or_doubled",
    "test_fact_files_of_a_killed_run_stay_out_of_the_tables",
    "test_killed_replacing_run_recovers",
    "test_full_refresh_killed_after_every_commit_and_at_random_never_shows_two_generations",
    "test_full_refresh_replaces_only_what_its_source_covers",
    "test_killed_at_every_commit_the_rollups_end_fresh_and_right",
    "test_a_holder_paused_past_its_lease_loses_the_lock_and_never_commits_after",
    "test_breaking_a_stale_lock_never_removes_the_next_holders",
    "test_queries_and_schemas_ship_inside_the_wheel",
}
REAL_COMPONENTS = {"s3", "spark", "s3_store"}  # s3_store: test_sql_surface's store on the session's S3 server


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        in_module = item.module is not None and item.module.__name__ in INTEGRATION_MODULES
        if in_module or item.originalname in INTEGRATION_TESTS or REAL_COMPONENTS & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.integration)


def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> object:
    """bin/test runs pytest -n auto: each module's tests go to one xdist worker, in their order, so its
    module-scoped stores are built once, not once per worker, and smdebug's ported tests (one case reads
    what an earlier case uploaded) keep their order; the Spark modules share a worker, so the run starts
    one JVM, not one per worker (~6 s of CPU each, and 1 GB), and so do the browser modules (one chromium).
    (xdist's own --dist loadgroup marks do not reach its scheduler under pytest 9.2, which no longer reads
    the node id xdist rewrites.)"""
    from xdist.scheduler import LoadScopeScheduling

    class ByModule(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            module = nodeid.split("::", 1)[0]
            stem = Path(module).stem
            return "spark" if stem in SPARK_MODULES else "browser" if stem in BROWSER_MODULES else module

    return ByModule(config, log)


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
    """One local[2,2] SparkSession shared by every Spark test of the run (tests/helpers/sparkenv.py)."""
    from helpers.sparkenv import start_session, stop_session

    session = start_session(str(tmp_path_factory.mktemp("spark")))
    yield session
    stop_session(session)


@pytest.fixture(scope="session")
def browser():
    """Debian's chromium, headless, driven by playwright (its own browser download is never used): one per
    test run, shared by the browser modules (BROWSER_MODULES), each test opening pages of its own."""
    chromium = "/usr/bin/chromium"
    if not os.path.exists(chromium):
        pytest.fail(f"{chromium} is missing: run bin/setup-test (bin/test does) and re-run", pytrace=False)
    from playwright import sync_api

    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=chromium, headless=True, args=["--no-sandbox"])
        yield b
        b.close()


@pytest.fixture(scope="session")
def s3():
    """The local S3 server (moto), one per test session: moto lets a process bootstrap only one."""
    from helpers import s3server

    server, handle = s3server.start()
    yield server
    handle.stop()
