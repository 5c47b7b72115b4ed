"""Change points in a series of jobs, each job summarised by its steps: mean, spread and step count.

Candidates come from binary segmentation with the l2 cost on the per-job means (the greedy search of
ruptures' ``Binseg(model="l2")``; tests/test_trend.py checks the two agree), vectorised with cumulative
sums. Every candidate is tested against the step-to-step noise, as Apache Otava (Hunter) tests the
candidates of its E-Divisive search with a t-test in place of permutations: Welch's test between the steps
of the jobs before it and of the jobs after it (to the neighbouring change points), from the jobs' means,
spreads and step counts, each p-value multiplied by the number of places the split could have gone. Which
series changed at all is decided by Holm over the series; their segments are split further while the best
split is significant at alpha / series; then the change points are re-tested against their final
neighbours and the weakest insignificant one dropped, merging its two segments, until every one left is
significant; of those, the changes of at least ``min_change`` are reported (``changes``). docs/trend.md
says why, with the error rates.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from proflake.query import stats

# The fewest steps a side of a split may have: below ~10, a side's variance comes from so few steps that
# Welch's test is too often wrong far in its tail, where a correction for many functions looks (docs/trend.md).
MIN_STEPS = 10


@dataclass(frozen=True)
class Jobs:
    """One series: per job (in order), the mean per step, the spread (squared deviations / steps), steps."""

    mean: np.ndarray
    spread: np.ndarray
    steps: np.ndarray

    @classmethod
    def of(cls, mean, spread, steps) -> Jobs:
        return cls(np.asarray(mean, dtype=float), np.asarray(spread, dtype=float), np.asarray(steps, dtype=float))

    def __len__(self) -> int:
        return len(self.mean)

    def pooled(self, start: int, end: int) -> tuple[float, float, int]:
        """The steps of jobs [start, end) as one sample: mean, sample variance, count."""
        n = self.steps[start:end]
        total = float(n.sum())
        if total == 0:
            return 0.0, float("nan"), 0
        mean = float((n * self.mean[start:end]).sum() / total)
        m2 = float((n * (self.spread[start:end] + (self.mean[start:end] - mean) ** 2)).sum())
        return mean, (m2 / (total - 1) if total > 1 else float("nan")), int(total)


@dataclass
class Change:
    """A change point: jobs [start, at) before it, [at, end) after; the test between them."""

    at: int
    start: int
    end: int
    before: float
    after: float
    change: float  # (after - before) / before; inf for something new
    se: float
    df: float
    p_raw: float
    before_steps: int
    after_steps: int
    p_value: float = float("nan")  # Holm-adjusted over every candidate tested with it


def best_split(x: np.ndarray, start: int, end: int, steps: np.ndarray | None = None) -> tuple[int, float]:
    """The split of x[start:end] lowering the l2 cost (squared deviations from each part's mean) most, as
    (index of the first job after it, gain); the last of equal gains, as ruptures picks it. With ``steps``
    (each job's), only splits leaving MIN_STEPS steps or more on each side count; none: (-1, 0)."""
    segment = x[start:end]
    n = len(segment)
    if n < 2:
        return -1, 0.0
    centred = segment - segment.mean()  # for precision: the cost does not change under a shift
    cumulative = np.cumsum(centred)
    k = np.arange(1, n)
    left = cumulative[:-1]
    # cost(whole) - cost(left) - cost(right) = S_k^2 / k + (S - S_k)^2 / (n - k) - S^2 / n, with S = 0 here
    gains = left**2 / k + left**2 / (n - k)
    if steps is not None:
        before = np.cumsum(steps[start:end])[:-1]
        gains = np.where((before >= MIN_STEPS) & (before[-1] + steps[end - 1] - before >= MIN_STEPS), gains, -1.0)
    best = len(gains) - 1 - int(np.argmax(gains[::-1]))
    if gains[best] < 0:
        return -1, 0.0
    return start + best + 1, float(gains[best])


def binseg(x: np.ndarray, n_bkps: int) -> list[int]:
    """ruptures' ``Binseg(model="l2", min_size=1, jump=1).fit(x).predict(n_bkps=n_bkps)`` without its last
    element: the first ``n_bkps`` splits, by greedy gain over every segment, in order of position."""
    points: list[int] = []
    segments = [(0, len(x))]
    for _ in range(n_bkps):
        splits = [(best_split(x, a, b), (a, b)) for a, b in segments]
        (at, gain), (a, b) = max(splits, key=lambda s: s[0][1])
        if at < 0 or gain <= 0:
            break
        segments.remove((a, b))
        segments = sorted([*segments, (a, at), (at, b)])  # the first segment of equal gains wins, by position
        points.append(at)
    return sorted(points)


def welch_between(jobs: Jobs, start: int, at: int, end: int) -> Change:
    """Welch's test between the steps of jobs [start, at) and those of [at, end), its p-value multiplied by
    the number of places the split could have been put in [start, end) (it was chosen as the best)."""
    before, var_b, n_b = jobs.pooled(start, at)
    after, var_a, n_a = jobs.pooled(at, end)
    if n_b >= 2 and n_a >= 2:
        w = stats.welch(np.array([before]), np.array([var_b]), n_b, np.array([after]), np.array([var_a]), n_a, None)
        se, df, p = float(w["se"][0]), float(w["df"][0]), float(w["p_value"][0])
        # the split was chosen as the best of the segment's (end - start - 1): Bonferroni over them
        p = min(1.0, p * (end - start - 1))
    else:
        se = df = p = float("nan")
    if before != 0:
        change = (after - before) / before
    else:
        change = 0.0 if after == 0 else float("inf")
    return Change(at, start, end, before, after, change, se, df, p, n_b, n_a)


def candidates(jobs: Jobs, alpha: float) -> list[int]:
    """Binary segmentation, greedy by gain, splitting a segment only when its best split is significant."""
    points: list[int] = []
    open_segments = [(0, len(jobs))]
    while open_segments:
        splits = [(best_split(jobs.mean, a, b, jobs.steps), (a, b)) for a, b in open_segments]
        (at, gain), (a, b) = max(splits, key=lambda s: s[0][1])
        open_segments.remove((a, b))
        open_segments.sort()
        if at < 0 or gain <= 0:
            continue
        p = welch_between(jobs, a, at, b).p_raw
        if p < alpha:  # NaN (too few steps) is not significant
            points.append(at)
            open_segments += [(a, at), (at, b)]
    return sorted(points)


def changes(series: list[Jobs], min_change: float, alpha: float) -> list[list[Change]]:
    """The change points of each series that pass, with the chance of any false one among all the series
    kept at ``alpha``; of those, the changes of at least ``min_change`` (relative) either way.

    1. Whether a series changed at all: its best split over every job, Holm-corrected over the series.
    2. A series that did is segmented further at alpha / len(series) (Bonferroni over the series).
    3. Its change points are re-tested against their final neighbours, their p-values multiplied by
       len(series), and the weakest one at or over ``alpha`` dropped (its segments merged) until none is.

    Only significance decides the segmentation: a significant change smaller than ``min_change`` stays a
    boundary (and is not reported), so dropping it does not merge two levels and dilute a large change
    next to it into one that looks small."""
    m = max(len(series), 1)
    first = [_first(jobs) for jobs in series]
    changed = stats.holm(np.array(first, dtype=float)) < alpha if series else np.array([], dtype=bool)
    kept = [candidates(jobs, alpha / m) if c else [] for jobs, c in zip(series, changed)]
    while True:
        tested = [_retest(jobs, points) for jobs, points in zip(series, kept)]
        dropped = False
        for i, row in enumerate(tested):
            for c in row:
                c.p_value = min(1.0, c.p_raw * m) if not np.isnan(c.p_raw) else float("nan")
            failing = [c for c in row if not c.p_value < alpha]  # NaN fails
            if failing:
                weakest = max(failing, key=lambda c: (_p_order(c.p_value), -abs(c.change)))
                kept[i] = [p for p in kept[i] if p != weakest.at]
                dropped = True
        if not dropped:
            return [[c for c in row if abs(c.change) >= min_change] for row in tested]


def _first(jobs: Jobs) -> float:
    """The p-value of the series' best split over all its jobs (NaN: nothing to split or test)."""
    at, gain = best_split(jobs.mean, 0, len(jobs), jobs.steps)
    return welch_between(jobs, 0, at, len(jobs)).p_raw if at > 0 and gain > 0 else float("nan")


def _retest(jobs: Jobs, points: list[int]) -> list[Change]:
    bounds = [0, *points, len(jobs)]
    return [welch_between(jobs, bounds[i - 1], bounds[i], bounds[i + 1]) for i in range(1, len(bounds) - 1)]


def _p_order(p: float) -> float:
    return 2.0 if np.isnan(p) else p
