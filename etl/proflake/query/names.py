"""Names the fetch methods accept, without importing DuckDB: the CLI builds its options from these (the
methods themselves are in proflake.query.registry)."""

from __future__ import annotations

PROFILERS = ("cprofile", "pyinstrument")
SORT_KEYS = ("cumtime", "tottime", "ncalls", "pcalls")
DIFF_PER = ("step", "second")  # what proflake diff normalises by
DIFF_MATCH = ("name", "line")  # how it pairs functions across the two sides
