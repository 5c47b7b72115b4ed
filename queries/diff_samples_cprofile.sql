-- diff_samples_cprofile: one side of a diff (proflake diff, Profiles.diff): per function, the mean and the
-- spread of its cProfile times over the side's samples. A sample is one node's step: the selected intervals
-- of one (node_id, start_mode, start_step), summed as pstats.Stats.add does. A function missing from a sample
-- counts 0 there, so every function is measured over the same samples and the means add up to the total.
-- The row whose function IS NULL is the total: each sample's summed tottime (the time cProfile saw).
-- Parameters: $interval_ids (VARCHAR[], the side's selected intervals), $function_stats_files,
--             $min_start_time_us, $max_start_time_us (as the roll-ups), $by_line (BOOLEAN: key functions by
--             filename, lineno and name; false: by filename and name, so a function that moved keeps its key),
--             $per_second (BOOLEAN: divide each sample's values by its wall seconds instead of per step),
--             $simple (BOOLEAN: every sample is one interval; Profiles.diff knows from the selection).
-- Cost: two passes over the side's fact rows, neither of them per (sample, function) for most keys. Pass one
-- sums every line (filename, lineno, name) over the rows: a line holds at most one row per interval, so when
-- every sample is one interval ($simple) those sums are its sums over samples, and a key of one line is done.
-- Pass two sums each sample's rows (the total) and, within it, the rows of the keys still to be summed per
-- sample: the keys that merge several lines (matching by name: two <genexpr> in one file), or every key
-- unless $simple. No CTE over the fact rows is materialised (a copy of a million rows and their strings),
-- and squares are x * x over the rows (x ^ 2 calls pow: ~15% of the query).
-- Columns: function (the key as text; NULL for the total), filename, lineno (NULL unless $by_line),
--          function_name, samples (the side's samples), present (samples holding the function),
--          self_mean, self_m2, cum_mean, cum_m2, calls_mean, calls_m2 (mean per sample of tottime, cumtime and
--          total_calls, and the sum of squared deviations from it over every sample; variance = m2 / (samples - 1)),
--          seconds (the side's wall seconds: the selected intervals' durations summed).
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
fact AS NOT MATERIALIZED (
    SELECT
        f.node_id, f.start_mode, f.start_step, f.filename, f.lineno, f.function_name,
        -- a one-interval sample's wall seconds are its interval's
        CASE WHEN $per_second THEN nullif((f.end_time_us - f.start_time_us) / 1e6, 0) ELSE 1.0 END AS divisor,
        f.tottime AS self, f.cumtime AS cum, CAST(f.total_calls AS DOUBLE) AS calls
    FROM _function_stats_in($function_stats_files) AS f
    WHERE f.start_time_us BETWEEN $min_start_time_us AND $max_start_time_us
      AND f.interval_id IN (SELECT unnest(CAST($interval_ids AS VARCHAR[])))
),
-- pass one: per line
per_line AS (
    SELECT filename, lineno, function_name, count(*) AS present,
           sum(self / divisor) AS self_1, sum((self / divisor) * (self / divisor)) AS self_2,
           sum(cum / divisor) AS cum_1, sum((cum / divisor) * (cum / divisor)) AS cum_2,
           sum(calls / divisor) AS calls_1, sum((calls / divisor) * (calls / divisor)) AS calls_2
    FROM fact
    GROUP BY filename, lineno, function_name
),
lines AS (  -- each line with its key
    SELECT
        CASE
            WHEN $by_line AND filename = '~' THEN function_name
            WHEN $by_line THEN filename || ':' || lineno || '(' || function_name || ')'
            WHEN filename IN ('~', '') THEN function_name
            ELSE filename || '(' || function_name || ')'
        END AS function,
        filename, lineno, function_name, present, self_1, self_2, cum_1, cum_2, calls_1, calls_2
    FROM per_line
),
keys AS (  -- whether a key's sums over samples need its rows summed per sample first
    SELECT function, count(*) > 1 OR NOT $simple AS per_sample FROM lines GROUP BY function
),
-- pass two: per sample, the total (function NULL) and the keys summed per sample; a few rows per sample
per_sample AS MATERIALIZED (
    SELECT fact.node_id, fact.start_mode, fact.start_step, l.function,
           sum(fact.self) AS self, sum(fact.cum) AS cum, sum(fact.calls) AS calls
    FROM fact
    LEFT JOIN (SELECT l.filename, l.lineno, l.function_name, l.function FROM lines AS l JOIN keys USING (function)
               WHERE keys.per_sample) AS l
      ON fact.filename = l.filename AND fact.lineno = l.lineno AND fact.function_name = l.function_name
    GROUP BY ALL
),
summed AS (SELECT * FROM per_sample WHERE function IS NOT NULL),
by_sample AS (
    SELECT p.function, count(*) AS present,
           sum(p.self / s.divisor) AS self_1, sum((p.self / s.divisor) * (p.self / s.divisor)) AS self_2,
           sum(p.cum / s.divisor) AS cum_1, sum((p.cum / s.divisor) * (p.cum / s.divisor)) AS cum_2,
           sum(p.calls / s.divisor) AS calls_1, sum((p.calls / s.divisor) * (p.calls / s.divisor)) AS calls_2
    FROM summed AS p
    JOIN sample AS s USING (node_id, start_mode, start_step)
    GROUP BY p.function
),
totals AS (  -- each sample's own time summed over its functions: the time the profiler saw
    SELECT NULL AS function, NULL AS filename, NULL AS line, NULL AS function_name, count(*) AS present,
           sum(t.self / s.divisor) AS self_1, sum((t.self / s.divisor) * (t.self / s.divisor)) AS self_2,
           sum(t.self / s.divisor) AS cum_1, sum((t.self / s.divisor) * (t.self / s.divisor)) AS cum_2,
           sum(t.calls / s.divisor) AS calls_1, sum((t.calls / s.divisor) * (t.calls / s.divisor)) AS calls_2
    FROM (
        SELECT node_id, start_mode, start_step, sum(self) AS self, sum(calls) AS calls
        FROM per_sample GROUP BY node_id, start_mode, start_step
    ) AS t
    JOIN sample AS s USING (node_id, start_mode, start_step)
),
keyed AS (  -- a key summed per sample takes those sums; a key of one line, its line's
    SELECT l.function, any_value(l.filename) AS filename, min(l.lineno) AS line, any_value(l.function_name) AS function_name,
           coalesce(any_value(b.present), sum(l.present)) AS present,
           coalesce(any_value(b.self_1), sum(l.self_1)) AS self_1, coalesce(any_value(b.self_2), sum(l.self_2)) AS self_2,
           coalesce(any_value(b.cum_1), sum(l.cum_1)) AS cum_1, coalesce(any_value(b.cum_2), sum(l.cum_2)) AS cum_2,
           coalesce(any_value(b.calls_1), sum(l.calls_1)) AS calls_1, coalesce(any_value(b.calls_2), sum(l.calls_2)) AS calls_2
    FROM lines AS l
    LEFT JOIN by_sample AS b USING (function)
    GROUP BY l.function
    UNION ALL
    SELECT * FROM totals
)
-- mean = sum / samples; the sum of squared deviations over every sample (absent ones are zeros) is
-- sum of squares - sum^2 / samples, never below 0 (rounding)
SELECT
    k.function,
    k.filename,
    CASE WHEN $by_line THEN k.line END AS lineno,
    k.function_name,
    side.samples,
    k.present,
    k.self_1 / side.samples AS self_mean,
    greatest(k.self_2 - k.self_1 ^ 2 / side.samples, 0) AS self_m2,
    k.cum_1 / side.samples AS cum_mean,
    greatest(k.cum_2 - k.cum_1 ^ 2 / side.samples, 0) AS cum_m2,
    k.calls_1 / side.samples AS calls_mean,
    greatest(k.calls_2 - k.calls_1 ^ 2 / side.samples, 0) AS calls_m2,
    side.seconds
FROM keyed AS k, side
WHERE k.present > 0
