"""proflake trend over a long series of jobs: the section ``trend`` (bench/lab/trend_bench.py's corpus and
measurement, run in a child process so its peak memory is its own).

``--trend-jobs N`` (default 1,000) jobs of 4 train steps on one node, 100 functions a step, the five
largest 30% slower from job 0.7 N on; ``--trend-jobs 0`` leaves the section out. The corpus and its store
are kept under the run's corpus folder (``trend-<N>j/``) and reused by the next run of the same size, or
taken from ``--trend-store DIR`` (a store ``python -m bench.lab.trend_bench`` wrote).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from bench.lab.cases import Context
from bench.lab.harness import REPO, OtherLoad, child_env
from bench.lab.report import table
from bench.lab.targets import target

TREND_PEAK_RSS_MB = 1024.0  # a 2 GB CI runner holds it beside the job (526 MB at 1,000 jobs, 420 before the calls)
TREND_S_PER_1000_JOBS = 5.0  # a morning's look at the nightly series takes seconds, not minutes


def run_trend(ctx: Context) -> None:
    """The section: ``bench.lab.trend_bench`` on the trend corpus, its figures under ``ctx.data["trend"]``."""
    args = ctx.args
    if args.trend_jobs == 0 and args.trend_store is None:
        return
    out = ctx.corpus_dir / f"trend-{args.trend_jobs}j"
    store: Path | None = args.trend_store
    if store is None and (out / "corpus.json").exists() and (out / "store").exists():
        if json.loads((out / "corpus.json").read_text()).get("jobs") == args.trend_jobs:
            store = out / "store"  # an earlier run's corpus of this size: its ingest is not what is measured
    result = out / "trend.json"
    command = [sys.executable, "-m", "bench.lab.trend_bench", "--repeats", str(args.trend_repeats), "--json-out", str(result)]
    command += ["--store", str(store)] if store else ["--jobs", str(args.trend_jobs), "--out", str(out)]
    out.mkdir(parents=True, exist_ok=True)
    ctx.log(f"trend: {'reusing ' + str(store) if store else f'writing and ingesting {args.trend_jobs} jobs'}")
    ctx.wait_quiet()
    with OtherLoad() as load:
        subprocess.run(command, cwd=REPO, env=child_env(), check=True, stdout=subprocess.DEVNULL)
    report = json.loads(result.read_text())
    ctx.data["trend"] = {**report["trend"], "corpus": report["corpus"], "reused_store": store is not None,
                         "ingest_s": report.get("ingest_s"), "machine": load.result}


def trend_targets(data: dict) -> list[dict]:
    t = data["trend"]
    per_1000 = t["trend_s"] * 1000 / max(t["jobs"], 1)
    return [
        target(f"trend over {t['jobs']:,} jobs", f"<= {TREND_S_PER_1000_JOBS:g} s per 1,000 jobs",
               f"{t['trend_s']:.2f} s", per_1000 <= TREND_S_PER_1000_JOBS),
        target("trend peak RSS", f"< {TREND_PEAK_RSS_MB:.0f} MB", f"{t['peak_rss_mb']:.0f} MB",
               t["peak_rss_mb"] < TREND_PEAK_RSS_MB),
        target("trend finds the planted change", "the five functions and the total, at the right job",
               f"{t['changes']} changes", bool(t["found_the_five_at_the_right_job"])),
    ]


def render_trend(data: dict) -> list[str]:
    t = data["trend"]
    c = t["corpus"]
    rows = [[f"{t['jobs']:,}", f"{t['series_rows']:,}", f"{t['trend_s']:.2f} s", f"{t['series_query_s']:.2f} s",
             f"{t['change_points_s']:.3f} s", f"{t['page_s']:.2f} s ({t['page_bytes'] / 1e6:.1f} MB)",
             f"{t['peak_rss_mb']:.0f} MB (from {t['rss_before_mb']:.0f})", str(t["series_tested"]), str(t["changes"]),
             "yes" if t["found_the_five_at_the_right_job"] else "**no**"]]
    return [
        "",
        f"Trend: `Profiles.trend` of every job (median of {c.get('repeats', '?')}, warm), {c.get('steps', '?')} train steps a "
        f"job on {c.get('nodes', '?')} node(s), {c.get('functions', '?')} functions a step; the page is "
        "`TrendResult.report()`; peak RSS of the measuring process over those calls (bench/lab/cases/trend.py).",
        "",
        *table(["jobs", "series rows", "trend", "series query", "change points", "page", "peak RSS", "series tested",
                "changes", "right"], rows, "rrrrrrrrrl"),
    ]
