"""The run after a kill, in the test's own process.

The kill tests kill real ingest processes (``python -m proflake.cli ingest``, SIGKILL at a commit point);
the run that repairs after each kill is not what is under test, so it runs in-process: no interpreter of
its own, and the test process's parse workers are kept from one recovery to the next (0.2 s of CPU
per recovery instead of 1.1 s for a new interpreter and its workers, on the 18-file corpus).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from proflake import ingest


@contextmanager
def environment(values: dict[str, str]) -> Iterator[None]:
    """``os.environ`` with ``values`` set, restored after."""
    saved = {name: os.environ.get(name) for name in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def recover(source: Path, store: Path, env: dict[str, str] | None = None) -> None:
    """The next nightly run after a kill, with ``env`` set (e.g. PROFLAKE_FLUSH_ROWS), in this process."""
    with environment(env or {}):
        ingest(str(source), str(store))
