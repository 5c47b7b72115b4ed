"""What the ingest driver pays to hold a store's manifest: time and memory per run at N live intervals.

    python -m bench.manifest_bench --intervals 100000 1000000     # simulated stores in $TMPDIR

For each N, a store whose intervals table holds N simulated live intervals (1,000 jobs of 4 nodes; URIs,
versions and keys shaped like real ones) is written once; then, in a fresh child process each, the reads
every ingest run does before it parses: ``Store.ingested_versions()`` (source_uri -> interval id, size,
version: the unchanged-file check) and ``Store.interval_keys()`` (the duplicate check; read when the
source has new files). Reported: each read's wall time and the child's resident memory growth with both dicts
held, as a run holds them. Linear in N (docs/spark.md extrapolates to 10^7).
"""

from __future__ import annotations

import argparse
import json
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
if str(REPO / "etl") not in sys.path:
    sys.path.insert(0, str(REPO / "etl"))


def simulated_store(location: Path, intervals: int) -> None:
    import numpy as np
    import pyarrow as pa
    from proflake.schema import arrow_schema
    from proflake.store.store import Store

    store = Store(str(location))
    store.create()
    schema = arrow_schema("intervals")
    chunk = 250_000
    for start in range(0, intervals, chunk):
        n = min(chunk, intervals - start)
        i = np.arange(start, start + n)
        job, node, step = i // 4000, (i // 1000) % 4, i % 1000
        # Ids and versions look random, as blake2b ids and S3 ETags do (sequential ones compress to nothing).
        scrambled = i.astype(np.uint64) * np.uint64(0x9E3779B97F4A7C15)
        start_us = (1.7e15 + step * 1e6).astype(np.float64)
        uris = [f"s3://ml-profiles/jobs/job-{j:05d}/framework/pytorch/cprofile/algo-{k + 1}/"
                f"{int(s)}_train-{t}-stepstart-{int(s)}_train-{t}-stepend-{int(s) + 900_000}/python_stats"
                for j, k, t, s in zip(job, node, step, start_us)]
        times = pa.array((start_us).astype("int64"), pa.timestamp("us", tz="UTC"))
        columns = {
            "interval_id": pa.array([f"{x:020x}" for x in scrambled]),
            "batch_id": pa.array(["20260101T000000000000Z-abcdef"] * n),
            "job_id": pa.array([f"job-{j:05d}" for j in job]),
            "framework": pa.array(["pytorch"] * n),
            "node_id": pa.array([f"algo-{k + 1}" for k in node]),
            "start_mode": pa.array(["train"] * n), "start_step": pa.array(step), "start_phase": pa.array(["stepstart"] * n),
            "start_time_us": pa.array(start_us), "start_time": times,
            "end_mode": pa.array(["train"] * n), "end_step": pa.array(step), "end_phase": pa.array(["stepend"] * n),
            "end_time_us": pa.array(start_us + 9e5), "end_time": times,
            "job_phase": pa.array(["train"] * n), "profiler": pa.array(["cprofile"] * n), "layout": pa.array(["current"] * n),
            "duration_s": pa.array(np.full(n, 0.9)), "source_uri": pa.array(uris), "html_uri": pa.nulls(n, pa.string()),
            "source_size": pa.array(np.full(n, 34_000)), "source_version": pa.array([f'"{x:016x}{x ^ 0x5bd1e995:016x}"' for x in scrambled]),
            "function_count": pa.array(np.full(n, 300)), "profiled_seconds": pa.array(np.full(n, 0.8)),
            "is_empty": pa.array(np.zeros(n, bool)),
            "ingested_at": pa.array([datetime(2026, 1, 1, tzinfo=timezone.utc)] * n, pa.timestamp("us", tz="UTC")),
        }
        table = pa.table({f.name: columns.get(f.name, pa.nulls(n, f.type)).cast(f.type) for f in schema}, schema=schema)
        store.append("intervals", table, "simulated")


def child(location: str) -> None:
    """In a fresh process: the two reads, timed, with the RSS growth while both are held."""
    from proflake.store.store import Store

    store = Store(location)
    store.delta("intervals")  # opening the table is not the manifest's cost
    base = _rss_mb()
    started = time.perf_counter()
    versions = store.ingested_versions()
    versions_s = time.perf_counter() - started
    started = time.perf_counter()
    keys = store.interval_keys()
    keys_s = time.perf_counter() - started
    held = _rss_mb()
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps({"intervals": len(versions), "keys": len(keys), "ingested_versions_s": versions_s,
                      "interval_keys_s": keys_s, "rss_held_growth_mb": held - base, "peak_rss_mb": peak, "rss_before_mb": base}))


def _rss_mb() -> float:
    """This process's resident memory now (Linux /proc)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.manifest_bench", description=__doc__.splitlines()[0])
    parser.add_argument("--intervals", type=int, nargs="+", default=[100_000, 1_000_000])
    parser.add_argument("--out", type=Path, default=Path(tempfile.gettempdir()) / "proflake-manifest-bench")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        child(args.child)
        return 0
    results = []
    for n in args.intervals:
        location = args.out / f"store-{n}"
        if not (location / "intervals" / "_delta_log").is_dir():
            shutil.rmtree(location, ignore_errors=True)
            started = time.perf_counter()
            simulated_store(location, n)
            print(f"wrote {n} simulated intervals in {time.perf_counter() - started:.1f} s", file=sys.stderr)
        done = subprocess.run([sys.executable, "-m", "bench.manifest_bench", "--child", str(location)],
                              cwd=REPO, capture_output=True, text=True, check=True)
        results.append(json.loads(done.stdout))
        print(json.dumps(results[-1]), file=sys.stderr)
    per = results[-1]
    scale = 10_000_000 / per["intervals"]
    print(json.dumps({"runs": results, "linear_to_1e7": {
        "read_s": (per["ingested_versions_s"] + per["interval_keys_s"]) * scale,
        "rss_held_growth_gb": per["rss_held_growth_mb"] * scale / 1024}}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
