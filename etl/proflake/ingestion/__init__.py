"""Ingestion: one batch lists a source, parses new or changed stats files and commits them atomically."""

from __future__ import annotations

from typing import TYPE_CHECKING

from proflake._lazy import lazy_exports

_EXPORTS = {
    "IngestReport": "proflake.ingestion.report",
    "Progress": "proflake.ingestion.report",
    "ingest": "proflake.ingestion.batch",
    "repair": "proflake.ingestion.bookkeeping",
}
__all__ = [
    "IngestReport",
    "Progress",
    "ingest",
    "repair",
]
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)

if TYPE_CHECKING:
    from proflake.ingestion.batch import ingest
    from proflake.ingestion.bookkeeping import repair
    from proflake.ingestion.report import IngestReport, Progress
