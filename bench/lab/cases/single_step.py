"""One step of node ``any``, four ways, alternated call by call: the compatible API and smdebug's cached
call (both ``refresh_stats=False``), the native API, and the SQL floor (the statements a warm native
call runs, replayed bare). The section ``single_step``; the single-step targets are read from the
median of each round's ratios, which the host's drift between cells does not move."""

from __future__ import annotations

import random
import statistics
import time
from collections.abc import Callable
from typing import Any

from bench import baseline as bl
from bench.lab.cases import Context
from bench.lab.cases.fetch import import_compat, one_step
from bench.lab.harness import OtherLoad, quiet


def run_single_step(ctx: Context) -> None:
    """The section, when the fetch section measured by_step (--methods may leave it out)."""
    if "by_step" in ctx.data.get("fetch", {}):
        ctx.data["single_step"] = bench_single_step(ctx)


def sql_floor_of_one_step(profiles: Any, step: int) -> tuple[list[str], Callable[[], None]]:
    """The statements a warm ``profiles.by_step(step, node="any")`` runs, recorded during one such call
    and replayed bare: no caller edges, no pstats.Stats, no Python around them, the least that fetch
    can cost. Recorded rather than rebuilt, so the floor follows whatever Profiles.fetch runs. Returns
    the statements' names (queries/*.sql) and the replay."""
    from proflake import sql as queries

    profiles.by_step(step, node="any")  # once first: what a warm call no longer runs (scope) is not recorded
    recorded: list[tuple[str, str, dict[str, Any]]] = []
    run_named = queries.run_named

    def recording(con: Any, name: str, params: dict[str, Any]) -> Any:
        sql = queries.query_text(name)
        recorded.append((name, sql, queries.bind(sql, params)))
        return run_named(con, name, params)

    queries.run_named = recording  # type: ignore[assignment]
    try:
        profiles.by_step(step, node="any")
    finally:
        queries.run_named = run_named
    con = profiles.connection()

    def run() -> None:
        for _, sql, bound in recorded:
            queries.run(con, sql, bound)

    return [name for name, _, _ in recorded], run


def bench_single_step(ctx: Context) -> dict:
    """The four calls for ``--alternations`` rounds, in a new order each round, after ``--warmup`` seconds
    (and at least five rounds) of untimed calls. A failure is reported in the result, as measure() does:
    it must not sink the run's other figures."""
    from proflake import Profiles

    args, manifest, store = ctx.args, ctx.manifest, ctx.main_store
    compat_cls, compat_from = import_compat()
    if compat_cls is None:
        return {"error": compat_from}
    step = one_step(manifest)
    opened: list[Any] = []
    try:
        native = Profiles(str(store))
        opened.append(native)
        with quiet():
            compat = compat_cls(store=str(store))
        opened.append(compat)
        smdebug = bl.SmdebugCProfileAnalysis(manifest["cprofile_dir"])
        smdebug.fetch_profile_stats_by_step(step, node_id="any", refresh_stats=True)  # its listing, once
        calls: dict[str, Callable[[], Any]] = {
            # Asked afresh each time: the compatible classes keep an answer until the data changes
            # (bench.lab.compat_notebook times that); this row times the call itself against its SQL floor.
            "compat": lambda: _forget_answers(compat) or compat.fetch_profile_stats_by_step(
                step, node_id="any", refresh_stats=False
            ),
            "smdebug_cached": lambda: smdebug.fetch_profile_stats_by_step(
                step, node_id="any", refresh_stats=False
            ),
            "native": lambda: native.by_step(step, node="any"),
        }
        floor_statements, calls["sql_floor"] = sql_floor_of_one_step(native, step)
        runs: dict[str, list[float]] = {name: [] for name in calls}
        order = list(calls)
        shuffle = random.Random(0).shuffle  # the same orders in every run
        ctx.wait_quiet()
        ctx.log(f"  by_step {step} [any], alternated x{args.alternations} ...")
        with OtherLoad() as load, quiet():
            warming, warm_rounds = time.perf_counter(), 0
            while warm_rounds < 5 or time.perf_counter() - warming < args.warmup:
                for call in calls.values():
                    call()
                warm_rounds += 1
            for _ in range(args.alternations):
                shuffle(order)  # a new order each round: no call always runs right after the same one
                for name in order:
                    started = time.perf_counter()
                    calls[name]()
                    runs[name].append((time.perf_counter() - started) * 1000)
    except Exception as e:  # as measure(): the rest of the run's figures still count
        return {"error": f"{type(e).__name__}: {e}"}
    finally:
        for api in opened:
            api.close()
    base = runs["smdebug_cached"]
    return {
        "step": step,
        "rounds": args.alternations,
        "warmup_rounds": warm_rounds,
        "sql_floor_statements": floor_statements,
        "runs_ms": {name: [round(ms, 3) for ms in times] for name, times in runs.items()},
        "median_ms": {name: round(statistics.median(ms), 3) for name, ms in runs.items()},
        # Each call's time over smdebug's cached call's in the same round (above 1: slower than smdebug).
        "x_smdebug_cached": {
            name: round(statistics.median(a / b for a, b in zip(ms, base)), 3)
            for name, ms in runs.items()
            if name != "smdebug_cached"
        },
        "compat_x_sql_floor": round(
            statistics.median(a / b for a, b in zip(runs["compat"], runs["sql_floor"])), 3
        ),
        "machine": load.result,
    }


def _forget_answers(analysis: Any) -> None:
    """Drop the answers the analysis's view of the store keeps (proflake.smdebug.store_view)."""
    view = getattr(analysis, "_view", None)
    if view is not None:
        view.answers.clear()
