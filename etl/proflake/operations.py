"""The write operations as users call them: ``ingest`` and ``compact`` with the store's after-commit duties.

The batch (proflake.ingestion) and compaction (proflake.store.compact) know nothing of the BI layer; a
store's registered catalogs name its live files, so every commit must rewrite them. This module wires
that duty in, once, for the CLI, the Python API and the compatible classes.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

from proflake.bi.catalog import refresh_catalogs
from proflake.errors import UnrecognisedFilesWarning
from proflake.ingestion.batch import IngestReport
from proflake.ingestion.batch import ingest as ingest_batch
from proflake.store.compact import CompactReport
from proflake.store.compact import compact as compact_tables
from proflake.store.store import Store


def _refresh_after_commit(store: Store, log: Callable[[str], None]) -> None:
    # BI catalogs list the live files by name: point them at this batch's.
    refresh_catalogs(store, log=log)


def ingest(
    source: Any, store: Store | str | None = None, *, allow_empty: bool = True, warn_unrecognised: bool = True,
    **options: Any,
) -> IngestReport:
    """Ingest every new or changed stats file under ``source`` into ``store`` as one atomic batch, then
    refresh the store's registered BI catalogs. Options are those of ``proflake.ingestion.ingest``.

    ``allow_empty=False`` (the CLI's default) first checks that the source holds at least one stats file
    and raises ``EmptySourceError``, naming what it holds instead, before the store is touched.

    Files below the source that fit no smdebug layout raise an ``UnrecognisedFilesWarning`` naming how
    many and one of them (``warn_unrecognised=False``: the caller reports ``report.unrecognised``)."""
    if not allow_empty:
        from proflake.ingestion.survey import require_stats_files
        from proflake.sources import S3Config, open_source

        if isinstance(source, str):
            source = open_source(source, options.get("s3") or S3Config.from_env())
        require_stats_files(source)
    report = ingest_batch(source, store, after_commit=_refresh_after_commit, **options)
    if warn_unrecognised and report.unrecognised:
        warnings.warn(unrecognised_message(report), UnrecognisedFilesWarning, stacklevel=2)
    return report


def unrecognised_message(report: IngestReport) -> str:
    count = len(report.unrecognised)
    return (
        f"skipped {count} file(s) below {report.source} that fit no smdebug layout, e.g. "
        f"{report.unrecognised[0]}; the answers leave them out"
    )


def rebuild(source: Any, store: Store | str | None = None, **options: Any) -> IngestReport:
    """Make ``store`` hold exactly what ``source`` holds, in one commit: every file under it parsed again,
    every interval from elsewhere (other sources' jobs) deleted. ``proflake.ingestion.rebuild.rebuild_plan``
    says what that deletes; the CLI shows it and asks for ``--yes``."""
    return ingest(source, store, whole_store=True, **options)


def compact(store: Store, **options: Any) -> CompactReport:
    """Compact and vacuum every table of ``store``, refreshing its BI catalogs before the vacuum."""
    return compact_tables(store, before_vacuum=lambda s: refresh_catalogs(s), **options)


ingest.__wrapped__ = ingest_batch  # type: ignore[attr-defined]  # inspect.signature shows the real options
