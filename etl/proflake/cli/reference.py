"""The CLI reference page (docs/reference/cli.md), generated from the commands' own ``--help``."""

from __future__ import annotations

from collections.abc import Iterator

import click

from proflake.cli.common import cli

WIDTH = 100  # fixed, so the page does not depend on the terminal that regenerated it


def commands(group: click.Group = cli, prefix: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], click.Command]]:
    """Every command and subcommand, as (path of names, command), in the order of the help page."""
    ctx = click.Context(group, info_name="proflake")
    for name in group.list_commands(ctx):
        command = group.get_command(ctx, name)
        if command is None or command.hidden:
            continue
        yield (*prefix, name), command
        if isinstance(command, click.Group):
            yield from commands(command, (*prefix, name))


def cli_markdown() -> str:
    """One section per command: its full ``--help`` as a code block."""
    out = [_help(("proflake",), cli)]
    for path, command in commands():
        out.append(_help(("proflake", *path), command))
    return "\n".join(out)


def exit_codes_markdown() -> str:
    """The exit codes every command uses, as a table (every ExitCode must have a meaning)."""
    from proflake.errors import EXIT_CODE_MEANINGS, ExitCode

    rows = [f"| {code.value} | `{code.name}` | {EXIT_CODE_MEANINGS[code]} |" for code in ExitCode]
    return "\n".join(["| code | name | meaning |", "|---|---|---|", *rows]) + "\n"


def _help(path: tuple[str, ...], command: click.Command) -> str:
    ctx = click.Context(
        cli, info_name="proflake", help_option_names=cli.context_settings["help_option_names"],
        terminal_width=WIDTH, max_content_width=WIDTH,
    )
    group: click.Command = cli
    for name in path[1:]:
        sub = group.get_command(ctx, name) if isinstance(group, click.Group) else None
        assert sub is not None, path
        ctx = click.Context(sub, info_name=name, parent=ctx, terminal_width=WIDTH, max_content_width=WIDTH)
        group = sub
    return f"## `{' '.join(path)}`\n\n```\n{command.get_help(ctx)}\n```\n"
