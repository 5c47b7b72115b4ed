-- by_training_phase: every interval in scope, to be aggregated per (start_mode, end_mode) pair
-- (smdebug fetch_profile_stats_by_training_phase). Only pairs that occur appear.
-- Parameters: scope ($job_ids, $node_id, $profiler, $source_prefix).
-- Columns: interval_row, the rowid of each selected interval (Profiles gathers every column of those rows
-- from its Arrow copy of intervals: converting ~30 columns to Arrow cost more than the query).
-- The roll-up groups by start_mode, end_mode.
SELECT rowid AS interval_row
FROM intervals
WHERE in_scope(job_id, node_id, profiler, source_uri, $job_ids, $node_id, $profiler, $source_prefix)
