"""Give freed memory back to the operating system, so a long-lived process's footprint follows its work."""

from __future__ import annotations

import ctypes

import pyarrow as pa


def release_memory() -> None:
    """Hand freed memory back to the system: Arrow's allocator and the C library's keep freed pages."""
    pa.default_memory_pool().release_unused()
    try:
        ctypes.CDLL(None).malloc_trim(0)  # glibc; other C libraries have no such call, or need none
    except (OSError, AttributeError):
        pass
