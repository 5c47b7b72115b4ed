"""CLI start-up: proflake's commands against the cost of starting Python with the libraries they need.

    python -m bench.lab.cli_startup [--repeats 15] [--json-out FILE]

Measured in one run, alternating, so the host's drift is shared by every row:

* ``proflake --help`` against ``python -c pass`` (the floor of any Python command);
* ``proflake jobs`` and ``proflake fetch by-step 2`` on a small store (the real TensorFlow job of
  ``tests/data/smdebug-tf-legacy``, ingested first) against ``python -c "import duckdb, pyarrow,
  deltalake"`` (the floor of any command that answers from the store). Target: at most 1.3x.

Wall time of each process, stdout to /dev/null (the pipe contract: CSV would be the same work). The
median of ``--repeats`` rounds is reported, and its ratio to the floor's median. proflake's modules are
byte-compiled first, as an install does: with ``PYTHONDONTWRITEBYTECODE`` set (this machine sets it) a
checkout's modules would otherwise be compiled on every run, while the libraries' were compiled by pip.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
LEGACY = REPO / "tests" / "data" / "smdebug-tf-legacy"
TARGET = 1.3


def _proflake() -> list[str]:
    script = Path(sys.executable).parent / "proflake"
    return [str(script)] if script.exists() else [sys.executable, "-m", "proflake.cli"]


def commands(store: str) -> dict[str, list[str]]:
    cli = _proflake()
    return {
        "python -c pass": [sys.executable, "-c", "pass"],
        "proflake --help": [*cli, "--help"],
        "import duckdb, pyarrow, deltalake": [sys.executable, "-c", "import duckdb, pyarrow, deltalake"],
        "proflake jobs": [*cli, "jobs", "--store", store],
        "proflake fetch by-step 2": [*cli, "fetch", "by-step", "2", "--store", store],
    }


# row -> the floor it is compared with
FLOORS = {
    "proflake --help": "python -c pass",
    "proflake jobs": "import duckdb, pyarrow, deltalake",
    "proflake fetch by-step 2": "import duckdb, pyarrow, deltalake",
}


def _run(argv: list[str]) -> tuple[float, float]:
    """Wall seconds and CPU seconds (user + system) of one process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, check=True)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def measure(store: str, repeats: int) -> dict:
    """Medians of wall and CPU time per command, and their ratios to each command's floor. On a busy
    host the wall times stretch with the load; the CPU times are what the process itself spent."""
    runs = commands(store)
    for argv in runs.values():  # warm the page cache and the store's files once
        _run(argv)
    wall: dict[str, list[float]] = {name: [] for name in runs}
    cpu: dict[str, list[float]] = {name: [] for name in runs}
    for _ in range(repeats):
        for name, argv in runs.items():  # alternating: every row sees the same drift
            w, c = _run(argv)
            wall[name].append(w)
            cpu[name].append(c)
    med_wall = {name: statistics.median(v) for name, v in wall.items()}
    med_cpu = {name: statistics.median(v) for name, v in cpu.items()}
    rows = []
    for name in runs:
        floor = FLOORS.get(name)
        rows.append({
            "command": name,
            "wall_ms": round(med_wall[name] * 1000, 1),
            "cpu_ms": round(med_cpu[name] * 1000, 1),
            "floor": floor,
            "wall_ratio": round(med_wall[name] / med_wall[floor], 2) if floor else None,
            "cpu_ratio": round(med_cpu[name] / med_cpu[floor], 2) if floor and med_cpu[floor] else None,
        })
    return {"repeats": repeats, "target_ratio": TARGET, "load_average": os.getloadavg()[0], "rows": rows}


def markdown(result: dict) -> str:
    lines = [
        "| command | wall ms | CPU ms | floor | wall / floor | CPU / floor |",
        "|---|---:|---:|---|---:|---:|",
    ]
    for row in result["rows"]:
        ratios = [f"{row[k]:.2f}x" if row[k] is not None else "" for k in ("wall_ratio", "cpu_ratio")]
        lines.append(f"| `{row['command']}` | {row['wall_ms']:.1f} | {row['cpu_ms']:.1f} | {row['floor'] or ''} | "
                     f"{ratios[0]} | {ratios[1]} |")
    lines.append(f"\nmedians of {result['repeats']} alternating rounds; 1-minute load average {result['load_average']:.1f}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.lab.cli_startup", description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=15, help="rounds of every command (default 15)")
    parser.add_argument("--json-out", metavar="FILE", help="also write the result as JSON")
    args = parser.parse_args(argv)
    import compileall

    import proflake

    compileall.compile_dir(str(Path(proflake.__file__).parent), quiet=1)
    work = Path(tempfile.mkdtemp(prefix="proflake-cli-startup-"))
    try:
        store = str(work / "store")
        subprocess.run([*_proflake(), "ingest", str(LEGACY), "--store", store], check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        result = measure(store, args.repeats)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(markdown(result))
    if args.json_out:
        Path(args.json_out).write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
