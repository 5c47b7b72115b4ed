"""The listing streams: ingest hands files to the parse workers in (job, node, start time) order, keeps
the first in path order of two folders naming one interval, and pairs each pyinstrument html with its
json, however many runs the listing is sorted in and in whatever order a source names a folder's files."""

from __future__ import annotations

import datetime as dt
import importlib
import random
import subprocess
import sys
import tempfile
from pathlib import Path

import pyarrow as pa
import pytest
from helpers.profiles import JobBuilder
from proflake import ingest
from proflake.errors import ProflakeError
from proflake.schema import INTERVAL_KEY_COLUMNS, record_batch, table_spec
from proflake.sources.base import SourceObject
from proflake.sources.local import LocalSource
from proflake.workers.pool import ParsePool

listing_module = importlib.import_module("proflake.ingestion.listing")
commit_module = importlib.import_module("proflake.ingestion.commit")
allocator_module = importlib.import_module("proflake.ingestion.allocator")
STEP = "train-{step}-stepstart-{start}_train-{step}-stepend-{end}"
_JOB, _NODE, _START = (INTERVAL_KEY_COLUMNS.index(c) for c in ("job_id", "node_id", "start_time_us"))


def build_jobs(root: Path) -> None:
    """Two jobs of three nodes; nodes' folders hold steps out of time order (eval before train, step 10
    before step 2), some with pyinstrument; and one interval named twice, under a second framework."""
    for job_name in ("job-b", "job-a"):
        job = JobBuilder(root / job_name)
        for n, node in enumerate(("algo-2", "algo-10", "algo-1")):
            for step in (10, 2, 7, 0):
                start = 10_000 + step * 1000 + n
                job.cprofile(node, STEP.format(step=step, start=start, end=start + 900))
                if step % 2 == 0:
                    job.pyinstrument(node, STEP.format(step=step, start=start, end=start + 900))
            job.cprofile(node, f"eval-0-stepstart-{50_000 + n}_eval-0-stepend-{50_500 + n}")
    JobBuilder(root / "job-a", framework="tensorflow").cprofile("algo-1", STEP.format(step=7, start=17_002, end=17_902))


def record_tasks(monkeypatch) -> list[tuple]:
    """The (job, node, start time, path) of every task, in the order ingest hands them to the pool."""
    seen: list[tuple] = []
    parse = ParsePool.parse

    def recording(self, tasks, sink=None):
        def spy():
            for task in tasks:
                seen.append((task.interval[_JOB], task.interval[_NODE], task.interval[_START], task.path))
                yield task

        return parse(self, spy(), sink)

    monkeypatch.setattr(ParsePool, "parse", recording)
    return seen


@pytest.mark.parametrize("run", [3, 10_000], ids=["sorted-in-runs", "sorted-at-once"])
def test_files_reach_the_workers_in_job_node_time_order(tmp_path, monkeypatch, run):
    build_jobs(tmp_path / "src")
    monkeypatch.setattr(listing_module, "LISTING_RUN", run)
    seen = record_tasks(monkeypatch)
    report = ingest(str(tmp_path / "src"), str(tmp_path / "store"), workers=1)
    path_order = [(job, node, start, path.replace("/", "\x00")) for job, node, start, path in seen]
    assert path_order == sorted(path_order)
    assert len(seen) == 2 * 3 * (4 + 3 + 1) == report.new_intervals  # jobs x nodes x (cProfile steps + pyinstrument + eval)
    # The interval named twice: the first in path order (pytorch) is kept, the second quarantined.
    duplicate = str(tmp_path / "src/job-a/framework/tensorflow/cprofile/algo-1" / STEP.format(step=7, start=17_002, end=17_902) / "python_stats")
    assert [(f.uri, f.kind) for f in report.failed] == [(duplicate, "duplicate")]
    assert duplicate not in {path for *_, path in seen}


class KeyOrderSource:
    """A local folder listed as S3 lists keys: by the whole key, so a subfolder's objects can come
    between two files of its parent ('python_stats.html' < 'python_stats.html.d/...' < 'python_stats.json')."""

    def __init__(self, root: Path) -> None:
        self.local = LocalSource(root)
        self.uri = self.local.uri

    @property
    def root_parts(self) -> tuple[str, ...]:
        return self.local.root_parts

    def list(self):
        return iter(sorted(self.local.list(), key=lambda obj: "/".join(obj.parts)))

    def read(self, obj: SourceObject) -> bytes:
        return self.local.read(obj)


@pytest.mark.parametrize("run", [2, 10_000], ids=["sorted-in-runs", "sorted-at-once"])
def test_every_html_pairs_with_its_json_whatever_lies_between(tmp_path, monkeypatch, run):
    root = tmp_path / "src"
    job = JobBuilder(root / "job")
    jsons = [job.pyinstrument("algo-1", STEP.format(step=s, start=1000 * s, end=1000 * s + 500)) for s in range(1, 6)]
    (jsons[2].parent / "python_stats.html.d").mkdir()
    (jsons[2].parent / "python_stats.html.d" / "notes.txt").write_text("not a stats file")
    lonely = job.stats_dir("pyinstrument", "algo-2", STEP.format(step=9, start=9000, end=9500))
    lonely.mkdir(parents=True)
    (lonely / "python_stats.html").write_text("<html></html>")
    monkeypatch.setattr(listing_module, "LISTING_RUN", run)
    store = str(tmp_path / "store")
    report = ingest(KeyOrderSource(root), store, workers=1)
    assert report.new_intervals == 5 and not report.failed
    assert sorted(report.unrecognised) == sorted([str(jsons[2].parent / "python_stats.html.d" / "notes.txt"), str(lonely / "python_stats.html")])
    from proflake import Profiles

    rows = Profiles(store).sql("SELECT source_uri, html_uri FROM intervals ORDER BY source_uri")
    assert rows["html_uri"].to_pylist() == [str(Path(uri).with_name("python_stats.html")) for uri in rows["source_uri"].to_pylist()]


def test_sorted_listing_reads_back_every_entry_in_order_from_many_runs():
    rng = random.Random(5)
    entries = [
        (f"job-{rng.randint(0, 2)}", f"algo-{rng.randint(1, 3)}", float(rng.randint(0, 50)), f"\x00p\x00{i:04d}", (), (f"/p/{i}", (), i, "v"), None)
        for i in range(500)
    ]
    listing = listing_module.SortedListing(run=7)
    for entry in entries:
        listing.add(entry)
    assert (listing.count, listing.bytes) == (500, sum(range(500)))
    assert list(listing) == sorted(entries, key=lambda e: e[:4])
    listing.close()


def test_interval_rows_built_from_buffers_equal_pyarrows_conversion():
    schema = table_spec("intervals").arrow_schema
    rng = random.Random(3)
    now = dt.datetime(2026, 3, 1, 12, 0, 0, 123456, tzinfo=dt.timezone.utc)
    samples = {
        "string": lambda: rng.choice(["algo-1", "", "naïve/ünïcode", "s3://b/k"]),
        "int64": lambda: rng.randint(-(2**62), 2**62),
        "float64": lambda: rng.uniform(-1e15, 1e15),
        "bool": lambda: rng.random() < 0.5,
        "timestamp": lambda: now + dt.timedelta(microseconds=rng.randint(-(10**15), 10**15)),
    }
    kinds = {pa.string(): "string", pa.int64(): "int64", pa.float64(): "float64", pa.bool_(): "bool"}
    rows = [
        {f.name: None if f.nullable and rng.random() < 0.3 else samples[kinds.get(f.type, "timestamp")]() for f in schema}
        for _ in range(300)
    ]
    built = record_batch(rows, schema)
    built.validate(full=True)
    assert built.equals(pa.RecordBatch.from_pylist(rows, schema=schema))


def test_ingest_does_not_import_pandas(tmp_path):
    """pyarrow's converters import pandas (~35 MB) in whatever process runs them: not in ingest's."""
    JobBuilder(tmp_path / "src" / "job").cprofile("algo-1", STEP.format(step=1, start=1000, end=1500))
    JobBuilder(tmp_path / "src" / "job").pyinstrument("algo-1", STEP.format(step=2, start=2000, end=2500))
    code = (
        "import sys; from proflake.ingestion.batch import ingest; "
        f"report = ingest({str(tmp_path / 'src')!r}, {str(tmp_path / 'store')!r}, workers=1); "
        "print(report.new_intervals, 'pandas' in sys.modules)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.split() == ["2", "False"]


def test_an_unwritable_temporary_folder_is_one_clear_error(tmp_path, monkeypatch):
    build_jobs(tmp_path / "src")
    monkeypatch.setattr(listing_module, "LISTING_RUN", 3)  # spill after three entries
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "no-such-folder"))
    with pytest.raises(ProflakeError, match=r"temporary folder .*no-such-folder.*set TMPDIR to a writable folder"):
        ingest(str(tmp_path / "src"), str(tmp_path / "store"))
    monkeypatch.undo()
    report = ingest(str(tmp_path / "src"), str(tmp_path / "store"))  # the lock was released: the next run lands
    assert report.new_intervals and [f.kind for f in report.failed] == ["duplicate"]  # build_jobs names one twice


def test_local_walk_lists_depth_first_names_sorted_files_before_subfolders(tmp_path):
    # The walk keeps only names per folder level (etl/proflake/sources/local.py): the order is its contract,
    # which the ingest's sorted listing and the html/json pairing rely on.
    for rel in ("b/z/f", "b/a", "a/y/x/f", "a/y/g", "a/c", "a/b/f", "m", "a.txt", "empty/", "b/e/"):
        path = tmp_path / rel
        if rel.endswith("/"):
            path.mkdir(parents=True)
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(rel.encode())
    (tmp_path / "b" / "link-to-file").symlink_to(tmp_path / "m")
    (tmp_path / "b" / "link-to-folder").symlink_to(tmp_path / "a")
    objects = list(LocalSource(tmp_path).list())
    assert ["/".join(o.parts[len(tmp_path.parts):]) for o in objects] == [
        "a.txt", "m",  # the root's files, then its folders in name order
        "a/c", "a/b/f", "a/y/g", "a/y/x/f",
        "b/a", "b/link-to-file", "b/z/f",  # a link to a folder is never walked into
    ]
    by_name = {o.parts[-1]: o for o in objects}
    assert by_name["link-to-file"].problem_kind == "symlink" and by_name["a.txt"].problem is None
    assert all(o.uri == str(tmp_path.joinpath(*o.parts[len(tmp_path.parts):])) for o in objects)
    assert by_name["f"].size == len(b"b/z/f") and by_name["a.txt"].version


@pytest.mark.parametrize("chosen", [None, "jemalloc"], ids=["default", "ARROW_DEFAULT_MEMORY_POOL-set"])
def test_ingest_allocates_from_the_system_pool_and_restores_the_callers(tmp_path, monkeypatch, chosen):
    build_jobs(tmp_path / "src")
    if chosen:
        monkeypatch.setenv("ARROW_DEFAULT_MEMORY_POOL", chosen)
    else:
        monkeypatch.delenv("ARROW_DEFAULT_MEMORY_POOL", raising=False)
    callers = pa.default_memory_pool()
    during = []
    flush = commit_module.IntervalRows.flush

    def recording_flush(self):
        during.append(pa.default_memory_pool().backend_name)
        return flush(self)

    monkeypatch.setattr(commit_module.IntervalRows, "flush", recording_flush)
    ingest(str(tmp_path / "src"), str(tmp_path / "store"), workers=1)
    assert during and set(during) == ({callers.backend_name} if chosen else {"system"})
    assert pa.default_memory_pool().backend_name == callers.backend_name


def test_overlapping_runs_switch_the_pool_once_and_restore_the_callers_at_the_last_end():
    # Two ingests on two threads: A starts, B starts, A ends, B ends. A restoring the caller's pool while
    # B runs, or B restoring the system pool A set, would leave the wrong pool behind.
    callers = pa.default_memory_pool()
    allocator_module._enter_system_allocator()  # A
    allocator_module._enter_system_allocator()  # B
    assert pa.default_memory_pool().backend_name == "system"
    allocator_module._leave_system_allocator()  # A ends: B still runs on the system pool
    assert pa.default_memory_pool().backend_name == "system"
    allocator_module._leave_system_allocator()  # B ends
    assert pa.default_memory_pool().backend_name == callers.backend_name
