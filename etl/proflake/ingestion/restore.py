"""``proflake check --repair``'s second half: the rows damage took out of the store are parsed again from
their sources, or reported as lost; never deleted while they are the last copy.

Two kinds of lost rows, each found from what the store still holds:

* **live intervals whose facts are lost** (a fact table, or a data file of one, lost, truncated or
  rewritten: the intervals its rows may belong to come from the file's log statistics; a whole lost
  table stands for every interval of its profiler). When the interval's file still exists and the
  ``batches`` table names the source its batch ingested, the interval row is removed and that source
  ingested again, which parses the file anew. Otherwise the interval row stays and the loss is reported.
* **fact rows whose interval row is lost** (a data file or the whole folder of ``intervals``). They are
  kept, invisible, while the source their batch recorded is ingested again; once a live interval with
  the same keys (the same file) holds them again, they are deleted as a replaced generation. Those no
  re-parse restored stay on disk and are reported, job by job, as lost from the store's view.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from proflake.formats import FAMILIES
from proflake.ingestion.bookkeeping import FACT_PROFILER, delete_restored_facts, has_table, restored_by_live
from proflake.ingestion.findings import CheckReport, Finding
from proflake.schema import DERIVED_TABLES
from proflake.store.rollups import PHASE_TABLES, fresh_jobs, live_fingerprints, refresh_phase_rollups
from proflake.store.store import FACT_TABLES, Store, raw_view, sql_string

if TYPE_CHECKING:
    import duckdb

# What says an interval of each table family wrote fact rows (a caller graph counts functions, a call tree is empty or not).
HOLDS_ROWS = {
    f.profiler: f"profiler = '{f.profiler}' AND " + ("function_count > 0" if f.counts_calls else "NOT is_empty")
    for f in FAMILIES.values()
}


@dataclass
class Plan:
    """What the first, locked pass decided: the sources to ingest again and what to verify afterwards."""

    sources: list[str] = field(default_factory=list)
    reparsed: dict[str, str] = field(default_factory=dict)  # source_uri -> job_id: interval rows removed to parse again
    findings: dict[str, Finding] = field(default_factory=dict)  # kind -> finding whose repair the second pass confirms
    rebuild_derived: bool = False


def reachable(store: Store, uri: str) -> bool:
    """Whether a source file or folder can be read again (an S3 one is assumed to be: ingest says if not)."""
    return store.is_remote or uri.startswith("s3://") or os.path.exists(uri)


def plan(store: Store, report: CheckReport, lost_spans: list[str], lost_tables: list[str], *, fix: bool,
         con: duckdb.DuckDBPyConnection | None = None, has: Callable[[str], bool] | None = None) -> Plan:
    """Find the fact rows without a live interval and the live intervals without their facts; with ``fix``,
    remove the interval rows whose files can be parsed again and name the sources to ingest. ``con``:
    the store's views to read (check's, over the tables it has open; left open), else ``store.connect()``'s;
    ``has``: whether the store has a table (default ``bookkeeping.has_table``)."""
    where = f"--store {store.location}"
    out = Plan()
    spans = list(lost_spans) + [HOLDS_ROWS[FACT_PROFILER[n]] for n in lost_tables]
    has = has or (lambda name: has_table(store, name))
    own = con is None
    con = store.connect() if con is None else con
    try:
        orphans, orphan_batches = 0, set[str]()
        for n in FACT_TABLES:  # one scan of each table (on S3 each scan reads its objects again)
            count, batches = con.sql(f"SELECT count(*), list(DISTINCT batch_id) FROM {raw_view(n)} "
                                     "WHERE interval_id NOT IN (SELECT interval_id FROM intervals)").fetchall()[0]
            orphans += count
            orphan_batches.update(batches or ())
        lacking = con.sql(
            f"SELECT interval_id, batch_id, source_uri, job_id FROM intervals WHERE {' OR '.join(spans) or 'false'} UNION "
            "SELECT interval_id, batch_id, source_uri, job_id FROM intervals i WHERE (profiler = 'cprofile' AND function_count > 0 "
            f"AND NOT EXISTS (SELECT 1 FROM {raw_view('function_stats')} f WHERE f.interval_id = i.interval_id)) OR (profiler = "
            f"'pyinstrument' AND NOT is_empty AND NOT EXISTS (SELECT 1 FROM {raw_view('pyinstrument_frames')} p WHERE p.interval_id = i.interval_id))"
        ).fetchall()
        batch_sources = dict(con.sql("SELECT batch_id, any_value(source) FROM batches WHERE source IS NOT NULL GROUP BY ALL").fetchall())
        live = live_fingerprints(con)
        stale = sorted(set(live) - fresh_jobs(con)) if all(has(n) for n in PHASE_TABLES) else sorted(live)
    finally:
        if own:
            con.close()
    sources: set[str] = set()
    if orphans:
        out.findings["orphan_facts"] = Finding("orphan_facts", f"{orphans} fact row(s) belong to no live interval (invisible to "
                                               f"readers); 'proflake check --repair {where}' parses their files again from the "
                                               "sources their batches recorded, then deletes them, and names the rows it cannot restore")
        sources |= {batch_sources[b] for b in orphan_batches if b in batch_sources}
    if lacking:
        out.findings["interval_without_facts"] = Finding("interval_without_facts", f"{len(lacking)} live interval(s) lost their "
                                                         f"facts; 'proflake check --repair {where}' parses their files again")
        if fix:
            again = [(i, b, uri, job) for i, b, uri, job in lacking if b in batch_sources and reachable(store, uri)]
            ids = sorted(i for i, *_ in again)
            for start in range(0, len(ids), 500):
                store.delete_where("intervals", "interval_id IN (" + ", ".join(sql_string(i) for i in ids[start:start + 500]) + ")")
            out.reparsed = {uri: job for _, _, uri, job in again}
            sources |= {batch_sources[b] for _, b, *_ in again}
            gone = [(uri, job) for i, b, uri, job in lacking if i not in set(ids)]
            if gone:
                report.findings.append(_lost_files(gone, "their files are gone or their batch's source is not "
                                                   "recorded: the interval rows are kept, without the lost facts"))
    if stale:
        out.findings["stale_rollups"] = Finding("stale_rollups", f"the phase roll-ups of {len(stale)} job(s) ({', '.join(stale[:3])}) are "
                                                f"not built from their live intervals; 'proflake check --repair {where}' (or the next "
                                                "ingest) rebuilds them")
    report.findings.extend(out.findings.values())
    out.sources = sorted(sources)
    return out


def settle(store: Store, report: CheckReport, done: Plan) -> None:
    """The second, locked pass, after the sources were ingested again: delete the facts a live interval
    restored, report what was not restored, rebuild the roll-ups."""
    delete_restored_facts(store)
    con = store.connect()
    try:
        kept = {}
        for name in FACT_TABLES:
            for job, batch, intervals, rows in con.sql(
                f"SELECT job_id, batch_id, count(DISTINCT interval_id), count(*) FROM {raw_view(name)} f WHERE interval_id NOT IN "
                f"(SELECT interval_id FROM intervals) AND NOT {restored_by_live(name)} GROUP BY ALL ORDER BY ALL").fetchall():
                kept[(name, job, batch)] = (intervals, rows)
        live_uris = {u for (u,) in con.sql("SELECT source_uri FROM intervals").fetchall()} if done.reparsed else set()
    finally:
        con.close()
    if "orphan_facts" in done.findings:
        done.findings["orphan_facts"].repaired = not kept
    for (name, job, batch), (intervals, rows) in sorted(kept.items()):
        report.findings.append(Finding("lost_intervals", f"table {name!r}: {rows} row(s) of {intervals} interval(s) of job {job!r} "
                                       f"(batch {batch}) lost their interval rows and no source parsed their files again; the rows "
                                       f"are kept, invisible: make the source reachable and run 'proflake check --repair --store "
                                       f"{store.location}' again"))
    missed = [(uri, job) for uri, job in done.reparsed.items() if uri not in live_uris]
    if "interval_without_facts" in done.findings:
        done.findings["interval_without_facts"].repaired = not missed and not any(
            f.kind == "lost_files" for f in report.findings)
    if missed:
        report.findings.append(_lost_files(missed, "ingesting their source again did not parse them"))
    if "stale_rollups" in done.findings:
        done.findings["stale_rollups"].repaired = True
    if done.rebuild_derived:  # rows of a job may be gone while others remain: every job is rebuilt
        for name in DERIVED_TABLES:
            store.delete_where(name, "true")
    refresh_phase_rollups(store, "check-repair")


def _lost_files(lost: list[tuple[str, str]], why: str) -> Finding:
    jobs = Counter(job for _, job in lost)
    named = ", ".join(f"{job!r}: {n}" for job, n in sorted(jobs.items()))
    return Finding("lost_files", f"{len(lost)} interval(s) lost their facts and cannot be parsed again ({why}); per job: {named}; "
                   f"first: {sorted(uri for uri, _ in lost)[0]}")
