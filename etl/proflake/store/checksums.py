"""Content checksums of a store's data files, recorded at commit and verified by ``proflake check``.

A Delta log records each data file's size but nothing of its content: a Parquet file rewritten after its
commit, with the same size or another, would be read as if it were the committed one. So every commit
that adds files to a local table records, for each of them, its size and the BLAKE2b digest of its
bytes in ``_proflake/checksums/<table>.json`` (proflake's own metadata, beside the writer lock); files
the log no longer references are dropped from it at the same time. ``check`` compares every recorded
file with its bytes on disk.

On S3 reading every object again would cost the store's size in transfer, so a commit records each new
object's size and ETag from one listing of the table (an ETag is the MD5 of the bytes for a single-part
upload; any rewrite gives the object a new one), in the same registry, an object of the store; ``check``
compares them with one listing per table (etl/proflake/ingestion/check.py). An object rewritten with
exactly its old bytes keeps its ETag and is rightly not reported.
"""

from __future__ import annotations

import hashlib
import json
import os
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
    try:
        if store.is_remote:
            return dict(json.loads(_s3_get(store, name))["files"])
        with open(_registry(store, name)) as f:
            return dict(json.load(f)["files"])
    except (OSError, ValueError, KeyError):
        return {}  # none recorded yet (a store written before checksums, or a lost registry)


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


def _log_files(store: Store, name: str) -> list[str]:
    actions = pa.RecordBatchReader.from_stream(store.delta(name).get_add_actions(flatten=True)).read_all()
    return [unquote(p) for p in actions["path"].to_pylist()]


def record(store: Store, name: str) -> None:
    """Record the checksum of every file of table ``name`` not recorded yet (those its last commit added),
    and forget the files its log no longer references. Call right after a commit, under the writer lock."""
    known = recorded(store, name)
    root = store.table_uri(name)
    files = {}
    listed = listed_objects(store, name) if store.is_remote else {}
    for path in _log_files(store, name):
        if path in known:
            files[path] = known[path]
        elif store.is_remote:
            if path in listed:
                files[path] = list(listed[path])
        elif os.path.exists(full := os.path.join(root, path)):
            files[path] = [os.path.getsize(full), digest(full)]
    if files == known:
        return
    if store.is_remote:
        bucket, key = _s3_key(store, name)
        assert store.s3 is not None
        body = json.dumps({"algorithm": "s3-etag", "files": files}, sort_keys=True).encode()
        store.s3.client().put_object(Bucket=bucket, Key=key, Body=body)  # one PUT: all or nothing
        return
    target = _registry(store, name)
    os.makedirs(os.path.dirname(target), exist_ok=True)
    with open(target + ".tmp", "w") as f:
        json.dump({"algorithm": "blake2b-128", "files": files}, f, sort_keys=True)
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
