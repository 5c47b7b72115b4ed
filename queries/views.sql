-- views: the convenience views BI tools and ad hoc SQL see beside the store's tables, defined in the BI
-- catalog (proflake catalog) and on every proflake sql / Profiles.sql connection. They read only the public
-- views (intervals, function_stats, function_callers, pyinstrument_frames, batches), so they hold exactly
-- the committed, live data. Names and columns are a public contract: VIEWS in etl/proflake/bi/catalog.py declares
-- them, README.md ("BI and ad hoc SQL") documents them, and tests/test_catalog.py fails when a column here
-- changes without both. batch_runs is queries/list_batches.sql, defined by etl/proflake/bi/catalog.py.
--
--   cprofile_by_job_phase, cprofile_by_training_phase, cprofile_by_step
--       fetch by-job-phase / by-training-phase / by-step N as views: cProfile functions summed per job and
--       group key exactly as pstats.Stats.add does (across nodes).
--   pyinstrument_by_job_phase, pyinstrument_by_training_phase, pyinstrument_by_step
--       the same roll-ups for pyinstrument frames (total_time counts recursion once).
--   step_wall_time      wall time of each step on each node.
--   step_node_skew      the same step across nodes: fastest, slowest, spread.
--   top_functions       functions ranked by own time per job, job phase and profiler.
--   call_paths          pyinstrument call trees merged per job and job phase, with the path as text.
--   trend_series        per job (in the order the jobs started), profiler and function: the mean own and
--                       inclusive time per train step and their step-to-step spread (proflake trend's series).

CREATE OR REPLACE VIEW cprofile_by_job_phase AS
SELECT
    job_id,
    job_phase,
    function,
    filename,
    lineno,
    function_name,
    CAST(sum(primitive_calls) AS BIGINT) AS primitive_calls,
    CAST(sum(total_calls) AS BIGINT) AS total_calls,
    sum(tottime) AS tottime,
    sum(cumtime) AS cumtime,
    count(DISTINCT interval_id) AS intervals,
    count(DISTINCT node_id) AS nodes
FROM function_stats
GROUP BY job_id, job_phase, function, filename, lineno, function_name;

CREATE OR REPLACE VIEW cprofile_by_training_phase AS
SELECT
    job_id,
    start_mode,
    end_mode,
    function,
    filename,
    lineno,
    function_name,
    CAST(sum(primitive_calls) AS BIGINT) AS primitive_calls,
    CAST(sum(total_calls) AS BIGINT) AS total_calls,
    sum(tottime) AS tottime,
    sum(cumtime) AS cumtime,
    count(DISTINCT interval_id) AS intervals,
    count(DISTINCT node_id) AS nodes
FROM function_stats
GROUP BY job_id, start_mode, end_mode, function, filename, lineno, function_name;

-- One step of one mode: the intervals fetch by-step N --mode M selects (start and end in step N of mode M).
CREATE OR REPLACE VIEW cprofile_by_step AS
SELECT
    job_id,
    start_mode AS mode,
    start_step AS step,
    function,
    filename,
    lineno,
    function_name,
    CAST(sum(primitive_calls) AS BIGINT) AS primitive_calls,
    CAST(sum(total_calls) AS BIGINT) AS total_calls,
    sum(tottime) AS tottime,
    sum(cumtime) AS cumtime,
    count(DISTINCT interval_id) AS intervals,
    count(DISTINCT node_id) AS nodes
FROM function_stats
WHERE start_mode = end_mode AND start_step = end_step
GROUP BY job_id, start_mode, start_step, function, filename, lineno, function_name;

CREATE OR REPLACE VIEW pyinstrument_by_job_phase AS
SELECT
    job_id,
    job_phase,
    function,
    filename,
    lineno,
    function_name,
    max(class_name) AS class_name,
    sum(self_time) AS self_time,
    coalesce(sum(time) FILTER (WHERE is_outermost), 0) AS total_time,
    coalesce(sum(await_time) FILTER (WHERE is_outermost), 0) AS await_time,
    count(*) AS frames,
    count(DISTINCT interval_id) AS intervals,
    count(DISTINCT node_id) AS nodes
FROM pyinstrument_frames
GROUP BY job_id, job_phase, function, filename, lineno, function_name;

CREATE OR REPLACE VIEW pyinstrument_by_training_phase AS
SELECT
    job_id,
    start_mode,
    end_mode,
    function,
    filename,
    lineno,
    function_name,
    max(class_name) AS class_name,
    sum(self_time) AS self_time,
    coalesce(sum(time) FILTER (WHERE is_outermost), 0) AS total_time,
    coalesce(sum(await_time) FILTER (WHERE is_outermost), 0) AS await_time,
    count(*) AS frames,
    count(DISTINCT interval_id) AS intervals,
    count(DISTINCT node_id) AS nodes
FROM pyinstrument_frames
GROUP BY job_id, start_mode, end_mode, function, filename, lineno, function_name;

CREATE OR REPLACE VIEW pyinstrument_by_step AS
SELECT
    job_id,
    start_mode AS mode,
    start_step AS step,
    function,
    filename,
    lineno,
    function_name,
    max(class_name) AS class_name,
    sum(self_time) AS self_time,
    coalesce(sum(time) FILTER (WHERE is_outermost), 0) AS total_time,
    coalesce(sum(await_time) FILTER (WHERE is_outermost), 0) AS await_time,
    count(*) AS frames,
    count(DISTINCT interval_id) AS intervals,
    count(DISTINCT node_id) AS nodes
FROM pyinstrument_frames
WHERE start_mode = end_mode AND start_step = end_step
GROUP BY job_id, start_mode, start_step, function, filename, lineno, function_name;

-- A step's wall time on a node: from the start of its first interval to the end of its last, over the
-- intervals that start and end within that step (a step profiled in parts, e.g. stepstart ->
-- forwardpassend -> stepend, counts as one).
CREATE OR REPLACE VIEW step_wall_time AS
SELECT
    job_id,
    node_id,
    profiler,
    start_mode AS mode,
    start_step AS step,
    min(start_time) AS start_time,
    max(end_time) AS end_time,
    (max(end_time_us) - min(start_time_us)) / 1e6 AS wall_seconds,
    sum(profiled_seconds) AS profiled_seconds,
    count(*) AS intervals
FROM intervals
WHERE start_mode = end_mode AND start_step = end_step
GROUP BY job_id, node_id, profiler, start_mode, start_step;

CREATE OR REPLACE VIEW step_node_skew AS
SELECT
    job_id,
    profiler,
    mode,
    step,
    count(*) AS nodes,
    min(wall_seconds) AS fastest_seconds,
    max(wall_seconds) AS slowest_seconds,
    avg(wall_seconds) AS mean_seconds,
    max(wall_seconds) - min(wall_seconds) AS skew_seconds,
    max(wall_seconds) / nullif(min(wall_seconds), 0) AS skew_ratio,
    arg_min(node_id, (wall_seconds, node_id)) AS fastest_node,
    arg_max(node_id, (wall_seconds, node_id)) AS slowest_node,
    -- integer microseconds, then seconds: a difference of two epoch doubles is off by up to ~0.4 us
    (epoch_us(max(start_time)) - epoch_us(min(start_time))) / 1e6 AS start_spread_seconds
FROM step_wall_time
GROUP BY job_id, profiler, mode, step;

CREATE OR REPLACE VIEW top_functions AS
WITH functions AS (
    SELECT job_id, job_phase, 'cprofile' AS profiler, function, function_name, filename, lineno,
           tottime AS own_seconds, cumtime AS total_seconds, total_calls AS calls
    FROM cprofile_by_job_phase
    UNION ALL
    SELECT job_id, job_phase, 'pyinstrument' AS profiler, function, function_name, filename, lineno,
           self_time AS own_seconds, total_time AS total_seconds, CAST(NULL AS BIGINT) AS calls
    FROM pyinstrument_by_job_phase
)
SELECT
    job_id,
    job_phase,
    profiler,
    row_number() OVER (PARTITION BY job_id, job_phase, profiler ORDER BY ranked(own_seconds) DESC, function) AS rank,
    function,
    function_name,
    filename,
    lineno,
    own_seconds,
    total_seconds,
    calls,
    own_seconds / nullif(sum(own_seconds) OVER (PARTITION BY job_id, job_phase, profiler), 0) AS own_share
FROM functions;

CREATE OR REPLACE VIEW call_paths AS
WITH RECURSIVE
    merged AS (
        SELECT
            job_id,
            job_phase,
            path_id,
            any_value(parent_path_id) AS parent_path_id,
            any_value(depth) AS depth,
            any_value(function) AS function,
            any_value(function_name) AS function_name,
            sum(time) AS time,
            sum(self_time) AS self_time,
            sum(await_time) AS await_time,
            count(*) AS frames,
            count(DISTINCT interval_id) AS intervals,
            count(DISTINCT node_id) AS nodes
        FROM pyinstrument_frames
        GROUP BY job_id, job_phase, path_id
    ),
    named (job_id, job_phase, path_id, call_path) AS (
        SELECT job_id, job_phase, path_id, function_name
        FROM merged
        WHERE parent_path_id IS NULL
        UNION ALL
        SELECT c.job_id, c.job_phase, c.path_id, p.call_path || ' > ' || c.function_name
        FROM merged AS c
        JOIN named AS p ON c.job_id = p.job_id AND c.job_phase = p.job_phase AND c.parent_path_id = p.path_id
    )
SELECT
    m.job_id,
    m.job_phase,
    m.path_id,
    m.parent_path_id,
    m.depth,
    m.function,
    m.function_name,
    n.call_path,
    m.time,
    m.self_time,
    m.await_time,
    m.frames,
    m.intervals,
    m.nodes
FROM merged AS m
JOIN named AS n USING (job_id, job_phase, path_id);

-- proflake trend's series (queries/trend_series_cprofile.sql, _pyinstrument.sql) for every job, both profilers
-- and all nodes, to chart: a sample is one node's train step (the intervals starting and ending in train mode,
-- keyed by their start step); a function missing from a sample counts 0 there; function NULL is the total.
CREATE OR REPLACE VIEW trend_series AS
WITH
    samples AS (
        SELECT job_id, profiler, node_id, start_step, min(start_time) AS start_time
        FROM intervals
        WHERE start_mode = 'train' AND end_mode = 'train'
        GROUP BY job_id, profiler, node_id, start_step
    ),
    jobs AS (
        SELECT job_id, profiler, count(*) AS steps, min(start_time) AS job_start_time,
               row_number() OVER (PARTITION BY profiler ORDER BY min(start_time), job_id) AS job_index
        FROM samples
        GROUP BY job_id, profiler
    ),
    per_step AS (
        SELECT job_id, 'cprofile' AS profiler, node_id, start_step, function,
               any_value(filename) AS filename, min(lineno) AS lineno, any_value(function_name) AS function_name,
               sum(tottime) AS own, sum(cumtime) AS inclusive
        FROM function_stats
        WHERE start_mode = 'train' AND end_mode = 'train'
        GROUP BY job_id, node_id, start_step, function
        UNION ALL
        SELECT job_id, 'cprofile' AS profiler, node_id, start_step, CAST(NULL AS VARCHAR) AS function,
               CAST(NULL AS VARCHAR) AS filename, CAST(NULL AS BIGINT) AS lineno,
               CAST(NULL AS VARCHAR) AS function_name, sum(tottime) AS own, sum(tottime) AS inclusive
        FROM function_stats
        WHERE start_mode = 'train' AND end_mode = 'train'
        GROUP BY job_id, node_id, start_step
        UNION ALL
        SELECT job_id, 'pyinstrument' AS profiler, node_id, start_step, function,
               any_value(filename) AS filename, min(lineno) AS lineno, any_value(function_name) AS function_name,
               sum(self_time) AS own, coalesce(sum(time) FILTER (WHERE is_outermost), 0) AS inclusive
        FROM pyinstrument_frames
        WHERE start_mode = 'train' AND end_mode = 'train'
        GROUP BY job_id, node_id, start_step, function
        UNION ALL
        SELECT job_id, 'pyinstrument' AS profiler, node_id, start_step, CAST(NULL AS VARCHAR) AS function,
               CAST(NULL AS VARCHAR) AS filename, CAST(NULL AS BIGINT) AS lineno,
               CAST(NULL AS VARCHAR) AS function_name, sum(self_time) AS own, sum(self_time) AS inclusive
        FROM pyinstrument_frames
        WHERE start_mode = 'train' AND end_mode = 'train'
        GROUP BY job_id, node_id, start_step
    ),
    means AS (
        SELECT p.job_id, p.profiler, p.function, p.filename, p.lineno, p.function_name, p.own, p.inclusive,
               j.steps, j.job_index, j.job_start_time,
               sum(p.own) OVER w / j.steps AS own_mean_s,
               sum(p.inclusive) OVER w / j.steps AS inclusive_mean_s
        FROM per_step AS p
        JOIN jobs AS j ON p.job_id = j.job_id AND p.profiler = j.profiler
        WINDOW w AS (PARTITION BY p.job_id, p.profiler, p.function)
    )
SELECT
    job_id,
    profiler,
    any_value(job_index) AS job_index,
    any_value(job_start_time) AS job_start_time,
    function,
    any_value(filename) AS filename,
    min(lineno) AS lineno,
    any_value(function_name) AS function_name,
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
GROUP BY job_id, profiler, function;
