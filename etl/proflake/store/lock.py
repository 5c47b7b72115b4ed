"""One writer at a time per store, on local disk and on S3: a fenced lease lock.

The lock is a small JSON object (``_proflake/writer.lock`` in the store) naming its holder (host, pid,
a random token, its lease). Every change to it is an atomic conditional operation:

* on S3, conditional requests: take it with ``PutObject If-None-Match: *``; break a stale one, renew
  one's own, or release it only ``If-Match`` the ETag last seen (``PutObject`` / ``DeleteObject``);
* on disk, the same compare-and-swap made atomic by an ``flock`` on ``writer.lock.mutex`` beside it,
  held for each short operation (the kernel drops it if the process dies).

Leases never compare two machines' clocks: a lock is stale when the store's own clock says it was not
rewritten for its lease (S3's ``Last-Modified`` against the ``Date`` of the same answer; the file's
mtime on disk), or when the contender itself watched it stay unchanged for the lease, or (same host)
when its holder's process is gone. The holder renews every lease/3; a renewal that finds another
token, or no renewal for 2/3 of the lease, marks the lock lost.

Fencing: every commit of a holder runs inside ``StoreLock.fence()`` (Store calls it), which first
checks that this holder still holds the lock (and renews it); a holder that lost it raises
LockLostError before committing. On disk the check and the commit happen under the mutex, so no
contender can break the lock in between; on S3 the check is a conditional renewal just before the
commit, and only a pause longer than a whole lease between the two could interleave (the remaining
window, stated in docs/data-safety.md).
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timezone

from proflake.errors import LockLostError, StoreLockedError
from proflake.store.lock_backends import LOCK_NAME, Seen, _hooks, _LocalBackend, _pause, _S3Backend

__all__ = ["LEASE_SECONDS", "LOCK_NAME", "LockInfo", "StoreLock", "lock_holder"]

LEASE_SECONDS = 180.0


@dataclass(frozen=True)
class LockInfo:
    host: str
    pid: int
    token: str
    acquired: float
    expires: float  # the holder's own estimate, for people reading the file; staleness never uses it
    purpose: str
    lease: float = LEASE_SECONDS
    renewals: int = 0

    @classmethod
    def parse(cls, data: bytes) -> LockInfo | None:
        try:
            d = json.loads(data)
            acquired, expires = float(d["acquired"]), float(d["expires"])
            lease = float(d.get("lease", expires - acquired))
            return cls(str(d["host"]), int(d["pid"]), str(d["token"]), acquired, expires, str(d.get("purpose", "")),
                       lease, int(d.get("renewals", 0)))
        except (ValueError, KeyError, TypeError):
            return None  # a torn or foreign file: treated as stale

    def dumps(self) -> bytes:
        return json.dumps(self.__dict__).encode()


def _process_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie (killed, not yet reaped by its parent) holds nothing: it will never release the lock.
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as f:
            return f.read().split(") ", 1)[1][:1] != "Z"
    except (OSError, IndexError):
        return True


def _utc(moment: datetime) -> str:
    return moment.astimezone(timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")


class StoreLock:
    """``with StoreLock(store, wait=60): ...`` — raises StoreLockedError if another live run holds it."""

    def __init__(self, store, *, wait: float = 0.0, purpose: str = "ingest", lease: float | None = None) -> None:
        self.store = store
        self.wait = wait
        self.purpose = purpose
        self.lease = lease if lease is not None else float(os.environ.get("PROFLAKE_LOCK_LEASE_S") or LEASE_SECONDS)
        self.backend = _S3Backend(store.root, store.s3.client()) if store.is_remote else _LocalBackend(store.root)
        self.info: LockInfo | None = None
        self._tag: str | None = None  # our lock's tag as we last wrote it
        self._renewed = 0.0  # time.monotonic() of our last successful write
        self.lost: str | None = None  # why we no longer hold it
        self._guard = threading.RLock()  # one of fence() and the renewer at a time
        self._inside = threading.local()  # a fence within a fence (one commit calling another) is one
        self._stop = threading.Event()
        self._renewer: threading.Thread | None = None

    def _new_info(self) -> LockInfo:
        now = time.time()
        return LockInfo(socket.gethostname(), os.getpid(), secrets.token_hex(8), now, now + self.lease, self.purpose, self.lease)

    def acquire(self) -> None:
        deadline = time.monotonic() + self.wait
        watched: dict[str, float] = {}  # tag -> when we first saw it (our own clock)
        while True:
            info = self._new_info()
            try:
                tag = self.backend.create(info.dumps())
                if tag is not None:
                    self._hold(info, tag)
                    return
            except BaseException:
                # A signal (Terminated) or an error while the lock was being taken: the create may have
                # been applied, so remove the lock if it holds our token.
                self._remove_if_ours(info)
                raise
            seen = self.backend.read()
            if seen is None:
                continue  # released between our attempt and the read: try again at once
            watched.setdefault(seen.tag, time.monotonic())
            holder = LockInfo.parse(seen.data)
            if self._is_stale(seen, holder, time.monotonic() - watched[seen.tag]):
                _pause("break")  # between judging it stale and taking it over
                tag = self.backend.swap(seen.tag, info.dumps())  # only the lock we judged stale
                if tag is not None:
                    self._hold(info, tag)
                    return
                continue
            if time.monotonic() >= deadline:
                raise StoreLockedError(self._busy_message(seen, holder))
            time.sleep(min(1.0, max(0.05, deadline - time.monotonic())))

    def _remove_if_ours(self, info: LockInfo) -> None:
        with contextlib.suppress(Exception):
            seen = self.backend.read()
            if seen is not None and seen.data == info.dumps():
                self.backend.swap(seen.tag, None)

    def _is_stale(self, seen: Seen, holder: LockInfo | None, watched_for: float) -> bool:
        if holder is None:
            return True
        if holder.host == socket.gethostname() and not _process_alive(holder.pid):
            return True
        if seen.age is not None and seen.age > holder.lease:
            return True
        return watched_for > holder.lease

    def _busy_message(self, seen: Seen, holder: LockInfo | None) -> str:
        lease = holder.lease if holder else self.lease
        ends = ""
        if seen.modified is not None:
            from datetime import timedelta

            ends = f", lease ends {_utc(seen.modified + timedelta(seconds=lease))} unless renewed"
        who = f"{holder.purpose or 'another run'} (pid {holder.pid} on {holder.host}{ends})" if holder else "another run"
        return f"the store at {self.store.location!r} is in use by {who}; wait for it, or pass --wait SECONDS"

    def _hold(self, info: LockInfo, tag: str) -> None:
        """Hold the lock just written as ``info``, whose tag the conditional write answered (not read back:
        a lock replaced since is found by the next renewal, which every commit's fence makes first)."""
        self.info, self._tag, self._renewed, self.lost = info, tag, time.monotonic(), None
        self.store.fence = self.fence
        self._stop.clear()
        self._renewer = threading.Thread(target=self._renew_loop, name="proflake-lock-renewer", daemon=True)
        self._renewer.start()

    def _renew_loop(self) -> None:
        while not self._stop.wait(self.lease / 3):
            with self._guard:
                self._renew()

    def _renew(self) -> None:
        """Rewrite our lock if it is still ours; mark it lost if not, or if renewals fail too long."""
        if self.info is None or self._tag is None or self.lost:
            return
        _pause("renew")
        info = LockInfo(**{**self.info.__dict__, "expires": time.time() + self.lease, "renewals": self.info.renewals + 1})
        try:
            if "fail:renew" in _hooks():
                # As if renewals had failed for the whole window: the outcome must not depend on how
                # fast the machine reaches its first commit (a fast run committed before 2/3 of the lease).
                self._renewed = time.monotonic() - self.lease
                raise OSError("test hook: renewal failed")
            tag = self.backend.swap(self._tag, info.dumps())  # only if it is still the lock we last wrote
            if tag is not None:
                self.info, self._tag, self._renewed = info, tag, time.monotonic()
                return
            self.lost = "another run took the lock over"
        except Exception as e:  # noqa: BLE001 (a failed renewal only shortens the lease, until it ends)
            if time.monotonic() - self._renewed > self.lease * 2 / 3:
                self.lost = f"it could not be renewed for {self.lease * 2 / 3:.0f} s ({e})"

    @contextlib.contextmanager
    def fence(self) -> Iterator[None]:
        """Around each commit: check (by renewing) that we hold the lock, then commit; raise
        LockLostError before committing if not. On disk the commit runs under the mutex."""
        if getattr(self._inside, "depth", 0):
            yield
            return
        with self._guard:
            self._renew()
            if self.lost is None and isinstance(self.backend, _LocalBackend):
                _pause("commit")  # between the check and the commit
            with self.backend.atomically():
                if self.lost is None and isinstance(self.backend, _LocalBackend):
                    seen = self.backend.read()
                    if seen is None or seen.tag != self._tag:
                        self.lost = "another run took the lock over"
                if self.lost is not None:
                    raise self._lost_error()
                if not isinstance(self.backend, _LocalBackend):
                    _pause("commit")
                self._inside.depth = 1
                try:
                    yield
                finally:
                    self._inside.depth = 0

    def _lost_error(self) -> LockLostError:
        return LockLostError(
            f"this run lost the writer lock of the store at {self.store.location!r}: {self.lost}; "
            "it stopped before its next commit (the store is consistent); run it again"
        )

    def lost_error(self) -> LockLostError | None:
        """After a failure: LockLostError if the lock is no longer ours (the failure then came from the
        next holder cleaning up after us, e.g. clearing our spool), else None. Reads the lock without
        waiting for a renewal in progress."""
        if self.lost is None and self.info is not None:
            with contextlib.suppress(Exception):
                seen = self.backend.read()
                holder = LockInfo.parse(seen.data) if seen is not None else None
                if holder is None or holder.token != self.info.token:
                    self.lost = "another run took the lock over"
        return self._lost_error() if self.lost is not None else None

    def release(self) -> None:
        self._stop.set()
        if self._renewer is not None:
            self._renewer.join(timeout=5)
        with self._guard:
            if getattr(self.store, "fence", None) == self.fence:
                self.store.fence = None
            if self.info is not None and self._tag is not None and not self.lost:
                with contextlib.suppress(Exception):
                    self.backend.swap(self._tag, None)  # only if it is still ours
            self.info = None

    def __enter__(self) -> StoreLock:
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


def lock_holder(store) -> LockInfo | None:
    """Who holds the store's writer lock now (None: no run writes to it), read without taking it."""
    seen = StoreLock(store).backend.read()
    return LockInfo.parse(seen.data) if seen is not None else None
