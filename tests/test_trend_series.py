"""The series proflake trend reads (queries/trend_series_*.sql) and the trend_series view: per job, in the
order the jobs started, and per function, the mean own and inclusive time per train step and its spread,
checked against numpy over the very times the synthetic profiles were written with (tests/test_diff.py
writes them). tests/test_trend.py tests the change points found in these series."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from proflake.ingestion.batch import ingest
from proflake.query.profiles import Profiles
from test_diff import FUNCTIONS, LINES, step_times, write_cprofile_step, write_pyinstrument_step

T0 = 1_700_000_000_000_000  # microseconds; job i starts a day after job i - 1
DAY_US = 86_400 * 1_000_000
NODES = ("algo-1", "algo-2")
STEPS = 12
SERIES_COLUMNS = ["job_id", "job_index", "function", "steps", "present", "own_mean_s", "inclusive_mean_s",
                  "own_spread_s2", "inclusive_spread_s2"]


def write_series(root: Path, jobs: list[dict[str, float]], *, profiler: str = "cprofile", seed: int = 3,
                 prefix: str = "nightly", order: list[int] | None = None) -> dict[str, dict[str, list[dict]]]:
    """One job per entry of ``jobs`` (its functions' mean own times), the i-th started ``order[i]`` days
    after the first (default i), each with STEPS train steps on two nodes, every function jittered 10% per
    step (tests/test_diff.py: step_times). Returns each job's times per node and step, as written."""
    rng = np.random.default_rng(seed)
    written = {}
    for j, functions in enumerate(jobs):
        job = f"{prefix}-{j:02d}"
        day = j if order is None else order[j]
        written[job] = {node: step_times(rng, functions, STEPS) for node in NODES}
        for node, steps in written[job].items():
            for step, times in enumerate(steps):
                start = T0 + day * DAY_US + step * 1_000_000
                name = f"train-{step}-stepstart-{start}_train-{step}-stepend-{start + 500_000}"
                folder = root / job / "framework" / "pytorch" / profiler / node / name
                if profiler == "cprofile":
                    write_cprofile_step(folder, times, LINES)
                else:
                    write_pyinstrument_step(folder, times, start / 1e6)
    return written


def store_of(tmp: Path, jobs: list[dict[str, float]], **kwargs) -> tuple[Path, dict]:
    written = write_series(tmp / "jobs", jobs, **kwargs)
    ingest(str(tmp / "jobs"), str(tmp / "store"), workers=1)
    return tmp / "store", written


def key(name: str) -> str:
    return f"/app/train.py:{LINES[name]}({name})"


def series_of(profiles: Profiles, jobs: list[str], profiler: str, node: str | None = None):
    """What Profiles.trend reads: the train steps of ``jobs`` (every node, or ``node``), as its series."""
    scope, selected = profiles.select("by_step", job=jobs, node=node, profiler=profiler, start_step="*",
                                      end_step="*", mode="train")
    return profiles.aggregate(f"trend_series_{profiler}", selected, scope.params())


@pytest.fixture(scope="module", params=["cprofile", "pyinstrument"])
def jobs(request, tmp_path_factory):
    """Four jobs written out of order (the third started first), backward 40% slower in the last two."""
    tmp = tmp_path_factory.mktemp(f"series-{request.param}")
    slower = {**FUNCTIONS, "backward": FUNCTIONS["backward"] * 1.4}
    store, written = store_of(tmp, [FUNCTIONS, FUNCTIONS, slower, slower], profiler=request.param,
                              order=[1, 2, 0, 3])
    return request.param, store, written


def expected(written: dict, job: str, nodes=NODES) -> dict:
    """numpy over the written times: per function (None: the total) mean and population variance."""
    samples = [times for node in nodes for times in written[job][node]]
    out = {}
    for name in FUNCTIONS:
        values = np.array([s[name] for s in samples])
        out[key(name)] = (values.mean(), values.var())
    totals = np.array([sum(s.values()) for s in samples])
    out[None] = (totals.mean(), totals.var())
    return out


def test_each_job_in_the_order_it_started_with_numpy_s_means_and_spreads(jobs):
    profiler, store, written = jobs
    profiles = Profiles(store)
    table = series_of(profiles, list(written), profiler)
    rows = table.select(SERIES_COLUMNS).to_pylist()
    totals = [r for r in rows if r["function"] is None]
    assert [(r["job_id"], r["job_index"]) for r in totals] == [
        ("nightly-02", 1), ("nightly-00", 2), ("nightly-01", 3), ("nightly-03", 4)
    ]
    assert all(r["steps"] == STEPS * len(NODES) for r in rows)
    assert table["job_start_time"].type.unit == "us"
    for r in rows:
        if r["function"] not in expected(written, r["job_id"]):
            assert r["own_mean_s"] == 0  # train_step, the root: no own time
            continue
        mean, variance = expected(written, r["job_id"])[r["function"]]
        assert r["present"] == STEPS * len(NODES)
        assert r["own_mean_s"] == pytest.approx(mean, rel=1e-9)
        assert r["own_spread_s2"] == pytest.approx(variance, rel=1e-6)
        if r["function"] is not None:  # leaf functions: inclusive time is own time
            assert r["inclusive_mean_s"] == pytest.approx(mean, rel=1e-9)
            assert r["inclusive_spread_s2"] == pytest.approx(variance, rel=1e-6)
    backward = {r["job_id"]: r["own_mean_s"] for r in rows if r["function"] == key("backward")}
    assert backward["nightly-03"] / backward["nightly-00"] == pytest.approx(1.4, rel=0.08)


def test_one_node_s_series_is_that_node_s_steps(jobs):
    profiler, store, written = jobs
    rows = series_of(Profiles(store), list(written), profiler, node="algo-2").to_pylist()
    for r in rows:
        if r["function"] in (None, key("forward")):
            mean, variance = expected(written, r["job_id"], nodes=("algo-2",))[r["function"]]
            assert (r["steps"], r["own_mean_s"]) == (STEPS, pytest.approx(mean, rel=1e-9))
            assert r["own_spread_s2"] == pytest.approx(variance, rel=1e-6)


def test_a_function_missing_from_some_steps_counts_zero_there(tmp_path):
    source = tmp_path / "jobs"
    for step in range(4):
        start = T0 + step * 1_000_000
        name = f"train-{step}-stepstart-{start}_train-{step}-stepend-{start + 500_000}"
        times = {"forward": 0.05, **({"checkpoint": 0.2} if step == 3 else {})}
        write_cprofile_step(source / "solo" / "framework" / "pytorch" / "cprofile" / "algo-1" / name, times)
    ingest(str(source), str(tmp_path / "store"), workers=1)
    rows = {r["function"]: r for r in series_of(Profiles(tmp_path / "store"), ["solo"], "cprofile").to_pylist()}
    checkpoint = rows[key("checkpoint")]
    assert (checkpoint["steps"], checkpoint["present"]) == (4, 1)
    assert checkpoint["own_mean_s"] == pytest.approx(0.05)
    assert checkpoint["own_spread_s2"] == pytest.approx(np.var([0, 0, 0, 0.2]))


def test_the_trend_series_view_is_the_series_of_every_job_on_all_nodes(jobs):
    profiler, store, written = jobs
    profiles = Profiles(store)
    query = series_of(profiles, list(written), profiler).select(SERIES_COLUMNS)
    view = profiles.sql(
        f"SELECT {', '.join(SERIES_COLUMNS)} FROM trend_series WHERE profiler = '{profiler}' "
        "ORDER BY job_index, function NULLS FIRST"
    )
    assert view.num_rows == query.num_rows > 0
    for a, b in zip(view.to_pylist(), query.to_pylist()):
        assert a.keys() == b.keys()
        for k in a:
            assert a[k] == (pytest.approx(b[k], rel=1e-9, abs=1e-15) if isinstance(b[k], float) else b[k]), k
