"""Every error a user can cause derives from ProflakeError, so the CLI can turn it into one clear line."""

from __future__ import annotations

from collections.abc import Iterable
from enum import IntEnum


class ExitCode(IntEnum):
    """What every proflake command exits with (meanings in EXIT_CODE_MEANINGS, rendered into
    docs/reference/cli.md)."""

    OK = 0
    FAILURE = 1
    USAGE = 2
    PARTIAL = 3
    BUSY = 4
    REGRESSION = 5
    LIMIT = 6
    NEWER_STORE = 7
    HANGUP = 129
    INTERRUPTED = 130
    TERMINATED = 143


EXIT_CODE_MEANINGS: dict[ExitCode, str] = {
    ExitCode.OK: "done",
    ExitCode.FAILURE: "nothing useful was done: bad store or source, S3 failure, damaged table, bad query",
    ExitCode.USAGE: "the command line itself was wrong (click uses 2 as well)",
    ExitCode.PARTIAL: "ingest landed, but some stats files were quarantined (`proflake errors` lists them)",
    ExitCode.BUSY: "another ingest or compaction holds the store's writer lock (see `--wait`), or this run lost it",
    ExitCode.REGRESSION: "`proflake diff --fail-on`: a significant slowdown at or over the threshold; "
    "`proflake trend --fail-on`: the newest job starts one",
    ExitCode.LIMIT: "a query ran past `--timeout` or `--memory-limit` and was stopped",
    ExitCode.NEWER_STORE: "the store was written by a later proflake (its schema version is newer than this release's): "
    "nothing was read or changed; upgrade proflake",
    ExitCode.HANGUP: "SIGHUP (a closed terminal): stopped as for SIGTERM",
    ExitCode.INTERRUPTED: "Ctrl-C (SIGINT): stopped cleanly, 128 + the signal's number as shells report it",
    ExitCode.TERMINATED: "SIGTERM (cron, Airflow, Kubernetes on timeout): stopped cleanly, lock released, "
    "workers stopped, nothing half-visible",
}


class ProflakeError(Exception):
    """Root of proflake's errors; ``str(err)`` is a single sentence fit to show a user."""

    exit_code: int = ExitCode.FAILURE


class UsageError(ProflakeError):
    """The caller asked for something that cannot be answered as asked (bad name, ambiguous job, ...)."""

    exit_code = ExitCode.USAGE


class UnknownNameError(UsageError, ValueError):
    def __init__(self, kind: str, value: str, valid: Iterable[str]) -> None:
        self.kind = kind
        self.value = value
        self.valid = tuple(valid)
        super().__init__(f"unknown {kind} {value!r}; expected one of: {', '.join(self.valid)}")


class SourceError(ProflakeError):
    """A source folder or bucket cannot be listed or read."""


class StoreError(ProflakeError):
    """The store is missing, unreadable or not a proflake store."""


class NewerStoreError(StoreError):
    """The store's schema version is newer than this release's: refused, never misread."""

    exit_code = ExitCode.NEWER_STORE


class DamagedLogError(StoreError):
    """A table's Delta transaction log cannot be read: a commit cut short or overwritten, commits
    missing between two versions, an unreadable checkpoint. ``table`` names it, ``reason`` says what."""

    def __init__(self, table: str, reason: str, message: str) -> None:
        self.table = table
        self.reason = reason
        super().__init__(message)


class ParseError(ProflakeError):
    """A stats file's contents are not a valid profile; ``kind`` names the failure for the error table."""

    def __init__(self, kind: str, message: str) -> None:
        self.kind = kind
        super().__init__(message)


class LayoutError(ParseError):
    """A path looks like a stats file but its directory name does not follow smdebug's naming."""

    def __init__(self, message: str) -> None:
        super().__init__("layout", message)


class QueryError(ProflakeError):
    """DuckDB rejected a query; the message carries DuckDB's own explanation."""


class QueryLimitError(QueryError):
    """A query ran past its time or memory limit and was stopped; the message names the option to raise."""

    exit_code = ExitCode.LIMIT


class StaleSnapshotError(ProflakeError):
    """A reader's files were removed by compaction's vacuum after it opened the store."""


class ReadOnlyError(QueryError):
    """A statement that would write or change state was refused before it ran."""


class StoreLockedError(ProflakeError):
    """Another ingest or compaction holds the store's writer lock."""

    exit_code = ExitCode.BUSY


class LockLostError(StoreLockedError):
    """A writer found, before a commit, that it no longer holds the store's lock: it stops uncommitted."""


class NestedCaptureError(UsageError):
    """An interval was opened while another one is still profiling the same thread."""


class Terminated(KeyboardInterrupt):
    """SIGTERM or SIGHUP arrived: unwinds like Ctrl-C (every ``finally`` and ``except KeyboardInterrupt``
    cleans up: the lock, the spool, the workers, a running query) and exits with 128 + the signal."""

    def __init__(self, signum: int, name: str) -> None:
        self.signum = signum
        self.name = name
        self.exit_code = 128 + signum
        super().__init__(f"{name} received")


class MissingFolderError(SourceError, AssertionError):
    """A folder given as a source does not exist. Also an AssertionError: smdebug asserted it, and
    notebooks written for smdebug catch that."""


class MissingExtraError(ProflakeError, ModuleNotFoundError):
    """A feature needs an optional dependency that is not installed; the message names the pip extra."""


class UnrecognisedFilesWarning(UserWarning):
    """An ingest skipped files below its source that fit no smdebug layout (the answers may miss them)."""
