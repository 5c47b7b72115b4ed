"""The write side: the decode and Parquet floors, full ingests with 1 and 2 workers (each in a child
process whose memory is sampled), the incremental re-run, the parse pass and the store's bytes.

The sections, in the order they run: ``floors`` (JSON ``floor``, ``parquet_floor``), ``ingest``,
``readers``, ``store``. bench/README.md says what each figure means.
"""

from __future__ import annotations

import inspect
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from bench import baseline as bl
from bench.lab.cases import Context
from bench.lab.harness import REPO, OtherLoad, TreeRssSampler, child_env, dir_bytes, fastest_pass

# Re-runs of the unchanged corpus, the fastest reported as for a full ingest (a single pass is too noisy:
# bench/lab/performance-log.md).
INCREMENTAL_PASSES = 3

# The memory figures of an ingest: of its passes, the worst is reported, not the fastest pass's own.
PEAK_FIELDS = (
    "peak_rss_mb",
    "peak_tree_pss_mb",
    "peak_tree_rss_mb",
    "peak_rss_self_mb",
    "worker_peak_rss_mb",
)

# The columns that hold measured times: their compressed bytes bound how small the store can get.
MEASURED_TIME_COLUMNS = ("tottime", "cumtime", "time", "self_time", "await_time")


# -- the sections -----------------------------------------------------------------------------------------
def run_floors(ctx: Context) -> None:
    """The decode floor (fastest of three passes: the first may pay for a cold page cache) and the Parquet
    floor (bench.baseline.parquet_floor, fastest of two after an unmeasured warm-up)."""
    ctx.wait_quiet()
    ctx.log("decode floor ...")
    cprofile, pyinstrument = ctx.cprofile_paths, ctx.pyinstrument_paths
    ctx.data["floor"] = fastest_pass(lambda: bl.decode_floor(cprofile, pyinstrument), 3)
    ctx.log("Parquet floor ...")
    scratch = ctx.corpus_dir / "parquet-floor"
    bl.parquet_floor(cprofile[:50], [], scratch)  # imports and first conversions: not measured
    ctx.data["parquet_floor"] = fastest_pass(lambda: bl.parquet_floor(cprofile, pyinstrument, scratch), 2)


def run_ingests(ctx: Context) -> None:
    """Full ingests per worker count (--ingest-passes each, a floor pass of each kind right before every
    one), the incremental re-run, and with --profile-ingest one more ingest under cProfile."""
    args, job = ctx.args, ctx.manifest["job_dir"]
    if ctx.stores.exists():
        shutil.rmtree(ctx.stores)
    ctx.stores.mkdir(parents=True)
    supports = ingest_supports_workers()
    ingest_data: dict[str, Any] = {"workers_supported": supports, "runs": {}}
    if not supports:
        ingest_data["workers_note"] = "n/a (ingest has no workers option yet)"
    scratch = ctx.corpus_dir / "parquet-floor"
    for w in args.workers:
        store = ctx.stores / f"store-{w}w"
        if not supports and w != 1:
            ingest_data["runs"][str(w)] = "n/a (ingest has no workers option yet)"
            continue
        passes = []
        for n in range(args.ingest_passes):
            if store.exists():
                shutil.rmtree(store)
            ctx.wait_quiet()
            ctx.log(f"ingest, {w} worker(s), pass {n + 1} of {args.ingest_passes} ...")
            # One more pass of each floor right before, so the host's speed drifting during the run cannot
            # skew the ratios: each ingest pass is set against floors measured moments before it too.
            adjacent_parquet = bl.parquet_floor(ctx.cprofile_paths, ctx.pyinstrument_paths, scratch)[
                "seconds"
            ]
            adjacent = bl.decode_floor(ctx.cprofile_paths, ctx.pyinstrument_paths)["seconds"]
            run = run_ingest(job, store, w if supports else None)
            run["adjacent_floor_seconds"] = adjacent
            run["adjacent_parquet_floor_seconds"] = adjacent_parquet
            passes.append(run)
        run = fastest_ingest(passes)
        # Every pass's own floor passes count towards the run's fastest floors (best_floor,
        # best_parquet_floor).
        run["adjacent_floors_seconds"] = [p["adjacent_floor_seconds"] for p in passes]
        run["adjacent_parquet_floors_seconds"] = [p["adjacent_parquet_floor_seconds"] for p in passes]
        run["x_floor"] = run["seconds"] / ctx.data["floor"]["seconds"]
        run["x_adjacent_floor"] = run["seconds"] / run["adjacent_floor_seconds"]
        run["x_adjacent_parquet_floors"] = paired_parquet_ratios(run)
        run["x_adjacent_parquet_floor"] = statistics.median(run["x_adjacent_parquet_floors"])
        run["store_bytes"] = dir_bytes(store)
        ingest_data["runs"][str(w)] = run
    if isinstance(ingest_data["runs"].get("1"), dict):
        reruns = []
        for n in range(INCREMENTAL_PASSES):
            ctx.wait_quiet()
            ctx.log(f"incremental re-run, pass {n + 1} of {INCREMENTAL_PASSES} ...")
            reruns.append(run_ingest(job, ctx.main_store, 1 if supports else None))
        inc = fastest_ingest(reruns)
        inc["x_full"] = inc["seconds"] / ingest_data["runs"]["1"]["seconds"]
        ingest_data["incremental"] = inc
    if args.profile_ingest:
        # A separate run: cProfile's overhead must not inflate the measured ingest.
        ctx.log("ingest under cProfile (not measured) ...")
        prof_store = ctx.stores / "store-profiled"
        run = run_ingest(job, prof_store, 1 if supports else None, str(args.profile_ingest))
        ingest_data["profile"] = {
            "file": str(args.profile_ingest),
            "seconds_under_cprofile": run["seconds"],
            **top_functions(args.profile_ingest),
        }
        shutil.rmtree(prof_store, ignore_errors=True)
    ctx.data["ingest"] = ingest_data


def run_readers(ctx: Context) -> None:
    """The parse pass: what the workers do, without the store or the workers."""
    ctx.wait_quiet()
    ctx.log("parse pass (read + proflake.readers.parse.parse_stats, no store) ...")
    profile = f"{ctx.args.profile_ingest}.readers" if ctx.args.profile_ingest else None
    with OtherLoad() as load:
        ctx.data["readers"] = reader_pass(ctx.cprofile_paths, ctx.pyinstrument_paths, profile)
    ctx.data["readers"]["machine"] = load.result


def run_store(ctx: Context) -> None:
    """The 1-worker store's bytes, per table, against the raw bytes ingested and its measured times' bytes."""
    main_store = ctx.main_store
    per_table = {child.name: dir_bytes(child) for child in sorted(main_store.iterdir()) if child.is_dir()}
    store_bytes = dir_bytes(main_store)
    raw = ctx.manifest["ingestible_bytes"]
    time_bytes = measured_time_bytes(main_store)
    ctx.data["store"] = {
        "bytes": store_bytes,
        "per_table": per_table,
        "raw_bytes": raw,
        "raw_cprofile_bytes": ctx.manifest["raw_bytes"]["cprofile"],
        "x_raw": store_bytes / raw if raw else None,
        "measured_time_bytes": time_bytes,
        "measured_time_x_raw": time_bytes / raw if raw else None,
    }


# -- one ingest -------------------------------------------------------------------------------------------
def ingest_signature() -> str:
    from proflake.ingestion.batch import ingest

    return f"ingest{inspect.signature(ingest)}"


def ingest_supports_workers() -> bool:
    from proflake.ingestion.batch import ingest

    return "workers" in inspect.signature(ingest).parameters


def run_ingest(source: str, store: Path, workers: int | None, profile: str | None = None) -> dict:
    """One ``proflake.ingestion.batch.ingest`` in a child (bench.lab.ingest_child): its report, seconds and
    CPU, and the peak memory of its process tree sampled from outside."""
    cmd = [sys.executable, "-m", "bench.lab.ingest_child", source, str(store)]
    if workers is not None:
        cmd += ["--workers", str(workers)]
    if profile:
        cmd += ["--profile", profile]
    started = time.perf_counter()
    with OtherLoad() as load:
        proc = subprocess.Popen(
            cmd, cwd=REPO, env=child_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        with TreeRssSampler(proc.pid) as sampler:
            out, err = proc.communicate()
    wall = time.perf_counter() - started
    lines = [line for line in out.splitlines() if line.startswith("{")]
    if not lines:
        raise RuntimeError(f"ingest child failed (exit {proc.returncode}): {err.strip()[-2000:]}")
    result = json.loads(lines[-1])
    if "error" in result:
        raise RuntimeError(result["error"])
    result["exit_code"] = proc.returncode
    result["wall_seconds"] = wall
    result["machine"] = load.result
    result["peak_tree_rss_mb"] = sampler.peak / 2**20
    result["peak_tree_pss_mb"] = sampler.peak_pss / 2**20
    result["processes"] = sampler.max_processes
    live = result.get("live_descendants", [])
    result["worker_cpu_seconds"] = sum(d["cpu_seconds"] for d in live)
    result["worker_peak_rss_mb"] = max((d["peak_rss_mb"] for d in live), default=None)
    # VmHWM where the child could read it: getrusage's figure includes the RSS this process had when it
    # forked the child.
    result["peak_rss_self_mb"] = (result.get("hwm_self_kb") or result["maxrss_self_kb"]) / 1024
    result["peak_rss_children_mb"] = result["maxrss_children_kb"] / 1024
    # The memory the ingest needs: the larger of the process tree's sampled PSS (shared pages counted
    # once) and the kernel's exact peak RSS of the main process.
    result["peak_rss_mb"] = max(result["peak_tree_pss_mb"], result["peak_rss_self_mb"])
    if err.strip():
        result["stderr_tail"] = err.strip()[-500:]
    return result


def fastest_ingest(passes: list[dict]) -> dict:
    """The fastest of an ingest's passes, as the floors are the fastest of theirs: a single ingest
    against the fastest of several floor passes read the host's slow moments as the ingest's own.
    Its peaks are the highest of any pass."""
    fastest = dict(min(passes, key=lambda r: r["seconds"]))
    fastest["passes_seconds"] = [round(r["seconds"], 3) for r in passes]
    for name in PEAK_FIELDS:
        values = [r[name] for r in passes if r.get(name) is not None]
        if values:
            fastest[name] = max(values)
    return fastest


# -- the floors a run's ingests are set against -----------------------------------------------------------
def best_floor(data: dict) -> float:
    """The fastest decode-floor pass of the run: the initial passes and the one before each ingest pass."""
    return min([data["floor"]["seconds"], *adjacent_floors(data)])


def best_parquet_floor(data: dict) -> float | None:
    """The fastest Parquet-floor pass of the run: the initial passes and the one before each ingest pass."""
    first = data.get("parquet_floor", {}).get("seconds")
    return min([first, *adjacent_parquet_floors(data)]) if first else None


def paired_parquet_ratios(run: dict) -> list[float]:
    """Each ingest pass over the Parquet-floor pass measured just before it, in pass order ([] for JSON
    from before 0704fc4). The host's speed changes within seconds, so no one pair is trusted: the
    targets take their median, not the fastest pass's."""
    passes, floors = run.get("passes_seconds") or [], run.get("adjacent_parquet_floors_seconds") or []
    return [ingest / floor for ingest, floor in zip(passes, floors)] if len(passes) == len(floors) else []


def adjacent_floors(data: dict) -> list[float]:
    """The decode-floor passes measured right before each ingest pass (one per worker count in older JSON)."""
    return _adjacent_passes(data, "adjacent_floors_seconds", "adjacent_floor_seconds")


def adjacent_parquet_floors(data: dict) -> list[float]:
    """The Parquet-floor passes measured right before each ingest pass (none in JSON before 0704fc4)."""
    return _adjacent_passes(data, "adjacent_parquet_floors_seconds")


def _adjacent_passes(data: dict, every_pass: str, one_pass: str | None = None) -> list[float]:
    floors: list[float] = []
    for run in data["ingest"]["runs"].values():
        if isinstance(run, dict):
            floors += run.get(every_pass) or ([run[one_pass]] if one_pass and run.get(one_pass) else [])
    return floors


# -- the parse pass and profiles --------------------------------------------------------------------------
def _trim_path(name: str) -> str:
    """Function names without the checkout's or site-packages' folder, for tables a person reads."""
    name = name.replace(str(REPO) + os.sep, "")
    name = re.sub(r"^.*?/(?:site|dist)-packages/", "", name)
    return re.sub(r"^.*?/lib/python3\.\d+/", "", name)


def top_functions(prof_file: str | Path, n: int = 15) -> dict:
    """The hottest functions of a cProfile dump, by own time and by cumulative time."""
    import pstats

    stats = pstats.Stats(str(prof_file)).stats
    total = sum(v[2] for v in stats.values()) or 1.0

    def rows(index: int) -> list[dict]:
        ranked = sorted(stats.items(), key=lambda kv: kv[1][index], reverse=True)[:n]
        return [
            {
                "function": _trim_path(pstats.func_std_string(k)),
                "calls": v[1],
                "tottime": round(v[2], 3),
                "cumtime": round(v[3], 3),
                "share": round(v[index] / total, 3),
            }
            for k, v in ranked
        ]

    return {"total_seconds": round(total, 3), "by_tottime": rows(2), "by_cumtime": rows(3)}


def reader_pass(cprofile_paths: list[str], pyinstrument_paths: list[str], profile: str | None = None) -> dict:
    """Read every file and parse it as a worker does (bytes -> validated -> Arrow), nothing written:
    ingest minus the store and the inter-process traffic. With ``profile``, one more pass under cProfile."""
    try:
        from proflake.readers.cprofile import decode
        from proflake.readers.parse import parse_stats
    except ImportError as e:
        return {"error": f"{type(e).__name__}: {e}"}
    out: dict[str, Any] = {}
    started = time.perf_counter()
    for path in cprofile_paths:
        with open(path, "rb") as f:
            decode(f.read())
    out["cprofile_decode_validate_seconds"] = time.perf_counter() - started

    def parse_all() -> None:
        for profiler, paths in (("cprofile", cprofile_paths), ("pyinstrument", pyinstrument_paths)):
            for path in paths:
                with open(path, "rb") as f:
                    parse_stats(profiler, f.read())

    started = time.perf_counter()
    parse_all()
    out["seconds"] = time.perf_counter() - started
    if profile:
        import cProfile

        profiler = cProfile.Profile()
        profiler.enable()
        parse_all()
        profiler.disable()
        profiler.dump_stats(profile)
        out["profile"] = {"file": profile, **top_functions(profile)}
    return out


def measured_time_bytes(store: Path) -> int:
    """Compressed bytes of the measured-time columns of the fact tables (from the Parquet footers).

    Every other column could shrink to nothing and the store would still hold these: they bound how
    small the store can get without dropping precision."""
    import pyarrow.parquet as pq

    total = 0
    for table in ("function_stats", "function_callers", "pyinstrument_frames"):
        for path in (store / table).glob("*.parquet"):
            meta = pq.ParquetFile(path).metadata
            for g in range(meta.num_row_groups):
                group = meta.row_group(g)
                for c in range(group.num_columns):
                    column = group.column(c)
                    if column.path_in_schema in MEASURED_TIME_COLUMNS:
                        total += column.total_compressed_size
    return total
