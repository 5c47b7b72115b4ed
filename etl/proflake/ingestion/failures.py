"""How an ingest run that fails is reported: by its cause (a lost lock, a full disk), and in ``batches``;
and the one listing failure that stops a run although it stops no incremental one."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from concurrent.futures import Future
from concurrent.futures import wait as futures_wait
from datetime import datetime, timezone

from proflake.errors import LockLostError, SourceError, StoreError
from proflake.ingestion.bookkeeping import record_event
from proflake.ingestion.report import IngestReport
from proflake.store.lock import StoreLock
from proflake.store.store import Store


@contextlib.contextmanager
def blamed_on_the_cause(lock: StoreLock, store: Store) -> Iterator[None]:
    """A failure is reported by its cause: after this run lost its lock (a paused run whose spool the
    next holder cleared), the lost lock; on a local store whose disk is full, the full disk (deltalake
    says only "Generic LocalFileSystem error"); else the error itself."""
    try:
        yield
    except Exception as e:
        lost = None if isinstance(e, LockLostError) else lock.lost_error()
        if lost is not None:
            raise lost from e
        free = _free_bytes(store)
        if free is not None and free < DISK_FULL_BYTES and not isinstance(e, LockLostError):
            raise StoreError(
                f"the disk holding the store at {store.location!r} is full ({free:,} bytes free); free space "
                "(or move the store) and run the command again: the next run repairs this one"
            ) from e
        raise


DISK_FULL_BYTES = 1 << 20


def _free_bytes(store: Store) -> int | None:
    if store.is_remote:
        return None
    try:
        st = os.statvfs(store.root)
    except OSError:
        return None
    return st.f_bavail * st.f_frsize


def record_stop(store: Store, report: IngestReport, started: Future, error: BaseException, lock: StoreLock) -> None:
    """A run stopped by an error ('failed') or a signal ('interrupted') after it recorded its start says
    so in ``batches``, while it still holds the lock; the next run repairs it as before. Best effort:
    the error may be the store's own (a full disk), and a run that lost its lock writes nothing."""
    with contextlib.suppress(BaseException):
        futures_wait([started])
        if isinstance(error, LockLostError) or lock.lost_error() is not None:
            return
        event = "interrupted" if isinstance(error, KeyboardInterrupt) else "failed"
        record_event(store, report, event, datetime.now(timezone.utc))


def unlisted_in_full_refresh(message: str) -> SourceError:
    """A folder a full refresh (or rebuild) could not list (``message``: the quarantine's sentence): its
    commit drops every interval under the source that it did not list again, so it would delete what
    that folder held. It stops before it changes anything; an incremental run quarantines the folder."""
    return SourceError(f"{message}; a full refresh would drop what was ingested from it, so it changed nothing: "
                       "fix the folder, or ingest without --full-refresh to land the rest")
