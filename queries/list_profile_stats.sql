-- list_profile_stats: one row per profiled interval with all its metadata and source path
-- (smdebug list_profile_stats), ordered like smdebug: by start time, then node.
-- Parameters: scope ($job_ids, $node_id, $profiler, $source_prefix; NULL profiler = both).
-- Columns: every column of intervals.
SELECT *
FROM intervals
WHERE in_scope(job_id, node_id, profiler, source_uri, $job_ids, $node_id, $profiler, $source_prefix)
ORDER BY start_time_us, node_id, profiler, source_uri
