"""The ingest's progress on stderr: a rich progress bar on a terminal, a log line every 15 s otherwise.

Messages logged while the bar is drawn are printed above it (never glued to it); the bar is removed
when the run ends. Implements the methods of ``proflake.ingestion`` 's ``Progress``.
"""

from __future__ import annotations

import sys
import time
from typing import Any

import click


class LogProgress:
    """For a pipe or a log file: a plain line every LOG_EVERY seconds, and each step of the write."""

    LOG_EVERY = 15.0

    def __init__(self) -> None:
        self.total_files = self.total_bytes = self.files = self.nbytes = 0
        self.started = self.last = time.monotonic()

    def log(self, message: str) -> None:
        click.echo(message, err=True)

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
        self._show(
            f"reading {self.files}/{self.total_files} files, {self.nbytes / 1e6:.1f}/{self.total_bytes / 1e6:.1f} MB, "
            f"{rate:.0f} files/s, ETA {eta:.0f} s",
            force=False,
        )

    def writing(self, what: str) -> None:
        self._show(f"writing: {what}", force=True)

    def done(self) -> None:
        pass

    def _show(self, text: str, force: bool) -> None:
        now = time.monotonic()
        if force or now - self.last >= self.LOG_EVERY:
            self.log(text)
            self.last = now


class BarProgress:
    """For a terminal: rich's progress bar, started at the first report and removed by ``done``."""

    def __init__(self, console: Any = None) -> None:
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

        self.console = console or Console(file=sys.stderr, highlight=False, markup=False, emoji=False)
        self.bar = Progress(
            TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TextColumn("files, {task.fields[mb]}"),
            TimeRemainingColumn(), console=self.console, transient=True,
        )
        self.task: Any = None
        self.total_mb = self.read_bytes = 0.0

    def _task(self) -> Any:
        if self.task is None:
            self.bar.start()
            self.task = self.bar.add_task("listing", total=None, mb="")
        return self.task

    def log(self, message: str) -> None:
        if self.task is None:
            click.echo(message, err=True)
        else:
            self.bar.console.print(message, markup=False, highlight=False, soft_wrap=True)

    def listing(self, files: int) -> None:
        self.bar.update(self._task(), description=f"listing {files:,} object(s)")

    def reading(self, total_files: int, total_bytes: int) -> None:
        self.total_mb = total_bytes / 1e6
        self.bar.update(self._task(), description="reading", total=total_files, completed=0, mb=f"0.0/{self.total_mb:.1f} MB")

    def advance(self, files: int, nbytes: int) -> None:
        self.read_bytes += nbytes
        self.bar.update(self._task(), advance=files, mb=f"{self.read_bytes / 1e6:.1f}/{self.total_mb:.1f} MB")

    def writing(self, what: str) -> None:
        self.bar.update(self._task(), description=f"writing: {what}")

    def done(self) -> None:
        if self.task is not None:
            self.bar.stop()
            self.task = None


def progress_for_stderr() -> LogProgress | BarProgress:
    return BarProgress() if sys.stderr.isatty() else LogProgress()
