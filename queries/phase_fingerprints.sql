-- phase_fingerprints: per job, the fingerprint of its live cProfile intervals: the md5 of
-- order-independent aggregates of their interval_ids (count, XOR of the ids' md5s, exact sums of their
-- halves), so any change to the set changes it (short of ids crafted to collide). Each aggregate is a
-- number per job, so it takes as much memory at 100,000 intervals as at 10,000 (an md5 of the sorted ids
-- joined in one string took +30 MB at 100,000). Fingerprints written before this recipe (that md5) never
-- equal one of these: such roll-ups read as stale, and the next ingest rebuilds them.
-- phase_function_stats / phase_function_callers rows carry the fingerprint they were built from; a job
-- whose fingerprints differ has stale roll-ups (an ingest changed it since).
-- Parameters: none.
-- Columns: job_id, built_from.
SELECT job_id, md5(concat_ws(':', 'intervals-v2', count(*), bit_xor(md5_number(interval_id)),
                             sum(md5_number_upper(interval_id)), sum(md5_number_lower(interval_id)))) AS built_from
FROM intervals
WHERE profiler = 'cprofile'
GROUP BY job_id
ORDER BY job_id
