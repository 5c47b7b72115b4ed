"""Content checksums of a store's data files, recorded at commit and verified by ``proflake check``.

A Delta log records each data file's size but nothing of its content: a Parquet file rewritten after its
commit, with the same size or another, would be read as if it were the committed one. So every commit
that adds files to a local table records, for each of them, its size and the BLAKE2b digest of its
bytes in ``_proflake/checksums/<table>.json`` (proflake's own metadata, beside the writer lock); files
the log no longer references are dropped from it at the same time. ``check`` compares every recorded
file with its bytes on disk.

On S3 reading every object again would cost the store's size in transfer, so a commit records each new
object's size and ETag (one HEAD each, or one listing of the table when a commit adds many; an ETag is
the MD5 of the bytes for a single-part upload; any rewrite gives the object a new one), in the same
registry, an object of the store; ``check`` compares them with one listing per table
(etl/proflake/ingestion/check.py). An object rewritten with exactly its old bytes keeps its ETag and is
rightly not reported.

The registry also notes the log version it reflects and that commit file's tag (its ETag on S3, size and
mtime on disk), so the next commit reads only the commits made since (one listing of the log from that
version on, and each new commit file) instead of opening the table: its cost no longer grows with the
log. A registry without that note, a log version missing or a commit file that is not the one noted (a
table set aside and created again) make it read the whole table's log through deltalake, as before.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
from typing import TYPE_CHECKING
from urllib.parse import unquote

import pyarrow as pa

if TYPE_CHECKING:
    from proflake.store.store import Store

FOLDER = "_proflake/checksums"


def digest(path: str) -> str:
    h = hashlib.blake2b(digest_size=16)
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()


def _registry(store: Store, name: str) -> str:
    return os.path.join(store.root, FOLDER, f"{name}.json")


def recorded(store: Store, name: str) -> dict[str, list]:
    """Path relative to the table -> [size, digest] (on S3: [size, ETag]), for the files recorded so far."""
    return _registry_read(store, name)[0]


def _registry_read(store: Store, name: str) -> tuple[dict[str, list], dict]:
    """The recorded files and the note of the log version they reflect ({} when there is none)."""
    try:
        if store.is_remote:
            data = json.loads(_s3_get(store, name))
        else:
            with open(_registry(store, name)) as f:
                data = json.load(f)
        note = data.get("log")
        return dict(data["files"]), note if isinstance(note, dict) else {}
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return {}, {}  # none recorded yet (a store written before checksums, or a lost registry)


def _s3_key(store: Store, name: str) -> tuple[str, str]:
    from proflake.sources.settings import split_s3_uri

    return split_s3_uri(f"{store.root}/{FOLDER}/{name}.json")


def _s3_get(store: Store, name: str) -> bytes:
    import botocore.exceptions

    bucket, key = _s3_key(store, name)
    assert store.s3 is not None  # a store on S3 has its S3 settings
    try:
        return bytes(store.s3.client().get_object(Bucket=bucket, Key=key)["Body"].read())
    except botocore.exceptions.ClientError as e:
        if e.response.get("Error", {}).get("Code") in ("NoSuchKey", "404"):
            raise KeyError(key) from None
        raise


def listed_objects(store: Store, name: str) -> dict[str, tuple[int, str]]:
    """Every object of table ``name`` on S3 by its key relative to the table: (size, ETag); one listing."""
    from proflake.sources.s3 import S3Source

    table_uri = store.table_uri(name)
    cut = len(table_uri) + 1
    return {obj.uri[cut:]: (obj.size, obj.version) for obj in S3Source(table_uri, store.s3).list()}


_HEAD_AT_MOST = 8  # a commit that adds more new objects than this has them listed (a page is 1,000)


def _new_objects(store: Store, name: str, paths: list[str]) -> dict[str, tuple[int, str]]:
    """(size, ETag) of each of ``paths`` (relative to table ``name`` on S3) that exists: one HEAD each,
    or one listing of the table for many."""
    if len(paths) > _HEAD_AT_MOST:
        listed = listed_objects(store, name)
        return {p: listed[p] for p in paths if p in listed}
    from proflake.sources.settings import client_error_code, explain_client_error, split_s3_uri

    assert store.s3 is not None  # a store on S3 has its S3 settings
    client = store.s3.client()
    found = {}
    for path in paths:
        uri = f"{store.table_uri(name)}/{path}"
        bucket, key = split_s3_uri(uri)
        try:
            head = client.head_object(Bucket=bucket, Key=key)
        except Exception as e:
            if client_error_code(e) in ("NoSuchKey", "404", "NotFound"):
                continue  # not there: not recorded (as a listing would not have found it)
            raise explain_client_error(e, uri) from e
        found[path] = (int(head["ContentLength"]), str(head.get("ETag", "")).strip('"'))
    return found


_COMMIT = re.compile(r"^(\d{20})\.json$")


class _Log:
    """The commit files of one table's Delta log, read directly: locally from its folder, on S3 with
    list/get requests. Only what ``record`` needs to follow the log from a version it noted."""

    def __init__(self, store: Store, name: str) -> None:
        self.store = store
        self.folder = f"{store.table_uri(name)}/_delta_log"

    def since(self, version: int) -> list[tuple[int, str]] | None:
        """(version, tag) of every commit file from ``version`` on, in order; None when they do not run
        on without a gap from ``version`` (a log cleaned up past it, or a table created again)."""
        found = sorted(self._list(version))
        if not found or [v for v, _ in found] != list(range(version, version + len(found))):
            return None
        return found

    def tag(self, version: int) -> str | None:
        """The tag of commit file ``version`` (None: it is not there)."""
        return dict(self._list(version, only=True)).get(version)

    def actions(self, version: int) -> list[dict]:
        """The actions of commit ``version``, one JSON object a line."""
        path = f"{self.folder}/{version:020d}.json"
        if self.store.is_remote:
            from proflake.sources.settings import explain_client_error, split_s3_uri

            bucket, key = split_s3_uri(path)
            assert self.store.s3 is not None
            try:
                text = self.store.s3.client().get_object(Bucket=bucket, Key=key)["Body"].read()
            except Exception as e:
                raise explain_client_error(e, path) from e
        else:
            with open(path, "rb") as f:
                text = f.read()
        return [json.loads(line) for line in text.splitlines() if line.strip()]

    def _list(self, version: int, *, only: bool = False) -> list[tuple[int, str]]:
        start = f"{version - 1:020d}.json" if version > 0 else ""  # a checkpoint of ``version`` sorts before it
        if not self.store.is_remote:
            try:
                names = [n for n in os.listdir(self.folder) if n > start and (not only or n == f"{version:020d}.json")]
            except FileNotFoundError:
                return []
            out = []
            for n in names:
                if (m := _COMMIT.match(n)) is not None:
                    with contextlib.suppress(FileNotFoundError):
                        st = os.stat(os.path.join(self.folder, n))
                        out.append((int(m.group(1)), f"{st.st_size}:{st.st_mtime_ns}"))
            return out
        from proflake.sources.settings import explain_client_error, split_s3_uri

        bucket, prefix = split_s3_uri(self.folder + "/")
        assert self.store.s3 is not None
        client = self.store.s3.client()
        out = []
        try:
            if only:
                head = client.head_object(Bucket=bucket, Key=f"{prefix}/{version:020d}.json")
                return [(version, str(head.get("ETag", "")).strip('"'))]
            after = {"StartAfter": f"{prefix}/{start}"} if start else {}
            pages = client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=f"{prefix}/", **after)
            for page in pages:
                for item in page.get("Contents", ()):
                    if (m := _COMMIT.match(item["Key"].rsplit("/", 1)[-1])) is not None:
                        out.append((int(m.group(1)), str(item.get("ETag", "")).strip('"')))
        except Exception as e:
            from proflake.sources.settings import client_error_code

            if only and client_error_code(e) in ("NoSuchKey", "404", "NotFound"):
                return []
            raise explain_client_error(e, self.folder) from e
        return out


def _log_files(store: Store, name: str) -> tuple[list[str], int]:
    """Every data file table ``name``'s log references now, and its version (deltalake reads the log)."""
    table = store.delta(name)
    actions = pa.RecordBatchReader.from_stream(table.get_add_actions(flatten=True)).read_all()
    return [unquote(p) for p in actions["path"].to_pylist()], table.version()


def _followed(log: _Log, noted: dict | None, live: set[str]) -> tuple[set[str], int, str] | None:
    """The data files the log references now, its version and that commit file's tag, from ``live`` (the
    files at the version ``noted``; None: nothing recorded, so every commit from the table's creation)
    and the commits made since; None when the log cannot be followed from there (the noted commit file
    is gone or another, a commit does not read, or one names a file by a full URI)."""
    try:
        version, tag = (int(noted["version"]), str(noted["tag"])) if noted is not None else (0, None)
    except (KeyError, TypeError, ValueError):
        return None
    commits = log.since(version)
    if commits is None or (tag is not None and commits[0][1] != tag):
        return None
    live = set(live)
    for newer, _ in commits[0 if noted is None else 1:]:
        try:
            actions = log.actions(newer)
        except ValueError:
            return None  # a commit that does not read: deltalake's reading names the damage
        for action in actions:
            for kind in ("remove", "add"):  # a commit's removals, then its additions
                path = (action.get(kind) or {}).get("path")
                if path is None:
                    continue
                if "://" in path or path.startswith("/"):
                    return None  # a file outside the table's folder: left to deltalake's reading
                (live.discard if kind == "remove" else live.add)(unquote(path))
    return live, commits[-1][0], commits[-1][1]


def record(store: Store, name: str) -> None:
    """Record the checksum of every file of table ``name`` not recorded yet (those its last commit added),
    and forget the files its log no longer references. Call right after a commit, under the writer lock."""
    known, noted = _registry_read(store, name)
    log = _Log(store, name)
    unrecorded = set(noted.get("unrecorded", [])) if noted else set()
    # No registry: the log is followed from the table's creation; a registry without a note (an older
    # release's) is not, since the files it holds may not be the log's.
    followed = _followed(log, noted or None, set(known) | unrecorded) if noted or not known else None
    if followed is not None:
        live, version, tag = followed
    else:
        paths, version = _log_files(store, name)
        live, tag = set(paths), log.tag(version) or ""
    new = sorted(p for p in live if p not in known)
    root = store.table_uri(name)
    files = {p: known[p] for p in live if p in known}
    if store.is_remote:
        files.update({p: list(v) for p, v in _new_objects(store, name, new).items()})
    else:
        for path in new:
            if os.path.exists(full := os.path.join(root, path)):
                files[path] = [os.path.getsize(full), digest(full)]
    unrecorded = {p for p in new if p not in files}
    if files == known and followed is not None and noted and unrecorded == set(noted.get("unrecorded", [])):
        return  # nothing to add or forget: the note's older version is followed again next time
    note = {"version": version, "tag": tag, "unrecorded": sorted(unrecorded)}
    if store.is_remote:
        bucket, key = _s3_key(store, name)
        assert store.s3 is not None
        body = json.dumps({"algorithm": "s3-etag", "files": files, "log": note}, sort_keys=True).encode()
        store.s3.client().put_object(Bucket=bucket, Key=key, Body=body)  # one PUT: all or nothing
        return
    target = _registry(store, name)
    os.makedirs(os.path.dirname(target), exist_ok=True)
    with open(target + ".tmp", "w") as f:
        json.dump({"algorithm": "blake2b-128", "files": files, "log": note}, f, sort_keys=True)
    os.replace(target + ".tmp", target)


def changed_files(store: Store, name: str, present: list[str]) -> list[tuple[str, str]]:
    """(uri, what changed) of each file in ``present`` (full paths of the table's files that exist) whose
    size or bytes differ from those recorded at its commit."""
    known = recorded(store, name)
    root = store.table_uri(name)
    out = []
    for uri in present:
        entry = known.get(os.path.relpath(uri, root))
        if entry is None:
            continue
        size = os.path.getsize(uri)
        if size != entry[0]:
            out.append((uri, f"changed after its commit (it has {size:,} bytes, {entry[0]:,} when committed)"))
        elif digest(uri) != entry[1]:
            out.append((uri, "changed after its commit (same size, other bytes: its BLAKE2b checksum differs)"))
    return out
