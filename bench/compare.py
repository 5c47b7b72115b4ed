"""The user's benchmark: how much faster than smdebug is proflake, on my corpus?

Every fetch method of smdebug's ``cProfileAnalysis`` is called the same way on smdebug (``bench.baseline``,
its analysis path re-implemented step for step, since smdebug itself does not install beside current
libraries) and on proflake's drop-in ``proflake.cProfileAnalysis`` (public API only), both with their
defaults (``refresh_stats=True``: smdebug lists the folder again, proflake lists it and ingests only what
is new), alternately, ``--repeats`` times; the table gives each side's median and the ratio, and whether
proflake's answer is smdebug's (the ``pstats`` dictionaries compared key by key). proflake's one-time cost,
ingesting the corpus into a fresh store, is the first row.

    python -m bench                              # a generated 500-file corpus
    python -m bench --corpus /path/to/job        # your own smdebug folder (the job, or its .../cprofile)
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench import baseline as bl
from bench.answers import check_answer


class CorpusError(Exception):
    """The corpus given cannot be benchmarked; the message is one sentence for the user."""


def profiler_dir(path: Path) -> Path:
    """The cProfile folder (``.../framework/{fw}/cprofile``) of a job folder, or the folder itself."""
    if not path.is_dir():
        raise CorpusError(f"{path} is not a folder.")
    if path.name == "cprofile":
        return path
    found = sorted(p for p in path.glob("**/framework/*/cprofile") if p.is_dir())
    if not found:
        raise CorpusError(f"{path} has no smdebug cProfile folder (framework/<framework>/cprofile) below it.")
    if len(found) > 1:
        raise CorpusError(f"{path} holds {len(found)} cProfile folders; pass one of them: {found[0]}, ...")
    return found[0]


@dataclass
class Method:
    name: str
    args: str
    call: Callable[[Any], Any]  # (analysis) -> answer; the same on smdebug's class and proflake's
    check: str  # a key of bench.answers.CHECKS


def methods(entries: list[bl.StepPythonProfileStats]) -> list[Method]:
    """Every fetch method, with arguments that select something in this corpus (node ``any``)."""
    train = [e for e in entries if e.start_mode == bl.PythonProfileModes.TRAIN == e.end_mode]
    if not train:
        raise CorpusError("the corpus has no train-step cProfile intervals to select.")
    steps = sorted({e.start_step for e in train})
    one = steps[min(5, len(steps) - 1)]
    lo, hi = steps[len(steps) // 2], steps[min(len(steps) - 1, len(steps) // 2 + 9)]
    starts = sorted(e.start_time_since_epoch_in_micros for e in train)
    t0, t1 = starts[len(starts) // 4] / 1e6, starts[len(starts) // 4 + max(1, len(starts) // 20)] / 1e6
    return [
        Method("by_step", f"step {one}", lambda a: a.fetch_profile_stats_by_step(one), "pstats"),
        Method("by_step (range)", f"steps {lo}-{hi}", lambda a: a.fetch_profile_stats_by_step(lo, hi), "pstats"),
        Method("by_time", f"{t1 - t0:.1f} s window", lambda a: a.fetch_profile_stats_by_time(t0, t1), "pstats"),
        Method("between_modes", "train -> eval",
               lambda a: a.fetch_profile_stats_between_modes("train", "eval"), "pstats"),
        Method("pre_step_zero", "", lambda a: a.fetch_pre_step_zero_profile_stats(), "pstats"),
        Method("post_hook_close", "", lambda a: a.fetch_post_hook_close_profile_stats(), "pstats"),
        Method("by_training_phase", "6x6 mode pairs", lambda a: a.fetch_profile_stats_by_training_phase(), "phases"),
        Method("by_job_phase", "", lambda a: a.fetch_profile_stats_by_job_phase(), "job_phase"),
        Method("list_profile_stats", "", lambda a: a.list_profile_stats(), "list"),
        Method("list_available_node_ids", "", lambda a: a.list_available_node_ids(), "nodes"),
    ]


def _timed(call: Callable[[], Any]) -> tuple[float, Any]:
    start = time.perf_counter()
    result = call()
    return time.perf_counter() - start, result


def compare(profile_dir: Path, store: Path, repeats: int = 3) -> dict:
    """Ingest ``profile_dir`` into ``store`` (a fresh folder), then time every method on both sides."""
    from proflake import cProfileAnalysis

    files = len(bl.stats_files(profile_dir)[0])
    if files == 0:
        raise CorpusError(f"{profile_dir} holds no cProfile stats files.")
    ingest_s, proflake = _timed(lambda: cProfileAnalysis(local_profile_dir=str(profile_dir), store=str(store)))
    smdebug = bl.SmdebugCProfileAnalysis(str(profile_dir))
    rows = []
    for method in methods(smdebug.python_profile_stats):
        ours: list[float] = []
        theirs: list[float] = []
        for _ in range(repeats):  # alternated, so the host's drift falls on both sides
            seconds, expected = _timed(lambda: method.call(smdebug))
            theirs.append(seconds)
            seconds, actual = _timed(lambda: method.call(proflake))
            ours.append(seconds)
        rows.append({
            "method": method.name,
            "args": method.args,
            "smdebug_s": statistics.median(theirs),
            "proflake_s": statistics.median(ours),
            "answer": check_answer(method.check, "compat", actual, expected),
        })
    return {"profile_dir": str(profile_dir), "files": files, "ingest_s": ingest_s, "repeats": repeats, "rows": rows}


def table(result: dict) -> str:
    """The one table: a markdown table of every method, smdebug against proflake."""
    lines = [
        f"{result['files']} cProfile files in {result['profile_dir']}; median of {result['repeats']} alternated calls",
        "",
        "| method | selects | smdebug (s) | proflake (s) | proflake is | same answer |",
        "|---|---|---:|---:|---:|---|",
        f"| ingest, once | every file | | {result['ingest_s']:.3f} | | |",
    ]
    for row in result["rows"]:
        ratio = row["smdebug_s"] / row["proflake_s"] if row["proflake_s"] > 0 else float("inf")
        verdict = f"{ratio:.1f}x faster" if ratio >= 1 else f"{1 / ratio:.1f}x slower"
        lines.append(
            f"| {row['method']} | {row['args']} | {row['smdebug_s']:.3f} | {row['proflake_s']:.3f} "
            f"| {verdict} | {row['answer']} |"
        )
    return "\n".join(lines)
