-- rollup_cprofile: aggregate cProfile function_stats over the intervals in $interval_ids exactly as
-- pstats.Stats.add does: per function key (filename, lineno, function_name), sum calls and times.
-- $interval_ids lists the intervals one of the fetch queries selected.
-- It reads every stored row of the table's files that can hold those intervals (_<table>_in($<table>_files):
-- the caller picks them by the time span in the Delta log); the semi-join with $interval_ids, which lists
-- only live intervals, is what keeps rows of unfinished or replaced batches out.
-- Parameters: $interval_ids (VARCHAR[]), $function_stats_files (its files that overlap the span), $min_start_time_us, $max_start_time_us (the selection's span), $by_node, $by_modes, $by_job_phase (booleans: which group keys to keep),
--             $sort (cumtime | tottime | ncalls | pcalls), $top (rows per group, NULL = all).
-- Columns: node_id, start_mode, end_mode, job_phase (NULL unless grouped by), function, filename, lineno,
--          function_name, primitive_calls, total_calls, tottime, cumtime, intervals.
SELECT *
FROM (
    SELECT
        CASE WHEN $by_node THEN f.node_id END AS node_id,
        CASE WHEN $by_modes THEN f.start_mode END AS start_mode,
        CASE WHEN $by_modes THEN f.end_mode END AS end_mode,
        CASE WHEN $by_job_phase THEN f.job_phase END AS job_phase,
        f.function,
        f.filename,
        f.lineno,
        f.function_name,
        CAST(sum(f.primitive_calls) AS BIGINT) AS primitive_calls,
        CAST(sum(f.total_calls) AS BIGINT) AS total_calls,
        sum(f.tottime) AS tottime,
        sum(f.cumtime) AS cumtime,
        count(*) AS intervals  -- a function appears once per interval: this counts the intervals it is in
    FROM _function_stats_in($function_stats_files) AS f
    -- The selection's time span, so row-group statistics skip the rest of the table.
    WHERE f.start_time_us BETWEEN $min_start_time_us AND $max_start_time_us
      -- Fact rows repeat their interval's keys: only liveness needs the ids (a semi-join; a join
      -- carrying the selected intervals' columns took several times longer).
      AND f.interval_id IN (SELECT unnest(CAST($interval_ids AS VARCHAR[])))
    GROUP BY ALL
) AS r
QUALIFY $top IS NULL OR row_number() OVER (
    PARTITION BY node_id, start_mode, end_mode, job_phase
    ORDER BY sort_value($sort, cumtime, tottime, total_calls, primitive_calls) DESC,
             function
) <= $top
ORDER BY node_id NULLS FIRST, mode_rank(start_mode), mode_rank(end_mode), job_phase_rank(job_phase),
         sort_value($sort, cumtime, tottime, total_calls, primitive_calls) DESC,
         function
