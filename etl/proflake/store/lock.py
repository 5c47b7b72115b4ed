"""One writer at a time per store, on local disk and on S3.

The lock is a small JSON object (``_proflake/writer.lock`` in the store) created only if absent:
``O_CREAT | O_EXCL`` on disk, a conditional ``PutObject`` (``If-None-Match: *``) on S3. It names its
holder (host, pid, a random token) and carries a lease that a background thread renews. A lock whose
holder is gone must not block the next run: on the same host a holder whose process no longer exists
is broken at once; from anywhere, a lease not renewed for LEASE_SECONDS expires.
"""

from __future__ import annotations

import json
import os
import secrets
import socket
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from proflake.errors import StoreLockedError

LEASE_SECONDS = 180.0
LOCK_NAME = "_proflake/writer.lock"


@dataclass(frozen=True)
class LockInfo:
    host: str
    pid: int
    token: str
    acquired: float
    expires: float
    purpose: str

    @classmethod
    def parse(cls, data: bytes) -> LockInfo | None:
        try:
            d = json.loads(data)
            return cls(str(d["host"]), int(d["pid"]), str(d["token"]), float(d["acquired"]), float(d["expires"]), str(d.get("purpose", "")))
        except (ValueError, KeyError, TypeError):
            return None  # a torn or foreign file: treated as expired

    def dumps(self) -> bytes:
        return json.dumps(self.__dict__).encode()

    def is_stale(self, now: float) -> bool:
        if self.expires < now:
            return True
        if self.host == socket.gethostname():
            return not _process_alive(self.pid)
        return False


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


class _LocalBackend:
    def __init__(self, root: str) -> None:
        self.path = Path(root) / LOCK_NAME

    def create(self, data: bytes) -> bool:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        try:
            fd = os.open(self.path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        except FileExistsError:
            return False
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        return True

    def read(self) -> bytes | None:
        try:
            return self.path.read_bytes()
        except FileNotFoundError:
            return None

    def replace(self, data: bytes) -> None:
        tmp = self.path.with_suffix(f".{secrets.token_hex(4)}.tmp")
        tmp.write_bytes(data)
        os.replace(tmp, self.path)

    def remove(self) -> None:
        try:
            self.path.unlink()
        except FileNotFoundError:
            pass


class _S3Backend:
    def __init__(self, root: str, client) -> None:
        from proflake.sources.settings import split_s3_uri

        self.bucket, prefix = split_s3_uri(root)
        self.key = f"{prefix}/{LOCK_NAME}" if prefix else LOCK_NAME
        self.client = client

    def create(self, data: bytes) -> bool:
        from proflake.sources.settings import client_error_code, explain_client_error

        try:
            self.client.put_object(Bucket=self.bucket, Key=self.key, Body=data, IfNoneMatch="*")
            return True
        except Exception as e:  # botocore.exceptions.ClientError
            if client_error_code(e) in ("PreconditionFailed", "ConditionalRequestConflict"):
                return False
            raise explain_client_error(e, f"the store lock s3://{self.bucket}/{self.key}") from e

    def read(self) -> bytes | None:
        from proflake.sources.settings import client_error_code, explain_client_error

        try:
            return self.client.get_object(Bucket=self.bucket, Key=self.key)["Body"].read()
        except Exception as e:
            if client_error_code(e) in ("NoSuchKey", "404"):
                return None
            raise explain_client_error(e, f"the store lock s3://{self.bucket}/{self.key}") from e

    def replace(self, data: bytes) -> None:
        self.client.put_object(Bucket=self.bucket, Key=self.key, Body=data)

    def remove(self) -> None:
        self.client.delete_object(Bucket=self.bucket, Key=self.key)


class StoreLock:
    """``with StoreLock(store, wait=60): ...`` — raises StoreLockedError if another live run holds it."""

    def __init__(self, store, *, wait: float = 0.0, purpose: str = "ingest", lease: float = LEASE_SECONDS) -> None:
        self.store = store
        self.wait = wait
        self.purpose = purpose
        self.lease = lease
        self.backend = _S3Backend(store.root, store.s3.client()) if store.is_remote else _LocalBackend(store.root)
        self.info: LockInfo | None = None
        self._stop = threading.Event()
        self._renewer: threading.Thread | None = None

    def _new_info(self) -> LockInfo:
        now = time.time()
        return LockInfo(socket.gethostname(), os.getpid(), secrets.token_hex(8), now, now + self.lease, self.purpose)

    def acquire(self) -> None:
        deadline = time.monotonic() + self.wait
        while True:
            info = self._new_info()
            if self.backend.create(info.dumps()):
                self.info = info
                self._start_renewing()
                return
            raw = self.backend.read()
            holder = LockInfo.parse(raw) if raw is not None else None
            if raw is None:
                continue  # released between our attempt and the read: try again at once
            if holder is None or holder.is_stale(time.time()):
                self._break(raw)
                continue
            if time.monotonic() >= deadline:
                raise StoreLockedError(
                    f"the store at {self.store.location!r} is in use by {holder.purpose or 'another run'} "
                    f"(pid {holder.pid} on {holder.host}, lease until {time.strftime('%H:%M:%S', time.localtime(holder.expires))}); "
                    "wait for it, or pass --wait SECONDS"
                )
            time.sleep(min(1.0, max(0.05, deadline - time.monotonic())))

    def _break(self, seen: bytes) -> None:
        # Remove only the lock we judged stale: if it changed meanwhile, its new holder is alive.
        if self.backend.read() == seen:
            self.backend.remove()

    def _start_renewing(self) -> None:
        def renew() -> None:
            while not self._stop.wait(self.lease / 3):
                if self.info is None:
                    return
                self.info = LockInfo(**{**self.info.__dict__, "expires": time.time() + self.lease})
                try:
                    self.backend.replace(self.info.dumps())
                except Exception:
                    pass  # a missed renewal only shortens the lease; the next one retries

        self._renewer = threading.Thread(target=renew, name="proflake-lock-renewer", daemon=True)
        self._renewer.start()

    def release(self) -> None:
        self._stop.set()
        if self._renewer is not None:
            self._renewer.join(timeout=5)
        if self.info is not None:
            raw = self.backend.read()
            current = LockInfo.parse(raw) if raw else None
            if current is not None and current.token == self.info.token:
                self.backend.remove()
        self.info = None

    def __enter__(self) -> StoreLock:
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()
