"""The regression gate of ``proflake diff --fail-on`` (docs/diff.md, "The gate"): a fixed sequence.

The total is the primary hypothesis, tested at the full alpha; the functions are tested behind it,
Holm-corrected among themselves at alpha: when the total is not gated, or when it failed (then they
name the functions that explain it). Each hypothesis is one-sided Welch, H0 "the growth is at most the
threshold". A fixed sequence keeps the family-wise error at alpha without spending any of it on the
functions before the total (Westfall & Krishen 2001; Dmitrienko, Tamhane & Bretz, *Multiple Testing
Problems in Pharmaceutical Statistics*, 2010, ch. 2): with Holm over the total and the functions
together, the total's own test was diluted — a +38.9% total (p=0.0041) passed a 10% gate.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from proflake.numbers import p_value
from proflake.query import stats
from proflake.query.diff_table import _pct, _pct_ci, per_sample

if TYPE_CHECKING:
    from proflake.query.diff import DiffResult

MIN_SAMPLES = 2  # per side, for any test; fewer than FEW_SAMPLES gets a warning about power


def gate_tests(result: DiffResult, total: float | None, function: float | None) -> list[tuple[bool, str]]:
    """(failed, line) for every test the gate makes on ``result`` and for what it leaves untested."""

    samples = f"{result.base.samples} vs {result.head.samples} samples"
    alpha = result.alpha
    lines: list[tuple[bool, str]] = []
    total_failed = False
    t = result.total
    if total is not None:
        label = f"total {_pct(t['change_ratio'])} ({per_sample(t['base'], result.per)} -> {per_sample(t['head'], result.per)}, {_pct_ci(t)})"
        if t["se"] is None:
            lines.append((False, f"{label}: not tested ({samples}; at least {MIN_SAMPLES} a side are needed)"))
        else:
            (p,) = stats.exceeds(
                np.array([t["change"]]), np.array([total * t["base"]]), np.array([t["se"]]), np.array([t["df"]])
            )
            total_failed = bool(p < alpha)
            verdict = f"over +{total * 100:g}%" if total_failed else f"not shown over +{total * 100:g}%"
            relation = "<" if total_failed else ">="
            lines.append((total_failed, f"{label}: {verdict} (one-sided Welch, p={p_value(p)} {relation} alpha {alpha:g}, {samples})"))
    if function is None:
        return lines
    if total is not None and not total_failed:
        lines.append((False, (
            "functions not tested: they are tested behind the total, which did not fail "
            "(a fixed sequence; --fail-on function:PERCENT gates on the functions alone)"
        )))
        return lines
    rows = [r for r in result.table.to_pylist() if r["status"] not in ("minor", "untested") and r["self_se"] is not None]
    if not rows:
        lines.append((False, f"no function tested ({samples}; each needs --min-share of a side's total)"))
        return lines
    p_values = stats.exceeds(
        np.array([r["self_change"] for r in rows], dtype=float),
        np.array([function * r["base_self"] for r in rows], dtype=float),
        np.array([r["self_se"] for r in rows], dtype=float),
        np.array([r["self_df"] for r in rows], dtype=float),
    )
    adjusted = stats.holm(p_values)
    family = f"one-sided Welch, Holm over {len(rows)} functions"
    significant = [(row, p_adj) for row, p_adj in zip(rows, adjusted) if p_adj < alpha]
    for row, p_adj in significant:
        ci = {"base": row["base_self"], "ci_low": row["self_ci_low"], "ci_high": row["self_ci_high"]}
        what = "new" if row["base_self"] == 0 else _pct(row["self_change_ratio"])
        lines.append((True, (
            f"{row['function']} {what} ({per_sample(row['base_self'], result.per)} -> {per_sample(row['head_self'], result.per)}, {_pct_ci(ci)}): "
            f"over +{function * 100:g}% ({family}, p={p_value(p_adj)} < alpha {alpha:g}, {samples})"
        )))
    if not significant:
        lines.append((False, (
            f"no function shown over +{function * 100:g}% ({family}, smallest p={p_value(float(np.nanmin(adjusted)))} "
            f">= alpha {alpha:g}, {samples})"
        )))
    return lines
