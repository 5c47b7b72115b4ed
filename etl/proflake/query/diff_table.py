"""The per-function table of a diff: two sides' summaries (diff_samples_*.sql) aligned by function and
tested, own time with Welch's t-test and a confidence interval, Holm-corrected over the tested family;
and the short report the command prints."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np
import pyarrow as pa

from proflake.numbers import count, p_value, percent, ranked, seconds, three_digits
from proflake.query import stats


def summarise(samples: Mapping[str, Any], total: Any = None) -> pa.Table:
    """What diff_samples_*.sql returns, from samples in memory: ``samples`` maps a function to its own time
    in each sample (one value per sample, 0 where absent), ``total`` is each sample's total (default: the
    sum over the functions). For tests and for measuring the test's error rates without a store."""
    arrays = {k: np.asarray(v, dtype=float) for k, v in samples.items()}
    n = len(next(iter(arrays.values()))) if arrays else len(total if total is not None else [])
    totals = np.asarray(total, dtype=float) if total is not None else sum(arrays.values(), np.zeros(n))
    rows = []
    for key, values in [(None, totals), *arrays.items()]:
        mean = float(values.mean()) if n else 0.0
        m2 = float(((values - mean) ** 2).sum())
        rows.append(
            {
                "function": key,
                "filename": None if key is None else "",
                "lineno": None,
                "function_name": key,
                "samples": n,
                "present": int((values != 0).sum()) if key is not None else n,
                "self_mean": mean,
                "self_m2": m2,
                "cum_mean": mean,
                "cum_m2": m2,
                "calls_mean": 0.0,
                "calls_m2": 0.0,
                "seconds": 0.0,
            }
        )
    return pa.Table.from_pylist(rows)


def compare(
    base: pa.Table,
    head: pa.Table,
    n_base: int,
    n_head: int,
    alpha: float = 0.05,
    confidence: float = 0.95,
    min_share: float = 0.01,
) -> tuple[dict[str, Any], pa.Table]:
    """Align the two sides' per-function summaries (diff_samples_*.sql, or ``summarise``) by key and test
    each change of own time (Welch), Holm-corrected over the total and the functions holding ``min_share``."""
    base_rows = {row["function"]: row for row in base.to_pylist()}
    head_rows = {row["function"]: row for row in head.to_pylist()}
    empty = {
        "self_mean": 0.0,
        "self_m2": 0.0,
        "cum_mean": 0.0,
        "cum_m2": 0.0,
        "calls_mean": 0.0,
        "calls_m2": 0.0,
        "present": 0,
    }
    base_total = base_rows.pop(None, None) or empty
    head_total = head_rows.pop(None, None) or empty
    keys = sorted(set(base_rows) | set(head_rows))

    def column(rows: dict, name: str, total: Mapping[str, Any]) -> np.ndarray:
        values = [total[name]] + [rows.get(k, empty)[name] for k in keys]  # index 0: the total
        return np.array(values, dtype=float)

    def variance(m2: np.ndarray, n: int) -> np.ndarray:
        return m2 / (n - 1) if n >= 2 else np.full_like(m2, np.nan)

    tests = {}
    # own time: the test and its interval; inclusive time: the test only; calls: the means only
    for metric, interval in (("self", confidence), ("cum", None)):
        b_mean, h_mean = (
            column(base_rows, f"{metric}_mean", base_total),
            column(head_rows, f"{metric}_mean", head_total),
        )
        b_var = variance(column(base_rows, f"{metric}_m2", base_total), n_base)
        h_var = variance(column(head_rows, f"{metric}_m2", head_total), n_head)
        tests[metric] = (b_mean, h_mean, stats.welch(b_mean, b_var, n_base, h_mean, h_var, n_head, interval))
    b_self, h_self, welch = tests["self"]
    # The family the gate may act on: the total, and every function holding min_share of either side's total.
    scale = max(b_self[0], h_self[0])
    in_family = (
        np.maximum(b_self, h_self) >= min_share * scale if scale > 0 else np.zeros_like(b_self, dtype=bool)
    )
    in_family[0] = True
    p_family = np.where(in_family, welch["p_value"], np.nan)
    adjusted = stats.holm(p_family)
    significant = adjusted < alpha  # NaN (untested) compares False

    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(b_self > 0, welch["difference"] / np.where(b_self > 0, b_self, 1.0), np.nan)
        total_change = welch["difference"][0]
        share = welch["difference"] / total_change if total_change != 0 else np.full_like(b_self, np.nan)
    b_cum, h_cum, welch_cum = tests["cum"]
    b_calls, h_calls = (
        column(base_rows, "calls_mean", base_total),
        column(head_rows, "calls_mean", head_total),
    )
    b_present = column(base_rows, "present", base_total)
    h_present = column(head_rows, "present", head_total)

    def status(i: int) -> str:
        if i and b_present[i] == 0:
            return "added"
        if i and h_present[i] == 0:
            return "removed"
        if np.isnan(welch["p_value"][i]):
            return "untested"
        if not in_family[i]:
            return "minor"
        if significant[i]:
            return "slower" if welch["difference"][i] > 0 else "faster"
        return "noise"

    def num(values: np.ndarray, i: int) -> float | None:
        v = float(values[i])
        return v if math.isfinite(v) else None

    total = {
        "base": float(b_self[0]),
        "head": float(h_self[0]),
        "change": float(welch["difference"][0]),
        "change_ratio": num(ratio, 0),
        "ci_low": num(welch["ci_low"], 0),
        "ci_high": num(welch["ci_high"], 0),
        "se": num(welch["se"], 0),
        "df": num(welch["df"], 0),
        "p_value": num(welch["p_value"], 0),
        "p_adjusted": num(adjusted, 0),
        "significant": bool(significant[0]),
        "status": status(0),
    }
    rows = []
    for i, key in enumerate(keys, start=1):
        info = base_rows.get(key) or head_rows[key]
        rows.append(
            {
                "function": key,
                "filename": info["filename"],
                "lineno": info["lineno"],
                "function_name": info["function_name"],
                "status": status(i),
                "base_self": float(b_self[i]),
                "head_self": float(h_self[i]),
                "self_change": float(welch["difference"][i]),
                "self_change_ratio": num(ratio, i),
                "self_ci_low": num(welch["ci_low"], i),
                "self_ci_high": num(welch["ci_high"], i),
                "self_se": num(welch["se"], i),
                "self_df": num(welch["df"], i),
                "p_value": num(welch["p_value"], i),
                "p_adjusted": num(adjusted, i),
                "significant": bool(significant[i])
                if in_family[i] and not np.isnan(welch["p_value"][i])
                else None,
                "share_of_change": num(share, i),
                "base_cum": float(b_cum[i]),
                "head_cum": float(h_cum[i]),
                "cum_change": float(welch_cum["difference"][i]),
                "cum_p_value": num(welch_cum["p_value"], i),
                "base_calls": float(b_calls[i]),
                "head_calls": float(h_calls[i]),
                "base_present": int(b_present[i]),
                "head_present": int(h_present[i]),
            }
        )
    rows.sort(key=lambda r: (-ranked(abs(r["self_change"])), r["function"]))
    return total, pa.Table.from_pylist(rows, schema=DIFF_SCHEMA)


DIFF_SCHEMA = pa.schema(
    [
        ("function", pa.string()),
        ("filename", pa.string()),
        ("lineno", pa.int64()),
        ("function_name", pa.string()),
        ("status", pa.string()),
        ("base_self", pa.float64()),
        ("head_self", pa.float64()),
        ("self_change", pa.float64()),
        ("self_change_ratio", pa.float64()),
        ("self_ci_low", pa.float64()),
        ("self_ci_high", pa.float64()),
        ("self_se", pa.float64()),
        ("self_df", pa.float64()),
        ("p_value", pa.float64()),
        ("p_adjusted", pa.float64()),
        ("significant", pa.bool_()),
        ("share_of_change", pa.float64()),
        ("base_cum", pa.float64()),
        ("head_cum", pa.float64()),
        ("cum_change", pa.float64()),
        ("cum_p_value", pa.float64()),
        ("base_calls", pa.float64()),
        ("head_calls", pa.float64()),
        ("base_present", pa.int64()),
        ("head_present", pa.int64()),
    ]
)


def _pct(ratio: float | None, sign: bool = True) -> str:
    if ratio is None or not math.isfinite(ratio):
        return "new"
    return percent(ratio, sign=sign)


def _pct_ci(row: Mapping[str, Any]) -> str:
    base = row["base"]
    if not base or row["ci_low"] is None:
        return "no CI"
    return f"CI {percent(row['ci_low'] / base)}..{percent(row['ci_high'] / base)}"


def per_sample(value: float, per: str) -> str:
    """An own time per sample: ``17.8 ms/step``, or per wall second ``0.412 s/s``."""
    if per == "step":
        return f"{seconds(value)}/step"
    return f"{three_digits(value)} s/s"


def summary_lines(result: Any) -> list[str]:
    """The short report: what each side selected, and the total's change with its test."""
    lines = []
    for name, side in (("base", result.base), ("head", result.head)):
        lines.append(
            f"{name}: {side.selection.describe()}: {side.intervals} interval(s), {side.samples} sample(s) (node steps)"
        )
    t = result.total
    change = _pct(t["change_ratio"]) if t["change_ratio"] is not None else f"{'+' if t['change'] > 0 else ''}{seconds(t['change'])}"
    test = f"{_pct_ci(t)}, p={p_value(t['p_value'])}" if t["p_value"] is not None else "not tested"
    lines.append(
        f"{result.profiler} total own time: {per_sample(t['base'], result.per)} -> {per_sample(t['head'], result.per)} "
        f"({change}, {test}): {t['status']}"
    )
    counts: dict[str, int] = {}
    for status in result.table["status"].to_pylist():
        counts[status] = counts.get(status, 0) + 1
    lines.append("functions: " + ", ".join(f"{count(n)} {s}" for s, n in sorted(counts.items())))
    return lines + [f"warning: {w}" for w in result.warnings]


TABLE_COLUMNS = (
    "function",
    "status",
    "base_self",
    "head_self",
    "self_change_ratio",
    "self_ci_low",
    "self_ci_high",
    "p_adjusted",
    "share_of_change",
    "base_calls",
    "head_calls",
)
