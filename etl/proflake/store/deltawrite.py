"""Data files of Delta tables written outside deltalake, then committed to their table in one transaction.

Parse workers write the Parquet files of the fact tables themselves, with pyarrow and the settings of
etl/proflake/store/store.py's writer_properties(), so encoding and compression run in every worker process instead of
in the ingest's main process; the main process only commits what they wrote: one add action per file,
carrying the statistics deltalake itself would write (readers skip files by them, and the fetches use
each file's start_time_us range). A file is invisible until that commit: a run killed before it leaves
an unreferenced file (``proflake compact``'s vacuum removes it) and never a row.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import re
import secrets
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.parquet as pq

if TYPE_CHECKING:  # parse workers import this module: they never need deltalake itself
    from deltalake import DeltaTable, WriterProperties

# Delta's default dataSkippingNumIndexedCols: statistics for the first 32 columns, as deltalake writes.
STATS_COLUMNS = 32


@dataclass(frozen=True)
class DataFile:
    """One Parquet file written for a table, not yet committed."""

    table: str
    local_path: str  # where it was written: inside the table's folder, or a spool folder for S3
    name: str  # its path relative to the table
    size: int
    rows: int
    stats: str  # Delta's JSON file statistics


def parquet_options(props: WriterProperties) -> dict:
    """pyarrow.parquet.ParquetWriter arguments equivalent to deltalake ``WriterProperties``.

    Raises ValueError for a setting it cannot translate, so a change to the store's writer settings
    cannot silently diverge from what the workers write (a test builds these from writer_properties())."""
    options: dict = {"write_statistics": True, "write_page_index": True, "store_schema": False}
    match = re.fullmatch(r"(\w+)(?:\((\d+)\))?", str(props.compression or "UNCOMPRESSED"))
    if not match:
        raise ValueError(f"cannot translate compression {props.compression!r}")
    options["compression"] = {"UNCOMPRESSED": "none"}.get(match[1], match[1].lower())
    if match[2]:
        options["compression_level"] = int(match[2])
    if props.data_page_size_limit is not None:
        options["data_page_size"] = props.data_page_size_limit
    if props.dictionary_page_size_limit is not None:
        options["dictionary_pagesize_limit"] = props.dictionary_page_size_limit
    if props.write_batch_size is not None:
        options["write_batch_size"] = props.write_batch_size
    if props.data_page_row_count_limit is not None:
        options["max_rows_per_page"] = props.data_page_row_count_limit
    if props.statistics_truncate_length is not None or props.default_column_properties is not None:
        raise ValueError("cannot translate statistics_truncate_length or default_column_properties")
    options["row_group_size"] = props.max_row_group_size
    no_dictionary, encodings = set(), {}
    for column, cp in (props.column_properties or {}).items():
        if cp.bloom_filter_properties is not None or cp.statistics_enabled not in (None, "CHUNK", "PAGE"):
            raise ValueError(f"cannot translate the properties of column {column!r}")
        if cp.dictionary_enabled is False:
            no_dictionary.add(column)
        if cp.encoding is not None:
            encodings[column] = cp.encoding
    options["_no_dictionary"] = frozenset(no_dictionary)
    options["_encodings"] = encodings
    return options


def write_data_file(name: str, table: pa.Table, directory: str, prefix: str, options: dict) -> DataFile:
    """Write ``table`` (columns and order as declared; dictionary columns allowed) as one Parquet file."""
    file_name = f"part-{prefix}-{secrets.token_hex(8)}.zstd.parquet"
    path = os.path.join(directory, file_name)
    columns = set(table.column_names)
    kwargs = {k: v for k, v in options.items() if not k.startswith("_")}
    kwargs["use_dictionary"] = [c for c in table.column_names if c not in options["_no_dictionary"]]
    kwargs["column_encoding"] = {c: e for c, e in options["_encodings"].items() if c in columns} or None
    row_group_size = kwargs.pop("row_group_size")
    with pq.ParquetWriter(path, table.schema, **kwargs) as writer:
        writer.write_table(table, row_group_size=row_group_size)
    return DataFile(name, path, file_name, os.path.getsize(path), table.num_rows, file_stats(pq.read_metadata(path)))


def file_stats(metadata: pq.FileMetaData) -> str:
    """Delta's per-file statistics from the Parquet footer: numRecords, and minValues, maxValues and
    nullCount of the first STATS_COLUMNS columns, formatted as deltalake writes them."""
    low: dict = {}
    high: dict = {}
    nulls: dict = {}
    names = [metadata.schema.column(i).name for i in range(min(metadata.num_columns, STATS_COLUMNS))]
    for g in range(metadata.num_row_groups):
        group = metadata.row_group(g)
        for i, name in enumerate(names):
            stats = group.column(i).statistics
            if stats is None or not stats.has_null_count:
                nulls[name] = None
            elif nulls.get(name, 0) is not None:
                nulls[name] = nulls.get(name, 0) + stats.null_count
            if stats is None or not stats.has_min_max:
                continue
            least, most = _bounds(stats)
            if name not in low or least < low[name]:
                low[name] = least
            if name not in high or most > high[name]:
                high[name] = most
    return json.dumps(
        {
            "numRecords": metadata.num_rows,
            "minValues": {k: _json_value(v) for k, v in low.items()},
            "maxValues": {k: _json_value(v) for k, v in high.items()},
            "nullCount": {k: v for k, v in nulls.items() if v is not None},
        },
        separators=(",", ":"),
    )


# A timestamp statistic's unit -> (multiplier, divisor) that make it microseconds.
_TO_MICROSECONDS = {"milliseconds": (1000, 1), "microseconds": (1, 1), "nanoseconds": (1, 1000)}


def _bounds(stats: pq.Statistics) -> tuple[object, object]:
    """A column chunk's min and max. Timestamps are converted here: pyarrow's conversion of them
    imports pandas (~35 MB) into the process, which for the ingest's own is the only reason it would."""
    logical = stats.logical_type
    if logical.type != "TIMESTAMP":
        return stats.min, stats.max
    details = json.loads(logical.to_json())
    epoch = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc if details["isAdjustedToUTC"] else None)
    multiplier, divisor = _TO_MICROSECONDS[details["timeUnit"]]
    least, most = (epoch + dt.timedelta(microseconds=raw * multiplier // divisor) for raw in (stats.min_raw, stats.max_raw))
    return least, most


def _json_value(value: object) -> object:
    if isinstance(value, dt.datetime):
        # deltalake truncates timestamp statistics to milliseconds (both bounds) and writes UTC with Z.
        value = value.astimezone(dt.timezone.utc)
        millis = value.microsecond // 1000
        return value.strftime("%Y-%m-%dT%H:%M:%S") + (f".{millis:03d}" if millis else "") + "Z"
    return value


def commit_data_files(table: DeltaTable, files: list[DataFile], batch_id: str, *, replace_all: bool = False) -> None:
    """Add ``files`` (already in the table's folder) to ``table`` in one commit; with ``replace_all``,
    the same commit removes every file the table had."""
    from deltalake import CommitProperties
    from deltalake.transaction import AddAction, RemoveAction

    now = int(time.time() * 1000)
    actions: list[AddAction | RemoveAction] = [AddAction(f.name, f.size, {}, now, True, f.stats) for f in files]
    table.create_write_transaction(
        actions,
        mode="overwrite" if replace_all else "append",
        schema=table.schema(),
        commit_properties=CommitProperties(custom_metadata={"proflake.batch_id": batch_id}),
    )
