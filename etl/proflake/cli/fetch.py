"""proflake fetch <method>: the documented fetch methods."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import click

from proflake.cli.common import (
    cli,
    emit,
    output_options,
    say,
    scope_options,
    store_option,
)
from proflake.errors import ProflakeError
from proflake.query.profiles import FETCH_METHODS, SORT_KEYS, FetchResult, Profiles


@cli.group()
def fetch() -> None:
    """Answer one of smdebug's fetch methods from the store."""


def fetch_options(f: Callable) -> Callable:
    f = click.option("--prof", metavar="FILE", help="cProfile: also write the aggregate as a .prof file (pstats, snakeviz, tuna).")(f)
    f = click.option("--sort", type=click.Choice(SORT_KEYS), default="cumtime", show_default=True, help="Order rows by.")(f)
    f = click.option("--top", type=click.IntRange(min=1), help="Keep the top N functions (per group); default all.")(f)
    f = click.option("--per-node", is_flag=True, help="Keep node_id as a group key instead of adding nodes up.")(f)
    f = output_options(f)
    f = scope_options(f)
    return store_option(f)


def _run_fetch(method: str, options: dict[str, Any], **arguments: Any) -> None:
    profiles = Profiles(options.pop("store"))
    fmt, output, prof = options.pop("fmt"), options.pop("output"), options.pop("prof")
    result = profiles.fetch(method, **options, callers=bool(prof), **arguments)
    if result.empty:
        say(f"no {result.profiler} intervals matched {method.replace('_', '-')}")
    elif method == "by_job_phase" and "training_loop" not in {g[-1] for g in result.groups()}:
        say("job phase training_loop: no intervals")
    if prof:
        _write_prof(result, prof)
    emit(result.table, fmt, output)


def _write_prof(result: FetchResult, path: str) -> None:
    if result.profiler != "cprofile":
        raise ProflakeError("--prof needs cProfile data; this result is pyinstrument")
    if result.group_by:
        raise ProflakeError("--prof writes one aggregate; use it with a fetch that does not group (no --per-node, not by-*-phase)")
    result.write_prof(path)
    say(f"wrote {path}")


@fetch.command("by-time")
@click.argument("start", type=float)
@click.argument("end", type=float)
@fetch_options
def by_time(start: float, end: float, **options: Any) -> None:
    """Intervals overlapping [START, END] (seconds since the epoch), including one containing the window."""
    _run_fetch("by_time", options, start_time_s=start, end_time_s=end)


@fetch.command("by-step")
@click.argument("start_step")
@click.argument("end_step", required=False)
@click.option("--mode", default="train", show_default=True, help="Mode of both ends (train, eval, ... or TRAIN, EVAL, ...).")
@click.option("--start-phase", default="stepstart", show_default=True, help="Phase of the start step.")
@click.option("--end-phase", default="stepend", show_default=True, help="Phase of the end step.")
@fetch_options
def by_step(start_step: str, end_step: str | None, mode: str, start_phase: str, end_phase: str, **options: Any) -> None:
    """Intervals in steps START_STEP..END_STEP (default START_STEP) of one mode; '*' as END_STEP = to the end."""
    _run_fetch(
        "by_step", options, start_step=start_step, end_step=end_step, mode=mode, start_phase=start_phase, end_phase=end_phase
    )


@fetch.command("between-modes")
@click.argument("start_mode")
@click.argument("end_mode")
@fetch_options
def between_modes(start_mode: str, end_mode: str, **options: Any) -> None:
    """Intervals that start in START_MODE and end in END_MODE (e.g. train eval)."""
    _run_fetch("between_modes", options, start_mode=start_mode, end_mode=end_mode)


@fetch.command("pre-step-zero")
@fetch_options
def pre_step_zero(**options: Any) -> None:
    """Intervals profiled from the start of the job until step 0."""
    _run_fetch("pre_step_zero", options)


@fetch.command("post-hook-close")
@fetch_options
def post_hook_close(**options: Any) -> None:
    """Intervals profiled after the hook closed, to the end of the job."""
    _run_fetch("post_hook_close", options)


@fetch.command("by-training-phase")
@fetch_options
def by_training_phase(**options: Any) -> None:
    """Functions aggregated per (start_mode, end_mode) pair present."""
    _run_fetch("by_training_phase", options)


@fetch.command("by-job-phase")
@fetch_options
def by_job_phase(**options: Any) -> None:
    """Functions aggregated per job phase: initialization, training_loop, finalization, whole_job."""
    _run_fetch("by_job_phase", options)


assert {c.replace("-", "_") for c in fetch.commands} == set(FETCH_METHODS)


# -- sql --------------------------------------------------------------------------------------------
