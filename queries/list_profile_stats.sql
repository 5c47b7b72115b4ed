-- list_profile_stats: one row per profiled interval with all its metadata and source path
-- (smdebug list_profile_stats), ordered like smdebug: by start time, then node.
-- Parameters: scope ($job_ids, $node_id, $profiler, $source_prefix; NULL profiler = both).
-- Columns: interval_row, the rowid of each selected interval (Profiles gathers every column of those rows
-- from its Arrow copy of intervals: converting ~30 columns to Arrow cost more than the query).
SELECT rowid AS interval_row
FROM intervals
WHERE in_scope(job_id, node_id, profiler, source_uri, $job_ids, $node_id, $profiler, $source_prefix)
ORDER BY start_time_us, node_id, profiler, source_uri
