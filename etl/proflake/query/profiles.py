"""The native Python API: every documented fetch method, answered by DuckDB SQL over the store.

    >>> from proflake import Profiles
    >>> profiles = Profiles("./proflake-store")
    >>> result = profiles.by_step(5, mode="train")
    >>> result.table            # pyarrow.Table, one row per function
    >>> result.to_pstats()      # a real pstats.Stats
"""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import wait
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from proflake import arrowfn
from proflake.errors import UnknownNameError, UsageError
from proflake.formats import DEFAULT_PROFILER, PROFILERS, is_caller_graph
from proflake.modes import PythonProfileModes, StepPhase
from proflake.query.engine import Engine
from proflake.query.names import SORT_KEYS
from proflake.query.params import Step, method_params, profiler_name
from proflake.query.registry import FETCH_METHOD_NAMES, fetch_method
from proflake.query.result import GROUP_COLUMNS, JOB_PHASES, FetchResult, Scope
from proflake.times import TimeLike

if TYPE_CHECKING:
    from proflake.ingestion.report import IngestReport
    from proflake.query.diff import DiffResult
    from proflake.query.trend import TrendResult
    from proflake.render.report import Report
    from proflake.sources import Source

FETCH_METHODS = FETCH_METHOD_NAMES  # the registry's names (proflake.query.registry)
__all__ = ["FETCH_METHODS", "JOB_PHASES", "FetchResult", "Profiles", "Scope", "Step"]


class Profiles(Engine):
    """Questions about the profiles in one store: listings, scopes and every documented fetch method.
    Reuses one DuckDB connection until ``refresh()`` (proflake.query.engine)."""

    def ingest(self, source: str | Source, **kwargs: Any) -> IngestReport:
        """Ingest ``source`` into this store (``proflake.ingest``), then refresh, so the next question sees it."""
        from proflake.operations import ingest

        report = ingest(source, self.store, **kwargs)
        self.refresh()
        return report

    # -- listings ---------------------------------------------------------------------------------
    def jobs(self, profiler: str | None = None) -> pa.Table:
        return self._fresh(lambda: self._run("list_jobs", {"profiler": profiler_name(profiler), "source_prefix": self.source_prefix}))

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
            nodes: list[str] = self._run("list_node_ids", scope.params())["node_id"].to_pylist()
            return nodes

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
        profiler = profiler_name(profiler)
        prefix = self.source_prefix
        summary = self._memoised(
            ("scope", tuple(job_ids or ()), prefix),
            lambda: self._run("scope", {"job_ids": job_ids, "node_id": None, "source_prefix": prefix}).to_pylist(),
        )
        by_profiler = {row["profiler"]: row for row in summary}
        if profiler is None and default_profiler:
            profiler = next((p for p in PROFILERS if p in by_profiler), DEFAULT_PROFILER)
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
        params = {**scope.params(), **method_params(spec, arguments)}
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
        cprofile = is_caller_graph(scope.profiler)
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
        profiler = scope.profiler or DEFAULT_PROFILER
        return FetchResult(method, profiler, scope, intervals, table, group_by, self, rollup_params, edge_table)

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

    def report(self, method: str = "by_job_phase", *, flame_budget: int = 2000, **selection: Any) -> Report:
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
        return scope, self._select(spec.name, {**scope.params(), **method_params(spec, arguments)})

    def diff(self, base: Any, head: Any, **options: Any) -> DiffResult:
        """What changed from ``base`` to ``head``, per function, tested against the step-to-step noise.

        Each side is a job id, or a dict of ``fetch`` arguments (``job``, ``node``, ``method``, the method's
        own); ``options``: ``profiler``, ``per`` (step|second), ``match`` (name|line), ``alpha``,
        ``confidence``, ``min_share``. See proflake.query.diff and docs/diff.md.
        """
        from proflake.query.diff import diff

        return diff(self, base, head, **options)


    def trend(
        self,
        *,
        jobs: Sequence[str] | None = None,
        job_glob: str | None = None,
        profiler: str | None = None,
        node: str | None = None,
        min_change: float = 0.10,
        **options: Any,
    ) -> TrendResult:
        """What changed across a series of jobs (``jobs`` and/or those matching ``job_glob``; neither: every
        job), in the order they started: per function, the jobs where its own time per train step shifted by
        at least ``min_change`` (0.10 = 10%), tested against the step noise. ``options``: ``min_share``,
        ``alpha``. See proflake.query.trend and docs/trend.md.
        """
        from proflake.query.trend import trend

        return self._fresh(lambda: trend(
            self, jobs=jobs, job_glob=job_glob, profiler=profiler, node=node, min_change=min_change, **options
        ))
