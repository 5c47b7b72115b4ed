"""The store lock's storage: compare-and-swap of one small object, on disk and on S3.

``_LocalBackend`` makes each operation atomic with an ``flock`` on a mutex file beside the lock;
``_S3Backend`` uses S3's conditional requests (If-None-Match / If-Match on the ETag). Both answer
``read`` with a ``Seen`` whose ``tag`` changes on every write and whose ``age`` is by the store's own
clock. The lease logic is proflake.store.lock's.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timezone
from email.utils import parsedate_to_datetime
from pathlib import Path

LOCK_NAME = "_proflake/writer.lock"
# Test hooks (PROFLAKE_LOCK_TEST_HOOKS="delay:break=2,mark=DIR,lose:create,fail:renew"): pauses at named
# points (announced by a file in DIR), lost answers, failing renewals, so tests can force each
# interleaving with real processes.
_HOOKS_ENV = "PROFLAKE_LOCK_TEST_HOOKS"


def _hooks() -> dict[str, str]:
    text = os.environ.get(_HOOKS_ENV, "")
    return {name: value for name, _, value in (item.partition("=") for item in text.split(",") if item)}


def _pause(point: str) -> None:
    hooks = _hooks()
    delay = hooks.get(f"delay:{point}")
    if delay:
        if hooks.get("mark"):  # tells the test the pause began: a file named after the point
            Path(hooks["mark"], point).touch()
        time.sleep(float(delay))


@dataclass(frozen=True)
class Seen:
    """The lock as one read saw it: its bytes, a tag that changes on every write, and its age by the
    store's own clock (None when the store gave no clock)."""

    data: bytes
    tag: str
    age: float | None
    modified: datetime | None


class _LocalBackend:
    """Compare-and-swap on a file, atomic under an flock of the mutex file beside it."""

    def __init__(self, root: str) -> None:
        self.path = Path(root) / LOCK_NAME
        self.mutex = self.path.with_name(self.path.name + ".mutex")

    @contextlib.contextmanager
    def atomically(self) -> Iterator[None]:
        import fcntl

        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.mutex, os.O_CREAT | os.O_RDWR, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)  # drops the flock

    def read(self) -> Seen | None:
        try:
            with open(self.path, "rb") as f:
                data, st = f.read(), os.fstat(f.fileno())
        except FileNotFoundError:
            return None
        modified = datetime.fromtimestamp(st.st_mtime, tz=timezone.utc)
        return Seen(data, f"{st.st_ino}:{st.st_mtime_ns}:{st.st_size}", time.time() - st.st_mtime, modified)

    def create(self, data: bytes) -> str | None:
        """Write the lock if there is none: its tag, or None when a lock is there."""
        with self.atomically():
            if self.path.exists():
                return None
            return self._write(data)

    def swap(self, seen_tag: str, data: bytes | None) -> str | None:
        """Replace (``data``) or remove (None) the lock if it is still the one seen: the tag it now has
        (removed: the tag it had), or None when it is not the one seen."""
        with self.atomically():
            current = self.read()
            if current is None or current.tag != seen_tag:
                return None
            if data is None:
                self.path.unlink()
                return seen_tag
            return self._write(data)

    def _write(self, data: bytes) -> str:
        tmp = self.path.with_suffix(f".{secrets.token_hex(4)}.tmp")
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.path)
        written = self.read()  # under the mutex: what we wrote (a local read, no request)
        assert written is not None
        return written.tag


class _S3Backend:
    """Compare-and-swap with S3's conditional writes."""

    def __init__(self, root: str, client) -> None:
        from proflake.sources.settings import split_s3_uri

        self.bucket, prefix = split_s3_uri(root)
        self.key = f"{prefix}/{LOCK_NAME}" if prefix else LOCK_NAME
        self.client = client

    @contextlib.contextmanager
    def atomically(self) -> Iterator[None]:
        yield  # each request is atomic on its own

    def _what(self) -> str:
        return f"the store lock s3://{self.bucket}/{self.key}"

    def read(self) -> Seen | None:
        from proflake.sources.settings import client_error_code, explain_client_error

        try:
            answer = self.client.get_object(Bucket=self.bucket, Key=self.key)
        except Exception as e:
            if client_error_code(e) in ("NoSuchKey", "404"):
                return None
            raise explain_client_error(e, self._what()) from e
        data = answer["Body"].read()
        modified = answer.get("LastModified")
        date = answer.get("ResponseMetadata", {}).get("HTTPHeaders", {}).get("date")
        age = None
        if modified is not None and date:
            # Both from S3's clock; one-second resolution, so a second of allowance.
            age = (parsedate_to_datetime(date) - modified).total_seconds() - 1.0
        return Seen(data, answer["ETag"], age, modified)

    def create(self, data: bytes) -> str | None:
        """Write the lock if there is none (If-None-Match): its ETag, or None when a lock is there."""
        return self._put(data, IfNoneMatch="*", hook="create")

    def swap(self, seen_tag: str, data: bytes | None) -> str | None:
        """Replace (``data``) or remove (None) the lock if it still has the ETag seen (If-Match): the ETag
        it now has (removed: the one it had), or None when it is not the one seen."""
        if data is not None:
            return self._put(data, IfMatch=seen_tag, hook="swap")
        from proflake.sources.settings import client_error_code, explain_client_error

        try:
            self.client.delete_object(Bucket=self.bucket, Key=self.key, IfMatch=seen_tag)
            return seen_tag
        except Exception as e:
            if client_error_code(e) in ("PreconditionFailed", "NoSuchKey", "404", "ConditionalRequestConflict"):
                return None
            raise explain_client_error(e, self._what()) from e

    def _put(self, data: bytes, *, hook: str, **condition: str) -> str | None:
        """The conditional PUT: the ETag of the lock as written (from the PUT's own answer: no read back),
        or None when the condition failed."""
        from proflake.sources.settings import client_error_code, explain_client_error

        try:
            answer = self.client.put_object(Bucket=self.bucket, Key=self.key, Body=data, **condition)
            if f"lose:{hook}" in _hooks():
                # Test hook: the write was applied but its answer lost (an HTTP 500), and the client
                # sends it again, as botocore's retries do: the retry's condition now fails.
                answer = self.client.put_object(Bucket=self.bucket, Key=self.key, Body=data, **condition)
            if answer.get("ETag"):
                return str(answer["ETag"])
            # A server that answers a PUT without its ETag: read it back (ours if it holds our bytes).
            current = self.read()
            return current.tag if current is not None and current.data == data else None
        except Exception as e:
            # Whatever the answer, the lock itself says whose it is now: our own bytes (our token and
            # renewal count) mean our write was applied.
            current = self._read_quietly()
            if current is not None and current.data == data:
                return current.tag
            if client_error_code(e) in ("PreconditionFailed", "ConditionalRequestConflict"):
                return None
            if "IfMatch" in condition and current is None and client_error_code(e) in ("NoSuchKey", "404"):
                return None  # replacing a lock that is gone: another run took it over and released it
            raise explain_client_error(e, self._what()) from e

    def _read_quietly(self) -> Seen | None:
        try:
            return self.read()
        except Exception:  # noqa: BLE001 (the original error is the one to report)
            return None
