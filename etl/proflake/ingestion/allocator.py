"""Arrow's allocator during a run: the C library's malloc, as the parse workers use."""

from __future__ import annotations

import functools
import os
import threading
from collections.abc import Callable
from typing import ParamSpec, TypeVar

import pyarrow as pa

_P = ParamSpec("_P")
_R = TypeVar("_R")


def _on_system_allocator(run: Callable[_P, _R]) -> Callable[_P, _R]:
    """Run with Arrow allocating from the C library's malloc, as the parse workers do (etl/proflake/workers/template.py),
    unless ARROW_DEFAULT_MEMORY_POOL chooses otherwise. pyarrow's default, mimalloc, kept ~10 MB more
    at each write of the run's interval rows, which comes on top of the workers' own peak (process
    tree peak, 1 worker: 317 -> 307 MB at 10k files, 333 -> 317 MB at 100k). Buffers remember the
    pool they came from, so the switch back after the run is safe for what the run returns."""

    @functools.wraps(run)
    def on_system_allocator(*args: _P.args, **kwargs: _P.kwargs) -> _R:
        if os.environ.get("ARROW_DEFAULT_MEMORY_POOL"):
            return run(*args, **kwargs)
        _enter_system_allocator()
        try:
            return run(*args, **kwargs)
        finally:
            _leave_system_allocator()

    return on_system_allocator


# The pool is the process's: runs on several threads (a notebook ingesting two stores) switch it
# once, when the first starts, and give the caller's back when the last ends.
_allocator_lock = threading.Lock()
_allocator_runs = 0
_callers_pool: pa.MemoryPool | None = None


def _enter_system_allocator() -> None:
    global _allocator_runs, _callers_pool
    with _allocator_lock:
        if _allocator_runs == 0:
            _callers_pool = pa.default_memory_pool()
            pa.set_memory_pool(pa.system_memory_pool())
        _allocator_runs += 1


def _leave_system_allocator() -> None:
    global _allocator_runs, _callers_pool
    with _allocator_lock:
        _allocator_runs -= 1
        if _allocator_runs == 0 and _callers_pool is not None:
            pa.set_memory_pool(_callers_pool)
            _callers_pool = None
