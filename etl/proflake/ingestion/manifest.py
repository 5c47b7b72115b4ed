"""The store's live intervals as an ingest run compares its listing with them, answered by DuckDB.

A run asks the store four things about what it lists: which files are unchanged (a live interval has
their URI, size and version), which live intervals a new file would duplicate, which folders the job
ids it may take came from, and (after its commit) which quarantined files and batches are live.
Holding the live intervals in Python dicts took ~1.5 KB each (1.5 GB at 10^6; docs/spark.md). Here
DuckDB joins the listing, spilled as Parquet, with the intervals table's files, under a memory limit,
spilling to a temporary folder, and only what concerns this batch comes back: the changed files'
previous versions, the live intervals its new files name, the folders of its jobs. The driver's
memory then follows the batch, not the store.
"""

from __future__ import annotations

import contextlib
import marshal
import os
import shutil
import tempfile
from collections.abc import Iterable, Iterator
from typing import IO

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from proflake.errors import ProflakeError
from proflake.ingestion.listing import job_candidates, job_folder
from proflake.ingestion.planned import is_utf8
from proflake.layout import PYINSTRUMENT_HTML_FILE, PYINSTRUMENT_JSON_FILE, IntervalPath
from proflake.schema import arrow_column
from proflake.sources import SourceObject
from proflake.sql import connect
from proflake.store.snapshot import Snapshot
from proflake.store.store import Store

# DuckDB's memory for these joins (PROFLAKE_MANIFEST_MEMORY overrides it): beyond it, they spill to
# the temporary folder. One thread: each thread of a join needs its own share of the limit.
MEMORY_LIMIT = "256MB"
THREADS = 1
_CHUNK = 32_768  # listed objects per Arrow batch written for the join
_BLOCK = 512  # listed objects per block of the spilled objects: the kept ones are read back by block
_KINDS = {PYINSTRUMENT_JSON_FILE: 1, PYINSTRUMENT_HTML_FILE: 2}  # other names: 0
_LISTED = pa.schema([("seq", pa.int64()), ("uri", pa.string()), ("size", pa.int64()), ("version", pa.string()),
                     ("kind", pa.int64()), ("folder", pa.int64())])
_KEY_COLUMNS = ("job_id", "profiler", "node_id", "start_time_us", "end_time_us", "start_mode", "end_mode")
_KEYS = pa.schema([(c, pa.float64() if c.endswith("_us") else pa.string()) for c in _KEY_COLUMNS])
_PREFIX = "proflake-manifest-"


class Manifest:
    """A DuckDB connection over the store's live intervals (the view ``intervals``: the table's files as
    they are when it is first asked), bounded in memory, with a temporary folder for its spills; opened
    on first use. ``close()`` it."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.folder = ""
        self._con: duckdb.DuckDBPyConnection | None = None
        self.unchanged = 0  # files found unchanged by the last ``changed``

    @property
    def con(self) -> duckdb.DuckDBPyConnection:
        return self._con or self._open()

    def _open(self) -> duckdb.DuckDBPyConnection:
        self.folder = _temporary_folder()
        try:
            con = bounded_connection(self.folder)
            Snapshot(self.store, con, tables=(), snapshot_intervals=False)
        except BaseException:
            shutil.rmtree(self.folder, ignore_errors=True)
            raise
        self._con = con
        return con

    def close(self) -> None:
        if self._con is not None:
            with contextlib.suppress(duckdb.Error):
                self._con.close()
            self._con = None
            shutil.rmtree(self.folder, ignore_errors=True)

    def _spill_path(self, name: str) -> str:
        """A file in the connection's temporary folder (opening the connection first)."""
        if self._con is None:
            self._open()
        return os.path.join(self.folder, name)

    def __enter__(self) -> Manifest:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _live(self, where: str = "") -> str:
        return f"(SELECT * FROM intervals {where})"

    def changed(self, objects: Iterable[SourceObject], prefix: str, previous: dict[str, tuple[str, int, str]]) -> Iterator[SourceObject]:
        """``objects`` in their order, less the unchanged stats files (counted in ``self.unchanged``) and
        the pyinstrument htmls beside an unchanged json; ``previous`` gets the listed files that a live
        interval names at another size or version: source_uri -> (interval_id, size, version).

        The listing is read whole before the first object comes back: it is spilled (the objects
        themselves by blocks, their URIs, sizes and versions as Parquet) and joined in DuckDB."""
        listed, blocks = self._spill_listing(objects, prefix)
        try:
            under = listed["under"]
            live = self._live("WHERE starts_with(source_uri, $prefix)" if under else "")
            params = {"prefix": prefix} if under else {}
            path = self._spill_path("changed.parquet")
            # Every listed object no live interval names at its size and version (problem objects have no uri).
            written = self.con.execute(
                f"COPY (SELECT seq, kind, folder, uri FROM read_parquet($listing) AS l WHERE NOT EXISTS ("
                f"SELECT 1 FROM {live} AS m WHERE m.source_uri = l.uri AND m.source_size = l.size "
                f"AND m.source_version = l.version)) TO '{_sql_path(path)}' (FORMAT parquet)",
                {**params, "listing": listed["path"]},
            ).fetchone()
            self.unchanged = listed["count"] - (written[0] if written else 0)
            # An html stays when its folder's json changed or is not there (then it is reported alone).
            rows = self.con.sql(
                f"SELECT c.seq, m.interval_id, m.source_size, m.source_version FROM read_parquet($changed) AS c "
                f"LEFT JOIN {live} AS m ON m.source_uri = c.uri "
                "WHERE c.kind <> 2 OR c.folder IN (SELECT folder FROM read_parquet($changed) WHERE kind = 1) "
                "OR c.folder NOT IN (SELECT folder FROM read_parquet($listing) WHERE kind = 1) ORDER BY c.seq",
                params={**params, "listing": listed["path"], "changed": path},
            ).to_arrow_reader(4096)
            yield from _kept(rows, blocks, previous)
        finally:
            blocks.close()

    def _spill_listing(self, objects: Iterable[SourceObject], prefix: str) -> tuple[dict, _Blocks]:
        """Write every listed object to a block file and its join columns to Parquet; a pyinstrument
        file's folder is numbered as ingest's listing tells folders apart (a source lists a folder's
        objects together, a subfolder's perhaps between them: etl/proflake/sources/base.py)."""
        path = self._spill_path("listing.parquet")
        columns: list[list] = [[] for _ in _LISTED.names[1:]]  # seq: the position, added when written
        uris, sizes, versions, kinds, numbers = columns
        count, under, numbered = 0, True, 0
        folders: list[tuple[tuple[str, ...], int]] = []  # the open folders: path parts -> number
        try:
            blocks = _Blocks()
        except OSError as e:
            raise _spill_error(e) from e
        hold = blocks.add
        try:
            with pq.ParquetWriter(path, _LISTED, compression="none") as writer:
                for obj in objects:
                    hold(obj)
                    count += 1
                    uri, parts, problem = obj.uri, obj.parts, obj.problem
                    while folders and parts[: len(folders[-1][0])] != folders[-1][0]:
                        folders.pop()
                    # As ingest's listing does: a problem object is never paired (it is reported as it is).
                    kind = 0 if problem or not parts else _KINDS.get(parts[-1], 0)
                    folder = None
                    if kind:
                        if not folders or folders[-1][0] != parts[:-1]:
                            numbered += 1
                            folders.append((parts[:-1], numbered))
                        folder = folders[-1][1]
                    under = under and uri.startswith(prefix)
                    uris.append(None if problem or not (uri.isascii() or is_utf8(uri)) else uri)
                    sizes.append(obj.size)
                    versions.append(obj.version)
                    kinds.append(kind)
                    numbers.append(folder)
                    if len(uris) >= _CHUNK:
                        _write_chunk(writer, count - len(uris), columns, _LISTED)
                _write_chunk(writer, count - len(uris), columns, _LISTED)
            blocks.finish()
        except OSError as e:
            blocks.close()
            raise _spill_error(e) from e
        return {"path": path, "count": count, "under": under and count > 0}, blocks

    def count_live(self, prefix: str | None) -> tuple[int, int]:
        """(live intervals whose source_uri starts with ``prefix`` (None: all), every live interval)."""
        under = "true" if prefix is None else "starts_with(source_uri, $prefix)"
        row = self.con.execute(
            f"SELECT count(*) FILTER (WHERE {under}), count(*) FROM intervals", {} if prefix is None else {"prefix": prefix}
        ).fetchone()
        return (row[0], row[1]) if row else (0, 0)

    def claim_context(self, listing: Iterable[tuple], *, outside: str | None, qualify: bool) -> tuple[dict[tuple, str], dict[str, str]]:
        """For the listing's new files: the live intervals they would duplicate (key -> source_uri) and
        the folder of every store job whose id they may take (job id -> folder: with ``qualify``, the
        ids of their parent folders too, etl/proflake/ingestion/listing.py ``qualified_job``).
        ``outside``: only live intervals whose source_uri does not start with it (a full refresh's own
        earlier generations are replaced, not duplicated)."""
        path = self._spill_path("keys.parquet")
        columns: list[list] = [[] for _ in _KEYS]
        try:
            with pq.ParquetWriter(path, _KEYS, compression="none") as writer:
                for job, node_id, start_time_us, _, path_fields, stats, _html in listing:
                    p = IntervalPath(*path_fields)
                    for job_id in (job, *job_candidates(job, job_folder(stats[0]))) if qualify else (job,):
                        for column, value in zip(columns, (job_id, p.profiler, node_id, start_time_us, p.end_time_us, p.start_mode, p.end_mode)):
                            column.append(value)
                    if len(columns[0]) >= _CHUNK:
                        _write_chunk(writer, None, columns, _KEYS)
                _write_chunk(writer, None, columns, _KEYS)
        except OSError as e:
            raise _spill_error(e) from e
        live = self._live("" if outside is None else "WHERE NOT starts_with(source_uri, $prefix)")
        params = {"keys": path, **({} if outside is None else {"prefix": outside})}
        on = " AND ".join(f"m.{c} = k.{c}" for c in _KEY_COLUMNS)
        select = ", ".join(f"m.{c}" for c in _KEY_COLUMNS)
        existing = {
            row[:-1]: row[-1]
            for row in self.con.execute(
                f"SELECT {select}, m.source_uri FROM {live} AS m SEMI JOIN read_parquet($keys) AS k ON {on}", params
            ).fetchall()
        }
        folders = {
            job: job_folder(uri)
            for job, uri in self.con.execute(
                f"SELECT job_id, min(source_uri) FROM {live} AS m "
                "WHERE job_id IN (SELECT DISTINCT job_id FROM read_parquet($keys)) GROUP BY job_id",
                params,
            ).fetchall()
        }
        return existing, folders

    def live_uris(self, uris: Iterable[str]) -> set[str]:
        """Those of ``uris`` that a live interval was ingested from."""
        wanted = [uri for uri in uris if is_utf8(uri)]
        if not wanted:
            return set()
        table = pa.Table.from_arrays([arrow_column(wanted, pa.string())], names=["uri"])
        self.con.register("_wanted", table)
        try:
            return {row[0] for row in self.con.execute(
                "SELECT DISTINCT source_uri FROM intervals WHERE source_uri IN (SELECT uri FROM _wanted)").fetchall()}
        finally:
            self.con.unregister("_wanted")

    def live_batches(self, among: Iterable[str] | None = None) -> set[str]:
        """The batches with a live interval (``among``: only of these)."""
        if among is None:
            return {row[0] for row in self.con.execute("SELECT DISTINCT batch_id FROM intervals").fetchall()}
        wanted = list(among)
        if not wanted:
            return set()
        return {row[0] for row in self.con.execute(
            "SELECT DISTINCT batch_id FROM intervals WHERE list_contains($wanted, batch_id)", {"wanted": wanted}).fetchall()}

    def jobs_under(self, prefix: str) -> list[tuple[str, int, int]]:
        """Per job: (job_id, live intervals under ``prefix``, live intervals elsewhere)."""
        return self.con.execute(
            "SELECT job_id, count(*) FILTER (WHERE starts_with(source_uri, $prefix)), "
            "count(*) FILTER (WHERE NOT starts_with(source_uri, $prefix)) FROM intervals GROUP BY job_id ORDER BY job_id",
            {"prefix": prefix},
        ).fetchall()


def bounded_connection(folder: str) -> duckdb.DuckDBPyConnection:
    """A DuckDB connection held to MEMORY_LIMIT (PROFLAKE_MANIFEST_MEMORY) that spills into ``folder``."""
    con = connect(config={
        "memory_limit": os.environ.get("PROFLAKE_MANIFEST_MEMORY") or MEMORY_LIMIT, "threads": THREADS,
        "temp_directory": folder, "preserve_insertion_order": False,
    })
    con.execute("SET enable_progress_bar = false")
    return con


@contextlib.contextmanager
def bounded_duckdb() -> Iterator[duckdb.DuckDBPyConnection]:
    """``bounded_connection`` in a temporary folder of its own, removed afterwards."""
    folder = _temporary_folder()
    try:
        con = bounded_connection(folder)
        try:
            yield con
        finally:
            con.close()
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _kept(rows: pa.RecordBatchReader, blocks: _Blocks, previous: dict[str, tuple[str, int, str]]) -> Iterator[SourceObject]:
    last = -1
    for batch in rows:
        for seq, interval, size, version in zip(*(column.to_pylist() for column in batch.columns)):
            if seq == last:
                continue  # two live intervals of one URI (never written so): the first is its previous version
            last = seq
            obj = blocks.get(seq)
            if interval is not None:
                previous[obj.uri] = (interval, size, version)
            yield obj


class _Blocks:
    """Listed objects spilled in blocks of _BLOCK to an unnamed temporary file, read back by position
    in increasing order: only the blocks holding a kept object are read."""

    def __init__(self) -> None:
        self._file: IO[bytes] = tempfile.TemporaryFile(prefix=_PREFIX)  # noqa: SIM115 (closed by close())
        self._held: list[tuple] = []
        self._offsets: list[int] = []
        self._block = -1
        self._objects: list[tuple] = []

    def add(self, obj: SourceObject) -> None:
        self._held.append((obj.uri, obj.parts, obj.size, obj.version, obj.problem, obj.problem_kind))
        if len(self._held) >= _BLOCK:
            self._write()

    def finish(self) -> None:
        if self._held:
            self._write()

    def _write(self) -> None:
        self._offsets.append(self._file.seek(0, os.SEEK_END))
        data = marshal.dumps(self._held)
        self._file.write(len(data).to_bytes(8, "little") + data)
        self._held = []

    def get(self, seq: int) -> SourceObject:
        block, index = divmod(seq, _BLOCK)
        if block != self._block:
            self._file.seek(self._offsets[block])
            size = int.from_bytes(self._file.read(8), "little")
            self._objects, self._block = marshal.loads(self._file.read(size)), block
        return SourceObject(*self._objects[index])

    def close(self) -> None:
        self._file.close()


def _write_chunk(writer: pq.ParquetWriter, first: int | None, columns: list[list], schema: pa.Schema) -> None:
    """Write ``columns`` as one batch (led by a position column from ``first``, unless None) and empty them."""
    if columns[0]:
        # Built from buffers: pyarrow's own conversion of lists imports pandas (half a second a run).
        arrays = [arrow_column(c, f.type) for c, f in zip(columns, list(schema)[-len(columns):])]
        if first is not None:
            positions = np.arange(first, first + len(columns[0]), dtype=np.int64)
            arrays.insert(0, pa.Array.from_buffers(pa.int64(), len(positions), [None, pa.py_buffer(positions)]))
        writer.write_batch(pa.RecordBatch.from_arrays(arrays, schema=schema))
        for column in columns:
            column.clear()


def _sql_path(path: str) -> str:
    return path.replace("'", "''")


def _temporary_folder() -> str:
    """A new folder for DuckDB's spills and the joins' inputs, named after this process; those of
    processes that are gone (a killed run) are removed first."""
    root = tempfile.gettempdir()
    with contextlib.suppress(OSError):
        for name in os.listdir(root):
            pid = name[len(_PREFIX):].split("-", 1)[0]
            if name.startswith(_PREFIX) and pid.isdigit() and not _alive(int(pid)):
                shutil.rmtree(os.path.join(root, name), ignore_errors=True)
    try:
        return tempfile.mkdtemp(prefix=f"{_PREFIX}{os.getpid()}-")
    except OSError as e:
        raise _spill_error(e) from e


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True  # someone else's process
    return True


def _spill_error(e: OSError) -> ProflakeError:
    return ProflakeError(
        f"cannot write the comparison of the listing with the store to the temporary folder {tempfile.gettempdir()!r} "
        f"({e.strerror or e}); free space there or set TMPDIR to a writable folder"
    )
