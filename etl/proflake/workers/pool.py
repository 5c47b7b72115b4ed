"""Parse stats files in worker processes, so a decoder crash costs one file, not the batch.

Each worker is a separate Python process (``_BOOT``, or ``python -m proflake.workers.pool``) with an address-space limit
(RLIMIT_AS), fed chunks of files over its stdin and answering on its stdout. Plain subprocesses, not
multiprocessing: they never re-import the caller's ``__main__``, so ``ingest()`` works from any script
or notebook without a ``if __name__ == "__main__"`` guard. A chunk amortises the inter-process cost
over several files. When a worker dies (a segfault in a decoder, the kernel's OOM killer) or overruns
its time, the chunk it held is split and each file retried alone in a fresh worker; the file that kills
a worker on its own is the one reported, as ``crash`` or ``timeout``. Memory errors inside the limit
arrive as ``memory``. Idle workers are kept for the next run in the same process.

Fact rows never travel back to the parent. The parent deals each worker a *stripe* of consecutive
chunks, about ``FactSink.flush_rows`` fact rows' worth and never two nodes' (``_stretch``); the worker
keeps the rows of the files it parses (its *segment*) and, when its stripe ends, writes them as one
Parquet file per fact table, rows sorted, interval keys dictionary-encoded, into the sink's folders
(etl/proflake/store/deltawrite.py). Encoding and
compression so run in every worker, and the parent only commits the files. Outcomes reach the caller
when the files holding their rows are written (*sealed*): if a worker dies, the chunks of its unwritten
segment are parsed again elsewhere, so no file's rows are lost or written twice.
"""

from __future__ import annotations

import atexit
import importlib
import os
import subprocess
import sys
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from multiprocessing.connection import Connection, wait
from typing import NamedTuple

import numpy as np
import pyarrow as pa

from proflake.errors import ParseError, ProflakeError, StoreError
from proflake.readers.parse import ParsedStats
from proflake.schema import INTERVAL_KEY_COLUMNS, PHASE_MEASURES, PHASE_ROLLUP_OF, arrow_schema, table_spec
from proflake.store.deltawrite import DataFile, write_data_file
from proflake.store.memory import release_memory

DEFAULT_MEMORY_MB = 2048
DEFAULT_TIMEOUT_S = 120.0
CHUNK_FILES = 16
CHUNK_BYTES = 8 * 1024 * 1024
DEFAULT_PARSE = "proflake.readers.parse:parse_stats"
# A worker writes its segment when the parent says a stripe ends (ParsePool: about ``flush_rows``);
# holding this many times more rows, it writes anyway, so a misjudged stripe cannot exhaust memory.
OVERFLOW = 1.5
# A worker that dies this many times writing its segment (not parsing: those files are retried alone)
# points at the store or the machine, not at a file: the run stops.
MAX_WRITE_DEATHS = 3


@dataclass(frozen=True)
class Task:
    key: int  # the caller's handle for the file
    profiler: str
    data: bytes
    interval: tuple | None = None  # its interval-key values (proflake.schema.INTERVAL_KEY_COLUMNS order)
    # A local file the worker reads itself instead of ``data`` (the bytes then never cross a pipe),
    # and its size.
    path: str | None = None
    size: int = 0


@dataclass(frozen=True)
class FactSink:
    """Where workers write fact rows: ``directories`` maps each fact table to the folder its files go
    in (the table's own folder, or a spool folder the parent uploads from); ``prefix`` (the batch id)
    starts every file name; a worker writes segments of about ``flush_rows`` fact rows, with ``options``
    (proflake.store.deltawrite.parquet_options of the store's writer settings); ``background``: on a thread, while
    it parses on (worth it when a core would otherwise idle, at the cost of a second segment in memory)."""

    directories: dict[str, str]
    prefix: str
    flush_rows: int
    options: dict
    background: bool = False


@dataclass(frozen=True)
class Failure:
    kind: str
    message: str


@dataclass(frozen=True)
class ParsedFile:
    summary: dict  # what proflake.readers.parse.ParsedStats.summary holds
    counts: dict[str, int]  # rows this file contributed to each fact table of its chunk


@dataclass
class ChunkResult:
    """Outcomes of parsed files (a ParsedFile, a Failure, or whatever a custom parse function returned)
    and the data files, not yet committed, that hold all their fact rows."""

    outcomes: list[tuple[int, object]]
    files: list[DataFile] = field(default_factory=list)


@dataclass(frozen=True)
class _Reply:
    """A worker's answer to one message: the outcomes of the chunk it parsed, and the segments it
    finished writing since its last answer (*seals*): (n, files) means the files hold the facts of
    every chunk up to its n-th."""

    outcomes: list[tuple[int, object]]
    seals: list[tuple[int, list[DataFile]]] = field(default_factory=list)
    error: str | None = None  # writing a segment failed: the run must stop, not quarantine files


def default_workers() -> int:
    return max(1, min(os.cpu_count() or 1, 8))


# -- the worker process -----------------------------------------------------------------------------
def _limit_memory(memory_mb: int) -> None:
    try:
        import resource

        limit = memory_mb * 1024 * 1024
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    except (ImportError, ValueError, OSError):
        pass  # not on this platform: the time limit and crash isolation still hold


def _load(spec: str) -> Callable[[str, bytes], object]:
    module, _, name = spec.partition(":")
    return getattr(importlib.import_module(module), name)


def worker_main(memory_mb: int, spec: str) -> None:
    # The protocol owns the real stdout; anything a library prints goes to stderr instead.
    output = Connection(os.dup(1), readable=False)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    tasks = Connection(0, writable=False)
    parse = _load(spec)
    _limit_memory(memory_mb)
    segment = _Segment()
    writer = _SegmentWriter()
    parsed = 0  # chunks answered: a seal covers every chunk up to a count
    output.send("ready")
    while True:
        try:
            message = tasks.recv()
        except EOFError:
            return
        if message is None:
            return
        sink, chunk, write, wait_all = message
        if segment.sink is not None and segment.sink != sink:
            segment.take()  # left by a run its parent abandoned: never written under another batch
        segment.sink = sink
        outcomes: list[tuple[int, object]] = []
        for key, profiler, data, interval, path in chunk:
            if path is not None:
                try:
                    data = _read_file(path)
                except OSError as e:
                    outcomes.append((key, Failure("read", f"cannot read {path!r}: {e.strerror}")))
                    continue
            try:
                result = parse(profiler, data)
            except ParseError as e:
                result = Failure(e.kind, str(e))
            except MemoryError:
                result = Failure("memory", f"parsing needed more than the {memory_mb} MB a worker may use")
            except RecursionError:
                result = Failure("too_deep", "the data nests deeper than the parser allows")
            except Exception as e:  # a reader bug must cost one file, not the batch
                result = Failure("internal", f"unexpected {type(e).__name__} while parsing: {e}")
            if isinstance(result, ParsedStats):
                if sink is not None:  # without one, a caller wants outcomes only
                    segment.add(interval, result.facts, result.key_ids)
                result = ParsedFile(result.summary, {name: t.num_rows for name, t in result.facts.items()})
            outcomes.append((key, result))
            del data
        if chunk:
            parsed += 1
        del chunk
        if sink is None:
            writer.nothing_to_write(parsed)
        elif write or segment.rows >= sink.flush_rows * OVERFLOW:
            writer.write(parsed, segment.take(), sink)
        if wait_all or (sink is not None and not sink.background):  # wait_all: the parent's last word
            writer.wait()
        seals, error = writer.finished()
        if wait_all:
            release_memory()  # idle now, maybe for long: the parent commits, or keeps it for its next run
        output.send(_Reply(outcomes, seals, error))


def _read_file(path: str) -> bytes:
    # As proflake.sources.local.LocalSource.read: O_NOFOLLOW, so a file swapped for a link after listing
    # is still not followed.
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    with os.fdopen(fd, "rb") as f:
        return f.read()


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
    key_ids = None
    if all(ids is not None for _, _, ids in parts):
        key_ids = tuple(np.concatenate(column) for column in zip(*(ids for _, _, ids in parts)))
    starts = np.cumsum([0] + [batch.num_rows for batch in batches])
    if not by_keys and spec.sort_by:
        table = table.sort_by([(c, "ascending") for c in spec.sort_by])
        key_ids = starts = None  # rows reordered
    return _Facts(table, key_ids, starts)


# -- the parent side ----------------------------------------------------------------------------------
# A worker loads ``proflake`` as a bare package: the package's __init__ imports the query stack (DuckDB,
# deltalake, the API), which parsing never uses. And it hides pandas, which pyarrow imports on its
# first conversion of a Python list just to ask whether the list is a pandas object. Each saves ~40 MB
# per worker and a fraction of a second of its start. ``python -m proflake.workers.pool`` runs the same loop with
# the full package.
_BOOT = """
import sys
class NoPandas:
    @staticmethod
    def find_spec(name, path=None, target=None):
        if name.partition(".")[0] == "pandas":
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
sys.meta_path.insert(0, NoPandas)
from proflake.workers.pool import worker_main
worker_main(int(sys.argv[1]), sys.argv[2])
"""
# The kernel's pipe buffer holds a whole chunk, so handing a worker its next chunk while it parses
# the current one never blocks the parent (Linux; elsewhere the default size only costs overlap).
PIPE_BYTES = 1024 * 1024
IN_FLIGHT = 2  # chunks queued per worker: it starts the next one without waiting for the parent
# Input bytes per fact row, until a pool has written some (cProfile files hold ~50, pyinstrument ~300):
# it sizes the first stripes; a guess on the high side only makes their segments overflow sooner.
GUESS_BYTES_PER_ROW = 64


class _Worker:
    def __init__(self, memory_mb: int, spec: str) -> None:
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
        # Arrow's default allocator (mimalloc) keeps ~70 MB more at a worker's peak than the C library's
        # for the same work at the same speed (measured on a segment's parse and write).
        env.setdefault("ARROW_DEFAULT_MEMORY_POOL", "system")
        self.process = subprocess.Popen(
            [sys.executable, "-c", _BOOT, str(memory_mb), spec],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=env,
        )
        self.tasks = Connection(os.dup(self.process.stdin.fileno()), readable=False)  # type: ignore[union-attr]
        self.results = Connection(os.dup(self.process.stdout.fileno()), writable=False)  # type: ignore[union-attr]
        self.process.stdin.close()  # type: ignore[union-attr]
        self.process.stdout.close()  # type: ignore[union-attr]
        self.pipe_bytes = _grow_pipe(self.tasks.fileno())
        self.started = False
        # Chunks sent and not answered yet, oldest (the one being parsed) first; [] asks for a write.
        self.in_flight: deque[list[Task]] = deque()
        self.deadline = 0.0
        # Chunks it parsed whose facts it has not written yet, numbered as it counts them, with their
        # outcomes: released when it reports them written (ParsePool._answered).
        self.parsed = 0
        self.unsealed: list[tuple[int, list[Task], list[tuple[int, object]]]] = []

    def wait_started(self) -> None:
        # A worker that cannot even start (broken environment) must stop the run, not quarantine files.
        if self.started:
            return
        if not self.results.poll(120) or _recv_or_none(self.results) != "ready":
            self.kill()
            raise ProflakeError(
                f"a parse worker process failed to start (exit code {self.process.returncode}); "
                f"check that '{sys.executable} -m proflake.workers.pool' runs"
            )
        self.started = True

    def can_queue(self, chunk: list[Task]) -> bool:
        """Another chunk may wait in its pipe only if it fits there (a worker reads a chunk whole before
        parsing it, so the pipe is empty meanwhile): the parent must never block on a busy worker."""
        if not self.in_flight:
            return True
        return len(self.in_flight) < IN_FLIGHT and sum(len(t.data) for t in chunk) + 64 * 1024 <= self.pipe_bytes

    def send(
        self, chunk: list[Task], timeout: float, sink: FactSink | None, write: bool = False, last: bool = False
    ) -> None:
        """Queue ``chunk`` (possibly empty), then a write of the segment if ``write``; ``last``: the
        answer waits until everything is written."""
        if not self.in_flight:
            self.deadline = time.monotonic() + timeout * max(1, len(chunk))
        self.in_flight.append(chunk)
        try:
            message = [(t.key, t.profiler, t.data, t.interval, t.path) for t in chunk]
            self.tasks.send((sink, message, write or last, last))
        except OSError:
            pass  # it died: its results pipe reports EOF and ParsePool.parse handles the chunk

    def answered(self, timeout: float) -> list[Task]:
        """The oldest chunk is answered: the next one starts its clock."""
        chunk = self.in_flight.popleft()
        if self.in_flight:
            self.deadline = time.monotonic() + timeout * max(1, len(self.in_flight[0]))
        return chunk

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait(timeout=10)
        self.tasks.close()
        self.results.close()

    def stop(self) -> None:
        try:
            self.tasks.send(None)
        except OSError:
            pass
        try:
            self.process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.tasks.close()
        self.results.close()


def _grow_pipe(fd: int) -> int:
    try:
        import fcntl

        return fcntl.fcntl(fd, fcntl.F_SETPIPE_SZ, PIPE_BYTES)  # type: ignore[attr-defined]
    except (ImportError, AttributeError, OSError):
        return 64 * 1024


_IDLE: dict[tuple[int, str], list[_Worker]] = {}


@atexit.register
def _stop_idle_workers() -> None:
    for workers in _IDLE.values():
        for worker in workers:
            worker.stop()
    _IDLE.clear()


class ParsePool:
    """``for result in pool.parse(tasks, sink)``: ChunkResults as their files are written (see ChunkResult)."""

    def __init__(
        self,
        workers: int | None = None,
        *,
        memory_mb: int = DEFAULT_MEMORY_MB,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        parse: str = DEFAULT_PARSE,
    ) -> None:
        """``parse`` names the parse function as "module:function" (tests swap in misbehaving ones)."""
        self.size = workers or default_workers()
        self.memory_mb = memory_mb
        self.timeout_s = timeout_s
        self.spec = parse
        self.crashes = 0
        self.write_deaths = 0
        self._workers: list[_Worker] = []
        self._bytes_written = 0
        self._rows_written = 0

    def __enter__(self) -> ParsePool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def start(self) -> None:
        """Start the workers now, without waiting for them: they import while the caller lists files."""
        while len(self._workers) < self.size:
            self._workers.append(self._reuse() or _Worker(self.memory_mb, self.spec))

    def close(self) -> None:
        """Keep idle workers for the next pool in this process (a notebook re-ingesting, a test suite)."""
        kept = _IDLE.setdefault((self.memory_mb, self.spec), [])
        for worker in self._workers:
            if worker.in_flight or worker.unsealed:
                worker.kill()  # abandoned mid-run: what it holds belongs to no one now
            elif len(kept) < default_workers() and worker.process.poll() is None:
                kept.append(worker)
            else:
                worker.stop()
        self._workers.clear()

    def _reuse(self) -> _Worker | None:
        kept = _IDLE.get((self.memory_mb, self.spec), [])
        while kept:
            worker = kept.pop()
            if worker.process.poll() is None:
                return worker
            worker.kill()
        return None

    def parse(self, tasks: Iterable[Task], sink: FactSink | None = None) -> Iterator[ChunkResult]:
        """Parse ``tasks``; with a ``sink``, workers write the facts there (without one they are dropped).

        A ChunkResult comes once the files holding its facts are written, so a worker that dies costs
        only a re-parse of what it had not written yet."""
        stripes = _Stripes(_chunks(tasks), lambda: (sink.flush_rows if sink else 1) * self._bytes_per_row())
        finished: set[_Worker] = set()
        try:
            while True:
                self.start()
                # Hand out chunks, the least loaded worker first, as long as none of them has to wait.
                for worker in sorted(self._workers, key=lambda w: len(w.in_flight)):
                    while len(worker.in_flight) < IN_FLIGHT:
                        taken = stripes.take(worker, fits=worker.can_queue)
                        if taken is None:
                            break
                        chunk, write = taken
                        worker.wait_started()
                        worker.send(chunk, self.timeout_s, sink, write)
                        finished.discard(worker)
                busy = [w for w in self._workers if w.in_flight]
                if not busy:
                    # Everything is parsed: the workers write what they still hold, then go idle.
                    ending = [w for w in self._workers if w.started and (w not in finished or w.unsealed)]
                    if not ending:
                        return
                    for worker in ending:
                        worker.send([], self.timeout_s, sink, last=True)
                        finished.add(worker)
                    busy = ending
                timeout = max(0.0, min(w.deadline for w in busy) - time.monotonic())
                ready = wait([w.results for w in busy], timeout=timeout)
                now = time.monotonic()
                for worker in busy:
                    if worker.results in ready:
                        reply = _recv_or_none(worker.results)
                        if isinstance(reply, _Reply):
                            yield from self._answered(worker, reply)
                            continue
                        yield from self._lost(worker, timed_out=False, retry=stripes.retry)  # its pipe closed: it died
                        stripes.forget(worker)
                    elif now >= worker.deadline:
                        yield from self._lost(worker, timed_out=True, retry=stripes.retry)
                        stripes.forget(worker)
        except BaseException:
            for worker in self._workers:
                if worker.in_flight or worker.unsealed:
                    worker.kill()
            self._workers = [w for w in self._workers if w.process.poll() is None]
            raise

    def _bytes_per_row(self) -> float:
        """Input bytes per fact row written so far in this pool (a guess until the first write)."""
        return self._bytes_written / self._rows_written if self._rows_written else GUESS_BYTES_PER_ROW

    def _answered(self, worker: _Worker, reply: _Reply) -> Iterator[ChunkResult]:
        if reply.error is not None:
            raise StoreError(f"a parse worker could not write its fact files: {reply.error}")
        chunk = worker.answered(self.timeout_s)
        if chunk:
            worker.parsed += 1
            worker.unsealed.append((worker.parsed, chunk, reply.outcomes))
        for through, files in reply.seals:
            released = [entry for entry in worker.unsealed if entry[0] <= through]
            worker.unsealed = [entry for entry in worker.unsealed if entry[0] > through]
            if files:
                self._bytes_written += sum(_size(t) for _, chunk, _ in released for t in chunk)
                self._rows_written += sum(f.rows for f in files)
            yield ChunkResult([o for _, _, outcomes in released for o in outcomes], files)

    def _lost(self, worker: _Worker, *, timed_out: bool, retry: deque) -> Iterator[ChunkResult]:
        if not timed_out:
            try:
                worker.process.wait(timeout=5)  # it closed its pipe while dying: let it finish, to tell how
            except subprocess.TimeoutExpired:
                pass
        worker.kill()
        self._workers.remove(worker)
        # What it parsed but never wrote, and what it had not started, is parsed again whole: those
        # files did not kill it.
        retry.extend(chunk for _, chunk, _ in worker.unsealed)
        retry.extend(c for c in list(worker.in_flight)[1:] if c)
        chunk = worker.in_flight[0] if worker.in_flight else []
        if len(chunk) > 1:
            retry.extend([task] for task in chunk)  # find which file it was
            return
        if not chunk:  # it died writing its segment: every chunk of it is queued again
            self.write_deaths += 1
            if self.write_deaths >= MAX_WRITE_DEATHS:
                raise StoreError(f"parse workers died {self.write_deaths} times writing their fact files; check memory and disk")
            return
        self.crashes += 1
        yield ChunkResult([(task.key, _failure_of(worker, timed_out, self.timeout_s)) for task in chunk])


def _recv_or_none(conn: Connection) -> object:
    try:
        return conn.recv()
    except (EOFError, OSError):
        return None


def _failure_of(worker: _Worker, timed_out: bool, timeout_s: float) -> Failure:
    if timed_out:
        return Failure("timeout", f"parsing took longer than {timeout_s:g} s; the worker was stopped")
    code = worker.process.returncode
    how = f"signal {-code}" if code is not None and code < 0 else f"exit code {code}"
    return Failure("crash", f"the parser process died on this file ({how})")


def _size(task: Task) -> int:
    return len(task.data) or task.size


_JOB_ID, _NODE_ID = INTERVAL_KEY_COLUMNS.index("job_id"), INTERVAL_KEY_COLUMNS.index("node_id")


def _stretch(task: Task) -> tuple:
    """The job and node whose rows a task adds. No chunk, stripe or file mixes two: the caller orders
    tasks by (job, node, start time), and a file crossing from one node's last interval to the next
    node's first would span the whole job in time, so every time-bounded question would open it."""
    return () if task.interval is None else (task.interval[_JOB_ID], task.interval[_NODE_ID])


def _chunks(tasks: Iterable[Task]) -> Iterator[list[Task]]:
    chunk: list[Task] = []
    size = 0
    for task in tasks:
        if chunk and _stretch(task) != _stretch(chunk[-1]):
            yield chunk
            chunk, size = [], 0
        chunk.append(task)
        size += _size(task)
        if len(chunk) >= CHUNK_FILES or size >= CHUNK_BYTES:
            yield chunk
            chunk, size = [], 0
    if chunk:
        yield chunk


class _Stripes:
    """Hands out chunks so that each worker parses a contiguous run of the tasks (a *stripe*, about
    ``stripe_bytes()`` of input: one segment's worth) and writes it as its own files. Files then span
    narrow stretches of the caller's order, which is what readers skip files by; dealt one chunk at a
    time, every worker's files would span the whole run of all of them. When the tasks run out, an
    idle worker takes the second half of the longest stripe still queued: contiguous, and no worker
    idles while another has a stripe to finish."""

    def __init__(self, chunks: Iterator[list[Task]], stripe_bytes: Callable[[], float]) -> None:
        self.chunks = chunks
        self.stripe_bytes = stripe_bytes
        self.retry: deque[list[Task]] = deque()  # chunks of dead workers: anyone's
        self.queued: dict[_Worker, deque[list[Task]]] = {}
        self.filling: _Worker | None = None  # whose stripe the next chunk read joins
        self.filled = 0
        self.next_chunk: list[Task] | None = None  # read, but the first of another stretch's stripe
        self.stretch: tuple = ()  # the job and node of the stripe being filled
        self.exhausted = False
        self.unwritten: set[_Worker] = set()  # sent chunks past the end of a written segment

    def take(self, worker: _Worker, fits: Callable[[list[Task]], bool]) -> tuple[list[Task], bool] | None:
        """The worker's next chunk, and whether its segment is to be written after it (the stripe
        ends); ([], True) asks it to write before it starts a stripe not adjacent to its last."""
        if self.retry:
            if not fits(self.retry[0]):
                return None
            self.unwritten.add(worker)
            return self.retry.popleft(), False
        queued = self.queued.setdefault(worker, deque())
        if not queued and self.filling is not worker:
            if worker in self.unwritten:
                self.unwritten.discard(worker)
                return [], True
            self._fill(until_full=True)  # the stripe being read belongs to another worker: finish it
            if not self.exhausted:
                self.filling, self.filled = worker, 0
        if not queued and self.filling is worker:
            self._fill(until_full=False)
        if not queued:
            self._steal(worker)
        if not queued or not fits(queued[0]):
            return None
        chunk = queued.popleft()
        ends = not queued and self.filling is not worker
        if ends:
            self.unwritten.discard(worker)
        else:
            self.unwritten.add(worker)
        return chunk, ends

    def forget(self, worker: _Worker) -> None:
        """A worker died: what was queued for it goes to whoever is free."""
        self.retry.extend(self.queued.pop(worker, ()))
        self.unwritten.discard(worker)
        if self.filling is worker:
            self.filling = None

    def _fill(self, *, until_full: bool) -> None:
        while self.filling is not None:
            chunk, self.next_chunk = self.next_chunk or next(self.chunks, None), None
            if chunk is None:
                self.exhausted, self.filling = True, None
                return
            queued = self.queued[self.filling]
            if self.filled and _stretch(chunk[0]) != self.stretch:
                self.next_chunk, self.filling = chunk, None  # a stripe holds one stretch
                return
            self.stretch = _stretch(chunk[0])
            queued.append(chunk)
            self.filled += sum(_size(t) for t in chunk)
            if self.filled >= self.stripe_bytes():
                self.filling = None
            if not until_full:
                return

    def _steal(self, worker: _Worker) -> None:
        if not self.exhausted:
            return
        victim = max(self.queued, key=lambda w: len(self.queued[w]))
        if len(self.queued[victim]) < 2:
            return
        if worker in self.unwritten:
            return  # it writes what it holds first (take's next call), then steals
        half = len(self.queued[victim]) // 2
        stolen = [self.queued[victim].pop() for _ in range(half)]
        self.queued[worker].extend(reversed(stolen))


if __name__ == "__main__":
    # Run the imported module's function, so what it pickles names proflake.workers.pool, not __main__.
    from proflake.workers.pool import worker_main as _main

    _main(int(sys.argv[1]), sys.argv[2] if len(sys.argv) > 2 else DEFAULT_PARSE)
