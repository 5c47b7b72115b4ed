"""Which columns and rows a terminal shows by default, and ``--columns`` for choosing any of them.

A terminal gets the columns that answer the question: the group keys, the function, then the numbers
(``filename``, ``lineno`` and ``function_name`` repeat what ``function`` says). Pipes, files and the
csv/json/parquet formats always get every column; ``--columns`` applies to every format.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from proflake.errors import UnknownNameError, UsageError
from proflake.formats import CPROFILE, PYINSTRUMENT

if TYPE_CHECKING:
    import pyarrow as pa

TERMINAL_ROWS = 20  # rows (per group, for a fetch) a terminal shows when no --top is given
GROUP_COLUMNS = ("node_id", "start_mode", "end_mode", "job_phase")

# What a terminal shows of each kind of result, when the table has those columns.
DEFAULT_COLUMNS: dict[str, tuple[str, ...]] = {
    CPROFILE.profiler: (*GROUP_COLUMNS, "function", "total_calls", "tottime", "cumtime", "intervals"),
    PYINSTRUMENT.profiler: (*GROUP_COLUMNS, "function", "self_time", "total_time", "intervals"),
    "list": (
        "job_id", "profiler", "node_id", "start_mode", "start_step", "start_phase", "end_mode", "end_step",
        "end_phase", "duration_s", "function_count", "start_time",
    ),
    "errors": ("error_kind", "attempts", "last_seen", "source_uri", "message"),
    "batches": ("started_at", "status", "files_seen", "new_intervals", "failed", "rows_written", "seconds", "source"),
}


# Which columns a terminal keeps longest when not all fit, most important first (the others go first, from
# the right). A listing keeps what tells intervals apart: when (its only time column), where, which step.
PRIORITY: dict[str, tuple[str, ...]] = {
    "list": (
        "start_time", "node_id", "start_step", "start_mode", "duration_s", "job_id", "end_step", "profiler",
        "end_mode", "function_count", "start_phase", "end_phase",
    ),
}


def parse_columns(text: str | None) -> list[str] | None:
    """``--columns a,b,c`` as a list; ``all`` as ``["all"]``; nothing as None."""
    if text is None:
        return None
    names = [name.strip() for name in text.split(",") if name.strip()]
    if not names:
        raise UsageError("--columns needs column names separated by commas, or 'all'")
    return names


def choose_columns(table: pa.Table, requested: Sequence[str] | None, default: Sequence[str] | None = None) -> pa.Table:
    """``table`` with the requested columns in the requested order; ``["all"]`` or None with no
    ``default`` keeps every column; ``default`` keeps those of its columns the table has."""
    if requested is None:
        if default is None:
            return table
        present = [c for c in default if c in table.column_names]
        return table.select(present) if present else table
    if list(requested) == ["all"]:
        return table
    for name in requested:
        if name not in table.column_names:
            raise UnknownNameError("column", name, [*table.column_names, "all"])
    return table.select(list(requested))


# Default columns a terminal leaves out when every row holds the same value (said once, below the table).
CONTEXT_COLUMNS = ("job_id", "profiler", "framework")


def constant_context(table: pa.Table) -> tuple[pa.Table, dict[str, object]]:
    """``table`` without the CONTEXT_COLUMNS whose value is the same on every row (of two or more), and
    those values."""
    if table.num_rows < 2:
        return table, {}
    same = {}
    for name in CONTEXT_COLUMNS:
        if name in table.column_names and len(set(table[name].to_pylist())) == 1 and table.num_columns > 1:
            same[name] = table[name][0].as_py()
            table = table.drop_columns([name])
    return table, same


def limit_rows(table: pa.Table, limit: int, group_by: Sequence[str] = ()) -> tuple[pa.Table, int]:
    """The first ``limit`` rows of each group (of consecutive rows with equal ``group_by`` values), and
    how many rows were left out."""
    if table.num_rows <= limit:
        return table, 0
    groups = [g for g in group_by if g in table.column_names]
    if not groups:
        return table.slice(0, limit), table.num_rows - limit
    import pyarrow as pa

    keys = list(zip(*(table[g].to_pylist() for g in groups)))
    keep: list[int] = []
    previous, count = object(), 0
    for index, key in enumerate(keys):
        count = count + 1 if key == previous else 1
        previous = key
        if count <= limit:
            keep.append(index)
    return table.take(pa.array(keep, pa.int64())), table.num_rows - len(keep)
