"""Names the fetch methods accept, without importing DuckDB: the CLI builds its options from these (the
methods themselves are in proflake.query.registry)."""

from __future__ import annotations

from proflake.formats import PROFILERS  # noqa: F401 - what --profiler names: the table families (proflake.formats)

SORT_KEYS = ("cumtime", "tottime", "ncalls", "pcalls")
DIFF_PER = ("step", "second")  # what proflake diff normalises by
DIFF_MATCH = ("name", "line")  # how it pairs functions across the two sides
# proflake diff's options of one side (query/diff_options.py reads them), in the order its help lists them;
# each exists as --X (both sides), --base-X and --head-X. (name, metavar, meaning)
DIFF_SIDE_OPTIONS: tuple[tuple[str, str, str], ...] = (
    ("node", "ID", "only this node (default: all nodes)"),
    ("steps", "A:B", "steps A..B of --mode ('A' one step, 'A:*' to the end; default every step)"),
    ("mode", "MODE", "the steps' mode (default train)"),
    ("start_phase", "PHASE", "the phase of the first step, as fetch by-step (default stepstart)"),
    ("end_phase", "PHASE", "the phase of the last step, as fetch by-step (default stepend)"),
    ("time", "START:END", "intervals overlapping this window (seconds since the epoch) instead of steps"),
    ("modes", "START:END", "intervals that start in mode START and end in mode END (fetch between-modes) instead of steps"),
    ("job_phase", "PHASE", "initialization (fetch pre-step-zero) or finalization (fetch post-hook-close) instead of steps"),
)
