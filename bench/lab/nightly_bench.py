"""``python -m bench.lab.nightly_bench --corpus CORPUS/bench-job [--new 0.01] [--workers 2] [--repeats 3]``:
what a nightly batch of new files costs against a full ingest, in CPU (the ingest process and its
workers, bench.lab.ingest_child, imports included as a nightly run pays them).

The job is copied (hard links) to a scratch source without the newest ``--new`` fraction of its cProfile
intervals (by start time; a node's latest steps, as a running job adds them) and ingested into a store;
then the held-back files are put back and the same store ingests again: that second run is the batch.
Each repeat starts from a fresh store and is paired with a full ingest of the whole job into another
fresh store, alternately; the medians and the ratio are printed as one markdown row. Results in
docs/performance.md."""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from bench.lab.cases.ingest import run_ingest


def cpu(run: dict) -> float:
    """The CPU seconds of one ingest child: itself, the workers it waited for, and those still alive."""
    return run["cpu_seconds_self"] + run["cpu_seconds_children"] + run["worker_cpu_seconds"]


def stats_dirs(job: Path) -> list[Path]:
    """The job's cProfile stats folders, oldest interval first (the start time is the 4th field of the name)."""
    dirs = [p.parent for p in job.rglob("python_stats") if "cprofile" in p.parts]
    return sorted(dirs, key=lambda d: (float(d.name.split("_")[0].split("-")[3]), str(d)))


def nightly(job: Path, scratch: Path, new: float, workers: int) -> tuple[dict, dict, int]:
    """One pair: (the batch of new files, a full ingest of the whole job, how many files were new)."""
    source = scratch / "source" / job.name
    shutil.copytree(job, source, copy_function=os.link)
    dirs = stats_dirs(source)
    held = dirs[len(dirs) - max(1, round(len(dirs) * new)):]
    aside = scratch / "aside"
    for i, d in enumerate(held):
        (aside / str(i)).parent.mkdir(parents=True, exist_ok=True)
        shutil.move(str(d), str(aside / str(i)))
    store = scratch / "store"
    run_ingest(str(source), store, workers)
    for i, d in enumerate(held):
        shutil.move(str(aside / str(i)), str(d))
    batch = run_ingest(str(source), store, workers)
    full = run_ingest(str(source), scratch / "full-store", workers)
    if batch["report"]["new_intervals"] != len(held) or full["report"]["new_intervals"] < len(dirs):
        raise SystemExit(f"unexpected reports: batch {batch['report']}, full {full['report']}")
    return batch, full, len(held)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--corpus", type=Path, required=True, help="a job folder (a generated corpus's bench-job)")
    parser.add_argument("--new", type=float, default=0.01, help="the fraction of new files (default 0.01)")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)
    started = f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, load average {os.getloadavg()[0]:.2f}"
    batches, fulls = [], []
    for _ in range(args.repeats):
        with tempfile.TemporaryDirectory(prefix="proflake-nightly-") as scratch:
            batch, full, new = nightly(args.corpus, Path(scratch), args.new, args.workers)
        batches.append(cpu(batch))
        fulls.append(cpu(full))
    files = len(stats_dirs(args.corpus))
    b, f = statistics.median(batches), statistics.median(fulls)
    print(f"{started}; median of {args.repeats}; batch CPU {[round(x, 2) for x in batches]}, full {[round(x, 2) for x in fulls]}")
    print("| cProfile files | new files | workers | batch CPU (s) | full ingest CPU (s) | batch / full |")
    print("|---:|---:|---:|---:|---:|---:|")
    print(f"| {files:,} | {new} | {args.workers} | {b:.2f} | {f:.2f} | {b / f:.1%} |")


if __name__ == "__main__":
    main()
