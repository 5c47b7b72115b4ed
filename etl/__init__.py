"""proflake: smdebug Python profiling stats as Delta Lake tables, queried with DuckDB SQL."""
