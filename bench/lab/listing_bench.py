"""``python -m bench.lab.listing_bench --intervals 10000 100000 1000000 [--repeats 3] [--dir DIR]``: the
listing commands (``jobs``, ``nodes``, ``list --job``, ``batches``) and a job's ``fetch by-step`` as a user
runs them, each a new ``proflake`` process, on simulated stores of N live intervals
(``bench.lab.manifest_bench.simulated_store``: jobs of 4 nodes x 1,000 steps, built under ``--dir`` once and
reused). Prints one markdown row per (N, command): median wall and CPU (user + system, the process and its
children) and the peak RSS, with the load average at the start. Results in docs/performance.md."""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from bench.lab.manifest_bench import simulated_store

COMMANDS = {
    "jobs": ["jobs"],
    "nodes": ["nodes", "--all-jobs"],
    "list --job": ["list", "--job", "job-00001"],
    "batches": ["batches"],
    "fetch by-step --job": ["fetch", "by-step", "5", "--job", "job-00001"],
}


def run_once(argv: list[str]) -> tuple[float, float, float]:
    """Wall s, CPU s and peak RSS (MB) of one ``proflake`` process (wait4's rusage: its own)."""
    proflake = Path(sys.executable).with_name("proflake")
    start = time.perf_counter()
    child = subprocess.Popen([str(proflake), *argv], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(child.pid, 0)
    wall = time.perf_counter() - start
    child.returncode = os.waitstatus_to_exitcode(status)
    if child.returncode != 0:
        raise SystemExit(f"proflake {' '.join(argv)} failed: {child.stderr.read().decode()[-500:] if child.stderr else ''}")
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--intervals", type=int, nargs="+", default=[10_000, 100_000, 1_000_000])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--dir", type=Path, default=Path("/tmp/proflake-listing-bench"))
    args = parser.parse_args(argv)
    print(f"load average at the start: {os.getloadavg()[0]:.2f}; median of {args.repeats}; "
          f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}")
    print("| intervals | command | wall (s) | CPU (s) | peak RSS (MB) |\n|---:|---|---:|---:|---:|")
    for n in args.intervals:
        store = args.dir / f"store-{n}"
        if not (store / "intervals").is_dir():
            simulated_store(store, n)
        for name, command in COMMANDS.items():
            runs = [run_once([*command, "--store", str(store)]) for _ in range(args.repeats)]
            wall, cpu = statistics.median(r[0] for r in runs), statistics.median(r[1] for r in runs)
            print(f"| {n:,} | `{name}` | {wall:.2f} | {cpu:.2f} | {max(r[2] for r in runs):.0f} |", flush=True)


if __name__ == "__main__":
    main()
