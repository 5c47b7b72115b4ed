"""The data of an HTML report, handed to the page as one JSON document, made from what the query layer
read (proflake.query.page_data.ReportInputs); nothing here runs SQL.

Every number the page shows comes from there: the roll-ups are the fetch methods' own queries
(rollup_cprofile, rollup_pyinstrument, rollup_callers, call_tree) over the selection's intervals, the
step timeline and the phases are queries/report_steps.sql and queries/report_phases.sql. The page only
sorts, filters and draws.
"""

from __future__ import annotations

import datetime as dt
import statistics
from collections import defaultdict
from importlib.metadata import PackageNotFoundError, version
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from proflake.formats import is_caller_graph
from proflake.numbers import ranked, utc
from proflake.render.report.overview import overview
from proflake.render.stacks import Node, call_tree
from proflake.render.titles import title

if TYPE_CHECKING:
    from proflake.query.page_data import ReportInputs

TOP = 100  # functions kept per sort key (self, total, calls): the table sorts exactly within their union
TOP_PER_PHASE = 25
NODE_COMPARISON = 20  # functions compared across nodes
EDGES_PER_FUNCTION = 12  # callers and callees kept for each function of the table
FLAME_BUDGET = 2000  # flame-graph nodes; the rest is folded into "other"
SLOWEST_STEPS = 10  # node-steps marked on the step timeline, per mode


def report_data(inputs: ReportInputs, *, flame_budget: int = FLAME_BUDGET, top: int = TOP) -> dict[str, Any]:
    """Everything the report page shows about a selection (``inputs``, as the query layer read them), as
    JSON-ready values."""
    cprofile = is_caller_graph(inputs.profiler)
    functions = _top(_rows(inputs, inputs.stacks.functions), top)
    data: dict[str, Any] = {
        "meta": _meta(inputs),
        "overview": overview(inputs),
        "steps": _steps(inputs),
        "phases": inputs.phases.to_pylist(),
        "columns": _column_names(cprofile),
        "functions": functions,
        "per_phase": _per_phase(inputs),
        "per_node": _per_node(inputs, functions),
        "flame": _flame(inputs, flame_budget),
    }
    callers = inputs.stacks.callers
    data["edges"] = _edges(callers, functions) if cprofile and callers is not None else None
    return data


_COLUMNS = ["function", "filename", "lineno", "function_name", "intervals"]


def _rows(inputs: ReportInputs, table: pa.Table) -> list[dict[str, Any]]:
    """``table``'s rows with the profiler's measures under common names: own, total, calls.

    (Rows are picked in Python: building an Arrow array of indexes from a list makes pyarrow import
    pandas, a second or more on a busy host.)"""
    if is_caller_graph(inputs.profiler):
        own, total, calls, extra = "tottime", "cumtime", "total_calls", ["primitive_calls"]
    else:
        own, total, calls, extra = "self_time", "total_time", "frames", []
    groups = [c for c in ("node_id", "job_phase") if c in table.column_names]
    columns = {c: table[c].to_pylist() for c in [*_COLUMNS, *extra, *groups]}
    columns.update(own=table[own].to_pylist(), total=table[total].to_pylist(), calls=table[calls].to_pylist())
    return [dict(zip(columns, values)) for values in zip(*columns.values())]


def _top(rows: list[dict[str, Any]], top: int) -> list[dict[str, Any]]:
    """The top ``top`` rows by own time, by total time and by calls, in total-time order."""
    keep: dict[str, dict[str, Any]] = {}
    for column in ("own", "total", "calls"):
        for row in sorted(rows, key=lambda r: (-ranked(r[column]), r["function"]))[:top]:
            keep[row["function"]] = row
    chosen = sorted(keep.values(), key=lambda r: (-ranked(r["total"]), r["function"]))
    return [{k: v for k, v in r.items() if k not in ("node_id", "job_phase")} for r in chosen]


def _column_names(cprofile: bool) -> dict[str, str]:
    if cprofile:
        return {"own": "tottime", "total": "cumtime", "calls": "calls"}
    return {"own": "self time", "total": "total time", "calls": "frames"}


def _per_phase(inputs: ReportInputs) -> list[dict[str, Any]]:
    rows = _rows(inputs, inputs.per_phase)
    by_phase: dict[str, list[dict[str, Any]]] = {}
    for row in rows:  # in the roll-up's order: job phases in smdebug's order
        by_phase.setdefault(row["job_phase"], []).append(row)
    return [{"phase": phase, "functions": _top(functions, TOP_PER_PHASE)} for phase, functions in by_phase.items()]


def _per_node(inputs: ReportInputs, selection: list[dict[str, Any]]) -> dict[str, Any] | None:
    nodes = sorted(set(inputs.intervals["node_id"].to_pylist()))
    if len(nodes) < 2 or inputs.per_node is None:
        return None
    names = [r["function"] for r in selection[:NODE_COMPARISON]]  # in total-time order
    wanted = set(names)
    cells = {
        (r["function"], r["node_id"]): (r["own"], r["total"], r["calls"])
        for r in _rows(inputs, inputs.per_node)
        if r["function"] in wanted
    }
    return {
        "nodes": nodes,
        "functions": [
            {"function": f, "cells": [list(cells.get((f, n), (0.0, 0.0, 0))) for n in nodes]} for f in names
        ],
    }


def _edges(edges: pa.Table, functions: list[dict[str, Any]]) -> dict[str, Any]:
    """Callers and callees of the table's functions (cProfile caller edges, summed like pstats.add_callers)."""
    label = {
        (f, ln, n): f"{f}:{ln}({n})"
        for f, ln, n in zip(edges["filename"].to_pylist(), edges["lineno"].to_pylist(), edges["function_name"].to_pylist())
    }
    label.update(
        {
            (f, ln, n): f"{f}:{ln}({n})"
            for f, ln, n in zip(
                edges["caller_filename"].to_pylist(), edges["caller_lineno"].to_pylist(), edges["caller_function_name"].to_pylist()
            )
        }
    )
    wanted = {(f["filename"], f["lineno"], f["function_name"]): f["function"] for f in functions}
    callers: dict[str, list] = defaultdict(list)
    callees: dict[str, list] = defaultdict(list)
    for row in edges.to_pylist():
        callee = (row["filename"], row["lineno"], row["function_name"])
        caller = (row["caller_filename"], row["caller_lineno"], row["caller_function_name"])
        numbers = [row["total_calls"], row["primitive_calls"], row["tottime"], row["cumtime"]]
        if callee in wanted:
            callers[wanted[callee]].append([label[caller], *numbers])
        if caller in wanted:
            callees[wanted[caller]].append([label[callee], *numbers])
    top = EDGES_PER_FUNCTION

    def best(rows: list) -> list:
        return sorted(rows, key=lambda r: (-ranked(r[4]), r[0]))[:top]

    # In the table's order, not the edges' (DuckDB's parallel aggregation returns them in any order): the
    # same selection draws the same page, byte for byte but for its date.
    order = [f["function"] for f in functions]
    return {
        "columns": ["function", "calls", "primitive_calls", "tottime", "cumtime"],
        "callers": {f: best(callers[f]) for f in order if f in callers},
        "callees": {f: best(callees[f]) for f in order if f in callees},
    }


def _flame(inputs: ReportInputs, budget: int) -> dict[str, Any]:
    """The flame graph's frames in pre-order (the tree of render/stacks.py, as the exports draw it), with
    how the tree was made: ``exact``, ``estimated`` (the share of the time placed by estimate) and ``note``,
    the sentence the page shows beside it."""
    tree = call_tree(inputs.stacks, budget)
    out: dict[str, list] = {
        "name": [], "label": [], "file": [], "value": [], "own": [], "depth": [], "folded": [], "estimated": []
    }

    def visit(node: Node, depth: int) -> None:
        stack = [(node, depth)]
        while stack:
            n, d = stack.pop()
            out["name"].append(n.name)
            filename, lineno, function_name = n.key
            out["file"].append(f"{filename}:{lineno}" if filename else "")
            # What a frame shows: the function's name, then where it is (the full name is in the tooltip).
            short = filename.rsplit("/", 1)[-1]
            out["label"].append(f"{function_name} ({short}:{lineno})" if filename and filename != "~" else n.name)
            out["value"].append(n.value)
            out["own"].append(n.own)
            out["depth"].append(d)
            out["folded"].append(n.folded)
            out["estimated"].append(n.estimated)
            stack.extend((c, d + 1) for c in reversed(n.children))

    visit(tree.root, 0)
    return {
        **out,
        "exact": tree.exact,
        "nodes": tree.nodes,
        "total": tree.total,
        "budget": budget,
        "estimated_share": tree.estimated_share,
        "rooted_at": list(tree.rooted_at),
        "note": tree.note,
    }


def _steps(inputs: ReportInputs) -> dict[str, Any]:
    """Every node's profiled steps (rows), each step's node skew, and per mode the SLOWEST_STEPS slowest
    node-steps with their step's median over the nodes (the timeline marks them)."""
    rows = inputs.steps.to_pylist()
    by_step: dict[tuple[str, int], list[tuple[str, float]]] = defaultdict(list)
    for r in rows:
        by_step[(r["mode"], r["step"])].append((r["node_id"], r["wall_seconds"]))
    skew = []
    for (mode, step), cells in by_step.items():
        walls = [w for _, w in cells]
        slowest = max(cells, key=lambda c: (c[1], c[0]))
        skew.append(
            {
                "mode": mode,
                "step": step,
                "nodes": len(cells),
                "fastest": min(walls),
                "slowest": max(walls),
                "median": statistics.median(walls),
                "skew": max(walls) - min(walls),
                "slowest_node": slowest[0],
            }
        )
    medians = {(s["mode"], s["step"]): s["median"] for s in skew}
    marked: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in sorted(rows, key=lambda r: (-ranked(r["wall_seconds"]), r["step"], r["node_id"])):
        if len(marked[r["mode"]]) < SLOWEST_STEPS:
            marked[r["mode"]].append(
                {"node_id": r["node_id"], "step": r["step"], "wall": r["wall_seconds"], "median": medians[(r["mode"], r["step"])]}
            )
    return {
        "rows": [[r["node_id"], r["mode"], r["step"], r["wall_seconds"], r["start_time_us"]] for r in rows],
        "skew": skew,
        "slowest": dict(marked),
    }


def _meta(inputs: ReportInputs) -> dict[str, Any]:
    try:
        release = version("proflake")
    except PackageNotFoundError:  # pragma: no cover - running from a checkout without an install
        release = "unknown"
    params = {k: v for k, v in inputs.arguments.items() if k in _SELECTION_ARGUMENTS}
    return {
        "method": inputs.method,
        "title": title(inputs.jobs, inputs.node, inputs.method, inputs.arguments),
        "arguments": {k: (None if isinstance(v, float) and v == float("inf") else v) for k, v in params.items()},
        "profiler": inputs.profiler,
        **_formats(inputs.intervals),
        "jobs": inputs.scope_jobs,
        "node": inputs.node,
        "generated_at": utc(dt.datetime.now(dt.timezone.utc)),
        "proflake": release,
    }


def _formats(intervals: pa.Table) -> dict[str, Any]:
    """The input formats the selected intervals were read from (docs/formats.md) and their time unit:
    'seconds', 'samples' or 'mixed'."""
    if "source_format" not in intervals.column_names:  # a store from before the columns: profiler and seconds
        return {"formats": [], "time_unit": "seconds"}
    formats = sorted({f for f in intervals["source_format"].to_pylist() if f})
    units = {u or "seconds" for u in intervals["time_unit"].to_pylist()} if "time_unit" in intervals.column_names else set()
    return {"formats": formats, "time_unit": units.pop() if len(units) == 1 else "mixed" if units else "seconds"}


_SELECTION_ARGUMENTS = {"start_time_us", "end_time_us", "start_step", "end_step", "mode", "start_phase", "end_phase", "start_mode", "end_mode"}

