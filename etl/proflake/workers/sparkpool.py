"""Parse on Apache Spark: slices of ~500 files, each parsed by a Spark task running proflake's own pool.

    ingest("s3://bucket/jobs", "s3://bucket/store", executor="spark")     # the active session, or a new one
    ingest(source, store, executor=spark)                                 # a notebook's SparkSession
    ingest(source, store, executor=SparkPool(spark, min_files=0))         # every setting by hand

``SparkPool`` answers what ``ParsePool`` answers (``parse(tasks, sink)`` yields ChunkResults), so the
batch (etl/proflake/ingestion/batch.py) lists, claims, commits and repairs exactly as it does with the
local pool. The tasks are cut into slices of ``slice_files`` files; one Spark job per wave of slices runs
``mapInArrow`` over a DataFrame with one slice per partition. Each Spark task:

- reads its own objects: a local file by the parse worker itself (``O_NOFOLLOW``: a symbolic link is
  never followed), an S3 object here with boto3 (a key with ``.``/``..`` segments is refused, an object
  over the size limit is not read), so the bytes never pass through the driver;
- parses them in a one-worker ``ParsePool`` (a crash or a memory overrun costs that file: the file is
  quarantined, as on one machine), which writes the Parquet segment files straight into the batch's
  spool (a local store: a folder every executor sees) or, for an S3 store, into the table's prefix;
- returns the outcomes and the ``DataFile`` records of what it wrote.

The driver commits exactly the returned files, never "what is in the folder": files written by a task
attempt whose result Spark did not keep (a retry, a speculative copy) stay unreferenced, in the spool
(removed when the batch ends, or by the next run's repair) or in an S3 table's prefix (removed by
``proflake compact``'s vacuum).

Below ``min_files`` new files the work goes to the local pool: a Spark job costs seconds before its
first file (DEFAULT_SPARK_MIN_FILES says how many). pyspark is imported only when Spark is used.
"""

from __future__ import annotations

import itertools
import os
import pickle
import shutil
import sys
import tempfile
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from proflake.errors import ProflakeError, StoreError
from proflake.sources.settings import S3Config, explain_client_error, is_s3, split_s3_uri
from proflake.store.deltawrite import DataFile
from proflake.workers.pool import ParsePool
from proflake.workers.protocol import (
    DEFAULT_MEMORY_MB,
    DEFAULT_PARSE,
    DEFAULT_TIMEOUT_S,
    ChunkResult,
    FactSink,
    Failure,
    Task,
)

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

# Files per Spark task: enough that a task's fixed cost (its Python worker, one parse process, the
# scheduling) is small beside its parsing (~0.5-1.5 s of CPU per 500 files of the 10k corpus), few
# enough that 10^5 files make hundreds of tasks to spread over a cluster.
SLICE_FILES = 500
# Slices per Spark job: the driver holds one wave's tasks and answers at a time.
WAVE_SLICES = 400
# Below this many new files, SparkPool hands the work to the local pool. A Spark ingest pays a fixed
# cost the local pool does not (a new session: ~10-15 s of JVM start-up; on a running session, ~1-3 s
# of job scheduling and Python workers) and, on 2 cores, parses more slowly than the local pool
# (docs/spark.md has the measurements): it pays off only with many more cores than the driver has,
# over a batch large enough to cover the fixed cost.
DEFAULT_SPARK_MIN_FILES = 10_000
# Objects a Spark task reads ahead of its parse worker (bounds its memory to about as many files).
READ_AHEAD = 16
_RESULT_SCHEMA = "slice INT, result BINARY"


@dataclass(frozen=True)
class _Slice:
    """What one Spark task is sent: its files, where their facts go, and the limits that apply."""

    number: int
    tasks: list[Task]
    sink: FactSink
    memory_mb: int
    timeout_s: float
    parse: str
    max_bytes: int
    s3: S3Config | None  # endpoint, profile and region only: executors use their own credentials


@dataclass
class SparkStats:
    """What the Spark jobs of one run cost, as the driver saw them (the benchmark's Amdahl parts)."""

    session_s: float = 0.0  # getting the session (a new one starts a JVM)
    jobs_s: float = 0.0  # wall time inside Spark jobs, submission to the last answer
    jobs: int = 0
    slices: int = 0
    task_s: list[float] = field(default_factory=list)  # each task's own wall time, as it measured it


class SparkPool:
    """A parse executor on Spark; ``parse(tasks, sink)`` as ``ParsePool.parse``. See the module's doc."""

    reads_sources = True  # tasks carry paths or S3 URIs, never bytes: executors read them

    def __init__(
        self,
        spark: SparkSession | None = None,
        *,
        min_files: int = DEFAULT_SPARK_MIN_FILES,
        slice_files: int = SLICE_FILES,
        workers: int | None = None,
        memory_mb: int = DEFAULT_MEMORY_MB,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        max_file_mb: float = 512,
        s3: S3Config | None = None,
        parse: str = DEFAULT_PARSE,
    ) -> None:
        """``spark``: the session to run on (default: the active one, or a new one from the builder, as
        spark-submit configures it). ``workers``: the local pool's size, used below ``min_files`` new
        files. ``memory_mb``, ``timeout_s``: each executor's parse worker's limits, as the local pool's.
        ``parse``: the parse function as "module:function" (tests swap in misbehaving ones)."""
        if slice_files < 1:
            raise ProflakeError(f"slice_files must be at least 1, not {slice_files}")
        self.spark = spark
        self.min_files = min_files
        self.slice_files = slice_files
        self.memory_mb = memory_mb
        self.timeout_s = timeout_s
        self.max_bytes = int(max_file_mb * 1024 * 1024)
        self.s3 = S3Config(s3.endpoint_url, s3.profile, s3.region) if s3 is not None else None
        self.spec = parse
        self.local = ParsePool(workers, memory_mb=memory_mb, timeout_s=timeout_s, parse=parse)
        self.stats = SparkStats()
        self.size = self.local.size

    def __enter__(self) -> SparkPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def start(self) -> None:
        """Nothing starts early: whether Spark or the local pool parses is known once files are listed."""

    def close(self) -> None:
        self.local.close()

    def select(self, files: int, source: object, log: Callable[[str], None] | None = None) -> ParsePool | SparkPool:
        """The executor for ``files`` new files from ``source``: the local pool below ``min_files``, or
        for a source executors cannot read themselves (neither a local folder nor an S3 prefix)."""
        from proflake.sources.local import LocalSource
        from proflake.sources.s3 import S3Source

        say = log or (lambda message: None)
        if type(source) not in (LocalSource, S3Source):
            say(f"parsing on the local pool: Spark tasks read only local folders and S3 prefixes, not {type(source).__name__}")
            return self.local
        if files < self.min_files:
            say(f"parsing {files} new file(s) on the local pool: fewer than the {self.min_files} a Spark job is started for (--spark-min-files)")
            return self.local
        return self

    def session(self) -> SparkSession:
        """The session given, else the active one, else a new one built as spark-submit configured it."""
        if self.spark is None:
            started = time.perf_counter()
            try:
                from pyspark.sql import SparkSession
            except ImportError as e:
                raise ProflakeError("the Spark executor needs pyspark: pip install 'proflake[spark]'") from e

            active = SparkSession.getActiveSession()
            if active is None:
                # A session started here runs its Python workers with this interpreter (where proflake is).
                os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
                active = SparkSession.builder.appName("proflake ingest").getOrCreate()
            self.spark = active
            self.stats.session_s = time.perf_counter() - started
        return self.spark

    def parse(self, tasks: Iterable[Task], sink: FactSink | None = None) -> Iterator[ChunkResult]:
        """Parse ``tasks`` on Spark, a wave of slices per Spark job; a ChunkResult per slice, once its
        Spark task has written every file holding its facts."""
        if sink is None:
            raise ProflakeError("SparkPool.parse needs a sink: its tasks write their facts themselves")
        sink = replace(sink, directories={t: d if is_s3(d) else os.path.abspath(d) for t, d in sink.directories.items()})
        spark = self.session()
        pending = iter(tasks)
        number = 0
        while True:
            wave = list(itertools.islice(pending, self.slice_files * WAVE_SLICES))
            if not wave:
                return
            slices = []
            for start in range(0, len(wave), self.slice_files):
                slices.append(_Slice(number, wave[start : start + self.slice_files], sink, self.memory_mb,
                                     self.timeout_s, self.spec, self.max_bytes, self.s3))
                number += 1
            del wave
            yield from self._run(spark, slices)

    def _run(self, spark: SparkSession, slices: list[_Slice]) -> Iterator[ChunkResult]:
        started = time.perf_counter()
        import pyarrow as pa

        # Handed over as Arrow: a list of rows would be pickled through an RDD whose Python tasks start
        # a second Python daemon on every executor (one more interpreter and its workers, ~2 s of CPU)
        # beside the one mapInArrow's tasks use.
        frame = spark.createDataFrame(pa.table({
            "slice": pa.array([s.number for s in slices], pa.int32()),
            "payload": pa.array([pickle.dumps(s, protocol=pickle.HIGHEST_PROTOCOL) for s in slices], pa.binary()),
        }))
        # One slice per partition, so each is a task of its own (range bounds over distinct numbers).
        frame = frame.repartitionByRange(len(slices), "slice")
        try:
            answers = frame.mapInArrow(_run_slices, _RESULT_SCHEMA).toArrow()
        except Exception as e:  # pyspark's own errors (a task failed every attempt); said in one line
            raise StoreError(f"the Spark parse job failed: {_first_line(e)}") from e
        self.stats.jobs_s += time.perf_counter() - started
        self.stats.jobs += 1
        self.stats.slices += len(slices)
        done = dict(zip(answers.column("slice").to_pylist(), answers.column("result").to_pylist()))
        missing = [s.number for s in slices if s.number not in done]
        if missing:
            raise StoreError(f"the Spark parse job returned no answer for slice(s) {missing[:5]}")
        for s in slices:
            outcomes, files, seconds = pickle.loads(done.pop(s.number))
            self.stats.task_s.append(seconds)
            yield ChunkResult(outcomes, files)


def _first_line(error: BaseException) -> str:
    lines = [line.strip() for line in str(error).strip().splitlines() if line.strip()]
    # A Python error inside a task: its last line says what it was.
    errors = [line for line in lines if line.startswith(("StoreError", "ProflakeError", "OSError", "MemoryError"))]
    return (errors or lines or [type(error).__name__])[-1 if errors else 0][:500]


# -- the executor side --------------------------------------------------------------------------------
def _run_slices(batches: Iterator[Any]) -> Iterator[Any]:
    """mapInArrow's function (on an executor): each row is a pickled _Slice; each answer row the
    pickled (outcomes, files written, seconds taken)."""
    import pyarrow as pa

    for batch in batches:
        for number, payload in zip(batch.column(0).to_pylist(), batch.column(1).to_pylist()):
            started = time.perf_counter()
            outcomes, files = parse_slice(pickle.loads(payload))
            _fail_first_attempt(number)
            answer = pickle.dumps((outcomes, files, time.perf_counter() - started), protocol=pickle.HIGHEST_PROTOCOL)
            yield pa.RecordBatch.from_arrays([pa.array([number], pa.int32()), pa.array([answer], pa.binary())], ["slice", "result"])


def _fail_first_attempt(number: int) -> None:
    """Crash testing: with PROFLAKE_FAIL_SPARK_TASKS=FOLDER, each slice's first attempt fails after
    writing its fact files (a marker file in FOLDER records the attempt), so Spark runs the task again
    (a master of ``local[N,F]`` allows F attempts) and the first attempt's files are never returned."""
    folder = os.environ.get("PROFLAKE_FAIL_SPARK_TASKS")
    if not folder:
        return
    try:
        os.close(os.open(os.path.join(folder, f"slice-{number}"), os.O_CREAT | os.O_EXCL | os.O_WRONLY))
    except FileExistsError:
        return  # a later attempt: it succeeds
    raise RuntimeError(f"PROFLAKE_FAIL_SPARK_TASKS: slice {number}'s first attempt fails after writing its files")


def parse_slice(job: _Slice) -> tuple[list[tuple[int, object]], list[DataFile]]:
    """Parse one slice in a one-worker pool: outcomes by task key, and the data files holding the facts
    (for a sink folder that is an S3 prefix, already uploaded there; their ``local_path`` is the URI)."""
    remote = {table: folder for table, folder in job.sink.directories.items() if is_s3(folder)}
    scratch = tempfile.mkdtemp(prefix="proflake-slice-") if remote else None
    directories = dict(job.sink.directories)
    for table in remote:
        directories[table] = os.path.join(scratch, table)  # type: ignore[arg-type]
        os.makedirs(directories[table])
    # One core per Spark task: the worker writes its segments itself, not on a second thread.
    sink = replace(job.sink, directories=directories, background=False)
    outcomes: list[tuple[int, object]] = []
    files: list[DataFile] = []
    try:
        reader = _Reader(job)
        with ParsePool(1, memory_mb=job.memory_mb, timeout_s=job.timeout_s, parse=job.parse) as pool:
            for result in pool.parse(reader.tasks(), sink):
                outcomes.extend(result.outcomes)
                files.extend(result.files)
        outcomes.extend(reader.failures)
        if remote:
            files = [_upload(f, remote[f.table], reader) if f.table in remote else f for f in files]
    finally:
        if scratch is not None:
            shutil.rmtree(scratch, ignore_errors=True)
    return outcomes, files


class _Reader:
    """A slice's tasks as its parse worker takes them: local files as they are (the worker reads them),
    S3 objects read here, a few ahead, under the source's rules; what cannot be read is a Failure."""

    def __init__(self, job: _Slice) -> None:
        self.job = job
        self.failures: list[tuple[int, Failure]] = []
        self._client: Any = None

    def client(self) -> Any:
        if self._client is None:
            self._client = (self.job.s3 or S3Config.from_env()).client()
        return self._client

    def tasks(self) -> Iterator[Task]:
        pending: deque[tuple[Task, Future]] = deque()
        with ThreadPoolExecutor(max_workers=8, thread_name_prefix="proflake-read") as threads:
            for task in self.job.tasks:
                if task.path is None or not is_s3(task.path):
                    yield task
                    continue
                pending.append((task, threads.submit(self.read, task.path)))
                while pending and (len(pending) >= READ_AHEAD or pending[0][1].done()):
                    yield from self._settle(*pending.popleft())
            while pending:
                yield from self._settle(*pending.popleft())

    def _settle(self, task: Task, future: Future) -> Iterator[Task]:
        data = future.result()
        if isinstance(data, Failure):
            self.failures.append((task.key, data))
            return
        yield Task(task.key, task.profiler, data, task.interval, size=len(data))

    def read(self, uri: str) -> bytes | Failure:
        """An object's bytes, or why not: the S3 source's rules (no '.'/'..' key segments) and the size
        limit, checked against the object as it is now (it may have grown since it was listed)."""
        bucket, key = uri[len("s3://") :].partition("/")[::2]
        if key.startswith("/") or any(part in (".", "..") for part in key.split("/")):
            return Failure("unsafe_path", f"{uri} has '.' or '..' path segments in its key; such keys are not read")
        import botocore.exceptions

        try:
            response = self.client().get_object(Bucket=bucket, Key=key)
            size = int(response.get("ContentLength") or 0)
            if size > self.job.max_bytes:
                response["Body"].close()
                limit = self.job.max_bytes / 1024 / 1024
                return Failure("too_large", f"{uri} is {size / 1e6:.0f} MB, over the {limit:g} MB limit (--max-file-mb)")
            return response["Body"].read()
        except (botocore.exceptions.BotoCoreError, botocore.exceptions.ClientError) as e:
            return Failure("read", str(explain_client_error(e, uri)))


def _upload(f: DataFile, prefix: str, reader: _Reader) -> DataFile:
    """Put a written file at its place in an S3 table's prefix (uncommitted until the driver's commit)."""
    uri = f"{prefix}/{f.name}"
    bucket, key = split_s3_uri(uri)
    try:
        reader.client().upload_file(f.local_path, bucket, key)
    except Exception as e:
        raise explain_client_error(e, uri) from e
    return replace(f, local_path=uri)
