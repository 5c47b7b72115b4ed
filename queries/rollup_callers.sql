-- rollup_callers: aggregate cProfile caller edges over the intervals in $interval_ids as pstats.add_callers
-- does: per (callee, caller) pair, sum the edge's calls and times. Used to rebuild pstats.Stats objects
-- (callers, print_callers, .prof files) and for call-graph questions.
-- It reads every stored row of the table's files that can hold those intervals (_<table>_in($<table>_files):
-- the caller picks them by the time span in the Delta log); the semi-join with $interval_ids, which lists
-- only live intervals, is what keeps rows of unfinished or replaced batches out.
-- Parameters: $interval_ids (VARCHAR[]), $function_callers_files (its files that overlap the span), $min_start_time_us, $max_start_time_us (the selection's span), $by_node, $by_modes, $by_job_phase (booleans, as in rollup_cprofile).
-- Columns: node_id, start_mode, end_mode, job_phase, filename, lineno, function_name, caller_filename,
--          caller_lineno, caller_function_name, total_calls, primitive_calls, tottime, cumtime.
SELECT
    CASE WHEN $by_node THEN c.node_id END AS node_id,
    CASE WHEN $by_modes THEN c.start_mode END AS start_mode,
    CASE WHEN $by_modes THEN c.end_mode END AS end_mode,
    CASE WHEN $by_job_phase THEN c.job_phase END AS job_phase,
    c.filename,
    c.lineno,
    c.function_name,
    c.caller_filename,
    c.caller_lineno,
    c.caller_function_name,
    CAST(sum(c.total_calls) AS BIGINT) AS total_calls,
    CAST(sum(c.primitive_calls) AS BIGINT) AS primitive_calls,
    sum(c.tottime) AS tottime,
    sum(c.cumtime) AS cumtime
FROM _function_callers_in($function_callers_files) AS c
-- The selection's time span, so row-group statistics skip the rest of the table.
WHERE c.start_time_us BETWEEN $min_start_time_us AND $max_start_time_us
  -- Fact rows repeat their interval's keys: only liveness needs the ids (a semi-join; a join
  -- carrying the selected intervals' columns took several times longer).
  AND c.interval_id IN (SELECT unnest(CAST($interval_ids AS VARCHAR[])))
GROUP BY ALL
