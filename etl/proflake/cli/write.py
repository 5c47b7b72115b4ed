"""Commands that write the store: ingest and compact."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import click

from proflake.cli.common import (
    cli,
    say,
    store_option,
)
from proflake.cli.signals import graceful_termination
from proflake.errors import ExitCode
from proflake.formats import FORMATS

if TYPE_CHECKING:
    from proflake.sources.settings import S3Config
    from proflake.store.store import Store


@cli.command()
@click.argument("source")
@store_option
@click.option("--job", metavar="ID", help="Job id for every interval (default: derived from the path above framework/).")
@click.option("--full-refresh", is_flag=True, help="Parse every file under SOURCE again, replacing in one commit what was ingested from under SOURCE before (other sources' jobs stay).")
@click.option("--wait", type=click.FloatRange(min=0), default=0, show_default=True, help="Seconds to wait for another run's lock.")
@click.option("--workers", type=click.IntRange(min=1), help="Parse worker processes (default: one per core).")
@click.option("--max-file-mb", type=click.FloatRange(min=0), default=512, show_default=True,
              help="Quarantine stats files larger than this instead of reading them.")
@click.option("--worker-memory-mb", type=click.IntRange(min=64), default=2048, show_default=True,
              help="Address-space limit of each parse worker; a file needing more is quarantined.")
@click.option("--executor", type=click.Choice(["local", "inline", "spark"]), default="local", show_default=True,
              help="Who parses: this machine's worker pool; this process itself (inline: no crash isolation, memory limit or timeout, for debugging a parser); or Spark tasks on the active SparkSession or a new one (the proflake[spark] extra; docs/spark.md).")
@click.option("--spark-min-files", type=click.IntRange(min=0), default=10_000, show_default=True, metavar="N",
              help="With --executor spark: below N new files, parse on the local pool instead (a Spark job costs seconds before its first file).")
@click.option("--json", "as_json", is_flag=True, help="Print the run summary as JSON on stdout.")
@click.option("--allow-empty", is_flag=True, help="Succeed when SOURCE holds no stats file (a nightly run over a prefix that may be empty).")
@click.option("--node", metavar="ID", help="Plain files: SOURCE is a profile file of any format proflake reads (docs/formats.md) or a folder of them, all of node ID (needs --job).")
@click.option("--step", type=int, help="Plain files: the first file's step (default 0); the next files, in name order, the steps after it (unless their names or --pattern say theirs).")
@click.option("--mode", metavar="MODE", help="Plain files: the steps' mode (default train).")
@click.option("--format", "format_name", metavar="NAME", help=f"Plain files: read every file as this format ({', '.join(FORMATS)}) instead of detecting it.")
@click.option("--sample-rate", type=float, metavar="HZ", help="Plain files: samples per second of collapsed stacks or speedscope profiles whose file does not say (py-spy's default: 100).")
@click.option("--pattern", metavar="PATTERN", help="Plain files: where node, step and mode are in the paths below SOURCE, e.g. '{node}/step-{step}.*' (docs/formats.md).")
def ingest(
    source: str, store: Store, job: str | None, full_refresh: bool, wait: float, workers: int | None,
    max_file_mb: float, worker_memory_mb: int, as_json: bool, allow_empty: bool, node: str | None,
    step: int | None, mode: str | None, s3: S3Config, executor: str, spark_min_files: int,
    format_name: str | None, sample_rate: float | None, pattern: str | None,
) -> None:
    """Ingest the stats files under SOURCE: a folder or s3://bucket/prefix holding a job's framework/ tree,
    several jobs, or any folder inside one. Only new or changed files are read. With --job and --node,
    SOURCE is a plain profile file (cProfile, pyinstrument, speedscope, py-spy, austin, collapsed stacks:
    docs/formats.md), or a folder of them."""
    from proflake.cli.progress import progress_for_stderr
    from proflake.operations import ingest as run_ingest

    target: object = source
    if node is not None or pattern is not None:
        from proflake.sources.plain import PlainFilesSource

        if job is None:
            raise click.UsageError(f"plain files need --job ID as well as {'--node ID' if node is not None else '--pattern'}")
        target = PlainFilesSource(source, node_id=node, step=step or 0, mode=mode or "train", format_name=format_name,
                                  sample_rate_hz=sample_rate, pattern=pattern)
        for file in target.files:
            say(f"{file.path}: {file.format}, node {file.node_id}, {file.mode} step {file.step}, "
                f"times from its {file.time_source}; time in {file.unit}")
        for skipped in target.skipped[:20]:
            say(f"skipped (no format proflake reads{', or not --pattern' if pattern else ''}): {skipped}")
    elif step is not None or mode is not None or format_name is not None or sample_rate is not None:
        raise click.UsageError("--step, --mode, --format and --sample-rate are for plain files, with --job and --node")
    progress = progress_for_stderr()
    try:
        with graceful_termination():
            report = run_ingest(
                target, store, job_id=job, full_refresh=full_refresh, s3=s3, allow_empty=allow_empty,
                wait=wait, workers=workers, max_file_mb=max_file_mb, worker_memory_mb=worker_memory_mb,
                log=progress.log, progress=progress, warn_unrecognised=False,
                executor=executor, spark_min_files=spark_min_files,
            )
    finally:
        progress.done()
    for uri in report.unrecognised[:20]:
        say(f"skipped (fits no smdebug layout): {uri}")
    if len(report.unrecognised) > 20:
        say(f"skipped {len(report.unrecognised) - 20} more file(s) that fit no smdebug layout")
    say(report.summary())
    if as_json:
        click.echo(json.dumps(report.to_dict(), indent=1))
    if report.partial:
        raise SystemExit(ExitCode.PARTIAL)


@cli.command()
@click.argument("source")
@store_option
@click.option("--yes", is_flag=True, help="Do it: without --yes, only say what would be deleted.")
@click.option("--wait", type=click.FloatRange(min=0), default=0, show_default=True, help="Seconds to wait for another run's lock.")
@click.option("--workers", type=click.IntRange(min=1), help="Parse worker processes (default: one per core).")
@click.option("--json", "as_json", is_flag=True, help="Print the plan (without --yes) or the run summary as JSON on stdout.")
def rebuild(source: str, store: Store, yes: bool, wait: float, workers: int | None, as_json: bool, s3: S3Config) -> None:
    """Rebuild the WHOLE store from SOURCE: parse every file under it again and delete every interval that
    came from elsewhere (other sources' jobs), in one commit. Without --yes it only lists what it would
    delete. To rebuild only what SOURCE covers, use 'ingest SOURCE --full-refresh'."""
    from proflake.ingestion.rebuild import rebuild_plan
    from proflake.operations import rebuild as run_rebuild
    from proflake.sources import open_source

    src = open_source(source, s3)
    plan = rebuild_plan(src, store)
    for line in plan.lines():
        say(line)
    if not yes:
        say("nothing changed: pass --yes to rebuild")
        if as_json:
            click.echo(json.dumps(plan.to_dict(), indent=1))
        return
    with graceful_termination():
        report = run_rebuild(src, store, s3=s3, wait=wait, workers=workers, log=say, allow_empty=False)
    say(report.summary())
    if as_json:
        click.echo(json.dumps(report.to_dict(), indent=1))
    if report.partial:
        raise SystemExit(ExitCode.PARTIAL)


@cli.command()
@store_option
@click.option("--retention-hours", type=click.IntRange(min=0), default=168, show_default=True,
              help="Vacuum only files unreferenced for longer than this (readers of older versions keep working).")
@click.option("--wait", type=click.FloatRange(min=0), default=0, show_default=True, help="Seconds to wait for another run's lock.")
@click.option("--json", "as_json", is_flag=True, help="Print the summary as JSON on stdout.")
def compact(store: Store, retention_hours: int, wait: float, as_json: bool) -> None:
    """Rewrite small files into large ones and vacuum old ones, without changing any query result."""
    from proflake.operations import compact as run_compact

    with graceful_termination():
        report = run_compact(store, retention_hours=retention_hours, wait=wait)
    say(report.summary())
    if as_json:
        click.echo(json.dumps(report.to_dict(), indent=1))
