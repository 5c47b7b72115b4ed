"""The store's tables, loaded from their one declaration in schemas/*.json.

Writer, readers, tests and documentation all take column names, types and descriptions from here.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from functools import cache
from typing import Any

import numpy as np
import pyarrow as pa

from proflake.resources import resource_dir

TABLE_NAMES: tuple[str, ...] = ("intervals", "function_stats", "function_callers", "pyinstrument_frames")
# Ingest bookkeeping, stored beside the data tables.
BOOKKEEPING_TABLES: tuple[str, ...] = ("batches", "ingest_errors")
# Derived from the fact tables by every ingest that changes a job (etl/proflake/store/rollups.py), for fast roll-ups.
DERIVED_TABLES: tuple[str, ...] = ("phase_function_stats", "phase_function_callers")
# fact table -> the phase roll-up that sums it, and the columns summed (the parse workers sum each
# segment they write, etl/proflake/workers/segments.py; etl/proflake/store/rollups.py adds those sums up).
PHASE_ROLLUP_OF: dict[str, str] = {"function_stats": "phase_function_stats", "function_callers": "phase_function_callers"}
PHASE_MEASURES: tuple[str, ...] = ("primitive_calls", "total_calls", "tottime", "cumtime")
ALL_TABLES: tuple[str, ...] = TABLE_NAMES + DERIVED_TABLES + BOOKKEEPING_TABLES

# Types are the ones every Delta reader (Spark, Trino, Athena, DuckDB) maps without loss.
_TYPES: dict[str, pa.DataType] = {
    "string": pa.string(),
    "int64": pa.int64(),
    "float64": pa.float64(),
    "bool": pa.bool_(),
    "timestamp": pa.timestamp("us", tz="UTC"),
}
# The same types in DuckDB's SQL.
SQL_TYPES: dict[str, str] = {
    "string": "VARCHAR",
    "int64": "BIGINT",
    "float64": "DOUBLE",
    "bool": "BOOLEAN",
    "timestamp": "TIMESTAMP WITH TIME ZONE",
}


@dataclass(frozen=True)
class Column:
    name: str
    type_name: str
    nullable: bool
    description: str

    @property
    def arrow_type(self) -> pa.DataType:
        return _TYPES[self.type_name]


@dataclass(frozen=True)
class TableSpec:
    name: str
    description: str
    columns: tuple[Column, ...]
    sort_by: tuple[str, ...]

    @property
    def arrow_schema(self) -> pa.Schema:
        return pa.schema([pa.field(c.name, c.arrow_type, nullable=c.nullable) for c in self.columns])

    @property
    def column_names(self) -> list[str]:
        return [c.name for c in self.columns]


def _load(name: str) -> dict:
    with open(resource_dir("schemas") / f"{name}.json", encoding="utf-8") as f:
        return json.load(f)


@cache
def table_spec(name: str) -> TableSpec:
    doc = _load(name)
    columns: list[Column] = []
    if "include" in doc:
        columns.extend(table_spec(doc["include"]).columns)
    columns.extend(
        Column(c["name"], c["type"], bool(c.get("nullable", False)), c["description"]) for c in doc["columns"]
    )
    names = [c.name for c in columns]
    if len(set(names)) != len(names):
        raise ValueError(f"schemas/{name}.json declares a column twice")
    return TableSpec(doc["name"], doc["description"], tuple(columns), tuple(doc.get("sort_by", ())))


def arrow_schema(name: str) -> pa.Schema:
    return table_spec(name).arrow_schema


INTERVAL_KEY_COLUMNS: tuple[str, ...] = tuple(c.name for c in table_spec("interval_keys").columns)


def empty_select(name: str) -> str:
    """A typed SELECT of no rows with the table's columns: a view over a table that has no file yet."""
    columns = ", ".join(
        f"CAST(NULL AS {SQL_TYPES[c.type_name]}) AS \"{c.name}\"" for c in table_spec(name).columns
    )
    return f"(SELECT {columns} LIMIT 0)"


def arrow_rows(name: str, rows: Sequence[Mapping[str, Any]]) -> pa.Table:
    """The table's Arrow rows from Python dicts (missing keys are NULL)."""
    schema = table_spec(name).arrow_schema
    return pa.Table.from_batches([record_batch(rows, schema)], schema=schema)


def record_batch(rows: Sequence[Mapping[str, Any]], schema: pa.Schema) -> pa.RecordBatch:
    """Rows as Arrow, each column built from its buffers. pyarrow's converters (from_pylist and the
    like) import pandas on their first use, ~35 MB and a quarter of a second in a process that writes a
    few rows; DuckDB's conversion took ~50 us a row."""
    return pa.RecordBatch.from_arrays([_arrow_column([row.get(f.name) for row in rows], f.type) for f in schema], schema=schema)


def arrow_column(values: list, type_: pa.DataType) -> pa.Array:
    """``values`` (None: null) as an Arrow array of a string, bool, timestamp, int64 or float64 type, built
    from its buffers (no pandas, see ``record_batch``)."""
    return _arrow_column(values, type_)


_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
_MICROSECOND = timedelta(microseconds=1)


def _arrow_column(values: list, type_: pa.DataType) -> pa.Array:
    """An Arrow array of ``values`` (None: null) of one of _TYPES; timestamps are aware datetimes."""
    validity = None
    if None in values:
        validity = pa.py_buffer(np.packbits(np.array([v is not None for v in values], dtype=bool), bitorder="little"))
    if pa.types.is_string(type_):
        encoded = [b"" if v is None else v.encode() for v in values]
        offsets = np.zeros(len(values) + 1, dtype=np.int32)
        np.cumsum([len(b) for b in encoded], out=offsets[1:])
        buffers = [validity, pa.py_buffer(offsets), pa.py_buffer(b"".join(encoded))]
    elif pa.types.is_boolean(type_):
        buffers = [validity, pa.py_buffer(np.packbits(np.array([bool(v) for v in values], dtype=bool), bitorder="little"))]
    elif pa.types.is_timestamp(type_):
        micros = [0 if v is None else (v - _EPOCH) // _MICROSECOND for v in values]
        buffers = [validity, pa.py_buffer(np.array(micros, dtype=np.int64))]
    else:
        dtype = np.float64 if pa.types.is_floating(type_) else np.int64
        buffers = [validity, pa.py_buffer(np.array([0 if v is None else v for v in values], dtype=dtype))]
    return pa.Array.from_buffers(type_, len(values), buffers)
