-- pre_step_zero: intervals profiled from the start of the job, before step 0
-- (smdebug fetch_pre_step_zero_profile_stats): those that start at phase 'start'.
-- Parameters: scope ($job_ids, $node_id, $profiler, $source_prefix).
-- Columns: every column of intervals.
SELECT *
FROM intervals
WHERE in_scope(job_id, node_id, profiler, source_uri, $job_ids, $node_id, $profiler, $source_prefix)
  AND start_phase = 'start'
