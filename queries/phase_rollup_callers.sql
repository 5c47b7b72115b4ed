-- phase_rollup_callers: rollup_callers' answer for by_training_phase and by_job_phase, read from the
-- pre-summed phase_function_callers (under the same conditions as phase_rollup_cprofile).
-- Parameters: $job_ids (NULL = all jobs), $node_id (NULL = all nodes), $by_node, $by_modes, $by_job_phase.
-- Columns: node_id, start_mode, end_mode, job_phase, filename, lineno, function_name, caller_filename,
--          caller_lineno, caller_function_name, total_calls, primitive_calls, tottime, cumtime.
SELECT
    CASE WHEN $by_node THEN node_id END AS node_id,
    CASE WHEN $by_modes THEN start_mode END AS start_mode,
    CASE WHEN $by_modes THEN end_mode END AS end_mode,
    CASE WHEN $by_job_phase THEN job_phase END AS job_phase,
    filename,
    lineno,
    function_name,
    caller_filename,
    caller_lineno,
    caller_function_name,
    CAST(sum(total_calls) AS BIGINT) AS total_calls,
    CAST(sum(primitive_calls) AS BIGINT) AS primitive_calls,
    sum(tottime) AS tottime,
    sum(cumtime) AS cumtime
FROM phase_function_callers
WHERE ($job_ids IS NULL OR list_contains($job_ids, job_id))
  AND ($node_id IS NULL OR node_id = $node_id)
GROUP BY ALL
