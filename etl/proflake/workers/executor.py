"""Which parse executor a batch runs: the local process pool (the default) or Spark (``SparkPool``).

An executor is what ``ParsePool`` is to the batch: ``start()``, ``close()`` (and ``with``), ``size``, and
``parse(tasks, sink)`` yielding ChunkResults once the files holding their facts are written. One whose
``reads_sources`` is true reads the objects itself (tasks carry a path or an S3 URI, never bytes), and
one that cannot always be worth starting answers ``select(files, source)`` with the executor to use;
one with ``expect(files)`` starts the workers that many listed files are worth (``start_as_listed``).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

from proflake.errors import ProflakeError
from proflake.sources.settings import S3Config
from proflake.workers.pool import ParsePool
from proflake.workers.protocol import DEFAULT_MEMORY_MB, DEFAULT_TIMEOUT_S

EXECUTORS = ("local", "inline", "spark")


def make_executor(
    executor: Any = None,
    *,
    workers: int | None = None,
    memory_mb: int = DEFAULT_MEMORY_MB,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    max_file_mb: float = 512,
    s3: S3Config | None = None,
    spark_min_files: int | None = None,
) -> Any:
    """The executor ``executor`` names: None or "local" (a ParsePool of ``workers``), "inline" (the same
    pool with its workers on threads of this process: no crash isolation, memory limit or timeout;
    etl/proflake/workers/inline.py), "spark" (a SparkPool on the active SparkSession, or a new one), a
    SparkSession (a SparkPool on it), or an executor object, used as it is (its own settings then apply,
    not these)."""
    if executor is None or executor in ("local", "inline"):
        return ParsePool(workers, memory_mb=memory_mb, timeout_s=timeout_s, inline=executor == "inline")
    spark = None
    if isinstance(executor, str):
        if executor != "spark":
            raise ProflakeError(f"unknown executor {executor!r}; expected one of: {', '.join(EXECUTORS)}")
    elif _is_spark_session(executor):
        spark = executor
    elif callable(getattr(executor, "parse", None)):
        return executor
    else:
        raise ProflakeError(
            f"executor {executor!r} is not one proflake can run on; pass 'local', 'inline', 'spark', a SparkSession or a SparkPool"
        )
    from proflake.workers.sparkpool import DEFAULT_SPARK_MIN_FILES, SparkPool

    return SparkPool(
        spark, min_files=DEFAULT_SPARK_MIN_FILES if spark_min_files is None else spark_min_files, workers=workers,
        memory_mb=memory_mb, timeout_s=timeout_s, max_file_mb=max_file_mb, s3=s3,
    )


def executor_for(pool: Any, files: int, source: object, log: Callable[[str], None] | None = None) -> Any:
    """The executor that parses ``files`` new files of ``source``: ``pool``, or the one it hands them to
    (saying why in ``log``)."""
    select = getattr(pool, "select", None)
    return select(files, source, log) if select is not None else pool


def start_as_listed(pool: Any) -> Callable[[object], None]:
    """What to call for each new file a listing finds: a local pool (``expect``) starts as many workers
    as the files listed so far are worth (a nightly batch of a few files: one, not one per core); any
    other executor starts at the first."""
    expect = getattr(pool, "expect", None)
    if expect is None:
        return lambda obj: pool.start()
    count = itertools.count(1)
    return lambda obj: expect(next(count))


def _is_spark_session(value: object) -> bool:
    kind = type(value)
    return kind.__module__.startswith("pyspark.") and kind.__name__ == "SparkSession"
