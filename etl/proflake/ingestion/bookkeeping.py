"""A batch's bookkeeping: its events in ``batches``, the quarantine of files that failed (``ingest_errors``),
and the repair of batches a killed run left behind."""

from __future__ import annotations

import os
import secrets
from collections.abc import Callable
from datetime import datetime, timezone

from proflake.ingestion.commit import clear_spool
from proflake.ingestion.report import IngestReport
from proflake.schema import arrow_rows, arrow_schema
from proflake.store.deltawrite import commit_data_files, parquet_options, write_data_file
from proflake.store.store import FACT_TABLES, WRITER_PROPERTIES, Store, crash_points, raw_view


def new_batch_id(now: datetime) -> str:
    return f"{now:%Y%m%dT%H%M%S%f}Z-{secrets.token_hex(3)}"



def update_quarantine(store: Store, report: IngestReport, ingested: set[str], now: datetime) -> None:
    """Add this run's failures, count repeats, and release files that ingested (or are already in)."""
    columns = arrow_schema("ingest_errors").names
    current = [dict(zip(columns, row)) for row in store.rows("ingest_errors", columns)]
    if not current and not report.failed:
        return
    live = set(store.ingested_versions())
    failed = {f.uri: f for f in report.failed}
    rows = []
    for row in current:
        uri = row["source_uri"]
        if uri in ingested or uri in live:
            continue
        if uri in failed:
            f = failed.pop(uri)
            row.update(
                source_size=f.size, source_version=f.version, error_kind=f.kind, message=f.message,
                last_seen=now, attempts=row["attempts"] + 1, batch_id=report.batch_id,
            )
        rows.append(row)
    for f in failed.values():
        rows.append(
            {
                "source_uri": f.uri, "source_size": f.size, "source_version": f.version, "error_kind": f.kind,
                "message": f.message, "first_seen": now, "last_seen": now, "attempts": 1, "batch_id": report.batch_id,
            }
        )
    if rows != current:
        store.replace_table("ingest_errors", arrow_rows("ingest_errors", rows), report.batch_id)


def repair(store: Store, log: Callable[[str], None] | None = None) -> list[str]:
    """Finish or undo batches a killed run left behind; returns their ids. Call with the lock held."""
    say = log or (lambda message: None)
    clear_spool(store)
    unfinished = unfinished_batches(store)
    if not unfinished:
        return []  # the usual case, answered without the views of store.connect()
    con = store.connect()
    committed = {row[0] for row in con.sql("SELECT DISTINCT batch_id FROM intervals").fetchall()}
    now = datetime.now(timezone.utc)
    abandoned = [b for b in unfinished if b not in committed]
    if abandoned:
        store.delete_rows_of("batch_id", abandoned)
    if any(b in committed for b in unfinished):
        # Intervals committed, clean-up maybe not: drop facts whose interval is no longer live.
        orphans = sorted(
            {
                row[0]
                for name in FACT_TABLES
                for row in con.sql(
                    f"SELECT DISTINCT interval_id FROM {raw_view(name)} "
                    "WHERE interval_id NOT IN (SELECT interval_id FROM intervals)"
                ).fetchall()
            }
        )
        if orphans:
            store.delete_rows_of("interval_id", orphans)
    con.close()
    events = [{"batch_id": b, "event": "repaired" if b in committed else "abandoned", "recorded_at": now} for b in unfinished]
    store.append("batches", arrow_rows("batches", events), "repair")
    for event in events:
        say(f"repaired an interrupted run: batch {event['batch_id']} {event['event']}")
    return unfinished


def unfinished_batches(store: Store) -> list[str]:
    """Batches recorded as 'started' with no later event: the runs that were killed."""
    started, ended = set(), set()
    for batch, event in store.rows("batches", ["batch_id", "event"]):
        (started if event == "started" else ended).add(batch)
    return sorted(started - ended)


def record_event(store: Store, report: IngestReport, event: str, at: datetime) -> None:
    row = {"batch_id": report.batch_id, "event": event, "recorded_at": at, "source": report.source, "full_refresh": report.full_refresh}
    if event == "committed":
        row.update(
            files_seen=report.files_seen,
            new_intervals=report.new_intervals,
            replaced_intervals=report.replaced_intervals,
            unchanged=report.unchanged,
            failed=len(report.failed),
            rows_written=report.total_rows,
            bytes_read=report.bytes_read,
            seconds=report.seconds,
        )
    rows = arrow_rows("batches", [row])
    if store.is_remote:
        store.append("batches", rows, report.batch_id)
        return
    # Written as the intervals and facts are: deltalake's writer and DuckDB's conversion paged ~50 MB
    # of their code into this process for one row, at the start of the parse, which needs neither.
    written = write_data_file("batches", rows, os.path.join(store.root, "batches"), report.batch_id, parquet_options(WRITER_PROPERTIES))
    commit_data_files(store.delta("batches"), [written], report.batch_id)
    crash_points.committed()
