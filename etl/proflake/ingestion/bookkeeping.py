"""A batch's bookkeeping: its events in ``batches``, the quarantine of files that failed (``ingest_errors``),
and the repair of batches a killed run left behind."""

from __future__ import annotations

import contextlib
import functools
import os
import secrets
import urllib.parse
from collections.abc import Callable, Iterable, Mapping
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq

from proflake.errors import StoreError
from proflake.formats import FAMILIES
from proflake.ingestion.commit import clear_spool
from proflake.ingestion.manifest import Manifest, bounded_duckdb
from proflake.ingestion.report import IngestReport
from proflake.schema import ALL_TABLES, DERIVED_TABLES, arrow_rows, arrow_schema
from proflake.store.deltawrite import commit_data_files, parquet_options, write_data_file
from proflake.store.rollups import refresh_phase_rollups
from proflake.store.snapshot import Snapshot
from proflake.store.store import FACT_TABLES, Store, crash_points, raw_view, sql_string, writer_properties

if TYPE_CHECKING:
    from deltalake import DeltaTable

FINISHED_EVENTS = ("committed", "abandoned", "repaired")


def new_batch_id(now: datetime) -> str:
    return f"{now:%Y%m%dT%H%M%S%f}Z-{secrets.token_hex(3)}"



def update_quarantine(
    store: Store, report: IngestReport, ingested: set[str], now: datetime, prefix: str | None = None, manifest: Manifest | None = None
) -> None:
    """Add this run's failures, count repeats, release files that ingested (or are already in), and
    close the open entries under ``prefix`` (the source this run listed) whose file was not seen again:
    every quarantined file still there is retried, so one that neither failed nor ingested is gone
    (unless it lies in a folder this run could not list).
    ``manifest``: the store's live intervals, as committed (opened here when not given)."""
    columns = arrow_schema("ingest_errors").names
    table = store.delta("ingest_errors")  # opened once: read, then written through (nothing commits between)
    stored = set(table.schema().to_arrow().names)  # older stores lack closed_at
    read = [c for c in columns if c in stored]
    current = [{**dict.fromkeys(columns), **dict(zip(read, row))} for row in store.rows("ingest_errors", read, table)]
    if not current and not report.failed:
        return
    # Of the quarantined files, those a live interval came from (the quarantine's size, not the store's).
    with contextlib.nullcontext(manifest) if manifest is not None else Manifest(store) as live_intervals:
        live = live_intervals.live_uris(row["source_uri"] for row in current)
    failed = {f.uri: f for f in report.failed}
    # The files of a folder this run could not list were not looked for: their entries stay as they are.
    unlisted = tuple(f.uri + "/" for f in report.failed if f.kind == "listing")
    rows = []
    for row in current:
        uri = row["source_uri"]
        if uri in ingested or uri in live:
            continue
        if uri in failed:
            f = failed.pop(uri)
            row = dict(row)  # a copy: ``current`` must keep the stored values for the comparison below
            row.update(
                source_size=f.size, source_version=f.version, error_kind=f.kind, message=f.message,
                last_seen=now, attempts=row["attempts"] + 1, batch_id=report.batch_id, closed_at=None,
            )
        elif prefix is not None and row["closed_at"] is None and uri.startswith(prefix) and not uri.startswith(unlisted):
            row = {**row, "closed_at": now}
        rows.append(row)
    for f in failed.values():
        rows.append(
            {
                "source_uri": f.uri, "source_size": f.size, "source_version": f.version, "error_kind": f.kind,
                "message": f.message, "first_seen": now, "last_seen": now, "attempts": 1, "batch_id": report.batch_id,
            }
        )
    if rows != current or read != columns:
        store.replace_table("ingest_errors", arrow_rows("ingest_errors", rows), report.batch_id, table)


def repair(store: Store, log: Callable[[str], None] | None = None, batches: DeltaTable | None = None) -> list[str]:
    """Finish or undo batches a killed run left behind; returns their ids. Call with the lock held.
    ``batches``: that table, opened by the caller under the lock (else opened here)."""
    say = log or (lambda message: None)
    clear_spool(store)
    unfinished = unfinished_batches(store, batches)
    if not unfinished:
        return []  # the usual case, answered without the views of store.connect()
    with Manifest(store) as manifest:
        committed = manifest.live_batches(among=unfinished)
    now = datetime.now(timezone.utc)
    abandoned = [b for b in unfinished if b not in committed]
    if abandoned:
        store.delete_rows_of("batch_id", abandoned)
    if any(b in committed for b in unfinished):
        # Intervals committed, clean-up maybe not: drop facts whose interval is no longer live.
        delete_orphan_facts(store)
    events = [{"batch_id": b, "event": "repaired" if b in committed else "abandoned", "recorded_at": now} for b in unfinished]
    store.append("batches", arrow_rows("batches", events), "repair", table=batches)  # opened by the caller, under the lock
    for event in events:
        say(f"repaired an interrupted run: batch {event['batch_id']} {event['event']}")
    return unfinished


# delta-rs keeps string statistics to this many characters: a shorter min equal to its max is the value.
_WHOLE_STATISTIC = 32


def unfinished_batches(store: Store, batches: DeltaTable | None = None) -> list[str]:
    """Batches recorded as 'started' that never finished: killed, or stopped by an error or a signal
    ('failed', 'interrupted'), whose rows the next run removes or whose clean-up it finishes.
    ``batches``: that table, open already, read at the version it is at (else opened here)."""
    started, ended = set(), set()
    for batch, event in batch_events(store, batches or store.delta("batches")):
        if event == "started":
            started.add(batch)
        elif event in FINISHED_EVENTS:
            ended.add(batch)
    return sorted(started - ended)


def batch_events(store: Store, batches: DeltaTable) -> set[tuple[str, str]]:
    """The (batch_id, event) pairs of the batches table's rows. Each event ingest records is a file of one
    row, whose log statistics are its values: read from the log; the other files (a repair's several
    events, a compacted file, one without statistics) are read, locally with pyarrow. A nightly run's
    repair step so opens no DuckDB database (~14 ms of CPU)."""
    actions = pa.RecordBatchReader.from_stream(batches.get_add_actions(flatten=True)).read_all()
    names = ("path", "num_records", "min.batch_id", "max.batch_id", "min.event", "max.event")
    if not actions.num_rows:
        return set()
    if any(n not in actions.column_names for n in names) or store.is_remote:
        return set(store.rows("batches", ["batch_id", "event"], batches))
    pairs: set[tuple[str, str]] = set()
    unsure: list[str] = []
    for path, rows, low, high, first, last in zip(*(actions[n].to_pylist() for n in names)):
        if rows == 0:
            continue
        if rows is not None and low is not None and low == high and first is not None and first == last and (
            len(low) < _WHOLE_STATISTIC and len(first) < _WHOLE_STATISTIC
        ):
            pairs.add((low, first))
        elif "://" in path or os.path.isabs(path):  # a file outside the table's folder: read as the table is
            return set(store.rows("batches", ["batch_id", "event"], batches))
        else:
            unsure.append(os.path.join(store.table_uri("batches"), urllib.parse.unquote(path)))
    try:
        for file in unsure:
            read = pq.ParquetFile(file).read(columns=["batch_id", "event"])
            pairs.update(zip(read["batch_id"].to_pylist(), read["event"].to_pylist()))
    except (OSError, pa.ArrowException):  # a lost or damaged file: read as before, which says what is wrong
        return set(store.rows("batches", ["batch_id", "event"], batches))
    return pairs


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
    written = write_data_file("batches", rows, os.path.join(store.root, "batches"), report.batch_id, parquet_options(writer_properties()))
    table = store.delta("batches")
    with store.committing("batches"):
        commit_data_files(table, [written], report.batch_id)
    crash_points.committed()


def delete_orphan_facts(
    store: Store, con: duckdb.DuckDBPyConnection | None = None, opened: Mapping[str, DeltaTable] | None = None
) -> tuple[int, int]:
    """Delete the fact rows of intervals that are not live (a generation a full refresh or a changed
    file replaced, a batch whose intervals commit was lost); returns (batches, intervals) removed.
    Call with the lock held. ``opened``: tables open and current (``clean_up``'s), read and deleted
    from through these objects, which stay current.

    A batch none of whose intervals is live goes in one delete per table (a full refresh of a nightly
    source drops every earlier batch whole); otherwise only its intervals that are not live."""
    own = con is None
    bounded = contextlib.ExitStack()
    # The anti-join of every fact row with the live interval ids spills beyond a memory limit (manifest.py).
    con = con or Snapshot(store, bounded.enter_context(bounded_duckdb()), tables=FACT_TABLES, snapshot_intervals=False,
                          opened=opened).con
    try:
        live_batches = {row[0] for row in con.sql("SELECT DISTINCT batch_id FROM intervals").fetchall()}
        dead_batches: set[str] = set()
        orphans: set[str] = set()
        for name in FACT_TABLES:
            for batch, interval in con.sql(
                f"SELECT DISTINCT batch_id, interval_id FROM {raw_view(name)} "
                "WHERE interval_id NOT IN (SELECT interval_id FROM intervals)"
            ).fetchall():
                (orphans.add(interval) if batch in live_batches else dead_batches.add(batch))
    finally:
        if own:
            con.close()
            bounded.close()
    if dead_batches:
        store.delete_rows_of("batch_id", sorted(dead_batches), opened=opened)
    if orphans:
        store.delete_rows_of("interval_id", sorted(orphans), opened=opened)
    return len(dead_batches), len(orphans)


def fact_batches(store: Store, opened: Mapping[str, DeltaTable] | None = None) -> set[str]:
    """The batches whose rows the fact tables hold, from the Delta logs' file statistics (no data
    read); a file whose statistics span several batches (compacted) names none of them. ``opened``:
    tables open and current, read as they are (the others are opened here)."""
    found: set[str] = set()
    for name in FACT_TABLES:
        table = (opened or {}).get(name) or store.delta(name)
        actions = pa.RecordBatchReader.from_stream(table.get_add_actions(flatten=True)).read_all()
        if "min.batch_id" not in actions.column_names:
            continue
        for low, high in zip(actions["min.batch_id"].to_pylist(), actions["max.batch_id"].to_pylist()):
            if low is not None and low == high:
                found.add(low)
    return found


def live_batches_among(intervals: DeltaTable, batches: list[str], ask: Callable[[list[str]], set[str]]) -> set[str]:
    """Those of ``batches`` with a live interval. The intervals log's file statistics answer where they
    can: a file with rows whose batch_id statistics are one value (as every file ingest writes is) holds
    that batch's intervals, and a batch no file's statistics can hold has none. ``ask(batches)`` answers
    the rest (Manifest.live_batches: DuckDB over the files): a compacted file spanning several batches, or
    a file without statistics. A nightly run's clean-up so opens no DuckDB database for it (~23 ms of CPU
    of a warm ~220 ms)."""
    wanted = set(batches)
    actions = pa.RecordBatchReader.from_stream(intervals.get_add_actions(flatten=True)).read_all()
    if "min.batch_id" not in actions.column_names:
        return ask(sorted(wanted)) if wanted and actions.num_rows else set()
    found: set[str] = set()
    spans: list[tuple[str, str] | None] = []  # files that may hold several batches (None: no statistics)
    columns = (actions["min.batch_id"], actions["max.batch_id"], actions["num_records"])
    for low, high, rows in zip(*(c.to_pylist() for c in columns)):
        if rows == 0:
            continue
        if rows is not None and low is not None and low == high and len(low) < _WHOLE_STATISTIC:
            found.add(low)
        else:
            spans.append(None if low is None or high is None else (low, high))
    unsure = sorted(b for b in wanted - found if any(s is None or s[0] <= b <= s[1] for s in spans))
    return (found & wanted) | (ask(unsure) if unsure else set())


def delete_dead_batches(
    store: Store,
    live_among: Callable[[list[str]], set[str]],
    opened: Mapping[str, DeltaTable] | None = None,
    known_live: Iterable[str] = (),
) -> list[str]:
    """Delete the facts of batches none of whose intervals is live, found from the logs alone: a batch
    whose intervals commit or data file was lost left them invisible, and its files are ingested again as
    a new generation. ``live_among(batches)``: those of ``batches`` with a live interval (Manifest.
    live_batches); it is asked only about the batches the fact files name, less ``known_live`` (a batch
    that has just committed intervals), and not at all when none is left: a first ingest then opens no
    DuckDB database for it (~23 ms of a 3-file store's ~180 ms of CPU). Only the facts a live interval
    restores are deleted (``delete_restored_facts``): the others are the last copy of their rows, kept
    for ``proflake check`` to report. Call with the lock held; returns the batches removed from.
    ``opened``: tables open and current, used as ``delete_orphan_facts`` uses them."""
    candidates = sorted(fact_batches(store, opened) - set(known_live))
    dead = sorted(set(candidates) - live_among(candidates)) if candidates else []
    return delete_restored_facts(store, among=dead, opened=opened) if dead else []


# The columns that name an interval's file in the source (its layout keys): a re-parse of the same file
# by a later batch has them all equal, and another interval_id.
INTERVAL_KEYS = ("job_id", "node_id", "start_mode", "start_step", "start_phase", "start_time_us",
                 "end_mode", "end_step", "end_phase", "end_time_us")
FACT_PROFILER = {table: f.profiler for f in FAMILIES.values() for table in f.tables}


def restored_by_live(name: str, alias: str = "f") -> str:
    """SQL: fact row ``alias`` of table ``name`` has a live interval of its profiler with the same keys."""
    match = " AND ".join(f"i.{k} IS NOT DISTINCT FROM {alias}.{k}" for k in INTERVAL_KEYS)
    return f"EXISTS (SELECT 1 FROM intervals i WHERE i.profiler = '{FACT_PROFILER[name]}' AND {match})"


def delete_restored_facts(
    store: Store, among: list[str] | None = None, opened: Mapping[str, DeltaTable] | None = None
) -> list[str]:
    """Delete the fact rows of intervals that are not live but whose file a live interval holds again
    (a later generation, a re-parse after damage); keep those no live interval restores. ``among``: only
    rows of these batches. Call with the lock held; returns the batches removed from. ``opened``:
    tables open and current, used as ``delete_orphan_facts`` uses them."""
    where = "" if among is None else " AND f.batch_id IN (" + ", ".join(sql_string(b) for b in among) + ")"
    with bounded_duckdb() as bounded:
        con = Snapshot(store, bounded, tables=FACT_TABLES, snapshot_intervals=False, opened=opened).con
        try:
            found = {
                row for name in FACT_TABLES for row in con.sql(
                    f"SELECT DISTINCT f.batch_id, f.interval_id FROM {raw_view(name)} f WHERE f.interval_id NOT IN "
                    f"(SELECT interval_id FROM intervals){where} AND {restored_by_live(name)}").fetchall()
            }
        finally:
            con.close()
    if found:
        store.delete_rows_of("interval_id", sorted({i for _, i in found}), opened=opened)
    return sorted({b for b, _ in found})


def missing_tables(store: Store) -> list[str]:
    """The tables a store that exists lacks (derived ones excepted: a store older than them lacks them)."""
    return [name for name in ALL_TABLES if name not in DERIVED_TABLES and not has_table(store, name)]


def has_table(store: Store, name: str) -> bool:
    """Whether table ``name`` is in the store: its log folder locally; on S3 its creating commit (one HEAD,
    as ``Store.create`` asks), else whether deltalake opens it (a log cleaned up past version 0 after a
    checkpoint; any error, which the open then names). A table whose log is damaged is there (locally and
    on S3 alike): opening it says what is wrong."""
    if not store.is_remote:
        return os.path.isdir(os.path.join(store.root, name, "_delta_log"))
    if store._created(name):
        return True
    try:
        store.delta(name)
        return True
    except StoreError:
        return False


def clean_up(
    store: Store, report: IngestReport, ingested: set[str], now: datetime, *, committed: bool, full_refresh: bool,
    covers_store: bool, replaced: dict[str, str], empty: bool, partials: Any, say: Callable[[str], None],
    prefix: str | None = None, opened: Mapping[str, DeltaTable] | None = None,
) -> None:
    """A batch's step 6 (proflake.ingestion.batch.Batch.clean_up): delete the rows no view shows any more
    (``committed``: the batch wrote intervals), update the quarantine (releasing the files in
    ``ingested``, closing the entries under ``prefix`` whose file is gone) and the phase roll-ups.
    ``opened``: the tables the commit step committed to, open and current (``FactCommitter.tables``);
    the step reads them and commits to them through these objects, which keeps them current, and opens
    each other fact table once. Call right after the commit step, with the lock held: nothing else
    commits to them meanwhile, and no table is set aside and created again."""
    tables = dict(opened or {})
    with contextlib.ExitStack() as stack:
        # The live intervals as committed, read where they lie (etl/proflake/ingestion/manifest.py).
        manifest = stack.enter_context(Manifest(store)) if (committed or not empty) and store.exists() else None
        if committed:
            for name in FACT_TABLES:  # every step below reads or deletes from each fact table
                tables[name] = tables.get(name) or store.delta(name)
            if full_refresh and covers_store:
                for name in FACT_TABLES:
                    store.delete_where(name, f"batch_id <> {sql_string(report.batch_id)}", tables[name])
            elif full_refresh:
                delete_orphan_facts(store, opened=tables)  # the earlier generations' facts, and nothing live
            elif replaced:
                store.delete_rows_of("interval_id", sorted(replaced.values()), opened=tables)
            if not (full_refresh and covers_store) and manifest is not None:
                # This batch's intervals are live if it committed any: it has just done so, holding the lock.
                known_live = [report.batch_id] if report.new_intervals else []
                tables["intervals"] = tables.get("intervals") or store.delta("intervals")
                live_among = functools.partial(live_batches_among, tables["intervals"], ask=manifest.live_batches)
                for dead in delete_dead_batches(store, live_among, tables, known_live=known_live):
                    say(f"removed the invisible facts of batch {dead}, whose intervals are not in the store")
        if report.failed or not empty:
            update_quarantine(store, report, ingested, now, prefix, manifest)
    refresh_phase_rollups(store, report.batch_id, log=say, partials=partials, opened=tables)
