"""Bounded queries: a time limit, a memory limit, and Ctrl-C that stops a running DuckDB query.

DuckDB runs a query inside one C++ call: Python's Ctrl-C (SIGINT) handler cannot run until it returns, so
a cross join used to ignore Ctrl-C for minutes. Here the call runs on a worker thread while the calling
thread waits in short, interruptible slices; on Ctrl-C or at the deadline it calls the connection's
``interrupt()``, waits for DuckDB to stop (promptly: it checks between vectors), and raises
``KeyboardInterrupt`` or ``QueryLimitError``.
"""

from __future__ import annotations

import concurrent.futures
import re
import threading
import time
from collections.abc import Callable
from typing import TypeVar

import duckdb

from proflake.errors import QueryError, QueryLimitError, UsageError

T = TypeVar("T")
_SLICE = 0.2  # seconds between checks for Ctrl-C while a query runs
_MEMORY = r"^\s*\d+(\.\d+)?\s*([KMGT]i?B|B|%)?\s*$"  # compiled on first use: not at every start
OOM_MESSAGE = (
    "the query needed more memory than its limit{limit}; raise it with --memory-limit (memory_limit= in "
    "Python), or select fewer rows or columns"
)


def timeout_message(seconds: float) -> str:
    return (
        f"the query ran past its time limit of {seconds:g} s and was stopped; raise it with --timeout "
        "(timeout= in Python; 0 = no limit), or narrow the query"
    )


class Bounds:
    """A time limit (seconds; None or 0 = none) and a memory limit (DuckDB's syntax: '2GB', '512MiB').

    ``interruptible`` (default: when there is a time limit) runs each query on the worker thread so that
    Ctrl-C stops it. Without it a query runs on the caller's thread, as plain DuckDB does: no thread hop
    on the API's hot path (a fetch runs several short queries)."""

    def __init__(
        self, timeout: float | None = None, memory_limit: str | None = None, *, interruptible: bool | None = None
    ) -> None:
        if timeout is not None and timeout < 0:
            raise UsageError(f"--timeout must be 0 (no limit) or a number of seconds, not {timeout}")
        if memory_limit is not None and not re.match(_MEMORY, str(memory_limit), re.IGNORECASE):
            raise UsageError(f"--memory-limit {memory_limit!r} is not a size; use e.g. 2GB, 512MB or 4GiB")
        self.timeout = timeout or None
        self.interruptible = self.timeout is not None if interruptible is None else interruptible
        self.memory_limit = str(memory_limit).strip() if memory_limit else None
        self._pool: concurrent.futures.ThreadPoolExecutor | None = None

    def configure(self, con: duckdb.DuckDBPyConnection) -> None:
        """Apply the memory limit to a connection (before its configuration is locked)."""
        if self.memory_limit:
            try:
                con.execute(f"SET memory_limit = '{self.memory_limit}'")
            except duckdb.Error as e:
                raise UsageError(f"--memory-limit {self.memory_limit!r} is not a size DuckDB accepts: {e}") from e

    def run(self, con: duckdb.DuckDBPyConnection, call: Callable[[], T]) -> T:
        """``call()`` (a query on ``con``), stopped at the time limit or on Ctrl-C."""
        if self.timeout is None and (not self.interruptible or threading.current_thread() is not threading.main_thread()):
            # No deadline, and no Ctrl-C to watch for (not asked, or not the main thread, the one it reaches).
            return self._translate(call)
        if self._pool is None:
            self._pool = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="proflake-query")
        future = self._pool.submit(self._translate, call)
        deadline = None if self.timeout is None else time.monotonic() + self.timeout
        try:
            while True:
                wait = _SLICE if deadline is None else min(_SLICE, deadline - time.monotonic())
                if wait <= 0 and self.timeout is not None:  # (only a deadline makes wait <= 0)
                    _stop(con, future)
                    raise QueryLimitError(timeout_message(self.timeout))
                try:
                    return future.result(timeout=wait)
                except concurrent.futures.TimeoutError:
                    continue
        except KeyboardInterrupt:
            _stop(con, future)
            raise

    def _translate(self, call: Callable[[], T]) -> T:
        try:
            return call()
        except (QueryError, duckdb.Error) as e:
            cause = e if isinstance(e, duckdb.Error) else e.__cause__
            if isinstance(cause, duckdb.OutOfMemoryException):
                limit = f" of {self.memory_limit}" if self.memory_limit else " (DuckDB's default: 80% of RAM)"
                raise QueryLimitError(OOM_MESSAGE.format(limit=limit)) from e
            raise

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None


def _stop(con: duckdb.DuckDBPyConnection, future: concurrent.futures.Future) -> None:
    """Interrupt the query and wait until DuckDB has let go of the connection."""
    while True:
        con.interrupt()
        try:
            future.result(timeout=1.0)
            return
        except concurrent.futures.TimeoutError:
            continue  # interrupted before the query began: interrupt again
        except BaseException:  # noqa: BLE001 - DuckDB's InterruptException, the expected outcome
            return
