"""One call on a thread of its own, its outcome a Future: for work a batch starts and waits for later.

Not a ThreadPoolExecutor: its worker waits for more work until it is told to stop, and a signal
(``Terminated``, KeyboardInterrupt) raised in the caller while ``submit`` started that worker, before
the executor knew of it, left a worker nobody would ever tell: the interpreter then waited for it at
exit, forever (an ingest stopped by SIGTERM as parsing began, seen in tests/test_signals.py). This
thread ends when its one call does, however the caller unwinds.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any


def in_background(name: str, call: Callable[..., Any], *args: Any) -> Future:
    """Start ``call(*args)`` on a new non-daemon thread named ``name`` (the process waits for it at exit,
    as for a record half-written) and return the Future of its result or exception."""
    future: Future = Future()

    def run() -> None:
        if not future.set_running_or_notify_cancel():
            return
        try:
            result = call(*args)
        except BaseException as error:  # noqa: BLE001 - handed to whoever waits on the future
            future.set_exception(error)
        else:
            future.set_result(result)

    threading.Thread(target=run, name=name, daemon=False).start()
    return future
