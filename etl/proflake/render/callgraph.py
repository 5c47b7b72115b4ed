"""cProfile's call graph with its recursion condensed: the derived call tree of render/stacks.py.

Each recursive cycle (a strongly connected component of the caller -> callee edges, found with Tarjan's
algorithm) is one component; a component's seconds are its functions' own time and what it passes down
the edges that leave it, each callee component's seconds shared among its incoming edges by their
cumulative times. ``CallGraph.roots`` and ``CallGraph.expand`` draw it as a tree (see the docstring of
render/stacks.py for the rules, docs/report.md for what they give on real jobs).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

import pyarrow as pa

from proflake.numbers import ranked

Key = tuple[str, int, str]  # (filename, lineno, function_name), pstats' function key


@dataclass(slots=True)
class Node:
    """One node of a (merged or derived) call tree: a function on one call path."""

    key: Key
    name: str
    value: float  # inclusive seconds on this path
    own: float  # own (self) seconds on this path
    children: list[Node] = field(default_factory=list)
    folded: int = 0  # for an OTHER node: how many nodes it stands for
    estimated: bool = False  # cProfile: the function has more than one call path, so this one is apportioned


def table_keys(table: pa.Table, prefix: str = "") -> list[Key]:
    """The function keys of ``table``'s rows (``prefix="caller_"``: of their callers)."""
    return list(
        zip(
            table[prefix + "filename"].to_pylist(),
            table[prefix + "lineno"].to_pylist(),
            table[prefix + "function_name"].to_pylist(),
        )
    )


def key_label(key: Key) -> str:
    """pstats' name of a function: ``file:line(name)``."""
    filename, lineno, name = key
    return f"{filename}:{lineno}({name})"


def _shares(weights: list[float], calls: list[int]) -> list[float]:
    """Each item's share of the whole, by ``weights`` (cumulative seconds), else by calls, else equally."""
    for values in (weights, calls):
        whole = float(sum(values))
        if whole > 0:
            return [v / whole for v in values]
    return [1.0 / len(weights)] * len(weights)


@dataclass
class _Entry:
    """A recursive cycle as drawn when entered by one of its functions: its other functions each once."""

    below: dict[int, list[tuple[int, float]]]  # function -> [(function drawn below it, share)]
    inclusive: dict[int, float]  # function -> its seconds with what is drawn below it (times 1)


class CallGraph:
    """A cProfile aggregate's call graph with each recursive cycle condensed to one component (Tarjan),
    and the seconds each component passes down each edge (see the module docstring)."""

    def __init__(self, keys: list[Key], names: list[str], own: list[float], cumtime: list[float],
                 edges: list[tuple[int, int, float, int]]) -> None:
        self.keys, self.names, self.own, self.cumtime = keys, names, own, cumtime
        self.edges = edges  # (caller, callee, cumtime, calls), self-calls left out
        n = len(keys)
        self.callees: list[list[int]] = [[] for _ in range(n)]  # edge indexes out of each function
        self.callers: list[list[int]] = [[] for _ in range(n)]
        for e, (caller, callee, _, _) in enumerate(edges):
            self.callees[caller].append(e)
            self.callers[callee].append(e)
        self.component, self.members = self._components()
        comp = self.component
        self.entering: list[list[int]] = [[] for _ in self.members]  # edges into each component from outside
        for e, (caller, callee, _, _) in enumerate(edges):
            if comp[caller] != comp[callee]:
                self.entering[comp[callee]].append(e)
        self.share = [0.0] * len(edges)  # an entering edge's share of its callee component's seconds
        for entering in self.entering:
            if entering:
                for e, s in zip(entering, _shares([edges[e][2] for e in entering], [edges[e][3] for e in entering])):
                    self.share[e] = s
        # Seconds, callees first (Tarjan finds a component after every component it calls).
        self.seconds = [0.0] * len(self.members)  # each component's inclusive seconds
        self.flow = [0.0] * len(edges)  # seconds passed down each edge that leaves a component
        self.local = list(own)  # a function's own seconds and what it passes out of its component
        for c, members in enumerate(self.members):
            for f in members:
                for e in self.callees[f]:
                    d = comp[edges[e][1]]
                    if d != c:
                        self.flow[e] = self.seconds[d] * self.share[e]
                        self.local[f] += self.flow[e]
            self.seconds[c] = sum(self.local[f] for f in members)
        self._entries: dict[tuple[int, int], _Entry] = {}
        self._node_of: dict[int, tuple[int, int, int, float]] = {}  # id(node) -> (component, entry, function, scale)
        self._exact = self._exactness()

    @classmethod
    def of(cls, functions: pa.Table, edges: pa.Table) -> CallGraph:
        """The graph of a cProfile roll-up (rollup_cprofile) and its caller edges (rollup_callers)."""
        keys = table_keys(functions)
        index = {k: i for i, k in enumerate(keys)}
        names = functions["function"].to_pylist()
        own = [float(v) for v in functions["tottime"].to_pylist()]
        cumtime = [float(v) for v in functions["cumtime"].to_pylist()]
        rows: list[tuple[int, int, float, int]] = []
        for callee, caller, ct, calls in zip(
            table_keys(edges), table_keys(edges, "caller_"), edges["cumtime"].to_pylist(), edges["total_calls"].to_pylist()
        ):
            if callee == caller:
                continue  # a direct recursive call: its time is inside the callee's own cumulative time
            for k in (callee, caller):
                if k not in index:  # an edge's end without a row of its own (no time of its own)
                    index[k] = len(keys)
                    keys.append(k)
                    names.append(key_label(k))
                    own.append(0.0)
                    cumtime.append(0.0)
            rows.append((index[caller], index[callee], float(ct), int(calls)))
        return cls(keys, names, own, cumtime, rows)

    def _components(self) -> tuple[list[int], list[list[int]]]:
        """Tarjan's strongly connected components, iteratively; components in reverse topological order."""
        n = len(self.keys)
        order, low = [-1] * n, [0] * n
        component = [-1] * n
        members: list[list[int]] = []
        stack: list[int] = []
        on_stack = [False] * n
        counter = 0
        for start in range(n):
            if order[start] >= 0:
                continue
            work = [(start, 0)]
            while work:
                v, i = work.pop()
                if i == 0:
                    order[v] = low[v] = counter
                    counter += 1
                    stack.append(v)
                    on_stack[v] = True
                callees = self.callees[v]
                while i < len(callees):
                    w = self.edges[callees[i]][1]
                    i += 1
                    if order[w] < 0:
                        work.append((v, i))
                        work.append((w, 0))
                        break
                    if on_stack[w]:
                        low[v] = min(low[v], order[w])
                else:
                    if low[v] == order[v]:
                        group = []
                        while True:
                            w = stack.pop()
                            on_stack[w] = False
                            component[w] = len(members)
                            group.append(w)
                            if w == v:
                                break
                        members.append(sorted(group, key=lambda f: self.keys[f]))
                    if work:
                        u = work[-1][0]
                        low[u] = min(low[u], low[v])
        return component, members

    def _entry(self, c: int, g: int) -> _Entry:
        """Component ``c`` as drawn when entered by function ``g``: a function of the cycle called by one
        function of it only is drawn below that one (all its time is inside that caller's calls); one
        with several callers in the cycle is drawn below the entry (all its time is inside the entry's)."""
        if (c, g) in self._entries:
            return self._entries[(c, g)]
        edges = self.edges
        parent: dict[int, int] = {}
        for h in self.members[self.component[g]]:
            if h != g:
                inner = [edges[e][0] for e in self.callers[h] if self.component[edges[e][0]] == c]
                parent[h] = inner[0] if len(inner) == 1 else g
        below: dict[int, list[tuple[int, float]]] = defaultdict(list)
        for h, p in parent.items():
            below[p].append((h, 1.0))
        order = [g]  # depth first from the entry; every function of the cycle is reached (it is strongly connected)
        for f in order:
            order.extend(h for h, _ in below.get(f, ()))
        inclusive: dict[int, float] = {}
        for f in reversed(order):
            inclusive[f] = self.local[f] + sum(s * inclusive[h] for h, s in below.get(f, ()))
        self._entries[(c, g)] = entry = _Entry(dict(below), inclusive)
        return entry

    def _exactness(self) -> list[bool]:
        """Per function: is its every second on one known call path? A root's functions are; below, a
        function is when its component is entered by one edge from an exact function and (a function on
        its own) that edge carries all its cumulative time, or (in a cycle) it is the entry or has one
        caller, itself exact."""
        exact = [False] * len(self.keys)
        edges = self.edges
        for c in reversed(range(len(self.members))):  # callers first
            entering = self.entering[c]
            if not entering:
                g = self._root_entry(c)
            elif len(entering) == 1 and exact[edges[entering[0]][0]]:
                g = edges[entering[0]][1]
                if len(self.members[c]) == 1:
                    ct = edges[entering[0]][2]
                    if ct < self.cumtime[g] * (1 - 1e-9) - 1e-12:
                        continue  # part of its time had no recorded caller: apportioned to this one
            else:
                continue
            exact[g] = True
            below = self._entry(c, g).below
            pending = [g]
            while pending:
                f = pending.pop()
                for h, _ in below.get(f, ()):
                    if len(self.callers[h]) == 1 and exact[f] and not exact[h]:
                        exact[h] = True
                        pending.append(h)
        return exact

    def _root_entry(self, c: int) -> int:
        """The function a root component is drawn from: the one nothing called, or a cycle's largest."""
        return max(self.members[c], key=lambda f: (ranked(self.cumtime[f]), -len(self.callers[f])))

    def _node(self, c: int, g: int, f: int, scale: float, value: float) -> Node:
        node = Node(self.keys[f], self.names[f], value, scale * self.own[f], estimated=not self._exact[f])
        self._node_of[id(node)] = (c, g, f, scale)
        return node

    def roots(self) -> list[Node]:
        out = []
        for c in range(len(self.members)):
            if not self.entering[c] and self.seconds[c] > 0:
                g = self._root_entry(c)
                out.append(self._node(c, g, g, 1.0, self.seconds[c]))
        return out

    def expand(self, node: Node, _path: tuple[Key, ...]) -> list[Node]:
        c, g, f, scale = self._node_of[id(node)]
        children = []
        for e in self.callees[f]:
            h = self.edges[e][1]
            d = self.component[h]
            value = scale * self.flow[e]
            if d != c and value > 0:
                children.append(self._node(d, h, h, value / self.seconds[d], value))
        for h, s in self._entry(c, g).below.get(f, ()):
            value = scale * s * self._entry(c, g).inclusive[h]
            if value > 0:
                children.append(self._node(c, g, h, scale * s, value))
        return children

    def estimated(self) -> float:
        return sum(o for o, exact in zip(self.own, self._exact) if not exact)

    def true_roots(self) -> int:
        return sum(1 for c, m in enumerate(self.members) if not self.entering[c] and len(m) == 1 and not self.callers[m[0]])

    def rooted_at(self) -> tuple[str, ...]:
        """The roots that have callers: recursive cycles entered from outside the profile, largest first."""
        cycles = [c for c, m in enumerate(self.members) if not self.entering[c] and (len(m) > 1 or self.callers[m[0]])]
        cycles.sort(key=lambda c: -ranked(self.seconds[c]))
        return tuple(self.names[self._root_entry(c)] for c in cycles if self.seconds[c] > 0)

    def best_caller(self) -> dict[Key, Key]:
        out = {}
        for f, callers in enumerate(self.callers):
            if callers:
                e = max(callers, key=lambda e: (ranked(self.edges[e][2]), self.edges[e][3]))
                out[self.keys[f]] = self.keys[self.edges[e][0]]
        return out
