"""``proflake check [--repair]``: verify a store, and rebuild what can be rebuilt.

What is checked, each finding one line naming the damage and its remedy:

* every table is there (a deleted table folder is damage, never silently recreated empty), and its
  transaction log reads (a commit cut short, commits missing, an unreadable checkpoint: the table is
  named; --repair sets a damaged checkpoint aside when the commits still hold the whole log, else sets
  the table aside under ``_proflake/damaged/`` and restores it as a lost table);
* every data file a table's Delta log references exists, its Parquet footer reads and its bytes are
  those its commit recorded (etl/proflake/store/checksums.py; on S3: exists, with the size the log records);
* no batch was left unfinished by a killed run;
* every fact row belongs to a live interval, and every live interval that holds data has its facts;
* the derived phase roll-ups were built from the live intervals;
* the store's schema version (``_proflake/schema.json``, etl/proflake/store/migrations.py) is reported
  with the migrations pending; a store of a later release is refused (NewerStoreError), an unreadable
  record is a finding, and so are the data files of a migrated local store that lack a column it added
  (an older release wrote them; --repair rewrites the table back-filled).

``--repair`` (under the writer lock): recreates a missing table, removes unreadable, missing or changed
files from its log (Delta's FSCK), finishes killed batches, applies pending migrations (an unreadable
schema record is rewritten from the tables' columns), then restores the rows the damage took from
the sources ``batches`` recorded, or reports them as lost, never deleting their last copy
(etl/proflake/ingestion/restore.py), and rebuilds stale roll-ups.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import TYPE_CHECKING
from urllib.parse import unquote

import pyarrow as pa
import pyarrow.parquet as pq

from proflake.errors import NewerStoreError, StoreError
from proflake.ingestion.bookkeeping import FINISHED_EVENTS, has_table, repair
from proflake.ingestion.findings import CheckReport, Finding
from proflake.ingestion.opened import OpenedTables
from proflake.ingestion.restore import Plan, plan, reachable, settle
from proflake.schema import ALL_TABLES, DERIVED_TABLES
from proflake.store.checksums import changed_files, listed_objects, recorded
from proflake.store.lock import StoreLock
from proflake.store.migrations import RECORD, back_fill, files_lacking_columns, migrate, recover_record, refuse_newer
from proflake.store.store import FACT_TABLES, Store, sql_string

if TYPE_CHECKING:
    import duckdb
    from deltalake import DeltaTable


def check(store: Store, *, repair_damage: bool = False, wait: float = 0.0,
          reingest: Callable[[str, Store], object] | None = None) -> CheckReport:
    """Verify ``store``; with ``repair_damage``, restore what the store and its sources still hold and
    report the rest (``reingest(source, store)`` parses a reachable source's lost files again; default:
    proflake.ingestion.ingest)."""
    if not any(has_table(store, name) for name in ALL_TABLES):
        store.require()  # nothing of a store here: say so (a lost intervals folder alone is damage)
    report = CheckReport(store.location)
    readable = _schema(store, report, fix=False)
    if not repair_damage:
        # An unreadable record: every reader refuses the store; files an older release wrote: readers may
        # fail on them. Either way the rest is checked once --repair has put that right.
        tables = OpenedTables(store)  # each table opened once, by the first step that asks for it
        if readable and not _old_release_files(store, report, fix=False, tables=tables):
            _inspect(store, report, fix=False, tables=tables)
        return report
    with StoreLock(store, wait=wait, purpose="proflake check --repair"):
        _schema(store, report, fix=True)
        try:
            _old_release_files(store, report, fix=True)
        except Exception:  # noqa: BLE001 (a damaged file too: back-filled once _inspect has taken it out)
            report.findings = [f for f in report.findings if f.kind != "old_release_files"]
        done = _inspect(store, report, fix=True)
        if refuse_newer(store).pending:  # after the damage is repaired: a migration reads its table
            report.migrated = migrate(store)
            report.schema = refuse_newer(store).to_dict()
        if not any(f.kind == "old_release_files" for f in report.findings):
            _old_release_files(store, report, fix=True)
    if done is None:
        return report
    if done.sources:
        from proflake.ingestion.batch import ingest

        run = reingest or (lambda source, st: ingest(source, st))
        for source in done.sources:
            if reachable(store, source) and (store.is_remote or source.startswith("s3://") or os.path.isdir(source)):
                run(source, store)
                report.reingested.append(source)
            else:
                report.findings.append(Finding("source_unreachable", f"source {source!r} is not reachable; its lost files "
                                               f"are parsed again by 'proflake check --repair --store {store.location}' once it is"))
    with StoreLock(store, wait=wait, purpose="proflake check --repair"):
        settle(store, report, done)
    return report


def _inspect(store: Store, report: CheckReport, *, fix: bool, tables: OpenedTables | None = None) -> Plan | None:
    """Add the findings to ``report`` (with ``fix``, taking the damaged files out and planning the
    restore of their rows: etl/proflake/ingestion/restore.py); None when the rest is checked once
    --repair has taken the damage out. Each table is opened once (etl/proflake/ingestion/opened.py;
    ``tables``: those open already, none written since)."""
    where = f"--store {store.location}"
    add = report.findings.append
    tables = tables or OpenedTables(store)
    damaged_logs = tables.open_all()
    for name, reason in damaged_logs.items():
        if fix and _checkpoint_set_aside(store, tables, name, reason):
            add(Finding("damaged_log", f"table {name!r}: {reason}; its commits hold the whole log: the checkpoint "
                        "was set aside (in _proflake/damaged/) and the table is read from its commits", True))
            continue
        first = "the checkpoint aside if the commits hold the whole log, else " if "checkpoint" in reason and not fix else ""
        add(Finding("damaged_log", f"table {name!r}: {reason}; 'proflake check --repair {where}' sets {first}the table "
                    "aside in _proflake/damaged/ (kept for a post-mortem) and restores it as a lost table", fix))
        if fix:
            _set_table_aside(store, name)
    if damaged_logs and not fix:
        return None  # what those tables hold is checked once --repair has set them aside and restored them
    lost_tables, missing = [], []
    for name in ALL_TABLES:
        if tables.has(name):
            continue
        missing.append(name)
        kind = "derived table" if name in DERIVED_TABLES else "table"
        remedy = {"batches": "recreates it (the history of runs it held is lost; the sources of the runs are then unknown)",
                  "ingest_errors": "recreates it (the next ingest quarantines the failing files again)",
                  "intervals": "recreates it and parses the files of the facts still held again"}
        add(Finding("missing_table", f"{kind} {name!r} is missing; 'proflake check --repair {where}' "
                    + remedy.get(name, "rebuilds it" if name in DERIVED_TABLES else "recreates it and parses its intervals' files again"),
                    fix and name != "batches"))
        if name in FACT_TABLES:
            lost_tables.append(name)
    rebuild_derived = fix and not all(tables.has(n) for n in DERIVED_TABLES)
    lost_spans: list[str] = []  # predicates on intervals: those a removed fact file held rows of
    if fix:
        store.create()
    elif any(name not in DERIVED_TABLES for name in missing):  # bookkeeping.missing_tables, from the answers above
        return None  # what the missing tables held is checked once --repair has recreated them
    for name in ALL_TABLES:
        if not (tables.has(name) if fix else name not in missing):
            continue
        bad = _bad_files(store, name, tables.get(name))
        for uri, why in bad:
            add(Finding("bad_file", f"table {name!r}: data file {uri} {why}; 'proflake check --repair {where}' removes it "
                        "from the table (rows it held are parsed again from their sources)", fix))
        if fix and bad:
            if name in FACT_TABLES:
                lost_spans.extend(_spans(tables.get(name), {uri for uri, _ in bad}))
            for uri, why in bad:
                if why != "is missing":
                    _set_aside(store, uri)
            # A commit like any other: fenced by the writer lock (renewed just before, so the repair starts
            # with a whole lease; deltalake 1.6's repair holds the GIL while it waits on S3, so the lock's
            # renewer cannot run during it).
            with store.committing(name):
                store.delta(name).repair(dry_run=False)
            tables.forget(name)
            rebuild_derived = rebuild_derived or name in DERIVED_TABLES
    if not fix and any(f.kind == "bad_file" for f in report.findings):
        return None  # the rows are checked once --repair has taken the bad files out
    con = tables.connect()
    try:
        unfinished = _unfinished_batches(con)
        if unfinished:
            add(Finding("unfinished_batch", f"{len(unfinished)} batch(es) left unfinished by a killed run ({', '.join(unfinished[:3])}); "
                        f"the next ingest or 'proflake check --repair {where}' finishes them", fix))
            if fix:
                con.close()
                repair(store)  # its commits: the views are built again from tables opened anew
                tables.forget()
                con = tables.connect()
        done = plan(store, report, lost_spans, lost_tables, fix=fix, con=con, has=tables.has)
    finally:
        con.close()
    done.rebuild_derived = rebuild_derived
    return done


def _unfinished_batches(con: duckdb.DuckDBPyConnection) -> list[str]:
    """``bookkeeping.unfinished_batches`` read from the views of ``con`` (the tables check has open):
    batches recorded as 'started' that never finished."""
    started, ended = set(), set()
    for batch, event in con.execute("SELECT batch_id, event FROM batches").fetchall():
        if event == "started":
            started.add(batch)
        elif event in FINISHED_EVENTS:
            ended.add(batch)
    return sorted(started - ended)


def _schema(store: Store, report: CheckReport, *, fix: bool) -> bool:
    """The store's schema version into ``report``; False when its record does not read (a finding; with
    ``fix`` it is rewritten from the tables' columns). A later release's store is refused."""
    try:
        report.schema = refuse_newer(store).to_dict()
        return True
    except NewerStoreError:
        raise
    except StoreError:
        found = next((f for f in report.findings if f.kind == "schema_record"), None)
        if found is None:
            found = Finding("schema_record", f"{RECORD} is not a schema record proflake wrote; 'proflake check --repair "
                            f"--store {store.location}' rewrites it from the tables' columns")
            report.findings.append(found)
        if not fix:
            return False
    recover_record(store)
    found.repaired = True
    report.schema = refuse_newer(store).to_dict()
    return True


def _old_release_files(store: Store, report: CheckReport, *, fix: bool, tables: OpenedTables | None = None) -> bool:
    """Data files of a migrated local store that lack a column its migrations added: an older release
    wrote them after the migration. ``fix``: rewrite their table, back-filling (etl/proflake/store/migrations.py).
    True when there were any. ``tables``: where to open the tables (without: anew)."""
    if store.is_remote or not report.schema:
        return False  # on S3 no footer is read (one listing per table)
    found = files_lacking_columns(store, report.schema["schema_version"], None if tables is None else tables.get)
    for name, (uris, columns) in found.items():
        report.findings.append(Finding("old_release_files", (
            f"table {name!r}: {len(uris)} data file(s) lack column(s) {', '.join(columns)} of schema version "
            f"{report.schema['schema_version']} (written by an older proflake after the store was migrated; first: "
            f"{uris[0]}); 'proflake check --repair --store {store.location}' rewrites the table with them back-filled"), fix))
        if fix:
            back_fill(store, name)
    return bool(found)


def _aside_folder(store: Store, name: str) -> str:
    return f"{store.root}/_proflake/damaged/{name}-{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}"


def _checkpoint_set_aside(store: Store, tables: OpenedTables, name: str, reason: str) -> bool:
    """With only the checkpoint damaged and every commit from version 0 still there, move the checkpoint
    files aside; True when the table then reads (and is kept in ``tables``). (Local stores; on S3 the
    table is set aside whole.)"""
    if store.is_remote or "checkpoint" not in reason:
        return False
    log = os.path.join(store.root, name, "_delta_log")
    names = os.listdir(log)
    commits = sorted(int(n[:20]) for n in names if len(n) == 25 and n.endswith(".json") and n[:20].isdigit())
    if not commits or commits != list(range(commits[-1] + 1)):
        return False
    aside = _aside_folder(store, name) + "-checkpoint"
    os.makedirs(aside, exist_ok=True)
    moved = [n for n in names if n == "_last_checkpoint" or ".checkpoint." in n]
    for n in moved:
        os.replace(os.path.join(log, n), os.path.join(aside, n))
    try:
        table = store.delta(name)
        table.file_uris()
        tables.keep(name, table)
        return True
    except StoreError:
        for n in moved:  # not the checkpoint alone: put it back, the table is set aside whole
            os.replace(os.path.join(aside, n), os.path.join(log, n))
        return False


def _set_table_aside(store: Store, name: str) -> None:
    """Move a table whose log is damaged out of the store, to ``_proflake/damaged/<name>-<UTC time>``:
    the table is then missing and restored as such, and nothing it held is deleted."""
    aside = _aside_folder(store, name)
    if not store.is_remote:
        os.makedirs(os.path.dirname(aside), exist_ok=True)
        os.replace(os.path.join(store.root, name), aside)
        return
    from proflake.sources.settings import explain_client_error, split_s3_uri

    bucket, prefix = split_s3_uri(store.table_uri(name) + "/")
    _, aside_prefix = split_s3_uri(aside + "/")
    assert store.s3 is not None  # a store on S3 has its S3 settings
    client = store.s3.client()
    try:
        for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
            for obj in page.get("Contents", []):
                key = obj["Key"]
                client.copy_object(Bucket=bucket, Key=aside_prefix + key[len(prefix):], CopySource={"Bucket": bucket, "Key": key})
                client.delete_object(Bucket=bucket, Key=key)
    except Exception as e:  # botocore's errors, named by explain_client_error
        raise explain_client_error(e, store.table_uri(name)) from e


def _spans(table: DeltaTable, uris: set[str]) -> list[str]:
    """A predicate on intervals for each of ``uris`` (files of fact table ``table``): the intervals its rows
    may belong to, from the log's statistics (its batch, node and start times; every interval, without)."""
    actions = pa.RecordBatchReader.from_stream(table.get_add_actions(flatten=True)).read_all().to_pylist()
    out = []
    for action in actions:
        path = unquote(action["path"])
        if not any(uri == path or uri.endswith("/" + path) for uri in uris):
            continue
        terms = []
        for column in ("batch_id", "node_id"):
            low, high = action.get(f"min.{column}"), action.get(f"max.{column}")
            if low is not None and low == high:
                terms.append(f"{column} = {sql_string(low)}")
        low, high = action.get("min.start_time_us"), action.get("max.start_time_us")
        if low is not None and high is not None:
            terms.append(f"start_time_us BETWEEN {float(low)!r} AND {float(high)!r}")
        out.append("(" + (" AND ".join(terms) or "true") + ")")
    return out or ["true"]


def _bad_files(store: Store, name: str, table: DeltaTable) -> list[tuple[str, str]]:
    """(uri, what is wrong) of each data file the log of ``table`` (table ``name``, as opened) references
    that is missing or unreadable: on disk, its Parquet footer is read; on S3, one listing per table
    compares every object's size with the log's (a footer read per object would cost a request each)."""
    if store.is_remote:
        return _bad_objects(store, name, table)
    bad, present = [], []
    for uri in table.file_uris():
        if not os.path.exists(uri):
            bad.append((uri, "is missing"))
            continue
        try:
            pq.ParquetFile(uri).metadata  # noqa: B018 (reading the footer is the check)
            present.append(uri)
        except Exception as e:  # noqa: BLE001 (any failure to read it is the finding)
            bad.append((uri, f"does not read as Parquet ({type(e).__name__})"))
    return bad + changed_files(store, name, present)


def _set_aside(store: Store, uri: str) -> None:
    """Move a damaged data file to ``<name>.damaged`` beside it: out of the table, kept for a post-mortem."""
    if not store.is_remote:
        os.replace(uri, uri + ".damaged")
        return
    from proflake.sources.settings import explain_client_error, split_s3_uri

    bucket, key = split_s3_uri(uri)
    assert store.s3 is not None  # a store on S3 has its S3 settings
    client = store.s3.client()
    try:
        client.copy_object(Bucket=bucket, Key=key + ".damaged", CopySource={"Bucket": bucket, "Key": key})
        client.delete_object(Bucket=bucket, Key=key)
    except Exception as e:  # botocore's errors, named by explain_client_error
        raise explain_client_error(e, uri) from e


def _bad_objects(store: Store, name: str, table: DeltaTable) -> list[tuple[str, str]]:
    """On S3, from one listing made after ``table`` was opened (so every object it names is there by then):
    objects missing, of another size than their log says, or rewritten since their commit (another
    ETag than recorded then: etl/proflake/store/checksums.py)."""
    table_uri = store.table_uri(name)
    listed = listed_objects(store, name)
    known = recorded(store, name)
    actions = pa.RecordBatchReader.from_stream(table.get_add_actions(flatten=True)).read_all()
    bad = []
    for path, size in zip(actions["path"].to_pylist(), actions["size_bytes"].to_pylist()):
        key = unquote(path)
        uri = f"{table_uri}/{key}"
        if key not in listed:
            bad.append((uri, "is missing"))
        elif listed[key][0] != size:
            bad.append((uri, f"does not read as Parquet (it has {listed[key][0]:,} bytes, its log says {size:,})"))
        elif key in known and known[key][1] != listed[key][1]:
            bad.append((uri, "changed after its commit (same size, other bytes: its ETag differs from the one recorded)"))
    return bad
