"""The trend page: a TrendResult's series charted per function, its change points marked, and for each
change the diff of the jobs either side of it, in one self-contained HTML file.

    >>> t = Profiles("./proflake-store").trend(job_glob="nightly-*")
    >>> t.report().write("trend.html")          # or, in a notebook, just ``t``

Every number comes from the TrendResult (the series, the changes) or from ``Profiles.diff`` of the last
job before a change and the first after it (``match="line"``, so the functions are named as the trend
names them; the query layer runs them, proflake.query.page_data.trend_diffs: nothing here runs SQL). The
diffs of the ``max_diffs`` largest changes are embedded (each job pair once); the page names the
``proflake diff`` command that draws the full diff page of any change. Texts a person reads are
formatted here with proflake.numbers, as the terminal formats them; the raw values sit beside them.
"""

from __future__ import annotations

import datetime as dt
import math
import shlex
from typing import TYPE_CHECKING, Any

from proflake.errors import UsageError
from proflake.numbers import count, p_value, percent, ranked, seconds
from proflake.render.report.diff import _meta
from proflake.render.report.page import Report

if TYPE_CHECKING:
    from collections.abc import Mapping

    from proflake.query.diff import DiffResult
    from proflake.query.trend import TrendResult

TOP = 10  # functions charted beside the total
MAX_DIFFS = 20  # changes whose diff is embedded, the largest first
DIFF_ROWS = 10  # functions in each embedded diff table (and the changed one, when it is not among them)


def check_options(top: int, max_diffs: int, diff_rows: int = DIFF_ROWS) -> None:
    """Refuse counts the page cannot show (before any diff is run for it)."""
    if top < 0 or max_diffs < 0 or diff_rows < 1:
        raise UsageError(f"top ({top}) and max_diffs ({max_diffs}) must be 0 or more, diff_rows ({diff_rows}) at least 1")


def trend_report_data(
    result: TrendResult, diffs: Mapping[int, DiffResult], *, top: int = TOP, max_diffs: int = MAX_DIFFS,
    diff_rows: int = DIFF_ROWS, fail_on: float | None = None, store: str | None = None,
) -> dict[str, Any]:
    """What the trend page shows: ``jobs`` in start order, ``charts`` (the total first, then the functions
    that changed, then the largest, ``top`` functions in all), ``changes`` (the TrendResult's, with texts),
    ``diffs`` (per job pair either side of one of the ``max_diffs`` largest changes: the diff's total and
    its first ``diff_rows`` functions), the ``proflake diff`` command of every change, and with ``fail_on``
    the gate's verdict on the newest job (``TrendResult.to_dict``'s ``gate``). ``diffs`` are the diffs of
    the ``max_diffs`` largest changes by index into ``result.changes``, largest first
    (proflake.query.page_data.trend_diffs); ``store`` the store the commands name (None: the default one)."""
    check_options(top, max_diffs, diff_rows)
    rows = result.series.to_pylist()
    index = {job: i for i, job in enumerate(result.jobs)}
    n = len(result.jobs)
    starts: list[str | None] = [None] * n
    steps = [0] * n
    by_function: dict[Any, dict[str, list[float]]] = {}
    for r in rows:
        i = index[r["job_id"]]
        if r["function"] is None:
            starts[i], steps[i] = _iso(r["job_start_time"]), r["steps"]
        arrays = by_function.setdefault(r["function"], {"mean": [0.0] * n, "sd": [0.0] * n})
        arrays["mean"][i] = r["own_mean_s"]
        arrays["sd"][i] = math.sqrt(max(r["own_spread_s2"] or 0.0, 0.0))
    charted = _charted(result, by_function, top)
    changes = [_change(result, c, k, store) for k, c in enumerate(result.changes)]
    embedded = _diffs(changes, diffs, diff_rows)
    charts = []
    for function in charted:
        arrays = by_function.get(function, {"mean": [0.0] * n, "sd": [0.0] * n})
        charts.append({
            "function": function,
            "label": _label(function),
            "mean": arrays["mean"],
            "sd": arrays["sd"],
            "changes": [c["id"] for c in changes if c["function"] == function],
        })
    return {
        "meta": _meta(),
        "trend": {
            "profiler": result.profiler,
            "node": result.node,
            "min_change": result.min_change,
            "min_share": result.min_share,
            "alpha": result.alpha,
            "tested": result.tested,
            "summary": result.summary_lines(),
            "warnings": list(result.warnings),
        },
        "jobs": [{"id": job, "start": starts[i], "steps": steps[i]} for i, job in enumerate(result.jobs)],
        "charts": charts,
        "changes": changes,
        "diffs": embedded,
        "diffs_embedded": sum(1 for c in changes if c["diff"] is not None),
        "max_diffs": max_diffs,
        "gate": result.to_dict(fail_on)["gate"] if fail_on is not None else None,
    }


def build_trend_report(
    result: TrendResult, diffs: Mapping[int, DiffResult], *, top: int = TOP, max_diffs: int = MAX_DIFFS,
    diff_rows: int = DIFF_ROWS, fail_on: float | None = None, store: str | None = None,
) -> Report:
    """The trend page of ``result`` and its changes' ``diffs``; ``.write(path)`` saves it, a notebook shows it
    inline."""
    data = trend_report_data(
        result, diffs, top=top, max_diffs=max_diffs, diff_rows=diff_rows, fail_on=fail_on, store=store
    )
    return Report(data, page="trend")


def diff_command(
    result: TrendResult, base: str, head: str, out: str = "diff.html", store: str | None = None
) -> list[str]:
    """The ``proflake diff`` command whose page is the full diff of ``base`` and ``head`` as embedded."""
    command = ["proflake", "diff", base, head, "--profiler", result.profiler, "--match", "line"]
    if result.node:
        command += ["--node", result.node]
    if result.alpha != 0.05:
        command += ["--alpha", f"{result.alpha:g}"]
    if result.min_share != 0.01:
        command += ["--min-share", f"{result.min_share * 100:g}"]
    if store is not None:
        command += ["--store", store]
    return [*command, "--format", "html", "-o", out]


def _charted(result: TrendResult, by_function: dict[Any, dict[str, list[float]]], top: int) -> list[Any]:
    """The total, the functions with a change (largest change first), then the largest by mean own time."""
    out: list[Any] = [None]
    for c in sorted(result.changes, key=lambda c: -ranked(abs(c["change"])) if math.isfinite(c["change"]) else -math.inf):
        if c["function"] not in out and len(out) <= top:
            out.append(c["function"])
    # (a function with no own time in any job, such as a loop that only calls others, is not charted)
    largest = sorted((k for k in by_function if k is not None and any(by_function[k]["mean"])),
                     key=lambda k: (-sum(by_function[k]["mean"]), k))
    for function in largest:
        if len(out) > top:
            break
        if function not in out:
            out.append(function)
    return out


def _change(result: TrendResult, c: dict[str, Any], k: int, store: str | None) -> dict[str, Any]:
    at = c["job_index"] - 1  # the first job after the change, 0-based
    base, head = result.jobs[at - 1], result.jobs[at]
    return {
        "id": k,
        "function": c["function"],
        "label": _label(c["function"]),
        "job_id": c["job_id"],
        "job_index": c["job_index"],
        "base_job": base,
        "before_s": c["before_s"],
        "after_s": c["after_s"],
        "change": c["change"] if math.isfinite(c["change"]) else None,
        "p_value": c["p_value"],
        "before_jobs": c["before_jobs"],
        "after_jobs": c["after_jobs"],
        "text": {
            "before": f"{seconds(c['before_s'])}/step",
            "after": f"{seconds(c['after_s'])}/step",
            "change": percent(c["change"]),
            "p": p_value(c["p_value"]),
            "jobs": f"{count(c['before_jobs'])} jobs ({count(c['before_steps'])} steps) vs "
                    f"{count(c['after_jobs'])} ({count(c['after_steps'])} steps)",
        },
        "command": shlex.join(diff_command(result, base, head, store=store)),
        "diff": None,
    }


def _diffs(changes: list[dict[str, Any]], diffs: Mapping[int, DiffResult], rows: int) -> dict[str, Any]:
    """The embedded diffs, one per job pair, in the order of ``diffs`` (the largest change first); each
    change with a diff gets its pair's key in ``diff`` (the others keep None: beyond the cap)."""
    pairs: dict[str, tuple[DiffResult, set[Any]]] = {}
    for k, diff in diffs.items():
        c = changes[k]
        key = f"{c['base_job']}\u2192{c['job_id']}"
        pairs.setdefault(key, (diff, set()))[1].add(c["function"])
        c["diff"] = key
    return {key: _compact(diff, rows, functions) for key, (diff, functions) in pairs.items()}


def _compact(diff: DiffResult, rows: int, changed: set[Any]) -> dict[str, Any]:
    """A diff's total and its ``rows`` largest changes (and the ``changed`` functions), raw and as text."""
    table = diff.table.to_pylist()
    kept = table[:rows] + [r for r in table[rows:] if r["function"] in changed]
    total = diff.total
    return {
        "base": diff.base.selection.job,
        "head": diff.head.selection.job,
        "samples": [diff.base.samples, diff.head.samples],
        "changed": sorted(f for f in changed if f is not None),
        "total": {
            "base_s": total["base"], "head_s": total["head"], "change_ratio": total["change_ratio"],
            "p_adjusted": total["p_adjusted"], "status": total["status"],
            "text": _texts(total["base"], total["head"], total["change_ratio"], total["p_adjusted"]),
        },
        "functions": [
            {
                "function": r["function"], "status": r["status"], "base_s": r["base_self"], "head_s": r["head_self"],
                "change_ratio": r["self_change_ratio"], "p_adjusted": r["p_adjusted"],
                "text": _texts(r["base_self"], r["head_self"], r["self_change_ratio"], r["p_adjusted"],
                               new=r["status"] == "added"),
            }
            for r in kept
        ],
        "more": max(0, len(table) - len(kept)),
        "warnings": list(diff.warnings),
    }


def _texts(base: float, head: float, ratio: float | None, p: float | None, new: bool = False) -> dict[str, str]:
    return {
        "base": f"{seconds(base)}/step",
        "head": f"{seconds(head)}/step",
        "change": "new" if new else percent(ratio),
        "p": p_value(p),
    }


def _label(function: str | None) -> str:
    return "(total)" if function is None else function


def _iso(value: Any) -> str | None:
    """A job's start as ISO 8601 in UTC (a timestamp, or microseconds since the epoch)."""
    if value is None:
        return None
    if isinstance(value, dt.datetime):
        moment = value if value.tzinfo else value.replace(tzinfo=dt.timezone.utc)
    else:
        moment = dt.datetime.fromtimestamp(float(value) / 1e6, dt.timezone.utc)
    return moment.astimezone(dt.timezone.utc).isoformat(timespec="seconds").replace("+00:00", "Z")
