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
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING

import duckdb
import pyarrow as pa

from proflake import arrowfn
from proflake.errors import DamagedLogError, ProflakeError, StoreError
from proflake.schema import ALL_TABLES, arrow_schema, table_spec
from proflake.sources.settings import S3Config, is_s3, split_s3_uri
from proflake.sql import connect
from proflake.store.crashpoints import crash_points
from proflake.store.creation import FIRST_COMMIT, create_local_table
from proflake.store.faults import log_damage
from proflake.store.location import default_store_location, missing_store_hint
from proflake.store.snapshot import FACT_TABLES, FileSpans, Snapshot, files_in_view, raw_view, sql_string

if TYPE_CHECKING:
    from deltalake import DeltaTable, WriterProperties

__all__ = ["FACT_TABLES", "FileSpans", "Store", "crash_points", "files_in_view", "raw_view", "sql_string"]

# zstd keeps the store small; row groups of ~128k rows let node/time filters skip most of a file.
# Measured times look random to a dictionary: PLAIN, no dictionary. Not BYTE_STREAM_SPLIT, although
# zstd finds more in it (fact tables 6% smaller on a 2k-file corpus, DuckDB's read time within the
# noise; docs/spark.md): Spark's default (vectorized) Parquet reader decodes it only in recent releases
# (4.3.0 does), so the older Sparks of EMR, Glue and Databricks would need that reader turned off.
_MEASURED_FLOATS = ("tottime", "cumtime", "time", "self_time", "await_time")
@cache
def writer_properties() -> WriterProperties:
    """How every proflake Parquet file is written (deltalake is imported here, not with the module: a
    fetch that reads small local logs never needs it, ~0.1 s of every CLI read)."""
    from deltalake import ColumnProperties, WriterProperties

    return WriterProperties(
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




class Store:
    """A proflake store at a local folder or an S3 prefix."""

    def __init__(self, location: str | os.PathLike | None = None, s3: S3Config | None = None) -> None:
        self.location = str(location if location is not None else default_store_location())
        self.is_remote = is_s3(self.location)
        if self.is_remote:
            split_s3_uri(self.location)
            self.root = self.location.rstrip("/")
            self.s3: S3Config | None = s3 or S3Config.from_env()
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
        if not self.is_remote or self._created("intervals"):  # on S3 one HEAD; without it, the open below says why
            return self.is_remote or (Path(self.root) / "intervals" / "_delta_log").is_dir()
        from deltalake import DeltaTable
        from deltalake.exceptions import DeltaError, TableNotFoundError

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

    def create(self, present: Collection[str] = ()) -> None:
        """Create any missing table, empty, with its declared schema. ``present``: tables the caller just
        found there (``bookkeeping.has_table``), not asked for again."""
        if not self.is_remote:
            try:
                Path(self.root).mkdir(parents=True, exist_ok=True)
            except OSError as e:
                raise StoreError(f"cannot create the store folder {self.location!r}: {e.strerror}") from e
        from deltalake import DeltaTable
        from deltalake.exceptions import DeltaError

        for name in ALL_TABLES:
            if name in present or self._created(name):
                continue  # asking deltalake costs ~7 ms a table locally, an open (~7 requests) on S3
            def create(name: str = name) -> None:
                DeltaTable.create(
                    self.table_uri(name), schema=arrow_schema(name), mode="ignore", name=name,
                    storage_options=self.storage_options,
                )

            try:
                if self.is_remote:
                    create()
                else:
                    create_local_table(Path(self.table_uri(name)), name, arrow_schema(name), create)
            except (DeltaError, OSError) as e:
                raise self.explain(e, f"table {name!r} of the store at {self.location!r}") from e

    def _created(self, name: str) -> bool:
        """Whether table ``name``'s creating commit is there: a file test locally, one HEAD on S3 (any
        answer but "found" leaves it to deltalake, which creates the table or says what is wrong)."""
        if not self.is_remote:
            return (Path(self.root) / name / "_delta_log" / FIRST_COMMIT).is_file()
        bucket, key = split_s3_uri(f"{self.table_uri(name)}/_delta_log/{FIRST_COMMIT}")
        try:
            self.s3.client().head_object(Bucket=bucket, Key=key)  # type: ignore[union-attr] # set when remote
            return True
        except Exception:  # noqa: BLE001 - 404, or an error deltalake's own request will name
            return False

    def delta(self, name: str, version: int | None = None) -> DeltaTable:
        """The Delta table ``name``, at ``version`` (None: the newest)."""
        from deltalake import DeltaTable
        from deltalake.exceptions import DeltaError, TableNotFoundError

        try:
            return DeltaTable(self.table_uri(name), version=version, storage_options=self.storage_options)
        except TableNotFoundError as e:
            raise StoreError(
                f"table {name!r} is missing from the store at {self.location!r}; run 'proflake check --store "
                f"{self.location}' (and --repair to rebuild what can be)"
            ) from e
        except DeltaError as e:
            reason = log_damage(str(e))
            if reason is None:
                raise
            raise DamagedLogError(name, reason, (
                f"table {name!r} of the store at {self.location!r} cannot be read: {reason}; run 'proflake check "
                f"--store {self.location}' (--repair sets the damaged table aside and rebuilds it)"
            )) from None

    # -- writing --------------------------------------------------------------------------------
    @contextlib.contextmanager
    def committing(self, table: str | None = None) -> Iterator[None]:
        """Wrap each commit: the writer lock's fence (the commit happens only while the lock is held);
        then the checksums of the files it added to ``table`` are recorded (etl/proflake/store/checksums.py)."""
        with self.fence() if self.fence is not None else contextlib.nullcontext():
            yield
            if table is not None:
                from proflake.store.checksums import record

                record(self, table)

    def _prepare(self, name: str, rows: pa.Table) -> pa.Table:
        spec = table_spec(name)
        rows = arrowfn.cast(rows.select(spec.column_names), spec.arrow_schema)
        if spec.sort_by and rows.num_rows > 1:
            rows = arrowfn.sort_by(rows, spec.sort_by)
        return rows

    def append(
        self, name: str, rows: pa.Table, batch_id: str, *, presorted: bool = False, table: DeltaTable | None = None
    ) -> None:
        """Append rows in one atomic Delta commit, sorted so row-group statistics prune node/time filters.

        ``presorted``: the caller already ordered the rows and built them with the declared columns
        (dictionary-encoded ones included, which Delta stores as their value type). ``table``: the table,
        open and current, written through and left current (else deltalake opens it)."""
        if rows.num_rows == 0:
            return
        with self.committing(name):
            self._append(name, rows, batch_id, presorted, table)
        crash_points.committed()

    def _append(self, name: str, rows: pa.Table, batch_id: str, presorted: bool, table: DeltaTable | None = None) -> None:
        from deltalake import CommitProperties, write_deltalake

        write_deltalake(
            self.table_uri(name) if table is None else table,
            rows if presorted else self._prepare(name, rows),
            mode="append",
            writer_properties=writer_properties(),
            storage_options=self.storage_options,
            commit_properties=CommitProperties(custom_metadata={"proflake.batch_id": batch_id}),
        )

    def replace_intervals(self, rows: pa.RecordBatchReader, batch_id: str, replaced_uris: list[str],
                          table: DeltaTable | None = None) -> None:
        """The visibility point of a batch that met changed files: in ONE commit, add its intervals
        (``rows``, streamed in the table's schema) and drop the versions they replace. ``table``:
        intervals, open and current, written through and left current (else deltalake opens it)."""
        # Delta's replaceWhere: rows matching the predicate are replaced by ``rows``, atomically. Every
        # new row matches through its batch_id; old versions of changed files through their URI.
        uris = ", ".join(sql_string(u) for u in replaced_uris)
        predicate = f"batch_id = {sql_string(batch_id)} OR source_uri IN ({uris})"
        self._overwrite("intervals", rows, predicate, batch_id, table)

    def replace_intervals_under(self, rows: pa.RecordBatchReader, batch_id: str, prefix: str,
                                table: DeltaTable | None = None) -> None:
        """A scoped full refresh's visibility point: in ONE commit, add its intervals (``rows``) and drop
        every interval whose source_uri starts with ``prefix`` (the source's earlier generations);
        ``table`` as for ``replace_intervals``."""
        predicate = f"batch_id = {sql_string(batch_id)} OR starts_with(source_uri, {sql_string(prefix)})"
        self._overwrite("intervals", rows, predicate, batch_id, table)

    def _overwrite(self, name: str, rows: pa.Table | pa.RecordBatchReader, predicate: str | None, batch_id: str,
                   table: DeltaTable | None = None) -> None:
        """Replace the rows matching ``predicate`` (all rows when None) with ``rows``, in one commit.
        A table is put in the declared column order and sorted; a stream must come that way already
        (it is written as it arrives, never held whole). ``table``: the table, open and current (no
        commit since it was opened or brought up to date), written from as it is and left current; else
        deltalake opens it."""
        with self.committing(name):
            self._write_over(name, rows, predicate, batch_id, table)
        crash_points.committed()

    def _write_over(self, name: str, rows: pa.Table | pa.RecordBatchReader, predicate: str | None, batch_id: str,
                    table: DeltaTable | None = None) -> None:
        from deltalake import CommitProperties, write_deltalake

        write_deltalake(
            self.table_uri(name) if table is None else table,
            self._prepare(name, rows) if isinstance(rows, pa.Table) else rows,
            mode="overwrite",
            predicate=predicate,
            writer_properties=writer_properties(),
            storage_options=self.storage_options,
            commit_properties=CommitProperties(custom_metadata={"proflake.batch_id": batch_id}),
            # A whole-table overwrite takes the declared schema: a bookkeeping table written before a
            # column was declared gains it (ingest_errors.closed_at).
            schema_mode="overwrite" if predicate is None else None,
        )

    def delete_where(self, name: str, predicate: str, table: DeltaTable | None = None) -> None:
        """Delete the rows matching ``predicate`` in one commit; ``table``: the table, open and current,
        which the delete leaves current (else it is opened here)."""
        table = self.delta(name) if table is None else table
        with self.committing(name):
            table.delete(predicate)
        crash_points.committed()

    def delete_rows_of(self, column: str, values: list[str], tables: tuple[str, ...] = FACT_TABLES,
                       opened: Mapping[str, DeltaTable] | None = None) -> None:
        """Delete rows whose ``column`` is one of ``values`` (ids proflake generated), in bounded chunks.
        ``opened``: tables open and current, deleted from through these objects (left current); the
        others are opened for each delete."""
        for start in range(0, len(values), 500):
            predicate = f"{column} IN (" + ", ".join(sql_string(v) for v in values[start : start + 500]) + ")"
            for name in tables:
                self.delete_where(name, predicate, (opened or {}).get(name))

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
        """A DuckDB connection where each table is a view under its own name, over its live data, in UTC
        (a ``connection`` handed in is switched to UTC: docs/sql-and-bi.md#time-zones).

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
        snapshot = Snapshot(self, connection, tables=ALL_TABLES if tables is None else tables, snapshot_intervals=snapshot_intervals)
        return snapshot.con, snapshot.files

    def replace_jobs(self, name: str, rows: pa.Table | None, job_ids: list[str], batch_id: str,
                     table: DeltaTable | None = None) -> None:
        """Replace every row of ``job_ids`` in a derived table with ``rows`` (None: just delete), in one
        commit; ``table``: the table, open and current, which the commit leaves current."""
        if not job_ids:
            return
        predicate = "job_id IN (" + ", ".join(sql_string(j) for j in job_ids) + ")"
        if rows is None:
            self.delete_where(name, predicate, table)
            return
        self._overwrite(name, rows, predicate, batch_id, table)

    def replace_table(self, name: str, rows: pa.Table, batch_id: str, table: DeltaTable | None = None) -> None:
        """Overwrite a small bookkeeping table in one commit; ``table``: it, open and current (left current)."""
        self._overwrite(name, rows, None, batch_id, table)

    def rows(self, name: str, columns: Sequence[str], table: DeltaTable | None = None) -> list[tuple]:
        """Some columns of every row of a table, as tuples: for the bookkeeping tables (ingest compares
        its listing with ``intervals`` in DuckDB instead: etl/proflake/ingestion/manifest.py). ``table``:
        the table, open already, read at the version it is at (else opened here).

        A local table is read by DuckDB: deltalake's reader goes through pyarrow.dataset, whose import
        brings pandas, a third of a second on every nightly run that finds nothing new."""
        delta = self.delta(name) if table is None else table
        if self.is_remote:
            read = delta.to_pyarrow_table(columns=list(columns))
            return list(zip(*(read[c].to_pylist() for c in columns)))
        files = delta.file_uris()
        if not files:
            return []
        select = ", ".join('"' + c.replace('"', '""') + '"' for c in columns)
        return self._scratch_connection().execute(f"SELECT {select} FROM read_parquet($files)", {"files": files}).fetchall()

    def _scratch_connection(self) -> duckdb.DuckDBPyConnection:
        # A cursor each time: ingest records its batch on a thread while the main thread reads.
        if self._scratch is None:
            self._scratch = connect()
        return self._scratch.cursor()


def _first_line(error: BaseException) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__


def allowed_directories(store: Store) -> list[str]:
    """The folders a connection to the store's views must read (and nothing else): one per table."""
    if store.is_remote:
        return []
    return [f"{store.root}/{name}/" for name in ALL_TABLES]

