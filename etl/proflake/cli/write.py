"""Commands that write the store: ingest and compact."""

from __future__ import annotations

import json
import sys
import time

import click

from proflake.cli.common import (
    cli,
    say,
    store_option,
)
from proflake.errors import ExitCode
from proflake.ingestion.batch import Progress
from proflake.sources.settings import S3Config
from proflake.store.store import Store


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
    max_file_mb: float, worker_memory_mb: int, as_json: bool, s3: S3Config,
) -> None:
    """Ingest the stats files under SOURCE: a folder or s3://bucket/prefix holding a job's framework/ tree,
    several jobs, or any folder inside one. Only new or changed files are read."""
    from proflake.operations import ingest as run_ingest

    report = run_ingest(
        source, store, job_id=job, full_refresh=full_refresh, s3=s3,
        wait=wait, workers=workers, max_file_mb=max_file_mb, worker_memory_mb=worker_memory_mb,
        log=say, progress=_progress(),
    )
    for uri in report.unrecognised[:20]:
        say(f"skipped (fits no smdebug layout): {uri}")
    if len(report.unrecognised) > 20:
        say(f"skipped {len(report.unrecognised) - 20} more file(s) that fit no smdebug layout")
    say(report.summary())
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
            say(text)
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
    from proflake.operations import compact as run_compact

    report = run_compact(store, retention_hours=retention_hours, wait=wait)
    say(report.summary())
    if as_json:
        click.echo(json.dumps(report.to_dict(), indent=1))
