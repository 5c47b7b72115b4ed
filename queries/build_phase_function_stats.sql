-- build_phase_function_stats: the rows of phase_function_stats for one job, from its live cProfile
-- intervals: function_stats summed per (node, start/end mode pair, job phase, function) as
-- pstats.Stats.add sums them, stamped with the job's fingerprint (see phase_fingerprints.sql).
-- Parameters: $job_id (the job to build), $built_from (its fingerprint, from phase_fingerprints.sql; computed
--             apart because DuckDB, joining the two, hashed the whole interval list once per output row).
-- Fact rows repeat their interval's keys, so only liveness needs the intervals: a semi-join on
-- interval_id (a join carrying interval columns took 15x the time and 9x the memory on the bench corpus).
-- Columns: those of schemas/phase_function_stats.json.
SELECT
    job_id, node_id, start_mode, end_mode, job_phase,
    function, filename, lineno, function_name,
    CAST(sum(primitive_calls) AS BIGINT) AS primitive_calls,
    CAST(sum(total_calls) AS BIGINT) AS total_calls,
    sum(tottime) AS tottime,
    sum(cumtime) AS cumtime,
    count(*) AS intervals,
    CAST($built_from AS VARCHAR) AS built_from
FROM _function_stats_all
WHERE interval_id IN (SELECT interval_id FROM intervals WHERE profiler = 'cprofile' AND job_id = $job_id)
GROUP BY ALL
ORDER BY job_id, node_id, start_mode, end_mode, job_phase, function, filename, lineno, function_name
