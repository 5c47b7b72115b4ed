"""What changed across a series of jobs: per function, where its own time per step shifted, tested.

    >>> from proflake import Profiles
    >>> t = Profiles("./proflake-store").trend(job_glob="nightly-*")
    >>> t.series                 # per job (in the order they started) and function: mean and spread per step
    >>> t.changes                # [{"function", "job_id", "before_s", "after_s", "change", "p_value", ...}]
    >>> t.gate(0.10)             # [] or the reasons the newest job fails a 10% regression gate

Each job is summarised by its train steps (every node's step a sample, as ``diff``): queries/trend_series_*.sql.
Change points are found on the per-job means of each function's own time and tested against the step noise
(proflake.query.changepoints); docs/trend.md says how, and what it can and cannot tell.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from proflake.errors import UnknownNameError, UsageError
from proflake.formats import DEFAULT_PROFILER
from proflake.numbers import p_value, percent, ranked, seconds
from proflake.query import changepoints, stats

if TYPE_CHECKING:
    from proflake.query.profiles import Profiles

TOTAL = None  # the function of the total row, in the series and the changes
CHANGE_COLUMNS = (
    "function", "job_id", "job_index", "before_s", "after_s", "change", "p_value",
    "before_jobs", "after_jobs", "before_steps", "after_steps",
)


@dataclass
class TrendResult:
    """The answer of ``Profiles.trend``: the per-job ``series`` and the ``changes`` found in it."""

    profiler: str
    node: str | None
    jobs: list[str]  # in the order they started
    min_change: float
    min_share: float
    alpha: float
    series: pa.Table
    changes: list[dict[str, Any]]
    tested: int  # series tested: the total and the functions holding min_share of a job's total
    warnings: list[str] = field(default_factory=list)
    _tests: dict[tuple[Any, str], changepoints.Change] = field(default_factory=dict, repr=False)
    _profiles: Profiles | None = field(default=None, repr=False, compare=False)
    _page: Any = field(default=None, repr=False, compare=False)

    @property
    def newest(self) -> str | None:
        return self.jobs[-1] if self.jobs else None

    def changes_table(self) -> pa.Table:
        """``changes`` as a table (CHANGE_COLUMNS), for csv and parquet."""
        schema = pa.schema([
            ("function", pa.string()), ("job_id", pa.string()), ("job_index", pa.int64()),
            ("before_s", pa.float64()), ("after_s", pa.float64()), ("change", pa.float64()),
            ("p_value", pa.float64()), ("before_jobs", pa.int64()), ("after_jobs", pa.int64()),
            ("before_steps", pa.int64()), ("after_steps", pa.int64()),
        ])
        return pa.Table.from_pylist([{k: c[k] for k in CHANGE_COLUMNS} for c in self.changes], schema=schema)

    def gate(self, threshold: float) -> list[str]:
        """Reasons to fail a regression gate on the newest job, one line each; empty when it passes.

        It fails when the newest job starts a change (one of ``changes``) whose own time grew by more than
        ``threshold`` (0.10 = 10%) of the time before it: a one-sided Welch test of H0 "the growth is at
        most the threshold", Holm-corrected over the changes the newest job starts, at ``alpha``.
        """
        return [line for failed, line in self._gate_tests(threshold) if failed]

    def verdict(self, threshold: float) -> list[str]:
        """Every test the gate made, failed or not, one line each; or why it tested nothing."""
        return [line for _, line in self._gate_tests(threshold)]

    def _gate_tests(self, threshold: float) -> list[tuple[bool, str]]:
        newest = self.newest
        rows = [c for c in self.changes if c["job_id"] == newest and c["change"] > 0]
        if not rows:
            what = f"the newest job ({newest})" if newest else "no job"
            return [(False, f"{what} starts no slowdown (no change of at least {self.min_change * 100:g}% found)")]
        tests = [self._tests[(c["function"], c["job_id"])] for c in rows]
        p = stats.exceeds(
            np.array([t.after - t.before for t in tests]),
            np.array([threshold * t.before for t in tests]),
            np.array([t.se for t in tests]),
            np.array([t.df for t in tests]),
        )
        adjusted = stats.holm(p)
        family = f"one-sided Welch, Holm over {len(rows)}"
        out = []
        for c, t, p_adj in zip(rows, tests, adjusted):
            failed = bool(p_adj < self.alpha)
            verdict = f"over +{threshold * 100:g}%" if failed else f"not shown over +{threshold * 100:g}%"
            relation = "<" if failed else ">="
            out.append((failed, (
                f"{_name(c['function'])} {percent(c['change'])} ({seconds(t.before)}/step -> {seconds(t.after)}/step) "
                f"from {c['job_id']}: {verdict} ({family}, p={p_value(float(p_adj))} {relation} alpha {self.alpha:g}, "
                f"{c['before_jobs']} jobs ({c['before_steps']:,} steps) vs {c['after_jobs']} ({c['after_steps']:,} steps))"
            )))
        return out

    def report(self, *, top: int = 10, max_diffs: int = 20, fail_on: float | None = None):  # -> Report
        """The trend page (docs/trend.md, "The page"): the total's and the ``top`` functions' series with the
        change points marked, the table of changes, and for the ``max_diffs`` largest changes the diff of
        the jobs either side (and with ``fail_on`` the gate's verdict); one self-contained HTML file,
        ``.write(path)`` saves it (a proflake.render.report.Report)."""
        if self._profiles is None:
            raise UsageError("this TrendResult was not made by Profiles.trend, so it has no profiles to diff")
        # Built by proflake.pages, above the query and render layers: the one upward import allowed.
        from proflake.pages import build_trend_report

        return build_trend_report(self, top=top, max_diffs=max_diffs, fail_on=fail_on)

    def _repr_html_(self) -> str:
        """A notebook shows the trend page (made once, then kept)."""
        if self._page is None:
            self._page = self.report()
        return str(self._page._repr_html_())

    def summary_lines(self) -> list[str]:
        """What was compared, for stderr."""
        steps = sum(r["steps"] for r in self.series.to_pylist() if r["function"] is None)
        where = self.node or "all nodes"
        found = f"{len(self.changes)} change{'s' if len(self.changes) != 1 else ''}"
        return [
            f"{len(self.jobs)} jobs ({self.jobs[0] if self.jobs else ''} .. {self.newest or ''}), {steps:,} train steps "
            f"on {where}, {self.profiler}: {found} of at least {self.min_change * 100:g}% in own time per "
            f"step over {self.tested} series (Welch, corrected over them, alpha {self.alpha:g})"
        ]

    def terminal_table(self) -> pa.Table:
        """The changes for a terminal: function, the first job after the change, before, after, change, p."""
        return pa.table({
            "function": [_name(c["function"]) for c in self.changes],
            "from_job": [c["job_id"] for c in self.changes],
            "before": [f"{seconds(c['before_s'])}/step" for c in self.changes],
            "after": [f"{seconds(c['after_s'])}/step" for c in self.changes],
            "change": [percent(c["change"]) for c in self.changes],
            "p": [p_value(c["p_value"]) for c in self.changes],
        }, schema=pa.schema([(n, pa.string()) for n in ("function", "from_job", "before", "after", "change", "p")]))

    def to_dict(self, fail_on: float | None = None) -> dict[str, Any]:
        """Everything as plain JSON-able values: what was compared, the changes, and the gate."""
        out: dict[str, Any] = {
            "profiler": self.profiler,
            "node": self.node,
            "jobs": list(self.jobs),
            "test": {"method": "welch_t", "correction": "holm", "alpha": self.alpha, "candidates": "binseg_l2"},
            "min_change": self.min_change,
            "min_share": self.min_share,
            "tested": self.tested,
            "changes": [{k: _jsonable(v) for k, v in c.items()} for c in self.changes],
            "warnings": list(self.warnings),
        }
        if fail_on is not None:
            reasons = self.gate(fail_on)
            out["gate"] = {"fail_on": fail_on, "failed": bool(reasons), "reasons": reasons, "verdict": self.verdict(fail_on)}
        return out


def percentage(option: str, value: str) -> float:
    """``10%`` (or ``10``) -> 0.10, for the command line's options; anything else is a UsageError."""
    try:
        fraction = float(value.strip().removesuffix("%").strip()) / 100
    except ValueError:
        raise UsageError(f"{option} {value!r} is not a percentage; write e.g. 10%") from None
    if not math.isfinite(fraction) or fraction < 0:
        raise UsageError(f"{option} {value!r} must be a percentage of zero or more")
    return fraction


def _name(function: str | None) -> str:
    return "(total)" if function is None else function


def _jsonable(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def trend(
    profiles: Profiles,
    *,
    jobs: Sequence[str] | None = None,
    job_glob: str | None = None,
    profiler: str | None = None,
    node: str | None = None,
    min_change: float = 0.10,
    min_share: float = 0.01,
    alpha: float = 0.05,
) -> TrendResult:
    """Change points in each function's own time per step across jobs; see the module docstring."""
    if min_change < 0:
        raise UsageError(f"min_change ({min_change}) must be a fraction of at least 0 (0.10 = 10%)")
    if not 0 <= min_share < 1:
        raise UsageError(f"min_share ({min_share}) must be a fraction between 0 and 1")
    if not 0 < alpha < 1:
        raise UsageError(f"alpha ({alpha}) must lie between 0 and 1")
    wanted = _jobs(profiles.job_ids(), jobs, job_glob)
    scope, selected = profiles.select(
        "by_step", job=wanted, node=node, profiler=profiler, start_step="*", end_step="*", mode="train"
    )
    chosen = scope.profiler or DEFAULT_PROFILER
    series = profiles.aggregate(f"trend_series_{chosen}", selected, scope.params())
    order = series.filter(pc.is_null(series["function"])).sort_by("job_index")["job_id"].to_pylist()
    found, tests, tested = _changes(series, order, min_change, min_share, alpha)
    warnings = []
    left_out = [j for j in wanted if j not in order]
    if left_out:
        where = f" on {scope.node_id}" if scope.node_id else ""
        warnings.append(f"{len(left_out)} job(s) have no {chosen} train steps{where} and are left out: {', '.join(left_out)}")
    if len(order) < 2:
        warnings.append(f"{len(order)} job(s) with train steps: a change point needs at least 2 jobs")
    return TrendResult(
        chosen, scope.node_id, order, min_change, min_share, alpha, series, found, tested, warnings, tests, profiles
    )


def _jobs(known: list[str], jobs: Sequence[str] | None, job_glob: str | None) -> list[str]:
    if isinstance(jobs, str):
        jobs = [jobs]
    if jobs is None and job_glob is None:
        if not known:
            raise UsageError("the store holds no jobs, so there is no series to look at")
        return list(known)
    out = []
    for j in jobs or ():
        if j not in known:
            raise UnknownNameError("job", j, known or ["(the store is empty)"])
        out.append(j)
    if job_glob is not None:
        matched = [j for j in known if fnmatchcase(j, job_glob)]
        if not matched:
            raise UnknownNameError("job pattern (no job matches)", job_glob, known or ["(the store is empty)"])
        out += [j for j in matched if j not in out]
    return out


def _changes(
    series: pa.Table, order: list[str], min_change: float, min_share: float, alpha: float
) -> tuple[list[dict[str, Any]], dict[tuple[Any, str], changepoints.Change], int]:
    """Per function (and the total): the per-job series as arrays, its change points, as dicts."""
    index = {job: i for i, job in enumerate(order)}
    n = len(order)
    rows = series.to_pylist()
    steps = np.zeros(n)
    totals = np.zeros(n)
    by_function: dict[Any, dict[str, np.ndarray]] = {}
    for r in rows:
        i = index[r["job_id"]]
        if r["function"] is None:
            steps[i], totals[i] = r["steps"], r["own_mean_s"]
        arrays = by_function.setdefault(r["function"], {"mean": np.zeros(n), "spread": np.zeros(n)})
        arrays["mean"][i], arrays["spread"][i] = r["own_mean_s"], r["own_spread_s2"]
    with np.errstate(divide="ignore", invalid="ignore"):
        keys = [k for k, a in by_function.items() if k is None or np.any(a["mean"] >= min_share * totals)]
    keys.sort(key=lambda k: (k is not None, k or ""))
    jobs = [changepoints.Jobs.of(by_function[k]["mean"], by_function[k]["spread"], steps) for k in keys]
    found = changepoints.changes(jobs, min_change, alpha) if n >= 2 else [[] for _ in keys]
    out, tests = [], {}
    for key, row in zip(keys, found):
        for c in row:
            job = order[c.at]
            tests[(key, job)] = c
            out.append({
                "function": key,
                "job_id": job,
                "job_index": c.at + 1,
                "before_s": c.before,
                "after_s": c.after,
                "change": c.change,
                "p_value": c.p_value,
                "before_jobs": c.at - c.start,
                "after_jobs": c.end - c.at,
                "before_steps": c.before_steps,
                "after_steps": c.after_steps,
            })
    # per job, the total first, then the largest changes (a new function, from nothing, first)
    out.sort(key=lambda c: (c["job_index"], c["function"] is not None, -ranked(abs(c["change"]))))
    return out, tests, len(keys)
