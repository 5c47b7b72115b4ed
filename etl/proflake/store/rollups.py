"""The phase roll-ups: derived tables that hold function_stats and function_callers already summed per
job, node, start/end mode pair and job phase (schemas/phase_function_*.json).

by_training_phase and by_job_phase aggregate every interval of a job; summing millions of fact rows per
question is what made them slow. Ingest brings a job's roll-up rows up to date whenever its live
intervals change: a run that only added intervals adds the partial sums its parse workers wrote for
each segment (etl/proflake/workers/segments.py) to the rows built before; any other change rebuilds them from the facts.
Every row carries the fingerprint of the intervals it was built from, so a question can tell a fresh
roll-up from a stale one (a run killed between its intervals commit and the roll-up step) and fall back
to the fact tables; the next ingest rebuilds whatever is stale.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import TYPE_CHECKING

import duckdb
import pyarrow as pa

from proflake import sql as queries
from proflake.errors import StoreError
from proflake.schema import ALL_TABLES
from proflake.store.memory import release_memory
from proflake.store.snapshot import Snapshot
from proflake.store.store import Store

if TYPE_CHECKING:
    from deltalake import DeltaTable

# derived table -> the query that builds its rows for some jobs
PHASE_TABLES: dict[str, str] = {
    "phase_function_stats": "build_phase_function_stats",
    "phase_function_callers": "build_phase_function_callers",
}
# derived table -> the query that adds a batch's partial sums (written by the parse workers) to its rows
MERGE_QUERIES: dict[str, str] = {
    "phase_function_stats": "merge_phase_function_stats",
    "phase_function_callers": "merge_phase_function_callers",
}


# A local store notes the tables that decide freshness (Delta id and version) when its roll-ups were
# last found or made fresh: a run that changed none of them (a nightly re-run that found nothing new)
# then skips the check, which opens the views and fingerprints every interval (~70 ms of a 10,000-file
# store's 0.35 s re-run). Every commit to a Delta table gives it a new version; the fingerprint query's
# text is noted too, so a proflake that fingerprints differently checks again.
CHECKED_FILE = "_proflake/rollups-checked.json"
_DECIDING_TABLES = ("intervals", *PHASE_TABLES)
_RECIPE_VERSION = "2"  # raise when what makes a roll-up fresh changes outside phase_fingerprints.sql


def _open_deciding(store: Store, opened: Mapping[str, DeltaTable]) -> dict[str, DeltaTable]:
    """The tables that decide freshness, opened once for the whole refresh: its state, its views and its
    writes all use these objects (each open reads the table's log: ~1.5 ms of CPU locally, a LIST and a
    few GETs on S3). On S3 a derived table that will not open is left out: the views and the write
    then treat it as before (a store older than the table, created by its first write). ``opened``:
    those the caller has open and current, used as they are."""
    tables = {}
    for name in _DECIDING_TABLES:
        try:
            tables[name] = opened.get(name) or store.delta(name)
        except StoreError:
            if not store.is_remote or name not in PHASE_TABLES:
                raise
    return tables


def _checked_state(tables: Mapping[str, DeltaTable]) -> dict[str, object]:
    """The freshness state of ``tables`` (``_open_deciding``'s, each at the version it is at)."""
    recipe = hashlib.md5((_RECIPE_VERSION + queries.query_text("phase_fingerprints")).encode()).hexdigest()
    state: dict[str, object] = {"recipe": recipe}
    for name in _DECIDING_TABLES:
        table = tables[name]
        # A table removed and created again starts its versions over: its id tells the two apart.
        state[name] = [table.metadata().id, table.version()]
    return state


def _last_checked(store: Store) -> dict[str, object] | None:
    try:
        with open(os.path.join(store.root, CHECKED_FILE), encoding="utf-8") as f:
            return json.load(f)
    except (OSError, ValueError):
        return None  # never written, or unreadable: check


def _remember_checked(store: Store, state: dict[str, object]) -> None:
    path = os.path.join(store.root, CHECKED_FILE)
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path + ".tmp", "w", encoding="utf-8") as f:
            json.dump(state, f)
        os.replace(path + ".tmp", path)
    except OSError:
        pass  # only a shortcut: without it the next run checks


def live_fingerprints(con: duckdb.DuckDBPyConnection) -> dict[str, str]:
    """job_id -> fingerprint of its live cProfile intervals (``con``: a Store.connect() connection)."""
    table = queries.run_named(con, "phase_fingerprints", {})
    return dict(zip(table["job_id"].to_pylist(), table["built_from"].to_pylist()))


def built_fingerprints(con: duckdb.DuckDBPyConnection) -> dict[str, dict[str, set[str]]]:
    """derived table -> job_id -> the fingerprints its rows were built from (one, unless damaged)."""
    table = queries.run_named(con, "phase_built_from", {})
    built: dict[str, dict[str, set[str]]] = {name: {} for name in PHASE_TABLES}
    for name, job, fingerprint in zip(
        table["table_name"].to_pylist(), table["job_id"].to_pylist(), table["built_from"].to_pylist()
    ):
        built[name].setdefault(job, set()).add(fingerprint)
    return built


def fresh_and_unproven(
    con: duckdb.DuckDBPyConnection, live: Mapping[str, str], built: Mapping[str, Mapping[str, set[str]]]
) -> tuple[set[str], set[str]]:
    """(the live jobs whose phase roll-ups are fresh, the live jobs whose rows are fresh wherever they have
    rows but which have none in some phase table). ``con``: a connection with the intervals view.

    A job whose facts hold no row for a phase table has no row there to carry a fingerprint. One with no
    function at all (dumps taken before the profiler ran) has none anywhere, which its intervals show
    (function_count; queries/jobs_without_functions.sql): fresh. One with functions but no caller edge (a
    job that profiled nothing but empty steps: cProfile records only its own disable(), called from
    outside the profile) is in the second set, fresh when its facts confirm it (``fresh_without_rows``).
    Without these rules such jobs read as stale forever: every ingest rebuilt them, 'proflake check'
    reported them after every repair, and fetches fell back to the facts."""
    fresh, unproven, rowless = set(), set(), []
    for job, fingerprint in live.items():
        states = [built[name].get(job) for name in PHASE_TABLES]
        if all(state == {fingerprint} for state in states):
            fresh.add(job)
        elif all(state is None for state in states):
            rowless.append(job)  # a new job, or one without functions
        elif all(state in ({fingerprint}, None) for state in states):
            unproven.add(job)
    if rowless:
        found = queries.run_named(con, "jobs_without_functions", {"job_ids": sorted(rowless)})
        fresh.update(found["job_id"].to_pylist())
    return fresh, unproven


def fresh_without_rows(
    con: duckdb.DuckDBPyConnection, jobs: Collection[str], built: Mapping[str, Mapping[str, set[str]]]
) -> set[str]:
    """Those of ``jobs`` (``fresh_and_unproven``'s second set) whose facts hold no row for any phase table
    where they have none: fresh. ``con``: a connection with the intervals and fact views
    (queries/jobs_with_facts.sql)."""
    wanted = sorted(jobs)
    rows = queries.run_named(con, "intervals_of_jobs", {"job_ids": wanted})
    starts = rows["start_time_us"].to_pylist()  # of both profilers' intervals: a bound on the cProfile ones
    if not starts:
        return set(wanted)
    span = {"job_ids": wanted, "min_start_time_us": min(starts), "max_start_time_us": max(starts)}
    found = queries.run_named(con, "jobs_with_facts", span)
    has_facts = set(zip(found["table_name"].to_pylist(), found["job_id"].to_pylist()))
    return {job for job in wanted if not any(job not in built[name] and (name, job) in has_facts for name in PHASE_TABLES)}


def stale_jobs(
    con: duckdb.DuckDBPyConnection,
    live: Mapping[str, str],
    built: Mapping[str, Mapping[str, set[str]]],
    facts: Callable[[], duckdb.DuckDBPyConnection],
) -> dict[str, list[str]]:
    """derived table -> the live jobs whose rows there are not built from exactly their live intervals
    (``con``: as ``fresh_and_unproven``'s; ``facts()``: a connection for ``fresh_without_rows``, asked for only when a job may have no rows)."""
    fresh, unproven = fresh_and_unproven(con, live, built)
    if unproven:
        fresh |= fresh_without_rows(facts(), unproven, built)
    return {
        name: sorted(job for job, fingerprint in live.items() if job not in fresh and built[name].get(job) != {fingerprint})
        for name in PHASE_TABLES
    }


def fresh_jobs(
    con: duckdb.DuckDBPyConnection, facts: Callable[[], duckdb.DuckDBPyConnection] | None = None
) -> set[str]:
    """Jobs whose rows in every phase table were built from exactly their live intervals (``facts``: as
    ``stale_jobs``'s; ``con`` itself when it has those views)."""
    live = live_fingerprints(con)
    stale = stale_jobs(con, live, built_fingerprints(con), facts or (lambda: con))
    return set(live).difference(*stale.values())


def refresh_phase_rollups(
    store: Store,
    batch_id: str,
    log: Callable[[str], None] | None = None,
    partials: Mapping[str, Sequence[str]] | None = None,
    opened: Mapping[str, DeltaTable] | None = None,
) -> list[str]:
    """Bring the phase roll-ups of every job whose live intervals changed since they were built up to
    date, and drop those of jobs that are gone; returns the jobs brought up to date. Call with the
    writer lock held.

    ``partials``: derived table -> the Parquet files of partial sums the parse workers wrote for batch
    ``batch_id``. A job that batch only added to, whose rows were fresh before it, gets its rows plus
    those sums; any other stale job (a changed file replaced, a killed run, no partials) is rebuilt
    from the fact tables. ``opened``: tables the caller has open and current (no commit to them since
    they were opened or brought up to date), used instead of opening them again.
    """
    say = log or (lambda message: None)
    # Read before the views open: a commit landing after this (a writer without the lock) is then
    # never noted as checked, and only costs the next run a check. The views use these objects when
    # still at the version they note (locally; on S3 as they are), and the writes below commit through
    # them, which keeps each current: nothing else commits to them in this step (the lock is held).
    tables = _open_deciding(store, opened or {})
    checked = None if store.is_remote else _checked_state(tables)
    if checked is not None and _last_checked(store) == checked:
        return []
    # Views enough to tell whether anything is stale; intervals read where they lie, not copied.
    con = Snapshot(store, tables=PHASE_TABLES, snapshot_intervals=False, opened=tables).con

    def with_facts() -> duckdb.DuckDBPyConnection:
        """Every view, for a rebuild from the facts (the caller's open tables and these used as they are)."""
        return Snapshot(store, tables=ALL_TABLES, snapshot_intervals=False, opened={**(opened or {}), **tables}).con

    facts: list[duckdb.DuckDBPyConnection] = []  # opened at most once: for the check or the first rebuild

    def fact_views() -> duckdb.DuckDBPyConnection:
        if not facts:
            facts.append(with_facts())
        return facts[0]

    try:
        # Each thread scans its own stretch of the interval ids: one thread took 7 MB less at 100,000.
        con.execute("SET threads = 1")
        live = live_fingerprints(con)
        built = built_fingerprints(con)
        stale_of = stale_jobs(con, live, built, fact_views)
        if not any(stale_of.values()) and not any(job not in live for name in PHASE_TABLES for job in built[name]):
            if checked is not None:
                _remember_checked(store, checked)
            return []
        before = _fingerprints_before(con, batch_id) if partials else {}
        # Merges read only the phase tables, on this connection (on one thread: at 100,000 files a merge
        # took 0.45 s instead of 0.33, and DuckDB's per-thread hash tables no longer add ~20 MB to the
        # main process's peak, which this step is); the fact views are opened for the first rebuild, if
        # any, on a new one.
        has_facts = not partials
        if has_facts:
            con.close()
            con = fact_views()
        else:
            # One footer per partial-sum file (two per segment) would stay cached to the end of the
            # step: +17 MB at 100,000 files, which only this step reads, once.
            con.execute("SET parquet_metadata_cache = false")
        rebuilt: set[str] = set()
        merged: set[str] = set()
        writes: list[tuple[str, pa.Table | None, list[str]]] = []
        for name, build in PHASE_TABLES.items():
            stale = stale_of[name]
            gone = sorted(job for job in built[name] if job not in live)
            if not stale and not gone:
                continue
            files = list((partials or {}).get(name, ()))
            parts = []
            # One job at a time: a job's rows are bounded by its functions, not by its files.
            for job in stale:
                previous = before.get(job)
                if files and (previous is None or built[name].get(job) == {previous}):
                    params = {"job_id": job, "built_from": live[job], "with_base": previous is not None, "partial_files": files}
                    parts.append(queries.run_named(con, MERGE_QUERIES[name], params))
                    merged.add(job)
                else:
                    if not has_facts:
                        con.close()
                        con = fact_views()
                        has_facts = True
                    parts.append(queries.run_named(con, build, {"job_id": job, "built_from": live[job]}))
                    rebuilt.add(job)
            writes.append((name, pa.concat_tables(parts) if parts else None, stale + gone))
            parts = []
    finally:
        # DuckDB keeps what its queries took until its connection closes, and deltalake's writer would
        # take as much again on top of it: written after the close, the step's peak fell from 306 to
        # 272 MB at 100,000 files (the rows wait as Arrow tables meanwhile: 14 MB there).
        for opened_con in (con, *facts):
            opened_con.close()
    release_memory()
    while writes:
        name, rows, jobs = writes.pop(0)
        store.replace_jobs(name, rows, jobs, batch_id, tables.get(name))
        rows = None
        release_memory()
    if checked is not None:
        # The phase tables are current (written through); intervals is opened again (a commit since the
        # check, by a writer without the lock, must keep this state from being noted; and a table set
        # aside and created again meanwhile is another table, which the old object would not see).
        after = _checked_state({**tables, "intervals": store.delta("intervals")})
        # This run's writes moved the phase tables; intervals must be where the check read them.
        if after["intervals"] == checked["intervals"]:
            _remember_checked(store, after)
    if merged:
        say(f"added this run's sums to the phase roll-ups of {len(merged)} job(s)")
    if rebuilt - merged:
        say(f"rebuilt the phase roll-ups of {len(rebuilt - merged)} job(s)")
    return sorted(rebuilt | merged)


def _fingerprints_before(con: duckdb.DuckDBPyConnection, batch_id: str) -> dict[str, str]:
    table = queries.run_named(con, "phase_fingerprints_before", {"batch_id": batch_id})
    return dict(zip(table["job_id"].to_pylist(), table["built_from"].to_pylist()))
