"""Which chunks of files go to which worker: contiguous stripes of the caller's order, one segment each."""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING

from proflake.schema import INTERVAL_KEY_COLUMNS
from proflake.workers.protocol import CHUNK_BYTES, CHUNK_FILES, Task

if TYPE_CHECKING:
    from proflake.workers.pool import _Worker


def _size(task: Task) -> int:
    return len(task.data) or task.size


_JOB_ID, _NODE_ID = INTERVAL_KEY_COLUMNS.index("job_id"), INTERVAL_KEY_COLUMNS.index("node_id")


def _stretch(task: Task) -> tuple:
    """The job and node whose rows a task adds. No chunk, stripe or file mixes two: the caller orders
    tasks by (job, node, start time), and a file crossing from one node's last interval to the next
    node's first would span the whole job in time, so every time-bounded question would open it."""
    return () if task.interval is None else (task.interval[_JOB_ID], task.interval[_NODE_ID])


def _chunks(tasks: Iterable[Task]) -> Iterator[list[Task]]:
    chunk: list[Task] = []
    size = 0
    for task in tasks:
        if chunk and _stretch(task) != _stretch(chunk[-1]):
            yield chunk
            chunk, size = [], 0
        chunk.append(task)
        size += _size(task)
        if len(chunk) >= CHUNK_FILES or size >= CHUNK_BYTES:
            yield chunk
            chunk, size = [], 0
    if chunk:
        yield chunk


class _Stripes:
    """Hands out chunks so that each worker parses a contiguous run of the tasks (a *stripe*, about
    ``stripe_bytes()`` of input: one segment's worth) and writes it as its own files. Files then span
    narrow stretches of the caller's order, which is what readers skip files by; dealt one chunk at a
    time, every worker's files would span the whole run of all of them. When the tasks run out, an
    idle worker takes the second half of the longest stripe still queued: contiguous, and no worker
    idles while another has a stripe to finish."""

    def __init__(self, chunks: Iterator[list[Task]], stripe_bytes: Callable[[], float]) -> None:
        self.chunks = chunks
        self.stripe_bytes = stripe_bytes
        self.retry: deque[list[Task]] = deque()  # chunks of dead workers: anyone's
        self.queued: dict[_Worker, deque[list[Task]]] = {}
        self.filling: _Worker | None = None  # whose stripe the next chunk read joins
        self.filled = 0
        self.next_chunk: list[Task] | None = None  # read, but the first of another stretch's stripe
        self.stretch: tuple = ()  # the job and node of the stripe being filled
        self.exhausted = False
        self.unwritten: set[_Worker] = set()  # sent chunks past the end of a written segment

    def take(self, worker: _Worker, fits: Callable[[list[Task]], bool]) -> tuple[list[Task], bool] | None:
        """The worker's next chunk, and whether its segment is to be written after it (the stripe
        ends); ([], True) asks it to write before it starts a stripe not adjacent to its last."""
        if self.retry:
            if not fits(self.retry[0]):
                return None
            self.unwritten.add(worker)
            return self.retry.popleft(), False
        queued = self.queued.setdefault(worker, deque())
        if not queued and self.filling is not worker:
            if worker in self.unwritten:
                self.unwritten.discard(worker)
                return [], True
            self._fill(until_full=True)  # the stripe being read belongs to another worker: finish it
            if not self.exhausted:
                self.filling, self.filled = worker, 0
        if not queued and self.filling is worker:
            self._fill(until_full=False)
        if not queued:
            self._steal(worker)
        if not queued or not fits(queued[0]):
            return None
        chunk = queued.popleft()
        ends = not queued and self.filling is not worker
        if ends:
            self.unwritten.discard(worker)
        else:
            self.unwritten.add(worker)
        return chunk, ends

    def forget(self, worker: _Worker) -> None:
        """A worker died: what was queued for it goes to whoever is free."""
        self.retry.extend(self.queued.pop(worker, ()))
        self.unwritten.discard(worker)
        if self.filling is worker:
            self.filling = None

    def _fill(self, *, until_full: bool) -> None:
        while self.filling is not None:
            chunk, self.next_chunk = self.next_chunk or next(self.chunks, None), None
            if chunk is None:
                self.exhausted, self.filling = True, None
                return
            queued = self.queued[self.filling]
            if self.filled and _stretch(chunk[0]) != self.stretch:
                self.next_chunk, self.filling = chunk, None  # a stripe holds one stretch
                return
            self.stretch = _stretch(chunk[0])
            queued.append(chunk)
            self.filled += sum(_size(t) for t in chunk)
            if self.filled >= self.stripe_bytes():
                self.filling = None
            if not until_full:
                return

    def _steal(self, worker: _Worker) -> None:
        if not self.exhausted:
            return
        victim = max(self.queued, key=lambda w: len(self.queued[w]))
        if len(self.queued[victim]) < 2:
            return
        if worker in self.unwritten:
            return  # it writes what it holds first (take's next call), then steals
        half = len(self.queued[victim]) // 2
        stolen = [self.queued[victim].pop() for _ in range(half)]
        self.queued[worker].extend(reversed(stolen))
