"""Ingest: list a source, parse every new or changed stats file, append the rows to the store as one batch.

Data flows one way: source -> layout -> reader -> Arrow -> store. Facts are flushed in chunks so memory
stays bounded; the batch's intervals are committed last, in one commit, which is the moment the whole
batch becomes visible (see etl/store.py).
"""

from __future__ import annotations

import hashlib
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timezone

import numpy as np
import pyarrow as pa

from etl.errors import LayoutError, ParseError, ProflakeError
from etl.layout import CPROFILE_FILE, PYINSTRUMENT_HTML_FILE, IntervalPath, parse_stats_path
from etl.readers.cprofile import read_cprofile
from etl.readers.pyinstrument import read_pyinstrument
from etl.schema import INTERVAL_KEY_COLUMNS, arrow_schema, table_spec
from etl.sources.base import Source, SourceObject, open_source
from etl.store import FACT_TABLES, Store

# Fact rows held in memory before they are appended; bounds memory however large the corpus.
FLUSH_ROWS = 400_000


@dataclass(frozen=True)
class FailedFile:
    uri: str
    kind: str
    message: str


@dataclass
class IngestReport:
    batch_id: str
    source: str
    store: str
    files_seen: int = 0
    intervals_seen: int = 0
    new_intervals: int = 0
    replaced_intervals: int = 0
    unchanged: int = 0
    unrecognised: list[str] = field(default_factory=list)
    failed: list[FailedFile] = field(default_factory=list)
    rows: dict[str, int] = field(default_factory=dict)
    bytes_read: int = 0
    seconds: float = 0.0

    @property
    def partial(self) -> bool:
        """Some stats files could not be ingested (files that fit no layout do not count)."""
        return bool(self.failed)

    def summary(self) -> str:
        rows = sum(self.rows.values())
        return (
            f"ingested {self.new_intervals} new interval(s) ({self.replaced_intervals} replacing changed files), "
            f"{self.unchanged} unchanged, {len(self.failed)} failed, {len(self.unrecognised)} file(s) fit no layout; "
            f"{rows} rows, {self.bytes_read} bytes read in {self.seconds:.2f} s"
        )

    def to_dict(self) -> dict:
        return {
            "batch_id": self.batch_id,
            "source": self.source,
            "store": self.store,
            "files_seen": self.files_seen,
            "intervals_seen": self.intervals_seen,
            "new_intervals": self.new_intervals,
            "replaced_intervals": self.replaced_intervals,
            "unchanged": self.unchanged,
            "failed": [f.__dict__ for f in self.failed],
            "unrecognised": self.unrecognised,
            "rows": self.rows,
            "bytes_read": self.bytes_read,
            "seconds": round(self.seconds, 3),
        }


@dataclass
class _Candidate:
    """One interval found in the listing: a cProfile file, or a pyinstrument json with its html."""

    path: IntervalPath
    stats: SourceObject | None = None
    html: SourceObject | None = None


def new_batch_id(now: datetime) -> str:
    return f"{now:%Y%m%dT%H%M%S%f}Z-{secrets.token_hex(3)}"


def interval_id(obj: SourceObject) -> str:
    return hashlib.blake2b(f"{obj.uri}\x00{obj.size}\x00{obj.version}".encode(), digest_size=10).hexdigest()


def job_id_for(base: tuple[str, ...], source_root: tuple[str, ...]) -> str:
    """The folder above framework/, named relative to the source when the source holds several jobs."""
    if len(base) > len(source_root) and base[: len(source_root)] == source_root:
        return "/".join(base[len(source_root) :])
    return base[-1] if base and base[-1] not in ("/", "") else "default"


def ingest(
    source: str | Source,
    store: Store | str | None = None,
    *,
    job_id: str | None = None,
    log: Callable[[str], None] | None = None,
) -> IngestReport:
    """Ingest every new or changed stats file under ``source`` into ``store``; never raises for a bad file."""
    started = time.perf_counter()
    src = open_source(source) if isinstance(source, str) else source
    st = store if isinstance(store, Store) else Store(store)
    now = datetime.now(timezone.utc)
    report = IngestReport(batch_id=new_batch_id(now), source=src.uri, store=st.location)
    say = log or (lambda message: None)

    candidates = _discover(src, report)
    st.create()
    known = st.ingested_versions()
    writer = _BatchWriter(st, report.batch_id)
    replaced: list[str] = []
    for candidate in candidates:
        if candidate.stats is None:
            report.unrecognised.append(candidate.html.uri)  # type: ignore[union-attr]
            continue
        obj = candidate.stats
        previous = known.get(obj.uri)
        if previous is not None and previous[1:] == (obj.size, obj.version):
            report.unchanged += 1
            continue
        try:
            data = src.read(obj)
            report.bytes_read += len(data)
            row, facts = _parse(candidate, data, src, job_id, report.batch_id, now)
        except ParseError as e:
            report.failed.append(FailedFile(obj.uri, e.kind, str(e)))
            say(f"failed: {obj.uri}: {e}")
            continue
        except ProflakeError as e:
            report.failed.append(FailedFile(obj.uri, "read", str(e)))
            say(f"failed: {obj.uri}: {e}")
            continue
        writer.add(row, facts)
        if previous is not None:
            replaced.append(previous[0])
    writer.commit()
    if replaced:
        st.delete_intervals(replaced)
    report.new_intervals = writer.interval_count
    report.replaced_intervals = len(replaced)
    report.rows = writer.rows
    report.seconds = time.perf_counter() - started
    return report


def _discover(src: Source, report: IngestReport) -> list[_Candidate]:
    by_interval: dict[tuple[str, ...], _Candidate] = {}
    for obj in src.list():
        report.files_seen += 1
        try:
            path = parse_stats_path(obj.parts)
        except LayoutError as e:
            report.failed.append(FailedFile(obj.uri, e.kind, str(e)))
            continue
        if path is None:
            report.unrecognised.append(obj.uri)
            continue
        key = path.interval_dir + (("cprofile",) if path.file_name == CPROFILE_FILE else ("pyinstrument",))
        candidate = by_interval.setdefault(key, _Candidate(path))
        if path.file_name == PYINSTRUMENT_HTML_FILE:
            candidate.html = obj
        else:
            candidate.stats = obj
            candidate.path = path
    report.intervals_seen = sum(1 for c in by_interval.values() if c.stats is not None)
    return sorted(by_interval.values(), key=lambda c: (c.path.node_id, c.path.start_time_us))


def _timestamp(us: float) -> datetime:
    return datetime.fromtimestamp(round(us) / 1e6, tz=timezone.utc)


def _parse(
    candidate: _Candidate,
    data: bytes,
    src: Source,
    job_override: str | None,
    batch_id: str,
    now: datetime,
) -> tuple[dict, dict[str, pa.Table]]:
    path, obj = candidate.path, candidate.stats
    assert obj is not None
    row: dict = {
        "interval_id": interval_id(obj),
        "batch_id": batch_id,
        "job_id": job_override or job_id_for(path.base, src.root_parts),
        "framework": path.framework,
        "node_id": path.node_id,
        "start_mode": path.start_mode,
        "start_step": path.start_step,
        "start_phase": path.start_phase,
        "start_time_us": path.start_time_us,
        "start_time": _timestamp(path.start_time_us),
        "end_mode": path.end_mode,
        "end_step": path.end_step,
        "end_phase": path.end_phase,
        "end_time_us": path.end_time_us,
        "end_time": _timestamp(path.end_time_us),
        "job_phase": path.job_phase,
        "profiler": path.profiler,
        "layout": path.layout,
        "duration_s": (path.end_time_us - path.start_time_us) / 1e6,
        "source_uri": obj.uri,
        "html_uri": candidate.html.uri if candidate.html else None,
        "source_size": obj.size,
        "source_version": obj.version,
        "ingested_at": now,
    }
    if path.profiler == "cprofile":
        cprofile = read_cprofile(data)
        facts = {"function_stats": cprofile.functions, "function_callers": cprofile.callers}
        row.update(
            function_count=cprofile.functions.num_rows,
            profiled_seconds=cprofile.profiled_seconds,
            is_empty=cprofile.functions.num_rows == 0,
        )
    else:
        session = read_pyinstrument(data)
        facts = {"pyinstrument_frames": session.frames}
        row.update(
            function_count=session.frames.num_rows,
            profiled_seconds=session.profiled_seconds,
            is_empty=session.is_empty,
            session_start_time=session.start_time,
            session_duration_s=session.duration,
            session_sample_count=session.sample_count,
            session_cpu_time_s=session.cpu_time,
            session_target=session.target,
        )
    return row, facts


class _BatchWriter:
    """Buffers parsed intervals; appends facts in bounded chunks and all intervals in one final commit."""

    def __init__(self, store: Store, batch_id: str) -> None:
        self.store = store
        self.batch_id = batch_id
        self.intervals: list[dict] = []
        self.pending: dict[str, list[tuple[int, pa.Table]]] = {name: [] for name in FACT_TABLES}
        self.pending_rows = 0
        self.rows: dict[str, int] = {name: 0 for name in ("intervals", *FACT_TABLES)}
        self._key_schema = arrow_schema("interval_keys")

    @property
    def interval_count(self) -> int:
        return len(self.intervals)

    def add(self, row: dict, facts: dict[str, pa.Table]) -> None:
        index = len(self.intervals)
        self.intervals.append(row)
        for name, table in facts.items():
            if table.num_rows:
                self.pending[name].append((index, table))
                self.pending_rows += table.num_rows
        if self.pending_rows >= FLUSH_ROWS:
            self.flush()

    def flush(self) -> None:
        for name, parts in self.pending.items():
            if parts:
                table = self._with_interval_keys(name, parts)
                self.store.append(name, table, self.batch_id)
                self.rows[name] += table.num_rows
            parts.clear()
        self.pending_rows = 0

    def commit(self) -> None:
        self.flush()
        if self.intervals:
            table = pa.Table.from_pylist(self.intervals, schema=arrow_schema("intervals"))
            self.store.append("intervals", table, self.batch_id)
            self.rows["intervals"] = table.num_rows

    def _with_interval_keys(self, name: str, parts: list[tuple[int, pa.Table]]) -> pa.Table:
        facts = pa.concat_tables([table for _, table in parts])
        owners = [index for index, _ in parts]
        keys = pa.Table.from_pylist(
            [{k: self.intervals[i][k] for k in INTERVAL_KEY_COLUMNS} for i in owners], schema=self._key_schema
        )
        repeat = pa.array(np.repeat(np.arange(len(owners), dtype=np.int64), [t.num_rows for _, t in parts]))
        keys = keys.take(repeat)
        columns = {c: keys[c] for c in INTERVAL_KEY_COLUMNS}
        columns.update({c: facts[c] for c in facts.column_names})
        return pa.table(columns).select(table_spec(name).column_names)
