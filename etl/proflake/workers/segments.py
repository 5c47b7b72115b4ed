"""A worker's segment: the fact rows of the files it parsed, written as one Parquet file per fact table,
with the segment's partial sums of the phase roll-ups."""

from __future__ import annotations

from collections import deque
from concurrent.futures import Future, ThreadPoolExecutor
from typing import NamedTuple

import numpy as np
import pyarrow as pa

from proflake.errors import ProflakeError
from proflake.schema import INTERVAL_KEY_COLUMNS, PHASE_MEASURES, PHASE_ROLLUP_OF, arrow_schema, table_spec
from proflake.store.deltawrite import DataFile, write_data_file
from proflake.workers.protocol import (
    FactSink,
)

# One parsed file's rows of a fact table: its interval keys, its rows, and their key ids if the reader
# gave them (proflake.readers.parse.ParsedStats.key_ids).
_Part = tuple[tuple, pa.Table, "tuple[np.ndarray, ...] | None"]


class _Segment:
    """Fact rows a worker holds until it writes them: per fact table, each parsed file's part."""

    def __init__(self) -> None:
        self.sink: FactSink | None = None
        self.parts: dict[str, list[_Part]] = {}
        self.rows = 0

    def add(self, interval: tuple | None, facts: dict[str, pa.Table],
            key_ids: dict[str, tuple[np.ndarray, ...]] | None = None) -> None:
        for name, table in facts.items():
            if table.num_rows:
                if interval is None:
                    raise ProflakeError("a parsed file's facts came without its interval keys")
                self.parts.setdefault(name, []).append((interval, table, (key_ids or {}).get(name)))
                self.rows += table.num_rows

    def take(self) -> dict[str, list[_Part]]:
        parts, self.parts, self.rows = self.parts, {}, 0
        return parts


class _SegmentWriter:
    """Writes segments on a thread, one at a time; with FactSink.background the worker parses on
    meanwhile (pyarrow encodes and compresses without the GIL), holding at most the segment being
    written and the one it fills."""

    def __init__(self) -> None:
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="proflake-segment")
        self._writing: deque[tuple[int, Future]] = deque()
        self._done: list[tuple[int, list[DataFile]]] = []

    def write(self, through: int, parts: dict[str, list[_Part]], sink: FactSink) -> None:
        """Write ``parts``, which hold the facts of every chunk up to the ``through``-th."""
        self.wait()
        self._writing.append((through, self._pool.submit(_write_segment, parts, sink)))

    def nothing_to_write(self, through: int) -> None:
        self._done.append((through, []))

    def wait(self) -> None:
        while self._writing:
            through, future = self._writing.popleft()
            try:
                self._done.append((through, future.result()))
            except Exception as e:  # noqa: BLE001 - reported to the parent, which stops the run
                self._done.append((through, e))  # type: ignore[arg-type]

    def finished(self) -> tuple[list[tuple[int, list[DataFile]]], str | None]:
        """Seals written since the last call, in order; or the error of a write that failed."""
        while self._writing and self._writing[0][1].done():
            through, future = self._writing.popleft()
            try:
                self._done.append((through, future.result()))
            except Exception as e:  # noqa: BLE001 - reported to the parent, which stops the run
                self._done.append((through, e))  # type: ignore[arg-type]
        done, self._done = self._done, []
        for _, files in done:
            if isinstance(files, Exception):
                return [], f"{type(files).__name__}: {files}"
        return done, None


def _write_segment(parts: dict[str, list[_Part]], sink: FactSink) -> list[DataFile]:
    """One Parquet file per fact table, its rows in the table's sort order; and, where the sink has a
    folder for the table's phase roll-up, a file of the segment's partial sums for it."""
    files = []
    for name, table_parts in parts.items():
        table, key_ids, starts = _fact_table(name, table_parts)
        files.append(write_data_file(name, table, sink.directories[name], sink.prefix, sink.options))
        rollup = PHASE_ROLLUP_OF.get(name)
        if rollup in sink.directories:
            partial = _phase_partial(rollup, table, key_ids, starts)
            files.append(write_data_file(rollup, partial, sink.directories[rollup], sink.prefix, sink.options))
    return files


def _phase_partial(rollup: str, facts: pa.Table, key_ids: tuple[np.ndarray, ...] | None = None,
                   chunk_starts: np.ndarray | None = None) -> pa.Table:
    """A segment's facts summed per key of the phase roll-up, as the roll-up's rebuild sums a whole job
    (queries/build_phase_function_*.sql): every column of the roll-up but built_from. The parent adds
    these to the rows built before (queries/merge_phase_function_*.sql) instead of reading every fact
    of the job again; a segment's ~100k rows sum to ~1k.

    With ``key_ids`` (ids standing for the function-key columns, row by row) the rows are grouped by
    integers: the interval keys' dictionary indices and the ids, ~5x faster than hashing the text of
    nine columns per row; each group then takes its key text from one of its rows. An id names one key,
    but a key may have two ids (the reader's known keys started over): that leaves two rows of partial
    sums for it, which the merge adds up like any other two. ``chunk_starts`` (_Facts) spares measuring
    the columns' chunks again for each column."""
    spec = table_spec(rollup)
    keys = [c.name for c in spec.columns if c.name not in (*PHASE_MEASURES, "intervals", "built_from")]
    aggregations = [(m, "sum") for m in PHASE_MEASURES]
    if "intervals" in spec.column_names:  # a function appears once per interval: rows count intervals
        aggregations.append((PHASE_MEASURES[0], "count"))
    if key_ids is None:
        # The interval keys are dictionaries with a value per file, repeated: grouping on them hashed far
        # slower than on plain strings (173 ms instead of 55 ms for a 600-file segment).
        grouped = facts.select(keys + list(PHASE_MEASURES))
        grouped = pa.Table.from_arrays([_plain(c) for c in grouped.columns], names=grouped.column_names)
        by = keys
    else:
        interval = _interval_codes([facts[name] for name in keys if name in INTERVAL_KEY_COLUMNS])
        single = _single_code([interval, *key_ids])
        if single is not None:  # one integer key hashes in about half the time of three
            codes = {"_group": single}
        else:
            codes = {"_interval": interval} | {f"_key{i}": ids for i, ids in enumerate(key_ids)}
        grouped = pa.table(codes | {m: facts[m] for m in PHASE_MEASURES} | {"_row": np.arange(facts.num_rows)})
        by = list(codes)
        aggregations.append(("_row", "min"))
    summed = grouped.group_by(by, use_threads=False).aggregate(aggregations)
    columns = {f"{m}_sum": m for m in PHASE_MEASURES} | {f"{PHASE_MEASURES[0]}_count": "intervals"}
    summed = summed.rename_columns([columns.get(c, c) for c in summed.column_names])
    if key_ids is not None:
        summed = summed.sort_by("_row_min")
        rows = summed["_row_min"].to_numpy()
        summed = pa.table({name: _take_ascending(facts[name], rows, chunk_starts) for name in keys}
                          | {c: summed[c] for c in columns.values() if c in summed.column_names})
    fields = [spec.arrow_schema.field(c.name) for c in spec.columns if c.name != "built_from"]
    return pa.Table.from_arrays(
        [_plain(summed[f.name]).cast(f.type) for f in fields], schema=pa.schema([f.with_nullable(True) for f in fields])
    )


def _take_ascending(column: pa.ChunkedArray, rows: np.ndarray, chunk_starts: np.ndarray | None = None) -> pa.Array:
    """``column.take(rows)`` for ascending rows: the chunks that hold them joined, then one take. A
    segment's columns have a chunk per file; ChunkedArray.take joins all of them first (27 ms, against
    ~1 ms here, for 600 files), and a take per chunk cost ~10 us each. ``chunk_starts``: the first row of
    each chunk and the end, as _fact_table gives them: the column's own layout (listing 600 chunks to
    measure them took ~0.6 ms a column). A layout with another number of chunks, or whose chunks holding
    the rows have other lengths, is measured again."""
    if column.num_chunks == 1:
        return column.chunk(0).take(pa.array(rows))
    starts = chunk_starts
    if starts is None or len(starts) != column.num_chunks + 1 or starts[-1] != len(column):
        starts = np.cumsum([0] + [len(chunk) for chunk in column.chunks])
    chunk_of_row = np.searchsorted(starts, rows, side="right") - 1
    holding = np.unique(chunk_of_row)
    if not len(holding):
        return column.chunk(0).slice(0, 0)
    sizes = starts[holding + 1] - starts[holding]
    held = [column.chunk(int(i)) for i in holding]
    if chunk_starts is not None and any(len(chunk) != size for chunk, size in zip(held, sizes)):
        return _take_ascending(column, rows)  # a layout of another column: measure this one
    # A row's place in the join: its place in its chunk, after the held chunks before it.
    offset = np.zeros(len(starts), np.int64)
    offset[holding] = np.cumsum(sizes) - sizes - starts[holding]
    return pa.concat_arrays(held).take(pa.array(rows + offset[chunk_of_row]))


def _single_code(columns: list[np.ndarray]) -> np.ndarray | None:
    """Non-negative integer columns folded into one int64 per row, equal exactly where all of them are
    (mixed radix); None if a value is negative or the fold could pass 2**62."""
    combined = np.zeros(len(columns[0]), np.int64)
    if not len(combined):
        return combined
    for column in columns:
        if column.min() < 0:
            return None
        high, size = int(combined.max()) + 1, int(column.max()) + 1
        if high * size >= 2**62:
            return None
        combined = combined * size + column
    return combined


def _interval_codes(columns: list[pa.ChunkedArray]) -> np.ndarray:
    """One integer per row, equal where the rows' values in all ``columns`` are equal: grouping by one
    integer column instead of five takes a third of the time. _fact_table's interval keys are
    dictionaries of distinct values, so their indices fold into one by arithmetic alone."""
    columns = [column.chunk(0) if column.num_chunks == 1 else column.combine_chunks() for column in columns]
    if all(pa.types.is_dictionary(column.type) and not column.null_count for column in columns):
        # (A dictionary that repeated a value would give it two codes: two rows of partial sums for one
        # key, which the merge adds up like any other two.)
        folded = _single_code([column.indices.to_numpy(zero_copy_only=False) for column in columns])
        if folded is not None:
            return folded
    return _combined_codes([_plain(column) for column in columns])


def _combined_codes(columns: list[pa.Array]) -> np.ndarray:
    """A number per row for its combination of values, from 0 up."""
    combined = np.zeros(len(columns[0]), np.int64)
    for column in columns:
        numbered = column.dictionary_encode()
        # Renumbered after each column, the combinations stay below the rows: no overflow.
        combined = np.unique(combined * len(numbered.dictionary) + numbered.indices.to_numpy(), return_inverse=True)[1]
    return combined


def _plain(column: pa.ChunkedArray | pa.Array) -> pa.ChunkedArray | pa.Array:
    return column.cast(column.type.value_type) if pa.types.is_dictionary(column.type) else column


class _Facts(NamedTuple):
    table: pa.Table
    key_ids: tuple[np.ndarray, ...] | None  # per row, if every file came with them
    chunk_starts: np.ndarray | None  # the first row of each chunk (the same in every fact column), and the end


def _fact_table(name: str, parts: list[_Part]) -> _Facts:
    """A fact table's rows with its interval keys, and their key ids if every file came with them.
    Each file's rows share one interval, so ordering the files orders the rows. Text keys are dictionary
    arrays (a value per file, an index per row): Parquet stores them as dictionaries anyway, and writes
    them fastest so; numbers and times are repeated per row, which Parquet writes faster than a
    dictionary of them (and a null cannot be a dictionary value)."""
    spec = table_spec(name)
    positions = {column: i for i, column in enumerate(INTERVAL_KEY_COLUMNS)}
    by_keys = all(column in positions for column in spec.sort_by)
    if by_keys:
        order = [positions[c] for c in spec.sort_by]
        parts = sorted(parts, key=lambda part: tuple(part[0][i] for i in order))
    file_of_row = np.repeat(np.arange(len(parts), dtype=np.int32), [t.num_rows for _, t, _ in parts])
    indices = pa.array(file_of_row)
    columns = {}
    for i, key in enumerate(arrow_schema("interval_keys")):
        values = pa.array([p[0][i] for p in parts], key.type)
        if pa.types.is_string(key.type) and not values.null_count:
            # One dictionary entry per distinct value, not per file: Parquet's writer took twice as long
            # over a dictionary that repeats its values (a segment's files share their batch, job, node).
            distinct = values.dictionary_encode()
            columns[key.name] = pa.DictionaryArray.from_arrays(distinct.indices.to_numpy()[file_of_row], distinct.dictionary)
        else:
            columns[key.name] = values.take(indices)
    # A chunk per record batch in every column, so the chunk layout is known exactly (_take_ascending).
    batches = [batch for _, t, _ in parts for batch in t.to_batches()]
    facts = pa.Table.from_batches(batches, schema=parts[0][1].schema)
    columns.update({c: facts[c] for c in facts.column_names})
    # Columns declared non-nullable are written as required Parquet columns, with no definition
    # levels to encode (~15% of the encoding time); a null in one is a reader bug, and stops the run.
    fields = []
    for column in spec.columns:
        values = columns[column.name]
        if not column.nullable and values.null_count:
            raise ValueError(f"{name}.{column.name} is declared non-nullable but holds {values.null_count} null(s)")
        fields.append(pa.field(column.name, values.type, nullable=column.nullable))
    table = pa.Table.from_arrays([columns[c.name] for c in spec.columns], schema=pa.schema(fields))
    key_ids: tuple[np.ndarray, ...] | None = None
    if all(ids is not None for _, _, ids in parts):
        key_ids = tuple(np.concatenate(column) for column in zip(*(ids for _, _, ids in parts)))
    starts: np.ndarray | None = np.cumsum([0] + [batch.num_rows for batch in batches])
    if not by_keys and spec.sort_by:
        table = table.sort_by([(c, "ascending") for c in spec.sort_by])
        key_ids = starts = None  # rows reordered
    return _Facts(table, key_ids, starts)
