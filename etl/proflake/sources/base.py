"""What every source (local folder, S3 prefix) offers the ingest: a listing and the bytes of each object."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True, slots=True)  # one per listed file
class SourceObject:
    uri: str  # absolute path or s3://bucket/key: what the store records as source_uri
    parts: tuple[str, ...]  # path components, for the layout parser and job ids
    size: int
    version: str  # ETag or modification time: a changed version means a changed file
    problem: str | None = None  # why the object must not be read (a symlink, an unsafe key), if so
    problem_kind: str | None = None  # the quarantine's error_kind for that problem


class Source(Protocol):
    uri: str

    @property
    def root_parts(self) -> tuple[str, ...]: ...

    def list(self) -> Iterator[SourceObject]:
        """Every object below the source, a folder's objects together: once it lists an object outside
        a folder, nothing more inside it (a depth-first walk does, and so does S3's key order). Ingest
        pairs a pyinstrument html with its json by that, holding only the folders being listed."""
        ...

    def read(self, obj: SourceObject) -> bytes: ...
