"""A local folder as a source of stats files."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

from etl.errors import SourceError
from etl.sources.base import SourceObject


class LocalSource:
    """Lists files below a folder and reads their bytes.

    Symbolic links are never followed: a link could lead outside the folder being ingested. Links to
    files are listed with a ``problem`` so a stats file behind one is reported, not silently skipped.
    """

    def __init__(self, root: str | os.PathLike) -> None:
        path = Path(root).expanduser()
        if not path.exists():
            raise SourceError(f"source folder {str(root)!r} does not exist; check the path")
        if not path.is_dir():
            raise SourceError(f"source {str(root)!r} is a file, not a folder; pass the folder that holds framework/")
        self.root = path.resolve()
        self.uri = str(self.root)

    @property
    def root_parts(self) -> tuple[str, ...]:
        return self.root.parts

    def list(self) -> Iterator[SourceObject]:
        def fail(error: OSError) -> None:
            raise SourceError(f"cannot list {error.filename!r}: {error.strerror}; check its permissions") from error

        for dirpath, dirnames, filenames in os.walk(self.root, onerror=fail, followlinks=False):
            dirnames.sort()
            for name in sorted(filenames):
                path = os.path.join(dirpath, name)
                try:
                    st = os.lstat(path)
                except OSError:
                    continue  # vanished between listing and stat
                if stat.S_ISLNK(st.st_mode):
                    target = os.readlink(path)
                    yield SourceObject(
                        uri=path,
                        parts=Path(path).parts,
                        size=st.st_size,
                        version=str(st.st_mtime_ns),
                        problem=f"is a symbolic link (to {target!r}); links are not followed",
                        problem_kind="symlink",
                    )
                    continue
                if not stat.S_ISREG(st.st_mode):
                    continue
                yield SourceObject(
                    uri=path,
                    parts=Path(path).parts,
                    size=st.st_size,
                    version=str(st.st_mtime_ns),
                )

    def read(self, obj: SourceObject) -> bytes:
        try:
            # O_NOFOLLOW: a file swapped for a link after listing is still not followed.
            fd = os.open(obj.uri, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
            with os.fdopen(fd, "rb") as f:
                return f.read()
        except OSError as e:
            raise SourceError(f"cannot read {obj.uri!r}: {e.strerror}") from e
