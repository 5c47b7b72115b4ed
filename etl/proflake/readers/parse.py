"""Bytes of one stats file -> what the store keeps of it. Runs inside the parse workers."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa

from proflake.readers.cprofile import read_cprofile
from proflake.readers.pyinstrument import read_pyinstrument


@dataclass(frozen=True)
class ParsedStats:
    summary: dict  # interval columns that come from the contents (function_count, session fields, ...)
    facts: dict[str, pa.Table]  # fact table name -> its own columns (no interval keys yet)
    # fact table name -> integer ids standing for its function-key columns, row by row (equal ids are
    # equal keys): the worker sums a segment's phase roll-up by them instead of by the key text.
    key_ids: dict[str, tuple[np.ndarray, ...]] = field(default_factory=dict)


def parse_stats(profiler: str, data: bytes) -> ParsedStats:
    """Parse one file; raises proflake.errors.ParseError for anything that is not a valid profile."""
    if profiler == "cprofile":
        cprofile = read_cprofile(data)
        return ParsedStats(
            summary={
                "function_count": cprofile.functions.num_rows,
                "profiled_seconds": cprofile.profiled_seconds,
                "is_empty": cprofile.functions.num_rows == 0,
            },
            facts={"function_stats": cprofile.functions, "function_callers": cprofile.callers},
            key_ids={} if cprofile.function_ids is None or cprofile.edge_ids is None else {
                "function_stats": (cprofile.function_ids,), "function_callers": cprofile.edge_ids,
            },
        )
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
        },
        facts={"pyinstrument_frames": session.frames},
    )
