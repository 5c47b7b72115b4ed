"""What the ingest driver pays to compare a listing with a store's manifest: time and memory per run at N live intervals.

    python -m bench.lab.manifest_bench --intervals 1000000 10000000     # simulated stores in $TMPDIR

For each N, a store whose intervals table holds N simulated live intervals (jobs of 4 nodes x 1,000 steps;
URIs, ids and versions shaped like S3's) is written once. Then, each in a fresh child process:

- ``before``: what every run read until the driver was bounded: every live interval's URI, id, size and
  version (the unchanged-file check) and its keys (the duplicate check), held as Python dicts;
- ``after``: a run's own steps up to the parse (``Batch.repair``, ``list``, ``claim``, the claimed files
  consumed) on a simulated S3 source listing the N files unchanged, ``--new`` new files and ``--new``
  changed ones: the listing compared with the store in DuckDB (etl/proflake/ingestion/manifest.py).

Reported: each child's wall time and its peak resident memory growth (VmHWM, the peak reset before the
work, less the resident memory then; ru_maxrss where /proc is not there). ``--skip-before`` leaves the first out (at 10^7 it needs ~15 GB).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from datetime import datetime, timezone
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
if str(REPO / "etl") not in sys.path:
    sys.path.insert(0, str(REPO / "etl"))

BUCKET, PREFIX = "ml-profiles", "jobs"
_CHUNK = 250_000


def _columns(start: int, n: int, changed: int = 0) -> dict:
    """Columns of the simulated intervals start .. start+n (a job is 4 nodes x 1,000 steps); the first
    ``changed`` of them with another version (a file rewritten since it was ingested)."""
    import numpy as np

    i = np.arange(start, start + n)
    job, node, step = i // 4000, (i // 1000) % 4, i % 1000
    # Ids and versions look random, as blake2b ids and S3 ETags do (sequential ones compress to nothing).
    scrambled = i.astype(np.uint64) * np.uint64(0x9E3779B97F4A7C15)
    start_us = (1.7e15 + step * 1e6).astype(np.float64)
    uris = [f"s3://{BUCKET}/{PREFIX}/job-{j:05d}/framework/pytorch/cprofile/algo-{k + 1}/"
            f"train-{t}-stepstart-{int(s)}_train-{t}-stepend-{int(s) + 900_000}/python_stats"
            for j, k, t, s in zip(job, node, step, start_us)]
    versions = [f"{x:016x}{x ^ 0x5bd1e995:016x}" for x in scrambled]
    for c in range(min(changed, n)):
        versions[c] = "changed-" + versions[c]
    return {"i": i, "job": job, "node": node, "step": step, "start_us": start_us, "uris": uris, "versions": versions,
            "ids": [f"{x:020x}" for x in scrambled]}


def simulated_store(location: Path, intervals: int) -> None:
    import numpy as np
    import pyarrow as pa
    from proflake.schema import arrow_schema
    from proflake.store.store import Store

    store = Store(str(location))
    store.create()
    schema = arrow_schema("intervals")
    for start in range(0, intervals, _CHUNK):
        n = min(_CHUNK, intervals - start)
        c = _columns(start, n)
        times = pa.array(c["start_us"].astype("int64"), pa.timestamp("us", tz="UTC"))
        columns = {
            "interval_id": pa.array(c["ids"]),
            "batch_id": pa.array(["20260101T000000000000Z-abcdef"] * n),
            "job_id": pa.array([f"job-{j:05d}" for j in c["job"]]),
            "framework": pa.array(["pytorch"] * n),
            "node_id": pa.array([f"algo-{k + 1}" for k in c["node"]]),
            "start_mode": pa.array(["train"] * n), "start_step": pa.array(c["step"]), "start_phase": pa.array(["stepstart"] * n),
            "start_time_us": pa.array(c["start_us"]), "start_time": times,
            "end_mode": pa.array(["train"] * n), "end_step": pa.array(c["step"]), "end_phase": pa.array(["stepend"] * n),
            "end_time_us": pa.array(c["start_us"] + 9e5), "end_time": times,
            "job_phase": pa.array(["train"] * n), "profiler": pa.array(["cprofile"] * n), "layout": pa.array(["current"] * n),
            "duration_s": pa.array(np.full(n, 0.9)), "source_uri": pa.array(c["uris"]), "html_uri": pa.nulls(n, pa.string()),
            "source_size": pa.array(np.full(n, 34_000)), "source_version": pa.array(c["versions"]),
            "function_count": pa.array(np.full(n, 300)), "profiled_seconds": pa.array(np.full(n, 0.8)),
            "is_empty": pa.array(np.zeros(n, bool)),
            "ingested_at": pa.array([datetime(2026, 1, 1, tzinfo=timezone.utc)] * n, pa.timestamp("us", tz="UTC")),
        }
        table = pa.table({f.name: columns.get(f.name, pa.nulls(n, f.type)).cast(f.type) for f in schema}, schema=schema)
        store.append("intervals", table, "simulated")


class SimulatedSource:
    """An S3 prefix as listed, without objects: the store's ``intervals`` files, the first ``changed`` of
    them at another version, and ``new`` files after them (never read: the bench stops before the parse)."""

    uri = f"s3://{BUCKET}/{PREFIX}"
    root_parts = (BUCKET, PREFIX)

    def __init__(self, intervals: int, new: int = 0, changed: int = 0) -> None:
        self.intervals, self.new, self.changed = intervals, new, changed

    def list(self) -> Iterator:
        from proflake.sources import SourceObject

        total, chunk = self.intervals + self.new, 10_000
        for start in range(0, total, chunk):
            c = _columns(start, min(chunk, total - start), max(0, self.changed - start))
            for uri, version in zip(c["uris"], c["versions"]):
                yield SourceObject(uri, (BUCKET, *uri[len(f"s3://{BUCKET}/"):].split("/")), 34_000, version)

    def read(self, obj: object) -> bytes:
        raise NotImplementedError("the bench stops before the parse")


class _NoPool:
    def start(self) -> None:
        pass


def child_before(location: str) -> dict:
    """The dicts every run held until the driver was bounded (as ``Store.ingested_versions`` and
    ``Store.interval_keys`` built them)."""
    from proflake.store.store import Store

    store = Store(location)
    store.delta("intervals")  # opening the table is not the manifest's cost
    _reset_peak()
    base = _rss_mb()
    started = time.perf_counter()
    rows = store.rows("intervals", ["source_uri", "interval_id", "source_size", "source_version"])
    versions = {row[0]: row[1:] for row in rows}
    del rows
    columns = ["job_id", "profiler", "node_id", "start_time_us", "end_time_us", "start_mode", "end_mode", "source_uri"]
    keys = {row[:-1]: row[-1] for row in store.rows("intervals", columns)}
    seconds = time.perf_counter() - started
    return {"mode": "before", "intervals": len(versions), "keys": len(keys), "seconds": seconds,
            "peak_rss_growth_mb": _peak_mb() - base, "rss_before_mb": base}


def child_after(location: str, intervals: int, new: int) -> dict:
    """A run's steps up to the parse, on a source listing the store's files, ``new`` new and ``new`` changed."""
    from proflake.ingestion.batch import Batch
    from proflake.store.store import Store

    store = Store(location)
    store.delta("intervals")
    source = SimulatedSource(intervals, new=new, changed=new)
    started = time.perf_counter()
    listed = sum(1 for _ in source.list())  # what the source's listing itself costs (S3's requests aside)
    times = {"source_s": time.perf_counter() - started}
    _reset_peak()
    base = _rss_mb()
    batch = Batch(source, store, _NoPool())
    started = time.perf_counter()
    batch.repair()
    times["repair_s"] = time.perf_counter() - started
    listing = batch.list()
    times["list_s"] = time.perf_counter() - started - times["repair_s"]
    todo = batch.claim(listing)
    claimed = sum(1 for _ in todo) if todo is not None else 0
    times["claim_s"] = time.perf_counter() - started - times["repair_s"] - times["list_s"]
    seconds = time.perf_counter() - started
    listing.close()
    report = batch.report
    assert listed == report.files_seen
    return {"mode": "after", "intervals": intervals, "listed": report.files_seen, "unchanged": report.unchanged,
            "claimed": claimed, "replaced": len(batch.replaced), "failed": len(report.failed), "seconds": seconds, **times,
            "peak_rss_growth_mb": _peak_mb() - base, "rss_before_mb": base}


def _rss_mb() -> float:
    """This process's resident memory now (Linux /proc)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def _peak_mb() -> float:
    """This process's peak resident memory: VmHWM (Linux), else ru_maxrss, which on Linux a child
    starts with its parent's (a test process that wrote a big store first) and keeps across exec."""
    for line in Path("/proc/self/status").read_text().splitlines() if os.path.exists("/proc/self/status") else ():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _reset_peak() -> None:
    """Start the peak over from the resident memory now (Linux: clear_refs 5), where the kernel allows it."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
    except OSError:
        pass


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.lab.manifest_bench", description=__doc__.splitlines()[0])
    parser.add_argument("--intervals", type=int, nargs="+", default=[100_000, 1_000_000])
    parser.add_argument("--new", type=int, default=1_000, help="new files, and as many changed ones, in the listing")
    parser.add_argument("--skip-before", action="store_true", help="do not measure the dicts (10^7 needs ~15 GB)")
    parser.add_argument("--out", type=Path, default=Path(tempfile.gettempdir()) / "proflake-manifest-bench")
    parser.add_argument("--child", nargs=4, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        mode, location, intervals, new = args.child
        result = child_before(location) if mode == "before" else child_after(location, int(intervals), int(new))
        print(json.dumps(result))
        return 0
    results = []
    for n in args.intervals:
        location = args.out / f"store-{n}"
        if not (location / "intervals" / "_delta_log").is_dir():
            shutil.rmtree(location, ignore_errors=True)
            started = time.perf_counter()
            simulated_store(location, n)
            print(f"wrote {n} simulated intervals in {time.perf_counter() - started:.1f} s", file=sys.stderr)
        for mode in ("after",) if args.skip_before else ("before", "after"):
            done = subprocess.run([sys.executable, "-m", "bench.lab.manifest_bench", "--child", mode, str(location), str(n), str(args.new)],
                                  cwd=REPO, capture_output=True, text=True, check=True, env={**os.environ, "PYTHONPATH": str(REPO / "etl")})
            results.append(json.loads(done.stdout))
            print(json.dumps(results[-1]), file=sys.stderr)
    print(json.dumps({"runs": results, "load": os.getloadavg()}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
