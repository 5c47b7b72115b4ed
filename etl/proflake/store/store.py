"""The store: one Delta Lake table per schema under one location (a folder or s3://bucket/prefix),
and DuckDB views over their live data.

Visibility rule. A batch appends its facts (function_stats, function_callers, pyinstrument_frames)
first, in chunks, and its intervals last, in a single commit that also removes the intervals it
replaces. That commit is the moment the batch becomes visible: fetches start from ``intervals``, and
the public fact views keep only rows whose interval is live. Rows a killed run left behind stay
invisible until the next run removes them (etl/proflake/ingestion/batch.py, ``repair``).
"""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import unquote

import duckdb
import numpy as np
import pyarrow as pa
from deltalake import ColumnProperties, CommitProperties, DeltaTable, WriterProperties, write_deltalake
from deltalake.exceptions import DeltaError, TableNotFoundError

from proflake.errors import ProflakeError, StoreError
from proflake.schema import ALL_TABLES, DERIVED_TABLES, arrow_schema, empty_select, table_spec
from proflake.sources.settings import S3Config, is_s3, split_s3_uri
from proflake.store.location import default_store_location, missing_store_hint

FACT_TABLES = ("function_stats", "function_callers", "pyinstrument_frames")
_FIRST_COMMIT = "0" * 20 + ".json"  # a Delta table's creating commit

# zstd keeps the store small; row groups of ~128k rows let node/time filters skip most of a file.
# Measured times look random to a dictionary: PLAIN, no dictionary. Not BYTE_STREAM_SPLIT, although
# zstd finds more in it (fact tables 6% smaller on a 2k-file corpus, DuckDB's read time within the
# noise; docs/spark.md): Spark's default (vectorized) Parquet reader decodes it only in recent releases
# (4.3.0 does), so the older Sparks of EMR, Glue and Databricks would need that reader turned off.
_MEASURED_FLOATS = ("tottime", "cumtime", "time", "self_time", "await_time")
WRITER_PROPERTIES = WriterProperties(
    compression="ZSTD",
    compression_level=3,
    max_row_group_size=131_072,
    # Values handed to the column encoders at a time (default 1,024). Each hand-over of a dictionary
    # column recomputes the statistics of the dictionary values its indices refer to: at 8,192 a fact
    # segment's sixteen interval-key columns took 16.6 instead of 22.8 ms to write, the same bytes.
    write_batch_size=8_192,
    column_properties={
        column: ColumnProperties(encoding="PLAIN", dictionary_enabled=False) for column in _MEASURED_FLOATS
    },
)


class _CrashPoints:
    """Crash testing: with PROFLAKE_KILL_AFTER_COMMITS=N the process SIGKILLs itself right after its
    N-th Delta commit, so tests can stop a real run between any two commits, deterministically
    (PROFLAKE_SIGNAL_AFTER_COMMITS: the same with SIGTERM or SIGHUP, for graceful termination;
    PROFLAKE_FILL_DISK_AFTER_COMMITS: a full disk at the next commit)."""

    def __init__(self) -> None:
        self.commits = 0

    def committed(self) -> None:
        self.commits += 1
        limit = os.environ.get("PROFLAKE_KILL_AFTER_COMMITS")
        if limit and self.commits >= int(limit):
            os.kill(os.getpid(), signal.SIGKILL)
        # PROFLAKE_SIGNAL_AFTER_COMMITS=N[:SIGHUP] sends SIGTERM (or the named signal) once, after the
        # N-th commit: graceful termination tested between any two commits.
        point, _, name = os.environ.get("PROFLAKE_SIGNAL_AFTER_COMMITS", "").partition(":")
        if point and self.commits == int(point):
            os.kill(os.getpid(), getattr(signal, name or "SIGTERM"))
        # PROFLAKE_FILL_DISK_AFTER_COMMITS=N:FILE fills the file system of FILE after the N-th commit,
        # so the next write, the next commit's, meets a full disk.
        point, _, filler = os.environ.get("PROFLAKE_FILL_DISK_AFTER_COMMITS", "").partition(":")
        if point and self.commits == int(point):
            _fill_disk(filler)


def _fill_disk(path: str) -> None:
    chunk = b"\0" * (1 << 20)
    with open(path, "wb", buffering=0) as f:
        for size in (1 << 20, 1 << 12, 1):
            try:
                while True:
                    f.write(chunk[:size])
            except OSError:
                continue  # full at this size: smaller writes take what is left


crash_points = _CrashPoints()


def sql_string(value: str) -> str:
    """A SQL string literal; for values proflake itself produced (ids, paths from a listing)."""
    return "'" + value.replace("'", "''") + "'"


@dataclass(frozen=True)
class FileSpans:
    """The Parquet files of one fact table with the start_time_us range each holds and the one node it
    holds (from the Delta log's file statistics), so a question about a few intervals opens only the
    files that can hold them."""

    uris: list[str]
    min_start_time_us: np.ndarray  # NaN where the log has no statistics: such a file always qualifies
    max_start_time_us: np.ndarray
    # The node_id of a file whose statistics name one node (min == max), else None. Ingest writes no
    # file that mixes nodes, so the files of other nodes are skipped without opening them.
    single_node: list[str | None] = field(default_factory=list)

    def overlapping(self, low: float, high: float, nodes: Collection[str] | None = None) -> list[str]:
        """The files that can hold rows starting in [low, high] of one of ``nodes`` (None: any node)."""
        keep = (~((self.max_start_time_us < low) | (self.min_start_time_us > high))).tolist()
        if nodes is not None and self.single_node:
            # A statistic may be a truncated prefix of the value: a node that starts with it may be there.
            keep = [k and (one is None or any(n.startswith(one) for n in nodes)) for k, one in zip(keep, self.single_node)]
        return [uri for uri, k in zip(self.uris, keep) if k]


def files_in_view(name: str) -> str:
    """The table macro that reads some of a fact table's files: ``FROM _function_stats_in($files)``."""
    return f"_{name}_in"


def raw_view(name: str) -> str:
    """The view over every live row of a fact table, committed or not (for joins that select intervals)."""
    return f"_{name}_all"


class Store:
    """A proflake store at a local folder or an S3 prefix."""

    def __init__(self, location: str | os.PathLike | None = None, s3: S3Config | None = None) -> None:
        self.location = str(location if location is not None else default_store_location())
        self.is_remote = is_s3(self.location)
        if self.is_remote:
            split_s3_uri(self.location)
            self.root = self.location.rstrip("/")
            self.s3 = s3 or S3Config.from_env()
        else:
            self.root = str(Path(self.location).expanduser().absolute())
            self.s3 = None
        # Set by the writer lock while it is held: every commit runs inside it (fencing,
        # etl/proflake/store/lock.py).
        self.fence: Callable[[], contextlib.AbstractContextManager] | None = None
        self._scratch: duckdb.DuckDBPyConnection | None = None  # for rows(), opened on first use

    def __repr__(self) -> str:
        return f"Store({self.location!r})"

    @property
    def storage_options(self) -> dict[str, str] | None:
        """deltalake's options, credentials included, derived afresh on every use: temporary credentials
        (STS, an instance role, SSO) that botocore refreshes near their expiry reach the next Delta
        operation instead of being frozen for the whole run (cheap: no request unless a refresh is due)."""
        if self.s3 is None:
            return None
        return self.s3.storage_options()

    def explain(self, error: BaseException, what: str | None = None) -> ProflakeError:
        """One sentence for a deltalake, object_store, DuckDB or OS error met reading or writing this store."""
        from proflake.store.faults import explain

        where = what or f"the store at {self.location!r}"
        return explain(error, where, self.s3) or StoreError(f"cannot use {where}: {_first_line(error)}")

    def table_uri(self, name: str) -> str:
        return f"{self.root}/{name}"

    # -- existence ------------------------------------------------------------------------------
    def exists(self) -> bool:
        if not self.is_remote:
            return (Path(self.root) / "intervals" / "_delta_log").is_dir()
        try:
            DeltaTable(self.table_uri("intervals"), storage_options=self.storage_options)
            return True
        except TableNotFoundError:
            return False
        except (DeltaError, OSError) as e:
            raise self.explain(e) from e

    def require(self) -> None:
        if not self.exists():
            raise StoreError(f"no proflake store at {self.location!r}; {missing_store_hint(self.location)}")

    def create(self) -> None:
        """Create any missing table, empty, with its declared schema."""
        if not self.is_remote:
            try:
                Path(self.root).mkdir(parents=True, exist_ok=True)
            except OSError as e:
                raise StoreError(f"cannot create the store folder {self.location!r}: {e.strerror}") from e
        for name in ALL_TABLES:
            if not self.is_remote and (Path(self.root) / name / "_delta_log" / _FIRST_COMMIT).is_file():
                continue  # created already; asking deltalake costs ~7 ms a table on every run
            try:
                DeltaTable.create(
                    self.table_uri(name),
                    schema=arrow_schema(name),
                    mode="ignore",
                    name=name,
                    storage_options=self.storage_options,
                )
            except (DeltaError, OSError) as e:
                raise self.explain(e, f"table {name!r} of the store at {self.location!r}") from e

    def delta(self, name: str) -> DeltaTable:
        try:
            return DeltaTable(self.table_uri(name), storage_options=self.storage_options)
        except TableNotFoundError as e:
            raise StoreError(
                f"table {name!r} is missing from the store at {self.location!r}; run 'proflake check --store "
                f"{self.location}' (and --repair to rebuild what can be)"
            ) from e

    # -- writing --------------------------------------------------------------------------------
    def committing(self) -> contextlib.AbstractContextManager:
        """Wrap each commit: the writer lock's fence (the commit happens only while the lock is held)."""
        return self.fence() if self.fence is not None else contextlib.nullcontext()

    def _prepare(self, name: str, rows: pa.Table) -> pa.Table:
        spec = table_spec(name)
        rows = rows.select(spec.column_names).cast(spec.arrow_schema)
        if spec.sort_by and rows.num_rows > 1:
            rows = rows.sort_by([(c, "ascending") for c in spec.sort_by])
        return rows

    def append(self, name: str, rows: pa.Table, batch_id: str, *, presorted: bool = False) -> None:
        """Append rows in one atomic Delta commit, sorted so row-group statistics prune node/time filters.

        ``presorted``: the caller already ordered the rows and built them with the declared columns
        (dictionary-encoded ones included, which Delta stores as their value type)."""
        if rows.num_rows == 0:
            return
        with self.committing():
            self._append(name, rows, batch_id, presorted)
        crash_points.committed()

    def _append(self, name: str, rows: pa.Table, batch_id: str, presorted: bool) -> None:
        write_deltalake(
            self.table_uri(name),
            rows if presorted else self._prepare(name, rows),
            mode="append",
            writer_properties=WRITER_PROPERTIES,
            storage_options=self.storage_options,
            commit_properties=CommitProperties(custom_metadata={"proflake.batch_id": batch_id}),
        )

    def replace_intervals(self, rows: pa.RecordBatchReader, batch_id: str, replaced_uris: list[str]) -> None:
        """The visibility point of a batch that met changed files: in ONE commit, add its intervals
        (``rows``, streamed in the table's schema) and drop the versions they replace."""
        # Delta's replaceWhere: rows matching the predicate are replaced by ``rows``, atomically. Every
        # new row matches through its batch_id; old versions of changed files through their URI.
        uris = ", ".join(sql_string(u) for u in replaced_uris)
        predicate = f"batch_id = {sql_string(batch_id)} OR source_uri IN ({uris})"
        self._overwrite("intervals", rows, predicate, batch_id)

    def replace_intervals_under(self, rows: pa.RecordBatchReader, batch_id: str, prefix: str) -> None:
        """A scoped full refresh's visibility point: in ONE commit, add its intervals (``rows``) and drop
        every interval whose source_uri starts with ``prefix`` (the source's earlier generations)."""
        predicate = f"batch_id = {sql_string(batch_id)} OR starts_with(source_uri, {sql_string(prefix)})"
        self._overwrite("intervals", rows, predicate, batch_id)

    def _overwrite(self, name: str, rows: pa.Table | pa.RecordBatchReader, predicate: str | None, batch_id: str) -> None:
        """Replace the rows matching ``predicate`` (all rows when None) with ``rows``, in one commit.
        A table is put in the declared column order and sorted; a stream must come that way already
        (it is written as it arrives, never held whole)."""
        with self.committing():
            self._write_over(name, rows, predicate, batch_id)
        crash_points.committed()

    def _write_over(self, name: str, rows: pa.Table | pa.RecordBatchReader, predicate: str | None, batch_id: str) -> None:
        write_deltalake(
            self.table_uri(name),
            self._prepare(name, rows) if isinstance(rows, pa.Table) else rows,
            mode="overwrite",
            predicate=predicate,
            writer_properties=WRITER_PROPERTIES,
            storage_options=self.storage_options,
            commit_properties=CommitProperties(custom_metadata={"proflake.batch_id": batch_id}),
        )

    def delete_where(self, name: str, predicate: str) -> None:
        table = self.delta(name)
        with self.committing():
            table.delete(predicate)
        crash_points.committed()

    def delete_rows_of(self, column: str, values: list[str], tables: tuple[str, ...] = FACT_TABLES) -> None:
        """Delete rows whose ``column`` is one of ``values`` (ids proflake generated), in bounded chunks."""
        for start in range(0, len(values), 500):
            predicate = f"{column} IN (" + ", ".join(sql_string(v) for v in values[start : start + 500]) + ")"
            for name in tables:
                self.delete_where(name, predicate)

    def delete_job(self, job_id: str) -> None:
        """Remove every row of one job (the demo replaces its sample job this way)."""
        predicate = f"job_id = {sql_string(job_id)}"
        for name in ("intervals", *FACT_TABLES):
            self.delete_where(name, predicate)

    # -- reading --------------------------------------------------------------------------------
    def connect(
        self,
        connection: duckdb.DuckDBPyConnection | None = None,
        *,
        tables: Collection[str] | None = None,
        snapshot_intervals: bool = True,
    ) -> duckdb.DuckDBPyConnection:
        """A DuckDB connection where each table is a view under its own name, over its live data.

        Fact tables appear twice: ``function_stats`` holds only rows of live intervals (what ad hoc
        SQL and BI tools see), ``_function_stats_all`` every row (fetches join it to their selection).
        ``tables`` limits the views to those tables (and intervals, which every view needs): opening
        each Delta log costs ~10 ms, which bookkeeping checks need not pay. ``snapshot_intervals=False``
        leaves ``intervals`` a view over its files instead of a copy in memory (~1 KB a row): for ingest's
        own queries, which read it once.
        """
        return self.connect_with_files(connection, tables=tables, snapshot_intervals=snapshot_intervals)[0]

    def connect_with_files(
        self,
        connection: duckdb.DuckDBPyConnection | None = None,
        *,
        tables: Collection[str] | None = None,
        snapshot_intervals: bool = True,
    ) -> tuple[duckdb.DuckDBPyConnection, dict[str, FileSpans]]:
        """``connect()``, plus each fact table's files and their time spans, for the table macros
        ``_<table>_in(files)`` (every row of just those files) that fetches read through."""
        self.require()
        wanted = [n for n in ALL_TABLES if tables is None or n in tables or n == "intervals"]
        con = connection or duckdb.connect()
        # Fetches run several queries over the same files: keep their Parquet footers in memory.
        con.execute("SET parquet_metadata_cache = true")
        # Long queries (roll-up rebuilds) would otherwise draw a progress bar over the CLI's output.
        con.execute("SET enable_progress_bar = false")
        spans: dict[str, FileSpans] = {}
        for name in wanted:
            target = raw_view(name) if name in FACT_TABLES else name
            files, table = self._create_view(con, target, name)
            if name in FACT_TABLES:
                spans[name] = _file_spans(table, files)
                if spans[name].uris:
                    con.execute(
                        f"CREATE OR REPLACE MACRO {files_in_view(name)}(files) AS TABLE "
                        "SELECT * FROM read_parquet(files)"
                    )
                else:  # S3 (a registered dataset: DuckDB cannot read s3:// offline) or no files yet
                    con.execute(
                        f"CREATE OR REPLACE MACRO {files_in_view(name)}(files) AS TABLE SELECT * FROM {target}"
                    )
        # intervals is small (one row per stats file) and every question starts from it: hold it in
        # memory rather than decode its Parquet on each query. The connection is a snapshot anyway.
        if snapshot_intervals:
            con.execute("ALTER VIEW intervals RENAME TO _intervals_files")
            con.execute("CREATE TEMP TABLE intervals AS SELECT * FROM _intervals_files")
        for name in (n for n in FACT_TABLES if n in wanted):
            con.execute(
                f"CREATE OR REPLACE VIEW {name} AS SELECT * FROM {raw_view(name)} "
                "WHERE interval_id IN (SELECT interval_id FROM intervals)"
            )
        con.execute(
            "CREATE OR REPLACE VIEW manifest AS SELECT source_uri, source_size, source_version, html_uri, "
            "interval_id, batch_id, ingested_at FROM intervals"
        )
        return con, spans

    def _create_view(
        self, con: duckdb.DuckDBPyConnection, view: str, table: str
    ) -> tuple[list[str], DeltaTable | None]:
        """Create ``view`` over ``table``; return its local Parquet files ([] for S3) and the table."""
        try:
            delta = self.delta(table)
        except StoreError:
            if table not in DERIVED_TABLES:
                raise
            # A store written before this derived table existed: empty until the next ingest builds it.
            delta = None
        if delta is not None and self.is_remote:
            # DuckDB's httpfs extension cannot be installed offline; pyarrow reads S3 and DuckDB pushes
            # filters and projections into the registered dataset.
            con.register(f"_{view}_dataset", delta.to_pyarrow_dataset())
            con.execute(f"CREATE OR REPLACE VIEW {view} AS SELECT * FROM _{view}_dataset")
            return [], delta
        files = delta.file_uris() if delta is not None else []
        if files:
            # Paths come from the Delta log, not from the user; quoting keeps odd folder names valid SQL.
            file_list = ", ".join(sql_string(f) for f in files)
            con.execute(f"CREATE OR REPLACE VIEW {view} AS SELECT * FROM read_parquet([{file_list}])")
        else:
            # A typed SELECT of no rows: an empty Arrow table would make pyarrow import pandas.
            con.execute(f"CREATE OR REPLACE VIEW {view} AS SELECT * FROM {empty_select(table)}")
        return files, delta

    def interval_keys(self) -> dict[tuple, str]:
        """(job_id, profiler, node_id, start_time_us, end_time_us, start_mode, end_mode) -> source_uri of
        every live interval."""
        if not self.exists():
            return {}
        columns = ["job_id", "profiler", "node_id", "start_time_us", "end_time_us", "start_mode", "end_mode", "source_uri"]
        rows = self.rows("intervals", columns)
        return {row[:-1]: row[-1] for row in rows}

    def replace_jobs(self, name: str, rows: pa.Table | None, job_ids: list[str], batch_id: str) -> None:
        """Replace every row of ``job_ids`` in a derived table with ``rows`` (None: just delete), in one commit."""
        if not job_ids:
            return
        predicate = "job_id IN (" + ", ".join(sql_string(j) for j in job_ids) + ")"
        if rows is None:
            self.delete_where(name, predicate)
            return
        self._overwrite(name, rows, predicate, batch_id)

    def replace_table(self, name: str, rows: pa.Table, batch_id: str) -> None:
        """Overwrite a small bookkeeping table in one commit."""
        self._overwrite(name, rows, None, batch_id)

    def ingested_versions(self) -> dict[str, tuple[str, int, str]]:
        """source_uri -> (interval_id, size, version) for every live interval."""
        if not self.exists():
            return {}
        rows = self.rows("intervals", ["source_uri", "interval_id", "source_size", "source_version"])
        return {row[0]: row[1:] for row in rows}

    def rows(self, name: str, columns: Sequence[str]) -> list[tuple]:
        """Some columns of every row of a table, as tuples: the bookkeeping reads of every ingest run.

        A local table is read by DuckDB: deltalake's reader goes through pyarrow.dataset, whose import
        brings pandas, a third of a second on every nightly run that finds nothing new."""
        delta = self.delta(name)
        if self.is_remote:
            table = delta.to_pyarrow_table(columns=list(columns))
            return list(zip(*(table[c].to_pylist() for c in columns)))
        files = delta.file_uris()
        if not files:
            return []
        select = ", ".join('"' + c.replace('"', '""') + '"' for c in columns)
        return self._scratch_connection().execute(f"SELECT {select} FROM read_parquet($files)", {"files": files}).fetchall()

    def _scratch_connection(self) -> duckdb.DuckDBPyConnection:
        # A cursor each time: ingest records its batch on a thread while the main thread reads.
        if self._scratch is None:
            self._scratch = duckdb.connect()
        return self._scratch.cursor()


def _file_spans(table: DeltaTable | None, files: list[str]) -> FileSpans:
    if table is None or not files:
        return FileSpans([], np.array([]), np.array([]))
    # (pa.table() would import pandas to rule out a DataFrame: a third of a second per process)
    actions = pa.RecordBatchReader.from_stream(table.get_add_actions(flatten=True)).read_all()

    def statistic(name: str) -> list:
        return actions[name].to_pylist() if name in actions.column_names else [None] * actions.num_rows

    lows, highs = statistic("min.start_time_us"), statistic("max.start_time_us")
    nodes = [low if low is not None and low == high else None for low, high in zip(statistic("min.node_id"), statistic("max.node_id"))]
    # The log names files relative to the table and URL-quoted; file_uris() gives them whole.
    by_name = {unquote(path).rsplit("/", 1)[-1]: bounds for path, *bounds in zip(actions["path"].to_pylist(), lows, highs, nodes)}
    stats = [by_name.get(uri.rsplit("/", 1)[-1], (None, None, None)) for uri in files]
    nan = float("nan")
    return FileSpans(
        files,
        np.array([nan if low is None else low for low, _, _ in stats], dtype=np.float64),
        np.array([nan if high is None else high for _, high, _ in stats], dtype=np.float64),
        [node for _, _, node in stats],
    )


def _first_line(error: BaseException) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__


def allowed_directories(store: Store) -> list[str]:
    """The folders a connection to the store's views must read (and nothing else): one per table."""
    if store.is_remote:
        return []
    return [f"{store.root}/{name}/" for name in ALL_TABLES]
