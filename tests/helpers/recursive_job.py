"""A small recursive training job profiled with real cProfile, and how honest a flame graph of it is.

The job's steps run fib (self recursion), is_even/is_odd (mutual recursion), a tree walk (walk and its
generator expression call each other) and a non-recursive checksum called from two places. Each step is
one smdebug interval, profiled on its own as smdebug does.

``honesty(document, stats)`` measures a speedscope document against the pstats of the same files: the
share of the weight under false roots (a root frame whose function has callers other than itself in the
pstats data: a self-recursive function called from outside the profile is a true root), each
function's own and inclusive seconds on the drawn tree, and the total.

Run as a script to measure a store's export (the numbers in docs/report.md):

    .venv/bin/python tests/helpers/recursive_job.py [JOB_FOLDER]   # no folder: this job, made in a temp dir
"""

from __future__ import annotations

import cProfile
import hashlib
import json
import pstats
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

STEPS = 3


def fib(n: int) -> int:
    return n if n < 2 else fib(n - 1) + fib(n - 2)


def is_even(n: int) -> bool:
    return True if n == 0 else is_odd(n - 1)


def is_odd(n: int) -> bool:
    return False if n == 0 else is_even(n - 1)


def build(depth: int, width: int) -> list:
    return [] if depth == 0 else [build(depth - 1, width) for _ in range(width)]


def walk(tree: list) -> int:
    return 1 + sum(walk(child) for child in tree)


def checksum(values: list) -> str:
    return hashlib.sha256(json.dumps(values).encode()).hexdigest()


def summarize(values: list) -> str:
    return checksum(sorted(values))


def log_step(step: int, values: list) -> str:
    return checksum([step, *values])


def train_step(step: int) -> str:
    values = [fib(15 + step % 2), is_even(400 + step), walk(build(6, 3))]
    values += [i * i for i in range(2000)]
    return summarize(values) + log_step(step, values)


def write_job(base: Path, steps: int = STEPS) -> list[Path]:
    """One cProfile interval per train step under ``base`` (smdebug's layout, node algo-1); the files."""
    paths = []
    for step in range(steps):
        start, end = 2_000_000 + step * 1_000_000, 2_000_000 + step * 1_000_000 + 900_000
        folder = base / "framework" / "pytorch" / "cprofile" / "algo-1" / f"train-{step}-stepstart-{start}_train-{step}-stepend-{end}"
        folder.mkdir(parents=True, exist_ok=True)
        profile = cProfile.Profile()
        profile.enable()
        train_step(step)
        profile.disable()
        paths.append(folder / "python_stats")
        pstats.Stats(profile).dump_stats(str(paths[-1]))
    return paths


def label(key: tuple[str, int, str]) -> str:
    return pstats.func_std_string(key)


def honesty(document: dict[str, Any], stats: dict) -> dict[str, Any]:
    """How a speedscope ``document`` compares with ``stats`` (pstats' ``Stats.stats`` of the same files).

    Returns the total weight, the weight under false roots (and its share), and per function (pstats'
    label) the own seconds at the end of a stack and the inclusive seconds of the stacks it is on, each
    beside pstats' tottime and cumtime."""
    (profile,) = document["profiles"]
    frames = [f"{f['file']}:{f['line']}({f['name']})" if "file" in f else f["name"] for f in document["shared"]["frames"]]
    by_label = {label(k): v for k, v in stats.items()}
    by_key = {label(k): k for k in stats}
    own: dict[str, float] = defaultdict(float)
    inclusive: dict[str, float] = defaultdict(float)
    false_roots = 0.0
    for sample, weight in zip(profile["samples"], profile["weights"]):
        own[frames[sample[-1]]] += weight
        for name in {frames[i] for i in sample}:
            inclusive[name] += weight
        root = by_label.get(frames[sample[0]])
        if root is not None and set(root[4]) - {by_key[frames[sample[0]]]}:  # callers other than itself
            false_roots += weight
    total = sum(profile["weights"])
    return {
        "total": total,
        "false_roots": false_roots,
        "false_root_share": false_roots / total if total else 0.0,
        "functions": {
            name: {"own": own.get(name, 0.0), "inclusive": inclusive.get(name, 0.0), "tottime": v[2], "cumtime": v[3]}
            for name, v in by_label.items()
        },
    }


def _main(argv: list[str]) -> None:  # pragma: no cover - a measuring script
    import tempfile

    from proflake import Profiles, ingest
    from proflake.pages import export

    with tempfile.TemporaryDirectory() as tmp:
        job = Path(argv[0]) if argv else Path(tmp) / "recursive-job"
        if not argv:
            write_job(job)
        files = sorted(p for p in job.rglob("python_stats") if p.is_file())
        ingest(str(job), str(Path(tmp) / "store"))
        result = Profiles(str(Path(tmp) / "store")).by_job_phase()
        document = json.loads(export(result, "speedscope"))
        stats = pstats.Stats()
        for path in files:
            stats.add(str(path))
        h = honesty(document, stats.stats)
        over = sorted(h["functions"].items(), key=lambda kv: kv[1]["cumtime"] - kv[1]["inclusive"])
        worst = over[0]
        for name, f in over[:6]:
            print(f"  {name[-60:]}: inclusive {f['inclusive']:.6f} s, cumtime {f['cumtime']:.6f} s")
        print(f"{len(files)} files, total {h['total']:.6f} s (pstats {stats.total_tt:.6f} s)")
        print(f"under false roots: {h['false_roots']:.6f} s = {100 * h['false_root_share']:.1f}%")
        print(f"largest inclusive - cumtime: {worst[1]['inclusive'] - worst[1]['cumtime']:+.6f} s ({worst[0]})")
        note = result.report().data["flame"].get("note")
        if note:
            print(note)


if __name__ == "__main__":  # pragma: no cover
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent.parent / "etl"))
    _main(sys.argv[1:])
