"""A listing starts the workers its new files are worth (ParsePool.expect, start_as_listed): a nightly
batch of a few files runs one worker, not one per core; a larger listing, or a fresh store, all of them."""

from __future__ import annotations

from proflake.workers import pool as pool_module
from proflake.workers.executor import start_as_listed
from proflake.workers.pool import ParsePool
from proflake.workers.protocol import Task


def started(pool: ParsePool) -> int:
    return len(pool._workers)


def test_a_few_listed_files_start_one_worker_and_parse_on_it():
    with ParsePool(2, memory_mb=512, parse="helpers.crashy:parse") as pool:
        listed = start_as_listed(pool)
        for _ in range(20):
            listed(object())
        assert started(pool) == 1
        results = [o for chunk in pool.parse(Task(i, "cprofile", b"ok-%d" % i) for i in range(20)) for o in chunk.outcomes]
        assert sorted(i for i, _ in results) == list(range(20))
        assert started(pool) == 1  # parse ran no more than the listing was worth


def test_each_files_per_worker_listed_starts_one_more_up_to_the_pool_size():
    with ParsePool(2, memory_mb=512, parse="helpers.crashy:parse") as pool:
        listed = start_as_listed(pool)
        for _ in range(pool_module.FILES_PER_WORKER):
            listed(object())
        assert started(pool) == 1
        listed(object())
        assert started(pool) == 2
        for _ in range(3 * pool_module.FILES_PER_WORKER):
            listed(object())
        assert started(pool) == 2


def test_start_and_a_pool_used_directly_run_every_worker():
    with ParsePool(2, memory_mb=512, parse="helpers.crashy:parse") as pool:
        pool.expect(1)
        pool.start()  # a fresh store: every file will be new
        assert started(pool) == 2
    with ParsePool(2, memory_mb=512, parse="helpers.crashy:parse") as pool:
        list(pool.parse(Task(i, "cprofile", b"ok-%d" % i) for i in range(4)))
        assert started(pool) == 2


def test_an_executor_without_expect_starts_at_the_first_file():
    class Executor:
        starts = 0

        def start(self) -> None:
            self.starts += 1

    executor = Executor()
    listed = start_as_listed(executor)
    listed(object())
    listed(object())
    assert executor.starts == 2  # start() is idempotent on every executor; called per file as before
