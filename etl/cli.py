"""The proflake command line: parse options, call one library function, print the result.

Results go to stdout, messages to stderr. Exit codes are ExitCode; every error a user can cause is a
ProflakeError and ends as one line on stderr.
"""

from __future__ import annotations

import functools
import json
import sys
import time
from collections.abc import Callable
from enum import IntEnum
from pathlib import Path
from typing import Any

import click
import pyarrow as pa

from etl.api import FETCH_METHODS, PROFILERS, SORT_KEYS, FetchResult, Profiles
from etl.errors import ProflakeError
from etl.ingest import Progress
from etl.output import FORMATS, render
from etl.s3 import S3Config
from etl.store import Store, default_store_location


class ExitCode(IntEnum):
    OK = 0
    FAILURE = 1  # nothing useful was done: bad store, bad source, bad query
    USAGE = 2  # the command line itself was wrong (click uses 2 as well)
    PARTIAL = 3  # ingest finished, but some stats files could not be ingested
    BUSY = 4  # another ingest or compaction holds the store's writer lock


def _say(message: str) -> None:
    click.echo(message, err=True)


def _emit(table: pa.Table, fmt: str, output: str | None) -> None:
    data = render(table, fmt)
    if output:
        try:
            Path(output).write_bytes(data)
        except OSError as e:
            raise ProflakeError(f"cannot write {output!r}: {e.strerror}") from e
        _say(f"wrote {table.num_rows} row(s) to {output}")
    else:
        sys.stdout.buffer.write(data)
        sys.stdout.buffer.flush()


# -- shared options ----------------------------------------------------------------------------------
def store_option(f: Callable) -> Callable:
    """--store, plus the S3 settings a store or source on S3 may need; hands the command a Store."""

    @functools.wraps(f)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        s3 = S3Config.from_env(kwargs.pop("endpoint_url"), kwargs.pop("aws_profile"))
        kwargs["store"] = Store(kwargs.pop("store"), s3=s3)
        return f(*args, **kwargs)

    wrapper = click.option(
        "--aws-profile", metavar="NAME", help="AWS profile for s3:// stores and sources (default: the standard chain)."
    )(wrapper)
    wrapper = click.option(
        "--endpoint-url",
        metavar="URL",
        help="S3 endpoint for MinIO and other S3-compatible servers (default: $AWS_ENDPOINT_URL_S3 or $AWS_ENDPOINT_URL).",
    )(wrapper)
    return click.option(
        "--store",
        default=None,
        metavar="PATH|S3URI",
        help=f"The store: a folder or s3://bucket/prefix (default: $PROFLAKE_STORE or {default_store_location()!s}).",
    )(wrapper)


def output_options(f: Callable) -> Callable:
    f = click.option("--output", "-o", metavar="FILE", help="Write the result to FILE instead of stdout.")(f)
    return click.option(
        "--format", "fmt", type=click.Choice(FORMATS), default="table", show_default=True, help="Output format."
    )(f)


def scope_options(f: Callable, *, with_node: bool = True) -> Callable:
    f = click.option("--profiler", type=click.Choice(PROFILERS), help="Only this profiler's data.")(f)
    if with_node:
        f = click.option(
            "--node", metavar="ID", help="Only this node; 'any' = the first node, as smdebug's node_id='any'."
        )(f)
    f = click.option("--all-jobs", is_flag=True, help="Use every job in the store.")(f)
    return click.option("--job", metavar="ID", help="The training job (needed when the store holds several).")(f)


class _ProflakeGroup(click.Group):
    """Turns proflake's errors into one line on stderr and a documented exit code, for every command."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except ProflakeError as e:
            _say(f"proflake: error: {e}")
            ctx.exit(e.exit_code)
        except BrokenPipeError:
            sys.stderr.close()
            ctx.exit(ExitCode.OK)


def scope_options_without_node(f: Callable) -> Callable:
    return scope_options(f, with_node=False)


@click.group(cls=_ProflakeGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="proflake")
def cli() -> None:
    """proflake: smdebug Python profiling stats as Delta Lake tables, queried with DuckDB SQL."""


# -- ingest -----------------------------------------------------------------------------------------
@cli.command()
@click.argument("source")
@store_option
@click.option("--job", metavar="ID", help="Job id for every interval (default: derived from the path above framework/).")
@click.option("--full-refresh", is_flag=True, help="Rebuild the store from SOURCE instead of adding what is new.")
@click.option("--wait", type=click.FloatRange(min=0), default=0, show_default=True, help="Seconds to wait for another run's lock.")
@click.option("--workers", type=click.IntRange(min=1), help="Parse worker processes (default: one per core).")
@click.option("--max-file-mb", type=click.FloatRange(min=0), default=512, show_default=True,
              help="Quarantine stats files larger than this instead of reading them.")
@click.option("--worker-memory-mb", type=click.IntRange(min=64), default=2048, show_default=True,
              help="Address-space limit of each parse worker; a file needing more is quarantined.")
@click.option("--json", "as_json", is_flag=True, help="Print the run summary as JSON on stdout.")
def ingest(
    source: str, store: Store, job: str | None, full_refresh: bool, wait: float, workers: int | None,
    max_file_mb: float, worker_memory_mb: int, as_json: bool,
) -> None:
    """Ingest the stats files under SOURCE: a folder or s3://bucket/prefix holding a job's framework/ tree,
    several jobs, or any folder inside one. Only new or changed files are read."""
    from etl.ingest import ingest as run_ingest

    report = run_ingest(
        source, store, job_id=job, full_refresh=full_refresh, s3=store.s3 or S3Config.from_env(),
        wait=wait, workers=workers, max_file_mb=max_file_mb, worker_memory_mb=worker_memory_mb,
        log=_say, progress=_progress(),
    )
    for uri in report.unrecognised[:20]:
        _say(f"skipped (fits no smdebug layout): {uri}")
    if len(report.unrecognised) > 20:
        _say(f"skipped {len(report.unrecognised) - 20} more file(s) that fit no smdebug layout")
    _say(report.summary())
    if as_json:
        click.echo(json.dumps(report.to_dict(), indent=1))
    if report.partial:
        raise SystemExit(ExitCode.PARTIAL)


class _TerminalProgress(Progress):
    """A redrawn status line on a terminal; a plain log line every LOG_EVERY seconds otherwise."""

    LOG_EVERY = 15.0

    def __init__(self, tty: bool) -> None:
        self.tty = tty
        self.total_files = self.total_bytes = self.files = self.nbytes = 0
        self.started = self.last = time.monotonic()

    def listing(self, files: int) -> None:
        self._show(f"listing: {files} object(s)", force=False)

    def reading(self, total_files: int, total_bytes: int) -> None:
        self.total_files, self.total_bytes = total_files, total_bytes
        self.started = time.monotonic()

    def advance(self, files: int, nbytes: int) -> None:
        self.files += files
        self.nbytes += nbytes
        elapsed = max(time.monotonic() - self.started, 1e-6)
        rate = self.files / elapsed
        eta = (self.total_files - self.files) / rate if rate else 0
        width = 24
        filled = int(width * self.files / self.total_files) if self.total_files else width
        bar = "#" * filled + "-" * (width - filled) if self.tty else ""
        self._show(
            f"reading [{bar}] {self.files}/{self.total_files} files, {self.nbytes / 1e6:.1f}/{self.total_bytes / 1e6:.1f} MB, "
            f"{rate:.0f} files/s, ETA {eta:.0f} s".replace("[] ", ""),
            force=False,
        )

    def writing(self, what: str) -> None:
        self._show(f"writing: {what}", force=True)

    def done(self) -> None:
        if self.tty:
            click.echo("\r\033[K", err=True, nl=False)

    def _show(self, text: str, force: bool) -> None:
        now = time.monotonic()
        if self.tty:
            if force or now - self.last >= 0.1:
                click.echo(f"\r\033[K{text}", err=True, nl=False)
                self.last = now
        elif force or now - self.last >= self.LOG_EVERY:
            _say(text)
            self.last = now


def _progress() -> Progress:
    return _TerminalProgress(tty=sys.stderr.isatty())


@cli.command()
@store_option
@click.option("--retention-hours", type=click.IntRange(min=0), default=168, show_default=True,
              help="Vacuum only files unreferenced for longer than this (readers of older versions keep working).")
@click.option("--wait", type=click.FloatRange(min=0), default=0, show_default=True, help="Seconds to wait for another run's lock.")
@click.option("--json", "as_json", is_flag=True, help="Print the summary as JSON on stdout.")
def compact(store: Store, retention_hours: int, wait: float, as_json: bool) -> None:
    """Rewrite small files into large ones and vacuum old ones, without changing any query result."""
    from etl.compact import compact as run_compact

    report = run_compact(store, retention_hours=retention_hours, wait=wait)
    _say(report.summary())
    if as_json:
        click.echo(json.dumps(report.to_dict(), indent=1))


@cli.command()
@store_option
@click.option("--kind", metavar="KIND", help="Only errors of this kind (cprofile, layout, crash, ...).")
@output_options
def errors(store: Store, kind: str | None, fmt: str, output: str | None) -> None:
    """List the quarantine: stats files that could not be ingested, and why (retried every run)."""
    _emit(Profiles(store).errors(kind), fmt, output)


@cli.command()
@store_option
@output_options
def batches(store: Store, fmt: str, output: str | None) -> None:
    """List ingest runs: time, files, rows, bytes, duration and status."""
    _emit(Profiles(store).batches(), fmt, output)


# -- listings ---------------------------------------------------------------------------------------
@cli.command()
@store_option
@click.option("--profiler", type=click.Choice(PROFILERS), help="Only jobs with this profiler's data.")
@output_options
def jobs(store: Store, profiler: str | None, fmt: str, output: str | None) -> None:
    """List the training jobs in the store."""
    _emit(Profiles(store).jobs(profiler), fmt, output)


@cli.command()
@store_option
@scope_options_without_node
@output_options
def nodes(store: Store, job: str | None, all_jobs: bool, profiler: str | None, fmt: str, output: str | None) -> None:
    """List the node ids that have profiling stats (sorted, distinct)."""
    ids = Profiles(store).nodes(job=job, all_jobs=all_jobs, profiler=profiler)
    _emit(pa.table({"node_id": pa.array(ids, pa.string())}), fmt, output)


@cli.command(name="list")
@store_option
@scope_options
@output_options
def list_(
    store: Store, job: str | None, all_jobs: bool, node: str | None, profiler: str | None, fmt: str, output: str | None
) -> None:
    """List every profiled interval with its metadata and source path."""
    table = Profiles(store).list_profile_stats(job=job, all_jobs=all_jobs, node=node, profiler=profiler)
    _emit(table, fmt, output)


# -- fetch ------------------------------------------------------------------------------------------
@cli.group()
def fetch() -> None:
    """Answer one of smdebug's fetch methods from the store."""


def fetch_options(f: Callable) -> Callable:
    f = click.option("--prof", metavar="FILE", help="cProfile: also write the aggregate as a .prof file (pstats, snakeviz, tuna).")(f)
    f = click.option("--sort", type=click.Choice(SORT_KEYS), default="cumtime", show_default=True, help="Order rows by.")(f)
    f = click.option("--top", type=click.IntRange(min=1), help="Keep the top N functions (per group); default all.")(f)
    f = click.option("--per-node", is_flag=True, help="Keep node_id as a group key instead of adding nodes up.")(f)
    f = output_options(f)
    f = scope_options(f)
    return store_option(f)


def _run_fetch(method: str, options: dict[str, Any], **arguments: Any) -> None:
    profiles = Profiles(options.pop("store"))
    fmt, output, prof = options.pop("fmt"), options.pop("output"), options.pop("prof")
    result = profiles.fetch(method, **options, callers=bool(prof), **arguments)
    if result.empty:
        _say(f"no {result.profiler} intervals matched {method.replace('_', '-')}")
    elif method == "by_job_phase" and "training_loop" not in {g[-1] for g in result.groups()}:
        _say("job phase training_loop: no intervals")
    if prof:
        _write_prof(result, prof)
    _emit(result.table, fmt, output)


def _write_prof(result: FetchResult, path: str) -> None:
    if result.profiler != "cprofile":
        raise ProflakeError("--prof needs cProfile data; this result is pyinstrument")
    if result.group_by:
        raise ProflakeError("--prof writes one aggregate; use it with a fetch that does not group (no --per-node, not by-*-phase)")
    result.write_prof(path)
    _say(f"wrote {path}")


@fetch.command("by-time")
@click.argument("start", type=float)
@click.argument("end", type=float)
@fetch_options
def by_time(start: float, end: float, **options: Any) -> None:
    """Intervals overlapping [START, END] (seconds since the epoch), including one containing the window."""
    _run_fetch("by_time", options, start_time_s=start, end_time_s=end)


@fetch.command("by-step")
@click.argument("start_step")
@click.argument("end_step", required=False)
@click.option("--mode", default="train", show_default=True, help="Mode of both ends (train, eval, ... or TRAIN, EVAL, ...).")
@click.option("--start-phase", default="stepstart", show_default=True, help="Phase of the start step.")
@click.option("--end-phase", default="stepend", show_default=True, help="Phase of the end step.")
@fetch_options
def by_step(start_step: str, end_step: str | None, mode: str, start_phase: str, end_phase: str, **options: Any) -> None:
    """Intervals in steps START_STEP..END_STEP (default START_STEP) of one mode; '*' as END_STEP = to the end."""
    _run_fetch(
        "by_step", options, start_step=start_step, end_step=end_step, mode=mode, start_phase=start_phase, end_phase=end_phase
    )


@fetch.command("between-modes")
@click.argument("start_mode")
@click.argument("end_mode")
@fetch_options
def between_modes(start_mode: str, end_mode: str, **options: Any) -> None:
    """Intervals that start in START_MODE and end in END_MODE (e.g. train eval)."""
    _run_fetch("between_modes", options, start_mode=start_mode, end_mode=end_mode)


@fetch.command("pre-step-zero")
@fetch_options
def pre_step_zero(**options: Any) -> None:
    """Intervals profiled from the start of the job until step 0."""
    _run_fetch("pre_step_zero", options)


@fetch.command("post-hook-close")
@fetch_options
def post_hook_close(**options: Any) -> None:
    """Intervals profiled after the hook closed, to the end of the job."""
    _run_fetch("post_hook_close", options)


@fetch.command("by-training-phase")
@fetch_options
def by_training_phase(**options: Any) -> None:
    """Functions aggregated per (start_mode, end_mode) pair present."""
    _run_fetch("by_training_phase", options)


@fetch.command("by-job-phase")
@fetch_options
def by_job_phase(**options: Any) -> None:
    """Functions aggregated per job phase: initialization, training_loop, finalization, whole_job."""
    _run_fetch("by_job_phase", options)


assert {c.replace("-", "_") for c in fetch.commands} == set(FETCH_METHODS)


# -- sql --------------------------------------------------------------------------------------------
@cli.command()
@click.argument("query", required=False)
@store_option
@click.option("--param", "params", multiple=True, metavar="NAME=VALUE", help="Bind $NAME to VALUE (repeatable).")
@click.option("--schema", "show_schema", is_flag=True, help="Print the tables and views with their columns and types.")
@output_options
def sql(query: str | None, store: Store, params: tuple[str, ...], show_schema: bool, fmt: str, output: str | None) -> None:
    """Run QUERY (SQL text, a .sql file, or - for stdin) over the store's tables and views, read-only:
    only queries run; $NAME parameters are bound by DuckDB."""
    profiles = Profiles(store)
    if show_schema:
        if query is not None or params:
            raise click.UsageError("--schema takes no QUERY or --param")
        _emit(profiles.sql_schema(), fmt, output)
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
    _emit(profiles.sql(text, bound), fmt, output)


@cli.command()
@store_option
@click.option("--out", metavar="FILE", help="Write the catalog to FILE (e.g. proflake.duckdb) and register it in the store.")
@click.option("--materialize", is_flag=True, help="Copy the data into the catalog (required for an S3 store).")
@click.option("--no-register", is_flag=True, help="Do not register FILE for refresh after each ingest and compaction.")
@click.option("--refresh", is_flag=True, help="Rewrite every catalog registered in the store.")
@click.option("--list", "list_", is_flag=True, help="List the catalogs registered in the store.")
def catalog(store: Store, out: str | None, materialize: bool, no_register: bool, refresh: bool, list_: bool) -> None:
    """Write a DuckDB catalog file for BI tools (Superset, Metabase, DBeaver, the duckdb shell): views over
    the store's tables plus the convenience views, kept current by ingest and compaction."""
    from etl import catalog as catalogs

    if sum(map(bool, (out, refresh, list_))) != 1:
        raise click.UsageError("give exactly one of --out FILE, --refresh or --list")
    if list_:
        entries = catalogs.registered_catalogs(store)
        table = pa.table({
            "path": pa.array([e.path for e in entries], pa.string()),
            "mode": pa.array(["materialized" if e.materialize else "views" for e in entries], pa.string()),
            "host": pa.array([e.host for e in entries], pa.string()),
        })
        _emit(table, "table", None)
        return
    if refresh:
        store.require()
        reports = catalogs.refresh_catalogs(store, log=_say)
        if not reports:
            _say("no registered catalog to refresh on this host")
        if any(r.error for r in reports):
            raise SystemExit(ExitCode.FAILURE)
        return
    report = catalogs.build_catalog(store, out, materialize=materialize, register=not no_register)
    _say(report.summary())
    _say(f"lock-down statements for BI connections: {catalogs.init_sql_path(report.path)}")


def _query_text(query: str) -> str:
    if query == "-":
        return sys.stdin.read()
    if query.endswith(".sql"):
        try:
            return Path(query).read_text(encoding="utf-8")
        except OSError as e:
            raise ProflakeError(f"cannot read query file {query!r}: {e.strerror}") from e
    return query


# -- demo -------------------------------------------------------------------------------------------
@cli.command()
@store_option
@click.option(
    "--out", default="./proflake-sample-job", show_default=True, metavar="DIR", help="Where to write the sample job's stats files."
)
def demo(store: Store, out: str) -> None:
    """Generate a sample training job's profiles, ingest them, and show a few fetch results."""
    from etl.demo import run_demo

    run_demo(store, Path(out), stdout=lambda text: click.echo(text), stderr=_say)


def main() -> None:
    cli(prog_name="proflake")


if __name__ == "__main__":
    main()
