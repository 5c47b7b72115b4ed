-- build_phase_function_stats: the rows of phase_function_stats for some jobs, from their live cProfile
-- intervals: function_stats summed per (job, node, start/end mode pair, job phase, function) as
-- pstats.Stats.add sums them, stamped with the jobs' fingerprints (see phase_fingerprints.sql).
-- Parameters: $job_ids (the jobs to build).
-- Fact rows repeat their interval's keys, so only liveness needs the intervals: a semi-join on
-- interval_id (a join carrying interval columns took 15x the time and 9x the memory on the bench corpus).
-- Columns: those of schemas/phase_function_stats.json.
WITH live AS (
    SELECT interval_id, job_id
    FROM intervals
    WHERE profiler = 'cprofile' AND list_contains($job_ids, job_id)
),
fingerprints AS (
    SELECT job_id, md5(string_agg(interval_id, ',' ORDER BY interval_id)) AS built_from
    FROM live
    GROUP BY job_id
),
sums AS (
    SELECT
        job_id, node_id, start_mode, end_mode, job_phase,
        function, filename, lineno, function_name,
        CAST(sum(primitive_calls) AS BIGINT) AS primitive_calls,
        CAST(sum(total_calls) AS BIGINT) AS total_calls,
        sum(tottime) AS tottime,
        sum(cumtime) AS cumtime,
        count(*) AS intervals
    FROM _function_stats_all
    WHERE interval_id IN (SELECT interval_id FROM live)
    GROUP BY ALL
)
SELECT sums.*, fingerprints.built_from
FROM sums
JOIN fingerprints USING (job_id)
ORDER BY job_id, node_id, start_mode, end_mode, job_phase, function, filename, lineno, function_name
