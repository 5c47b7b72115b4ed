"""Crash testing: the points between Delta commits where a test stops a real run (every commit of the
store counts one: etl/proflake/store/store.py and the commits made outside it call ``crash_points.committed()``)."""

from __future__ import annotations

import os
import signal


class _CrashPoints:
    """Crash testing: with PROFLAKE_KILL_AFTER_COMMITS=N the process SIGKILLs itself right after its
    N-th Delta commit, so tests can stop a real run between any two commits, deterministically
    (PROFLAKE_SIGNAL_AFTER_COMMITS: the same with SIGTERM or SIGHUP, for graceful termination;
    PROFLAKE_FILL_DISK_AFTER_COMMITS: a full disk at the next commit)."""

    def __init__(self) -> None:
        self.commits = 0

    def committed(self) -> None:
        self.commits += 1
        limit = os.environ.get("PROFLAKE_KILL_AFTER_COMMITS")
        if limit and self.commits >= int(limit):
            os.kill(os.getpid(), signal.SIGKILL)
        # PROFLAKE_SIGNAL_AFTER_COMMITS=N[:SIGHUP] sends SIGTERM (or the named signal) once, after the
        # N-th commit: graceful termination tested between any two commits.
        point, _, name = os.environ.get("PROFLAKE_SIGNAL_AFTER_COMMITS", "").partition(":")
        if point and self.commits == int(point):
            os.kill(os.getpid(), getattr(signal, name or "SIGTERM"))
        # PROFLAKE_FILL_DISK_AFTER_COMMITS=N:FILE fills the file system of FILE after the N-th commit,
        # so the next write, the next commit's, meets a full disk.
        point, _, filler = os.environ.get("PROFLAKE_FILL_DISK_AFTER_COMMITS", "").partition(":")
        if point and self.commits == int(point):
            _fill_disk(filler)


def _fill_disk(path: str) -> None:
    chunk = b"\0" * (1 << 20)
    with open(path, "wb", buffering=0) as f:
        for size in (1 << 20, 1 << 12, 1):
            try:
                while True:
                    f.write(chunk[:size])
            except OSError:
                continue  # full at this size: smaller writes take what is left


crash_points = _CrashPoints()
