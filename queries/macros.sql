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
--   sort_value(sort, cumtime, tottime, ncalls, pcalls)
--       the value a roll-up orders by for a --sort key (cumtime, tottime, ncalls, pcalls), as a DOUBLE.
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

CREATE OR REPLACE MACRO sort_value(sort, cumtime, tottime, ncalls, pcalls) AS
    CASE sort
        WHEN 'tottime' THEN CAST(tottime AS DOUBLE)
        WHEN 'ncalls' THEN CAST(ncalls AS DOUBLE)
        WHEN 'pcalls' THEN CAST(pcalls AS DOUBLE)
        ELSE CAST(cumtime AS DOUBLE)
    END;

CREATE OR REPLACE MACRO mode_rank(mode) AS
    list_position(['train', 'eval', 'predict', 'global', 'prestepzero', 'posthookclose'], mode);

CREATE OR REPLACE MACRO job_phase_rank(job_phase) AS
    list_position(['initialization', 'training_loop', 'finalization', 'whole_job'], job_phase);
