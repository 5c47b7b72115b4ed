"""The native Python API: every documented fetch method, answered by DuckDB SQL over the store.

    >>> from proflake import Profiles
    >>> profiles = Profiles("./proflake-store")
    >>> result = profiles.by_step(5, mode="train")
    >>> result.table            # pyarrow.Table, one row per function
    >>> result.to_pstats()      # a real pstats.Stats
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from functools import cache
from typing import TYPE_CHECKING, Any, TypeVar

import duckdb
import pyarrow as pa

from proflake import sql as queries
from proflake.errors import StaleSnapshotError, StoreError, UnknownNameError, UsageError
from proflake.modes import PythonProfileModes, StepPhase, mode_label, phase_label
from proflake.query import arrowfn
from proflake.query.bounded import Bounds
from proflake.query.names import PROFILERS, SORT_KEYS
from proflake.query.registry import FETCH_METHOD_NAMES, FetchMethod, fetch_method
from proflake.schema import ALL_TABLES
from proflake.store import rollups
from proflake.store.faults import MISSING, STALE, is_vacuumed
from proflake.store.snapshot import FileSpans, Snapshot, tables_named
from proflake.store.store import Store
from proflake.times import TimeLike, epoch_seconds

if TYPE_CHECKING:
    import pstats

    from proflake.ingestion.report import IngestReport
    from proflake.sources import Source

FETCH_METHODS = FETCH_METHOD_NAMES  # the registry's names (proflake.query.registry)
JOB_PHASES = ("initialization", "training_loop", "finalization", "whole_job")
GROUP_COLUMNS = ("node_id", "start_mode", "end_mode", "job_phase")
# roll-up -> the same answer from the derived phase tables (etl/proflake/store/rollups.py), when they are fresh
_PHASE_ROLLUPS = {"rollup_cprofile": "phase_rollup_cprofile", "rollup_callers": "phase_rollup_callers"}

T = TypeVar("T")
Step = int | str  # an int, or "*" (before step 0 at the start, until the end at the end)


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
        return self.intervals.num_rows == 0

    def groups(self) -> list[tuple]:
        """Group keys of the selected intervals, in smdebug's order (one empty tuple when not grouping).

        Taken from the intervals, not the result rows, so a group whose files hold no functions is kept.
        """
        if not self.group_by:
            return [()]
        keys = {tuple(row[c] for c in self.group_by) for row in self.intervals.select(list(self.group_by)).to_pylist()}
        return sorted(keys, key=lambda key: tuple(_group_rank(c, v) for c, v in zip(self.group_by, key)))

    def group_intervals(self, group: tuple = ()) -> pa.Table:
        """The selected intervals of one group."""
        return _filter_group(self.intervals, self.group_by, group)

    def rows(self, group: tuple = ()) -> pa.Table:
        """The result rows of one group."""
        return _filter_group(self.table, self.group_by, group)

    def callers(self) -> pa.Table:
        """cProfile caller edges aggregated like the functions (pstats.add_callers)."""
        self._require("cprofile", "callers")
        if self._callers is None:
            self._callers = self._profiles._rollup(self.intervals, "rollup_callers", self._selection_params)
        return self._callers

    def to_pstats(self, group: tuple = ()) -> pstats.Stats:
        """A real pstats.Stats holding exactly what pstats.Stats.add would over the selected files."""
        self._require("cprofile", "pstats")
        callers: dict[tuple, dict[tuple, tuple]] = defaultdict(dict)
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

    def write_prof(self, path: str, group: tuple = ()) -> None:
        """Write the aggregate as a .prof file that pstats, snakeviz and tuna open."""
        self.to_pstats(group).dump_stats(path)

    def call_tree(self) -> pa.Table:
        """pyinstrument: the selected call trees merged by call path (see queries/call_tree.sql)."""
        self._require("pyinstrument", "call trees")
        return self._profiles._rollup(self.intervals, "call_tree", self._selection_params)

    def report(self, *, flame_budget: int = 2000):  # -> proflake.render.report.Report
        """The HTML report of this selection (see docs/report.md); ``.write(path)`` saves it."""
        # Through the package's lazy exports: the report is built by the render layer, above this one.
        import proflake

        return proflake.build_report(self, flame_budget=flame_budget)

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

    def _require(self, profiler: str, what: str) -> None:
        if self.profiler != profiler:
            raise UsageError(f"{what} exist only for {profiler} results; this result is {self.profiler}")


_MODE_ORDER = {label: i for i, label in enumerate(m.label for m in PythonProfileModes)}
_JOB_PHASE_ORDER = {phase: i for i, phase in enumerate(JOB_PHASES)}


def _group_rank(column: str, value: str) -> tuple:
    """Sort key of a group value: modes and job phases in smdebug's enum order, nodes by name."""
    order = _JOB_PHASE_ORDER if column == "job_phase" else _MODE_ORDER if column.endswith("_mode") else {}
    return (order.get(value, len(order)), value)


def _rows(table: pa.Table, *columns: str) -> Iterator[tuple]:
    """The values of ``columns``, a tuple per row."""
    return zip(*(table[c].to_pylist() for c in columns))


def _filter_group(table: pa.Table, columns: Sequence[str], values: tuple) -> pa.Table:
    return arrowfn.equal_all(table, columns, values)


class Profiles:
    """Questions about the profiles in one store. Reuses one DuckDB connection until ``refresh()``."""

    def __init__(
        self,
        store: Store | str | None = None,
        *,
        source_prefix: str | None = None,
        timeout: float | None = None,
        memory_limit: str | None = None,
        interruptible: bool | None = None,
    ) -> None:
        """``source_prefix`` limits every question to stats files read from below that path or URI.
        ``timeout`` (seconds) stops any one query that runs longer (QueryLimitError); ``memory_limit``
        ('4GB') caps DuckDB's memory instead of its default 80% of RAM. With a timeout (or
        ``interruptible=True``) Ctrl-C stops a running query too (KeyboardInterrupt)."""
        self.store = store if isinstance(store, Store) else Store(store)
        self.source_prefix = source_prefix
        self.bounds = Bounds(timeout, memory_limit, interruptible=interruptible)
        self._snapshot: Snapshot | None = None
        self._con: duckdb.DuckDBPyConnection | None = None
        self._files: dict[str, FileSpans] = {}
        # A second cursor on the same database and the thread that uses it: a fetch that will need the
        # caller edges (pstats) aggregates them there while this thread aggregates the functions.
        self._side: tuple[duckdb.DuckDBPyConnection, ThreadPoolExecutor] | None = None
        # Answers that only change with the store's version (jobs, scope summaries), kept until refresh().
        self._memo: dict[tuple, Any] = {}

    # -- connection -------------------------------------------------------------------------------
    def connection(self) -> duckdb.DuckDBPyConnection:
        """The fetch connection, every table of the store open (for SQL of the caller's own)."""
        return self._connection(ALL_TABLES)

    def _connection(self, tables: Iterable[str] = ()) -> duckdb.DuckDBPyConnection:
        """The fetch connection with at least intervals and ``tables`` open. Each other table opens when a
        query first names it, at the version it had when the connection was made (a Snapshot): a command
        pays for the tables it reads, ~10 ms each, and still sees one version of each."""
        if self._snapshot is None:
            snapshot = Snapshot(self.store)
            queries.install_macros(snapshot.con)
            self.bounds.configure(snapshot.con)
            self._snapshot, self._con, self._files = snapshot, snapshot.con, snapshot.files
        return self._snapshot.open(tables)

    def _connection_for(self, *names: str) -> duckdb.DuckDBPyConnection:
        """The fetch connection with the tables that queries/<name>.sql of each name read open."""
        return self._connection(frozenset().union(*map(_tables_of, names)))

    def refresh(self) -> None:
        """Forget the cached view of the store, so the next question sees what was ingested since."""
        if self._side is not None:
            cursor, thread = self._side
            thread.shutdown(wait=True)
            cursor.close()
            self._side = None
        if self._con is not None:
            self._con.close()
        self._snapshot, self._con, self._files = None, None, {}
        self._memo.clear()

    def _memoised(self, key: tuple, compute: Any) -> Any:
        if key not in self._memo:
            self._memo[key] = compute()
        return self._memo[key]

    def close(self) -> None:
        self.refresh()
        self.bounds.close()

    def _fresh(self, call: Callable[[], T]) -> T:
        """``call()``; if compaction's vacuum removed files this reader had listed, refresh once and
        call again; if the fresh snapshot's files are missing too, the store is damaged (StoreError,
        pointing at ``proflake check``)."""
        try:
            return call()
        except Exception as e:
            if not is_vacuumed(e):
                raise
        self.refresh()
        try:
            return call()
        except Exception as e:
            if is_vacuumed(e):  # the fresh snapshot's own files are missing: damage, not compaction
                raise StoreError(MISSING) from e
            raise

    def _run(self, name: str, params: dict[str, Any]) -> pa.Table:
        """Run queries/<name>.sql on the fetch connection, within the time limit and interruptible (the
        one place a question reaches the engine; proflake.spark answers the same questions on Spark by
        overriding it)."""
        con = self._connection_for(name)
        return self.bounds.run(con, lambda: queries.run_named(con, name, params))

    def ingest(self, source: str | Source, **kwargs: Any) -> IngestReport:
        """Ingest ``source`` into this store (``proflake.ingest``), then refresh, so the next question sees it."""
        from proflake.operations import ingest

        report = ingest(source, self.store, **kwargs)
        self.refresh()
        return report

    # -- listings ---------------------------------------------------------------------------------
    def jobs(self, profiler: str | None = None) -> pa.Table:
        return self._fresh(lambda: self._run("list_jobs", {"profiler": _profiler(profiler), "source_prefix": self.source_prefix}))

    def batches(self) -> pa.Table:
        """Ingest runs, newest first (queries/list_batches.sql), where a batch the SQL calls 'running'
        is 'stopped' unless it is the newest and a run holds the writer lock: killed, or failed where
        it could not record so (a full disk); the next ingest repairs it."""
        table = self._fresh(lambda: self._run("list_batches", {}))
        status = table["status"].to_pylist()
        if "running" not in status:
            return table
        from proflake.store.lock import lock_holder

        held = lock_holder(self.store) is not None
        newest_running = status.index("running")
        status = ["stopped" if s == "running" and not (held and i == newest_running) else s for i, s in enumerate(status)]
        return table.set_column(table.schema.get_field_index("status"), "status", pa.array(status, pa.string()))

    def errors(self, kind: str | None = None, *, include_closed: bool = False) -> pa.Table:
        """The quarantine's open entries, newest failure first (queries/list_errors.sql); with
        ``include_closed`` also the closed ones (files a later run no longer found under their source)."""
        return self._fresh(lambda: self._run("list_errors", {"error_kind": kind, "include_closed": include_closed}))

    def job_ids(self) -> list[str]:
        """The store's job ids in order (under ``source_prefix`` when set): list_jobs' ids, read alone."""
        return list(self._memoised(
            ("job_ids", self.source_prefix),
            lambda: self._fresh(lambda: self._run("list_job_ids", {"source_prefix": self.source_prefix}))["job_id"].to_pylist(),
        ))

    def nodes(
        self, *, job: str | Sequence[str] | None = None, all_jobs: bool = False, profiler: str | None = None
    ) -> list[str]:
        def run() -> list[str]:
            scope = self.scope(job=job, all_jobs=all_jobs, node=None, profiler=profiler, default_profiler=False)
            return self._run("list_node_ids", scope.params())["node_id"].to_pylist()

        return self._fresh(run)

    def list_profile_stats(
        self,
        *,
        job: str | Sequence[str] | None = None,
        all_jobs: bool = False,
        node: str | None = None,
        profiler: str | None = None,
    ) -> pa.Table:
        def run() -> pa.Table:
            scope = self.scope(job=job, all_jobs=all_jobs, node=node, profiler=profiler, default_profiler=False)
            return self._select("list_profile_stats", scope.params())

        return self._fresh(run)

    def _select(self, query: str, params: dict[str, Any]) -> pa.Table:
        """The intervals a selection query picks (it returns their rowids), in the query's order."""
        rows = self._run(query, params)["interval_row"]
        return arrowfn.take(self._intervals(), rows)

    def intervals_table(self) -> pa.Table:
        """Every interval of the current view of the store (the ``intervals`` view, all sources), as Arrow."""
        return self._intervals()

    def _intervals(self) -> pa.Table:
        """The connection's intervals table as Arrow, row i being the row whose rowid is i (a snapshot
        nothing writes to, so its rowids run 0..n-1). Selection queries return rowids; the columns are
        gathered here (why: docs/internals.md, "Selections return row ids").
        """
        return self._memoised(
            ("intervals",),
            lambda: self.bounds.run(
                self._connection(), lambda: self._connection().sql("SELECT * FROM intervals ORDER BY rowid").to_arrow_table()
            ),
        )

    # -- scope ------------------------------------------------------------------------------------
    def scope(
        self,
        *,
        job: str | Sequence[str] | None,
        all_jobs: bool,
        node: str | None,
        profiler: str | None,
        default_profiler: bool = True,
    ) -> Scope:
        """Resolve job, node and profiler as the CLI and API document them."""
        known_jobs = self.job_ids()
        if job is not None:
            wanted = [job] if isinstance(job, str) else list(job)
            for j in wanted:
                if j not in known_jobs:
                    raise UnknownNameError("job", j, known_jobs or ["(the store is empty)"])
            job_ids: list[str] | None = wanted
        elif all_jobs or len(known_jobs) <= 1:
            job_ids = None
        else:
            raise UsageError(
                f"the store holds {len(known_jobs)} jobs ({', '.join(known_jobs)}); "
                "pass --job ID (job= in Python) or --all-jobs"
            )
        profiler = _profiler(profiler)
        prefix = self.source_prefix
        summary = self._memoised(
            ("scope", tuple(job_ids or ()), prefix),
            lambda: self._run("scope", {"job_ids": job_ids, "node_id": None, "source_prefix": prefix}).to_pylist(),
        )
        by_profiler = {row["profiler"]: row for row in summary}
        if profiler is None and default_profiler:
            profiler = "cprofile" if "cprofile" in by_profiler or not by_profiler else "pyinstrument"
        node_id: str | None = None
        if node is not None and node != "all":
            if node == "any":
                # smdebug's "any": the node of the earliest interval of the profiler asked about.
                candidates = [by_profiler[profiler]] if profiler in by_profiler else summary
                first = min(candidates, key=lambda r: (r["first_start_time_us"], r["first_node_id"]), default=None)
                node_id = first["first_node_id"] if first else None
            else:
                known_nodes = self._memoised(
                    ("nodes", tuple(job_ids or ()), prefix),
                    lambda: self._run(
                        "list_node_ids", {"job_ids": job_ids, "node_id": None, "profiler": None, "source_prefix": prefix}
                    )["node_id"].to_pylist(),
                )
                if node not in known_nodes:
                    raise UnknownNameError("node", node, known_nodes or ["(no nodes in scope)"])
                node_id = node
        return Scope(job_ids=job_ids, node_id=node_id, profiler=profiler, source_prefix=prefix)

    # -- fetch methods ----------------------------------------------------------------------------
    def fetch(
        self,
        method: str,
        *,
        job: str | Sequence[str] | None = None,
        all_jobs: bool = False,
        node: str | None = None,
        profiler: str | None = None,
        per_node: bool = False,
        sort: str = "cumtime",
        top: int | None = None,
        callers: bool = False,
        **arguments: Any,
    ) -> FetchResult:
        """Run one documented fetch method; ``arguments`` are the method's own (see the by_* wrappers).

        ``callers=True`` says the caller edges will be wanted (``to_pstats``, ``write_prof``): a cProfile
        result then aggregates them alongside the functions, on a second DuckDB cursor, rather than after.
        """
        return self._fresh(
            lambda: self._fetch(method, job=job, all_jobs=all_jobs, node=node, profiler=profiler, per_node=per_node,
                                sort=sort, top=top, callers=callers, **arguments)
        )

    def _fetch(
        self,
        method: str,
        *,
        job: str | Sequence[str] | None,
        all_jobs: bool,
        node: str | None,
        profiler: str | None,
        per_node: bool,
        sort: str,
        top: int | None,
        callers: bool,
        **arguments: Any,
    ) -> FetchResult:
        spec = fetch_method(method)
        method = spec.name
        if sort not in SORT_KEYS:
            raise UnknownNameError("sort key", sort, SORT_KEYS)
        if top is not None and top < 1:
            raise UsageError(f"--top must be a positive number of rows, not {top}")
        scope = self.scope(job=job, all_jobs=all_jobs, node=node, profiler=profiler)
        params = {**scope.params(), **_method_params(spec, arguments)}
        intervals = arrowfn.sort_by(self._select(method, params), ("start_time_us", "node_id", "source_uri"))
        group_by = (("node_id",) if per_node else ()) + spec.group_by
        rollup_params = {
            **params,
            "method": method,
            "by_node": per_node,
            "by_modes": "start_mode" in spec.group_by,
            "by_job_phase": "job_phase" in spec.group_by,
            "sort": sort,
            "top": top,
        }
        cprofile = scope.profiler == "cprofile"
        # Settled (its tables opened) before the edges' aggregation starts on the other cursor.
        query = self._rollup_query(intervals, "rollup_cprofile" if cprofile else "rollup_pyinstrument", rollup_params)
        edges = self._rollup_aside(intervals, "rollup_callers", rollup_params) if callers and cprofile else None
        try:
            table = self._run(*query)
        except BaseException:
            if edges is not None:  # never left running: stopped (time limit, Ctrl-C) or failed, stop it too
                if self._side is not None:
                    self._side[0].interrupt()
                wait([edges])
            raise
        edge_table = edges.result() if edges is not None else None
        unused = [c for c in GROUP_COLUMNS if c not in group_by]
        table = table.drop_columns(unused)
        profiler = scope.profiler or "cprofile"
        return FetchResult(method, profiler, scope, intervals, table, group_by, self, rollup_params, edge_table)

    def _rollup(self, selection: pa.Table, rollup: str, params: dict[str, Any]) -> pa.Table:
        try:
            return self._run(*self._rollup_query(selection, rollup, params))
        except Exception as e:
            if is_vacuumed(e):  # a FetchResult's later roll-up (callers, pstats) over a compacted store
                raise StaleSnapshotError(STALE + "; then fetch again") from e
            raise

    def _rollup_aside(self, selection: pa.Table, rollup: str, params: dict[str, Any]) -> Future[pa.Table] | None:
        """``_rollup`` on the second cursor's thread. DuckDB releases the GIL while it runs a query, so
        the two aggregations share the cores; the query and its parameters are settled on this thread.

        None for a store on S3: its tables are Arrow datasets registered on the first connection only,
        which a cursor does not see; the roll-up then runs when it is first asked for."""
        if self.store.is_remote:
            return None
        name, values = self._rollup_query(selection, rollup, params)
        if self._side is None:
            self._side = (self._connection().cursor(), ThreadPoolExecutor(1, thread_name_prefix="proflake-rollup"))
        cursor, thread = self._side
        return thread.submit(queries.run_named, cursor, name, values)

    def _rollup_query(self, selection: pa.Table, rollup: str, params: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        """The query that answers a roll-up over the selected intervals, and its parameters (the tables
        it reads opened)."""
        if rollup in _PHASE_ROLLUPS and self._phase_rollups_answer(params):
            self._connection_for(_PHASE_ROLLUPS[rollup])
            return _PHASE_ROLLUPS[rollup], params
        self._connection_for(rollup)
        return rollup, rollup_parameters(selection, params, self._files)

    def _phase_rollups_answer(self, params: dict[str, Any]) -> bool:
        """Whether the pre-summed phase tables hold this roll-up: a question about every interval of
        whole jobs (no source prefix) whose phase roll-ups were built from their live intervals."""
        if params.get("method") not in ("by_training_phase", "by_job_phase") or params["source_prefix"] is not None:
            return False
        fresh, live = self._memoised(("phase_rollups",), lambda: self._phase_rollup_state())
        wanted = live if params["job_ids"] is None else set(params["job_ids"])
        return wanted <= fresh

    def _phase_rollup_state(self) -> tuple[set[str], set[str]]:
        con = self._connection_for("phase_fingerprints", "phase_built_from")
        return rollups.fresh_jobs(con), set(rollups.live_fingerprints(con))

    def by_time(self, start_time_s: TimeLike, end_time_s: TimeLike, **scope: Any) -> FetchResult:
        """Intervals overlapping [start, end], containment included. Each end is seconds since the epoch,
        ISO 8601 text or a ``datetime`` (UTC when it has no offset): ``proflake.times.epoch_seconds``."""
        return self.fetch("by_time", start_time_s=start_time_s, end_time_s=end_time_s, **scope)

    def by_step(
        self,
        start_step: Step,
        end_step: Step | None = None,
        mode: str | PythonProfileModes = "train",
        start_phase: str | StepPhase = "stepstart",
        end_phase: str | StepPhase = "stepend",
        **scope: Any,
    ) -> FetchResult:
        return self.fetch(
            "by_step",
            start_step=start_step,
            end_step=end_step,
            mode=mode,
            start_phase=start_phase,
            end_phase=end_phase,
            **scope,
        )

    def between_modes(
        self, start_mode: str | PythonProfileModes, end_mode: str | PythonProfileModes, **scope: Any
    ) -> FetchResult:
        return self.fetch("between_modes", start_mode=start_mode, end_mode=end_mode, **scope)

    def pre_step_zero(self, **scope: Any) -> FetchResult:
        return self.fetch("pre_step_zero", **scope)

    def post_hook_close(self, **scope: Any) -> FetchResult:
        return self.fetch("post_hook_close", **scope)

    def by_training_phase(self, **scope: Any) -> FetchResult:
        return self.fetch("by_training_phase", **scope)

    def by_job_phase(self, **scope: Any) -> FetchResult:
        return self.fetch("by_job_phase", **scope)

    def report(self, method: str = "by_job_phase", *, flame_budget: int = 2000, **selection: Any):
        """The HTML report of a selection (default: every interval of the job), as ``fetch`` selects it."""
        return self.fetch(method, **selection).report(flame_budget=flame_budget)

    def select(
        self,
        method: str,
        *,
        job: str | Sequence[str] | None = None,
        node: str | None = None,
        profiler: str | None = None,
        **arguments: Any,
    ) -> tuple[Scope, pa.Table]:
        """The scope and the intervals a fetch method selects, not aggregated (the sides of ``diff``)."""
        spec = fetch_method(method)
        scope = self.scope(job=job, all_jobs=False, node=node, profiler=profiler)
        return scope, self._select(spec.name, {**scope.params(), **_method_params(spec, arguments)})

    def aggregate(self, query: str, selected: pa.Table, params: dict[str, Any]) -> pa.Table:
        """Run queries/<query>.sql over selected intervals, with the roll-up parameters (rollup_parameters)."""
        if type(self).connection is not Profiles.connection:
            self.connection()  # an engine of its own (SparkProfiles) has no DuckDB connection, and says so
        con = self._connection_for(query)
        return queries.run_named(con, query, rollup_parameters(selected, params, self._files))

    def diff(self, base: Any, head: Any, **options: Any):  # -> proflake.query.diff.DiffResult
        """What changed from ``base`` to ``head``, per function, tested against the step-to-step noise.

        Each side is a job id, or a dict of ``fetch`` arguments (``job``, ``node``, ``method``, the method's
        own); ``options``: ``profiler``, ``per`` (step|second), ``match`` (name|line), ``alpha``,
        ``confidence``, ``min_share``. See proflake.query.diff and docs/diff.md.
        """
        from proflake.query.diff import diff

        return diff(self, base, head, **options)

    def sql(self, query: str, params: dict[str, Any] | None = None) -> pa.Table:
        """Ad hoc SQL over the store's tables and convenience views (intervals, function_stats,
        step_wall_time, ...), on a read-only connection (etl/proflake/query/readonly.py): only queries run, and ``params``
        are bound by DuckDB as named parameters ($name), never pasted into the SQL."""
        from proflake.query import readonly

        def run() -> pa.Table:
            con = self._sql_connection()
            return self.bounds.run(con, lambda: readonly.run(con, query, params))

        return self._fresh(run)

    def sql_schema(self) -> pa.Table:
        """The tables and views ``sql`` sees, one row per column: name, kind, position, column_name, data_type."""
        from proflake.query import readonly

        def run() -> pa.Table:
            con = self._sql_connection()
            return self.bounds.run(con, lambda: readonly.schema(con))

        return self._fresh(run)

    def _sql_connection(self) -> duckdb.DuckDBPyConnection:
        """The read-only connection of ``sql``, rebuilt whenever the fetch connection is (after ``refresh()``),
        so both see the same version of the store."""
        from proflake.query import readonly

        base = self._connection()
        cached = getattr(self, "_sql_con", None)
        if cached is not None and cached[0] is base:
            return cached[1]
        if cached is not None:
            cached[1].close()
        con = readonly.connect(self.store, self.bounds)
        self._sql_con = (base, con)
        return con


@cache
def _tables_of(query: str) -> frozenset[str]:
    """The store's tables queries/<query>.sql reads."""
    return tables_named(queries.query_text(query))


def _profiler(profiler: str | None) -> str | None:
    if profiler is None:
        return None
    name = profiler.strip().lower()
    if name not in PROFILERS:
        raise UnknownNameError("profiler", profiler, PROFILERS)
    return name


# Steps are compared as the 64-bit integers the store holds (a DOUBLE cannot tell 2**63-1 from 2**63-2);
# '*' at the end ("until the end") is the largest one, as NULL end steps are in the step_end macro.
STEP_MAX = 2**63 - 1


def parse_step(value: Step | float, *, at_end: bool) -> int:
    """A step as the SQL compares it: '*' is -1 at the start and the largest step at the end, like smdebug."""
    if isinstance(value, str):
        text = value.strip()
        if text == "*":
            return STEP_MAX if at_end else -1
        try:
            value = int(text)
        except ValueError:
            raise UsageError(f"step {value!r} is not a whole number or '*'") from None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise UsageError(f"step {value!r} is not a whole number or '*'")
    if isinstance(value, float):
        if value == math.inf and at_end:
            return STEP_MAX
        if not value.is_integer():
            raise UsageError(f"step {value!r} is not a whole number or '*'")
        value = int(value)
    if not -(2**63) <= value <= STEP_MAX:
        raise UsageError(f"step {value} is outside the 64-bit range a step can hold")
    return value


def _method_params(spec: FetchMethod, a: dict[str, Any]) -> dict[str, Any]:
    """The SQL parameters of a method's own arguments (the registry says which it takes)."""
    method = spec.name
    unexpected = set(a) - set(spec.argument_names)
    if unexpected:
        raise UsageError(f"fetch {method} takes no argument {', '.join(sorted(unexpected))}")
    if method == "by_time":
        start, end = epoch_seconds(a["start_time_s"]), epoch_seconds(a["end_time_s"])
        if end < start:
            raise UsageError(f"the time window ends ({a['end_time_s']}) before it starts ({a['start_time_s']})")
        return {"start_time_us": start * 1e6, "end_time_us": end * 1e6}
    if method == "by_step":
        start_step = parse_step(a["start_step"], at_end=False)
        end_raw = a.get("end_step")
        end_step = start_step if end_raw is None else parse_step(end_raw, at_end=True)
        return {
            "start_step": start_step,
            "end_step": end_step,
            "mode": mode_label(a.get("mode", "train")),
            "start_phase": phase_label(a.get("start_phase", "stepstart")),
            "end_phase": phase_label(a.get("end_phase", "stepend")),
        }
    if method == "between_modes":
        return {"start_mode": mode_label(a["start_mode"]), "end_mode": mode_label(a["end_mode"])}
    return {}


def rollup_parameters(selection: pa.Table, params: dict[str, Any], files: Mapping[str, FileSpans]) -> dict[str, Any]:
    """The parameters of a roll-up over a fetch's selected intervals: ``params`` plus their ids (the list
    parameter ``$interval_ids``), their time span, and each fact table's files that can hold them.

    ``files`` (from ``Store.connect_with_files``) narrows each fact table to the files whose rows can start
    inside the selection's time span and belong to one of its nodes (why ids as a list parameter:
    docs/internals.md, "Roll-ups take the selection's ids").
    """
    starts = selection["start_time_us"]
    low, high = arrowfn.min_max(starts) if len(starts) else (0.0, -1.0)
    nodes = arrowfn.unique(selection["node_id"])
    span: dict[str, Any] = {
        "interval_ids": selection["interval_id"].to_pylist(),
        "min_start_time_us": low,
        "max_start_time_us": high,
    }
    for table, spans in files.items():
        # read_parquet needs at least one file; with none overlapping, any one answers nothing.
        span[f"{table}_files"] = spans.overlapping(low, high, nodes) or spans.uris[:1]
    return {**params, **span}
