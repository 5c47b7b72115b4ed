"""The data of an HTML report, computed in SQL over the store and handed to the page as one JSON document.

Every number the page shows comes from here: the roll-ups are the fetch methods' own queries
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
import pyarrow.compute as pc

from proflake import sql as queries
from proflake.render.stacks import Node, Rollups, call_tree, unrolled

if TYPE_CHECKING:
    from proflake.query.profiles import FetchResult

TOP = 100  # functions kept per sort key (self, total, calls): the table sorts exactly within their union
TOP_PER_PHASE = 25
NODE_COMPARISON = 20  # functions compared across nodes
EDGES_PER_FUNCTION = 12  # callers and callees kept for each function of the table
FLAME_BUDGET = 2000  # flame-graph nodes; the rest is folded into "other"


def report_data(result: FetchResult, *, flame_budget: int = FLAME_BUDGET, top: int = TOP) -> dict[str, Any]:
    """Everything the report page shows about ``result``'s selection, as JSON-ready values."""
    cprofile = result.profiler == "cprofile"
    rollups = Rollups(result)
    functions = _measures(result, rollups.get("rollup_cprofile" if cprofile else "rollup_pyinstrument"))
    keep = _top_union(functions, top)
    data: dict[str, Any] = {
        "meta": _meta(result),
        "overview": _overview(result),
        "steps": _steps(result),
        "phases": _table(queries.run_named(result._profiles.connection(), "report_phases", _ids(result))),
        "columns": _column_names(cprofile),
        "functions": _functions(functions.take(keep)),
        "per_phase": _per_phase(result),
        "per_node": _per_node(result, functions.take(keep)),
        "flame": _flame(result, flame_budget, rollups),
    }
    data["edges"] = _edges(rollups.get("rollup_callers"), data["functions"]) if cprofile else None
    return data


def _ids(result: FetchResult) -> dict[str, Any]:
    return {"interval_ids": result.intervals["interval_id"].to_pylist()}


def _rollup(result: FetchResult, groups: dict[str, bool]) -> pa.Table:
    """The fetch methods' roll-up of the selection: every function, grouped as ``groups`` say."""
    name = "rollup_cprofile" if result.profiler == "cprofile" else "rollup_pyinstrument"
    return _measures(result, result._profiles._rollup(result.intervals, name, {**unrolled(result), **groups, "sort": "cumtime"}))


def _measures(result: FetchResult, table: pa.Table) -> pa.Table:
    """``table`` with the profiler's measures under common names: own, total, calls."""
    if result.profiler == "cprofile":
        own, total, calls = "tottime", "cumtime", "total_calls"
    else:
        own, total, calls = "self_time", "total_time", "frames"
    return table.append_column("own", table[own]).append_column("total", table[total]).append_column("calls", table[calls])


def _top_union(table: pa.Table, top: int) -> pa.Array:
    """Row indexes of the top ``top`` rows by own time, by total time and by calls, in total-time order."""
    keep: set[int] = set()
    for column in ("own", "total", "calls"):
        keep.update(pc.sort_indices(table, [(column, "descending"), ("function", "ascending")])[:top].to_pylist())
    return pa.array(sorted(keep, key=lambda i: (-table["total"][i].as_py(), table["function"][i].as_py())), pa.int64())


def _column_names(cprofile: bool) -> dict[str, str]:
    if cprofile:
        return {"own": "tottime (s)", "total": "cumtime (s)", "calls": "calls"}
    return {"own": "self time (s)", "total": "total time (s)", "calls": "frames"}


def _functions(table: pa.Table) -> list[dict[str, Any]]:
    columns = ["function", "filename", "lineno", "function_name", "own", "total", "calls", "intervals"]
    if "primitive_calls" in table.column_names:
        columns.append("primitive_calls")
    return table.select(columns).to_pylist()


def _per_phase(result: FetchResult) -> list[dict[str, Any]]:
    table = _rollup(result, {"by_job_phase": True})
    out = []
    for phase in dict.fromkeys(table["job_phase"].to_pylist()):
        rows = table.filter(pc.equal(table["job_phase"], phase))
        out.append({"phase": phase, "functions": _functions(rows.take(_top_union(rows, TOP_PER_PHASE)))})
    return out


def _per_node(result: FetchResult, selection: pa.Table) -> dict[str, Any] | None:
    nodes = sorted(set(result.intervals["node_id"].to_pylist()))
    if len(nodes) < 2:
        return None
    table = _rollup(result, {"by_node": True})
    wanted = pc.sort_indices(selection, [("total", "descending"), ("function", "ascending")])[:NODE_COMPARISON]
    names = selection.take(wanted)["function"].to_pylist()
    cells: dict[tuple[str, str], tuple[float, float, int]] = {}
    chosen = table.filter(pc.is_in(table["function"], pa.array(names, pa.string())))
    for row in chosen.select(["node_id", "function", "own", "total", "calls"]).to_pylist():
        cells[(row["function"], row["node_id"])] = (row["own"], row["total"], row["calls"])
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
        return sorted(rows, key=lambda r: (-r[4], r[0]))[:top]

    return {
        "columns": ["function", "calls", "primitive_calls", "tottime", "cumtime"],
        "callers": {f: best(rows) for f, rows in callers.items()},
        "callees": {f: best(rows) for f, rows in callees.items()},
    }


def _flame(result: FetchResult, budget: int, rollups: Rollups) -> dict[str, Any]:
    tree = call_tree(result, budget, rollups)
    out: dict[str, list] = {"name": [], "label": [], "file": [], "value": [], "own": [], "depth": [], "folded": []}

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
            stack.extend((c, d + 1) for c in reversed(n.children))

    visit(tree.root, 0)
    return {**out, "exact": tree.exact, "nodes": tree.nodes, "total": tree.total, "budget": budget}


def _steps(result: FetchResult) -> dict[str, Any]:
    rows = queries.run_named(result._profiles.connection(), "report_steps", _ids(result)).to_pylist()
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
    return {"rows": [[r["node_id"], r["mode"], r["step"], r["wall_seconds"], r["start_time_us"]] for r in rows], "skew": skew}


def _table(table: pa.Table) -> list[dict[str, Any]]:
    return table.to_pylist()


def _meta(result: FetchResult) -> dict[str, Any]:
    try:
        release = version("proflake")
    except PackageNotFoundError:  # pragma: no cover - running from a checkout without an install
        release = "unknown"
    params = {k: v for k, v in result._selection_params.items() if k in _SELECTION_ARGUMENTS}
    return {
        "method": result.method,
        "arguments": {k: (None if isinstance(v, float) and v == float("inf") else v) for k, v in params.items()},
        "profiler": result.profiler,
        "jobs": result.scope.job_ids,
        "node": result.scope.node_id,
        "generated_at": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "proflake": release,
    }


_SELECTION_ARGUMENTS = {"start_time_us", "end_time_us", "start_step", "end_step", "mode", "start_phase", "end_phase", "start_mode", "end_mode"}


def _overview(result: FetchResult) -> dict[str, Any]:
    from proflake.render.report.overview import overview

    return overview(result)
