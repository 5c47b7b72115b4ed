"""Graceful termination for the commands that write the store (ingest, compact).

cron, Airflow and Kubernetes stop a job with SIGTERM (then SIGKILL after a grace period); a closed
terminal sends SIGHUP. Both are turned into ``Terminated`` raised in the main thread, which unwinds the
run exactly as Ctrl-C does: the running step stops, a commit either completed or left nothing visible
(a batch becomes visible in one Delta commit), the writer lock is released, the spool is cleared and the
parse workers are stopped. The command then prints one line and exits 143 (SIGTERM) or 129 (SIGHUP).
A second signal while that cleanup runs exits at once, with the same code.
"""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Iterator
from contextlib import contextmanager

from proflake.errors import Terminated

SIGNALS = ("SIGTERM", "SIGHUP")


@contextmanager
def graceful_termination() -> Iterator[None]:
    """Within the block, SIGTERM and SIGHUP raise ``Terminated``; a second one exits at once."""
    fired: list[int] = []

    def handler(signum: int, _frame: object) -> None:
        name = signal.Signals(signum).name
        if fired:
            sys.stderr.write(f"proflake: {name} again: exiting now\n")
            sys.stderr.flush()
            os._exit(128 + signum)
        fired.append(signum)
        raise Terminated(signum, name)

    previous = {}
    for name in SIGNALS:
        number = getattr(signal, name, None)
        if number is not None:
            previous[number] = signal.signal(number, handler)
    try:
        yield
    finally:
        for number, old in previous.items():
            signal.signal(number, old)
