"""The fetch methods' selections as subcommands of another command (report, export).

``proflake report by-step 5 9 --out r.html`` selects what ``proflake fetch by-step 5 9`` selects (the
arguments come from the fetch-method registry); ``job`` selects every interval in scope (the job, or one
node of it with --node).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import click

from proflake.query.registry import FETCH_METHODS, REQUIRED, FetchMethod

Run = Callable[[str, dict[str, Any], dict[str, Any]], None]  # (method, options, method arguments)
_JOB = FetchMethod("by_job_phase", "every interval in scope: the whole job (or one node of it with --node).", "")


def add_selection_commands(group: click.Group, options: Callable[[Callable], Callable], run: Run, what: str) -> None:
    """Add ``job`` and one subcommand per fetch method to ``group``; ``options`` decorates each, ``run``
    does the work."""
    for name, spec in [("job", _JOB), *((m.command, m) for m in FETCH_METHODS)]:
        group.add_command(_command(name, spec, options, run, what))


def _command(name: str, spec: FetchMethod, options: Callable[[Callable], Callable], run: Run, what: str) -> click.Command:
    def callback(**kwargs: Any) -> None:
        arguments = {a: kwargs.pop(a) for a in spec.argument_names}
        run(spec.name, kwargs, arguments)

    params: list[click.Parameter] = []
    for argument in spec.arguments:
        if argument.positional:
            required = argument.default is REQUIRED
            metavar = argument.metavar if required else f"[{argument.metavar}]"
            params.append(click.Argument([argument.name], required=required, metavar=metavar))
        else:
            params.append(
                click.Option([argument.option, argument.name], default=argument.default, show_default=True, help=argument.help)
            )
    summary = spec.summary[0].lower() + spec.summary[1:]
    command = click.command(name, help=f"{what} {summary}")(options(callback))
    command.params = params + command.params
    return command
