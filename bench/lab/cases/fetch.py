"""The read side: every fetch method, node ``any`` and all nodes, through the native API (warm and cold),
the smdebug-compatible API (warm and drop-in), the CLI and the smdebug baseline (default and cached);
then whether the answers agree with smdebug's. The section ``fetch`` (and ``meta.apis``)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench import baseline as bl
from bench.answers import check_answer
from bench.lab.cases import Context
from bench.lab.harness import OtherLoad, Timing, measure, proflake_exe, quiet, run_quietly


@dataclass
class FetchCase:
    """One fetch method, called the same way through every API."""

    name: str
    args: str  # what is fetched, for the table
    native: Callable  # (profiles, node) -> result; node is "any" or None (all)
    compat: Callable  # (analysis, node_id, refresh_stats) -> result; node_id "any" | "all"
    cli: list[str]  # proflake arguments (scope added per run)
    baseline: Callable  # (smdebug analysis, node_id, refresh_stats) -> result; node_id "any" | None
    check: str  # how answers are compared: a key of bench.answers.CHECKS, or "none"
    scopes: tuple[str, ...] = ("any", "all")
    cli_has_node: bool = True


def one_step(manifest: dict) -> int:
    """The step the single-step cases fetch: step 5, or the last of a shorter job."""
    return min(5, manifest["min_train_steps"] - 1)


def build_cases(manifest: dict) -> list[FetchCase]:
    """Every fetch method, with arguments that select something in this corpus."""
    steps = manifest["min_train_steps"]
    one = one_step(manifest)
    lo = steps // 2
    hi = min(steps - 1, lo + 9)
    t0, t1 = manifest["by_time_window_s"]

    def case(
        name: str,
        args: str,
        native: Callable,
        call: Callable,
        cli: list[str],
        check: str = "pstats",
        **kwargs: Any,
    ) -> FetchCase:
        # call(analysis, node_id, refresh_stats): the same method on the compatible class and smdebug's.
        return FetchCase(name, args, native, call, cli, call, check, **kwargs)

    return [
        case(
            "by_step",
            f"step {one}",
            lambda p, n: p.by_step(one, node=n),
            lambda a, n, r: a.fetch_profile_stats_by_step(one, node_id=n, refresh_stats=r),
            ["fetch", "by-step", str(one)],
        ),
        case(
            "by_step_range",
            f"steps {lo}-{hi}",
            lambda p, n: p.by_step(lo, hi, node=n),
            lambda a, n, r: a.fetch_profile_stats_by_step(lo, hi, node_id=n, refresh_stats=r),
            ["fetch", "by-step", str(lo), str(hi)],
        ),
        case(
            "by_time",
            f"{t1 - t0:.2f} s window",
            lambda p, n: p.by_time(t0, t1, node=n),
            lambda a, n, r: a.fetch_profile_stats_by_time(t0, t1, node_id=n, refresh_stats=r),
            ["fetch", "by-time", repr(t0), repr(t1)],
        ),
        case(
            "between_modes",
            "train -> eval",
            lambda p, n: p.between_modes("train", "eval", node=n),
            lambda a, n, r: a.fetch_profile_stats_between_modes("train", "eval", node_id=n, refresh_stats=r),
            ["fetch", "between-modes", "train", "eval"],
        ),
        case(
            "pre_step_zero",
            "",
            lambda p, n: p.pre_step_zero(node=n),
            lambda a, n, r: a.fetch_pre_step_zero_profile_stats(node_id=n, refresh_stats=r),
            ["fetch", "pre-step-zero"],
        ),
        case(
            "post_hook_close",
            "",
            lambda p, n: p.post_hook_close(node=n),
            lambda a, n, r: a.fetch_post_hook_close_profile_stats(node_id=n, refresh_stats=r),
            ["fetch", "post-hook-close"],
        ),
        case(
            "by_training_phase",
            "6x6 mode pairs",
            lambda p, n: p.by_training_phase(node=n),
            lambda a, n, r: a.fetch_profile_stats_by_training_phase(node_id=n, refresh_stats=r),
            ["fetch", "by-training-phase"],
            "phases",
        ),
        case(
            "by_job_phase",
            "",
            lambda p, n: p.by_job_phase(node=n),
            lambda a, n, r: a.fetch_profile_stats_by_job_phase(node_id=n, refresh_stats=r),
            ["fetch", "by-job-phase"],
            "job_phase",
        ),
        case(
            "list_profile_stats",
            "cProfile intervals",
            lambda p, n: p.list_profile_stats(profiler="cprofile"),
            lambda a, n, r: a.list_profile_stats(refresh_stats=r),
            ["list", "--profiler", "cprofile"],
            "list",
            scopes=("all",),
            cli_has_node=False,
        ),
        case(
            "nodes",
            "",
            lambda p, n: p.nodes(profiler="cprofile"),
            lambda a, n, r: a.list_available_node_ids(refresh_stats=r),
            ["nodes", "--profiler", "cprofile"],
            "nodes",
            scopes=("all",),
            cli_has_node=False,
        ),
    ]


def import_compat() -> tuple[Any, str]:
    """proflake's smdebug-compatible cProfileAnalysis and where it came from, or (None, why not)."""
    try:
        from proflake import cProfileAnalysis  # type: ignore[attr-defined]

        return cProfileAnalysis, "proflake"
    except ImportError:
        pass
    try:
        from proflake.smdebug.compat import cProfileAnalysis

        return cProfileAnalysis, "proflake.smdebug.compat (not exported from proflake yet)"
    except Exception as e:
        return None, f"n/a ({type(e).__name__}: {e})"


def _ratio(numerator: float | None, denominator: float | None) -> float | None:
    if numerator is None or denominator is None or denominator <= 0:
        return None
    return numerator / denominator


def _cold_native(profiles_cls: Any, store: Path, case: FetchCase, node: Any) -> Any:
    p = profiles_cls(str(store))
    try:
        return case.native(p, node)
    finally:
        p.close()


def run_fetches(ctx: Context) -> None:
    """The section: every case of --methods (default all) in every scope, timed and checked."""
    ctx.log("fetch methods ...")
    with OtherLoad() as load:
        ctx.data["fetch"], ctx.data["meta"]["apis"] = bench_fetches(
            ctx.args, ctx.manifest, ctx.main_store, ctx
        )
    ctx.data["meta"]["fetch_machine"] = load.result


def bench_fetches(args: Any, manifest: dict, store: Path, ctx: Context) -> tuple[dict, dict]:
    from proflake import Profiles

    compat_cls, compat_from = import_compat()
    cases = build_cases(manifest)
    if args.methods:
        cases = [c for c in cases if c.name in args.methods]
    proflake = proflake_exe()
    results: dict[str, dict] = {}
    smdebug = bl.SmdebugCProfileAnalysis(manifest["cprofile_dir"])
    native = Profiles(str(store))
    compat_warm = compat_drop_in = None
    compat_error = None
    if compat_cls is not None:
        try:
            with quiet():
                compat_warm = compat_cls(store=str(store))
                compat_drop_in = compat_cls(local_profile_dir=manifest["cprofile_dir"], store=str(store))
        except Exception as e:
            compat_error = f"{type(e).__name__}: {e}"
    r, rc = args.repeats, args.cli_repeats
    for case in cases:
        results[case.name] = {"args": case.args, "scopes": {}}
        for scope in case.scopes:
            node = "any" if scope == "any" else None
            compat_node = "any" if scope == "any" else "all"
            ctx.wait_quiet()
            ctx.log(f"  {case.name} [{scope}] ...")
            t: dict[str, Timing] = {}
            t["native_warm"] = measure(lambda: case.native(native, node), r, warmup_s=args.warmup)
            t["native_cold"] = measure(lambda: _cold_native(Profiles, store, case, node), r)
            with quiet():
                if compat_warm is not None:
                    t["compat_warm"] = measure(
                        lambda: case.compat(compat_warm, compat_node, False), r, warmup_s=args.warmup
                    )
                    t["compat_drop_in"] = measure(
                        lambda: case.compat(compat_drop_in, compat_node, True), max(1, r // 2)
                    )
                else:
                    t["compat_warm"] = t["compat_drop_in"] = Timing(error=compat_error or compat_from)
                cli = proflake + case.cli + ["--store", str(store), "--format", "csv"]
                if scope == "any" and case.cli_has_node:
                    cli += ["--node", "any"]
                t["cli"] = measure(lambda: run_quietly(cli), rc)
                t["baseline"] = measure(
                    lambda: case.baseline(smdebug, node, True),
                    args.baseline_repeats,
                    budget_s=args.baseline_budget,
                )
                t["baseline_cached"] = (
                    measure(
                        lambda: case.baseline(smdebug, node, False),
                        args.baseline_repeats,
                        budget_s=args.baseline_budget,
                    )
                    if case.check in ("pstats", "list", "nodes")
                    else Timing(error="not measured (roll-up: same as refresh)")
                )
            results[case.name]["scopes"][scope] = _cell(case, t)
    native.close()
    meta = {"compat_import": compat_from, "compat_error": compat_error, "cli": " ".join(proflake)}
    return results, meta


def _cell(case: FetchCase, t: dict[str, Timing]) -> dict[str, Any]:
    """One (method, scope) cell of the JSON: every column's timing, smdebug's ratios, the answer checks."""
    cell: dict[str, Any] = {column: timing.to_dict() for column, timing in t.items()}
    base = t["baseline"].median_ms
    base_cached = t["baseline_cached"].median_ms if t["baseline_cached"].runs_ms else base
    cell["ratios"] = {
        "baseline_over_native_warm": _ratio(base, t["native_warm"].median_ms),
        "baseline_over_native_cold": _ratio(base, t["native_cold"].median_ms),
        "baseline_over_compat_warm": _ratio(base, t["compat_warm"].median_ms),
        "baseline_over_compat_drop_in": _ratio(base, t["compat_drop_in"].median_ms),
        "baseline_over_cli": _ratio(base, t["cli"].median_ms),
        "baseline_cached_over_compat_warm": _ratio(base_cached, t["compat_warm"].median_ms),
    }
    expected, base_error = t["baseline"].result, t["baseline"].error
    cell["same_answer"] = {
        kind: check_answer(case.check, kind, t[column].result, expected)
        if not t[column].error and not base_error
        else "n/a"
        for kind, column in (("native", "native_warm"), ("compat", "compat_warm"))
    }
    return cell
