-- list_errors: the quarantine, newest failure first: stats files that could not be ingested and why;
-- the open entries only, unless $include_closed (files a later run no longer found under their source).
-- Parameters: $error_kind (NULL = every kind), $include_closed (NULL or false = open entries only).
-- Columns: every column of ingest_errors.
SELECT *
FROM ingest_errors
WHERE ($error_kind IS NULL OR error_kind = $error_kind)
  AND (coalesce($include_closed, false) OR closed_at IS NULL)
ORDER BY last_seen DESC, source_uri
