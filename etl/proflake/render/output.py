"""Write result tables as text table, CSV, JSON (an array of objects) or Parquet."""

from __future__ import annotations

import datetime as dt
import decimal
import io
import json
import math
from typing import BinaryIO

import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq

from proflake.errors import UnknownNameError

FORMATS = ("table", "csv", "json", "parquet")
_MAX_CELL = 100


def check_format(name: str) -> str:
    if name not in FORMATS:
        raise UnknownNameError("output format", name, FORMATS)
    return name


def render(table: pa.Table, fmt: str) -> bytes:
    """The bytes to print or save for ``table`` in format ``fmt``."""
    check_format(fmt)
    if fmt == "parquet":
        buffer = io.BytesIO()
        pq.write_table(table, buffer, compression="zstd")
        return buffer.getvalue()
    if fmt == "csv":
        buffer = io.BytesIO()
        pacsv.write_csv(table, buffer)
        return buffer.getvalue()
    if fmt == "json":
        return (json.dumps(table.to_pylist(), default=_json_default, allow_nan=False, indent=1) + "\n").encode()
    return _text_table(table).encode()


def write(table: pa.Table, fmt: str, stream: BinaryIO) -> None:
    stream.write(render(table, fmt))
    stream.flush()


def _json_default(value: object) -> object:
    if isinstance(value, (dt.datetime, dt.date, dt.time)):
        return value.isoformat()
    if isinstance(value, decimal.Decimal):
        return int(value) if value == value.to_integral_value() else float(value)
    if isinstance(value, bytes):
        return value.hex()
    raise TypeError(f"cannot write {type(value).__name__} as JSON")


def _cell(value: object) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        if math.isinf(value) or math.isnan(value):
            return str(value)
        return f"{value:.6f}" if abs(value) < 1e6 else f"{value:.6g}"
    if isinstance(value, dt.datetime):
        return value.isoformat(sep=" ", timespec="microseconds")
    text = str(value)
    return text if len(text) <= _MAX_CELL else "..." + text[-(_MAX_CELL - 3) :]


def _text_table(table: pa.Table) -> str:
    names = table.column_names
    rows = [[_cell(v) for v in row.values()] for row in table.to_pylist()]
    widths = [max([len(n)] + [len(r[i]) for r in rows]) for i, n in enumerate(names)]
    numeric = [pa.types.is_integer(t) or pa.types.is_floating(t) for t in table.schema.types]

    def line(cells: list[str]) -> str:
        return "  ".join(c.rjust(w) if num else c.ljust(w) for c, w, num in zip(cells, widths, numeric)).rstrip()

    out = [line(names), line(["-" * w for w in widths])]
    out.extend(line(r) for r in rows)
    return "\n".join(out) + "\n"
