"""Selections about some jobs of a local store read only those jobs' intervals (Engine._select), and
answer exactly what the copy of every interval answers."""

from __future__ import annotations

from pathlib import Path

import pytest
from proflake import Profiles

from bench.lab.manifest_bench import simulated_store


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    location = tmp_path_factory.mktemp("jobs") / "store"
    simulated_store(location, 10_000)  # jobs job-00000 .. job-00002, 4 nodes x 1,000 steps (the last cut short)
    return location


def both(store: Path) -> tuple[Profiles, Profiles]:
    """A reader left to defer its copy, and one made to copy every interval first (the whole-store path)."""
    scoped, whole = Profiles(str(store)), Profiles(str(store))
    whole._held_intervals()
    return scoped, whole


def test_list_of_a_job_reads_that_job_alone_and_answers_the_same(store: Path) -> None:
    scoped, whole = both(store)
    for job in ("job-00001", "job-00002", ["job-00000", "job-00002"]):
        got, want = scoped.list_profile_stats(job=job), whole.list_profile_stats(job=job)
        assert got.num_rows > 0 and got.equals(want)
    assert scoped._snapshot is not None and scoped._snapshot.copy_pending  # no copy of every interval made
    assert not whole._snapshot.copy_pending
    assert set(scoped.list_profile_stats(job="job-00001")["job_id"].to_pylist()) == {"job-00001"}


def test_fetch_selections_of_a_job_are_the_same_as_from_the_whole_copy(store: Path) -> None:
    scoped, whole = both(store)
    for job in ("job-00001", "job-00000"):
        for method, arguments in (
            ("by_step", {"node": "algo-2", "start_step": 3, "end_step": 7}),
            ("by_time", {"start_time_s": 1.7e9 + 10, "end_time_s": 1.7e9 + 20}),
        ):
            (_, got), (_, want) = scoped.select(method, job=job, **arguments), whole.select(method, job=job, **arguments)
            assert got.num_rows > 0 and got.equals(want)
    assert scoped._snapshot.copy_pending
    # A whole-store question afterwards still sees every interval.
    assert scoped.list_profile_stats(all_jobs=True).num_rows == 10_000
