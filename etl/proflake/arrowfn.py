"""The few Arrow compute functions a fetch or an ingest uses, without importing ``pyarrow.compute``.

``import pyarrow.compute`` builds a Python wrapper, docstring included, for each of its ~300 functions:
60 ms of CPU at every start of the CLI, a fifth of ``proflake fetch``'s own cost beside the import of
its libraries (pyarrow 2x), and ~30 ms of every ingest process's. ``Table.take``, ``Table.sort_by`` and
``Table.cast`` import it too. The functions live in the compiled ``pyarrow._compute``, imported in 7 ms,
and ``call_function`` calls one by name (it is the function ``pyarrow.compute.call_function`` documents).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pyarrow as pa


def call_function(name: str, args: list, options: Any = None) -> Any:
    """pyarrow's compute function ``name`` applied to ``args`` (imported on first use: ``proflake jobs``
    needs none)."""
    try:
        from pyarrow._compute import call_function as call
    except ImportError:  # a pyarrow that moved its compiled module: the public name, at the public price
        from pyarrow.compute import call_function as call
    return call(name, args, options)


def _sort_options(columns: Sequence[str]) -> Any:
    try:
        from pyarrow._compute import SortOptions
    except ImportError:
        from pyarrow.compute import SortOptions
    return SortOptions([(c, "ascending") for c in columns])


def cast(table: pa.Table, schema: pa.Schema) -> pa.Table:
    """``table.cast(schema)``: the columns (the schema's, in its order, by name) converted to its types."""
    if table.column_names != schema.names:
        raise ValueError(f"cannot cast columns {table.column_names} to the schema's {schema.names}")
    try:
        from pyarrow._compute import CastOptions
    except ImportError:
        from pyarrow.compute import CastOptions
    columns = [
        column if column.type == field.type else call_function("cast", [column], CastOptions.safe(field.type))
        for column, field in zip(table.columns, schema)
    ]
    return pa.Table.from_arrays(columns, schema=schema)


def take(table: pa.Table, rows: Any) -> pa.Table:
    """The rows at positions ``rows`` (an Arrow or Python sequence of ints), in that order: ``table.take``."""
    return call_function("take", [table, rows if isinstance(rows, (pa.Array, pa.ChunkedArray)) else pa.array(rows, pa.int64())])


def sort_by(table: pa.Table, columns: Sequence[str]) -> pa.Table:
    """The table sorted by ``columns``, ascending, stably: ``table.sort_by([(c, "ascending"), ...])``."""
    order = call_function("sort_indices", [table], _sort_options(columns))
    return take(table, order)


def min_max(values: pa.ChunkedArray | pa.Array) -> tuple[Any, Any]:
    """The smallest and largest value (None, None when there are none)."""
    both = call_function("min_max", [values]).as_py()
    return both["min"], both["max"]


def unique(values: pa.ChunkedArray | pa.Array) -> list[Any]:
    """The distinct values, in order of first appearance."""
    return call_function("unique", [values]).to_pylist()


def equal_all(table: pa.Table, columns: Sequence[str], values: Sequence[Any]) -> pa.Table:
    """The rows whose ``columns`` equal ``values``, in order (the table itself when no columns are given)."""
    mask = None
    for column, value in zip(columns, values):
        condition = call_function("equal", [table[column], pa.scalar(value, table.schema.field(column).type)])
        mask = condition if mask is None else call_function("and", [mask, condition])
    return call_function("filter", [table, mask]) if mask is not None else table
