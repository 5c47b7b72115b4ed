"""Parse workers on threads of the caller's own process: ``ParsePool(inline=True)``, ``--executor inline``.

A worker process costs its start-up, ~0.3 s of CPU importing numpy, pyarrow and the readers, and a run
that starts in a new process (a CLI run, a nightly batch) pays it every time. An inline worker runs the
same loop (``proflake.workers.worker.serve``) over the same pipes and protocol, on a thread: the pool
deals it stripes, it writes the same segment files, and the store ends the same. What it does not give
is what a process gives: no crash isolation (a decoder crash takes the caller with it), no memory limit
(``worker_memory_mb`` only words a MemoryError's message), no timeout (a hung parse hangs the run), and
no parallel parsing (the threads share the interpreter's lock). For debugging a parser (a breakpoint
inside it), and for tests whose subject is not the worker processes (the kill sweeps kill the caller at
its commit points; the workers' own promises keep their real-process tests).

``InlineProcess`` is driven as the pool drives the ``subprocess.Popen`` of a worker: ``stdin`` and
``stdout`` (pipe ends the pool takes over), ``poll()``, ``wait()``, ``kill()``, ``returncode``, ``pid``.
"""

from __future__ import annotations

import os
import signal
import subprocess
import threading
from multiprocessing.connection import Connection


class _PipeEnd:
    """One end of a pipe, as a Popen's ``stdin`` or ``stdout`` is to the pool: ``fileno()``, ``close()``."""

    def __init__(self, fd: int) -> None:
        self._fd: int | None = fd

    def fileno(self) -> int:
        if self._fd is None:
            raise ValueError("the pipe end is closed")
        return self._fd

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


class InlineProcess:
    """A parse worker's loop on a daemon thread of this process, with a process's handle."""

    def __init__(self, memory_mb: int, spec: str) -> None:
        tasks_read, tasks_write = os.pipe()
        results_read, results_write = os.pipe()
        self.stdin, self.stdout = _PipeEnd(tasks_write), _PipeEnd(results_read)
        self.pid = os.getpid()
        self.returncode: int | None = None
        self._thread = threading.Thread(
            target=self._serve, args=(tasks_read, results_write, memory_mb, spec), name="proflake-inline-worker", daemon=True
        )
        self._thread.start()

    def _serve(self, tasks_read: int, results_write: int, memory_mb: int, spec: str) -> None:
        from proflake.workers.worker import serve

        code = 1
        try:
            with Connection(tasks_read, writable=False) as tasks, Connection(results_write, readable=False) as output:
                serve(tasks, output, memory_mb, spec)
            code = 0
        except (EOFError, OSError):
            code = 0  # the pool closed the pipes while the worker answered: it was stopped
        finally:
            if self.returncode is None:
                self.returncode = code

    def poll(self) -> int | None:
        """Its exit code once its loop has ended (or it was killed); None while it runs."""
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        """Wait for its loop to end (``subprocess.TimeoutExpired`` after ``timeout`` seconds)."""
        if self.returncode is None:
            self._thread.join(timeout)
            if self.returncode is None:
                raise subprocess.TimeoutExpired("proflake inline parse worker", timeout or 0)
        return self.returncode

    def kill(self) -> None:
        """A thread cannot be killed: it counts as dead from now on (as after SIGKILL), and its loop ends
        when the pool closes its pipes, once the chunk in hand is parsed. Whatever it writes then is in
        no answer, so in no commit: as for a killed process, it is left in the spool."""
        if self.returncode is None:
            self.returncode = -signal.SIGKILL
