-- jobs_with_facts: which of $job_ids hold fact rows, per phase table those rows build, in their live
-- cProfile intervals. A phase table holds no row of a job whose facts hold none for it: cProfile records
-- no caller edge for a function called from outside the profile (an empty step holds only the
-- profiler's own disable()), and a dump taken before the profiler ran holds no function at all. Such a
-- job has no row there to carry a fingerprint, and is fresh there when its facts confirm they hold
-- nothing (etl/proflake/store/rollups.py asks this only of jobs fresh in every phase table where they have
-- rows and missing from another: few stores hold one).
-- $min_start_time_us and $max_start_time_us, those jobs' span, let the scans skip the row groups of other
-- times by their statistics; the semi-join with intervals keeps rows of unfinished or replaced batches out.
-- Parameters: $job_ids (VARCHAR[]), $min_start_time_us, $max_start_time_us.
-- Columns: table_name (phase_function_stats or phase_function_callers), job_id.
WITH live AS (
    SELECT interval_id
    FROM intervals
    WHERE profiler = 'cprofile' AND list_contains(CAST($job_ids AS VARCHAR[]), job_id)
)
SELECT DISTINCT 'phase_function_stats' AS table_name, f.job_id
FROM _function_stats_all AS f
WHERE f.start_time_us BETWEEN $min_start_time_us AND $max_start_time_us
  AND f.interval_id IN (SELECT interval_id FROM live)
UNION
SELECT DISTINCT 'phase_function_callers' AS table_name, f.job_id
FROM _function_callers_all AS f
WHERE f.start_time_us BETWEEN $min_start_time_us AND $max_start_time_us
  AND f.interval_id IN (SELECT interval_id FROM live)
ORDER BY table_name, job_id
