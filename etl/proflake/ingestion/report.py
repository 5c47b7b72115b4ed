"""What one ingest run reports: its counts, its failures (``IngestReport``), and its progress while it runs."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class FailedFile:
    uri: str
    kind: str
    message: str
    size: int | None = None
    version: str | None = None


@dataclass
class IngestReport:
    batch_id: str
    source: str
    store: str
    full_refresh: bool = False
    whole_store: bool = False  # proflake rebuild: every interval of the store was replaced, not only SOURCE's
    files_seen: int = 0
    intervals_seen: int = 0
    new_intervals: int = 0
    replaced_intervals: int = 0
    removed_intervals: int = 0  # a full refresh: intervals it dropped (the source's; a rebuild: the store's)
    unchanged: int = 0
    unrecognised: list[str] = field(default_factory=list)
    failed: list[FailedFile] = field(default_factory=list)
    repaired: list[str] = field(default_factory=list)
    migrated: list[dict] = field(default_factory=list)  # schema migrations applied first (proflake.store.migrations)
    rows: dict[str, int] = field(default_factory=dict)
    bytes_read: int = 0
    seconds: float = 0.0

    @property
    def partial(self) -> bool:
        """Some stats files could not be ingested (files that fit no layout do not count)."""
        return bool(self.failed)

    @property
    def total_rows(self) -> int:
        return sum(self.rows.values())

    def summary(self) -> str:
        refreshed = (
            f"; whole store rebuilt from {self.source}: its {self.removed_intervals} earlier interval(s) were removed"
            if self.whole_store
            else f"; full refresh of {self.source}: {self.removed_intervals} interval(s) ingested from it before were removed"
            if self.full_refresh
            else ""
        )
        if not self.files_seen:
            return f"no files under {self.source}; nothing to ingest{refreshed} ({self.seconds:.2f} s)"
        if self.files_seen and not self.new_intervals and not self.failed and not self.replaced_intervals:
            head = f"nothing new: {self.unchanged} stats file(s) already ingested"
        else:
            head = (
                f"ingested {self.new_intervals} new interval(s) ({self.replaced_intervals} replacing changed files), "
                f"{self.unchanged} unchanged, {len(self.failed)} failed"
            )
        return (
            f"{head}; {self.files_seen} file(s) seen, {len(self.unrecognised)} fit no layout; "
            f"{self.total_rows} rows, {self.bytes_read} bytes read in {self.seconds:.2f} s{refreshed}"
        )

    def to_dict(self) -> dict:
        return {
            "batch_id": self.batch_id,
            "source": self.source,
            "store": self.store,
            "full_refresh": self.full_refresh,
            "whole_store": self.whole_store,
            "files_seen": self.files_seen,
            "intervals_seen": self.intervals_seen,
            "new_intervals": self.new_intervals,
            "replaced_intervals": self.replaced_intervals,
            "removed_intervals": self.removed_intervals,
            "unchanged": self.unchanged,
            "failed": [{"uri": f.uri, "kind": f.kind, "message": f.message} for f in self.failed],
            "unrecognised": self.unrecognised,
            "repaired_batches": self.repaired,
            "migrations": self.migrated,
            "rows": self.rows,
            "bytes_read": self.bytes_read,
            "seconds": round(self.seconds, 3),
        }


class Progress:
    """What ingest reports while it runs; the CLI draws a bar or logs lines, the library stays quiet."""

    def listing(self, files: int) -> None: ...

    def reading(self, total_files: int, total_bytes: int) -> None: ...

    def advance(self, files: int, nbytes: int) -> None: ...

    def writing(self, what: str) -> None: ...

    def done(self) -> None: ...

