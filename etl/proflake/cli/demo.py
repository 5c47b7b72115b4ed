"""proflake demo: a sample job, ingested and queried with the commands it prints."""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import TYPE_CHECKING

import click

from proflake.cli.common import (
    cli,
    say,
    store_option,
)
from proflake.store.location import default_store_location

if TYPE_CHECKING:
    from proflake.store.store import Store


@cli.command()
@store_option
@click.option(
    "--out", default="./proflake-sample-job", show_default=True, metavar="DIR", help="Where to write the sample job's stats files."
)
def demo(store: Store, out: str) -> None:
    """Generate a sample training job's profiles, ingest them, and run a few commands on them."""
    from proflake.capture.demo import demo_commands, prepare_demo

    job_id = prepare_demo(store, Path(out), stderr=say)
    store_args = [] if store.location == default_store_location() else ["--store", store.location]
    page = Path(out).with_name(Path(out).name + "-report.html")
    for title, args in demo_commands(job_id, store_args, str(page)):
        click.echo(f"\n== {title}\n$ proflake {shlex.join(args)}\n")
        # The command itself, in this process: what it prints here is what the user will see.
        cli.main(args=args, prog_name="proflake", standalone_mode=False)
    sql = shlex.join(["proflake", "sql", "SELECT node_id, count(*) AS intervals FROM intervals GROUP BY ALL", *store_args])
    click.echo(f"\nNext: {sql}")
