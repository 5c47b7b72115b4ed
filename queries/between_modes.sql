-- between_modes: intervals that start in one mode and end in another (smdebug fetch_profile_stats_between_modes),
-- e.g. train -> eval for the interval that spans the switch to evaluation.
-- Parameters: $start_mode, $end_mode, scope ($job_ids, $node_id, $profiler, $source_prefix).
-- Columns: interval_row, the rowid of each selected interval (Profiles gathers every column of those rows
-- from its Arrow copy of intervals: converting ~30 columns to Arrow cost more than the query).
SELECT rowid AS interval_row
FROM intervals
WHERE in_scope(job_id, node_id, profiler, source_uri, $job_ids, $node_id, $profiler, $source_prefix)
  AND start_mode = $start_mode
  AND end_mode = $end_mode
