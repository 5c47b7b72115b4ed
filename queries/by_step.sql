-- by_step: intervals inside a step range of one mode (smdebug fetch_profile_stats_by_step).
-- Matches with smdebug's in_step_interval rule (see macros.sql) and start_mode = end_mode = $mode.
-- Parameters: $start_step, $end_step (BIGINT; 2^63-1 for '*' at the end), $mode, $start_phase, $end_phase, scope ($job_ids, $node_id, $profiler, $source_prefix).
-- Columns: interval_row, the rowid of each selected interval (Profiles gathers every column of those rows
-- from its Arrow copy of intervals: converting ~30 columns to Arrow cost more than the query).
SELECT rowid AS interval_row
FROM intervals
WHERE in_scope(job_id, node_id, profiler, source_uri, $job_ids, $node_id, $profiler, $source_prefix)
  AND start_mode = $mode
  AND end_mode = $mode
  AND in_step_interval(start_step, end_step, start_phase, end_phase,
                       $start_step, $end_step, $start_phase, $end_phase)
