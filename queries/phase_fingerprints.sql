-- phase_fingerprints: per job, the fingerprint of its live cProfile intervals (md5 of the sorted
-- interval_ids). phase_function_stats / phase_function_callers rows carry the fingerprint they were
-- built from; a job whose fingerprints differ has stale roll-ups (an ingest changed it since).
-- Parameters: none.
-- Columns: job_id, built_from.
SELECT job_id, md5(string_agg(interval_id, ',' ORDER BY interval_id)) AS built_from
FROM intervals
WHERE profiler = 'cprofile'
GROUP BY job_id
ORDER BY job_id
