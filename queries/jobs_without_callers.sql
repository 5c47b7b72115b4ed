-- jobs_without_callers: which of $job_ids have no function_callers row in any of their live cProfile
-- intervals. cProfile records no caller edge for a function called from outside the profiled code, so
-- an interval where nothing but such functions ran (an empty step: only the profiler's own disable())
-- has none; a job made only of such intervals rightly has no phase_function_callers rows, and those
-- count as fresh (etl/proflake/store/rollups.py). Asked only for jobs whose phase_function_stats are
-- fresh and which have no phase_function_callers row, which few stores hold.
-- Parameters: $job_ids (VARCHAR[]).
-- Columns: job_id.
SELECT job_id
FROM (SELECT unnest(CAST($job_ids AS VARCHAR[])) AS job_id)
WHERE job_id NOT IN (
    SELECT DISTINCT i.job_id
    FROM _function_callers_all AS f
    JOIN intervals AS i USING (interval_id)
    WHERE i.profiler = 'cprofile' AND list_contains(CAST($job_ids AS VARCHAR[]), i.job_id)
)
ORDER BY job_id
