-- rollup_pyinstrument: aggregate pyinstrument frames over the intervals in $interval_ids per function.
-- self_time sums every frame's own time; total_time sums inclusive time only over a function's outermost
-- frames on each call path (is_outermost), so recursion is counted once, as a sampling profiler sees it.
-- It reads every stored row of the table's files that can hold those intervals (_<table>_in($<table>_files):
-- the caller picks them by the time span in the Delta log); the semi-join with $interval_ids, which lists
-- only live intervals, is what keeps rows of unfinished or replaced batches out.
-- Parameters: $interval_ids (VARCHAR[]), $pyinstrument_frames_files (its files that overlap the span), $min_start_time_us, $max_start_time_us (the selection's span), $by_node, $by_modes, $by_job_phase, $sort (cumtime -> total_time, tottime -> self_time,
--             ncalls/pcalls -> frames), $top (rows per group, NULL = all).
-- Columns: node_id, start_mode, end_mode, job_phase, function, filename, lineno, function_name, class_name,
--          self_time, total_time, await_time, frames, intervals.
SELECT *
FROM (
    SELECT
        CASE WHEN $by_node THEN p.node_id END AS node_id,
        CASE WHEN $by_modes THEN p.start_mode END AS start_mode,
        CASE WHEN $by_modes THEN p.end_mode END AS end_mode,
        CASE WHEN $by_job_phase THEN p.job_phase END AS job_phase,
        p.function,
        p.filename,
        p.lineno,
        p.function_name,
        max(p.class_name) AS class_name,
        sum(p.self_time) AS self_time,
        coalesce(sum(p.time) FILTER (WHERE p.is_outermost), 0) AS total_time,
        coalesce(sum(p.await_time) FILTER (WHERE p.is_outermost), 0) AS await_time,
        count(*) AS frames,
        count(DISTINCT p.interval_id) AS intervals
    FROM _pyinstrument_frames_in($pyinstrument_frames_files) AS p
    -- The selection's time span, so row-group statistics skip the rest of the table.
    WHERE p.start_time_us BETWEEN $min_start_time_us AND $max_start_time_us
      -- Fact rows repeat their interval's keys: only liveness needs the ids (a semi-join; a join
      -- carrying the selected intervals' columns took several times longer).
      AND p.interval_id IN (SELECT unnest(CAST($interval_ids AS VARCHAR[])))
    GROUP BY ALL
) AS r
QUALIFY $top IS NULL OR row_number() OVER (
    PARTITION BY node_id, start_mode, end_mode, job_phase
    ORDER BY sort_value($sort, total_time, self_time, frames, frames) DESC,
             function
) <= $top
ORDER BY node_id NULLS FIRST, mode_rank(start_mode), mode_rank(end_mode), job_phase_rank(job_phase),
         sort_value($sort, total_time, self_time, frames, frames) DESC,
         function
