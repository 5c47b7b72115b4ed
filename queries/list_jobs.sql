-- list_jobs: the training jobs in the store with what was profiled for each.
-- Parameters: $profiler (NULL = both), $source_prefix (NULL = every source).
-- Columns: job_id, framework, profilers, nodes, intervals, first_start_time, last_end_time.
SELECT
    job_id,
    string_agg(DISTINCT framework, ',' ORDER BY framework) AS framework,
    string_agg(DISTINCT profiler, ',' ORDER BY profiler) AS profilers,
    count(DISTINCT node_id) AS nodes,
    count(*) AS intervals,
    min(start_time) AS first_start_time,
    max(end_time) AS last_end_time
FROM intervals
WHERE in_scope(job_id, node_id, profiler, source_uri, NULL, NULL, $profiler, $source_prefix)
GROUP BY job_id
ORDER BY job_id
