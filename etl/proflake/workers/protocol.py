"""What the parse pool and its worker processes exchange: tasks, where facts go, outcomes, replies."""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from proflake.store.deltawrite import DataFile

DEFAULT_MEMORY_MB = 2048
DEFAULT_TIMEOUT_S = 120.0
CHUNK_FILES = 16
CHUNK_BYTES = 8 * 1024 * 1024
DEFAULT_PARSE = "proflake.readers.parse:parse_stats"
# A worker writes its segment when the parent says a stripe ends (ParsePool: about ``flush_rows``);
# holding this many times more rows, it writes anyway, so a misjudged stripe cannot exhaust memory.
OVERFLOW = 1.5
# A worker that dies this many times writing its segment (not parsing: those files are retried alone)
# points at the store or the machine, not at a file: the run stops.
MAX_WRITE_DEATHS = 3


@dataclass(frozen=True)
class Task:
    key: int  # the caller's handle for the file
    profiler: str  # the file's format for the parser (proflake.formats.task_format: a profiler's name for smdebug's files)
    data: bytes
    interval: tuple | None = None  # its interval-key values (proflake.schema.INTERVAL_KEY_COLUMNS order)
    # A local file the worker reads itself instead of ``data`` (the bytes then never cross a pipe),
    # and its size.
    path: str | None = None
    size: int = 0


@dataclass(frozen=True)
class FactSink:
    """Where workers write fact rows: ``directories`` maps each fact table to the folder its files go
    in (the table's own folder, or a spool folder the parent uploads from); ``prefix`` (the batch id)
    starts every file name; a worker writes segments of about ``flush_rows`` fact rows, with ``options``
    (proflake.store.deltawrite.parquet_options of the store's writer settings); ``background``: on a thread, while
    it parses on (worth it when a core would otherwise idle, at the cost of a second segment in memory)."""

    directories: dict[str, str]
    prefix: str
    flush_rows: int
    options: dict
    background: bool = False


@dataclass(frozen=True)
class Failure:
    kind: str
    message: str


@dataclass(frozen=True)
class ParsedFile:
    summary: dict  # what proflake.readers.parse.ParsedStats.summary holds
    counts: dict[str, int]  # rows this file contributed to each fact table of its chunk


@dataclass
class ChunkResult:
    """Outcomes of parsed files (a ParsedFile, a Failure, or whatever a custom parse function returned)
    and the data files, not yet committed, that hold all their fact rows."""

    outcomes: list[tuple[int, object]]
    files: list[DataFile] = field(default_factory=list)


@dataclass(frozen=True)
class _Reply:
    """A worker's answer to one message: the outcomes of the chunk it parsed, and the segments it
    finished writing since its last answer (*seals*): (n, files) means the files hold the facts of
    every chunk up to its n-th."""

    outcomes: list[tuple[int, object]]
    seals: list[tuple[int, list[DataFile]]] = field(default_factory=list)
    error: str | None = None  # writing a segment failed: the run must stop, not quarantine files


def default_workers() -> int:
    return max(1, min(os.cpu_count() or 1, 8))
