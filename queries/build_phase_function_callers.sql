-- build_phase_function_callers: the rows of phase_function_callers for one job: function_callers
-- edges summed per (node, start/end mode pair, job phase, callee, caller) as pstats.add_callers
-- sums them, stamped with the job's fingerprint (see phase_fingerprints.sql).
-- Parameters: $job_id (the job to build), $built_from (its fingerprint, from phase_fingerprints.sql; computed
--             apart because DuckDB, joining the two, hashed the whole interval list once per output row).
-- Fact rows repeat their interval's keys, so only liveness needs the intervals: a semi-join on
-- interval_id (a join carrying interval columns took 15x the time and 9x the memory on the bench corpus).
-- Columns: those of schemas/phase_function_callers.json.
SELECT
    job_id, node_id, start_mode, end_mode, job_phase,
    filename, lineno, function_name, caller_filename, caller_lineno, caller_function_name,
    CAST(sum(total_calls) AS BIGINT) AS total_calls,
    CAST(sum(primitive_calls) AS BIGINT) AS primitive_calls,
    sum(tottime) AS tottime,
    sum(cumtime) AS cumtime,
    CAST($built_from AS VARCHAR) AS built_from
FROM _function_callers_all
WHERE interval_id IN (SELECT interval_id FROM intervals WHERE profiler = 'cprofile' AND job_id = $job_id)
GROUP BY ALL
ORDER BY job_id, node_id, start_mode, end_mode, job_phase,
         filename, lineno, function_name, caller_filename, caller_lineno, caller_function_name
