"""Ingest on Spark against the local pool, and what more executors would buy (issue 25).

    python -m bench.lab.spark_bench --files 10000            # corpus in $TMPDIR/proflake-spark-bench
    python -m bench.lab.spark_bench --corpus DIR             # an existing bench.corpus corpus
    python -m bench.lab.spark_bench --corpus DIR --json-out results.json --rounds 2

In one process, in this order: a fresh ``local[2]`` SparkSession is started and one trivial job run
(Spark's fixed start-up cost); then, ``--rounds`` times alternately, the corpus is ingested into a new
store by the local pool (``executor="local"``, one worker per core) and through the Spark executor
(``SparkPool`` on that session, every file parsed in Spark tasks). For the Spark run the driver's time
splits into its serial part (listing, claiming, building the slices, committing, the roll-ups: the
batch's wall time outside Spark jobs) and the Spark jobs' wall time, whose work is the sum of the
tasks' own wall times (each task measured inside its executor).

Projection (Amdahl from the measured parts), for N executor cores: ``serial + work / N``, and the same
bounded by the slices (``ceil(slices / N)`` tasks in a row, each of the mean task's length: 10k files in
500-file slices are 20 tasks, so more than 20 cores need smaller slices). The speed-up is against the
local pool's wall time on this machine; the crossover is the batch size from which a Spark ingest on N
cores (new session included, or on a running one) beats the local pool, with every cost per file taken
as measured here.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
if str(REPO / "etl") not in sys.path:
    sys.path.insert(0, str(REPO / "etl"))

EXECUTORS = (8, 32, 128)


def corpus_for(files: int, out: Path) -> Path:
    from bench import corpus as bench_corpus

    corpus_dir = out / f"corpus-{files}"
    if not (corpus_dir / bench_corpus.MANIFEST).is_file():
        bench_corpus.generate(corpus_dir, files=files, nodes=4, pyinstrument_fraction=0.1, seed=0, templates=None, jobs=2, force=True)
    return corpus_dir


def start_spark(scratch: Path):
    """A new local[2] session and one trivial job: what a spark-submit'ed ingest pays before its first file."""
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    started = time.perf_counter()
    from pyspark.sql import SparkSession

    spark = (
        SparkSession.builder.master("local[2]").appName("proflake-spark-bench")
        .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
        .config("spark.local.dir", str(scratch)).config("spark.driver.memory", "1g")
        .getOrCreate()
    )
    session_s = time.perf_counter() - started
    spark.sparkContext.setLogLevel("ERROR")
    first = time.perf_counter()
    spark.range(1).count()
    return spark, {"session_s": session_s, "first_job_s": time.perf_counter() - first, "total_s": time.perf_counter() - started}


def python_job_cost(spark) -> float:
    """A mapInArrow job over 2 one-row partitions doing nothing: a Spark ingest's per-job floor on a warm session."""
    def passthrough(batches):
        yield from batches

    started = time.perf_counter()
    spark.range(2, numPartitions=2).mapInArrow(passthrough, "id BIGINT").toArrow()
    return time.perf_counter() - started


def ingest_local(source: Path, store: Path) -> dict:
    from proflake.ingestion.batch import ingest

    started = time.perf_counter()
    report = ingest(str(source), str(store), executor="local")
    return {"wall_s": time.perf_counter() - started, "files": report.new_intervals, "failed": len(report.failed)}


def ingest_spark(source: Path, store: Path, spark, slice_files: int) -> dict:
    from proflake.ingestion.batch import ingest
    from proflake.spark import SparkPool

    pool = SparkPool(spark, min_files=0, slice_files=slice_files)
    started = time.perf_counter()
    report = ingest(str(source), str(store), executor=pool)
    wall = time.perf_counter() - started
    tasks = pool.stats.task_s
    return {
        "wall_s": wall,
        "files": report.new_intervals,
        "failed": len(report.failed),
        "spark_jobs_s": pool.stats.jobs_s,
        "serial_s": wall - pool.stats.jobs_s,
        "slices": pool.stats.slices,
        "task_work_s": sum(tasks),
        "task_mean_s": statistics.mean(tasks) if tasks else 0.0,
        "task_max_s": max(tasks, default=0.0),
    }


def project(spark_run: dict, local_wall: float, startup_s: float, job_floor_s: float) -> dict:
    """Amdahl from the measured parts, and the crossover batch sizes against the local pool."""
    serial, work, files = spark_run["serial_s"], spark_run["task_work_s"], spark_run["files"]
    rows = []
    for n in EXECUTORS:
        ideal = serial + job_floor_s + work / n
        sliced = serial + job_floor_s + math.ceil(spark_run["slices"] / n) * spark_run["task_mean_s"]
        # Per file: the local pool's wall time, against Spark's serial part and its work spread over n.
        per_file_local = local_wall / files
        per_file_spark = serial / files + work / files / n
        gain = per_file_local - per_file_spark
        rows.append({
            "executors": n,
            "projected_wall_s": ideal,
            "projected_wall_with_these_slices_s": sliced,
            "speedup_vs_local_pool": local_wall / ideal,
            "speedup_vs_local_pool_new_session": local_wall / (ideal + startup_s),
            "crossover_files_running_session": math.ceil(job_floor_s / gain) if gain > 0 else None,
            "crossover_files_new_session": math.ceil((job_floor_s + startup_s) / gain) if gain > 0 else None,
        })
    return {"serial_share": serial / spark_run["wall_s"], "rows": rows}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.lab.spark_bench", description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=10_000)
    parser.add_argument("--corpus", type=Path, help="an existing bench.corpus corpus (default: built for --files)")
    parser.add_argument("--out", type=Path, default=Path(tempfile.gettempdir()) / "proflake-spark-bench")
    parser.add_argument("--rounds", type=int, default=1, help="local and Spark ingests, alternated")
    parser.add_argument("--slice-files", type=int, default=500)
    parser.add_argument("--json-out", type=Path)
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    corpus = args.corpus or corpus_for(args.files, args.out)
    source = corpus / "bench-job" if (corpus / "bench-job").is_dir() else corpus
    scratch = Path(tempfile.mkdtemp(prefix="spark-", dir=args.out))
    spark, startup = start_spark(scratch)
    job_floor = min(python_job_cost(spark) for _ in range(3))
    print(f"Spark start-up: session {startup['session_s']:.1f} s, first job {startup['first_job_s']:.1f} s; "
          f"an empty Python job on the warm session {job_floor:.2f} s", file=sys.stderr)
    local_runs, spark_runs = [], []
    try:
        for round_ in range(args.rounds):
            for kind in ("local", "spark"):
                store = args.out / f"store-{kind}-{round_}"
                shutil.rmtree(store, ignore_errors=True)
                if kind == "local":
                    local_runs.append(ingest_local(source, store))
                else:
                    spark_runs.append(ingest_spark(source, store, spark, args.slice_files))
                print(f"round {round_} {kind}: {json.dumps((local_runs if kind == 'local' else spark_runs)[-1])}", file=sys.stderr)
                shutil.rmtree(store, ignore_errors=True)
    finally:
        spark.stop()
        shutil.rmtree(scratch, ignore_errors=True)
    local = min(local_runs, key=lambda r: r["wall_s"])
    best = min(spark_runs, key=lambda r: r["wall_s"])
    result = {
        "corpus": str(corpus), "files": best["files"], "cpus": os.cpu_count(), "load_avg_1m": os.getloadavg()[0],
        "startup": startup, "python_job_floor_s": job_floor, "local_runs": local_runs, "spark_runs": spark_runs,
        "projection": project(best, local["wall_s"], startup["total_s"], job_floor),
    }
    text = json.dumps(result, indent=1)
    if args.json_out:
        args.json_out.write_text(text)
    print(text)
    print(render(result), file=sys.stderr)
    return 0


def render(result: dict) -> str:
    local = min(r["wall_s"] for r in result["local_runs"])
    best = min(result["spark_runs"], key=lambda r: r["wall_s"])
    lines = [
        f"{result['files']} files; local pool {local:.1f} s; Spark local[2] {best['wall_s']:.1f} s "
        f"(serial {best['serial_s']:.1f} s = {result['projection']['serial_share']:.0%}, Spark jobs {best['spark_jobs_s']:.1f} s, "
        f"task work {best['task_work_s']:.1f} s in {best['slices']} tasks); start-up {result['startup']['total_s']:.1f} s",
        "",
        "| executors | projected wall s | with 500-file slices | speed-up vs local pool | incl. new session | crossover files (running / new session) |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for row in result["projection"]["rows"]:
        lines.append(
            f"| {row['executors']} | {row['projected_wall_s']:.1f} | {row['projected_wall_with_these_slices_s']:.1f} | "
            f"{row['speedup_vs_local_pool']:.2f}x | {row['speedup_vs_local_pool_new_session']:.2f}x | "
            f"{row['crossover_files_running_session']} / {row['crossover_files_new_session']} |"
        )
    return "\n".join(lines)


if __name__ == "__main__":
    raise SystemExit(main())
