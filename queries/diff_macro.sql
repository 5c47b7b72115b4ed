-- diff_macro: profile_diff(...), a table macro that compares two selections of steps function by function,
-- for BI tools and ad hoc SQL (defined on every proflake sql / Profiles.sql connection and in the catalog,
-- after views.sql). It is what proflake diff computes, for step ranges: every node's step is a sample,
-- a function missing from a sample counts 0 there, and each function's mean own time per step is compared
-- with Welch's t statistic. SQL has no t distribution, so the p-values, intervals, Holm's correction and the
-- gate are proflake diff's; here |welch_t| >= 2 (with welch_df >= 10) is the rule of thumb for 5%.
--
--   profile_diff(base_job, head_job,
--                base_node := NULL, head_node := NULL,            -- NULL: all nodes
--                base_first_step := NULL, base_last_step := NULL,  -- NULL: from the first / to the last step
--                head_first_step := NULL, head_last_step := NULL,
--                mode := 'train', profiler_name := 'cprofile')
--
-- Steps are selected as fetch by-step does (smdebug's in_step_interval with phases stepstart / stepend);
-- functions are matched by file and name (proflake diff --match name).
-- Columns: function, presence (both, added, removed), base_samples, head_samples, base_self, head_self
--          (mean own seconds per step), self_change, self_change_ratio, base_self_sd, head_self_sd,
--          self_se, welch_t, welch_df, base_cum, head_cum (mean inclusive seconds per step),
--          base_calls, head_calls (mean calls per step; pyinstrument: frames).
CREATE OR REPLACE MACRO profile_diff(
    base_job, head_job,
    base_node := NULL, head_node := NULL,
    base_first_step := NULL, base_last_step := NULL,
    head_first_step := NULL, head_last_step := NULL,
    mode := 'train', profiler_name := 'cprofile'
) AS TABLE
WITH selected AS (
    SELECT 'base' AS side, interval_id, node_id, start_step
    FROM intervals
    WHERE profiler = profiler_name AND job_id = base_job
      AND (base_node IS NULL OR node_id = base_node)
      AND start_mode = mode AND end_mode = mode
      AND in_step_interval(start_step, end_step, start_phase, end_phase,
                           coalesce(CAST(base_first_step AS DOUBLE), -1),
                           coalesce(CAST(base_last_step AS DOUBLE), CAST('inf' AS DOUBLE)), 'stepstart', 'stepend')
    UNION ALL
    SELECT 'head' AS side, interval_id, node_id, start_step
    FROM intervals
    WHERE profiler = profiler_name AND job_id = head_job
      AND (head_node IS NULL OR node_id = head_node)
      AND start_mode = mode AND end_mode = mode
      AND in_step_interval(start_step, end_step, start_phase, end_phase,
                           coalesce(CAST(head_first_step AS DOUBLE), -1),
                           coalesce(CAST(head_last_step AS DOUBLE), CAST('inf' AS DOUBLE)), 'stepstart', 'stepend')
),
samples AS (
    SELECT side, count(DISTINCT (node_id, start_step)) AS n FROM selected GROUP BY side
),
facts AS (
    SELECT interval_id, filename, function_name, tottime AS self, cumtime AS cum, CAST(total_calls AS DOUBLE) AS calls
    FROM function_stats
    UNION ALL
    SELECT interval_id, filename, function_name, self_time AS self,
           CASE WHEN is_outermost THEN time ELSE 0 END AS cum, 1.0 AS calls
    FROM pyinstrument_frames
),
per_sample AS (
    SELECT s.side, s.node_id, s.start_step,
           CASE WHEN f.filename IN ('~', '') THEN f.function_name ELSE f.filename || '(' || f.function_name || ')' END
               AS function,
           sum(f.self) AS self, sum(f.cum) AS cum, sum(f.calls) AS calls
    FROM facts AS f
    JOIN selected AS s USING (interval_id)
    GROUP BY ALL
),
per_side AS (
    SELECT p.side, p.function, any_value(n.n) AS samples,
           sum(p.self) / any_value(n.n) AS self_mean,
           -- the variance over all samples, the absent ones' zeros included
           greatest(sum(p.self * p.self) - sum(p.self) ^ 2 / any_value(n.n), 0) / nullif(any_value(n.n) - 1, 0) AS self_var,
           sum(p.cum) / any_value(n.n) AS cum_mean,
           sum(p.calls) / any_value(n.n) AS calls_mean
    FROM per_sample AS p
    JOIN samples AS n USING (side)
    GROUP BY p.side, p.function
),
joined AS (
    SELECT
        coalesce(b.function, h.function) AS function,
        CASE WHEN b.function IS NULL THEN 'added' WHEN h.function IS NULL THEN 'removed' ELSE 'both' END AS presence,
        (SELECT n FROM samples WHERE side = 'base') AS base_samples,
        (SELECT n FROM samples WHERE side = 'head') AS head_samples,
        coalesce(b.self_mean, 0) AS base_self,
        coalesce(h.self_mean, 0) AS head_self,
        coalesce(b.self_var, 0) AS base_var,
        coalesce(h.self_var, 0) AS head_var,
        coalesce(b.cum_mean, 0) AS base_cum,
        coalesce(h.cum_mean, 0) AS head_cum,
        coalesce(b.calls_mean, 0) AS base_calls,
        coalesce(h.calls_mean, 0) AS head_calls
    FROM (SELECT * FROM per_side WHERE side = 'base') AS b
    FULL JOIN (SELECT * FROM per_side WHERE side = 'head') AS h USING (function)
)
SELECT
    function,
    presence,
    base_samples,
    head_samples,
    base_self,
    head_self,
    head_self - base_self AS self_change,
    (head_self - base_self) / nullif(base_self, 0) AS self_change_ratio,
    sqrt(base_var) AS base_self_sd,
    sqrt(head_var) AS head_self_sd,
    sqrt(base_var / base_samples + head_var / head_samples) AS self_se,
    (head_self - base_self) / nullif(sqrt(base_var / base_samples + head_var / head_samples), 0) AS welch_t,
    (base_var / base_samples + head_var / head_samples) ^ 2
        / nullif((base_var / base_samples) ^ 2 / (base_samples - 1) + (head_var / head_samples) ^ 2 / (head_samples - 1), 0)
        AS welch_df,
    base_cum,
    head_cum,
    base_calls,
    head_calls
FROM joined
ORDER BY ranked(abs(head_self - base_self)) DESC, function;
