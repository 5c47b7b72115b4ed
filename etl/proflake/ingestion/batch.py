"""Ingest: list a source, parse every new or changed stats file, append the rows to the store as one batch.

Data flows one way: source -> layout -> reader -> Arrow -> store. One run is one ``Batch``, whose
methods are its steps, in order:

1. ``repair``: with the store's writer lock held (etl/proflake/store/lock.py), finish or undo what a
   killed run left (etl/proflake/ingestion/bookkeeping.py);
2. ``list``: list the source's new or changed stats files (etl/proflake/ingestion/listing.py);
3. ``claim``: pick the files to parse, one per interval;
4. ``parse``: record the batch as 'started' in ``batches``; parse the claimed files in worker
   processes, which write the facts as Parquet files in bounded segments;
5. ``commit``: commit each fact table's files, then the batch's intervals, replacing older versions
   of changed files, in ONE Delta commit — the moment the whole batch becomes visible
   (etl/proflake/ingestion/commit.py, etl/proflake/store/store.py);
6. ``clean_up``: delete the facts of the intervals it replaced, update the quarantine and the phase
   roll-ups;
7. ``record``: record the batch as 'committed'.

A run killed anywhere leaves the store readable and consistent; the next run's repair removes what
the killed run wrote but never committed, or finishes the clean-up of one that had committed.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from concurrent.futures import wait as futures_wait
from datetime import datetime, timezone
from typing import Any

from proflake.errors import StoreError
from proflake.ingestion.allocator import _enter_system_allocator, _leave_system_allocator, _on_system_allocator
from proflake.ingestion.background import in_background
from proflake.ingestion.bookkeeping import clean_up, missing_tables, new_batch_id, record_event, unfinished_batches
from proflake.ingestion.bookkeeping import repair as repair_store
from proflake.ingestion.commit import FactCommitter, IntervalRows, clear_spool, interval_id, interval_keys, interval_row
from proflake.ingestion.failures import blamed_on_the_cause, record_stop, unlisted_in_full_refresh
from proflake.ingestion.listing import (
    Candidate,
    SortedListing,
    claim_intervals,
    discover,
    job_id_for,
    printable,
    read_ahead,
    source_prefix,
)
from proflake.ingestion.manifest import Manifest
from proflake.ingestion.report import FailedFile, IngestReport, Progress
from proflake.schema import ALL_TABLES, DERIVED_TABLES, INTERVAL_KEY_COLUMNS
from proflake.sources import Source, SourceObject, open_source
from proflake.sources.local import LocalSource
from proflake.sources.settings import S3Config
from proflake.store.deltawrite import parquet_options
from proflake.store.lock import StoreLock
from proflake.store.memory import release_memory
from proflake.store.migrations import migrate
from proflake.store.store import FACT_TABLES, Store, writer_properties
from proflake.workers.executor import executor_for, make_executor, start_as_listed
from proflake.workers.pool import DEFAULT_MEMORY_MB, DEFAULT_TIMEOUT_S, FactSink, Failure, Task

# The names this module has always offered (bench/, tests, callers), wherever they now live.
repair = repair_store
__all__ = [
    "Batch", "FailedFile", "IngestReport", "IntervalRows", "Progress", "SortedListing",
    "_enter_system_allocator", "_leave_system_allocator", "clear_spool", "ingest", "interval_id",
    "job_id_for", "new_batch_id", "repair", "unfinished_batches",
]

# Fact rows a parse worker holds before it writes them as files (one per fact table); bounds memory
# however large the corpus. PROFLAKE_FLUSH_ROWS overrides it (smaller: less memory, more files).
FLUSH_ROWS = 150_000
# What runs under the lock after a batch commits: (store, log) -> anything.
AfterCommit = Callable[[Store, Callable[[str], None]], object]
DEFAULT_MAX_FILE_MB = 512
_UNREAD = ("read", "too_large", "unsafe_path")  # outcomes of files no worker read


@_on_system_allocator
def ingest(
    source: str | Source,
    store: Store | str | None = None,
    *,
    job_id: str | None = None,
    full_refresh: bool = False,
    whole_store: bool = False,
    qualify_jobs: bool = False,
    s3: S3Config | None = None,
    wait: float = 0.0,
    workers: int | None = None,
    max_file_mb: float = DEFAULT_MAX_FILE_MB,
    worker_memory_mb: int = DEFAULT_MEMORY_MB,
    parse_timeout_s: float = DEFAULT_TIMEOUT_S,
    log: Callable[[str], None] | None = None,
    progress: Progress | None = None,
    after_commit: AfterCommit | None = None,
    executor: Any = None,
    spark_min_files: int | None = None,
) -> IngestReport:
    """Ingest every new or changed stats file under ``source`` into ``store``.

    A bad file never raises: it is reported, quarantined in ``ingest_errors`` and retried next run.
    Parsing runs in ``workers`` processes (default: one per core) limited to ``worker_memory_mb``.
    ``after_commit(store, log)`` runs under the lock once the batch is committed (the BI catalogs'
    refresh, given by ``proflake.operations.ingest``). A job folder named like a job of the store that
    came from another folder is quarantined (``job_conflict``), unless ``qualify_jobs``: its job id then
    keeps as many parent folders as tell it apart (``team-b/run-7``), which the smdebug-compatible
    classes use, as they scope every answer by source and never name jobs. ``whole_store`` (with
    ``full_refresh``; ``proflake rebuild``): the store afterwards holds exactly what ``source`` holds,
    every interval of other sources removed in the same commit.

    ``executor``: who parses: "local" (the default: the worker pool), "spark" (Spark tasks on the active
    SparkSession or a new one, from ``spark_min_files`` new files on; below that, the local pool), a
    SparkSession, or an executor object such as ``proflake.spark.SparkPool`` (etl/proflake/workers/executor.py).
    """
    s3 = s3 or S3Config.from_env()
    st = store if isinstance(store, Store) else Store(store, s3=s3)
    src = open_source(source, s3) if isinstance(source, str) else source
    pool = make_executor(
        executor, workers=workers, memory_mb=worker_memory_mb, timeout_s=parse_timeout_s, max_file_mb=max_file_mb,
        s3=s3, spark_min_files=spark_min_files,
    )
    batch = Batch(
        src, st, pool, job_id=job_id, full_refresh=full_refresh or whole_store, whole_store=whole_store,
        qualify_jobs=qualify_jobs, max_file_mb=max_file_mb, log=log, progress=progress,
    )
    return batch.run(wait=wait, after_commit=after_commit)


class Batch:
    """One run of ``ingest``: ``run`` takes the lock and calls the steps, one method each, in order."""

    def __init__(
        self,
        src: Source,
        store: Store,
        pool: Any,  # a ParsePool, or another executor (etl/proflake/workers/executor.py)
        *,
        job_id: str | None = None,
        full_refresh: bool = False,
        whole_store: bool = False,
        qualify_jobs: bool = False,
        max_file_mb: float = DEFAULT_MAX_FILE_MB,
        log: Callable[[str], None] | None = None,
        progress: Progress | None = None,
    ) -> None:
        self.src, self.store, self.pool = src, store, pool
        self.job_id = job_id
        self.full_refresh = full_refresh
        self.qualify_jobs = qualify_jobs
        self.whole_store, self.max_file_mb = whole_store, max_file_mb
        self.say = log or (lambda message: None)
        self.bar = progress or Progress()
        self.now = datetime.now(timezone.utc)
        self.report = IngestReport(new_batch_id(self.now), src.uri, store.location, full_refresh, whole_store)
        self.replaced: dict[str, str] = {}  # source_uri -> interval_id of the version being replaced
        self.empty = False  # no run has written to the store yet
        # The store's live intervals, compared with the listing in DuckDB (etl/proflake/ingestion/manifest.py):
        # what comes back is bounded by the batch, not by the store.
        self.manifest: Manifest | None = None
        self.known: dict[str, tuple[str, int, str]] = {}  # a changed file's source_uri -> its live (interval_id, size, version)
        # A full refresh: how many live intervals came from under the source, which its commit
        # replaces; and whether they are every live interval of the store.
        self.covered = 0
        self.covers_store = False
        self.existing: dict[tuple, str] = {}  # the live intervals the batch's files name: key -> source_uri
        self.partials: dict[str, list[str]] = {}  # phase roll-up -> the workers' files of partial sums
        self.committer: FactCommitter | None = None
        self.intervals: IntervalRows | None = None
        self._started_record: Future | None = None

    def fail(self, obj: SourceObject, kind: str, message: str) -> None:
        """Quarantine one file: it is reported, and no longer replaces its previous version."""
        uri, message = printable(obj.uri), printable(message)
        if kind == "listing" and self.full_refresh:
            raise unlisted_in_full_refresh(message)
        self.report.failed.append(FailedFile(uri, kind, message, obj.size, obj.version))
        self.replaced.pop(obj.uri, None)
        # A message starting with its path says it once (a folder's path may be 4 KB long).
        self.say(f"failed: {message}" if message.startswith(uri) else f"failed: {uri}: {message}")

    def run(self, *, wait: float = 0.0, after_commit: AfterCommit | None = None) -> IngestReport:
        started = time.perf_counter()
        st, report = self.store, self.report
        exists = st.exists()
        missing: list[str] | None = None  # once asked, Store.create need not ask again of the others (S3: a HEAD each)
        if exists or not st.is_remote:
            missing = missing_tables(st)
            if missing and (exists or len(missing) < len(ALL_TABLES) - len(DERIVED_TABLES)):
                raise StoreError(
                    f"the store at {st.location!r} is damaged: table(s) {', '.join(missing)} are missing; "
                    f"run 'proflake check --store {st.location}' (and --repair to rebuild what can be)"
                )
        fresh = self.full_refresh or not exists
        st.create(() if missing is None else [n for n in ALL_TABLES if n not in DERIVED_TABLES and n not in missing])
        if fresh:
            self.pool.start()  # every file will be new: the workers start while the store is opened and listed
        lock = StoreLock(st, wait=wait, purpose="proflake ingest")
        with self.pool, lock, contextlib.ExitStack() as stack:
            stack.enter_context(blamed_on_the_cause(lock, st))
            stack.callback(self.close_manifest)
            self.repair()
            listing = self.list()
            stack.callback(listing.close)  # its temporary file, if it wrote one
            todo = self.claim(listing)
            if todo is None:
                # Nothing new, but a killed run may have committed intervals without rebuilding the roll-ups.
                self.clean_up(set())
            else:
                failure: BaseException | None = None
                try:
                    self.parse(todo, listing)
                    self.clean_up(self.commit())
                except BaseException as e:
                    failure = e
                    raise
                finally:
                    if self.committer is not None:
                        self.committer.close()  # first: on a full disk, clearing the spool frees space
                    if self._started_record is not None:
                        futures_wait([self._started_record])  # never still writing once the lock is released
                    if failure is not None:
                        self.record_failure(failure, lock)
            report.seconds = time.perf_counter() - started
            self.record("committed")
            if todo is not None and after_commit is not None:
                after_commit(st, self.say)
        self.bar.done()
        return report

    def repair(self) -> None:
        """Step 1: migrate the store (proflake.store.migrations); finish or undo what a killed run left; read it."""
        st = self.store
        self.report.migrated = migrate(st, log=self.say)  # first: the store takes this release's columns
        # A store no run has written to has nothing to repair, compare with or de-duplicate against:
        # skip reading it (the first read through pyarrow's dataset layer costs a third of a second).
        batches = st.delta("batches")  # read once more by repair, in this step, under the lock
        self.empty = batches.version() == 0 and st.delta("intervals").version() == 0
        self.report.repaired = [] if self.empty else repair_store(st, log=self.say, batches=batches)
        clear_spool(st)
        if self.empty:
            return
        self.manifest = Manifest(st)
        if self.full_refresh:  # every file is parsed again: nothing is compared with the listing
            self.covered, live = self.manifest.count_live(None if self.whole_store else source_prefix(self.src))
            self.covers_store = self.covered == live

    def list(self) -> SortedListing:
        """Step 2: the source's new or changed stats files. Workers start as new files are listed."""
        compare = None if self.full_refresh else self.manifest
        return discover(self.src, self.report, self.bar, self.fail, self.known, self.job_id,
                        listed=start_as_listed(self.pool), manifest=compare)

    def claim(self, listing: SortedListing) -> Iterator[tuple[Candidate, str]] | None:
        """Step 3: the files to parse, one per interval, with their jobs; None when there is nothing to
        commit (nothing new, and not a full refresh)."""
        # Jobs named after their folders: the store's jobs' folders, so a namesake from elsewhere is refused.
        folders: dict[str, str] | None = None if self.job_id else {}
        if not (self.empty or not listing.count or self.covers_store):
            assert self.manifest is not None
            # Other files' intervals: a file naming one of them is a duplicate (the full refresh's own
            # earlier generations excepted, which it replaces); only those the listing names come back.
            self.existing, taken = self.manifest.claim_context(
                listing, outside=source_prefix(self.src) if self.full_refresh else None, qualify=self.qualify_jobs and not self.job_id)
            folders = None if self.job_id else taken
        self.close_manifest()  # its DuckDB memory and spills are not needed past this point
        todo = claim_intervals(listing, self.existing, self.known, self.replaced, self.fail, self.max_file_mb, self.bar, folders, self.qualify_jobs)
        self.bar.reading(listing.count, listing.bytes)
        first = next(todo, None)
        if first is None:
            return iter(()) if self.full_refresh else None
        return itertools.chain([first], todo)

    def parse(self, todo: Iterator[tuple[Candidate, str]], listing: SortedListing) -> None:
        """Step 4: record the batch as started, and parse ``todo`` in the worker processes, which write
        the fact files into the spool; the intervals rows are held (IntervalRows) until the commit."""
        st, report, bar, now = self.store, self.report, self.bar, self.now
        # 'started' must be on record before any fact commits (repair looks for it), not before the
        # workers write: their files stay in the spool until then. So it is written meanwhile.
        self._started_record = in_background("proflake-record", record_event, st, report, "started", now)
        committer = self.committer = FactCommitter(st, report.batch_id)
        options = parquet_options(writer_properties())
        intervals = self.intervals = IntervalRows(committer.directories["intervals"], report.batch_id, options)
        pending: dict[int, tuple[Candidate, dict]] = {}

        # Workers read local files themselves: the bytes never pass through this process. Objects
        # elsewhere (S3) are read here, a few at a time, and handed over, unless the executor (Spark)
        # reads them itself.
        pool = executor_for(self.pool, listing.count, self.src, self.say)
        local = isinstance(self.src, LocalSource) or getattr(pool, "reads_sources", False)
        directories = committer.directories
        if st.is_remote and getattr(pool, "reads_sources", False):
            # Spark tasks upload their fact files straight into the tables' prefixes (no roll-up partial
            # sums: the driver could not read them; it rebuilds the jobs' roll-ups from the facts).
            directories = {name: st.table_uri(name) for name in FACT_TABLES}

        def tasks() -> Iterator[Task]:
            read = (((item, b"") for item in todo) if local else read_ahead(self.src, todo))
            for index, ((candidate, job), data) in enumerate(read):
                obj = candidate.stats
                if isinstance(data, BaseException):
                    self.fail(obj, "read", str(data))
                    bar.advance(1, obj.size)
                    continue
                report.bytes_read += len(data)
                try:  # everything computed from one file's path stops that file only
                    keys = interval_keys(candidate, job, report.batch_id)
                    interval = tuple(keys[c] for c in INTERVAL_KEY_COLUMNS)
                except Exception as e:  # noqa: BLE001
                    self.fail(obj, "layout", f"{obj.uri}: its path names values the store cannot hold ({type(e).__name__}: {e})")
                    bar.advance(1, obj.size)
                    continue
                pending[index] = (candidate, keys)
                if local:
                    yield Task(index, candidate.path.task_format, b"", interval, path=obj.uri, size=obj.size)
                else:
                    yield Task(index, candidate.path.task_format, data, interval)

        # Fewer workers than cores: each writes its files on a thread while it parses on.
        background = pool.size < (os.cpu_count() or 1)
        sink = FactSink(directories, report.batch_id, _flush_rows(), options, background)
        for result in pool.parse(tasks(), sink):
            parsed: list[dict] = []
            for index, outcome in result.outcomes:
                candidate, keys = pending.pop(index)
                obj = candidate.stats
                if local and not (isinstance(outcome, Failure) and outcome.kind in _UNREAD):
                    report.bytes_read += obj.size  # as listed: what a worker read
                if isinstance(outcome, Failure):
                    # A file not read (a read error; a Spark task's S3 rules) is named by its message already.
                    self.fail(obj, outcome.kind, outcome.message if outcome.kind in _UNREAD else f"{obj.uri}: {outcome.message}")
                else:
                    parsed.append(interval_row(candidate, keys, now, outcome.summary))  # type: ignore[attr-defined]
                bar.advance(1, obj.size)
            intervals.add(parsed)
            committer.add([f for f in result.files if f.table in FACT_TABLES])
            for f in result.files:
                if f.table not in FACT_TABLES:
                    self.partials.setdefault(f.table, []).append(f.local_path)
        bar.writing("committing")
        listing.close()  # what the listing held is done with: given back before the commits
        for finished in (self.existing, self.known):
            finished.clear()
        intervals.flush()

    def commit(self) -> set[str]:
        """Step 5: commit the fact files, then the intervals in ONE commit: the batch is visible.
        Returns the source uris ingested (when the quarantine will need them)."""
        st, report, committer, intervals = self.store, self.report, self.committer, self.intervals
        assert committer is not None and intervals is not None and self._started_record is not None
        self._started_record.result()
        committer.finish()
        release_memory()  # the roll-ups, next, are the main process's peak: start it from less
        ingested = intervals.source_uris() if report.failed or not self.empty else set()
        if self.replaced:
            # Rows inside committed files change: deltalake's replaceWhere rewrites those files, and
            # holds the batch's intervals in memory to do it (only runs that met changed files pay).
            st.replace_intervals(intervals.reader(), report.batch_id, sorted(self.replaced), committer.table("intervals"))
        elif self.full_refresh and not self.covers_store:
            # The source's earlier generations go in the same commit: under its prefix, nothing else.
            st.replace_intervals_under(intervals.reader(), report.batch_id, source_prefix(self.src), committer.table("intervals"))
        elif intervals.files or self.full_refresh:
            committer.add(intervals.files)
            committer.commit("intervals", intervals.files, replace_all=self.full_refresh)
        report.rows = {"intervals": intervals.num_rows, **committer.rows}
        report.new_intervals = intervals.num_rows
        report.replaced_intervals = len(self.replaced)
        report.removed_intervals = self.covered
        return ingested

    def clean_up(self, ingested: set[str]) -> None:
        """Step 6: remove the rows no view shows any more, update the quarantine (releasing the files in
        ``ingested``) and the phase roll-ups (proflake.ingestion.bookkeeping.clean_up)."""
        clean_up(self.store, self.report, ingested, self.now, committed=self.intervals is not None,
                 full_refresh=self.full_refresh, covers_store=self.covers_store, replaced=self.replaced,
                 empty=self.empty, partials=self.partials, say=self.say, prefix="" if self.whole_store else source_prefix(self.src),
                 opened=self.committer.tables if self.committer is not None else None)  # the tables it committed to

    def close_manifest(self) -> None:
        manifest, self.manifest = self.manifest, None
        if manifest is not None:
            manifest.close()

    def record_failure(self, error: BaseException, lock: StoreLock) -> None:
        """'failed' or 'interrupted' in ``batches`` (proflake.ingestion.failures.record_stop)."""
        if self._started_record is not None:
            record_stop(self.store, self.report, self._started_record, error, lock)

    def record(self, event: str) -> None:
        """Step 7: the batch's event in ``batches`` ('committed' once it is done)."""
        record_event(self.store, self.report, event, datetime.now(timezone.utc))


def _flush_rows() -> int:
    return int(os.environ.get("PROFLAKE_FLUSH_ROWS") or FLUSH_ROWS)
