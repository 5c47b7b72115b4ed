-- intervals_of_jobs: every column of the intervals of some jobs, in the store's order, read from the
-- intervals files with the job filter pushed into the Parquet scan (row groups of other jobs are skipped
-- by their statistics), so a question about a few jobs of a large store does not copy all of it.
-- Parameters: $job_ids (a list of job ids).
-- Columns: those of intervals.
SELECT *
FROM intervals
WHERE list_contains($job_ids, job_id)
