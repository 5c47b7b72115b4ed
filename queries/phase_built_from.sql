-- phase_built_from: which fingerprint each job's phase roll-up rows were built from, per derived table
-- (compare with phase_fingerprints: equal means fresh).
-- Parameters: none.
-- Columns: table_name, job_id, built_from.
SELECT 'phase_function_stats' AS table_name, job_id, built_from FROM phase_function_stats GROUP BY ALL
UNION ALL
SELECT 'phase_function_callers' AS table_name, job_id, built_from FROM phase_function_callers GROUP BY ALL
