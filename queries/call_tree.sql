-- call_tree: the pyinstrument call trees of the intervals in $interval_ids, merged: frames on the same call
-- path (same functions from the root down) become one node, their times summed.
-- It reads every stored row of the table's files that can hold those intervals (_<table>_in($<table>_files):
-- the caller picks them by the time span in the Delta log); the semi-join with $interval_ids, which lists
-- only live intervals, is what keeps rows of unfinished or replaced batches out.
-- Parameters: $interval_ids (VARCHAR[]), $pyinstrument_frames_files (its files that overlap the span), $min_start_time_us, $max_start_time_us (the selection's span), $by_node, $by_modes, $by_job_phase (booleans, as in the roll-ups).
-- Columns: node_id, start_mode, end_mode, job_phase, path_id, parent_path_id, depth, function, filename,
--          lineno, function_name, time, self_time, await_time, frames, intervals.
SELECT *
FROM (
    SELECT
        CASE WHEN $by_node THEN p.node_id END AS node_id,
        CASE WHEN $by_modes THEN p.start_mode END AS start_mode,
        CASE WHEN $by_modes THEN p.end_mode END AS end_mode,
        CASE WHEN $by_job_phase THEN p.job_phase END AS job_phase,
        p.path_id,
        p.parent_path_id,
        p.depth,
        p.function,
        p.filename,
        p.lineno,
        p.function_name,
        sum(p.time) AS time,
        sum(p.self_time) AS self_time,
        sum(p.await_time) AS await_time,
        count(*) AS frames,
        count(DISTINCT p.interval_id) AS intervals
    FROM _pyinstrument_frames_in($pyinstrument_frames_files) AS p
    -- The selection's time span, so row-group statistics skip the rest of the table.
    WHERE p.start_time_us BETWEEN $min_start_time_us AND $max_start_time_us
      -- Fact rows repeat their interval's keys: only liveness needs the ids (a semi-join; a join
      -- carrying the selected intervals' columns took several times longer).
      AND p.interval_id IN (SELECT unnest(CAST($interval_ids AS VARCHAR[])))
    GROUP BY ALL
) AS tree
ORDER BY node_id NULLS FIRST, mode_rank(start_mode), mode_rank(end_mode), job_phase_rank(job_phase),
         depth, time DESC, function
