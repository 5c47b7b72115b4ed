"""proflake trend over a long series of jobs: its cost, split into the series query and the change points.

    python -m bench.lab.trend_bench --jobs 1000                  # corpus + store in $TMPDIR/proflake-trend-bench
    python -m bench.lab.trend_bench --store DIR                  # that store again (a corpus written by this file)

The corpus: ``--jobs`` jobs started a day apart, each with ``--steps`` train steps on ``--nodes`` nodes,
every step a cProfile dump of ``--functions`` functions (own times falling off as 1/rank, 10% step noise
as tests/test_diff.py makes it); from job ``--jobs * 0.7`` on, the five largest functions are 30% slower.
On one warm ``Profiles``: ``Profiles.trend`` of every job (median of ``--repeats``), and its two parts, the
series query (queries/trend_series_cprofile.sql over the selected train steps) and the change-point
search (proflake.query.changepoints), each timed alone; the trend page (``TrendResult.report()``: the
charts' data and the diffs either side of the changes); this process's peak resident memory over those
calls (VmHWM, reset after the warm-up call) and before them; and whether the five changes were found at
the right job and nothing else was. ``bench.lab.run`` runs this file in a child process (section ``trend``,
bench/lab/cases/trend.py), so the peak is trend's own.
"""

from __future__ import annotations

import argparse
import json
import marshal
import os
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[2]
if str(REPO / "etl") not in sys.path:
    sys.path.insert(0, str(REPO / "etl"))

FILE = "/app/model.py"
T0 = 1_700_000_000_000_000
DAY_US = 86_400 * 1_000_000
SLOWER = 5


def write_corpus(root: Path, jobs: int, nodes: int, steps: int, functions: int, seed: int = 1) -> int:
    rng = np.random.default_rng(seed)
    means = 0.05 / np.arange(1, functions + 1)
    change_at = int(jobs * 0.7)
    written = 0
    for j in range(jobs):
        job_means = means.copy()
        if j >= change_at:
            job_means[:SLOWER] *= 1.3
        for n in range(nodes):
            for s in range(steps):
                times = job_means * rng.lognormal(0.0, 0.05) * rng.lognormal(0.0, 0.10, functions)
                root_key = (FILE, 1, "train_step")
                stats = {
                    (FILE, 10 + i, f"layer_{i}"): (1, 1, float(t), float(t), {root_key: (1, 1, float(t), float(t))})
                    for i, t in enumerate(times)
                }
                stats[root_key] = (1, 1, 0.0, float(times.sum()), {})
                start = T0 + j * DAY_US + s * 1_000_000
                name = f"train-{s}-stepstart-{start}_train-{s}-stepend-{start + 500_000}"
                folder = root / f"job-{j:04d}" / "framework" / "pytorch" / "cprofile" / f"algo-{n + 1}" / name
                folder.mkdir(parents=True, exist_ok=True)
                (folder / "python_stats").write_bytes(marshal.dumps(stats))
                written += 1
    return written


def _status_mb(field: str) -> float | None:
    """A field of /proc/self/status (VmRSS, VmHWM) in MB; None where there is no /proc."""
    if not os.path.exists("/proc/self/status"):
        return None
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1]) / 1024
    return None


def _reset_peak() -> None:
    """Start VmHWM over from the resident memory now (Linux: clear_refs 5), where the kernel allows it."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
    except OSError:
        pass


def measure(store: Path, repeats: int, jobs: int) -> dict:
    from proflake import Profiles
    from proflake.query import trend as trend_module

    profiles = Profiles(str(store))
    result = profiles.trend()  # warm: connection, intervals snapshot, Parquet footers
    rss_before = _status_mb("VmRSS")
    _reset_peak()
    totals, queries, searches, pages = [], [], [], []
    for _ in range(repeats):
        started = time.perf_counter()
        result = profiles.trend()
        totals.append(time.perf_counter() - started)
        started = time.perf_counter()
        scope, selected = profiles.select(
            "by_step", job=result.jobs, node=None, profiler="cprofile", start_step="*", end_step="*", mode="train"
        )
        series = profiles.aggregate("trend_series_cprofile", selected, scope.params())
        queries.append(time.perf_counter() - started)
        started = time.perf_counter()
        trend_module._changes(series, result.jobs, 0.10, 0.01, 0.05)
        searches.append(time.perf_counter() - started)
        started = time.perf_counter()
        page = result.report()
        pages.append(time.perf_counter() - started)
    peak = _status_mb("VmHWM") or resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    change_at = f"job-{int(jobs * 0.7):04d}"
    expected = {f"{FILE}:{10 + i}(layer_{i})" for i in range(SLOWER)}
    functions = {c["function"] for c in result.changes if c["function"] is not None}
    return {
        "jobs": len(result.jobs),
        "series_rows": result.series.num_rows,
        "trend_s": statistics.median(totals),
        "series_query_s": statistics.median(queries),
        "change_points_s": statistics.median(searches),
        "page_s": statistics.median(pages),
        "page_bytes": len(page.html.encode()),
        "page_diffs": len(page.data["diffs"]),
        "rss_before_mb": rss_before,
        "peak_rss_mb": peak,
        "series_tested": result.tested,
        "changes": len(result.changes),
        "found_the_five_at_the_right_job": functions == expected
        and all(c["job_id"] == change_at for c in result.changes),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.lab.trend_bench", description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=1000)
    parser.add_argument("--nodes", type=int, default=1)
    parser.add_argument("--steps", type=int, default=4, help="train steps per job and node")
    parser.add_argument("--functions", type=int, default=100, help="functions per step")
    parser.add_argument("--store", type=Path, help="an existing store written by this file")
    parser.add_argument("--out", type=Path, default=Path(tempfile.gettempdir()) / "proflake-trend-bench")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--json-out", type=Path)
    args = parser.parse_args(argv)
    report: dict = {"corpus": vars(args) | {"store": str(args.store or args.out / "store"), "out": str(args.out)}}
    report["corpus"].pop("json_out")
    store = args.store
    jobs = args.jobs
    if store is not None and (store.parent / "corpus.json").exists():  # the corpus it was ingested from
        report["corpus"].update(json.loads((store.parent / "corpus.json").read_text()))
        jobs = report["corpus"]["jobs"]
    if store is None:
        import shutil

        from proflake.ingestion.batch import ingest

        shutil.rmtree(args.out, ignore_errors=True)
        started = time.perf_counter()
        report["files"] = write_corpus(args.out / "jobs", args.jobs, args.nodes, args.steps, args.functions)
        report["write_s"] = time.perf_counter() - started
        started = time.perf_counter()
        ingest(str(args.out / "jobs"), str(args.out / "store"), workers=args.workers)
        report["ingest_s"] = time.perf_counter() - started
        store = args.out / "store"
        corpus = {k: getattr(args, k) for k in ("jobs", "nodes", "steps", "functions")}
        (args.out / "corpus.json").write_text(json.dumps(corpus | {"files": report["files"]}) + "\n")
    report["trend"] = measure(store, args.repeats, jobs)
    t = report["trend"]
    print("| jobs | series rows | trend (median) | series query | change points | page | peak RSS | series tested "
          "| changes | right |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|:--|")
    print(
        f"| {t['jobs']:,} | {t['series_rows']:,} | {t['trend_s']:.2f} s | {t['series_query_s']:.2f} s | "
        f"{t['change_points_s']:.3f} s | {t['page_s']:.2f} s | {t['peak_rss_mb']:.0f} MB | {t['series_tested']} | "
        f"{t['changes']} | {'yes' if t['found_the_five_at_the_right_job'] else 'NO'} |"
    )
    if args.json_out:
        args.json_out.write_text(json.dumps(report, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
