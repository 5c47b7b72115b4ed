"""The trend gate's false-alarm rate on generated series (no store: the per-job series built in memory and
passed through the same code as Profiles.trend's, query/trend.py ``_changes``): on noise alone, and with
the newest job exactly at the threshold (the edge of the gate's null hypothesis), the newest job fails
the gate at most ``alpha`` of the time, although its split was chosen by the search (docs/trend.md, "The
gate": the choice is paid for when the change point is found, before the gate tests it)."""

from __future__ import annotations

import math

import numpy as np
import pyarrow as pa
import pytest
from proflake.query import trend

FUNCTIONS = 20
JOBS = 10
STEPS = 24  # a job's node steps: the newest job alone is a segment of at least MIN_STEPS
ALPHA = 0.05


def series(rng: np.random.Generator, newest_factor: float) -> tuple[pa.Table, list[str]]:
    """Per job and function, as trend_series_*.sql returns it: 10% step noise, function 0's time times
    ``newest_factor`` in the newest job."""
    means = 0.05 / np.arange(1, FUNCTIONS + 1)
    jobs = [f"nightly-{j:02d}" for j in range(JOBS)]
    levels = np.tile(means, (JOBS, 1))
    levels[-1, 0] *= newest_factor
    # job x step x function; per job, the total (the steps' sums) first, then each function: the rows
    # trend_series_*.sql returns, built as columns (a table of Python dicts cost a third of this test).
    steps = np.stack([rng.normal(level, 0.1 * level, (STEPS, FUNCTIONS)) for level in levels])
    values = np.concatenate([steps.sum(axis=2)[:, :, None], steps], axis=2)
    names = [None, *(f"/app/m.py:{f}(f{f})" for f in range(FUNCTIONS))]
    table = pa.table({
        "job_id": [job for job in jobs for _ in names],
        "function": names * JOBS,
        "steps": pa.array(np.full(JOBS * len(names), STEPS), pa.int64()),
        "own_mean_s": values.mean(axis=1).ravel(),
        "own_spread_s2": values.var(axis=1).ravel(),
    })
    return table, jobs


def alarm_rate(seed: int, trials: int, newest_factor: float, threshold: float, min_change: float) -> float:
    rng = np.random.default_rng(seed)
    alarms = 0
    for _ in range(trials):
        table, jobs = series(rng, newest_factor)
        found, tests, tested = trend._changes(table, jobs, min_change, 0.01, ALPHA)
        result = trend.TrendResult("cprofile", None, jobs, min_change, 0.01, ALPHA, table, found, tested, [], tests)
        alarms += bool(result.gate(threshold))
    return alarms / trials


def bound(trials: int) -> float:
    """alpha plus three standard errors of a rate of alpha measured over ``trials``: a gate at its nominal
    rate stays under it (the seeds are fixed), one at twice the rate does not."""
    return ALPHA + 3 * math.sqrt(ALPHA * (1 - ALPHA) / trials)


@pytest.mark.parametrize("threshold", [0.0, 0.10])
def test_on_noise_alone_the_newest_job_rarely_fails_the_gate(threshold):
    """No change anywhere, no --min-change to hide behind, even a gate at 0%: a false alarm needs a change
    point found at the newest job, and finding one is corrected for the split's choice and the functions."""
    assert alarm_rate(1, 200, 1.0, threshold, 0.0) <= ALPHA


def test_a_newest_job_exactly_at_the_threshold_fails_the_gate_at_most_alpha_of_the_time():
    """Function 0 is exactly 10% slower in the newest job, a real change the search finds nearly always;
    the gate at 10% must reject "the growth is at most 10%" no more than alpha of the time."""
    trials = 400
    rate = alarm_rate(2, trials, 1.10, 0.10, 0.10)
    assert rate <= bound(trials)
    # and the gate is not blind: at +25% (inside its power) the same series fail it nearly always
    assert alarm_rate(3, 50, 1.25, 0.10, 0.10) >= 0.9
