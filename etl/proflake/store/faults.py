"""Library errors turned into proflake's one-sentence errors, at the edges (the CLI, the Python API).

DuckDB, deltalake (object_store) and the operating system raise their own exceptions; a user should see
one line naming the thing that failed and what to do, never a traceback and never a credential.
``explain(error)`` returns that ProflakeError, or None for an error that is not a library's (a bug,
which should keep its traceback).
"""

from __future__ import annotations

import errno
import re

from proflake.errors import ProflakeError, QueryLimitError, StaleSnapshotError, StoreError
from proflake.sources.settings import (
    S3Config,
    explain_client_error,
    explain_object_store_error,
    looks_like_object_store,
)

DISK_FULL = (errno.ENOSPC, errno.EDQUOT)


def explain(error: BaseException, where: str = "the store", config: S3Config | None = None) -> ProflakeError | None:
    """One sentence for a DuckDB, deltalake, object_store, boto3 or OS error; None for anything else.
    ``config``: the S3 settings in use, to ask a bucket's real region when a request went to the wrong one."""
    if isinstance(error, ProflakeError):
        return error
    module = type(error).__module__ or ""
    text = _first_line(error)
    if module.startswith(("duckdb", "_duckdb")):
        if looks_like_object_store(str(error)):
            # DuckDB reading a store's Parquet files through object_store (a registered dataset):
            # the S3 failure inside is the cause.
            return explain_object_store_error(str(error), where, config)
        return _duckdb(error, text)
    if module.startswith(("deltalake", "_internal")) or type(error).__name__ in ("DeltaError", "CommitFailedError"):
        return _delta(error, str(error), where, config)
    if module.startswith(("botocore", "boto3")) and isinstance(error, Exception):
        return explain_client_error(error, where)
    if isinstance(error, OSError):
        if error.errno in DISK_FULL or "No space left on device" in text:
            return StoreError(f"the disk holding {where} is full; free space (or move the store) and run the command again")
        if looks_like_object_store(str(error)):
            return explain_object_store_error(str(error), where, config)
        name = f" {error.filename!r}" if error.filename else ""
        return ProflakeError(f"cannot access{name or ' ' + where}: {error.strerror or text}")
    return None


def _duckdb(error: BaseException, text: str) -> ProflakeError:
    name = type(error).__name__
    if name == "OutOfMemoryException" or "Out of Memory" in text:
        return QueryLimitError(
            "the query needed more memory than its limit; raise it with --memory-limit (memory_limit= in Python), "
            "or select fewer rows or columns"
        )
    if name == "InterruptException" or "INTERRUPT" in text.upper():
        return QueryLimitError("the query was interrupted")
    if "No files found" in text or "No such file or directory" in text:
        return StaleSnapshotError(STALE)
    if any(sign in text for sign in _NOT_PARQUET):
        file = re.search(r"'([^']+\.parquet)'", text)
        named = f" ({file.group(1)})" if file else ""
        return StoreError(f"a data file of the store does not read as Parquet{named}: {DAMAGED}")
    return ProflakeError(f"DuckDB failed: {text}")


def is_vacuumed(error: BaseException | None) -> bool:
    """Whether ``error`` (or its cause) says a file the reader listed is gone: compaction's vacuum ran."""
    while error is not None:
        if isinstance(error, StaleSnapshotError):
            return True
        text = str(error)
        if "No files found" in text or ("No such file" in text and ".parquet" in text) or (
            "NoSuchKey" in text and ".parquet" in text
        ):
            return True
        error = error.__cause__
    return False


# What DuckDB says of a truncated or overwritten Parquet file.
_NOT_PARQUET = ("No magic bytes found", "too small to be a Parquet file", "TProtocolException", "Corrupt", "Invalid Parquet")
DAMAGED = (
    "the store is damaged; run 'proflake check' with the same --store to list the damage "
    "(and 'proflake check --repair' to rebuild what can be)"
)
# A file still missing after a reader reopened the store's current snapshot: not compaction, damage.
MISSING = f"a data file the store's current log names is missing: {DAMAGED}"

STALE = (
    "files this reader opened are gone: if 'proflake compact' (vacuum) ran since it opened the store, "
    "reconnect (Profiles.refresh(), or reopen the catalog) to read the compacted store; if not, the store "
    "is damaged: run 'proflake check' with the same --store"
)


def _delta(error: BaseException, full: str, where: str, config: S3Config | None) -> ProflakeError:
    text = _first_line(error)
    if "No space left on device" in full:
        return StoreError(f"the disk holding {where} is full; free space (or move the store) and run the command again")
    if looks_like_object_store(full):
        return explain_object_store_error(full, where, config)
    if type(error).__name__ == "CommitFailedError":
        return StoreError(
            f"a commit to {where} failed ({text}); nothing of this run is visible: run the command again"
        )
    if type(error).__name__ == "TableNotFoundError":
        return StoreError(f"a table of {where} is missing or damaged ({text}); re-run 'proflake ingest --full-refresh'")
    return StoreError(f"the Delta table in {where} cannot be read or written: {text}")


def _first_line(error: BaseException) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__


def log_damage(text: str) -> str | None:
    """What a deltalake error says is wrong with a table's transaction log, in words; None when the
    error is not about the log (a network fault, a permission: explained elsewhere)."""
    if "Expected contiguous commit files" in text:
        versions = re.findall(r"version: (\d+)", text)
        between = f" from version {versions[0]} to {versions[1]}" if len(versions) >= 2 else ""
        return f"its commit files jump{between}: the commits between are missing"
    if "Checkpoint" in text or "checkpoint" in text or "Parquet error" in text:  # the log's Parquet: checkpoints
        return "its checkpoint (in _delta_log) cannot be read"
    if "Json error" in text or "JSON" in text or "EOF while parsing" in text:
        return "a commit file of its log is not valid JSON (cut short or overwritten)"
    if text.startswith(("Kernel error", "Generic delta kernel error", "Invalid table version")):
        first = text.splitlines()[0].removeprefix("Kernel error: ")
        return f"its log is damaged ({first[:160]})"
    return None
