"""Call stacks of a selection, for flame graphs and the exports (speedscope, collapsed stacks), built from
its roll-ups as plain data (proflake.query.page_data.StackData: read by the query layer; nothing here runs SQL).

pyinstrument results are exact: the selected call trees merged by call path (queries/call_tree.sql).
cProfile records no stacks, only caller -> callee edges, so its tree is *derived*, as gprof and gprof2dot
do it:

- each recursive cycle (a strongly connected component of the call graph: fib calling fib, is_even and
  is_odd calling each other) is one component, drawn once per path: the function it was entered by, and
  below it the cycle's other functions, each once (below its caller when only one function of the cycle
  calls it, else below the entry: either way inside calls that hold all its time); self-calls are not
  followed;
- a component's time is its own time plus what it passes to the components it calls: each callee
  component's time is shared among its incoming edges by the edges' cumulative times (cProfile counts an
  edge's cumulative time only at its outermost call, so a cycle's re-entries are never counted twice);
  time a function spent in calls that have no recorded caller (a profile started inside its caller) goes
  to its callers the same way, never to a block of its own at the top;
- the roots are the components no other component calls: the functions nothing called, and recursive
  cycles entered from outside the profile (``CallTree.rooted_at``).

Every function's own time, and the total, equal the aggregate's exactly. A function called from one call
path only (one caller, itself called from one path, up to a root) is placed exactly; the rest is placed
by the average-cost assumption, and ``CallTree.estimated`` says how much of the time that is.

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

from proflake.formats import is_caller_graph
from proflake.numbers import percent, ranked
from proflake.render.callgraph import CallGraph, Key, Node, key_label, table_keys

__all__ = ["OTHER", "CallTree", "Key", "Node", "call_tree", "stacks"]

if TYPE_CHECKING:
    from proflake.query.page_data import StackData

OTHER = "[other]"


@dataclass
class CallTree:
    """A call tree under one "all" root, with what it is made of: ``exact`` (pyinstrument) or derived from
    cProfile's caller edges, and then ``estimated``: the seconds of own time placed on apportioned paths."""

    root: Node
    exact: bool  # False: derived from cProfile caller edges
    nodes: int  # nodes in the tree (OTHER nodes included)
    total: float  # seconds at the root
    estimated: float = 0.0  # own seconds whose call path is apportioned, not recorded (0 when exact)
    rooted_at: tuple[str, ...] = ()  # roots whose function has callers: recursive cycles entered from outside
    true_roots: int = 0  # roots that are functions nothing called
    best_caller: dict[Key, Key] = field(default_factory=dict, repr=False)  # cProfile: each callee's largest caller

    @property
    def estimated_share(self) -> float:
        """The share of the total placed by estimate (0 for an exact tree)."""
        return self.estimated / self.total if self.total > 0 else 0.0

    @property
    def note(self) -> str:
        """One sentence for the page: how the tree was made and how much of it is an estimate."""
        if self.exact:
            return "pyinstrument records stacks: every frame is as recorded."
        note = f"cProfile records callers, not stacks: {percent(self.estimated_share, sign=False)} of the time is placed by estimate."
        if self.rooted_at:
            cycles = ", ".join(self.rooted_at[:3]) + (f" and {len(self.rooted_at) - 3} more" if len(self.rooted_at) > 3 else "")
            if self.true_roots:
                note += f" Recursive cycles entered from outside the profile are roots too: {cycles}."
            else:
                note += f" No function is without callers (the profile started inside a call): the tree starts at the recursive cycles of {cycles}."
        return note


def call_tree(data: StackData, budget: int | None = 2000, floor: float = 1e-6) -> CallTree:
    """The selection's call tree, expanded best first up to ``budget`` nodes (None: no limit); nodes under
    ``floor`` times the total are folded too (a millionth of the total is under a pixel)."""
    if not is_caller_graph(data.profiler):
        expand, roots = _pyinstrument_source(_table(data.call_paths, "call paths"))
        graph = None
    else:
        graph = CallGraph.of(data.functions, _table(data.callers, "caller edges"))
        expand, roots = graph.expand, graph.roots()
    total = sum(r.value for r in roots)
    root = Node(("", 0, "all"), "all", total, 0.0, [])
    count = _expand_best_first(root, roots, expand, budget, floor * total)
    if graph is None:
        return CallTree(root, True, count, total)
    return CallTree(
        root, False, count, total, graph.estimated(), graph.rooted_at(), graph.true_roots(), graph.best_caller()
    )


def _table(table: pa.Table | None, what: str) -> pa.Table:
    if table is None:
        raise ValueError(f"this StackData holds no {what}")
    return table


def stacks(data: StackData, budget: int | None = 50_000) -> tuple[list[Key], list[str], list[tuple[tuple[int, ...], float]]]:
    """Every stack with its own seconds: (frame keys, frame names, [(frame indexes root first, seconds)]).

    The stacks are ``call_tree``'s paths. The own seconds add up to the selection's total own time; per
    function, to its own time (cProfile: tottime; pyinstrument: self_time), whatever the budget: what a
    pruned tree folded away goes to the function's drawn stacks in proportion, or, for a function the
    tree no longer reaches, below the drawn path of its largest caller.
    """
    tree = call_tree(data, budget)
    index: dict[Key, int] = {}
    names: list[str] = []
    out: list[tuple[tuple[int, ...], float]] = []
    placed: dict[Key, float] = defaultdict(float)
    widest: dict[Key, tuple[float, tuple[int, ...]]] = {}  # each function's largest drawn node: (value, path)

    def frame(key: Key, name: str) -> int:
        if key not in index:
            index[key] = len(names)
            names.append(name)
        return index[key]

    leaf: list[Key] = []  # the function each stack of ``out`` ends in

    # Depth first with an explicit stack: pyinstrument trees can be deeper than Python's recursion limit.
    pending: list[tuple[Node, tuple[int, ...]]] = [(top, ()) for top in reversed(tree.root.children)]
    while pending:
        node, path = pending.pop()
        if node.name == OTHER:
            continue  # its own times come back below, function by function
        here = (*path, frame(node.key, node.name))
        placed[node.key] += node.own
        if node.value > widest.get(node.key, (-1.0, ()))[0]:
            widest[node.key] = (node.value, here)
        if node.own > 0:
            out.append((here, node.own))
            leaf.append(node.key)
        pending.extend((child, here) for child in reversed(node.children))
    # Make each function's own time exact where the tree was pruned (or rounding moved it): scale the
    # function's stacks to its own time, or, when none is drawn, hang it below its callers' drawn path.
    own_of = {key: (name, own) for key, name, own in _own_times(data)}
    scale = {k: own_of[k][1] / p for k, p in placed.items() if k in own_of and p > 0}
    out = [(path, w * scale.get(k, 1.0)) for (path, w), k in zip(out, leaf)]
    for key, (_, own) in own_of.items():
        if placed.get(key, 0.0) > 0 or own <= 1e-12:
            continue
        chain = [key]  # the function, then its largest caller, and so on up to a drawn one or a root
        while chain[-1] not in widest and chain[-1] in tree.best_caller and tree.best_caller[chain[-1]] not in chain:
            chain.append(tree.best_caller[chain[-1]])
        top = chain.pop() if chain[-1] in widest else None
        path = widest[top][1] if top is not None else ()
        path = (*path, *(frame(k, own_of[k][0] if k in own_of else key_label(k)) for k in reversed(chain)))
        out.append((path, own))
    keys = [k for k, _ in sorted(index.items(), key=lambda kv: kv[1])]
    return keys, names, out


def _own_times(data: StackData) -> Iterator[tuple[Key, str, float]]:
    table = data.functions
    own = table["tottime" if is_caller_graph(data.profiler) else "self_time"].to_pylist()
    keys = zip(table["filename"].to_pylist(), table["lineno"].to_pylist(), table["function_name"].to_pylist())
    return ((k, name, o) for k, name, o in zip(keys, table["function"].to_pylist(), own))


Expand = Callable[[Node, tuple[Key, ...]], list[Node]]


def _expand_best_first(root: Node, roots: list[Node], expand: Expand, budget: int | None, floor: float = 0.0) -> int:
    """Attach children to ``root`` largest first; the nodes left out when the tree reaches ``budget`` nodes
    (OTHER nodes included), and every node under ``floor`` seconds, are folded into one OTHER node per
    parent."""
    tie = itertools.count()
    heap: list[tuple[float, str, int, Node, Node, tuple[Key, ...]]] = []
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
                heapq.heappush(heap, (-ranked(child.value), child.name, next(tie), child, parent, path))
                waiting[id(parent)] = waiting.get(id(parent), 0) + 1
        if id(parent) not in waiting and id(parent) not in small:
            others -= 1

    offer(roots, root, ())
    count = 1
    while heap and (budget is None or count + others + 1 < budget):  # a pop adds <= 1 to each
        _, _, _, node, parent, path = heapq.heappop(heap)
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
    for _, _, _, node, parent, _ in heap:
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
        n.children.sort(key=lambda c: (c.name == OTHER, -ranked(c.value), c.name))
        stack.extend(n.children)


def _pyinstrument_source(rows: pa.Table) -> tuple[Expand, list[Node]]:
    paths = rows["path_id"].to_pylist()
    parents = rows["parent_path_id"].to_pylist()
    keys = table_keys(rows)
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
