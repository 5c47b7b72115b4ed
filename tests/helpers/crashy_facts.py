"""A parse function for worker tests that yields fact rows, and kills its worker on demand."""

from __future__ import annotations

import os
import signal

import pyarrow as pa
from proflake.readers.parse import ParsedStats

ROWS_PER_FILE = 7


def parse(profiler: str, data: bytes) -> ParsedStats:
    if data == b"segfault":
        os.kill(os.getpid(), signal.SIGSEGV)
    n = int(data)
    frames = pa.table(
        {
            "frame_id": pa.array(range(ROWS_PER_FILE), pa.int64()),
            "parent_id": pa.array([None, *range(ROWS_PER_FILE - 1)], pa.int64()),
            "depth": pa.array(range(ROWS_PER_FILE), pa.int64()),
            "function": pa.array([f"f{n}.py:{i}(g)" for i in range(ROWS_PER_FILE)]),
            "function_name": pa.array(["g"] * ROWS_PER_FILE),
            "filename": pa.array([f"f{n}.py"] * ROWS_PER_FILE),
            "file_path_short": pa.array([None] * ROWS_PER_FILE, pa.string()),
            "lineno": pa.array(range(ROWS_PER_FILE), pa.int64()),
            "class_name": pa.array([None] * ROWS_PER_FILE, pa.string()),
            "time": pa.array([float(n)] * ROWS_PER_FILE),
            "self_time": pa.array([0.5] * ROWS_PER_FILE),
            "await_time": pa.array([0.0] * ROWS_PER_FILE),
            "is_application_code": pa.array([True] * ROWS_PER_FILE),
            "is_outermost": pa.array([True] * ROWS_PER_FILE),
            "path_id": pa.array(range(ROWS_PER_FILE), pa.int64()),
            "parent_path_id": pa.array([None, *range(ROWS_PER_FILE - 1)], pa.int64()),
        }
    )
    return ParsedStats(summary={"n": n}, facts={"pyinstrument_frames": frames})
