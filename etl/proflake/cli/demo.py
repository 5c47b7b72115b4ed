"""proflake demo: a sample job, ingested and queried."""

from __future__ import annotations

from pathlib import Path

import click

from proflake.cli.common import (
    cli,
    say,
    store_option,
)
from proflake.store.store import Store


@cli.command()
@store_option
@click.option(
    "--out", default="./proflake-sample-job", show_default=True, metavar="DIR", help="Where to write the sample job's stats files."
)
def demo(store: Store, out: str) -> None:
    """Generate a sample training job's profiles, ingest them, and show a few fetch results."""
    from proflake.capture.demo import run_demo

    run_demo(store, Path(out), stdout=lambda text: click.echo(text), stderr=say)
