"""Listing a source for a batch: which stats files are new or changed, in the order the workers parse them.

``discover`` walks the source once, holding only a bounded sorted listing (``SortedListing``), and
``claim_intervals`` picks, of the files naming one interval, the one to parse.
"""

from __future__ import annotations

import dataclasses
import heapq
import marshal
import os
import tempfile
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import IO, TYPE_CHECKING

from proflake.errors import LayoutError, ProflakeError
from proflake.ingestion.planned import is_utf8, planned_path
from proflake.ingestion.report import IngestReport, Progress
from proflake.layout import (
    PYINSTRUMENT_HTML_FILE,
    PYINSTRUMENT_JSON_FILE,
    STATS_FILES,
    IntervalPath,
    is_interval_folder,
    is_stats_file,
    parse_stats_path,
)
from proflake.sources import Source, SourceObject
from proflake.sources.plain import PlainFilesSource

if TYPE_CHECKING:
    from proflake.ingestion.manifest import Manifest


@dataclass(slots=True)
class Candidate:
    """One interval found in the listing: a cProfile file, or a pyinstrument json with its html."""

    path: IntervalPath
    stats: SourceObject
    html: SourceObject | None = None



def printable(text: str) -> str:
    """``text`` with undecodable bytes of a file name shown as \\xNN escapes: safe to print and store."""
    return text if is_utf8(text) else text.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


def job_folder(uri: str) -> str:
    """The job folder a stats file lies in: its URI up to its framework/ folder; for a profiler folder
    outside framework/ (layout smdebug-folder), the folder above it, whose name is the job's."""
    cut = uri.rfind("/framework/")
    if cut >= 0:
        return uri[:cut]
    parts = uri.split("/")
    if len(parts) >= 5 and parts[-1] in STATS_FILES and is_interval_folder(parts[-2]):
        return "/".join(parts[:-4])  # {base}/{profiler folder}/{node}/{interval}/{file}
    return uri.rsplit("/", 1)[0]


def qualified_job(job: str, folder: str, job_folders: dict[str, str]) -> str:
    """The shortest id for the job in ``folder`` that ends with ``job``'s own and keeps one more parent
    folder each time it is taken by another folder (``team-b/run-7``, then ``data/team-b/run-7``);
    recorded in ``job_folders``. The same folder gets the same id on every run."""
    *tried, last = job_candidates(job, folder)
    for candidate in tried:
        if job_folders.setdefault(candidate, folder) == folder:
            return candidate
    return last


def job_candidates(job: str, folder: str) -> list[str]:
    """The ids ``qualified_job`` tries, in order, for the job ``job`` in ``folder``; the folder last."""
    parts = [part for part in folder.split("/") if part]
    return [*("/".join(parts[-length:]) for length in range(len(job.split("/")) + 1, len(parts) + 1)), folder]


def source_prefix(src: Source) -> str:
    """What every source_uri listed under ``src`` starts with (a full refresh replaces those, no others)."""
    return src.uri.rstrip("/") + "/"


def job_id_for(base: tuple[str, ...], source_root: tuple[str, ...]) -> str:
    """The folder above framework/, named relative to the source when the source holds several jobs."""
    if len(base) > len(source_root) and base[: len(source_root)] == source_root:
        return "/".join(base[len(source_root) :])
    return base[-1] if base and base[-1] not in ("/", "") else "default"



def discover(
    src: Source,
    report: IngestReport,
    bar: Progress,
    fail: Callable[[SourceObject, str, str], None],
    known: dict[str, tuple[str, int, str]],
    job_id: str | None = None,
    listed: Callable[[SourceObject], None] = lambda obj: None,
    manifest: Manifest | None = None,
) -> SortedListing:
    """The listing's new or changed intervals, to be read in (job, node, start time, path) order.

    With ``manifest`` (the store's live intervals), a stats file already ingested at the same size and
    version is only counted: a nightly re-run finds nearly every file unchanged, and parsing those
    paths was a third of its time; ``known`` gets the changed files' previous versions (source_uri ->
    (interval_id, size, version)). ``listed`` sees each new or changed stats file as it is found.
    ``job_id``: every interval's job, instead of the folder above framework/.
    """
    listing = SortedListing()
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

    planned = src.planned if isinstance(src, PlainFilesSource) else None  # plain files: uri -> its PlainFile
    objects = _counted(src.list(), report, bar)
    if manifest is not None:
        # The unchanged files and the htmls beside an unchanged json never come back from the store's
        # comparison (etl/proflake/ingestion/manifest.py), which reads the whole listing first.
        objects = manifest.changed(objects, source_prefix(src), known)
    for obj in objects:
        while folders and obj.parts[: len(folders[-1].parts)] != folders[-1].parts:
            settle(folders.pop())
        if obj.problem:
            # Never read, whatever its name says: a stats file is quarantined, anything else skipped;
            # a folder (or entry) that vanished or could not be listed is always reported.
            if obj.problem_kind in ("vanished", "listing") or is_stats_file(obj.parts[-1]):
                fail(obj, obj.problem_kind or "unsafe_path", f"{obj.uri} {obj.problem}")
            else:
                report.unrecognised.append(obj.uri)
            continue
        name = obj.parts[-1]
        if planned is not None:  # plain files: the source planned each one's interval
            path = planned_path(obj, planned(obj.uri), fail)
            if path is not None:
                listing.add((job_id or "default", path.node_id, path.start_time_us, obj.uri.replace("/", "\x00"),
                             _path_fields(path), _object_fields(obj), None))
                listed(obj)
            continue
        if name in (PYINSTRUMENT_HTML_FILE, PYINSTRUMENT_JSON_FILE):
            if not folders or folders[-1].parts != obj.parts[:-1]:
                folders.append(_Folder(obj.parts[:-1]))
            folder = folders[-1]
            if name == PYINSTRUMENT_HTML_FILE:
                folder.html = obj
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
    report.unchanged = manifest.unchanged if manifest is not None else 0
    report.intervals_seen = report.unchanged + listing.count
    return listing


def _counted(objects: Iterable[SourceObject], report: IngestReport, bar: Progress) -> Iterator[SourceObject]:
    for obj in objects:
        report.files_seen += 1
        if report.files_seen % 1000 == 0:
            bar.listing(report.files_seen)
        yield obj


def claim_intervals(
    listing: Iterable[tuple],
    existing: dict[tuple, str],
    known: dict[str, tuple[str, int, str]],
    replaced: dict[str, str],
    fail: Callable[[SourceObject, str, str], None],
    max_file_mb: float,
    bar: Progress,
    job_folders: dict[str, str] | None = None,
    qualify_jobs: bool = False,
) -> Iterator[tuple[Candidate, str]]:
    """The intervals to parse, with their jobs, in the listing's order: not over the size limit, and
    the first in path order of those naming one interval (``existing``: the store's live intervals,
    key -> source_uri). Fills ``replaced`` with the changed files' previous interval ids.
    ``job_folders``: job id -> the folder the store's intervals of that job came from; a file of another
    folder whose job id is taken is quarantined (two teams' ``run-7`` are never merged), or with
    ``qualify_jobs`` given the job id ``qualified_job`` makes for it."""
    # Intervals claimed so far, of one (job, node, start time) at a time: the listing's order puts
    # every file naming an interval next to each other.
    claimed: dict[tuple, str] = {}
    claiming: tuple = ()
    for job, node_id, start_time_us, _, path_fields, stats, html in listing:
        candidate = Candidate(IntervalPath(*path_fields), SourceObject(*stats), SourceObject(*html) if html else None)
        obj = candidate.stats
        assert obj is not None
        if obj.size > max_file_mb * 1024 * 1024:
            fail(obj, "too_large", f"{obj.uri} is {obj.size / 1e6:.0f} MB, over the {max_file_mb:g} MB limit (--max-file-mb)")
            bar.advance(1, obj.size)
            continue
        if claiming != (job, node_id, start_time_us):
            claimed.clear()
            claiming = (job, node_id, start_time_us)
        if job_folders is not None:
            folder = job_folder(obj.uri)
            taken = job_folders.setdefault(job, folder)
            if taken != folder and qualify_jobs:
                job = qualified_job(job, folder, job_folders)
            elif taken != folder:
                fail(obj, "job_conflict", f"{obj.uri}: job id {job!r} is taken by the job in {taken!r}; "
                     "ingest this folder with --job ID to name its job (or the same ID to merge them)")
                bar.advance(1, obj.size)
                continue
        # An interval is its job, profiler, node, boundaries and modes: two files differing only in mode
        # (smdebug switching train -> eval within one microsecond) are two intervals.
        p = candidate.path
        key = (job, p.profiler, node_id, start_time_us, p.end_time_us, p.start_mode, p.end_mode)
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


@dataclass(slots=True)
class _Folder:
    """A folder of the listing that holds a pyinstrument html or json, until it is settled."""

    parts: tuple[str, ...]
    html: SourceObject | None = None
    json: tuple | None = None  # its listing entry (awaiting the html), or None


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


class SortedListing:
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
            return iter(self._held)  # read twice (the store's comparison, then the claim): kept
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
                self._file = tempfile.TemporaryFile(prefix="proflake-listing-")  # noqa: SIM115 (kept open across calls; closed by close())
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
    except Exception as e:  # noqa: BLE001 (whatever a hostile name does, it stops this file only
        fail(obj, "layout", f"{obj.uri}: its path cannot be read as an interval ({type(e).__name__}: {e})")
        return None
    if path is not None and not is_utf8(obj.uri):
        fail(obj, "layout", f"{obj.uri}: its path is not UTF-8, which the store's string columns require; rename it")
        return None
    if path is None:
        report.unrecognised.append(obj.uri)
    return path


# Objects being read at once; bounds memory to about this many stats files.
READ_AHEAD = 32


def read_ahead(
    src: Source, items: Iterable[tuple[Candidate, str]]
) -> Iterator[tuple[tuple[Candidate, str], bytes | BaseException]]:
    """Read objects on a small thread pool, in order, with at most READ_AHEAD in flight (bounded memory)."""
    pending: deque[tuple[tuple[Candidate, str], Future]] = deque()
    with ThreadPoolExecutor(max_workers=8, thread_name_prefix="proflake-read") as pool:
        for item in items:
            pending.append((item, pool.submit(src.read, item[0].stats)))
            if len(pending) >= READ_AHEAD:
                yield _settle(*pending.popleft())
        while pending:
            yield _settle(*pending.popleft())


def _settle(item: tuple[Candidate, str], future: Future) -> tuple[tuple[Candidate, str], bytes | BaseException]:
    try:
        return item, future.result()
    except ProflakeError as e:
        return item, e
