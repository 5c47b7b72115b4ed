"""proflake's own parse function, except that a file whose bytes are exactly ``segfault`` kills its worker
with SIGSEGV, as a decoder bug would (tests of crash isolation inside a real ingest)."""

from __future__ import annotations

import os
import signal

from proflake.readers.parse import parse_stats


def parse(profiler: str, data: bytes):
    if data == b"segfault":
        os.kill(os.getpid(), signal.SIGSEGV)
    return parse_stats(profiler, data)
