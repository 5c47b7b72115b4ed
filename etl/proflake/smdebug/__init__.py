"""smdebug-compatible analysis classes answered from a proflake store."""
