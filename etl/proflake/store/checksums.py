"""Content checksums of a store's data files, recorded at commit and verified by ``proflake check``.

A Delta log records each data file's size but nothing of its content: a Parquet file rewritten after its
commit, with the same size or another, would be read as if it were the committed one. So every commit
that adds files to a local table records, for each of them, its size and the BLAKE2b digest of its
bytes in ``_proflake/checksums/<table>.json`` (proflake's own metadata, beside the writer lock); files
the log no longer references are dropped from it at the same time. ``check`` compares every recorded
file with its bytes on disk. On S3 the listing's sizes are compared instead (etl/proflake/ingestion/check.py).
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
    """Path relative to the table -> [size, digest], for the files recorded so far (none on S3)."""
    if store.is_remote:
        return {}
    try:
        with open(_registry(store, name)) as f:
            return dict(json.load(f)["files"])
    except (OSError, ValueError, KeyError):
        return {}  # none recorded yet (a store written before checksums, or a lost registry)


def _log_files(store: Store, name: str) -> list[str]:
    actions = pa.RecordBatchReader.from_stream(store.delta(name).get_add_actions(flatten=True)).read_all()
    return [unquote(p) for p in actions["path"].to_pylist()]


def record(store: Store, name: str) -> None:
    """Record the checksum of every file of table ``name`` not recorded yet (those its last commit added),
    and forget the files its log no longer references. Call right after a commit, under the writer lock."""
    if store.is_remote:
        return
    known = recorded(store, name)
    root = store.table_uri(name)
    files = {}
    for path in _log_files(store, name):
        if path in known:
            files[path] = known[path]
        elif os.path.exists(full := os.path.join(root, path)):
            files[path] = [os.path.getsize(full), digest(full)]
    if files == known:
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
