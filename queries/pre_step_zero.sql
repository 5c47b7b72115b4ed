-- pre_step_zero: intervals profiled from the start of the job, before step 0
-- (smdebug fetch_pre_step_zero_profile_stats): those that start at phase 'start'.
-- Parameters: scope ($job_ids, $node_id, $profiler, $source_prefix).
-- Columns: interval_row, the rowid of each selected interval (Profiles gathers every column of those rows
-- from its Arrow copy of intervals: converting ~30 columns to Arrow cost more than the query).
SELECT rowid AS interval_row
FROM intervals
WHERE in_scope(job_id, node_id, profiler, source_uri, $job_ids, $node_id, $profiler, $source_prefix)
  AND start_phase = 'start'
