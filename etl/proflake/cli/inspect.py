"""Commands that list what the store holds: errors, batches, jobs, nodes, list."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from proflake.cli.common import (
    cli,
    emit,
    output_options,
    scope_options,
    scope_options_without_node,
    store_option,
)
from proflake.query.names import PROFILERS

if TYPE_CHECKING:
    from proflake.store.store import Store


@cli.command()
@store_option
@click.option("--kind", metavar="KIND", help="Only errors of this kind (cprofile, layout, crash, ...).")
@click.option("--all", "include_closed", is_flag=True, help="Also the closed entries: files a later run no longer found under their source.")
@output_options
def errors(store: Store, kind: str | None, include_closed: bool, fmt: str, output: str | None) -> None:
    """List the quarantine: stats files that could not be ingested, and why (retried every run; an entry
    closes when a run over its source no longer finds the file)."""
    from proflake.query.profiles import Profiles

    emit(Profiles(store).errors(kind, include_closed=include_closed), fmt, output, kind="errors")


@cli.command()
@store_option
@output_options
def batches(store: Store, fmt: str, output: str | None) -> None:
    """List ingest runs: time, files, rows, bytes, duration and status."""
    from proflake.query.profiles import Profiles

    emit(Profiles(store).batches(), fmt, output, kind="batches")


# -- listings ---------------------------------------------------------------------------------------
@cli.command()
@store_option
@click.option("--profiler", type=click.Choice(PROFILERS), help="Only jobs with this profiler's data.")
@output_options
def jobs(store: Store, profiler: str | None, fmt: str, output: str | None) -> None:
    """List the training jobs in the store."""
    from proflake.query.profiles import Profiles

    emit(Profiles(store).jobs(profiler), fmt, output, limit_rows=False)


@cli.command()
@store_option
@scope_options_without_node
@output_options
def nodes(store: Store, job: str | None, all_jobs: bool, profiler: str | None, fmt: str, output: str | None) -> None:
    """List the node ids that have profiling stats (sorted, distinct)."""
    import pyarrow as pa

    from proflake.query.profiles import Profiles
    from proflake.schema import arrow_column  # pa.array of a list imports pandas (and pyarrow.compute)

    ids = Profiles(store).nodes(job=job, all_jobs=all_jobs, profiler=profiler)
    emit(pa.table({"node_id": arrow_column(ids, pa.string())}), fmt, output, limit_rows=False)


@cli.command(name="list")
@store_option
@scope_options
@output_options
def list_(
    store: Store, job: str | None, all_jobs: bool, node: str | None, profiler: str | None, fmt: str, output: str | None
) -> None:
    """List every profiled interval with its metadata and source path."""
    from proflake.query.profiles import Profiles

    table = Profiles(store).list_profile_stats(job=job, all_jobs=all_jobs, node=node, profiler=profiler)
    emit(table, fmt, output, kind="list")

