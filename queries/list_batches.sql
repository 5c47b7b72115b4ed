-- list_batches: one row per ingest run (batch), newest first, from the batches bookkeeping table.
-- status: committed (finished), running (started, not finished: in progress or killed), abandoned (killed before
-- its intervals committed; its rows were removed by the next run) or repaired (killed after committing; the
-- next run finished its clean-up), failed or interrupted (stopped by an error or a signal; the next run
-- removes its rows or finishes its clean-up, and then says abandoned or repaired).
-- Parameters: none.
-- Columns: batch_id, status, started_at, finished_at, source, full_refresh, files_seen, new_intervals,
--          replaced_intervals, unchanged, failed, rows_written, bytes_read, seconds.
SELECT
    batch_id,
    CASE
        WHEN bool_or(event = 'committed') THEN 'committed'
        WHEN bool_or(event = 'repaired') THEN 'repaired'
        WHEN bool_or(event = 'abandoned') THEN 'abandoned'
        WHEN bool_or(event = 'failed') THEN 'failed'
        WHEN bool_or(event = 'interrupted') THEN 'interrupted'
        ELSE 'running'
    END AS status,
    coalesce(min(recorded_at) FILTER (WHERE event = 'started'), min(recorded_at)) AS started_at,
    max(recorded_at) FILTER (WHERE event <> 'started') AS finished_at,
    any_value(source) AS source,
    any_value(full_refresh) AS full_refresh,
    max(files_seen) AS files_seen,
    max(new_intervals) AS new_intervals,
    max(replaced_intervals) AS replaced_intervals,
    max(unchanged) AS unchanged,
    max(failed) AS failed,
    max(rows_written) AS rows_written,
    max(bytes_read) AS bytes_read,
    max(seconds) AS seconds
FROM batches
GROUP BY batch_id
ORDER BY batch_id DESC
