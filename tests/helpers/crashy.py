"""A parse function for worker tests: misbehaves on demand, the ways real decoders can."""

from __future__ import annotations

import os
import signal
import time


def parse(profiler: str, data: bytes):
    if data == b"segfault":
        os.kill(os.getpid(), signal.SIGSEGV)
    if data == b"hang":
        time.sleep(60)
    if data == b"hog":
        return bytearray(4 * 1024 * 1024 * 1024)  # far beyond the worker's memory limit
    if data == b"exit":
        os._exit(3)
    return {"profiler": profiler, "size": len(data)}
