"""Every error a user can cause derives from ProflakeError, so the CLI can turn it into one clear line."""

from __future__ import annotations

from collections.abc import Iterable


class ProflakeError(Exception):
    """Root of proflake's errors; ``str(err)`` is a single sentence fit to show a user."""

    exit_code = 1


class UsageError(ProflakeError):
    """The caller asked for something that cannot be answered as asked (bad name, ambiguous job, ...)."""

    exit_code = 2


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
