"""The rows a batch commits: each interval's keys and row (``interval_keys``, ``interval_row``), the
intervals rows held until the commit (``IntervalRows``), and the fact files the workers wrote
(``FactCommitter``), committed one Delta commit per table."""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import tempfile
from concurrent.futures import Future, ThreadPoolExecutor
from datetime import datetime, timezone
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.parquet as pq

from proflake import arrowfn
from proflake.ingestion.listing import Candidate
from proflake.schema import PHASE_ROLLUP_OF, record_batch, table_spec
from proflake.sources import SourceObject
from proflake.sources.settings import is_s3
from proflake.store.deltawrite import DataFile, commit_data_files, write_data_file
from proflake.store.memory import release_memory
from proflake.store.store import FACT_TABLES, Store, crash_points

if TYPE_CHECKING:
    from deltalake import DeltaTable


def interval_id(obj: SourceObject, batch_id: str) -> str:
    """The id of one generation of one stats file: its URI, size and version as ingested by one batch.

    The batch is part of it: a file ingested again (a full refresh, a re-ingest after a lost log
    entry) is a new generation with a new id, so liveness, the fact views and the fetch joins, which
    all key on interval_id, never count two generations of a file, and a killed run's clean-up can
    tell the old generation's facts from the new one's (docs/data-safety.md)."""
    text = f"{obj.uri}\x00{obj.size}\x00{obj.version}\x00{batch_id}"
    return hashlib.blake2b(text.encode(errors="surrogateescape"), digest_size=10).hexdigest()



def _timestamp(us: float) -> datetime:
    return datetime.fromtimestamp(round(us) / 1e6, tz=timezone.utc)


def interval_keys(candidate: Candidate, job_id: str, batch_id: str) -> dict:
    """The interval keys of a file: they lead its intervals row and are repeated on each of its fact rows."""
    path, obj = candidate.path, candidate.stats
    assert obj is not None
    return {
        "interval_id": interval_id(obj, batch_id),
        "batch_id": batch_id,
        "job_id": job_id,
        "framework": path.framework,
        "node_id": path.node_id,
        "start_mode": path.start_mode,
        "start_step": path.start_step,
        "start_phase": path.start_phase,
        "start_time_us": path.start_time_us,
        "start_time": _timestamp(path.start_time_us),
        "end_mode": path.end_mode,
        "end_step": path.end_step,
        "end_phase": path.end_phase,
        "end_time_us": path.end_time_us,
        "end_time": _timestamp(path.end_time_us),
        "job_phase": path.job_phase,
    }


def interval_row(candidate: Candidate, keys: dict, now: datetime, summary: dict) -> dict:
    """The intervals row: what the path says, plus what the parsed contents say (``summary``)."""
    path, obj = candidate.path, candidate.stats
    assert obj is not None
    return {
        **keys,
        "profiler": path.profiler,
        "layout": path.layout,
        "duration_s": (path.end_time_us - path.start_time_us) / 1e6,
        "source_uri": obj.uri,
        "html_uri": candidate.html.uri if candidate.html else None,
        "source_size": obj.size,
        "source_version": obj.version,
        "ingested_at": now,
        # What the reader says of its format wins (a summary's own source_format, time_unit, sample_rate_hz).
        "source_format": path.profiler,
        "time_unit": "seconds",
        "sample_rate_hz": None,
        **summary,
    }



class IntervalRows:
    """The batch's intervals rows until they commit: Arrow batches, written every SPOOL_ROWS rows as a
    Parquet data file of the intervals table, in its declared order, into the run's spool (a 100,000-file
    batch held ~130 MB of rows, and deltalake's writer as much again)."""

    # The memory held, and taken to sort and write them, grows with the rows up to this many (20,000
    # held ~10 MB and took ~30 MB more to write): past it, it no longer grows with the corpus.
    SPOOL_ROWS = 5_000
    # Rows arrive a worker's chunk (~16) at a time; converted to Arrow that often, the conversion's
    # per-column cost was ~0.3 s of the main process's CPU at 10,000 files. Held as dicts until this
    # many (~2 MB).
    BATCH_ROWS = 1_000

    def __init__(self, directory: str, batch_id: str, options: dict) -> None:
        self._spec = table_spec("intervals")
        self._directory = directory
        self._batch_id = batch_id
        self._options = options
        self._batches: list[pa.RecordBatch] = []
        self._rows: list[dict] = []  # not yet converted to a batch
        self._held = 0
        self.files: list[DataFile] = []
        self.num_rows = 0

    def add(self, rows: list[dict]) -> None:
        if not rows:
            return
        self._rows.extend(rows)
        self._held += len(rows)
        self.num_rows += len(rows)
        if len(self._rows) >= self.BATCH_ROWS:
            self._convert()
        if self._held >= self.SPOOL_ROWS:
            self.flush()

    def _convert(self) -> None:
        if self._rows:
            self._batches.append(record_batch(self._rows, self._spec.arrow_schema))
            self._rows = []

    def flush(self) -> None:
        """Write what is held (call once more when the last rows are in)."""
        self._convert()
        if not self._batches:
            return
        rows = pa.Table.from_batches(self._batches, schema=self._spec.arrow_schema)
        rows = arrowfn.sort_by(rows, self._spec.sort_by)
        self.files.append(write_data_file("intervals", rows, self._directory, self._batch_id, self._options))
        self._batches, self._held = [], 0
        del rows
        # The allocators would keep what sorting and writing the rows took to the end of the run, while
        # the workers parse.
        release_memory()

    def reader(self, columns: list[str] | None = None) -> pa.RecordBatchReader:
        """Every row written, as one stream (``columns``: only those); before the files move."""
        schema = self._spec.arrow_schema
        if columns is not None:
            schema = pa.schema([schema.field(c) for c in columns])
        batches = (b for f in self.files for b in pq.ParquetFile(f.local_path).iter_batches(columns=columns))
        return pa.RecordBatchReader.from_batches(schema, batches)

    def source_uris(self) -> set[str]:
        return {uri for batch in self.reader(["source_uri"]) for uri in batch.column(0).to_pylist()}


# Where parse workers write a local store's fact files until they are committed: a dead run's files
# stay here, out of the tables, and the next run (repair) removes them.
SPOOL = "_proflake/spool"


class FactCommitter:
    """Commits the fact files the parse workers wrote: all of a table's in ONE Delta commit, when
    parsing is done (a commit costs ~20 ms of CPU, and a table's files could run to hundreds).

    Workers write into a spool folder: inside the store for a local store, whence files move into
    their table just before its commit (a rename); a local temporary folder for an S3 store, whence
    they are uploaded, on a thread, as they arrive (Spark tasks upload their own: etl/proflake/workers/sparkpool.py).
    Either way a run killed before the commit leaves nothing in the tables."""

    def __init__(self, store: Store, batch_id: str) -> None:
        self.store = store
        self.batch_id = batch_id
        self.rows: dict[str, int] = {name: 0 for name in FACT_TABLES}
        if store.is_remote:
            self._spool = tempfile.mkdtemp(prefix="proflake-spool-")
        else:
            self._spool = os.path.join(store.root, SPOOL, batch_id)
        # Workers also write each segment's partial phase roll-up sums (etl/proflake/store/rollups.py adds them up).
        tables = (*FACT_TABLES, *PHASE_ROLLUP_OF.values(), "intervals")
        self.directories = {name: os.path.join(self._spool, name) for name in tables}
        for directory in self.directories.values():
            os.makedirs(directory, exist_ok=True)
        self._files: list[DataFile] = []
        self._uploader = ThreadPoolExecutor(max_workers=1, thread_name_prefix="proflake-upload") if store.is_remote else None
        self._uploads: list[Future] = []
        # The tables committed to, each brought up to date after its commit: the clean-up step reads and
        # deletes through them (bookkeeping.clean_up) instead of opening each again.
        self.tables: dict[str, DeltaTable] = {}

    def add(self, files: list[DataFile]) -> None:
        """Files to commit; re-raise here, in the ingest's thread, an earlier upload's error."""
        for done in [f for f in self._uploads if f.done()]:
            self._uploads.remove(done)
            done.result()
        self._files.extend(files)
        if self._uploader is not None:
            # A file whose local_path is an S3 URI is in its table's prefix already (a Spark task put it).
            self._uploads.extend(self._uploader.submit(self._upload, f) for f in files if not is_s3(f.local_path))

    def finish(self) -> None:
        """Commit every fact table's files (after their uploads)."""
        for name in FACT_TABLES:
            files = [f for f in self._files if f.table == name]
            if files:
                self.commit(name, files)
                self.rows[name] += sum(f.rows for f in files)

    def commit(self, name: str, files: list[DataFile], *, replace_all: bool = False) -> None:
        """Move ``files`` (given to ``add`` before) into table ``name`` and add them in one commit
        (``replace_all``: the commit also removes every file the table had)."""
        while self._uploads:
            self._uploads.pop(0).result()
        if not self.store.is_remote:
            for f in files:
                os.rename(f.local_path, os.path.join(self.store.root, name, f.name))
        table = self.tables.pop(name, None) or self.store.delta(name)
        with self.store.committing(name):
            commit_data_files(table, files, self.batch_id, replace_all=replace_all)
        crash_points.committed()
        # A transaction leaves its table object where it was: read the commit just made (~0.4 ms locally
        # against ~1.5 for an open; on S3 a LIST and a GET against a whole log's).
        table.update_incremental()
        self.tables[name] = table

    def table(self, name: str) -> DeltaTable:
        """Table ``name``, opened now for a commit the caller makes through it (which leaves it current),
        and kept with the tables committed to."""
        if name not in self.tables:
            self.tables[name] = self.store.delta(name)
        return self.tables[name]

    def close(self) -> None:
        if self._uploader is not None:
            self._uploader.shutdown(wait=True)
        shutil.rmtree(self._spool, ignore_errors=True)
        if not self.store.is_remote:
            with contextlib.suppress(OSError):
                os.rmdir(os.path.dirname(self._spool))  # the spool folder itself, when no other is left

    def _upload(self, f: DataFile) -> None:
        from proflake.sources.settings import explain_client_error, split_s3_uri

        bucket, key = split_s3_uri(f"{self.store.table_uri(f.table)}/{f.name}")
        if not hasattr(self, "_client"):
            assert self.store.s3 is not None  # a store on S3 has its S3 settings
            self._client = self.store.s3.client()
        try:
            self._client.upload_file(f.local_path, bucket, key)
        except Exception as e:
            raise explain_client_error(e, f"s3://{bucket}/{key}") from e
        os.unlink(f.local_path)


def clear_spool(store: Store) -> None:
    """Remove fact files a dead run wrote but never committed. Call with the lock held."""
    if not store.is_remote:
        shutil.rmtree(os.path.join(store.root, SPOOL), ignore_errors=True)
