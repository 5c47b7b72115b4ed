-- phase_fingerprints_before: per job, the fingerprint of the live cProfile intervals it had before
-- batch $batch_id (as phase_fingerprints.sql, leaving out that batch's intervals). A job whose roll-ups
-- were built from exactly these, and which that batch only added to, is brought up to date by
-- merge_phase_function_*.sql; a job missing here had no live intervals before the batch.
-- Parameters: $batch_id.
-- Columns: job_id, built_from.
SELECT job_id, md5(concat_ws(':', 'intervals-v2', count(*), bit_xor(md5_number(interval_id)),
                             sum(md5_number_upper(interval_id)), sum(md5_number_lower(interval_id)))) AS built_from
FROM intervals
WHERE profiler = 'cprofile' AND batch_id <> $batch_id
GROUP BY job_id
ORDER BY job_id
