"""Report benchmark: generation time and file size of `proflake report` (and the exports) on a corpus.

    python -m bench.lab.report_bench --files 10000                # builds the corpus (bench.corpus) and a store
    python -m bench.lab.report_bench --corpus DIR --store DIR     # reuse both

For each selection (the whole job, one train step, a 100-step range; each for cProfile and pyinstrument)
it times ``FetchResult.report()`` end to end (the roll-ups, the call tree, the JSON and the page) in this
process, warm (after one untimed call), the median of ``--repeats``, and writes the page to measure its
size; the exports are timed the same way. The fetch of the same selection is timed alongside as the
baseline a report is compared with: ``x fetch`` is report time / fetch time in the same run.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:  # python bench/lab/report_bench.py
    sys.path.insert(0, str(ROOT))


def _median_seconds(call, repeats: int, cpu: list[float] | None = None) -> float:
    """Median wall seconds of ``call`` after one warm-up call; with ``cpu``, appends the median CPU seconds
    of the process (DuckDB's threads included), which a busy host inflates less than wall time."""
    call()  # warm: DuckDB's caches, the intervals' Arrow copy
    times, cpus = [], []
    for _ in range(repeats):
        started, started_cpu = time.perf_counter(), time.process_time()
        call()
        times.append(time.perf_counter() - started)
        cpus.append(time.process_time() - started_cpu)
    if cpu is not None:
        cpu.append(statistics.median(cpus))
    return statistics.median(times)


def measure(store: str, repeats: int, out_dir: Path, browser: bool = False) -> list[dict]:
    from proflake import Profiles
    from proflake.pages import export

    profiles = Profiles(store)
    selections = [
        ("whole job", "by_job_phase", {}),
        ("train step 5", "by_step", {"start_step": 5}),
        ("train steps 100-199", "by_step", {"start_step": 100, "end_step": 199}),
    ]
    rows: list[dict] = []
    paths: list[Path] = []
    for profiler in ("cprofile", "pyinstrument"):
        for label, method, arguments in selections:
            result = profiles.fetch(method, profiler=profiler, **arguments)
            if result.empty:
                continue
            cpu: list[float] = []
            fetch_s = _median_seconds(lambda m=method, p=profiler, a=arguments: profiles.fetch(m, profiler=p, **a), repeats, cpu)
            report_s = _median_seconds(result.report, repeats, cpu)
            report = result.report()
            path = report.write(out_dir / f"{profiler}-{method}-{len(rows)}.html")
            paths.append(path)
            row = {
                "profiler": profiler,
                "selection": label,
                "intervals": result.intervals.num_rows,
                "fetch_s": fetch_s,
                "report_s": report_s,
                "fetch_cpu_s": cpu[0],
                "report_cpu_s": cpu[1],
                "report_bytes": path.stat().st_size,
                "flame_nodes": report.data["flame"]["nodes"],
                "functions_listed": len(report.data["functions"]),
            }
            for fmt in ("speedscope", "collapsed"):
                row[f"{fmt}_s"] = _median_seconds(lambda f=fmt, result=result: export(result, f), repeats)
                row[f"{fmt}_bytes"] = len(export(result, fmt))
            rows.append(row)
            print(json.dumps(row), file=sys.stderr)
    if browser:
        browser_times(rows, paths, repeats)
    return rows


def browser_times(rows: list[dict], paths: list[Path], repeats: int) -> None:
    """Time from navigation to the page's ready mark (every section drawn) in headless Debian chromium."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path="/usr/bin/chromium", headless=True, args=["--no-sandbox"])
        for row, path in zip(rows, paths):
            times = []
            for _ in range(repeats + 1):
                page = browser.new_page(viewport={"width": 1400, "height": 900})
                started = time.perf_counter()
                page.goto(path.as_uri())
                page.wait_for_selector("body[data-ready='1']", timeout=120_000)
                times.append(time.perf_counter() - started)
                page.close()
            row["browser_ready_s"] = statistics.median(times[1:])
        browser.close()


def markdown(rows: list[dict]) -> str:
    lines = [
        "| profiler | selection | intervals | fetch s (CPU s) | report s (CPU s) | x fetch | report MB | flame nodes | browser ready s | speedscope s | speedscope MB | collapsed s |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        ready = f"{r['browser_ready_s']:.2f}" if "browser_ready_s" in r else "-"
        lines.append(
            f"| {r['profiler']} | {r['selection']} | {r['intervals']:,} | {r['fetch_s']:.3f} ({r['fetch_cpu_s']:.3f}) | "
            f"{r['report_s']:.2f} ({r['report_cpu_s']:.2f}) | "
            f"{r['report_s'] / r['fetch_s']:.1f} | {r['report_bytes'] / 1e6:.2f} | {r['flame_nodes']:,} | {ready} | "
            f"{r['speedscope_s']:.2f} | {r['speedscope_bytes'] / 1e6:.2f} | {r['collapsed_s']:.2f} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.lab.report_bench", description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=10000, help="cProfile files of the corpus to build (default 10000)")
    parser.add_argument("--nodes", type=int, default=4)
    parser.add_argument("--corpus", type=Path, help="an existing bench.corpus folder (skips building one)")
    parser.add_argument("--store", type=Path, help="an existing store of that corpus (skips the ingest)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", type=Path, help="where the reports are written (default: a temp folder)")
    parser.add_argument("--json-out", type=Path)
    parser.add_argument("--browser", action="store_true", help="also time each page until drawn in headless chromium")
    args = parser.parse_args(argv)

    from proflake import ingest

    from bench import corpus as corpus_module

    work = Path(tempfile.mkdtemp(prefix="proflake-report-bench-"))
    corpus = args.corpus or work / "corpus"
    if args.corpus is None:
        corpus_module.generate(corpus, files=args.files, nodes=args.nodes, log=lambda m: print(m, file=sys.stderr))
    store = args.store or work / "store"
    if args.store is None:
        started = time.perf_counter()
        ingest(str(corpus / corpus_module.JOB_NAME), str(store))
        print(f"ingested in {time.perf_counter() - started:.1f} s", file=sys.stderr)
    out = args.out or work / "reports"
    out.mkdir(parents=True, exist_ok=True)
    rows = measure(str(store), args.repeats, out, browser=args.browser)
    print(markdown(rows))
    if args.json_out:
        args.json_out.write_text(json.dumps({"corpus": str(corpus), "store": str(store), "rows": rows}, indent=1))
    print(f"reports in {out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
