"""Ad hoc SQL and the BI catalog."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from proflake.cli.common import (
    cli,
    emit,
    limit_options,
    output_options,
    say,
    store_option,
)
from proflake.errors import ExitCode, ProflakeError

if TYPE_CHECKING:
    from proflake.store.store import Store


@cli.command()
@click.argument("query", required=False)
@store_option
@click.option("--param", "params", multiple=True, metavar="NAME=VALUE", help="Bind $NAME to VALUE (repeatable).")
@click.option("--schema", "show_schema", is_flag=True, help="Print the tables and views with their columns and types.")
@output_options
@limit_options
def sql(
    query: str | None, store: Store, params: tuple[str, ...], show_schema: bool, fmt: str, output: str | None,
    timeout: float, memory_limit: str | None,
) -> None:
    """Run QUERY (SQL text, a .sql file, or - for stdin) over the store's tables and views, read-only:
    only queries run; $NAME parameters are bound by DuckDB."""
    from proflake.query.profiles import Profiles

    profiles = Profiles(store, timeout=timeout, memory_limit=memory_limit, interruptible=True)
    if show_schema:
        if query is not None or params:
            raise click.UsageError("--schema takes no QUERY or --param")
        emit(profiles.sql_schema(), fmt, output, limit_rows=False)
        return
    if query is None:
        raise click.UsageError("missing QUERY: SQL text, a .sql file, or - for stdin (or --schema)")
    text = _query_text(query)
    bound: dict[str, Any] = {}
    for item in params:
        name, sep, value = item.partition("=")
        if not sep or not name:
            raise click.BadParameter(f"{item!r} is not NAME=VALUE", param_hint="--param")
        bound[name.lstrip("$")] = value
    emit(profiles.sql(text, bound), fmt, output)


@cli.command()
@store_option
@click.option("--out", metavar="FILE", help="Write the catalog to FILE (e.g. proflake.duckdb) and register it in the store.")
@click.option("--materialize", is_flag=True, help="Copy the committed rows into the catalog (the default).")
@click.option("--views", is_flag=True,
              help="Views over the store's files instead of a copy: for trusted SQL only (a client can COPY into the store's folders).")
@click.option("--no-register", is_flag=True, help="Do not register FILE for refresh after each ingest and compaction.")
@click.option("--refresh", is_flag=True, help="Rewrite every catalog registered in the store.")
@click.option("--list", "list_", is_flag=True, help="List the catalogs registered in the store.")
def catalog(
    store: Store, out: str | None, materialize: bool, views: bool, no_register: bool, refresh: bool, list_: bool
) -> None:
    """Write a DuckDB catalog file for BI tools (Superset, Metabase, DBeaver, the duckdb shell): a copy of
    the store's tables plus the convenience views, kept current by ingest and compaction."""
    import pyarrow as pa

    from proflake.bi import catalog as catalogs

    if sum(map(bool, (out, refresh, list_))) != 1:
        raise click.UsageError("give exactly one of --out FILE, --refresh or --list")
    if materialize and views:
        raise click.UsageError("give --materialize (a copy, the default) or --views, not both")
    if list_:
        entries = catalogs.registered_catalogs(store)
        table = pa.table({
            "path": pa.array([e.path for e in entries], pa.string()),
            "mode": pa.array(["materialized" if e.materialize else "views" for e in entries], pa.string()),
            "host": pa.array([e.host for e in entries], pa.string()),
        })
        emit(table, "table", None)
        return
    if refresh:
        store.require()
        reports = catalogs.refresh_catalogs(store, log=say)
        if not reports:
            say("no registered catalog to refresh on this host")
        if any(r.error for r in reports):
            raise SystemExit(ExitCode.FAILURE)
        return
    assert out is not None  # exactly one of --out, --refresh, --list was given
    report = catalogs.build_catalog(store, out, materialize=not views, register=not no_register)
    say(report.summary())
    say(f"lock-down statements for BI connections: {catalogs.init_sql_path(report.path)}")


def _query_text(query: str) -> str:
    if query == "-":
        return sys.stdin.read()
    if query.endswith(".sql"):
        try:
            return Path(query).read_text(encoding="utf-8")
        except OSError as e:
            raise ProflakeError(f"cannot read query file {query!r}: {e.strerror}") from e
    return query

