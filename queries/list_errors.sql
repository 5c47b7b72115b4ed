-- list_errors: the quarantine, newest failure first: stats files that could not be ingested and why.
-- Parameters: $error_kind (NULL = every kind).
-- Columns: every column of ingest_errors.
SELECT *
FROM ingest_errors
WHERE $error_kind IS NULL OR error_kind = $error_kind
ORDER BY last_seen DESC, source_uri
