"""The store: one Delta Lake table per schema under one folder, and DuckDB views over their live files.

Visibility rule. A batch appends its facts (function_stats, function_callers, pyinstrument_frames)
first and its intervals last, in a single commit. Every fetch starts from intervals, so a batch is
visible entirely or not at all. For ad hoc SQL over the fact tables, files are kept out of the views
unless every batch they hold has committed its intervals: Delta's per-file min/max statistics of
batch_id tell that without reading the files.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

import duckdb
import pyarrow as pa
from deltalake import CommitProperties, DeltaTable, WriterProperties, write_deltalake
from deltalake.exceptions import TableNotFoundError

from etl.errors import StoreError
from etl.schema import TABLE_NAMES, arrow_schema, table_spec

DEFAULT_STORE = "./proflake-store"
FACT_TABLES = ("function_stats", "function_callers", "pyinstrument_frames")

# zstd keeps the store small; row groups of ~128k rows let node/time filters skip most of a file.
_WRITER = WriterProperties(compression="ZSTD", compression_level=3, max_row_group_size=131_072)


def default_store_location() -> str:
    return os.environ.get("PROFLAKE_STORE") or DEFAULT_STORE


def _sql_string(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


class Store:
    """A proflake store at a local folder."""

    def __init__(self, location: str | os.PathLike | None = None) -> None:
        self.location = str(location if location is not None else default_store_location())
        self.path = Path(self.location).expanduser().absolute()

    def __repr__(self) -> str:
        return f"Store({self.location!r})"

    def table_uri(self, name: str) -> str:
        return str(self.path / name)

    def exists(self) -> bool:
        return (self.path / "intervals" / "_delta_log").is_dir()

    def require(self) -> None:
        if not self.exists():
            raise StoreError(
                f"no proflake store at {self.location!r}; run 'proflake ingest SOURCE --store {self.location}' first"
            )

    def create(self) -> None:
        """Create any missing table, empty, with its declared schema."""
        try:
            self.path.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise StoreError(f"cannot create the store folder {self.location!r}: {e.strerror}") from e
        for name in TABLE_NAMES:
            if not (self.path / name / "_delta_log").is_dir():
                DeltaTable.create(self.table_uri(name), schema=arrow_schema(name), mode="ignore", name=name)

    def delta(self, name: str) -> DeltaTable:
        try:
            return DeltaTable(self.table_uri(name))
        except TableNotFoundError as e:
            raise StoreError(
                f"table {name!r} is missing from the store at {self.location!r}; re-run 'proflake ingest'"
            ) from e

    def append(self, name: str, rows: pa.Table, batch_id: str) -> None:
        """Append rows in one atomic Delta commit, sorted so row-group statistics prune node/time filters."""
        if rows.num_rows == 0:
            return
        spec = table_spec(name)
        rows = rows.select(spec.column_names).cast(spec.arrow_schema)
        if spec.sort_by:
            rows = rows.sort_by([(c, "ascending") for c in spec.sort_by])
        write_deltalake(
            self.table_uri(name),
            rows,
            mode="append",
            writer_properties=_WRITER,
            commit_properties=CommitProperties(custom_metadata={"proflake.batch_id": batch_id}),
        )

    def live_files(self, name: str, committed_batches: set[str] | None = None) -> list[str]:
        """Files of the table's current version; for fact tables, only those of committed batches."""
        table = self.delta(name)
        if committed_batches is None:
            return table.file_uris()
        actions = pa.table(table.get_add_actions(flatten=True))
        if actions.num_rows == 0:
            return []
        paths = actions["path"].to_pylist()
        lows = actions["min.batch_id"].to_pylist() if "min.batch_id" in actions.column_names else [None] * len(paths)
        highs = actions["max.batch_id"].to_pylist() if "max.batch_id" in actions.column_names else [None] * len(paths)
        root = self.table_uri(name)
        return [
            os.path.join(root, path)
            for path, low, high in zip(paths, lows, highs)
            if low in committed_batches and high in committed_batches
        ]

    def connect(self, connection: duckdb.DuckDBPyConnection | None = None) -> duckdb.DuckDBPyConnection:
        """A DuckDB connection where each table is a view under its own name, over its live files."""
        self.require()
        con = connection or duckdb.connect()
        interval_files = self.live_files("intervals")
        _create_view(con, "intervals", interval_files)
        committed = _committed_batches(con)
        for name in FACT_TABLES:
            _create_view(con, name, self.live_files(name, committed))
        return con

    def delete_intervals(self, interval_ids: list[str]) -> None:
        """Remove intervals and their facts. Intervals go first: from then on the facts are unreachable."""
        for start in range(0, len(interval_ids), 500):
            # Ids are hex digests proflake generated, never user text.
            predicate = "interval_id IN (" + ", ".join(_sql_string(i) for i in interval_ids[start : start + 500]) + ")"
            for name in ("intervals", *FACT_TABLES):
                self.delta(name).delete(predicate)

    def delete_job(self, job_id: str) -> None:
        """Remove every row of one job (the demo replaces its sample job this way)."""
        predicate = f"job_id = {_sql_string(job_id)}"
        for name in ("intervals", *FACT_TABLES):
            self.delta(name).delete(predicate)

    def ingested_versions(self) -> dict[str, tuple[str, int, str]]:
        """source_uri -> (interval_id, size, version) for every interval already in the store."""
        if not self.exists():
            return {}
        files = self.live_files("intervals")
        if not files:
            return {}
        con = duckdb.connect()
        rows = con.sql(
            "SELECT source_uri, interval_id, source_size, source_version FROM read_parquet($files)",
            params={"files": files},
        ).fetchall()
        return {uri: (iid, size, version) for uri, iid, size, version in rows}


def _committed_batches(con: duckdb.DuckDBPyConnection) -> set[str]:
    return {row[0] for row in con.sql("SELECT DISTINCT batch_id FROM intervals").fetchall()}


def _create_view(con: duckdb.DuckDBPyConnection, name: str, files: Iterable[str]) -> None:
    files = list(files)
    if files:
        # The paths come from the Delta log, not from the user; quoting keeps odd folder names valid SQL.
        file_list = ", ".join(_sql_string(f) for f in files)
        con.execute(f"CREATE OR REPLACE VIEW {name} AS SELECT * FROM read_parquet([{file_list}])")
    else:
        empty = pa.table({f.name: pa.array([], f.type) for f in arrow_schema(name)})
        con.register(f"_empty_{name}", empty)
        con.execute(f"CREATE OR REPLACE VIEW {name} AS SELECT * FROM _empty_{name}")
