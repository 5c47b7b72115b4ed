"""What the pages and the exports show, read from the store as plain data: the only place their SQL runs.

The render layer (proflake.render) draws these values and runs no query; ``proflake.pages`` joins the two.

    StackData     a whole selection's roll-ups, the call trees and the exports are built from
    ExportInputs  what an export of one selection writes (its stacks, or its pstats.Stats)
    ReportInputs  everything the report of one selection shows (its roll-ups, steps, phases, scope, quarantine)
    diff_stacks   each side's StackData of a DiffResult (the diff page's flame graph)
    trend_diffs   the diffs of the job pairs either side of a TrendResult's largest changes (the trend page)
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from proflake import sql as queries
from proflake.errors import UsageError
from proflake.formats import family, is_caller_graph

if TYPE_CHECKING:
    import pstats

    from proflake.query.diff import DiffResult, Side
    from proflake.query.result import FetchResult
    from proflake.query.trend import TrendResult

__all__ = [
    "ExportInputs", "ReportInputs", "StackData", "diff_stacks", "export_inputs", "report_inputs", "stack_data", "trend_diffs"
]


@dataclass(frozen=True)
class StackData:
    """A selection's roll-ups as a whole (no group keys, every function, sorted by cumtime): ``functions``
    (rollup_cprofile or rollup_pyinstrument), and what its call tree is made of: cProfile's ``callers``
    (rollup_callers), pyinstrument's merged ``call_paths`` (queries/call_tree.sql)."""

    profiler: str
    functions: pa.Table
    callers: pa.Table | None = None  # cProfile only
    call_paths: pa.Table | None = None  # pyinstrument only


@dataclass(frozen=True)
class ReportInputs:
    """Everything the report of one selection shows, as read from the store.

    ``arguments`` are the selection's SQL parameters (the title and the page's arguments come from them);
    ``per_phase`` and ``per_node`` the roll-up grouped by job phase and by node (``per_node`` None under
    two nodes); ``steps`` and ``phases`` queries/report_steps.sql and report_phases.sql; ``in_scope``
    queries/scope.sql (the intervals per profiler of the scope); ``quarantine`` the open quarantine entries
    below the selected jobs' folders, newest failure first."""

    method: str
    profiler: str
    jobs: list[str]  # the scope's jobs, or those the intervals come from
    scope_jobs: list[str] | None
    node: str | None
    arguments: dict[str, Any]
    intervals: pa.Table
    stacks: StackData
    per_phase: pa.Table
    per_node: pa.Table | None
    steps: pa.Table
    phases: pa.Table
    in_scope: pa.Table
    quarantine: list[dict[str, Any]]


@dataclass(frozen=True)
class ExportInputs:
    """What an export of one selection writes: its ``stacks`` (speedscope, collapsed) or its ``stats``
    (a .prof file), and what names it: ``jobs``, ``node``, ``method`` and ``arguments`` as in ReportInputs,
    ``intervals`` the number selected, ``group_by`` the fetch's grouping."""

    profiler: str
    jobs: list[str]
    node: str | None
    method: str
    arguments: dict[str, Any]
    intervals: int
    group_by: tuple[str, ...]
    stacks: StackData | None = None
    stats: pstats.Stats | None = None
    time_unit: str = "seconds"  # FetchResult.time_unit: 'samples' when the times are sample counts


def export_inputs(result: FetchResult, *, stacks: bool = True, stats: bool = False) -> ExportInputs:
    """What an export of ``result`` writes: with ``stacks`` its StackData, with ``stats`` its pstats.Stats
    (``FetchResult.to_pstats``: cProfile, one aggregate)."""
    return ExportInputs(
        profiler=result.profiler,
        jobs=_jobs(result),
        node=result.scope.node_id,
        method=result.method,
        arguments=dict(result._selection_params),
        intervals=result.intervals.num_rows,
        group_by=tuple(result.group_by),
        stacks=stack_data(result) if stacks else None,
        stats=result.to_pstats() if stats else None,
        time_unit=result.time_unit,
    )


def _jobs(result: FetchResult) -> list[str]:
    """The jobs a selection is titled by: its scope's, or those its intervals come from."""
    return result.scope.job_ids or sorted(set(result.intervals["job_id"].to_pylist()))


def unrolled(result: FetchResult) -> dict[str, Any]:
    """The roll-up parameters of ``result``'s selection with every group key and --top dropped."""
    return {**result._selection_params, "by_node": False, "by_modes": False, "by_job_phase": False, "top": None}


def _functions_rollup(profiler: str) -> str:
    return f"rollup_{family(profiler).profiler}"


def stack_data(result: FetchResult, *, reuse: bool = False) -> StackData:
    """``result``'s selection rolled up as a whole. With ``reuse``, the fetch's own answers (its functions,
    and its caller edges if it has them) are taken when they are the whole selection's: no group keys, no
    --top, sorted by cumtime (the diff page fetches each side with its caller edges aside)."""
    params = {**unrolled(result), "sort": "cumtime"}
    whole = reuse and not result.group_by and result._selection_params.get("top") is None and result._selection_params.get("sort") == "cumtime"

    def rollup(name: str) -> pa.Table:
        return result._profiles._rollup(result.intervals, name, params)

    functions = result.table if whole else rollup(_functions_rollup(result.profiler))
    if is_caller_graph(result.profiler):
        callers = result._callers if whole and result._callers is not None else rollup("rollup_callers")
        return StackData(result.profiler, functions, callers=callers)
    return StackData(result.profiler, functions, call_paths=rollup("call_tree"))


def report_inputs(result: FetchResult) -> ReportInputs:
    """What the report of ``result``'s selection shows (its intervals; grouping and --top do not matter)."""
    profiles = result._profiles
    ids = {"interval_ids": result.intervals["interval_id"].to_pylist()}
    name = _functions_rollup(result.profiler)
    params = {**unrolled(result), "sort": "cumtime"}
    nodes = set(result.intervals["node_id"].to_pylist())
    scope = result.scope
    con = profiles.connection()
    return ReportInputs(
        method=result.method,
        profiler=result.profiler,
        jobs=_jobs(result),
        scope_jobs=scope.job_ids,
        node=scope.node_id,
        arguments=dict(result._selection_params),
        intervals=result.intervals,
        stacks=stack_data(result),
        per_phase=profiles._rollup(result.intervals, name, {**params, "by_job_phase": True}),
        per_node=profiles._rollup(result.intervals, name, {**params, "by_node": True}) if len(nodes) >= 2 else None,
        steps=queries.run_named(con, "report_steps", ids),
        phases=queries.run_named(con, "report_phases", ids),
        in_scope=queries.run_named(
            con, "scope", {"job_ids": scope.job_ids, "node_id": scope.node_id, "source_prefix": scope.source_prefix}
        ),
        quarantine=_quarantine(result),
    )


def _quarantine(result: FetchResult) -> list[dict[str, Any]]:
    """The open quarantine entries below the selected jobs' folders (a source URI's part before /framework/)."""
    uris = result.intervals["source_uri"].to_pylist()
    bases = sorted({uri.split("/framework/")[0] + "/framework/" for uri in uris if "/framework/" in uri})
    if not bases:
        return []
    errors = result._profiles.errors().to_pylist()
    return [e for e in errors if any(e["source_uri"].startswith(b) for b in bases)]


def diff_stacks(result: DiffResult) -> list[StackData | None]:
    """The base's and the head's StackData, each side fetched again as the diff selected it (None for a
    side that selected nothing). A cProfile fetch sums its caller edges beside its functions, on a second
    cursor, and the roll-ups reuse both."""
    return [_side_stacks(result, side) for side in (result.base, result.head)]


def _side_stacks(result: DiffResult, side: Side) -> StackData | None:
    if not side.intervals:
        return None
    if result._profiles is None:
        raise UsageError("this DiffResult was not made by Profiles.diff, so it has no profiles to draw")
    selection = side.selection
    fetched = result._profiles.fetch(
        selection.method,
        job=selection.job,
        node=selection.node,
        profiler=result.profiler,
        callers=is_caller_graph(result.profiler),
        **selection.fetch_arguments(),
    )
    return stack_data(fetched, reuse=True)


def largest_changes(result: TrendResult, max_diffs: int) -> list[int]:
    """The indexes of ``result.changes``' ``max_diffs`` largest changes, largest first (an infinite change,
    a function new or gone, first of all; ties in the changes' order)."""
    def size(k: int) -> float:
        change = result.changes[k]["change"]
        return abs(change) if math.isfinite(change) else math.inf

    return sorted(range(len(result.changes)), key=lambda k: (-size(k), k))[: max(max_diffs, 0)]


def trend_diffs(result: TrendResult, max_diffs: int) -> dict[int, DiffResult]:
    """For each of the ``max_diffs`` largest changes (by index into ``result.changes``, largest first), the
    ``Profiles.diff`` of the last job before it and the first after it, each job pair diffed once
    (``match="line"``, so the functions are named as the trend names them)."""
    profiles = result._profiles
    pairs: dict[tuple[str, str], DiffResult] = {}
    out: dict[int, DiffResult] = {}
    for k in largest_changes(result, max_diffs):
        at = result.changes[k]["job_index"] - 1  # the first job after the change, 0-based
        pair = (result.jobs[at - 1], result.jobs[at])
        if pair not in pairs:
            if profiles is None:
                raise UsageError("this TrendResult was not made by Profiles.trend, so it has no profiles to diff")
            base, head = pair
            pairs[pair] = profiles.diff(
                {"job": base, "node": result.node}, {"job": head, "node": result.node}, profiler=result.profiler,
                match="line", alpha=result.alpha, min_share=result.min_share,
            )
        out[k] = pairs[pair]
    return out


def store_location(result: TrendResult) -> str | None:
    """The store a TrendResult was read from, when it is not the default one (its ``proflake diff``
    commands then name it)."""
    from proflake.store.location import default_store_location

    location = getattr(getattr(result._profiles, "store", None), "location", None)
    return None if location is None or location == default_store_location() else str(location)
