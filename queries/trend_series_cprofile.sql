-- trend_series_cprofile: the series proflake trend (Profiles.trend) looks for change points in: per job, in the
-- order the jobs started, and per function, the mean cProfile own and inclusive time per step and their
-- step-to-step spread. A sample is one node's step, as in diff_samples_cprofile.sql: the selected intervals of
-- one (node_id, start_mode, start_step), summed as pstats.Stats.add does; a function missing from a sample
-- counts 0 there, so every function of a job is measured over the job's samples. The row whose function IS
-- NULL is the total: each sample's summed tottime (the time cProfile saw).
-- Parameters: $interval_ids (VARCHAR[], the selected intervals of every job: Profiles.trend selects each
--             job's train steps, on one node or all), $function_stats_files, $min_start_time_us,
--             $max_start_time_us (as the roll-ups).
-- Columns: job_id, job_index (1 = the job whose first selected interval started first; ties by job_id),
--          job_start_time (that interval's start), function (the key as fetch prints it,
--          filename:lineno(function_name), or the bare name of a built-in; NULL for the total), filename,
--          lineno, function_name, steps (the job's samples), present (samples holding the function),
--          own_mean_s, inclusive_mean_s (mean tottime and cumtime per sample), own_spread_s2,
--          inclusive_spread_s2 (the sum of squared deviations from that mean over every sample, divided by
--          steps: the population variance; times steps / (steps - 1) it is the sample variance).
WITH selected AS (
    SELECT job_id, node_id, start_mode, start_step, start_time
    FROM intervals
    WHERE interval_id IN (SELECT unnest(CAST($interval_ids AS VARCHAR[])))
),
jobs AS (
    SELECT job_id, count(*) AS steps, min(first_start) AS job_start_time,
           row_number() OVER (ORDER BY min(first_start), job_id) AS job_index
    FROM (
        SELECT job_id, node_id, start_mode, start_step, min(start_time) AS first_start
        FROM selected
        GROUP BY job_id, node_id, start_mode, start_step
    ) AS samples
    GROUP BY job_id
),
per_step AS (  -- one row per function and sample, and one per sample for its total (is_total = 1)
    SELECT
        f.job_id, f.node_id, f.start_mode, f.start_step,
        grouping(f.function) AS is_total,
        f.function,
        any_value(f.filename) AS filename,
        min(f.lineno) AS lineno,
        any_value(f.function_name) AS function_name,
        sum(f.tottime) AS own,
        sum(f.cumtime) AS inclusive
    FROM _function_stats_in($function_stats_files) AS f
    WHERE f.start_time_us BETWEEN $min_start_time_us AND $max_start_time_us
      AND f.interval_id IN (SELECT unnest(CAST($interval_ids AS VARCHAR[])))
    GROUP BY GROUPING SETS (
        (f.job_id, f.node_id, f.start_mode, f.start_step, f.function),
        (f.job_id, f.node_id, f.start_mode, f.start_step)
    )
),
means AS (
    SELECT p.job_id, p.is_total, p.function, p.filename, p.lineno, p.function_name, p.own,
           CASE WHEN p.is_total = 1 THEN p.own ELSE p.inclusive END AS inclusive,
           j.steps, j.job_index, j.job_start_time,
           sum(p.own) OVER w / j.steps AS own_mean_s,
           sum(CASE WHEN p.is_total = 1 THEN p.own ELSE p.inclusive END) OVER w / j.steps AS inclusive_mean_s
    FROM per_step AS p
    JOIN jobs AS j USING (job_id)
    WINDOW w AS (PARTITION BY p.job_id, p.is_total, p.function)
)
-- squared deviations of the samples holding the function, plus those of the (steps - present) zeros
SELECT
    job_id,
    any_value(job_index) AS job_index,
    any_value(job_start_time) AS job_start_time,
    function,
    CASE WHEN is_total = 0 THEN any_value(filename) END AS filename,
    CASE WHEN is_total = 0 THEN min(lineno) END AS lineno,
    CASE WHEN is_total = 0 THEN any_value(function_name) END AS function_name,
    any_value(steps) AS steps,
    count(*) AS present,
    any_value(own_mean_s) AS own_mean_s,
    any_value(inclusive_mean_s) AS inclusive_mean_s,
    (sum((own - own_mean_s) * (own - own_mean_s))
        + (any_value(steps) - count(*)) * any_value(own_mean_s) * any_value(own_mean_s)) / any_value(steps)
        AS own_spread_s2,
    (sum((inclusive - inclusive_mean_s) * (inclusive - inclusive_mean_s))
        + (any_value(steps) - count(*)) * any_value(inclusive_mean_s) * any_value(inclusive_mean_s)) / any_value(steps)
        AS inclusive_spread_s2
FROM means
GROUP BY job_id, is_total, function
ORDER BY job_index, function NULLS FIRST
