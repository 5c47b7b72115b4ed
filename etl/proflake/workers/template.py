"""Parse workers forked from a template process, instead of a new interpreter for each.

A parse worker's start-up is its imports (numpy, pyarrow, the readers): ~0.35 s of CPU, as much as
parsing 300 files. The template is one worker-to-be that has done them: a plain subprocess (never the
caller's own interpreter, which may hold threads, DuckDB, a notebook's state), started with the same
environment, command line and address-space limit as a worker, that imports what a worker imports and
then forks one worker per request, in ~5 ms. A worker forked from it is a separate process like any
other: it parses, crashes, times out and is killed alone, and the crash isolation of
etl/proflake/workers/pool.py is unchanged.

One template per environment a worker reads (``pool._environment``), kept for the caller's life like
idle workers. The caller hands each worker its two pipe ends over a Unix socket (SCM_RIGHTS); the
template answers with the worker's pid, and with its exit code once it has reaped it, so the pool sees
a ``subprocess.Popen``-like handle (``ForkedProcess``). A template that dies, or a platform without
``fork`` and ``SCM_RIGHTS`` (``AVAILABLE``), costs nothing but the saving: the pool then starts each
worker as its own interpreter, as before. This module is the caller's side; the template's own loop is
etl/proflake/workers/template_process.py, which is all of proflake a template imports besides the worker.
"""

from __future__ import annotations

import atexit
import os
import pickle
import signal
import socket
import subprocess
import sys
import threading
import time
from multiprocessing.connection import Connection
from typing import Any

from proflake.workers.template_process import MESSAGE_BYTES, TEMPLATE_BOOT, WORKER_BOOT

AVAILABLE = hasattr(os, "fork") and hasattr(socket, "CMSG_LEN") and hasattr(socket, "SOCK_SEQPACKET")
# The kernel's pipe buffer holds a whole chunk, so handing a worker its next chunk while it parses
# the current one never blocks the parent (Linux; elsewhere the default size only costs overlap).
PIPE_BYTES = 1024 * 1024
Process = Any  # subprocess.Popen or ForkedProcess: poll(), wait(timeout), kill(), returncode, pid
# How long killing a forked worker waits for the template to say its pid. The template says it right
# after the fork, so only a worker killed before it was forked (the template still importing, or stuck:
# the pool kills a worker not ready within 120 s) or the moment it was, waits at all.
ANSWER_WAIT_S = 10.0


class Template:
    """The caller's side of one template process."""

    def __init__(self, command: list[str], env: dict[str, str]) -> None:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.control = ours
        try:
            self.process = subprocess.Popen(
                [*command, str(theirs.fileno())],
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                env=env, pass_fds=(theirs.fileno(),),
            )
        except BaseException:
            ours.close()  # no template: the caller starts its workers alone
            raise
        finally:
            theirs.close()
        # Requests by number, not yet answered. Numbered, because a signal's exception (Ctrl-C, SIGTERM:
        # cli/signals.py) may land between sending a request and noting it: the answers must not shift.
        self.pending: dict[int, ForkedProcess] = {}
        self.requests = 0
        self.answered = 0  # the number of the last request whose answer is noted
        self.exited: dict[int, int] = {}
        self.alive = True
        self.lock = threading.Lock()  # one conversation: requests and their answers stay in order

    def fork(self, memory_mb: int, spec: str, tasks_read: int, results_write: int) -> ForkedProcess:
        """Ask for a worker reading ``tasks_read`` and writing ``results_write``; OSError if the
        template is gone. Returns at once: the worker starts once the template has done its imports."""
        with self.lock:
            number = self.requests = self.requests + 1
            forked = self.pending[number] = ForkedProcess(self)  # noted first: see self.pending
            try:
                request = pickle.dumps((number, memory_mb, spec, [p for p in sys.path if p]))
                socket.send_fds(self.control, [request], [tasks_read, results_write])
            except OSError:
                del self.pending[number]
                self.alive = False
                raise
            return forked

    def drain(self, timeout: float | None = 0.0) -> bool:
        """Read what the template said, waiting up to ``timeout`` (None: forever) for the first word;
        False when it said nothing in that time."""
        with self.lock:
            if not self.alive:
                return False
            return self._drain(timeout)

    def _drain(self, timeout: float | None) -> bool:
        # Each answer is peeked at, noted, and only then taken off the socket: a signal's exception
        # (cli/signals.py) raised between reading an answer and noting it must not lose it (a worker whose
        # pid never comes would be waited for forever), and one raised after noting it leaves it to be read
        # again, which changes nothing (_note).
        self.control.settimeout(timeout)
        heard = False
        try:
            while True:
                try:
                    message = self.control.recv(MESSAGE_BYTES, socket.MSG_PEEK)
                except (BlockingIOError, TimeoutError):
                    return heard
                if not message:
                    raise EOFError
                heard = True
                self._note(pickle.loads(message))
                self.control.settimeout(0.0)
                self.control.recv(MESSAGE_BYTES)
        except (EOFError, OSError):
            self.dead()
            return heard

    def _note(self, said: tuple) -> None:
        if said[0] == "exited":
            self.exited[said[1]] = said[2]
            return
        number, pid = said[1], said[2]
        if number <= self.answered:
            return  # noted already: read again after a signal cut its draining short
        forked = self.pending.get(number)  # there: fork() notes each request before sending it
        if forked is not None:
            forked.known_pid = pid
        for earlier in [n for n in self.pending if n < number]:  # answered in turn: never received
            self.pending[earlier].returncode = -signal.SIGKILL
        self.pending = {n: f for n, f in self.pending.items() if n > number}
        self.answered = number

    def dead(self) -> None:
        """The template is gone: a worker it never forked never started (it has no pid, and reads as
        exited); the ones it did fork live on (their pipes tell the pool when they end)."""
        self.alive = False
        for forked in self.pending.values():
            forked.returncode = -signal.SIGKILL  # never forked: it never ran
        self.pending.clear()

    def stop(self) -> None:
        self.alive = False
        self.control.close()
        try:
            self.process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


class ForkedProcess:
    """A worker forked by a Template, with what the pool uses of ``subprocess.Popen``."""

    def __init__(self, template: Template) -> None:
        self.template = template
        self.known_pid: int | None = None  # once the template has answered
        self.returncode: int | None = None

    @property
    def pid(self) -> int | None:
        """Its process id (waiting for the template's answer); None if it was never forked."""
        self._answer(None)
        return self.known_pid

    def _answer(self, timeout: float | None) -> None:
        """Wait up to ``timeout`` (None: as long as the template lives) for the template's answer."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.known_pid is None and self.returncode is None and self.template.alive:
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                return
            # The template answers each request in turn, once it has done its imports.
            if not self.template.drain(0.5 if left is None else min(left, 0.5)) and self.template.process.poll() is not None:
                self.template.dead()

    def poll(self) -> int | None:
        if self.returncode is None and self.template.alive:
            self.template.drain()
        if self.returncode is None and self.known_pid is not None:
            self.returncode = self.template.exited.pop(self.known_pid, None)
            if self.returncode is None and not self.template.alive and not _exists(self.known_pid):
                self.returncode = -signal.SIGKILL  # reaped by whoever adopted it: how it ended is unknown
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.poll() is None:
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                raise subprocess.TimeoutExpired("parse worker", timeout or 0.0)
            if self.template.alive:
                self.template.drain(0.1 if left is None else min(left, 0.1))
            else:
                time.sleep(0.01)  # adopted by another process: only its disappearance can be seen
        return self.returncode  # type: ignore[return-value]

    def kill(self) -> None:
        """SIGKILL it, once the template has said its pid. A template that has not answered within
        ANSWER_WAIT_S is taken to be stuck and given up (``Template.dead``; the next start replaces it):
        the worker, if it is ever forked, finds its pipes closed and exits."""
        self._answer(ANSWER_WAIT_S)
        if self.known_pid is None and self.returncode is None and self.template.alive:
            self.template.dead()
        pid = self.known_pid
        if pid is not None and self.poll() is None:
            try:
                os.kill(pid, signal.SIGKILL)  # its exit code is not in, so the template has not reaped it
            except ProcessLookupError:
                pass


def _exists(pid: int) -> bool:
    try:
        os.kill(pid, 0)
        return True
    except ProcessLookupError:
        return False
    except PermissionError:
        return True


# -- the caller's registry: one template per environment ----------------------------------------------
_TEMPLATES: dict[int, Template] = {}
_STARTED_ALONE: set[int] = set()  # environments whose first worker was started as its own interpreter


def _environment_for_workers() -> dict[str, str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    # Arrow's default allocator (mimalloc) keeps ~70 MB more at a worker's peak than the C library's
    # for the same work at the same speed (measured on a segment's parse and write).
    env.setdefault("ARROW_DEFAULT_MEMORY_POOL", "system")
    return env


def start_worker(memory_mb: int, spec: str, environment: int, together: int = 1) -> tuple[Process, Connection, Connection]:
    """A parse worker: forked from this environment's template where the platform allows (the template
    is started on first use), else its own interpreter (``spawn_worker``). Returns at once: the worker
    says "ready" on its results connection once it can take tasks.

    ``together``: how many workers the pool is starting now. The first worker of an environment, started
    alone (a nightly batch of a few files), is its own interpreter: through a template it would cost the
    same imports plus its fork's copy-on-write faults (~0.07 s of CPU); the next start makes the template.
    """
    template = _TEMPLATES.get(environment) if AVAILABLE else None
    if AVAILABLE and template is None and together <= 1 and environment not in _STARTED_ALONE:
        _STARTED_ALONE.add(environment)
        return spawn_worker(memory_mb, spec)
    if AVAILABLE and (template is None or not template.alive):
        if template is not None:
            template.stop()
        try:
            template = _TEMPLATES[environment] = Template([sys.executable, "-c", TEMPLATE_BOOT], _environment_for_workers())
        except OSError:
            template = None
    if template is not None:
        tasks_read, tasks_write = os.pipe()
        results_read, results_write = os.pipe()
        grow_pipe(tasks_write)
        try:
            process: Process = template.fork(memory_mb, spec, tasks_read, results_write)
        except BaseException as e:
            # Closed, a worker forked all the same (a signal's exception after the request went out)
            # reads the end of its tasks and exits.
            for fd in (tasks_read, tasks_write, results_read, results_write):
                os.close(fd)
            if not isinstance(e, OSError):
                raise
        else:
            os.close(tasks_read)
            os.close(results_write)
            return process, Connection(tasks_write, readable=False), Connection(results_read, writable=False)
    return spawn_worker(memory_mb, spec)


def spawn_worker(memory_mb: int, spec: str) -> tuple[subprocess.Popen, Connection, Connection]:
    """A parse worker in its own new interpreter (``python -c WORKER_BOOT``)."""
    process = subprocess.Popen(
        [sys.executable, "-c", WORKER_BOOT, str(memory_mb), spec],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=_environment_for_workers(),
    )
    tasks, results = take_pipes(process)
    grow_pipe(tasks.fileno())
    return process, tasks, results


def take_pipes(process: Any) -> tuple[Connection, Connection]:
    """The tasks and results connections of a process started with its stdin and stdout as pipes."""
    tasks = Connection(os.dup(process.stdin.fileno()), readable=False)
    results = Connection(os.dup(process.stdout.fileno()), writable=False)
    process.stdin.close()
    process.stdout.close()
    return tasks, results


def pipe_bytes(fd: int) -> int:
    """How many bytes the pipe ``fd`` holds before a write blocks."""
    try:
        import fcntl

        return fcntl.fcntl(fd, fcntl.F_GETPIPE_SZ)  # type: ignore[attr-defined]
    except (ImportError, AttributeError, OSError):
        return 64 * 1024


def grow_pipe(fd: int) -> int:
    """Make the pipe ``fd`` hold PIPE_BYTES where the platform allows; how many bytes it holds now."""
    try:
        import fcntl

        return fcntl.fcntl(fd, fcntl.F_SETPIPE_SZ, PIPE_BYTES)  # type: ignore[attr-defined]
    except (ImportError, AttributeError, OSError):
        return 64 * 1024


def stop_templates() -> None:
    """Stop every template (at exit, after the idle workers: see pool._stop_idle_workers)."""
    for template in _TEMPLATES.values():
        template.stop()
    _TEMPLATES.clear()


def _forget_templates() -> None:
    # A fork of the caller (a test's forked run, a multiprocessing child) must not talk to the
    # caller's templates: the socket is one conversation. Its copies are closed, the templates kept.
    for template in _TEMPLATES.values():
        template.control.close()
    _TEMPLATES.clear()
    _STARTED_ALONE.clear()


atexit.register(stop_templates)
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_templates)
