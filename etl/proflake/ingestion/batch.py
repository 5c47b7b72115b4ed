"""Ingest: list a source, parse every new or changed stats file, append the rows to the store as one batch.

Data flows one way: source -> layout -> reader -> Arrow -> store. One run is one batch:

1. take the store's writer lock (etl/proflake/store/lock.py) and repair what a killed run left (``repair``);
2. record the batch as 'started' in ``batches``;
3. parse new or changed files in worker processes, which write the facts as Parquet files in bounded
   segments; then commit each fact table's files;
4. commit the batch's intervals, replacing older versions of changed files, in ONE Delta commit —
   the moment the whole batch becomes visible (etl/proflake/store/store.py);
5. delete the facts of the intervals it replaced, and record the batch as 'committed'.

A run killed anywhere leaves the store readable and consistent; the next run's repair removes what
the killed run wrote but never committed, or finishes the clean-up of one that had committed.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import hashlib
import heapq
import itertools
import marshal
import os
import secrets
import shutil
import tempfile
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import wait as futures_wait
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import IO, ParamSpec, TypeVar

import pyarrow as pa
import pyarrow.parquet as pq

from proflake.errors import LayoutError, ProflakeError
from proflake.layout import (
    PYINSTRUMENT_HTML_FILE,
    PYINSTRUMENT_JSON_FILE,
    IntervalPath,
    is_stats_file,
    parse_stats_path,
)
from proflake.schema import (
    INTERVAL_KEY_COLUMNS,
    PHASE_ROLLUP_OF,
    arrow_rows,
    arrow_schema,
    record_batch,
    table_spec,
)
from proflake.sources import Source, SourceObject, open_source
from proflake.sources.local import LocalSource
from proflake.sources.settings import S3Config
from proflake.store.deltawrite import DataFile, commit_data_files, parquet_options, write_data_file
from proflake.store.lock import StoreLock
from proflake.store.memory import release_memory
from proflake.store.rollups import refresh_phase_rollups
from proflake.store.store import FACT_TABLES, WRITER_PROPERTIES, Store, crash_points, raw_view, sql_string
from proflake.workers.pool import DEFAULT_MEMORY_MB, DEFAULT_TIMEOUT_S, FactSink, Failure, ParsePool, Task

# Fact rows a parse worker holds before it writes them as files (one per fact table); bounds memory
# however large the corpus. PROFLAKE_FLUSH_ROWS overrides it (smaller: less memory, more files).
FLUSH_ROWS = 150_000
# What runs under the lock after a batch commits: (store, log) -> anything.
AfterCommit = Callable[[Store, Callable[[str], None]], object]
# Objects being read at once; bounds memory to about this many stats files.
READ_AHEAD = 32


@dataclass(frozen=True)
class FailedFile:
    uri: str
    kind: str
    message: str
    size: int | None = None
    version: str | None = None


@dataclass
class IngestReport:
    batch_id: str
    source: str
    store: str
    full_refresh: bool = False
    files_seen: int = 0
    intervals_seen: int = 0
    new_intervals: int = 0
    replaced_intervals: int = 0
    unchanged: int = 0
    unrecognised: list[str] = field(default_factory=list)
    failed: list[FailedFile] = field(default_factory=list)
    repaired: list[str] = field(default_factory=list)
    rows: dict[str, int] = field(default_factory=dict)
    bytes_read: int = 0
    seconds: float = 0.0

    @property
    def partial(self) -> bool:
        """Some stats files could not be ingested (files that fit no layout do not count)."""
        return bool(self.failed)

    @property
    def total_rows(self) -> int:
        return sum(self.rows.values())

    def summary(self) -> str:
        if not self.files_seen:
            return f"no files under {self.source}; nothing to ingest ({self.seconds:.2f} s)"
        if self.files_seen and not self.new_intervals and not self.failed and not self.replaced_intervals:
            head = f"nothing new: {self.unchanged} stats file(s) already ingested"
        else:
            head = (
                f"ingested {self.new_intervals} new interval(s) ({self.replaced_intervals} replacing changed files), "
                f"{self.unchanged} unchanged, {len(self.failed)} failed"
            )
        return (
            f"{head}; {self.files_seen} file(s) seen, {len(self.unrecognised)} fit no layout; "
            f"{self.total_rows} rows, {self.bytes_read} bytes read in {self.seconds:.2f} s"
        )

    def to_dict(self) -> dict:
        return {
            "batch_id": self.batch_id,
            "source": self.source,
            "store": self.store,
            "full_refresh": self.full_refresh,
            "files_seen": self.files_seen,
            "intervals_seen": self.intervals_seen,
            "new_intervals": self.new_intervals,
            "replaced_intervals": self.replaced_intervals,
            "unchanged": self.unchanged,
            "failed": [{"uri": f.uri, "kind": f.kind, "message": f.message} for f in self.failed],
            "unrecognised": self.unrecognised,
            "repaired_batches": self.repaired,
            "rows": self.rows,
            "bytes_read": self.bytes_read,
            "seconds": round(self.seconds, 3),
        }


class Progress:
    """What ingest reports while it runs; the CLI draws a bar or logs lines, the library stays quiet."""

    def listing(self, files: int) -> None: ...

    def reading(self, total_files: int, total_bytes: int) -> None: ...

    def advance(self, files: int, nbytes: int) -> None: ...

    def writing(self, what: str) -> None: ...

    def done(self) -> None: ...


@dataclass(slots=True)
class _Candidate:
    """One interval found in the listing: a cProfile file, or a pyinstrument json with its html."""

    path: IntervalPath
    stats: SourceObject | None = None
    html: SourceObject | None = None


def new_batch_id(now: datetime) -> str:
    return f"{now:%Y%m%dT%H%M%S%f}Z-{secrets.token_hex(3)}"


def interval_id(obj: SourceObject) -> str:
    return hashlib.blake2b(f"{obj.uri}\x00{obj.size}\x00{obj.version}".encode(), digest_size=10).hexdigest()


def job_id_for(base: tuple[str, ...], source_root: tuple[str, ...]) -> str:
    """The folder above framework/, named relative to the source when the source holds several jobs."""
    if len(base) > len(source_root) and base[: len(source_root)] == source_root:
        return "/".join(base[len(source_root) :])
    return base[-1] if base and base[-1] not in ("/", "") else "default"


DEFAULT_MAX_FILE_MB = 512

_P = ParamSpec("_P")
_R = TypeVar("_R")


def _on_system_allocator(run: Callable[_P, _R]) -> Callable[_P, _R]:
    """Run with Arrow allocating from the C library's malloc, as the parse workers do (etl/proflake/workers/pool.py),
    unless ARROW_DEFAULT_MEMORY_POOL chooses otherwise. pyarrow's default, mimalloc, kept ~10 MB more
    at each write of the run's interval rows, which comes on top of the workers' own peak (process
    tree peak, 1 worker: 317 -> 307 MB at 10k files, 333 -> 317 MB at 100k). Buffers remember the
    pool they came from, so the switch back after the run is safe for what the run returns."""

    @functools.wraps(run)
    def on_system_allocator(*args: _P.args, **kwargs: _P.kwargs) -> _R:
        if os.environ.get("ARROW_DEFAULT_MEMORY_POOL"):
            return run(*args, **kwargs)
        _enter_system_allocator()
        try:
            return run(*args, **kwargs)
        finally:
            _leave_system_allocator()

    return on_system_allocator


# The pool is the process's: runs on several threads (a notebook ingesting two stores) switch it
# once, when the first starts, and give the caller's back when the last ends.
_allocator_lock = threading.Lock()
_allocator_runs = 0
_callers_pool: pa.MemoryPool | None = None


def _enter_system_allocator() -> None:
    global _allocator_runs, _callers_pool
    with _allocator_lock:
        if _allocator_runs == 0:
            _callers_pool = pa.default_memory_pool()
            pa.set_memory_pool(pa.system_memory_pool())
        _allocator_runs += 1


def _leave_system_allocator() -> None:
    global _allocator_runs, _callers_pool
    with _allocator_lock:
        _allocator_runs -= 1
        if _allocator_runs == 0 and _callers_pool is not None:
            pa.set_memory_pool(_callers_pool)
            _callers_pool = None


@_on_system_allocator
def ingest(
    source: str | Source,
    store: Store | str | None = None,
    *,
    job_id: str | None = None,
    full_refresh: bool = False,
    s3: S3Config | None = None,
    wait: float = 0.0,
    workers: int | None = None,
    max_file_mb: float = DEFAULT_MAX_FILE_MB,
    worker_memory_mb: int = DEFAULT_MEMORY_MB,
    parse_timeout_s: float = DEFAULT_TIMEOUT_S,
    log: Callable[[str], None] | None = None,
    progress: Progress | None = None,
    after_commit: AfterCommit | None = None,
) -> IngestReport:
    """Ingest every new or changed stats file under ``source`` into ``store``.

    A bad file never raises: it is reported, quarantined in ``ingest_errors`` and retried next run.
    Parsing runs in ``workers`` processes (default: one per core) limited to ``worker_memory_mb``.
    ``after_commit(store, log)`` runs under the lock once the batch is committed (the BI catalogs'
    refresh, given by ``proflake.operations.ingest``).
    """
    started = time.perf_counter()
    s3 = s3 or S3Config.from_env()
    st = store if isinstance(store, Store) else Store(store, s3=s3)
    src = open_source(source, s3) if isinstance(source, str) else source
    now = datetime.now(timezone.utc)
    report = IngestReport(batch_id=new_batch_id(now), source=src.uri, store=st.location, full_refresh=full_refresh)
    say = log or (lambda message: None)
    bar = progress or Progress()
    replaced: dict[str, str] = {}  # source_uri -> interval_id of the version being replaced

    def fail(obj: SourceObject, kind: str, message: str) -> None:
        report.failed.append(FailedFile(obj.uri, kind, message, obj.size, obj.version))
        replaced.pop(obj.uri, None)
        say(f"failed: {obj.uri}: {message}")

    fresh = full_refresh or not st.exists()
    st.create()
    pool = ParsePool(workers, memory_mb=worker_memory_mb, timeout_s=parse_timeout_s)
    if fresh:
        pool.start()  # every file will be new: the workers start while the store is opened and listed
    with pool, StoreLock(st, wait=wait, purpose="proflake ingest"), contextlib.ExitStack() as stack:
        # A store no run has written to has nothing to repair, compare with or de-duplicate against:
        # skip reading it (the first read through pyarrow's dataset layer costs a third of a second).
        empty = all(st.delta(name).version() == 0 for name in ("batches", "intervals"))
        report.repaired = [] if empty else repair(st, log=say)
        clear_spool(st)
        known = {} if full_refresh or empty else st.ingested_versions()

        # Workers take a moment to start: start them at the first new file listed, and they are ready
        # when its bytes are.
        listing = _discover(src, report, bar, fail, known, job_id, listed=lambda obj: pool.start())
        stack.callback(listing.close)  # its temporary file, if it wrote one
        existing = {} if full_refresh or empty or not listing.count else st.interval_keys()
        todo = _claimed(listing, existing, known, replaced, fail, max_file_mb, bar)
        bar.reading(listing.count, listing.bytes)
        first = next(todo, None)
        if first is None and not full_refresh:
            _update_quarantine(st, report, set(), now)
            # Nothing new, but a killed run may have committed intervals without rebuilding these.
            refresh_phase_rollups(st, report.batch_id, log=say)
            report.seconds = time.perf_counter() - started
            _record(st, report, "committed", datetime.now(timezone.utc))  # a run that found nothing new
            bar.done()
            return report
        if first is not None:
            todo = itertools.chain([first], todo)

        # 'started' must be on record before any fact commits (repair looks for it), not before the
        # workers write: their files stay in the spool until then. So it is written meanwhile.
        recording = ThreadPoolExecutor(max_workers=1, thread_name_prefix="proflake-record")
        started_record = recording.submit(_record, st, report, "started", now)
        recording.shutdown(wait=False)
        committer = _FactCommitter(st, report.batch_id)
        options = parquet_options(WRITER_PROPERTIES)
        intervals = _Intervals(committer.directories["intervals"], report.batch_id, options)
        partials: dict[str, list[str]] = {}  # phase roll-up -> the workers' files of partial sums
        pending: dict[int, tuple[_Candidate, dict]] = {}

        # Workers read local files themselves: the bytes never pass through this process. Objects
        # elsewhere (S3) are read here, a few at a time, and handed over.
        local = isinstance(src, LocalSource)

        def tasks() -> Iterator[Task]:
            read = (((item, b"") for item in todo) if local else _read_ahead(src, todo))
            for index, ((candidate, job), data) in enumerate(read):
                obj = candidate.stats
                if isinstance(data, BaseException):
                    fail(obj, "read", str(data))
                    bar.advance(1, obj.size)
                    continue
                report.bytes_read += len(data)
                keys = _interval_keys(candidate, job, report.batch_id)
                pending[index] = (candidate, keys)
                interval = tuple(keys[c] for c in INTERVAL_KEY_COLUMNS)
                if local:
                    yield Task(index, candidate.path.profiler, b"", interval, path=obj.uri, size=obj.size)
                else:
                    yield Task(index, candidate.path.profiler, data, interval)

        try:
            # Fewer workers than cores: each writes its files on a thread while it parses on.
            background = pool.size < (os.cpu_count() or 1)
            sink = FactSink(committer.directories, report.batch_id, _flush_rows(), options, background)
            for result in pool.parse(tasks(), sink):
                parsed: list[dict] = []
                for index, outcome in result.outcomes:
                    candidate, keys = pending.pop(index)
                    obj = candidate.stats
                    if local and not (isinstance(outcome, Failure) and outcome.kind == "read"):
                        report.bytes_read += obj.size  # as listed: what a worker read
                    if isinstance(outcome, Failure):
                        # A read error names its file already, as the sources' own do.
                        fail(obj, outcome.kind, outcome.message if outcome.kind == "read" else f"{obj.uri}: {outcome.message}")
                    else:
                        parsed.append(_interval_row(candidate, keys, now, outcome.summary))  # type: ignore[attr-defined]
                    bar.advance(1, obj.size)
                intervals.add(parsed)
                committer.add([f for f in result.files if f.table in FACT_TABLES])
                for f in result.files:
                    if f.table not in FACT_TABLES:
                        partials.setdefault(f.table, []).append(f.local_path)
            bar.writing("committing")
            # What the listing held is done with: give it back before the commits.
            listing.close()
            for finished in (existing, known):
                finished.clear()
            intervals.flush()
            started_record.result()
            committer.finish()
            release_memory()  # the roll-ups, next, are the main process's peak: start it from less
            ingested = intervals.source_uris() if report.failed or not empty else set()
            if replaced:
                # Rows inside committed files change: deltalake's replaceWhere rewrites those files, and
                # holds the batch's intervals in memory to do it (only runs that met changed files pay).
                st.replace_intervals(intervals.reader(), report.batch_id, sorted(replaced))
            elif intervals.files or full_refresh:
                committer.add(intervals.files)
                committer.commit("intervals", intervals.files, replace_all=full_refresh)
            report.rows = {"intervals": intervals.num_rows, **committer.rows}
            report.new_intervals = intervals.num_rows
            report.replaced_intervals = len(replaced)
            # The batch is visible now. What follows only removes rows no view shows any more.
            if full_refresh:
                for name in FACT_TABLES:
                    st.delete_where(name, f"batch_id <> {sql_string(report.batch_id)}")
            elif replaced:
                st.delete_rows_of("interval_id", sorted(replaced.values()))
            if report.failed or not empty:
                _update_quarantine(st, report, ingested, now)
            refresh_phase_rollups(st, report.batch_id, log=say, partials=partials)
        finally:
            committer.close()
            futures_wait([started_record])  # never still writing once the lock is released
        report.seconds = time.perf_counter() - started
        _record(st, report, "committed", datetime.now(timezone.utc))
        if after_commit is not None:
            after_commit(st, say)
    bar.done()
    return report


def _update_quarantine(store: Store, report: IngestReport, ingested: set[str], now: datetime) -> None:
    """Add this run's failures, count repeats, and release files that ingested (or are already in)."""
    columns = arrow_schema("ingest_errors").names
    current = [dict(zip(columns, row)) for row in store.rows("ingest_errors", columns)]
    if not current and not report.failed:
        return
    live = set(store.ingested_versions())
    failed = {f.uri: f for f in report.failed}
    rows = []
    for row in current:
        uri = row["source_uri"]
        if uri in ingested or uri in live:
            continue
        if uri in failed:
            f = failed.pop(uri)
            row.update(
                source_size=f.size, source_version=f.version, error_kind=f.kind, message=f.message,
                last_seen=now, attempts=row["attempts"] + 1, batch_id=report.batch_id,
            )
        rows.append(row)
    for f in failed.values():
        rows.append(
            {
                "source_uri": f.uri, "source_size": f.size, "source_version": f.version, "error_kind": f.kind,
                "message": f.message, "first_seen": now, "last_seen": now, "attempts": 1, "batch_id": report.batch_id,
            }
        )
    if rows != current:
        store.replace_table("ingest_errors", arrow_rows("ingest_errors", rows), report.batch_id)


def repair(store: Store, log: Callable[[str], None] | None = None) -> list[str]:
    """Finish or undo batches a killed run left behind; returns their ids. Call with the lock held."""
    say = log or (lambda message: None)
    clear_spool(store)
    unfinished = _unfinished_batches(store)
    if not unfinished:
        return []  # the usual case, answered without the views of store.connect()
    con = store.connect()
    committed = {row[0] for row in con.sql("SELECT DISTINCT batch_id FROM intervals").fetchall()}
    now = datetime.now(timezone.utc)
    abandoned = [b for b in unfinished if b not in committed]
    if abandoned:
        store.delete_rows_of("batch_id", abandoned)
    if any(b in committed for b in unfinished):
        # Intervals committed, clean-up maybe not: drop facts whose interval is no longer live.
        orphans = sorted(
            {
                row[0]
                for name in FACT_TABLES
                for row in con.sql(
                    f"SELECT DISTINCT interval_id FROM {raw_view(name)} "
                    "WHERE interval_id NOT IN (SELECT interval_id FROM intervals)"
                ).fetchall()
            }
        )
        if orphans:
            store.delete_rows_of("interval_id", orphans)
    con.close()
    events = [{"batch_id": b, "event": "repaired" if b in committed else "abandoned", "recorded_at": now} for b in unfinished]
    store.append("batches", arrow_rows("batches", events), "repair")
    for event in events:
        say(f"repaired an interrupted run: batch {event['batch_id']} {event['event']}")
    return unfinished


def _unfinished_batches(store: Store) -> list[str]:
    """Batches recorded as 'started' with no later event: the runs that were killed."""
    started, ended = set(), set()
    for batch, event in store.rows("batches", ["batch_id", "event"]):
        (started if event == "started" else ended).add(batch)
    return sorted(started - ended)


def _record(store: Store, report: IngestReport, event: str, at: datetime) -> None:
    row = {"batch_id": report.batch_id, "event": event, "recorded_at": at, "source": report.source, "full_refresh": report.full_refresh}
    if event == "committed":
        row.update(
            files_seen=report.files_seen,
            new_intervals=report.new_intervals,
            replaced_intervals=report.replaced_intervals,
            unchanged=report.unchanged,
            failed=len(report.failed),
            rows_written=report.total_rows,
            bytes_read=report.bytes_read,
            seconds=report.seconds,
        )
    rows = arrow_rows("batches", [row])
    if store.is_remote:
        store.append("batches", rows, report.batch_id)
        return
    # Written as the intervals and facts are: deltalake's writer and DuckDB's conversion paged ~50 MB
    # of their code into this process for one row, at the start of the parse, which needs neither.
    written = write_data_file("batches", rows, os.path.join(store.root, "batches"), report.batch_id, parquet_options(WRITER_PROPERTIES))
    commit_data_files(store.delta("batches"), [written], report.batch_id)
    crash_points.committed()


def _discover(
    src: Source,
    report: IngestReport,
    bar: Progress,
    fail: Callable[[SourceObject, str, str], None],
    known: dict[str, tuple[str, int, str]],
    job_id: str | None = None,
    listed: Callable[[SourceObject], None] = lambda obj: None,
) -> _SortedListing:
    """The listing's new or changed intervals, to be read in (job, node, start time, path) order.

    A stats file already ingested at the same size and version (``known``: source_uri -> (interval_id,
    size, version)) is only counted: a nightly re-run finds nearly every file unchanged, and parsing
    those paths was a third of its time. ``listed`` sees each new or changed stats file as it is found.
    ``job_id``: every interval's job, instead of the folder above framework/.
    """
    listing = _SortedListing()
    # A pyinstrument html pairs with the json of its folder, which the listing may name before or
    # after it. A source lists a folder's objects together (etl/proflake/sources/base.py), so a folder is
    # settled once an object outside it is listed: only the folders around the current object are
    # held, never every pyinstrument folder of the job.
    folders: list[_Folder] = []

    def settle(folder: _Folder) -> None:
        if isinstance(folder.json, tuple):
            listing.add(folder.json[:-1] + (_object_fields(folder.html) if folder.html else None,))
        elif folder.json is None and folder.html is not None and _parsed_path(folder.html, report, fail) is not None:
            report.unrecognised.append(folder.html.uri)  # an html without its json holds nothing to ingest

    for obj in src.list():
        report.files_seen += 1
        if report.files_seen % 1000 == 0:
            bar.listing(report.files_seen)
        while folders and obj.parts[: len(folders[-1].parts)] != folders[-1].parts:
            settle(folders.pop())
        if obj.problem:
            # Never read, whatever its name says: a stats file is quarantined, anything else skipped.
            if is_stats_file(obj.parts[-1]):
                fail(obj, obj.problem_kind or "unsafe_path", f"{obj.uri} {obj.problem}")
            else:
                report.unrecognised.append(obj.uri)
            continue
        name = obj.parts[-1]
        if name in (PYINSTRUMENT_HTML_FILE, PYINSTRUMENT_JSON_FILE):
            if not folders or folders[-1].parts != obj.parts[:-1]:
                folders.append(_Folder(obj.parts[:-1]))
            folder = folders[-1]
            if name == PYINSTRUMENT_HTML_FILE:
                folder.html = obj
                continue
        previous = known.get(obj.uri)
        if previous is not None and previous[1:] == (obj.size, obj.version):
            report.unchanged += 1
            if name == PYINSTRUMENT_JSON_FILE:
                folder.json = _UNCHANGED
            continue
        path = _parsed_path(obj, report, fail)
        if path is None:
            continue
        # One entry per stats file: two folders naming the same interval stay two entries (the second
        # is reported as a duplicate). Path order breaks ties, so which of them is kept is predictable
        # ('/' as the lowest character: the order of the path's components, without splitting paths).
        job = job_id or job_id_for(path.base, src.root_parts)
        entry = (job, path.node_id, path.start_time_us, obj.uri.replace("/", "\x00"), _path_fields(path), _object_fields(obj), None)
        if name == PYINSTRUMENT_JSON_FILE:
            folder.json = entry  # listed when its folder is settled, with its html
        else:
            listing.add(entry)
        listed(obj)
    while folders:
        settle(folders.pop())
    bar.listing(report.files_seen)
    report.intervals_seen = report.unchanged + listing.count
    return listing


def _claimed(
    listing: Iterable[tuple],
    existing: dict[tuple, str],
    known: dict[str, tuple[str, int, str]],
    replaced: dict[str, str],
    fail: Callable[[SourceObject, str, str], None],
    max_file_mb: float,
    bar: Progress,
) -> Iterator[tuple[_Candidate, str]]:
    """The intervals to parse, with their jobs, in the listing's order: not over the size limit, and
    the first in path order of those naming one interval (``existing``: the store's live intervals,
    key -> source_uri). Fills ``replaced`` with the changed files' previous interval ids."""
    # Intervals claimed so far, of one (job, node, start time) at a time: the listing's order puts
    # every file naming an interval next to each other.
    claimed: dict[tuple, str] = {}
    claiming: tuple = ()
    for job, node_id, start_time_us, _, path_fields, stats, html in listing:
        candidate = _Candidate(IntervalPath(*path_fields), SourceObject(*stats), SourceObject(*html) if html else None)
        obj = candidate.stats
        assert obj is not None
        if obj.size > max_file_mb * 1024 * 1024:
            fail(obj, "too_large", f"{obj.uri} is {obj.size / 1e6:.0f} MB, over the {max_file_mb:g} MB limit (--max-file-mb)")
            bar.advance(1, obj.size)
            continue
        if claiming != (job, node_id, start_time_us):
            claimed.clear()
            claiming = (job, node_id, start_time_us)
        key = (job, candidate.path.profiler, node_id, start_time_us, candidate.path.end_time_us)
        other = claimed.get(key) or existing.get(key)
        if other is not None and other != obj.uri:
            fail(obj, "duplicate", f"{obj.uri} describes the same interval as {other}")
            bar.advance(1, obj.size)
            continue
        claimed[key] = obj.uri
        previous = known.get(obj.uri)
        if previous is not None:
            replaced[obj.uri] = previous[0]
        yield candidate, job


_PATH_FIELDS = tuple(f.name for f in dataclasses.fields(IntervalPath))


def _path_fields(path: IntervalPath) -> tuple:
    return tuple(getattr(path, name) for name in _PATH_FIELDS)


def _object_fields(obj: SourceObject) -> tuple[str, tuple[()], int, str]:
    """A listed object as plain values, without its path components, which nothing reads once its
    path is parsed (with the folder and file names they alone hold, they were a quarter of a
    100,000-file listing's memory)."""
    return (obj.uri, (), obj.size, obj.version)


_UNCHANGED = "unchanged"


@dataclass(slots=True)
class _Folder:
    """A folder of the listing that holds a pyinstrument html or json, until it is settled."""

    parts: tuple[str, ...]
    html: SourceObject | None = None
    json: tuple | str | None = None  # its listing entry (awaiting the html), _UNCHANGED, or None


# Listing entries held in memory: beyond that many, each run of them is sorted and written to a
# temporary file, and the runs are merged as they are read back. A 100,000-file listing held ~85 MB
# as objects; sorted runs hold ~5 MB, however large the source.
LISTING_RUN = 10_000
# Entries per block of a run's file: the merge holds one block of each run.
LISTING_BLOCK = 128


def _sort_key(entry: tuple) -> tuple:
    # Workers fill their files in this order, (job, node, start time), so each file spans a narrow
    # stretch of it and readers skip the files whose statistics miss their question.
    return entry[:4]  # (job, node, start time, path)


class _SortedListing:
    """Listing entries, read back in sorted order (entries are tuples led by their sort key), holding
    at most LISTING_RUN entries and a block of each run written out."""

    def __init__(self, run: int | None = None) -> None:
        self.run_size = run or LISTING_RUN
        self.count = 0
        self.bytes = 0  # the stats files' sizes
        self._held: list[tuple] = []
        self._file: IO[bytes] | None = None
        self._runs: list[tuple[int, int]] = []  # (offset, blocks) of each run written

    def add(self, entry: tuple) -> None:
        self._held.append(entry)
        self.count += 1
        self.bytes += entry[5][2]
        if len(self._held) >= self.run_size:
            self._write_run()

    def __iter__(self) -> Iterator[tuple]:
        if not self._runs:
            self._held.sort(key=_sort_key)
            held, self._held = self._held, []
            return iter(held)
        if self._held:
            self._write_run()
        return heapq.merge(*(self._read_run(offset, blocks) for offset, blocks in self._runs), key=_sort_key)

    def close(self) -> None:
        self._held = []
        self._runs = []
        if self._file is not None:
            self._file.close()
            self._file = None

    def _write_run(self) -> None:
        self._held.sort(key=_sort_key)
        try:
            if self._file is None:
                self._file = tempfile.TemporaryFile(prefix="proflake-listing-")
            f = self._file
            f.seek(0, os.SEEK_END)
            offset, blocks = f.tell(), 0
            for i in range(0, len(self._held), LISTING_BLOCK):
                data = marshal.dumps(self._held[i : i + LISTING_BLOCK])
                f.write(len(data).to_bytes(8, "little") + data)
                blocks += 1
        except OSError as e:
            raise ProflakeError(
                f"cannot write the listing of new files to the temporary folder {tempfile.gettempdir()!r} "
                f"({e.strerror or e}); free space there or set TMPDIR to a writable folder"
            ) from e
        self._runs.append((offset, blocks))
        self._held = []

    def _read_run(self, offset: int, blocks: int) -> Iterator[tuple]:
        f = self._file
        for _ in range(blocks):
            assert f is not None
            f.seek(offset)
            size = int.from_bytes(f.read(8), "little")
            block = marshal.loads(f.read(size))
            offset += 8 + size
            yield from block


def _parsed_path(
    obj: SourceObject, report: IngestReport, fail: Callable[[SourceObject, str, str], None]
) -> IntervalPath | None:
    """What the path of a stats file says; None (reported) when it fits no layout or names bad values."""
    try:
        path = parse_stats_path(obj.parts)
    except LayoutError as e:
        fail(obj, e.kind, f"{obj.uri}: {e}")
        return None
    if path is None:
        report.unrecognised.append(obj.uri)
    return path


def _read_ahead(
    src: Source, items: Iterable[tuple[_Candidate, str]]
) -> Iterator[tuple[tuple[_Candidate, str], bytes | BaseException]]:
    """Read objects on a small thread pool, in order, with at most READ_AHEAD in flight (bounded memory)."""
    pending: deque[tuple[tuple[_Candidate, str], Future]] = deque()
    with ThreadPoolExecutor(max_workers=8, thread_name_prefix="proflake-read") as pool:
        for item in items:
            pending.append((item, pool.submit(src.read, item[0].stats)))
            if len(pending) >= READ_AHEAD:
                yield _settle(*pending.popleft())
        while pending:
            yield _settle(*pending.popleft())


def _settle(item: tuple[_Candidate, str], future: Future) -> tuple[tuple[_Candidate, str], bytes | BaseException]:
    try:
        return item, future.result()
    except ProflakeError as e:
        return item, e


def _timestamp(us: float) -> datetime:
    return datetime.fromtimestamp(round(us) / 1e6, tz=timezone.utc)


def _interval_keys(candidate: _Candidate, job_id: str, batch_id: str) -> dict:
    """The interval keys of a file: they lead its intervals row and are repeated on each of its fact rows."""
    path, obj = candidate.path, candidate.stats
    assert obj is not None
    return {
        "interval_id": interval_id(obj),
        "batch_id": batch_id,
        "job_id": job_id,
        "framework": path.framework,
        "node_id": path.node_id,
        "start_mode": path.start_mode,
        "start_step": path.start_step,
        "start_phase": path.start_phase,
        "start_time_us": path.start_time_us,
        "start_time": _timestamp(path.start_time_us),
        "end_mode": path.end_mode,
        "end_step": path.end_step,
        "end_phase": path.end_phase,
        "end_time_us": path.end_time_us,
        "end_time": _timestamp(path.end_time_us),
        "job_phase": path.job_phase,
    }


def _interval_row(candidate: _Candidate, keys: dict, now: datetime, summary: dict) -> dict:
    """The intervals row: what the path says, plus what the parsed contents say (``summary``)."""
    path, obj = candidate.path, candidate.stats
    assert obj is not None
    return {
        **keys,
        "profiler": path.profiler,
        "layout": path.layout,
        "duration_s": (path.end_time_us - path.start_time_us) / 1e6,
        "source_uri": obj.uri,
        "html_uri": candidate.html.uri if candidate.html else None,
        "source_size": obj.size,
        "source_version": obj.version,
        "ingested_at": now,
        **summary,
    }


def _flush_rows() -> int:
    return int(os.environ.get("PROFLAKE_FLUSH_ROWS") or FLUSH_ROWS)


class _Intervals:
    """The batch's intervals rows until they commit: Arrow batches, written every SPOOL_ROWS rows as a
    Parquet data file of the intervals table, in its declared order, into the run's spool (a 100,000-file
    batch held ~130 MB of rows, and deltalake's writer as much again)."""

    # The memory held, and taken to sort and write them, grows with the rows up to this many (20,000
    # held ~10 MB and took ~30 MB more to write): past it, it no longer grows with the corpus.
    SPOOL_ROWS = 5_000
    # Rows arrive a worker's chunk (~16) at a time; converted to Arrow that often, the conversion's
    # per-column cost was ~0.3 s of the main process's CPU at 10,000 files. Held as dicts until this
    # many (~2 MB).
    BATCH_ROWS = 1_000

    def __init__(self, directory: str, batch_id: str, options: dict) -> None:
        self._spec = table_spec("intervals")
        self._directory = directory
        self._batch_id = batch_id
        self._options = options
        self._batches: list[pa.RecordBatch] = []
        self._rows: list[dict] = []  # not yet converted to a batch
        self._held = 0
        self.files: list[DataFile] = []
        self.num_rows = 0

    def add(self, rows: list[dict]) -> None:
        if not rows:
            return
        self._rows.extend(rows)
        self._held += len(rows)
        self.num_rows += len(rows)
        if len(self._rows) >= self.BATCH_ROWS:
            self._convert()
        if self._held >= self.SPOOL_ROWS:
            self.flush()

    def _convert(self) -> None:
        if self._rows:
            self._batches.append(record_batch(self._rows, self._spec.arrow_schema))
            self._rows = []

    def flush(self) -> None:
        """Write what is held (call once more when the last rows are in)."""
        self._convert()
        if not self._batches:
            return
        rows = pa.Table.from_batches(self._batches, schema=self._spec.arrow_schema)
        rows = rows.sort_by([(c, "ascending") for c in self._spec.sort_by])
        self.files.append(write_data_file("intervals", rows, self._directory, self._batch_id, self._options))
        self._batches, self._held = [], 0
        del rows
        # The allocators would keep what sorting and writing the rows took to the end of the run, while
        # the workers parse.
        release_memory()

    def reader(self, columns: list[str] | None = None) -> pa.RecordBatchReader:
        """Every row written, as one stream (``columns``: only those); before the files move."""
        schema = self._spec.arrow_schema
        if columns is not None:
            schema = pa.schema([schema.field(c) for c in columns])
        batches = (b for f in self.files for b in pq.ParquetFile(f.local_path).iter_batches(columns=columns))
        return pa.RecordBatchReader.from_batches(schema, batches)

    def source_uris(self) -> set[str]:
        return {uri for batch in self.reader(["source_uri"]) for uri in batch.column(0).to_pylist()}


# Where parse workers write a local store's fact files until they are committed: a dead run's files
# stay here, out of the tables, and the next run (repair) removes them.
SPOOL = "_proflake/spool"


class _FactCommitter:
    """Commits the fact files the parse workers wrote: all of a table's in ONE Delta commit, when
    parsing is done (a commit costs ~20 ms of CPU, and a table's files could run to hundreds).

    Workers write into a spool folder: inside the store for a local store, whence files move into
    their table just before its commit (a rename); a local temporary folder for an S3 store, whence
    they are uploaded, on a thread, as they arrive. Either way a run killed before the commit leaves
    nothing in the tables."""

    def __init__(self, store: Store, batch_id: str) -> None:
        self.store = store
        self.batch_id = batch_id
        self.rows: dict[str, int] = {name: 0 for name in FACT_TABLES}
        if store.is_remote:
            self._spool = tempfile.mkdtemp(prefix="proflake-spool-")
        else:
            self._spool = os.path.join(store.root, SPOOL, batch_id)
        # Workers also write each segment's partial phase roll-up sums (etl/proflake/store/rollups.py adds them up).
        tables = (*FACT_TABLES, *PHASE_ROLLUP_OF.values(), "intervals")
        self.directories = {name: os.path.join(self._spool, name) for name in tables}
        for directory in self.directories.values():
            os.makedirs(directory, exist_ok=True)
        self._files: list[DataFile] = []
        self._uploader = ThreadPoolExecutor(max_workers=1, thread_name_prefix="proflake-upload") if store.is_remote else None
        self._uploads: list[Future] = []

    def add(self, files: list[DataFile]) -> None:
        """Files to commit; re-raise here, in the ingest's thread, an earlier upload's error."""
        for done in [f for f in self._uploads if f.done()]:
            self._uploads.remove(done)
            done.result()
        self._files.extend(files)
        if self._uploader is not None:
            self._uploads.extend(self._uploader.submit(self._upload, f) for f in files)

    def finish(self) -> None:
        """Commit every fact table's files (after their uploads)."""
        for name in FACT_TABLES:
            files = [f for f in self._files if f.table == name]
            if files:
                self.commit(name, files)
                self.rows[name] += sum(f.rows for f in files)

    def commit(self, name: str, files: list[DataFile], *, replace_all: bool = False) -> None:
        """Move ``files`` (given to ``add`` before) into table ``name`` and add them in one commit
        (``replace_all``: the commit also removes every file the table had)."""
        while self._uploads:
            self._uploads.pop(0).result()
        if not self.store.is_remote:
            for f in files:
                os.rename(f.local_path, os.path.join(self.store.root, name, f.name))
        commit_data_files(self.store.delta(name), files, self.batch_id, replace_all=replace_all)
        crash_points.committed()

    def close(self) -> None:
        if self._uploader is not None:
            self._uploader.shutdown(wait=True)
        shutil.rmtree(self._spool, ignore_errors=True)
        if not self.store.is_remote:
            with contextlib.suppress(OSError):
                os.rmdir(os.path.dirname(self._spool))  # the spool folder itself, when no other is left

    def _upload(self, f: DataFile) -> None:
        from proflake.sources.settings import explain_client_error, split_s3_uri

        bucket, key = split_s3_uri(f"{self.store.table_uri(f.table)}/{f.name}")
        if not hasattr(self, "_client"):
            self._client = self.store.s3.client()  # type: ignore[union-attr]
        try:
            self._client.upload_file(f.local_path, bucket, key)
        except Exception as e:
            raise explain_client_error(e, f"s3://{bucket}/{key}") from e
        os.unlink(f.local_path)


def clear_spool(store: Store) -> None:
    """Remove fact files a dead run wrote but never committed. Call with the lock held."""
    if not store.is_remote:
        shutil.rmtree(os.path.join(store.root, SPOOL), ignore_errors=True)
