"""What changed between two selections of profiles: per function, per step, tested against the noise.

    >>> from proflake import Profiles
    >>> d = Profiles("./proflake-store").diff({"job": "run-7"}, {"job": "run-8"})
    >>> d.table                  # one row per function, largest change of own time first
    >>> d.total                  # the total time per step, base and head, and its test
    >>> d.gate(total=0.10)       # [] or the reasons a 10% regression gate fails
    >>> d.report().write("diff.html")   # the diff page: a differential flame graph and the table

Each side is what a fetch method selects (default: every train step of the job, all nodes). Every node's
step is one sample (the selected intervals starting in it, summed), so a change is tested against the
step-to-step noise with Welch's t-test; docs/diff.md says why, and what the false-positive rate is.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from proflake import arrowfn
from proflake.errors import UnknownNameError, UsageError
from proflake.formats import DEFAULT_PROFILER
from proflake.query.diff_table import (  # noqa: F401 - part of the API
    DIFF_SCHEMA,
    TABLE_COLUMNS,
    _pct,
    _pct_ci,
    compare,
    summarise,
    summary_lines,
)
from proflake.query.gate import MIN_SAMPLES, gate_tests
from proflake.query.names import DIFF_MATCH, DIFF_PER

if TYPE_CHECKING:
    from proflake.query.profiles import Profiles

PER = DIFF_PER
MATCH = DIFF_MATCH
FEW_SAMPLES = 5
_BY_STEP_DEFAULTS = {"start_step": "*", "end_step": "*", "mode": "train"}


@dataclass(frozen=True)
class Selection:
    """One side of a diff: a job, a node (None: all nodes) and what a fetch method selects in it.

    ``Selection.of({"job": "run-7", "node": "algo-2", "start_step": 1000, "end_step": 1100})`` takes the
    keyword arguments of ``Profiles.fetch``: ``method`` (default ``by_step``, every train step) and the
    method's own arguments.
    """

    job: str | None = None
    node: str | None = None
    method: str = "by_step"
    arguments: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def of(cls, value: Selection | Mapping[str, Any] | str | None) -> Selection:
        if isinstance(value, Selection):
            return value
        if value is None:
            return cls()
        if isinstance(value, str):
            return cls(job=value)
        rest = dict(value)
        job, node = rest.pop("job", None), rest.pop("node", None)
        method = str(rest.pop("method", "by_step")).replace("-", "_")
        return cls(job=job, node=node, method=method, arguments=rest)

    def fetch_arguments(self) -> dict[str, Any]:
        if self.method == "by_step":  # no steps named: every step; a start step alone: that step, as fetch
            defaults = _BY_STEP_DEFAULTS if "start_step" not in self.arguments else {"mode": "train"}
            return {**defaults, **self.arguments}
        return dict(self.arguments)

    def describe(self) -> str:
        """``run-7 algo-2 by_step(start_step=1000, end_step=1100, mode=train)``, for reports."""
        arguments = ", ".join(f"{k}={v}" for k, v in self.fetch_arguments().items() if v is not None)
        return f"{self.job or '(the job)'} {self.node or 'all nodes'} {self.method}({arguments})"


@dataclass
class Side:
    """What one side selected: intervals, samples (node steps), their wall seconds and their total."""

    selection: Selection
    job_ids: list[str] | None
    node_id: str | None
    intervals: int
    samples: int
    seconds: float

    def to_dict(self) -> dict[str, Any]:
        return {
            "selection": self.selection.describe(),
            "job": self.selection.job if self.job_ids is None else ",".join(self.job_ids),
            "node": self.node_id,
            "method": self.selection.method,
            "arguments": {k: _jsonable(v) for k, v in self.selection.fetch_arguments().items()},
            "intervals": self.intervals,
            "samples": self.samples,
            "wall_seconds": self.seconds,
        }


@dataclass
class DiffResult:
    """The answer of ``Profiles.diff``: per function (``table``) and in total (``total``)."""

    profiler: str
    per: str
    match: str
    alpha: float
    confidence: float
    min_share: float
    base: Side
    head: Side
    total: dict[str, Any]
    table: pa.Table
    warnings: list[str]
    _profiles: Profiles | None = field(default=None, repr=False, compare=False)
    _page: Any = field(default=None, repr=False, compare=False)

    @property
    def tested(self) -> bool:
        """Whether both sides had enough samples for a significance test."""
        return self.base.samples >= MIN_SAMPLES and self.head.samples >= MIN_SAMPLES

    def gate(self, total: float | None = None, function: float | None = None) -> list[str]:
        """Reasons to fail a regression gate, one line each; empty when it passes (``verdict`` says why).

        ``total``: the total own time per step grew by more than this fraction of the base (0.10 = 10%).
        ``function``: a tested function's own time (one holding ``min_share`` of a side's total) grew by more
        than this fraction of its base time, or it is new. "Grew by more" is a one-sided Welch test of
        H0 "the growth is at most the threshold", in a fixed sequence (proflake.query.gate): the total at
        the full ``alpha``; the functions, Holm-corrected among themselves, only behind it (when the total
        is not gated, or failed). So ``gate(t, f)`` fails exactly when ``gate(t)`` does, and a change at or
        below every threshold fails it at most ``alpha`` of the time, whatever the noise.
        """
        return [line for failed, line in gate_tests(self, total, function) if failed]

    def verdict(self, total: float | None = None, function: float | None = None) -> list[str]:
        """Every test the gate made, failed or not, one line each with its p-value, threshold and
        samples; and a line for what it did not test and why."""
        return [line for _, line in gate_tests(self, total, function)]

    def to_dict(
        self, fail_on_total: float | None = None, fail_on_function: float | None = None
    ) -> dict[str, Any]:
        """Everything as plain JSON-able values: sides, method, total, functions, gate, warnings."""
        reasons = self.gate(fail_on_total, fail_on_function)
        verdict = self.verdict(fail_on_total, fail_on_function)
        return {
            "profiler": self.profiler,
            "per": self.per,
            "match": self.match,
            "test": {
                "method": "welch_t",
                "alpha": self.alpha,
                "confidence": self.confidence,
                "correction": "holm",
                "gate_procedure": "fixed_sequence",
                "min_share": self.min_share,
            },
            "base": self.base.to_dict(),
            "head": self.head.to_dict(),
            "total": {k: _jsonable(v) for k, v in self.total.items()},
            "gate": {
                "fail_on_total": fail_on_total,
                "fail_on_function": fail_on_function,
                "failed": bool(reasons),
                "reasons": reasons,
                "verdict": verdict,
            },
            "warnings": list(self.warnings),
            "functions": [{k: _jsonable(v) for k, v in row.items()} for row in self.table.to_pylist()],
        }


    def report(
        self,
        *,
        fail_on_total: float | None = None,
        fail_on_function: float | None = None,
        flame_budget: int = 2000,
        top: int | None = None,
    ):  # -> proflake.render.report.Report
        """The diff page: this table (its first ``top`` rows) and a differential flame graph in one
        self-contained HTML file (docs/diff.md, "The diff page"); ``.write(path)`` saves it. The gate's
        thresholds, when given, put its verdict on the page. Each side's call tree is read from the store."""
        if self._profiles is None:
            raise UsageError("this DiffResult was not made by Profiles.diff, so it has no profiles to draw")
        # Built by proflake.pages, above the query and render layers: the one upward import allowed.
        from proflake.pages import build_diff_report

        return build_diff_report(
            self, fail_on_total=fail_on_total, fail_on_function=fail_on_function, flame_budget=flame_budget, top=top
        )

    def _repr_html_(self) -> str:
        """A notebook shows the diff page (made once, then kept)."""
        if self._page is None:
            self._page = self.report()
        return self._page._repr_html_()


def _jsonable(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


# -- computing a diff ----------------------------------------------------------------------------------
def diff(
    profiles: Profiles,
    base: Selection | Mapping[str, Any] | str | None,
    head: Selection | Mapping[str, Any] | str | None,
    *,
    profiler: str | None = None,
    per: str = "step",
    match: str = "name",
    alpha: float = 0.05,
    confidence: float = 0.95,
    min_share: float = 0.01,
) -> DiffResult:
    """Compare two selections function by function; see the module docstring and docs/diff.md."""
    if per not in PER:
        raise UnknownNameError("normalisation", per, PER)
    if match not in MATCH:
        raise UnknownNameError("function matching", match, MATCH)
    if not 0 < alpha < 1 or not 0 < confidence < 1:
        raise UsageError(f"alpha ({alpha}) and confidence ({confidence}) must lie between 0 and 1")
    if not 0 <= min_share < 1:
        raise UsageError(f"min_share ({min_share}) must be a fraction between 0 and 1")
    sides = [Selection.of(base), Selection.of(head)]
    profiler = _common_profiler(profiles, sides, profiler)
    params = {"by_line": match == "line", "per_second": per == "second"}
    parts = [_side(profiles, s, profiler, params) for s in sides]
    (base_side, base_rows), (head_side, head_rows) = parts
    warnings = _sample_warnings(base_side, head_side)
    total, table = compare(
        base_rows, head_rows, base_side.samples, head_side.samples, alpha, confidence, min_share
    )
    return DiffResult(
        profiler, per, match, alpha, confidence, min_share, base_side, head_side, total, table, warnings, profiles
    )


def _common_profiler(profiles: Profiles, sides: list[Selection], profiler: str | None) -> str:
    """The profiler both sides are compared on: the one asked for, else cProfile when both have it."""
    chosen = [
        profiles.scope(job=s.job, all_jobs=False, node=s.node, profiler=profiler).profiler or DEFAULT_PROFILER
        for s in sides
    ]
    if chosen[0] != chosen[1]:
        raise UsageError(
            f"the base's data is {chosen[0]} and the head's {chosen[1]}: pass --profiler (profiler= in Python) "
            "to compare one profiler's data on both sides"
        )
    return chosen[0]


def _side(
    profiles: Profiles, selection: Selection, profiler: str, params: dict[str, Any]
) -> tuple[Side, pa.Table]:
    scope, selected = profiles.select(
        selection.method,
        job=selection.job,
        node=selection.node,
        profiler=profiler,
        **selection.fetch_arguments(),
    )
    samples = _sample_count(selected)
    # one interval per sample: each function key has one row per sample, summed in one pass (see the SQL)
    values = {**scope.params(), **params, "simple": samples == selected.num_rows}
    rows = profiles.aggregate(f"diff_samples_{profiler}", selected, values)
    seconds = float(arrowfn.call_function("sum", [selected["duration_s"]]).as_py() or 0.0) if selected.num_rows else 0.0
    side = Side(selection, scope.job_ids, scope.node_id, selected.num_rows, samples, seconds)
    return side, rows


def _sample_count(selected: pa.Table) -> int:
    """The side's samples: its distinct node steps (node_id, start_mode, start_step).

    A set of the intervals' keys (a few ms for 10^4 intervals): ``Table.group_by`` would load Acero and
    pyarrow.dataset, whose imports cost more than the count."""
    return len(set(zip(*(selected[name].to_pylist() for name in ("node_id", "start_mode", "start_step")))))


def _sample_warnings(base: Side, head: Side) -> list[str]:
    out = []
    for name, side in (("base", base), ("head", head)):
        if side.samples == 0:
            out.append(f"the {name} selected no intervals: {side.selection.describe()}")
        elif side.samples < MIN_SAMPLES:
            out.append(
                f"the {name} has {side.samples} sample (one node's step): too few for a significance test, "
                "so nothing is called significant and no gate can fail; select a range of steps or several nodes"
            )
        elif side.samples < FEW_SAMPLES:
            out.append(
                f"the {name} has only {side.samples} samples (node steps): the test can tell only large changes "
                f"from noise; {FEW_SAMPLES} or more are better"
            )
    return out
