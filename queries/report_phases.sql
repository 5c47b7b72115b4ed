-- report_phases: the phases section of an HTML report (proflake report): wall time of the selected
-- intervals per node, per job phase and per training phase (start mode -> end mode).
-- Parameters: $interval_ids (VARCHAR[]: the selection's intervals).
-- Columns: kind ('job_phase' or 'training_phase'), phase (the job phase, or 'start_mode->end_mode'),
--          node_id, seconds (sum of the intervals' wall times), intervals.
SELECT kind, phase, node_id, sum(seconds) AS seconds, count(*) AS intervals
FROM (
    SELECT 'job_phase' AS kind, job_phase AS phase, node_id, (end_time_us - start_time_us) / 1e6 AS seconds,
           job_phase_rank(job_phase) AS rank_1, 0 AS rank_2
    FROM intervals
    WHERE interval_id IN (SELECT unnest(CAST($interval_ids AS VARCHAR[])))
    UNION ALL
    SELECT 'training_phase', start_mode || '->' || end_mode, node_id, (end_time_us - start_time_us) / 1e6,
           mode_rank(start_mode), mode_rank(end_mode)
    FROM intervals
    WHERE interval_id IN (SELECT unnest(CAST($interval_ids AS VARCHAR[])))
)
GROUP BY kind, phase, node_id
ORDER BY kind, min(rank_1), min(rank_2), phase, node_id
