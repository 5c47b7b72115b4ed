"""Bytes of one stats file -> what the store keeps of it. Runs inside the parse workers.

``parse_stats(task_format, data)`` looks the format up in the registry (proflake.formats) and calls its
reader; every reader returns a ParsedStats whose facts are its shape's tables.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa

from proflake.errors import ParseError, UnknownNameError
from proflake.formats import FORMATS, Format, parse_task_format
from proflake.readers.cprofile import read_cprofile
from proflake.readers.pyinstrument import read_pyinstrument
from proflake.readers.stacktree import StackTree

SECONDS = "seconds"
SAMPLES = "samples"


@dataclass(frozen=True)
class ParsedStats:
    summary: dict  # interval columns that come from the contents (function_count, session fields, ...)
    facts: dict[str, pa.Table]  # fact table name -> its own columns (no interval keys yet)
    # fact table name -> integer ids standing for its function-key columns, row by row (equal ids are
    # equal keys): the worker sums a segment's phase roll-up by them instead of by the key text.
    key_ids: dict[str, tuple[np.ndarray, ...]] = field(default_factory=dict)


Reader = Callable[[bytes, Format, "float | None"], ParsedStats]
_READERS: dict[str, Reader] = {}


def parse_stats(task_format: str, data: bytes) -> ParsedStats:
    """Parse one file of the format ``task_format`` names (proflake.formats.task_format: a format, or
    ``name@HZ`` with the sample rate given on the command line); raises proflake.errors.ParseError for
    anything that is not a valid profile of that format."""
    if task_format == "unknown":  # proflake.sources.plain.UNKNOWN: a file no format claims
        raise ParseError("unknown_format", "its contents are none of the formats proflake reads "
                         f"({', '.join(FORMATS)}); pass --format NAME if it is one of them (docs/formats.md)")
    try:
        fmt, rate = parse_task_format(task_format)
    except (UnknownNameError, ValueError) as e:
        raise ParseError("format", f"no reader for format {task_format!r}: {e}") from e
    reader = _READERS.get(fmt.read)
    if reader is None:
        module, _, function = fmt.read.partition(":")
        reader = _READERS[fmt.read] = getattr(importlib.import_module(module), function)
    return reader(data, fmt, rate)


def read_cprofile_stats(data: bytes, fmt: Format, rate: float | None) -> ParsedStats:
    cprofile = read_cprofile(data)
    return ParsedStats(
        summary={
            "function_count": cprofile.functions.num_rows,
            "profiled_seconds": cprofile.profiled_seconds,
            "is_empty": cprofile.functions.num_rows == 0,
            **units(fmt, SECONDS, None),
        },
        facts={"function_stats": cprofile.functions, "function_callers": cprofile.callers},
        key_ids={} if cprofile.function_ids is None or cprofile.edge_ids is None else {
            "function_stats": (cprofile.function_ids,), "function_callers": cprofile.edge_ids,
        },
    )


def read_pyinstrument_json(data: bytes, fmt: Format, rate: float | None) -> ParsedStats:
    session = read_pyinstrument(data)
    return ParsedStats(
        summary={
            "function_count": session.frames.num_rows,
            "profiled_seconds": session.profiled_seconds,
            "is_empty": session.is_empty,
            "session_start_time": session.start_time,
            "session_duration_s": session.duration,
            "session_sample_count": session.sample_count,
            "session_cpu_time_s": session.cpu_time,
            "session_target": session.target,
            **units(fmt, SECONDS, None),
        },
        facts={"pyinstrument_frames": session.frames},
    )


def units(fmt: Format, time_unit: str, sample_rate_hz: float | None) -> dict:
    """The interval columns that say what a file's times are: its format, unit and sample rate."""
    return {"source_format": fmt.name, "time_unit": time_unit, "sample_rate_hz": sample_rate_hz}


def tree_stats(
    tree: StackTree, fmt: Format, time_unit: str, sample_rate_hz: float | None, *,
    duration: float | None = None, start_time: float | None = None, target: str | None = None,
    cpu_time: float | None = None,
) -> ParsedStats:
    """The ParsedStats of a call tree built from stacks (proflake.readers.stacktree)."""
    return ParsedStats(
        summary={
            "function_count": tree.frames.num_rows,
            "profiled_seconds": tree.total,
            "is_empty": tree.frames.num_rows == 0,
            "session_start_time": start_time,
            "session_duration_s": duration,
            "session_sample_count": tree.samples,
            "session_cpu_time_s": cpu_time,
            "session_target": target,
            **units(fmt, time_unit, sample_rate_hz),
        },
        facts={"pyinstrument_frames": tree.frames},
    )
