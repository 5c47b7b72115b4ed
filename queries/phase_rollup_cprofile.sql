-- phase_rollup_cprofile: rollup_cprofile's answer for by_training_phase and by_job_phase, read from the
-- pre-summed phase_function_stats instead of every function_stats row. Used only when the jobs in scope
-- have fresh phase roll-ups (their built_from equals phase_fingerprints) and no source prefix narrows
-- the scope; otherwise rollup_cprofile runs. Same columns, same order, same sums.
-- Parameters: $job_ids (NULL = all jobs), $node_id (NULL = all nodes), $by_node, $by_modes, $by_job_phase,
--             $sort (cumtime | tottime | ncalls | pcalls), $top (rows per group, NULL = all).
-- Columns: node_id, start_mode, end_mode, job_phase (NULL unless grouped by), function, filename, lineno,
--          function_name, primitive_calls, total_calls, tottime, cumtime, intervals.
SELECT *
FROM (
    SELECT
        CASE WHEN $by_node THEN node_id END AS node_id,
        CASE WHEN $by_modes THEN start_mode END AS start_mode,
        CASE WHEN $by_modes THEN end_mode END AS end_mode,
        CASE WHEN $by_job_phase THEN job_phase END AS job_phase,
        function,
        filename,
        lineno,
        function_name,
        CAST(sum(primitive_calls) AS BIGINT) AS primitive_calls,
        CAST(sum(total_calls) AS BIGINT) AS total_calls,
        sum(tottime) AS tottime,
        sum(cumtime) AS cumtime,
        CAST(sum(intervals) AS BIGINT) AS intervals
    FROM phase_function_stats
    WHERE ($job_ids IS NULL OR list_contains($job_ids, job_id))
      AND ($node_id IS NULL OR node_id = $node_id)
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
