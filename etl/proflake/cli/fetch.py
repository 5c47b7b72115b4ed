"""proflake fetch <method>: the documented fetch methods."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import click

from proflake.cli.common import (
    cli,
    emit,
    limit_options,
    output_options,
    say,
    say_fitted,
    scope_options,
    store_option,
)
from proflake.errors import ProflakeError
from proflake.formats import is_caller_graph
from proflake.query.names import SORT_KEYS
from proflake.query.registry import FETCH_METHODS, REQUIRED, FetchMethod

if TYPE_CHECKING:
    from proflake.query.profiles import FetchResult


@cli.group()
def fetch() -> None:
    """Answer one of smdebug's fetch methods from the store."""


def fetch_options(f: Callable) -> Callable:
    f = click.option("--prof", metavar="FILE", help="cProfile: also write the aggregate as a .prof file (pstats, snakeviz, tuna).")(f)
    f = click.option("--sort", type=click.Choice(SORT_KEYS), default="cumtime", show_default=True, help="Order rows by.")(f)
    f = click.option(
        "--top", type=click.IntRange(min=1),
        help="Keep the top N functions (per group); default: all (the first 20 on a terminal).",
    )(f)
    f = click.option("--per-node", is_flag=True, help="Keep node_id as a group key instead of adding nodes up.")(f)
    f = output_options(f)
    f = limit_options(f)
    f = scope_options(f)
    return store_option(f)


def _run_fetch(method: str, options: dict[str, Any], **arguments: Any) -> None:
    from proflake.query.hints import what_exists
    from proflake.query.profiles import Profiles

    profiles = Profiles(
        options.pop("store"), timeout=options.pop("timeout"), memory_limit=options.pop("memory_limit"), interruptible=True
    )
    fmt, output, prof = options.pop("fmt"), options.pop("output"), options.pop("prof")
    result = profiles.fetch(method, **options, callers=bool(prof), **arguments)
    if result.empty:
        scope = {k: options[k] for k in ("job", "all_jobs", "node")}
        say_fitted(f"no {result.profiler} intervals matched {method.replace('_', '-')}; "
                   f"{what_exists(profiles, profiler=result.profiler, **scope)}")
    elif method == "by_job_phase" and "training_loop" not in {g[-1] for g in result.groups()}:
        say("job phase training_loop: no intervals")
    if result.time_unit == "samples":
        say("times are sample counts: the files gave no sample rate (ingest them with --sample-rate HZ for seconds)")
    elif result.time_unit == "mixed":
        say_fitted("the selection mixes seconds and sample counts (files ingested without a sample rate), whose sums "
                   "mean nothing; narrow it with --job or --node (proflake list shows each interval's time_unit)")
    if prof:
        _write_prof(result, prof)
    emit(result.table, fmt, output, kind=result.profiler, group_by=result.group_by, limit_rows=options["top"] is None)


def _check_star(ctx: click.Context, end_step: str | None) -> None:
    """An unquoted ``*`` reaches by-step as the names of the files in the current folder: say so."""
    import os

    names = ([end_step] if end_step is not None else []) + list(ctx.args)
    if ctx.args or (end_step is not None and end_step.strip() != "*" and not end_step.strip().lstrip("-").isdigit()
                    and os.path.exists(end_step)):
        shown = ", ".join(names[:3]) + (", ..." if len(names) > 3 else "")
        raise click.UsageError(f"END_STEP is {shown}: your shell expanded an unquoted * into file names; quote it: '*'")


def _write_prof(result: FetchResult, path: str) -> None:
    if not is_caller_graph(result.profiler):
        raise ProflakeError("--prof needs cProfile data; this result is pyinstrument")
    if result.group_by:
        raise ProflakeError("--prof writes one aggregate; use it with a fetch that does not group (no --per-node, not by-*-phase)")
    result.write_prof(path)
    say(f"wrote {path}")


def _command(spec: FetchMethod) -> click.Command:
    """``proflake fetch <spec.command>``: the method's own arguments, then the options every fetch takes."""

    def run(**options: Any) -> None:
        arguments = {name: options.pop(name) for name in spec.argument_names}
        if "end_step" in arguments:
            _check_star(click.get_current_context(), arguments["end_step"])
        _run_fetch(spec.name, options, **arguments)

    params: list[click.Parameter] = []
    for argument in spec.arguments:
        if argument.positional:
            required = argument.default is REQUIRED
            metavar = argument.metavar if required else f"[{argument.metavar}]"
            params.append(click.Argument([argument.name], required=required, metavar=metavar))
        else:
            params.append(click.Option([argument.option, argument.name], default=argument.default,
                                       show_default=True, help=argument.help))
    # by-step takes extra arguments only to name an unquoted * that the shell expanded (_check_star).
    settings = {"allow_extra_args": True} if "end_step" in spec.argument_names else {}
    command = click.Command(spec.command, callback=fetch_options(run), params=params, help=spec.summary,
                            context_settings=settings)
    # fetch_options added its options to run; move them onto the command, after the method's own.
    command.params += getattr(command.callback, "__click_params__", [])[::-1]
    return command


for _spec in FETCH_METHODS:
    fetch.add_command(_command(_spec))

