"""Reading the store: a DuckDB connection where each Delta table is a view, opened when first needed.

Opening a table (its Delta log, its file list, its views) costs 5-15 ms, and a command needs one to three
of the eight tables (``proflake jobs``: intervals; a fetch: intervals and one fact table). A ``Snapshot``
notes every table's newest version when it is taken (a local store: one listing of each ``_delta_log``,
no Delta log read) and opens a table when a query first names it, at the version it had then. So the
connection sees one version of each table, all fixed at the moment the snapshot was taken, whenever
each is opened. A store on S3 opens every table at once (listing a log there is a request).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING
from urllib.parse import unquote

import duckdb
import numpy as np
import pyarrow as pa

from proflake.errors import DamagedLogError, StaleSnapshotError, StoreError
from proflake.schema import ALL_TABLES, BOOKKEEPING_TABLES, DERIVED_TABLES, empty_select
from proflake.sql import connect, in_utc, without_comments
from proflake.store.migrations import CURRENT_VERSION, columns_select, is_migrated_table, refuse_newer

if TYPE_CHECKING:
    from deltalake import DeltaTable

    from proflake.store.store import Store

FACT_TABLES = ("function_stats", "function_callers", "pyinstrument_frames")
_SUFFIXES = ("_all", "_in", "_files")  # a table's raw view, its files macro, its files parameter
_NAMES = {*ALL_TABLES, "manifest"}  # manifest: a view over intervals
# A local table with at most this many commits and no checkpoint is read from its JSON commits directly:
# deltalake's first table costs 10-15 ms of a process's CPU, its later ones ~4 ms; reading two commits ~0.3 ms.
MAX_LOG_COMMITS = 32


def sql_string(value: str) -> str:
    """A SQL string literal; for values proflake itself produced (ids, paths from a listing)."""
    return "'" + value.replace("'", "''") + "'"


def files_in_view(name: str) -> str:
    """The table macro that reads some of a fact table's files: ``FROM _function_stats_in($files)``."""
    return f"_{name}_in"


def raw_view(name: str) -> str:
    """The view over every live row of a fact table, committed or not (for joins that select intervals)."""
    return f"_{name}_all"


def tables_named(sql: str) -> frozenset[str]:
    """The store's tables a statement reads, by name: a table itself, its raw view (``_t_all``), files
    macro (``_t_in``) or files parameter (``$t_files``); comments ignored, and naming one needlessly only
    costs opening it. Always includes intervals, which every connection opens first."""
    names = {"intervals"}
    for word in re.findall(r"\w+", without_comments(sql)):
        word = word.removeprefix("_")
        if word not in _NAMES:
            word = next((word.removesuffix(end) for end in _SUFFIXES if word.endswith(end)), word)
        if word in _NAMES:
            names.add("intervals" if word == "manifest" else word)
    return frozenset(names)


def _commit_file(table_dir: str, version: int) -> str:
    return os.path.join(table_dir, "_delta_log", f"{version:020d}.json")


def newest_version(table_dir: str) -> int | None:
    """The newest committed version of the local Delta table at ``table_dir``; None when there is none."""
    try:
        names = os.listdir(os.path.join(table_dir, "_delta_log"))
    except (FileNotFoundError, NotADirectoryError):
        return None
    # A commit is <version, 20 digits>.json; checkpoints and temporary files are named otherwise.
    versions = [int(n[:20]) for n in names if len(n) == 25 and n.endswith(".json") and n[:20].isdigit()]
    return max(versions) if versions else None


def log_files(table_dir: str, version: int) -> list[dict] | None:
    """The ``add`` actions of the files live at ``version`` of a small local Delta table, read from its
    JSON commits, in deltalake's order (newest commit first, each commit's files in its order). None
    when deltalake must read the log: a checkpoint, more than MAX_LOG_COMMITS commits, a commit gone, or
    anything beyond the plain protocol proflake writes (reader version 1, no partitions, no deletion
    vectors)."""
    log = os.path.join(table_dir, "_delta_log")
    if version >= MAX_LOG_COMMITS or os.path.exists(os.path.join(log, "_last_checkpoint")):
        return None
    live: list[dict] = []
    seen: set[str] = set()  # paths added or removed by a newer commit: older actions on them are void
    try:
        for v in range(version, -1, -1):
            with open(_commit_file(table_dir, v), "rb") as f:
                actions = [json.loads(line) for line in f if line.strip()]
            for action in actions:
                if "protocol" in action:
                    protocol = action["protocol"]
                    if protocol.get("minReaderVersion", 1) > 1 or protocol.get("readerFeatures"):
                        return None
                elif "metaData" in action and action["metaData"].get("partitionColumns"):
                    return None
            for action in actions:
                if "add" in action:
                    add = action["add"]
                    if add.get("deletionVector"):
                        return None
                    if add["path"] not in seen:
                        live.append(add)
                    seen.add(add["path"])
                elif "remove" in action:
                    seen.add(action["remove"]["path"])
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None
    return live


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


class Snapshot:
    """A DuckDB connection over one version of each of the store's tables, each opened on first use.

    Each table is a view under its own name. Fact tables appear twice: ``function_stats`` holds only rows
    of live intervals (what ad hoc SQL and BI tools see), ``_function_stats_all`` every row (fetches join
    it to their selection); ``files[name]`` lists a fact table's files and their time spans, for the
    macro ``_<table>_in(files)`` (every row of just those files) that fetches read through. intervals
    and the manifest view are opened at once; ``open(names)`` opens more (``open(ALL_TABLES)``: all).
    ``snapshot_intervals=False`` leaves ``intervals`` a view over its files instead of a copy in memory
    (~1 KB a row): for ingest's own queries, which read it once.
    """

    def __init__(
        self,
        store: Store,
        connection: duckdb.DuckDBPyConnection | None = None,
        *,
        tables: Collection[str] | None = None,
        snapshot_intervals: bool = True,
        defer_copy: bool = False,
        opened: Mapping[str, DeltaTable] | None = None,
    ) -> None:
        """``tables``: those to open now, beside intervals (None: none more on a local store, where the
        others open on first use; every table on S3, where a version cannot be noted without a request).
        ``defer_copy``: copy intervals only at ``hold_intervals()`` (the fetch engine's selections).
        ``opened``: tables the caller has open already (check's one open of each), each used instead of
        opening it again when it is at the version noted for it (on S3, where none is noted: as it is);
        an open intervals table stands for ``store.require()``."""
        self._opened = dict(opened or {})
        if "intervals" not in self._opened:
            store.require()
        # A later release's store is refused, never misread; a store at this release's version has every
        # column a migration added in every file (the migration rewrote its table).
        self._migrated = refuse_newer(store).version == CURRENT_VERSION
        self._copy_pending = False
        self._defer_copy = defer_copy
        self.store = store
        self.files: dict[str, FileSpans] = {}
        self.opened: set[str] = set()
        self._snapshot_intervals = snapshot_intervals
        # Local: each table's version now, read from the log's file names. S3: every table opened now.
        self.versions = None if store.is_remote else {n: newest_version(store.table_uri(n)) for n in ALL_TABLES}
        # In UTC, a connection handed in too: it answers as a UTC client would (proflake.sql.in_utc).
        self.con = connect() if connection is None else in_utc(connection)
        # Fetches run several queries over the same files: keep their Parquet footers in memory.
        self.con.execute("SET parquet_metadata_cache = true")
        # Long queries (roll-up rebuilds) would otherwise draw a progress bar over the CLI's output.
        self.con.execute("SET enable_progress_bar = false")
        self.open({"intervals", *(ALL_TABLES if tables is None and store.is_remote else tables or ())})
        self.con.execute(
            "CREATE OR REPLACE VIEW manifest AS SELECT source_uri, source_size, source_version, html_uri, "
            "interval_id, batch_id, ingested_at FROM intervals"
        )

    def hold_intervals(self) -> None:
        """Copy intervals into memory now, if this snapshot copies it and has not yet: intervals is small
        (one row per stats file) and a fetch's several queries start from it, so holding it beats decoding
        its Parquet on each one; and selections return its rowids (the copy's, 0..n-1). The connection
        is a snapshot anyway. With ``defer_copy`` the copy waits for the first question that needs it:
        at 10^6 intervals it costs 1.2 s of CPU and ~600 MB, which `jobs`, `nodes`, `list` and `batches`
        need not pay."""
        if self._copy_pending:
            self._copy_pending = False
            self.con.execute("ALTER VIEW intervals RENAME TO _intervals_files")
            self.con.execute("CREATE TEMP TABLE intervals AS SELECT * FROM _intervals_files")

    @property
    def copy_pending(self) -> bool:
        """Whether intervals is still a view over its files, its copy deferred (``defer_copy``)."""
        return self._copy_pending

    def open(self, names: Iterable[str]) -> duckdb.DuckDBPyConnection:
        """Open the named tables not open yet (intervals first, the others in the store's order); the connection."""
        wanted = set(names)
        for name in ALL_TABLES:
            if name in wanted and name not in self.opened:
                self._open(name)
                self.opened.add(name)
        return self.con

    def _open(self, name: str) -> None:
        con = self.con
        target = raw_view(name) if name in FACT_TABLES else name
        files, table = self._create_view(target, name)
        if name == "intervals" and self._snapshot_intervals:
            self._copy_pending = True
            if not self._defer_copy:
                self.hold_intervals()
        if name not in FACT_TABLES:
            return
        self.files[name] = _file_spans(table, files)
        # S3 (a registered dataset: DuckDB cannot read s3:// offline) or no files yet: the macro reads the view.
        source = "read_parquet(files)" if self.files[name].uris else target
        con.execute(f"CREATE OR REPLACE MACRO {files_in_view(name)}(files) AS TABLE SELECT * FROM {source}")
        con.execute(
            f"CREATE OR REPLACE VIEW {name} AS SELECT * FROM {target} "
            "WHERE interval_id IN (SELECT interval_id FROM intervals)"
        )

    def _delta(self, name: str) -> DeltaTable | None:
        """The table at its snapshot version (None: a derived table this store does not have yet)."""
        from deltalake.exceptions import DeltaError

        version = None if self.versions is None else self.versions[name]
        table = self._opened.get(name)
        if table is not None and (self.versions is None or table.version() == version):
            return table  # opened by the caller, at the version this snapshot reads
        if self.versions is not None and version is None and name in DERIVED_TABLES:
            # A store written before this derived table existed: empty until the next ingest builds it.
            return None
        try:
            return self.store.delta(name, version)
        except DamagedLogError as e:
            if version is None or self.store.is_remote or os.path.exists(_commit_file(self.store.table_uri(name), version)):
                raise  # the log is damaged: named by the error
            raise StaleSnapshotError(f"table {name!r} changed past version {version}") from e
        except StoreError:
            if name not in DERIVED_TABLES:
                raise
            return None
        except DeltaError as e:
            if version is None or self.store.is_remote or os.path.exists(_commit_file(self.store.table_uri(name), version)):
                raise  # a damaged log, said as such (proflake.store.faults)
            # The snapshot's version is no longer in the log (cleaned up since): read the store afresh.
            raise StaleSnapshotError(f"table {name!r} changed past version {version}") from e

    def _create_view(self, view: str, table: str) -> tuple[list[str], DeltaTable | list[dict] | None]:
        """Create ``view`` over ``table``; return its local Parquet files ([] for S3) and the table (or its
        log's add actions, when read directly: ``log_files``)."""
        con = self.con
        version = None if self.versions is None else self.versions[table]
        adds = None if version is None else log_files(self.store.table_uri(table), version)
        if adds is not None:
            files = [f"{self.store.table_uri(table)}/{unquote(a['path'])}" for a in adds]
            self._view_over(view, table, files)
            return files, adds
        delta = self._delta(table)
        if delta is not None and self.store.is_remote:
            # DuckDB's httpfs extension cannot be installed offline; pyarrow reads S3 and DuckDB pushes
            # filters and projections into the registered dataset.
            con.register(f"_{view}_dataset", delta.to_pyarrow_dataset())
            con.execute(f"CREATE OR REPLACE VIEW {view} AS SELECT * FROM _{view}_dataset")
            self._declare_missing_columns(view, table)
            return [], delta
        files = delta.file_uris() if delta is not None else []
        self._view_over(view, table, files)
        return files, delta

    def _view_over(self, view: str, table: str, files: list[str]) -> None:
        con = self.con
        if files:
            # Paths come from the Delta log, not from the user; quoting keeps odd folder names valid SQL.
            file_list = ", ".join(sql_string(f) for f in files)
            con.execute(f"CREATE OR REPLACE VIEW {view} AS SELECT * FROM read_parquet([{file_list}])")
            self._declare_missing_columns(view, table)
        else:
            # A typed SELECT of no rows: an empty Arrow table would make pyarrow import pandas.
            con.execute(f"CREATE OR REPLACE VIEW {view} AS SELECT * FROM {empty_select(table)}")


    def _declare_missing_columns(self, view: str, table: str) -> None:
        """A bookkeeping table written before a column was declared reads that column as NULL; a table of
        a store not migrated yet reads a column a migration adds as that migration says
        (etl/proflake/store/migrations.py)."""
        if table not in BOOKKEEPING_TABLES and (self._migrated or not is_migrated_table(table)):
            return
        present = [row[0] for row in self.con.execute(f"DESCRIBE {view}").fetchall()]
        select = columns_select(table, present, f"_{view}_stored")
        if select is not None:
            self.con.execute(f"ALTER VIEW {view} RENAME TO _{view}_stored")
            self.con.execute(f"CREATE VIEW {view} AS {select}")


def _stats(add: dict) -> tuple[dict, dict]:
    """An add action's minimum and maximum values (empty when it has no statistics)."""
    try:
        stats = json.loads(add.get("stats") or "{}")
        return stats.get("minValues") or {}, stats.get("maxValues") or {}
    except ValueError:
        return {}, {}


def _file_spans(table: DeltaTable | list[dict] | None, files: list[str]) -> FileSpans:
    if table is None or not files:
        return FileSpans([], np.array([]), np.array([]))
    if isinstance(table, list):  # add actions read from the log: their statistics are JSON text
        paths, stats = [a["path"] for a in table], [_stats(a) for a in table]
        lows, highs = [s[0].get("start_time_us") for s in stats], [s[1].get("start_time_us") for s in stats]
        min_nodes, max_nodes = [s[0].get("node_id") for s in stats], [s[1].get("node_id") for s in stats]
    else:
        # (pa.table() would import pandas to rule out a DataFrame: a third of a second per process)
        actions = pa.RecordBatchReader.from_stream(table.get_add_actions(flatten=True)).read_all()

        def statistic(name: str) -> list:
            return actions[name].to_pylist() if name in actions.column_names else [None] * actions.num_rows

        paths = actions["path"].to_pylist()
        lows, highs = statistic("min.start_time_us"), statistic("max.start_time_us")
        min_nodes, max_nodes = statistic("min.node_id"), statistic("max.node_id")
    nodes = [low if low is not None and low == high else None for low, high in zip(min_nodes, max_nodes)]
    # The log names files relative to the table and URL-quoted; file_uris() gives them whole.
    by_name = {unquote(path).rsplit("/", 1)[-1]: bounds for path, *bounds in zip(paths, lows, highs, nodes)}
    spans = [by_name.get(uri.rsplit("/", 1)[-1], (None, None, None)) for uri in files]
    nan = float("nan")
    return FileSpans(
        files,
        np.array([nan if low is None else low for low, _, _ in spans], dtype=np.float64),
        np.array([nan if high is None else high for _, high, _ in spans], dtype=np.float64),
        [node for _, _, node in spans],
    )

