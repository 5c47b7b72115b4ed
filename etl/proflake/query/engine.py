"""How ``Profiles`` reaches the store: one DuckDB connection on a snapshot (each table opened when a
query first names it), answers memoised until ``refresh()``, a retry after compaction's vacuum, named
queries run within the time and memory bounds, the roll-up queries, and read-only ad hoc SQL.

``proflake.spark.SparkProfiles`` answers the same questions on Spark by overriding these methods.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from concurrent.futures import Future, ThreadPoolExecutor
from functools import cache
from typing import Any, TypeVar

import duckdb
import pyarrow as pa

from proflake import arrowfn
from proflake import sql as queries
from proflake.errors import StaleSnapshotError, StoreError
from proflake.query.bounded import Bounds
from proflake.query.params import rollup_parameters
from proflake.schema import ALL_TABLES
from proflake.store import rollups
from proflake.store.faults import MISSING, STALE, is_vacuumed
from proflake.store.snapshot import FileSpans, Snapshot, tables_named
from proflake.store.store import Store

T = TypeVar("T")
# roll-up -> the same answer from the derived phase tables (etl/proflake/store/rollups.py), when they are fresh
_PHASE_ROLLUPS = {"rollup_cprofile": "phase_rollup_cprofile", "rollup_callers": "phase_rollup_callers"}


class Engine:
    """One store's DuckDB side, shared by every question ``Profiles`` asks. Reuses one DuckDB connection
    until ``refresh()``."""

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
        self._memo: dict[tuple[Any, ...], Any] = {}
        # The read-only connection of sql(), until refresh().
        self._sql_con: duckdb.DuckDBPyConnection | None = None
        # The jobs whose intervals the job connection holds, those intervals, and the connection (_select).
        self._jobs_con: tuple[tuple[str, ...], pa.Table, duckdb.DuckDBPyConnection] | None = None

    # -- connection -------------------------------------------------------------------------------
    def connection(self) -> duckdb.DuckDBPyConnection:
        """The fetch connection, every table of the store open (for SQL of the caller's own)."""
        return self._connection(ALL_TABLES)

    def _connection(self, tables: Iterable[str] = ()) -> duckdb.DuckDBPyConnection:
        """The fetch connection with at least intervals and ``tables`` open. Each other table opens when a
        query first names it, at the version it had when the connection was made (a Snapshot): a command
        pays for the tables it reads, ~10 ms each, and still sees one version of each."""
        if self._snapshot is None:
            # The copy of intervals waits for _held_intervals on a local store. On S3 it is made at once,
            # where the store's reachability and permissions are found and explained (store/faults.py).
            snapshot = Snapshot(self.store, defer_copy=not self.store.is_remote)
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
        if self._jobs_con is not None:
            self._jobs_con[2].close()  # a cursor of self._con's database: closed first
            self._jobs_con = None
        if self._con is not None:
            self._con.close()
        if self._sql_con is not None:
            self._sql_con.close()
            self._sql_con = None
        self._snapshot, self._con, self._files = None, None, {}
        self._memo.clear()

    def _memoised(self, key: tuple[Any, ...], compute: Callable[[], T]) -> T:
        if key not in self._memo:
            self._memo[key] = compute()
        answer: T = self._memo[key]
        return answer

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

    def _held_intervals(self) -> None:
        """Selections (rowids) and the intervals' columns read the in-memory copy of intervals: make it."""
        self._connection()
        assert self._snapshot is not None
        self._snapshot.hold_intervals()

    def _select(self, query: str, params: dict[str, Any]) -> pa.Table:
        """The intervals a selection query picks (it returns their rowids), in the query's order.

        A question about some jobs, while the copy of every interval is still deferred (a local store
        that no whole-store question has needed it on), runs on a copy of just those jobs' intervals:
        at 10^6 intervals ``list --job`` copied 1.9 GB for a job's 4,000."""
        if params.get("job_ids") is not None and _tables_of(query) == {"intervals"} and self._copy_deferred():
            intervals, con = self._job_intervals(tuple(params["job_ids"]))
            rows = self.bounds.run(con, lambda: queries.run_named(con, query, params))["interval_row"]
            return arrowfn.take(intervals, rows)
        self._held_intervals()
        rows = self._run(query, params)["interval_row"]
        return arrowfn.take(self._intervals(), rows)

    def _copy_deferred(self) -> bool:
        self._connection()
        assert self._snapshot is not None
        return self._snapshot.copy_pending

    def _job_intervals(self, jobs: tuple[str, ...]) -> tuple[pa.Table, duckdb.DuckDBPyConnection]:
        """The intervals of ``jobs`` (read from the snapshot's intervals files, the job filter pushed into
        the scan) held as the table ``intervals`` of a connection of their own, and as Arrow in rowid
        order: what the selection queries and ``_select``'s gather need, for those jobs only."""
        if self._jobs_con is not None and self._jobs_con[0] == jobs:
            return self._jobs_con[1], self._jobs_con[2]
        rows = self._fresh(lambda: self._run("intervals_of_jobs", {"job_ids": list(jobs)}))
        con = self._jobs_con[2] if self._jobs_con is not None else self._new_jobs_connection()
        con.register("_job_intervals", rows)
        con.execute("CREATE OR REPLACE TABLE _jobs.intervals AS SELECT * FROM _job_intervals")
        con.unregister("_job_intervals")
        held = con.sql("SELECT * FROM intervals ORDER BY rowid").to_arrow_table()
        self._jobs_con = (jobs, held, con)
        return held, con

    def _new_jobs_connection(self) -> duckdb.DuckDBPyConnection:
        """A cursor of the fetch connection's database whose ``intervals`` is the table of schema ``_jobs``
        (found first on its search path) and everything else the fetch connection's: its macros, its
        memory limit. Not a database of its own: one costs ~14 ms of CPU to make (DuckDB builds its
        catalog of functions), a cursor ~0.2 ms."""
        con = self._connection().cursor()
        con.execute("CREATE SCHEMA IF NOT EXISTS _jobs")
        con.execute("SET search_path = '_jobs,main'")
        return con

    def intervals_table(self) -> pa.Table:
        """Every interval of the current view of the store (the ``intervals`` view, all sources), as Arrow."""
        return self._intervals()

    def _intervals(self) -> pa.Table:
        """The connection's intervals table as Arrow, row i being the row whose rowid is i (a snapshot
        nothing writes to, so its rowids run 0..n-1). Selection queries return rowids; the columns are
        gathered here (why: docs/internals.md, "Selections return row ids").
        """
        self._held_intervals()
        return self._memoised(
            ("intervals",),
            lambda: self.bounds.run(
                self._connection(), lambda: self._connection().sql("SELECT * FROM intervals ORDER BY rowid").to_arrow_table()
            ),
        )

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
        fresh, unproven, live, built = self._memoised(("phase_rollups",), self._phase_rollup_candidates)
        wanted = live if params["job_ids"] is None else set(params["job_ids"])
        unsure = frozenset(wanted & unproven)  # fresh if their facts hold no rows where they have none: asked only for them
        if unsure:
            fresh = fresh | self._memoised(("phase_rollups", unsure), lambda: self._fresh_without_rows(unsure, built))
        return wanted <= fresh

    def _phase_rollup_candidates(self) -> tuple[set[str], set[str], set[str], dict[str, dict[str, set[str]]]]:
        """(jobs with fresh phase roll-ups, jobs fresh if their facts hold no rows where they have none, every
        job with cProfile intervals, the fingerprints the phase tables' rows were built from)."""
        con = self._connection_for("phase_fingerprints", "phase_built_from", "jobs_without_functions")
        live = rollups.live_fingerprints(con)
        built = rollups.built_fingerprints(con)
        fresh, unproven = rollups.fresh_and_unproven(con, live, built)
        return fresh, unproven, set(live), built

    def _fresh_without_rows(self, jobs: frozenset[str], built: dict[str, dict[str, set[str]]]) -> set[str]:
        return rollups.fresh_without_rows(self._connection_for("intervals_of_jobs", "jobs_with_facts"), jobs, built)

    def _phase_rollup_state(self) -> tuple[set[str], set[str]]:
        """(every job whose phase roll-ups answer, every job with cProfile intervals): for tests and checks."""
        fresh, unproven, live, built = self._phase_rollup_candidates()
        return fresh | (self._fresh_without_rows(frozenset(unproven), built) if unproven else set()), live

    def aggregate(self, query: str, selected: pa.Table, params: dict[str, Any]) -> pa.Table:
        """Run queries/<query>.sql over selected intervals, with the roll-up parameters (rollup_parameters)."""
        if type(self).connection is not Engine.connection:
            self.connection()  # an engine of its own (SparkProfiles) has no DuckDB connection, and says so
        con = self._connection_for(query)
        return queries.run_named(con, query, rollup_parameters(selected, params, self._files))

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
        """The read-only connection of ``sql``, made anew after each ``refresh()``, as the fetch connection
        is (without opening the fetch connection: ``proflake sql`` alone never needs it)."""
        from proflake.query import readonly

        if self._sql_con is None:
            self._sql_con = readonly.connect(self.store, self.bounds)
        return self._sql_con


@cache
def _tables_of(query: str) -> frozenset[str]:
    """The store's tables queries/<query>.sql reads."""
    return tables_named(queries.query_text(query))

