-- post_hook_close: intervals profiled after the hook closed, to the end of the job
-- (smdebug fetch_post_hook_close_profile_stats): those that end at phase 'end'.
-- Parameters: scope ($job_ids, $node_id, $profiler, $source_prefix).
-- Columns: interval_row, the rowid of each selected interval (Profiles gathers every column of those rows
-- from its Arrow copy of intervals: converting ~30 columns to Arrow cost more than the query).
SELECT rowid AS interval_row
FROM intervals
WHERE in_scope(job_id, node_id, profiler, source_uri, $job_ids, $node_id, $profiler, $source_prefix)
  AND end_phase = 'end'
