"""The store's tables as ``proflake check`` opens them: each once per run, shared by its steps.

Opening a Delta table reads its log (locally ~2 ms of CPU; on S3 a GET of ``_last_checkpoint``, a LIST of
``_delta_log`` and two GETs a commit). check asks three things of every table: does its log read, are
its data files those the log names, and do its rows agree (through the views of ``store.connect()``).
Each step used to open every table again; now the first opens them (``open_all``) and the others use
those objects, so each step sees the version the first one read. Plain ``check`` runs without the
writer lock: a commit made meanwhile is seen by none of the steps (locally the views still read the
versions their snapshot notes, as before: a table changed since its open is opened again at that
version). ``check --repair`` writes under the lock: a step that commits to a table ``forget``s it and
the next one that asks opens it anew.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from proflake.errors import DamagedLogError, StoreError
from proflake.ingestion.bookkeeping import has_table
from proflake.schema import ALL_TABLES
from proflake.store.snapshot import Snapshot

if TYPE_CHECKING:
    import duckdb
    from deltalake import DeltaTable

    from proflake.store.store import Store


class OpenedTables:
    """The tables of ``store`` opened so far, each at most once until it is forgotten."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self._open: dict[str, DeltaTable] = {}

    def open_all(self) -> dict[str, str]:
        """Open every table that is there; returns those whose Delta log cannot be read, each with what
        is wrong with it (a table missing is left to ``has``)."""
        damaged = {}
        for name in ALL_TABLES:
            if name in self._open or (not self.store.is_remote and not has_table(self.store, name)):
                continue  # locally a missing table is not asked for: reported as one
            try:
                self._open[name] = self.store.delta(name)
            except DamagedLogError as e:
                damaged[name] = e.reason
            except StoreError:
                continue  # missing (on S3): reported as a missing table
        return damaged

    def has(self, name: str) -> bool:
        """Whether table ``name`` is in the store (``bookkeeping.has_table``'s answer); no request when it is open."""
        return name in self._open or has_table(self.store, name)

    def get(self, name: str) -> DeltaTable:
        """Table ``name`` as opened, or opened now (a table created since, or forgotten); the store's errors."""
        if name not in self._open:
            self._open[name] = self.store.delta(name)
        return self._open[name]

    def keep(self, name: str, table: DeltaTable) -> None:
        """Use ``table``, opened by the caller, as table ``name``."""
        self._open[name] = table

    def forget(self, *names: str) -> None:
        """After a commit to tables ``names`` (none: every table), or one set aside: opened again when asked."""
        for name in names or tuple(self._open):
            self._open.pop(name, None)

    def connect(self) -> duckdb.DuckDBPyConnection:
        """A connection like ``store.connect()``'s, its views over every table: those open read as they were
        opened (locally: when still at the version the snapshot notes), the others opened now. ``batches``
        is held in memory, as intervals is (a few rows a run): check reads it twice, on S3 a GET an object each."""
        con = Snapshot(self.store, tables=ALL_TABLES, opened=self._open).con
        con.execute("ALTER VIEW batches RENAME TO _batches_files")
        con.execute("CREATE TEMP TABLE batches AS SELECT * FROM _batches_files")
        return con
