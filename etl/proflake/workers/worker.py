"""The worker process: parse the chunks of files the pool sends, keep their rows, write them as segments.

Runs forked from a template (etl/proflake/workers/template.py), as ``python -c WORKER_BOOT`` (the same
module), or as ``python -m proflake.workers.worker``.
"""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Callable
from multiprocessing.connection import Connection

from proflake.errors import ParseError
from proflake.readers.parse import ParsedStats
from proflake.store.memory import release_memory
from proflake.workers.protocol import (
    DEFAULT_PARSE,
    OVERFLOW,
    Failure,
    ParsedFile,
    _Reply,
)
from proflake.workers.segments import _Segment, _SegmentWriter


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
    """A worker process: its stdin brings chunks, its stdout carries the answers (see ``serve``)."""
    # The protocol owns the real stdout; anything a library prints goes to stderr instead.
    output = Connection(os.dup(1), readable=False)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    tasks = Connection(0, writable=False)
    # A crash here costs one file (the pool quarantines it as "crash"): where the compiled decoder was not
    # built, the Python walk that keeps marshal.loads from crashing (~10x marshal.loads) is not needed.
    from proflake.readers import cprofile_fast

    cprofile_fast.CRASH_CONTAINED = True
    _limit_memory(memory_mb)
    serve(tasks, output, memory_mb, spec)


def serve(tasks: Connection, output: Connection, memory_mb: int, spec: str) -> None:
    """Say "ready", then parse each chunk ``tasks`` brings with the function ``spec`` names, keep the rows,
    write them as segments, and answer each chunk on ``output``, until ``tasks`` ends or brings None.
    ``memory_mb`` only words the answer for a file that needed more (the limit itself is the caller's)."""
    parse = _load(spec)
    segment = _Segment()
    writer = _SegmentWriter()
    parsed = 0  # chunks answered: a seal covers every chunk up to a count
    output.send("ready")
    while True:
        try:
            message = tasks.recv()
        except EOFError:
            return
        if message is None:
            return
        sink, chunk, write, wait_all = message
        if segment.sink is not None and segment.sink != sink:
            segment.take()  # left by a run its parent abandoned: never written under another batch
        segment.sink = sink
        outcomes: list[tuple[int, object]] = []
        for key, profiler, data, interval, path in chunk:
            if path is not None:
                try:
                    data = _read_file(path)
                except OSError as e:
                    outcomes.append((key, Failure("read", f"cannot read {path!r}: {e.strerror}")))
                    continue
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
                if sink is not None:  # without one, a caller wants outcomes only
                    segment.add(interval, result.facts, result.key_ids)
                result = ParsedFile(result.summary, {name: t.num_rows for name, t in result.facts.items()})
            outcomes.append((key, result))
            del data
        if chunk:
            parsed += 1
        del chunk
        if sink is None:
            writer.nothing_to_write(parsed)
        elif write or segment.rows >= sink.flush_rows * OVERFLOW:
            writer.write(parsed, segment.take(), sink)
        if wait_all or (sink is not None and not sink.background):  # wait_all: the parent's last word
            writer.wait()
        seals, error = writer.finished()
        if wait_all:
            release_memory()  # idle now, maybe for long: the parent commits, or keeps it for its next run
        output.send(_Reply(outcomes, seals, error))


def _read_file(path: str) -> bytes:
    # As proflake.sources.local.LocalSource.read: O_NOFOLLOW, so a file swapped for a link after listing
    # is still not followed.
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    with os.fdopen(fd, "rb") as f:
        return f.read()


if __name__ == "__main__":
    # Run the imported module's function, so what it pickles names proflake.workers.worker, not __main__.
    from proflake.workers.worker import worker_main as _main

    _main(int(sys.argv[1]), sys.argv[2] if len(sys.argv) > 2 else DEFAULT_PARSE)
