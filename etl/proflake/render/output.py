"""Result tables for programs: CSV, JSON (an array of objects), Parquet, and a plain text table.

These formats are the contract scripts rely on: every row, every column in the table's order, full
precision. Floats are written rounded to 1e-9 (a nanosecond, for times in seconds): sums of cProfile
times carry binary noise past that (``0.039528758000000004``), never information. Parquet keeps the
values as stored. The terminal's table for people is ``proflake.render.terminal``.

pyarrow is imported by the functions that need it, so that ``proflake --help`` does not pay for it.
"""

from __future__ import annotations

import datetime as dt
import decimal
import io
import json
import math
from typing import TYPE_CHECKING, BinaryIO

from proflake.errors import UnknownNameError

if TYPE_CHECKING:
    import pyarrow as pa

FORMATS = ("table", "csv", "json", "parquet")
BINARY_FORMATS = ("parquet",)
DECIMALS = 9  # floats in text formats: rounded to a nanosecond of a time in seconds


def check_format(name: str) -> str:
    if name not in FORMATS:
        raise UnknownNameError("output format", name, FORMATS)
    return name


def render(table: pa.Table, fmt: str) -> bytes:
    """The bytes to print or save for ``table`` in format ``fmt`` (``table`` = the plain text table)."""
    check_format(fmt)
    if fmt == "parquet":
        import pyarrow.parquet as pq

        buffer = io.BytesIO()
        pq.write_table(table, buffer, compression="zstd")
        return buffer.getvalue()
    table = round_floats(table)
    if fmt == "csv":
        import pyarrow.csv as pacsv

        buffer = io.BytesIO()
        pacsv.write_csv(table, buffer)
        return buffer.getvalue()
    if fmt == "json":
        return (json.dumps(_rows(table), default=_json_default, allow_nan=False, indent=1) + "\n").encode()
    return plain_table(table).encode()


def write(table: pa.Table, fmt: str, stream: BinaryIO) -> None:
    stream.write(render(table, fmt))
    stream.flush()


def round_floats(table: pa.Table) -> pa.Table:
    """``table`` with every float column rounded to DECIMALS places (NaN and infinities kept)."""
    import pyarrow as pa

    for i, field in enumerate(table.schema):
        if pa.types.is_floating(field.type):
            # Python's round() gives the float nearest the rounded decimal (pyarrow's round can be one
            # ulp off it: 0.0037329999999999998), so the shortest text of each value is the decimal.
            column = table.column(i).combine_chunks()
            if column.type != pa.float64():  # a cast, even a no-op one, imports pyarrow.compute (~60 ms)
                column = column.cast(pa.float64())
            table = table.set_column(i, field, _rounded(column))
    return table


def _rounded(array: pa.Array) -> pa.Array:
    """A float64 array rounded to DECIMALS places, built from buffers: ``pa.array`` of a list or of
    NumPy values imports pandas when it is installed (a second of start-up on a slow disk)."""
    import numpy as np
    import pyarrow as pa

    from proflake import arrowfn

    values = array.to_pylist()
    out = np.array([0.0 if v is None else v if not math.isfinite(v) else round(v, DECIMALS) for v in values], np.float64)
    # arrowfn: Array.is_valid() imports pyarrow.compute
    validity = arrowfn.call_function("is_valid", [array]).buffers()[1] if array.null_count else None
    return pa.Array.from_buffers(pa.float64(), len(array), [validity, pa.py_buffer(out)], array.null_count)


def _rows(table: pa.Table) -> list[dict]:
    """The rows as dicts, column by column: ``to_pylist`` on a timestamp column imports pandas on some
    pyarrow versions, which cost a second of start-up; timestamps become ISO 8601 text here instead."""
    import pyarrow as pa

    columns = []
    for field, column in zip(table.schema, table.columns):
        if pa.types.is_timestamp(field.type):
            columns.append([iso_timestamp(v) for v in timestamps(column)])
        else:
            columns.append(column.to_pylist())
    names = table.column_names
    return [dict(zip(names, values)) for values in zip(*columns)] if columns else []


def timestamps(column: pa.ChunkedArray | pa.Array) -> list[dt.datetime | None]:
    """A timestamp column as aware UTC datetimes, computed from the integers (no pandas, no zoneinfo)."""
    import pyarrow as pa

    unit = column.type.unit
    per_second = {"s": 1, "ms": 1_000, "us": 1_000_000, "ns": 1_000_000_000}[unit]
    epoch = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)
    # view, not cast: a cast loads pyarrow.compute, a tenth of a second of start-up
    chunks = column.chunks if isinstance(column, pa.ChunkedArray) else [column]
    values = [v for chunk in chunks for v in chunk.view(pa.int64()).to_pylist()]
    out: list[dt.datetime | None] = []
    for v in values:
        if v is None:
            out.append(None)
        else:
            seconds, rest = divmod(v, per_second)
            out.append(epoch + dt.timedelta(seconds=seconds, microseconds=rest * 1_000_000 // per_second))
    return out


def iso_timestamp(value: dt.datetime | None, timespec: str = "microseconds") -> str | None:
    """ISO 8601 with the UTC offset, ``2020-08-04T23:56:03.775342+00:00``; None stays None."""
    if value is None:
        return None
    if value.tzinfo is None:
        value = value.replace(tzinfo=dt.timezone.utc)
    return value.astimezone(dt.timezone.utc).isoformat(timespec=timespec)


def _json_default(value: object) -> object:
    if isinstance(value, (dt.datetime, dt.date, dt.time)):
        return value.isoformat()
    if isinstance(value, decimal.Decimal):
        return int(value) if value == value.to_integral_value() else float(value)
    if isinstance(value, bytes):
        return value.hex()
    raise TypeError(f"cannot write {type(value).__name__} as JSON")


def _plain_cell(value: object) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        if math.isinf(value) or math.isnan(value):
            return str(value)
        return repr(value)  # the shortest text that reads back as the same float
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def plain_table(table: pa.Table) -> str:
    """Aligned columns for a pipe or a file: every row, every column, no value shortened."""
    import pyarrow as pa

    names = table.column_names
    columns = [[_plain_cell(v) for v in values] for values in _rows_by_column(table)]
    rows = list(zip(*columns)) if columns else []
    widths = [max([len(n)] + [len(c) for c in col]) for n, col in zip(names, columns)]
    numeric = [pa.types.is_integer(t) or pa.types.is_floating(t) for t in table.schema.types]

    def line(cells) -> str:
        return "  ".join(c.rjust(w) if num else c.ljust(w) for c, w, num in zip(cells, widths, numeric)).rstrip()

    out = [line(names), line(["-" * w for w in widths])]
    out.extend(line(r) for r in rows)
    return "\n".join(out) + "\n"


def _rows_by_column(table: pa.Table) -> list[list]:
    import pyarrow as pa

    return [
        [iso_timestamp(v) for v in timestamps(column)] if pa.types.is_timestamp(field.type) else column.to_pylist()
        for field, column in zip(table.schema, table.columns)
    ]
