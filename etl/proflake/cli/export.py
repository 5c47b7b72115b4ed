"""proflake export <selection> --format speedscope|collapsed|prof: flame-graph files for other tools."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from proflake.cli.common import cli, say, scope_options, stdout_is_terminal, store_option
from proflake.cli.selection import add_selection_commands
from proflake.errors import ProflakeError, UsageError

# The renderers' names (proflake.render.exports.EXPORT_FORMATS, which imports pyarrow); a test keeps them equal.
EXPORT_FORMAT_NAMES = ("speedscope", "collapsed", "prof")


@cli.group()
def export() -> None:
    """Export a selection's call stacks: speedscope JSON, collapsed stacks (flamegraph.pl, inferno,
    Pyroscope) or a pstats .prof file (snakeviz, tuna).

    Example: proflake export by-step 5 --format speedscope -o step5.speedscope.json
    """


def _options(f: Callable) -> Callable:
    f = click.option("--output", "-o", metavar="FILE", help="Write to FILE instead of stdout.")(f)
    f = click.option("--format", "fmt", type=click.Choice(EXPORT_FORMAT_NAMES), required=True, help="File format.")(f)
    f = scope_options(f)
    return store_option(f)


def _run(method: str, options: dict[str, Any], arguments: dict[str, Any]) -> None:
    from proflake.pages import export
    from proflake.query.profiles import Profiles
    from proflake.render.exports import renderer

    fmt, output = options.pop("fmt"), options.pop("output")
    writer = renderer(fmt)
    if not output and stdout_is_terminal():
        # Every export is a file for another tool: a speedscope file of one step is ~45 KB of JSON on one line.
        kind = "binary data, which a terminal cannot show" if writer.output_is_binary else "a file for another tool, not for reading on a terminal"
        raise UsageError(
            f"--format {fmt} writes {kind}; pass --output FILE (or redirect: > profile.{writer.output_file_extension})"
        )
    profiles = Profiles(options.pop("store"))
    result = profiles.fetch(method, **options, **arguments)
    if result.empty:
        say(f"no {result.profiler} intervals matched {method.replace('_', '-')}")
    data = export(result, fmt)
    if output:
        try:
            Path(output).write_bytes(data)
        except OSError as e:
            raise ProflakeError(f"cannot write {output!r}: {e.strerror}") from e
        say(f"wrote {output} ({len(data):,} bytes)")
    else:
        sys.stdout.buffer.write(data)
        sys.stdout.buffer.flush()


add_selection_commands(export, _options, _run, "Export")
