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
from proflake.query.profiles import SORT_KEYS, FetchResult, Profiles
from proflake.query.registry import FETCH_METHODS, REQUIRED, FetchMethod


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


def _command(spec: FetchMethod) -> click.Command:
    """``proflake fetch <spec.command>``: the method's own arguments, then the options every fetch takes."""

    def run(**options: Any) -> None:
        arguments = {name: options.pop(name) for name in spec.argument_names}
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
    command = click.Command(spec.command, callback=fetch_options(run), params=params, help=spec.summary)
    # fetch_options added its options to run; move them onto the command, after the method's own.
    command.params += getattr(command.callback, "__click_params__", [])[::-1]
    return command


for _spec in FETCH_METHODS:
    fetch.add_command(_command(_spec))


# -- sql --------------------------------------------------------------------------------------------
