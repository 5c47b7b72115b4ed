-- jobs_without_functions: which of $job_ids recorded no function in any of their live cProfile intervals
-- (function_count is the number of function_stats rows an interval holds). Such a job, whose dumps were
-- taken before the profiler ran, has no fact rows for either phase table and so no phase roll-up rows:
-- those count as fresh (etl/proflake/store/rollups.py asks this of the jobs with no phase roll-up row,
-- new jobs among them, from the intervals alone).
-- Parameters: $job_ids (VARCHAR[]).
-- Columns: job_id.
SELECT job_id
FROM intervals
WHERE profiler = 'cprofile' AND list_contains(CAST($job_ids AS VARCHAR[]), job_id)
GROUP BY job_id
HAVING sum(function_count) = 0
ORDER BY job_id
