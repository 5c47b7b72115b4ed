-- macros.sql: small SQL helpers defined on every proflake connection (and in the BI catalog), so the
-- fetch queries and ad hoc SQL share one definition of smdebug's rules.
--
--   in_scope(job_id, node_id, profiler, source_uri, want_jobs, want_node, want_profiler, want_prefix)
--       true when the row belongs to one of want_jobs (a list; NULL = all jobs), to want_node
--       (NULL = all nodes), to want_profiler (NULL = both profilers) and was read from below
--       want_prefix (NULL = from anywhere).
--   step_end(end_step)
--       the end step as a BIGINT (steps compare as integers, exactly), with '*' (stored as NULL, "until the
--       end") as the largest step, 2^63-1.
--   in_step_interval(start_step, end_step, start_phase, end_phase,
--                    want_start_step, want_end_step, want_start_phase, want_end_phase)
--       smdebug's StepPythonProfileStats.in_step_interval rule, verbatim: an interval strictly inside
--       the wanted steps matches; one reaching outside them does not; on a boundary step the phases
--       decide (starting at stepend/forwardpassend needs the same start phase; ending at stepstart
--       needs the same end phase).
--   ranked(seconds)
--       a time rounded to 12 significant digits, to order by (proflake.numbers.ranked, in SQL): sums of the
--       same times added in another order (DuckDB and Spark add in parallel; a roll-up adds per job first)
--       differ in their last bits, so two functions with equal totals would swap places from one answer
--       to the next. Rounded, they tie, and the name that breaks ties decides.
--   sort_value(sort, cumtime, tottime, ncalls, pcalls)
--       the value a roll-up orders by for a --sort key (cumtime, tottime, ncalls, pcalls), as a DOUBLE;
--       times are ranked().
--   mode_rank(mode), job_phase_rank(job_phase)
--       smdebug's enum order, for sorting: train, eval, predict, global, prestepzero, posthookclose;
--       initialization, training_loop, finalization, whole_job.

CREATE OR REPLACE MACRO in_scope(
    job_id, node_id, profiler, source_uri, want_jobs, want_node, want_profiler, want_prefix
) AS
    (want_jobs IS NULL OR list_contains(want_jobs, job_id))
    AND (want_node IS NULL OR node_id = want_node)
    AND (want_profiler IS NULL OR profiler = want_profiler)
    AND (want_prefix IS NULL OR starts_with(source_uri, want_prefix));

CREATE OR REPLACE MACRO step_end(end_step) AS coalesce(CAST(end_step AS BIGINT), CAST(9223372036854775807 AS BIGINT));

CREATE OR REPLACE MACRO in_step_interval(
    start_step, end_step, start_phase, end_phase,
    want_start_step, want_end_step, want_start_phase, want_end_phase
) AS
    CASE
        WHEN want_start_step < start_step AND want_end_step > step_end(end_step) THEN true
        WHEN want_start_step > start_step OR want_end_step < step_end(end_step) THEN false
        ELSE NOT (
            (want_start_step = start_step
                AND want_start_phase IN ('stepend', 'forwardpassend')
                AND start_phase <> want_start_phase)
            OR (want_end_step = step_end(end_step)
                AND want_end_phase = 'stepstart'
                AND end_phase <> want_end_phase)
        )
    END;

-- The scale is a power of ten computed per value (round's own digits argument must be a constant in
-- Spark); values too small or large for that scale to be finite, and NULL, are returned as they are.
CREATE OR REPLACE MACRO ranked(seconds) AS
    CASE
        WHEN seconds IS NULL OR abs(seconds) < 1e-200 OR abs(seconds) > 1e200 THEN CAST(seconds AS DOUBLE)
        ELSE round(seconds * pow(10, 11 - floor(log10(abs(seconds)))))
             / pow(10, 11 - floor(log10(abs(seconds))))
    END;

CREATE OR REPLACE MACRO sort_value(sort, cumtime, tottime, ncalls, pcalls) AS
    CASE sort
        WHEN 'tottime' THEN ranked(CAST(tottime AS DOUBLE))
        WHEN 'ncalls' THEN CAST(ncalls AS DOUBLE)
        WHEN 'pcalls' THEN CAST(pcalls AS DOUBLE)
        ELSE ranked(CAST(cumtime AS DOUBLE))
    END;

CREATE OR REPLACE MACRO mode_rank(mode) AS
    list_position(['train', 'eval', 'predict', 'global', 'prestepzero', 'posthookclose'], mode);

CREATE OR REPLACE MACRO job_phase_rank(job_phase) AS
    list_position(['initialization', 'training_loop', 'finalization', 'whole_job'], job_phase);
