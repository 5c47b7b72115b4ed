"""The answer to one fetch: ``FetchResult`` (the intervals selected and their functions aggregated) and
``Scope`` (which data a question is about)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from proflake import arrowfn
from proflake.errors import UsageError
from proflake.formats import CALL_TREE, CALLER_GRAPH, SHAPES, is_caller_graph
from proflake.modes import PythonProfileModes

if TYPE_CHECKING:
    import pstats

    from proflake.query.profiles import Profiles
    from proflake.render.report import Report

JOB_PHASES = ("initialization", "training_loop", "finalization", "whole_job")
GROUP_COLUMNS = ("node_id", "start_mode", "end_mode", "job_phase")
Group = tuple[Any, ...]  # one group's key: a value per group_by column (empty when not grouping)
Row = tuple[Any, ...]


@dataclass(frozen=True)
class Scope:
    """Which data a question is about, after defaults and names have been resolved."""

    job_ids: list[str] | None  # None: all jobs
    node_id: str | None  # None: all nodes
    profiler: str | None  # None: both (only list/nodes/jobs)
    source_prefix: str | None = None  # None: files from any source

    def params(self) -> dict[str, Any]:
        return {
            "job_ids": self.job_ids,
            "node_id": self.node_id,
            "profiler": self.profiler,
            "source_prefix": self.source_prefix,
        }


@dataclass
class FetchResult:
    """The answer to one fetch: the intervals selected and their functions aggregated."""

    method: str
    profiler: str
    scope: Scope
    intervals: pa.Table
    table: pa.Table
    group_by: tuple[str, ...]
    _profiles: Profiles = field(repr=False)
    _selection_params: dict[str, Any] = field(repr=False)
    _callers: pa.Table | None = field(default=None, repr=False)
    _all_functions: pa.Table | None = field(default=None, repr=False)

    @property
    def empty(self) -> bool:
        return not self.intervals.num_rows

    @property
    def time_unit(self) -> str:
        """What the result's times count: 'seconds', 'samples' (sampled files of unknown rate, docs/formats.md)
        or 'mixed' (both: their sums mean nothing; narrow the selection)."""
        if "time_unit" not in self.intervals.column_names:
            return "seconds"  # a store from before the column: every file was timed in seconds
        units = {unit or "seconds" for unit in arrowfn.unique(self.intervals["time_unit"])}
        return units.pop() if len(units) == 1 else "mixed" if units else "seconds"

    def groups(self) -> list[Group]:
        """Group keys of the selected intervals, in smdebug's order (one empty tuple when not grouping).

        Taken from the intervals, not the result rows, so a group whose files hold no functions is kept.
        """
        if not self.group_by:
            return [()]
        keys = {tuple(row[c] for c in self.group_by) for row in self.intervals.select(list(self.group_by)).to_pylist()}
        return sorted(keys, key=lambda key: tuple(_group_rank(c, v) for c, v in zip(self.group_by, key)))

    def group_intervals(self, group: Group = ()) -> pa.Table:
        """The selected intervals of one group."""
        return _filter_group(self.intervals, self.group_by, group)

    def rows(self, group: Group = ()) -> pa.Table:
        """The result rows of one group."""
        return _filter_group(self.table, self.group_by, group)

    def callers(self) -> pa.Table:
        """cProfile caller edges aggregated like the functions (pstats.add_callers)."""
        self._require(CALLER_GRAPH, "callers")
        if self._callers is None:
            self._callers = self._profiles._rollup(self.intervals, "rollup_callers", self._selection_params)
        return self._callers

    def to_pstats(self, group: Group = ()) -> pstats.Stats:
        """A real pstats.Stats holding exactly what pstats.Stats.add would over the selected files."""
        self._require(CALLER_GRAPH, "pstats")
        callers: dict[Row, dict[Row, Row]] = defaultdict(dict)
        edges = self.callers()
        if self.group_by:
            edges = _filter_group(edges, self.group_by, group)
        # Column by column: a row at a time (to_pylist's dicts) took twice as long.
        for callee, caller, value in zip(
            _rows(edges, "filename", "lineno", "function_name"),
            _rows(edges, "caller_filename", "caller_lineno", "caller_function_name"),
            _rows(edges, "total_calls", "primitive_calls", "tottime", "cumtime"),
        ):
            callers[callee][caller] = value
        import pstats  # (only here: 3 ms of every command's start-up otherwise)

        stats = pstats.Stats()
        functions = _filter_group(self._every_function(), self.group_by, group)
        for key, (cc, nc, tt, ct) in zip(
            _rows(functions, "filename", "lineno", "function_name"),
            _rows(functions, "primitive_calls", "total_calls", "tottime", "cumtime"),
        ):
            stats.stats[key] = (cc, nc, tt, ct, callers.get(key, {}))  # type: ignore[attr-defined]  # typeshed's Stats omits the attributes pstats sets
        stats.files = self.group_intervals(group)["source_uri"].to_pylist()  # type: ignore[attr-defined]  # typeshed's Stats omits the attributes pstats sets
        stats.get_top_level_stats()
        return stats

    def _every_function(self) -> pa.Table:
        """The roll-up without --top: a pstats.Stats or .prof file always holds every function."""
        if self._selection_params["top"] is None:
            return self.table
        if self._all_functions is None:
            params = {**self._selection_params, "top": None}
            self._all_functions = self._profiles._rollup(self.intervals, "rollup_cprofile", params)
        return self._all_functions

    def write_prof(self, path: str, group: Group = ()) -> None:
        """Write the aggregate as a .prof file that pstats, snakeviz and tuna open."""
        self.to_pstats(group).dump_stats(path)

    def call_tree(self) -> pa.Table:
        """pyinstrument: the selected call trees merged by call path (see queries/call_tree.sql)."""
        self._require(CALL_TREE, "call trees")
        return self._profiles._rollup(self.intervals, "call_tree", self._selection_params)

    def report(self, *, flame_budget: int = 2000) -> Report:
        """The HTML report of this selection (see docs/report.md); ``.write(path)`` saves it."""
        # proflake.pages reads the report's data here (proflake.query.page_data) and draws it with the render
        # layer, above this one: the one upward import tests/test_architecture.py allows.
        from proflake.pages import build_report

        return build_report(self, flame_budget=flame_budget)

    def _repr_html_(self) -> str:
        """A notebook shows the result as a table (its first 20 rows) under a one-line summary."""
        import html

        rows = self.table.slice(0, 20).to_pylist()
        names = self.table.column_names

        def cell(v: Any) -> str:
            text = f"{v:.6f}" if isinstance(v, float) else "" if v is None else str(v)
            return html.escape(text)

        head = "".join(f"<th>{html.escape(n)}</th>" for n in names)
        body = "".join("<tr>" + "".join(f"<td>{cell(r[n])}</td>" for n in names) + "</tr>" for r in rows)
        more = f", first {len(rows)} shown" if self.table.num_rows > len(rows) else ""
        summary = (
            f"{html.escape(self.method)}: {self.profiler}, {self.intervals.num_rows} interval(s), "
            f"{self.table.num_rows} row(s){more}"
        )
        return f"<div><p><b>proflake</b> {summary}</p><table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table></div>"

    def _require(self, shape: str, what: str) -> None:
        """``what`` exists only where the rows are of ``shape`` (a caller graph, or a call tree)."""
        if is_caller_graph(self.profiler) != (shape == CALLER_GRAPH):
            profiler = SHAPES[shape].profiler
            raise UsageError(f"{what} exist only for {profiler} results; this result is {self.profiler}")


_MODE_ORDER = {label: i for i, label in enumerate(m.label for m in PythonProfileModes)}
_JOB_PHASE_ORDER = {phase: i for i, phase in enumerate(JOB_PHASES)}


def _group_rank(column: str, value: str) -> tuple[int, str]:
    """Sort key of a group value: modes and job phases in smdebug's enum order, nodes by name."""
    order = _JOB_PHASE_ORDER if column == "job_phase" else _MODE_ORDER if column.endswith("_mode") else {}
    return (order.get(value, len(order)), value)


def _rows(table: pa.Table, *columns: str) -> Iterator[Row]:
    """The values of ``columns``, a tuple per row."""
    return zip(*(table[c].to_pylist() for c in columns))


def _filter_group(table: pa.Table, columns: Sequence[str], values: Group) -> pa.Table:
    return arrowfn.equal_all(table, columns, values)

