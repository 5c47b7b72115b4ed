"""``python -m bench.lab.scaling_bench --corpus CORPUS/bench-job [--workers 1 2] [--rounds 3]``: how ingest
scales with its parse workers, measured on this machine and projected to more cores.

In one process, warm (a small ingest first: imports done, idle workers kept, as on a host that ingests
all night), the job is ingested into a fresh store with each worker count in turn, ``--rounds`` times.
Each step of the batch (proflake.ingestion.batch.Batch: repair, list, claim, parse, commit, clean-up,
record) is timed, wall and the main process's CPU, and so is the workers' CPU (the pool's processes,
alive or reaped). The medians are printed as one markdown table, then the projection:

    T(n) = serial steps + max(the main process's CPU while parsing, the workers' CPU / n)

the steps before and after parsing run in the main process alone; while parsing, n workers on n cores
share the workers' CPU and the main process (listing, feeding and collecting) runs beside them. It
assumes a core for the main process and no other contention; on this 2-core machine the measured
2-worker time is above it for that reason. Results in docs/performance.md."""

from __future__ import annotations

import argparse
import resource
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psutil

STEPS = ("repair", "list", "claim", "parse", "commit", "clean_up", "record")


def _children_cpu() -> float:
    """CPU seconds of this process's children: those alive (idle parse workers) and those reaped."""
    reaped = resource.getrusage(resource.RUSAGE_CHILDREN)
    alive = 0.0
    for child in psutil.Process().children(recursive=True):
        try:
            times = child.cpu_times()
            alive += times.user + times.system
        except psutil.Error:
            pass
    return reaped.ru_utime + reaped.ru_stime + alive


def timed_steps() -> dict[str, list[float]]:
    """Wrap Batch's steps so each call adds (wall, main CPU) under its name; returns the record."""
    from proflake.ingestion import batch

    record: dict[str, list[float]] = {}

    def wrap(name: str) -> None:
        step: Callable[..., Any] = getattr(batch.Batch, name)

        def timed(self: Any, *args: Any, **kwargs: Any) -> Any:
            wall, cpu = time.perf_counter(), time.process_time()
            try:
                return step(self, *args, **kwargs)
            finally:
                record[name] = [time.perf_counter() - wall, time.process_time() - cpu]

        setattr(batch.Batch, name, timed)

    for name in STEPS:
        wrap(name)
    return record


def measure(job: Path, workers: list[int], rounds: int) -> dict[int, list[dict[str, float]]]:
    from proflake import ingest

    steps = timed_steps()
    scratch = Path(tempfile.mkdtemp(prefix="proflake-scaling-"))
    warm_job = next(p for p in job.rglob("python_stats"))
    ingest(str(warm_job.parents[3]), str(scratch / "warm"), workers=max(workers))
    runs: dict[int, list[dict[str, float]]] = {n: [] for n in workers}
    for k in range(rounds):
        for n in workers:
            steps.clear()
            children, wall, cpu = _children_cpu(), time.perf_counter(), time.process_time()
            ingest(str(job), str(scratch / f"store-{n}-{k}"), workers=n)
            run = {"wall": time.perf_counter() - wall, "main_cpu": time.process_time() - cpu,
                   "workers_cpu": _children_cpu() - children}
            for name in STEPS:
                run[f"{name}_wall"], run[f"{name}_cpu"] = steps.get(name, [0.0, 0.0])
            runs[n].append(run)
    return runs


def projection(run: dict[str, float], cores: int) -> float:
    """Seconds for ``cores`` workers (and a core for the main process), from one run's medians."""
    serial = sum(run[f"{name}_wall"] for name in STEPS if name != "parse")
    return serial + max(run["parse_cpu"], run["workers_cpu"] / cores)


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.lab.scaling_bench", description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", type=Path, required=True, help="a job folder (a generated corpus's bench-job)")
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--project", type=int, nargs="+", default=[8, 32], help="core counts to project to")
    args = parser.parse_args()
    runs = measure(args.corpus, args.workers, args.rounds)
    medians = {n: {key: statistics.median(r[key] for r in rs) for key in rs[0]} for n, rs in runs.items()}
    one = medians[min(medians)]["wall"]
    print("| workers | wall s | main CPU s | workers' CPU s | " + " | ".join(f"{s} s (wall)" for s in STEPS) + " | efficiency |")
    print("|---:|---:|---:|---:|" + "---:|" * len(STEPS) + "---:|")
    for n, m in medians.items():
        cells = " | ".join(f"{m[f'{s}_wall']:.2f}" for s in STEPS)
        print(f"| {n} | {m['wall']:.2f} | {m['main_cpu']:.2f} | {m['workers_cpu']:.2f} | {cells} | {one / (n * m['wall']):.0%} |")
    last = medians[max(medians)]
    for cores in args.project:
        projected = projection(last, cores)
        print(f"| {cores} (projected) | {projected:.2f} | | | | | | | | | | {one / (cores * projected):.0%} |")


if __name__ == "__main__":
    main()
