-- diff_samples_pyinstrument: one side of a diff over pyinstrument frames, as diff_samples_cprofile.sql is over
-- cProfile: per function, the mean and the spread over the side's samples (one node's step each) of its own
-- time (self_time summed over its frames), its inclusive time (time summed over its outermost frames, so
-- recursion counts once, as rollup_pyinstrument.sql) and its frames (in place of calls: a sampling profiler
-- counts no calls). A function missing from a sample counts 0 there. The row whose function IS NULL is the
-- total: each sample's summed self_time.
-- Parameters: $interval_ids, $pyinstrument_frames_files, $min_start_time_us, $max_start_time_us, $by_line,
--             $per_second (as diff_samples_cprofile.sql).
-- Columns: as diff_samples_cprofile.sql (self_* from self_time, cum_* from total_time, calls_* from frames).
WITH selected AS (
    SELECT node_id, start_mode, start_step, duration_s
    FROM intervals
    WHERE interval_id IN (SELECT unnest(CAST($interval_ids AS VARCHAR[])))
),
sample AS (
    SELECT node_id, start_mode, start_step,
           CASE WHEN $per_second THEN nullif(sum(duration_s), 0) ELSE 1.0 END AS divisor
    FROM selected
    GROUP BY ALL
),
side AS (
    SELECT count(*) AS samples, (SELECT coalesce(sum(duration_s), 0) FROM selected) AS seconds FROM sample
),
per_sample AS (
    SELECT
        f.node_id, f.start_mode, f.start_step,
        grouping(f.filename) AS is_total,
        f.filename,
        CASE WHEN $by_line THEN f.lineno END AS lineno,
        f.function_name,
        sum(f.self_time) AS self,
        coalesce(sum(f.time) FILTER (WHERE f.is_outermost), 0) AS cum,
        CAST(count(*) AS DOUBLE) AS calls
    FROM _pyinstrument_frames_in($pyinstrument_frames_files) AS f
    WHERE f.start_time_us BETWEEN $min_start_time_us AND $max_start_time_us
      AND f.interval_id IN (SELECT unnest(CAST($interval_ids AS VARCHAR[])))
    GROUP BY GROUPING SETS (
        (f.node_id, f.start_mode, f.start_step, f.filename, CASE WHEN $by_line THEN f.lineno END, f.function_name),
        (f.node_id, f.start_mode, f.start_step)
    )
),
scaled AS (
    SELECT p.is_total, p.filename, p.lineno, p.function_name,
           p.self / s.divisor AS self, p.cum / s.divisor AS cum, p.calls / s.divisor AS calls
    FROM per_sample AS p
    JOIN sample AS s USING (node_id, start_mode, start_step)
),
deviations AS (
    SELECT c.*, side.samples, side.seconds,
           sum(c.self) OVER w / side.samples AS self_mean,
           sum(c.cum) OVER w / side.samples AS cum_mean,
           sum(c.calls) OVER w / side.samples AS calls_mean
    FROM scaled AS c, side
    WINDOW w AS (PARTITION BY c.is_total, c.filename, c.lineno, c.function_name)
)
SELECT
    CASE
        WHEN is_total = 1 THEN NULL
        WHEN $by_line AND filename = '~' THEN function_name
        WHEN $by_line THEN filename || ':' || lineno || '(' || function_name || ')'
        WHEN filename IN ('~', '') THEN function_name
        ELSE filename || '(' || function_name || ')'
    END AS function,
    filename,
    lineno,
    function_name,
    any_value(samples) AS samples,
    count(*) AS present,
    -- squared deviations of the samples holding the function, plus those of the (samples - present) zeros
    any_value(self_mean) AS self_mean,
    sum((self - self_mean) ^ 2) + (any_value(samples) - count(*)) * any_value(self_mean) ^ 2 AS self_m2,
    any_value(cum_mean) AS cum_mean,
    sum((cum - cum_mean) ^ 2) + (any_value(samples) - count(*)) * any_value(cum_mean) ^ 2 AS cum_m2,
    any_value(calls_mean) AS calls_mean,
    sum((calls - calls_mean) ^ 2) + (any_value(samples) - count(*)) * any_value(calls_mean) ^ 2 AS calls_m2,
    any_value(seconds) AS seconds
FROM deviations
GROUP BY is_total, filename, lineno, function_name
