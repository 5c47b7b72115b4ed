"""The convenience views' contract: names, columns and meanings of the views BI tools and ad hoc SQL see
beside the store's tables (queries/views.sql defines them; ``batch_runs`` is queries/list_batches.sql).

Declared once here; the BI catalog, the read-only SQL connection, the docs and the tests read it.
"""

from __future__ import annotations

from dataclasses import dataclass

import duckdb

from proflake import sql as queries
from proflake.schema import SQL_TYPES

DOC_TYPES = {v: k for k, v in SQL_TYPES.items()}


# ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class ViewSpec:
    name: str
    description: str
    columns: tuple[tuple[str, str, str], ...]  # (name, type as in schemas/, meaning)
    catalog_only: bool = False

    @property
    def column_names(self) -> list[str]:
        return [c[0] for c in self.columns]


def _cols(text: str) -> tuple[tuple[str, str, str], ...]:
    """``name type meaning`` lines -> column triples (keeps the declaration below readable)."""
    out = []
    for line in text.strip().splitlines():
        if not line.strip():
            continue
        name, type_name, meaning = line.strip().split(None, 2)
        out.append((name, type_name, meaning))
    return tuple(out)


_CPROFILE_SUMS = """
function string The pstats key, filename:lineno(function_name).
filename string Source file ('~' for built-ins).
lineno int64 Line the function starts on.
function_name string The function's name.
primitive_calls int64 Non-recursive calls, summed (pstats cc).
total_calls int64 All calls, summed (pstats nc).
tottime float64 Seconds in the function itself, summed.
cumtime float64 Seconds in the function and its callees, summed.
intervals int64 Intervals (stats files) the function appears in.
nodes int64 Nodes it appears on.
"""
_PYINSTRUMENT_SUMS = """
function string filename:lineno(function_name).
filename string Source file.
lineno int64 Line of the function.
function_name string The function's name.
class_name string Class of a method, when recorded.
self_time float64 Seconds in the function itself, summed over every frame.
total_time float64 Inclusive seconds summed over the function's outermost frames (recursion counts once).
await_time float64 Seconds awaiting, over the outermost frames.
frames int64 Frames of the function.
intervals int64 Intervals (sessions) the function appears in.
nodes int64 Nodes it appears on.
"""
_JOB = "job_id string The training job.\n"
_PHASE = "job_phase string initialization, training_loop, finalization or whole_job.\n"
_MODES = "start_mode string Mode when profiling started.\nend_mode string Mode when profiling stopped.\n"
_STEP = "mode string The step's mode (train, eval, ...).\nstep int64 The step number.\n"

VIEWS: tuple[ViewSpec, ...] = (
    ViewSpec(
        "manifest",
        "What was ingested from where: one row per live interval (the store's manifest).",
        _cols("""
            source_uri string The stats file read (absolute path or s3:// URI).
            source_size int64 Its size in bytes.
            source_version string Its S3 ETag or local modification time (ns).
            html_uri string pyinstrument: the HTML beside the JSON.
            interval_id string The interval the file produced.
            batch_id string The ingest run that wrote it.
            ingested_at timestamp When that run started.
        """),
    ),
    ViewSpec(
        "batch_runs",
        "Ingest runs, newest first, with their status ([`list_batches.sql`](queries/list_batches.sql), `proflake batches`).",
        _cols("""
            batch_id string The run's id.
            status string committed, running, abandoned or repaired.
            started_at timestamp When the run started.
            finished_at timestamp When it committed, or was marked abandoned/repaired.
            source string What it ingested.
            full_refresh bool It rebuilt the store.
            files_seen int64 Objects listed.
            new_intervals int64 Intervals written.
            replaced_intervals int64 Of those, replacing an older version of a file.
            unchanged int64 Files skipped as already ingested.
            failed int64 Files that could not be ingested.
            rows_written int64 Rows written.
            bytes_read int64 Bytes read.
            seconds float64 Wall time of the run.
        """),
    ),
    ViewSpec(
        "cprofile_by_job_phase",
        "`fetch by-job-phase` for every job: cProfile functions summed per job and job phase, across nodes.",
        _cols(_JOB + _PHASE + _CPROFILE_SUMS),
    ),
    ViewSpec(
        "cprofile_by_training_phase",
        "`fetch by-training-phase` for every job: cProfile functions summed per job and (start_mode, end_mode).",
        _cols(_JOB + _MODES + _CPROFILE_SUMS),
    ),
    ViewSpec(
        "cprofile_by_step",
        "`fetch by-step N --mode M` for every job, mode and step: cProfile functions summed over the intervals "
        "that start and end in that step.",
        _cols(_JOB + _STEP + _CPROFILE_SUMS),
    ),
    ViewSpec(
        "pyinstrument_by_job_phase",
        "`fetch by-job-phase --profiler pyinstrument` for every job.",
        _cols(_JOB + _PHASE + _PYINSTRUMENT_SUMS),
    ),
    ViewSpec(
        "pyinstrument_by_training_phase",
        "`fetch by-training-phase --profiler pyinstrument` for every job.",
        _cols(_JOB + _MODES + _PYINSTRUMENT_SUMS),
    ),
    ViewSpec(
        "pyinstrument_by_step",
        "`fetch by-step N --mode M --profiler pyinstrument` for every job, mode and step.",
        _cols(_JOB + _STEP + _PYINSTRUMENT_SUMS),
    ),
    ViewSpec(
        "step_wall_time",
        "Wall time of each step on each node: from the start of the step's first interval to the end of its "
        "last, over the intervals that start and end in that step (a step profiled in parts counts once).",
        _cols(_JOB + """
            node_id string The node.
            profiler string cprofile or pyinstrument.
        """ + _STEP + """
            start_time timestamp When the step started on the node.
            end_time timestamp When it ended.
            wall_seconds float64 end - start, in seconds.
            profiled_seconds float64 Time the profiler accounted for in the step.
            intervals int64 Intervals the step was profiled in.
        """),
    ),
    ViewSpec(
        "step_node_skew",
        "The same step across nodes (from `step_wall_time`): who was fastest and slowest, and by how much.",
        _cols(_JOB + "profiler string cprofile or pyinstrument.\n" + _STEP + """
            nodes int64 Nodes that profiled the step.
            fastest_seconds float64 Shortest wall time of the step.
            slowest_seconds float64 Longest wall time of the step.
            mean_seconds float64 Mean wall time over the nodes.
            skew_seconds float64 slowest - fastest.
            skew_ratio float64 slowest / fastest (NULL when fastest is 0).
            fastest_node string The fastest node (ties: the first by name).
            slowest_node string The slowest node (ties: the last by name).
            start_spread_seconds float64 Latest start minus earliest start of the step across nodes (exact to the microsecond).
        """),
    ),
    ViewSpec(
        "top_functions",
        "Every function ranked by own time per job, job phase and profiler; filter `rank <= N` for a top N.",
        _cols(_JOB + _PHASE + """
            profiler string cprofile or pyinstrument.
            rank int64 1 = most own time in the job phase (times to 12 significant digits; ties by function key).
            function string The function key, filename:lineno(function_name).
            function_name string The function's name.
            filename string Source file.
            lineno int64 Line of the function.
            own_seconds float64 cProfile tottime / pyinstrument self_time, summed.
            total_seconds float64 cProfile cumtime / pyinstrument total_time, summed.
            calls int64 cProfile total calls (NULL for pyinstrument).
            own_share float64 own_seconds / the phase's own seconds of that profiler.
        """),
    ),
    ViewSpec(
        "call_paths",
        "pyinstrument call trees merged per job and job phase: frames on the same call path become one row.",
        _cols(_JOB + _PHASE + """
            path_id int64 Hash of the call path (as pyinstrument_frames.path_id).
            parent_path_id int64 The parent path (NULL for a root).
            depth int64 Distance from the root.
            function string The frame's function key.
            function_name string The frame's function name.
            call_path string The path's function names from the root, joined by ' > '.
            time float64 Inclusive seconds, summed.
            self_time float64 Own seconds, summed.
            await_time float64 Seconds awaiting, summed.
            frames int64 Frames merged into this path.
            intervals int64 Intervals they came from.
            nodes int64 Nodes they came from.
        """),
    ),
    ViewSpec(
        "trend_series",
        "`proflake trend`'s series for every job, both profilers and all nodes, to chart: per job (in the order "
        "the jobs started), profiler and function, the mean own and inclusive time per train step and their "
        "step-to-step spread. A sample is one node's train step; a function missing from one counts 0 there.",
        _cols(_JOB + """
            profiler string cprofile or pyinstrument.
            job_index int64 1 = the job whose first train interval started first (per profiler; ties by job_id).
            job_start_time timestamp When that interval started.
            function string The function key, filename:lineno(function_name); NULL for the total (every function's own time).
            filename string Source file.
            lineno int64 Line of the function.
            function_name string The function's name.
            steps int64 The job's samples: its nodes' train steps.
            present int64 Samples holding the function.
            own_mean_s float64 Mean own time per step (cProfile tottime, pyinstrument self_time).
            inclusive_mean_s float64 Mean inclusive time per step (cumtime, total_time over the outermost frames).
            own_spread_s2 float64 Squared deviations of the own time from its mean over every sample, divided by steps.
            inclusive_spread_s2 float64 The same of the inclusive time.
        """),
    ),
    ViewSpec(
        "catalog_info",
        "Catalog files only: what the catalog was made from and when; a dashboard can show it as 'data as of'.",
        _cols("""
            store string The store: its absolute folder or s3:// URI.
            mode string views (reads the store's files) or materialized (holds a copy).
            refreshed_at timestamp When the catalog was written.
            intervals_version int64 Delta version of the intervals table it shows.
            proflake_version string proflake version that wrote it.
        """),
        catalog_only=True,
    ),
)
VIEW_NAMES = tuple(v.name for v in VIEWS)


def view_spec(name: str) -> ViewSpec:
    for v in VIEWS:
        if v.name == name:
            return v
    raise KeyError(name)


def install_views(con: duckdb.DuckDBPyConnection) -> None:
    """Define the convenience views (queries/views.sql and batch_runs) over a connection's store views, and
    the table macro profile_diff (queries/diff_macro.sql)."""
    con.execute(queries.query_text("views"))
    con.execute("CREATE OR REPLACE VIEW batch_runs AS\n" + queries.query_text("list_batches"))
    con.execute(queries.query_text("diff_macro"))  # a table macro over the views: profile_diff(...)
