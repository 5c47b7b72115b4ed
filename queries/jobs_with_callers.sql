-- jobs_with_callers: which of $job_ids hold at least one function_callers row in their live cProfile
-- intervals. cProfile records no caller edge for a function called from outside the profile, so an
-- interval where nothing else ran (an empty step: only the profiler's own disable()) has none, and a job
-- made only of such intervals rightly has no phase_function_callers rows (etl/proflake/store/rollups.py
-- asks this only of jobs whose phase_function_stats are fresh and which have no such row: few stores hold one).
-- $min_start_time_us and $max_start_time_us, those jobs' span, let the scan skip the row groups of other
-- times by their statistics; the semi-join with intervals keeps rows of unfinished or replaced batches out.
-- Parameters: $job_ids (VARCHAR[]), $min_start_time_us, $max_start_time_us.
-- Columns: job_id.
SELECT DISTINCT f.job_id
FROM _function_callers_all AS f
WHERE f.start_time_us BETWEEN $min_start_time_us AND $max_start_time_us
  AND f.interval_id IN (
      SELECT interval_id
      FROM intervals
      WHERE profiler = 'cprofile' AND list_contains(CAST($job_ids AS VARCHAR[]), job_id)
  )
ORDER BY f.job_id
