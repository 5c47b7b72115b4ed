"""The pages and exports of a result: the query layer reads what they show (proflake.query.page_data), the
render layer draws it (proflake.render). This module, above both, is the only one that joins them.

    >>> from proflake import Profiles, build_report
    >>> result = Profiles("./proflake-store").by_job_phase()
    >>> build_report(result).write("report.html")          # the same as result.report().write(...)
    >>> export(result, "speedscope")                         # the bytes of a speedscope file

The results' own methods (``FetchResult.report()``, ``DiffResult.report()``, ``TrendResult.report()``)
call these functions through a late import: the one import from the query layer up to this module
(tests/test_architecture.py allows exactly those).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from proflake.query import page_data
from proflake.render import stacks as _stacks
from proflake.render.exports import renderer
from proflake.render.report import data as _report
from proflake.render.report import diff as _diff
from proflake.render.report import trend as _trend
from proflake.render.report.page import Report

if TYPE_CHECKING:
    from proflake.query.diff import DiffResult
    from proflake.query.result import FetchResult
    from proflake.query.trend import TrendResult

__all__ = ["build_diff_report", "build_report", "build_trend_report", "call_tree", "export", "report_data"]


def report_data(result: FetchResult, *, flame_budget: int = _report.FLAME_BUDGET, top: int = _report.TOP) -> dict[str, Any]:
    """Everything the report page shows about ``result``'s selection, as JSON-ready values."""
    return _report.report_data(page_data.report_inputs(result), flame_budget=flame_budget, top=top)


def build_report(result: FetchResult, *, flame_budget: int = _report.FLAME_BUDGET) -> Report:
    """The report of ``result``'s selection (its intervals; grouping and --top do not matter)."""
    return Report(report_data(result, flame_budget=flame_budget))


def call_tree(result: FetchResult, budget: int | None = 2000, floor: float = 1e-6) -> _stacks.CallTree:
    """The call tree of ``result``'s selection, as the report, the diff page and the exports draw it
    (proflake.render.stacks.call_tree over its roll-ups)."""
    return _stacks.call_tree(page_data.stack_data(result), budget, floor)


def export(result: FetchResult, fmt: str) -> bytes:
    """The bytes of ``result``'s selection as a ``fmt`` file (speedscope, collapsed or prof;
    proflake.render.exports)."""
    writer = renderer(fmt)
    writer.check(result.profiler, tuple(result.group_by))
    inputs = page_data.export_inputs(result, stacks=writer.needs == "stacks", stats=writer.needs == "stats")
    return writer.render(inputs)


def build_diff_report(
    result: DiffResult,
    *,
    fail_on_total: float | None = None,
    fail_on_function: float | None = None,
    flame_budget: int = _report.FLAME_BUDGET,
    top: int | None = None,
) -> Report:
    """The diff page of ``result`` (docs/diff.md, "The diff page"); each side's call tree is read from the store."""
    return _diff.build_diff_report(
        result, page_data.diff_stacks(result), fail_on_total=fail_on_total, fail_on_function=fail_on_function,
        flame_budget=flame_budget, top=top,
    )


def build_trend_report(
    result: TrendResult,
    *,
    top: int = _trend.TOP,
    max_diffs: int = _trend.MAX_DIFFS,
    diff_rows: int = _trend.DIFF_ROWS,
    fail_on: float | None = None,
) -> Report:
    """The trend page of ``result`` (docs/trend.md, "The page"), with the diffs of its ``max_diffs`` largest
    changes read from the store."""
    _trend.check_options(top, max_diffs, diff_rows)
    diffs = page_data.trend_diffs(result, max_diffs)
    return _trend.build_trend_report(
        result, diffs, top=top, max_diffs=max_diffs, diff_rows=diff_rows, fail_on=fail_on,
        store=page_data.store_location(result),
    )
