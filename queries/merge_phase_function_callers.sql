-- merge_phase_function_callers: the rows of phase_function_callers for one job after an ingest that only
-- added intervals to it: its rows built before (when they were fresh), plus the partial sums the parse
-- workers wrote for the batch's new intervals, summed again (see merge_phase_function_stats.sql).
-- Parameters: $job_id, $built_from, $with_base, $partial_files (as merge_phase_function_stats).
-- Columns: those of schemas/phase_function_callers.json.
SELECT
    job_id, node_id, start_mode, end_mode, job_phase,
    filename, lineno, function_name, caller_filename, caller_lineno, caller_function_name,
    CAST(sum(total_calls) AS BIGINT) AS total_calls,
    CAST(sum(primitive_calls) AS BIGINT) AS primitive_calls,
    sum(tottime) AS tottime,
    sum(cumtime) AS cumtime,
    CAST($built_from AS VARCHAR) AS built_from
FROM (
    SELECT * EXCLUDE (built_from) FROM phase_function_callers WHERE $with_base AND job_id = $job_id
    UNION ALL BY NAME
    SELECT * FROM read_parquet($partial_files) WHERE job_id = $job_id
)
GROUP BY ALL
ORDER BY job_id, node_id, start_mode, end_mode, job_phase,
         filename, lineno, function_name, caller_filename, caller_lineno, caller_function_name
