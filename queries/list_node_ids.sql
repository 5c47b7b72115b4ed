-- list_node_ids: the node ids that have profiling stats, sorted and distinct (smdebug list_available_node_ids).
-- Parameters: scope ($job_ids, $node_id, $profiler, $source_prefix; NULL profiler = both).
-- Columns: node_id.
SELECT DISTINCT node_id
FROM intervals
WHERE in_scope(job_id, node_id, profiler, source_uri, $job_ids, $node_id, $profiler, $source_prefix)
ORDER BY node_id
