"""``proflake check [--repair]``: verify a store, and rebuild what can be rebuilt.

What is checked, each finding one line naming the damage and its remedy:

* every table is there (a deleted table folder is damage, never silently recreated empty);
* every data file a table's Delta log references exists and its Parquet footer reads (on S3: exists,
  with the size the log records);
* no batch was left unfinished by a killed run;
* every fact row belongs to a live interval, and every live interval that holds data has its facts;
* the derived phase roll-ups were built from the live intervals.

``--repair`` (under the writer lock): recreates a missing table and removes unreadable or missing files
from its log (Delta's FSCK), finishes killed batches, deletes facts of intervals that are not live,
removes the live intervals whose facts are lost so the next ingest parses their files again (done at
once for sources recorded in ``batches`` that are still reachable), and rebuilds stale roll-ups.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from urllib.parse import unquote

import pyarrow as pa
import pyarrow.parquet as pq

from proflake.ingestion.bookkeeping import delete_orphan_facts, has_table, missing_tables, repair, unfinished_batches
from proflake.schema import ALL_TABLES, DERIVED_TABLES
from proflake.store.lock import StoreLock
from proflake.store.rollups import PHASE_TABLES, fresh_jobs, live_fingerprints, refresh_phase_rollups
from proflake.store.store import FACT_TABLES, Store, raw_view, sql_string


@dataclass
class Finding:
    kind: str
    message: str  # one sentence: the damage and the remedy
    repaired: bool = False

    def line(self) -> str:
        return f"{'repaired' if self.repaired else 'damage'}: {self.kind}: {self.message}"


@dataclass
class CheckReport:
    store: str
    findings: list[Finding] = field(default_factory=list)
    reingested: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return all(f.repaired for f in self.findings)

    def to_dict(self) -> dict:
        return {"store": self.store, "ok": self.ok, "reingested": self.reingested,
                "findings": [{"kind": f.kind, "message": f.message, "repaired": f.repaired} for f in self.findings]}


def check(store: Store, *, repair_damage: bool = False, wait: float = 0.0,
          reingest: Callable[[str, Store], object] | None = None) -> CheckReport:
    """Verify ``store``; with ``repair_damage``, rebuild what can be (``reingest(source, store)`` parses a
    reachable source's lost files again; default: proflake.ingestion.ingest)."""
    store.require()
    report = CheckReport(store.location)
    if not repair_damage:
        _inspect(store, report, fix=False)
        return report
    with StoreLock(store, wait=wait, purpose="proflake check --repair"):
        sources = _inspect(store, report, fix=True)
    if sources:
        from proflake.ingestion.batch import ingest

        run = reingest or (lambda source, st: ingest(source, st))
        for source in sources:
            if store.is_remote or source.startswith("s3://") or os.path.isdir(source):
                run(source, store)
                report.reingested.append(source)
            else:
                report.findings.append(Finding("source_unreachable", f"source {source!r} is not reachable; its lost files "
                                               f"are parsed again by 'proflake ingest {source} --store {store.location}'"))
    return report


def _inspect(store: Store, report: CheckReport, *, fix: bool) -> list[str]:
    """Add the findings to ``report`` (repairing them when ``fix``); returns the sources to ingest again."""
    where = f"--store {store.location}"
    add = report.findings.append
    for name in ALL_TABLES:
        if has_table(store, name):
            continue
        kind = "derived table" if name in DERIVED_TABLES else "table"
        add(Finding("missing_table", f"{kind} {name!r} is missing; 'proflake check --repair {where}' recreates it"
                    + (" and rebuilds it" if name in DERIVED_TABLES else " (what it held is then checked below)"), fix))
    rebuild_derived = fix and not all(has_table(store, n) for n in DERIVED_TABLES)
    lost_spans: list[str] = []  # predicates on intervals: those a removed fact file held rows of
    if fix:
        store.create()
    elif missing_tables(store):
        return []  # what the missing tables held is checked once --repair has recreated them
    for name in ALL_TABLES:
        if not has_table(store, name):
            continue
        bad = _bad_files(store, name)
        for uri, why in bad:
            add(Finding("bad_file", f"table {name!r}: data file {uri} {why}; 'proflake check --repair {where}' removes it "
                        "from the table (rows it held are parsed again from their sources)", fix))
        if fix and bad:
            if name in FACT_TABLES:
                lost_spans.extend(_spans(store, name, {uri for uri, _ in bad}))
            for uri, why in bad:
                if why != "is missing":
                    _set_aside(store, uri)
            store.delta(name).repair(dry_run=False)
            rebuild_derived = rebuild_derived or name in DERIVED_TABLES
    if not fix and any(f.kind == "bad_file" for f in report.findings):
        return []  # the rows are checked once --repair has taken the bad files out
    unfinished = unfinished_batches(store)
    if unfinished:
        add(Finding("unfinished_batch", f"{len(unfinished)} batch(es) left unfinished by a killed run ({', '.join(unfinished[:3])}); "
                    f"the next ingest or 'proflake check --repair {where}' finishes them", fix))
        if fix:
            repair(store)
    con = store.connect()
    try:
        orphans = sum(
            con.sql(f"SELECT count(*) FROM {raw_view(n)} WHERE interval_id NOT IN (SELECT interval_id FROM intervals)").fetchall()[0][0]
            for n in FACT_TABLES
        )
        spans = " OR ".join(lost_spans) or "false"
        lacking = con.sql(
            f"SELECT interval_id, batch_id FROM intervals WHERE {spans} UNION "
            "SELECT interval_id, batch_id FROM intervals i WHERE (profiler = 'cprofile' AND function_count > 0 AND NOT EXISTS "
            f"(SELECT 1 FROM {raw_view('function_stats')} f WHERE f.interval_id = i.interval_id)) OR (profiler = 'pyinstrument' "
            f"AND NOT is_empty AND NOT EXISTS (SELECT 1 FROM {raw_view('pyinstrument_frames')} p WHERE p.interval_id = i.interval_id))"
        ).fetchall()
        live = live_fingerprints(con)
        stale = sorted(set(live) - fresh_jobs(con)) if all(has_table(store, n) for n in PHASE_TABLES) else sorted(live)
        batch_sources = dict(con.sql("SELECT batch_id, any_value(source) FROM batches WHERE source IS NOT NULL GROUP BY ALL").fetchall())
    finally:
        con.close()
    sources: list[str] = []
    if orphans:
        add(Finding("orphan_facts", f"{orphans} fact row(s) belong to no live interval (invisible to readers); "
                    f"'proflake check --repair {where}' deletes them", fix))
    if lacking:
        add(Finding("interval_without_facts", f"{len(lacking)} live interval(s) lost their facts; 'proflake check --repair "
                    f"{where}' removes them so their files are parsed again", fix))
        if fix:
            ids = sorted(i for i, _ in lacking)
            for start in range(0, len(ids), 500):
                store.delete_where("intervals", "interval_id IN (" + ", ".join(sql_string(i) for i in ids[start:start + 500]) + ")")
            sources = sorted({batch_sources[b] for _, b in lacking if b in batch_sources})
    if fix and (orphans or lacking):
        delete_orphan_facts(store)  # with the other facts of the intervals just removed
    if stale:
        add(Finding("stale_rollups", f"the phase roll-ups of {len(stale)} job(s) ({', '.join(stale[:3])}) are not built from "
                    f"their live intervals; 'proflake check --repair {where}' (or the next ingest) rebuilds them", fix))
    if fix:
        if rebuild_derived:  # rows of a job may be gone while others remain: every job is rebuilt
            for name in DERIVED_TABLES:
                store.delete_where(name, "true")
        refresh_phase_rollups(store, "check-repair")
    return sources


def _spans(store: Store, name: str, uris: set[str]) -> list[str]:
    """A predicate on intervals for each of ``uris`` (files of fact table ``name``): the intervals its rows
    may belong to, from the log's statistics (its batch, node and start times; every interval, without)."""
    import pyarrow as pa

    actions = pa.RecordBatchReader.from_stream(store.delta(name).get_add_actions(flatten=True)).read_all().to_pylist()
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


def _bad_files(store: Store, name: str) -> list[tuple[str, str]]:
    """(uri, what is wrong) of each data file the table's log references that is missing or unreadable:
    on disk, its Parquet footer is read; on S3, one listing per table compares every object's size with
    the log's (a footer read per object would cost a request each)."""
    if store.is_remote:
        return _bad_objects(store, name)
    bad = []
    for uri in store.delta(name).file_uris():
        if not os.path.exists(uri):
            bad.append((uri, "is missing"))
            continue
        try:
            pq.ParquetFile(uri).metadata  # noqa: B018 (reading the footer is the check)
        except Exception as e:  # noqa: BLE001 (any failure to read it is the finding)
            bad.append((uri, f"does not read as Parquet ({type(e).__name__})"))
    return bad


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


def _bad_objects(store: Store, name: str) -> list[tuple[str, str]]:
    from proflake.sources.s3 import S3Source

    table_uri = store.table_uri(name)
    listed = S3Source(table_uri, store.s3).sizes()
    actions = pa.RecordBatchReader.from_stream(store.delta(name).get_add_actions(flatten=True)).read_all()
    bad = []
    for path, size in zip(actions["path"].to_pylist(), actions["size_bytes"].to_pylist()):
        key = unquote(path)
        uri = f"{table_uri}/{key}"
        if key not in listed:
            bad.append((uri, "is missing"))
        elif listed[key] != size:
            bad.append((uri, f"does not read as Parquet (it has {listed[key]:,} bytes, its log says {size:,})"))
    return bad
