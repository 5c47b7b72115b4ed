-- by_time: intervals that overlap a time window (smdebug fetch_profile_stats_by_time).
-- An interval matches when it starts or ends inside the window, or contains the whole window
-- (smdebug's in_time_interval misses that last case; proflake includes it). Bounds are inclusive.
-- Parameters: $start_time_us, $end_time_us (microseconds since the epoch), scope ($job_ids, $node_id, $profiler, $source_prefix).
-- Columns: interval_row, the rowid of each selected interval (Profiles gathers every column of those rows
-- from its Arrow copy of intervals: converting ~30 columns to Arrow cost more than the query).
SELECT rowid AS interval_row
FROM intervals
WHERE in_scope(job_id, node_id, profiler, source_uri, $job_ids, $node_id, $profiler, $source_prefix)
  AND start_time_us <= $end_time_us
  AND end_time_us >= $start_time_us
