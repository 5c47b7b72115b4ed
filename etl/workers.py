"""Parse stats files in worker processes, so a decoder crash costs one file, not the batch.

Each worker is a separate Python process (``python -m etl.workers``) with an address-space limit
(RLIMIT_AS), fed chunks of files over its stdin and answering on its stdout. Plain subprocesses, not
multiprocessing: they never re-import the caller's ``__main__``, so ``ingest()`` works from any script
or notebook without a ``if __name__ == "__main__"`` guard. A chunk amortises the inter-process cost
over several files. When a worker dies (a segfault in a decoder, the kernel's OOM killer) or overruns
its time, the chunk it held is split and each file retried alone in a fresh worker; the file that kills
a worker on its own is the one reported, as ``crash`` or ``timeout``. Memory errors inside the limit
arrive as ``memory``. Idle workers are kept for the next run in the same process.
"""

from __future__ import annotations

import atexit
import importlib
import itertools
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from multiprocessing.connection import Connection, wait

import pyarrow as pa

from etl.errors import ParseError, ProflakeError
from etl.parse import ParsedStats

DEFAULT_MEMORY_MB = 2048
DEFAULT_TIMEOUT_S = 120.0
CHUNK_FILES = 16
CHUNK_BYTES = 8 * 1024 * 1024
DEFAULT_PARSE = "etl.parse:parse_stats"
_SEQUENCE = itertools.count()


@dataclass(frozen=True)
class Task:
    key: int  # the caller's handle for the file
    profiler: str
    data: bytes


@dataclass(frozen=True)
class Failure:
    kind: str
    message: str


@dataclass(frozen=True)
class ParsedFile:
    summary: dict  # what etl.parse.ParsedStats.summary holds
    counts: dict[str, int]  # rows this file contributed to each fact table of its chunk


@dataclass
class ChunkResult:
    """What a worker returns for a chunk: each file's outcome (a ParsedFile, a Failure, or whatever a
    custom parse function returned), and the facts of the parsed files, concatenated in outcome order."""

    outcomes: list[tuple[int, object]]
    facts: dict[str, str] = field(default_factory=dict)  # fact table -> spooled Arrow file (see load_facts)


def default_workers() -> int:
    return max(1, min(os.cpu_count() or 1, 8))


# -- the worker process -----------------------------------------------------------------------------
def _limit_memory(memory_mb: int) -> None:
    try:
        import resource

        limit = memory_mb * 1024 * 1024
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    except (ImportError, ValueError, OSError):
        pass  # not on this platform: the time limit and crash isolation still hold


def _load(spec: str) -> Callable[[str, bytes], object]:
    module, _, name = spec.partition(":")
    return getattr(importlib.import_module(module), name)


def worker_main(memory_mb: int, spec: str) -> None:
    # The protocol owns the real stdout; anything a library prints goes to stderr instead.
    output = Connection(os.dup(1), readable=False)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    tasks = Connection(0, writable=False)
    parse = _load(spec)
    _limit_memory(memory_mb)
    output.send("ready")
    while True:
        try:
            message = tasks.recv()
        except EOFError:
            return
        if message is None:
            return
        spool, chunk = message
        outcomes: list[tuple[int, object]] = []
        tables: dict[str, list] = {}
        for key, profiler, data in chunk:
            try:
                result = parse(profiler, data)
            except ParseError as e:
                result = Failure(e.kind, str(e))
            except MemoryError:
                result = Failure("memory", f"parsing needed more than the {memory_mb} MB a worker may use")
            except RecursionError:
                result = Failure("too_deep", "the data nests deeper than the parser allows")
            except Exception as e:  # a reader bug must cost one file, not the batch
                result = Failure("internal", f"unexpected {type(e).__name__} while parsing: {e}")
            if isinstance(result, ParsedStats):
                # Facts travel once per chunk, concatenated: far cheaper to pickle than a table per file.
                for name, table in result.facts.items():
                    tables.setdefault(name, []).append(table)
                result = ParsedFile(result.summary, {name: t.num_rows for name, t in result.facts.items()})
            outcomes.append((key, result))
            del data
        del chunk
        output.send(ChunkResult(outcomes, _spool(spool, tables)))
        del tables


def _spool(spool: str, tables: dict[str, list]) -> dict[str, str]:
    """Write a chunk's facts as Arrow IPC files the parent memory-maps: no pickling, no copy through
    the pipe."""
    paths = {}
    for name, parts in tables.items():
        table = pa.concat_tables(parts)
        path = os.path.join(spool, f"{os.getpid()}-{next(_SEQUENCE)}-{name}.arrow")
        with pa.OSFile(path, "wb") as sink, pa.ipc.new_file(sink, table.schema) as writer:
            writer.write_table(table)
        paths[name] = path
    return paths


def load_facts(paths: dict[str, str]) -> dict[str, pa.Table]:
    """Read a chunk's spooled facts (zero-copy) and remove the files; the mapping keeps the data."""
    tables = {}
    for name, path in paths.items():
        tables[name] = pa.ipc.open_file(pa.memory_map(path)).read_all()
        os.unlink(path)
    return tables


# -- the parent side ----------------------------------------------------------------------------------
class _Worker:
    def __init__(self, memory_mb: int, spec: str) -> None:
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
        self.process = subprocess.Popen(
            [sys.executable, "-m", "etl.workers", str(memory_mb), spec],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=env,
        )
        self.tasks = Connection(os.dup(self.process.stdin.fileno()), readable=False)  # type: ignore[union-attr]
        self.results = Connection(os.dup(self.process.stdout.fileno()), writable=False)  # type: ignore[union-attr]
        self.process.stdin.close()  # type: ignore[union-attr]
        self.process.stdout.close()  # type: ignore[union-attr]
        self.chunk: list[Task] | None = None
        self.deadline = 0.0
        # A worker that cannot even start (broken environment) must stop the run, not quarantine files.
        if not self.results.poll(120) or _recv_or_none(self.results) != "ready":
            self.kill()
            raise ProflakeError(
                f"a parse worker process failed to start (exit code {self.process.returncode}); "
                f"check that '{sys.executable} -m etl.workers' runs"
            )

    def send(self, chunk: list[Task], timeout: float, spool: str) -> None:
        self.chunk = chunk
        self.deadline = time.monotonic() + timeout * len(chunk)
        try:
            self.tasks.send((spool, [(t.key, t.profiler, t.data) for t in chunk]))
        except OSError:
            pass  # it died: its results pipe reports EOF and ParsePool.parse handles the chunk

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait(timeout=10)
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
            self.process.wait()
        self.tasks.close()
        self.results.close()


_IDLE: dict[tuple[int, str], list[_Worker]] = {}


@atexit.register
def _stop_idle_workers() -> None:
    for workers in _IDLE.values():
        for worker in workers:
            worker.stop()
    _IDLE.clear()


class ParsePool:
    """``for chunk in pool.parse(tasks)``: ChunkResults in completion order (see ChunkResult)."""

    def __init__(
        self,
        workers: int | None = None,
        *,
        memory_mb: int = DEFAULT_MEMORY_MB,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        parse: str = DEFAULT_PARSE,
    ) -> None:
        """``parse`` names the parse function as "module:function" (tests swap in misbehaving ones)."""
        self.size = workers or default_workers()
        self.memory_mb = memory_mb
        self.timeout_s = timeout_s
        self.spec = parse
        self.crashes = 0
        self._idle: list[_Worker] = []
        self.spool = tempfile.mkdtemp(prefix="proflake-spool-")

    def __enter__(self) -> ParsePool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Keep idle workers for the next pool in this process (a notebook re-ingesting, a test suite)."""
        shutil.rmtree(self.spool, ignore_errors=True)
        kept = _IDLE.setdefault((self.memory_mb, self.spec), [])
        for worker in self._idle:
            if len(kept) < default_workers() and worker.process.poll() is None:
                kept.append(worker)
            else:
                worker.stop()
        self._idle.clear()

    def _worker(self) -> _Worker:
        if self._idle:
            return self._idle.pop()
        kept = _IDLE.get((self.memory_mb, self.spec), [])
        while kept:
            worker = kept.pop()
            if worker.process.poll() is None:
                return worker
            worker.kill()
        return _Worker(self.memory_mb, self.spec)

    def parse(self, tasks: Iterable[Task]) -> Iterator[ChunkResult]:
        chunks = _chunks(tasks)
        retry: deque[list[Task]] = deque()  # single files of a chunk whose worker died
        busy: list[_Worker] = []
        exhausted = False
        try:
            while True:
                while len(busy) < self.size:
                    chunk = retry.popleft() if retry else None
                    if chunk is None and not exhausted:
                        chunk = next(chunks, None)
                        exhausted = chunk is None
                    if chunk is None:
                        break
                    worker = self._worker()
                    worker.send(chunk, self.timeout_s, self.spool)
                    busy.append(worker)
                if not busy:
                    return
                timeout = max(0.0, min(w.deadline for w in busy) - time.monotonic())
                ready = wait([w.results for w in busy], timeout=timeout)
                now = time.monotonic()
                for worker in list(busy):
                    if worker.results in ready:
                        result = _recv_or_none(worker.results)
                        busy.remove(worker)
                        if result is not None:
                            worker.chunk = None
                            self._idle.append(worker)
                            yield result
                            continue
                        worker.kill()  # its pipe closed: it died
                        yield from self._lost(worker, timed_out=False, retry=retry)
                    elif now >= worker.deadline:
                        busy.remove(worker)
                        worker.kill()
                        yield from self._lost(worker, timed_out=True, retry=retry)
        finally:
            for worker in busy:
                worker.kill()

    def _lost(self, worker: _Worker, *, timed_out: bool, retry: deque) -> Iterator[ChunkResult]:
        chunk = worker.chunk or []
        if len(chunk) > 1:
            retry.extend([task] for task in chunk)  # find which file it was
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


def _chunks(tasks: Iterable[Task]) -> Iterator[list[Task]]:
    chunk: list[Task] = []
    size = 0
    for task in tasks:
        chunk.append(task)
        size += len(task.data)
        if len(chunk) >= CHUNK_FILES or size >= CHUNK_BYTES:
            yield chunk
            chunk, size = [], 0
    if chunk:
        yield chunk


if __name__ == "__main__":
    # Run the imported module's function, so what it pickles names etl.workers, not __main__.
    from etl.workers import worker_main as _main

    _main(int(sys.argv[1]), sys.argv[2] if len(sys.argv) > 2 else DEFAULT_PARSE)
