"""The diff page: a DiffResult's table and a differential flame graph, in one self-contained HTML file.

    >>> d = Profiles("./proflake-store").diff("run-7", "run-8")
    >>> d.report().write("diff.html")          # or, in a notebook, just ``d``

The table is the DiffResult's own (``to_dict``: every number the page shows comes from it). The flame
graph merges the two sides' call trees (render/stacks.py: pyinstrument exact, cProfile derived from the
caller edges with recursion folded, the same tree as the report's and the exports') by call path, functions matched as the diff matches them; each side's seconds are divided
by its samples (``per="step"``) or by its wall seconds (``per="second"``). A frame's width is its time on
both sides together, so what vanished or appeared still shows; its colour is its change (page: diff.js).
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from importlib.metadata import PackageNotFoundError, version
from typing import TYPE_CHECKING, Any

from proflake.formats import is_caller_graph
from proflake.numbers import percent, ranked, utc
from proflake.render.report.data import FLAME_BUDGET
from proflake.render.report.page import Report
from proflake.render.stacks import OTHER, CallTree, Node, call_tree

if TYPE_CHECKING:
    from proflake.query.diff import DiffResult, Side
    from proflake.query.page_data import StackData


@dataclass(slots=True)
class _Frame:
    """One frame of the merged tree: a function on one call path, with both sides' normalised seconds."""

    name: str
    label: str
    file: str
    values: list[float] = field(default_factory=lambda: [0.0, 0.0, 0.0, 0.0])  # base, head, base own, head own
    folded: int = 0
    estimated: bool = False  # on either side, placed on this path by estimate (cProfile)
    children: dict[tuple, _Frame] = field(default_factory=dict)


def diff_report_data(
    result: DiffResult,
    stacks: list[StackData | None],
    *,
    fail_on_total: float | None = None,
    fail_on_function: float | None = None,
    flame_budget: int = FLAME_BUDGET,
    top: int | None = None,
) -> dict[str, Any]:
    """What the diff page shows: ``diff`` is ``result.to_dict(...)`` (the table, total, gate, warnings;
    the first ``top`` functions), ``flame`` the differential flame graph of the base's and the head's
    ``stacks`` (proflake.query.page_data.diff_stacks; each side's tree pruned to ``flame_budget`` nodes)."""
    trees = [call_tree(data, flame_budget) if data is not None else None for data in stacks]
    document = result.to_dict(fail_on_total, fail_on_function)
    if top is not None:
        document["functions"] = document["functions"][:top]
    return {"meta": _meta(), "diff": document, "flame": _flame(result, trees, flame_budget)}


def build_diff_report(
    result: DiffResult,
    stacks: list[StackData | None],
    *,
    fail_on_total: float | None = None,
    fail_on_function: float | None = None,
    flame_budget: int = FLAME_BUDGET,
    top: int | None = None,
) -> Report:
    """The diff page of ``result`` and its sides' ``stacks``; ``.write(path)`` saves it, a notebook shows it
    inline."""
    data = diff_report_data(
        result, stacks, fail_on_total=fail_on_total, fail_on_function=fail_on_function, flame_budget=flame_budget, top=top
    )
    return Report(data, page="diff")


def _divisor(result: DiffResult, side: Side) -> float:
    value = side.samples if result.per == "step" else side.seconds
    return float(value) if value else 0.0


def _names(node: Node, by_line: bool) -> tuple[tuple, str, str, str]:
    """(match key, name, label, file) of a tree node, the function named as the diff table names it."""
    filename, lineno, function_name = node.key
    if node.name == OTHER:
        return ("", OTHER), OTHER, OTHER, ""
    if not filename:  # the root
        return ("",), node.name, node.name, ""
    if filename in ("~", ""):
        return (filename, function_name), function_name, function_name, ""
    short = filename.rsplit("/", 1)[-1]
    if by_line:
        name = f"{filename}:{lineno}({function_name})"
        return (filename, lineno, function_name), name, f"{function_name} ({short}:{lineno})", f"{filename}:{lineno}"
    return (filename, function_name), f"{filename}({function_name})", f"{function_name} ({short})", filename


def _merge(root: _Frame, tree: CallTree, side: int, scale: float, by_line: bool) -> None:
    """Add ``tree`` to the merged tree under ``root`` as side 0 (base) or 1 (head), its seconds times ``scale``."""
    root.values[side] += tree.root.value * scale
    pending = [(root, tree.root)]
    while pending:  # explicit stack: pyinstrument trees can be deeper than Python's recursion limit
        frame, node = pending.pop()
        for child in node.children:
            key, name, label, file = _names(child, by_line)
            merged = frame.children.get(key)
            if merged is None:
                merged = frame.children[key] = _Frame(name, label, file)
            merged.values[side] += child.value * scale
            merged.values[side + 2] += child.own * scale
            merged.folded += child.folded
            merged.estimated = merged.estimated or child.estimated
            pending.append((merged, child))


def _flame(result: DiffResult, trees: list[CallTree | None], budget: int) -> dict[str, Any]:
    root = _Frame("all", "all", "")
    by_line = result.match == "line"
    for side, (tree, info) in enumerate(zip(trees, (result.base, result.head))):
        divisor = _divisor(result, info)
        if tree is not None and divisor:
            _merge(root, tree, side, 1.0 / divisor, by_line)
    columns = ("name", "label", "file", "value", "base", "head", "base_own", "head_own", "depth", "folded", "estimated")
    out: dict[str, list] = {c: [] for c in columns}
    pending = [(root, 0)]
    while pending:  # pre-order, children largest first and [other] last, as the report's flame graph
        frame, depth = pending.pop()
        base, head, base_own, head_own = frame.values
        for column, value in zip(columns, (frame.name, frame.label, frame.file, base + head, base, head,
                                           base_own, head_own, depth, frame.folded, frame.estimated)):
            out[column].append(value)
        children = sorted(frame.children.values(), key=lambda f: (f.name == OTHER, -ranked(f.values[0] + f.values[1]), f.name))
        pending.extend((child, depth + 1) for child in reversed(children))
    return {
        **out,
        "exact": not is_caller_graph(result.profiler),
        "estimated_share": {side: (tree.estimated_share if tree else 0.0) for side, tree in zip(("base", "head"), trees)},
        "note": _note(trees),
        "nodes": len(out["name"]),
        "budget": budget,
        "unit": "s/step" if result.per == "step" else "s/s",
    }


def _note(trees: list[CallTree | None]) -> str:
    """The sentence beside the flame graph: each side's tree's note, or both shares in one sentence."""
    base, head = trees
    if base is None or head is None or base.exact or head.exact:
        drawn = base or head
        return drawn.note if drawn else ""
    shares = [percent(t.estimated_share, sign=False) for t in (base, head)]
    return f"cProfile records callers, not stacks: {shares[0]} of the base's time and {shares[1]} of the head's are placed by estimate."


def _meta() -> dict[str, Any]:
    try:
        release = version("proflake")
    except PackageNotFoundError:  # pragma: no cover - running from a checkout without an install
        release = "unknown"
    return {
        "generated_at": utc(dt.datetime.now(dt.timezone.utc)),
        "proflake": release,
    }
