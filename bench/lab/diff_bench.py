"""proflake diff: its cost against fetching the same two selections, and its error rates.

    python -m bench.lab.diff_bench --files 10000                 # corpus + store in $TMPDIR/proflake-diff-bench
    python -m bench.lab.diff_bench --store DIR --job bench-job   # an existing store of a bench.corpus corpus
    python -m bench.lab.diff_bench --error-rates --seeds 2000    # false-positive rate and power, no store

**Cost.** Two selections of ``--steps`` train steps each (steps 0..N-1 and N..2N-1, all nodes) of the
corpus's job, on one warm ``Profiles``: ``Profiles.diff`` of the two against ``fetch by_step`` of each (the
least that answers "what did each side spend"), called in turn for ``--repeats`` rounds; medians and the
median of the rounds' ratios, of wall and of CPU time (the process's, so DuckDB's threads count). Each round
also builds the diff page of its diff (``DiffResult.report()``, what ``proflake diff --format html`` writes:
both sides' call trees, merged, and the page's HTML). ``--only fetch`` or ``--only diff`` runs one of the two
alone (warm-up and rounds), so that ``/usr/bin/time -f %M`` gives each one's peak RSS.

**Error rates.** Synthetic no-change pairs (and pairs with one function 3% or 30% slower) with the noise
model of tests/test_diff.py: each step's functions share a step factor (lognormal, sigma = jitter / 2) and
each function has its own (lognormal, sigma = jitter); 30 functions whose times fall off as 1/rank, so
~25 hold the 1% of the total the gate tests. Rates over ``--seeds`` pairs per sample size, through the same
``compare`` and ``gate`` as the command.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[2]
if str(REPO / "etl") not in sys.path:
    sys.path.insert(0, str(REPO / "etl"))


def measure_cost(store: Path, job: str, steps: int, repeats: int) -> dict:
    from proflake import Profiles

    profiles = Profiles(str(store))
    base = {"job": job, "start_step": 0, "end_step": steps - 1}
    head = {"job": job, "start_step": steps, "end_step": 2 * steps - 1}

    def fetch_both():
        a = profiles.by_step(0, steps - 1, job=job)
        b = profiles.by_step(steps, 2 * steps - 1, job=job)
        return a, b

    def run_diff():
        return profiles.diff(base, head)

    fetch_both(), run_diff()  # warm: connection, intervals snapshot, Parquet footers
    fetch_times, diff_times, ratios, page_times, page_ratios = [], [], [], [], []
    fetch_cpu, diff_cpu, cpu_ratios = [], [], []
    for _ in range(repeats):
        (a, b), wall, cpu = _timed(fetch_both)
        fetch_times.append(wall)
        fetch_cpu.append(cpu)
        result, wall, cpu = _timed(run_diff)
        diff_times.append(wall)
        diff_cpu.append(cpu)
        ratios.append(diff_times[-1] / fetch_times[-1])
        cpu_ratios.append(diff_cpu[-1] / fetch_cpu[-1])
        page, wall, _ = _timed(result.report)
        page_times.append(wall)
        page_ratios.append(page_times[-1] / fetch_times[-1])
    return {
        "job": job,
        "steps_per_side": steps,
        "base_intervals": result.base.intervals,
        "head_intervals": result.head.intervals,
        "base_samples": result.base.samples,
        "head_samples": result.head.samples,
        "fetch_intervals": [a.intervals.num_rows, b.intervals.num_rows],
        "functions": result.table.num_rows,
        "repeats": repeats,
        "fetch_both_median_s": statistics.median(fetch_times),
        "diff_median_s": statistics.median(diff_times),
        "diff_over_fetch_median_of_ratios": statistics.median(ratios),
        "fetch_both_cpu_median_s": statistics.median(fetch_cpu),
        "diff_cpu_median_s": statistics.median(diff_cpu),
        "diff_over_fetch_cpu_median_of_ratios": statistics.median(cpu_ratios),
        "page_median_s": statistics.median(page_times),
        "page_over_fetch_median_of_ratios": statistics.median(page_ratios),
        "page_bytes": len(page.html.encode("utf-8")),
        "page_flame_nodes": page.data["flame"]["nodes"],
        "total": {k: result.total[k] for k in ("base", "head", "change_ratio", "p_value", "status")},
    }


def measure_alone(store: Path, job: str, steps: int, repeats: int, only: str) -> dict:
    """One of the two alone, warm-up included, for a peak RSS of its own (``/usr/bin/time -f %M``)."""
    from proflake import Profiles

    profiles = Profiles(str(store))
    if only == "fetch":
        def run():
            return profiles.by_step(0, steps - 1, job=job), profiles.by_step(steps, 2 * steps - 1, job=job)
    else:
        def run():
            return profiles.diff(
                {"job": job, "start_step": 0, "end_step": steps - 1},
                {"job": job, "start_step": steps, "end_step": 2 * steps - 1},
            )
    run()
    rounds = [_timed(run)[1:] for _ in range(repeats)]
    return {
        "only": only,
        "steps_per_side": steps,
        "repeats": repeats,
        "median_s": statistics.median(wall for wall, _ in rounds),
        "cpu_median_s": statistics.median(cpu for _, cpu in rounds),
    }


def _timed(call):
    """``call()``, its wall seconds and its process CPU seconds."""
    wall, cpu = time.perf_counter(), time.process_time()
    answer = call()
    return answer, time.perf_counter() - wall, time.process_time() - cpu


def build_store(files: int, out: Path) -> tuple[Path, str]:
    from proflake.ingestion.batch import ingest

    from bench import corpus as bench_corpus

    corpus_dir, store = out / f"corpus-{files}", out / f"store-{files}"
    if not (corpus_dir / bench_corpus.MANIFEST).is_file():
        bench_corpus.generate(
            corpus_dir,
            files=files,
            nodes=4,
            pyinstrument_fraction=0.1,
            seed=0,
            templates=None,
            jobs=2,
            force=True,
        )
    if not (store / "intervals").is_dir():
        started = time.perf_counter()
        ingest(str(corpus_dir), str(store))
        print(f"ingested {files} files in {time.perf_counter() - started:.1f} s", file=sys.stderr)
    return store, "bench-job"


# -- error rates ----------------------------------------------------------------------------------------
def error_rates(seeds: int, sizes: list[int], jitter: float, rng_seed: int = 2026) -> list[dict]:
    from proflake.query import diff as d

    means = {f"f{i:02d}": 0.1 / (i + 1) for i in range(30)}
    rng = np.random.default_rng(rng_seed)

    def side(n: int, factor: float) -> dict[str, np.ndarray]:
        step = rng.lognormal(0.0, jitter / 2, size=n)
        out = {f: m * step * rng.lognormal(0.0, jitter, size=n) for f, m in means.items()}
        out["f03"] = out["f03"] * factor  # the function that changes (3.3% of the total)
        return out

    rows = []
    for n in sizes:
        counts = {
            "significant_no_change": 0,
            "gate_no_change": 0,
            "gate_3pct": 0,
            "gate_30pct": 0,
            "slower_30pct": 0,
        }
        for _ in range(seeds):
            for factor, key in ((1.0, "no_change"), (1.03, "3pct"), (1.3, "30pct")):
                total, table = d.compare(d.summarise(side(n, 1.0)), d.summarise(side(n, factor)), n, n)
                result = _result(d, total, table)
                failed = bool(result.gate(total=0.10, function=0.10))
                counts[f"gate_{key}"] += failed
                if key == "no_change":
                    counts["significant_no_change"] += bool(
                        total["significant"] or any(table["significant"].to_pylist())
                    )
                if key == "30pct":
                    status = dict(zip(table["function"].to_pylist(), table["status"].to_pylist()))
                    counts["slower_30pct"] += status["f03"] == "slower"
        rows.append({"samples_per_side": n, "seeds": seeds, **{k: v / seeds for k, v in counts.items()}})
        print(json.dumps(rows[-1]), file=sys.stderr)
    return rows


def _result(d, total, table):
    side = d.Side(d.Selection(), None, None, 0, 0, 0.0)
    return d.DiffResult("cprofile", "step", "name", 0.05, 0.95, 0.01, side, side, total, table, [])


def print_cost(c: dict) -> None:
    """``measure_cost``'s answer as a markdown table: wall and CPU medians, and their ratios to the fetches."""
    print("| | seconds (median) | ratio | CPU seconds (median) | CPU ratio |")
    print("|---|---:|---:|---:|---:|")
    print(
        f"| fetch by_step of both sides ({c['fetch_intervals'][0]} + {c['fetch_intervals'][1]} intervals) "
        f"| {c['fetch_both_median_s']:.3f} | 1 | {c['fetch_both_cpu_median_s']:.3f} | 1 |"
    )
    print(
        f"| diff of the two ({c['base_samples']} + {c['head_samples']} samples, {c['functions']} functions) "
        f"| {c['diff_median_s']:.3f} | {c['diff_over_fetch_median_of_ratios']:.2f}x "
        f"| {c['diff_cpu_median_s']:.3f} | {c['diff_over_fetch_cpu_median_of_ratios']:.2f}x |"
    )
    print(
        f"| its diff page, DiffResult.report() ({c['page_flame_nodes']} flame-graph nodes, "
        f"{c['page_bytes']:,} bytes) | {c['page_median_s']:.3f} | {c['page_over_fetch_median_of_ratios']:.2f}x | | |"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.lab.diff_bench", description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=10000, help="corpus size when no --store is given")
    parser.add_argument("--store", type=Path, help="an existing store of a bench.corpus corpus")
    parser.add_argument("--job", default="bench-job")
    parser.add_argument("--out", type=Path, default=Path(tempfile.gettempdir()) / "proflake-diff-bench")
    parser.add_argument("--steps", type=int, default=1000, help="train steps per side (default 1000)")
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--only", choices=("fetch", "diff"), help="time one of the two alone (for its peak RSS)")
    parser.add_argument(
        "--error-rates", action="store_true", help="measure false-positive rate and power instead"
    )
    parser.add_argument("--seeds", type=int, default=1000)
    parser.add_argument("--sizes", default="3,5,12,50,200", help="samples per side, comma-separated")
    parser.add_argument("--jitter", type=float, default=0.10)
    parser.add_argument("--json-out", type=Path)
    args = parser.parse_args(argv)
    if args.error_rates:
        report = {
            "error_rates": error_rates(args.seeds, [int(s) for s in args.sizes.split(",")], args.jitter),
            "jitter": args.jitter,
        }
        print(
            "| samples per side | any significant, no change | gate fails, no change | gate fails, +3% | "
            "gate fails, +30% | +30% called slower |"
        )
        print("|---:|---:|---:|---:|---:|---:|")
        for r in report["error_rates"]:
            print(
                f"| {r['samples_per_side']} | {r['significant_no_change']:.1%} | {r['gate_no_change']:.1%} | "
                f"{r['gate_3pct']:.1%} | {r['gate_30pct']:.1%} | {r['slower_30pct']:.1%} |"
            )
    else:
        if args.store:
            store, job = args.store, args.job
        else:
            args.out.mkdir(parents=True, exist_ok=True)
            store, job = build_store(args.files, args.out)
        if args.only:
            alone = measure_alone(store, job, args.steps, args.repeats, args.only)
            print(json.dumps(alone))
            report = {"alone": alone, "cpus": os.cpu_count()}
        else:
            report = {"cost": measure_cost(store, job, args.steps, args.repeats), "cpus": os.cpu_count()}
            print_cost(report["cost"])
    if args.json_out:
        args.json_out.write_text(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
