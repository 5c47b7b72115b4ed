"""Compaction: rewrite the many small files nightly batches make into few large ones, atomically.

Delta's optimize/compact writes new files and swaps them in with one commit per table, so readers see
either the old files or the new ones, and every query answers the same. The replaced files stay on
disk until vacuum removes those older than the retention period: a reader that listed the old files
(a long query, a BI catalog not yet refreshed) keeps working for that long.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import unquote

from proflake.schema import ALL_TABLES
from proflake.store.lock import StoreLock
from proflake.store.migrations import migrate
from proflake.store.store import Store, crash_points, writer_properties

DEFAULT_RETENTION_HOURS = 168  # Delta's own default: a week
TARGET_FILE_BYTES = 128 * 1024 * 1024


@dataclass
class CompactReport:
    """What one compaction run did: per table, files merged (``files_removed`` into ``files_added``) and
    files this run's vacuum deleted (``files_vacuumed``: only files that were still there)."""

    store: str
    retention_hours: int = DEFAULT_RETENTION_HOURS
    tables: dict[str, dict] = field(default_factory=dict)
    seconds: float = 0.0

    def summary(self) -> str:
        removed = sum(t["files_removed"] for t in self.tables.values())
        added = sum(t["files_added"] for t in self.tables.values())
        vacuumed = sum(t.get("files_vacuumed", 0) for t in self.tables.values())
        merged = f"compacted {removed} file(s) into {added}" if removed else "nothing to compact"
        deleted = (
            f"vacuum deleted {vacuumed} file(s) unreferenced for over {self.retention_hours} h"
            if vacuumed
            else f"no file unreferenced for over {self.retention_hours} h to vacuum"
        )
        return f"{merged}; {deleted}; in {self.seconds:.2f} s"

    def to_dict(self) -> dict:
        return {
            "store": self.store,
            "retention_hours": self.retention_hours,
            "tables": self.tables,
            "seconds": round(self.seconds, 3),
        }


def compact(
    store: Store,
    *,
    retention_hours: int = DEFAULT_RETENTION_HOURS,
    wait: float = 0.0,
    before_vacuum: Callable[[Store], object] | None = None,
) -> CompactReport:
    """Compact every table, then vacuum files unreferenced for longer than ``retention_hours``.

    ``before_vacuum(store)`` runs under the lock between the two (the BI catalogs' refresh, given by
    ``proflake.operations.compact``), so nothing that names the old files outlives them.
    """
    started = time.perf_counter()
    store.require()
    report = CompactReport(store=store.location, retention_hours=retention_hours)
    # Under the writer lock: compaction must not interleave with a batch, whose repair relies on
    # finding its own rows.
    with StoreLock(store, wait=wait, purpose="proflake compact"):
        migrate(store)  # as ingest does: the files compaction writes have this release's columns
        tables = {}
        for name in ALL_TABLES:
            # Opened once (on S3 a LIST and two GETs a commit): optimize brings the object up to its own
            # commit, and vacuum below catches it up with anything committed since.
            table = tables[name] = store.delta(name)
            with store.committing(name):
                metrics = table.optimize.compact(target_size=TARGET_FILE_BYTES, writer_properties=writer_properties())
            if metrics.get("numFilesRemoved"):
                crash_points.committed()
            report.tables[name] = {
                "files_removed": int(metrics.get("numFilesRemoved", 0)),
                "files_added": int(metrics.get("numFilesAdded", 0)),
            }
        # Catalogs name files: move them to the compacted ones before vacuum may delete the old.
        if before_vacuum is not None:
            before_vacuum(store)
        for name in ALL_TABLES:
            table = tables[name]
            table.update_incremental()  # the newest log (a LIST), whatever was committed since it was opened
            # vacuum lists every file the log removed before the retention cut-off, also those an earlier
            # vacuum deleted already: count only the ones still there, i.e. what this run deletes. Full
            # mode: also files the log never referenced (a killed run's uploads to an S3 table, a Spark
            # task attempt whose answer was dropped), not only the ones commits removed.
            candidates = table.vacuum(
                retention_hours=retention_hours, dry_run=True, enforce_retention_duration=False, full=True
            )
            present = _present(store, name, candidates) if candidates else []
            if candidates:
                with store.committing():
                    table.vacuum(retention_hours=retention_hours, dry_run=False, enforce_retention_duration=False, full=True)
            report.tables[name]["files_vacuumed"] = len(present)
    report.seconds = time.perf_counter() - started
    return report


def _present(store: Store, table: str, paths: list[str]) -> list[str]:
    """The ``paths`` (relative to the table, URL-quoted as the log holds them) that exist now."""
    if not store.is_remote:
        root = Path(store.table_uri(table))
        return [p for p in paths if (root / unquote(p)).exists()]
    from proflake.sources.s3 import S3Source

    keys = S3Source(store.table_uri(table), store.s3).sizes()
    return [p for p in paths if unquote(p) in keys]
