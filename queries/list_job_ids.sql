-- list_job_ids: the ids of the jobs in the store, in order: what a fetch checks --job against, and the
-- one job it answers for when none is named. list_jobs answers the same ids with their summaries; this
-- query reads one column and no timestamp (list_jobs' first TIMESTAMPTZ aggregate loads DuckDB's time
-- zone support: ~12 ms of every CLI fetch).
-- Parameters: $source_prefix (NULL = every source).
-- Columns: job_id.
SELECT DISTINCT job_id
FROM intervals
WHERE in_scope(job_id, node_id, profiler, source_uri, NULL, NULL, NULL, $source_prefix)
ORDER BY job_id
