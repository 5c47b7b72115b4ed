"""proflake export <selection> --format speedscope|collapsed|prof: flame-graph files for other tools."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from proflake.cli.common import cli, say, scope_options, store_option
from proflake.cli.selection import add_selection_commands
from proflake.errors import ProflakeError

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
    from proflake.query.profiles import Profiles
    from proflake.render.exports import renderer

    profiles = Profiles(options.pop("store"))
    fmt, output = options.pop("fmt"), options.pop("output")
    result = profiles.fetch(method, **options, **arguments)
    if result.empty:
        say(f"no {result.profiler} intervals matched {method.replace('_', '-')}")
    data = renderer(fmt).render(result)
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
