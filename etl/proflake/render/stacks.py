"""Call stacks of a fetch result, for flame graphs and the exports (speedscope, collapsed stacks).

pyinstrument results are exact: the selected call trees merged by call path (queries/call_tree.sql).
cProfile records no stacks, only caller -> callee edges, so its tree is *derived*, as snakeviz does: a
root is a function nothing called; below a node for function f holding ``v`` of f's cumulative time
``ct(f)``, each callee g gets the edge's cumulative time scaled by ``v / ct(f)`` (the calls of f on this
path are assumed to cost what f's calls cost on average), and a callee already on the path is not
followed again (recursion). Any own time of a function the tree does not reach is added back as a stack
of that function alone, so every function's own time, and the total, equal the aggregate's exactly.

Trees are expanded best first (the largest node next) up to a budget of nodes; what is left out is
folded into one "other" node per parent holding the left-out total, so a flame graph of a 10,000-file job
stays a few thousand nodes.
"""

from __future__ import annotations

import heapq
import itertools
from collections import defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pyarrow as pa

if TYPE_CHECKING:
    from proflake.query.profiles import FetchResult

Key = tuple[str, int, str]  # (filename, lineno, function_name), pstats' function key
OTHER = "[other]"


@dataclass(slots=True)
class Node:
    """One node of a (merged or derived) call tree: a function on one call path."""

    key: Key
    name: str
    value: float  # inclusive seconds on this path
    own: float  # own (self) seconds on this path
    children: list[Node] = field(default_factory=list)
    folded: int = 0  # for an OTHER node: how many nodes it stands for


@dataclass
class CallTree:
    root: Node
    exact: bool  # False: derived from cProfile caller edges
    nodes: int  # nodes in the tree (OTHER nodes included)
    total: float  # seconds at the root


def unrolled(result: FetchResult) -> dict[str, Any]:
    """The roll-up parameters of ``result``'s selection with every group key and --top dropped."""
    return {**result._selection_params, "by_node": False, "by_modes": False, "by_job_phase": False, "top": None}


class Rollups:
    """The selection's roll-ups as a whole (no group keys, every function), each run once."""

    def __init__(self, result: FetchResult) -> None:
        self.result = result
        self._tables: dict[str, pa.Table] = {}

    @classmethod
    def reusing(cls, result: FetchResult) -> Rollups:
        """Rollups that start from the fetch's own answers (its functions, and its caller edges if it has
        them) when those are the whole selection's: no group keys, no --top, sorted by cumtime."""
        rollups = cls(result)
        params = result._selection_params
        if not result.group_by and params.get("top") is None and params.get("sort") == "cumtime":
            rollups._tables["rollup_cprofile" if result.profiler == "cprofile" else "rollup_pyinstrument"] = result.table
            if result._callers is not None:
                rollups._tables["rollup_callers"] = result._callers
        return rollups

    def get(self, name: str) -> pa.Table:
        """``name``: rollup_cprofile, rollup_pyinstrument, rollup_callers or call_tree."""
        if name not in self._tables:
            params = {**unrolled(self.result), "sort": "cumtime"}
            self._tables[name] = self.result._profiles._rollup(self.result.intervals, name, params)
        return self._tables[name]


def call_tree(
    result: FetchResult, budget: int | None = 2000, rollups: Rollups | None = None, floor: float = 1e-6
) -> CallTree:
    """The selection's call tree, expanded best first up to ``budget`` nodes (None: no limit); nodes under
    ``floor`` times the total are folded too (a millionth of the total is under a pixel)."""
    rollups = rollups or Rollups(result)
    if result.profiler == "pyinstrument":
        expand, roots = _pyinstrument_source(rollups)
        exact = True
    else:
        expand, roots = _cprofile_source(rollups)
        exact = False
    total = sum(r.value for r in roots)
    root = Node(("", 0, "all"), "all", total, 0.0, [])
    count = _expand_best_first(root, roots, expand, budget, floor * total)
    return CallTree(root, exact, count, total)


def stacks(result: FetchResult, budget: int | None = 50_000) -> tuple[list[Key], list[str], list[tuple[tuple[int, ...], float]]]:
    """Every stack with its own seconds: (frame keys, frame names, [(frame indexes root first, seconds)]).

    The own seconds add up to the selection's total own time; per function, to its own time (cProfile:
    tottime; pyinstrument: self_time), whatever the budget (see the module docstring).
    """
    rollups = Rollups(result)
    tree = call_tree(result, budget, rollups)
    index: dict[Key, int] = {}
    names: list[str] = []
    out: list[tuple[tuple[int, ...], float]] = []
    placed: dict[Key, float] = defaultdict(float)

    def frame(node: Node) -> int:
        key = node.key
        if key not in index:
            index[key] = len(names)
            names.append(node.name)
        return index[key]

    leaf: list[Key] = []  # the function each stack of ``out`` ends in

    # Depth first with an explicit stack: pyinstrument trees can be deeper than Python's recursion limit.
    pending: list[tuple[Node, tuple[int, ...]]] = [(top, ()) for top in reversed(tree.root.children)]
    while pending:
        node, path = pending.pop()
        if node.name == OTHER:
            continue  # its own times come back below, function by function
        here = (*path, frame(node))
        placed[node.key] += node.own
        if node.own > 0:
            out.append((here, node.own))
            leaf.append(node.key)
        pending.extend((child, here) for child in reversed(node.children))
    # Make each function's own time exact: a derived tree can place more than a function's own time
    # (its stacks are scaled down) or less, and a pruned one less (the rest is one stack of the
    # function alone).
    own_of = {key: (name, own) for key, name, own in _own_times(rollups)}
    shrink = {k: own_of[k][1] / p for k, p in placed.items() if k in own_of and p > own_of[k][1] and p > 0}
    if shrink:
        out = [(path, w * shrink.get(k, 1.0)) for (path, w), k in zip(out, leaf)]
    for key, (name, own) in own_of.items():
        missing = own - min(placed.get(key, 0.0), own)
        if missing > 1e-12 * max(1.0, own):
            if key not in index:
                index[key] = len(names)
                names.append(name)
            out.append(((index[key],), missing))
    keys = [k for k, _ in sorted(index.items(), key=lambda kv: kv[1])]
    return keys, names, out


def _own_times(rollups: Rollups) -> Iterator[tuple[Key, str, float]]:
    if rollups.result.profiler == "pyinstrument":
        table = rollups.get("rollup_pyinstrument")
        own = table["self_time"].to_pylist()
    else:
        table = rollups.get("rollup_cprofile")
        own = table["tottime"].to_pylist()
    keys = zip(table["filename"].to_pylist(), table["lineno"].to_pylist(), table["function_name"].to_pylist())
    return ((k, name, o) for k, name, o in zip(keys, table["function"].to_pylist(), own))


Expand = Callable[[Node, tuple[Key, ...]], list[Node]]


def _expand_best_first(root: Node, roots: list[Node], expand: Expand, budget: int | None, floor: float = 0.0) -> int:
    """Attach children to ``root`` largest first; the nodes left out when the tree reaches ``budget`` nodes
    (OTHER nodes included), and every node under ``floor`` seconds, are folded into one OTHER node per
    parent."""
    tie = itertools.count()
    heap: list[tuple[float, int, Node, Node, tuple[Key, ...]]] = []
    waiting: dict[int, int] = {}  # parent -> its children in the heap
    small: dict[int, tuple[Node, float, int]] = {}  # parent -> (parent, seconds, nodes) under the floor
    others = 0  # parents that will need an OTHER node if the budget runs out now

    def offer(children: list[Node], parent: Node, path: tuple[Key, ...]) -> None:
        nonlocal others
        if not children:
            return
        others += 1
        for child in children:
            if child.value < floor:
                _, seconds, nodes = small.get(id(parent), (parent, 0.0, 0))
                small[id(parent)] = (parent, seconds + child.value, nodes + 1)
            else:
                heapq.heappush(heap, (-child.value, next(tie), child, parent, path))
                waiting[id(parent)] = waiting.get(id(parent), 0) + 1
        if id(parent) not in waiting and id(parent) not in small:
            others -= 1

    offer(roots, root, ())
    count = 1
    while heap and (budget is None or count + others + 1 < budget):  # a pop adds <= 1 to each
        _, _, node, parent, path = heapq.heappop(heap)
        waiting[id(parent)] -= 1
        if not waiting[id(parent)]:
            del waiting[id(parent)]
            if id(parent) not in small:
                others -= 1
        parent.children.append(node)
        count += 1
        on_path = (*path, node.key)
        offer(expand(node, on_path), node, on_path)
    # What is still waiting, or was too small, is left out: one OTHER node per parent holds its total.
    left_out: dict[int, tuple[Node, float, int]] = dict(small)
    for _, _, node, parent, _ in heap:
        _, seconds, nodes = left_out.get(id(parent), (parent, 0.0, 0))
        left_out[id(parent)] = (parent, seconds + node.value, nodes + 1)
    for parent, seconds, nodes in left_out.values():
        parent.children.append(Node(("", 0, OTHER), OTHER, seconds, seconds, [], folded=nodes))
        count += 1
    _sort(root)
    return count


def _sort(node: Node) -> None:
    stack = [node]
    while stack:
        n = stack.pop()
        n.children.sort(key=lambda c: (c.name == OTHER, -c.value, c.name))
        stack.extend(n.children)


def _keys(table: pa.Table, prefix: str = "") -> list[Key]:
    return list(
        zip(
            table[prefix + "filename"].to_pylist(),
            table[prefix + "lineno"].to_pylist(),
            table[prefix + "function_name"].to_pylist(),
        )
    )


def _pyinstrument_source(rollups: Rollups) -> tuple[Expand, list[Node]]:
    rows = rollups.get("call_tree")
    paths = rows["path_id"].to_pylist()
    parents = rows["parent_path_id"].to_pylist()
    keys = _keys(rows)
    names = rows["function"].to_pylist()
    times = rows["time"].to_pylist()
    selfs = rows["self_time"].to_pylist()
    known = set(paths)
    by_parent: dict[Any, list[int]] = defaultdict(list)
    roots: list[Node] = []
    for i, parent in enumerate(parents):
        if parent in known:
            by_parent[parent].append(i)
    nodes = [Node(keys[i], names[i], times[i], selfs[i]) for i in range(len(paths))]
    node_path = {id(n): p for n, p in zip(nodes, paths)}
    roots = [nodes[i] for i, parent in enumerate(parents) if parent not in known]

    def expand(node: Node, _path: tuple[Key, ...]) -> list[Node]:
        return [nodes[i] for i in by_parent.get(node_path[id(node)], ())]

    return expand, roots


def _cprofile_source(rollups: Rollups) -> tuple[Expand, list[Node]]:
    functions = rollups.get("rollup_cprofile")
    edges = rollups.get("rollup_callers")
    keys = _keys(functions)
    names = dict(zip(keys, functions["function"].to_pylist()))
    cumtime = dict(zip(keys, functions["cumtime"].to_pylist()))
    tottime = dict(zip(keys, functions["tottime"].to_pylist()))
    callees: dict[Key, list[tuple[Key, float, float]]] = defaultdict(list)
    called: set[Key] = set()
    for callee, caller, ct, tt in zip(
        _keys(edges), _keys(edges, "caller_"), edges["cumtime"].to_pylist(), edges["tottime"].to_pylist()
    ):
        if callee == caller:
            continue  # a direct recursive edge: its time is inside the callee's own cumulative time
        callees[caller].append((callee, ct, tt))
        called.add(callee)
    roots = [Node(k, names[k], cumtime[k], tottime[k]) for k in keys if k not in called]
    if not roots and keys:  # every function has a caller (a cycle at the top): start from the largest
        top = max(keys, key=lambda k: cumtime[k])
        roots = [Node(top, names[top], cumtime[top], tottime[top])]

    def expand(node: Node, path: tuple[Key, ...]) -> list[Node]:
        full = cumtime.get(node.key, 0.0)
        scale = node.value / full if full > 0 else 0.0
        children = [
            Node(g, names.get(g) or _label(g), ct * scale, tt * scale)
            for g, ct, tt in callees.get(node.key, ())
            if g not in path and ct * scale > 0
        ]
        room = max(node.value - node.own, 0.0)
        inside = sum(c.value for c in children)
        if inside > room > 0:  # rounding or recursion made the callees outgrow their caller: shrink them
            shrink = room / inside
            for c in children:
                c.value *= shrink
                c.own *= shrink
        return children

    return expand, roots


def _label(key: Key) -> str:
    filename, lineno, name = key
    return f"{filename}:{lineno}({name})"
