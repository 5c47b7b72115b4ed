"""The bounded driver: ingest compares its listing with the store's live intervals in DuckDB
(etl/proflake/ingestion/manifest.py), so a run's memory follows its new files, not the store; and the
comparison keeps every answer the Python dicts gave (changed files, one URI under two job ids,
duplicates, quotes and non-ASCII names, pyinstrument pairs, problem objects)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from helpers.profiles import JobBuilder
from proflake import ingest
from proflake.ingestion.manifest import Manifest
from proflake.sources.base import SourceObject
from proflake.sources.local import LocalSource
from proflake.store.store import Store

REPO = Path(__file__).resolve().parent.parent
STEP = "train-{step}-stepstart-{start}_train-{step}-stepend-{end}"


def steps(job: JobBuilder, node: str, count: int, first: int = 0) -> list[Path]:
    return [job.cprofile(node, STEP.format(step=s, start=1000 * s, end=1000 * s + 500)) for s in range(first, first + count)]


def live(store: str) -> list[tuple]:
    con = Store(store).connect()
    try:
        return con.execute("SELECT source_uri, job_id, interval_id FROM intervals ORDER BY source_uri, job_id").fetchall()
    finally:
        con.close()


# A store of N simulated intervals, listed unchanged by a simulated source plus a few new and changed
# files, taken through a run's steps up to the parse in a child process: the peak resident memory the
# child gains on the big store (VmHWM: ru_maxrss starts from this test process's), after the same steps
# on a smaller one (more than one chunk of every spill) touched every code path once (the first Parquet
# write alone maps ~90 MB of pyarrow's code).
_CHILD = """
import json, sys
sys.path.insert(0, {repo!r})
from bench.lab.manifest_bench import SimulatedSource, _NoPool, _peak_mb, _reset_peak, _rss_mb
from proflake.ingestion.batch import Batch
from proflake.store.store import Store

def run(location, n):
    batch = Batch(SimulatedSource(n, new=100, changed=100), Store(location), _NoPool())
    batch.repair()
    listing = batch.list()
    todo = batch.claim(listing)
    claimed = sum(1 for _ in todo) if todo is not None else 0
    listing.close()
    return [batch.report.unchanged, claimed, len(batch.replaced), len(batch.report.failed)]

run({small!r}, {small_n})
_reset_peak()
base = _rss_mb()
answers = run({big!r}, {big_n})
print(json.dumps({{"answers": answers, "growth_mb": _peak_mb() - base}}))
"""


def test_the_driver_does_not_hold_the_store_s_intervals(tmp_path):
    from bench.lab.manifest_bench import simulated_store

    small, big, n = tmp_path / "small", tmp_path / "big", 300_000
    simulated_store(small, 40_000)
    simulated_store(big, n)
    code = _CHILD.format(repo=str(REPO), small=str(small), small_n=40_000, big=str(big), big_n=n)
    env = {**os.environ, "PROFLAKE_MANIFEST_MEMORY": "64MB"}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=600)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    # Unchanged: all but the 100 changed; to parse: the 100 new and the 100 changed, which replace theirs.
    assert result["answers"] == [n - 100, 200, 100, 0]
    # Holding the store's intervals as Python dicts took ~2 KB each (~600 MB here); DuckDB's share is
    # capped by its memory limit (64 MB here), and what comes back to Python is the batch's.
    assert result["growth_mb"] < 150, result


def test_changed_size_or_version_replaces_the_old_interval_in_one_run(tmp_path):
    job = JobBuilder(tmp_path / "src" / "job")
    files = steps(job, "algo-1", 4)
    store = str(tmp_path / "store")
    ingest(str(tmp_path / "src"), store, workers=1)
    before = {uri: iid for uri, _, iid in live(store)}
    files[0].write_bytes(files[0].read_bytes() + b"\0" * 7)  # another size (a dump with trailing bytes)
    stat = files[1].stat()
    os.utime(files[1], ns=(stat.st_atime_ns, stat.st_mtime_ns + 10**9))  # the same size, another version
    report = ingest(str(tmp_path / "src"), store, workers=1)
    assert (report.unchanged, report.replaced_intervals, report.new_intervals) == (2, 2, 2), report.failed
    after = {uri: iid for uri, _, iid in live(store)}
    assert after.keys() == before.keys()  # one live interval per file
    assert [after[str(f)] != before[str(f)] for f in files] == [True, True, False, False]


def test_one_uri_under_two_job_ids_is_compared_by_uri(tmp_path):
    files = steps(JobBuilder(tmp_path / "src" / "job"), "algo-1", 3)
    store = str(tmp_path / "store")
    ingest(str(tmp_path / "src"), store, workers=1, job_id="team-a")
    again = ingest(str(tmp_path / "src"), store, workers=1, job_id="team-b")
    assert (again.unchanged, again.new_intervals) == (3, 0)  # the files are the same files, whatever the job
    files[2].write_bytes(files[2].read_bytes() + b"\0")
    changed = ingest(str(tmp_path / "src"), store, workers=1, job_id="team-b")
    assert (changed.unchanged, changed.replaced_intervals, changed.new_intervals) == (2, 1, 1)
    jobs = {uri: job for uri, job, _ in live(store)}
    assert len(jobs) == 3 and jobs[str(files[2])] == "team-b" and jobs[str(files[0])] == "team-a"


def test_duplicates_within_the_batch_and_against_the_store(tmp_path):
    first = steps(JobBuilder(tmp_path / "a" / "run"), "algo-1", 3)
    store = str(tmp_path / "store")
    ingest(str(tmp_path / "a"), store, workers=1, job_id="merged")
    # Two more folders naming steps 1-3 (two of them in the store already) of the same job id.
    steps(JobBuilder(tmp_path / "b" / "x" / "run"), "algo-1", 3, first=1)
    steps(JobBuilder(tmp_path / "b" / "y" / "run"), "algo-1", 3, first=1)
    report = ingest(str(tmp_path / "b"), store, workers=1, job_id="merged")
    failed = sorted((f.kind, Path(f.uri).parts[-8], f.message.rsplit(" ", 1)[-1]) for f in report.failed)
    # Steps 1 and 2 of x and y duplicate the store's (a's files); step 3 of y duplicates x's, first in path order.
    stored = {str(f) for f in first}
    assert [(kind, folder) for kind, folder, _ in failed] == [("duplicate", "x")] * 2 + [("duplicate", "y")] * 3
    assert sum(other in stored for *_, other in failed) == 4
    assert report.new_intervals == 1 and len(live(store)) == 4


@pytest.mark.parametrize("name", ["it's \"quoted\"", "ünïcödé-λ", "100%_*[x]", "a'b\\c"])
def test_uris_with_quotes_backslashes_and_unicode_compare_exactly(tmp_path, name):
    files = steps(JobBuilder(tmp_path / "src" / name), "algo-1", 3)
    store = str(tmp_path / "store")
    assert ingest(str(tmp_path / "src"), store, workers=1).new_intervals == 3
    again = ingest(str(tmp_path / "src"), store, workers=1)
    assert (again.unchanged, again.new_intervals, again.failed) == (3, 0, [])
    files[1].write_bytes(files[1].read_bytes() + b"\0")
    changed = ingest(str(tmp_path / "src"), store, workers=1)
    assert (changed.unchanged, changed.replaced_intervals, changed.failed) == (2, 1, [])
    assert sorted(uri for uri, *_ in live(store)) == sorted(str(f) for f in files)


def test_the_comparison_keeps_the_listing_order_and_names_previous_versions(tmp_path):
    src = tmp_path / "src"
    job = JobBuilder(src / "job")
    kept_cprofile = steps(job, "algo-1", 2)
    jsons = [job.pyinstrument("algo-2", STEP.format(step=s, start=1000 * s, end=1000 * s + 500)) for s in range(3)]
    store = str(tmp_path / "store")
    ingest(str(src), store, workers=1)
    listed = list(LocalSource(src).list())

    def obj(path: Path, **changes) -> SourceObject:
        found = next(o for o in listed if o.uri == str(path))
        return SourceObject(**{**{f: getattr(found, f) for f in SourceObject.__dataclass_fields__}, **changes})

    html = jsons[1].with_name("python_stats.html")
    lonely = src / "job" / "lonely" / "python_stats.html"
    objects = [
        obj(kept_cprofile[0]),  # unchanged: dropped
        obj(kept_cprofile[1], size=1),  # changed: kept, with its previous version
        SourceObject(str(src / "new" / "python_stats"), ("new", "python_stats"), 5, "v"),  # new
        obj(jsons[0], version="other"), obj(jsons[0].with_name("python_stats.html")),  # changed json: both kept
        obj(html), obj(jsons[1]),  # unchanged json: its html dropped too, whichever comes first
        obj(jsons[2], problem="a symlink", problem_kind="symlink"),  # a problem is never unchanged
        SourceObject(str(lonely), ("job", "lonely", "python_stats.html"), 3, "v"),  # an html without its json
        SourceObject(str(src / "bad-\udcff" / "python_stats"), ("bad-\udcff", "python_stats"), 5, "v"),  # not UTF-8
    ]
    previous: dict = {}
    with Manifest(Store(store)) as manifest:
        out = list(manifest.changed(iter(objects), str(src) + "/", previous))
        assert manifest.unchanged == 2
    assert [o.uri for o in out] == [o.uri for i, o in enumerate(objects) if i not in (0, 5, 6)]
    assert out[4].problem == "a symlink"
    assert set(previous) == {str(kept_cprofile[1]), str(jsons[0])}
    by_uri = {uri: iid for uri, _, iid in live(store)}
    assert previous[str(kept_cprofile[1])][0] == by_uri[str(kept_cprofile[1])]


def test_the_comparison_leaves_no_temporary_folder_and_clears_a_killed_run_s(tmp_path, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True, check=True)
    stale = tmp_path / "tmp" / f"proflake-manifest-{gone.stdout.strip()}-x"
    (stale / "spill").mkdir(parents=True)
    steps(JobBuilder(tmp_path / "src" / "job"), "algo-1", 2)
    store = str(tmp_path / "store")
    ingest(str(tmp_path / "src"), store, workers=1)
    steps(JobBuilder(tmp_path / "src" / "job"), "algo-1", 1, first=5)
    assert ingest(str(tmp_path / "src"), store, workers=1).new_intervals == 1
    assert [p.name for p in (tmp_path / "tmp").iterdir() if p.name.startswith("proflake-manifest-")] == []


def test_a_run_that_compares_with_the_store_does_not_import_pandas(tmp_path):
    """pyarrow's conversion of Python lists imports pandas (half a second of a nightly re-run)."""
    steps(JobBuilder(tmp_path / "src" / "job"), "algo-1", 2)
    ingest(str(tmp_path / "src"), str(tmp_path / "store"), workers=1)
    steps(JobBuilder(tmp_path / "src" / "job"), "algo-1", 1, first=4)
    code = (
        "import sys; from proflake.ingestion.batch import ingest; "
        f"report = ingest({str(tmp_path / 'src')!r}, {str(tmp_path / 'store')!r}, workers=1); "
        "print(report.unchanged, report.new_intervals, 'pandas' in sys.modules)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.split() == ["2", "1", "False"]
