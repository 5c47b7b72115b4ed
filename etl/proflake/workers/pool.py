"""Parse stats files in worker processes, so a decoder crash costs one file, not the batch.

Each worker is a separate Python process with an address-space limit (RLIMIT_AS), fed chunks of files
over its stdin and answering on its stdout: forked from a template process that has done a worker's
imports once, or started as its own interpreter (etl/proflake/workers/template.py). Not
multiprocessing: they never re-import the caller's ``__main__``, so ``ingest()`` works from any script
or notebook without a ``if __name__ == "__main__"`` guard. A chunk amortises the inter-process cost
over several files. When a worker dies (a segfault in a decoder, the kernel's OOM killer) or overruns
its time, the chunk it held is split and each file retried alone in a fresh worker; the file that kills
a worker on its own is the one reported, as ``crash`` or ``timeout``. Memory errors inside the limit
arrive as ``memory``. Idle workers are kept for the next run in the same process.

Fact rows never travel back to the parent. The parent deals each worker a *stripe* of consecutive
chunks, about ``FactSink.flush_rows`` fact rows' worth and never two nodes' (``_stretch``); the worker
keeps the rows of the files it parses (its *segment*) and, when its stripe ends, writes them as one
Parquet file per fact table, rows sorted, interval keys dictionary-encoded, into the sink's folders
(etl/proflake/store/deltawrite.py). Encoding and
compression so run in every worker, and the parent only commits the files. Outcomes reach the caller
when the files holding their rows are written (*sealed*): if a worker dies, the chunks of its unwritten
segment are parsed again elsewhere, so no file's rows are lost or written twice.
"""
from __future__ import annotations

import atexit
import os
import subprocess
import sys
import threading
import time
from collections import deque
from collections.abc import Iterable, Iterator
from multiprocessing.connection import Connection, wait

from proflake.errors import ProflakeError, StoreError
from proflake.workers.inline import InlineProcess
from proflake.workers.protocol import (
    DEFAULT_MEMORY_MB,
    DEFAULT_PARSE,
    DEFAULT_TIMEOUT_S,
    MAX_WRITE_DEATHS,
    ChunkResult,
    FactSink,
    Failure,
    Task,
    _Reply,
    default_workers,
)
from proflake.workers.stripes import _chunks, _size, _Stripes
from proflake.workers.template import (
    ForkedProcess,
    Process,
    grow_pipe,
    pipe_bytes,
    spawn_worker,
    start_worker,
    take_pipes,
)

# -- the parent side ----------------------------------------------------------------------------------
# How long a killed worker may take to be reaped before a thread takes over the wait: > 10 s was seen
# at load 25 (a process in uninterruptible sleep dies only when its I/O ends).
KILL_WAIT_S = 10.0
IN_FLIGHT = 2  # chunks queued per worker: it starts the next one without waiting for the parent
# Input bytes per fact row, until a pool has written some (cProfile files hold ~50, pyinstrument ~300):
# it sizes the first stripes; a guess on the high side only makes their segments overflow sooner.
GUESS_BYTES_PER_ROW = 64
# New files per worker a listing is worth (ParsePool.expect): a worker's start-up, ~0.35 s of CPU
# importing, costs about what parsing 300 files does, so a nightly batch of 20 files starts one.
FILES_PER_WORKER = 256


class _Worker:
    def __init__(self, memory_mb: int, spec: str, inline: bool = False, together: int = 1) -> None:
        self.environment = _environment()  # what it was started with: see _IDLE
        self.memory_mb, self.spec = memory_mb, spec
        self.process: Process
        if inline:  # the calling process's threads: no process is started, template or not
            self.process = InlineProcess(memory_mb, spec)
            self.tasks, self.results = take_pipes(self.process)
            self.pipe_bytes = grow_pipe(self.tasks.fileno())
        else:
            self.process, self.tasks, self.results = start_worker(memory_mb, spec, self.environment, together)
            self.pipe_bytes = pipe_bytes(self.tasks.fileno())
        self.started = False
        # Chunks sent and not answered yet, oldest (the one being parsed) first; [] asks for a write.
        self.in_flight: deque[list[Task]] = deque()
        self.deadline = 0.0
        # Chunks it parsed whose facts it has not written yet, numbered as it counts them, with their
        # outcomes: released when it reports them written (ParsePool._answered).
        self.parsed = 0
        self.unsealed: list[tuple[int, list[Task], list[tuple[int, object]]]] = []

    def wait_started(self) -> None:
        # A worker that cannot even start (broken environment) must stop the run, not quarantine files.
        if self.started:
            return
        ready = self.results.poll(120) and _recv_or_none(self.results) == "ready"
        if not ready and isinstance(self.process, ForkedProcess):
            # Its template died before forking it, or it died at once: one started alone tells which.
            self.kill()
            self.process, self.tasks, self.results = spawn_worker(self.memory_mb, self.spec)
            self.pipe_bytes = pipe_bytes(self.tasks.fileno())
            ready = self.results.poll(120) and _recv_or_none(self.results) == "ready"
        if not ready:
            self.kill()
            raise ProflakeError(
                f"a parse worker process failed to start (exit code {self.process.returncode}); "
                f"check that '{sys.executable} -m proflake.workers.worker' runs"
            )
        self.started = True

    def can_queue(self, chunk: list[Task]) -> bool:
        """Another chunk may wait in its pipe only if it fits there (a worker reads a chunk whole before
        parsing it, so the pipe is empty meanwhile): the parent must never block on a busy worker."""
        if not self.in_flight:
            return True
        return len(self.in_flight) < IN_FLIGHT and sum(len(t.data) for t in chunk) + 64 * 1024 <= self.pipe_bytes

    def send(
        self, chunk: list[Task], timeout: float, sink: FactSink | None, write: bool = False, last: bool = False
    ) -> None:
        """Queue ``chunk`` (possibly empty), then a write of the segment if ``write``; ``last``: the
        answer waits until everything is written."""
        if not self.in_flight:
            self.deadline = time.monotonic() + timeout * max(1, len(chunk))
        self.in_flight.append(chunk)
        try:
            message = [(t.key, t.profiler, t.data, t.interval, t.path) for t in chunk]
            self.tasks.send((sink, message, write or last, last))
        except OSError:
            pass  # it died: its results pipe reports EOF and ParsePool.parse handles the chunk

    def answered(self, timeout: float) -> list[Task]:
        """The oldest chunk is answered: the next one starts its clock."""
        chunk = self.in_flight.popleft()
        if self.in_flight:
            self.deadline = time.monotonic() + timeout * max(1, len(self.in_flight[0]))
        return chunk

    def kill(self) -> None:
        """SIGKILL it and reap it. One still not reaped after KILL_WAIT_S is left to a background thread
        (the batch goes on): a killed process runs none of its code again, and what it wrote but had not
        reported sealed belongs to no commit."""
        if self.process.poll() is None:
            self.process.kill()
        _reap(self.process)
        self.tasks.close()
        self.results.close()

    def stop(self) -> None:
        try:
            self.tasks.send(None)
        except OSError:
            pass
        try:
            self.process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.process.kill()
            _reap(self.process)
        self.tasks.close()
        self.results.close()


def _reap(process: Process) -> None:
    """Wait for a killed process up to KILL_WAIT_S, then let a daemon thread wait for the rest (a forked
    worker's template reaps it whenever it dies)."""
    try:
        process.wait(timeout=KILL_WAIT_S)
    except subprocess.TimeoutExpired:
        if not isinstance(process, ForkedProcess):
            threading.Thread(target=process.wait, name="proflake-reap-worker", daemon=True).start()


# Idle workers by (memory limit, parse function, the environment they were started with, inline): one
# started before os.environ changed a setting its libraries read is not handed to a pool after it.
_IDLE: dict[tuple[int, str, int, bool], list[_Worker]] = {}


# What a worker's libraries read from its environment: the time zone, Arrow's and the allocators'
# settings, the locale. Not proflake's knobs or S3's settings: a local worker reads local files or bytes
# the parent read (from S3, say) and writes to a local spool, and every PROFLAKE_* knob is the parent's
# (tests/test_workers.py checks that no module a worker imports reads the environment). Not the rest:
# pytest sets PYTEST_CURRENT_TEST anew for every test, and a fingerprint of everything kept no worker past
# a test (the suite's CPU went from ~650 s to ~1,040 s).
_WORKER_SETTINGS = ("TZ", "ARROW_", "OMP_", "MALLOC_", "LC_", "LANG")


def _environment() -> int:
    return hash(frozenset((k, v) for k, v in os.environ.items() if k.startswith(_WORKER_SETTINGS)))


@atexit.register
def _stop_idle_workers() -> None:
    for workers in _IDLE.values():
        for worker in workers:
            worker.stop()
    _IDLE.clear()


def _forget_idle_workers() -> None:
    # A fork of this process (a multiprocessing child, a test's forked run) must not hand its tasks to
    # our idle workers: their pipes are one conversation. Its copies are closed; the workers stay ours.
    for workers in _IDLE.values():
        for worker in workers:
            worker.tasks.close()
            worker.results.close()
    _IDLE.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_idle_workers)


class ParsePool:
    """``for result in pool.parse(tasks, sink)``: ChunkResults as their files are written (see ChunkResult)."""

    def __init__(
        self,
        workers: int | None = None,
        *,
        memory_mb: int = DEFAULT_MEMORY_MB,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        parse: str = DEFAULT_PARSE,
        inline: bool = False,
    ) -> None:
        """``parse`` names the parse function as "module:function" (tests swap in misbehaving ones);
        ``inline``: the workers are threads of this process, not processes (etl/proflake/workers/inline.py)."""
        self.size = workers or default_workers()
        self.inline = inline
        self.memory_mb = memory_mb
        self.timeout_s = timeout_s
        self.spec = parse
        self.crashes = 0
        self.write_deaths = 0
        self._workers: list[_Worker] = []
        self._wanted: int | None = None  # workers to run: None (all of size) until expect() or start()
        self._bytes_written = 0
        self._rows_written = 0

    def __enter__(self) -> ParsePool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def start(self) -> None:
        """Start the workers now, without waiting for them: they import while the caller lists files."""
        self._wanted = self.size
        self._start()

    def expect(self, files: int) -> None:
        """At least ``files`` files will be parsed (so far listed): start the workers they are worth, one
        per FILES_PER_WORKER of them up to ``size``, now; parse() runs no more than that."""
        self._wanted = max(self._wanted or 0, min(self.size, -(-files // FILES_PER_WORKER)))
        self._start()

    def _start(self) -> None:
        wanted = self.size if self._wanted is None else self._wanted
        together = wanted - len(self._workers)
        while len(self._workers) < wanted:
            self._workers.append(self._reuse() or _Worker(self.memory_mb, self.spec, self.inline, together))

    def close(self) -> None:
        """Keep idle workers for the next pool in this process (a notebook re-ingesting, a test suite)."""
        for worker in self._workers:
            kept = _IDLE.setdefault((self.memory_mb, self.spec, worker.environment, self.inline), [])
            if worker.in_flight or worker.unsealed:
                worker.kill()  # abandoned mid-run: what it holds belongs to no one now
            elif len(kept) < default_workers() and worker.process.poll() is None:
                kept.append(worker)
            else:
                worker.stop()
        self._workers.clear()

    def _reuse(self) -> _Worker | None:
        kept = _IDLE.get((self.memory_mb, self.spec, _environment(), self.inline), [])
        while kept:
            worker = kept.pop()
            if worker.process.poll() is None:
                return worker
            worker.kill()
        return None

    def parse(self, tasks: Iterable[Task], sink: FactSink | None = None) -> Iterator[ChunkResult]:
        """Parse ``tasks``; with a ``sink``, workers write the facts there (without one they are dropped).

        A ChunkResult comes once the files holding its facts are written, so a worker that dies costs
        only a re-parse of what it had not written yet."""
        stripes = _Stripes(_chunks(tasks), lambda: (sink.flush_rows if sink else 1) * self._bytes_per_row())
        finished: set[_Worker] = set()
        try:
            while True:
                self._start()
                # Hand out chunks, the least loaded worker first, as long as none of them has to wait.
                for worker in sorted(self._workers, key=lambda w: len(w.in_flight)):
                    while len(worker.in_flight) < IN_FLIGHT:
                        taken = stripes.take(worker, fits=worker.can_queue)
                        if taken is None:
                            break
                        chunk, write = taken
                        worker.wait_started()
                        worker.send(chunk, self.timeout_s, sink, write)
                        finished.discard(worker)
                busy = [w for w in self._workers if w.in_flight]
                if not busy:
                    # Everything is parsed: the workers write what they still hold, then go idle.
                    ending = [w for w in self._workers if w.started and (w not in finished or w.unsealed)]
                    if not ending:
                        return
                    for worker in ending:
                        worker.send([], self.timeout_s, sink, last=True)
                        finished.add(worker)
                    busy = ending
                timeout = max(0.0, min(w.deadline for w in busy) - time.monotonic())
                ready = wait([w.results for w in busy], timeout=timeout)
                now = time.monotonic()
                for worker in busy:
                    if worker.results in ready:
                        reply = _recv_or_none(worker.results)
                        if isinstance(reply, _Reply):
                            yield from self._answered(worker, reply)
                            continue
                        yield from self._lost(worker, timed_out=False, retry=stripes.retry)  # its pipe closed: it died
                        stripes.forget(worker)
                    elif now >= worker.deadline:
                        yield from self._lost(worker, timed_out=True, retry=stripes.retry)
                        stripes.forget(worker)
        except BaseException:
            for worker in self._workers:
                if worker.in_flight or worker.unsealed:
                    worker.kill()
            self._workers = [w for w in self._workers if w.process.poll() is None]
            raise

    def _bytes_per_row(self) -> float:
        """Input bytes per fact row written so far in this pool (a guess until the first write)."""
        return self._bytes_written / self._rows_written if self._rows_written else GUESS_BYTES_PER_ROW

    def _answered(self, worker: _Worker, reply: _Reply) -> Iterator[ChunkResult]:
        if reply.error is not None:
            if "No space left on device" in reply.error or "Disk quota exceeded" in reply.error:
                raise StoreError(
                    "the disk holding the store's spool is full (a parse worker could not write its fact files); "
                    "free space (or move the store) and run the command again"
                )
            raise StoreError(f"a parse worker could not write its fact files: {reply.error}")
        chunk = worker.answered(self.timeout_s)
        if chunk:
            worker.parsed += 1
            worker.unsealed.append((worker.parsed, chunk, reply.outcomes))
        for through, files in reply.seals:
            released = [entry for entry in worker.unsealed if entry[0] <= through]
            worker.unsealed = [entry for entry in worker.unsealed if entry[0] > through]
            if files:
                self._bytes_written += sum(_size(t) for _, chunk, _ in released for t in chunk)
                self._rows_written += sum(f.rows for f in files)
            yield ChunkResult([o for _, _, outcomes in released for o in outcomes], files)

    def _lost(self, worker: _Worker, *, timed_out: bool, retry: deque) -> Iterator[ChunkResult]:
        if not timed_out:
            try:
                worker.process.wait(timeout=5)  # it closed its pipe while dying: let it finish, to tell how
            except subprocess.TimeoutExpired:
                pass
        worker.kill()
        self._workers.remove(worker)
        # What it parsed but never wrote, and what it had not started, is parsed again whole: those
        # files did not kill it.
        retry.extend(chunk for _, chunk, _ in worker.unsealed)
        retry.extend(c for c in list(worker.in_flight)[1:] if c)
        chunk = worker.in_flight[0] if worker.in_flight else []
        if len(chunk) > 1:
            retry.extend([task] for task in chunk)  # find which file it was
            return
        if not chunk:  # it died writing its segment: every chunk of it is queued again
            self.write_deaths += 1
            if self.write_deaths >= MAX_WRITE_DEATHS:
                raise StoreError(f"parse workers died {self.write_deaths} times writing their fact files; check memory and disk")
            return
        self.crashes += 1
        yield ChunkResult([(task.key, _failure_of(worker, timed_out, self.timeout_s)) for task in chunk])


def _recv_or_none(conn: Connection) -> object:
    try:
        return conn.recv()
    except (EOFError, OSError):
        return None


def _failure_of(worker: _Worker, timed_out: bool, timeout_s: float) -> Failure:
    if timed_out:
        return Failure("timeout", f"parsing took longer than {timeout_s:g} s; the worker was stopped")
    code = worker.process.returncode
    how = f"signal {-code}" if code is not None and code < 0 else f"exit code {code}"
    return Failure("crash", f"the parser process died on this file ({how})")
