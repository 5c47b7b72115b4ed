-- by_job_phase: every interval in scope, to be aggregated per job phase (smdebug fetch_profile_stats_by_job_phase).
-- intervals.job_phase is set at ingest: initialization (starts at phase 'start'), finalization (ends at
-- phase 'end'), whole_job (both), training_loop (neither). Unlike smdebug, every interval of a phase is
-- aggregated (smdebug kept only the last mode pair's), and the post-hook-close interval, written with
-- start mode prestepzero and start phase 'end', is finalization (smdebug filed it under initialization).
-- Parameters: scope ($job_ids, $node_id, $profiler, $source_prefix).
-- Columns: interval_row, the rowid of each selected interval (Profiles gathers every column of those rows
-- from its Arrow copy of intervals: converting ~30 columns to Arrow cost more than the query).
-- The roll-up groups by job_phase.
SELECT rowid AS interval_row
FROM intervals
WHERE in_scope(job_id, node_id, profiler, source_uri, $job_ids, $node_id, $profiler, $source_prefix)
