"""proflake report <selection>: one self-contained HTML report of a selection."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import click

from proflake.cli.common import cli, say, scope_options, store_option
from proflake.cli.selection import add_selection_commands


@cli.group()
def report() -> None:
    """Write an HTML report (overview, step timeline, phases, top functions, flame graph, nodes) of a selection.

    The file is self-contained: it opens from disk in any browser with no network.
    Example: proflake report job --out report.html
    """


def _options(f: Callable) -> Callable:
    f = click.option("--flame-nodes", type=click.IntRange(min=10), default=2000, show_default=True,
                     help="Flame-graph nodes kept; smaller ones are folded into [other] nodes.")(f)
    f = click.option("--out", "-o", metavar="FILE", default="proflake-report.html", show_default=True, help="Where to write the report.")(f)
    f = scope_options(f)
    return store_option(f)


def _run(method: str, options: dict[str, Any], arguments: dict[str, Any]) -> None:
    from proflake.query.profiles import Profiles

    profiles = Profiles(options.pop("store"))
    out, budget = options.pop("out"), options.pop("flame_nodes")
    result = profiles.fetch(method, **options, **arguments)
    if result.empty:
        say(f"no {result.profiler} intervals matched {method.replace('_', '-')}; the report says so")
    path = result.report(flame_budget=budget).write(out)
    say(f"wrote {path} ({path.stat().st_size:,} bytes): open it in a browser")


add_selection_commands(report, _options, _run, "Report on")
