"""Where stats files come from: a local folder or an S3 prefix, behind one small interface (``Source``)."""

from __future__ import annotations

from proflake.sources.base import Source, SourceObject
from proflake.sources.settings import S3Config, is_s3

__all__ = ["S3Config", "Source", "SourceObject", "open_source"]


def open_source(location: str, s3: S3Config | None = None) -> Source:
    """A source for a local path or an s3://bucket/prefix URI."""
    if is_s3(location):
        from proflake.sources.s3 import S3Source

        return S3Source(location, s3)
    from proflake.sources.local import LocalSource

    return LocalSource(location)
