"""proflake check: verify a store, one line per finding with its remedy; --repair rebuilds what it can."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import click

from proflake.cli.common import cli, say, store_option
from proflake.errors import ExitCode

if TYPE_CHECKING:
    from proflake.store.store import Store


@cli.command()
@store_option
@click.option("--repair", is_flag=True, help="Rebuild what can be rebuilt (under the writer lock) and say what cannot; "
              "apply pending schema migrations.")
@click.option("--wait", type=click.FloatRange(min=0), default=0, show_default=True, help="Seconds to wait for another run's lock.")
@click.option("--json", "as_json", is_flag=True, help="Print the findings as JSON on stdout.")
def check(store: Store, repair: bool, wait: float, as_json: bool) -> None:
    """Verify the store: tables, data files, unfinished batches, facts against live intervals, roll-ups.
    Says the store's schema version and the migrations pending (docs/store.md). Exits 0 when the store
    is sound (or every finding was repaired), 1 otherwise, 7 for a store of a later release."""
    from proflake.ingestion.check import check as run_check

    report = run_check(store, repair_damage=repair, wait=wait)
    for finding in report.findings:
        click.echo(finding.line())
    for source in report.reingested:
        say(f"parsed the lost files of {source} again")
    say(f"store {store.location}: " + ("sound" if not report.findings else f"{len(report.findings)} finding(s)"
        + ("" if not repair else (", all repaired" if report.ok else ", some cannot be repaired")))
        + (f"; {report.schema_line()}" if report.schema else ""))
    if as_json:
        click.echo(json.dumps(report.to_dict(), indent=1))
    if not report.ok:
        raise SystemExit(ExitCode.FAILURE)
