-- report_steps: the step timeline of an HTML report (proflake report): the wall time of every profiled step
-- of the selected intervals on each node, as the step_wall_time view defines it (an interval counts for a
-- step when it starts and ends in that step of one mode; the step's wall time runs from its first
-- interval's start to its last interval's end).
-- Parameters: $interval_ids (VARCHAR[]: the selection's intervals).
-- Columns: node_id, mode, step, start_time_us, wall_seconds, profiled_seconds, intervals.
SELECT
    node_id,
    start_mode AS mode,
    start_step AS step,
    min(start_time_us) AS start_time_us,
    (max(end_time_us) - min(start_time_us)) / 1e6 AS wall_seconds,
    sum(profiled_seconds) AS profiled_seconds,
    count(*) AS intervals
FROM intervals
WHERE interval_id IN (SELECT unnest(CAST($interval_ids AS VARCHAR[])))
  AND start_mode = end_mode AND start_step = end_step AND start_step >= 0
GROUP BY node_id, start_mode, start_step
ORDER BY mode_rank(start_mode), step, node_id
