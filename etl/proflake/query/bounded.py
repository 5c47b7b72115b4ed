"""Bounded queries: a time limit, a memory limit, and Ctrl-C that stops a running DuckDB query.

DuckDB runs a query inside one C++ call: Python's Ctrl-C (SIGINT) handler cannot run until it returns, so
a cross join used to ignore Ctrl-C for minutes. Here the call runs on a worker thread while the calling
thread waits in short, interruptible slices; on Ctrl-C or at the deadline it calls the connection's
``interrupt()``, waits for DuckDB to stop (promptly: it checks between vectors), and raises
``KeyboardInterrupt`` or ``QueryLimitError``.

Two things DuckDB's own checks miss, measured with ``SELECT range(100000000)`` (one row, one 800 MB list
built inside one function call): its memory limit counts the buffer manager, not such values nor the
result being handed to Python (the process grew to 5.6 GB under ``--memory-limit 100MB``), and
``interrupt()`` waits for that call to return (Ctrl-C did nothing for minutes). So while a query with a
memory limit runs, the waiting thread also watches the process's resident memory and interrupts the
query once it grows by more than twice the limit plus 256 MB; and a stop that DuckDB has not honoured
after ``GRACE_S`` abandons the query: the error raised says so (``abandoned``), and the CLI, whose
process holds nothing but that read-only query, then exits at once with its exit code. The memory is
read every ``_MEMORY_SLICE`` (a read of /proc/self/statm costs ~10 us), and a stopped query that goes on
growing by the limit again is abandoned at once, not after the grace: one such call allocates ~1 GB a
second, so checks 0.2 s apart and a 2 s grace let the process reach 2.3 GB under ``--memory-limit
100MB`` on a loaded machine, and a bound that depends on the machine's speed is no bound.
"""

from __future__ import annotations

import concurrent.futures
import os
import re
import threading
import time
from collections.abc import Callable
from typing import TypeVar

import duckdb

from proflake.errors import QueryError, QueryLimitError, UsageError

T = TypeVar("T")
_SLICE = 0.2  # seconds between checks for Ctrl-C while a query runs
_MEMORY_SLICE = 0.02  # seconds between reads of the process's memory while a memory-limited query runs
GRACE_S = 2.0  # how long a stopped query may take to let go before it is abandoned
_HEADROOM = 256 * 1024 * 1024  # memory beyond twice the limit before the watchdog stops a query
_UNITS = {"": 1, "B": 1, "KB": 10**3, "MB": 10**6, "GB": 10**9, "TB": 10**12,
          "KIB": 2**10, "MIB": 2**20, "GIB": 2**30, "TIB": 2**40}
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
        """``call()`` (a query on ``con``), stopped at the time limit, on Ctrl-C, or when the process
        outgrows the memory limit (see the module's docstring)."""
        watched = self.memory_limit is not None and threading.current_thread() is threading.main_thread()
        if self.timeout is None and not watched and (
            not self.interruptible or threading.current_thread() is not threading.main_thread()
        ):
            # No deadline, and no Ctrl-C to watch for (not asked, or not the main thread, the one it reaches).
            return self._translate(call)
        if self._pool is None:
            self._pool = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="proflake-query")
        future = self._pool.submit(self._translate, call)
        deadline = None if self.timeout is None else time.monotonic() + self.timeout
        ceiling = None
        if watched and (start := resident_bytes()) is not None and (limit := limit_bytes(self.memory_limit)):
            ceiling = start + 2 * limit + _HEADROOM
        step = _SLICE if ceiling is None else _MEMORY_SLICE
        try:
            while True:
                wait = step if deadline is None else min(step, deadline - time.monotonic())
                if wait <= 0 and self.timeout is not None:  # (only a deadline makes wait <= 0)
                    self._stop(con, future, QueryLimitError(timeout_message(self.timeout)))
                if ceiling is not None and (resident_bytes() or 0) > ceiling:
                    limit_text = f" of {self.memory_limit}"
                    hard = ceiling + (limit_bytes(self.memory_limit) or 0)
                    self._stop(con, future, QueryLimitError(OOM_MESSAGE.format(limit=limit_text)), hard)
                try:
                    return future.result(timeout=wait)
                except concurrent.futures.TimeoutError:
                    continue
        except KeyboardInterrupt:
            self._stop(con, future, KeyboardInterrupt())
            raise

    def _stop(
        self, con: duckdb.DuckDBPyConnection, future: concurrent.futures.Future, error: BaseException,
        hard_ceiling: int | None = None,
    ) -> None:
        """Interrupt the query; raise ``error`` once DuckDB has let go of the connection, or, when it has
        not after GRACE_S (or the process outgrew ``hard_ceiling`` bytes meanwhile), with
        ``error.abandoned = True`` (the worker thread is left running, and this Bounds starts a new one
        for the next query)."""
        if not _stop(con, future, GRACE_S, hard_ceiling):
            error.abandoned = True  # type: ignore[attr-defined]
            self._pool = None  # its thread still runs the abandoned query
        raise error

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


def _stop(
    con: duckdb.DuckDBPyConnection, future: concurrent.futures.Future, grace: float, hard_ceiling: int | None = None
) -> bool:
    """Interrupt the query and wait until DuckDB has let go of the connection: True; False when it has
    not within ``grace`` seconds (it is inside one long call that does not check for interrupts), or
    as soon as the process's memory passes ``hard_ceiling`` bytes."""
    give_up = time.monotonic() + grace
    step = _SLICE if hard_ceiling is None else _MEMORY_SLICE
    while True:
        con.interrupt()  # again each slice: a query interrupted before it began starts anyway
        try:
            future.result(timeout=min(step, max(0.0, give_up - time.monotonic())))
            return True
        except concurrent.futures.TimeoutError:
            if time.monotonic() >= give_up:
                return False
            if hard_ceiling is not None and (resident_bytes() or 0) > hard_ceiling:
                return False
        except BaseException:  # noqa: BLE001 - DuckDB's InterruptException, the expected outcome
            return True


def resident_bytes() -> int | None:
    """This process's resident memory (Linux: /proc/self/statm); None where it cannot be read."""
    try:
        with open("/proc/self/statm", "rb") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return None


def limit_bytes(limit: str | None) -> int | None:
    """A DuckDB memory limit ('100MB', '4GiB', '50%') in bytes; None for what it cannot size."""
    match = re.match(r"^\s*(\d+(?:\.\d+)?)\s*([A-Za-z%]*)\s*$", limit or "")
    if not match:
        return None
    number, unit = float(match.group(1)), match.group(2).upper()
    if unit == "%":
        try:
            return int(number / 100 * os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
        except (OSError, ValueError):
            return None
    return int(number * _UNITS[unit]) if unit in _UNITS else None
