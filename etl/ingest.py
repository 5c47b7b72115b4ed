"""Ingest: list a source, parse every new or changed stats file, append the rows to the store as one batch.

Data flows one way: source -> layout -> reader -> Arrow -> store. One run is one batch:

1. take the store's writer lock (etl/lock.py) and repair what a killed run left (``repair``);
2. record the batch as 'started' in ``batches``;
3. read and parse new or changed files (bounded parallel reads), appending facts in bounded chunks;
4. commit the batch's intervals, replacing older versions of changed files, in ONE Delta commit —
   the moment the whole batch becomes visible (etl/store.py);
5. delete the facts of the intervals it replaced, and record the batch as 'committed'.

A run killed anywhere leaves the store readable and consistent; the next run's repair removes what
the killed run wrote but never committed, or finishes the clean-up of one that had committed.
"""

from __future__ import annotations

import hashlib
import os
import secrets
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime, timezone

import numpy as np
import pyarrow as pa

from etl.catalog import refresh_catalogs
from etl.errors import LayoutError, ProflakeError
from etl.layout import CPROFILE_FILE, PYINSTRUMENT_HTML_FILE, IntervalPath, is_stats_file, parse_stats_path
from etl.lock import StoreLock
from etl.rollups import refresh_phase_rollups
from etl.s3 import S3Config
from etl.schema import arrow_schema, table_spec
from etl.sources.base import Source, SourceObject, open_source
from etl.store import FACT_TABLES, Store, raw_view, sql_string
from etl.workers import DEFAULT_MEMORY_MB, DEFAULT_TIMEOUT_S, Failure, ParsePool, Task, load_facts

# Fact rows held in memory before they are appended; bounds memory however large the corpus.
# PROFLAKE_FLUSH_ROWS overrides it (smaller: less memory, more commits).
FLUSH_ROWS = 150_000
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


@dataclass
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
) -> IngestReport:
    """Ingest every new or changed stats file under ``source`` into ``store``.

    A bad file never raises: it is reported, quarantined in ``ingest_errors`` and retried next run.
    Parsing runs in ``workers`` processes (default: one per core) limited to ``worker_memory_mb``.
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

    st.create()
    with StoreLock(st, wait=wait, purpose="proflake ingest"):
        report.repaired = repair(st, log=say)
        candidates = _discover(src, report, bar, fail)
        known = {} if full_refresh else st.ingested_versions()
        existing = {} if full_refresh else st.interval_keys()
        todo: list[tuple[_Candidate, str]] = []
        claimed: dict[tuple, str] = {}
        for candidate in candidates:
            obj = candidate.stats
            if obj is None:
                report.unrecognised.append(candidate.html.uri)  # type: ignore[union-attr]
                continue
            previous = known.get(obj.uri)
            if previous is not None and previous[1:] == (obj.size, obj.version):
                report.unchanged += 1
                continue
            if obj.size > max_file_mb * 1024 * 1024:
                fail(obj, "too_large", f"{obj.uri} is {obj.size / 1e6:.0f} MB, over the {max_file_mb:g} MB limit (--max-file-mb)")
                continue
            job = job_id or job_id_for(candidate.path.base, src.root_parts)
            path = candidate.path
            key = (job, path.profiler, path.node_id, path.start_time_us, path.end_time_us)
            other = claimed.get(key) or existing.get(key)
            if other is not None and other != obj.uri:
                fail(obj, "duplicate", f"{obj.uri} describes the same interval as {other}")
                continue
            claimed[key] = obj.uri
            if previous is not None:
                replaced[obj.uri] = previous[0]
            todo.append((candidate, job))

        if not todo and not full_refresh:
            _update_quarantine(st, report, set(), now)
            # Nothing new, but a killed run may have committed intervals without rebuilding these.
            refresh_phase_rollups(st, report.batch_id, log=say)
            report.seconds = time.perf_counter() - started
            _record(st, report, "committed", datetime.now(timezone.utc))  # a run that found nothing new
            bar.done()
            return report

        _record(st, report, "started", now)
        writer = _BatchWriter(st, report.batch_id)
        bar.reading(len(todo), sum(c.stats.size for c, _ in todo))  # type: ignore[union-attr]
        pending: dict[int, tuple[_Candidate, str]] = {}

        def tasks() -> Iterator[Task]:
            for index, ((candidate, job), data) in enumerate(_read_ahead(src, todo)):
                obj = candidate.stats
                if isinstance(data, BaseException):
                    fail(obj, "read", str(data))
                    bar.advance(1, obj.size)
                    continue
                report.bytes_read += len(data)
                pending[index] = (candidate, job)
                yield Task(index, candidate.path.profiler, data)

        try:
            with ParsePool(workers, memory_mb=worker_memory_mb, timeout_s=parse_timeout_s) as pool:
                for chunk in pool.parse(tasks()):
                    parsed: list[tuple[dict, dict[str, int]]] = []
                    for index, result in chunk.outcomes:
                        candidate, job = pending.pop(index)
                        obj = candidate.stats
                        if isinstance(result, Failure):
                            fail(obj, result.kind, f"{obj.uri}: {result.message}")
                        else:
                            row = _interval_row(candidate, job, report.batch_id, now, result.summary)
                            parsed.append((row, result.counts))
                        bar.advance(1, obj.size)
                    writer.add_chunk(parsed, load_facts(chunk.facts))
            bar.writing("committing")
            writer.flush()
            writer.wait()
        finally:
            writer.close()
        st.commit_intervals(writer.interval_table(), report.batch_id, sorted(replaced), full_refresh)
        report.rows = writer.rows
        report.new_intervals = writer.interval_count
        report.replaced_intervals = len(replaced)
        # The batch is visible now. What follows only removes rows no view shows any more.
        if full_refresh:
            for name in FACT_TABLES:
                st.delete_where(name, f"batch_id <> {sql_string(report.batch_id)}")
        elif replaced:
            st.delete_rows_of("interval_id", sorted(replaced.values()))
        _update_quarantine(st, report, {row["source_uri"] for row in writer.intervals}, now)
        refresh_phase_rollups(st, report.batch_id, log=say)
        report.seconds = time.perf_counter() - started
        _record(st, report, "committed", datetime.now(timezone.utc))
        # BI catalogs list the live files by name: point them at this batch's.
        refresh_catalogs(st, log=say)
    bar.done()
    return report


def _update_quarantine(store: Store, report: IngestReport, ingested: set[str], now: datetime) -> None:
    """Add this run's failures, count repeats, and release files that ingested (or are already in)."""
    current = store.delta("ingest_errors").to_pyarrow_table().to_pylist()
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
        store.replace_table("ingest_errors", pa.Table.from_pylist(rows, schema=arrow_schema("ingest_errors")), report.batch_id)


def repair(store: Store, log: Callable[[str], None] | None = None) -> list[str]:
    """Finish or undo batches a killed run left behind; returns their ids. Call with the lock held."""
    say = log or (lambda message: None)
    con = store.connect()
    unfinished = [
        row[0]
        for row in con.sql(
            "SELECT batch_id FROM batches GROUP BY batch_id "
            "HAVING bool_or(event = 'started') AND NOT bool_or(event IN ('committed', 'abandoned', 'repaired')) "
            "ORDER BY batch_id"
        ).fetchall()
    ]
    if not unfinished:
        return []
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
    store.append("batches", pa.Table.from_pylist(events, schema=arrow_schema("batches")), "repair")
    for event in events:
        say(f"repaired an interrupted run: batch {event['batch_id']} {event['event']}")
    return unfinished


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
    store.append("batches", pa.Table.from_pylist([row], schema=arrow_schema("batches")), report.batch_id)


def _discover(
    src: Source, report: IngestReport, bar: Progress, fail: Callable[[SourceObject, str, str], None]
) -> list[_Candidate]:
    by_interval: dict[tuple[str, ...], _Candidate] = {}
    for obj in src.list():
        report.files_seen += 1
        if report.files_seen % 1000 == 0:
            bar.listing(report.files_seen)
        if obj.problem:
            # Never read, whatever its name says: a stats file is quarantined, anything else skipped.
            if is_stats_file(obj.parts[-1]):
                fail(obj, obj.problem_kind or "unsafe_path", f"{obj.uri} {obj.problem}")
            else:
                report.unrecognised.append(obj.uri)
            continue
        try:
            path = parse_stats_path(obj.parts)
        except LayoutError as e:
            fail(obj, e.kind, f"{obj.uri}: {e}")
            continue
        if path is None:
            report.unrecognised.append(obj.uri)
            continue
        # One candidate per stats directory: a pyinstrument json and its html pair up; two directories
        # naming the same interval stay two candidates (the second is reported as a duplicate).
        key = (*obj.parts[:-1], "cprofile" if path.file_name == CPROFILE_FILE else "pyinstrument")
        candidate = by_interval.setdefault(key, _Candidate(path))
        if path.file_name == PYINSTRUMENT_HTML_FILE:
            candidate.html = obj
        else:
            candidate.stats = obj
            candidate.path = path
    bar.listing(report.files_seen)
    report.intervals_seen = sum(1 for c in by_interval.values() if c.stats is not None)
    # Path order breaks ties, so which of two directories naming one interval is kept is predictable.
    return sorted(by_interval.values(), key=lambda c: (c.path.node_id, c.path.start_time_us, (c.stats or c.html).parts))  # type: ignore[union-attr]


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


def _interval_row(candidate: _Candidate, job_id: str, batch_id: str, now: datetime, summary: dict) -> dict:
    """The intervals row: what the path says, plus what the parsed contents say (``summary``)."""
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


class _BatchWriter:
    """Buffers parsed chunks; appends facts in bounded chunks; the intervals are committed by the caller."""

    def __init__(self, store: Store, batch_id: str) -> None:
        self.store = store
        self.batch_id = batch_id
        self.intervals: list[dict] = []
        # Per parsed chunk: the intervals it holds (indices into self.intervals), their row counts per
        # fact table, and its facts (rows of those intervals, in that order).
        self.pending: list[tuple[list[int], list[dict[str, int]], dict[str, pa.Table]]] = []
        self.pending_rows = 0
        self.rows: dict[str, int] = {name: 0 for name in ("intervals", *FACT_TABLES)}
        self._key_types = {f.name: f.type for f in arrow_schema("interval_keys")}
        self.flush_rows = int(os.environ.get("PROFLAKE_FLUSH_ROWS") or FLUSH_ROWS)
        self._writer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="proflake-write")
        self._writing: Future | None = None

    @property
    def interval_count(self) -> int:
        return len(self.intervals)

    def add_chunk(self, parsed: list[tuple[dict, dict[str, int]]], facts: dict[str, pa.Table]) -> None:
        if not parsed:
            return
        owners = list(range(len(self.intervals), len(self.intervals) + len(parsed)))
        self.intervals.extend(row for row, _ in parsed)
        self.pending.append((owners, [counts for _, counts in parsed], facts))
        self.pending_rows += sum(t.num_rows for t in facts.values())
        if self.pending_rows >= self.flush_rows:
            self.flush()

    def flush(self) -> None:
        # Chunks arrive in completion order; each holds consecutive files of the sorted listing, so
        # ordering chunks by their first interval orders the rows by (node, start time) for pruning.
        def first(part: tuple) -> tuple:
            row = self.intervals[part[0][0]]
            return (row["job_id"], row["node_id"], row["start_time_us"])

        parts = sorted(self.pending, key=first)
        ready = {}
        for name in FACT_TABLES:
            tables = [facts[name] for _, _, facts in parts if name in facts and facts[name].num_rows]
            if not tables:
                continue
            owners = [i for owned, counts, _ in parts for i, c in zip(owned, counts) if c.get(name)]
            counts = [c[name] for _, per_file, _ in parts for c in per_file if c.get(name)]
            ready[name] = self._with_interval_keys(name, pa.concat_tables(tables), owners, counts)
        self.pending.clear()
        self.pending_rows = 0
        # Parquet encoding (in deltalake, outside the GIL) overlaps with parsing the next files. One
        # write at a time and at most one flush waiting for it: memory stays bounded.
        self.wait()
        self._writing = self._writer.submit(self._write, ready)

    def _write(self, tables: dict[str, pa.Table]) -> None:
        for name, table in tables.items():
            self.store.append(name, table, self.batch_id, presorted=True)
            self.rows[name] += table.num_rows

    def wait(self) -> None:
        """Wait for the write in flight; re-raise its error here, in the ingest's thread."""
        if self._writing is not None:
            writing, self._writing = self._writing, None
            writing.result()

    def close(self) -> None:
        self._writer.shutdown(wait=True)

    def interval_table(self) -> pa.Table:
        self.rows["intervals"] = len(self.intervals)
        return pa.Table.from_pylist(self.intervals, schema=arrow_schema("intervals"))

    def _with_interval_keys(self, name: str, facts: pa.Table, owners: list[int], counts: list[int]) -> pa.Table:
        """Each fact row gets its interval's keys as dictionary-encoded columns: one value per interval
        plus an index per row, so nothing is copied per row (and Parquet writes them as dictionaries)."""
        indices = pa.array(np.repeat(np.arange(len(owners), dtype=np.int32), counts))
        columns = {
            key: pa.DictionaryArray.from_arrays(indices, pa.array([self.intervals[i][key] for i in owners], type_))
            for key, type_ in self._key_types.items()
        }
        columns.update({c: facts[c] for c in facts.column_names})
        return pa.table(columns).select(table_spec(name).column_names)
