"""proflake trend: what changed across a series of jobs, with a regression gate on the newest."""

from __future__ import annotations

import json
from typing import Any

import click

from proflake.cli.common import cli, emit, say, stdout_is_terminal, store_option
from proflake.errors import ExitCode, ProflakeError, UsageError
from proflake.query.names import PROFILERS


@cli.command("trend")
@click.option("--jobs", "job_glob", metavar="GLOB", help="The jobs whose ids match GLOB ('nightly-*'; default: every job).")
@click.option("--job", "jobs", multiple=True, metavar="ID", help="This job (repeat for more; with --jobs, both).")
@click.option("--profiler", type=click.Choice(PROFILERS), help="This profiler's data (default: cProfile when there is some).")
@click.option("--node", metavar="ID", help="Only this node's steps (default: every node's).")
@click.option(
    "--min-change", default="10%", show_default=True, metavar="PCT",
    help="Report only changes of own time per step at least this large, either way.",
)
@click.option(
    "--fail-on", metavar="PCT",
    help="Exit 5 when the newest job starts a slowdown shown (one-sided test) over PCT, e.g. '10%'.",
)
@click.option(
    "--alpha", type=click.FloatRange(0, 1, min_open=True, max_open=True), default=0.05, show_default=True,
    help="Significance level, corrected over the functions tested (Holm) and each split's possible places.",
)
@click.option(
    "--min-share", type=click.FloatRange(0, 100, max_open=True), default=1.0, show_default=True,
    help="Test only functions holding at least this percentage of some job's total own time.",
)
@click.option(
    "--format", "fmt", type=click.Choice(("table", "csv", "json", "html")), default="table", show_default=True,
    help="Output format; json is one object: the jobs, the test, \"changes\" and the gate; html the trend page "
    "(the series charted, the change points marked, a click from a change to its diff; self-contained: docs/trend.md).",
)
@click.option("--output", "-o", metavar="FILE", help="Write the result to FILE instead of stdout.")
@click.option(
    "--top", type=click.IntRange(min=0), default=10, show_default=True,
    help="--format html: chart the total and this many functions (those that changed first, then the largest).",
)
@store_option
def trend(
    store: Any,
    job_glob: str | None,
    jobs: tuple[str, ...],
    profiler: str | None,
    node: str | None,
    min_change: str,
    fail_on: str | None,
    alpha: float,
    min_share: float,
    fmt: str,
    output: str | None,
    top: int,
) -> None:
    """Find where each function's own time per train step changed across a series of jobs.

    Jobs are taken in the order they started; each node's train step is a sample. Change points are found
    by binary segmentation on the jobs' means and kept when Welch's test against the step noise
    (corrected over the functions) and --min-change agree. Exit codes: 0 ok, 5 when --fail-on finds that the newest job
    starts a significant slowdown (docs/trend.md). --format html -o trend.html writes the page: the total's and
    the top functions' series with their change points; a click on a change shows the diff of the jobs either side.
    """
    from proflake.query.profiles import Profiles
    from proflake.query.trend import percentage

    smallest = percentage("--min-change", min_change)
    gate = percentage("--fail-on", fail_on) if fail_on is not None else None
    if fmt == "html" and not output and stdout_is_terminal():
        raise UsageError("--format html writes a web page, which a terminal cannot show; pass --output FILE")
    if gate is not None:
        smallest = min(smallest, gate)  # a slowdown the gate should see is not hidden by --min-change
    result = Profiles(store).trend(
        jobs=list(jobs) or None, job_glob=job_glob, profiler=profiler, node=node, min_change=smallest,
        min_share=min_share / 100, alpha=alpha,
    )
    for line in result.summary_lines() + result.warnings:
        say(line)
    if fmt in ("json", "html"):
        data = json.dumps(result.to_dict(gate), indent=2) + "\n" if fmt == "json" else result.report(top=top, fail_on=gate).html
        if output:
            try:
                with open(output, "w", encoding="utf-8") as f:
                    f.write(data)
            except OSError as e:
                raise ProflakeError(f"cannot write {output!r}: {e.strerror}") from e
            say(f"wrote {output}" + (f" ({len(data.encode()):,} bytes): open it in a browser" if fmt == "html" else ""))
        else:
            click.echo(data, nl=False)
    else:
        emit(result.terminal_table() if fmt == "table" else result.changes_table(), fmt, output, limit_rows=False)
    if gate is not None:
        reasons = result.gate(gate)
        if reasons:
            say(f"proflake: regression ({len(reasons)}):")
            for reason in reasons:
                say(f"  {reason}")
            click.get_current_context().exit(ExitCode.REGRESSION)
        say("no significant regression at the --fail-on threshold:")
        for line in result.verdict(gate):
            say(f"  {line}")
