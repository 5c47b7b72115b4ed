"""proflake diff: what changed between two selections, with a regression gate for CI."""

from __future__ import annotations

import json
from typing import Any

import click

from proflake.cli.common import cli, emit, say, stdout_is_terminal, store_option
from proflake.errors import ExitCode, ProflakeError, UsageError
from proflake.query.names import DIFF_MATCH as MATCH
from proflake.query.names import DIFF_PER as PER
from proflake.query.names import DIFF_SIDE_OPTIONS as SIDE_OPTIONS
from proflake.query.names import PROFILERS


def side_options(f):
    for name, metavar, meaning in reversed(SIDE_OPTIONS):
        flag = name.replace("_", "-")
        f = click.option(f"--head-{flag}", metavar=metavar, help=f"Head side: {meaning}.")(f)
        f = click.option(f"--base-{flag}", metavar=metavar, help=f"Base side: {meaning}.")(f)
        f = click.option(f"--{flag}", metavar=metavar, help=f"Both sides: {meaning}.")(f)
    return f


@cli.command("diff")
@click.argument("base_job")
@click.argument("head_job", required=False)
@side_options
@click.option(
    "--profiler",
    type=click.Choice(PROFILERS),
    help="Compare this profiler's data (default: cProfile when both sides have it).",
)
@click.option(
    "--per",
    type=click.Choice(PER),
    default="step",
    show_default=True,
    help="Normalise per profiled step or per second of wall time.",
)
@click.option(
    "--match",
    type=click.Choice(MATCH),
    default="name",
    show_default=True,
    help="Match functions by file and name (survives moved lines) or by file, line and name.",
)
@click.option(
    "--fail-on",
    multiple=True,
    metavar="PCT",
    help="Exit 5 when the steps show a slowdown beyond PCT (one-sided test): '10%' (total and per function), 'total:5%', 'function:20%'.",
)
@click.option(
    "--alpha",
    type=click.FloatRange(0, 1, min_open=True, max_open=True),
    default=0.05,
    show_default=True,
    help="Significance level, Holm-corrected over the total and the tested functions.",
)
@click.option(
    "--min-share",
    type=click.FloatRange(0, 100, max_open=True),
    default=1.0,
    show_default=True,
    help="Test only functions holding at least this percentage of either side's total own time.",
)
@click.option("--top", type=click.IntRange(min=1), help="Show only the N largest changes.")
@click.option(
    "--format",
    "fmt",
    type=click.Choice(("table", "csv", "json", "parquet", "html")),
    default="table",
    show_default=True,
    help="Output format; json is one document: sides, total, gate, warnings and every function; html the "
    "diff page (a differential flame graph and the table, self-contained: docs/diff.md).",
)
@click.option("--output", "-o", metavar="FILE", help="Write the result to FILE instead of stdout.")
@click.option(
    "--flame-nodes",
    type=click.IntRange(min=10),
    default=2000,
    show_default=True,
    help="--format html: flame-graph nodes kept per side; smaller ones are folded into [other] nodes.",
)
@store_option
def diff(
    base_job: str,
    head_job: str | None,
    store: Any,
    profiler: str | None,
    per: str,
    match: str,
    fail_on: tuple[str, ...],
    alpha: float,
    min_share: float,
    top: int | None,
    fmt: str,
    output: str | None,
    flame_nodes: int,
    **sides: Any,
) -> None:
    """Compare HEAD_JOB (default: BASE_JOB again, narrowed differently) with BASE_JOB, function by function.

    Each node's step is a sample: changes are tested against the step-to-step noise (Welch's t-test,
    Holm-corrected). A side is a range of steps (default: every train step), a time window, a pair of
    modes or a job phase. Exit codes: 0 ok, 5 when --fail-on finds a significant regression (docs/diff.md).
    """
    from proflake.query.diff import TABLE_COLUMNS, summary_lines
    from proflake.query.diff_options import parse_fail_on, side_selection
    from proflake.query.profiles import Profiles

    total_gate, function_gate = parse_fail_on(fail_on)
    if fmt == "html" and not output and stdout_is_terminal():
        raise UsageError("--format html writes a web page, which a terminal cannot show; pass --output FILE")
    shared = {key: sides[key] for key, _, _ in SIDE_OPTIONS}

    def side(name: str, job: str) -> Any:
        return side_selection(job, {key: sides[f"{name}_{key}"] for key, _, _ in SIDE_OPTIONS}, shared)

    result = Profiles(store).diff(
        side("base", base_job),
        side("head", head_job or base_job),
        profiler=profiler,
        per=per,
        match=match,
        alpha=alpha,
        min_share=min_share / 100,
    )
    for line in summary_lines(result):
        say(line)
    reasons = result.gate(total_gate, function_gate)
    if fmt in ("json", "html"):
        if fmt == "json":
            document = result.to_dict(total_gate, function_gate)
            if top is not None:
                document["functions"] = document["functions"][:top]
            data = json.dumps(document, indent=2) + "\n"
        else:
            page = result.report(
                fail_on_total=total_gate, fail_on_function=function_gate, flame_budget=flame_nodes, top=top
            )
            data = page.html
        if output:
            try:
                with open(output, "w", encoding="utf-8") as f:
                    f.write(data)
            except OSError as e:
                raise ProflakeError(f"cannot write {output!r}: {e.strerror}") from e
            say(f"wrote {output}")
        else:
            click.echo(data, nl=False)
    else:
        table = result.table if top is None else result.table.slice(0, top)
        emit(table.select(list(TABLE_COLUMNS)) if fmt == "table" else table, fmt, output)
    if fail_on:
        if reasons:
            say(f"proflake: regression ({len(reasons)}):")
            for reason in reasons:
                say(f"  {reason}")
            click.get_current_context().exit(ExitCode.REGRESSION)
        say("no significant regression at the --fail-on threshold(s):")
        for line in result.verdict(total_gate, function_gate):
            say(f"  {line}")
