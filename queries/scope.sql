-- scope: what a fetch needs to know before it runs: per profiler, how many intervals are in scope and
-- smdebug's "any" node (the node of the earliest interval, ties broken by node id).
-- Parameters: $job_ids, $node_id, $source_prefix.
-- Columns: profiler, intervals, first_node_id, first_start_time_us.
SELECT
    profiler,
    count(*) AS intervals,
    arg_min(node_id, (start_time_us, node_id)) AS first_node_id,
    min(start_time_us) AS first_start_time_us
FROM intervals
WHERE in_scope(job_id, node_id, profiler, source_uri, $job_ids, $node_id, NULL, $source_prefix)
GROUP BY profiler
ORDER BY profiler
