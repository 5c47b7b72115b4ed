-- merge_phase_function_stats: the rows of phase_function_stats for one job after an ingest that only
-- added intervals to it: its rows built before (when they were fresh), plus the partial sums the parse
-- workers wrote for the batch's new intervals (one per segment they wrote), summed again.
-- Equal to build_phase_function_stats up to the order of floating-point additions, without reading the
-- job's facts again (at 100k files the rebuild read 66 M rows: 11 s and +130 MB of the ingest).
-- Parameters: $job_id, $built_from (the job's fingerprint now, see phase_fingerprints.sql),
--             $with_base (whether the job had live intervals before this batch, whose rows to keep),
--             $partial_files (the workers' partial sums: Parquet files with this table's columns but built_from).
-- Columns: those of schemas/phase_function_stats.json.
SELECT
    job_id, node_id, start_mode, end_mode, job_phase,
    function, filename, lineno, function_name,
    CAST(sum(primitive_calls) AS BIGINT) AS primitive_calls,
    CAST(sum(total_calls) AS BIGINT) AS total_calls,
    sum(tottime) AS tottime,
    sum(cumtime) AS cumtime,
    CAST(sum(intervals) AS BIGINT) AS intervals,
    CAST($built_from AS VARCHAR) AS built_from
FROM (
    SELECT * EXCLUDE (built_from) FROM phase_function_stats WHERE $with_base AND job_id = $job_id
    UNION ALL BY NAME
    SELECT * FROM read_parquet($partial_files) WHERE job_id = $job_id
)
GROUP BY ALL
ORDER BY job_id, node_id, start_mode, end_mode, job_phase, function, filename, lineno, function_name
